package kaspi_test

import (
	"context"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/ordersync/ordersync/connectors"
	"github.com/ordersync/ordersync/connectors/kaspi"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/order"
	"github.com/ordersync/ordersync/internal/sim/kaspisim"
)

// An order is registered as one full return when it reaches RETURNED, not while its
// return is only requested or accepted, and not again on the next poll.
func TestReturnRegisteredOnceWhenReturned(t *testing.T) {
	t.Parallel()
	s, c := newEnv(t, kaspisim.Options{}, kaspi.Config{})
	db := openDB(t)
	ctx := context.Background()
	now := time.Now().Truncate(time.Millisecond)
	o := simOrder("8101", now.Add(-20*24*time.Hour)) // older than the lookback: returns look further
	o.Entries = append(o.Entries, kaspisim.Entry{OfferCode: "SKU-B", Name: "Ручка", Quantity: decimal.NewFromInt(3), BasePrice: dec("250")})
	mustAdd(t, s, o)
	mustAdd(t, s, simOrder("8102", now.Add(-2*time.Hour))) // not returned
	woke := 0
	p := connectors.NewPoller(c, connectors.PollerConfig{Lookback: 72 * time.Hour, Journal: db.Journal(), Cursors: db.Cursors(),
		Returns: true, Now: func() time.Time { return now }, Registered: func() { woke++ }})

	returns := func() map[string]journal.Operation {
		out := map[string]journal.Operation{}
		for k, op := range operations(t, db) {
			if op.Kind == order.KindReturn {
				out[k] = op
			}
		}
		return out
	}
	for _, step := range []func(string) error{s.RequestReturn, s.AcceptReturn} {
		if err := step("8101"); err != nil {
			t.Fatal(err)
		}
		if st, err := p.PollReturnsOnce(ctx); err != nil || st.ReturnsRegistered != 0 {
			t.Fatalf("poll before RETURNED: %+v, %v", st, err)
		}
	}
	if n := len(returns()); n != 0 {
		t.Fatalf("%d returns registered before the goods came back", n)
	}
	if err := s.Returned("8101"); err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Minute)
	st, err := p.PollReturnsOnce(ctx)
	if err != nil || st.ReturnsRegistered != 1 || woke != 1 {
		t.Fatalf("poll after RETURNED: %+v, %v, woken %d: want 1 registered", st, err, woke)
	}
	ops := returns()
	op, ok := ops["kaspi:return:8101:register"]
	if len(ops) != 1 || !ok {
		t.Fatalf("returns %v: want kaspi:return:8101:register only", ops)
	}
	r, err := order.ParseReturn(op.Payload)
	if err != nil {
		t.Fatal(err)
	}
	if r.Type != order.ReturnFull || r.OrderKey != "kaspi:order:8101:create" || r.OrderID != "8101" || len(r.Lines) != 2 ||
		!r.Lines[1].Quantity.Equal(decimal.NewFromInt(3)) || r.Currency != "KZT" || op.ExternalID != "return:8101" {
		t.Errorf("return %+v (external id %s)", r, op.ExternalID)
	}
	now = now.Add(time.Minute)
	st, err = p.PollReturnsOnce(ctx)
	if err != nil || st.ReturnsRegistered != 0 || st.ReturnsDuplicates != 1 || woke != 1 {
		t.Fatalf("next poll: %+v, %v, woken %d: want 1 duplicate", st, err, woke)
	}
	if n := len(returns()); n != 1 {
		t.Errorf("%d returns after the next poll, want 1", n)
	}
	// The order's own listing does not take the returned order for a new one or a cancel.
	if _, err := p.PollOnce(ctx); err != nil {
		t.Fatal(err)
	}
	for k := range operations(t, db) {
		if k == "kaspi:order:8101:cancel" {
			t.Errorf("a returned order was cancelled: %s", k)
		}
	}
}
