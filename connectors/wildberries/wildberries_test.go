package wildberries

import (
	"bytes"
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
	"github.com/ordersync/ordersync/internal/order"
	"github.com/ordersync/ordersync/internal/outbox"
	"github.com/ordersync/ordersync/internal/sim"
	"github.com/ordersync/ordersync/internal/sim/wbsim"
)

var testNow = time.Date(2026, 9, 16, 7, 0, 0, 0, time.UTC)

const testToken = "wb-token-for-tests"

// newTest serves a simulator and returns it with a connector pointed at it; edit
// adjusts the connector's configuration.
func newTest(t *testing.T, edit ...func(*Config)) (*wbsim.Wildberries, *Connector) {
	t.Helper()
	s := wbsim.New(wbsim.Options{Token: testToken, Now: func() time.Time { return testNow }})
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	cfg := Config{
		BaseURL: ts.URL, Token: testToken, Warehouse: "WH1", Acknowledge: true,
		RatePerSecond: -1, Now: func() time.Time { return testNow },
	}
	for _, e := range edit {
		e(&cfg)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s, c
}

// wbOrder is an order created at, in RUB, with its SKU derived from its id.
func wbOrder(id int64, at time.Time) wbsim.Order {
	return wbsim.Order{
		ID: id, Article: fmt.Sprintf("ART-%d", id), Price: 150000, ConvertedPrice: 150000,
		CurrencyCode: 643, ConvertedCurrencyCode: 643, CreatedAt: at, RID: fmt.Sprintf("rid-%d", id),
	}
}

// listAll lists [from, to) and returns every item and how many pages fn received.
func listAll(t *testing.T, c *Connector, from, to time.Time) ([]connectors.Item, int, error) {
	t.Helper()
	var items []connectors.Item
	pages := 0
	err := c.List(context.Background(), from, to, func(page []connectors.Item) error {
		pages++
		items = append(items, page...)
		return nil
	})
	return items, pages, err
}

func mustList(t *testing.T, c *Connector, from, to time.Time) []connectors.Item {
	t.Helper()
	items, _, err := listAll(t, c, from, to)
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

func ids(items []connectors.Item) []string {
	var out []string
	for _, it := range items {
		out = append(out, it.ID)
	}
	slices.Sort(out)
	return out
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		cfg  Config
		want string
	}{
		"no token":       {Config{}, "connectors.wildberries.token is required"},
		"page size":      {Config{Token: "x", PageSize: 1001}, "connectors.wildberries.page_size"},
		"supply name":    {Config{Token: "x", SupplyName: strings.Repeat("п", 129)}, "connectors.wildberries.supply_name"},
		"base url":       {Config{Token: "x", BaseURL: "marketplace-api.wildberries.ru"}, "connectors.wildberries.base_url"},
		"negative burst": {Config{Token: "x", Burst: -1}, "connectors.wildberries.burst"},
	} {
		_, err := New(tc.cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want one naming %q", name, err, tc.want)
		}
	}
	c, err := New(Config{Token: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Name() != "wb" || c.cfg.BaseURL != DefaultBaseURL || c.cfg.PageSize != 1000 || c.cfg.SupplyName != "ordersync" {
		t.Fatalf("defaults: name %q, %+v", c.Name(), c.cfg)
	}
	if got, want := (connectors.Item{ID: "1234567"}).CreateKey(c.Name()), "wb:order:1234567:create"; got != want {
		t.Fatalf("create key = %q, want %q", got, want)
	}
}

func TestListMultiPageComplete(t *testing.T) {
	t.Parallel()
	s, c := newTest(t, func(cfg *Config) { cfg.PageSize = 10 })
	for i := range 25 {
		o := wbOrder(int64(7000+i), testNow.Add(-48*time.Hour+time.Duration(i)*time.Minute))
		if i >= 3 { // all but the first three are past "new": only /api/v3/orders lists them
			o.SupplierStatus, o.WBStatus = "confirm", "waiting"
		}
		s.AddOrder(o)
	}

	items, pages, err := listAll(t, c, testNow.Add(-72*time.Hour), testNow)
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != 25 {
		t.Fatalf("%d items, want 25: %v", len(items), ids(items))
	}
	for i, it := range items {
		if it.Err != nil || it.Order == nil || it.Cancelled {
			t.Fatalf("item %d: %+v", i, it)
		}
		if want := "ART-" + it.ID; it.Order.Lines[0].SKU != want {
			t.Fatalf("item %s: SKU %q, want %q", it.ID, it.Order.Lines[0].SKU, want)
		}
	}
	if got := len(byID(items)); got != 25 {
		t.Fatalf("%d distinct ids among 25 items: an order was passed twice", got)
	}
	// /orders/new, then pages of 7 (3 already seen), 10 and 5; the empty fourth page ends it.
	if pages != 4 {
		t.Fatalf("fn got %d pages, want 4", pages)
	}
	if got := len(s.RequestsOf(wbsim.OpOrders)); got != 4 {
		t.Fatalf("%d requests of /api/v3/orders, want 4 (3 pages and the empty one)", got)
	}
	for _, r := range s.RequestsOf(wbsim.OpOrders) {
		if r.Query.Get("limit") != "10" {
			t.Fatalf("limit = %q, want the page size 10", r.Query.Get("limit"))
		}
	}
}

func TestListSplitsLongWindow(t *testing.T) {
	t.Parallel()
	s, c := newTest(t)
	from, to := testNow.Add(-75*24*time.Hour), testNow
	for i, ago := range []time.Duration{70, 45, 31, 5} {
		o := wbOrder(int64(100+i), testNow.Add(-ago*24*time.Hour))
		o.SupplierStatus = "complete"
		s.AddOrder(o)
	}

	items := mustList(t, c, from, to)
	if got, want := ids(items), []string{"100", "101", "102", "103"}; !slices.Equal(got, want) {
		t.Fatalf("ids = %v, want %v", got, want)
	}
	type period struct{ from, to int64 }
	var periods []period
	for _, r := range s.RequestsOf(wbsim.OpOrders) {
		f, _ := strconv.ParseInt(r.Query.Get("dateFrom"), 10, 64)
		e, _ := strconv.ParseInt(r.Query.Get("dateTo"), 10, 64)
		if r.Status != 200 {
			t.Fatalf("request %v answered %d", r.Query, r.Status)
		}
		if e-f > int64(MaxWindow/time.Second) {
			t.Fatalf("period %d–%d is longer than 30 days", f, e)
		}
		if len(periods) == 0 || periods[len(periods)-1] != (period{f, e}) {
			periods = append(periods, period{f, e})
		}
	}
	if len(periods) != 3 {
		t.Fatalf("periods = %v, want 3 for 75 days", periods)
	}
	if periods[0].from != from.Unix() || periods[2].to != to.Unix() {
		t.Fatalf("periods %v do not span %d–%d", periods, from.Unix(), to.Unix())
	}
	for i := 1; i < len(periods); i++ {
		if periods[i].from != periods[i-1].to {
			t.Fatalf("periods %v leave a gap or overlap", periods)
		}
	}
}

func TestList429HonoursRateLimitRetry(t *testing.T) {
	t.Parallel()
	s, c := newTest(t)
	s.AddOrder(wbOrder(1, testNow.Add(-time.Hour)))
	s.Faults.Add(1, sim.Fault{Op: wbsim.OpOrders, Status: http.StatusTooManyRequests, RetryAfter: time.Second})

	items := mustList(t, c, testNow.Add(-24*time.Hour), testNow)
	if len(items) != 1 || items[0].Err != nil {
		t.Fatalf("items = %+v", items)
	}
	reqs := s.RequestsOf(wbsim.OpOrders)
	if len(reqs) < 2 || reqs[0].Status != 429 || reqs[1].Status != 200 {
		t.Fatalf("requests: %+v", reqs)
	}
	if gap := reqs[1].At.Sub(reqs[0].At); gap < time.Second {
		t.Fatalf("retried %s after a 429 with X-Ratelimit-Retry: 1, want at least 1s", gap)
	}
}

func TestListCancelled(t *testing.T) {
	t.Parallel()
	s, c := newTest(t)
	cases := []struct {
		supplier, wb string
		cancelled    bool
	}{
		{"new", "waiting", false},
		{"confirm", "sorted", false},
		{"complete", "sold", false},
		{"complete", "ready_for_pickup", false},
		{"cancel", "canceled", true},
		{"new", "declined_by_client", true},
		{"complete", "canceled_by_client", true},
		{"complete", "defect", true},
		{"cancel_carrier", "canceled_by_carrier", true},
	}
	for i, tc := range cases {
		o := wbOrder(int64(500+i), testNow.Add(-time.Hour))
		o.SupplierStatus, o.WBStatus = tc.supplier, tc.wb
		s.AddOrder(o)
	}
	got := byID(mustList(t, c, testNow.Add(-24*time.Hour), testNow))
	for i, tc := range cases {
		it := got[strconv.Itoa(500+i)]
		if it.Err != nil || it.Order == nil {
			t.Errorf("%s/%s: err %v, order %v: a cancelled order still maps", tc.supplier, tc.wb, it.Err, it.Order)
		}
		if it.Cancelled != tc.cancelled {
			t.Errorf("%s/%s: cancelled = %v, want %v", tc.supplier, tc.wb, it.Cancelled, tc.cancelled)
		}
		if tc.cancelled && (!strings.Contains(it.CancelReason, tc.wb) || !strings.Contains(it.CancelReason, "Wildberries")) {
			t.Errorf("%s/%s: reason %q", tc.supplier, tc.wb, it.CancelReason)
		}
	}
}

func TestPricesAreExactDecimals(t *testing.T) {
	t.Parallel()
	s, c := newTest(t)
	cases := []struct {
		hundredths int64
		code       int
		want, cur  string
	}{
		{153099, 643, "1530.99", "RUB"},
		{1000050, 398, "10000.50", "KZT"},
		{1, 933, "0.01", "BYN"},
		{0, 417, "0.00", "KGS"},
		{28322, 51, "283.22", "AMD"},
		{999999999999999, 860, "9999999999999.99", "UZS"},
	}
	for i, tc := range cases {
		o := wbOrder(int64(300+i), testNow.Add(-time.Hour))
		// The sale price in another currency must not be what is taken.
		o.Price, o.CurrencyCode = 1014, 933
		o.ConvertedPrice, o.ConvertedCurrencyCode = tc.hundredths, tc.code
		s.AddOrder(o)
	}
	got := byID(mustList(t, c, testNow.Add(-24*time.Hour), testNow))
	for i, tc := range cases {
		it := got[strconv.Itoa(300+i)]
		if it.Err != nil {
			t.Fatalf("%d: %v", tc.hundredths, it.Err)
		}
		o := it.Order
		l := o.Lines[0]
		if !l.Price.Equal(decimal.RequireFromString(tc.want)) || l.Price.StringFixed(2) != tc.want || o.Currency != tc.cur {
			t.Errorf("%d (%d): price %s %s, want %s %s", tc.hundredths, tc.code, l.Price, o.Currency, tc.want, tc.cur)
		}
		if !l.Quantity.Equal(decimal.NewFromInt(1)) || o.Total == nil || !o.Total.Equal(l.Price) {
			t.Errorf("%d: quantity %s, total %v", tc.hundredths, l.Quantity, o.Total)
		}
		o.Source = Name
		if err := o.Validate(); err != nil {
			t.Errorf("%d: %v", tc.hundredths, err)
		}
	}
	// The canonical JSON carries the number exactly.
	if b := got["300"].Order.Canonical(); !bytes.Contains(b, []byte(`"price":1530.99`)) || !bytes.Contains(b, []byte(`"total":1530.99`)) {
		t.Fatalf("canonical order: %s", b)
	}
}

func TestMapping(t *testing.T) {
	t.Parallel()
	s, c := newTest(t)
	o := wbOrder(42, time.Date(2026, 9, 16, 5, 30, 0, 0, time.UTC))
	o.Comment = "Упакуйте в плёнку"
	s.AddOrder(o)
	it := mustList(t, c, testNow.Add(-24*time.Hour), testNow)[0]
	want := order.Order{
		Source: "wb", ExternalID: "42", Number: "42", CreatedAt: o.CreatedAt, Warehouse: "WH1", Currency: "RUB",
		Lines:   []order.Line{{SKU: "ART-42", Quantity: decimal.NewFromInt(1), Price: decimal.RequireFromString("1500")}},
		Comment: "Wildberries rid rid-42\nУпакуйте в плёнку",
	}
	total := decimal.RequireFromString("1500")
	want.Total = &total
	if got := it.Order.Canonical(); !bytes.Equal(got, want.Canonical()) {
		t.Fatalf("mapped\n%s\nwant\n%s", got, want.Canonical())
	}
	if !json.Valid(it.Raw) || !bytes.Contains(it.Raw, []byte(`"article":"ART-42"`)) {
		t.Fatalf("raw = %s", it.Raw)
	}
}

func TestSamePayloadFromBothListings(t *testing.T) {
	t.Parallel()
	s, c := newTest(t)
	s.AddOrder(wbOrder(77, testNow.Add(-time.Hour)))
	ctx := context.Background()
	fromNew, err := c.newOrders(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var fromPeriod []json.RawMessage
	if err := c.scan(ctx, testNow.Add(-2*time.Hour), testNow, func(raws []json.RawMessage) (bool, error) {
		fromPeriod = append(fromPeriod, raws...)
		return false, nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(fromNew) != 1 || len(fromPeriod) != 1 || bytes.Equal(fromNew[0], fromPeriod[0]) {
		t.Fatalf("want the order once from each listing, in their different shapes: %s / %s", fromNew, fromPeriod)
	}
	a, b := c.mapOrder(fromNew[0]), c.mapOrder(fromPeriod[0])
	if a.Err != nil || b.Err != nil || !bytes.Equal(a.Order.Canonical(), b.Order.Canonical()) {
		t.Fatalf("the two listings map differently (a false conflict at registration):\n%s\n%s", a.Order.Canonical(), b.Order.Canonical())
	}
}

func TestBadOrdersFailAlone(t *testing.T) {
	t.Parallel()
	s, c := newTest(t)
	at := testNow.Add(-time.Hour)
	good := wbOrder(1, at)
	s.AddOrder(good)
	unknownCurrency := wbOrder(2, at)
	unknownCurrency.ConvertedCurrencyCode = 999
	s.AddOrder(unknownCurrency)
	noArticle := wbOrder(3, at)
	noArticle.Omit = []string{"article", "createdAt"}
	s.AddOrder(noArticle)
	stringPrice := wbOrder(4, at)
	stringPrice.Raw = json.RawMessage(`{"id":4,"article":"A","createdAt":"2026-09-16T06:00:00Z","convertedPrice":"15.30","convertedCurrencyCode":643}`)
	s.AddOrder(stringPrice)
	unknownStatus := wbOrder(5, at)
	unknownStatus.SupplierStatus = "teleported"
	s.AddOrder(unknownStatus)
	s.AddOrder(wbsim.Order{ID: 6, Raw: json.RawMessage(`{"id":"six","article":"B"}`)})
	s.AddOrder(wbsim.Order{ID: 7, Raw: json.RawMessage(`{"article":"C"}`)})
	s.AddOrder(wbOrder(8, at))

	items := mustList(t, c, testNow.Add(-24*time.Hour), testNow)
	got := byID(items)
	for _, id := range []string{"1", "8"} {
		if it := got[id]; it.Err != nil || it.Order == nil {
			t.Errorf("good order %s: %v", id, it.Err)
		}
	}
	for id, fields := range map[string][]string{
		"2": {"convertedCurrencyCode", "999"},
		"3": {"article: is missing", "createdAt: is missing"},
		"4": {"convertedPrice", "integer"},
		"5": {"supplierStatus", "teleported"},
	} {
		it := got[id]
		if it.Err == nil || it.Order != nil || len(it.Raw) == 0 {
			t.Errorf("order %s: err %v, order %v, raw %s: want an error with the raw order", id, it.Err, it.Order, it.Raw)
			continue
		}
		for _, f := range fields {
			if !strings.Contains(it.Err.Error(), f) {
				t.Errorf("order %s: error %q does not name %q", id, it.Err, f)
			}
		}
	}
	unreadable := 0
	for _, it := range items {
		if it.ID == "" {
			unreadable++
			if it.Err == nil || len(it.Raw) == 0 {
				t.Errorf("unreadable order: %+v", it)
			}
		}
	}
	if unreadable != 2 || len(items) != 8 {
		t.Fatalf("%d items, %d unreadable: want 8 and 2", len(items), unreadable)
	}
}

func TestMalformedPageFailsListing(t *testing.T) {
	t.Parallel()
	for _, op := range []string{wbsim.OpNew, wbsim.OpOrders, wbsim.OpStatus} {
		t.Run(op, func(t *testing.T) {
			t.Parallel()
			s, c := newTest(t)
			s.AddOrder(wbOrder(1, testNow.Add(-time.Hour)))
			s.Faults.Add(1, sim.Fault{Op: op, Kind: sim.Malformed})
			items, _, err := listAll(t, c, testNow.Add(-24*time.Hour), testNow)
			if err == nil || !strings.Contains(err.Error(), "malformed") {
				t.Fatalf("List: err = %v, want a malformed-answer error", err)
			}
			if op != wbsim.OpOrders && len(items) != 0 {
				t.Fatalf("items passed on from a failed page: %v", ids(items))
			}
		})
	}
}

func TestUnauthorized(t *testing.T) {
	t.Parallel()
	s, c := newTest(t, func(cfg *Config) { cfg.Token = "revoked" })
	s.AddOrder(wbOrder(1, testNow.Add(-time.Hour)))

	_, _, err := listAll(t, c, testNow.Add(-time.Hour), testNow)
	var ae *connectors.AuthError
	if !errors.As(err, &ae) || ae.Key != "connectors.wildberries.token" || ae.Status != 401 {
		t.Fatalf("List: err = %v, want an AuthError naming connectors.wildberries.token", err)
	}
	if strings.Contains(err.Error(), "revoked") {
		t.Fatalf("the error shows the token: %v", err)
	}
	if _, err := c.Get(context.Background(), "1"); !errors.As(err, &ae) {
		t.Fatalf("Get: err = %v, want an AuthError", err)
	}
	err = c.Publisher().Publish(context.Background(), createdRecord(t, "1"))
	var de *outbox.DeliveryError
	if !errors.As(err, &ae) || (errors.As(err, &de) && de.Dead) {
		t.Fatalf("Publish: err = %v, want a retryable AuthError", err)
	}
}

func TestGet(t *testing.T) {
	t.Parallel()
	s, c := newTest(t, func(cfg *Config) { cfg.PageSize = 2 })
	s.AddOrder(wbOrder(10, testNow.Add(-time.Hour)))
	for i := range 5 { // fill pages so the search must page
		o := wbOrder(int64(20+i), testNow.Add(-50*24*time.Hour))
		o.SupplierStatus = "complete"
		s.AddOrder(o)
	}
	cancelled := wbOrder(30, testNow.Add(-2*time.Hour))
	cancelled.SupplierStatus, cancelled.WBStatus = "confirm", "canceled_by_client"
	s.AddOrder(cancelled)
	ctx := context.Background()

	for id, wantCancelled := range map[string]bool{"10": false, "24": false, "30": true} {
		it, err := c.Get(ctx, id)
		if err != nil || it.ID != id || it.Err != nil || it.Order == nil || it.Cancelled != wantCancelled {
			t.Errorf("Get(%s) = %+v, %v", id, it, err)
		}
	}
	for _, id := range []string{"99", "abc", "-1", ""} {
		if _, err := c.Get(ctx, id); !errors.Is(err, connectors.ErrNotFound) {
			t.Errorf("Get(%q): err = %v, want ErrNotFound", id, err)
		}
	}
	// The search went back three months and no further, in 30-day periods.
	var oldest int64 = 1 << 62
	for _, r := range s.RequestsOf(wbsim.OpOrders) {
		f, _ := strconv.ParseInt(r.Query.Get("dateFrom"), 10, 64)
		e, _ := strconv.ParseInt(r.Query.Get("dateTo"), 10, 64)
		if r.Status != 200 || e-f > int64(MaxWindow/time.Second) {
			t.Fatalf("request %v: %d", r.Query, r.Status)
		}
		oldest = min(oldest, f)
	}
	if want := testNow.Add(-retention).Unix(); oldest != want {
		t.Fatalf("oldest dateFrom %d, want %d (3 months)", oldest, want)
	}
}

// createdRecord is the order.created record the engine writes for a wb order.
func createdRecord(t *testing.T, id string) outbox.Record {
	t.Helper()
	o := order.Order{Source: "wb", ExternalID: id, Number: id, CreatedAt: testNow, Currency: "RUB",
		Lines: []order.Line{{SKU: "ART", Quantity: decimal.NewFromInt(1), Price: decimal.NewFromInt(1500)}}}
	data, err := json.Marshal(map[string]any{
		"order": json.RawMessage(o.Canonical()),
		"onec":  map[string]string{"ref": "6f1c…", "number": "ЗК-000001"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return outbox.Record{ID: 1, EventID: "ev-" + id, Destination: "wb", Type: outbox.OrderCreated,
		AggregateType: "order", AggregateID: "wb:order:" + id, Data: data}
}

func publish(t *testing.T, c *Connector, id string) error {
	t.Helper()
	return c.Publisher().Publish(context.Background(), createdRecord(t, id))
}

func TestPublishAcknowledgesOnce(t *testing.T) {
	t.Parallel()
	s, c := newTest(t)
	s.AddOrder(wbOrder(1001, testNow.Add(-time.Hour)))

	for i := range 2 { // the relay delivers twice
		if err := publish(t, c, "1001"); err != nil {
			t.Fatalf("delivery %d: %v", i+1, err)
		}
	}
	// A restarted process (no cached supply) delivers a third time.
	c2, err := New(c.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := publish(t, c2, "1001"); err != nil {
		t.Fatalf("delivery after restart: %v", err)
	}
	if got := s.Acks(1001); got != 1 {
		t.Fatalf("order acknowledged %d times at Wildberries, want exactly 1", got)
	}
	o, _ := s.Order(1001)
	sup := s.Supplies()
	if o.SupplierStatus != "confirm" || len(sup) != 1 || sup[0].Name != "ordersync" || !slices.Equal(sup[0].Orders, []int64{1001}) {
		t.Fatalf("order %s in %q; supplies %+v", o.SupplierStatus, o.SupplyID, sup)
	}
}

func TestPublishLeavesAloneWhatNeedsNothing(t *testing.T) {
	t.Parallel()
	s, c := newTest(t)
	s.AddOrder(wbOrder(1, testNow))
	s.SetStatus(1, "confirm", "waiting") // assembled by hand in the seller portal
	s.AddOrder(wbOrder(2, testNow))
	s.SetStatus(2, "new", "declined_by_client")
	s.AddOrder(wbOrder(3, testNow))
	s.SetStatus(3, "complete", "sold")
	for _, id := range []string{"1", "2", "3"} {
		if err := publish(t, c, id); err != nil {
			t.Fatalf("order %s: %v", id, err)
		}
	}
	// Other event types are not Wildberries' business.
	rec := createdRecord(t, "4")
	rec.Type = outbox.OrderCancelled
	if err := c.Publisher().Publish(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
	if n := len(s.RequestsOf(wbsim.OpSupplyAdd)) + len(s.RequestsOf(wbsim.OpSupplyCreate)); n != 0 {
		t.Fatalf("%d supply requests, want none", n)
	}

	// Acknowledge off: no call at all.
	s2, off := newTest(t, func(cfg *Config) { cfg.Acknowledge = false })
	s2.AddOrder(wbOrder(1, testNow))
	if err := publish(t, off, "1"); err != nil || len(s2.Requests()) != 0 || s2.Acks(1) != 0 {
		t.Fatalf("acknowledge off: err %v, %d requests", err, len(s2.Requests()))
	}
}

func TestPublish429(t *testing.T) {
	t.Parallel()
	s, c := newTest(t)
	s.AddOrder(wbOrder(5, testNow))
	s.Faults.Add(1, sim.Fault{Op: wbsim.OpSupplyAdd, Status: http.StatusTooManyRequests, RetryAfter: 3 * time.Second})

	err := publish(t, c, "5")
	var de *outbox.DeliveryError
	if !errors.As(err, &de) || de.Dead || de.RetryAfter != 3*time.Second {
		t.Fatalf("err = %#v, want a DeliveryError with RetryAfter 3s", err)
	}
	if s.Acks(5) != 0 {
		t.Fatal("acknowledged despite the 429")
	}
	if err := publish(t, c, "5"); err != nil || s.Acks(5) != 1 {
		t.Fatalf("redelivery: err %v, %d acks, want nil and 1", err, s.Acks(5))
	}
}

func TestPublishFailures(t *testing.T) {
	t.Parallel()
	s, c := newTest(t)
	s.AddOrder(wbOrder(6, testNow))
	dead := func(err error) bool {
		var de *outbox.DeliveryError
		return errors.As(err, &de) && de.Dead
	}

	// A 5xx on the add may or may not have added it: retried, and the guard decides.
	s.Faults.Add(1, sim.Fault{Op: wbsim.OpSupplyAdd, Status: http.StatusBadGateway})
	if err := publish(t, c, "6"); err == nil || dead(err) {
		t.Fatalf("502: err = %v, want a retryable error", err)
	}
	if err := publish(t, c, "6"); err != nil || s.Acks(6) != 1 {
		t.Fatalf("after 502: err %v, %d acks", err, s.Acks(6))
	}

	// Records that cannot be acknowledged die at once.
	kaspi := createdRecord(t, "6")
	kaspi.Data = bytes.Replace(kaspi.Data, []byte(`"source":"wb"`), []byte(`"source":"kaspi"`), 1)
	garbled := createdRecord(t, "6")
	garbled.Data = json.RawMessage(`{"order":`)
	for name, rec := range map[string]outbox.Record{"kaspi order": kaspi, "garbled data": garbled, "not a wb id": createdRecord(t, "A-1")} {
		if err := c.Publisher().Publish(context.Background(), rec); !dead(err) {
			t.Errorf("%s: err = %v, want dead", name, err)
		}
	}
	if err := publish(t, c, "404404"); !dead(err) || !strings.Contains(err.Error(), "no such order") {
		t.Errorf("unknown order: err = %v, want dead", err)
	}
	// A permanent 4xx from Wildberries.
	s.AddOrder(wbOrder(7, testNow))
	s.Faults.Add(1, sim.Fault{Op: wbsim.OpSupplyAdd, Status: http.StatusBadRequest})
	if err := publish(t, c, "7"); !dead(err) {
		t.Errorf("400: err = %v, want dead", err)
	}
}

func TestPublishFindsASupplyThatTakesTheOrder(t *testing.T) {
	t.Parallel()
	s, c := newTest(t)
	s.AddOrder(wbOrder(1, testNow))
	big := wbOrder(2, testNow)
	big.CargoType = 3
	s.AddOrder(big)
	s.AddOrder(wbOrder(3, testNow))
	s.AddOrder(wbOrder(4, testNow))

	// A supply of the name is already open (made by an earlier run): it is used.
	first := createSupply(t, c, "ordersync")
	createSupply(t, c, "someone else's")
	c2, _ := New(c.cfg) // forgets what the first connector created
	for _, id := range []string{"1", "2", "3"} {
		if err := publish(t, c2, id); err != nil {
			t.Fatalf("order %s: %v", id, err)
		}
	}
	sup := s.Supplies()
	if len(sup) != 3 || sup[0].ID != first || !slices.Equal(sup[0].Orders, []int64{1, 3}) ||
		sup[2].Name != "ordersync" || !slices.Equal(sup[2].Orders, []int64{2}) || len(sup[1].Orders) != 0 {
		t.Fatalf("supplies %+v: want 1 and 3 in %s, 2 (another cargo type) in a new one", sup, first)
	}

	// The first supply is handed over to delivery: closed, it takes nothing more.
	deliver(t, c, first)
	if err := publish(t, c2, "4"); err != nil {
		t.Fatal(err)
	}
	sup = s.Supplies()
	if len(sup) != 4 || !slices.Equal(sup[3].Orders, []int64{4}) {
		t.Fatalf("supplies %+v: want order 4 in a fourth supply", sup)
	}
	for id, n := range s.Acknowledged() {
		if n != 1 {
			t.Errorf("order %d acknowledged %d times", id, n)
		}
	}
}

func createSupply(t *testing.T, c *Connector, name string) string {
	t.Helper()
	resp, err := c.http.R().SetBody(map[string]string{"name": name}).Post("/api/v3/supplies")
	if err != nil || resp.StatusCode() != 201 {
		t.Fatalf("create supply: %v %v", resp, err)
	}
	var out struct{ ID string }
	if err := json.Unmarshal(resp.Body(), &out); err != nil {
		t.Fatal(err)
	}
	return out.ID
}

func deliver(t *testing.T, c *Connector, supply string) {
	t.Helper()
	resp, err := c.http.R().Patch("/api/v3/supplies/" + supply + "/deliver")
	if err != nil || resp.StatusCode() != 204 {
		t.Fatalf("deliver: %v %v", resp, err)
	}
}
