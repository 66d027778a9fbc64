package engine_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ordersync/ordersync/internal/engine"
	"github.com/ordersync/ordersync/internal/onec/httpservice"
	"github.com/ordersync/ordersync/internal/sim/onecsim"
	"github.com/ordersync/ordersync/internal/store/postgres"
	"github.com/ordersync/ordersync/internal/testdb"
)

// BenchmarkReplicas drains registered orders with one to four replicas of
// ordersync on one PostgreSQL schema against one simulated 1C that takes 50 ms
// for a find and for a create: each replica an engine of its own, as `ordersync
// run` makes it (its own pool, its own worker id, onec.max_concurrency 4 and as
// many workers, its own HTTP-service client). Each replica is given the same
// number of orders, so the time stays the same while the replicas scale. The
// simulator has no limit of its own on concurrent requests, so ideal is what the
// latency allows the replicas' workers together: replicas × 4 ÷ (requests/order ×
// 50 ms), the requests counted in the simulator. It reports orders/s, %-of-ideal
// and requests/order, and fails when 1C holds any order other than once.
//
//	go test -run '^$' -bench Replicas -benchtime 1x -count 3 ./internal/engine/
func BenchmarkReplicas(b *testing.B) {
	const (
		latency    = 50 * time.Millisecond
		perReplica = 4 // onec.max_concurrency, and the workers, of each replica
		orders     = 200
	)
	for replicas := 1; replicas <= 4; replicas++ {
		b.Run(fmt.Sprintf("replicas=%d/max_concurrency=%d/latency=50ms", replicas, perReplica), func(b *testing.B) {
			ctx := context.Background()
			url := testdb.URL(b)
			dbs := make([]*postgres.DB, replicas)
			for i := range dbs {
				db, err := postgres.Open(ctx, postgres.Config{URL: url, MaxConns: int32(2*perReplica + 4)})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(db.Close)
				if _, err := db.Migrate(ctx); err != nil {
					b.Fatal(err)
				}
				dbs[i] = db
			}
			sim := onecsim.New(onecsim.Options{OpLatency: map[string]time.Duration{"find": latency, "create": latency}})
			if err := sim.Start("127.0.0.1:0"); err != nil {
				b.Fatal(err)
			}
			b.Cleanup(sim.Close)

			n := max(b.N, orders*replicas)
			benchOrders(b, dbs[0].Journal(), n)
			if _, err := dbs[0].Pool().Exec(ctx, `ANALYZE`); err != nil {
				b.Fatal(err)
			}
			engines := make([]*engine.Engine, replicas)
			for i, db := range dbs {
				c, err := httpservice.New(httpservice.Config{BaseURL: sim.URL(), MaxConcurrency: perReplica, SessionReuse: true, Timeout: 10 * time.Second})
				if err != nil {
					b.Fatal(err)
				}
				engines[i] = engine.New(db.Journal(), c, engine.Config{Workers: perReplica, PollInterval: time.Millisecond,
					WorkerID: fmt.Sprintf("replica-%d", i+1)})
			}
			done := func() int64 {
				var d int64
				for _, e := range engines {
					d += e.Stats().Done
				}
				return d
			}

			b.ResetTimer()
			start := time.Now()
			for _, e := range engines {
				e.Start(ctx)
			}
			for deadline := start.Add(5 * time.Minute); done() < int64(n); time.Sleep(500 * time.Microsecond) {
				if time.Now().After(deadline) {
					b.Fatalf("%d of %d orders done after five minutes", done(), n)
				}
			}
			elapsed := time.Since(start)
			b.StopTimer()
			for _, e := range engines {
				e.Stop()
			}

			if got := done(); got != int64(n) {
				b.Fatalf("the replicas did %d orders, want %d", got, n)
			}
			if got := sim.Count(); got != n {
				b.Fatalf("1C holds %d orders, want %d", got, n)
			}
			seen := map[string]bool{}
			for _, o := range sim.Orders() {
				if seen[o.ExternalID] {
					b.Fatalf("1C holds %s twice", o.ExternalID)
				}
				seen[o.ExternalID] = true
			}
			requests := sum(sim.Stats().Requests)
			perOrder := float64(requests) / float64(n)
			rate := float64(n) / elapsed.Seconds()
			ideal := float64(replicas*perReplica) / (perOrder * latency.Seconds())
			b.ReportMetric(rate, "orders/s")
			b.ReportMetric(100*rate/ideal, "%-of-ideal")
			b.ReportMetric(perOrder, "requests/order")
		})
	}
}
