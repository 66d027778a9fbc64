package engine_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ordersync/ordersync/internal/engine"
	"github.com/ordersync/ordersync/internal/eventually"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/outbox"
	"github.com/ordersync/ordersync/internal/sim"
	"github.com/ordersync/ordersync/internal/sim/onecsim"
)

// A 1C slower than onec.settle_time: its first POST commits after the next attempt
// has found nothing and created the order again. The verification right after the
// create cannot see the late one; the one at onec.late_verify after the doubtful
// POST must, and report it as a duplicate_in_1c warning and event.
func TestDuplicateThatLandsAfterTheSettleTimeIsFoundLate(t *testing.T) {
	t.Parallel()
	const (
		slower     = 2 * time.Second // 1C commits the first POST this long after it came
		lateVerify = 4 * time.Second
	)
	h := newHarness(t, onecsim.Options{})
	h.client = h.scaledClient(scaledTimeout)
	o := testOrder("LATE-1")
	ext := o.OneCExternalID()
	h.register(o)
	h.onec.Faults.Add(1, sim.Fault{Op: "create", Kind: onecsim.SlowCreate, Delay: slower})
	routes := outbox.Routes{}
	routes.Add("crm", "", outbox.OrderCreated, outbox.OrderDuplicateIn1C)
	e := running(t, h.engine(nil, engine.Config{Workers: 2, OneCTimeout: scaledTimeout,
		SettleTime: 500 * time.Millisecond, LateVerify: lateVerify, Routes: routes,
		BackoffMin: 10 * time.Millisecond, BackoffMax: 50 * time.Millisecond}))

	d := h.waitStatus(o.CreateKey(), journal.StatusDone)
	if d.Result.Found {
		t.Fatalf("result %+v: the second attempt should have created (1C had not committed the first yet)", d.Result)
	}
	eventually.True(t, "1C to commit the slow POST", func() bool { return h.onec.CountExternal(ext) == 2 }) // the slow POST commits
	// Both verifications run: the first right after the create, the late one later.
	op := eventually.Value(t, "the late verification's warning", func() (journal.Operation, bool) {
		op, err := h.store.Get(context.Background(), o.CreateKey())
		if err != nil {
			t.Fatal(err)
		}
		return op, len(op.Warnings) > 0 && op.VerifyAt == nil
	})
	if len(op.Warnings) != 1 || op.Warnings[0].Code != journal.WarningDuplicateIn1C || len(op.Warnings[0].Refs) != 2 {
		t.Fatalf("warnings %+v, want one duplicate_in_1c naming both orders", op.Warnings)
	}
	if s := e.Stats(); s.Verified < 2 {
		t.Fatalf("verified %d times, want the verification after the create and the late one", s.Verified)
	}
	events, err := h.db.Outbox().List(context.Background(), outbox.ListFilter{AggregateID: "site:order:LATE-1"})
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, ev := range events {
		types = append(types, ev.Type)
	}
	if !strings.Contains(strings.Join(types, ","), outbox.OrderDuplicateIn1C) {
		t.Fatalf("events %v, want an order.duplicate_in_1c", types)
	}
	listed, err := h.store.List(context.Background(), journal.Filter{WarningsOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(listed) != 1 || listed[0].Key != o.CreateKey() {
		t.Fatalf("journal list --warnings: %+v, want the create", listed)
	}
}
