package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ordersync/ordersync/internal/engine"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/onec"
	"github.com/ordersync/ordersync/internal/order"
	"github.com/ordersync/ordersync/internal/outbox"
	"github.com/ordersync/ordersync/internal/sim/onecsim"
)

// testKind is an operation kind of no feature: only the handlers of these tests
// carry it out.
const testKind = "test.echo"

func (h *harness) registerKind(kind, key string) {
	h.t.Helper()
	reg, err := h.store.Register(context.Background(), journal.NewOperation{Key: key, Kind: kind, Source: "test",
		ExternalID: key, Payload: json.RawMessage(`{}`)})
	if err != nil || reg.Outcome != journal.Registered {
		h.t.Fatalf("register %s: %s, %v", key, reg.Outcome, err)
	}
}

// TestAKindWithoutAHandlerFailsPermanently: an engine carries out the kinds
// registered with it; any other fails at once, saying which kinds it knows.
func TestAKindWithoutAHandlerFailsPermanently(t *testing.T) {
	t.Parallel()
	h := newHarness(t, onecsim.Options{})
	h.registerKind(testKind, "test:1")
	h.drain(h.engine(nil, engine.Config{}))
	d := h.show("test:1")
	if d.Status != journal.StatusFailed || d.Attempts != 1 ||
		!strings.Contains(d.LastError, `unknown operation kind "test.echo"`) ||
		!strings.Contains(d.LastError, order.KindCancel+", "+order.KindCreate) {
		t.Fatalf("an operation of a kind without a handler: %s after %d attempts, %q; want failed at once, naming the kinds known",
			d.Status, d.Attempts, d.LastError)
	}
}

// TestARegisteredHandlerCarriesOutItsKind: the handler is given the operation and
// the engine's client; its messages commit with a done verdict and are dropped with
// a retry; its verdict goes through the retry policy as the engine's own.
func TestARegisteredHandlerCarriesOutItsKind(t *testing.T) {
	t.Parallel()
	h := newHarness(t, onecsim.Options{})
	var calls atomic.Int64
	echo := engine.HandlerFunc(func(ctx context.Context, c engine.Call) engine.Verdict {
		msgs := []outbox.Message{{Destination: "test-dest", Event: outbox.Event{Type: "test.echoed", AggregateType: "test",
			AggregateID: c.Op.Key, Data: json.RawMessage(`{}`), OccurredAt: c.Now()}}}
		if calls.Add(1) == 1 {
			return engine.Verdict{Class: onec.Transient, Err: errors.New("not yet"), Messages: msgs}
		}
		if _, err := c.OneC.Ping(ctx); err != nil {
			return engine.Verdict{Class: onec.ClassOf(err), Err: err}
		}
		return engine.Verdict{Result: &journal.Result{Note: "echoed " + c.Op.Key}, Messages: msgs}
	})
	h.registerKind(testKind, "test:1")
	e := h.engine(nil, engine.Config{Handlers: map[string]engine.Handler{testKind: echo}})
	if got := strings.Join(e.Kinds(), ","); got != "order.cancel,order.create,test.echo" {
		t.Fatalf("kinds %s", got)
	}
	h.drain(e)
	d := h.show("test:1")
	if d.Status != journal.StatusDone || d.Attempts != 2 || d.Result == nil || d.Result.Note != "echoed test:1" {
		t.Fatalf("operation %s after %d attempts, result %+v; want done on the second", d.Status, d.Attempts, d.Result)
	}
	recs, err := h.db.Outbox().List(context.Background(), outbox.ListFilter{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].Type != "test.echoed" || recs[0].Destination != "test-dest" {
		t.Fatalf("events %+v, want the done verdict's one", recs)
	}
}

// TestHandlersThatCannotBeRegisteredKeepTheEngineFromRunning: a nil handler, the
// empty kind, or one of the engine's own kinds.
func TestHandlersThatCannotBeRegisteredKeepTheEngineFromRunning(t *testing.T) {
	t.Parallel()
	h := newHarness(t, onecsim.Options{})
	h.register(testOrder("H-1"))
	nop := engine.HandlerFunc(func(context.Context, engine.Call) engine.Verdict { return engine.Verdict{} })
	for name, hs := range map[string]map[string]engine.Handler{
		"is carried out by the engine itself": {order.KindCreate: nop},
		"the handler of test.echo is nil":     {testKind: nil},
		"the empty kind":                      {"": nop},
	} {
		e := h.engine(nil, engine.Config{Handlers: hs})
		if err := e.Start(context.Background()); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: Start: %v", name, err)
		} else {
			e.Stop()
		}
		if ran, err := e.RunDue(context.Background()); ran || err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: RunDue: %v, %v", name, ran, err)
		}
		if _, err := e.RunKey(context.Background(), testOrder("H-1").CreateKey()); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: RunKey: %v", name, err)
		}
	}
	if d := h.show(testOrder("H-1").CreateKey()); d.Status != journal.StatusPending || d.Attempts != 0 {
		t.Fatalf("the order was tried (%s, %d attempts) by an engine that must not run", d.Status, d.Attempts)
	}
}
