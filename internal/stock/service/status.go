package service

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/ordersync/ordersync/internal/stock"
)

// Status is where stock stands: each schedule's slots, each marketplace's last
// publish, what the Kaspi feed serves, and the items not published.
type Status struct {
	Schedules []ScheduleStatus  `json:"schedules"`
	Publishes []stock.Publish   `json:"publishes"`
	Kaspi     []KaspiStatus     `json:"kaspi,omitempty"`
	Problems  []stock.ItemState `json:"problems"`
}

// ScheduleStatus is one schedule's snapshots of one warehouse.
type ScheduleStatus struct {
	Name      string     `json:"name"`
	Cron      string     `json:"cron"`
	Warehouse string     `json:"warehouse"`
	Last      string     `json:"last_slot,omitempty"` // label of the latest stored snapshot
	LastAt    *time.Time `json:"last_at,omitempty"`
	Next      time.Time  `json:"next_slot"`
	Pending   int        `json:"pending"`
	// Failed is the newest failed snapshot: its key and error.
	Failed string `json:"last_failure,omitempty"`
}

// KaspiStatus is the snapshot the Kaspi feed serves for one store.
type KaspiStatus struct {
	Warehouse string `json:"warehouse"`
	Store     string `json:"store"`
	Snapshot  string `json:"snapshot"`
}

// Status reads the stock status: every schedule and warehouse (its latest stored
// snapshot, its next slot, how many of its snapshots are pending and its newest
// failure, however many operations the journal holds), the newest publish of each
// marketplace and warehouse, the snapshot the Kaspi feed serves for each store, and
// at most problems of the items not published, newest first (0: every one).
func (s *Service) Status(ctx context.Context, problems int) (Status, error) {
	st := s.cfg.Stock
	out := Status{Schedules: []ScheduleStatus{}}
	now := s.cfg.Now()
	for _, sc := range s.cfg.Schedules {
		for _, wh := range sc.Warehouses {
			row := ScheduleStatus{Name: sc.Name, Cron: sc.Spec.String(), Warehouse: wh, Next: sc.Spec.Next(now)}
			ss, err := st.Snapshots(ctx, stock.Filter{Warehouse: wh, Schedule: sc.Name, Limit: 1})
			if err != nil {
				return Status{}, err
			}
			if len(ss) > 0 {
				row.Last, row.LastAt = ss[0].Label, &ss[0].CreatedAt
			}
			runs, err := st.ScheduleRuns(ctx, sc.Name, wh)
			if err != nil {
				return Status{}, err
			}
			row.Pending = runs.Pending
			if runs.LastFailed != "" {
				row.Failed = runs.LastFailed + ": " + runs.LastError
			}
			out.Schedules = append(out.Schedules, row)
		}
	}
	var err error
	if out.Publishes, err = st.Publishes(ctx, stock.PublishFilter{Latest: true}); err != nil {
		return Status{}, err
	}
	whs := make([]string, 0, len(s.cfg.KaspiStores))
	for wh := range s.cfg.KaspiStores {
		whs = append(whs, wh)
	}
	slices.Sort(whs)
	for _, wh := range whs {
		k := KaspiStatus{Warehouse: wh, Store: s.cfg.KaspiStores[wh], Snapshot: "(none yet: the feed answers 503)"}
		if snap, err := st.Latest(ctx, wh, time.Time{}); err == nil {
			k.Snapshot = snap.Key
		} else if !errors.Is(err, stock.ErrNoSnapshot) {
			return Status{}, err
		}
		out.Kaspi = append(out.Kaspi, k)
	}
	if problems == 0 {
		problems = math.MaxInt32
	}
	if out.Problems, err = st.Problems(ctx, "", problems); err != nil {
		return Status{}, err
	}
	left, err := s.kaspiLeftOut(ctx, whs, problems-len(out.Problems))
	if err != nil {
		return Status{}, err
	}
	out.Problems = append(out.Problems, left...)
	return out, nil
}

// kaspiLeftOut are the items of the latest snapshot of each warehouse the Kaspi feed
// serves that the feed leaves out for want of a kaspi line in the SKU map, at most
// limit of them, as skipped items: the feed is fetched by Kaspi, so no publish
// records them.
func (s *Service) kaspiLeftOut(ctx context.Context, warehouses []string, limit int) ([]stock.ItemState, error) {
	if s.cfg.KaspiSKUs == nil || limit <= 0 {
		return nil, nil
	}
	var out []stock.ItemState
	for _, wh := range warehouses {
		snap, err := s.cfg.Stock.Latest(ctx, wh, time.Time{})
		if errors.Is(err, stock.ErrNoSnapshot) {
			continue
		}
		if err != nil {
			return nil, err
		}
		items, err := s.cfg.Stock.Items(ctx, snap.Key)
		if err != nil {
			return nil, err
		}
		for _, it := range items {
			if len(s.cfg.KaspiSKUs(it.SKU)) > 0 {
				continue
			}
			amount, warning := stock.Amount(it.Quantity, 0)
			out = append(out, stock.ItemState{Marketplace: stock.Kaspi, Warehouse: wh, SKU: it.SKU, Value: amount,
				Outcome: stock.Skipped, Warning: warning, SnapshotKey: snap.Key, UpdatedAt: snap.CreatedAt,
				Reason: fmt.Sprintf("no line for kaspi in connectors.sku_map (%s): add kaspi,<kaspi SKU>,%s; the Kaspi feed leaves it out",
					s.cfg.KaspiSKUMap, it.SKU)})
			if len(out) == limit {
				return out, nil
			}
		}
	}
	return out, nil
}
