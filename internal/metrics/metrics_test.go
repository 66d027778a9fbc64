package metrics

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/ordersync/ordersync/connectors"
	"github.com/ordersync/ordersync/internal/eventually"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/onec"
	"github.com/ordersync/ordersync/internal/onec/httpservice"
	"github.com/ordersync/ordersync/internal/order"
	"github.com/ordersync/ordersync/internal/outbox"
	"github.com/ordersync/ordersync/internal/server"
	"github.com/ordersync/ordersync/internal/sim"
	"github.com/ordersync/ordersync/internal/sim/onecsim"
	"github.com/ordersync/ordersync/internal/store/sqlite"
)

// value is the value of the series name{labels} (a histogram's sample count), and
// whether it is exported.
func value(t *testing.T, m *Metrics, name string, labels ...string) (float64, bool) {
	t.Helper()
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	want := map[string]string{}
	for i := 0; i+1 < len(labels); i += 2 {
		want[labels[i]] = labels[i+1]
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, s := range f.GetMetric() {
			if !sameLabels(s.GetLabel(), want) {
				continue
			}
			switch {
			case s.Gauge != nil:
				return s.GetGauge().GetValue(), true
			case s.Counter != nil:
				return s.GetCounter().GetValue(), true
			case s.Histogram != nil:
				return float64(s.GetHistogram().GetSampleCount()), true
			}
		}
	}
	return 0, false
}

func sameLabels(got []*dto.LabelPair, want map[string]string) bool {
	if len(got) != len(want) {
		return false
	}
	for _, l := range got {
		if v, ok := want[l.GetName()]; !ok || v != l.GetValue() {
			return false
		}
	}
	return true
}

func wantValue(t *testing.T, m *Metrics, want float64, name string, labels ...string) {
	t.Helper()
	got, ok := value(t, m, name, labels...)
	if !ok {
		t.Errorf("%s%v is not exported", name, labels)
		return
	}
	if got != want {
		t.Errorf("%s%v = %v, want %v", name, labels, got, want)
	}
}

func openSQLite(t *testing.T) *sqlite.DB {
	t.Helper()
	db, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(t.TempDir(), "m.db"), TakeoverAfter: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return db
}

func startOneC(t *testing.T) *onecsim.OneC {
	t.Helper()
	s := onecsim.New(onecsim.Options{})
	if err := s.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func newClient(t *testing.T, s *onecsim.OneC) onec.Client {
	t.Helper()
	c, err := httpservice.New(httpservice.Config{BaseURL: s.URL(), Timeout: 5 * time.Second, GetRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

func TestBuildInfoAndRuntimeCollectors(t *testing.T) {
	t.Parallel()
	m := New("1.2.3")
	wantValue(t, m, 1, "ordersync_build_info", "version", "1.2.3")
	for _, name := range []string{"go_goroutines", "go_memstats_alloc_bytes", "process_start_time_seconds", "process_resident_memory_bytes"} {
		if _, ok := value(t, m, name); !ok {
			t.Errorf("%s is not exported", name)
		}
	}
	// Every attempt series starts at 0, so that increase() sees the first one.
	wantValue(t, m, 0, "ordersync_attempts_total", "kind", order.KindCreate, "outcome", "failed")
	wantValue(t, m, 0, "ordersync_onec_up")
}

// ordersync_clock_offset_seconds is the database's clock minus the process's, in
// seconds, as last set.
func TestClockOffset(t *testing.T) {
	t.Parallel()
	m := New("1.2.3")
	wantValue(t, m, 0, "ordersync_clock_offset_seconds")
	m.SetClockOffset(-2500 * time.Millisecond)
	wantValue(t, m, -2.5, "ordersync_clock_offset_seconds")
	m.SetClockOffset(300 * time.Second)
	wantValue(t, m, 300, "ordersync_clock_offset_seconds")
}

// Every call through the wrapped client is timed under its endpoint and outcome,
// and the last one that ended says whether 1C is up.
func TestClientTimesCallsAndFollows1C(t *testing.T) {
	t.Parallel()
	s := startOneC(t)
	m := New("test")
	c := m.Client(newClient(t, s))
	ctx := t.Context()

	if st := m.OneC(); st.Known {
		t.Fatalf("before any call: %+v, want unknown", st)
	}
	if _, err := c.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.FindOrders(ctx, "site:1"); err != nil {
		t.Fatal(err)
	}
	wantValue(t, m, 1, "ordersync_onec_request_duration_seconds", "endpoint", "ping", "outcome", "ok")
	wantValue(t, m, 1, "ordersync_onec_request_duration_seconds", "endpoint", "find", "outcome", "ok")
	wantValue(t, m, 1, "ordersync_onec_up")
	if st := m.OneC(); !st.Known || !st.Up || st.Endpoint != "find" || st.LastUp.IsZero() {
		t.Fatalf("after two answers: %+v", st)
	}

	// 1C's own refusal of one request: 1C is up.
	s.Faults.Add(1, sim.Fault{Op: "find", Status: 422})
	if _, err := c.FindOrders(ctx, "site:1"); err == nil {
		t.Fatal("a 422 find succeeded")
	}
	wantValue(t, m, 1, "ordersync_onec_request_duration_seconds", "endpoint", "find", "outcome", "permanent")
	wantValue(t, m, 1, "ordersync_onec_up")

	// Down: refused connections.
	if err := s.Down(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Ping(ctx); err == nil {
		t.Fatal("a ping of a 1C that is down succeeded")
	}
	wantValue(t, m, 1, "ordersync_onec_request_duration_seconds", "endpoint", "ping", "outcome", "transient")
	wantValue(t, m, 0, "ordersync_onec_up")
	st := m.OneC()
	if !st.Known || st.Up || st.Endpoint != "ping" || st.Reason == "" || st.LastUp.IsZero() {
		t.Fatalf("down: %+v", st)
	}

	// A call its caller cut short says nothing of 1C.
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	c.Ping(cancelled)
	wantValue(t, m, 1, "ordersync_onec_request_duration_seconds", "endpoint", "ping", "outcome", "canceled")
	if got := m.OneC(); got != st {
		t.Fatalf("a cancelled call changed the status: %+v, was %+v", got, st)
	}

	if err := s.Up(); err != nil {
		t.Fatal(err)
	}
	// The publication missing: a configuration problem, 1C taken for down.
	s.SetMissing()
	if _, err := c.Ping(ctx); err == nil {
		t.Fatal("a ping of a missing publication succeeded")
	}
	wantValue(t, m, 1, "ordersync_onec_request_duration_seconds", "endpoint", "ping", "outcome", "configuration")
	wantValue(t, m, 0, "ordersync_onec_up")
	s.ClearMissing()
	if _, err := c.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	wantValue(t, m, 1, "ordersync_onec_up")
	wantValue(t, m, 2, "ordersync_onec_request_duration_seconds", "endpoint", "ping", "outcome", "ok")
}

// A ping whose deadline passes before 1C answers takes 1C for down.
func TestClientTimeoutIsDown(t *testing.T) {
	t.Parallel()
	s := startOneC(t)
	m := New("test")
	c := m.Client(newClient(t, s))
	s.Faults.Add(1, sim.Fault{Op: "ping", Kind: onecsim.Stall})
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	if _, err := c.Ping(ctx); err == nil {
		t.Fatal("a stalled ping succeeded")
	}
	wantValue(t, m, 1, "ordersync_onec_request_duration_seconds", "endpoint", "ping", "outcome", "timeout")
	if st := m.OneC(); st.Up || !strings.Contains(st.Reason, "deadline") {
		t.Fatalf("after a timeout: %+v", st)
	}
}

// The wrapped journal counts each attempt's outcome by kind, as the journal records
// it: done, retry, failed, and interrupted for a claim given up without a verdict.
func TestJournalCountsAttemptOutcomes(t *testing.T) {
	t.Parallel()
	db := openSQLite(t)
	m := New("test")
	store := m.Journal(db.Journal())
	ctx := t.Context()
	register := func(key, kind string) {
		t.Helper()
		if _, err := store.Register(ctx, journal.NewOperation{Key: key, Kind: kind, Source: "site", ExternalID: key,
			Payload: json.RawMessage(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	attempt := func(key string, f *journal.Finish) {
		t.Helper()
		c, err := store.ClaimKey(ctx, key, "w")
		if err != nil {
			t.Fatal(err)
		}
		if f != nil {
			if err := c.Finish(ctx, *f); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.Release(ctx); err != nil { // after Finish: a no-op, counted once
			t.Fatal(err)
		}
	}
	register("site:order:1:create", order.KindCreate)
	register("site:order:2:create", order.KindCreate)
	register("site:order:2:cancel", order.KindCancel)
	retry := &journal.Finish{Status: journal.StatusPending, Error: "503", NextAttemptAt: time.Now(), Class: journal.ClassTransient}
	attempt("site:order:1:create", retry)
	attempt("site:order:1:create", nil) // released: interrupted
	attempt("site:order:1:create", &journal.Finish{Status: journal.StatusDone, Result: &journal.Result{Ref: "r1", Number: "1"}})
	attempt("site:order:2:create", &journal.Finish{Status: journal.StatusFailed, Error: "422"})
	attempt("site:order:2:cancel", &journal.Finish{Status: journal.StatusDone, Result: &journal.Result{Ref: "r2"}})

	// What the journal holds, outcome by outcome, equals what was counted.
	want := map[[2]string]int{}
	for _, key := range []string{"site:order:1:create", "site:order:2:create", "site:order:2:cancel"} {
		d, err := db.Journal().Show(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range d.History {
			outcome := a.Outcome
			if outcome == "" {
				outcome = journal.OutcomeInterrupted // left open: marked so at the next claim
			}
			want[[2]string{d.Kind, string(outcome)}]++
		}
	}
	if want[[2]string{order.KindCreate, "interrupted"}] != 1 || len(want) != 5 {
		t.Fatalf("journal history: %v", want)
	}
	for _, kind := range []string{order.KindCreate, order.KindCancel} {
		for _, o := range []string{"done", "retry", "failed", "interrupted"} {
			wantValue(t, m, float64(want[[2]string{kind, o}]), "ordersync_attempts_total", "kind", kind, "outcome", o)
		}
	}
}

// A poll saved with an error counts one connector error; a successful one, or one
// cut short by a stop, does not.
func TestCursorsCountFailedPolls(t *testing.T) {
	t.Parallel()
	db := openSQLite(t)
	m := New("test")
	stopping := false
	cur := m.Cursors(db.Cursors(), func() bool { return stopping })
	ctx := t.Context()
	t0 := time.Now().UTC().Truncate(time.Second)
	t1, t2, t3 := t0.Add(time.Minute), t0.Add(2*time.Minute), t0.Add(3*time.Minute)
	save := func(c connectors.Cursor) {
		t.Helper()
		if err := cur.SaveCursor(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	m.InitConnectors("kaspi")
	wantValue(t, m, 0, "ordersync_connector_errors_total", "connector", "kaspi")
	save(connectors.Cursor{Connector: "kaspi", LastPollAt: &t0, LastError: "kaspi: 500"})              // never succeeded
	save(connectors.Cursor{Connector: "kaspi", LastPollAt: &t1, LastSuccessAt: &t1, Position: t1})     // success
	save(connectors.Cursor{Connector: "kaspi", LastPollAt: &t2, LastSuccessAt: &t1, LastError: "429"}) // failed
	stopping = true
	save(connectors.Cursor{Connector: "kaspi", LastPollAt: &t3, LastSuccessAt: &t1, LastError: "429"}) // cut by the stop
	wantValue(t, m, 2, "ordersync_connector_errors_total", "connector", "kaspi")
	if c, err := db.Cursors().Cursor(ctx, "kaspi"); err != nil || c.LastPollAt == nil || !c.LastPollAt.Equal(t3) {
		t.Fatalf("the cursor was not saved through: %+v %v", c, err)
	}
}

// The refresher sets the database's gauges from one round of queries: operations
// by kind, source and status (a status with none is 0), the outbox by destination,
// the enabled connectors' last success and poll.
func TestRefresherReadsTheDatabase(t *testing.T) {
	t.Parallel()
	db := openSQLite(t)
	m := New("test")
	ctx := t.Context()
	j := db.Journal()
	for _, key := range []string{"site:order:1:create", "site:order:2:create", "kaspi:order:3:create"} {
		if _, err := j.Register(ctx, journal.NewOperation{Key: key, Kind: order.KindCreate, Source: strings.Split(key, ":")[0],
			ExternalID: key, Payload: json.RawMessage(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	c, err := j.ClaimKey(ctx, "site:order:1:create", "w")
	if err != nil {
		t.Fatal(err)
	}
	occurred := time.Now()
	msg := func(dest, agg string) outbox.Message {
		return outbox.Message{Destination: dest, Event: outbox.Event{Type: outbox.OrderCreated, AggregateType: "order",
			AggregateID: agg, Data: json.RawMessage(`{}`), OccurredAt: occurred}}
	}
	if err := c.Finish(ctx, journal.Finish{Status: journal.StatusDone, Result: &journal.Result{Ref: "r", Number: "1"},
		Messages: []outbox.Message{msg("crm", "site:order:1"), msg("crm", "site:order:1b"), msg("erp", "site:order:1")}}); err != nil {
		t.Fatal(err)
	}
	c.Release(ctx)
	if _, err := db.Outbox().DisableDestination(ctx, "erp", "410 Gone"); err != nil {
		t.Fatal(err)
	}
	success := time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
	poll := success.Add(time.Minute)
	if err := db.Cursors().SaveCursor(ctx, connectors.Cursor{Connector: "kaspi", LastSuccessAt: &success, LastPollAt: &poll,
		LastError: "500"}); err != nil {
		t.Fatal(err)
	}
	if err := db.Cursors().SaveCursor(ctx, connectors.Cursor{Connector: "ozon", LastSuccessAt: &success, LastPollAt: &success}); err != nil {
		t.Fatal(err)
	}

	r := NewRefresher(m, Sources{Journal: j.(journal.Counter), Outbox: db.Outbox(), Cursors: db.Cursors(), Connectors: []string{"kaspi", "wb"}}, nil)
	if err := r.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	wantValue(t, m, 1, "ordersync_operations", "kind", order.KindCreate, "source", "site", "status", "pending")
	wantValue(t, m, 1, "ordersync_operations", "kind", order.KindCreate, "source", "site", "status", "done")
	wantValue(t, m, 0, "ordersync_operations", "kind", order.KindCreate, "source", "site", "status", "failed")
	wantValue(t, m, 1, "ordersync_operations", "kind", order.KindCreate, "source", "kaspi", "status", "pending")
	wantValue(t, m, 2, "ordersync_outbox_pending", "destination", "crm")
	wantValue(t, m, 0, "ordersync_outbox_dead", "destination", "crm")
	wantValue(t, m, 0, "ordersync_outbox_pending", "destination", "erp")
	wantValue(t, m, 1, "ordersync_outbox_dead", "destination", "erp")
	// The age of the oldest unsent event, from when it was written.
	if lag, _ := value(t, m, "ordersync_outbox_lag_seconds", "destination", "crm"); lag <= 0 || lag > 60 {
		t.Errorf("crm lag = %vs, want the age of events written just now", lag)
	}
	wantValue(t, m, 0, "ordersync_outbox_lag_seconds", "destination", "erp") // dead events are not lag
	wantValue(t, m, float64(success.Unix()), "ordersync_connector_last_success_timestamp_seconds", "connector", "kaspi")
	wantValue(t, m, float64(poll.Unix()), "ordersync_connector_last_poll_timestamp_seconds", "connector", "kaspi")
	wantValue(t, m, 0, "ordersync_connector_last_success_timestamp_seconds", "connector", "wb") // enabled, never polled
	wantValue(t, m, 0, "ordersync_connector_errors_total", "connector", "wb")
	if _, ok := value(t, m, "ordersync_connector_last_success_timestamp_seconds", "connector", "ozon"); ok {
		t.Error("ozon is not enabled, yet its last success is exported")
	}
	if ts, _ := value(t, m, "ordersync_metrics_refresh_timestamp_seconds"); time.Since(time.Unix(int64(ts), 0)) > time.Minute {
		t.Errorf("refresh timestamp %v is not now", ts)
	}
	if tot := r.Totals(); tot.Pending != 2 || tot.Failed != 0 || tot.OutboxPending != 2 || tot.OutboxDead != 1 ||
		tot.OutboxLag <= 0 || tot.At.IsZero() {
		t.Errorf("totals: %+v, want 2 pending, 0 failed, 2 events pending, 1 dead, a lag", tot)
	}

	// The operations change: the next refresh follows; a status emptied is 0.
	c, err = j.ClaimKey(ctx, "kaspi:order:3:create", "w")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Finish(ctx, journal.Finish{Status: journal.StatusFailed, Error: "422"}); err != nil {
		t.Fatal(err)
	}
	if err := r.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	wantValue(t, m, 0, "ordersync_operations", "kind", order.KindCreate, "source", "kaspi", "status", "pending")
	wantValue(t, m, 1, "ordersync_operations", "kind", order.KindCreate, "source", "kaspi", "status", "failed")
	good := r.Totals()
	if good.Pending != 1 || good.Failed != 1 {
		t.Errorf("totals: %+v, want 1 pending, 1 failed", good)
	}

	// A database that does not answer: an error, counted; the gauges keep their values.
	db.Close()
	if err := r.Refresh(ctx); err == nil {
		t.Fatal("a refresh of a closed database succeeded")
	}
	wantValue(t, m, 1, "ordersync_metrics_refresh_errors_total", "what", "operations")
	if got := r.Totals(); got != good {
		t.Errorf("a failed refresh changed the totals: %+v, was %+v", got, good)
	}
	wantValue(t, m, 1, "ordersync_operations", "kind", order.KindCreate, "source", "kaspi", "status", "failed")
}

// Run refreshes at once and then on its timer, never per scrape.
func TestRefresherRunsOnATimer(t *testing.T) {
	t.Parallel()
	m := New("test")
	counter := &countingCounter{}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		NewRefresher(m, Sources{Journal: counter}, nil).Run(ctx, 20*time.Millisecond)
	}()
	eventually.True(t, "3 refreshes at a 20ms interval", func() bool { return counter.calls.Load() >= 3 })
	cancel()
	<-done
	before := counter.calls.Load()
	for range 5 {
		if _, err := m.Registry().Gather(); err != nil {
			t.Fatal(err)
		}
	}
	if counter.calls.Load() != before {
		t.Fatal("a scrape queried the journal")
	}
}

// The webhook server's counters are summed over their reasons; the relays' over
// the relays.
func TestInboxAndRelayCounters(t *testing.T) {
	t.Parallel()
	m := New("test")
	if _, ok := value(t, m, "ordersync_inbox_deliveries_total", "source", "site", "outcome", "processed"); ok {
		t.Fatal("inbox deliveries exported before a server is set")
	}
	m.SetInbox(func() map[server.StatKey]uint64 {
		return map[server.StatKey]uint64{
			{Source: "site", Outcome: "processed"}:                         3,
			{Source: "site", Outcome: "rejected", Reason: "bad_signature"}: 2,
			{Source: "site", Outcome: "rejected", Reason: "bad_json"}:      1,
			{Source: "unknown", Outcome: "rejected", Reason: "no_source"}:  4,
		}
	})
	wantValue(t, m, 3, "ordersync_inbox_deliveries_total", "source", "site", "outcome", "processed")
	wantValue(t, m, 3, "ordersync_inbox_deliveries_total", "source", "site", "outcome", "rejected")
	wantValue(t, m, 4, "ordersync_inbox_deliveries_total", "source", "unknown", "outcome", "rejected")
	m.AddRelay(func() outbox.RelayStats { return outbox.RelayStats{Sent: 5, Retried: 1} })
	m.AddRelay(func() outbox.RelayStats { return outbox.RelayStats{Sent: 2, Dead: 1} })
	wantValue(t, m, 7, "ordersync_outbox_deliveries_total", "outcome", "sent")
	wantValue(t, m, 1, "ordersync_outbox_deliveries_total", "outcome", "retried")
	wantValue(t, m, 1, "ordersync_outbox_deliveries_total", "outcome", "dead")
}

// The pinger pings at once and then every interval.
func TestPinger(t *testing.T) {
	t.Parallel()
	s := startOneC(t)
	m := New("test")
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		Pinger(ctx, m.Client(newClient(t, s)), 20*time.Millisecond, time.Second)
	}()
	eventually.True(t, "3 pings at a 20ms interval", func() bool {
		n, _ := value(t, m, "ordersync_onec_request_duration_seconds", "endpoint", "ping", "outcome", "ok")
		return n >= 3
	})
	cancel()
	<-done
	if !m.OneC().Up {
		t.Fatal("1C answers the pings, yet it is not up")
	}
}

type countingCounter struct{ calls atomic.Int64 }

func (c *countingCounter) Counts(context.Context) ([]journal.Count, error) {
	c.calls.Add(1)
	return nil, nil
}
