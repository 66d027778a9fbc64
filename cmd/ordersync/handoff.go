package main

import (
	"context"
	"log/slog"
	"sync"

	"github.com/ordersync/ordersync/connectors"
	"github.com/ordersync/ordersync/internal/config"
	"github.com/ordersync/ordersync/internal/engine"
	"github.com/ordersync/ordersync/internal/handoff"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/order"
	"github.com/ordersync/ordersync/internal/store"
)

// worker carries operations out now, on behalf of a CLI command (resync, import):
// in this process, or handed to a running service on the embedded database
// (internal/handoff says when).
type worker struct {
	a   *app
	cfg *config.Config
	log *slog.Logger
	db  store.DB
}

// runKeys carries each key out and returns the operations as they ended (an
// operation still pending after an attempt that will be retried is returned so).
func (w worker) runKeys(ctx context.Context, keys []string) ([]journal.Operation, error) {
	// The requeues and attempts are the operator's, whether this process or the
	// running service makes them.
	ctx = withCLIActor(ctx)
	c := handoff.Config{Journal: w.db.Journal(), Database: w.db.String(), Role: w.a.role(),
		OneCTimeout: w.cfg.OneC.Timeout, Wake: wakeService, Stderr: w.a.stderr, Log: w.log,
		Engine: func() (handoff.Runner, func(), error) { return w.engine() }}
	c.Embedded = w.db.EmbeddedFile()
	return handoff.RunKeys(ctx, c, keys)
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
	// It delivers nothing: the routes say which events it writes.
	routes, err := deliveryRoutes(w.cfg)
	if err != nil {
		return nil, nil, err
	}
	skus, err := skuMapOf(w.cfg.Connectors)
	if err != nil {
		return nil, nil, usageError(err)
	}
	return newEngine(w.db, client, w.cfg, routes, w.fetchers(skus), w.log), closeClient, nil
}

// fetchers are the run's fetchers (Ozon postings, Bitrix24 deals), each built, and
// its credentials read, only when an order is to be fetched from it.
func (w worker) fetchers(skus *connectors.SKUMap) map[string]engine.Fetcher {
	fs := map[string]engine.Fetcher{}
	for name, key := range map[string]string{"ozon": "connectors.ozon.api_key", "bitrix24": "webhooks.bitrix24.rest_url"} {
		if (name == "ozon" && !w.cfg.Webhooks.Ozon.Enabled) || (name == "bitrix24" && !w.cfg.Webhooks.Bitrix24.Enabled) {
			continue
		}
		fs[name] = &lazyFetcher{build: func() (engine.Fetcher, error) {
			cfg, err := w.a.loadConfigReading(w.a.use().secrets.and(readKeys(key)))
			if err != nil {
				return nil, err
			}
			all, err := fetchers(cfg, skus, w.log)
			if err != nil {
				return nil, err
			}
			return all[name], nil
		}}
	}
	return fs
}

// lazyFetcher builds its fetcher at its first fetch; a fetcher that cannot be built
// (its credential unreadable) fails each fetch with the reason.
type lazyFetcher struct {
	build func() (engine.Fetcher, error)
	once  sync.Once
	f     engine.Fetcher
	err   error
}

func (l *lazyFetcher) Fetch(ctx context.Context, id string) (order.Order, error) {
	l.once.Do(func() { l.f, l.err = l.build() })
	if l.err != nil {
		return order.Order{}, l.err
	}
	return l.f.Fetch(ctx, id)
}
