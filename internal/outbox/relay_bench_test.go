package outbox_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/ordersync/ordersync/internal/eventually"
	"github.com/ordersync/ordersync/internal/outbox"
	"github.com/ordersync/ordersync/internal/outbox/webhook"
	"github.com/ordersync/ordersync/internal/sim/webhooksim"
	"github.com/ordersync/ordersync/internal/stdwebhook"
	"github.com/ordersync/ordersync/internal/store/postgres"
)

// fill enqueues n events, one lane each (one order.created per order), in
// transactions of 500.
func (w *world) fill(b *testing.B, n int, dest string) {
	b.Helper()
	run := uuid.NewString()[:8]
	for start := 0; start < n; start += 500 {
		var batch []outbox.Message
		for i := start; i < min(start+500, n); i++ {
			batch = append(batch, msg(dest, fmt.Sprintf("site:order:%s-%d", run, i), i))
		}
		w.enqueue(batch...)
	}
}

// BenchmarkRelayThroughput drains a backlog of one-event lanes through one running
// relay (Start: rounds back to back, as the service runs them), to an in-process
// no-op destination and to a local HTTP sink that checks every signature, for
// several batch sizes. The outbox is analysed before each drain, as a production
// server's autovacuum would have it. It reports events/s, the WAL written per event
// (the server's, so other work on it counts too) and the share of the outbox's
// updates that were HOT.
func BenchmarkRelayThroughput(b *testing.B) {
	sink, err := webhooksim.New(webhooksim.Options{Secrets: []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}})
	if err != nil {
		b.Fatal(err)
	}
	if err := sink.Start("127.0.0.1:0"); err != nil {
		b.Fatal(err)
	}
	defer sink.Close()
	hook, err := webhook.New(webhook.Config{Name: "sink", URL: sink.URL(),
		Secrets: []stdwebhook.Secret{stdwebhook.MustParseSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")}})
	if err != nil {
		b.Fatal(err)
	}
	noop := outbox.PublisherFunc(func(context.Context, outbox.Record) error { return nil })
	for _, dest := range []struct {
		name string
		pub  outbox.Publisher
	}{{"noop", noop}, {"http", hook}} {
		for _, batch := range []int{1, 50, 100, 200, 500} {
			b.Run(fmt.Sprintf("dest=%s/batch=%d", dest.name, batch), func(b *testing.B) {
				w := newWorld(b)
				// ORDERSYNC_BENCH_RELAY_EVENTS sets the backlog a drain works off
				// (default 5000): a longer one weighs the relay's start less.
				events := 5000
				if v, err := strconv.Atoi(os.Getenv("ORDERSYNC_BENCH_RELAY_EVENTS")); err == nil && v > 0 {
					events = v
				}
				cfg := relayConfig(map[string]outbox.Publisher{dest.name: dest.pub})
				cfg.BatchSize = batch
				cfg.Concurrency = 16
				// ORDERSYNC_BENCH_RELAY_CLAIMERS sets the claim loops (default: the
				// relay's).
				if v, err := strconv.Atoi(os.Getenv("ORDERSYNC_BENCH_RELAY_CLAIMERS")); err == nil && v > 0 {
					cfg.Claimers = v
				}
				ctx := context.Background()
				var (
					elapsed     time.Duration
					wal         float64
					upd, hotUpd int64
				)
				for range b.N {
					b.StopTimer()
					w.fill(b, events, dest.name)
					if _, err := w.db.Pool().Exec(ctx, `ANALYZE outbox`); err != nil {
						b.Fatal(err)
					}
					u0, h0 := w.updates(b, 0)
					lsn0 := w.walLSN(b)
					relay := outbox.NewRelay(w.db.Outbox(), cfg)
					b.StartTimer()
					start := time.Now()
					if err := relay.Start(ctx); err != nil {
						b.Fatal(err)
					}
					// The drain's end is the measurement's: polled every 100µs, not at
					// eventually's few milliseconds, which would weigh on a short drain.
					for deadline := time.Now().Add(time.Minute); relay.Stats().Sent < int64(events); {
						if time.Now().After(deadline) {
							b.Fatalf("%d of %d sent after a minute", relay.Stats().Sent, events)
						}
						time.Sleep(100 * time.Microsecond)
					}
					relay.Stop()
					elapsed += time.Since(start)
					b.StopTimer()
					wal += w.walSince(b, lsn0)
					u1, h1 := w.updates(b, u0+2*int64(events))
					upd, hotUpd = upd+u1-u0, hotUpd+h1-h0
					b.StartTimer()
				}
				b.ReportMetric(float64(b.N*events)/elapsed.Seconds(), "events/s")
				b.ReportMetric(wal/float64(b.N*events), "WAL-B/event")
				if upd > 0 {
					b.ReportMetric(100*float64(hotUpd)/float64(upd), "HOT-%")
				}
			})
		}
	}
}

// walLSN is the server's current WAL position.
func (w *world) walLSN(b *testing.B) string {
	b.Helper()
	var lsn string
	if err := w.db.Pool().QueryRow(context.Background(), `SELECT pg_current_wal_lsn()::text`).Scan(&lsn); err != nil {
		b.Fatal(err)
	}
	return lsn
}

// walSince is how many bytes of WAL the server has written since lsn.
func (w *world) walSince(b *testing.B, lsn string) float64 {
	b.Helper()
	var n float64
	if err := w.db.Pool().QueryRow(context.Background(), `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)`, lsn).Scan(&n); err != nil {
		b.Fatal(err)
	}
	return n
}

// updates reads the outbox's update counters (all, HOT), waiting until the first
// reaches atLeast: backends report their counters to the statistics a moment after
// their transactions end (an idle one within about ten seconds).
func (w *world) updates(b *testing.B, atLeast int64) (upd, hot int64) {
	b.Helper()
	got := eventually.Value(b, fmt.Sprintf("the outbox's update counter to reach %d", atLeast), func() ([2]int64, bool) {
		var c [2]int64
		if err := w.db.Pool().QueryRow(context.Background(), `SELECT pg_stat_force_next_flush()`).Scan(new(any)); err != nil {
			b.Fatal(err)
		}
		if err := w.db.Pool().QueryRow(context.Background(), `SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables
			WHERE relid = 'outbox'::regclass`).Scan(&c[0], &c[1]); err != nil {
			b.Fatal(err)
		}
		return c, c[0] >= atLeast
	})
	return got[0], got[1]
}

// BenchmarkRelayLag commits 1,000 events/s, one per transaction as the engine does,
// with a relay woken by LISTEN/NOTIFY, and reports the delay from commit to
// delivery at p50 and p99.
func BenchmarkRelayLag(b *testing.B) {
	for _, listen := range []bool{true, false} {
		b.Run(fmt.Sprintf("listen=%v", listen), func(b *testing.B) {
			w := newWorld(b)
			var (
				mu        sync.Mutex
				committed = map[string]time.Time{}
				lags      []time.Duration
			)
			pub := outbox.PublisherFunc(func(_ context.Context, r outbox.Record) error {
				now := time.Now()
				mu.Lock()
				if t, ok := committed[r.EventID]; ok {
					lags = append(lags, now.Sub(t))
				}
				mu.Unlock()
				return nil
			})
			cfg := relayConfig(map[string]outbox.Publisher{"crm": pub})
			cfg.PollInterval = 100 * time.Millisecond // the fallback; LISTEN should make it irrelevant
			if listen {
				cfg.Listener = w.db.Listener()
			}
			relay := outbox.NewRelay(w.db.Outbox(), cfg)
			relay.Start(context.Background())
			defer relay.Stop()
			if listen {
				w.waitListening(b)
			}

			const rate = 1000
			n := max(b.N, 3*rate) // three seconds at least
			tick := time.NewTicker(time.Second / rate)
			defer tick.Stop()
			ctx := context.Background()
			var late atomic.Int64
			b.ResetTimer()
			for i := range n {
				<-tick.C
				id := uuid.NewString()
				tx, err := w.db.Pool().Begin(ctx)
				if err != nil {
					b.Fatal(err)
				}
				m := msg("crm", fmt.Sprintf("site:order:%d", i), i)
				m.ID = id
				if err := postgres.Enqueue(ctx, tx, m); err != nil {
					b.Fatal(err)
				}
				mu.Lock() // recorded before the commit: a delivery cannot beat its own commit
				committed[id] = time.Now()
				mu.Unlock()
				if err := tx.Commit(ctx); err != nil {
					b.Fatal(err)
				}
				if len(tick.C) > 0 {
					late.Add(1)
				}
			}
			eventually.True(b, "every event delivered", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return len(lags) == n
			})
			b.StopTimer()
			mu.Lock()
			defer mu.Unlock()
			if len(lags) != n {
				b.Fatalf("%d of %d events delivered", len(lags), n)
			}
			slices.Sort(lags)
			b.ReportMetric(float64(lags[len(lags)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lags[len(lags)*99/100].Microseconds())/1000, "p99-ms")
			b.ReportMetric(float64(late.Load()), "ticks-behind")
		})
	}
}

// waitListening waits until a session of the world's schema has LISTEN in place:
// its last statement a LISTEN, finished.
func (w *world) waitListening(b *testing.B) {
	b.Helper()
	eventually.True(b, "the relay's LISTEN in place", func() bool {
		var n int
		if err := w.db.Pool().QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE application_name = current_setting('application_name') AND state = 'idle' AND query LIKE 'LISTEN%'`).Scan(&n); err != nil {
			b.Fatal(err)
		}
		return n > 0
	})
}
