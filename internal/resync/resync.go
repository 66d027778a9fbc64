// Package resync owns a bulk resync (`ordersync resync --status failed|pending
// [filters]`): which operations a journal filter selects, oldest first, and
// retrying them batch by batch — each batch made due now, then carried out by the
// command's runner (in its own process, or handed to a running service) — counting
// how they ended; and the progress bar a terminal shows meanwhile. The command reads
// the flags and prints the outcome.
package resync

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/ordersync/ordersync/internal/journal"
)

// listLimit is the page asked of the journal: every selected operation (a Filter's
// Limit 0 would mean the store's default of 100).
const listLimit = 1_000_000

// Journal is what a bulk resync lists and requeues.
type Journal interface {
	List(ctx context.Context, f journal.Filter) ([]journal.Operation, error)
	Requeue(ctx context.Context, key string) (journal.Operation, error)
}

// Select lists every operation f selects (its Limit is ignored), oldest first.
func Select(ctx context.Context, j Journal, f journal.Filter) ([]journal.Operation, error) {
	f.Limit = listLimit
	listed, err := j.List(ctx, f)
	if err != nil {
		return nil, err
	}
	// The journal lists the most recently updated first; retry the oldest first.
	var ops []journal.Operation
	for i := len(listed) - 1; i >= 0; i-- {
		if selects(f, listed[i]) {
			ops = append(ops, listed[i])
		}
	}
	return ops, nil
}

// selects applies the filter's last-error condition in this process too, so that a
// store that does not know Filter.ErrorContains yet can never widen the selection
// (a bulk resync must not retry more than it was asked to).
func selects(f journal.Filter, op journal.Operation) bool {
	if f.Status != "" && op.Status != f.Status {
		return false
	}
	return f.ErrorContains == "" || strings.Contains(strings.ToLower(op.LastError), strings.ToLower(f.ErrorContains))
}

// BatchSize is how many operations are made due and carried out together: as many
// as 1C is called for at once (onec.max_concurrency), so that a running service
// works a batch handed to it in one round, well inside the hand-off's deadline of
// two call budgets, and progress shows after every few operations.
func BatchSize(maxConcurrency int) int { return max(maxConcurrency, 1) }

// Config is what Run needs of the command.
type Config struct {
	Journal Journal
	// Run carries the keys out and returns the operations as they ended, those it
	// got to when it fails (handoff.RunKeys).
	Run func(ctx context.Context, keys []string) ([]journal.Operation, error)
	// Batch is how many are requeued and run together (BatchSize).
	Batch int
	// Ended, when set, hears each operation as it ended, in order, with how many
	// have ended so far.
	Ended func(op journal.Operation, n int)
}

// Outcome is how a bulk resync went.
type Outcome struct {
	Retried, Done, StillFailing int
	// Operations are the ones retried, as they ended.
	Operations []journal.Operation
	// Err is why it stopped before the end, nil when it got there.
	Err error
}

// Run retries ops batch by batch: each batch is made due now, then carried out. It
// stops at the first error, which the Outcome carries with what was done before it.
func Run(ctx context.Context, c Config, ops []journal.Operation) Outcome {
	var out Outcome
	batchSize := max(c.Batch, 1)
	for start := 0; start < len(ops) && out.Err == nil; start += batchSize {
		batch := make([]string, 0, batchSize)
		for _, op := range ops[start:min(start+batchSize, len(ops))] {
			batch = append(batch, op.Key)
		}
		// Due now, batch by batch: a running service (or this process) takes them
		// up as they come, never all ten thousand at once.
		for _, key := range batch {
			if _, err := c.Journal.Requeue(ctx, key); err != nil && !errors.Is(err, journal.ErrNotPending) {
				out.Err = fmt.Errorf("requeue %s: %w", key, err)
				break
			}
		}
		if out.Err != nil {
			break
		}
		done, err := c.Run(ctx, batch)
		for _, op := range done {
			out.Retried++
			if op.Status == journal.StatusDone {
				out.Done++
			} else {
				out.StillFailing++
			}
			out.Operations = append(out.Operations, op)
			if c.Ended != nil {
				c.Ended(op, out.Retried)
			}
		}
		out.Err = err
	}
	return out
}
