package main

import (
	"strings"
	"testing"

	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/sim/onecsim"
)

// TestResyncRecordsTheOperator: an order imported and resynced at the command line
// shows the operator (cli:<user>) as who registered it, who requeued it and who
// triggered each attempt, never "retry" — on PostgreSQL and on the embedded file.
func TestResyncRecordsTheOperator(t *testing.T) {
	t.Parallel()
	actor := journal.ActorCLI(cliUser())
	for _, backend := range []string{"postgres", "sqlite"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			e := newEnvOn(t, backend, onecsim.Options{KnownSKUs: []string{"SKU-1"}}, true)
			if _, stderr, code := e.cli(orderJSON("TR-1", "SKU-NEW", "1", "10.00"), "order", "import"); code > 1 {
				t.Fatalf("import: exit %d: %s", code, stderr)
			}
			key := "site:order:TR-1:create"
			if out, _, code := e.cli("", "resync", key); code != 1 || !strings.Contains(out, "failed") {
				t.Fatalf("resync with an unknown SKU: exit %d out %q; want 1, failed", code, out)
			}
			e.onec.SetKnownSKUs([]string{"SKU-1", "SKU-NEW"})
			if out, stderr, code := e.cli("", "resync", key); code != 0 {
				t.Fatalf("resync after the fix: exit %d out %q err %q", code, out, stderr)
			}
			d, err := e.store().Show(t.Context(), key)
			if err != nil {
				t.Fatal(err)
			}
			if d.Status != journal.StatusDone || len(d.History) < 2 {
				t.Fatalf("%s after two resyncs, %d attempts; want done after at least 2", d.Status, len(d.History))
			}
			for _, a := range d.History {
				if a.TriggeredBy != actor {
					t.Fatalf("attempt %d triggered by %q, want %q", a.Attempt, a.TriggeredBy, actor)
				}
			}
			if len(d.Events) < 2 || d.Events[0] != (journal.Event{At: d.Events[0].At, Action: journal.EventRegistered, Actor: actor}) {
				t.Fatalf("events %+v, want registered by %s first", d.Events, actor)
			}
			last := d.Events[len(d.Events)-1]
			if last.Action != journal.EventRequeued || last.Actor != actor {
				t.Fatalf("last event %+v, want the resync's requeue by %s", last, actor)
			}
		})
	}
}
