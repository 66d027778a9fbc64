package refresh_test

// The whole way from an order registered to what Ozon's simulator holds: 1C's
// stock (the 1C simulator), the snapshot handler run by the engine, the
// publisher through the real Ozon sender with its rules, the reserve and the
// orders not yet in 1C held back. What is proved is what the simulator took.

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/ordersync/ordersync/connectors/ozon"
	"github.com/ordersync/ordersync/internal/engine"
	"github.com/ordersync/ordersync/internal/enginetest"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/outbox"
	"github.com/ordersync/ordersync/internal/sim/onecsim"
	"github.com/ordersync/ordersync/internal/sim/ozonsim"
	"github.com/ordersync/ordersync/internal/stock"
	"github.com/ordersync/ordersync/internal/stock/publish"
	"github.com/ordersync/ordersync/internal/stock/refresh"
	"github.com/ordersync/ordersync/internal/stock/scheduler"
	"github.com/ordersync/ordersync/internal/store/sqlite"
)

// jumpClock is the wall clock plus an offset the test moves forward while nothing
// is in flight: the store, the engine, the refresher, the publisher, the Ozon
// sender's rate limiter and the simulator all keep it.
type jumpClock struct {
	mu     sync.Mutex
	offset time.Duration
}

func (c *jumpClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.offset)
}

func (c *jumpClock) Jump(d time.Duration) {
	c.mu.Lock()
	c.offset += d
	c.mu.Unlock()
}

func (c *jumpClock) SleepUntil(ctx context.Context, t time.Time) error {
	timer := time.NewTimer(t.Sub(c.Now()))
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

const (
	ozonWH     int64 = 22142605386000
	ozonClient       = "1234567"
	ozonKey          = "11111111-2222-3333-4444-555555555555"
)

// TestOrdersBetweenSlotsLowerWhatOzonIsTold is the case: 3 of A in 1C, a
// reserve of 1, two orders registered a few seconds apart between two slots.
// Ozon is told 2 at the slot, then 1 and 0 as the orders come, within
// stock.refresh_after_order (Ozon's 30 s between two updates of an item kept),
// and never more than 1C's quantity less the reserve less the orders pending.
func TestOrdersBetweenSlotsLowerWhatOzonIsTold(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clk := &jumpClock{}
	w := enginetest.New(t, onecsim.Options{})
	w.OneC.SetStock("WH1", onecsim.StockItem{SKU: "A", Quantity: decimal.NewFromInt(3), Price: decimal.NewFromInt(500)})

	db, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(t.TempDir(), "s.db"), TakeoverAfter: time.Nanosecond, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	js := db.Journal()
	eng := engine.New(js, w.Client, w.Short(engine.Config{Now: clk.Now,
		Handlers: map[string]engine.Handler{stock.KindSnapshot: snapshotHandler()}}))

	sim := ozonsim.New(ozonsim.Options{ClientID: ozonClient, APIKey: ozonKey, Now: clk.Now})
	sim.AddOffers("A")
	ts := httptest.NewServer(sim)
	t.Cleanup(ts.Close)
	conn, err := ozon.New(ozon.Config{BaseURL: ts.URL, ClientID: ozonClient, APIKey: ozonKey, Warehouse: "WH1", RatePerSecond: -1})
	if err != nil {
		t.Fatal(err)
	}
	sender, err := conn.StockSender(ozon.StockConfig{Warehouses: map[string]int64{"WH1": ozonWH}, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	reserve := decimal.NewFromInt(1)
	pub := publish.New(publish.Config{Sender: sender, Store: db.Stock(), Now: clk.Now,
		Reserves: stock.Reserves{{Account: stock.AnyAccount, SKU: "*", Quantity: reserve}},
		Pending: func(ctx context.Context, wh string) (map[string]decimal.Decimal, error) {
			p, err := stock.ReadPending(ctx, js, wh)
			return p.BySKU, err
		}})
	rf := refresh.New(js, refresh.Config{Within: time.Minute, Warehouses: []string{"WH1"}, Now: clk.Now,
		PublishTo: func(string) []string { return []string{stock.Ozon} }})

	delivered := map[string]bool{}
	// deliver publishes every stock event not delivered yet, oldest first, as the
	// stock relay would: a delivery that asks to go on later is handed out again
	// once its time has come (the clock jumps there, nothing else being in flight).
	deliver := func() {
		t.Helper()
		recs, err := db.Outbox().List(ctx, outbox.ListFilter{Destination: stock.Destination(stock.Ozon), Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		for i := len(recs) - 1; i >= 0; i-- {
			rec := recs[i]
			if delivered[rec.EventID] {
				continue
			}
			for n := 0; ; n++ {
				// A lease of one request and a little: a wait for Ozon's
				// resend rule is handed back (RetryAfter), never slept.
				lctx, cancel := context.WithTimeout(ctx, sender.Timeout()+2*time.Second)
				err := pub.Publish(lctx, rec)
				cancel()
				if err == nil {
					break
				}
				var de *outbox.DeliveryError
				if !errors.As(err, &de) || !de.Continue || n > 20 {
					t.Fatalf("publishing %s: %v", rec.Data, err)
				}
				clk.Jump(de.RetryAfter)
			}
			delivered[rec.EventID] = true
		}
	}
	run := func(keys ...string) {
		t.Helper()
		for _, k := range keys {
			op, err := eng.RunKey(ctx, k)
			if err != nil || op.Status != journal.StatusDone {
				t.Fatalf("snapshot %s: %s %q %v", k, op.Status, op.LastError, err)
			}
		}
	}
	// held checks what the simulator holds of A, and that it is no more than 1C
	// less the reserve less what is pending.
	held := func(want int64) {
		t.Helper()
		got, ok := sim.Stock("A", ozonWH)
		if !ok || got != want {
			t.Fatalf("Ozon holds %d of A (%v), want %d", got, ok, want)
		}
		p, err := stock.ReadPending(ctx, js, "WH1")
		if err != nil {
			t.Fatal(err)
		}
		bound := stock.Available(decimal.NewFromInt(3), reserve, p.Of("A"))
		if decimal.NewFromInt(got).GreaterThan(bound) {
			t.Fatalf("Ozon holds %d of A, more than 1C's 3 less the reserve and %s pending", got, p.Of("A"))
		}
	}

	// The slot: 3 in 1C, 1 reserved.
	slot := clk.Now().Truncate(time.Minute)
	reg, err := scheduler.Register(ctx, js, stock.Payload{Schedule: "main", Warehouse: "WH1", Slot: slot.UTC(),
		Label: slot.Format("2006-01-02T15:04"), Publish: []string{stock.Ozon}})
	if err != nil {
		t.Fatal(err)
	}
	run(reg.Operation.Key)
	deliver()
	held(2)

	// An order of one A, between slots: the next look refreshes WH1.
	clk.Jump(40 * time.Second)
	first := clk.Now()
	registerOrder(t, js, "1", "WH1", "A")
	clk.Jump(rf.Period())
	keys, err := rf.Look(ctx)
	if err != nil || len(keys) != 1 {
		t.Fatalf("look after the first order: %v %v", keys, err)
	}
	run(keys...)
	deliver()
	held(1)
	if late := clk.Now().Sub(first); late > time.Minute {
		t.Errorf("the first order was published %s after it was registered, beyond refresh_after_order", late)
	}

	// A second one 5 s after the first, seen by the next look: Ozon takes it once
	// its 30 s between two updates of an item are up.
	second := clk.Now()
	if apart := second.Sub(first).Round(time.Second); apart != 5*time.Second {
		t.Fatalf("the orders are %s apart, want 5s (one look)", apart)
	}
	registerOrder(t, js, "2", "WH1", "A")
	keys, err = rf.Look(ctx)
	if err != nil || len(keys) != 1 {
		t.Fatalf("look after the second order: %v %v", keys, err)
	}
	run(keys...)
	deliver()
	held(0)
	if late := clk.Now().Sub(second); late > time.Minute {
		t.Errorf("the second order was published %s after it was registered, beyond refresh_after_order", late)
	}

	// What Ozon received: 2, then 1, then 0, one request each, no rule broken.
	var got []string
	for _, u := range sim.StockUpdates() {
		got = append(got, fmt.Sprintf("%s=%d", u.OfferID, u.Stock))
	}
	if fmt.Sprint(got) != "[A=2 A=1 A=0]" {
		t.Errorf("Ozon took %v, want [A=2 A=1 A=0]", got)
	}
	if n := len(sim.RequestsTo(ozonsim.PathStocks)); n != 3 {
		t.Errorf("Ozon received %d stock requests, want 3", n)
	}
	if vs := sim.StockViolations(); len(vs) != 0 {
		t.Errorf("Ozon's rules broken: %+v", vs)
	}
	if n := w.OneC.Stats().Requests["stock"]; n != 3 {
		t.Errorf("1C was asked for stock %d times, want 3 (the slot and one per look)", n)
	}
}
