package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/ordersync/ordersync/internal/inbox"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/order"
)

// inboxBenchReceivers is how many goroutines deliver at once.
const inboxBenchReceivers = 8

// inboxBenchBody is a canonical order as a site sends it.
const inboxBenchBody = `{"source":"site","external_id":"A-%d","number":"A-%d","created_at":"2026-09-16T10:00:00+05:00",` +
	`"customer":{"name":"Иван Петров","phone":"+77011234567","email":"ivan@example.kz"},"warehouse":"WH1","currency":"KZT",` +
	`"lines":[{"sku":"SKU-8812","name":"Чайник","quantity":2,"price":1500.00}],"total":3000.00,"comment":""}`

// BenchmarkReceive measures Receive with inboxBenchReceivers deliveries at once, on a
// file in a temporary directory (WAL, synchronous=NORMAL): new events (each stored
// with one create operation, one write transaction) and duplicates (redeliveries of
// 1,000 stored events, one read). It reports events/s.
func BenchmarkReceive(b *testing.B) {
	ctx := context.Background()
	db := inboxTestDB(b, Config{})
	ib := db.inboxStore()
	answer := inbox.Answer{Status: 200, ContentType: "application/json", Body: json.RawMessage(`{"result":true}`)}
	delivery := func(n int64) (inbox.Event, []inbox.Registration) {
		body := fmt.Sprintf(inboxBenchBody, n, n)
		key := fmt.Sprintf("site:order:A-%d:create", n)
		return inbox.Event{Source: "site", ID: fmt.Sprintf("msg_%d", n), Body: []byte(body), ContentType: "application/json"},
			[]inbox.Registration{{Op: journal.NewOperation{Key: key, Kind: order.KindCreate, Source: "site",
				ExternalID: fmt.Sprintf("A-%d", n), Payload: json.RawMessage(body)}}}
	}
	run := func(b *testing.B, want inbox.Outcome, next func() int64) {
		b.SetParallelism(max(1, inboxBenchReceivers/runtime.GOMAXPROCS(0)))
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
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
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
	var dup atomic.Int64
	b.Run("duplicate", func(b *testing.B) {
		run(b, inbox.Duplicate, func() int64 { return first + dup.Add(1)%stored })
	})
}

// BenchmarkSingleRowInsert is the ceiling to read BenchmarkReceive/new against: one
// committed single-row INSERT (a key and a 400-byte blob) per write transaction,
// through the same write path (BEGIN IMMEDIATE, serialised in the process), with
// inboxBenchReceivers goroutines at once.
func BenchmarkSingleRowInsert(b *testing.B) {
	ctx := context.Background()
	db := inboxTestDB(b, Config{})
	if _, err := db.SQL().ExecContext(ctx, `CREATE TABLE bench_rows (k INTEGER PRIMARY KEY, v BLOB NOT NULL)`); err != nil {
		b.Fatal(err)
	}
	blob := make([]byte, 400)
	var seq atomic.Int64
	b.SetParallelism(max(1, inboxBenchReceivers/runtime.GOMAXPROCS(0)))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			n := seq.Add(1)
			err := db.write(ctx, func(tx *sql.Tx) error {
				_, err := tx.ExecContext(ctx, `INSERT INTO bench_rows (k, v) VALUES (?, ?)`, n, blob)
				return err
			})
			if err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}
