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

// world is a client on a simulated УТ base with two items and a source's refs.
type world struct {
	t      *testing.T
	sim    *odatasim.Server
	client *Client
	items  map[string]string // SKU → Ref_Key
}

const (
	testOrg  = "6f1c2a10-0000-4000-8000-000000000001"
	testCur  = "6f1c2a10-0000-4000-8000-000000000005"
	testWh   = "6f1c2a10-0000-4000-8000-000000000006"
	testPart = "6f1c2a10-0000-4000-8000-000000000002"
	testCtr  = "6f1c2a10-0000-4000-8000-000000000003"
)

func newWorld(t *testing.T, opts odatasim.Options, timeout time.Duration) *world {
	t.Helper()
	s := startSim(t, opts)
	w := &world{t: t, sim: s, items: map[string]string{"SKU-1": s.AddItem("SKU-1", "Чайник"), "SKU-2": s.AddItem("SKU-2", "Кружка")}}
	c, err := New(Config{
		Wire:         wire.Config{BaseURL: s.URL(), Username: "odata", Password: "s3cret", Timeout: timeout, MaxConcurrency: 2, GetRetries: -1},
		Profile:      Profiles["ut11"],
		Organization: testOrg, Warehouse: testWh, Currency: testCur,
		Sources: map[string]SourceRefs{"kaspi": {Partner: testPart, Counterparty: testCtr}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	w.client = c
	return w
}

func testOrder(id string, lines ...onec.Line) onec.CreateOrder {
	if len(lines) == 0 {
		d := decimal.RequireFromString
		lines = []onec.Line{{SKU: "SKU-1", Quantity: d("2"), Price: d("4990.50"), Amount: d("9981.00")},
			{SKU: "SKU-2", Quantity: d("1"), Price: d("125"), Amount: d("125")}}
	}
	total := decimal.Zero
	for _, l := range lines {
		total = total.Add(l.Amount)
	}
	return onec.CreateOrder{ExternalID: "kaspi:" + id, Source: "kaspi", Number: id, Date: "2026-12-01T10:00:00",
		Customer: onec.Customer{Name: "Иванов Иван", Phone: "+77010000000"}, Lines: lines, Total: total}
}

// create is a create and its settle, as the engine runs them.
func (w *world) create(req onec.CreateOrder) (onec.Created, error) {
	ctx := context.Background()
	c, err := w.client.CreateOrder(ctx, req)
	if err != nil {
		return c, err
	}
	return c, w.client.SettleOrder(ctx, onec.Order{Ref: c.Ref, Number: c.Number, ExternalID: req.ExternalID}, req)
}

func (w *world) order(ref string) odatasim.Doc {
	for _, d := range w.sim.Orders() {
		if d["Ref_Key"] == ref {
			return d
		}
	}
	w.t.Fatalf("1C holds no order %s", ref)
	return nil
}

// An order is created once with the marker, its items matched by SKU, read back
// equal, posted, and found by its marker; a second create of the same order on a
// base that keeps the client's Ref_Key is refused as "key exists" and taken as
// found, not made twice.
func TestCreateSettleFind(t *testing.T) {
	w := newWorld(t, odatasim.Options{KeepRefKey: true}, 5*time.Second)
	req := testOrder("512344101")
	created, err := w.create(req)
	if err != nil {
		t.Fatal(err)
	}
	d := w.order(created.Ref)
	rows := d["Товары"].([]any)
	if d["Posted"] != true || d["НомерПоДаннымКлиента"] != "kaspi:512344101" || len(rows) != 2 ||
		rows[0].(map[string]any)["Номенклатура_Key"] != w.items["SKU-1"] || created.Ref != RefKey("kaspi:512344101") {
		t.Fatalf("1C holds %v", d)
	}
	found, err := w.client.FindOrders(context.Background(), req.ExternalID)
	if err != nil || len(found) != 1 || found[0].Ref != created.Ref || !found[0].Posted || found[0].ExternalID != req.ExternalID {
		t.Fatalf("find: %+v %v", found, err)
	}
	again, err := w.client.CreateOrder(context.Background(), req)
	if err != nil || !again.Existing || again.Ref != created.Ref || again.ExternalID != req.ExternalID {
		t.Fatalf("repeated create: %+v %v, want the existing order", again, err)
	}
	if n := w.sim.CountMarker(req.ExternalID); n != 1 {
		t.Fatalf("1C holds %d orders of the marker, want 1", n)
	}
}

// 1C cuts a comment longer than its field and answers 201: the read-back names
// the field, the order is not posted, and the error is this order's own
// configuration failure (1C is fine, other orders go on).
func TestReadBackFindsTheCut(t *testing.T) {
	w := newWorld(t, odatasim.Options{MaxLength: map[string]int{"Комментарий": 30}}, 5*time.Second)
	req := testOrder("512344102")
	req.Customer.Name = strings.Repeat("Константинопольский ", 4)
	created, err := w.create(req)
	m := onec.MismatchOf(err)
	var oe *onec.Error
	if m == nil || len(m.Differences) != 1 || m.Differences[0].Field != "Комментарий" || onec.ClassOf(err) != onec.Configuration {
		t.Fatalf("create of a long comment: %v, want a mismatch of Комментарий", err)
	}
	if ok := asError(err, &oe); !ok || !oe.PerOrder {
		t.Fatalf("the mismatch is not the order's own: %#v", err)
	}
	if d := w.order(created.Ref); d["Posted"] == true {
		t.Fatal("a mismatched order was posted")
	}
}

func asError(err error, target **onec.Error) bool {
	e, ok := err.(*onec.Error)
	if ok {
		*target = e
	}
	return ok
}

// A SKU with no item is refused before anything is written, naming the SKU.
func TestUnknownSKUWritesNothing(t *testing.T) {
	w := newWorld(t, odatasim.Options{}, 5*time.Second)
	d := decimal.RequireFromString
	_, err := w.client.CreateOrder(context.Background(), testOrder("512344103",
		onec.Line{SKU: "SKU-404", Quantity: d("1"), Price: d("10"), Amount: d("10")}))
	u := onec.UnmatchedOf(err)
	if u == nil || len(u.Missing) != 1 || u.Missing[0] != "SKU-404" || !strings.Contains(err.Error(), `"SKU-404"`) {
		t.Fatalf("unknown SKU: %v", err)
	}
	if n := w.sim.Creates(); n != 0 {
		t.Fatalf("%d creates reached 1C, want none", n)
	}
}

// A posting 1C refuses leaves the order created and not posted, with 1C's
// message, as a failure to retry; the next settle posts it and creates nothing.
func TestPostingRefusedThenPosted(t *testing.T) {
	w := newWorld(t, odatasim.Options{}, 5*time.Second)
	w.sim.Faults.Add(1, sim.Fault{Op: "post", Status: 500,
		Body: `{"odata.error":{"code":"-1","message":{"lang":"ru","value":"Недостаточно товара на складе"}}}`})
	req := testOrder("512344104")
	created, err := w.create(req)
	if onec.ClassOf(err) != onec.Transient || !strings.Contains(err.Error(), "Недостаточно товара") || !strings.Contains(err.Error(), "not post") {
		t.Fatalf("posting refused: %v", err)
	}
	if w.order(created.Ref)["Posted"] == true {
		t.Fatal("posted despite the refusal")
	}
	found, err := w.client.FindOrders(context.Background(), req.ExternalID)
	if err != nil || len(found) != 1 {
		t.Fatalf("find: %v %v", found, err)
	}
	if err := w.client.SettleOrder(context.Background(), found[0], req); err != nil {
		t.Fatal(err)
	}
	if w.order(created.Ref)["Posted"] != true || w.sim.CountMarker(req.ExternalID) != 1 {
		t.Fatal("not posted by the second settle, or created twice")
	}
}

// A create whose answer is lost after 1C committed it is an unknown outcome; the
// find by marker then finds it.
func TestLostAnswerIsFoundByMarker(t *testing.T) {
	w := newWorld(t, odatasim.Options{}, 5*time.Second)
	w.sim.Faults.Add(1, sim.Fault{Op: "create", Kind: odatasim.DropAfterCreate})
	req := testOrder("512344105")
	if _, err := w.client.CreateOrder(context.Background(), req); onec.ClassOf(err) != onec.Unknown {
		t.Fatalf("lost answer: %v, want an unknown outcome", err)
	}
	found, err := w.client.FindOrders(context.Background(), req.ExternalID)
	if err != nil || len(found) != 1 {
		t.Fatalf("find after the lost answer: %v %v", found, err)
	}
}

// The marker's quote is doubled and its space sent as %20: the find matches it.
func TestFindQuotesTheMarker(t *testing.T) {
	w := newWorld(t, odatasim.Options{}, 5*time.Second)
	w.client.cfg.Sources["site"] = SourceRefs{Partner: testPart, Counterparty: testCtr}
	req := testOrder("O'Brien 1+2")
	req.Source, req.ExternalID = "site", "site:O'Brien 1+2"
	if _, err := w.create(req); err != nil {
		t.Fatal(err)
	}
	found, err := w.client.FindOrders(context.Background(), req.ExternalID)
	if err != nil || len(found) != 1 || found[0].ExternalID != req.ExternalID {
		t.Fatalf("find %q: %v %v", req.ExternalID, found, err)
	}
	if found, _ := w.client.FindOrders(context.Background(), "site:O'Brien 1 2"); len(found) != 0 {
		t.Fatalf("a '+' was read as a space: %v", found)
	}
}

// A cancel marks every row cancelled with the reason, posts, and reads it back.
func TestCancelMarksEveryRow(t *testing.T) {
	w := newWorld(t, odatasim.Options{}, 5*time.Second)
	w.client.cfg.CancelReason = "6f1c2a10-0000-4000-8000-0000000000c1"
	req := testOrder("512344106")
	created, err := w.create(req)
	if err != nil {
		t.Fatal(err)
	}
	res, err := w.client.CancelOrder(context.Background(), req.ExternalID, "buyer")
	if err != nil || res.Ref != created.Ref || res.Status != "cancelled" {
		t.Fatalf("cancel: %+v %v", res, err)
	}
	for _, r := range w.order(created.Ref)["Товары"].([]any) {
		if row := r.(map[string]any); row["Отменено"] != true || row["ПричинаОтмены_Key"] != w.client.cfg.CancelReason {
			t.Fatalf("row after the cancel: %v", row)
		}
	}
	if _, err := w.client.CancelOrder(context.Background(), "kaspi:none", ""); err == nil {
		t.Fatal("cancel of an order 1C does not hold succeeded")
	}
}

// A marker 1C cut cannot be found again: the order is failed (Permanent), never
// retried into a second document.
func TestACutMarkerFailsTheOrder(t *testing.T) {
	w := newWorld(t, odatasim.Options{MaxLength: map[string]int{"НомерПоДаннымКлиента": 10}}, 5*time.Second)
	_, err := w.create(testOrder("512344199"))
	if m := onec.MismatchOf(err); m == nil || onec.ClassOf(err) != onec.Permanent || !strings.Contains(err.Error(), "onec.odata.marker") {
		t.Fatalf("a cut marker: %v, want a permanent mismatch naming onec.odata.marker", err)
	}
}

// The УНФ profile end to end against the simulated УНФ base: its document and
// tabular part, the marker in the comment, the counterparty and contract, and a
// cancel by the order's state.
func TestUNFProfile(t *testing.T) {
	s := startSim(t, odatasim.Options{Profile: "unf"})
	base := s.Seed([]string{"kaspi"}, []string{"SKU-1", "SKU-2"})
	p, err := ProfileNamed("unf", "")
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(Config{
		Wire:    wire.Config{BaseURL: s.URL(), Username: "odata", Password: "s3cret", Timeout: 5 * time.Second, GetRetries: -1},
		Profile: p, Organization: base.Organization, Warehouse: base.Warehouse, Currency: base.Currency,
		CancelledState: base.CancelledState,
		Sources:        map[string]SourceRefs{"kaspi": {Counterparty: base.Sources["kaspi"].Counterparty, Agreement: base.Sources["kaspi"].Agreement}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	req := testOrder("700")
	created, err := c.CreateOrder(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.SettleOrder(ctx, onec.Order{Ref: created.Ref}, req); err != nil {
		t.Fatal(err)
	}
	d, ok := s.Order(created.Ref)
	if !ok || !s.Posted(created.Ref) || d["Комментарий"] != req.ExternalID || len(d["Запасы"].([]any)) != 2 ||
		d["Договор_Key"] != base.Sources["kaspi"].Agreement || d["СтруктурнаяЕдиницаРезерв_Key"] != base.Warehouse {
		t.Fatalf("1C holds %v", d)
	}
	if found, err := c.FindOrders(ctx, req.ExternalID); err != nil || len(found) != 1 {
		t.Fatalf("find: %v %v", found, err)
	}
	if _, err := c.CancelOrder(ctx, req.ExternalID, ""); err != nil {
		t.Fatal(err)
	}
	if d, _ := s.Order(created.Ref); d["СостояниеЗаказа_Key"] != base.CancelledState {
		t.Fatalf("after the cancel the state is %v, want %s", d["СостояниеЗаказа_Key"], base.CancelledState)
	}
}

// With onec.odata.items_by Штрихкод a SKU is the barcode of an item in the
// barcodes register; an unknown barcode is an unmatched SKU.
func TestItemsByBarcode(t *testing.T) {
	w := newWorld(t, odatasim.Options{}, 5*time.Second)
	w.client.cfg.ItemsBy = ByBarcode
	w.client.items = &Items{Field: ByBarcode, Lookup: w.client.lookupItem}
	w.sim.AddBarcode("4607000000011", w.items["SKU-1"])
	w.sim.AddBarcode("4607000000012", w.items["SKU-1"]) // a second packaging of the same item
	d := decimal.RequireFromString
	req := testOrder("512344200", onec.Line{SKU: "4607000000012", Quantity: d("1"), Price: d("10"), Amount: d("10")})
	created, err := w.create(req)
	if err != nil {
		t.Fatal(err)
	}
	if row := w.order(created.Ref)["Товары"].([]any)[0].(map[string]any); row["Номенклатура_Key"] != w.items["SKU-1"] {
		t.Fatalf("row %v, want SKU-1's item", row)
	}
	_, err = w.client.CreateOrder(context.Background(), testOrder("512344201", onec.Line{SKU: "0000", Quantity: d("1"), Price: d("1"), Amount: d("1")}))
	if u := onec.UnmatchedOf(err); u == nil || u.Missing[0] != "0000" {
		t.Fatalf("an unknown barcode: %v", err)
	}
	w.sim.SetStock(testWh, w.items["SKU-1"], "3")
	if st, err := w.client.Stock(context.Background(), ""); err != nil || len(st.Items) != 1 || st.Items[0].SKU != "4607000000011" {
		t.Fatalf("stock by barcode: %+v %v", st, err)
	}
}
