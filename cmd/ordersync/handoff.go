package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/ordersync/ordersync/connectors"
	"github.com/ordersync/ordersync/internal/config"
	"github.com/ordersync/ordersync/internal/engine"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/store/sqlite"
)

// worker carries operations out now, on behalf of a CLI command (resync, import):
//
//   - on PostgreSQL, in this process: row locks let it work beside a running service;
//   - on an embedded database with a service (`ordersync run`) running, by handing
//     the operations to that service (requeued, then a signal) and waiting for their
//     outcome, since one process works the file;
//   - on an embedded database with no service, in this process, holding the run lock
//     for as long as it works. Another CLI command holding it (doing its own work) is
//     not a service: this one waits for it to finish, then does its own work.
type worker struct {
	a   *app
	cfg *config.Config
	log *slog.Logger
	db  database
}

// runKeys carries each key out and returns the operations as they ended (an
// operation still pending after an attempt that will be retried is returned so).
func (w worker) runKeys(ctx context.Context, keys []string) ([]journal.Operation, error) {
	// The requeues and attempts are the operator's, whether this process or the
	// running service makes them: a requeue records its actor as the trigger of the
	// service's next attempt.
	ctx = withCLIActor(ctx)
	if pid, ok := serviceRunning(w.db); ok {
		return w.handOff(ctx, pid, keys)
	}
	if e := w.db.embedded(); e != nil {
		lock, service, err := w.runLock(ctx, e.Path())
		if err != nil {
			return nil, err
		}
		if lock == nil { // a service started meanwhile
			return w.handOff(ctx, service, keys)
		}
		defer lock.Release()
	}
	eng, closeClient, err := w.engine()
	if err != nil {
		return nil, err
	}
	defer closeClient()
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

// runLock takes the embedded database's run lock at path under this command's name,
// for its own work. When a service holds it, no lock is returned but the service's
// pid: the work is handed to it. Another CLI command holding it (or a holder that
// cannot be told) is waited for, saying so on stderr, for at most cliLockWait.
func (w worker) runLock(ctx context.Context, path string) (*sqlite.RunLock, int, error) {
	bound := cliLockWait(w.cfg)
	deadline := time.Now().Add(bound)
	var waitingFor sqlite.Holder
	announced := false
	for delay := 10 * time.Millisecond; ; delay = min(2*delay, 200*time.Millisecond) {
		lock, err := sqlite.AcquireRunLockAs(path, w.a.role())
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
				h, w.db, bound)
			if w.a.stderr == io.Discard { // resync --status: its stderr is the progress bar's
				w.log.Info(msg)
			} else {
				fmt.Fprintln(w.a.stderr, msg)
			}
			waitingFor, announced = h, true
		}
		if time.Now().After(deadline) {
			return nil, 0, fmt.Errorf("%s still works on %s after %s: the operations stay pending; "+
				"run this command again once it is done, or start `ordersync run`", h, w.db, bound)
		}
		select {
		case <-ctx.Done():
			return nil, 0, ctx.Err()
		case <-time.After(delay):
		}
	}
}

// cliLockWait bounds how long a CLI command waits for another one holding an
// embedded database's run lock: as long as a hand-off waits for the service, enough
// for a command working a few operations against a slow 1C.
func cliLockWait(cfg *config.Config) time.Duration {
	return 2*engine.CallBudget(cfg.OneC.Timeout) + 10*time.Second
}

// engine builds an engine for this command's own work, and the func that ends the
// 1C sessions its client opened (with onec.session_reuse they hold licences until
// 1C times them out otherwise).
func (w worker) engine() (*engine.Engine, func(), error) {
	client, err := w.a.newClient(w.cfg, w.log)
	if err != nil {
		return nil, nil, err
	}
	closeClient := func() {
		ctx, cancel := context.WithTimeout(context.Background(), w.cfg.OneC.Timeout)
		defer cancel()
		_ = client.Close(ctx)
	}
	markets, err := enabledConnectors(w.cfg, w.log)
	if err != nil {
		return nil, nil, err
	}
	out, err := newDelivery(w.cfg, publishers(markets))
	if err != nil {
		return nil, nil, err
	}
	skus, err := connectors.NewSKUMap(w.cfg.Connectors.SKUMap)
	if err != nil {
		return nil, nil, usageError(err)
	}
	fs, err := fetchers(w.cfg, skus, w.log)
	if err != nil {
		return nil, nil, err
	}
	return newEngine(w.db, client, w.cfg, out.routes, fs, w.log), closeClient, nil
}

// handOff requeues the keys, wakes the service and waits until each has had an
// attempt that ended (done, failed, or a retry scheduled). An attempt counts when
// its number is above the last one recorded before the hand-off and the operation
// row carries it; both are read in one snapshot (Show), so a row read before the
// service finished can never be paired with a history read after.
func (w worker) handOff(ctx context.Context, pid int, keys []string) ([]journal.Operation, error) {
	store := w.db.Journal()
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
	if err := wakeService(pid); err != nil {
		return nil, fmt.Errorf("wake the running service (pid %d): %w", pid, err)
	}
	fmt.Fprintf(w.a.stderr, "handed %d operation(s) to the running service (pid %d); waiting for the outcome\n", len(keys), pid)
	deadline := time.Now().Add(2*engine.CallBudget(w.cfg.OneC.Timeout) + 10*time.Second)
	ops := make([]journal.Operation, 0, len(keys))
	for _, key := range keys {
		for {
			d, err := store.Show(ctx, key)
			if err != nil {
				return ops, err
			}
			if handedOffSettled(before[key], d) {
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

// handedOffSettled tells whether now, read after a hand-off, shows the outcome of
// an attempt made since prev was read: a done operation was left alone; otherwise a
// newer attempt must have finished and be the one the operation row records.
func handedOffSettled(prev, now journal.Detail) bool {
	if prev.Status == journal.StatusDone {
		return now.Status == journal.StatusDone
	}
	last := 0
	if n := len(prev.History); n > 0 {
		last = prev.History[n-1].Attempt
	}
	for _, a := range now.History {
		if a.Attempt > last && a.FinishedAt != nil && now.Attempts >= a.Attempt {
			return true
		}
	}
	return false
}
