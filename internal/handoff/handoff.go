// Package handoff owns how a CLI command (resync, order import, order cancel, a
// stock snapshot) has operations carried out now, whichever process may work the
// database:
//
//   - on PostgreSQL, in this process: row locks let it work beside a running service;
//   - on an embedded database with a service (`ordersync run`) running, by handing
//     the operations to that service (requeued, then a signal) and waiting for their
//     outcome, since one process works the file;
//   - on an embedded database with no service, in this process, holding the run lock
//     for as long as it works. Another CLI command holding it (doing its own work) is
//     not a service: this one waits for it to finish, then does its own work.
//
// The command gives it the journal, how to wake the service and how to build an
// engine for its own work (Config); it prints nothing but the waits and hand-offs.
package handoff

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/ordersync/ordersync/internal/engine"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/store/sqlite"
)

// Journal is what a hand-off reads and requeues.
type Journal interface {
	// Show reads an operation and its attempts in one snapshot.
	Show(ctx context.Context, key string) (journal.Detail, error)
	Requeue(ctx context.Context, key string) (journal.Operation, error)
}

// Runner carries one operation out in this process (an *engine.Engine).
type Runner interface {
	RunKey(ctx context.Context, key string) (journal.Operation, error)
}

// Config is what RunKeys needs of the command.
type Config struct {
	Journal Journal
	// Database names the database in messages (`database …`).
	Database string
	// Embedded is the embedded database's file, "" for PostgreSQL.
	Embedded string
	// Role is the name this command takes the embedded database's run lock under.
	Role string
	// OneCTimeout is onec.timeout: it bounds how long a hand-off waits for the
	// service, and a command for another one holding the run lock.
	OneCTimeout time.Duration
	// Wake tells the service of pid that there is work.
	Wake func(pid int) error
	// Engine builds an engine for this command's own work, and the func that ends
	// what it opened (the 1C sessions of its client). Called only when this process
	// works the operations.
	Engine func() (Runner, func(), error)
	// Stderr is where the waits and hand-offs are said. io.Discard: a wait for the
	// run lock is logged instead (resync --status: its stderr is the progress bar's).
	Stderr io.Writer
	Log    *slog.Logger
}

// RunKeys carries each key out and returns the operations as they ended (an
// operation still pending after an attempt that will be retried is returned so).
// ctx carries the actor of the requeues and attempts, whether this process or the
// running service makes them: a requeue records it as the trigger of the service's
// next attempt.
func RunKeys(ctx context.Context, c Config, keys []string) ([]journal.Operation, error) {
	if pid, ok := serviceRunning(c.Embedded); ok {
		return c.handOff(ctx, pid, keys)
	}
	if c.Embedded != "" {
		lock, service, err := c.runLock(ctx)
		if err != nil {
			return nil, err
		}
		if lock == nil { // a service started meanwhile
			return c.handOff(ctx, service, keys)
		}
		defer lock.Release()
	}
	eng, closeEngine, err := c.Engine()
	if err != nil {
		return nil, err
	}
	defer closeEngine()
	ops := make([]journal.Operation, 0, len(keys))
	for _, key := range keys {
		op, err := eng.RunKey(ctx, key)
		if err != nil {
			return ops, fmt.Errorf("%s: %w", key, err)
		}
		ops = append(ops, op)
	}
	return ops, nil
}

// serviceRunning reports the pid of an `ordersync run` working the embedded
// database at path ("" for PostgreSQL: none).
func serviceRunning(path string) (int, bool) {
	if path == "" {
		return 0, false
	}
	return sqlite.LockHolder(path)
}

// runLock takes the embedded database's run lock under this command's name, for its
// own work. When a service holds it, no lock is returned but the service's pid: the
// work is handed to it. Another CLI command holding it (or a holder that cannot be
// told) is waited for, saying so on stderr, for at most Wait.
func (c Config) runLock(ctx context.Context) (*sqlite.RunLock, int, error) {
	bound := Wait(c.OneCTimeout)
	deadline := time.Now().Add(bound)
	var waitingFor sqlite.Holder
	announced := false
	for delay := 10 * time.Millisecond; ; delay = min(2*delay, 200*time.Millisecond) {
		lock, err := sqlite.AcquireRunLockAs(c.Embedded, c.Role)
		var locked *sqlite.LockedError
		if !errors.As(err, &locked) {
			return lock, 0, err
		}
		h := locked.Holder
		if h.IsService() {
			return nil, h.PID, nil
		}
		if !announced || h != waitingFor {
			msg := fmt.Sprintf("waiting for %s to finish with %s (at most %s); then this command does its own work",
				h, c.Database, bound)
			if c.Stderr == io.Discard {
				c.Log.Info(msg)
			} else {
				fmt.Fprintln(c.Stderr, msg)
			}
			waitingFor, announced = h, true
		}
		if time.Now().After(deadline) {
			return nil, 0, fmt.Errorf("%s still works on %s after %s: the operations stay pending; "+
				"run this command again once it is done, or start `ordersync run`", h, c.Database, bound)
		}
		select {
		case <-ctx.Done():
			return nil, 0, ctx.Err()
		case <-time.After(delay):
		}
	}
}

// Wait bounds how long a hand-off waits for the service, and a CLI command for
// another one holding an embedded database's run lock: two call budgets of 1C at
// onec.timeout and 10s, enough for a command working a few operations against a
// slow 1C.
func Wait(oneCTimeout time.Duration) time.Duration {
	return 2*engine.CallBudget(oneCTimeout) + 10*time.Second
}

// handOff requeues the keys, wakes the service and waits until each has had an
// attempt that ended (done, failed, or a retry scheduled). An attempt counts when
// its number is above the last one recorded before the hand-off and the operation
// row carries it; both are read in one snapshot (Show), so a row read before the
// service finished can never be paired with a history read after.
func (c Config) handOff(ctx context.Context, pid int, keys []string) ([]journal.Operation, error) {
	store := c.Journal
	before := map[string]journal.Detail{}
	for _, key := range keys {
		d, err := store.Show(ctx, key)
		if err != nil {
			return nil, err
		}
		before[key] = d
		if d.Status != journal.StatusDone {
			if _, err := store.Requeue(ctx, key); err != nil && !errors.Is(err, journal.ErrNotPending) {
				return nil, err
			}
		}
	}
	if err := c.Wake(pid); err != nil {
		return nil, fmt.Errorf("wake the running service (pid %d): %w", pid, err)
	}
	fmt.Fprintf(c.Stderr, "handed %d operation(s) to the running service (pid %d); waiting for the outcome\n", len(keys), pid)
	deadline := time.Now().Add(Wait(c.OneCTimeout))
	ops := make([]journal.Operation, 0, len(keys))
	for _, key := range keys {
		for {
			d, err := store.Show(ctx, key)
			if err != nil {
				return ops, err
			}
			if settled(before[key], d) {
				ops = append(ops, d.Operation)
				break
			}
			if time.Now().After(deadline) {
				return ops, fmt.Errorf("%s: the running service (pid %d) has not finished an attempt yet; see `ordersync journal show %s`", key, pid, key)
			}
			select {
			case <-ctx.Done():
				return ops, ctx.Err()
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return ops, nil
}

// settled tells whether now, read after a hand-off, shows the outcome of an attempt
// that had not finished when prev was read: a done operation was left alone;
// otherwise an attempt newer than the last finished one prev shows must have
// finished and be the one the operation row records. An attempt prev shows open
// counts: the service may have claimed the operation (a cancel just registered)
// before the hand-off first looked, and that attempt's end is the outcome.
func settled(prev, now journal.Detail) bool {
	if prev.Status == journal.StatusDone {
		return now.Status == journal.StatusDone
	}
	last := 0
	for _, a := range prev.History {
		if a.FinishedAt != nil {
			last = max(last, a.Attempt)
		}
	}
	for _, a := range now.History {
		if a.Attempt > last && a.FinishedAt != nil && now.Attempts >= a.Attempt {
			return true
		}
	}
	return false
}
