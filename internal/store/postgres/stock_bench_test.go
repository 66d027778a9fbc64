package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/stock"
)

const benchStockItems = 50_000

// BenchmarkStockFinish stores a snapshot of 50,000 items through a claim's Finish:
// the verdict, the attempt, the snapshot's row, its items (one INSERT … SELECT FROM
// unnest of three text arrays) and two publishing events, pipelined, then COMMIT.
// Registering and claiming the operation are off the clock. It reports items/s and
// the heap the Go side allocates per snapshot (allocs/op, B/op); a line of the log
// gives the heap in use after the last Finish.
func BenchmarkStockFinish(b *testing.B) {
	ctx := context.Background()
	db := openBenchDB(b, Config{})
	j := db.journalStore()
	items := stockItems(benchStockItems)
	slot := time.Date(2026, 9, 16, 10, 0, 0, 0, time.UTC)
	payload, err := json.Marshal(stock.Payload{Schedule: "main", Warehouse: "WH1", Slot: slot, Publish: []string{stock.Ozon, stock.Wildberries}})
	if err != nil {
		b.Fatal(err)
	}
	claim := func(i int) (journal.Claim, *stock.Snapshot) {
		key := fmt.Sprintf("stock:main:WH1:bench-%06d", i)
		if _, err := j.Register(ctx, journal.NewOperation{Key: key, Kind: stock.KindSnapshot, Source: stock.Source,
			ExternalID: key, Payload: payload}); err != nil {
			b.Fatal(err)
		}
		c, err := j.ClaimKey(ctx, key, "bench")
		if err != nil {
			b.Fatal(err)
		}
		return c, &stock.Snapshot{Key: key, Schedule: "main", Warehouse: "WH1", Slot: slot.Add(time.Duration(i) * time.Minute),
			Label: key[len("stock:main:WH1:"):], TakenAt: "2026-09-16T15:00:02", Items: items}
	}
	finish := func(c journal.Claim, snap *stock.Snapshot) {
		if err := c.Finish(ctx, journal.Finish{Status: journal.StatusDone, Result: &journal.Result{Note: "50000 items"},
			Attachments: []any{snap}, Messages: stockMessages(snap.Key)}); err != nil {
			b.Fatal(err)
		}
	}
	c, snap := claim(-1) // warm the connections and the statements
	finish(c, snap)

	b.ReportAllocs()
	b.ResetTimer()
	var elapsed time.Duration
	for i := range b.N {
		b.StopTimer()
		c, snap := claim(i)
		b.StartTimer()
		start := time.Now()
		finish(c, snap)
		elapsed += time.Since(start)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N*benchStockItems)/elapsed.Seconds(), "items/s")
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.Logf("%d snapshots of %d items: %v each; heap in use %d MiB, sys %d MiB", b.N, benchStockItems,
		(elapsed / time.Duration(b.N)).Round(time.Millisecond), ms.HeapInuse>>20, ms.Sys>>20)

	got, err := db.Stock().Items(ctx, snap.Key)
	if err != nil || len(got) != benchStockItems {
		b.Fatalf("items of the warm-up snapshot: got %d, %v", len(got), err)
	}
}

// BenchmarkStockItems reads a snapshot of 50,000 items back (Items: sorted by SKU,
// decimals parsed), as the Kaspi feed and the publishes do.
func BenchmarkStockItems(b *testing.B) {
	ctx := context.Background()
	db := openBenchDB(b, Config{})
	j := db.journalStore()
	key := "stock:main:WH1:2026-09-16T15:00"
	snap := stockSnapshot(b, j, key, benchStockItems)
	c, err := j.ClaimKey(ctx, key, "bench")
	if err != nil {
		b.Fatal(err)
	}
	if err := c.Finish(ctx, journal.Finish{Status: journal.StatusDone, Attachments: []any{snap}}); err != nil {
		b.Fatal(err)
	}
	if _, err := db.Pool().Exec(ctx, `ANALYZE`); err != nil { // the statistics a production server would have
		b.Fatal(err)
	}
	s := db.Stock()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		items, err := s.Items(ctx, key)
		if err != nil || len(items) != benchStockItems {
			b.Fatalf("items: got %d, %v", len(items), err)
		}
	}
	b.ReportMetric(float64(b.N*benchStockItems)/b.Elapsed().Seconds(), "items/s")
}
