package odata

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/ordersync/ordersync/internal/onec"
	"github.com/ordersync/ordersync/internal/sim"
	"github.com/ordersync/ordersync/internal/sim/odatasim"
)

// onec check reads $metadata as a stream and names what is not published, names
// every configured reference or says why it does not resolve, and the write
// probe tells a base that keeps a client's Ref_Key from one that does not,
// deleting its document again.
func TestCheckSaysWhatIsMissingAndResolvesRefs(t *testing.T) {
	for _, keeps := range []bool{true, false} {
		w := newWorld(t, odatasim.Options{KeepRefKey: keeps,
			UnpublishedFields: map[string][]string{odatasim.Orders: {"СуммаДокумента"}}}, 5*time.Second)
		w.client.cfg.Organization = w.sim.AddRef(odatasim.Organizations, "ТОО Ромашка")
		w.client.cfg.Currency = w.sim.AddRef(odatasim.Currencies, "KZT")
		w.client.cfg.Sources["kaspi"] = SourceRefs{Partner: w.sim.AddRef(odatasim.Partners, "Покупатели Kaspi"),
			Counterparty: testCtr} // not in 1C
		var steps []string
		rep, err := w.client.Check(context.Background(), true, func(s string) { steps = append(steps, s) })
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Missing) != 1 || rep.Missing[0].Field != "СуммаДокумента" || rep.MetadataBytes == 0 {
			t.Fatalf("missing %v (%d bytes of $metadata), want the unpublished total", rep.Missing, rep.MetadataBytes)
		}
		names := map[string]string{}
		for _, r := range rep.Refs {
			names[r.Key] = r.Name + r.Problem
		}
		if names["onec.odata.organization"] != "ТОО Ромашка" || names["onec.odata.sources.kaspi.partner"] != "Покупатели Kaspi" ||
			!strings.Contains(names["onec.odata.sources.kaspi.counterparty"], "no object") {
			t.Fatalf("refs %v", names)
		}
		if rep.Problems() != 3 { // the total, the counterparty, the warehouse (not in 1C)
			t.Fatalf("%d problems, want 3: %+v", rep.Problems(), rep)
		}
		if rep.Probe == nil || rep.Probe.KeepsRefKey != keeps || !rep.Probe.Deleted || w.sim.Deletes() != 1 || len(w.sim.Orders()) != 0 {
			t.Fatalf("probe %+v (keeps %v), %d deletes, %d orders left", rep.Probe, keeps, w.sim.Deletes(), len(w.sim.Orders()))
		}
		if len(steps) != 3 || !strings.Contains(steps[2], "deleting it") {
			t.Fatalf("progress %q, want the probe announced before it runs", steps)
		}
	}
}

// onec refs lists a catalog's objects whose name holds the text, by name.
func TestRefsListsByName(t *testing.T) {
	w := newWorld(t, odatasim.Options{}, 5*time.Second)
	kaspi := w.sim.AddRef(odatasim.Partners, "Покупатели Kaspi")
	w.sim.AddRef(odatasim.Partners, "Покупатели Ozon")
	got, err := w.client.Refs(context.Background(), "Партнеры", "kaspi", 50)
	if err != nil || len(got) != 1 || got[0].GUID != kaspi || got[0].Name != "Покупатели Kaspi" {
		t.Fatalf("refs: %+v %v", got, err)
	}
	if got, err := w.client.Refs(context.Background(), odatasim.Partners, "", 50); err != nil || len(got) != 2 || got[0].Name != "Покупатели Kaspi" {
		t.Fatalf("all refs: %+v %v", got, err)
	}
}

// Stock is the balance register's, with each item's SKU by items_by.
func TestStockFromTheBalanceRegister(t *testing.T) {
	w := newWorld(t, odatasim.Options{}, 5*time.Second)
	other := w.sim.AddRef(odatasim.Warehouses, "Второй склад")
	w.sim.SetStock(testWh, w.items["SKU-1"], "7")
	w.sim.SetStock(testWh, w.items["SKU-2"], "0.5")
	w.sim.SetStock(other, w.items["SKU-1"], "100")
	st, err := w.client.Stock(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, it := range st.Items {
		got[it.SKU] = it.Quantity.String()
	}
	if len(got) != 2 || got["SKU-1"] != "7" || got["SKU-2"] != "0.5" || st.Warehouse != testWh {
		t.Fatalf("stock %+v", st)
	}
	// An item sold out has no balance row: it is still listed, at 0, or the
	// marketplaces would keep the last quantity they were sent.
	w.sim.SetStock(testWh, w.items["SKU-2"], "0")
	st, err = w.client.Stock(context.Background(), testWh)
	got = map[string]string{}
	for _, it := range st.Items {
		got[it.SKU] = it.Quantity.String()
	}
	if err != nil || len(got) != 2 || got["SKU-2"] != "0" {
		t.Fatalf("stock with SKU-2 sold out: %v %v, want SKU-2 at 0", got, err)
	}
	// A schedule may name the warehouse by its name (or code) rather than its GUID.
	st, err = w.client.Stock(context.Background(), "Второй склад")
	if err != nil || st.Warehouse != other || len(st.Items) != 2 || !st.Items[0].Quantity.Equal(decimal.NewFromInt(100)) || !st.Items[1].Quantity.IsZero() {
		t.Fatalf("stock of a warehouse by name: %+v %v", st, err)
	}
	if _, err := w.client.Stock(context.Background(), "WH-NONE"); onec.ClassOf(err) != onec.Configuration || !strings.Contains(err.Error(), `"WH-NONE"`) {
		t.Fatalf("stock of an unknown warehouse: %v", err)
	}
}

// The reconciliation listing is the source's orders of the period, with totals
// and whether they are cancelled.
func TestListOrdersOfAPeriod(t *testing.T) {
	w := newWorld(t, odatasim.Options{}, 5*time.Second)
	w.client.cfg.Sources["ozon"] = SourceRefs{Partner: testPart, Counterparty: testCtr}
	a, b := testOrder("1"), testOrder("2")
	b.Date = "2026-12-03T10:00:00"
	o := testOrder("3")
	o.Source, o.ExternalID = "ozon", "ozon:3"
	for _, req := range []onec.CreateOrder{a, b, o} {
		if _, err := w.create(req); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.client.CancelOrder(context.Background(), a.ExternalID, ""); err != nil {
		t.Fatal(err)
	}
	got, err := w.client.ListOrders(context.Background(), onec.ListQuery{Source: "kaspi", DateFrom: "2026-12-01T00:00:00", DateTo: "2026-12-01T23:59:59"})
	if err != nil || len(got) != 1 || got[0].ExternalID != a.ExternalID || !got[0].Cancelled || got[0].Total == nil || !got[0].Total.Equal(a.Total) {
		t.Fatalf("list: %+v %v", got, err)
	}
}

// A Location header the client cannot use, and a proxy's 502 after 1C
// committed: the outcome is unknown, and the find by marker finds the order.
func TestAnAnswerMangledAfterCommitIsFoundByMarker(t *testing.T) {
	for _, kind := range []sim.Kind{odatasim.MangledLocation, odatasim.GatewayAfterCreate} {
		w := newWorld(t, odatasim.Options{}, 5*time.Second)
		w.sim.Faults.Add(1, sim.Fault{Op: "create", Kind: kind})
		req := testOrder("512344107")
		if _, err := w.client.CreateOrder(context.Background(), req); onec.ClassOf(err) != onec.Unknown {
			t.Fatalf("%s: %v, want an unknown outcome", kind, err)
		}
		if found, err := w.client.FindOrders(context.Background(), req.ExternalID); err != nil || len(found) != 1 {
			t.Fatalf("%s: find %v %v", kind, found, err)
		}
	}
}

// TestCheckResolvesTheAccountsMappings: the organisations and the other
// references each account names are resolved like onec.odata's, under the
// account's keys.
func TestCheckResolvesTheAccountsMappings(t *testing.T) {
	w := newWorld(t, odatasim.Options{}, 5*time.Second)
	w.client.cfg.Accounts = map[string]onec.Mapping{
		"ozon":    {Organization: w.sim.AddRef(odatasim.Organizations, "ООО Ромашка")},
		"ozon-ip": {Organization: testCtr}, // not in 1C
	}
	rep, err := w.client.Check(context.Background(), false, nil)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]string{}
	for _, r := range rep.Refs {
		names[r.Key] = r.Name + r.Problem
	}
	if names["connectors.ozon.onec.organization"] != "ООО Ромашка" ||
		!strings.Contains(names["connectors.ozon-ip.onec.organization"], "no object") {
		t.Fatalf("refs %v, want ozon's organisation named and ozon-ip's not found", names)
	}
}
