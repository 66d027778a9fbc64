package returns_test

import (
	"context"
	"testing"
	"time"

	"github.com/ordersync/ordersync/internal/engine"
	"github.com/ordersync/ordersync/internal/enginetest"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/onec/odata"
	"github.com/ordersync/ordersync/internal/onec/wire"
	"github.com/ordersync/ordersync/internal/order"
	"github.com/ordersync/ordersync/internal/outbox"
	"github.com/ordersync/ordersync/internal/returns"
	"github.com/ordersync/ordersync/internal/sim"
	"github.com/ordersync/ordersync/internal/sim/odatasim"
	"github.com/ordersync/ordersync/internal/sim/onecsim"
)

// Over the standard OData interface, the handler carries a return into 1C once:
// its create's answer lost after 1C wrote it, the retry finds it by its marker,
// and 1C holds one return, based on the order's document, posted.
func TestReturnOverODataLostReplyThenFound(t *testing.T) {
	t.Parallel()
	w := enginetest.New(t, onecsim.Options{}) // the journal; 1C is the OData simulator below
	s := odatasim.New(odatasim.Options{})
	if err := s.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	base := s.Seed([]string{"ozon"}, []string{"SKU-1", "SKU-2"})
	src := base.Sources["ozon"]
	client, err := odata.New(odata.Config{
		Wire:         wire.Config{BaseURL: s.URL(), Timeout: 5 * time.Second, MaxConcurrency: 2, Logger: w.Logger()},
		Profile:      odata.Profiles["ut11"],
		Organization: base.Organization, Warehouse: base.Warehouse, Currency: base.Currency,
		Sources: map[string]odata.SourceRefs{"ozon": {Partner: src.Partner, Counterparty: src.Counterparty, Agreement: src.Agreement}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close(context.Background()) })
	store := w.DB.Journal()
	routes := outbox.Routes{}
	routes.Add("hooks", "", outbox.ReturnCreated)
	e := engine.New(store, client, w.Short(engine.Config{
		Routes:   routes,
		Handlers: map[string]engine.Handler{order.KindReturn: returns.Handler{Journal: store, Routes: routes}},
	}))
	h := &harness{t: t, w: w, store: store, e: e}

	o := testOrder("P-OD-1")
	h.registerOrder(o)
	r := testReturn("R-OD-1", o)
	h.registerReturn(r)
	s.Faults.Add(1, sim.Fault{Op: "create", ExternalID: r.OneCExternalID(), Kind: odatasim.DropAfterCreate})
	h.drain()

	if n := s.CountReturns(r.OneCExternalID()); n != 1 || len(s.Returns()) != 1 {
		t.Fatalf("1C holds %d returns %s (%d in all), want 1", n, r.OneCExternalID(), len(s.Returns()))
	}
	if s.Creates() != 2 { // the order's and the return's: the retry found, it did not create
		t.Fatalf("%d creates reached 1C, want 2", s.Creates())
	}
	got := s.Returns()[0]
	orderOp := h.get(r.OrderKey)
	if orderOp.Status != journal.StatusDone || got[odatasim.ReturnBasis] != orderOp.Result.Ref {
		t.Fatalf("the return is based on %v, want the order's %+v", got[odatasim.ReturnBasis], orderOp.Result)
	}
	op := h.get(r.Key())
	if op.Status != journal.StatusDone || op.Result == nil || op.Result.Ref != got["Ref_Key"] || !op.Result.Recovered || op.Attempts < 2 {
		t.Fatalf("return operation %s %+v after %d attempts (%s), want done, recovered by a later attempt", op.Status, op.Result, op.Attempts, op.LastError)
	}
	if got["Posted"] != true {
		t.Fatalf("the return found after the lost reply is not posted in 1C: %v", got)
	}
	if evs := h.returnEvents(); len(evs) != 1 {
		t.Fatalf("%d return.created events, want 1", len(evs))
	}
}
