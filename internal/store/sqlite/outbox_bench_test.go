package sqlite

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ordersync/ordersync/internal/outbox"
)

const (
	benchOutboxUnsent = 1000
	benchOutboxLimit  = 100
	benchOutboxLease  = time.Minute
)

// BenchmarkOutboxClaim measures one Claim of 100 lane heads over 1,000 unsent events in
// 1,000 lanes while the table holds 10,000 or 1,000,000 sent events, as PostgreSQL's
// BenchmarkClaim does: the partial indexes over unsent rows keep the two close. Between
// claims, off the clock, the relay's part is played: the claimed events are completed
// as sent and 100 new ones are written, so the backlog stays at 1,000 and each claim
// takes fresh rows. The plan of the claim is in the log.
func BenchmarkOutboxClaim(b *testing.B) {
	for _, sent := range []int{10_000, 1_000_000} {
		b.Run(fmt.Sprintf("sent=%d", sent), func(b *testing.B) { benchOutboxClaim(b, sent) })
	}
}

func benchOutboxClaim(b *testing.B, sent int) {
	ctx := context.Background()
	db := newOutboxDB(b, Config{})

	start := time.Now()
	now := time.Now()
	// Sent events, one order each, sent during the last day; then the unsent ones, due:
	// a second event (say order.cancelled) of the newest 1,000 orders, so each lane
	// holds a sent event before its unsent head.
	if _, err := db.SQL().ExecContext(ctx, `
		WITH RECURSIVE g (n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < ?1)
		INSERT INTO outbox (event_id, destination, aggregate_type, aggregate_id, sequence, event_type, data,
			occurred_at, created_at, next_attempt_at, attempts, sent_at)
		SELECT printf('00000000-0000-4000-8000-%012x', n), 'crm', 'order', 'kaspi:order:sent-' || n, 1, 'order.created',
			'{"ref":"r","number":"1"}', t, t, t, 1, t + 1000000
		FROM (SELECT n, ?2 + n * 50000 AS t FROM g)`, sent, ts(now.Add(-24*time.Hour))); err != nil {
		b.Fatal(err)
	}
	due := ts(now.Add(-time.Minute))
	if _, err := db.SQL().ExecContext(ctx, `
		WITH RECURSIVE g (n) AS (SELECT ?1 - ?2 + 1 UNION ALL SELECT n + 1 FROM g WHERE n < ?1)
		INSERT INTO outbox (event_id, destination, aggregate_type, aggregate_id, sequence, event_type, data,
			occurred_at, created_at, next_attempt_at)
		SELECT printf('00000000-0000-4000-9000-%012x', n), 'crm', 'order', 'kaspi:order:sent-' || n, 2, 'order.cancelled',
			'{"ref":"r","number":"1"}', ?3, ?3, ?3
		FROM g`, sent, benchOutboxUnsent, due); err != nil {
		b.Fatal(err)
	}
	b.Logf("set-up: %d sent + %d unsent events in %v", sent, benchOutboxUnsent, time.Since(start).Round(time.Millisecond))
	b.Logf("plan of the claim (EXPLAIN QUERY PLAN):\n%s", explainOutboxClaim(b, db))

	ob := db.Outbox()
	req := outbox.ClaimRequest{Limit: benchOutboxLimit, Lease: benchOutboxLease}
	results := make([]outbox.Result, benchOutboxLimit)
	more := 0
	for b.Loop() {
		c, err := ob.Claim(ctx, req)
		if err != nil {
			b.Fatal(err)
		}
		if len(c.Records) != benchOutboxLimit {
			b.Fatalf("claimed %d, want %d", len(c.Records), benchOutboxLimit)
		}

		b.StopTimer()
		for i, r := range c.Records {
			results[i] = outbox.Result{ID: r.ID, Sent: true}
		}
		if n, err := ob.Complete(ctx, c.Token, results); err != nil || n != benchOutboxLimit {
			b.Fatalf("complete: %d, %v", n, err)
		}
		if _, err := db.SQL().ExecContext(ctx, `
			WITH RECURSIVE g (n) AS (SELECT ?1 UNION ALL SELECT n + 1 FROM g WHERE n < ?1 + ?2 - 1)
			INSERT INTO outbox (event_id, destination, aggregate_type, aggregate_id, sequence, event_type, data,
				occurred_at, created_at, next_attempt_at)
			SELECT printf('00000000-0000-4000-a000-%012x', n), 'crm', 'order', 'kaspi:order:more-' || n, 1, 'order.created',
				'{"ref":"r","number":"1"}', ?3, ?3, ?3
			FROM g`, more, benchOutboxLimit, due); err != nil {
			b.Fatal(err)
		}
		more += benchOutboxLimit
		b.StartTimer()
	}
}

// benchOutboxFill enqueues n events, one lane each (one order.created per order), in
// transactions of 500.
func benchOutboxFill(b *testing.B, db *DB, round, n int) {
	b.Helper()
	for start := 0; start < n; start += 500 {
		var batch []outbox.Message
		for i := start; i < min(start+500, n); i++ {
			batch = append(batch, outbox.Message{Destination: "crm", Event: outbox.Event{
				Type: outbox.OrderCreated, AggregateType: "order", AggregateID: fmt.Sprintf("site:order:%d-%d", round, i),
				Data: []byte(`{"ref":"0b6c1f7e-7a4e-11ef-8f3a-0050569f0d2c","number":"ЗК-000123","total":3000.00}`),
			}})
		}
		if err := db.EnqueueAndCommit(context.Background(), batch...); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkOutboxRounds drains a backlog of 5,000 one-event lanes the way a relay's
// rounds touch the store: Claim of a batch, then Complete of the batch as sent, for
// batch sizes 1, 50 and 500, with nothing published in between. It reports events/s;
// the backlog is written off the clock.
func BenchmarkOutboxRounds(b *testing.B) {
	const events = 5000
	for _, batch := range []int{1, 50, 500} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			ctx := context.Background()
			db := newOutboxDB(b, Config{})
			ob := db.Outbox()
			req := outbox.ClaimRequest{Limit: batch, Lease: benchOutboxLease}
			results := make([]outbox.Result, 0, batch)
			var (
				elapsed time.Duration
				rounds  int
			)
			for round := 0; b.Loop(); round++ {
				b.StopTimer()
				benchOutboxFill(b, db, round, events)
				b.StartTimer()
				began := time.Now()
				for sent := 0; sent < events; {
					c, err := ob.Claim(ctx, req)
					if err != nil {
						b.Fatal(err)
					}
					if len(c.Records) == 0 {
						b.Fatalf("nothing to claim with %d of %d sent", sent, events)
					}
					results = results[:0]
					for _, r := range c.Records {
						results = append(results, outbox.Result{ID: r.ID, Sent: true})
					}
					n, err := ob.Complete(ctx, c.Token, results)
					if err != nil || n != len(results) {
						b.Fatalf("complete: %d, %v", n, err)
					}
					sent += n
				}
				elapsed += time.Since(began)
				rounds++
			}
			b.ReportMetric(float64(rounds*events)/elapsed.Seconds(), "events/s")
		})
	}
}

// BenchmarkOutboxRelay drains the same backlog through the real relay (RunOnce: claim,
// publish lanes in parallel to an in-process no-op destination, write back), batch
// sizes 1, 50 and 500, events/s: the figure PostgreSQL's BenchmarkRelayThroughput
// gives for dest=noop.
func BenchmarkOutboxRelay(b *testing.B) {
	const events = 5000
	noop := outbox.PublisherFunc(func(context.Context, outbox.Record) error { return nil })
	for _, batch := range []int{1, 50, 500} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			db := newOutboxDB(b, Config{})
			relay := outbox.NewRelay(db.Outbox(), outbox.RelayConfig{
				Publishers: map[string]outbox.Publisher{"crm": noop}, BatchSize: batch, Concurrency: 16,
				Lease: time.Minute, PollInterval: time.Second,
			})
			var (
				elapsed time.Duration
				rounds  int
			)
			for round := 0; b.Loop(); round++ {
				b.StopTimer()
				benchOutboxFill(b, db, round, events)
				b.StartTimer()
				began := time.Now()
				for sent := 0; sent < events; {
					n, err := relay.RunOnce(context.Background())
					if err != nil {
						b.Fatal(err)
					}
					if n == 0 {
						b.Fatalf("relay idle with %d of %d sent", sent, events)
					}
					sent += n
				}
				elapsed += time.Since(began)
				rounds++
			}
			b.ReportMetric(float64(rounds*events)/elapsed.Seconds(), "events/s")
		})
	}
}
