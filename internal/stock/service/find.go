package service

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/ordersync/ordersync/internal/stock"
)

// ParseTime reads a time as the stock use cases take it: RFC 3339, or local time
// in stock.timezone to the minute or second, or a date (its end: the snapshot in
// force that day). The error is a *TimeError.
func (s *Service) ParseTime(text string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, text); err == nil {
		return t, nil
	}
	for _, layout := range []string{"2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02 15:04:05", "2006-01-02 15:04"} {
		if t, err := time.ParseInLocation(layout, text, s.cfg.Location); err == nil {
			return t, nil
		}
	}
	if t, err := time.ParseInLocation("2006-01-02", text, s.cfg.Location); err == nil {
		return t.AddDate(0, 0, 1).Add(-time.Nanosecond), nil
	}
	return time.Time{}, &TimeError{Text: text, Location: s.cfg.Location}
}

// Find finds a snapshot by its key (stock:…), or by a slot or time (ParseTime) in
// warehouse: the snapshot in force then. Warehouse "" is the one warehouse
// configured. The errors of a lookup that cannot be made or finds nothing are a
// *TimeError, a *WarehouseError and a *NotFoundError.
func (s *Service) Find(ctx context.Context, ref, warehouse string) (stock.Snapshot, error) {
	if strings.HasPrefix(ref, stock.Source+":") {
		snap, err := s.cfg.Stock.Snapshot(ctx, ref)
		if errors.Is(err, stock.ErrNoSnapshot) {
			return snap, &NotFoundError{Ref: ref}
		}
		return snap, err
	}
	t, err := s.ParseTime(ref)
	if err != nil {
		return stock.Snapshot{}, err
	}
	whs := s.Warehouses()
	if warehouse != "" {
		whs = []string{warehouse}
	}
	if len(whs) != 1 {
		return stock.Snapshot{}, &WarehouseError{Ref: ref, Warehouses: whs}
	}
	snap, err := s.cfg.Stock.Latest(ctx, whs[0], t)
	if errors.Is(err, stock.ErrNoSnapshot) {
		return snap, &NotFoundError{Ref: ref, Warehouse: whs[0]}
	}
	return snap, err
}

// InForce returns the snapshot in force at at (zero: the latest) of each warehouse
// that has one, in the order of warehouses.
func (s *Service) InForce(ctx context.Context, warehouses []string, at time.Time) ([]stock.Snapshot, error) {
	var snaps []stock.Snapshot
	for _, wh := range warehouses {
		snap, err := s.cfg.Stock.Latest(ctx, wh, at)
		if errors.Is(err, stock.ErrNoSnapshot) {
			continue
		}
		if err != nil {
			return nil, err
		}
		snaps = append(snaps, snap)
	}
	return snaps, nil
}

// Items returns the items of the snapshot under key, sorted by SKU.
func (s *Service) Items(ctx context.Context, key string) ([]stock.Item, error) {
	return s.cfg.Stock.Items(ctx, key)
}

// Change is one SKU that differs between two snapshots.
type Change struct {
	SKU       string `json:"sku"`
	Change    string `json:"change"` // added, removed, changed
	QuantityA string `json:"quantity_a,omitempty"`
	QuantityB string `json:"quantity_b,omitempty"`
	PriceA    string `json:"price_a,omitempty"`
	PriceB    string `json:"price_b,omitempty"`
}

// Diff is what changed from snapshot A to snapshot B.
type Diff struct {
	A, B    stock.Snapshot
	Changes []Change // by SKU; empty, not nil, when nothing changed
}

// Diff compares the snapshots refA and refB name (as Find reads them).
func (s *Service) Diff(ctx context.Context, refA, refB, warehouse string) (Diff, error) {
	var snaps [2]stock.Snapshot
	var items [2][]stock.Item
	for i, ref := range []string{refA, refB} {
		var err error
		if snaps[i], err = s.Find(ctx, ref, warehouse); err != nil {
			return Diff{}, err
		}
		if items[i], err = s.cfg.Stock.Items(ctx, snaps[i].Key); err != nil {
			return Diff{}, err
		}
	}
	return Diff{A: snaps[0], B: snaps[1], Changes: DiffItems(items[0], items[1])}, nil
}

// DiffItems compares two lists of items sorted by SKU: a SKU only in a is removed,
// only in b added, in both with another quantity or price changed.
func DiffItems(a, b []stock.Item) []Change {
	rows := []Change{}
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j == len(b) || (i < len(a) && a[i].SKU < b[j].SKU):
			rows = append(rows, Change{SKU: a[i].SKU, Change: "removed", QuantityA: a[i].Quantity.String(), PriceA: a[i].Price.String()})
			i++
		case i == len(a) || b[j].SKU < a[i].SKU:
			rows = append(rows, Change{SKU: b[j].SKU, Change: "added", QuantityB: b[j].Quantity.String(), PriceB: b[j].Price.String()})
			j++
		default:
			if !a[i].Quantity.Equal(b[j].Quantity) || !a[i].Price.Equal(b[j].Price) {
				rows = append(rows, Change{SKU: a[i].SKU, Change: "changed", QuantityA: a[i].Quantity.String(), QuantityB: b[j].Quantity.String(),
					PriceA: a[i].Price.String(), PriceB: b[j].Price.String()})
			}
			i, j = i+1, j+1
		}
	}
	return rows
}
