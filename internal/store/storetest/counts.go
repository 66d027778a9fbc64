package storetest

import (
	"reflect"
	"testing"

	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/order"
)

// The journal counts operations by kind, source and status (journal.Counter, what
// ordersync_operations exports): one row per group that has operations, in order,
// and none for an empty journal.
func testCounts(t *testing.T, s journal.Store) {
	counter, ok := s.(journal.Counter)
	if !ok {
		t.Fatalf("%T does not implement journal.Counter", s)
	}
	counts := func() []journal.Count {
		t.Helper()
		cs, err := counter.Counts(t.Context())
		if err != nil {
			t.Fatalf("counts: %v", err)
		}
		return cs
	}
	if cs := counts(); len(cs) != 0 {
		t.Fatalf("an empty journal: got %+v, want no rows", cs)
	}
	for _, key := range []string{"site:order:1:create", "site:order:2:create", "site:order:3:create", "ozon:posting:1:create"} {
		registerNew(t, s, key)
	}
	cancel := newOp("site:order:1:cancel")
	cancel.Kind = order.KindCancel
	register(t, s, cancel)
	if _, err := s.RegisterFailed(t.Context(), newOp("kaspi:order:9:create"), "unmapped SKU"); err != nil {
		t.Fatal(err)
	}
	setState(t, s, "site:order:1:create", journal.Finish{Status: journal.StatusDone,
		Result: &journal.Result{Ref: "ref-1", Number: "N-1"}})
	setState(t, s, "site:order:2:create", journal.Finish{Status: journal.StatusFailed, Error: "422"})

	want := []journal.Count{
		{Kind: order.KindCancel, Source: "site", Status: journal.StatusPending, Operations: 1},
		{Kind: order.KindCreate, Source: "kaspi", Status: journal.StatusFailed, Operations: 1},
		{Kind: order.KindCreate, Source: "ozon", Status: journal.StatusPending, Operations: 1},
		{Kind: order.KindCreate, Source: "site", Status: journal.StatusDone, Operations: 1},
		{Kind: order.KindCreate, Source: "site", Status: journal.StatusFailed, Operations: 1},
		{Kind: order.KindCreate, Source: "site", Status: journal.StatusPending, Operations: 1},
	}
	if got := counts(); !reflect.DeepEqual(got, want) {
		t.Fatalf("counts:\n got %+v\nwant %+v", got, want)
	}
}
