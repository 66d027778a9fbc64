package postgres

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ordersync/ordersync/internal/outbox"
	"github.com/ordersync/ordersync/internal/testdb"
)

func openBenchDB(b *testing.B, cfg Config) *DB {
	b.Helper()
	cfg.URL = testdb.URL(b)
	db, err := Open(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(db.Close)
	if _, err := db.Migrate(context.Background()); err != nil {
		b.Fatal(err)
	}
	return db
}

// BenchmarkClaim measures one Claim of 100 lane heads over 1,000 unsent events in 1,000
// lanes while the table holds 10,000 or 1,000,000 sent events: the partial indexes over
// unsent rows keep the two close. Between claims, off the clock, the relay's part is
// played: the claimed events are completed as sent and 100 new ones are enqueued, so
// the backlog stays at 1,000 and each claim takes fresh rows. The plan of the first
// claim, with buffers, is in the log.
func BenchmarkClaim(b *testing.B) {
	for _, sent := range []int{10_000, 1_000_000} {
		b.Run(fmt.Sprintf("sent=%d", sent), func(b *testing.B) { benchClaim(b, sent) })
	}
}

const (
	benchUnsent = 1000
	benchLimit  = 100
	benchLease  = time.Minute
)

func benchClaim(b *testing.B, sent int) {
	ctx := context.Background()
	db := openBenchDB(b, Config{})

	start := time.Now()
	// Sent events, one order each, sent during the last day; then the unsent ones, due:
	// a second event (say order.cancelled) of the newest 1,000 orders, so each lane
	// holds a sent event before its unsent head.
	if _, err := db.Pool().Exec(ctx, `
		INSERT INTO outbox (event_id, destination, aggregate_type, aggregate_id, sequence, event_type, data,
			occurred_at, created_at, next_attempt_at, attempts, sent_at)
		SELECT gen_random_uuid(), 'crm', 'order', 'kaspi:order:sent-' || g, 1, 'order.created', '{"ref":"r","number":"1"}',
			t, t, t, 1, t + interval '1 second'
		FROM generate_series(1, $1::int) AS g, LATERAL (SELECT now() - interval '1 day' + g * interval '50 ms') AS x (t)`, sent); err != nil {
		b.Fatal(err)
	}
	if _, err := db.Pool().Exec(ctx, `
		INSERT INTO outbox (event_id, destination, aggregate_type, aggregate_id, sequence, event_type, data,
			occurred_at, created_at, next_attempt_at)
		SELECT gen_random_uuid(), 'crm', 'order', 'kaspi:order:sent-' || g, 2, 'order.cancelled', '{"ref":"r","number":"1"}',
			now() - interval '1 minute', now() - interval '1 minute', now() - interval '1 minute'
		FROM generate_series($1::int - $2::int + 1, $1::int) AS g`, sent, benchUnsent); err != nil {
		b.Fatal(err)
	}
	if _, err := db.Pool().Exec(ctx, `VACUUM ANALYZE outbox`); err != nil {
		b.Fatal(err)
	}
	b.Logf("set-up: %d sent + %d unsent events in %v", sent, benchUnsent, time.Since(start).Round(time.Millisecond))
	b.Logf("plan of the claim (EXPLAIN (ANALYZE, BUFFERS), rolled back):\n%s", explainClaim(b, db, time.Now()))

	ob := db.Outbox()
	req := outbox.ClaimRequest{Limit: benchLimit, Lease: benchLease}
	results := make([]outbox.Result, benchLimit)
	more := 0
	for b.Loop() {
		c, err := ob.Claim(ctx, req)
		if err != nil {
			b.Fatal(err)
		}
		if len(c.Records) != benchLimit {
			b.Fatalf("claimed %d, want %d", len(c.Records), benchLimit)
		}

		b.StopTimer()
		for i, r := range c.Records {
			results[i] = outbox.Result{ID: r.ID, Sent: true}
		}
		if n, err := ob.Complete(ctx, c.Token, results); err != nil || n != benchLimit {
			b.Fatalf("complete: %d, %v", n, err)
		}
		if _, err := db.Pool().Exec(ctx, `
			INSERT INTO outbox (event_id, destination, aggregate_type, aggregate_id, sequence, event_type, data,
				occurred_at, created_at, next_attempt_at)
			SELECT gen_random_uuid(), 'crm', 'order', 'kaspi:order:more-' || g, 1, 'order.created', '{"ref":"r","number":"1"}',
				now(), now(), now()
			FROM generate_series($1::int, $1::int + $2::int - 1) AS g`, more, benchLimit); err != nil {
			b.Fatal(err)
		}
		more += benchLimit
		b.StartTimer()
	}
}

// explainClaim runs the claim under EXPLAIN (ANALYZE, BUFFERS) in a transaction that
// it rolls back, with the arguments Claim passes.
func explainClaim(b *testing.B, db *DB, now time.Time) string {
	ctx := context.Background()
	tx, err := db.Pool().Begin(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SET LOCAL enable_sort = off`); err != nil { // as Claim runs it
		b.Fatal(err)
	}
	rows, err := tx.Query(ctx, `EXPLAIN (ANALYZE, BUFFERS) `+claimSQL,
		now.UTC(), benchLimit, now.Add(benchLease).UTC(), []string{}, []string{}, "00000000-0000-4000-8000-000000000000", benchLease)
	if err != nil {
		b.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		b.Fatal(err)
	}
	return strings.Join(lines, "\n")
}

// BenchmarkEnqueue measures Enqueue of one event per transaction (BEGIN, Enqueue,
// COMMIT), each in a lane of its own, one writer at a time and eight at once.
func BenchmarkEnqueue(b *testing.B) {
	ctx := context.Background()
	db := openBenchDB(b, Config{MaxConns: 16})
	var n atomic.Int64
	enqueue := func() error {
		tx, err := db.Pool().Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(ctx)
		m := outbox.Message{Destination: "crm", Event: outbox.Event{
			Type: outbox.OrderCreated, AggregateType: "order", AggregateID: fmt.Sprintf("kaspi:order:%d", n.Add(1)),
			Data: []byte(`{"ref":"0b6c1f7e-7a4e-11ef-8f3a-0050569f0d2c","number":"ЗК-000123","total":3000.00}`),
		}}
		if err := Enqueue(ctx, tx, m); err != nil {
			return err
		}
		return tx.Commit(ctx)
	}
	b.Run("serial", func(b *testing.B) {
		for b.Loop() {
			if err := enqueue(); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
	})
	b.Run("parallel=8", func(b *testing.B) {
		b.SetParallelism(8 / max(1, runtime.GOMAXPROCS(0)))
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := enqueue(); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
	})
}
