package sqlite

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/outbox"
	"github.com/ordersync/ordersync/internal/stock"
)

const benchStockItems = 50_000

// benchStockItemsOf are n items as 1C answers them: quantities with a scale of 0 to
// 3, prices with two decimals.
func benchStockItemsOf(n int) []stock.Item {
	items := make([]stock.Item, n)
	for i := range items {
		items[i] = stock.Item{SKU: fmt.Sprintf("SKU-%06d", i), Quantity: decimal.New(int64(i%5000), -int32(i%4)),
			Price: decimal.RequireFromString(fmt.Sprintf("%d.90", 1000+i))}
	}
	return items
}

// benchStockClaim registers snapshot operation i and claims it.
func benchStockClaim(b *testing.B, j *Journal, i int, items []stock.Item) (journal.Claim, *stock.Snapshot) {
	b.Helper()
	ctx := context.Background()
	slot := time.Date(2026, 9, 16, 10, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Minute)
	key := fmt.Sprintf("stock:main:WH1:bench-%06d", i)
	payload, err := json.Marshal(stock.Payload{Schedule: "main", Warehouse: "WH1", Slot: slot, Publish: []string{stock.Ozon, stock.Wildberries}})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := j.Register(ctx, journal.NewOperation{Key: key, Kind: stock.KindSnapshot, Source: stock.Source,
		ExternalID: key, Payload: payload}); err != nil {
		b.Fatal(err)
	}
	c, err := j.ClaimKey(ctx, key, "bench")
	if err != nil {
		b.Fatal(err)
	}
	return c, &stock.Snapshot{Key: key, Schedule: "main", Warehouse: "WH1", Slot: slot, Label: key[len("stock:main:WH1:"):],
		TakenAt: "2026-09-16T15:00:02", Items: items}
}

func benchStockFinish(b *testing.B, c journal.Claim, snap *stock.Snapshot) {
	b.Helper()
	var msgs []outbox.Message
	for _, mp := range []string{stock.Ozon, stock.Wildberries} {
		msgs = append(msgs, outbox.Message{Destination: "stock." + mp, Event: outbox.Event{
			Type: "stock.snapshot", AggregateType: "stock", AggregateID: snap.Key, Data: []byte(`{"snapshot":"` + snap.Key + `"}`)}})
	}
	if err := c.Finish(context.Background(), journal.Finish{Status: journal.StatusDone, Result: &journal.Result{Note: "50000 items"},
		Attachments: []any{snap}, Messages: msgs}); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkStockFinish stores a snapshot of 50,000 items through a claim's Finish,
// in its one write transaction: the verdict, the attempt, the snapshot's row, its
// items (one INSERT … SELECT FROM json_each) and two publishing events, and the
// commit (WAL, synchronous=NORMAL). Registering and claiming are off the clock. It
// reports items/s and the Go heap allocated per snapshot; a line of the log gives
// the heap in use after the last Finish.
func BenchmarkStockFinish(b *testing.B) {
	db := newOutboxDB(b, Config{})
	j := db.journalStore()
	items := benchStockItemsOf(benchStockItems)
	c, snap := benchStockClaim(b, j, -1, items) // warm the connections
	benchStockFinish(b, c, snap)

	b.ReportAllocs()
	b.ResetTimer()
	var elapsed time.Duration
	for i := range b.N {
		b.StopTimer()
		c, snap := benchStockClaim(b, j, i, items)
		b.StartTimer()
		start := time.Now()
		benchStockFinish(b, c, snap)
		elapsed += time.Since(start)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N*benchStockItems)/elapsed.Seconds(), "items/s")
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.Logf("%d snapshots of %d items: %v each; heap in use %d MiB, sys %d MiB", b.N, benchStockItems,
		(elapsed / time.Duration(b.N)).Round(time.Millisecond), ms.HeapInuse>>20, ms.Sys>>20)
	got, err := db.Stock().Items(context.Background(), snap.Key)
	if err != nil || len(got) != benchStockItems {
		b.Fatalf("items of the warm-up snapshot: got %d, %v", len(got), err)
	}
}

// BenchmarkStockItems reads a snapshot of 50,000 items back (Items: sorted by SKU,
// decimals parsed), as the Kaspi feed and the publishes do.
func BenchmarkStockItems(b *testing.B) {
	db := newOutboxDB(b, Config{})
	c, snap := benchStockClaim(b, db.journalStore(), 0, benchStockItemsOf(benchStockItems))
	benchStockFinish(b, c, snap)
	s := db.Stock()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		items, err := s.Items(context.Background(), snap.Key)
		if err != nil || len(items) != benchStockItems {
			b.Fatalf("items: got %d, %v", len(items), err)
		}
	}
	b.ReportMetric(float64(b.N*benchStockItems)/b.Elapsed().Seconds(), "items/s")
}
