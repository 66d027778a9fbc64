package reconcile_test

import (
	"testing"

	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/order"
	"github.com/ordersync/ordersync/internal/sim/onecsim"
)

// TestRunKeepsWhat1CHeld: a reconciliation leaves in the journal what it saw of each
// order in 1C — 1C's total, number and state, or that 1C held none — so the list
// shows 1C's total beside the marketplace's.
func TestRunKeepsWhat1CHeld(t *testing.T) {
	t.Parallel()
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, st.open)
			w.source = "site"
			same := w.registerSite("S-1", inPeriod)
			w.done(same)
			differs := w.registerSite("S-2", inPeriod)
			w.onec.SetTotal(w.done(differs), dec("2999.99"))
			cancelled := w.registerSite("S-3", inPeriod)
			w.done(cancelled)
			if _, err := w.client.CancelOrder(w.ctx, "site:S-3", "test"); err != nil {
				t.Fatal(err)
			}
			gone := w.registerSite("S-4", inPeriod)
			w.onec.MarkDeleted(w.done(gone), true)
			pending := w.registerSite("S-5", inPeriod)
			w.onec.PlantOrder(onecsim.PlantedOrder{ExternalID: "site:HAND-1", Total: dec("10"), Posted: true})

			for _, k := range []string{same, differs, cancelled, gone, pending} {
				if op, _ := w.store.Get(w.ctx, k); op.OneCSeen != nil {
					t.Fatalf("%s: seen in 1C %+v before any reconciliation", k, op.OneCSeen)
				}
			}
			w.run(t)
			seen := func(key string) *journal.OneCSeen {
				t.Helper()
				op, err := w.store.Get(w.ctx, key)
				if err != nil {
					t.Fatal(err)
				}
				if op.OneCSeen == nil {
					t.Fatalf("%s: nothing recorded of 1C", key)
				}
				return op.OneCSeen
			}
			if s := seen(same); s.Held != 1 || s.Total == nil || s.Total.String() != "3001" || s.Number == "" || s.Cancelled || s.SeenAt.IsZero() {
				t.Errorf("S-1: %+v, want 1C's order of 3001", s)
			}
			if s := seen(differs); s.Total == nil || s.Total.String() != "2999.99" {
				t.Errorf("S-2: %+v, want 1C's own total 2999.99", s)
			}
			if s := seen(cancelled); !s.Cancelled || s.Held != 1 {
				t.Errorf("S-3: %+v, want cancelled in 1C", s)
			}
			if s := seen(gone); s.Held != 0 || !s.Deleted {
				t.Errorf("S-4: %+v, want marked for deletion, none held", s)
			}
			if s := seen(pending); s.Held != 0 || s.Number != "" {
				t.Errorf("S-5: %+v, want none held", s)
			}
			if _, err := w.store.Get(w.ctx, order.Key("site", "order", "HAND-1", "create")); err == nil {
				t.Error("an order only 1C holds got an operation")
			}
		})
	}
}
