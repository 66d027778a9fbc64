package main

// The fault suite: the service against a PostgreSQL that restarts under it, and
// against connections that a TCP fault proxy resets, stalls or closes. Each case
// counts the orders in the simulated 1C and the events at the receiving end.

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ordersync/ordersync/internal/eventually"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/sim"
	"github.com/ordersync/ordersync/internal/sim/onecsim"
	"github.com/ordersync/ordersync/internal/testdb"
)

// newEnvOnURL is newEnv on the database at url (a throwaway cluster of the test's).
func newEnvOnURL(t *testing.T, url string, opts onecsim.Options) *env {
	t.Helper()
	e := newEnvOn(t, "sqlite", opts, false)
	for i, kv := range e.environ {
		if strings.HasPrefix(kv, "STATE_DIRECTORY=") {
			e.environ[i] = "ORDERSYNC_DATABASE__URL=" + url
		}
	}
	e.dbURL, e.stateDir = url, ""
	if _, stderr, code := e.cli("", "migrate"); code != 0 {
		t.Fatalf("migrate: exit %d: %s", code, stderr)
	}
	return e
}

// statusCounts counts the journal's operations by status, tolerating a database
// that is restarting (ok false).
func statusCounts(store journal.Store) (counts map[journal.Status]int, ok bool) {
	ops, err := store.List(context.Background(), journal.Filter{Limit: 100000})
	if err != nil {
		return nil, false
	}
	counts = map[journal.Status]int{}
	for _, op := range ops {
		counts[op.Status]++
	}
	return counts, true
}

// PostgreSQL restarted (immediate shutdown, as a crash or a failover) while the
// service works: it stays up, reconnects by itself, every order is in 1C exactly
// once, no operation is stuck, and LISTEN is back (the relay polls only once an hour
// here, so the events after the restart arrive only through NOTIFY).
func TestPostgresRestartedMidRun(t *testing.T) {
	t.Parallel()
	cluster := testdb.StartCluster(t)
	e := newEnvOnURL(t, cluster.URL(), onecsim.Options{Latency: 50 * time.Millisecond})
	sink := e.withSink()
	e.environ = append(e.environ,
		// A claim whose session the restart cut is taken over 3 × timeout + settle_time
		// after it started.
		"ORDERSYNC_ONEC__TIMEOUT=1s", "ORDERSYNC_ONEC__SETTLE_TIME=2s",
		"ORDERSYNC_RELAY__POLL_INTERVAL=1h", "ORDERSYNC_RELAY__MAX_ATTEMPTS=50")
	const n = 40
	var first, second strings.Builder
	for i := range n {
		b := &first
		if i >= n/2 {
			b = &second
		}
		fmt.Fprintln(b, orderJSON(fmt.Sprintf("PG-%03d", i), "SKU-1", "1", "10.00"))
	}
	store := e.store()

	svc := e.startService()
	eventually.True(t, "engine started in the log", func() bool { return strings.Contains(svc.stderr.String(), "engine started") })
	if _, stderr, code := e.cli(first.String(), "order", "import"); code != 0 {
		t.Fatalf("import: %d %s", code, stderr)
	}
	eventually.True(t, "e.onec.Count() >= 5", func() bool { return e.onec.Count() >= 5 })

	restarted := time.Now()
	cluster.Restart()
	back := time.Since(restarted)
	if _, stderr, code := e.cli(second.String(), "order", "import"); code != 0 {
		t.Fatalf("import after the restart: %d %s", code, stderr)
	}
	var recovered time.Duration
	before := e.onec.Count()
	eventually.True(t, "the service to recover from the database outage", func() bool {
		if recovered == 0 && e.onec.Count() > before {
			recovered = time.Since(restarted)
		}
		c, ok := statusCounts(store)
		return ok && c[journal.StatusDone] == n
	})
	allDone := time.Since(restarted)
	eventually.True(t, "sink.Unique() >= n", func() bool { return sink.Unique() >= n })
	delivered := time.Since(restarted)
	select {
	case <-svc.done:
		t.Fatalf("the service exited during the restart; its log:\n%s", svc.stderr.String())
	default:
	}
	svc.signal(syscall.SIGTERM)
	if code := svc.wait(30 * time.Second); code != 0 {
		t.Fatalf("SIGTERM after the restart: exit %d; log:\n%s", code, svc.stderr.String())
	}
	for i := range n {
		id := fmt.Sprintf("site:PG-%03d", i)
		if got := e.onec.CountExternal(id); got != 1 {
			t.Fatalf("1C holds %d orders %s, want 1", got, id)
		}
	}
	c, _ := statusCounts(store)
	t.Logf("PostgreSQL back after %s; first order created after it %s, all %d done %s, all %d events delivered %s after the restart (%v; %d deliveries)",
		back.Round(time.Millisecond), recovered.Round(time.Millisecond), n, allDone.Round(time.Millisecond),
		n, delivered.Round(time.Millisecond), c, sink.Count())
}

// viaProxy returns raw with its host:port replaced by a fault proxy's in front of it.
func viaProxy(t *testing.T, raw string, seed uint64) (string, *sim.TCPProxy) {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	p, err := sim.NewTCPProxy(u.Host, seed)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	u.Host = p.Addr()
	return u.String(), p
}

// A TCP fault proxy between the service and 1C, and between the service and
// PostgreSQL, resets connections in mid-answer, stalls them past the timeout, and
// closes them right after the request was sent: every order is in 1C exactly once,
// and every event reaches the receiver at least once, in lane order.
func TestFaultProxyBetweenTheServiceAnd1CAndPostgres(t *testing.T) {
	t.Parallel()
	e := newEnv(t, onecsim.Options{Latency: 20 * time.Millisecond}, true)
	sink := e.withSink()
	dbURL, dbProxy := viaProxy(t, e.dbURL, 1)
	onecURL, onecProxy := viaProxy(t, e.onec.URL(), 2)
	for i, kv := range e.environ {
		switch {
		case strings.HasPrefix(kv, "ORDERSYNC_DATABASE__URL="):
			e.environ[i] = "ORDERSYNC_DATABASE__URL=" + dbURL
		case strings.HasPrefix(kv, "ORDERSYNC_ONEC__BASE_URL="):
			e.environ[i] = "ORDERSYNC_ONEC__BASE_URL=" + onecURL
		}
	}
	e.environ = append(e.environ, "ORDERSYNC_ONEC__TIMEOUT=1s", "ORDERSYNC_ONEC__SETTLE_TIME=2s",
		"ORDERSYNC_RELAY__MAX_ATTEMPTS=100", "ORDERSYNC_RELAY__LEASE=30s")
	const n = 60
	var input strings.Builder
	for i := range n {
		fmt.Fprintln(&input, orderJSON(fmt.Sprintf("FP-%03d", i), "SKU-1", "1", "10.00"))
	}
	if _, stderr, code := e.cli(input.String(), "order", "import"); code != 0 {
		t.Fatalf("import: %d %s", code, stderr)
	}
	store := e.store() // straight to the database, not through the proxy
	svc := e.startService()
	eventually.True(t, "engine started in the log", func() bool { return strings.Contains(svc.stderr.String(), "engine started") })
	// Chances per chunk of the stream (an HTTP answer, a query's reply).
	onecProxy.SetFaults(sim.ProxyFaults{ResetMidAnswer: 0.06, Stall: 0.06, StallFor: 1500 * time.Millisecond, CloseAfterRequest: 0.06})
	dbProxy.SetFaults(sim.ProxyFaults{ResetMidAnswer: 0.01, Stall: 0.01, StallFor: 1500 * time.Millisecond, CloseAfterRequest: 0.01})

	eventually.True(t, "every operation done through the faults", func() bool {
		c, ok := statusCounts(store)
		return ok && c[journal.StatusDone] == n
	})
	onecProxy.SetFaults(sim.ProxyFaults{})
	dbProxy.SetFaults(sim.ProxyFaults{})
	eventually.True(t, "sink.Unique() >= n", func() bool { return sink.Unique() >= n })
	select {
	case <-svc.done:
		t.Fatalf("the service exited under the faults; its log:\n%s", svc.stderr.String())
	default:
	}
	svc.signal(syscall.SIGTERM)
	if code := svc.wait(60 * time.Second); code != 0 {
		t.Logf("SIGTERM: exit %d", code)
	}
	for i := range n {
		id := fmt.Sprintf("site:FP-%03d", i)
		if got := e.onec.CountExternal(id); got != 1 {
			t.Fatalf("1C holds %d orders %s, want 1", got, id)
		}
	}
	for agg, seqs := range sink.PerAggregate() {
		for i := 1; i < len(seqs); i++ {
			if seqs[i] < seqs[i-1] {
				t.Fatalf("lane %s received sequences %v: out of order", agg, seqs)
			}
		}
	}
	t.Logf("1C proxy %+v, PostgreSQL proxy %+v; %d events, %d deliveries", onecProxy.Stats(), dbProxy.Stats(), sink.Unique(), sink.Count())
	if s := onecProxy.Stats(); s.Resets+s.Stalls+s.Closes == 0 {
		t.Fatal("the 1C proxy injected no fault: the test tested nothing")
	}
	if s := dbProxy.Stats(); s.Resets+s.Stalls+s.Closes == 0 {
		t.Fatal("the PostgreSQL proxy injected no fault: the test tested nothing")
	}
}

// A database that stops answering (every answer held back) while the service works:
// SIGTERM still ends the service — every write on the way out has a deadline — and
// 1C still holds each order it created once.
func TestShutdownWhenTheDatabaseStopsAnswering(t *testing.T) {
	t.Parallel()
	e := newEnv(t, onecsim.Options{Latency: 20 * time.Millisecond}, true)
	dbURL, dbProxy := viaProxy(t, e.dbURL, 3)
	for i, kv := range e.environ {
		if strings.HasPrefix(kv, "ORDERSYNC_DATABASE__URL=") {
			e.environ[i] = "ORDERSYNC_DATABASE__URL=" + dbURL
		}
	}
	const shutdown = 2 * time.Second
	e.environ = append(e.environ, "ORDERSYNC_WORKER__SHUTDOWN_TIMEOUT="+shutdown.String(),
		"ORDERSYNC_ONEC__TIMEOUT=1s", "ORDERSYNC_ONEC__SETTLE_TIME=2s")
	var input strings.Builder
	for i := range 30 {
		fmt.Fprintln(&input, orderJSON(fmt.Sprintf("HANG-%03d", i), "SKU-1", "1", "10.00"))
	}
	if _, stderr, code := e.cli(input.String(), "order", "import"); code != 0 {
		t.Fatalf("import: %d %s", code, stderr)
	}
	svc := e.startService()
	eventually.True(t, "e.onec.Count() >= 3", func() bool { return e.onec.Count() >= 3 })
	dbProxy.SetFaults(sim.ProxyFaults{Stall: 1, StallFor: 10 * time.Minute}) // the database answers nothing more
	eventually.True(t, "dbProxy.Stats().Stalls >= 1", func() bool { return dbProxy.Stats().Stalls >= 1 })
	stopped := time.Now()
	svc.signal(syscall.SIGTERM)
	code := svc.wait(60 * time.Second) // fails the test if the service hangs
	took := time.Since(stopped)
	t.Logf("exit %d %s after SIGTERM with the database silent (worker.shutdown_timeout %s)", code, took.Round(time.Millisecond), shutdown)
	// The calls in flight get worker.shutdown_timeout, their verdicts' writes 5s (a
	// floor), the pool's close the shutdown timeout again: 9s at most. The bound
	// catches a wait for the driver's own 15s close per connection (seen: 17s with a
	// 2s shutdown timeout before the close was bounded) and leaves a busy machine's
	// timers 5s.
	if took > 2*shutdown+10*time.Second {
		t.Fatalf("the service took %s to stop with the database silent, want within a few worker.shutdown_timeout (%s); log:\n%s",
			took, shutdown, svc.stderr.String())
	}
	for i := range 30 {
		if got := e.onec.CountExternal(fmt.Sprintf("site:HANG-%03d", i)); got > 1 {
			t.Fatalf("1C holds %d orders site:HANG-%03d", got, i)
		}
	}
}
