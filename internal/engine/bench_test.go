package engine_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ordersync/ordersync/internal/engine"
	"github.com/ordersync/ordersync/internal/eventually"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/onec"
	"github.com/ordersync/ordersync/internal/onec/httpservice"
	"github.com/ordersync/ordersync/internal/sim/onecsim"
	"github.com/ordersync/ordersync/internal/store/postgres"
	"github.com/ordersync/ordersync/internal/store/sqlite"
	"github.com/ordersync/ordersync/internal/testdb"
)

var benchSeq atomic.Int64

// benchStore is a journal on one backend, with a round-trip counter on PostgreSQL.
type benchStore struct {
	journal journal.Store
	rt      *testdb.RoundTrips // nil on SQLite: no network between ordersync and it
	pg      *postgres.DB       // nil on SQLite
	sqlite  *sqlite.DB         // nil on PostgreSQL
}

// analyze gathers the statistics of the tables a benchmark filled, as a production
// server's autovacuum would have them before the figures are taken.
func (s benchStore) analyze(b *testing.B) {
	b.Helper()
	var err error
	switch {
	case s.pg != nil:
		_, err = s.pg.Pool().Exec(context.Background(), `ANALYZE`)
	case s.sqlite != nil:
		_, err = s.sqlite.SQL().ExecContext(context.Background(), `ANALYZE`)
	}
	if err != nil {
		b.Fatal(err)
	}
}

func newBenchStore(b *testing.B, backend string, concurrency int) benchStore {
	b.Helper()
	ctx := context.Background()
	switch backend {
	case "postgres":
		rt := &testdb.RoundTrips{}
		db, err := postgres.Open(ctx, postgres.Config{URL: testdb.URL(b), MaxConns: int32(2*concurrency + 4), ConfigurePool: rt.Install})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(db.Close)
		if _, err := db.Migrate(ctx); err != nil {
			b.Fatal(err)
		}
		return benchStore{journal: db.Journal(), rt: rt, pg: db}
	case "sqlite":
		db, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(b.TempDir(), "ordersync.db")})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { db.Close() })
		if _, err := db.Migrate(ctx); err != nil {
			b.Fatal(err)
		}
		return benchStore{journal: db.Journal(), sqlite: db}
	}
	b.Fatalf("unknown backend %q", backend)
	return benchStore{}
}

// benchOneC is a simulated 1C with the given latencies and a client to it.
func benchOneC(b *testing.B, latency map[string]time.Duration, concurrency int) (*onecsim.OneC, *httpservice.Client) {
	b.Helper()
	s := onecsim.New(onecsim.Options{OpLatency: latency})
	if err := s.Start("127.0.0.1:0"); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(s.Close)
	c, err := httpservice.New(httpservice.Config{BaseURL: s.URL(), MaxConcurrency: concurrency, SessionReuse: true, Timeout: 10 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	return s, c
}

var backends = []string{"postgres", "sqlite"}

func benchOrders(b *testing.B, store journal.Store, n int) []string {
	b.Helper()
	keys := make([]string, n)
	run := benchSeq.Add(1)
	for i := range n {
		o := testOrder(fmt.Sprintf("B%d-%06d", run, i))
		if _, err := store.Register(context.Background(), journal.CreateOrder(o)); err != nil {
			b.Fatal(err)
		}
		keys[i] = o.CreateKey()
	}
	return keys
}

// BenchmarkJournalPath is one order through the whole journal path, one at a time,
// against a 1C that answers at once: register, claim under the row (or key) lock,
// attempt row, find and create in 1C, finish. It reports orders/s, and on
// PostgreSQL the database round trips each created order cost, and where an order's
// time goes: each step's mean (register, claim, find, the wait for the attempt row
// before the create, create, verdict; the rest is the engine's own). On both
// backends.
//
// The journal holds a history of done orders first, with its statistics gathered,
// as a shop's has after its first day: the planner then sees the tables it will
// see in production, not the empty ones that statistics taken at the start would
// describe for ever (a server whose autovacuum is off never takes them again).
// make bench runs it at -benchtime 1x; it measures at least journalPathOrders
// orders whatever b.N.
func BenchmarkJournalPath(b *testing.B) {
	const history, journalPathOrders = 2000, 1000
	for _, backend := range backends {
		b.Run("backend="+backend, func(b *testing.B) {
			st := newBenchStore(b, backend, 4)
			s, c := benchOneC(b, nil, 4)
			ctx := context.Background()
			benchOrders(b, st.journal, history)
			warm := engine.New(st.journal, c, engine.Config{Workers: 1})
			for range history {
				if ran, err := warm.RunDue(ctx); !ran || err != nil {
					b.Fatal(ran, err)
				}
			}
			st.analyze(b)
			var t steps
			js := timedStore{st.journal, &t}
			e := engine.New(js, timedOneC{c, &t}, engine.Config{Workers: 1})
			run := benchSeq.Add(1)
			n := max(b.N, journalPathOrders)
			if st.rt != nil {
				st.rt.Reset()
			}
			b.ResetTimer()
			start := time.Now()
			for i := range n {
				o := testOrder(fmt.Sprintf("J%d-%06d", run, i))
				if _, err := js.Register(ctx, journal.CreateOrder(o)); err != nil {
					b.Fatal(err)
				}
				if ran, err := e.RunDue(ctx); !ran || err != nil {
					b.Fatal(ran, err)
				}
			}
			elapsed := time.Since(start)
			b.StopTimer()
			if got := s.Count(); got != history+n {
				b.Fatalf("1C holds %d orders, want %d", got, history+n)
			}
			if st.rt != nil {
				b.ReportMetric(float64(st.rt.Count())/float64(n), "db-roundtrips/order")
			}
			t.report(b, n)
			b.ReportMetric(float64(n)/elapsed.Seconds(), "orders/s")
		})
	}
}

// BenchmarkEngineThroughput drains registered orders with the engine's workers, as
// `ordersync run` does, against a 1C with the given latencies. Every order costs a
// find and a create; ideal is what 1C's latency alone allows at that concurrency.
func BenchmarkEngineThroughput(b *testing.B) {
	const slow = 200 * time.Millisecond
	for _, tc := range []struct {
		name    string
		latency map[string]time.Duration
		workers int
	}{
		{"latency=0/max_concurrency=4", nil, 4},
		{"latency=0/max_concurrency=8", nil, 8},
		{"create=200ms,find=0/max_concurrency=8", map[string]time.Duration{"create": slow}, 8},
		{"create=200ms,find=200ms/max_concurrency=8", map[string]time.Duration{"create": slow, "find": slow}, 8},
	} {
		for _, backend := range backends {
			b.Run("backend="+backend+"/"+tc.name, func(b *testing.B) {
				st := newBenchStore(b, backend, tc.workers)
				s, c := benchOneC(b, tc.latency, tc.workers)
				perOrder := tc.latency["find"] + tc.latency["create"]
				// Enough orders that the engine's start and the last, partly idle round
				// hardly count: make bench runs this at -benchtime 1x, where b.N alone
				// (one order) measured the start-up, 20 to 40 ms.
				n := max(b.N, 250*tc.workers)
				if perOrder > 0 {
					n = max(b.N, 40*tc.workers)
				}
				benchOrders(b, st.journal, n)
				st.analyze(b)
				elapsed := drainTimed(b, st.journal, c, tc.workers, n)
				if got := s.Count(); got != n {
					b.Fatalf("1C holds %d orders, want %d", got, n)
				}
				rate := float64(n) / elapsed.Seconds()
				b.ReportMetric(rate, "orders/s")
				if perOrder > 0 {
					ideal := float64(tc.workers) / perOrder.Seconds()
					b.ReportMetric(100*rate/ideal, "%-of-ideal")
				}
			})
		}
	}
}

// drainTimed starts an engine of workers on store and client and times it
// (the benchmark's timer running) until n operations are done.
func drainTimed(b *testing.B, store journal.Store, client onec.Client, workers, n int) time.Duration {
	b.Helper()
	e := engine.New(store, client, engine.Config{Workers: workers, PollInterval: time.Millisecond})
	b.ResetTimer()
	start := time.Now()
	e.Start(context.Background())
	eventually.True(b, "every order done", func() bool { return e.Stats().Done >= int64(n) })
	elapsed := time.Since(start)
	b.StopTimer()
	e.Stop()
	return elapsed
}

// steps times each step of the journal path: the store calls the engine makes and
// the requests it sends 1C, summed over the orders measured.
type steps struct {
	register, claim, find, opened, create, verdict atomic.Int64
}

// since adds the time since start to d.
func since(d *atomic.Int64, start time.Time) { d.Add(int64(time.Since(start))) }

func (s *steps) report(b *testing.B, n int) {
	for _, m := range []struct {
		name string
		d    *atomic.Int64
	}{
		{"register", &s.register}, {"claim", &s.claim}, {"find", &s.find},
		{"attempt-wait", &s.opened}, {"create", &s.create}, {"verdict", &s.verdict},
	} {
		b.ReportMetric(float64(m.d.Load())/float64(n)/1e6, m.name+"-ms/order")
	}
}

// timedStore is a journal whose registrations, claims and verdicts are timed.
type timedStore struct {
	journal.Store
	t *steps
}

func (s timedStore) Register(ctx context.Context, op journal.NewOperation) (journal.Registration, error) {
	defer since(&s.t.register, time.Now())
	return s.Store.Register(ctx, op)
}

func (s timedStore) ClaimDue(ctx context.Context, worker string) (journal.Claim, error) {
	start := time.Now()
	c, err := s.Store.ClaimDue(ctx, worker)
	since(&s.t.claim, start)
	if err != nil {
		return c, err
	}
	return timedClaim{c, s.t}, nil
}

// timedClaim times the wait for the attempt row before the create, and the verdict.
type timedClaim struct {
	journal.Claim
	t *steps
}

func (c timedClaim) Opened(ctx context.Context) error {
	defer since(&c.t.opened, time.Now())
	return c.Claim.Opened(ctx)
}

func (c timedClaim) Finish(ctx context.Context, f journal.Finish) error {
	defer since(&c.t.verdict, time.Now())
	return c.Claim.Finish(ctx, f)
}

// timedOneC is a 1C client whose finds and creates are timed.
type timedOneC struct {
	onec.Client
	t *steps
}

func (c timedOneC) FindOrders(ctx context.Context, externalID string) ([]onec.Order, error) {
	defer since(&c.t.find, time.Now())
	return c.Client.FindOrders(ctx, externalID)
}

func (c timedOneC) CreateOrder(ctx context.Context, req onec.CreateOrder) (onec.Created, error) {
	defer since(&c.t.create, time.Now())
	return c.Client.CreateOrder(ctx, req)
}
