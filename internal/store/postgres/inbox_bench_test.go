package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ordersync/ordersync/internal/inbox"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/order"
	"github.com/ordersync/ordersync/internal/testdb"
)

// benchReceivers is how many goroutines deliver at once (and the pool's size).
const benchReceivers = 8

// benchInboxBody is a canonical order as a site sends it.
const benchInboxBody = `{"source":"site","external_id":"A-%d","number":"A-%d","created_at":"2026-09-16T10:00:00+05:00",` +
	`"customer":{"name":"Иван Петров","phone":"+77011234567","email":"ivan@example.kz"},"warehouse":"WH1","currency":"KZT",` +
	`"lines":[{"sku":"SKU-8812","name":"Чайник","quantity":2,"price":1500.00}],"total":3000.00,"comment":""}`

// BenchmarkReceive measures Receive with benchReceivers deliveries at once: new events
// (each stored with one create operation) and duplicates (redeliveries of 1,000 stored
// events). It reports events/s, the database round trips per event (connection
// start-up included, so a little over the warm figure of TestInboxRoundTrips), and
// the WAL the server wrote per event meanwhile (pg_current_wal_lsn: every session of
// the cluster counts, so run it on a quiet server).
func BenchmarkReceive(b *testing.B) {
	ctx := context.Background()
	var rt testdb.RoundTrips
	db := openBenchDB(b, Config{MaxConns: benchReceivers * 2, ConfigurePool: func(c *pgxpool.Config) {
		rt.Install(c)
		c.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return false }
	}})
	ib := db.inboxStore()
	answer := inbox.Answer{Status: 200, ContentType: "application/json", Body: json.RawMessage(`{"result":true}`)}
	delivery := func(n int64) (inbox.Event, []inbox.Registration) {
		body := fmt.Sprintf(benchInboxBody, n, n)
		key := fmt.Sprintf("site:order:A-%d:create", n)
		return inbox.Event{Source: "site", ID: fmt.Sprintf("msg_%d", n), Body: []byte(body), ContentType: "application/json"},
			[]inbox.Registration{{Op: journal.NewOperation{Key: key, Kind: order.KindCreate, Source: "site",
				ExternalID: fmt.Sprintf("A-%d", n), Payload: json.RawMessage(body)}}}
	}
	walLSN := func() string {
		var lsn string
		if err := db.Pool().QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&lsn); err != nil {
			b.Fatal(err)
		}
		return lsn
	}
	walSince := func(lsn string) float64 {
		var n float64
		if err := db.Pool().QueryRow(ctx, `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)`, lsn).Scan(&n); err != nil {
			b.Fatal(err)
		}
		return n
	}
	run := func(b *testing.B, want inbox.Outcome, next func() int64) {
		b.SetParallelism(max(1, benchReceivers/runtime.GOMAXPROCS(0)))
		lsn := walLSN()
		rt.Reset()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				ev, regs := delivery(next())
				r, err := ib.Receive(ctx, ev, regs, answer)
				if err != nil {
					b.Error(err)
					return
				}
				if r.Outcome != want {
					b.Errorf("%s: got %s, want %s", ev.ID, r.Outcome, want)
					return
				}
			}
		})
		b.StopTimer()
		trips := rt.Count()
		wal := walSince(lsn)
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
		b.ReportMetric(float64(trips)/float64(b.N), "roundtrips/op")
		b.ReportMetric(wal/float64(b.N), "WAL-B/op")
		b.Logf("%d events: %d round trips, the server wrote %.0f bytes of WAL", b.N, trips, wal)
	}

	var seq atomic.Int64
	b.Run("new", func(b *testing.B) {
		run(b, inbox.Processed, func() int64 { return seq.Add(1) })
	})

	const stored = 1000
	first := seq.Load() + 1
	for n := first; n < first+stored; n++ {
		ev, regs := delivery(n)
		if _, err := ib.Receive(ctx, ev, regs, answer); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := db.Pool().Exec(ctx, `ANALYZE`); err != nil { // the statistics a production server would have
		b.Fatal(err)
	}
	var dup atomic.Int64
	b.Run("duplicate", func(b *testing.B) {
		run(b, inbox.Duplicate, func() int64 { return first + dup.Add(1)%stored })
	})
}
