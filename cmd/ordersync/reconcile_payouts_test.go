package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"
	"github.com/xuri/excelize/v2"

	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/logging"
	"github.com/ordersync/ordersync/internal/order"
	"github.com/ordersync/ordersync/internal/payouts"
	payrec "github.com/ordersync/ordersync/internal/payouts/reconcile"
	"github.com/ordersync/ordersync/internal/sim/onecsim"
)

// payoutMonth is the invented month of Ozon payouts the CLI's and the page's tests
// reconcile: October 2026 in Almaty, an order of every category, the cabinet's
// storage and advertising.
const payoutFrom, payoutTo = "2026-10-01", "2026-10-31"

// payoutZone is the zone of the pages and the CLI in these tests.
var payoutZone = []string{"ORDERSYNC_UI__TIMEZONE=Asia/Almaty", "ORDERSYNC_ONEC__TIMEZONE=Asia/Almaty"}

// plantPayoutMonth writes the month into e's database and 1C and returns each
// order's category and the exact sum of the month's lines.
func plantPayoutMonth(t *testing.T, e *env) (map[string]payrec.Category, decimal.Decimal) {
	t.Helper()
	ctx := context.Background()
	a := &app{environ: e.environ, stdout: io.Discard, stderr: io.Discard}
	cfg, err := a.loadConfig()
	if err != nil {
		t.Fatal(err)
	}
	db, err := a.openReadyDB(ctx, cfg, logging.Discard())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	almaty, err := time.LoadLocation("Asia/Almaty")
	if err != nil {
		t.Fatal(err)
	}
	on := func(d int) time.Time { return time.Date(2026, 10, d, 12, 0, 0, 0, almaty) }
	d := decimal.RequireFromString
	js := db.Journal()
	finish := func(key string, f journal.Finish) {
		t.Helper()
		c, err := js.ClaimKey(ctx, key, "test")
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Finish(ctx, f); err != nil {
			t.Fatal(err)
		}
	}
	register := func(key, kind, ext string, payload []byte) {
		t.Helper()
		if _, err := js.Register(ctx, journal.NewOperation{Key: key, Kind: kind, Source: "ozon", ExternalID: ext, Payload: payload}); err != nil {
			t.Fatal(err)
		}
	}
	key := func(id string) string { return order.Key("ozon", "posting", id, "create") }
	// created: in 1C (cancelled there when asked) and done in the journal.
	created := func(id string, at time.Time, total string, cancelledIn1C bool) {
		t.Helper()
		o := e.onec.PlantOrder(onecsim.PlantedOrder{ExternalID: "ozon:" + id, Date: at.In(almaty).Format("2006-01-02T15:04:05"),
			Total: d(total), Currency: "RUB", Posted: true, Cancelled: cancelledIn1C})
		b, _ := json.Marshal(order.Order{Source: "ozon", ExternalID: id, Number: id, CreatedAt: at.UTC(), Currency: "RUB",
			Customer: order.Customer{Name: "Покупатель"}, Lines: []order.Line{{SKU: "SKU-1", Name: "Чайник", Quantity: d("1"), Price: d(total)}}})
		register(key(id), order.KindCreate, id, b)
		finish(key(id), journal.Finish{Status: journal.StatusDone, Result: &journal.Result{Ref: o.Ref, Number: o.Number}, Ref: o.Ref})
	}
	ret := func(id, retID string, st journal.Status, res *journal.Result, lastErr string) {
		t.Helper()
		r := order.Return{Source: "ozon", ID: retID, Type: order.ReturnFull, OrderID: id, OrderKey: key(id), CreatedAt: on(20).UTC(),
			Currency: "RUB", Lines: []order.Line{{SKU: "SKU-1", Name: "Чайник", Quantity: d("1"), Price: d("300")}}}
		register(order.ReturnKey("ozon", retID), order.KindReturn, id, r.Canonical())
		if st != journal.StatusPending {
			f := journal.Finish{Status: st, Result: res, Error: lastErr}
			if res != nil {
				f.Ref = res.Ref
			}
			finish(order.ReturnKey("ozon", retID), f)
		}
	}
	var lines []payouts.Line
	sum := decimal.Zero
	line := func(kind payouts.Kind, typ, id string, at time.Time, accrued, comm, logi, pen, other string) {
		l := payouts.Line{Source: "ozon", LineID: "op-" + decimal.NewFromInt(int64(len(lines)+1)).String(), Type: typ, Kind: kind, Date: at,
			OrderID: id, Currency: "RUB", AccruedForSale: d(accrued), Commission: d(comm), Logistics: d(logi), Penalty: d(pen), Other: d(other)}
		l.Amount = l.Parts()
		lines = append(lines, l)
		if at.Month() == time.October {
			sum = sum.Add(l.Amount)
		}
	}
	const sale, retK, cab = payouts.KindSale, payouts.KindReturn, payouts.KindCabinet
	const delivered, returned = "OperationAgentDeliveredToCustomer", "ClientReturnAgentOperation"
	want := map[string]payrec.Category{}

	for i, id := range []string{"0101-0001-1", "0101-0002-1", "0101-0003-1"} {
		created(id, on(2+i), "1250.00", false)
		line(sale, delivered, id, on(9+i), "1250.00", "-187.50", "-63.00", "0", "0")
		want[id] = payrec.PaidAsSold
	}
	created("0102-0001-1", on(4), "2400.00", false)
	line(sale, delivered, "0102-0001-1", on(12), "2280.00", "-342.00", "-63.00", "-120.00", "-15.50")
	want["0102-0001-1"] = payrec.PaidWithDifference

	created("0103-0001-1", on(5), "990.00", false)
	line(sale, delivered, "0103-0001-1", on(10), "990.00", "-148.50", "-63.00", "0", "0")
	line(retK, returned, "0103-0001-1", on(24), "-990.00", "148.50", "-45.00", "0", "0")
	ret("0103-0001-1", "9001", journal.StatusDone, &journal.Result{Ref: "4f1c-ret", Number: "ВЗ-000014"}, "")
	want["0103-0001-1"] = payrec.ReturnedIn1C

	created("0104-0001-1", on(6), "560.00", false)
	line(retK, returned, "0104-0001-1", on(25), "-560.00", "84.00", "-45.00", "0", "0")
	ret("0104-0001-1", "9002", journal.StatusFailed, nil, "1С отклонила возврат: документ-основание не проведён")
	want["0104-0001-1"] = payrec.ReturnedNotIn1C
	created("0104-0002-1", on(6), "430.00", false)
	line(retK, returned, "0104-0002-1", on(26), "-430.00", "64.50", "0", "0", "0")
	want["0104-0002-1"] = payrec.ReturnedNotIn1C

	line(sale, delivered, "0105-0001-1", on(14), "3100.00", "-465.00", "-63.00", "0", "0")
	want["0105-0001-1"] = payrec.PaidUnknown

	created("0106-0001-1", on(29), "1780.00", false)
	want["0106-0001-1"] = payrec.In1CNotPaid

	created("0107-0001-1", on(7), "640.00", true)
	line(sale, delivered, "0107-0001-1", on(15), "640.00", "-96.00", "-63.00", "0", "0")
	want["0107-0001-1"] = payrec.CancelledButPaid

	line(cab, "Хранение (услуга размещения)", "", on(10), "0", "0", "0", "0", "-412.30")
	line(cab, "Хранение (услуга размещения)", "", on(20), "0", "0", "0", "0", "-398.75")
	line(cab, "Продвижение в поиске", "", on(31), "0", "0", "0", "0", "-1500.00")
	if _, err := db.Payouts().SaveLines(ctx, lines); err != nil {
		t.Fatal(err)
	}
	return want, sum
}

// TestReconcilePayoutsCLI runs `ordersync reconcile payouts` on the month: every
// order in its category, the totals equal the lines to the kopeck, exit 1 for the
// orders to act on; the workbook written with --output has a sheet per category
// with Russian headers; the orders' reconcile still takes its flags.
func TestReconcilePayoutsCLI(t *testing.T) {
	t.Parallel()
	e := newEnvOn(t, "sqlite", onecsim.Options{}, true)
	e.environ = append(e.environ, payoutZone...)
	want, sum := plantPayoutMonth(t, e)

	out, stderr, code := e.cli("", "reconcile", "payouts", "--source", "ozon", "--from", payoutFrom, "--to", payoutTo, "--format", "json")
	if code != exitFailed {
		t.Fatalf("exit %d, want %d (orders to act on): %s", code, exitFailed, stderr)
	}
	var rep payrec.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	got := map[string]payrec.Category{}
	for _, it := range rep.Items {
		got[it.OrderID] = it.Category
	}
	for id, c := range want {
		if got[id] != c {
			t.Errorf("%s: %q, want %q", id, got[id], c)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d orders, want %d", len(got), len(want))
	}
	if !rep.Totals.LinesSum.Equal(sum) || !rep.Totals.Balanced {
		t.Errorf("the lines' sum %s (balanced %v), planted %s", rep.Totals.LinesSum, rep.Totals.Balanced, sum)
	}
	if !strings.Contains(stderr, "need something done") {
		t.Errorf("stderr says %q", stderr)
	}

	file := filepath.Join(t.TempDir(), "october.xlsx")
	e.environ = append(e.environ, "ORDERSYNC_UI__LANG=ru")
	if _, stderr, code := e.cli("", "reconcile", "payouts", "--source", "ozon", "--from", payoutFrom, "--to", payoutTo,
		"--format", "xlsx", "--output", file); code != exitFailed {
		t.Fatalf("xlsx: exit %d: %s", code, stderr)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	f, err := excelize.OpenReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if sheets := f.GetSheetList(); len(sheets) != 1+len(payrec.Categories) || sheets[0] != "итоги" {
		t.Errorf("sheets %q", sheets)
	}
	if h, _ := f.GetCellValue(payrec.SheetName("ru", payrec.PaidAsSold), "B1"); h != "Заказ" {
		t.Errorf("the Russian workbook's order column is headed %q", h)
	}

	// The orders' reconcile is unchanged by its new subcommand.
	if _, stderr, code := e.cli("", "reconcile", "--source", "site", "--from", payoutFrom, "--to", payoutTo); code != 0 && code != exitFailed {
		t.Errorf("reconcile --source site: exit %d: %s", code, stderr)
	}
	for _, args := range [][]string{
		{"reconcile", "payouts", "--source", "site", "--from", payoutFrom, "--to", payoutTo},
		{"reconcile", "payouts", "--source", "ozon", "--from", payoutTo, "--to", payoutFrom},
		{"reconcile", "payouts", "--source", "ozon", "--from", "2026-01-01", "--to", "2026-12-31"},
	} {
		if _, stderr, code := e.cli("", args...); code != exitUsage {
			t.Errorf("%q: exit %d, want %d: %s", args, code, exitUsage, stderr)
		}
	}
}
