package main

// The admin listener against the real stores, the 1C simulator and a webhook sink:
// the service wired in this process as `run` wires it (startAdmin, then the engine,
// the relay and the webhook server built from its DB and Client).

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/ordersync/ordersync/internal/admin"
	"github.com/ordersync/ordersync/internal/config"
	"github.com/ordersync/ordersync/internal/engine"
	"github.com/ordersync/ordersync/internal/eventually"
	"github.com/ordersync/ordersync/internal/inbox"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/logging"
	"github.com/ordersync/ordersync/internal/monitor"
	"github.com/ordersync/ordersync/internal/onec"
	"github.com/ordersync/ordersync/internal/order"
	"github.com/ordersync/ordersync/internal/outbox"
	"github.com/ordersync/ordersync/internal/sim"
	"github.com/ordersync/ordersync/internal/sim/onecsim"
	"github.com/ordersync/ordersync/internal/store"
)

// adminWorld is a service wired in this process with its admin listener.
type adminWorld struct {
	t      *testing.T
	adm    *monitor.Monitor
	db     store.DB // instrumented
	eng    *engine.Engine
	relay  *outbox.Relay
	hooks  string // the webhook server's base URL
	base   string // the admin listener's base URL
	cancel context.CancelFunc
}

// startWorld wires the service of e's configuration in this process; it stops when
// the test ends.
func startWorld(t *testing.T, e *env) *adminWorld {
	t.Helper()
	a := &app{environ: e.environ, stdout: io.Discard, stderr: io.Discard}
	cfg, err := a.loadConfig()
	if err != nil {
		t.Fatal(err)
	}
	log := logging.Discard()
	client, err := a.newClient(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	db, err := a.openReadyDB(ctx, cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	w := &adminWorld{t: t, cancel: cancel}
	adm, err := startAdmin(ctx, cfg, db, client, log)
	if err != nil {
		t.Fatal(err)
	}
	w.adm, w.db = adm, adm.DB()
	out, err := newDelivery(cfg, connectorPublishers{})
	if err != nil {
		t.Fatal(err)
	}
	w.eng = engine.New(w.db.Journal(), adm.Client(), engine.Config{
		Workers: cfg.OneC.MaxConcurrency, MaxAttempts: cfg.Worker.MaxAttempts, BackoffMin: cfg.Worker.BackoffMin,
		BackoffMax: cfg.Worker.BackoffMax, PollInterval: cfg.Worker.PollInterval, ShutdownTimeout: cfg.Worker.ShutdownTimeout,
		OneCTimeout: cfg.OneC.Timeout, SettleTime: cfg.OneC.SettleTime, GiveUpAfter: cfg.Worker.GiveUpAfter,
		PingInterval: cfg.OneC.PingInterval, Location: cfg.OneC.Location(), Routes: out.routes, Logger: log,
	})
	w.relay = out.relay(w.db, cfg, log)
	srv, err := newServer(cfg, w.db, w.eng.Wake, nil, log)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.relay.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	adm.Attach(w.eng, srv, w.relay)
	w.hooks, w.base = listenURL(srv.Addr()), "http://"+adm.Addr()
	t.Cleanup(func() {
		cancel()
		stopCtx, done := context.WithTimeout(context.Background(), 10*time.Second)
		defer done()
		srv.Stop(stopCtx)
		w.eng.Stop()
		w.relay.Stop()
		if err := adm.Stop(stopCtx); err != nil {
			t.Errorf("admin stop: %v", err)
		}
		db.Close()
		client.Close(stopCtx)
	})
	return w
}

// get fetches path from the admin listener.
func (w *adminWorld) get(path string) (int, string) {
	w.t.Helper()
	resp, err := http.Get(w.base + path)
	if err != nil {
		w.t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		w.t.Fatalf("GET %s: %v", path, err)
	}
	return resp.StatusCode, string(b)
}

// ready is /readyz: its status and report.
func (w *adminWorld) ready() (int, admin.Report) {
	w.t.Helper()
	code, body := w.get("/readyz")
	var r admin.Report
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		w.t.Fatalf("/readyz: %d %q: %v", code, body, err)
	}
	return code, r
}

func checkOf(r admin.Report, name string) admin.Result {
	for _, c := range r.Checks {
		if c.Name == name {
			return c
		}
	}
	return admin.Result{Name: name, Reason: "(not in the report)"}
}

// scrape parses /metrics.
func (w *adminWorld) scrape() scraped {
	w.t.Helper()
	code, body := w.get("/metrics")
	if code != 200 {
		w.t.Fatalf("/metrics: %d %s", code, body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		w.t.Fatalf("/metrics does not parse: %v\n%s", err, body)
	}
	return scraped{t: w.t, fams: fams}
}

type scraped struct {
	t    *testing.T
	fams map[string]*dto.MetricFamily
}

// sum adds up the series of name whose labels include the pairs given (a
// histogram's sample counts).
func (s scraped) sum(name string, labels ...string) float64 {
	f, ok := s.fams[name]
	if !ok {
		s.t.Errorf("/metrics has no %s", name)
		return 0
	}
	var total float64
	for _, m := range f.GetMetric() {
		has := map[string]string{}
		for _, l := range m.GetLabel() {
			has[l.GetName()] = l.GetValue()
		}
		match := true
		for i := 0; i+1 < len(labels); i += 2 {
			match = match && has[labels[i]] == labels[i+1]
		}
		if !match {
			continue
		}
		switch {
		case m.Gauge != nil:
			total += m.GetGauge().GetValue()
		case m.Counter != nil:
			total += m.GetCounter().GetValue()
		case m.Histogram != nil:
			total += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return total
}

func (s scraped) want(want float64, name string, labels ...string) {
	s.t.Helper()
	if got := s.sum(name, labels...); got != want {
		s.t.Errorf("%s%v = %v, want %v", name, labels, got, want)
	}
}

// After a scripted run — webhooks delivered, redelivered and forged, orders created
// in 1C, one refused by 1C, one create answered 503 first, an event that died at
// its destination — the counters and gauges of /metrics equal what the journal,
// the inbox, the outbox, the simulator and the sink hold.
func TestMetricsAfterAScriptedRunEqualTheJournalAndTheSimulator(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"postgres", "sqlite"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			e := newEnvOn(t, backend, onecsim.Options{}, true)
			sink := e.withSink()
			e.environ = append(e.environ, "ORDERSYNC_ADMIN__LISTEN=127.0.0.1:0",
				"ORDERSYNC_WEBHOOKS__SOURCES__SITE__SECRETS="+siteSecret)
			w := startWorld(t, e)
			ctx := t.Context()
			hook := w.hooks + "/webhooks/site"

			// The first order's event dies at the sink (relay.max_attempts is 2).
			sink.Faults.Add(2, sim.Fault{Status: 500})
			if st, b := post(t, hook, "application/json", signed("msg_1", []byte(orderJSON("M-1", "SKU-1", "1", "10"))),
				[]byte(orderJSON("M-1", "SKU-1", "1", "10"))); st != 200 {
				t.Fatalf("M-1: %d %s", st, b)
			}
			eventually.True(t, "one dead event in the outbox status", func() bool {
				st, err := w.db.Outbox().Status(ctx, 1)
				return err == nil && len(st) == 1 && st[0].Dead == 1
			})
			// 1C refuses M-3 for good; M-4's first create is answered 406 (no free
			// session: the handler never ran, a transient failure even on a POST).
			e.onec.Faults.Add(1, sim.Fault{Op: "create", Status: 422, ExternalID: "site:M-3"})
			e.onec.Faults.Add(1, sim.Fault{Op: "create", Status: 406, ExternalID: "site:M-4"})
			for i := 2; i <= 4; i++ {
				body := []byte(orderJSON(fmt.Sprintf("M-%d", i), "SKU-1", "2", "15.50"))
				if st, b := post(t, hook, "application/json", signed(fmt.Sprintf("msg_%d", i), body), body); st != 200 {
					t.Fatalf("M-%d: %d %s", i, st, b)
				}
			}
			body := []byte(orderJSON("M-2", "SKU-1", "2", "15.50"))
			if st, b := post(t, hook, "application/json", signed("msg_2", body), body); st != 200 { // a redelivery
				t.Fatalf("redelivery: %d %s", st, b)
			}
			if st, _ := post(t, hook, "application/json", signed("msg_5", body), []byte(`{"forged":true}`)); st != 401 && st != 400 {
				t.Fatalf("a forged delivery answered %d", st)
			}
			store := w.db.Journal()
			eventually.True(t, "the four operations", func() bool {
				ops, err := store.List(ctx, journal.Filter{Limit: 1000})
				if err != nil || len(ops) != 4 {
					return false
				}
				for _, op := range ops {
					if op.Status == journal.StatusPending {
						return false
					}
				}
				return sink.Unique() == 2
			})
			eventually.True(t, "the relay's two sends", func() bool { // the relay's counters follow the sink's answers
				return w.relay.Stats().Sent == 2
			})
			if err := w.adm.Refresh(ctx); err != nil {
				t.Fatal(err)
			}
			m := w.scrape()

			// The journal: operations by status, attempts by outcome.
			ops, err := store.List(ctx, journal.Filter{Limit: 1000})
			if err != nil {
				t.Fatal(err)
			}
			byStatus := map[journal.Status]int{}
			attempts := map[journal.Outcome]int{}
			for _, op := range ops {
				byStatus[op.Status]++
				d, err := store.Show(ctx, op.Key)
				if err != nil {
					t.Fatal(err)
				}
				for _, a := range d.History {
					attempts[a.Outcome]++
				}
			}
			if byStatus[journal.StatusDone] != 3 || byStatus[journal.StatusFailed] != 1 || attempts[journal.OutcomeRetry] != 1 {
				t.Fatalf("the script did not run as planned: %v %v", byStatus, attempts)
			}
			for _, st := range []journal.Status{journal.StatusPending, journal.StatusDone, journal.StatusFailed} {
				m.want(float64(byStatus[st]), "ordersync_operations", "kind", order.KindCreate, "source", "site", "status", string(st))
			}
			for _, o := range []journal.Outcome{journal.OutcomeDone, journal.OutcomeRetry, journal.OutcomeFailed, journal.OutcomeInterrupted} {
				m.want(float64(attempts[o]), "ordersync_attempts_total", "kind", order.KindCreate, "outcome", string(o))
			}

			// The simulator: every create and find it received was one call timed (no
			// GET was retried within a call here), each under its outcome.
			stats := e.onec.Stats()
			m.want(float64(stats.Requests["create"]), "ordersync_onec_request_duration_seconds", "endpoint", "create")
			m.want(float64(stats.Requests["find"]), "ordersync_onec_request_duration_seconds", "endpoint", "find")
			m.want(1, "ordersync_onec_request_duration_seconds", "endpoint", "create", "outcome", "permanent")
			m.want(1, "ordersync_onec_request_duration_seconds", "endpoint", "create", "outcome", "transient")
			m.want(3, "ordersync_onec_request_duration_seconds", "endpoint", "create", "outcome", "ok")
			if m.sum("ordersync_onec_request_duration_seconds", "endpoint", "ping", "outcome", "ok") < 1 {
				t.Error("no ping was timed")
			}
			m.want(1, "ordersync_onec_up")

			// The inbox: four orders, one redelivery, one forgery.
			rows, err := w.db.Inbox().List(ctx, inbox.Filter{Limit: 1000})
			if err != nil {
				t.Fatal(err)
			}
			m.want(float64(len(rows)), "ordersync_inbox_deliveries_total", "source", "site", "outcome", "processed")
			m.want(1, "ordersync_inbox_deliveries_total", "source", "site", "outcome", "duplicate")
			m.want(1, "ordersync_inbox_deliveries_total", "source", "site", "outcome", "rejected")

			// The outbox and the sink: two delivered, one dead.
			st, err := w.db.Outbox().Status(ctx, 1)
			if err != nil || len(st) != 1 {
				t.Fatalf("outbox status: %+v %v", st, err)
			}
			m.want(float64(st[0].Pending), "ordersync_outbox_pending", "destination", "crm")
			m.want(float64(st[0].Dead), "ordersync_outbox_dead", "destination", "crm")
			m.want(1, "ordersync_outbox_dead", "destination", "crm")
			m.want(0, "ordersync_outbox_lag_seconds", "destination", "crm")
			m.want(float64(sink.Unique()), "ordersync_outbox_deliveries_total", "outcome", "sent")
			m.want(1, "ordersync_outbox_deliveries_total", "outcome", "dead")
			m.want(1, "ordersync_build_info", "version", version)
			if tot, up, ok := w.adm.Totals(); !ok || !up || tot.Pending != 0 || tot.Failed != 1 || tot.OutboxDead != 1 || tot.OutboxPending != 0 {
				t.Errorf("totals for the status line: %+v, 1C up %v, ok %v", tot, up, ok)
			}
			for _, name := range []string{"go_goroutines", "process_resident_memory_bytes"} {
				if _, ok := m.fams[name]; !ok {
					t.Errorf("/metrics has no %s", name)
				}
			}
			// No order id or key is a label anywhere.
			_, text := w.get("/metrics")
			for _, id := range []string{"M-1", "site:order", "msg_1"} {
				if strings.Contains(text, id) {
					t.Errorf("/metrics mentions %q", id)
				}
			}
			// pprof is off by default.
			if code, _ := w.get("/debug/pprof/"); code != 404 {
				t.Errorf("/debug/pprof/ answered %d without admin.pprof", code)
			}
			if code, r := w.ready(); code != 200 {
				t.Errorf("/readyz: %d %+v", code, r)
			}
		})
	}
}

// /readyz turns 503 within one ping interval when 1C goes down, naming 1C, and 200
// again when it returns; a missing publication pauses the engine, which /readyz
// names too.
func TestReadyzFollows1C(t *testing.T) {
	t.Parallel()
	e := newEnvOn(t, "sqlite", onecsim.Options{}, true)
	const interval = time.Second
	e.environ = append(e.environ, "ORDERSYNC_ADMIN__LISTEN=127.0.0.1:0", "ORDERSYNC_ONEC__PING_INTERVAL="+interval.String(),
		"ORDERSYNC_ONEC__GET_RETRIES=0")
	w := startWorld(t, e)
	// Slack for a loaded machine: the ping that fails must also be sent, refused and
	// recorded, and /readyz asked.
	const slack = 3 * time.Second

	// waitReady waits for /readyz to answer want and satisfy cond, and fails the
	// test if that took longer than within: the bound is what some of the waits
	// assert (within a ping interval and the slack).
	waitReady := func(what string, within time.Duration, want int, cond func(admin.Report) bool) time.Duration {
		t.Helper()
		start := time.Now()
		type answer struct {
			code int
			r    admin.Report
		}
		eventually.Value(t, fmt.Sprintf("%s: /readyz %d", what, want), func() (answer, bool) {
			code, r := w.ready()
			return answer{code, r}, code == want && cond(r)
		})
		took := time.Since(start)
		if took > within {
			t.Fatalf("%s: /readyz answered %d only after %s, want within %s", what, want, took, within)
		}
		return took
	}
	waitReady("start", 30*time.Second, 200, func(r admin.Report) bool { return true })
	if code, r := w.ready(); code != 200 || len(r.Checks) != 4 || !slices.ContainsFunc(r.Checks, func(c admin.Result) bool {
		return c.Name == "database" && c.OK && c.Reason == "answers; the schema is current"
	}) {
		t.Fatalf("ready: %d %+v", code, r)
	}

	if err := e.onec.Down(); err != nil {
		t.Fatal(err)
	}
	took := waitReady("1C down", interval+slack, 503, func(r admin.Report) bool {
		c := checkOf(r, "onec")
		return !c.OK && strings.Contains(c.Reason, "1C does not answer")
	})
	t.Logf("/readyz 503 %s after 1C went down (ping interval %s)", took.Round(time.Millisecond), interval)
	_, body := w.get("/readyz")
	t.Logf("/readyz while 1C is down: %s", body)
	_, r := w.ready()
	if c := checkOf(r, "database"); !c.OK {
		t.Errorf("1C down made the database check fail: %+v", c)
	}
	if code, _ := w.get("/healthz"); code != 200 {
		t.Errorf("/healthz: %d while 1C is down; liveness is not 1C's", code)
	}
	if n := w.scrape().sum("ordersync_onec_up"); n != 0 {
		t.Errorf("ordersync_onec_up = %v while 1C is down", n)
	}

	if err := e.onec.Up(); err != nil {
		t.Fatal(err)
	}
	took = waitReady("1C back", interval+slack, 200, func(admin.Report) bool { return true })
	t.Logf("/readyz 200 %s after 1C came back", took.Round(time.Millisecond))

	// A missing publication: the engine's first call names the failing endpoint.
	e.onec.SetMissing()
	if _, err := w.db.Journal().Register(t.Context(), journal.NewOperation{Key: "site:order:P-1:create", Kind: order.KindCreate,
		Source: "site", ExternalID: "site:P-1", Payload: json.RawMessage(orderJSON("P-1", "SKU-1", "1", "10"))}); err != nil {
		t.Fatal(err)
	}
	w.eng.Wake()
	waitReady("publication missing", 30*time.Second, 503, func(r admin.Report) bool {
		c := checkOf(r, "engine")
		return !c.OK && strings.Contains(c.Reason, "/orders configuration")
	})
	e.onec.ClearMissing()
	waitReady("publication back", 30*time.Second, 200, func(admin.Report) bool { return true })
	eventually.True(t, "site:P-1 in 1C", func() bool { return e.onec.CountExternal("site:P-1") == 1 })
}

// admin.pprof serves the profiles; an empty admin.listen serves nothing and
// instruments nothing.
func TestAdminPProfAndDisabled(t *testing.T) {
	t.Parallel()
	e := newEnvOn(t, "sqlite", onecsim.Options{}, true)
	e.environ = append(e.environ, "ORDERSYNC_ADMIN__LISTEN=127.0.0.1:0", "ORDERSYNC_ADMIN__PPROF=true")
	w := startWorld(t, e)
	if code, body := w.get("/debug/pprof/"); code != 200 || !strings.Contains(body, "goroutine") {
		t.Fatalf("/debug/pprof/ with admin.pprof: %d %s", code, body)
	}
	if code, _ := w.get("/debug/pprof/goroutine?debug=1"); code != 200 {
		t.Fatalf("goroutine profile: %d", code)
	}

	e2 := newEnvOn(t, "sqlite", onecsim.Options{}, true)
	e2.environ = append(e2.environ, "ORDERSYNC_ADMIN__LISTEN=")
	a := &app{environ: e2.environ, stdout: io.Discard, stderr: io.Discard}
	cfg, err := a.loadConfig()
	if err != nil {
		t.Fatal(err)
	}
	db, err := a.openReadyDB(t.Context(), cfg, logging.Discard())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	client, err := a.newClient(cfg, logging.Discard())
	if err != nil {
		t.Fatal(err)
	}
	adm, err := startAdmin(t.Context(), cfg, db, client, logging.Discard())
	if err != nil {
		t.Fatal(err)
	}
	if adm.Addr() != "" || adm.DB() != db || adm.Client() != client {
		t.Fatalf("admin.listen empty: listening on %q, or instrumenting", adm.Addr())
	}
	adm.Attach(nil, nil)
	if err := adm.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// startAdmin builds the monitor as run does and starts it.
func startAdmin(ctx context.Context, cfg *config.Config, db store.DB, client onec.Client, log *slog.Logger) (*monitor.Monitor, error) {
	m := newMonitor(ctx, cfg, db, client, log)
	if err := m.Start(ctx); err != nil {
		return nil, fmt.Errorf("admin.listen: %w", err)
	}
	return m, nil
}
