package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/outbox"
	"github.com/ordersync/ordersync/internal/stock"
	"github.com/ordersync/ordersync/internal/testdb"
)

// stockSnapshot is a snapshot of n items under key, its operation registered.
func stockSnapshot(tb testing.TB, j *Journal, key string, n int) *stock.Snapshot {
	tb.Helper()
	slot := time.Date(2026, 9, 16, 10, 0, 0, 0, time.UTC)
	payload, err := json.Marshal(stock.Payload{Schedule: "main", Warehouse: "WH1", Slot: slot, Label: "2026-09-16T15:00",
		Publish: []string{stock.Ozon, stock.Wildberries}})
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := j.Register(context.Background(), journal.NewOperation{Key: key, Kind: stock.KindSnapshot, Source: stock.Source,
		ExternalID: key, Payload: payload}); err != nil {
		tb.Fatal(err)
	}
	return &stock.Snapshot{Key: key, Schedule: "main", Warehouse: "WH1", Slot: slot, Label: "2026-09-16T15:00",
		TakenAt: "2026-09-16T15:00:02", Items: stockItems(n)}
}

// stockItems are n items as 1C answers them: quantities with a scale of 0 to 3,
// prices with two decimals.
func stockItems(n int) []stock.Item {
	items := make([]stock.Item, n)
	for i := range items {
		items[i] = stock.Item{SKU: fmt.Sprintf("SKU-%06d", i), Quantity: decimal.New(int64(i%5000), -int32(i%4)),
			Price: decimal.RequireFromString(fmt.Sprintf("%d.90", 1000+i))}
	}
	return items
}

// stockMessages are the publishing events of a snapshot: one per marketplace sent
// stock.
func stockMessages(key string) []outbox.Message {
	var ms []outbox.Message
	for _, mp := range []string{stock.Ozon, stock.Wildberries} {
		ms = append(ms, outbox.Message{Destination: "stock." + mp, Event: outbox.Event{
			Type: "stock.snapshot", AggregateType: "stock", AggregateID: key, Data: []byte(`{"snapshot":"` + key + `"}`)}})
	}
	return ms
}

// A done Finish with a snapshot (and its publishing events) stays one round trip on
// a warm pool: the snapshot's two INSERTs travel in the verdict's pipelined batch.
func TestStockFinishRoundTrips(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var rt testdb.RoundTrips
	db := newCountedDB(t, &rt)
	j := db.journalStore()
	var finish int64
	for i := range 6 {
		key := fmt.Sprintf("stock:main:WH1:2026-09-16T15:%02d", i)
		snap := stockSnapshot(t, j, key, 20)
		c, err := j.ClaimKey(ctx, key, "w")
		if err != nil {
			t.Fatal(err)
		}
		finish = rt.Measure(func() {
			if err := c.Finish(ctx, journal.Finish{Status: journal.StatusDone, Attachments: []any{snap}, Messages: stockMessages(key)}); err != nil {
				t.Fatal(err)
			}
		})
		t.Logf("snapshot %d: finish %d round trips", i+1, finish)
	}
	if finish != 1 {
		t.Fatalf("warm path: finish with a snapshot %d round trips, want 1", finish)
	}
	items, err := db.Stock().Items(ctx, "stock:main:WH1:2026-09-16T15:05")
	if err != nil || len(items) != 20 {
		t.Fatalf("items: got %d, %v; want 20", len(items), err)
	}
}
