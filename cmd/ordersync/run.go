package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ordersync/ordersync/connectors/kaspi"
	"github.com/ordersync/ordersync/internal/onec"
	"github.com/ordersync/ordersync/internal/outbox"
	"github.com/ordersync/ordersync/internal/sdnotify"
	lifecycle "github.com/ordersync/ordersync/internal/service"
	"github.com/ordersync/ordersync/internal/stock/scheduler"
	"github.com/ordersync/ordersync/internal/store"
	"github.com/ordersync/ordersync/internal/store/postgres"
	"github.com/ordersync/ordersync/internal/store/sqlite"
)

func (a *app) runCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "run",
		Short: "Run the service: carry out journal operations in 1C until stopped",
		Long: `run starts onec.max_concurrency workers that claim due operations from the journal
and find-or-create them in 1C. SIGTERM or SIGINT stops claiming, lets calls in
flight finish within worker.shutdown_timeout, and exits 0 — also when it comes
during start-up.

On an embedded (SQLite) database one process works the file: a second run exits 1
naming the first one's pid, and a run started while a CLI command (order import,
resync) carries out its own operations waits for that command, then starts.

Webhooks and feeds are served as soon as the database is ready: 1C's start-up
ping goes on in the background, and operations wait and retry while 1C does not
answer.

Under systemd (Type=notify, NOTIFY_SOCKET set) run reports READY=1 once the
schema is checked and the listeners are up, keeps STATUS= current, sends
WATCHDOG=1 every half of WatchdogSec= only while its engine and relay loops go
round and the database answers a ping, and STOPPING=1 on SIGTERM.`,
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
	gogc, memLimit := applyMemoryDefaults()
	client, err := a.newClient(cfg, log)
	if err != nil {
		return err
	}
	markets, err := enabledConnectors(cfg, log)
	if err != nil {
		return err
	}
	skus, err := skuMapOf(cfg.Connectors)
	if err != nil {
		return usageError(err)
	}
	out, err := newDelivery(cfg, publishers(markets))
	if err != nil {
		return err
	}
	sm := a.serviceManager(log)
	// STOPPING=1 as soon as a stop is requested, during start-up too, and sent
	// before run returns.
	stopping := func() { sm.MarkStopping("stopping: finishing calls and deliveries in flight") }
	stopAfter := context.AfterFunc(ctx, stopping)
	defer func() {
		if !stopAfter() && ctx.Err() != nil {
			stopping() // the AfterFunc's goroutine may not have sent it yet
		}
	}()
	var db store.DB
	// Connecting, migrating an embedded file, checking the schema: the start
	// timeout is extended while it runs.
	err = sm.ExtendWhile("starting: opening the database", func() (err error) {
		db, err = a.openReadyDB(ctx, cfg, log)
		return err
	})
	if err != nil {
		return stoppedDuringStartUp(ctx, log, err)
	}
	defer db.Close()
	if file := db.EmbeddedFile(); file != "" {
		// One process works an embedded file: a second `run` refuses, naming the
		// first; a CLI command doing its own work is waited for.
		lock, err := sqlite.WaitRunLock(ctx, file, log)
		if err != nil {
			return stoppedDuringStartUp(ctx, log, err)
		}
		if lock == nil {
			log.Info("stop requested while waiting for the run lock: nothing started")
			return nil
		}
		defer lock.Release()
		log.InfoContext(ctx, "using the embedded SQLite database (set database.url for PostgreSQL)", "file", file)
	}
	log.InfoContext(ctx, "ordersync starting", "version", version, "config", cfg.Source(),
		"database", db.String(), "onec_base_url", cfg.OneC.BaseURL, "max_concurrency", cfg.OneC.MaxConcurrency,
		"gogc", gogc, "gomemlimit_bytes", memLimit)
	if pg, ok := db.(*postgres.DB); ok {
		c := pg.Connections()
		log.InfoContext(ctx, "database connections", "max_connections", c.Total, "main_pool", c.Main,
			"claims_and_locks", c.Claims, "inbox_writers", c.Writers, "listen", c.Listen)
	}

	// The services, started in a list's order and stopped in the reverse one
	// (lifecycle.Run): the admin listener first, so that it stops last — /metrics and
	// /readyz answer while the work in flight drains. A failed start stops what
	// started; the deferred Stop after a normal stop does nothing.
	var services lifecycle.Group
	defer services.Stop()
	adm := newMonitor(ctx, cfg, db, client, log)
	services.Add("admin.listen", lifecycle.Server(adm, cfg.HTTP.ShutdownTimeout))
	if err := services.Start(ctx); err != nil {
		return stoppedDuringStartUp(ctx, log, err)
	}
	db = adm.DB() // the engine, the pollers and the scheduler count through it
	// The process's clock against the database's, which ordersync judges on.
	adm.WatchClock()

	sm.Status("starting: engine, relays and listeners")
	fs, err := fetchers(cfg, skus, log)
	if err != nil {
		return err
	}
	eng := newEngine(db, adm.Client(), cfg, out.routes, fs, log)
	// 1C's start-up ping goes on in the background: webhooks and feeds are served
	// while 1C does not answer (operations wait and retry). It goes through the
	// engine, so that a 1C that does not answer has the engine ping it until it does.
	ping := lifecycle.Go(func(pingCtx context.Context) {
		if info, err := eng.PingOneC(pingCtx); err != nil {
			// 1C may be down for a while; the engine retries. Say it loudly (unless
			// the ping ended because a stop was requested).
			if pingCtx.Err() == nil {
				log.ErrorContext(ctx, "1C does not answer the start-up ping; operations wait and retry",
					"class", onec.ClassOf(err).String(), "err", err)
			}
		} else {
			log.InfoContext(ctx, "1C answers", "service", info.Service, "contract", info.Version)
		}
	}, 0)
	relay := out.relay(db, cfg, log)
	// Stock publishes are long (a marketplace's rate limit paces them): they have a
	// relay of their own, so that order events never wait behind them.
	stockPubs, err := stockPublishers(cfg, db, markets, skus, log)
	if err != nil {
		return err
	}
	stockRC := relayConfig(cfg, stockPubs, nil, log.With("relay", "stock"))
	stockRC.Name = "stock"
	if cfg.Relay.Listen {
		stockRC.Listener = db.Listener()
	}
	stockRelay := outbox.NewRelay(db.Outbox(), stockRC)
	setup, err := newStockSetup(cfg)
	if err != nil {
		return err
	}
	sched := scheduler.New(db.Journal(), scheduler.Config{Schedules: setup.schedules, CatchUp: setup.catchUp,
		Wake: eng.Wake, Stock: db.Stock(), Retention: cfg.Stock.Retention, Logger: log.With("component", "stock")})
	feed, err := kaspiFeed(cfg, db, skus, log)
	if err != nil {
		return err
	}
	handlers := map[string]http.Handler{}
	if feed != nil {
		handlers["GET "+kaspi.FeedPath] = feed
	}
	srv, err := newServer(cfg, db, eng.Wake, handlers, log)
	if err != nil {
		return err
	}
	// The journal pages wake the engine on a resync.
	pages, err := newUI(cfg, db, adm.Client(), markets, eng.Wake, adm.SignIn, log)
	if err != nil {
		return stoppedDuringStartUp(ctx, log, err)
	}
	parts := lifecycle.Run{StockRelay: stockRelay, Relay: relay, Engine: eng, Ping: ping,
		Scheduler: lifecycle.Go(func(ctx context.Context) { sched.Run(ctx) }, cfg.Worker.ShutdownTimeout)}
	if srv != nil {
		parts.Webhooks = lifecycle.Server(webhookServer{srv, log}, cfg.HTTP.ShutdownTimeout)
	}
	if pages != nil {
		parts.Pages = lifecycle.Server(pages, cfg.HTTP.ShutdownTimeout)
	}
	for i, p := range newPollers(markets, db, skus, eng.Wake, log) {
		parts.Pollers = append(parts.Pollers, lifecycle.Named{Name: "poller " + markets[i].name, Service: p})
	}
	parts.Add(&services)
	// The nightly reading of the marketplaces' financial lines: started last, it
	// stops first (a reading cut short is read again the next night).
	payoutsSvc, payoutsSched, err := a.payoutsService(cfg, db, markets, log)
	if err != nil {
		return err
	}
	if payoutsSvc != nil {
		services.Add("payouts scheduler", payoutsSvc)
	}
	// The stock read again soon after orders are registered (stock.refresh_after_order).
	if bg := stockRefresh(cfg, db, setup, eng.Wake, log); bg != nil {
		services.Add("stock refresh", bg)
	}
	if err := services.Start(ctx); err != nil {
		return stoppedDuringStartUp(ctx, log, err)
	}
	if payoutsSched != nil {
		log.InfoContext(ctx, "payouts schedule running", "schedule", cfg.Payouts.Schedule,
			"sources", strings.Join(cfg.ScheduledSources(), ","), "window", cfg.Payouts.Window.String())
	}
	if len(markets) > 0 {
		log.InfoContext(ctx, "connectors polling", "connectors", connectorNames(markets))
	}
	if len(setup.schedules) > 0 {
		log.InfoContext(ctx, "stock schedules running", "schedules", len(setup.schedules), "catch_up", cfg.Stock.CatchUp,
			"publishers", strings.Join(sortedKeys(stockPubs), ","), "kaspi_feed", feed != nil)
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
				stockRelay.Wake()
			}
		}
	}()
	counts := func() string {
		oneC := "1C " + eng.OneCState()
		select {
		case <-ping.Done():
		default:
			if eng.OneCState() == "up" {
				oneC = "1C: start-up ping in flight"
			}
		}
		st := eng.Stats()
		if t, _, ok := adm.Totals(); ok {
			// The journal's numbers as the metrics last read them, then this process's.
			return fmt.Sprintf("%d pending, %d failed; since start: %d done, %d retries; %s",
				t.Pending, t.Failed, st.Done, st.Retried, oneC)
		}
		return fmt.Sprintf("since start: %d done, %d failed, %d retries; %s", st.Done, st.Failed, st.Retried, oneC)
	}
	adm.Attach(eng, srv, relay, stockRelay)
	sm.MarkReady("ready; " + counts())
	// Added last, stopped first.
	stopSupervising := func() {}
	services.Add("systemd supervision", lifecycle.Func(func(ctx context.Context) error {
		stopSupervising = sm.Supervise(ctx, sdnotify.Supervised{DB: db, Outbox: db.Outbox(), Struggling: strugglingAttempts,
			Alive: []func() error{eng.Alive, relay.Alive, stockRelay.Alive}, Counts: counts})
		return nil
	}, func() { stopSupervising() }))
	if err := services.Start(ctx); err != nil {
		return stoppedDuringStartUp(ctx, log, err)
	}
	releaseStartUpPages(log)
	<-ctx.Done()
	log.Info("stop requested: finishing calls and deliveries in flight", "shutdown_timeout", cfg.Worker.ShutdownTimeout.String())
	start := time.Now()
	services.Stop()
	st, rs := eng.Stats(), relay.Stats()
	log.Info("ordersync stopped", "took", time.Since(start).Round(time.Millisecond).String(),
		"done", st.Done, "retried", st.Retried, "failed", st.Failed, "events_sent", rs.Sent, "events_dead", rs.Dead)
	return nil
}

// stoppedDuringStartUp is what run returns when a start-up step failed: nil when a
// stop was requested meanwhile (SIGTERM during start-up is a clean stop, exit 0, and
// the step's error — a connect, a migration or a lookup cut short — is its
// consequence), err otherwise.
func stoppedDuringStartUp(ctx context.Context, log *slog.Logger, err error) error {
	if ctx.Err() == nil {
		return err
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		log.Info("stop requested during start-up: exiting", "step_cut_short", err.Error())
	} else {
		log.Warn("stop requested during start-up; a start-up step had failed", "err", err)
	}
	return nil
}
