package main

import (
	"context"
	"errors"
	"fmt"
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
//   - on an embedded database with a service running, by handing the operations to
//     that service (requeued, then a signal) and waiting for their outcome, since one
//     process works the file;
//   - on an embedded database with no service, in this process, holding the run lock
//     for as long as it works.
type worker struct {
	a   *app
	cfg *config.Config
	log *slog.Logger
	db  database
}

// runKeys carries each key out and returns the operations as they ended (an
// operation still pending after an attempt that will be retried is returned so).
func (w worker) runKeys(ctx context.Context, keys []string) ([]journal.Operation, error) {
	if pid, ok := serviceRunning(w.db); ok {
		return w.handOff(ctx, pid, keys)
	}
	if e := w.db.embedded(); e != nil {
		lock, err := sqlite.AcquireRunLock(e.Path())
		if errors.Is(err, sqlite.ErrLocked) {
			if pid, ok := serviceRunning(w.db); ok { // a service started meanwhile
				return w.handOff(ctx, pid, keys)
			}
		}
		if err != nil {
			return nil, err
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
