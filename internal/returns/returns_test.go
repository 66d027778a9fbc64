package returns_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/ordersync/ordersync/internal/engine"
	"github.com/ordersync/ordersync/internal/enginetest"
	"github.com/ordersync/ordersync/internal/eventually"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/onec"
	"github.com/ordersync/ordersync/internal/order"
	"github.com/ordersync/ordersync/internal/outbox"
	"github.com/ordersync/ordersync/internal/returns"
	"github.com/ordersync/ordersync/internal/sim"
	"github.com/ordersync/ordersync/internal/sim/onecsim"
)

// harness is enginetest's world with an engine that carries returns out with the
// handler, as the service's wiring registers it.
type harness struct {
	t     *testing.T
	w     *enginetest.World
	store journal.Store
	e     *engine.Engine
}

func newHarness(t *testing.T, opts onecsim.Options) *harness {
	t.Helper()
	opts.Dedupe = true // the reference module
	w := enginetest.New(t, opts)
	routes := outbox.Routes{}
	routes.Add("hooks", "", outbox.ReturnCreated)
	store := w.DB.Journal()
	e := engine.New(store, w.Client, w.Short(engine.Config{
		Routes:   routes,
		Handlers: map[string]engine.Handler{order.KindReturn: returns.Handler{Journal: store, Routes: routes}},
	}))
	return &harness{t: t, w: w, store: store, e: e}
}

var when = time.Date(2026, 9, 16, 10, 0, 0, 0, time.FixedZone("+05", 5*3600))

func testOrder(id string) order.Order {
	o := order.Order{
		Source: "ozon", ExternalID: id, Number: id, CreatedAt: when,
		Customer:  order.Customer{Name: "Иван Петров", Phone: "+77011234567"},
		Warehouse: "WH1", Currency: "KZT",
		Lines: []order.Line{
			{SKU: "SKU-1", Name: "Чайник", Quantity: decimal.RequireFromString("3"), Price: decimal.RequireFromString("1500.10")},
			{SKU: "SKU-2", Name: "Кружка", Quantity: decimal.RequireFromString("1"), Price: decimal.RequireFromString("300")},
		},
	}
	total := o.LinesTotal()
	o.Total = &total
	return o
}

// testReturn is a partial return of 2 of the order's 3 SKU-1.
func testReturn(id string, o order.Order) order.Return {
	return order.Return{
		Source: o.Source, ID: id, Type: order.ReturnPartial, OrderID: o.ExternalID, OrderKey: o.CreateKey(),
		CreatedAt: when.Add(72 * time.Hour), Currency: "KZT", Reason: "брак",
		Lines: []order.Line{{SKU: "SKU-1", Name: "Чайник", Quantity: decimal.RequireFromString("2"), Price: decimal.RequireFromString("1500.10")}},
	}
}

func (h *harness) registerOrder(o order.Order) {
	h.t.Helper()
	if _, err := h.store.Register(context.Background(), journal.CreateOrder(o)); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) registerReturn(r order.Return) string {
	h.t.Helper()
	if err := r.Validate(); err != nil {
		h.t.Fatal(err)
	}
	_, err := h.store.Register(context.Background(), journal.NewOperation{
		Key: r.Key(), Kind: order.KindReturn, Source: r.Source, ExternalID: r.ID, Payload: r.Canonical()})
	if err != nil {
		h.t.Fatal(err)
	}
	return r.Key()
}

func (h *harness) drain() {
	h.t.Helper()
	enginetest.Drain(h.t, h.store, h.e)
}

func (h *harness) get(key string) journal.Operation {
	h.t.Helper()
	op, err := h.store.Get(context.Background(), key)
	if err != nil {
		h.t.Fatal(err)
	}
	return op
}

// returnEvents counts the return.created events in the outbox.
func (h *harness) returnEvents() []outbox.Record {
	h.t.Helper()
	recs, err := h.w.DB.Outbox().List(context.Background(), outbox.ListFilter{Limit: 100})
	if err != nil {
		h.t.Fatal(err)
	}
	var out []outbox.Record
	for _, r := range recs {
		if r.Type == outbox.ReturnCreated {
			out = append(out, r)
		}
	}
	return out
}

// wantOne checks that 1C holds the return exactly once, based on the order, with
// the partial quantity, and that return.created went to the outbox exactly once.
func (h *harness) wantOne(r order.Return) onecsim.Return {
	h.t.Helper()
	if got := h.w.OneC.CountReturns(); got != 1 {
		h.t.Fatalf("1C holds %d returns, want 1", got)
	}
	if got := h.w.OneC.CountReturnsExternal(r.OneCExternalID()); got != 1 {
		h.t.Fatalf("1C holds %d returns %s, want 1", got, r.OneCExternalID())
	}
	got := h.w.OneC.Returns()[0]
	orderOp := h.get(r.OrderKey)
	if orderOp.Result == nil || got.OrderRef != orderOp.Result.Ref {
		h.t.Errorf("the return is based on %q, want the order's %+v", got.OrderRef, orderOp.Result)
	}
	if len(got.Request.Lines) != 1 || got.Request.Lines[0].Quantity.String() != "2" || got.Request.Total.String() != "3000.2" {
		h.t.Errorf("1C got lines %+v total %s, want 2 of SKU-1, 3000.2", got.Request.Lines, got.Request.Total)
	}
	op := h.get(r.Key())
	if op.Status != journal.StatusDone || op.Result == nil || op.Result.Ref != got.Ref {
		h.t.Errorf("return operation %s %+v, want done with ref %s (%s)", op.Status, op.Result, got.Ref, op.LastError)
	}
	evs := h.returnEvents()
	if len(evs) != 1 {
		h.t.Fatalf("%d return.created events, want 1", len(evs))
	}
	if evs[0].AggregateID != order.AggregateOfKey(r.OrderKey) || !strings.Contains(string(evs[0].Data), got.Ref) {
		h.t.Errorf("return.created in lane %s with %s, want the order's lane and the ref %s", evs[0].AggregateID, evs[0].Data, got.Ref)
	}
	return got
}

func TestReturnCreatedOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t, onecsim.Options{})
	o := testOrder("P-1")
	h.registerOrder(o)
	r := testReturn("R-1", o)
	h.registerReturn(r)
	h.drain()
	h.wantOne(r)
	if op := h.get(r.Key()); op.Result.Found || op.Result.Recovered {
		t.Errorf("result %+v: created, neither found nor recovered", op.Result)
	}
	// The same return registered again is a duplicate: nothing more in 1C.
	h.registerReturn(r)
	h.drain()
	h.wantOne(r)
}

// A lost reply after 1C wrote the return: the retry finds it, 1C holds it once.
func TestReturnLostReplyThenFound(t *testing.T) {
	t.Parallel()
	h := newHarness(t, onecsim.Options{})
	o := testOrder("P-2")
	h.registerOrder(o)
	r := testReturn("R-2", o)
	h.registerReturn(r)
	h.w.OneC.Faults.Add(1, sim.Fault{Op: "create_return", Kind: onecsim.DropAfterCreate})
	h.drain()
	h.wantOne(r)
	op := h.get(r.Key())
	if !op.Result.Recovered || op.Attempts < 2 {
		t.Errorf("result %+v after %d attempts: want recovered by a later attempt", op.Result, op.Attempts)
	}
	if got := h.w.OneC.Stats().Requests["create_return"]; got != 1 {
		t.Errorf("%d POST /returns, want 1: the retry finds before it creates", got)
	}
}

// 1C wrote the return and answered its module's exception: the same attempt finds it.
func TestReturn500AfterWrite(t *testing.T) {
	t.Parallel()
	h := newHarness(t, onecsim.Options{})
	o := testOrder("P-3")
	h.registerOrder(o)
	r := testReturn("R-3", o)
	h.registerReturn(r)
	h.w.OneC.Faults.Add(1, sim.Fault{Op: "create_return", Kind: onecsim.Error500AfterCreate})
	h.drain()
	h.wantOne(r)
	if op := h.get(r.Key()); !op.Result.Recovered || op.Attempts != 1 {
		t.Errorf("result %+v after %d attempts: want recovered in the attempt that was answered 500", op.Result, op.Attempts)
	}
}

// A return whose order is not in 1C yet waits for it, then goes once it is.
func TestReturnWaitsForItsOrder(t *testing.T) {
	t.Parallel()
	h := newHarness(t, onecsim.Options{})
	o := testOrder("P-4")
	r := testReturn("R-4", o)
	h.registerReturn(r)
	ctx := context.Background()
	eventually.True(t, "the return waits for its order", func() bool {
		if _, err := h.e.RunDue(ctx); err != nil {
			t.Log(err)
		}
		op := h.get(r.Key())
		return op.Status == journal.StatusPending && op.Attempts >= 2 && strings.Contains(op.LastError, "is not in 1C yet")
	})
	if op := h.get(r.Key()); op.RetryClass != journal.ClassTransient {
		t.Errorf("waiting return: retry class %q, want transient", op.RetryClass)
	}
	if h.w.OneC.CountReturns() != 0 || h.w.OneC.Stats().Requests["create_return"] != 0 {
		t.Fatalf("1C got a return before its order")
	}
	h.registerOrder(o)
	h.drain()
	h.wantOne(r)
}

// A return whose order failed fails with it, naming it; nothing is sent.
func TestReturnOfAFailedOrderFails(t *testing.T) {
	t.Parallel()
	h := newHarness(t, onecsim.Options{KnownSKUs: []string{"SKU-2"}}) // SKU-1 unknown: the order is refused
	o := testOrder("P-5")
	h.registerOrder(o)
	h.drain()
	if op := h.get(o.CreateKey()); op.Status != journal.StatusFailed {
		t.Fatalf("order %s, want failed", op.Status)
	}
	r := testReturn("R-5", o)
	h.registerReturn(r)
	h.drain()
	op := h.get(r.Key())
	if op.Status != journal.StatusFailed || !strings.Contains(op.LastError, o.CreateKey()) {
		t.Errorf("return %s (%s), want failed naming %s", op.Status, op.LastError, o.CreateKey())
	}
	if h.w.OneC.Stats().Requests["create_return"] != 0 {
		t.Error("a return was sent for an order 1C does not hold")
	}
}

// An older module without /returns is a configuration failure of the endpoint:
// the return waits, it does not fail, and the orders go on.
func TestReturnOlderModuleIsConfiguration(t *testing.T) {
	t.Parallel()
	h := newHarness(t, onecsim.Options{NoReturns: true})
	o := testOrder("P-6")
	h.registerOrder(o)
	r := testReturn("R-6", o)
	h.registerReturn(r)
	ctx := context.Background()
	eventually.True(t, "the return waits on the endpoint", func() bool {
		if _, err := h.e.RunDue(ctx); err != nil {
			t.Log(err)
		}
		op := h.get(r.Key())
		return op.Attempts >= 2 && op.RetryClass == journal.ClassConfiguration
	})
	op := h.get(r.Key())
	if op.Status != journal.StatusPending || !strings.Contains(op.LastError, "the 1C module has no GET /returns") ||
		!strings.Contains(op.LastError, "Module.bsl") {
		t.Errorf("return %s: %s, want pending on a configuration failure naming the endpoint", op.Status, op.LastError)
	}
	if got := h.get(o.CreateKey()); got.Status != journal.StatusDone {
		t.Errorf("order %s, want done: an older module still creates orders", got.Status)
	}
	broken := h.e.Broken()
	if len(broken) != 1 || broken[0].Path != "/returns" {
		t.Errorf("broken endpoints %+v, want /returns", broken)
	}
	if h.w.OneC.CountReturns() != 0 {
		t.Error("an older module holds a return")
	}
}

func TestOlderModuleErrorClass(t *testing.T) {
	t.Parallel()
	w := enginetest.New(t, onecsim.Options{NoReturns: true})
	_, err := w.Client.CreateReturn(context.Background(), onec.CreateReturn{ExternalID: "ozon:return:X", OrderRef: "x"})
	if onec.ClassOf(err) != onec.Configuration || !strings.Contains(err.Error(), "the 1C module has no POST /returns") {
		t.Errorf("create on an older module: %v (%s), want configuration naming POST /returns", err, onec.ClassOf(err))
	}
	if w.OneC.CountReturns() != 0 {
		t.Error("a return was created")
	}
}
