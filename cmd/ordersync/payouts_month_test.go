package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"syscall"
	"testing"
	"time"

	"github.com/shopspring/decimal"
	"github.com/xuri/excelize/v2"

	"github.com/ordersync/ordersync/internal/eventually"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/order"
	"github.com/ordersync/ordersync/internal/payouts"
	payrec "github.com/ordersync/ordersync/internal/payouts/reconcile"
	"github.com/ordersync/ordersync/internal/sim/kaspisim"
	"github.com/ordersync/ordersync/internal/sim/onecsim"
	"github.com/ordersync/ordersync/internal/sim/ozonsim"
)

// TestAPayoutMonthThroughTheSimulatorsPutsEveryOrderInItsCategory is the payouts'
// promise end to end: a month of invented Ozon data with every category planted in
// the simulators (postings, returns, financial operations), `ordersync run` (the
// real binary) brings the orders, the cancel and the returns into the simulated
// 1C, `payouts fetch` reads the month's operations, and `reconcile payouts` puts
// each order in its category, totals the cabinet by type, and its totals equal the
// simulator's to the kopeck, the marketplace's own total included.
//
// The month is the calendar month before the current one (Moscow time), so that
// every posting, return and operation lies in the past and the connector's
// lookback reaches it whatever the day the test runs.
func TestAPayoutMonthThroughTheSimulatorsPutsEveryOrderInItsCategory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	msk, err := time.LoadLocation("Europe/Moscow")
	if err != nil {
		t.Fatal(err)
	}
	monthStart, monthEnd := payouts.PreviousMonth(time.Now().In(msk))
	from, to := monthStart.Format(time.DateOnly), monthEnd.AddDate(0, 0, -1).Format(time.DateOnly)
	on := func(d int) time.Time { return monthStart.AddDate(0, 0, d-1).Add(12 * time.Hour) }
	lookback := (time.Since(monthStart) + 72*time.Hour).Truncate(time.Hour) + time.Hour

	// 1C dates its documents by the marketplace's date of the order (the reference
	// module's ДатаЗаказа = "ИзЗапроса"): the month's orders, brought into 1C now,
	// are 1C's orders of the month, as they are when the service brings each in as
	// it is placed.
	e := newEnvOn(t, "postgres", onecsim.Options{Location: msk, OrderDateFromRequest: true}, true)
	m := e.withMarketplaces()
	stockSetEnv(e,
		"ORDERSYNC_CONNECTORS__KASPI__ENABLED=false",
		"ORDERSYNC_CONNECTORS__WILDBERRIES__ENABLED=false",
		fmt.Sprintf("ORDERSYNC_CONNECTORS__OZON__LOOKBACK=%dh", int(lookback.Hours())),
		"ORDERSYNC_CONNECTORS__OZON__RETURNS__POLL_INTERVAL=200ms",
		"ORDERSYNC_UI__TIMEZONE=Europe/Moscow",
		"ORDERSYNC_ONEC__TIMEZONE=Europe/Moscow",
		"ORDERSYNC_PAYOUTS__SCHEDULE=off",
	)

	// The postings: each one product, its 1C total the product's price × quantity.
	posting := func(id, sku string, qty int, price string, day int) {
		m.ozon.AddPosting(ozonsim.Posting{PostingNumber: id, InProcessAt: on(day),
			Products: []ozonsim.Product{{OfferID: sku, Name: "Товар " + sku, Quantity: qty, Price: dec(price)}}})
	}
	// The financial operations, and the exact sum of those dated in the month.
	var opID int64 = 70000000000
	planted := decimal.Zero
	plantedLines := 0
	op := func(o ozonsim.Operation) {
		opID++
		o.ID = opID
		amount := o.AccrualsForSale.Add(o.SaleCommission).Add(o.DeliveryCharge).Add(o.ReturnDeliveryCharge)
		for _, s := range o.Services {
			amount = amount.Add(s.Price)
		}
		if o.Amount.IsZero() {
			o.Amount = amount
		}
		m.ozon.AddOperation(o)
		if !o.Date.Before(monthStart) && o.Date.Before(monthEnd) {
			planted = planted.Add(o.Amount)
			plantedLines++
		}
	}
	const delivered, returned = "OperationAgentDeliveredToCustomer", "ClientReturnAgentOperation"
	logistic := func(p string) ozonsim.OperationService {
		return ozonsim.OperationService{Name: "MarketplaceServiceItemDirectFlowLogistic", Price: dec(p)}
	}
	back := func(p string) ozonsim.OperationService {
		return ozonsim.OperationService{Name: "MarketplaceServiceItemReturnFlowLogistic", Price: dec(p)}
	}
	sale := func(id string, day int, accrued, commission string, services ...ozonsim.OperationService) {
		op(ozonsim.Operation{Type: delivered, TypeName: "Доставка покупателю", Date: on(day), PostingNumber: id,
			AccrualsForSale: dec(accrued), SaleCommission: dec(commission), Services: services})
	}
	reversal := func(id string, day int, accrued, commission string, services ...ozonsim.OperationService) {
		op(ozonsim.Operation{Type: returned, TypeName: "Получение возврата, отмены, невыкупа от покупателя", TransactionType: "returns",
			Date: on(day), PostingNumber: id, AccrualsForSale: dec(accrued), SaleCommission: dec(commission), Services: services})
	}
	want := map[string]payrec.Category{}

	// paid_as_sold: accrued for the sale equals 1C's total, less commission and logistics.
	posting("1001-0001-1", "SKU-A", 1, "1250.00", 2)
	sale("1001-0001-1", 9, "1250.00", "-187.50", logistic("-63.00"))
	want["1001-0001-1"] = payrec.PaidAsSold
	posting("1001-0002-1", "SKU-B", 2, "799.95", 3)
	sale("1001-0002-1", 11, "1599.90", "-239.99", logistic("-76.40"),
		ozonsim.OperationService{Name: "MarketplaceServiceItemDelivToCustomer", Price: dec("-25.00")})
	want["1001-0002-1"] = payrec.PaidAsSold

	// paid_with_difference: Ozon accrued less than 1C's total, and a claim (a penalty) on the posting.
	posting("1002-0001-1", "SKU-C", 1, "2400.00", 4)
	sale("1002-0001-1", 12, "2280.00", "-342.00", logistic("-63.00"))
	op(ozonsim.Operation{Type: "OperationClaim", TypeName: "Претензия", TransactionType: "other", Date: on(13),
		PostingNumber: "1002-0001-1", Amount: dec("-120.00")})
	want["1002-0001-1"] = payrec.PaidWithDifference

	// returned_in_1c: the buyer's return is in /v1/returns/list, run carries it into
	// 1C; Ozon reverses the sale.
	posting("1003-0001-1", "SKU-D", 1, "990.00", 5)
	sale("1003-0001-1", 10, "990.00", "-148.50", logistic("-63.00"))
	const retInto1C, retRefused = 1000000101, 1000000102
	m.ozon.AddReturn(ozonsim.Return{ID: retInto1C, Type: "FullReturn", PostingNumber: "1003-0001-1", OfferID: "SKU-D",
		Name: "Товар SKU-D", SKU: 200000001, Quantity: 1, Price: dec("990.00"), Reason: "Не подошёл размер", ReturnDate: on(20)})
	reversal("1003-0001-1", 24, "-990.00", "148.50", back("-45.00"))
	want["1003-0001-1"] = payrec.ReturnedIn1C

	// returned_not_in_1c, refused: the listed return names a product the order does
	// not hold, so 1C refuses it (not_in_order) and the journal's return fails.
	posting("1004-0001-1", "SKU-E", 1, "560.00", 6)
	sale("1004-0001-1", 11, "560.00", "-84.00", logistic("-63.00"))
	m.ozon.AddReturn(ozonsim.Return{ID: retRefused, Type: "ClientReturn", PostingNumber: "1004-0001-1", OfferID: "SKU-E-OTHER",
		Name: "Не тот товар", SKU: 200000002, Quantity: 1, Price: dec("560.00"), Reason: "Брак", ReturnDate: on(21)})
	reversal("1004-0001-1", 25, "-560.00", "84.00", back("-45.00"))
	want["1004-0001-1"] = payrec.ReturnedNotIn1C
	// returned_not_in_1c, not registered: Ozon reverses the sale but its list of
	// returns has none for the posting.
	posting("1004-0002-1", "SKU-F", 1, "430.00", 6)
	sale("1004-0002-1", 12, "430.00", "-64.50")
	reversal("1004-0002-1", 26, "-430.00", "64.50")
	want["1004-0002-1"] = payrec.ReturnedNotIn1C

	// paid_unknown: a sale of a posting Ozon never listed to the connector.
	sale("1005-0001-1", 14, "3100.00", "-465.00", logistic("-63.00"))
	want["1005-0001-1"] = payrec.PaidUnknown

	// in_1c_not_paid: brought into 1C, no operation in the month.
	posting("1006-0001-1", "SKU-G", 1, "1780.00", 27)
	want["1006-0001-1"] = payrec.In1CNotPaid

	// cancelled_but_paid: cancelled in Ozon once in 1C (the journal's cancel done,
	// 1C's order cancelled), yet a sale is paid.
	posting("1007-0001-1", "SKU-H", 1, "640.00", 7)
	sale("1007-0001-1", 15, "640.00", "-96.00", logistic("-63.00"))
	want["1007-0001-1"] = payrec.CancelledButPaid

	// The cabinet: storage on two days and search promotion; and a storage charge of the
	// month before, which the month's fetch does not read.
	const storage, promotion = "OperationMarketplaceServiceStorage", "OperationElectronicServicesPromotionInSearch"
	op(ozonsim.Operation{Type: storage, TypeName: "Услуга размещения товаров", Date: on(10), Amount: dec("-412.30")})
	op(ozonsim.Operation{Type: storage, TypeName: "Услуга размещения товаров", Date: on(20), Amount: dec("-398.75")})
	op(ozonsim.Operation{Type: promotion, TypeName: "Продвижение в поиске", Date: on(28), Amount: dec("-1500.00")})
	op(ozonsim.Operation{Type: storage, TypeName: "Услуга размещения товаров", Date: monthStart.Add(-12 * time.Hour), Amount: dec("-77.77")})
	wantCabinet := map[string]decimal.Decimal{storage: dec("-811.05"), promotion: dec("-1500.00")}

	postings := []string{"1001-0001-1", "1001-0002-1", "1002-0001-1", "1003-0001-1", "1004-0001-1", "1004-0002-1", "1006-0001-1", "1007-0001-1"}
	store := e.store()
	opStatus := func(key string) journal.Status {
		o, err := store.Get(ctx, key)
		if errors.Is(err, journal.ErrNotFound) {
			return ""
		}
		if err != nil {
			t.Fatal(err)
		}
		return o.Status
	}
	createKey := func(id string) string { return order.Key("ozon", "posting", id, "create") }

	svc := e.startService()
	eventually.True(t, "every posting in 1C once and done in the journal, or the service gone", func() bool {
		for _, id := range postings {
			if e.onec.CountExternal("ozon:"+id) != 1 || opStatus(createKey(id)) != journal.StatusDone {
				return svc.exited()
			}
		}
		return true
	})
	if svc.exited() {
		t.Fatalf("the service ended: %s; log:\n%s", svc.cmd.ProcessState, svc.stderr.String())
	}
	if err := m.ozon.Cancel("1007-0001-1", "Покупатель отменил заказ", "Клиент"); err != nil {
		t.Fatal(err)
	}
	cancelledIn1C := func(ext string) bool {
		for _, o := range e.onec.Orders() {
			if o.ExternalID == ext {
				return o.Cancelled
			}
		}
		return false
	}
	eventually.True(t, "the cancel done and 1C's order cancelled, the returns done and failed, or the service gone", func() bool {
		return svc.exited() || opStatus(order.CancelKeyOf(createKey("1007-0001-1"))) == journal.StatusDone && cancelledIn1C("ozon:1007-0001-1") &&
			opStatus(order.ReturnKey("ozon", fmt.Sprint(retInto1C))) == journal.StatusDone &&
			opStatus(order.ReturnKey("ozon", fmt.Sprint(retRefused))) == journal.StatusFailed
	})
	if svc.exited() {
		t.Fatalf("the service ended: %s; log:\n%s", svc.cmd.ProcessState, svc.stderr.String())
	}
	svc.signal(syscall.SIGTERM)
	if code := svc.wait(30 * time.Second); code != 0 {
		t.Fatalf("SIGTERM: exit %d; log:\n%s", code, svc.stderr.String())
	}

	// 1C holds each posting once and the one carried return once; the refused return not at all.
	if n := e.onec.Count(); n != len(postings) {
		t.Errorf("1C holds %d orders, want %d: %v", n, len(postings), externalIDs(e.onec.Orders()))
	}
	if n := e.onec.CountReturnsExternal(fmt.Sprintf("ozon:return:%d", retInto1C)); n != 1 {
		t.Errorf("1C holds the carried return %d times, want once", n)
	}
	if n := e.onec.CountReturnsExternal(fmt.Sprintf("ozon:return:%d", retRefused)); n != 0 {
		t.Errorf("1C holds the refused return %d times, want none", n)
	}
	if n := e.onec.CountReturns(); n != 1 {
		t.Errorf("1C holds %d returns, want 1", n)
	}
	refused, err := store.Get(ctx, order.ReturnKey("ozon", fmt.Sprint(retRefused)))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the refused return: %s", refused.LastError)

	out, stderr, code := e.cli("", "payouts", "fetch", "--source", "ozon", "--from", from, "--to", to, "--format", "json")
	if code != 0 {
		t.Fatalf("payouts fetch: exit %d: %s", code, stderr)
	}
	f := payoutsFetchJSON(t, out)
	if f.Read != plantedLines || f.Saved.Inserted != plantedLines || !f.Sum.Equal(planted) || f.Total == nil || !f.Total.Equal(planted) {
		t.Errorf("fetch: %+v; want %d lines, sum and Ozon's total %s", f, plantedLines, planted)
	}
	if v := m.ozon.FinanceViolations(); len(v) != 0 {
		t.Errorf("Ozon's finance rules broken: %+v", v)
	}

	out, stderr, code = e.cli("", "reconcile", "payouts", "--source", "ozon", "--from", from, "--to", to, "--format", "json")
	if code != exitFailed {
		t.Fatalf("reconcile payouts: exit %d, want %d (orders to act on): %s", code, exitFailed, stderr)
	}
	var rep payrec.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	got := map[string]payrec.Item{}
	for _, it := range rep.Items {
		got[it.OrderID] = it
	}
	for id, c := range want {
		if got[id].Category != c {
			t.Errorf("%s: %q (%s), want %q", id, got[id].Category, got[id].Note, c)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d orders in the report, want %d: %v", len(got), len(want), got)
	}
	for id, st := range map[string]string{"1003-0001-1": payrec.ReturnDone, "1004-0001-1": payrec.ReturnFailed, "1004-0002-1": payrec.ReturnNotCreated} {
		if got[id].Return != st {
			t.Errorf("%s: return status %q, want %q", id, got[id].Return, st)
		}
	}
	if it := got["1002-0001-1"]; it.Difference == nil || !it.Difference.Equal(dec("-120.00")) || !it.Penalty.Equal(dec("-120.00")) {
		t.Errorf("the order paid with a difference: difference %v, penalty %s; want -120.00 and -120.00", it.Difference, it.Penalty)
	}
	if it := got["1001-0002-1"]; !it.Logistics.Equal(dec("-101.40")) || !it.Commission.Equal(dec("-239.99")) || !it.Paid.Equal(dec("1258.51")) {
		t.Errorf("the order paid as sold: logistics %s commission %s paid %s", it.Logistics, it.Commission, it.Paid)
	}
	cab := map[string]decimal.Decimal{}
	for _, c := range rep.Cabinet {
		cab[c.Type] = c.Amount
	}
	if len(cab) != len(wantCabinet) {
		t.Errorf("the cabinet's totals %v, want %v", cab, wantCabinet)
	}
	for typ, amount := range wantCabinet {
		if !cab[typ].Equal(amount) {
			t.Errorf("the cabinet's %s: %s, want %s", typ, cab[typ], amount)
		}
	}
	tt := rep.Totals
	if tt.Lines != plantedLines || !tt.LinesSum.Equal(planted) || !tt.Balanced {
		t.Errorf("the report's lines %d summing to %s (balanced %v); Ozon was planted %d operations of %s", tt.Lines, tt.LinesSum, tt.Balanced, plantedLines, planted)
	}
	if tt.StatedVerdict != payrec.StatedEqual || tt.Stated == nil || !tt.Stated.Equal(planted) {
		t.Errorf("the marketplace's own total: %s %v, want %s equal", tt.StatedVerdict, tt.Stated, planted)
	}

	counts := map[payrec.Category]int{}
	for _, c := range want {
		counts[c]++
	}
	for _, ct := range rep.Categories {
		if ct.Orders != counts[ct.Category] || ct.Orders == 0 {
			t.Errorf("category %s: %d orders, want %d (and at least one)", ct.Category, ct.Orders, counts[ct.Category])
		}
	}
	if len(rep.Categories) != len(payrec.Categories) {
		t.Errorf("%d categories in the report, want %d", len(rep.Categories), len(payrec.Categories))
	}
	var summary []string
	for _, c := range payrec.Categories {
		summary = append(summary, fmt.Sprintf("%s %d", c, counts[c]))
	}
	sort.Strings(summary)
	t.Logf("month %s – %s: %d operations, sum %s, Ozon's total %v; cabinet %v; %v", from, to, tt.Lines, tt.LinesSum, tt.Stated, cab, summary)
}

// TestAPayoutMonthOfKaspiImportedPutsEveryOrderInItsCategory is the same promise
// for Kaspi, which has no payout API: `ordersync run` brings the month's Kaspi
// orders into 1C (one of them cancelled, one RETURNED and carried into 1C as a
// return), the cabinet's payout export is written as an xlsx file and read with
// `payouts import`, and `reconcile payouts` puts each order in its category, its
// totals equal to the file's rows and to the file's own total row.
func TestAPayoutMonthOfKaspiImportedPutsEveryOrderInItsCategory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	almaty, err := time.LoadLocation("Asia/Almaty")
	if err != nil {
		t.Fatal(err)
	}
	monthStart, monthEnd := payouts.PreviousMonth(time.Now().In(almaty))
	from, to := monthStart.Format(time.DateOnly), monthEnd.AddDate(0, 0, -1).Format(time.DateOnly)
	last := monthEnd.AddDate(0, 0, -1).Day()
	on := func(d int) time.Time { return monthStart.AddDate(0, 0, d-1).Add(12 * time.Hour) }
	lookback := (time.Since(monthStart) + 72*time.Hour).Truncate(time.Hour) + time.Hour

	e := newEnvOn(t, "postgres", onecsim.Options{Location: almaty, OrderDateFromRequest: true}, true)
	m := e.withMarketplaces()
	stockSetEnv(e,
		"ORDERSYNC_CONNECTORS__OZON__ENABLED=false",
		"ORDERSYNC_CONNECTORS__WILDBERRIES__ENABLED=false",
		fmt.Sprintf("ORDERSYNC_CONNECTORS__KASPI__LOOKBACK=%dh", int(lookback.Hours())),
		"ORDERSYNC_CONNECTORS__KASPI__RETURNS__POLL_INTERVAL=200ms",
		"ORDERSYNC_UI__TIMEZONE=Asia/Almaty",
		"ORDERSYNC_ONEC__TIMEZONE=Asia/Almaty",
		"ORDERSYNC_PAYOUTS__SCHEDULE=off",
	)
	kaspiOrder := func(code, sku, qty, price string, day int) {
		if err := m.kaspi.AddOrder(kaspisim.Order{Code: code, CreationDate: on(day),
			Customer: kaspisim.Customer{FirstName: "Айгерим", LastName: "Серикова", CellPhone: "7011234567"},
			Entries:  []kaspisim.Entry{{OfferCode: sku, Name: "Товар " + sku, Quantity: dec(qty), BasePrice: dec(price)}}}); err != nil {
			t.Fatal(err)
		}
	}
	// The export's rows: order, date, type, amount, commission, delivery, penalty, payout.
	type row struct {
		order, typ                                    string
		day                                           int
		amount, commission, delivery, penalty, payout string
	}
	var rows []row
	want := map[string]payrec.Category{}

	kaspiOrder("710000001", "SKU-K1", "1", "15000", 2)
	rows = append(rows, row{"710000001", "Продажа", 1, "15000", "1800", "", "", "13200"})
	want["710000001"] = payrec.PaidAsSold
	kaspiOrder("710000002", "SKU-K2", "2", "4500.50", 3)
	rows = append(rows, row{"710000002", "Продажа", 9, "8500", "1020", "600", "250", "6630"})
	want["710000002"] = payrec.PaidWithDifference
	kaspiOrder("710000003", "SKU-K3", "1", "23990", 4)
	rows = append(rows, row{"710000003", "Продажа", 10, "23990", "2878.80", "900", "", "20211.20"},
		row{"710000003", "Возврат", 22, "23990", "2878.80", "", "", "-21111.20"})
	want["710000003"] = payrec.ReturnedIn1C
	kaspiOrder("710000004", "SKU-K4", "1", "7300", 5)
	rows = append(rows, row{"710000004", "Продажа", 11, "7300", "876", "", "", "6424"},
		row{"710000004", "Возврат", 24, "7300", "876", "", "", "-6424"})
	want["710000004"] = payrec.ReturnedNotIn1C // Kaspi never lists it RETURNED
	rows = append(rows, row{"719999999", "Продажа", 12, "5100", "612", "", "", "4488"})
	want["719999999"] = payrec.PaidUnknown
	kaspiOrder("710000006", "SKU-K6", "3", "1200", 26)
	want["710000006"] = payrec.In1CNotPaid
	kaspiOrder("710000007", "SKU-K7", "1", "9900", 6)
	rows = append(rows, row{"710000007", "Продажа", 13, "9900", "1188", "", "", "8712"})
	want["710000007"] = payrec.CancelledButPaid
	rows = append(rows, row{"", "Реклама (Kaspi Реклама)", 15, "", "", "", "", "-5000"},
		row{"", "Реклама (Kaspi Реклама)", last, "", "", "", "", "-2500.75"},
		row{"", "Хранение", 20, "", "", "", "", "-1234.56"})
	wantCabinet := map[string]decimal.Decimal{"Реклама (Kaspi Реклама)": dec("-7500.75"), "Хранение": dec("-1234.56")}
	sum := decimal.Zero
	for _, r := range rows {
		sum = sum.Add(dec(r.payout))
	}

	orders := []string{"710000001", "710000002", "710000003", "710000004", "710000006", "710000007"}
	store := e.store()
	opStatus := func(key string) journal.Status {
		o, err := store.Get(ctx, key)
		if errors.Is(err, journal.ErrNotFound) {
			return ""
		}
		if err != nil {
			t.Fatal(err)
		}
		return o.Status
	}
	createKey := func(id string) string { return order.Key("kaspi", "order", id, "create") }
	svc := e.startService()
	eventually.True(t, "every Kaspi order in 1C once and done, or the service gone", func() bool {
		for _, id := range orders {
			if e.onec.CountExternal("kaspi:"+id) != 1 || opStatus(createKey(id)) != journal.StatusDone {
				return svc.exited()
			}
		}
		return true
	})
	if svc.exited() {
		t.Fatalf("the service ended: %s; log:\n%s", svc.cmd.ProcessState, svc.stderr.String())
	}
	if err := m.kaspi.Returned("710000003"); err != nil {
		t.Fatal(err)
	}
	if err := m.kaspi.SetStatus("710000007", "CANCELLED"); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, "the return done in 1C and the cancel done, or the service gone", func() bool {
		return svc.exited() || opStatus(order.ReturnKey("kaspi", "710000003")) == journal.StatusDone &&
			opStatus(order.CancelKeyOf(createKey("710000007"))) == journal.StatusDone
	})
	if svc.exited() {
		t.Fatalf("the service ended: %s; log:\n%s", svc.cmd.ProcessState, svc.stderr.String())
	}
	svc.signal(syscall.SIGTERM)
	if code := svc.wait(30 * time.Second); code != 0 {
		t.Fatalf("SIGTERM: exit %d; log:\n%s", code, svc.stderr.String())
	}
	if n := e.onec.CountReturnsExternal("kaspi:return:710000003"); n != 1 || e.onec.CountReturns() != 1 {
		t.Errorf("1C holds the returned order's return %d times and %d returns in all, want 1 and 1", n, e.onec.CountReturns())
	}

	// The cabinet's export: a title, the header, the rows, the total row.
	x := excelize.NewFile()
	put := func(r int, vals ...any) {
		t.Helper()
		cell, _ := excelize.CoordinatesToCellName(1, r)
		if err := x.SetSheetRow("Sheet1", cell, &vals); err != nil {
			t.Fatal(err)
		}
	}
	put(1, "Выплаты Kaspi Магазин за "+monthStart.Format("01.2006"))
	put(3, "Номер заказа", "Дата операции", "Тип операции", "Сумма", "Комиссия", "Доставка", "Штраф", "К выплате")
	for i, r := range rows {
		put(4+i, r.order, on(r.day).Format("02.01.2006 15:04"), r.typ, r.amount, r.commission, r.delivery, r.penalty, r.payout)
	}
	put(4+len(rows), "Итого", "", "", "", "", "", "", sum.StringFixed(2))
	file := filepath.Join(t.TempDir(), "kaspi-payouts.xlsx")
	if err := x.SaveAs(file); err != nil {
		t.Fatal(err)
	}
	out, stderr, code := e.cli("", "payouts", "import", "--source", "kaspi", file, "--format", "json")
	if code != 0 {
		t.Fatalf("payouts import: exit %d: %s", code, stderr)
	}
	f := payoutsFetchJSON(t, out)
	if f.Read != len(rows) || f.Saved.Inserted != len(rows) || !f.Sum.Equal(sum) || f.Total == nil || !f.Total.Equal(sum) {
		t.Errorf("import: %+v; want %d rows summing to %s, the total row %s", f, len(rows), sum, sum)
	}

	out, stderr, code = e.cli("", "reconcile", "payouts", "--source", "kaspi", "--from", from, "--to", to, "--format", "json")
	if code != exitFailed {
		t.Fatalf("reconcile payouts: exit %d, want %d: %s", code, exitFailed, stderr)
	}
	var rep payrec.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	got := map[string]payrec.Item{}
	for _, it := range rep.Items {
		got[it.OrderID] = it
	}
	for id, c := range want {
		if got[id].Category != c {
			t.Errorf("%s: %q (%s), want %q", id, got[id].Category, got[id].Note, c)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d orders in the report, want %d", len(got), len(want))
	}
	if it := got["710000002"]; it.Difference == nil || !it.Difference.Equal(dec("-501.00")) || !it.Penalty.Equal(dec("-250")) {
		t.Errorf("the order paid with a difference: difference %v, penalty %s; want -501.00 and -250", it.Difference, it.Penalty)
	}
	cab := map[string]decimal.Decimal{}
	for _, c := range rep.Cabinet {
		cab[c.Type] = c.Amount
	}
	for typ, amount := range wantCabinet {
		if !cab[typ].Equal(amount) {
			t.Errorf("the cabinet's %s: %s, want %s", typ, cab[typ], amount)
		}
	}
	if len(cab) != len(wantCabinet) {
		t.Errorf("the cabinet's totals %v, want %v", cab, wantCabinet)
	}
	tt := rep.Totals
	if tt.Lines != len(rows) || !tt.LinesSum.Equal(sum) || !tt.Balanced {
		t.Errorf("the report's %d lines sum to %s (balanced %v); the file has %d rows of %s", tt.Lines, tt.LinesSum, tt.Balanced, len(rows), sum)
	}
	if tt.StatedVerdict != payrec.StatedEqual || tt.Stated == nil || !tt.Stated.Equal(sum) {
		t.Errorf("the file's total row: %s %v, want %s equal", tt.StatedVerdict, tt.Stated, sum)
	}
	t.Logf("month %s – %s: %d rows, sum %s, the file's total %v; cabinet %v", from, to, tt.Lines, tt.LinesSum, tt.Stated, cab)
}
