package storetest

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/ordersync/ordersync/internal/payouts"
)

// payouts.Store: the marketplaces' financial lines, kept once per (source, line_id),
// and the record of each reading.

func runPayouts(t *testing.T, h Harness) {
	t.Helper()
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, s payouts.Store)
	}{
		{"SaveAndRead", testPayoutSaveAndRead},
		{"SaveTwiceRepeats", testPayoutSaveTwiceRepeats},
		{"InvalidLineWritesNothing", testPayoutInvalidLineWritesNothing},
		{"ExactDecimals", testPayoutExactDecimals},
		{"QueryByPeriodAndOrders", testPayoutQuery},
		{"LastFetches", testPayoutLastFetches},
		{"Fetches", testPayoutFetches},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, h.open(t, Options{}, "Payouts").Payouts)
		})
	}
}

var payoutDay = time.Date(2026, 9, 16, 10, 0, 0, 0, time.UTC)

// saleLine is a valid sale line of order on day d: 1000.00 accrued, 100.00
// commission, 50.00 logistics.
func saleLine(source, id, order string, d time.Time) payouts.Line {
	q := dec("2")
	return payouts.Line{Source: source, LineID: id, Type: "OperationAgentDeliveredToCustomer", Kind: payouts.KindSale,
		Date: d, OrderID: order, SKU: "SKU-1", Quantity: &q, Currency: "RUB",
		Amount: dec("850.00"), AccruedForSale: dec("1000.00"), Commission: dec("-100.00"), Logistics: dec("-50.00"),
		Penalty: dec("0"), Other: dec("0.00"),
		Raw: json.RawMessage(`{"operation_id": "` + id + `", "amount": 850.00}`)}
}

func saveLines(t *testing.T, s payouts.Store, lines ...payouts.Line) payouts.Saved {
	t.Helper()
	saved, err := s.SaveLines(t.Context(), lines)
	if err != nil {
		t.Fatalf("save %d lines: %v", len(lines), err)
	}
	return saved
}

func readLines(t *testing.T, s payouts.Store, q payouts.Query) []payouts.Line {
	t.Helper()
	ls, err := s.Lines(t.Context(), q)
	if err != nil {
		t.Fatalf("lines %+v: %v", q, err)
	}
	return ls
}

func lineIDs(ls []payouts.Line) []string {
	ids := make([]string, len(ls))
	for i, l := range ls {
		ids[i] = l.LineID
	}
	return ids
}

func testPayoutSaveAndRead(t *testing.T, s payouts.Store) {
	in := saleLine("ozon", "1001", "05708065-0029-1", payoutDay)
	cab := payouts.Line{Source: "ozon", LineID: "1002", Type: "OperationMarketplaceServiceStorage", Kind: payouts.KindCabinet,
		Date: payoutDay.Add(time.Hour), Currency: "RUB", Amount: dec("-12.5"), Other: dec("-12.5")}
	if got := saveLines(t, s, in, cab); got != (payouts.Saved{Inserted: 2}) {
		t.Fatalf("saved %+v, want 2 inserted", got)
	}
	ls := readLines(t, s, payouts.Query{Source: "ozon"})
	if !slices.Equal(lineIDs(ls), []string{"1001", "1002"}) {
		t.Fatalf("lines %v, want 1001, 1002", lineIDs(ls))
	}
	got := ls[0]
	if got.FetchedAt.IsZero() {
		t.Error("fetched_at is not set")
	}
	if !got.Date.Equal(in.Date) || got.Date.Location() != time.UTC {
		t.Errorf("date %v, want %v in UTC", got.Date, in.Date)
	}
	if got.Type != in.Type || got.Kind != in.Kind || got.OrderID != in.OrderID || got.SKU != in.SKU || got.Currency != in.Currency {
		t.Errorf("line read back as %+v, want %+v", got, in)
	}
	if got.Quantity == nil || got.Quantity.String() != "2" {
		t.Errorf("quantity %v, want 2", got.Quantity)
	}
	for name, pair := range map[string][2]decimal.Decimal{
		"amount": {got.Amount, in.Amount}, "accrued": {got.AccruedForSale, in.AccruedForSale},
		"commission": {got.Commission, in.Commission}, "logistics": {got.Logistics, in.Logistics},
		"penalty": {got.Penalty, in.Penalty}, "other": {got.Other, in.Other},
	} {
		if payouts.DecimalText(pair[0]) != payouts.DecimalText(pair[1]) {
			t.Errorf("%s %s, want %s", name, payouts.DecimalText(pair[0]), payouts.DecimalText(pair[1]))
		}
	}
	if string(got.Raw) != string(in.Raw) {
		t.Errorf("raw %s, want it as given: %s", got.Raw, in.Raw)
	}
	if c := ls[1]; c.Quantity != nil || c.Raw != nil || c.OrderID != "" {
		t.Errorf("cabinet line read back with quantity %v, raw %s, order %q; want none", c.Quantity, c.Raw, c.OrderID)
	}
}

func testPayoutSaveTwiceRepeats(t *testing.T, s payouts.Store) {
	first := saleLine("ozon", "2001", "P-1", payoutDay)
	saveLines(t, s, first)
	before := readLines(t, s, payouts.Query{})
	changed := first
	changed.Amount, changed.AccruedForSale = dec("1850.00"), dec("2000.00")
	changed.Raw = json.RawMessage(`{"changed":true}`)
	other := saleLine("wildberries", "2001", "P-1", payoutDay) // the same id at another source is another line
	if got := saveLines(t, s, changed, other, other); got != (payouts.Saved{Inserted: 1, Repeated: 2}) {
		t.Fatalf("saved %+v, want 1 inserted (the other source's) and 2 repeated", got)
	}
	after := readLines(t, s, payouts.Query{Source: "ozon"})
	if len(after) != 1 {
		t.Fatalf("%d ozon lines, want 1", len(after))
	}
	if !after[0].Amount.Equal(first.Amount) || string(after[0].Raw) != string(first.Raw) || !after[0].FetchedAt.Equal(before[0].FetchedAt) {
		t.Errorf("a repeated line overwrote the kept one: %+v", after[0])
	}
	if n := len(readLines(t, s, payouts.Query{})); n != 2 {
		t.Errorf("%d lines in all, want 2", n)
	}
}

func testPayoutInvalidLineWritesNothing(t *testing.T, s payouts.Store) {
	good := saleLine("ozon", "3001", "P-1", payoutDay)
	bad := saleLine("ozon", "3002", "P-2", payoutDay)
	bad.Amount = dec("851.00") // not the sum of its parts
	_, err := s.SaveLines(t.Context(), []payouts.Line{good, bad})
	var ie *payouts.InvalidLineError
	if !errors.As(err, &ie) {
		t.Fatalf("save with an invalid line: %v, want a payouts.InvalidLineError", err)
	}
	if ie.Index != 1 || ie.LineID != "3002" || !strings.Contains(err.Error(), "3002") || !strings.Contains(err.Error(), "sum of its parts") {
		t.Errorf("the error does not name the line and its fault: %v", err)
	}
	if ls := readLines(t, s, payouts.Query{}); len(ls) != 0 {
		t.Errorf("%d lines written by a refused batch, want none", len(ls))
	}
	badRaw := saleLine("ozon", "3004", "P-4", payoutDay)
	badRaw.Raw = json.RawMessage(`{"cut`)
	if _, err := s.SaveLines(t.Context(), []payouts.Line{good, badRaw}); err == nil || !strings.Contains(err.Error(), "raw") {
		t.Errorf("a line whose raw record is not JSON: %v, want an error naming raw", err)
	}
	noOrder := saleLine("ozon", "3003", "", payoutDay)
	if _, err := s.SaveLines(t.Context(), []payouts.Line{noOrder}); err == nil || !strings.Contains(err.Error(), "order_id") {
		t.Errorf("a sale line without an order: %v, want an error naming order_id", err)
	}
}

func testPayoutExactDecimals(t *testing.T, s payouts.Store) {
	var lines []payouts.Line
	for i := range 10 {
		lines = append(lines, payouts.Line{Source: "kaspi", LineID: "c" + string(rune('0'+i)), Type: "Комиссия",
			Kind: payouts.KindCabinet, Date: payoutDay, Currency: "KZT", Amount: dec("0.01"), Other: dec("0.01")})
	}
	big := payouts.Line{Source: "kaspi", LineID: "big", Type: "Продажа", Kind: payouts.KindSale, Date: payoutDay,
		OrderID: "512344101", Currency: "KZT", Amount: dec("12345678.90"), AccruedForSale: dec("12345679.000"),
		Commission: dec("-0.10"), Logistics: dec("0"), Penalty: dec("0"), Other: dec("0")}
	lines = append(lines, big)
	saveLines(t, s, lines...)
	sum := decimal.Zero
	var got payouts.Line
	for _, l := range readLines(t, s, payouts.Query{Source: "kaspi"}) {
		if l.LineID == "big" {
			got = l
			continue
		}
		sum = sum.Add(l.Amount)
	}
	if sum.String() != "0.1" {
		t.Errorf("ten lines of 0.01 sum to %s, want 0.1 exactly", sum)
	}
	if payouts.DecimalText(got.Amount) != "12345678.90" || payouts.DecimalText(got.AccruedForSale) != "12345679.000" ||
		payouts.DecimalText(got.Commission) != "-0.10" {
		t.Errorf("read back amount %s, accrued %s, commission %s; want 12345678.90, 12345679.000, -0.10",
			payouts.DecimalText(got.Amount), payouts.DecimalText(got.AccruedForSale), payouts.DecimalText(got.Commission))
	}
	if err := got.Validate(); err != nil {
		t.Errorf("a line read back does not validate: %v", err)
	}
}

func testPayoutQuery(t *testing.T, s payouts.Store) {
	sep := time.Date(2026, 9, 1, 0, 0, 0, 0, time.UTC)
	oct := time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)
	saveLines(t, s,
		saleLine("ozon", "a-aug", "P-1", sep.Add(-time.Microsecond)),
		saleLine("ozon", "b-sep-start", "P-1", sep),
		saleLine("ozon", "c-sep", "P-2", sep.Add(48*time.Hour)),
		saleLine("ozon", "d-oct", "P-2", oct), // To is exclusive
		saleLine("wildberries", "e-sep", "P-1", sep.Add(time.Hour)),
	)
	for _, tc := range []struct {
		name string
		q    payouts.Query
		want []string
	}{
		{"everything", payouts.Query{}, []string{"a-aug", "b-sep-start", "e-sep", "c-sep", "d-oct"}},
		{"september of ozon", payouts.Query{Source: "ozon", From: sep, To: oct}, []string{"b-sep-start", "c-sep"}},
		{"from september", payouts.Query{Source: "ozon", From: sep}, []string{"b-sep-start", "c-sep", "d-oct"}},
		{"before september", payouts.Query{To: sep}, []string{"a-aug"}},
		{"orders, whatever their date", payouts.Query{Source: "ozon", OrderIDs: []string{"P-2"}, From: sep, To: sep.Add(time.Hour)},
			[]string{"c-sep", "d-oct"}},
		{"orders of every source", payouts.Query{OrderIDs: []string{"P-1", "nope"}}, []string{"a-aug", "b-sep-start", "e-sep"}},
	} {
		if got := lineIDs(readLines(t, s, tc.q)); !slices.Equal(got, tc.want) {
			t.Errorf("%s: lines %v, want %v", tc.name, got, tc.want)
		}
	}
}

func testPayoutLastFetches(t *testing.T, s payouts.Store) {
	ctx := t.Context()
	if fs, err := s.LastFetches(ctx); err != nil || len(fs) != 0 {
		t.Fatalf("last fetches of an empty store: %v, %v; want none", fs, err)
	}
	total := dec("1234.50")
	from, to := time.Date(2026, 9, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)
	for _, f := range []payouts.Fetch{
		{Source: "wildberries", Origin: "api", From: from, To: to, StartedAt: payoutDay, FinishedAt: payoutDay.Add(time.Minute),
			Saved: payouts.Saved{Inserted: 5}},
		{Source: "ozon", Origin: "api", From: from, To: to, StartedAt: payoutDay, FinishedAt: payoutDay.Add(time.Minute),
			Saved: payouts.Saved{Inserted: 3}},
		{Source: "ozon", Origin: "api", From: from, To: to, StartedAt: payoutDay.Add(time.Hour),
			FinishedAt: payoutDay.Add(time.Hour + time.Second), Saved: payouts.Saved{Inserted: 1, Repeated: 3}, Total: &total},
		{Source: "wildberries", Origin: "api", StartedAt: payoutDay.Add(-time.Hour), Error: "older: not the latest"},
		{Source: "kaspi", Origin: "payouts.xlsx", StartedAt: payoutDay, Error: "sheet 1: no column «Сумма»"},
	} {
		if err := s.RecordFetch(ctx, f); err != nil {
			t.Fatalf("record fetch %+v: %v", f, err)
		}
	}
	fs, err := s.LastFetches(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var sources []string
	for _, f := range fs {
		sources = append(sources, f.Source)
	}
	if !slices.Equal(sources, []string{"kaspi", "ozon", "wildberries"}) {
		t.Fatalf("last fetches of %v, want kaspi, ozon, wildberries", sources)
	}
	oz := fs[1]
	if !oz.StartedAt.Equal(payoutDay.Add(time.Hour)) || oz.Saved != (payouts.Saved{Inserted: 1, Repeated: 3}) ||
		oz.Total == nil || payouts.DecimalText(*oz.Total) != "1234.50" || !oz.From.Equal(from) || !oz.To.Equal(to) ||
		!oz.FinishedAt.Equal(payoutDay.Add(time.Hour+time.Second)) || oz.Origin != "api" {
		t.Errorf("ozon's latest fetch read back as %+v", oz)
	}
	if wb := fs[2]; wb.Error != "" || wb.Total != nil || wb.Saved.Inserted != 5 {
		t.Errorf("wildberries' latest fetch read back as %+v, want the one of 5 lines without total", wb)
	}
	if k := fs[0]; k.Error == "" || !k.From.IsZero() || !k.FinishedAt.IsZero() || k.Origin != "payouts.xlsx" {
		t.Errorf("kaspi's failed import read back as %+v", k)
	}
}

// Fetches lists one source's readings, the newest first, as many as asked.
func testPayoutFetches(t *testing.T, s payouts.Store) {
	ctx := t.Context()
	if fs, err := s.Fetches(ctx, "ozon", 10); err != nil || len(fs) != 0 {
		t.Fatalf("fetches of an empty store: %v, %v; want none", fs, err)
	}
	month := dec("1000.01")
	from, to := time.Date(2026, 9, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)
	for i, f := range []payouts.Fetch{
		{Source: "ozon", Origin: "api", From: from, To: to, Total: &month},
		{Source: "wb", Origin: "api", From: from, To: to},
		{Source: "ozon", Origin: "api", From: to.AddDate(0, 0, -7), To: to.AddDate(0, 0, 1)},
		{Source: "ozon", Origin: "api", From: to.AddDate(0, 0, -6), To: to.AddDate(0, 0, 2), Error: "HTTP 503"},
	} {
		f.StartedAt = payoutDay.Add(time.Duration(i) * time.Hour)
		if err := s.RecordFetch(ctx, f); err != nil {
			t.Fatal(err)
		}
	}
	fs, err := s.Fetches(ctx, "ozon", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(fs) != 3 || fs[0].Error != "HTTP 503" || fs[2].Total == nil || !fs[2].Total.Equal(month) || !fs[2].From.Equal(from) {
		t.Fatalf("ozon's fetches %+v, want its three, the newest first, the month's with its total last", fs)
	}
	if fs, err := s.Fetches(ctx, "ozon", 2); err != nil || len(fs) != 2 || !fs[1].StartedAt.Equal(payoutDay.Add(2*time.Hour)) {
		t.Fatalf("the latest two of ozon's fetches: %+v, %v", fs, err)
	}
}
