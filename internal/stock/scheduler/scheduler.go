// Package scheduler fires the stock schedules: at each slot it registers one
// snapshot operation per warehouse in the journal, under a key built from the
// schedule, the warehouse and the slot, so that every replica firing the same slot
// registers the same operation and the journal's unique key makes all but one a
// duplicate. A snapshot still pending when its schedule's next slot registers is
// failed as superseded: never two snapshots of one warehouse in flight.
package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/stock"
)

// Schedule is one entry of stock.schedules.
type Schedule struct {
	Name       string
	Spec       stock.Spec
	Warehouses []string
	Publish    []string
}

// Config of a Scheduler.
type Config struct {
	Schedules []Schedule
	// CatchUp registers, at start, each schedule's latest slot if it was missed
	// (stock.catch_up: latest).
	CatchUp bool
	// Wake tells the engine that an operation is due (nil: it polls).
	Wake func()
	// Stock and Retention: once an hour (and at start), snapshots stored longer
	// ago than Retention are pruned from Stock (stock.retention). Nil Stock: never.
	Stock     stock.Store
	Retention time.Duration
	Logger    *slog.Logger
	Now       func() time.Time
}

// Scheduler fires the schedules.
type Scheduler struct {
	js  journal.Store
	cfg Config
	log *slog.Logger

	mu         sync.Mutex
	registered int
}

// New returns a scheduler that registers its snapshots in js.
func New(js journal.Store, cfg Config) *Scheduler {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Scheduler{js: js, cfg: cfg, log: cfg.Logger}
}

// Registered counts the snapshot operations this scheduler registered (duplicates
// of another replica's not counted).
func (s *Scheduler) Registered() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.registered
}

// Run fires every schedule until ctx ends: first the catch-up, then each slot as
// it comes. It returns nil when ctx ends.
func (s *Scheduler) Run(ctx context.Context) error {
	if s.cfg.CatchUp {
		for _, sc := range s.cfg.Schedules {
			slot := sc.Spec.Floor(s.cfg.Now())
			if slot.IsZero() {
				continue
			}
			if err := s.Fire(ctx, sc, slot); err != nil && ctx.Err() == nil {
				s.log.Error("stock: catching up a missed slot failed", "schedule", sc.Name, "err", err)
			}
		}
	}
	var wg sync.WaitGroup
	if s.cfg.Stock != nil && s.cfg.Retention > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.pruneLoop(ctx)
		}()
	}
	for _, sc := range s.cfg.Schedules {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.loop(ctx, sc)
		}()
	}
	wg.Wait()
	return nil
}

func (s *Scheduler) loop(ctx context.Context, sc Schedule) {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	last := sc.Spec.Floor(s.cfg.Now())
	for {
		next := sc.Spec.Next(last)
		if next.IsZero() {
			s.log.Warn("stock: schedule has no further slot", "schedule", sc.Name, "cron", sc.Spec.String())
			return
		}
		t.Reset(next.Sub(s.cfg.Now()))
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		// A timer may fire a little early or, on a busy or suspended host, late:
		// the slot is the latest one that has begun, never one in the future.
		now := s.cfg.Now()
		if now.Before(next) {
			last = sc.Spec.Floor(next.Add(-time.Nanosecond))
			continue
		}
		slot := sc.Spec.Floor(now)
		last = slot
		if err := s.Fire(ctx, sc, slot); err != nil && ctx.Err() == nil {
			s.log.Error("stock: registering a slot failed", "schedule", sc.Name, "slot", sc.Spec.Label(slot), "err", err)
		}
	}
}

// Fire registers the slot's snapshot of each of the schedule's warehouses and
// fails, as superseded, any older snapshot of theirs still pending.
func (s *Scheduler) Fire(ctx context.Context, sc Schedule, slot time.Time) error {
	// The snapshots it registers were triggered by the schedule, not by a person.
	ctx = journal.WithActor(ctx, Actor)
	var errs []error
	label := sc.Spec.Label(slot)
	until := sc.Spec.Next(slot)
	for _, wh := range sc.Warehouses {
		p := stock.Payload{Schedule: sc.Name, Warehouse: wh, Slot: slot.UTC(), Label: label, Publish: sc.Publish, Until: until.UTC()}
		reg, err := Register(ctx, s.js, p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if reg.Outcome == journal.Registered {
			s.mu.Lock()
			s.registered++
			s.mu.Unlock()
			s.log.Info("stock snapshot registered", "key", reg.Operation.Key)
		}
		if n, err := Supersede(ctx, s.js, p); err != nil {
			errs = append(errs, err)
		} else if n > 0 {
			s.log.Info("stock snapshots superseded", "schedule", sc.Name, "warehouse", wh, "by", label, "superseded", n)
		}
	}
	if s.cfg.Wake != nil {
		s.cfg.Wake()
	}
	return errors.Join(errs...)
}

// Actor is the journal actor of the snapshots a schedule registers.
const Actor = "schedule"

// Registrar is the part of journal.Store that Register uses.
type Registrar interface {
	Register(ctx context.Context, op journal.NewOperation) (journal.Registration, error)
}

// Register registers the snapshot operation of p (its key from the schedule, the
// warehouse and the label).
func Register(ctx context.Context, js Registrar, p stock.Payload) (journal.Registration, error) {
	if p.Publish == nil {
		p.Publish = []string{}
	}
	payload, err := json.Marshal(p)
	if err != nil {
		return journal.Registration{}, err
	}
	return js.Register(ctx, journal.NewOperation{
		Key:        stock.Key(p.Schedule, p.Warehouse, p.Label),
		Kind:       stock.KindSnapshot,
		Source:     stock.Source,
		ExternalID: p.Schedule + ":" + p.Warehouse,
		Payload:    payload,
	})
}

// supersedePage is how many pending snapshots Supersede reads a page.
const supersedePage = 500

// Supersede fails every pending snapshot of p's schedule and warehouse whose slot
// is older than p's, and returns how many it failed. A snapshot that a worker holds
// right now is left to finish.
func Supersede(ctx context.Context, js journal.Store, p stock.Payload) (int, error) {
	key := stock.Key(p.Schedule, p.Warehouse, p.Label)
	// Every pending snapshot, page by page, and those of this schedule and
	// warehouse with an older slot kept: however many are pending.
	var older []journal.Operation
	f := journal.Filter{Status: journal.StatusPending, Source: stock.Source, Kind: stock.KindSnapshot, Limit: supersedePage}
	for {
		page, err := js.List(ctx, f)
		if err != nil {
			return 0, err
		}
		for _, op := range page {
			if op.ExternalID != p.Schedule+":"+p.Warehouse || op.Key == key {
				continue
			}
			var old stock.Payload
			if json.Unmarshal(op.Payload, &old) == nil && old.Slot.Before(p.Slot) {
				older = append(older, op)
			}
		}
		if len(page) < f.Limit {
			break
		}
		last := page[len(page)-1]
		f.After = &last
	}
	n := 0
	for _, op := range older {
		l, err := js.Lock(ctx, op.Key)
		if errors.Is(err, journal.ErrBusy) || errors.Is(err, journal.ErrNotFound) {
			continue
		}
		if err != nil {
			return n, err
		}
		err = l.Fail(ctx, fmt.Sprintf("superseded by slot %s (%s): a newer snapshot of warehouse %s replaces it", p.Label, key, p.Warehouse))
		l.Release(ctx)
		switch {
		case err == nil:
			n++
		case errors.Is(err, journal.ErrNotPending):
		default:
			return n, err
		}
	}
	return n, nil
}

// pruneLoop deletes old snapshots at start and every hour, in batches.
func (s *Scheduler) pruneLoop(ctx context.Context) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n, err := s.Prune(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			s.log.Error("stock: pruning old snapshots failed", "err", err)
		case n > 0:
			s.log.Info("stock: old snapshots pruned", "deleted", n, "retention", s.cfg.Retention.String())
		}
		t.Reset(time.Hour)
	}
}

// Prune deletes the snapshots stored more than Retention ago, a batch at a time,
// and returns how many it deleted.
func (s *Scheduler) Prune(ctx context.Context) (int, error) {
	total := 0
	for {
		n, err := s.cfg.Stock.Prune(ctx, s.cfg.Now().Add(-s.cfg.Retention), 100)
		total += n
		if err != nil || n < 100 {
			return total, err
		}
	}
}
