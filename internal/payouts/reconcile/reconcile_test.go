package reconcile_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/onec/httpservice"
	"github.com/ordersync/ordersync/internal/order"
	"github.com/ordersync/ordersync/internal/payouts"
	payrec "github.com/ordersync/ordersync/internal/payouts/reconcile"
	"github.com/ordersync/ordersync/internal/sim/onecsim"
	"github.com/ordersync/ordersync/internal/store/postgres"
	"github.com/ordersync/ordersync/internal/store/sqlite"
	"github.com/ordersync/ordersync/internal/testdb"
)

var almaty = mustLoc("Asia/Almaty")

func mustLoc(name string) *time.Location {
	loc, err := time.LoadLocation(name)
	if err != nil {
		return time.FixedZone(name, 5*3600)
	}
	return loc
}

// The month every test reconciles: October 2026 in Almaty.
var (
	monthFrom = time.Date(2026, 10, 1, 0, 0, 0, 0, almaty)
	monthTo   = time.Date(2026, 10, 31, 0, 0, 0, 0, almaty)
)

func on(d, h int) time.Time { return time.Date(2026, 10, d, h, 0, 0, 0, almaty) }

func dec(s string) decimal.Decimal { return decimal.RequireFromString(s) }

type stores struct {
	journal journal.Store
	payouts payouts.Store
}

var backends = []struct {
	name string
	open func(t *testing.T) stores
}{
	{"sqlite", func(t *testing.T) stores {
		db, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(t.TempDir(), "ordersync.db")})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		if _, err := db.Migrate(context.Background()); err != nil {
			t.Fatal(err)
		}
		return stores{db.Journal(), db.Payouts()}
	}},
	{"postgres", func(t *testing.T) stores {
		db, err := postgres.Open(context.Background(), postgres.Config{URL: testdb.URL(t)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(db.Close)
		if _, err := db.Migrate(context.Background()); err != nil {
			t.Fatal(err)
		}
		return stores{db.Journal(), db.Payouts()}
	}},
}

// month is a month of one source's orders, lines and 1C documents.
type month struct {
	t      *testing.T
	ctx    context.Context
	st     stores
	onec   *onecsim.OneC
	client *httpservice.Client
	source string
	lines  []payouts.Line
	// planted is the exact sum of the lines dated in the month.
	planted decimal.Decimal
	seq     int
}

func newMonth(t *testing.T, st stores) *month {
	t.Helper()
	m := &month{t: t, ctx: context.Background(), st: st, source: "ozon"}
	m.onec = onecsim.New(onecsim.Options{Location: almaty})
	ts := httptest.NewServer(m.onec)
	t.Cleanup(ts.Close)
	t.Cleanup(m.onec.Close)
	c, err := httpservice.New(httpservice.Config{BaseURL: ts.URL + m.onec.Prefix(), Timeout: 10 * time.Second, RetryBackoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	m.client = c
	return m
}

func (m *month) key(id string) string { return order.Key(m.source, "posting", id, "create") }

// inOneC plants 1C's order of id, dated at, with total.
func (m *month) inOneC(id string, at time.Time, total string, cancelled bool) onecsim.Order {
	return m.onec.PlantOrder(onecsim.PlantedOrder{ExternalID: order.OneCExternalID(m.source, id),
		Date: at.In(almaty).Format("2006-01-02T15:04:05"), Total: dec(total), Currency: "RUB", Posted: true, Cancelled: cancelled})
}

// register registers op and, unless status is pending, finishes it so.
func (m *month) register(key, kind, ext string, payload []byte, status journal.Status, res *journal.Result, lastErr string) {
	m.t.Helper()
	if _, err := m.st.journal.Register(m.ctx, journal.NewOperation{Key: key, Kind: kind, Source: m.source, ExternalID: ext, Payload: payload}); err != nil {
		m.t.Fatal(err)
	}
	if status == journal.StatusPending {
		return
	}
	c, err := m.st.journal.ClaimKey(m.ctx, key, "test")
	if err != nil {
		m.t.Fatal(err)
	}
	f := journal.Finish{Status: status, Result: res, Error: lastErr}
	if res != nil {
		f.Ref = res.Ref
	}
	if err := c.Finish(m.ctx, f); err != nil {
		m.t.Fatal(err)
	}
}

// created is an order ordersync created in 1C on day d: its create done with 1C's ref.
func (m *month) created(id string, at time.Time, total string) {
	m.t.Helper()
	o := m.inOneC(id, at, total, false)
	m.createOp(id, at, total, journal.StatusDone, &journal.Result{Ref: o.Ref, Number: o.Number})
}

func (m *month) createOp(id string, at time.Time, total string, st journal.Status, res *journal.Result) {
	m.t.Helper()
	o := order.Order{Source: m.source, ExternalID: id, Number: id, CreatedAt: at.UTC(), Currency: "RUB",
		Customer: order.Customer{Name: "Покупатель"},
		Lines:    []order.Line{{SKU: "SKU-1", Name: "Чайник", Quantity: dec("1"), Price: dec(total)}}}
	b, err := json.Marshal(o)
	if err != nil {
		m.t.Fatal(err)
	}
	lastErr := ""
	if st == journal.StatusFailed {
		lastErr = "1C refused the order"
	}
	m.register(m.key(id), order.KindCreate, id, b, st, res, lastErr)
}

func (m *month) cancelOp(id string) {
	m.t.Helper()
	b, _ := json.Marshal(map[string]string{"source": m.source, "external_id": id, "reason": "покупатель отказался"})
	m.register(order.CancelKeyOf(m.key(id)), order.KindCancel, id, b, journal.StatusDone, &journal.Result{Ref: "cancel"}, "")
}

func (m *month) returnOp(id, retID string, st journal.Status, res *journal.Result, lastErr string) {
	m.t.Helper()
	r := order.Return{Source: m.source, ID: retID, Type: order.ReturnFull, OrderID: id, OrderKey: m.key(id),
		CreatedAt: on(20, 10).UTC(), Currency: "RUB", Lines: []order.Line{{SKU: "SKU-1", Name: "Чайник", Quantity: dec("1"), Price: dec("500")}}}
	m.register(order.ReturnKey(m.source, retID), order.KindReturn, id, r.Canonical(), st, res, lastErr)
}

// line adds a line; its amount is the sum of its parts.
func (m *month) line(kind payouts.Kind, typ, orderID string, at time.Time, accrued, comm, logi, pen, other string) {
	m.seq++
	l := payouts.Line{Source: m.source, LineID: "L" + decimal.NewFromInt(int64(m.seq)).String(), Type: typ, Kind: kind,
		Date: at, OrderID: orderID, Currency: "RUB",
		AccruedForSale: dec(accrued), Commission: dec(comm), Logistics: dec(logi), Penalty: dec(pen), Other: dec(other)}
	l.Amount = l.Parts()
	m.lines = append(m.lines, l)
	if !at.Before(monthFrom) && at.Before(monthTo.AddDate(0, 0, 1)) {
		m.planted = m.planted.Add(l.Amount)
	}
}

func (m *month) save() {
	m.t.Helper()
	if _, err := m.st.payouts.SaveLines(m.ctx, m.lines); err != nil {
		m.t.Fatal(err)
	}
}

func (m *month) run() payrec.Report {
	m.t.Helper()
	rep, err := payrec.Run(m.ctx, payrec.Params{Source: m.source, From: monthFrom, To: monthTo, Location: almaty,
		Lines: m.st.payouts, Journal: m.st.journal, OneC: m.client})
	if err != nil {
		m.t.Fatal(err)
	}
	return rep
}

// plant puts every category's orders in the month and returns the category each
// order must land in.
func (m *month) plant() map[string]payrec.Category {
	const sale, ret, svc, cab = payouts.KindSale, payouts.KindReturn, payouts.KindOrderService, payouts.KindCabinet
	want := map[string]payrec.Category{}

	m.created("P-SOLD", on(3, 10), "1000.00")
	m.line(sale, "OperationAgentDeliveredToCustomer", "P-SOLD", on(8, 12), "1000.00", "-150.00", "-50.00", "0", "0")
	want["P-SOLD"] = payrec.PaidAsSold

	m.created("P-DIFF", on(4, 11), "2000.00")
	m.line(sale, "OperationAgentDeliveredToCustomer", "P-DIFF", on(9, 12), "1900.00", "-190.00", "0", "-100.00", "-10.01")
	want["P-DIFF"] = payrec.PaidWithDifference

	m.created("P-RET-OK", on(5, 9), "500.00")
	m.line(sale, "OperationAgentDeliveredToCustomer", "P-RET-OK", on(10, 12), "500.00", "-75.00", "-20.00", "0", "0")
	m.line(ret, "ClientReturnAgentOperation", "P-RET-OK", on(21, 12), "-500.00", "75.00", "-30.00", "0", "0")
	m.returnOp("P-RET-OK", "R-1", journal.StatusDone, &journal.Result{Ref: "ret-ref-1", Number: "ВЗ-000001"}, "")
	want["P-RET-OK"] = payrec.ReturnedIn1C

	for _, id := range []string{"P-RET-NONE", "P-RET-PEND", "P-RET-FAIL"} {
		m.created(id, on(6, 9), "300.00")
		m.line(ret, "ClientReturnAgentOperation", id, on(22, 12), "-300.00", "45.00", "0", "0", "0")
		want[id] = payrec.ReturnedNotIn1C
	}
	m.returnOp("P-RET-PEND", "R-2", journal.StatusPending, nil, "")
	m.returnOp("P-RET-FAIL", "R-3", journal.StatusFailed, nil, "1C refused the return: the order is not posted")

	m.line(sale, "OperationAgentDeliveredToCustomer", "P-UNKNOWN", on(11, 12), "777.77", "-77.77", "0", "0", "0")
	want["P-UNKNOWN"] = payrec.PaidUnknown

	m.created("P-NOTPAID", on(28, 15), "450.00")
	want["P-NOTPAID"] = payrec.In1CNotPaid
	m.created("P-LATER", on(29, 15), "650.00")
	m.line(sale, "OperationAgentDeliveredToCustomer", "P-LATER", time.Date(2026, 11, 5, 12, 0, 0, 0, almaty), "650.00", "-65.00", "0", "0", "0")
	want["P-LATER"] = payrec.In1CNotPaid

	m.created("P-CANC", on(7, 10), "800.00")
	m.cancelOp("P-CANC")
	m.line(sale, "OperationAgentDeliveredToCustomer", "P-CANC", on(15, 12), "800.00", "-80.00", "0", "0", "0")
	want["P-CANC"] = payrec.CancelledButPaid

	o := m.inOneC("P-CANC1C", on(7, 11), "900.00", true)
	m.createOp("P-CANC1C", on(7, 11), "900.00", journal.StatusDone, &journal.Result{Ref: o.Ref, Number: o.Number})
	m.line(sale, "OperationAgentDeliveredToCustomer", "P-CANC1C", on(16, 12), "900.00", "-90.00", "0", "0", "0")
	want["P-CANC1C"] = payrec.CancelledButPaid

	// Created in September, its logistics billed in October.
	m.created("P-SERV", time.Date(2026, 9, 25, 10, 0, 0, 0, almaty), "400.00")
	m.line(svc, "MarketplaceServiceItemDelivToCustomer", "P-SERV", on(2, 12), "0", "0", "-70.00", "0", "0")
	want["P-SERV"] = payrec.PaidWithDifference

	// A create that failed, yet the marketplace paid the order.
	m.createOp("P-FAILED", on(12, 9), "250.00", journal.StatusFailed, nil)
	m.line(sale, "OperationAgentDeliveredToCustomer", "P-FAILED", on(19, 12), "250.00", "-25.00", "0", "0", "0")
	want["P-FAILED"] = payrec.PaidWithDifference

	// Cancelled in 1C and never paid: nothing to reconcile.
	m.inOneC("P-CANC-NOLINE", on(13, 9), "120.00", true)

	m.line(cab, "Хранение", "", on(10, 0), "0", "0", "0", "0", "-300.00")
	m.line(cab, "Хранение", "", on(20, 0), "0", "0", "0", "0", "-300.45")
	m.line(cab, "Реклама", "", on(31, 23), "0", "0", "0", "0", "-1200.50")
	// Outside the month: not counted.
	m.line(cab, "Хранение", "", time.Date(2026, 9, 30, 23, 0, 0, 0, almaty), "0", "0", "0", "0", "-999.99")
	m.save()
	return want
}

// TestEveryPlantedOrderLandsInItsCategory reconciles a month with every category
// planted: each order lands where it belongs, the cabinet is totalled by type, and
// the totals equal the sum of the lines planted in the month to the kopeck.
func TestEveryPlantedOrderLandsInItsCategory(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			m := newMonth(t, b.open(t))
			want := m.plant()
			rep := m.run()

			got := map[string]payrec.Item{}
			for _, it := range rep.Items {
				if _, dup := got[it.OrderID]; dup {
					t.Errorf("%s is in the report twice", it.OrderID)
				}
				got[it.OrderID] = it
			}
			for id, c := range want {
				if got[id].Category != c {
					t.Errorf("%s: category %q (%s), want %q", id, got[id].Category, got[id].Note, c)
				}
			}
			if len(got) != len(want) {
				t.Errorf("the report has %d orders, want %d: %v", len(got), len(want), got)
			}
			if _, ok := got["P-CANC-NOLINE"]; ok {
				t.Errorf("an order cancelled in 1C and never paid is in the report")
			}
			for id, w := range map[string]struct {
				ret  string
				code payrec.NoteCode
			}{
				"P-RET-OK": {payrec.ReturnDone, payrec.NoteReturnedIn1C}, "P-RET-NONE": {payrec.ReturnNotCreated, payrec.NoteReturnMissing},
				"P-RET-PEND": {payrec.ReturnPending, payrec.NoteReturnPending}, "P-RET-FAIL": {payrec.ReturnFailed, payrec.NoteReturnFailed},
			} {
				if got[id].Return != w.ret || got[id].NoteCode != w.code {
					t.Errorf("%s: return %q note %q, want %q %q", id, got[id].Return, got[id].NoteCode, w.ret, w.code)
				}
			}
			if got["P-RET-OK"].ReturnRef != "ret-ref-1" {
				t.Errorf("P-RET-OK's return ref %q", got["P-RET-OK"].ReturnRef)
			}
			for id, code := range map[string]payrec.NoteCode{"P-NOTPAID": payrec.NoteNotPaid, "P-LATER": payrec.NotePaidAfter,
				"P-SERV": payrec.NoteServicesOnly, "P-FAILED": payrec.NoteNotIn1C, "P-DIFF": payrec.NoteAccruedDiffers, "P-SOLD": payrec.NoteAsSold} {
				if got[id].NoteCode != code {
					t.Errorf("%s: note %q (%s), want %q", id, got[id].NoteCode, got[id].Note, code)
				}
			}
			if a := got["P-CANC"].NoteArgs.By; a != "journal" {
				t.Errorf("P-CANC cancelled by %q, want the journal", a)
			}
			if a := got["P-CANC1C"].NoteArgs.By; a != "1c" {
				t.Errorf("P-CANC1C cancelled by %q, want 1C", a)
			}
			if d := got["P-LATER"].NoteArgs.Date; d != "2026-11-05" {
				t.Errorf("P-LATER paid on %q, want 2026-11-05", d)
			}

			// P-DIFF itemised: 1900 accrued against 2000 in 1C; paid 1900 − 190 − 100 − 10.01.
			d := got["P-DIFF"]
			if d.Difference == nil || !d.Difference.Equal(dec("-100")) || !d.Paid.Equal(dec("1599.99")) ||
				!d.Commission.Equal(dec("-190")) || !d.Penalty.Equal(dec("-100")) || !d.Other.Equal(dec("-10.01")) ||
				d.OneCTotal == nil || !d.OneCTotal.Equal(dec("2000")) || d.OneCNumber == "" {
				t.Errorf("P-DIFF: %+v", d)
			}
			if s := got["P-SOLD"]; !s.Paid.Equal(dec("800")) || s.Difference == nil || !s.Difference.IsZero() || s.Ordered == nil ||
				!s.Ordered.Equal(on(3, 10)) || s.LastPaid == nil || !s.LastPaid.Equal(on(8, 12)) {
				t.Errorf("P-SOLD: %+v", s)
			}
			if r := got["P-RET-OK"]; !r.Paid.Equal(dec("-50")) {
				t.Errorf("P-RET-OK paid %s, want 405 − 455 = −50", r.Paid)
			}

			// The cabinet by type, the month's lines only.
			cab := map[string]payrec.CabinetTotal{}
			for _, c := range rep.Cabinet {
				cab[c.Type] = c
			}
			if c := cab["Хранение"]; c.Lines != 2 || !c.Amount.Equal(dec("-600.45")) {
				t.Errorf("storage: %+v, want 2 lines, −600.45", c)
			}
			if c := cab["Реклама"]; c.Lines != 1 || !c.Amount.Equal(dec("-1200.50")) {
				t.Errorf("advertising: %+v, want 1 line, −1200.50", c)
			}

			// The totals: the month's lines to the kopeck, every category and the cabinet adding up to them.
			if !rep.Totals.LinesSum.Equal(m.planted) {
				t.Errorf("the lines' sum %s, planted %s", rep.Totals.LinesSum, m.planted)
			}
			sum := rep.Totals.Cabinet
			for _, c := range rep.Categories {
				sum = sum.Add(c.Paid)
			}
			if !sum.Equal(m.planted) || !rep.Totals.Balanced {
				t.Errorf("categories + cabinet = %s, planted %s (balanced %v)", sum, m.planted, rep.Totals.Balanced)
			}
			if rep.Totals.StatedVerdict != payrec.StatedNone {
				t.Errorf("no fetch stated a total, the verdict is %q", rep.Totals.StatedVerdict)
			}
			if rep.Clean() {
				t.Errorf("a month with every problem planted is clean")
			}
		})
	}
}

// TestTheMarketplacesOwnTotal compares the lines with the total the marketplace
// stated for the period: equal, then differing by what it says.
func TestTheMarketplacesOwnTotal(t *testing.T) {
	t.Parallel()
	m := newMonth(t, backends[0].open(t))
	m.plant()
	start, end := monthFrom, monthTo.AddDate(0, 0, 1)
	record := func(total decimal.Decimal, at time.Time) {
		t.Helper()
		if err := m.st.payouts.RecordFetch(m.ctx, payouts.Fetch{Source: m.source, From: start, To: end, Origin: "api",
			StartedAt: at, FinishedAt: at, Total: &total}); err != nil {
			t.Fatal(err)
		}
	}
	record(m.planted, time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC))
	if rep := m.run(); rep.Totals.StatedVerdict != payrec.StatedEqual || !rep.Totals.StatedDifference.IsZero() {
		t.Errorf("the marketplace's total equal to the lines: %+v", rep.Totals)
	} else if v := payrec.Verdict("en", rep.Totals, payrec.PlainMoney); v != "equal to the marketplace's total to the kopeck" {
		t.Errorf("verdict %q", v)
	}
	record(m.planted.Add(dec("12.34")), time.Date(2026, 11, 3, 9, 0, 0, 0, time.UTC))
	rep := m.run()
	if rep.Totals.StatedVerdict != payrec.StatedDiffers || !rep.Totals.StatedDifference.Equal(dec("-12.34")) {
		t.Errorf("the marketplace's total 12.34 above the lines: %+v", rep.Totals)
	}
	if v := payrec.Verdict("ru", rep.Totals, payrec.PlainMoney); v != "расходится с итогом маркетплейса на -12.34" {
		t.Errorf("verdict %q", v)
	}
	if rep.Clean() {
		t.Error("a differing total is clean")
	}
	// The nightly reading of the last days comes after: the month's own reading
	// still states the month's total.
	week := end.AddDate(0, 0, -7)
	if err := m.st.payouts.RecordFetch(m.ctx, payouts.Fetch{Source: m.source, From: week, To: end.AddDate(0, 0, 3), Origin: "api",
		StartedAt: time.Date(2026, 11, 4, 3, 30, 0, 0, time.UTC), FinishedAt: time.Date(2026, 11, 4, 3, 31, 0, 0, time.UTC),
		Total: &m.planted}); err != nil {
		t.Fatal(err)
	}
	if rep := m.run(); rep.Totals.StatedVerdict != payrec.StatedDiffers || !rep.Totals.StatedDifference.Equal(dec("-12.34")) {
		t.Errorf("after a reading of another period, the month's stated total: %+v", rep.Totals)
	}
}
