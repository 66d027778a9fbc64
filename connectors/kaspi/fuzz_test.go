package kaspi

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/ordersync/ordersync/connectors"
	"github.com/ordersync/ordersync/internal/order"
	"github.com/ordersync/ordersync/internal/sim/kaspisim"
)

// notFound answers every request 404: the fuzzed page is all the connector reads.
type notFound struct{}

func (notFound) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: http.StatusNotFound, Header: http.Header{"Content-Type": {contentType}},
		Body: io.NopCloser(strings.NewReader(`{"errors":[{"title":"not found"}]}`)), Request: r}, nil
}

// simPage is a page of GET /orders as the simulator serves it.
func simPage(tb testing.TB, orders ...kaspisim.Order) []byte {
	tb.Helper()
	s := kaspisim.New(kaspisim.Options{Token: "t"})
	for _, o := range orders {
		if err := s.AddOrder(o); err != nil {
			tb.Fatal(err)
		}
	}
	now := time.Now()
	q := url.Values{paramPage: {"0"}, paramSize: {"100"}, paramState: {StateNew}, paramInclude: {includeEntries},
		paramFrom: {strconv.FormatInt(now.Add(-10*24*time.Hour).UnixMilli(), 10)}, paramTo: {strconv.FormatInt(now.UnixMilli(), 10)}}
	req := httptest.NewRequest(http.MethodGet, kaspisim.Prefix+pathOrders+"?"+q.Encode(), nil)
	req.Header.Set("X-Auth-Token", "t")
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		tb.Fatalf("simulator: %d %s", rec.Code, rec.Body)
	}
	return rec.Body.Bytes()
}

func fuzzSeedOrder(code string, at time.Time) kaspisim.Order {
	return kaspisim.Order{Code: code, CreationDate: at,
		Customer: kaspisim.Customer{ID: "c" + code, FirstName: "Даниела", LastName: "Муталидзе", CellPhone: "7066828008"},
		Entries: []kaspisim.Entry{{OfferCode: "SKU-" + code, Name: "Линейка", Quantity: decimal.NewFromInt(2),
			BasePrice: decimal.RequireFromString("1000.5")}}}
}

// checkItem asserts what every mapped item must satisfy: an id that can stand in
// a key, an error that names a field, and an order that validates and survives its
// canonical form.
func checkItem(t *testing.T, it connectors.Item) {
	t.Helper()
	if it.ID != "" && order.CheckKeyID(it.ID) != "" {
		t.Fatalf("item id %q cannot stand in a key: %s", it.ID, order.CheckKeyID(it.ID))
	}
	if it.Err != nil {
		var ve *order.ValidationError
		if !errors.As(it.Err, &ve) {
			t.Fatalf("item error %T %v names no field", it.Err, it.Err)
		}
		return
	}
	if it.Cancelled || it.Order == nil {
		return
	}
	o := *it.Order
	if err := o.Validate(); err != nil {
		t.Fatalf("a mapped order does not validate: %v\n%+v", err, o)
	}
	c := o.Canonical()
	back, err := order.Parse(c)
	if err != nil {
		t.Fatalf("canonical form %s does not parse: %v", c, err)
	}
	if !bytes.Equal(back.Canonical(), c) {
		t.Fatalf("canonical form changed on a round trip: %s", c)
	}
}

func FuzzMapPage(f *testing.F) {
	c, err := New(Config{BaseURL: "http://kaspi.invalid" + kaspisim.Prefix, Token: "t", Warehouse: "WH1",
		RatePerSecond: -1, Transport: notFound{}})
	if err != nil {
		f.Fatal(err)
	}
	now := time.Now().Add(-time.Hour)
	f.Add(simPage(f, fuzzSeedOrder("5001", now), fuzzSeedOrder("5002", now.Add(time.Minute))))
	cancelled := fuzzSeedOrder("5003", now)
	cancelled.Status, cancelled.CancellationReason = StatusCancelled, "BUYER_CANCELLATION"
	f.Add(simPage(f, cancelled))
	weighed := fuzzSeedOrder("5004", now)
	total := decimal.RequireFromString("1234.56")
	weighed.Entries[0].Quantity, weighed.Entries[0].TotalPrice = decimal.RequireFromString("1.5"), &total
	f.Add(simPage(f, weighed))
	nul := fuzzSeedOrder("5005", now)
	nul.Customer.FirstName = "Ив\x00ан"
	f.Add(simPage(f, nul))
	f.Add([]byte(`{"data":[{"type":"orders","id":"x","attributes":{"code":"1","state":"NEW","status":"APPROVED_BY_BANK",` +
		`"creationDate":253402300800000}}],"included":[]}`))
	f.Add([]byte(`{"data":[{"type":"orders","id":"x","attributes":{"code":"1","Code":"2","state":"NEW"}}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		pg, err := decodePage(body)
		if err != nil {
			return
		}
		items, err := c.mapPage(context.Background(), pg, false)
		if err != nil {
			return // only a failed request for entries ends a page
		}
		for _, it := range items {
			checkItem(t, it)
		}
	})
}
