package odata

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/ordersync/ordersync/internal/onec"
	"github.com/ordersync/ordersync/internal/onec/wire"
	"github.com/ordersync/ordersync/internal/sim"
	"github.com/ordersync/ordersync/internal/sim/odatasim"
)

// testReturn is a return of one of SKU-1 of the order ref, kaspi's return id.
func testReturn(id, orderRef string, lines ...onec.Line) onec.CreateReturn {
	d := decimal.RequireFromString
	if len(lines) == 0 {
		lines = []onec.Line{{SKU: "SKU-1", Quantity: d("1"), Price: d("4990.50"), Amount: d("4990.50")}}
	}
	total := decimal.Zero
	for _, l := range lines {
		total = total.Add(l.Amount)
	}
	return onec.CreateReturn{ExternalID: "kaspi:return:" + id, Source: "kaspi", Number: id, Date: "2026-12-04T10:00:00",
		Type: "partial", OrderExternalID: "kaspi:512344201", OrderRef: orderRef, Currency: "KZT",
		Lines: lines, Total: total, Reason: "брак", Comment: "kaspi return " + id + " of order 512344201"}
}

// orderIn1C creates and settles the order the returns are based on.
func (w *world) orderIn1C() onec.Created {
	w.t.Helper()
	created, err := w.create(testOrder("512344201"))
	if err != nil {
		w.t.Fatal(err)
	}
	return created
}

// A return is created once, based on the order's document, its references the
// order's, its items matched by SKU, posted and found by its marker; a second
// create with the same Ref_Key is taken as the existing return.
func TestReturnCreatedOnceBasedOnTheOrder(t *testing.T) {
	w := newWorld(t, odatasim.Options{KeepRefKey: true}, 5*time.Second)
	order := w.orderIn1C()
	req := testReturn("R1", order.Ref)
	created, err := w.client.CreateReturn(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.client.SettleReturn(context.Background(), onec.Return{Ref: created.Ref, Number: created.Number}, req); err != nil {
		t.Fatal(err)
	}
	all := w.sim.Returns()
	if len(all) != 1 {
		t.Fatalf("1C holds %d returns, want 1", len(all))
	}
	d := all[0]
	rows := d["Товары"].([]any)
	o := w.order(order.Ref)
	if d["Ref_Key"] != created.Ref || d["Posted"] != true || d[odatasim.ReturnMarker] != req.ExternalID ||
		d[odatasim.ReturnBasis] != order.Ref || d[odatasim.ReturnBasis+"_Type"] != "StandardODATA.Document_ЗаказКлиента" ||
		d["Контрагент_Key"] != o["Контрагент_Key"] || d["Партнер_Key"] != testPart || d["Организация_Key"] != testOrg ||
		d["Склад_Key"] != testWh || d["Валюта_Key"] != testCur || d["ХозяйственнаяОперация"] != "ВозвратОтКлиента" ||
		len(rows) != 1 || rows[0].(map[string]any)["Номенклатура_Key"] != w.items["SKU-1"] ||
		!strings.Contains(d["Комментарий"].(string), "причина: брак") {
		t.Fatalf("1C holds %v", d)
	}
	found, err := w.client.FindReturns(context.Background(), req.ExternalID)
	if err != nil || len(found) != 1 || found[0].Ref != created.Ref || found[0].OrderRef != order.Ref || !found[0].Posted ||
		found[0].ExternalID != req.ExternalID || found[0].Total == nil || !found[0].Total.Equal(req.Total) {
		t.Fatalf("find: %+v %v", found, err)
	}
	again, err := w.client.CreateReturn(context.Background(), req)
	if err != nil || !again.Existing || again.Ref != created.Ref || again.ExternalID != req.ExternalID {
		t.Fatalf("repeated create: %+v %v, want the existing return", again, err)
	}
	if n := w.sim.CountReturns(req.ExternalID); n != 1 || len(w.sim.Orders()) != 1 {
		t.Fatalf("1C holds %d returns of the marker and %d orders, want 1 and 1", n, len(w.sim.Orders()))
	}
}

// A create whose answer is lost after 1C committed it is an unknown outcome, and
// the find by marker on the retry finds it: one return in 1C.
func TestReturnLostAnswerFoundOnRetry(t *testing.T) {
	w := newWorld(t, odatasim.Options{}, 5*time.Second)
	order := w.orderIn1C()
	req := testReturn("R2", order.Ref)
	w.sim.Faults.Add(1, sim.Fault{Op: "create", ExternalID: req.ExternalID, Kind: odatasim.DropAfterCreate})
	if _, err := w.client.CreateReturn(context.Background(), req); onec.ClassOf(err) != onec.Unknown {
		t.Fatalf("lost answer: %v, want an unknown outcome", err)
	}
	found, err := w.client.FindReturns(context.Background(), req.ExternalID)
	if err != nil || len(found) != 1 || found[0].OrderRef != order.Ref {
		t.Fatalf("find after the lost answer: %+v %v", found, err)
	}
	if n := w.sim.CountReturns(req.ExternalID); n != 1 {
		t.Fatalf("1C holds %d returns, want 1", n)
	}
}

// A SKU with no item is refused before anything is written, naming the SKU.
func TestReturnUnknownSKUWritesNothing(t *testing.T) {
	w := newWorld(t, odatasim.Options{}, 5*time.Second)
	order := w.orderIn1C()
	creates := w.sim.Creates()
	d := decimal.RequireFromString
	_, err := w.client.CreateReturn(context.Background(), testReturn("R3", order.Ref,
		onec.Line{SKU: "SKU-404", Quantity: d("1"), Price: d("10"), Amount: d("10")}))
	u := onec.UnmatchedOf(err)
	if u == nil || len(u.Missing) != 1 || u.Missing[0] != "SKU-404" || onec.ClassOf(err) != onec.Configuration {
		t.Fatalf("unknown SKU: %v", err)
	}
	if w.sim.Creates() != creates || len(w.sim.Returns()) != 0 {
		t.Fatalf("%d creates reached 1C for the return, want none", w.sim.Creates()-creates)
	}
}

// A field 1C does not keep (here the total, unpublished) reads back otherwise
// than written: the settle is a *Mismatch naming it, of the configuration class
// (an administrator publishes the field; the return is looked at again, found by
// its marker, never created twice), and the return is not posted.
func TestReturnPartlyKeptIsAMismatch(t *testing.T) {
	w := newWorld(t, odatasim.Options{UnpublishedFields: map[string][]string{odatasim.Returns: {"СуммаДокумента"}}}, 5*time.Second)
	order := w.orderIn1C()
	req := testReturn("R4", order.Ref)
	created, err := w.client.CreateReturn(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	err = w.client.SettleReturn(context.Background(), onec.Return{Ref: created.Ref, Number: created.Number}, req)
	m := onec.MismatchOf(err)
	if m == nil || len(m.Differences) != 1 || m.Differences[0].Field != "СуммаДокумента" || onec.ClassOf(err) != onec.Configuration {
		t.Fatalf("a return whose total 1C ignored: %v, want a configuration mismatch of СуммаДокумента", err)
	}
	if all := w.sim.Returns(); len(all) != 1 || all[0]["Posted"] == true {
		t.Fatalf("1C holds %v, want one return not posted", all)
	}
}

// A posting 1C refuses leaves the return created and not posted, with 1C's
// message, as a transient failure: the posting alone is tried again, and then
// posts it.
func TestReturnPostingRefused(t *testing.T) {
	w := newWorld(t, odatasim.Options{}, 5*time.Second)
	order := w.orderIn1C()
	req := testReturn("R5", order.Ref)
	w.sim.Faults.Add(1, sim.Fault{Op: "post", ExternalID: req.ExternalID, Status: 500,
		Body: `{"odata.error":{"code":"-1","message":{"lang":"ru","value":"Не указана причина возврата"}}}`})
	created, err := w.client.CreateReturn(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	held := onec.Return{Ref: created.Ref, Number: created.Number}
	err = w.client.SettleReturn(context.Background(), held, req)
	if onec.ClassOf(err) != onec.Transient || !strings.Contains(err.Error(), "Не указана причина возврата") || !strings.Contains(err.Error(), "did not post") {
		t.Fatalf("posting refused: %v", err)
	}
	if all := w.sim.Returns(); len(all) != 1 || all[0]["Posted"] == true {
		t.Fatalf("1C holds %v, want one return not posted", all)
	}
	if err := w.client.SettleReturn(context.Background(), held, req); err != nil {
		t.Fatalf("the posting tried again: %v", err)
	}
	if all := w.sim.Returns(); len(all) != 1 || all[0]["Posted"] != true {
		t.Fatalf("1C holds %v, want the one return, posted", all)
	}
}

// A base whose publication lacks the return document: the find and the create
// are a configuration failure that names what to publish, nothing is created,
// and `onec check` lists it without counting it against the orders.
func TestReturnDocumentUnpublished(t *testing.T) {
	w := newWorld(t, odatasim.Options{Unpublished: []string{odatasim.Returns}}, 5*time.Second)
	order := w.orderIn1C()
	req := testReturn("R6", order.Ref)
	_, ferr := w.client.FindReturns(context.Background(), req.ExternalID)
	_, cerr := w.client.CreateReturn(context.Background(), req)
	for _, err := range []error{ferr, cerr} {
		var oe *onec.Error
		if onec.ClassOf(err) != onec.Configuration || !asError(err, &oe) || oe.PerOrder ||
			!strings.Contains(err.Error(), "Document_ВозвратТоваровОтКлиента is not published") ||
			!strings.Contains(err.Error(), "Настройка стандартного интерфейса OData") {
			t.Errorf("%v (%s), want a configuration error naming what to publish", err, onec.ClassOf(err))
		}
	}
	if len(w.sim.Returns()) != 0 || w.sim.Creates() != 1 {
		t.Fatalf("%d creates reached 1C, want the order's alone", w.sim.Creates())
	}
	rep, err := w.client.Check(context.Background(), false, nil)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, m := range rep.Missing {
		lines = append(lines, m.String())
	}
	if len(rep.Missing) != 1 || !rep.Missing[0].Returns || rep.Missing[0].Set != odatasim.Returns || rep.Missing[0].Field != "" ||
		!strings.Contains(lines[0], "customer returns") || rep.Returns || rep.ReturnsDocument != odatasim.Returns {
		t.Fatalf("check: %q (returns carried: %v), want one line naming the return document", lines, rep.Returns)
	}
	refs := 0 // the test's references are not in 1C; they are counted, the return document is not
	for _, r := range rep.Refs {
		if r.Problem != "" {
			refs++
		}
	}
	if rep.Problems() != refs {
		t.Fatalf("%d problems, want the %d references alone: %+v", rep.Problems(), refs, rep)
	}
}

// Profile unf knows no return document: both calls are a configuration failure
// that names the profile and what to do, and nothing is sent.
func TestReturnsRefusedForUNF(t *testing.T) {
	s := startSim(t, odatasim.Options{Profile: "unf"})
	c, err := New(Config{Wire: wire.Config{BaseURL: s.URL(), Username: "odata", Password: "s3cret", Timeout: 5 * time.Second, MaxConcurrency: 1, GetRetries: -1},
		Profile: Profiles["unf"], Organization: testOrg, Warehouse: testWh, Currency: testCur})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	_, ferr := c.FindReturns(context.Background(), "kaspi:return:1")
	_, cerr := c.CreateReturn(context.Background(), testReturn("1", "6f1c2a10-0000-4000-8000-0000000000aa"))
	for _, err := range []error{ferr, cerr} {
		if onec.ClassOf(err) != onec.Configuration || !strings.Contains(err.Error(), "the unf profile carries no customer returns") ||
			!strings.Contains(err.Error(), "onec.interface") {
			t.Errorf("%v (%s), want a configuration error naming the profile and onec.interface", err, onec.ClassOf(err))
		}
	}
	if s.Creates() != 0 {
		t.Fatalf("%d creates reached 1C", s.Creates())
	}
}
