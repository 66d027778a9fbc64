// Package monitor is what `ordersync run` tells about itself: the admin listener
// (admin.listen) with /metrics, /healthz and /readyz, the metrics that count the
// engine's, the pollers' and the 1C client's work, the pinger that keeps 1C's state
// fresh, the refresher of the gauges kept in the database, and the watch on the
// database's clock.
package monitor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ordersync/ordersync/connectors"
	"github.com/ordersync/ordersync/internal/admin"
	"github.com/ordersync/ordersync/internal/config"
	"github.com/ordersync/ordersync/internal/engine"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/metrics"
	"github.com/ordersync/ordersync/internal/onec"
	"github.com/ordersync/ordersync/internal/outbox"
	"github.com/ordersync/ordersync/internal/server"
	"github.com/ordersync/ordersync/internal/store"
)

// refreshInterval is how often the gauges kept in the database
// (ordersync_operations, ordersync_outbox_*, ordersync_connector_last_*) are read.
const refreshInterval = 15 * time.Second

// Monitor is the admin listener of `ordersync run` (admin.listen) with what it
// reports on: the metrics, the 1C pinger, the refresher of the database gauges, and
// the readiness and liveness checks.
type Monitor struct {
	cfg *config.Config
	log *slog.Logger
	ctx context.Context // the service's: done once a stop is requested

	metrics   *metrics.Metrics   // nil when admin.listen is empty
	srv       *admin.Server      // nil when admin.listen is empty
	refresher *metrics.Refresher // nil when admin.listen is empty
	db        store.DB           // instrumented when the listener runs
	client    onec.Client        // instrumented when the listener runs

	eng     atomic.Pointer[engine.Engine]
	pingNow chan struct{} // a ping of the pinger's goes through the engine once attached

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// Config is what a Monitor reports on and how.
type Config struct {
	// Config is the service's configuration: admin.listen and admin.pprof, and
	// onec.ping_interval and onec.timeout for the pinger.
	Config *config.Config
	// Version is the binary's, for ordersync_build_info.
	Version string
	// Connectors are the enabled connectors by the names their cursors carry.
	Connectors []string
	DB         store.DB
	Client     onec.Client
	Logger     *slog.Logger
}

// New builds the admin listener, unless admin.listen is empty: /metrics,
// /healthz, /readyz and, with admin.pprof, /debug/pprof/. Build and start it once
// the database is open and the 1C client built, before the engine, the relays,
// the webhook server and the pollers are built, and build those from DB() and
// Client(): they count attempts, failed polls and each 1C call. Attach the engine
// and the rest once built. /readyz answers 503 until the engine is attached and
// while it is paused, while 1C's last ping or call failed, and once ctx is done.
// Stop ends it all.
func New(ctx context.Context, c Config) *Monitor {
	cfg, db, log := c.Config, c.DB, c.Logger
	a := &Monitor{cfg: cfg, log: log, ctx: ctx, db: db, client: c.Client, pingNow: make(chan struct{}, 1)}
	if cfg.Admin.Listen == "" {
		log.InfoContext(ctx, "admin listener disabled (admin.listen is empty): no /metrics, /healthz or /readyz")
		return a
	}
	m := metrics.New(c.Version)
	stopping := func() bool { return ctx.Err() != nil }
	a.metrics = m
	a.db = instrumentedDB{DB: db, journal: m.Journal(db.Journal()), cursors: m.Cursors(db.Cursors(), stopping)}
	a.client = m.Client(c.Client)

	src := metrics.Sources{Outbox: db.Outbox(), Cursors: db.Cursors(), Connectors: c.Connectors}
	if jc, ok := db.Journal().(journal.Counter); ok {
		src.Journal = jc
	}
	a.refresher = metrics.NewRefresher(m, src, log.With("component", "metrics"))

	a.srv = admin.New(admin.Config{
		Listen: cfg.Admin.Listen, PProf: cfg.Admin.PProf,
		Metrics: promhttp.InstrumentMetricHandler(m.Registry(),
			promhttp.HandlerFor(m.Registry(), promhttp.HandlerOpts{Registry: m.Registry()})),
		Logger: log.With("component", "admin"),
	})
	a.srv.Live("process", func(context.Context) (string, error) { return "answers", nil })
	a.srv.Ready("service", a.checkService)
	a.srv.Ready("database", a.checkDatabase)
	a.srv.Ready("onec", a.checkOneC)
	a.srv.Ready("engine", a.checkEngine)
	return a
}

// Start listens on admin.listen and starts the pinger and the refresher; nothing
// when the listener is disabled.
func (a *Monitor) Start(ctx context.Context) error {
	if a.srv == nil {
		return nil
	}
	if err := a.srv.Start(ctx); err != nil {
		return err
	}
	bg, cancel := context.WithCancel(context.WithoutCancel(ctx))
	a.cancel = cancel
	a.wg.Add(2)
	go func() {
		defer a.wg.Done()
		a.refresher.Run(bg, refreshInterval)
	}()
	go func() {
		defer a.wg.Done()
		a.ping(bg)
	}()
	a.log.InfoContext(ctx, "admin listening", "address", (&url.URL{Scheme: "http", Host: a.srv.Addr().String()}).String(), "pprof", a.cfg.Admin.PProf,
		"endpoints", "/metrics /healthz /readyz")
	return nil
}

// DB is the database to build the engine, the webhook server and the pollers from:
// its journal counts each attempt's outcome, its cursors each failed poll.
func (a *Monitor) DB() store.DB { return a.db }

// Client is the 1C client to give the engine: each call is timed and tells /readyz
// whether 1C answers.
func (a *Monitor) Client() onec.Client { return a.client }

// SignIn counts a sign-in to the pages (ui.Config.OnSignIn); nothing without
// the admin listener.
func (a *Monitor) SignIn(outcome string) {
	if a.metrics != nil {
		a.metrics.SignIn(outcome)
	}
}

// Attach hands over what was built from DB and Client: the engine (its pause is a
// readiness check, its loops a liveness one when it tells), the webhook server (its
// counters are ordersync_inbox_deliveries_total; nil when http.listen is empty) and
// the relays (their deliveries, and their loops in /healthz).
func (a *Monitor) Attach(eng *engine.Engine, srv *server.Server, relays ...*outbox.Relay) {
	if a.srv == nil {
		return
	}
	if eng != nil {
		a.eng.Store(eng)
		a.metrics.SetFailingEndpoints(func() []metrics.FailingEndpoint {
			var out []metrics.FailingEndpoint
			for _, b := range eng.Broken() {
				out = append(out, metrics.FailingEndpoint{Path: b.Path, Class: b.Class})
			}
			return out
		})
		if l, ok := any(eng).(aliveChecker); ok {
			a.srv.Live("engine", aliveCheck(l, "every claim loop goes round"))
		}
	}
	if srv != nil {
		a.metrics.SetInbox(srv.Stats)
	}
	for i, r := range relays {
		if r == nil {
			continue
		}
		a.metrics.AddRelay(r.Stats)
		if l, ok := any(r).(aliveChecker); ok {
			a.srv.Live(fmt.Sprintf("relay%d", i+1), aliveCheck(l, "the delivery loop goes round"))
		}
	}
	select {
	case a.pingNow <- struct{}{}:
	default:
	}
}

// Live adds a liveness check to /healthz (the systemd watchdog's, say).
func (a *Monitor) Live(name string, check func(ctx context.Context) error) {
	if a.srv == nil {
		return
	}
	a.srv.Live(name, func(ctx context.Context) (string, error) { return "alive", check(ctx) })
}

// Addr is the admin listener's address, "" when it is disabled.
func (a *Monitor) Addr() string {
	if a.srv == nil {
		return ""
	}
	return a.srv.Addr().String()
}

// Stop closes the listener (requests in flight may finish until ctx ends) and
// stops the pinger and the refresher. Safe twice; once started.
func (a *Monitor) Stop(ctx context.Context) error {
	if a.srv == nil || a.cancel == nil {
		return nil
	}
	err := a.srv.Stop(ctx)
	a.cancel()
	a.wg.Wait()
	return err
}

// Totals are the journal's and the outbox's numbers as last read for the metrics
// (for a status line: "12 pending, 0 failed, 1C up, outbox lag 0.4s"), and whether
// 1C answered its last ping or call. ok is false while the listener is disabled
// or before the first refresh.
func (a *Monitor) Totals() (t metrics.Totals, onecUp bool, ok bool) {
	if a.refresher == nil {
		return metrics.Totals{}, false, false
	}
	t = a.refresher.Totals()
	return t, a.metrics.OneC().Up, !t.At.IsZero()
}

// Refresh reads the database gauges now (tests; the timer does it otherwise).
func (a *Monitor) Refresh(ctx context.Context) error { return a.refresher.Refresh(ctx) }

// ping pings 1C every onec.ping_interval, at once first and again when the engine
// is attached, each ping bounded by onec.timeout. Once attached, the pings go
// through the engine when it offers (PingOneC): it then learns from them as from
// any call of its own.
func (a *Monitor) ping(ctx context.Context) {
	t := time.NewTicker(a.cfg.OneC.PingInterval)
	defer t.Stop()
	for {
		pctx, cancel := context.WithTimeout(ctx, a.cfg.OneC.Timeout)
		if p, ok := a.enginePinger(); ok {
			p.PingOneC(pctx)
		} else {
			a.client.Ping(pctx)
		}
		cancel()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-a.pingNow:
		}
	}
}

type enginePinger interface {
	PingOneC(ctx context.Context) (onec.Info, error)
}

func (a *Monitor) enginePinger() (enginePinger, bool) {
	eng := a.eng.Load()
	if eng == nil {
		return nil, false
	}
	p, ok := any(eng).(enginePinger)
	return p, ok
}

type aliveChecker interface{ Alive() error }

func aliveCheck(l aliveChecker, ok string) admin.CheckFunc {
	return func(context.Context) (string, error) {
		if err := l.Alive(); err != nil {
			return "", err
		}
		return ok, nil
	}
}

func (a *Monitor) checkService(context.Context) (string, error) {
	if a.ctx.Err() != nil {
		return "", errors.New("stopping: finishing the calls and deliveries in flight")
	}
	return "running", nil
}

func (a *Monitor) checkDatabase(ctx context.Context) (string, error) {
	if err := a.db.CheckSchema(ctx); err != nil {
		return "", err
	}
	return "answers; the schema is current", nil
}

func (a *Monitor) checkOneC(context.Context) (string, error) {
	st := a.metrics.OneC()
	ago := func(t time.Time) string { return time.Since(t).Round(time.Millisecond).String() + " ago" }
	switch {
	case !st.Known:
		return "", errors.New("no answer yet: the first ping is under way")
	case !st.Up:
		since := "never answered since the start"
		if !st.LastUp.IsZero() {
			since = "last answered " + ago(st.LastUp)
		}
		return "", fmt.Errorf("1C does not answer (%s %s; %s): %s", st.Endpoint, ago(st.At), since, st.Reason)
	}
	// A ping or a call ends at least every ping interval plus its timeout; past
	// that, the pinger itself is stuck.
	if stale := 2*a.cfg.OneC.PingInterval + a.cfg.OneC.Timeout; time.Since(st.At) > stale {
		return "", fmt.Errorf("no call to 1C has ended for %s (the last answered %s)", ago(st.At), st.Endpoint)
	}
	return fmt.Sprintf("answered %s %s", st.Endpoint, ago(st.At)), nil
}

func (a *Monitor) checkEngine(context.Context) (string, error) {
	eng := a.eng.Load()
	if eng == nil {
		return "", errors.New("not started yet")
	}
	if broken := eng.Broken(); len(broken) > 0 {
		// The operations that need these endpoints wait; the others go on.
		var parts []string
		for _, b := range broken {
			parts = append(parts, fmt.Sprintf("%s %s since %s (%d failures): %s", b.Path, b.Class,
				b.Since.Format(time.RFC3339), b.Failures, b.Error))
		}
		return "", fmt.Errorf("claiming, but 1C endpoints fail with a configuration or authentication problem; "+
			"the operations that need them wait: %s", strings.Join(parts, "; "))
	}
	return "claiming", nil
}

// instrumentedDB is a database whose journal and cursors feed the metrics.
type instrumentedDB struct {
	store.DB
	journal journal.Store
	cursors connectors.CursorStore
}

func (d instrumentedDB) Journal() journal.Store          { return d.journal }
func (d instrumentedDB) Cursors() connectors.CursorStore { return d.cursors }
