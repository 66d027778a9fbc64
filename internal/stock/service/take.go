package service

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/stock"
	"github.com/ordersync/ordersync/internal/stock/scheduler"
)

// TakeRequest asks for a manual snapshot of each of Warehouses, now.
type TakeRequest struct {
	// Warehouses are 1C warehouse codes: none empty, none with a ':'.
	Warehouses []string
	// Schedule, when set, publishes every snapshot to its marketplaces; nil: each to
	// the marketplaces that map its warehouse (Config.PublishTo).
	Schedule *scheduler.Schedule
	// Wait is how long to wait for the publishes to finish; 0 does not wait.
	Wait time.Duration
}

// Taken is one warehouse's manual snapshot, as Take leaves it.
type Taken struct {
	Key       string          `json:"key"`
	Warehouse string          `json:"warehouse"`
	Status    string          `json:"status"`
	Items     int             `json:"items"`
	Warnings  []string        `json:"warnings"`
	LastError string          `json:"last_error,omitempty"`
	Published []stock.Publish `json:"published"`
	// Pending names the marketplaces whose publish had not finished when Take
	// stopped waiting.
	Pending []string `json:"pending,omitempty"`
	Feed    string   `json:"feed,omitempty"` // Kaspi: served from the feed
	// Note says why a done snapshot was published nowhere.
	Note string `json:"note,omitempty"`
}

// Done reports whether the snapshot was taken and stored.
func (t Taken) Done() bool { return t.Status == string(journal.StatusDone) }

// TakeResult is what Take did.
type TakeResult struct {
	Snapshots []Taken // in the order of the request's warehouses
	// Foreground is true when Take delivered the publishing events itself (no
	// service runs): a publish still pending stays in the outbox for the next
	// relay. False: a running service's relay goes on with it.
	Foreground bool
}

// Take takes a manual snapshot of each warehouse now (key
// stock:manual:<warehouse>:<time>), has it run (Config.Run), and waits up to
// req.Wait for the publishes of those done, delivering them itself when no service
// does (Config.Relay). What it registers carries ctx's actor (journal.WithActor).
// A snapshot that failed is in the result with its error, not an error of Take.
func (s *Service) Take(ctx context.Context, req TakeRequest) (TakeResult, error) {
	whs := req.Warehouses
	if len(whs) == 0 {
		return TakeResult{}, errors.New("stock snapshot: no warehouse")
	}
	for _, wh := range whs {
		if strings.ContainsAny(wh, ":") || wh == "" {
			return TakeResult{}, fmt.Errorf("stock snapshot: %q is not a warehouse code (it must not be empty or contain ':')", wh)
		}
	}
	publishFor := s.cfg.PublishTo
	if sc := req.Schedule; sc != nil {
		publishFor = func(string) []string { return slices.Clone(sc.Publish) }
	}
	now, err := s.manualTime(ctx, whs)
	if err != nil {
		return TakeResult{}, err
	}
	label := stock.ManualLabel(now, s.cfg.Location)
	var keys []string
	for _, wh := range whs {
		p := stock.Payload{Schedule: stock.Manual, Warehouse: wh, Slot: now.UTC(), Label: label, Publish: publishFor(wh)}
		reg, err := scheduler.Register(ctx, s.cfg.Journal, p)
		if err != nil {
			return TakeResult{}, err
		}
		if reg.Outcome == journal.Conflicted {
			return TakeResult{}, fmt.Errorf("stock snapshot: %s was taken meanwhile by another command, for other marketplaces: run this one again", reg.Operation.Key)
		}
		keys = append(keys, reg.Operation.Key)
	}
	ops, err := s.cfg.Run(ctx, keys)
	if err != nil {
		return TakeResult{}, fmt.Errorf("stock snapshot: %w", err)
	}
	outs := make([]Taken, len(ops))
	for i, op := range ops {
		outs[i] = Taken{Key: op.Key, Warehouse: whs[i], Status: string(op.Status), LastError: op.LastError,
			Warnings: []string{}, Published: []stock.Publish{}}
		if op.Status != journal.StatusDone {
			continue
		}
		snap, err := s.cfg.Stock.Snapshot(ctx, op.Key)
		if err != nil {
			return TakeResult{}, err
		}
		outs[i].Items, outs[i].Warnings = snap.ItemCount, snap.Warnings
		if len(publishFor(whs[i])) == 0 {
			outs[i].Note = "stored, published nowhere: no marketplace maps warehouse " + whs[i] +
				" (connectors.ozon.stock_warehouses, connectors.wildberries.stock_warehouses, connectors.kaspi.stores)"
			if req.Schedule != nil {
				outs[i].Note = fmt.Sprintf("stored, published nowhere: schedule %s publishes to no marketplace", req.Schedule.Name)
			}
		}
		for _, mp := range publishFor(whs[i]) {
			if !stock.Pushed(mp) {
				outs[i].Feed = "served in the Kaspi feed from now on"
			}
		}
	}
	foreground, err := s.awaitPublishes(ctx, outs, publishFor, req.Wait)
	if err != nil {
		return TakeResult{}, err
	}
	return TakeResult{Snapshots: outs, Foreground: foreground}, nil
}

// manualTime is the time of a manual snapshot: now, to the second, as its key
// (stock:manual:<warehouse>:<time>) and slot say it, so that a lookup by the
// printed time finds it. When a snapshot of one of the warehouses was already taken
// in this second, its key is taken: a new snapshot in the same second would be
// answered by the stored one (1C not asked again) and recorded as a conflict. It
// waits for the next second instead.
func (s *Service) manualTime(ctx context.Context, whs []string) (time.Time, error) {
	for {
		now := s.cfg.Now().Truncate(time.Second)
		taken := false
		for _, wh := range whs {
			_, err := s.cfg.Journal.Get(ctx, stock.Key(stock.Manual, wh, stock.ManualLabel(now, s.cfg.Location)))
			if err == nil {
				taken = true
				break
			}
			if !errors.Is(err, journal.ErrNotFound) {
				return time.Time{}, err
			}
		}
		if !taken {
			return now, nil
		}
		select {
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-time.After(now.Add(time.Second).Sub(s.cfg.Now())):
		}
	}
}

// awaitPublishes waits up to wait for the publishes of the done snapshots to the
// marketplaces sent stock, delivering their events itself (a relay round at a time)
// unless a running service does, and fills in each snapshot's Published and
// Pending. It reports whether it delivered them itself.
func (s *Service) awaitPublishes(ctx context.Context, outs []Taken, publishFor func(string) []string, wait time.Duration) (bool, error) {
	want := map[string][]string{} // snapshot key → marketplaces still to publish
	for _, o := range outs {
		if !o.Done() {
			continue
		}
		for _, mp := range publishFor(o.Warehouse) {
			if stock.Pushed(mp) {
				want[o.Key] = append(want[o.Key], mp)
			}
		}
	}
	if len(want) == 0 {
		return false, nil
	}
	var relay Relay
	if s.cfg.Relay != nil {
		r, err := s.cfg.Relay()
		if err != nil {
			return false, err
		}
		relay = r
	}
	deadline := s.cfg.Now().Add(wait)
	for delay := 50 * time.Millisecond; ; delay = min(2*delay, time.Second) {
		left := 0
		for i := range outs {
			o := &outs[i]
			o.Published, o.Pending = o.Published[:0], nil
			for _, mp := range want[o.Key] {
				ps, err := s.cfg.Stock.Publishes(ctx, stock.PublishFilter{Marketplace: mp, Warehouse: o.Warehouse, Limit: 20})
				if err != nil {
					return false, err
				}
				i := slices.IndexFunc(ps, func(p stock.Publish) bool { return p.SnapshotKey == o.Key && p.FinishedAt != nil })
				if i < 0 {
					o.Pending = append(o.Pending, mp)
					left++
					continue
				}
				o.Published = append(o.Published, ps[i])
			}
		}
		if left == 0 || s.cfg.Now().After(deadline) || ctx.Err() != nil {
			return relay != nil, nil
		}
		if relay != nil {
			n, err := relay.RunOnce(ctx)
			if err != nil {
				return false, fmt.Errorf("stock snapshot: publishing: %w", err)
			}
			if n > 0 {
				delay = 50 * time.Millisecond
				continue
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(delay):
		}
	}
}
