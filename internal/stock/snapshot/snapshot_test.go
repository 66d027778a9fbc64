package snapshot_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/ordersync/ordersync/internal/engine"
	"github.com/ordersync/ordersync/internal/enginetest"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/onec/httpservice"
	"github.com/ordersync/ordersync/internal/outbox"
	"github.com/ordersync/ordersync/internal/sim"
	"github.com/ordersync/ordersync/internal/sim/onecsim"
	"github.com/ordersync/ordersync/internal/stock"
	"github.com/ordersync/ordersync/internal/stock/scheduler"
	"github.com/ordersync/ordersync/internal/stock/snapshot"
	"github.com/ordersync/ordersync/internal/store/postgres"
)

// harness is enginetest's world, with engines that carry snapshots out with the
// handler.
type harness struct {
	t      *testing.T
	w      *enginetest.World
	db     *postgres.DB
	store  journal.Store
	onec   *onecsim.OneC
	client *httpservice.Client
}

func newHarness(t *testing.T, opts onecsim.Options) *harness {
	t.Helper()
	w := enginetest.New(t, opts)
	return &harness{t: t, w: w, db: w.DB, store: w.DB.Journal(), onec: w.OneC, client: w.Client}
}

// engine is an engine with the engine's tests' short times that carries out the
// stock snapshots with snapshot.Handler, as the service's wiring registers it.
func (h *harness) engine(store journal.Store, cfg engine.Config) *engine.Engine {
	cfg.Handlers = map[string]engine.Handler{stock.KindSnapshot: snapshot.Handler{}}
	if store == nil {
		store = h.store
	}
	return engine.New(store, h.client, h.w.Short(cfg))
}

// drain runs due operations in the foreground until none is pending.
func (h *harness) drain(e *engine.Engine) {
	h.t.Helper()
	enginetest.Drain(h.t, h.store, e)
}

func (h *harness) show(key string) journal.Detail {
	h.t.Helper()
	d, err := h.store.Show(context.Background(), key)
	if err != nil {
		h.t.Fatal(err)
	}
	return d
}

func (h *harness) registerSnapshot(p stock.Payload) string {
	h.t.Helper()
	reg, err := scheduler.Register(context.Background(), h.store, p)
	if err != nil {
		h.t.Fatal(err)
	}
	return reg.Operation.Key
}

func snapshotPayload(wh string, until time.Time) stock.Payload {
	slot := time.Date(2026, 9, 16, 4, 0, 0, 0, time.UTC)
	return stock.Payload{Schedule: "main", Warehouse: wh, Slot: slot, Label: "2026-09-16T09:00",
		Publish: []string{stock.Kaspi, stock.Ozon, stock.Wildberries}, Until: until}
}

// TestSnapshotIsStoredWithOnePublishEventPerPushedMarketplace: the verdict, the
// snapshot and the events commit together; Kaspi, which pulls a feed, gets none.
func TestSnapshotIsStoredWithOnePublishEventPerPushedMarketplace(t *testing.T) {
	t.Parallel()
	h := newHarness(t, onecsim.Options{})
	h.onec.SetStock("WH1",
		onecsim.StockItem{SKU: "B", Quantity: decimal.RequireFromString("2.500"), Price: decimal.RequireFromString("990.5")},
		onecsim.StockItem{SKU: "A", Quantity: decimal.RequireFromString("-3"), Price: decimal.RequireFromString("12345678901234567890.123456789")})
	key := h.registerSnapshot(snapshotPayload("WH1", time.Time{}))
	e := h.engine(nil, engine.Config{})
	h.drain(e)
	if d := h.show(key); d.Status != journal.StatusDone || d.Result == nil || len(d.Result.Warnings) != 1 {
		t.Fatalf("snapshot operation = %s %+v, want done with the negative quantity's warning", d.Status, d.Result)
	}
	st := h.db.Stock()
	snap, err := st.Snapshot(context.Background(), key)
	if err != nil || snap.ItemCount != 2 || snap.Warehouse != "WH1" || len(snap.Warnings) != 1 {
		t.Fatalf("snapshot = %+v, %v", snap, err)
	}
	items, err := st.Items(context.Background(), key)
	if err != nil || len(items) != 2 || items[0].SKU != "A" || items[0].Price.String() != "12345678901234567890.123456789" ||
		!items[1].Quantity.Equal(decimal.RequireFromString("2.5")) {
		t.Fatalf("items = %+v, %v; want A and B, sorted, exact", items, err)
	}
	recs, err := h.db.Outbox().List(context.Background(), outbox.ListFilter{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	dests := map[string]int{}
	for _, r := range recs {
		if r.Type != outbox.StockSnapshot || !strings.Contains(string(r.Data), key) {
			t.Fatalf("unexpected event %+v", r)
		}
		dests[r.Destination]++
	}
	if len(recs) != 2 || dests["ozon-stock"] != 1 || dests["wildberries-stock"] != 1 {
		t.Fatalf("events by destination %v, want one for ozon-stock and one for wildberries-stock", dests)
	}
	if got := h.onec.Stats().Requests["stock"]; got != 1 {
		t.Fatalf("1C was asked for stock %d times, want 1", got)
	}
}

// TestBadStockAnswersFailTheSnapshotAndStoreNothing: a SKU twice, a quantity that
// is not a number, an unknown warehouse.
func TestBadStockAnswersFailTheSnapshotAndStoreNothing(t *testing.T) {
	t.Parallel()
	h := newHarness(t, onecsim.Options{})
	h.onec.SetStockBody("DUP", []byte(`{"warehouse":"DUP","taken_at":"2026-09-16T10:00:00","items":[{"sku":"A","quantity":1,"price":1},{"sku":"B","quantity":1,"price":1},{"sku":"A","quantity":2,"price":1}]}`))
	h.onec.SetStockBody("NAN", []byte(`{"warehouse":"NAN","taken_at":"2026-09-16T10:00:00","items":[{"sku":"A","quantity":1,"price":1},{"sku":"B","quantity":"n/a","price":1}]}`))
	want := map[string]string{
		"DUP": `SKU "A" twice`,
		"NAN": `items[1] (sku "B"): quantity "n/a" is not a number`,
		"WH9": "unknown_warehouse",
	}
	keys := map[string]string{}
	for wh := range want {
		keys[wh] = h.registerSnapshot(snapshotPayload(wh, time.Time{}))
	}
	h.drain(h.engine(nil, engine.Config{}))
	for wh, text := range want {
		d := h.show(keys[wh])
		if d.Status != journal.StatusFailed || !strings.Contains(d.LastError, text) {
			t.Errorf("%s: %s %q, want failed naming %q", wh, d.Status, d.LastError, text)
		}
		if _, err := h.db.Stock().Snapshot(context.Background(), keys[wh]); !errors.Is(err, stock.ErrNoSnapshot) {
			t.Errorf("%s: a snapshot was stored (%v)", wh, err)
		}
	}
	if recs, _ := h.db.Outbox().List(context.Background(), outbox.ListFilter{Limit: 100}); len(recs) != 0 {
		t.Fatalf("failed snapshots enqueued %d events", len(recs))
	}
}

// TestASnapshotRetriesWhile1CIsDownAndFailsWhenItsSlotHasEnded: 503s are retried
// within the slot's life; past it, the snapshot fails as too late.
func TestASnapshotRetriesWhile1CIsDownAndFailsWhenItsSlotHasEnded(t *testing.T) {
	t.Parallel()
	h := newHarness(t, onecsim.Options{})
	h.onec.SetStock("WH1", onecsim.StockItem{SKU: "A", Quantity: decimal.NewFromInt(1), Price: decimal.NewFromInt(1)})
	// More 503s than the client's own retries of a GET: the engine retries too.
	h.onec.Faults.Add(8, sim.Fault{Op: "stock", Status: 503})
	key := h.registerSnapshot(snapshotPayload("WH1", time.Now().Add(time.Hour)))
	h.drain(h.engine(nil, engine.Config{}))
	d := h.show(key)
	if d.Status != journal.StatusDone || d.Attempts < 2 {
		t.Fatalf("snapshot %s after %d attempts, want done after a retried attempt", d.Status, d.Attempts)
	}
	asked := h.onec.Stats().Requests["stock"]
	late := h.registerSnapshot(stock.Payload{Schedule: "main", Warehouse: "WH1", Slot: time.Now().Add(-time.Hour), Label: "late",
		Publish: []string{}, Until: time.Now().Add(-time.Minute)})
	h.drain(h.engine(nil, engine.Config{}))
	if d := h.show(late); d.Status != journal.StatusFailed || !strings.Contains(d.LastError, "too late") {
		t.Fatalf("a snapshot past its slot's life: %s %q, want failed as too late", d.Status, d.LastError)
	}
	if got := h.onec.Stats().Requests["stock"]; got != asked {
		t.Fatalf("the late snapshot asked 1C for stock (%d requests, %d before)", got, asked)
	}
}
