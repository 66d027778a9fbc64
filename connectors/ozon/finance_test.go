package ozon_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/ordersync/ordersync/connectors/ozon"
	"github.com/ordersync/ordersync/internal/payouts"
	"github.com/ordersync/ordersync/internal/payouts/payoutstest"
	"github.com/ordersync/ordersync/internal/sim/ozonsim"
)

func d(s string) decimal.Decimal { return decimal.RequireFromString(s) }

func day(m time.Month, dd int) time.Time { return time.Date(2026, m, dd, 0, 0, 0, 0, time.UTC) }

// financeWorld is a period of operations of every kind, over three calendar months.
func financeWorld() []ozonsim.Operation {
	return []ozonsim.Operation{
		{ID: 1, Type: "OperationAgentDeliveredToCustomer", TypeName: "Доставка покупателю", Date: day(8, 20),
			PostingNumber: "0101-1", Amount: d("1234.56"), AccrualsForSale: d("1500.00"), SaleCommission: d("-225.00"),
			Items: []ozonsim.OperationItem{{SKU: 555, Name: "Чайник"}},
			Services: []ozonsim.OperationService{{Name: "MarketplaceServiceItemDirectFlowLogistic", Price: d("-30.44")},
				{Name: "MarketplaceServiceItemFulfillment", Price: d("-5.00")},
				{Name: "MarketplaceServiceItemMarkingItems", Price: d("-5.00")}}},
		{ID: 2, Type: "OperationAgentDeliveredToCustomer", Date: day(9, 1), PostingNumber: "0102-1",
			Amount: d("900.01"), AccrualsForSale: d("1000.01"), SaleCommission: d("-100.00")},
		{ID: 3, Type: "OperationAgentDeliveredToCustomer", Date: day(9, 2), PostingNumber: "0103-1",
			Amount: d("450"), AccrualsForSale: d("500"), SaleCommission: d("-50")},
		// The return of 0102-1: the reversal first, its handling fee later.
		{ID: 4, Type: "ClientReturnAgentOperation", TransactionType: "returns", Date: day(9, 10), PostingNumber: "0102-1",
			Amount: d("-900.01"), AccrualsForSale: d("-1000.01"), SaleCommission: d("100.00")},
		{ID: 5, Type: "OperationItemReturn", TransactionType: "returns", Date: day(9, 25), PostingNumber: "0102-1",
			Amount: d("-75.50")},
		{ID: 6, Type: "OperationMarketplaceServiceStorage", Date: day(9, 30), Amount: d("-12.34")},
		{ID: 7, Type: "OperationMarketplaceWithHoldingForUndeliverableGoods", TransactionType: "other",
			Date: day(10, 1), PostingNumber: "0103-1", Amount: d("-200")},
		{ID: 8, Type: "MarketplaceSellerCompensationOperation", TransactionType: "compensation", Date: day(10, 5),
			Amount: d("99.99")},
	}
}

func TestFinanceReadsEveryMonthPageByPage(t *testing.T) {
	t.Parallel()
	s, c := newTest(t, ozonsim.Options{}, ozon.Config{})
	s.AddOperation(financeWorld()...)
	s.AddOperation(ozonsim.Operation{ID: 9, Type: "OperationAgentDeliveredToCustomer", Date: day(10, 10),
		PostingNumber: "0104-1", Amount: d("1"), AccrualsForSale: d("1")})
	f := c.Finance(ozon.FinanceOptions{PageSize: 2})
	var pages []payouts.Page
	total, err := f.Read(t.Context(), day(8, 15), day(10, 10), func(p payouts.Page) error {
		pages = append(pages, p)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if v := s.FinanceViolations(); len(v) != 0 {
		t.Fatalf("the reader broke Ozon's finance rules: %+v", v)
	}
	// August: 1 operation (1 page); September: 5 (3 pages); October to the 10th: 2 (1 page).
	lists := s.RequestsTo(ozonsim.PathTransactionList)
	if len(lists) != 5 || len(pages) != 5 {
		t.Fatalf("%d list requests and %d pages, want 5 of each (1 + 3 + 1)", len(lists), len(pages))
	}
	for _, r := range lists {
		var req struct {
			Filter struct {
				Date struct{ From, To time.Time } `json:"date"`
			} `json:"filter"`
			PageSize int `json:"page_size"`
		}
		if err := json.Unmarshal(r.Body, &req); err != nil {
			t.Fatal(err)
		}
		if req.Filter.Date.To.After(req.Filter.Date.From.AddDate(0, 1, 0)) || req.PageSize != 2 {
			t.Errorf("request %s: a period over a month or page size %d", r.Body, req.PageSize)
		}
	}
	if n := len(s.RequestsTo(ozonsim.PathTransactionTotals)); n != 3 {
		t.Errorf("%d totals requests, want one a month (3)", n)
	}
	byID := map[string]payouts.Line{}
	for _, p := range pages {
		if len(p.Skipped) > 0 {
			t.Errorf("page %d skipped %v", p.Number, p.Skipped)
		}
		for _, l := range p.Lines {
			payoutstest.CheckLine(t, l)
			byID[l.LineID] = l
		}
	}
	if len(byID) != 8 {
		t.Fatalf("%d lines, want the 8 operations of the period (the one of 10 October is after it)", len(byID))
	}
	want := map[string]struct {
		kind                                  payouts.Kind
		order                                 string
		accrued, commission, logi, pen, other string
	}{
		"1": {payouts.KindSale, "0101-1", "1500.00", "-225.00", "-35.44", "0", "-5.00"},
		"2": {payouts.KindSale, "0102-1", "1000.01", "-100.00", "0", "0", "0"},
		"4": {payouts.KindReturn, "0102-1", "-1000.01", "100.00", "0", "0", "0"},
		"5": {payouts.KindReturn, "0102-1", "0", "0", "-75.50", "0", "0"},
		"6": {payouts.KindCabinet, "", "0", "0", "0", "0", "-12.34"},
		"7": {payouts.KindOrderService, "0103-1", "0", "0", "0", "-200", "0"},
		"8": {payouts.KindCabinet, "", "0", "0", "0", "0", "99.99"},
	}
	for id, w := range want {
		l := byID[id]
		if l.Kind != w.kind || l.OrderID != w.order {
			t.Errorf("operation %s: kind %s, order %q; want %s, %q", id, l.Kind, l.OrderID, w.kind, w.order)
		}
		for name, pair := range map[string][2]string{"accrued": {l.AccruedForSale.String(), w.accrued},
			"commission": {l.Commission.String(), w.commission}, "logistics": {l.Logistics.String(), w.logi},
			"penalty": {l.Penalty.String(), w.pen}, "other": {l.Other.String(), w.other}} {
			if !d(pair[0]).Equal(d(pair[1])) {
				t.Errorf("operation %s: %s %s, want %s", id, name, pair[0], pair[1])
			}
		}
	}
	if l := byID["1"]; l.SKU != "555" || l.Currency != "RUB" || !l.Date.Equal(day(8, 20)) || l.Type != "OperationAgentDeliveredToCustomer" {
		t.Errorf("the sale read as %+v", l)
	}
	if !bytes.Contains(byID["1"].Raw, []byte(`"MarketplaceServiceItemMarkingItems"`)) {
		t.Errorf("the raw record is not Ozon's: %s", byID["1"].Raw)
	}
	sum := decimal.Zero
	for _, l := range byID {
		sum = sum.Add(l.Amount)
	}
	if total == nil || !total.Equal(sum) || !sum.Equal(d("1496.71")) {
		t.Errorf("total %v, lines sum to %s; want both 1496.71", total, sum)
	}
}

func TestFinanceRunIsIdempotent(t *testing.T) {
	t.Parallel()
	s, c := newTest(t, ozonsim.Options{}, ozon.Config{})
	s.AddOperation(financeWorld()...)
	store := payoutstest.NewMem()
	f := c.Finance(ozon.FinanceOptions{})
	first, err := payouts.Run(t.Context(), store, f, day(9, 1), day(10, 1), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	second, err := payouts.Run(t.Context(), store, f, day(8, 1), day(11, 1), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if first.Saved != (payouts.Saved{Inserted: 5}) || second.Saved != (payouts.Saved{Inserted: 3, Repeated: 5}) {
		t.Errorf("saved %+v, then %+v; want 5 new, then 3 new and 5 repeated", first.Saved, second.Saved)
	}
	if first.Total == nil || !first.Total.Equal(d("362.16")) {
		t.Errorf("September's total %v, want 362.16", first.Total)
	}
	if fs := store.Recorded(); len(fs) != 2 || fs[1].Error != "" || fs[1].Origin != "api" {
		t.Errorf("fetch records %+v", fs)
	}
}

func TestFinanceSimulatorRefusesMoreThanAMonth(t *testing.T) {
	t.Parallel()
	s := ozonsim.New(ozonsim.Options{})
	for _, tc := range []struct {
		path, body string
	}{
		{ozonsim.PathTransactionList, `{"filter":{"date":{"from":"2026-08-01T00:00:00.000Z","to":"2026-09-02T00:00:00.000Z"},"operation_type":[],"posting_number":"","transaction_type":"all"},"page":1,"page_size":10}`},
		{ozonsim.PathTransactionTotals, `{"date":{"from":"2026-08-01T00:00:00.000Z","to":"2026-10-01T00:00:00.000Z"},"posting_number":"","transaction_type":"all"}`},
	} {
		req, _ := http.NewRequest(http.MethodPost, tc.path, bytes.NewBufferString(tc.body))
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		if rec.Code != http.StatusBadRequest {
			t.Errorf("%s over two months: HTTP %d, want 400", tc.path, rec.Code)
		}
	}
	if n := len(s.FinanceViolations()); n != 2 {
		t.Errorf("%d violations recorded, want 2", n)
	}
}

// A reader given a period of several months never sends one over a month.
func TestFinanceLongPeriodIsSplit(t *testing.T) {
	t.Parallel()
	s, c := newTest(t, ozonsim.Options{}, ozon.Config{})
	if _, err := c.Finance(ozon.FinanceOptions{}).Read(t.Context(), day(1, 31), day(7, 1), func(payouts.Page) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if v := s.FinanceViolations(); len(v) != 0 {
		t.Errorf("violations %+v", v)
	}
	if n := len(s.RequestsTo(ozonsim.PathTransactionList)); n != 6 {
		t.Errorf("%d list requests for 31 January – 30 June, want 6 (one a month)", n)
	}
}

// An operation that does not read is skipped and named; the rest of its page is kept.
func TestFinanceBadOperationFailsOnlyItself(t *testing.T) {
	t.Parallel()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == ozonsim.PathTransactionTotals {
			w.Write([]byte(`{"result":{"accruals_for_sale":100,"sale_commission":-10}}`))
			return
		}
		w.Write([]byte(`{"result":{"page_count":1,"row_count":2,"operations":[
			{"operation_id":1,"operation_type":"OperationAgentDeliveredToCustomer","operation_date":"2026-09-02 00:00:00",
			 "amount":90,"accruals_for_sale":100,"sale_commission":-10,"posting":{"posting_number":"P-1"},"items":[],"services":[]},
			{"operation_id":2,"operation_type":"OperationAgentDeliveredToCustomer","operation_date":"2026-09-02 00:00:00",
			 "amount":"ninety","posting":{"posting_number":"P-2"},"items":[],"services":[]}]}}`))
	}))
	t.Cleanup(ts.Close)
	c, err := ozon.New(ozon.Config{BaseURL: ts.URL, ClientID: "1", APIKey: "k", RatePerSecond: -1})
	if err != nil {
		t.Fatal(err)
	}
	store := payoutstest.NewMem()
	f, err := payouts.Run(t.Context(), store, c.Finance(ozon.FinanceOptions{}), day(9, 1), day(10, 1), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if f.Saved.Inserted != 1 || !strings.Contains(f.Error, "1 records skipped") || !strings.Contains(f.Error, "operation_id 2: amount") {
		t.Errorf("reading %+v: want 1 line kept and operation 2's amount named", f)
	}
	if f.Total == nil || !f.Total.Equal(d("90")) {
		t.Errorf("total %v, want 90", f.Total)
	}
}
