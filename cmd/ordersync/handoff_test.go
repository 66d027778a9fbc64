package main

import (
	"testing"
	"time"

	"github.com/ordersync/ordersync/internal/journal"
)

// TestHandedOffSettled: a hand-off waits for an attempt newer than the ones it saw,
// and for the operation row that records it; a requeued operation whose old
// attempt finished long ago is not an outcome.
func TestHandedOffSettled(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	done := func(n int) journal.Attempt {
		f := t0.Add(time.Duration(n) * time.Second)
		return journal.Attempt{Attempt: n, StartedAt: f.Add(-time.Millisecond), FinishedAt: &f}
	}
	open := journal.Attempt{Attempt: 2, StartedAt: t0.Add(3 * time.Second)}
	detail := func(status journal.Status, attempts int, history ...journal.Attempt) journal.Detail {
		return journal.Detail{Operation: journal.Operation{Status: status, Attempts: attempts}, History: history}
	}
	failedOnce := detail(journal.StatusFailed, 1, done(1))
	for _, c := range []struct {
		name      string
		prev, now journal.Detail
		want      bool
	}{
		{"requeued, not claimed yet", failedOnce, detail(journal.StatusPending, 1, done(1)), false},
		{"claimed, call in flight", failedOnce, detail(journal.StatusPending, 1, done(1), open), false},
		{"attempt row closed, operation row not yet read with it", failedOnce, detail(journal.StatusPending, 1, done(1), done(2)), false},
		{"new attempt done", failedOnce, detail(journal.StatusDone, 2, done(1), done(2)), true},
		{"new attempt failed again", failedOnce, detail(journal.StatusFailed, 2, done(1), done(2)), true},
		{"new attempt scheduled a retry", failedOnce, detail(journal.StatusPending, 2, done(1), done(2)), true},
		{"fresh operation, first attempt", detail(journal.StatusPending, 0), detail(journal.StatusFailed, 1, done(1)), true},
		{"already done", detail(journal.StatusDone, 1, done(1)), detail(journal.StatusDone, 1, done(1)), true},
	} {
		if got := handedOffSettled(c.prev, c.now); got != c.want {
			t.Errorf("%s: settled %v, want %v", c.name, got, c.want)
		}
	}
}
