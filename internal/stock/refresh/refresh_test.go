package refresh_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/ordersync/ordersync/internal/engine"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/order"
	"github.com/ordersync/ordersync/internal/stock"
	"github.com/ordersync/ordersync/internal/stock/refresh"
	"github.com/ordersync/ordersync/internal/stock/snapshot"
	"github.com/ordersync/ordersync/internal/store/sqlite"
)

// clock is a fake clock the store and the refresher share.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func openJournal(t *testing.T, now func() time.Time) journal.Store {
	t.Helper()
	db, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(t.TempDir(), "j.db"), TakeoverAfter: time.Nanosecond, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return db.Journal()
}

func registerOrder(t *testing.T, js journal.Store, id, warehouse, sku string) {
	t.Helper()
	o := order.Order{Source: "kaspi", ExternalID: id, Number: id, CreatedAt: time.Date(2026, 9, 16, 10, 0, 0, 0, time.UTC),
		Warehouse: warehouse, Currency: "KZT",
		Lines: []order.Line{{SKU: sku, Name: sku, Quantity: decimal.NewFromInt(1), Price: decimal.NewFromInt(100)}}}
	if reg, err := js.Register(context.Background(), journal.CreateOrder(o)); err != nil || reg.Outcome != journal.Registered {
		t.Fatalf("register %s: %v %v", id, reg.Outcome, err)
	}
}

func TestOrdersOfOneLookShareOneRefreshPerWarehouse(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clk := &clock{t: time.Date(2026, 9, 16, 10, 0, 7, 0, time.UTC)}
	js := openJournal(t, clk.Now)
	woken := 0
	r := refresh.New(js, refresh.Config{Within: time.Minute, Warehouses: []string{"WH1", "WH2", "WH3"}, Now: clk.Now,
		Wake: func() { woken++ },
		PublishTo: func(wh string) []string {
			if wh == "WH3" {
				return nil // published nowhere: never refreshed
			}
			return []string{stock.Ozon}
		}})
	if r.Period() != 5*time.Second {
		t.Fatalf("period %s, want 5s: half the window, at most 5s", r.Period())
	}
	if short := refresh.New(js, refresh.Config{Within: 4 * time.Second, Now: clk.Now}); short.Period() != 2*time.Second {
		t.Fatalf("period of a 4s window %s, want half of it", short.Period())
	}

	registerOrder(t, js, "1", "WH1", "A")
	registerOrder(t, js, "2", "WH1", "B")
	registerOrder(t, js, "3", "WH3", "A")
	keys, err := r.Look(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"stock:refresh:WH1:2026-09-16T10:00:07.000"}; !slices.Equal(keys, want) {
		t.Fatalf("refreshes %v, want %v", keys, want)
	}
	op, err := js.Get(ctx, keys[0])
	if err != nil {
		t.Fatal(err)
	}
	var p stock.Payload
	if err := json.Unmarshal(op.Payload, &p); err != nil || op.Kind != stock.KindSnapshot || p.Warehouse != "WH1" ||
		!slices.Equal(p.Publish, []string{stock.Ozon}) || !p.Until.Equal(p.Slot.Add(time.Minute)) {
		t.Fatalf("refresh operation %s %s, payload %+v (%v)", op.Kind, op.Payload, p, err)
	}
	if woken != 1 {
		t.Errorf("engine woken %d times, want 1", woken)
	}

	// Nothing new: nothing registered. Another replica that sees the same orders
	// registers the same key (a duplicate).
	clk.Add(5 * time.Second)
	if keys, err := r.Look(ctx); err != nil || len(keys) != 0 {
		t.Fatalf("a look with no new order: %v %v", keys, err)
	}
	other := refresh.New(js, refresh.Config{Within: time.Minute, Warehouses: []string{"WH1", "WH2"}, Now: clk.Now,
		PublishTo: func(string) []string { return []string{stock.Ozon} }})
	if keys, err := other.Look(ctx); err != nil || !slices.Equal(keys, []string{"stock:refresh:WH1:2026-09-16T10:00:07.000"}) {
		t.Fatalf("another replica's look: %v %v", keys, err)
	}

	// An order of no warehouse refreshes every warehouse published somewhere.
	clk.Add(30 * time.Second)
	registerOrder(t, js, "4", "", "C")
	keys, err = r.Look(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"stock:refresh:WH1:2026-09-16T10:00:42.000", "stock:refresh:WH2:2026-09-16T10:00:42.000"}; !slices.Equal(keys, want) {
		t.Fatalf("refreshes %v, want %v", keys, want)
	}
	ops, err := js.List(ctx, journal.Filter{Kind: stock.KindSnapshot, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(ops) != 3 {
		t.Fatalf("%d snapshot operations, want 3", len(ops))
	}
	for _, op := range ops {
		if !strings.HasPrefix(op.Key, "stock:refresh:") {
			t.Errorf("unexpected operation %s", op.Key)
		}
	}
}

func snapshotHandler() engine.Handler { return snapshot.Handler{} }
