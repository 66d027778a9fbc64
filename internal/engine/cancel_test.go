package engine_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/ordersync/ordersync/internal/engine"
	"github.com/ordersync/ordersync/internal/eventually"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/order"
	"github.com/ordersync/ordersync/internal/outbox"
	"github.com/ordersync/ordersync/internal/sim"
	"github.com/ordersync/ordersync/internal/sim/onecsim"
)

func (h *harness) registerCancel(o order.Order, reason string) string {
	h.t.Helper()
	payload, _ := json.Marshal(order.Cancel{Source: o.Source, ExternalID: o.ExternalID, Reason: reason, CreateKey: o.CreateKey()})
	op := journal.NewOperation{Key: o.CancelKey(), Kind: order.KindCancel, Source: o.Source, ExternalID: o.ExternalID, Payload: payload}
	if _, err := h.store.Register(context.Background(), op); err != nil {
		h.t.Fatal(err)
	}
	return op.Key
}

func (h *harness) cancelledIn1C(externalID string) (exists, cancelled bool) {
	for _, o := range h.onec.Orders() {
		if o.ExternalID == externalID {
			exists = true
			cancelled = cancelled || o.Cancelled
		}
	}
	return exists, cancelled
}

func TestCancelAfterCreateCancelsTheOrderIn1C(t *testing.T) {
	t.Parallel()
	h := newHarness(t, onecsim.Options{})
	o := testOrder("X-1")
	h.register(o)
	routes := outbox.Routes{}
	routes.Add("crm", "", outbox.OrderCreated, outbox.OrderCancelled)
	e := h.engine(nil, engine.Config{Routes: routes})
	h.drain(e)
	key := h.registerCancel(o, "customer changed their mind")
	h.drain(e)

	if exists, cancelled := h.cancelledIn1C("site:X-1"); !exists || !cancelled {
		t.Fatalf("1C order exists %v cancelled %v, want cancelled", exists, cancelled)
	}
	d := h.show(key)
	if d.Status != journal.StatusDone || d.Result.Ref == "" || d.Result.Ref != h.show(o.CreateKey()).Result.Ref {
		t.Fatalf("cancel %s result %+v, want done with the order's ref", d.Status, d.Result)
	}
	events, err := h.db.Outbox().List(context.Background(), outbox.ListFilter{AggregateID: "site:order:X-1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 2 || events[0].Type != outbox.OrderCancelled || events[0].Sequence != 2 || events[1].Type != outbox.OrderCreated {
		t.Fatalf("events %+v, want order.created then order.cancelled in one lane", events)
	}
}

func TestCancelBeforeCreateMeansNothingIsEverCreated(t *testing.T) {
	t.Parallel()
	h := newHarness(t, onecsim.Options{})
	o := testOrder("X-2")
	h.register(o)
	key := h.registerCancel(o, "")
	e := h.engine(nil, engine.Config{})
	ctx := context.Background()
	if op, err := e.RunKey(ctx, key); err != nil || op.Status != journal.StatusDone || !strings.Contains(op.Result.Note, "before creation") {
		t.Fatalf("cancel first: %+v %v; want done, cancelled before creation", op, err)
	}
	h.drain(e)
	create := h.show(o.CreateKey())
	if create.Status != journal.StatusFailed || !strings.Contains(create.LastError, "cancelled") {
		t.Fatalf("create %s %q, want failed as cancelled", create.Status, create.LastError)
	}
	// Not even a resync creates it now.
	if op, _ := e.RunKey(ctx, o.CreateKey()); op.Status != journal.StatusFailed {
		t.Fatalf("resync of the cancelled create: %s", op.Status)
	}
	h.wantOneCOrders("site:X-2", 0)
}

func TestCancelWhileTheCreateIsInFlightEndsWithTheOrderCancelled(t *testing.T) {
	t.Parallel()
	h := newHarness(t, onecsim.Options{OpLatency: map[string]time.Duration{"create": 300 * time.Millisecond}})
	o := testOrder("X-3")
	h.register(o)
	e := h.engine(nil, engine.Config{Workers: 2})
	e.Start(context.Background())
	defer e.Stop()
	eventually.True(t, "the POST in 1C", func() bool { return h.onec.Stats().Requests["create"] == 1 }) // the POST is out
	key := h.registerCancel(o, "out of stock")
	e.Wake()
	eventually.True(t, "the cancel to leave pending", func() bool {
		d := h.show(key)
		return d.Status != journal.StatusPending
	})
	if d := h.show(key); d.Status != journal.StatusDone {
		t.Fatalf("cancel %s %q", d.Status, d.LastError)
	}
	h.wantOneCOrders("site:X-3", 1)
	if _, cancelled := h.cancelledIn1C("site:X-3"); !cancelled {
		t.Fatalf("the order created while the cancel waited is not cancelled in 1C")
	}
}

func TestCancelOfAnOrderNeverCreatedEndsDoneWithANote(t *testing.T) {
	t.Parallel()
	h := newHarness(t, onecsim.Options{})
	o := testOrder("X-4")
	key := h.registerCancel(o, "")
	h.drain(h.engine(nil, engine.Config{}))
	d := h.show(key)
	if d.Status != journal.StatusDone || !strings.Contains(d.Result.Note, "nothing to cancel") {
		t.Fatalf("cancel %s %+v, want done with a note", d.Status, d.Result)
	}
	h.wantOneCOrders("site:X-4", 0)
}

func TestCancelFindsAnOrderWhoseCreateReplyWasLost(t *testing.T) {
	t.Parallel()
	h := newHarness(t, onecsim.Options{})
	o := testOrder("X-5")
	h.register(o)
	h.onec.Faults.Add(1, sim.Fault{Op: "create", Kind: onecsim.DropAfterCreate})
	// A settle time that a busy machine does not use up before the cancel runs.
	e := h.engine(nil, engine.Config{BackoffMin: time.Hour, BackoffMax: time.Hour, SettleTime: 2 * time.Second})
	if ran, _ := e.RunDue(context.Background()); !ran { // created in 1C, reply lost: pending
		t.Fatal("nothing ran")
	}
	key := h.registerCancel(o, "")
	// Right after the unknown outcome, 1C may still be writing the order: the cancel
	// concludes nothing yet, it waits for the create's settle time.
	op, err := e.RunKey(context.Background(), key)
	if err != nil || op.Status != journal.StatusPending || !strings.Contains(op.LastError, "may still be at work in 1C") {
		t.Fatalf("cancel right after the unknown outcome: %s %q %v, want pending until the create has settled", op.Status, op.LastError, err)
	}
	settle := h.show(o.CreateKey()).SettleUntil
	if settle == nil {
		t.Fatal("the create has no settle time after an unknown outcome")
	}
	eventually.True(t, "the create's settle time to pass", func() bool { return time.Now().After(*settle) })
	if op, err := e.RunKey(context.Background(), key); err != nil || op.Status != journal.StatusDone {
		t.Fatalf("cancel: %+v %v", op, err)
	}
	if _, cancelled := h.cancelledIn1C("site:X-5"); !cancelled {
		t.Fatalf("the order behind the lost reply was not cancelled")
	}
	if op, _ := e.RunKey(context.Background(), o.CreateKey()); op.Status != journal.StatusDone || !op.Result.Recovered {
		t.Fatalf("create after the cancel: %s %+v, want done, created by ordersync with its reply lost", op.Status, op.Result)
	}
	h.wantOneCOrders("site:X-5", 1)
}
