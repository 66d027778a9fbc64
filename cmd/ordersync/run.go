package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"time"

	"github.com/spf13/cobra"

	"github.com/ordersync/ordersync/connectors"
	"github.com/ordersync/ordersync/internal/onec"
	"github.com/ordersync/ordersync/internal/store/sqlite"
)

func (a *app) runCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "run",
		Short: "Run the service: carry out journal operations in 1C until stopped",
		Long: `run starts onec.max_concurrency workers that claim due operations from the journal
and find-or-create them in 1C. SIGTERM or SIGINT stops claiming, lets calls in
flight finish within worker.shutdown_timeout, and exits 0.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.run(cmd.Context())
		},
	}
}

func (a *app) run(ctx context.Context) error {
	cfg, err := a.loadConfig()
	if err != nil {
		return err
	}
	log, err := a.logger(cfg)
	if err != nil {
		return err
	}
	client, err := a.newClient(cfg, log)
	if err != nil {
		return err
	}
	markets, err := enabledConnectors(cfg, log)
	if err != nil {
		return err
	}
	skus, err := connectors.NewSKUMap(cfg.Connectors.SKUMap)
	if err != nil {
		return usageError(err)
	}
	out, err := newDelivery(cfg, publishers(markets))
	if err != nil {
		return err
	}
	db, err := a.openReadyDB(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer db.Close()
	if e := db.embedded(); e != nil {
		// One process works an embedded file: a second `run` refuses, naming the first.
		lock, err := sqlite.AcquireRunLock(e.Path())
		if err != nil {
			return err
		}
		defer lock.Release()
		log.InfoContext(ctx, "using the embedded SQLite database (set database.url for PostgreSQL)", "file", e.Path())
	}
	log.InfoContext(ctx, "ordersync starting", "version", version, "config", cfg.Source(),
		"database", db.String(), "onec_base_url", cfg.OneC.BaseURL, "max_concurrency", cfg.OneC.MaxConcurrency)

	pingCtx, cancel := context.WithTimeout(ctx, cfg.OneC.Timeout)
	if info, err := client.Ping(pingCtx); err != nil {
		// 1C may be down for a while; the engine retries. Say it loudly, carry on.
		log.ErrorContext(ctx, "1C does not answer the ping; operations wait and retry", "class", onec.ClassOf(err).String(), "err", err)
	} else {
		log.InfoContext(ctx, "1C answers", "service", info.Service, "contract", info.Version)
	}
	cancel()

	fs, err := fetchers(cfg, skus, log)
	if err != nil {
		return err
	}
	eng := newEngine(db, client, cfg, out.routes, fs, log)
	relay := out.relay(db, cfg, log)
	if err := eng.Start(ctx); err != nil {
		return err
	}
	if err := relay.Start(ctx); err != nil {
		eng.Stop()
		return err
	}
	srv, err := newServer(cfg, db, eng.Wake, log)
	if err != nil {
		eng.Stop()
		relay.Stop()
		return err
	}
	if srv != nil {
		if err := srv.Start(ctx); err != nil {
			eng.Stop()
			relay.Stop()
			return fmt.Errorf("http.listen: %w", err)
		}
		log.InfoContext(ctx, "webhooks listening", "address", listenURL(srv.Addr()))
	}
	pollers := newPollers(markets, db, skus, eng.Wake, log)
	for _, p := range pollers {
		if err := p.Start(ctx); err != nil {
			return err
		}
	}
	if len(markets) > 0 {
		log.InfoContext(ctx, "connectors polling", "connectors", connectorNames(markets))
	}
	// A CLI command that handed this service work (order import, resync beside it on
	// an embedded database) says so with a signal: claim at once.
	woken := make(chan os.Signal, 1)
	signal.Notify(woken, wakeSignal)
	defer signal.Stop(woken)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-woken:
				eng.Wake()
				relay.Wake()
			}
		}
	}()
	<-ctx.Done()
	if srv != nil {
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.HTTP.ShutdownTimeout)
		srv.Stop(stopCtx)
		cancel()
	}
	for _, p := range pollers {
		p.Stop()
	}
	log.Info("stop requested: finishing calls and deliveries in flight", "shutdown_timeout", cfg.Worker.ShutdownTimeout.String())
	start := time.Now()
	eng.Stop()
	relay.Stop()
	st, rs := eng.Stats(), relay.Stats()
	log.Info("ordersync stopped", "took", time.Since(start).Round(time.Millisecond).String(),
		"done", st.Done, "retried", st.Retried, "failed", st.Failed, "events_sent", rs.Sent, "events_dead", rs.Dead)
	return nil
}
