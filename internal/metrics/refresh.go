package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/ordersync/ordersync/connectors"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/outbox"
)

// Sources are what the Refresher reads. A nil source is not read (its gauges stay
// absent).
type Sources struct {
	Journal journal.Counter
	Outbox  outbox.Store
	Cursors connectors.CursorStore
	// Connectors are the enabled connectors, by the name their cursors carry (kaspi,
	// ozon, wb): only they get ordersync_connector_* series, so that a connector
	// switched off never looks silent.
	Connectors []string
}

// Refresher sets the gauges kept in the database — ordersync_operations, the
// ordersync_outbox_* gauges and ordersync_connector_last_*_timestamp_seconds — from
// one round of queries each time it runs, on a timer: a scrape never queries the
// database. On PostgreSQL every replica exports the same numbers (take max() across
// instances, not sum()).
type Refresher struct {
	m   *Metrics
	src Sources
	log *slog.Logger

	mu sync.Mutex // one refresh at a time
	// Label sets seen so far: a group that empties is set to 0, not dropped, so an
	// alert on it resolves instead of losing its series.
	groups       map[[2]string]bool // kind, source
	destinations map[string]bool

	totals, next Totals
}

// Totals sum up the last refresh that succeeded.
type Totals struct {
	Pending, Failed int64         // operations, every kind and source
	OutboxPending   int64         // events not yet delivered (in flight included), every destination
	OutboxDead      int64         // dead events, every destination
	OutboxLag       time.Duration // the largest lag of any destination
	At              time.Time     // when; zero before the first
}

// Totals returns the sums of the last refresh that succeeded.
func (r *Refresher) Totals() Totals {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.totals
}

// NewRefresher returns a refresher of m's database gauges from src.
func NewRefresher(m *Metrics, src Sources, log *slog.Logger) *Refresher {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m.InitConnectors(src.Connectors...)
	return &Refresher{m: m, src: src, log: log, groups: map[[2]string]bool{}, destinations: map[string]bool{}}
}

// Run refreshes at once, then every interval until ctx ends. A failed refresh is
// logged (once until one succeeds again) and counted in
// ordersync_metrics_refresh_errors_total; the gauges keep their last values.
func (r *Refresher) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	failing := false
	for {
		err := r.Refresh(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil && !failing:
			r.log.WarnContext(ctx, "metrics: could not read the gauges kept in the database; they keep their last values", "err", err)
		case err == nil && failing:
			r.log.InfoContext(ctx, "metrics: the gauges kept in the database are read again")
		}
		failing = err != nil
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Refresh reads every source once and sets the gauges.
func (r *Refresher) Refresh(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.next = Totals{}
	var errs []error
	for _, step := range []struct {
		what string
		fn   func(context.Context) error
	}{
		{"operations", r.operations},
		{"outbox", r.outbox},
		{"connectors", r.connectors},
	} {
		if err := step.fn(ctx); err != nil {
			r.m.refreshErrors.WithLabelValues(step.what).Inc()
			errs = append(errs, fmt.Errorf("%s: %w", step.what, err))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	r.next.At = time.Now()
	r.totals = r.next
	r.m.refreshed.Set(float64(r.totals.At.UnixNano()) / 1e9)
	return nil
}

var statuses = []journal.Status{journal.StatusPending, journal.StatusDone, journal.StatusFailed}

func (r *Refresher) operations(ctx context.Context) error {
	if r.src.Journal == nil {
		return nil
	}
	cs, err := r.src.Journal.Counts(ctx)
	if err != nil {
		return err
	}
	n := map[[3]string]int64{}
	for _, c := range cs {
		r.groups[[2]string{c.Kind, c.Source}] = true
		n[[3]string{c.Kind, c.Source, string(c.Status)}] += c.Operations
		switch c.Status {
		case journal.StatusPending:
			r.next.Pending += c.Operations
		case journal.StatusFailed:
			r.next.Failed += c.Operations
		}
	}
	for g := range r.groups {
		for _, st := range statuses {
			r.m.operations.WithLabelValues(g[0], g[1], string(st)).Set(float64(n[[3]string{g[0], g[1], string(st)}]))
		}
	}
	return nil
}

func (r *Refresher) outbox(ctx context.Context) error {
	if r.src.Outbox == nil {
		return nil
	}
	sts, err := r.src.Outbox.Status(ctx, 1)
	if err != nil {
		return err
	}
	by := map[string]outbox.DestinationStatus{}
	for _, s := range sts {
		by[s.Destination] = s
		r.destinations[s.Destination] = true
		r.next.OutboxPending += int64(s.Pending + s.InFlight)
		r.next.OutboxDead += int64(s.Dead)
		r.next.OutboxLag = max(r.next.OutboxLag, s.Lag)
	}
	for d := range r.destinations {
		s := by[d] // zero when its events were all pruned
		r.m.outboxPending.WithLabelValues(d).Set(float64(s.Pending))
		r.m.outboxInFlight.WithLabelValues(d).Set(float64(s.InFlight))
		r.m.outboxDead.WithLabelValues(d).Set(float64(s.Dead))
		r.m.outboxLag.WithLabelValues(d).Set(s.Lag.Seconds())
	}
	return nil
}

func (r *Refresher) connectors(ctx context.Context) error {
	if r.src.Cursors == nil || len(r.src.Connectors) == 0 {
		return nil
	}
	cs, err := r.src.Cursors.Cursors(ctx)
	if err != nil {
		return err
	}
	for _, name := range r.src.Connectors {
		i := slices.IndexFunc(cs, func(c connectors.Cursor) bool { return c.Connector == name })
		var c connectors.Cursor // never polled yet: 0
		if i >= 0 {
			c = cs[i]
		}
		r.m.connectorLastSuccess.WithLabelValues(name).Set(unix(c.LastSuccessAt))
		r.m.connectorLastPoll.WithLabelValues(name).Set(unix(c.LastPollAt))
	}
	return nil
}

func unix(t *time.Time) float64 {
	if t == nil || t.IsZero() {
		return 0
	}
	return float64(t.UnixNano()) / 1e9
}
