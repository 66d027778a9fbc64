package kaspi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/ordersync/ordersync/connectors"
	"github.com/ordersync/ordersync/connectors/kaspi"
	"github.com/ordersync/ordersync/internal/order"
	"github.com/ordersync/ordersync/internal/sim"
	"github.com/ordersync/ordersync/internal/sim/kaspisim"
)

const testToken = "kaspi-token"

var almaty = func() *time.Location {
	loc, err := time.LoadLocation("Asia/Almaty")
	if err != nil {
		return time.FixedZone("Asia/Almaty", 5*60*60)
	}
	return loc
}()

// newEnv serves a Kaspi simulator and returns it with a connector pointed at it.
// The connector's rate limit is off unless cfg sets one.
func newEnv(t *testing.T, opts kaspisim.Options, cfg kaspi.Config) (*kaspisim.Kaspi, *kaspi.Connector) {
	t.Helper()
	if opts.Token == "" {
		opts.Token = testToken
	}
	s := kaspisim.New(opts)
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	cfg.BaseURL = ts.URL + kaspisim.Prefix
	if cfg.Token == "" {
		cfg.Token = testToken
	}
	if cfg.Warehouse == "" {
		cfg.Warehouse = "WH1"
	}
	if cfg.RatePerSecond == 0 {
		cfg.RatePerSecond = -1
	}
	c, err := kaspi.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s, c
}

func mustAdd(t *testing.T, s *kaspisim.Kaspi, o kaspisim.Order) kaspisim.Order {
	t.Helper()
	if err := s.AddOrder(o); err != nil {
		t.Fatal(err)
	}
	got, _ := s.Order(o.Code)
	return got
}

func dec(s string) decimal.Decimal { return decimal.RequireFromString(s) }

func simOrder(code string, created time.Time) kaspisim.Order {
	return kaspisim.Order{
		Code:         code,
		CreationDate: created,
		Customer:     kaspisim.Customer{ID: "c" + code, FirstName: "Даниела", LastName: "Муталидзе", CellPhone: "7066828008"},
		Entries: []kaspisim.Entry{{OfferCode: "SKU-" + code, Name: "Линейка",
			Quantity: decimal.NewFromInt(1), BasePrice: dec("1000")}},
	}
}

// collect lists [from, to) and returns every item, in order.
func collect(t *testing.T, c *kaspi.Connector, from, to time.Time) ([]connectors.Item, error) {
	t.Helper()
	var items []connectors.Item
	err := c.List(context.Background(), from, to, func(page []connectors.Item) error {
		items = append(items, page...)
		return nil
	})
	return items, err
}

func mustCollect(t *testing.T, c *kaspi.Connector, from, to time.Time) []connectors.Item {
	t.Helper()
	items, err := collect(t, c, from, to)
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	return items
}

func byID(items []connectors.Item) map[string]connectors.Item {
	m := map[string]connectors.Item{}
	for _, it := range items {
		m[it.ID] = it
	}
	return m
}

func listRequests(s *kaspisim.Kaspi) []kaspisim.Request {
	return slices.DeleteFunc(s.RequestLog(), func(r kaspisim.Request) bool { return r.Op != kaspisim.OpList })
}

func TestListFollowsEveryPage(t *testing.T) {
	t.Parallel()
	s, c := newEnv(t, kaspisim.Options{}, kaspi.Config{})
	now := time.Now()
	for i := range 250 {
		mustAdd(t, s, simOrder(fmt.Sprintf("6%08d", i), now.Add(-time.Duration(i+1)*time.Second)))
	}
	items := mustCollect(t, c, now.Add(-24*time.Hour), now)

	if got, want := len(items), 250; got != want {
		t.Fatalf("%d items, want %d", got, want)
	}
	seen := map[string]bool{}
	for _, it := range items {
		if it.Err != nil || it.Order == nil {
			t.Fatalf("item %s: err %v, order %v", it.ID, it.Err, it.Order)
		}
		if seen[it.ID] {
			t.Errorf("order %s listed twice", it.ID)
		}
		seen[it.ID] = true
	}
	var newPages []string
	for _, r := range listRequests(s) {
		if got, want := r.Query.Get("page[size]"), "100"; got != want {
			t.Errorf("page[size] = %s, want %s", got, want)
		}
		if r.Query.Get("filter[orders][state]") == "NEW" {
			newPages = append(newPages, r.Query.Get("page[number]"))
		}
	}
	if got, want := strings.Join(newPages, ","), "0,1,2"; got != want {
		t.Errorf("pages of NEW asked for: %s, want %s", got, want)
	}
	if got := s.Requests()[kaspisim.OpEntries]; got != 0 {
		t.Errorf("%d entries requests, want 0: the listing includes them", got)
	}
}

func TestListListsEachStateAndArchivedCancellations(t *testing.T) {
	t.Parallel()
	s, c := newEnv(t, kaspisim.Options{}, kaspi.Config{})
	now := time.Now()
	mustAdd(t, s, simOrder("1", now.Add(-time.Hour)))
	mustCollect(t, c, now.Add(-24*time.Hour), now)
	var got []string
	for _, r := range listRequests(s) {
		got = append(got, r.Query.Get("filter[orders][state]")+"/"+r.Query.Get("filter[orders][status]"))
	}
	if got, want := strings.Join(got, ","), "NEW/,PICKUP/,DELIVERY/,KASPI_DELIVERY/,ARCHIVE/CANCELLED"; got != want {
		t.Errorf("listings = %s, want %s", got, want)
	}
}

func TestWindows(t *testing.T) {
	t.Parallel()
	to := time.Date(2026, 9, 16, 10, 0, 0, 500_000, almaty) // a sub-millisecond part
	for _, span := range []time.Duration{0, time.Hour, kaspi.MaxWindow, kaspi.MaxWindow + time.Millisecond, 45 * 24 * time.Hour} {
		from := to.Add(-span)
		ws := kaspi.Windows(from, to)
		wantN := int((span + kaspi.MaxWindow - 1) / kaspi.MaxWindow)
		if got := len(ws); got != wantN {
			t.Errorf("span %s: %d windows, want %d", span, got, wantN)
		}
		for i, w := range ws {
			if w.To.Sub(w.From) > kaspi.MaxWindow || !w.From.Before(w.To) {
				t.Errorf("span %s: window %d is %s long", span, i, w.To.Sub(w.From))
			}
			if i > 0 && !w.From.Equal(ws[i-1].To) {
				t.Errorf("span %s: window %d starts at %s, the previous ended at %s", span, i, w.From, ws[i-1].To)
			}
		}
		if len(ws) > 0 && (!ws[0].From.Equal(from.Truncate(time.Millisecond)) || !ws[len(ws)-1].To.Equal(to.Truncate(time.Millisecond))) {
			t.Errorf("span %s: windows cover %s..%s", span, ws[0].From, ws[len(ws)-1].To)
		}
	}
}

func TestListSplitsALongWindow(t *testing.T) {
	t.Parallel()
	s, c := newEnv(t, kaspisim.Options{}, kaspi.Config{})
	now := time.Now()
	from := now.Add(-30 * 24 * time.Hour)
	var want []string
	for d := range 30 {
		code := fmt.Sprintf("7%04d", d)
		mustAdd(t, s, simOrder(code, from.Add(time.Duration(d)*24*time.Hour+time.Minute)))
		want = append(want, code)
	}
	items := mustCollect(t, c, from, now)
	var got []string
	for _, it := range items {
		got = append(got, it.ID)
	}
	slices.Sort(got)
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("listed %v, want %v", got, want)
	}
	windows := map[string]bool{}
	for _, r := range listRequests(s) {
		if r.Status != http.StatusOK {
			t.Errorf("a listing was refused: HTTP %d %v", r.Status, r.Query)
		}
		ge, _ := strconv.ParseInt(r.Query.Get("filter[orders][creationDate][$ge]"), 10, 64)
		le, _ := strconv.ParseInt(r.Query.Get("filter[orders][creationDate][$le]"), 10, 64)
		if span := time.Duration(le-ge) * time.Millisecond; span > kaspi.MaxWindow {
			t.Errorf("a listing asked for %s", span)
		}
		windows[fmt.Sprint(ge, le)] = true
	}
	if got, want := len(windows), 3; got != want {
		t.Errorf("%d distinct windows, want %d (30 days in periods of 14)", got, want)
	}
}

func TestListHonoursRetryAfter(t *testing.T) {
	t.Parallel()
	s, c := newEnv(t, kaspisim.Options{}, kaspi.Config{})
	now := time.Now()
	mustAdd(t, s, simOrder("8001", now.Add(-time.Hour)))
	s.Faults.Add(1, sim.Fault{Op: kaspisim.OpList, Status: http.StatusTooManyRequests, RetryAfter: time.Second})

	items := mustCollect(t, c, now.Add(-24*time.Hour), now)
	if got := len(items); got != 1 {
		t.Fatalf("%d items, want 1", got)
	}
	reqs := listRequests(s)
	if len(reqs) < 2 || reqs[0].Status != http.StatusTooManyRequests || reqs[1].Status != http.StatusOK {
		t.Fatalf("requests: %+v", reqs)
	}
	if got, want := reqs[1].Query.Encode(), reqs[0].Query.Encode(); got != want {
		t.Errorf("the retry asked for %s, the refused request for %s", got, want)
	}
	if waited := reqs[1].At.Sub(reqs[0].At); waited < time.Second {
		t.Errorf("retried after %s, Retry-After said 1s", waited)
	}
}

func TestListRetriesServerErrorsThenGivesUp(t *testing.T) {
	t.Parallel()
	s, c := newEnv(t, kaspisim.Options{}, kaspi.Config{})
	now := time.Now()
	s.Faults.Add(10, sim.Fault{Op: kaspisim.OpList, Status: http.StatusBadGateway, RetryAfter: sim.RetryNow})
	_, err := collect(t, c, now.Add(-time.Hour), now)
	if err == nil || !strings.Contains(err.Error(), "502") {
		t.Fatalf("List = %v, want an error naming HTTP 502", err)
	}
	if got, want := s.Requests()[kaspisim.OpList], 4; got != want {
		t.Errorf("%d tries, want %d (one and three retries)", got, want)
	}
}

func TestListMapsTheCanonicalOrder(t *testing.T) {
	t.Parallel()
	s, c := newEnv(t, kaspisim.Options{}, kaspi.Config{Warehouse: "WH7"})
	now := time.Now().Truncate(time.Millisecond)
	o := simOrder("496149022", now.Add(-time.Hour))
	o.DeliveryCost = dec("500")
	o.Entries = []kaspisim.Entry{
		{OfferCode: "KETTLE-1", Name: "Чайник", Quantity: decimal.NewFromInt(3), BasePrice: dec("1500.10")},
		{OfferCode: "BAG-1", Name: "Пакет", Quantity: decimal.NewFromInt(1), BasePrice: dec("0.1")},
		{OfferCode: "BAG-2", Name: "Пакет", Quantity: decimal.NewFromInt(1), BasePrice: dec("0.2")},
	}
	o = mustAdd(t, s, o)

	items := mustCollect(t, c, now.Add(-24*time.Hour), now)
	if len(items) != 1 || items[0].Err != nil {
		t.Fatalf("items = %+v", items)
	}
	it := items[0]
	if got, want := it.CreateKey("kaspi"), "kaspi:order:496149022:create"; got != want {
		t.Errorf("key = %s, want %s", got, want)
	}
	got := it.Order
	if got.ExternalID != "496149022" || got.Number != "496149022" || got.MarketplaceID != o.ID {
		t.Errorf("external_id %q number %q marketplace_id %q, want the code twice and %q", got.ExternalID, got.Number, got.MarketplaceID, o.ID)
	}
	if got.Source != "kaspi" || got.Warehouse != "WH7" || got.Currency != "KZT" {
		t.Errorf("source %q warehouse %q currency %q", got.Source, got.Warehouse, got.Currency)
	}
	if !got.CreatedAt.Equal(now.Add(-time.Hour)) || got.CreatedAt.Location().String() != almaty.String() {
		t.Errorf("created_at = %s, want %s in Almaty", got.CreatedAt, now.Add(-time.Hour).In(almaty))
	}
	if got.Customer.Name != "Даниела Муталидзе" || got.Customer.Phone != "+77066828008" {
		t.Errorf("customer = %+v", got.Customer)
	}
	wantLines := []struct{ sku, qty, price string }{{"KETTLE-1", "3", "1500.1"}, {"BAG-1", "1", "0.1"}, {"BAG-2", "1", "0.2"}}
	if len(got.Lines) != len(wantLines) {
		t.Fatalf("%d lines, want %d", len(got.Lines), len(wantLines))
	}
	for i, w := range wantLines {
		l := got.Lines[i]
		if l.SKU != w.sku || !l.Quantity.Equal(dec(w.qty)) || !l.Price.Equal(dec(w.price)) {
			t.Errorf("line %d = %s × %s at %s, want %s × %s at %s", i, l.SKU, l.Quantity, l.Price, w.sku, w.qty, w.price)
		}
	}
	if got, want := got.Lines[0].Amount().String(), "4500.3"; got != want {
		t.Errorf("1500.10 × 3 = %s, want %s", got, want)
	}
	if got.Total == nil || got.Total.String() != "4500.6" {
		t.Errorf("total = %v, want exactly 4500.6 (4500.30 + 0.1 + 0.2)", got.Total)
	}
	if !strings.Contains(got.Comment, "5000.6") || !strings.Contains(got.Comment, "delivery 500") {
		t.Errorf("comment = %q, want Kaspi's totalPrice 5000.6 and the delivery noted", got.Comment)
	}
	if err := got.Validate(); err != nil {
		t.Errorf("the mapped order does not validate: %v", err)
	}
	if !json.Valid(it.Raw) || !strings.Contains(string(it.Raw), `"496149022"`) {
		t.Errorf("Raw = %s", it.Raw)
	}
	var canon map[string]any
	dc := json.NewDecoder(strings.NewReader(string(got.Canonical())))
	dc.UseNumber()
	if err := dc.Decode(&canon); err != nil {
		t.Fatal(err)
	}
	if got, want := canon["total"], json.Number("4500.6"); got != want {
		t.Errorf("canonical total = %v, want %v", got, want)
	}
}

func TestListPricesOfWeighedGoods(t *testing.T) {
	t.Parallel()
	s, c := newEnv(t, kaspisim.Options{}, kaspi.Config{})
	now := time.Now()
	exact, uneven := dec("5928"), dec("1000")
	o := simOrder("9001", now.Add(-time.Hour))
	o.Entries = []kaspisim.Entry{{OfferCode: "APPLES", UnitType: "MEASURABLE_PIECES", Quantity: decimal.NewFromInt(3),
		BasePrice: dec("1560"), Weight: dec("3800"), TotalPrice: &exact}}
	mustAdd(t, s, o)
	o = simOrder("9002", now.Add(-time.Hour))
	o.Entries = []kaspisim.Entry{{OfferCode: "PEARS", UnitType: "MEASURABLE", Quantity: decimal.NewFromInt(3),
		BasePrice: dec("300"), TotalPrice: &uneven}}
	mustAdd(t, s, o)

	items := byID(mustCollect(t, c, now.Add(-24*time.Hour), now))
	if it := items["9001"]; it.Err != nil || !it.Order.Lines[0].Price.Equal(dec("1976")) || !it.Order.Total.Equal(exact) {
		t.Errorf("9001: err %v, order %+v; want price 1976 and total 5928", it.Err, it.Order)
	}
	if it := items["9002"]; it.Err == nil || !strings.Contains(it.Err.Error(), "entries[0].totalPrice") {
		t.Errorf("9002: err %v, want one naming entries[0].totalPrice (1000 for 3 has no exact unit price)", it.Err)
	}
}

func TestListCancelledOrders(t *testing.T) {
	t.Parallel()
	s, c := newEnv(t, kaspisim.Options{}, kaspi.Config{})
	now := time.Now()
	archived := simOrder("5101", now.Add(-3*time.Hour))
	archived.State, archived.Status, archived.CancellationReason = kaspisim.StateArchive, kaspisim.StatusCancelled, "BUYER_CANCELLATION_BY_MERCHANT"
	mustAdd(t, s, archived)
	cancelling := simOrder("5102", now.Add(-2*time.Hour))
	cancelling.State, cancelling.Status = kaspisim.StateKaspiDelivery, kaspisim.StatusAcceptedByMerchant
	mustAdd(t, s, cancelling)
	completed := simOrder("5103", now.Add(-2*time.Hour))
	completed.State, completed.Status = kaspisim.StateArchive, kaspisim.StatusCompleted
	mustAdd(t, s, completed)

	before := byID(mustCollect(t, c, now.Add(-24*time.Hour), now))
	if it := before["5102"]; it.Cancelled || it.Order == nil {
		t.Fatalf("5102 before its cancellation: cancelled %v, order %v", it.Cancelled, it.Order)
	}
	if err := s.SetStatus("5102", kaspisim.StatusCancelling); err != nil {
		t.Fatal(err)
	}
	items := byID(mustCollect(t, c, now.Add(-24*time.Hour), now))
	for _, code := range []string{"5101", "5102"} {
		it, ok := items[code]
		if !ok || !it.Cancelled || it.Err != nil || it.Order != nil {
			t.Errorf("%s: listed %v, cancelled %v, err %v, order %v; want a cancelled item", code, ok, it.Cancelled, it.Err, it.Order)
		}
	}
	if got := items["5101"].CancelReason; !strings.Contains(got, "BUYER_CANCELLATION_BY_MERCHANT") {
		t.Errorf("cancel reason = %q", got)
	}
	if got, want := items["5101"].CancelKey("kaspi"), "kaspi:order:5101:cancel"; got != want {
		t.Errorf("cancel key = %s, want %s", got, want)
	}
	if _, ok := items["5103"]; ok {
		t.Error("a completed archived order was listed")
	}
}

func TestListLeavesOutStatusesNotImported(t *testing.T) {
	t.Parallel()
	s, c := newEnv(t, kaspisim.Options{}, kaspi.Config{Statuses: []string{kaspi.StatusApprovedByBank}})
	now := time.Now()
	mustAdd(t, s, simOrder("5201", now.Add(-time.Hour)))
	accepted := simOrder("5202", now.Add(-time.Hour))
	accepted.State, accepted.Status = kaspisim.StatePickup, kaspisim.StatusAcceptedByMerchant
	mustAdd(t, s, accepted)
	items := byID(mustCollect(t, c, now.Add(-24*time.Hour), now))
	if _, ok := items["5201"]; !ok {
		t.Error("the APPROVED_BY_BANK order was not listed")
	}
	if _, ok := items["5202"]; ok {
		t.Error("an ACCEPTED_BY_MERCHANT order was listed though only APPROVED_BY_BANK is imported")
	}
}

func TestListBadOrdersDoNotSpoilThePage(t *testing.T) {
	t.Parallel()
	s, c := newEnv(t, kaspisim.Options{}, kaspi.Config{})
	now := time.Now()
	mustAdd(t, s, simOrder("5301", now.Add(-4*time.Hour)))
	noDate := `{"type":"orders","id":"bad1","attributes":{"code":"5302","state":"NEW","status":"APPROVED_BY_BANK","customer":{"cellPhone":"7011234567"}},"relationships":{"entries":{"data":[]}}}`
	s.AddRawOrder(kaspisim.StateNew, now.Add(-3*time.Hour), noDate)
	s.AddRawOrder(kaspisim.StateNew, now.Add(-3*time.Hour), `{"type":"orders","id":"bad2","attributes":{"code":5303,"state":"NEW"}}`)
	s.AddRawOrder(kaspisim.StateNew, now.Add(-3*time.Hour), `{"type":"orders","id":"bad3","attributes":{"code":"5304","state":"NEW","status":"LOST_IN_SPACE"}}`)
	s.AddRawOrder(kaspisim.StateNew, now.Add(-3*time.Hour), `{"type":"orders","id":"bad4","attributes":{"code":"5305","state":"NEW","status":"APPROVED_BY_BANK","creationDate":1789000000000}}`)
	s.AddRawOrder(kaspisim.StateNew, now.Add(-3*time.Hour), `"not an order"`)
	mustAdd(t, s, simOrder("5306", now.Add(-2*time.Hour)))

	items, err := collect(t, c, now.Add(-24*time.Hour), now)
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if got, want := len(items), 7; got != want {
		t.Fatalf("%d items, want %d", got, want)
	}
	m := byID(items)
	for _, code := range []string{"5301", "5306"} {
		if it := m[code]; it.Err != nil || it.Order == nil {
			t.Errorf("good order %s: err %v", code, it.Err)
		}
	}
	tests := []struct{ id, field string }{
		{"5302", "attributes.creationDate"},
		{"5304", "attributes.status"},
		{"5305", "entries"}, // no relationship and GET /orders/bad4/entries is 404
	}
	for _, tt := range tests {
		it, ok := m[tt.id]
		if !ok || it.Err == nil || !strings.Contains(it.Err.Error(), tt.field) {
			t.Errorf("%s: listed %v, err %v; want an error naming %s", tt.id, ok, it.Err, tt.field)
		}
		if !json.Valid(it.Raw) || !strings.Contains(string(it.Raw), tt.id) {
			t.Errorf("%s: Raw = %s", tt.id, it.Raw)
		}
	}
	var unreadable int
	for _, it := range items {
		if it.ID == "" {
			unreadable++
			if it.Err == nil {
				t.Error("an item without an id carries no error")
			}
		}
	}
	if unreadable != 2 {
		t.Errorf("%d items without an id, want 2 (a numeric code, a string for an order)", unreadable)
	}
}

func TestListFailsOnAMalformedPage(t *testing.T) {
	t.Parallel()
	for _, body := range []string{`{"data":[{"type":"orders",`, `{"meta":{"pageCount":1}}`, `<html>maintenance</html>`} {
		t.Run(body, func(t *testing.T) {
			t.Parallel()
			s, c := newEnv(t, kaspisim.Options{}, kaspi.Config{})
			now := time.Now()
			mustAdd(t, s, simOrder("5401", now.Add(-time.Hour)))
			s.InjectRaw(1, body)
			items, err := collect(t, c, now.Add(-24*time.Hour), now)
			if err == nil || !strings.Contains(err.Error(), "page 0") {
				t.Fatalf("List = %v, want an error naming the page", err)
			}
			if len(items) != 0 {
				t.Errorf("%d items delivered from a listing that failed on its first page", len(items))
			}
		})
	}
}

func TestListFetchesEntriesWhenNotIncluded(t *testing.T) {
	t.Parallel()
	s, c := newEnv(t, kaspisim.Options{IgnoreInclude: true}, kaspi.Config{})
	now := time.Now()
	for i := range 5 {
		mustAdd(t, s, simOrder(fmt.Sprintf("55%02d", i), now.Add(-time.Hour)))
	}
	items := mustCollect(t, c, now.Add(-24*time.Hour), now)
	for _, it := range items {
		if it.Err != nil || len(it.Order.Lines) != 1 || it.Order.Lines[0].SKU != "SKU-"+it.ID {
			t.Errorf("%s: err %v order %+v", it.ID, it.Err, it.Order)
		}
	}
	if got, want := s.Requests()[kaspisim.OpEntries], 5; got != want {
		t.Errorf("%d entries requests, want %d", got, want)
	}
}

func TestUnauthorized(t *testing.T) {
	t.Parallel()
	s, c := newEnv(t, kaspisim.Options{}, kaspi.Config{Token: "not-the-token"})
	now := time.Now()
	mustAdd(t, s, simOrder("5601", now.Add(-time.Hour)))
	_, err := collect(t, c, now.Add(-time.Hour), now)
	var ae *connectors.AuthError
	if !errors.As(err, &ae) {
		t.Fatalf("List = %v, want a *connectors.AuthError", err)
	}
	if ae.Key != "connectors.kaspi.token" || ae.Status != http.StatusUnauthorized || !strings.Contains(err.Error(), "connectors.kaspi.token") {
		t.Errorf("AuthError = %+v (%v)", ae, err)
	}
	if got := s.Requests()[kaspisim.OpList]; got != 1 {
		t.Errorf("%d listing requests, want 1: refused credentials are not retried", got)
	}
	if _, err := c.Get(context.Background(), "5601"); !errors.As(err, &ae) {
		t.Errorf("Get = %v, want a *connectors.AuthError", err)
	}
}

func TestGet(t *testing.T) {
	t.Parallel()
	s, c := newEnv(t, kaspisim.Options{}, kaspi.Config{Statuses: []string{kaspi.StatusApprovedByBank}})
	now := time.Now()
	done := simOrder("5701", now.Add(-30*24*time.Hour)) // outside any listing window
	done.State, done.Status = kaspisim.StateArchive, kaspisim.StatusCompleted
	done = mustAdd(t, s, done)
	gone := simOrder("5702", now.Add(-time.Hour))
	gone.Status, gone.CancellationReason = kaspisim.StatusCancelled, "MERCHANT_OUT_OF_STOCK"
	mustAdd(t, s, gone)
	ctx := context.Background()

	it, err := c.Get(ctx, "5701")
	if err != nil || it.ID != "5701" || it.Err != nil || it.Order == nil || it.Order.MarketplaceID != done.ID {
		t.Fatalf("Get(5701) = %+v, %v", it, err)
	}
	it, err = c.Get(ctx, "5702")
	if err != nil || !it.Cancelled {
		t.Errorf("Get(5702) = %+v, %v; want a cancelled item", it, err)
	}
	if _, err := c.Get(ctx, "0000"); !errors.Is(err, connectors.ErrNotFound) {
		t.Errorf("Get(unknown) = %v, want ErrNotFound", err)
	}
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  kaspi.Config
		key  string
	}{
		{"no token", kaspi.Config{}, "connectors.kaspi.token"},
		{"bad url", kaspi.Config{Token: "t", BaseURL: "kaspi.kz"}, "connectors.kaspi.base_url"},
		{"page too big", kaspi.Config{Token: "t", PageSize: 101}, "connectors.kaspi.page_size"},
		{"unknown state", kaspi.Config{Token: "t", States: []string{"NEW", "OLD"}}, "connectors.kaspi.states"},
		{"unknown status", kaspi.Config{Token: "t", Statuses: []string{"PAID"}}, "connectors.kaspi.statuses"},
		{"cancelled status", kaspi.Config{Token: "t", Statuses: []string{"CANCELLED"}}, "connectors.kaspi.statuses"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := kaspi.New(tt.cfg)
			if err == nil || !strings.Contains(err.Error(), tt.key) {
				t.Errorf("New = %v, want an error naming %s", err, tt.key)
			}
		})
	}
	c, err := kaspi.New(kaspi.Config{Token: "t"})
	if err != nil || c.Name() != "kaspi" {
		t.Errorf("New with defaults = %v, %v", c, err)
	}
}

// The canonical order's JSON carries the mapped order unchanged through the journal.
func TestMappedOrderSurvivesCanonicalJSON(t *testing.T) {
	t.Parallel()
	s, c := newEnv(t, kaspisim.Options{}, kaspi.Config{})
	now := time.Now()
	mustAdd(t, s, simOrder("5801", now.Add(-time.Hour)))
	it := mustCollect(t, c, now.Add(-24*time.Hour), now)[0]
	back, err := order.Parse(it.Order.Canonical())
	if err != nil {
		t.Fatalf("Parse(Canonical()) = %v", err)
	}
	if back.MarketplaceID != it.Order.MarketplaceID || !back.Total.Equal(*it.Order.Total) {
		t.Errorf("round trip: %+v, want %+v", back, *it.Order)
	}
}
