package main

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/order"
	"github.com/ordersync/ordersync/internal/sim/onecsim"
)

// TestOrderCancel: an order created in 1C is cancelled there by `order cancel`
// (exit 0); the same cancel again is a duplicate that leaves 1C alone; another
// reason is a recorded conflict (exit 1). On PostgreSQL and on the embedded file.
func TestOrderCancel(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"postgres", "sqlite"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			e := newEnvOn(t, backend, onecsim.Options{}, true)
			if _, stderr, code := e.cli(orderJSON("X-1", "SKU-1", "1", "100.00"), "order", "import"); code != 0 {
				t.Fatalf("import: exit %d: %s", code, stderr)
			}
			if backend == "postgres" { // import only registers; the service (here: resync) creates
				if out, stderr, code := e.cli("", "resync", "site:order:X-1:create"); code != 0 {
					t.Fatalf("resync: exit %d: %s %s", code, out, stderr)
				}
			}
			if e.onec.CountExternal("site:X-1") != 1 {
				t.Fatalf("1C holds %d orders site:X-1, want 1", e.onec.CountExternal("site:X-1"))
			}

			out, stderr, code := e.cli("", "order", "cancel", "site", "X-1", "--reason", "покупатель отказался")
			if code != 0 {
				t.Fatalf("cancel: exit %d out %q err %q", code, out, stderr)
			}
			for _, want := range []string{"site:order:X-1:cancel: registered", "status: done after attempt 1", "note:   cancelled in 1C"} {
				if !strings.Contains(out, want) {
					t.Errorf("cancel output lacks %q:\n%s", want, out)
				}
			}
			o := simOrder(t, e.onec, "site:X-1")
			if !o.Cancelled || o.CancelReason != "покупатель отказался" {
				t.Fatalf("1C order after the cancel: cancelled %v, reason %q", o.Cancelled, o.CancelReason)
			}
			op, err := e.store().Get(t.Context(), "site:order:X-1:cancel")
			if err != nil || op.Kind != order.KindCancel {
				t.Fatalf("cancel operation %+v: %v", op, err)
			}
			var c order.Cancel
			if err := json.Unmarshal(op.Payload, &c); err != nil || c != (order.Cancel{Source: "site", ExternalID: "X-1",
				Reason: "покупатель отказался", CreateKey: "site:order:X-1:create"}) {
				t.Fatalf("cancel payload %s: %v", op.Payload, err)
			}
			cancels := e.onec.Stats().Requests["cancel"]

			// The same cancel again: a duplicate, its saved result; 1C is not asked.
			out, stderr, code = e.cli("", "order", "cancel", "site", "X-1", "--reason", "покупатель отказался", "--format", "json")
			var res cancelOutput
			if err := json.Unmarshal([]byte(out), &res); err != nil || code != 0 {
				t.Fatalf("second cancel: exit %d %v: %s %s", code, err, out, stderr)
			}
			if res.Outcome != "duplicate" || res.Status != "done" || res.Rerun || res.Note != "cancelled in 1C" {
				t.Fatalf("second cancel answered %+v, want the saved done duplicate", res)
			}
			if got := e.onec.Stats().Requests["cancel"]; got != cancels {
				t.Fatalf("a duplicate cancel asked 1C again: %d cancel requests, want %d", got, cancels)
			}

			// Another reason: a conflict, recorded, nothing changed.
			out, _, code = e.cli("", "order", "cancel", "site", "X-1", "--reason", "другая причина")
			if code != 1 || !strings.Contains(out, "site:order:X-1:cancel: conflict") || !strings.Contains(out, "покупатель отказался") {
				t.Fatalf("a changed cancel: exit %d out %q, want 1 and the conflict naming the saved reason", code, out)
			}
			d, err := e.store().Show(t.Context(), "site:order:X-1:cancel")
			if err != nil || len(d.Conflicts) != 1 || d.Attempts != 1 {
				t.Fatalf("after the conflict: %d conflicts, %d attempts (%v); want 1 and 1", len(d.Conflicts), d.Attempts, err)
			}
			if o := simOrder(t, e.onec, "site:X-1"); o.CancelReason != "покупатель отказался" || e.onec.CountExternal("site:X-1") != 1 {
				t.Fatalf("1C's order changed after a conflicting cancel: %+v", o)
			}

			// An order the journal never saw (a mistyped id, perhaps): refused unless
			// the operator says the cancel really comes first.
			out, stderr, code = e.cli("", "order", "cancel", "site", "NEVER-1")
			if code != 2 || !strings.Contains(stderr, "--before-create") || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
				t.Fatalf("cancel of an unseen order: exit %d out %q err %q, want 2 and one line naming --before-create", code, out, stderr)
			}
			if _, err := e.store().Get(t.Context(), "site:order:NEVER-1:cancel"); !errors.Is(err, journal.ErrNotFound) {
				t.Fatalf("the refused cancel was registered: %v", err)
			}
			// With the flag: done, with a note saying so, and a warning on the tombstone.
			out, stderr, code = e.cli("", "order", "cancel", "site", "NEVER-1", "--before-create")
			if code != 0 || !strings.Contains(out, "nothing to cancel") {
				t.Fatalf("cancel --before-create of an unknown order: exit %d out %q err %q", code, out, stderr)
			}
			tomb, err := e.store().Get(t.Context(), "site:order:NEVER-1:cancel")
			if err != nil || len(tomb.Warnings) != 1 || tomb.Warnings[0].Code != journal.WarningCancelBeforeCreate {
				t.Fatalf("the tombstone's warnings %+v (%v), want one cancel_before_create", tomb.Warnings, err)
			}
			// The order arrives later: it is not created, and the journal says why.
			e.cli(orderJSON("NEVER-1", "SKU-8812", "1", "10.00"), "order", "import")
			if backend == "postgres" {
				e.cli("", "resync", "site:order:NEVER-1:create")
			}
			if n := e.onec.CountExternal("site:NEVER-1"); n != 0 {
				t.Fatalf("1C holds %d orders site:NEVER-1 after its cancel came first, want 0", n)
			}
			out, stderr, code = e.cli("", "journal", "list", "--warnings", "--format", "json")
			var listed []struct {
				Key string `json:"key"`
			}
			if err := json.Unmarshal([]byte(out), &listed); code != 0 || err != nil {
				t.Fatalf("journal list --warnings: exit %d %v out %q err %q", code, err, out, stderr)
			}
			var keys []string
			for _, l := range listed {
				keys = append(keys, l.Key)
			}
			if got := strings.Join(keys, ","); !strings.Contains(got, "site:order:NEVER-1:create") || !strings.Contains(got, "site:order:NEVER-1:cancel") {
				d, _ := e.store().Show(t.Context(), "site:order:NEVER-1:create")
				t.Fatalf("journal list --warnings lists %s, want the tombstone and the create it stopped (create: %s %q %+v)", got, d.Status, d.LastError, d.Warnings)
			}
		})
	}
}

func TestOrderCancelUsageErrors(t *testing.T) {
	t.Parallel()
	e := newEnvOn(t, "sqlite", onecsim.Options{}, false)
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"bad source", []string{"order", "cancel", "Site", "X-1"}, `SOURCE must match [a-z0-9_-]{1,32}, got "Site"`},
		{"empty source", []string{"order", "cancel", "", "X-1"}, "SOURCE is required"},
		{"empty external id", []string{"order", "cancel", "site", ""}, "EXTERNAL_ID is required"},
		{"long external id", []string{"order", "cancel", "site", strings.Repeat("x", 65)}, "EXTERNAL_ID is 65 characters long, at most 64 allowed"},
		{"non-printable external id", []string{"order", "cancel", "site", "X\t1"}, "EXTERNAL_ID contains the non-printable character U+0009"},
		{"one argument", []string{"order", "cancel", "site"}, "accepts 2 arg(s)"},
		{"bad format", []string{"order", "cancel", "site", "X-1", "--format", "xml"}, "--format"},
	} {
		out, stderr, code := e.cli("", c.args...)
		if code != 2 || !strings.Contains(stderr, c.want) || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Errorf("%s: exit %d stderr %q out %q; want 2 and one line with %q", c.name, code, stderr, out, c.want)
		}
	}
	if e.onec.Stats().Requests["cancel"] != 0 {
		t.Fatal("a usage error reached 1C")
	}
}

// simOrder is the one order 1C holds under externalID.
func simOrder(t *testing.T, s *onecsim.OneC, externalID string) onecsim.Order {
	t.Helper()
	var found []onecsim.Order
	for _, o := range s.Orders() {
		if o.ExternalID == externalID {
			found = append(found, o)
		}
	}
	if len(found) != 1 {
		t.Fatalf("1C holds %d orders %s, want 1", len(found), externalID)
	}
	return found[0]
}
