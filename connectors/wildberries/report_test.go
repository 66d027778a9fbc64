package wildberries_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/ordersync/ordersync/connectors/wildberries"
	"github.com/ordersync/ordersync/internal/payouts"
	"github.com/ordersync/ordersync/internal/payouts/payoutstest"
	"github.com/ordersync/ordersync/internal/sim/wbsim"
)

// fakeClock is a clock that never waits: After moves it on at once.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	c.now = c.now.Add(d)
	now := c.now
	c.mu.Unlock()
	ch := make(chan time.Time, 1)
	ch <- now
	return ch
}

// noLimit lets every request through at once: a reader that ignores the limit.
type noLimit struct{}

func (noLimit) Wait(context.Context) error { return nil }

func dd(s string) decimal.Decimal { return decimal.RequireFromString(s) }

func msk(m time.Month, d int) time.Time { return time.Date(2026, m, d, 0, 0, 0, 0, wildberries.Moscow) }

// reportWorld: a sale of assembly order 111 and its return, the order's logistics
// and penalty, a sale known by srid only (not an FBS order), storage of the cabinet,
// and a row after the period.
func reportWorld() []wbsim.ReportRow {
	return []wbsim.ReportRow{
		{RRDID: 1001, DocTypeName: "Продажа", SupplierOperName: "Продажа", Quantity: 1, RetailAmount: dd("1500.50"),
			PPVZForPay: dd("1275.43"), PPVZSalesCommission: dd("200.00"), AcquiringFee: dd("25.07"),
			SRID: "srid-111", AssemblyID: 111, NmID: 7001, SAName: "SKU-1", RRDate: msk(9, 2), SaleDate: msk(9, 1)},
		{RRDID: 1002, DocTypeName: "", SupplierOperName: "Логистика", DeliveryRub: dd("55.00"), SRID: "srid-111",
			AssemblyID: 111, RRDate: msk(9, 2)},
		{RRDID: 1003, DocTypeName: "Возврат", SupplierOperName: "Возврат", Quantity: 1, RetailAmount: dd("1500.50"),
			PPVZForPay: dd("1275.43"), SRID: "srid-111", AssemblyID: 111, SAName: "SKU-1", RRDate: msk(9, 10)},
		{RRDID: 1004, SupplierOperName: "Штраф", Penalty: dd("300"), SRID: "srid-111", AssemblyID: 111, RRDate: msk(9, 11)},
		{RRDID: 1005, DocTypeName: "Продажа", SupplierOperName: "Продажа", Quantity: 2, RetailAmount: dd("999.99"),
			PPVZForPay: dd("850.00"), SRID: "srid-fbo-9", RRDate: msk(9, 12)},
		{RRDID: 1006, SupplierOperName: "Хранение", StorageFee: dd("12.34"), RRDate: msk(9, 30)},
		{RRDID: 1007, DocTypeName: "Продажа", SupplierOperName: "Продажа", RetailAmount: dd("10"), PPVZForPay: dd("9"),
			AssemblyID: 112, RRDate: msk(10, 1)},
	}
}

func newReport(t *testing.T, edit func(*wildberries.ReportConfig)) (*wbsim.Wildberries, *wildberries.Report, *fakeClock) {
	t.Helper()
	clock := &fakeClock{now: time.Date(2026, 10, 2, 9, 0, 0, 0, time.UTC)}
	s := wbsim.New(wbsim.Options{Token: "wb-token", Now: clock.Now})
	s.SetReportClock(clock.Now)
	s.AddReportRows(reportWorld()...)
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	cfg := wildberries.ReportConfig{BaseURL: ts.URL, Token: "wb-token", Limit: 2, Clock: clock}
	if edit != nil {
		edit(&cfg)
	}
	r, err := wildberries.NewReport(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s, r, clock
}

func TestReportPagesByRRDIDUntil204WithinTheLimit(t *testing.T) {
	t.Parallel()
	s, r, clock := newReport(t, nil)
	start := clock.Now()
	var lines []payouts.Line
	total, err := r.Read(t.Context(), msk(9, 1), msk(10, 1), func(p payouts.Page) error {
		if len(p.Skipped) > 0 {
			t.Errorf("page %d skipped %v", p.Number, p.Skipped)
		}
		lines = append(lines, p.Lines...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if total != nil {
		t.Errorf("total %v: the report states none", total)
	}
	if v := s.ReportViolations(); len(v) != 0 {
		t.Fatalf("the reader broke the 1-a-minute limit: %+v", v)
	}
	reqs := s.RequestsOf(wbsim.OpReport)
	// Six rows of September, two a page, then the 204.
	if len(reqs) != 4 {
		t.Fatalf("%d requests, want 4 (3 pages and the 204)", len(reqs))
	}
	for i, want := range []string{"0", "1002", "1004", "1006"} {
		if got := reqs[i].Query.Get("rrdid"); got != want {
			t.Errorf("request %d: rrdid %s, want %s (the last row's)", i+1, got, want)
		}
	}
	if q := reqs[0].Query; q.Get("dateFrom") != "2026-09-01T00:00:00" || q.Get("dateTo") != "2026-09-30T23:59:59" {
		t.Errorf("period sent as %s – %s, want Moscow time", q.Get("dateFrom"), q.Get("dateTo"))
	}
	if waited := clock.Now().Sub(start); waited < 3*time.Minute {
		t.Errorf("the limiter let 4 requests through in %s of its clock", waited)
	}
	byID := map[string]payouts.Line{}
	for _, l := range lines {
		payoutstest.CheckLine(t, l)
		byID[l.LineID] = l
	}
	if len(byID) != 6 {
		t.Fatalf("%d lines, want 6", len(byID))
	}
	for id, w := range map[string]struct {
		kind                     payouts.Kind
		order, amount, acc, comm string
	}{
		"1001": {payouts.KindSale, "111", "1275.43", "1500.50", "-225.07"},
		"1002": {payouts.KindOrderService, "111", "-55.00", "0", "0"},
		"1003": {payouts.KindReturn, "111", "-1275.43", "-1500.50", "225.07"},
		"1004": {payouts.KindOrderService, "111", "-300", "0", "0"},
		"1005": {payouts.KindSale, "srid-fbo-9", "850.00", "999.99", "-149.99"},
		"1006": {payouts.KindCabinet, "", "-12.34", "0", "0"},
	} {
		l := byID[id]
		if l.Kind != w.kind || l.OrderID != w.order || !l.Amount.Equal(dd(w.amount)) || !l.AccruedForSale.Equal(dd(w.acc)) ||
			!l.Commission.Equal(dd(w.comm)) {
			t.Errorf("row %s: %s of %q, amount %s, accrued %s, commission %s; want %s of %q, %s, %s, %s", id, l.Kind, l.OrderID,
				l.Amount, l.AccruedForSale, l.Commission, w.kind, w.order, w.amount, w.acc, w.comm)
		}
	}
	if l := byID["1002"]; !l.Logistics.Equal(dd("-55")) {
		t.Errorf("logistics %s, want -55", l.Logistics)
	}
	if l := byID["1004"]; !l.Penalty.Equal(dd("-300")) {
		t.Errorf("penalty %s, want -300", l.Penalty)
	}
	if l := byID["1006"]; !l.Other.Equal(dd("-12.34")) {
		t.Errorf("storage %s, want -12.34 in other", l.Other)
	}
	if l := byID["1001"]; l.SKU != "SKU-1" || l.Quantity == nil || !l.Quantity.Equal(dd("1")) || l.Currency != "RUB" ||
		!l.Date.Equal(msk(9, 2)) || !strings.Contains(string(l.Raw), `"srid":"srid-111"`) {
		t.Errorf("the sale read as %+v (raw %s)", l, l.Raw)
	}
	if sum := byID["1001"].Amount.Add(byID["1003"].Amount); !sum.IsZero() {
		t.Errorf("a sale and its return sum to %s, want 0", sum)
	}
}

// A reader that ignores the limit is refused, and the simulator counts it.
func TestReportWithoutTheLimiterIsRefused(t *testing.T) {
	t.Parallel()
	s, r, _ := newReport(t, func(c *wildberries.ReportConfig) { c.Limiter = noLimit{} })
	_, err := r.Read(t.Context(), msk(9, 1), msk(10, 1), func(payouts.Page) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "429") {
		t.Errorf("read without a limiter: %v, want a refusal (429)", err)
	}
	if n := len(s.ReportViolations()); n == 0 {
		t.Error("the simulator recorded no violation of the limit")
	}
}

func TestReportRunSavesIdempotently(t *testing.T) {
	t.Parallel()
	_, r, _ := newReport(t, func(c *wildberries.ReportConfig) { c.Limit = 100 })
	store := payoutstest.NewMem()
	for i, want := range []payouts.Saved{{Inserted: 6}, {Repeated: 6}} {
		f, err := payouts.Run(t.Context(), store, r, msk(9, 1), msk(10, 1), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if f.Saved != want || f.Source != "wb" || f.Total != nil {
			t.Errorf("reading %d: %+v, want %+v of source wb without total", i+1, f, want)
		}
	}
}

func TestMinuteLimiterNeverLetsTwoThroughInAMinute(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	l := wildberries.NewMinuteLimiter(clock, 0)
	var at []time.Time
	for range 5 {
		if err := l.Wait(t.Context()); err != nil {
			t.Fatal(err)
		}
		at = append(at, clock.Now())
	}
	l.Defer(90 * time.Second)
	if err := l.Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
	at = append(at, clock.Now())
	for i := 1; i < len(at); i++ {
		if gap := at[i].Sub(at[i-1]); gap < time.Minute {
			t.Errorf("requests %d and %d %s apart", i, i+1, gap)
		}
	}
	if gap := at[5].Sub(at[4]); gap < 90*time.Second {
		t.Errorf("a deferred request came %s after the last, want 90s at least", gap)
	}
}

// A row that does not read is skipped and named; the paging goes on past it.
func TestReportBadRowFailsOnlyItself(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		if r.URL.Query().Get("rrdid") != "0" {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		w.Write([]byte(`[{"rrd_id":5,"doc_type_name":"Продажа","supplier_oper_name":"Продажа","retail_amount":100,
			"ppvz_for_pay":80,"assembly_id":9,"rr_dt":"2026-09-02","currency_name":"руб"},
			{"rrd_id":6,"doc_type_name":"Продажа","supplier_oper_name":"Продажа","retail_amount":100,
			"ppvz_for_pay":80,"assembly_id":10,"rr_dt":"вчера","currency_name":"руб"}]`))
	}))
	t.Cleanup(ts.Close)
	r, err := wildberries.NewReport(wildberries.ReportConfig{BaseURL: ts.URL, Token: "t", Limiter: noLimit{}})
	if err != nil {
		t.Fatal(err)
	}
	store := payoutstest.NewMem()
	f, err := payouts.Run(t.Context(), store, r, msk(9, 1), msk(10, 1), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if calls.Load() != 2 || f.Saved.Inserted != 1 || !strings.Contains(f.Error, "rrd_id 6: rr_dt") {
		t.Errorf("%d requests, reading %+v: want 2, 1 line kept and row 6's rr_dt named", calls.Load(), f)
	}
}
