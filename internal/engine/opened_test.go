package engine_test

import (
	"context"
	"errors"
	"testing"

	"github.com/ordersync/ordersync/internal/engine"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/sim/onecsim"
)

// The engine's find may go out while the attempt row is still being committed, but
// nothing that may change 1C does: an attempt row that cannot be written leaves 1C
// with no order and no create request, the operation pending with no attempt, and
// RunDue answering the failure. Once the row can be written, the order is created
// once, as attempt 1.
func TestNoPOSTWithoutTheAttemptRow(t *testing.T) {
	h := newHarness(t, onecsim.Options{})
	ctx := context.Background()
	if _, err := h.db.Pool().Exec(ctx, `
		CREATE FUNCTION fail_attempt_test() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN RAISE EXCEPTION 'injected failure of the attempt row'; END $$;
		CREATE TRIGGER fail_attempt BEFORE INSERT ON operation_attempts
			FOR EACH ROW EXECUTE FUNCTION fail_attempt_test();`); err != nil {
		t.Fatal(err)
	}
	o := testOrder("NOATTEMPT-1")
	h.register(o)
	e := h.engine(nil, engine.Config{Workers: 1})

	ran, err := e.RunDue(ctx)
	if !ran || !errors.Is(err, journal.ErrAttemptNotRecorded) {
		t.Fatalf("RunDue: ran %v, err %v; want the attempt row's failure", ran, err)
	}
	if n := h.onec.Stats().Requests["create"]; n != 0 {
		t.Fatalf("1C received %d create requests without an attempt row, want none", n)
	}
	h.wantOneCOrders(o.OneCExternalID(), 0)
	d := h.show(o.CreateKey())
	if d.Operation.Status != journal.StatusPending || len(d.History) != 0 {
		t.Fatalf("after the failed attempt row: status %s with %d attempts, want pending with none", d.Operation.Status, len(d.History))
	}

	if _, err := h.db.Pool().Exec(ctx, `DROP TRIGGER fail_attempt ON operation_attempts`); err != nil {
		t.Fatal(err)
	}
	if ran, err := e.RunDue(ctx); !ran || err != nil {
		t.Fatalf("RunDue once the row can be written: ran %v, err %v", ran, err)
	}
	h.wantOneCOrders(o.OneCExternalID(), 1)
	d = h.show(o.CreateKey())
	if d.Operation.Status != journal.StatusDone || len(d.History) != 1 || d.History[0].Attempt != 1 {
		t.Fatalf("then: status %s, attempts %+v; want done by attempt 1", d.Operation.Status, d.History)
	}
}
