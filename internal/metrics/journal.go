package metrics

import (
	"context"
	"sync"

	"github.com/ordersync/ordersync/connectors"
	"github.com/ordersync/ordersync/internal/journal"
)

// Journal wraps s so that every claim it gives out counts its attempt's outcome
// into ordersync_attempts_total{kind,outcome}: done, retry or failed when Finish
// records the verdict, interrupted when the claim is released without one (the
// journal marks that attempt interrupted at its next claim). Everything else is s's.
func (m *Metrics) Journal(s journal.Store) journal.Store { return &countedJournal{Store: s, m: m} }

type countedJournal struct {
	journal.Store
	m *Metrics
}

func (j *countedJournal) ClaimDue(ctx context.Context, worker string) (journal.Claim, error) {
	c, err := j.Store.ClaimDue(ctx, worker)
	if err != nil {
		return c, err
	}
	return &countedClaim{Claim: c, m: j.m}, nil
}

func (j *countedJournal) ClaimKey(ctx context.Context, key, worker string) (journal.Claim, error) {
	c, err := j.Store.ClaimKey(ctx, key, worker)
	if err != nil {
		return c, err
	}
	return &countedClaim{Claim: c, m: j.m}, nil
}

type countedClaim struct {
	journal.Claim
	m *Metrics

	mu      sync.Mutex
	counted bool
}

func (c *countedClaim) Finish(ctx context.Context, f journal.Finish) error {
	err := c.Claim.Finish(ctx, f)
	if err != nil {
		return err // the attempt stays open: counted as interrupted at Release
	}
	outcome := string(journal.OutcomeFailed)
	switch f.Status {
	case journal.StatusDone:
		outcome = string(journal.OutcomeDone)
	case journal.StatusPending:
		outcome = string(journal.OutcomeRetry)
	}
	c.count(outcome)
	return nil
}

func (c *countedClaim) Release(ctx context.Context) error {
	err := c.Claim.Release(ctx)
	c.count(string(journal.OutcomeInterrupted))
	return err
}

// count counts the attempt once: Release after Finish does nothing.
func (c *countedClaim) count(outcome string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.counted {
		return
	}
	c.counted = true
	c.m.attempts.WithLabelValues(c.Claim.Operation().Kind, outcome).Inc()
}

// Cursors wraps s so that each poll saved with an error counts into
// ordersync_connector_errors_total{connector}, unless stopping reports true (a poll
// cut short by a stop is saved too, and is not the marketplace's error).
func (m *Metrics) Cursors(s connectors.CursorStore, stopping func() bool) connectors.CursorStore {
	return &countedCursors{CursorStore: s, m: m, stopping: stopping}
}

type countedCursors struct {
	connectors.CursorStore
	m        *Metrics
	stopping func() bool
}

func (s *countedCursors) SaveCursor(ctx context.Context, c connectors.Cursor) error {
	err := s.CursorStore.SaveCursor(ctx, c)
	// A failed poll keeps the last success and records the error; a successful one
	// moves the last success to the poll's time and clears the error.
	failed := c.LastError != "" && c.LastPollAt != nil && (c.LastSuccessAt == nil || c.LastSuccessAt.Before(*c.LastPollAt))
	if err == nil && failed && (s.stopping == nil || !s.stopping()) {
		s.m.connectorErrors.WithLabelValues(c.Connector).Inc()
	}
	return err
}

// InitConnectors makes ordersync_connector_errors_total start at 0 for each named
// connector, so that rate() sees its first error.
func (m *Metrics) InitConnectors(names ...string) {
	for _, n := range names {
		m.connectorErrors.WithLabelValues(n)
	}
}
