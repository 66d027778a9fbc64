package engine_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ordersync/ordersync/internal/engine"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/order"
	"github.com/ordersync/ordersync/internal/sim/onecsim"
)

// stubFetcher answers from a map; an order absent from it is unknown, one in
// notReady is not ready yet.
type stubFetcher struct {
	mu       sync.Mutex
	orders   map[string]order.Order
	notReady map[string]bool
	calls    int
}

func (f *stubFetcher) Fetch(_ context.Context, id string) (order.Order, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.notReady[id] {
		return order.Order{}, fmt.Errorf("deal %s is in stage NEW: %w", id, order.ErrNotReady)
	}
	o, ok := f.orders[id]
	if !ok {
		return order.Order{}, fmt.Errorf("deal %s: %w", id, order.ErrNoSuchOrder)
	}
	return o, nil
}

func (h *harness) registerFetch(source, id string) string {
	h.t.Helper()
	key := order.Key(source, "deal", id, "create")
	op := journal.NewOperation{Key: key, Kind: order.KindCreate, Source: source, ExternalID: id, Payload: order.FetchPayload(source, id)}
	if _, err := h.store.Register(context.Background(), op); err != nil {
		h.t.Fatal(err)
	}
	return key
}

func TestAFetchPayloadIsCompletedBeforeTheCreateAndKept(t *testing.T) {
	t.Parallel()
	h := newHarness(t, onecsim.Options{})
	o := testOrder("ignored")
	f := &stubFetcher{orders: map[string]order.Order{"77": o}}
	key := h.registerFetch("bitrix24", "77")
	h.drain(h.engine(nil, engine.Config{Fetchers: map[string]engine.Fetcher{"bitrix24": f}}))

	h.wantOneCOrders("bitrix24:77", 1)
	d := h.show(key)
	want := o
	want.Source, want.ExternalID = "bitrix24", "77"
	if d.Status != journal.StatusDone || d.PayloadSHA256 != order.SHA256Hex(want.Canonical()) {
		t.Fatalf("status %s payload %s; want done with the fetched order as its payload", d.Status, d.Payload)
	}
	// The poller or a second push registering the same order now is a duplicate.
	reg, err := h.store.Register(context.Background(), journal.NewOperation{Key: key, Kind: order.KindCreate,
		Source: "bitrix24", ExternalID: "77", Payload: want.Canonical()})
	if err != nil || reg.Outcome != journal.Duplicate {
		t.Fatalf("registering the fetched order again: %v %v, want duplicate", reg.Outcome, err)
	}
}

func TestAnOrderNotReadyWaitsBeyondMaxAttemptsUntilWoken(t *testing.T) {
	t.Parallel()
	h := newHarness(t, onecsim.Options{})
	f := &stubFetcher{orders: map[string]order.Order{"78": testOrder("x")}, notReady: map[string]bool{"78": true}}
	key := h.registerFetch("bitrix24", "78")
	e := h.engine(nil, engine.Config{MaxAttempts: 2, WaitInterval: time.Hour, Fetchers: map[string]engine.Fetcher{"bitrix24": f}})
	ctx := context.Background()
	runDue := func() {
		for {
			ran, err := e.RunDue(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if !ran {
				return
			}
		}
	}
	for range 3 { // three pushes about the deal while it is not won
		if _, err := h.store.Requeue(ctx, key); err != nil {
			t.Fatal(err)
		}
		runDue()
	}
	d := h.show(key)
	if d.Status != journal.StatusPending || d.Attempts != 3 || !strings.Contains(d.LastError, "stage NEW") ||
		d.NextAttemptAt.Before(time.Now().Add(50*time.Minute)) {
		t.Fatalf("status %s attempts %d error %q next %s; want pending for an hour past max_attempts", d.Status, d.Attempts, d.LastError, d.NextAttemptAt)
	}
	h.wantOneCOrders("bitrix24:78", 0)
	f.mu.Lock()
	f.notReady["78"] = false // the deal is won; its update wakes the create
	f.mu.Unlock()
	h.store.Requeue(ctx, key)
	runDue()
	if d := h.show(key); d.Status != journal.StatusDone {
		t.Fatalf("after the deal is won: %s %q", d.Status, d.LastError)
	}
	h.wantOneCOrders("bitrix24:78", 1)
}

func TestAnOrderTheSourceDoesNotKnowFails(t *testing.T) {
	t.Parallel()
	h := newHarness(t, onecsim.Options{})
	key := h.registerFetch("bitrix24", "79")
	h.drain(h.engine(nil, engine.Config{Fetchers: map[string]engine.Fetcher{"bitrix24": &stubFetcher{}}}))
	if d := h.show(key); d.Status != journal.StatusFailed || d.Attempts != 1 {
		t.Fatalf("status %s attempts %d, want failed at once", d.Status, d.Attempts)
	}
}
