package stock

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/shopspring/decimal"

	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/order"
)

// OrderLister is the part of journal.Store that ReadPending reads.
type OrderLister interface {
	List(ctx context.Context, f journal.Filter) ([]journal.Operation, error)
}

// Pending is what the orders registered in the journal and not yet created in 1C
// hold of a warehouse's stock: 1C's quantity does not count them yet, so the
// marketplaces are told that much less.
type Pending struct {
	// BySKU is the quantity of each 1C SKU, all sources together.
	BySKU map[string]decimal.Decimal
	// BySource is the same by the orders' source (kaspi, ozon, …), then by SKU.
	BySource map[string]map[string]decimal.Decimal
	// Unread counts the pending creates whose order is not known yet (a fetch
	// payload, a payload that does not decode): they hold nothing here.
	Unread int
}

// Of is the pending quantity of a SKU, zero when none.
func (p Pending) Of(sku string) decimal.Decimal {
	if q, ok := p.BySKU[sku]; ok {
		return q
	}
	return decimal.Zero
}

// Sources lists the sources that hold some of sku, sorted.
func (p Pending) Sources(sku string) []string {
	var out []string
	for src, m := range p.BySource {
		if _, ok := m[sku]; ok {
			out = append(out, src)
		}
	}
	sort.Strings(out)
	return out
}

func (p *Pending) add(source, sku string, q decimal.Decimal) {
	if p.BySKU == nil {
		p.BySKU = map[string]decimal.Decimal{}
		p.BySource = map[string]map[string]decimal.Decimal{}
	}
	p.BySKU[sku] = p.Of(sku).Add(q)
	m := p.BySource[source]
	if m == nil {
		m = map[string]decimal.Decimal{}
		p.BySource[source] = m
	}
	m[sku] = m[sku].Add(q)
}

// pendingPage is how many operations ReadPending reads a page.
const pendingPage = 500

// ReadPending sums the lines of the order.create operations still pending in the
// journal (waiting for an attempt, or in one) whose order is of warehouse, or of
// no warehouse (1C takes those from one it chooses, so each warehouse counts
// them). A create that is done is in 1C's quantity already; one failed for good
// never will be; one whose cancel is registered (and not failed) will not be made
// or is undone. warehouse "" counts the orders of every warehouse.
func ReadPending(ctx context.Context, js OrderLister, warehouse string) (Pending, error) {
	var p Pending
	f := journal.Filter{Status: journal.StatusPending, Kind: order.KindCreate, Limit: pendingPage}
	for {
		page, err := js.List(ctx, f)
		if err != nil {
			return Pending{}, fmt.Errorf("stock: pending orders: %w", err)
		}
		cancelled, err := cancelsOf(ctx, js, page)
		if err != nil {
			return Pending{}, err
		}
		for _, op := range page {
			if cancelled[order.CancelKeyOf(op.Key)] {
				continue
			}
			o, ok := orderOf(op)
			if !ok {
				p.Unread++
				continue
			}
			if warehouse != "" && o.Warehouse != "" && o.Warehouse != warehouse {
				continue
			}
			for _, l := range o.Lines {
				if l.SKU == "" || !l.Quantity.IsPositive() {
					continue
				}
				p.add(op.Source, l.SKU, l.Quantity)
			}
		}
		if len(page) < f.Limit {
			return p, nil
		}
		last := page[len(page)-1]
		f.After = &last
	}
}

// orderOf reads the order a create's payload holds; false for a fetch payload
// (the order is not known yet) and for one that does not decode.
func orderOf(op journal.Operation) (order.Order, bool) {
	if _, ok := order.ParseFetch(op.Payload); ok {
		return order.Order{}, false
	}
	var o order.Order
	if err := json.Unmarshal(op.Payload, &o); err != nil {
		return order.Order{}, false
	}
	return o, true
}

// cancelsOf returns the cancel keys of the creates in ops that have a cancel
// registered and not failed.
func cancelsOf(ctx context.Context, js OrderLister, ops []journal.Operation) (map[string]bool, error) {
	keys := make([]string, 0, len(ops))
	for _, op := range ops {
		if k := order.CancelKeyOf(op.Key); k != "" {
			keys = append(keys, k)
		}
	}
	out := map[string]bool{}
	if len(keys) == 0 {
		return out, nil
	}
	cs, err := js.List(ctx, journal.Filter{Kind: order.KindCancel, Keys: keys, Limit: len(keys)})
	if err != nil {
		return nil, fmt.Errorf("stock: pending orders' cancels: %w", err)
	}
	for _, c := range cs {
		if c.Status != journal.StatusFailed {
			out[c.Key] = true
		}
	}
	return out, nil
}
