package engine_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ordersync/ordersync/internal/engine"
	"github.com/ordersync/ordersync/internal/eventually"
)

// BenchmarkDrainBacklog drains 1,000 pending orders with 4 workers against a 1C that
// answers at once, from a journal that already holds 10,000 or 100,000 done
// operations (each with its attempt), analysed: the claim must not slow down as the
// journal grows, nor be slower on a small journal than on a big one. It reports
// orders/s.
//
//	go test -run '^$' -bench DrainBacklog -benchtime 1x -count 3 ./internal/engine/
func BenchmarkDrainBacklog(b *testing.B) {
	const (
		backlog = 1000
		workers = 4
	)
	for _, rows := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("journal=%d", rows), func(b *testing.B) {
			ctx := context.Background()
			st := newBenchStore(b, "postgres", workers)
			if _, err := st.pg.Pool().Exec(ctx, `
				INSERT INTO operations (key, kind, source, external_id, status, payload, payload_sha256, result, attempts,
					next_attempt_at, created_at, updated_at, first_attempt_at)
				SELECT 'site:order:old-' || g || ':create', 'order.create', 'site', 'old-' || g, 'done',
					jsonb_build_object('source', 'site', 'number', g::text), md5(g::text),
					jsonb_build_object('ref', md5(g::text), 'number', 'ЗК-' || g), 1, t, t, t, t
				FROM generate_series(1, $1::int) AS g,
					LATERAL (SELECT now() - interval '365 days' + g * (interval '364 days' / $1::int)) AS x (t)`, rows); err != nil {
				b.Fatal(err)
			}
			if _, err := st.pg.Pool().Exec(ctx, `
				INSERT INTO operation_attempts (operation_key, attempt, worker, started_at, finished_at, outcome)
				SELECT key, 1, 'w', created_at, created_at, 'done' FROM operations`); err != nil {
				b.Fatal(err)
			}
			s, c := benchOneC(b, nil, workers)
			var elapsed time.Duration
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				before := s.Count()
				benchOrders(b, st.journal, backlog)
				st.analyze(b)
				e := engine.New(st.journal, c, engine.Config{Workers: workers, PollInterval: time.Millisecond})
				b.StartTimer()
				start := time.Now()
				e.Start(ctx)
				eventually.True(b, "the backlog done", func() bool { return e.Stats().Done >= backlog })
				elapsed += time.Since(start)
				b.StopTimer()
				e.Stop()
				if got := s.Count() - before; got != backlog {
					b.Fatalf("1C holds %d new orders, want %d", got, backlog)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(b.N*backlog)/elapsed.Seconds(), "orders/s")
		})
	}
}
