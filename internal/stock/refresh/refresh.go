// Package refresh reads a warehouse's stock from 1C again soon after orders of it
// are registered (stock.refresh_after_order), so that the marketplaces hear of a
// sale before the next scheduled slot. It watches the journal rather than the
// paths that register orders (pollers, webhooks, the command line, the inbox):
// twice per window it lists the order.create operations registered lately, and
// for each warehouse they name it registers one snapshot operation (schedule
// stock.Refresh), carried out and published as any other: the engine reads 1C,
// the stock relay publishes in the marketplace's lane at its rate, subtracting the
// reserves and the orders not yet in 1C. However many orders come in one look,
// each warehouse is read once. A refresh is named after the newest order it was
// taken for (stock:refresh:<warehouse>:<its registration time, to the
// millisecond>): replicas that saw the same orders register the same key, and the
// journal keeps one, while an order registered after a refresh was taken always
// makes another.
package refresh

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/order"
	"github.com/ordersync/ordersync/internal/stock"
	"github.com/ordersync/ordersync/internal/stock/scheduler"
)

// Actor is the journal actor of the snapshots a refresh registers.
const Actor = "refresh"

// Config of a Refresher.
type Config struct {
	// Within is stock.refresh_after_order: an order's warehouse is read again and
	// published within it (the publish itself aside, which the marketplace's
	// rate may hold back). The journal is looked at every Period.
	Within time.Duration
	// Warehouses are the warehouses that are published somewhere: an order of one
	// of them refreshes it; an order of no warehouse (1C chooses), or one not
	// fetched yet, refreshes them all. An order of another warehouse, none.
	Warehouses []string
	// PublishTo is where a warehouse's refresh is published (the marketplaces
	// whose schedules or maps name it); none: the warehouse is not refreshed.
	PublishTo func(warehouse string) []string
	// Location labels the snapshots' slots (stock.timezone).
	Location *time.Location
	// Wake tells the engine that an operation is due (nil: it polls).
	Wake   func()
	Logger *slog.Logger
	// Now is the journal's clock (the store's DB.Now): registration times are
	// compared with it.
	Now func() time.Time
}

// Refresher watches the journal for orders and registers the refreshes.
type Refresher struct {
	js  journal.Store
	cfg Config
	log *slog.Logger

	mu    sync.Mutex
	seen  map[string]time.Time // create key → when it was registered
	since time.Time            // orders registered before it were there at start
}

// New returns a refresher over js. cfg.Within must be greater than 0.
func New(js journal.Store, cfg Config) *Refresher {
	if cfg.Within <= 0 {
		panic("refresh: Within must be greater than 0")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Location == nil {
		cfg.Location = time.UTC
	}
	if cfg.PublishTo == nil {
		cfg.PublishTo = func(string) []string { return nil }
	}
	return &Refresher{js: js, cfg: cfg, log: cfg.Logger, seen: map[string]time.Time{}}
}

// Period is how often the journal is looked at: half the window, to the second,
// and at most maxPeriod, so that orders a few seconds apart are each published
// (two orders apart by more than a look lower the stock one after the other, not
// both at once). A look that finds no new order reads nothing of 1C.
func (r *Refresher) Period() time.Duration {
	return min(max(r.cfg.Within/2, time.Second), maxPeriod).Truncate(time.Second)
}

// maxPeriod bounds the time between two looks at the journal.
const maxPeriod = 5 * time.Second

// Run looks at the journal every Period until ctx ends; the orders registered
// before it started are not its business (the schedules' slots cover them). It
// returns nil when ctx ends.
func (r *Refresher) Run(ctx context.Context) error {
	r.mu.Lock()
	if r.since.IsZero() {
		r.since = r.cfg.Now()
	}
	r.mu.Unlock()
	t := time.NewTicker(r.Period())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if _, err := r.Look(ctx); err != nil && ctx.Err() == nil {
			r.log.Error("stock: refreshing after orders failed", "err", err)
		}
	}
}

// lookPage is how many creates Look reads a page.
const lookPage = 500

// Look lists the order.create operations registered since the last look (or, the
// first time, in the last window) and registers one refresh of each warehouse
// they name. It returns the keys of the refreshes it registered or found
// registered (another replica's of the same period).
func (r *Refresher) Look(ctx context.Context) ([]string, error) {
	now := r.cfg.Now()
	r.mu.Lock()
	since := r.since
	r.mu.Unlock()
	// Back one window and a period beyond the last look: an operation committed a
	// little after its created_at (a long transaction) is still found; those seen
	// already are skipped by key.
	from := now.Add(-r.cfg.Within - r.Period())
	if !since.IsZero() && since.After(from) {
		from = since
	}
	f := journal.Filter{Kind: order.KindCreate, CreatedFrom: from, Limit: lookPage}
	whs := map[string]time.Time{} // warehouse → its newest order's registration
	var fresh []string
	for {
		page, err := r.js.List(ctx, f)
		if err != nil {
			return nil, fmt.Errorf("stock refresh: listing orders: %w", err)
		}
		r.mu.Lock()
		for _, op := range page {
			if _, ok := r.seen[op.Key]; ok {
				continue
			}
			r.seen[op.Key] = op.CreatedAt
			fresh = append(fresh, op.Key)
			for _, wh := range r.warehousesOf(op) {
				if op.CreatedAt.After(whs[wh]) {
					whs[wh] = op.CreatedAt
				}
			}
		}
		r.mu.Unlock()
		if len(page) < f.Limit {
			break
		}
		last := page[len(page)-1]
		f.After = &last
	}
	r.forget(now)
	if len(whs) == 0 {
		return nil, nil
	}
	ctx = journal.WithActor(ctx, Actor)
	var keys []string
	var errs []error
	for _, wh := range r.cfg.Warehouses {
		newest, ok := whs[wh]
		if !ok {
			continue
		}
		slot := newest.Truncate(time.Millisecond)
		p := stock.Payload{Schedule: stock.Refresh, Warehouse: wh, Slot: slot.UTC(), Label: Label(slot, r.cfg.Location),
			Publish: r.cfg.PublishTo(wh), Until: slot.Add(r.cfg.Within).UTC()}
		reg, err := scheduler.Register(ctx, r.js, p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		keys = append(keys, reg.Operation.Key)
		if reg.Outcome == journal.Registered {
			r.log.Info("stock refresh registered", "key", reg.Operation.Key, "orders", len(fresh))
		}
		if _, err := scheduler.Supersede(ctx, r.js, p); err != nil {
			errs = append(errs, err)
		}
	}
	if len(keys) > 0 && r.cfg.Wake != nil {
		r.cfg.Wake()
	}
	return keys, errors.Join(errs...)
}

// Label is how a refresh's slot is written in its key: local time in loc, to the
// millisecond.
func Label(slot time.Time, loc *time.Location) string {
	return slot.In(loc).Format("2006-01-02T15:04:05.000")
}

// warehousesOf are the warehouses an order refreshes: its own if it is
// published somewhere, every one when it names none or is not fetched yet.
func (r *Refresher) warehousesOf(op journal.Operation) []string {
	var wh string
	if _, fetch := order.ParseFetch(op.Payload); !fetch {
		var o struct {
			Warehouse string `json:"warehouse"`
		}
		if err := json.Unmarshal(op.Payload, &o); err == nil {
			wh = o.Warehouse
		}
	}
	var out []string
	for _, w := range r.cfg.Warehouses {
		if (wh == "" || w == wh) && len(r.cfg.PublishTo(w)) > 0 {
			out = append(out, w)
		}
	}
	return out
}

// forget drops the keys registered before any later look could list them again.
func (r *Refresher) forget(now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	horizon := now.Add(-2*r.cfg.Within - 2*r.Period())
	for k, at := range r.seen {
		if at.Before(horizon) {
			delete(r.seen, k)
		}
	}
}

// Seen lists the create keys the refresher has looked at and still remembers,
// sorted (for tests and the status).
func (r *Refresher) Seen() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, 0, len(r.seen))
	for k := range r.seen {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
