package engine_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/ordersync/ordersync/internal/engine"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/onec"
	"github.com/ordersync/ordersync/internal/onec/httpservice"
	"github.com/ordersync/ordersync/internal/outbox"
	"github.com/ordersync/ordersync/internal/sim/onecsim"
)

// settlingClient is the HTTP service's client whose SettleOrder answers the errors
// queued, one per call, as a client of an interface that reads its writes back
// would (the standard OData interface); then nil.
type settlingClient struct {
	*httpservice.Client
	mu      sync.Mutex
	errs    []error
	settled []string // the refs asked to settle
}

func (c *settlingClient) SettleOrder(ctx context.Context, o onec.Order, req onec.CreateOrder) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.settled = append(c.settled, o.Ref)
	if len(c.errs) == 0 {
		return nil
	}
	err := c.errs[0]
	c.errs = c.errs[1:]
	return err
}

// A created order that 1C holds otherwise than written is not done: the attempt
// records a mismatch_in_1c warning naming the fields, nothing tells the world
// that the order is created, and the next attempt finds the order (it is not
// created twice) and settles it again; a posting refused after that is retried
// the same way. Once it settles, the order is done and announced.
func TestAnOrderIsDoneOnlyOnceItSettles(t *testing.T) {
	t.Parallel()
	h := newHarness(t, onecsim.Options{})
	mismatch := &onec.Error{Class: onec.Configuration, PerOrder: true, Op: "readback", Message: "differs",
		Err: &onec.Mismatch{Ref: "r", Number: "n", Differences: []onec.Difference{{Field: "Комментарий", Want: "Иван Петров", Got: "Иван"}}}}
	posting := &onec.Error{Class: onec.Transient, PerOrder: true, Op: "post", Message: "1C did not post it: Недостаточно товара"}
	client := &settlingClient{Client: h.client, errs: []error{mismatch, posting}}
	routes := outbox.Routes{}
	routes.Add("crm", "", outbox.OrderCreated)
	e := engine.New(h.store, client, h.w.Short(engine.Config{Routes: routes}))
	o := testOrder("S-1")
	h.register(o)

	if ran, err := e.RunDue(context.Background()); !ran || err != nil {
		t.Fatalf("RunDue: %v %v", ran, err)
	}
	d := h.show(o.CreateKey())
	if d.Status != journal.StatusPending || d.RetryClass != journal.ClassConfiguration || !strings.Contains(d.LastError, "Комментарий") {
		t.Fatalf("after a mismatch: %s %s %q, want pending on a configuration failure naming the field", d.Status, d.RetryClass, d.LastError)
	}
	if len(d.Warnings) != 1 || d.Warnings[0].Code != journal.WarningMismatchIn1C || d.Warnings[0].Refs[0] != h.onec.Orders()[0].Ref ||
		!strings.Contains(d.Warnings[0].Message, `wrote "Иван Петров", 1C holds "Иван"`) {
		t.Fatalf("warnings %+v, want one mismatch_in_1c naming the order and the field", d.Warnings)
	}
	if n := countEvents(t, h, outbox.OrderCreated); n != 0 {
		t.Fatalf("%d order.created events for an order 1C holds otherwise, want none", n)
	}

	h.drain(e)
	d = h.show(o.CreateKey())
	if d.Status != journal.StatusDone || h.onec.Count() != 1 || len(client.settled) != 3 {
		t.Fatalf("after settling: %s, 1C holds %d orders, %d settles; want done, 1, 3 (mismatch, posting, settled)",
			d.Status, h.onec.Count(), len(client.settled))
	}
	if n := countEvents(t, h, outbox.OrderCreated); n != 1 {
		t.Fatalf("%d order.created events once settled, want 1", n)
	}
	said := false
	for _, a := range d.History {
		said = said || strings.Contains(a.Error, "Недостаточно товара")
	}
	if !said {
		t.Fatalf("the refused posting's message is in no attempt: %+v", d.History)
	}
}

// countEvents counts the outbox's events of type typ.
func countEvents(t *testing.T, h *harness, typ string) int {
	t.Helper()
	events, err := h.db.Outbox().List(context.Background(), outbox.ListFilter{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, ev := range events {
		if ev.Type == typ {
			n++
		}
	}
	return n
}
