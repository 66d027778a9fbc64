package ozon_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/ordersync/ordersync/connectors"
	"github.com/ordersync/ordersync/connectors/ozon"
	"github.com/ordersync/ordersync/internal/order"
	"github.com/ordersync/ordersync/internal/outbox"
	"github.com/ordersync/ordersync/internal/sim"
	"github.com/ordersync/ordersync/internal/sim/ozonsim"
)

var now = time.Date(2026, 9, 16, 7, 0, 0, 0, time.UTC)

const (
	clientID = "1234567"
	apiKey   = "11111111-2222-3333-4444-555555555555"
)

// newTest serves a simulator and returns it with a connector pointed at it.
func newTest(t *testing.T, opts ozonsim.Options, cfg ozon.Config) (*ozonsim.Ozon, *ozon.Connector) {
	t.Helper()
	s, c, _ := newTestConfig(t, opts, cfg)
	return s, c
}

// newTestConfig is newTest that also returns the connector's configuration, to
// start another connector on the same simulator (a restart).
func newTestConfig(t *testing.T, opts ozonsim.Options, cfg ozon.Config) (*ozonsim.Ozon, *ozon.Connector, ozon.Config) {
	t.Helper()
	opts.ClientID, opts.APIKey = clientID, apiKey
	if opts.Now == nil {
		opts.Now = func() time.Time { return now }
	}
	s := ozonsim.New(opts)
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	cfg.BaseURL = ts.URL
	cfg.ClientID = cmpOr(cfg.ClientID, clientID)
	cfg.APIKey = cmpOr(cfg.APIKey, apiKey)
	cfg.Warehouse = cmpOr(cfg.Warehouse, "WH1")
	if cfg.RatePerSecond == 0 {
		cfg.RatePerSecond = -1
	}
	c, err := ozon.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s, c, cfg
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// collect lists the window and returns the items and the number of pages.
func collect(t *testing.T, c *ozon.Connector, from, to time.Time) ([]connectors.Item, int, error) {
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

func mustCollect(t *testing.T, c *ozon.Connector, from, to time.Time) []connectors.Item {
	t.Helper()
	items, _, err := collect(t, c, from, to)
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

func posting(n int, at time.Time, products ...ozonsim.Product) ozonsim.Posting {
	if len(products) == 0 {
		products = []ozonsim.Product{{OfferID: "SKU-1", Name: "Чайник", Quantity: 2, Price: decimal.RequireFromString("1530")}}
	}
	return ozonsim.Posting{
		PostingNumber: "0570806" + string(rune('0'+n/10)) + string(rune('0'+n%10)) + "-0029-1",
		InProcessAt:   at,
		Products:      products,
	}
}

func seed(s *ozonsim.Ozon, n int) []string {
	var numbers []string
	for i := range n {
		p := posting(i, now.Add(-time.Duration(n-i)*time.Hour))
		s.AddPosting(p)
		numbers = append(numbers, p.PostingNumber)
	}
	return numbers
}

func TestListV4AllPagesByCursor(t *testing.T) {
	t.Parallel()
	s, c := newTest(t, ozonsim.Options{}, ozon.Config{PageSize: 2})
	numbers := seed(s, 7)
	items, pages, err := collect(t, c, now.Add(-72*time.Hour), now)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, it := range items {
		if it.Err != nil {
			t.Errorf("%s: %v", it.ID, it.Err)
		}
		got = append(got, it.ID)
	}
	if !slices.Equal(got, numbers) {
		t.Errorf("listed %v, want each of %v once, in order", got, numbers)
	}
	if pages != 4 {
		t.Errorf("fn saw %d pages, want 4 (the repeats of the other listings are left out)", pages)
	}
	unf := s.RequestsTo(ozonsim.PathUnfulfilledV4)
	if len(unf) != 4 {
		t.Fatalf("unfulfilled v4 requests = %d, want 4 pages of 2", len(unf))
	}
	var last struct {
		Cursor string `json:"cursor"`
		Limit  int    `json:"limit"`
	}
	if err := json.Unmarshal(unf[3].Body, &last); err != nil || last.Cursor == "" || last.Limit != 2 {
		t.Errorf("last page asked %s, want a cursor and limit 2", unf[3].Body)
	}
	if n := len(s.RequestsTo(ozonsim.PathUnfulfilledV3)) + len(s.RequestsTo(ozonsim.PathListV3)); n != 0 {
		t.Errorf("v4 connector made %d v3 requests", n)
	}

	o := byID(items)[numbers[0]].Order
	want := order.Order{
		Source: "ozon", ExternalID: numbers[0], Number: numbers[0], CreatedAt: now.Add(-7 * time.Hour),
		Warehouse: "WH1", Currency: "RUB", Comment: "Ozon order " + strings.TrimSuffix(numbers[0], "-1"),
		MarketplaceID: "570806000029",
		Lines:         []order.Line{{SKU: "SKU-1", Name: "Чайник", Quantity: decimal.NewFromInt(2), Price: decimal.NewFromInt(1530)}},
	}
	if o == nil || string(o.Canonical()) != string(want.Canonical()) {
		t.Errorf("mapped\n%s\nwant\n%s", o.Canonical(), want.Canonical())
	}
	if it := items[0]; it.Entity != "posting" || it.CreateKey("ozon") != "ozon:posting:"+numbers[0]+":create" {
		t.Errorf("key = %s", it.CreateKey("ozon"))
	}
}

func TestListV3AllPagesByOffset(t *testing.T) {
	t.Parallel()
	s, c := newTest(t, ozonsim.Options{}, ozon.Config{APIVersion: "v3", PageSize: 2})
	numbers := seed(s, 5)
	items := mustCollect(t, c, now.Add(-72*time.Hour), now)
	var got []string
	for _, it := range items {
		got = append(got, it.ID)
	}
	if !slices.Equal(got, numbers) {
		t.Errorf("listed %v, want %v", got, numbers)
	}
	var offsets []int
	for _, r := range s.RequestsTo(ozonsim.PathUnfulfilledV3) {
		var b struct{ Offset int }
		json.Unmarshal(r.Body, &b)
		offsets = append(offsets, b.Offset)
	}
	if !slices.Equal(offsets, []int{0, 2, 4}) {
		t.Errorf("unfulfilled v3 offsets %v, want [0 2 4]", offsets)
	}
	if n := len(s.RequestsTo(ozonsim.PathUnfulfilledV4)) + len(s.RequestsTo(ozonsim.PathListV4)); n != 0 {
		t.Errorf("v3 connector made %d v4 requests", n)
	}
}

// The unfulfilled list filters on the cutoff only: postings it cannot see — no cutoff
// yet, or delivered while the connector was down — come from the list of postings
// created in the window.
func TestListSeesWhatTheUnfulfilledListCannot(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"v4", "v3"} {
		s, c := newTest(t, ozonsim.Options{}, ozon.Config{APIVersion: v})
		noCutoff := posting(1, now.Add(-time.Hour))
		noCutoff.NoCutoff = true
		delivered := posting(2, now.Add(-5*24*time.Hour))
		delivered.Status = "delivered"
		s.AddPosting(noCutoff)
		s.AddPosting(delivered)
		got := byID(mustCollect(t, c, now.Add(-8*24*time.Hour), now))
		for _, pn := range []string{noCutoff.PostingNumber, delivered.PostingNumber} {
			if it, ok := got[pn]; !ok || it.Order == nil {
				t.Errorf("%s: %s not listed as an order: %+v", v, pn, it)
			}
		}
	}
}

func TestRetryAfterHonoured(t *testing.T) {
	t.Parallel()
	s, c := newTest(t, ozonsim.Options{}, ozon.Config{})
	seed(s, 1)
	s.Faults.Add(1, sim.Fault{Status: http.StatusTooManyRequests, RetryAfter: time.Second})
	start := time.Now()
	items := mustCollect(t, c, now.Add(-72*time.Hour), now)
	if elapsed := time.Since(start); elapsed < time.Second {
		t.Errorf("listing took %s: the 1s Retry-After was not waited for", elapsed)
	}
	if len(items) != 1 {
		t.Errorf("items = %d, want 1", len(items))
	}
	reqs := s.RequestsTo(ozonsim.PathUnfulfilledV4)
	if len(reqs) != 2 || reqs[0].Status != 429 || reqs[1].Status != 200 {
		t.Errorf("unfulfilled requests %+v, want a 429 then a 200", reqs)
	}
}

func TestRateLimitedTooLongFailsTheListing(t *testing.T) {
	t.Parallel()
	s, c := newTest(t, ozonsim.Options{}, ozon.Config{})
	s.Faults.Add(10, sim.Fault{Status: http.StatusServiceUnavailable})
	_, _, err := collect(t, c, now.Add(-time.Hour), now)
	if err == nil || !strings.Contains(err.Error(), "503") {
		t.Errorf("List after repeated 503 = %v, want an error naming 503", err)
	}
	if n := len(s.Requests()); n != 4 {
		t.Errorf("%d requests, want the first page and its 3 retries", n)
	}
}

func TestCancelledPostings(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"v4", "v3"} {
		s, c := newTest(t, ozonsim.Options{}, ozon.Config{APIVersion: v})
		old := posting(1, now.Add(-20*24*time.Hour)) // created long before the window
		old.StatusChangedAt = now.Add(-20 * 24 * time.Hour)
		fresh := posting(2, now.Add(-2*time.Hour))
		s.AddPosting(old)
		s.AddPosting(fresh)
		if err := s.Cancel(old.PostingNumber, "Покупатель передумал", "Клиент"); err != nil {
			t.Fatal(err)
		}
		if err := s.Cancel(fresh.PostingNumber, "", ""); err != nil {
			t.Fatal(err)
		}
		got := byID(mustCollect(t, c, now.Add(-72*time.Hour), now.Add(time.Minute)))
		o := got[old.PostingNumber]
		if !o.Cancelled || o.CancelReason != "Покупатель передумал (initiator: Клиент)" || o.Order == nil {
			t.Errorf("%s: old posting cancelled in the window: %+v", v, o)
		}
		if o.CancelKey("ozon") != "ozon:posting:"+old.PostingNumber+":cancel" {
			t.Errorf("cancel key %s", o.CancelKey("ozon"))
		}
		if f := got[fresh.PostingNumber]; !f.Cancelled || f.CancelReason != "cancelled at Ozon" {
			t.Errorf("%s: fresh cancelled posting: %+v", v, f)
		}
	}
}

// Prices parse exactly whatever the shape: "1530.0000" (v3), {"amount": "0.1"} (v4,
// as the published types show) and {"amount": 0.1} (a JSON number).
func TestPricesExact(t *testing.T) {
	t.Parallel()
	cases := []struct {
		version  string
		asNumber bool
	}{{"v3", false}, {"v4", false}, {"v4", true}}
	for _, tc := range cases {
		s, c := newTest(t, ozonsim.Options{AmountAsNumber: tc.asNumber}, ozon.Config{APIVersion: tc.version})
		p := posting(1, now.Add(-time.Hour),
			ozonsim.Product{OfferID: "A", Quantity: 1, Price: decimal.RequireFromString("0.1")},
			ozonsim.Product{OfferID: "B", Quantity: 1, Price: decimal.RequireFromString("0.2")},
			ozonsim.Product{OfferID: "C", Quantity: 3, Price: decimal.RequireFromString("1530.0000")},
		)
		s.AddPosting(p)
		check := func(how string, o *order.Order) {
			t.Helper()
			if o == nil {
				t.Fatalf("%s %s: no order", tc.version, how)
			}
			for i, want := range []string{"0.1", "0.2", "1530"} {
				if !o.Lines[i].Price.Equal(decimal.RequireFromString(want)) {
					t.Errorf("%s number %v %s: lines[%d].price = %s, want exactly %s", tc.version, tc.asNumber, how, i, o.Lines[i].Price, want)
				}
			}
			if sum := o.Lines[0].Amount().Add(o.Lines[1].Amount()); !sum.Equal(decimal.RequireFromString("0.3")) {
				t.Errorf("%s: 0.1 + 0.2 = %s", how, sum)
			}
			if !o.LinesTotal().Equal(decimal.RequireFromString("4590.3")) {
				t.Errorf("%s: total %s, want 4590.3", how, o.LinesTotal())
			}
		}
		items := mustCollect(t, c, now.Add(-time.Hour*2), now)
		check("listed", items[0].Order)
		it, err := c.Get(context.Background(), p.PostingNumber)
		if err != nil {
			t.Fatal(err)
		}
		check("got", it.Order)
		if string(it.Order.Canonical()) != string(items[0].Order.Canonical()) {
			t.Errorf("%s: Get and List disagree:\n%s\n%s", tc.version, it.Order.Canonical(), items[0].Order.Canonical())
		}
	}
}

func TestBadPostingFailsOnlyItself(t *testing.T) {
	t.Parallel()
	s, c := newTest(t, ozonsim.Options{}, ozon.Config{PageSize: 100})
	at := now.Add(-time.Hour)
	good := posting(1, at)
	s.AddPosting(good)
	bad := map[string]struct {
		patch map[string]json.RawMessage
		field string
	}{
		"no in_process_at":  {map[string]json.RawMessage{"in_process_at": nil}, "in_process_at"},
		"unknown status":    {map[string]json.RawMessage{"status": json.RawMessage(`"teleported"`)}, "status"},
		"no offer_id":       {map[string]json.RawMessage{"products": json.RawMessage(`[{"name":"x","quantity":1,"price":"10","currency_code":"RUB"}]`)}, "products[0].offer_id"},
		"bad price":         {map[string]json.RawMessage{"products": json.RawMessage(`[{"offer_id":"A","quantity":1,"price":"ten","currency_code":"RUB"}]`)}, "products[0].price"},
		"two currencies":    {map[string]json.RawMessage{"products": json.RawMessage(`[{"offer_id":"A","quantity":1,"price":"1","currency_code":"RUB"},{"offer_id":"B","quantity":1,"price":"1","currency_code":"KZT"}]`)}, "products[1].currency_code"},
		"no products":       {map[string]json.RawMessage{"products": json.RawMessage(`[]`)}, "products"},
		"status not a text": {map[string]json.RawMessage{"status": json.RawMessage(`7`)}, "status"},
	}
	n := 10
	numberOf := map[string]string{}
	for name, b := range bad {
		p := posting(n, at)
		p.Patch = b.patch
		s.AddPosting(p)
		numberOf[name] = p.PostingNumber
		n++
	}
	unreadable := posting(n, at)
	unreadable.Patch = map[string]json.RawMessage{"posting_number": json.RawMessage(`12345`)}
	s.AddPosting(unreadable)

	items := mustCollect(t, c, now.Add(-72*time.Hour), now)
	got := byID(items)
	if it := got[good.PostingNumber]; it.Err != nil || it.Order == nil {
		t.Errorf("the good posting: %+v", it)
	}
	for name, b := range bad {
		it := got[numberOf[name]]
		if it.Err == nil || it.Order != nil || len(it.Raw) == 0 {
			t.Errorf("%s: %+v, want an Err with the raw posting", name, it)
			continue
		}
		var ve *order.ValidationError
		if !errors.As(it.Err, &ve) || ve.Problems[0].Field != b.field {
			t.Errorf("%s: Err %v, want one naming %s", name, it.Err, b.field)
		}
	}
	it, ok := got[""]
	if !ok || it.Err == nil || !strings.Contains(it.Err.Error(), "posting_number") || !strings.Contains(string(it.Raw), "12345") {
		t.Errorf("unreadable posting number: %+v", it)
	}
	if len(items) != 2+len(bad) {
		t.Errorf("items = %d, want %d", len(items), 2+len(bad))
	}
}

func TestMalformedPageFailsTheListing(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"v4", "v3"} {
		s, c := newTest(t, ozonsim.Options{}, ozon.Config{APIVersion: v, PageSize: 2})
		seed(s, 5)
		s.Faults.Add(1, sim.Fault{Kind: sim.Malformed, After: 1})
		items, pages, err := collect(t, c, now.Add(-72*time.Hour), now)
		if err == nil || !strings.Contains(err.Error(), "malformed page") || !strings.Contains(err.Error(), "page 2") {
			t.Errorf("%s: List = %v, want an error about malformed page 2", v, err)
		}
		if pages != 1 || len(items) != 2 {
			t.Errorf("%s: before the failure fn saw %d pages, %d items; want the first page only", v, pages, len(items))
		}
	}
}

func TestAuthFailureNamesTheKey(t *testing.T) {
	t.Parallel()
	for _, status := range []int{401, 403, 404} {
		s, c := newTest(t, ozonsim.Options{BadKeyStatus: status}, ozon.Config{APIKey: "wrong"})
		_, _, err := collect(t, c, now.Add(-time.Hour), now)
		var ae *connectors.AuthError
		if !errors.As(err, &ae) || ae.Key != "connectors.ozon.api_key" || ae.Status != status || ae.Connector != "ozon" {
			t.Errorf("HTTP %d: List = %v, want an AuthError naming connectors.ozon.api_key", status, err)
			continue
		}
		if !strings.Contains(err.Error(), "connectors.ozon.api_key") || strings.Contains(err.Error(), "wrong") {
			t.Errorf("HTTP %d: message %q should name the key, never show it", status, err)
		}
		if s.AuthFailures() != 1 {
			t.Errorf("HTTP %d: %d requests refused, want 1 (auth failures are not retried)", status, s.AuthFailures())
		}
		if _, err := c.Get(context.Background(), "1-1-1"); !errors.As(err, &ae) {
			t.Errorf("HTTP %d: Get = %v, want an AuthError, not ErrNotFound", status, err)
		}
	}
	_, c := newTest(t, ozonsim.Options{}, ozon.Config{ClientID: "not-a-number"})
	var ae *connectors.AuthError
	if _, _, err := collect(t, c, now.Add(-time.Hour), now); !errors.As(err, &ae) || ae.Key != "connectors.ozon.client_id" {
		t.Errorf("bad Client-Id: %v, want an AuthError naming connectors.ozon.client_id", err)
	}
}

func TestGet(t *testing.T) {
	t.Parallel()
	s, c := newTest(t, ozonsim.Options{}, ozon.Config{})
	p := posting(3, now.Add(-time.Hour))
	p.Customer = &ozonsim.Customer{Name: "Иван Петров"}
	s.AddPosting(p)
	it, err := c.Get(context.Background(), p.PostingNumber)
	if err != nil {
		t.Fatal(err)
	}
	if it.ID != p.PostingNumber || it.Entity != "posting" || it.Order == nil || it.Order.Customer.Name != "Иван Петров" ||
		!it.Order.Lines[0].Price.Equal(decimal.NewFromInt(1530)) {
		t.Errorf("Get = %+v", it)
	}
	if _, err := c.Get(context.Background(), "99999999-0001-1"); !errors.Is(err, connectors.ErrNotFound) {
		t.Errorf("Get of an unknown posting = %v, want ErrNotFound", err)
	}
	if err := s.Cancel(p.PostingNumber, "нет в наличии", "Продавец"); err != nil {
		t.Fatal(err)
	}
	if it, err := c.Get(context.Background(), p.PostingNumber); err != nil || !it.Cancelled {
		t.Errorf("Get of a cancelled posting = %+v, %v", it, err)
	}
}

func record(t *testing.T, c *ozon.Connector, pn string) outbox.Record {
	t.Helper()
	it, err := c.Get(context.Background(), pn)
	if err != nil || it.Order == nil {
		t.Fatalf("Get %s: %+v %v", pn, it, err)
	}
	data, _ := json.Marshal(map[string]any{
		"order": json.RawMessage(it.Order.Canonical()),
		"onec":  map[string]string{"ref": "7c7f…", "number": "ОС-000123"},
	})
	return outbox.Record{ID: 1, EventID: "e1", Destination: "ozon", Type: outbox.OrderCreated,
		AggregateType: "order", AggregateID: order.AggregateOfKey(it.CreateKey("ozon")), Sequence: 1, Data: data}
}

func TestPublisherShipsOnceWhenDeliveredTwice(t *testing.T) {
	t.Parallel()
	s, c := newTest(t, ozonsim.Options{}, ozon.Config{Acknowledge: true})
	p := posting(4, now.Add(-time.Hour),
		ozonsim.Product{SKU: 501, OfferID: "A", Quantity: 1, Price: decimal.NewFromInt(100)},
		ozonsim.Product{SKU: 502, OfferID: "B", Quantity: 2, Price: decimal.NewFromInt(50)},
	)
	s.AddPosting(p)
	r := record(t, c, p.PostingNumber)
	pub := c.Publisher()
	for i := range 2 {
		if err := pub.Publish(context.Background(), r); err != nil {
			t.Fatalf("delivery %d: %v", i+1, err)
		}
	}
	if got := s.Shipped(p.PostingNumber); got != 1 {
		t.Errorf("shipped %d times, want 1", got)
	}
	if got := len(s.RequestsTo(ozonsim.PathShip)); got != 1 {
		t.Errorf("ship requests = %d, want 1: the second delivery must see the status and not call", got)
	}
	if got, _ := s.Posting(p.PostingNumber); got.Status != "awaiting_deliver" {
		t.Errorf("status %s, want awaiting_deliver", got.Status)
	}
}

// loseShipAnswer passes requests on and loses the answer of the first ship: Ozon
// shipped, the connector does not know.
type loseShipAnswer struct{ lost atomic.Bool }

func (l *loseShipAnswer) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err == nil && r.URL.Path == ozonsim.PathShip && l.lost.CompareAndSwap(false, true) {
		resp.Body.Close()
		return nil, errors.New("connection reset by peer")
	}
	return resp, err
}

func TestPublisherLostAnswerShipsOnce(t *testing.T) {
	t.Parallel()
	s, c := newTest(t, ozonsim.Options{}, ozon.Config{Acknowledge: true, Transport: &loseShipAnswer{}})
	p := posting(5, now.Add(-time.Hour))
	s.AddPosting(p)
	r := record(t, c, p.PostingNumber)
	err := c.Publisher().Publish(context.Background(), r)
	var de *outbox.DeliveryError
	if err == nil || errors.As(err, &de) && de.Dead {
		t.Fatalf("first delivery = %v, want a retryable error", err)
	}
	if err := c.Publisher().Publish(context.Background(), r); err != nil {
		t.Fatalf("second delivery: %v", err)
	}
	if s.Shipped(p.PostingNumber) != 1 || len(s.RequestsTo(ozonsim.PathShip)) != 1 {
		t.Errorf("shipped %d, ship requests %d; want 1 and 1", s.Shipped(p.PostingNumber), len(s.RequestsTo(ozonsim.PathShip)))
	}
}

func TestPublisherErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	s, c := newTest(t, ozonsim.Options{}, ozon.Config{Acknowledge: true})
	p := posting(6, now.Add(-time.Hour))
	s.AddPosting(p)
	r := record(t, c, p.PostingNumber)

	s.Faults.Add(1, sim.Fault{Op: ozonsim.PathShip, Status: http.StatusTooManyRequests, RetryAfter: 7 * time.Second})
	var de *outbox.DeliveryError
	if err := c.Publisher().Publish(ctx, r); !errors.As(err, &de) || de.RetryAfter != 7*time.Second || de.Dead {
		t.Errorf("429 on ship = %v, want a DeliveryError with RetryAfter 7s", err)
	}
	s.Faults.Add(1, sim.Fault{Op: ozonsim.PathShip, Status: http.StatusBadRequest})
	if err := c.Publisher().Publish(ctx, r); !errors.As(err, &de) || !de.Dead {
		t.Errorf("400 on ship = %v, want Dead", err)
	}
	if s.Shipped(p.PostingNumber) != 0 {
		t.Fatal("shipped despite the failures")
	}

	gone := r
	gone.AggregateID = "ozon:posting:99999999-0001-1"
	if err := c.Publisher().Publish(ctx, gone); !errors.As(err, &de) || !de.Dead {
		t.Errorf("unknown posting = %v, want Dead", err)
	}

	needs := posting(7, now.Add(-time.Hour))
	needs.Patch = map[string]json.RawMessage{"requirements": json.RawMessage(`{"products_requiring_mandatory_mark":["101"]}`)}
	s.AddPosting(needs)
	before := len(s.RequestsTo(ozonsim.PathShip))
	if err := c.Publisher().Publish(ctx, record(t, c, needs.PostingNumber)); !errors.As(err, &de) || !de.Dead ||
		!strings.Contains(err.Error(), "products_requiring_mandatory_mark") {
		t.Errorf("posting needing marks = %v, want Dead naming the requirement", err)
	}
	if len(s.RequestsTo(ozonsim.PathShip)) != before {
		t.Error("a posting Ozon would refuse was sent to ship")
	}

	cancelled := posting(8, now.Add(-time.Hour))
	s.AddPosting(cancelled)
	rc := record(t, c, cancelled.PostingNumber)
	s.Cancel(cancelled.PostingNumber, "", "")
	if err := c.Publisher().Publish(ctx, rc); err != nil {
		t.Errorf("cancelled posting = %v, want nothing to do", err)
	}

	early := posting(9, now.Add(-time.Hour))
	early.Status = "awaiting_approve"
	s.AddPosting(early)
	if err := c.Publisher().Publish(ctx, record(t, c, early.PostingNumber)); err == nil || errors.As(err, &de) && de.Dead {
		t.Errorf("posting not yet released for packing = %v, want a retryable error", err)
	}
}

func TestPublisherLeavesOthersAlone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, off := newTest(t, ozonsim.Options{}, ozon.Config{})
	p := posting(1, now.Add(-time.Hour))
	s.AddPosting(p)
	r := record(t, off, p.PostingNumber)
	before := len(s.Requests())
	if err := off.Publisher().Publish(ctx, r); err != nil {
		t.Errorf("acknowledge off: %v", err)
	}
	if off.Acknowledges() || len(s.Requests()) != before {
		t.Error("with acknowledge off the publisher called Ozon")
	}

	s2, on := newTest(t, ozonsim.Options{}, ozon.Config{Acknowledge: true})
	for _, rec := range []outbox.Record{
		{Type: outbox.OrderCreated, AggregateID: "kaspi:order:512344101", Data: json.RawMessage(`{}`)},
		{Type: outbox.OrderCancelled, AggregateID: "ozon:posting:" + p.PostingNumber, Data: json.RawMessage(`{}`)},
	} {
		if err := on.Publisher().Publish(ctx, rec); err != nil {
			t.Errorf("%s %s: %v", rec.Type, rec.AggregateID, err)
		}
	}
	if n := len(s2.Requests()); n != 0 {
		t.Errorf("%d requests for records that are not Ozon order.created", n)
	}
}

func TestNewChecksTheConfiguration(t *testing.T) {
	t.Parallel()
	cases := []struct {
		cfg  ozon.Config
		want string
	}{
		{ozon.Config{APIKey: "k"}, "connectors.ozon.client_id"},
		{ozon.Config{ClientID: "1"}, "connectors.ozon.api_key"},
		{ozon.Config{ClientID: "1", APIKey: "k", APIVersion: "v5"}, "connectors.ozon.api_version"},
		{ozon.Config{ClientID: "1", APIKey: "k", PageSize: 101}, "connectors.ozon.page_size"},
		{ozon.Config{ClientID: "1", APIKey: "k", APIVersion: "v3", PageSize: 1001}, "connectors.ozon.page_size"},
		{ozon.Config{ClientID: "1", APIKey: "k", RatePerSecond: 60}, "connectors.ozon.rate_per_second"},
	}
	for _, c := range cases {
		_, err := ozon.New(c.cfg)
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("New(%+v) = %v, want an error naming %s", c.cfg, err, c.want)
		}
	}
	c, err := ozon.New(ozon.Config{ClientID: "1", APIKey: "k", APIVersion: "V3", PageSize: 1000})
	if err != nil || c.Name() != "ozon" || c.APIVersion() != "v3" {
		t.Errorf("New v3: %v", err)
	}
}

// TestSecondAccountSource: an account with a name of its own writes it as the
// orders' source and the first part of their keys, and acknowledges its own
// postings only.
func TestSecondAccountSource(t *testing.T) {
	t.Parallel()
	s, c := newTest(t, ozonsim.Options{}, ozon.Config{Source: "ozon-ip"})
	p := posting(4, now.Add(-time.Hour))
	s.AddPosting(p)
	it, err := c.Get(context.Background(), p.PostingNumber)
	if err != nil {
		t.Fatal(err)
	}
	if c.Name() != "ozon-ip" || it.Order.Source != "ozon-ip" || it.CreateKey(c.Name()) != "ozon-ip:posting:"+p.PostingNumber+":create" {
		t.Errorf("Name %q, source %q, key %q", c.Name(), it.Order.Source, it.CreateKey(c.Name()))
	}
	_, first := newTest(t, ozonsim.Options{}, ozon.Config{})
	if first.Name() != "ozon" {
		t.Errorf("first account's Name = %q, want ozon", first.Name())
	}
}
