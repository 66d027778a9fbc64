package returns_test

import (
	"context"
	"strings"
	"testing"

	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/sim"
	"github.com/ordersync/ordersync/internal/sim/onecsim"
)

// A return that was in doubt (its reply lost) is verified once done, as an order's
// create is: the verification asks 1C for the return by its own external id, and a
// return gone from 1C since is a missing_in_1c warning that names a return.
func TestDoubtedReturnIsVerified(t *testing.T) {
	t.Parallel()
	h := newHarness(t, onecsim.Options{})
	o := testOrder("P-V")
	h.registerOrder(o)
	r := testReturn("R-V", o)
	h.registerReturn(r)
	h.w.OneC.Faults.Add(1, sim.Fault{Op: "create_return", Kind: onecsim.DropAfterCreate})
	h.drain()
	got := h.wantOne(r)
	op := h.get(r.Key())
	if op.VerifyAt == nil {
		t.Fatalf("the doubted return %s is done with no verification due", r.Key())
	}
	if !h.w.OneC.DeleteReturn(got.Ref) {
		t.Fatal("the simulator holds no such return")
	}
	if err := h.e.Verify(context.Background(), op); err != nil {
		t.Fatal(err)
	}
	op = h.get(r.Key())
	if len(op.Warnings) != 1 || op.Warnings[0].Code != journal.WarningMissingIn1C ||
		!strings.Contains(op.Warnings[0].Message, "return") || !strings.Contains(op.Warnings[0].Message, r.OneCExternalID()) {
		t.Fatalf("warnings %+v, want one missing_in_1c naming the return %s", op.Warnings, r.OneCExternalID())
	}
}
