package ozonsim

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/ordersync/ordersync/internal/sim"
)

var ozonTestNow = time.Date(2026, 9, 16, 7, 0, 0, 0, time.UTC)

const (
	ozonTestClient = "123456"
	ozonTestKey    = "00000000-aaaa-bbbb-cccc-000000000001"
)

func newOzonTest(t *testing.T, opts Options) (*Ozon, string) {
	t.Helper()
	if opts.APIKey == "" {
		opts.ClientID, opts.APIKey = ozonTestClient, ozonTestKey
	}
	if opts.Now == nil {
		opts.Now = func() time.Time { return ozonTestNow }
	}
	s := New(opts)
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return s, ts.URL
}

type ozonReply struct {
	status int
	header http.Header
	body   []byte
}

// ozonCall posts body with the test credentials; headers replace them when given
// as name, value pairs ("" removes one).
func ozonCall(t *testing.T, base, path, body string, headers ...string) ozonReply {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Client-Id", ozonTestClient)
	req.Header.Set("Api-Key", ozonTestKey)
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i+1] == "" {
			req.Header.Del(headers[i])
		} else {
			req.Header.Set(headers[i], headers[i+1])
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return ozonReply{status: resp.StatusCode, header: resp.Header, body: b}
}

func ozonDecodeReply(t *testing.T, r ozonReply, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(r.body))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
}

func ozonErrorCode(t *testing.T, r ozonReply) (int, string) {
	t.Helper()
	var e struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Details []any  `json:"details"`
	}
	if err := json.Unmarshal(r.body, &e); err != nil || e.Details == nil {
		t.Fatalf("not Ozon's error body: %s", r.body)
	}
	return e.Code, e.Message
}

func ozonSeed(s *Ozon, n int) {
	for i := range n {
		s.AddPosting(Posting{
			PostingNumber: "1000000" + string(rune('0'+i)) + "-0001-1",
			InProcessAt:   ozonTestNow.Add(-time.Duration(10-i) * time.Hour),
			Products: []Product{{
				OfferID: "SKU-" + string(rune('A'+i)), Name: "Товар", Quantity: 1 + i,
				Price: decimal.RequireFromString("1530.5"),
			}},
		})
	}
}

func TestOzonAuth(t *testing.T) {
	t.Parallel()
	s, base := newOzonTest(t, Options{})
	body := `{"posting_number":"x"}`
	cases := []struct {
		name    string
		headers []string
		status  int
		code    int
	}{
		{"no headers", []string{"Client-Id", "", "Api-Key", ""}, 401, 16},
		{"client id not a number", []string{"Client-Id", "abc"}, 400, 3},
		{"wrong key", []string{"Api-Key", "wrong"}, 404, 5},
		{"wrong client", []string{"Client-Id", "999"}, 404, 5},
	}
	for _, c := range cases {
		r := ozonCall(t, base, PathGet, body, c.headers...)
		code, msg := ozonErrorCode(t, r)
		if r.status != c.status || code != c.code {
			t.Errorf("%s: got %d code %d (%s), want %d code %d", c.name, r.status, code, msg, c.status, c.code)
		}
	}
	if got := s.AuthFailures(); got != len(cases) {
		t.Errorf("AuthFailures = %d, want %d", got, len(cases))
	}

	_, base401 := newOzonTest(t, Options{ClientID: ozonTestClient, APIKey: ozonTestKey, BadKeyStatus: 401})
	r := ozonCall(t, base401, PathGet, body, "Api-Key", "wrong")
	if code, _ := ozonErrorCode(t, r); r.status != 401 || code != 5 {
		t.Errorf("BadKeyStatus 401: got %d code %d", r.status, code)
	}
	if r := ozonCall(t, base, PathGet, body); r.status != http.StatusNotFound {
		t.Errorf("authorised get of an unknown posting: %d %s", r.status, r.body)
	}
}

func TestOzonListV3PagesAndPrices(t *testing.T) {
	t.Parallel()
	s, base := newOzonTest(t, Options{})
	ozonSeed(s, 5)
	filter := `{"since":"2026-09-15T00:00:00Z","to":"2026-09-17T00:00:00Z"}`
	var numbers []string
	for offset := 0; ; offset += 2 {
		r := ozonCall(t, base, PathListV3, `{"dir":"ASC","filter":`+filter+`,"limit":2,"offset":`+strconv.Itoa(offset)+`}`)
		if r.status != 200 {
			t.Fatalf("offset %d: %d %s", offset, r.status, r.body)
		}
		var pg struct {
			Result struct {
				Postings []struct {
					PostingNumber string `json:"posting_number"`
					Products      []struct {
						Price        any    `json:"price"`
						CurrencyCode string `json:"currency_code"`
					} `json:"products"`
				} `json:"postings"`
				HasNext bool `json:"has_next"`
			} `json:"result"`
		}
		ozonDecodeReply(t, r, &pg)
		for _, p := range pg.Result.Postings {
			numbers = append(numbers, p.PostingNumber)
			if got := p.Products[0].Price; got != "1530.5000" || p.Products[0].CurrencyCode != "RUB" {
				t.Errorf("v3 price = %#v %q, want the string \"1530.5000\" and RUB", got, p.Products[0].CurrencyCode)
			}
		}
		if !pg.Result.HasNext {
			break
		}
	}
	if len(numbers) != 5 || numbers[0] != "10000000-0001-1" || numbers[4] != "10000004-0001-1" {
		t.Errorf("v3 pages gave %v, want the 5 postings by in_process_at", numbers)
	}
}

func TestOzonListV4CursorAndPrices(t *testing.T) {
	t.Parallel()
	for _, asNumber := range []bool{false, true} {
		s, base := newOzonTest(t, Options{AmountAsNumber: asNumber})
		ozonSeed(s, 5)
		cursor, pages := "", 0
		var numbers []string
		for {
			pages++
			r := ozonCall(t, base, PathUnfulfilledV4, `{"filter":{"cutoff_from":"2026-09-15T00:00:00Z","cutoff_to":"2026-10-15T00:00:00Z"},"limit":2,"sort_dir":"ASC","cursor":"`+cursor+`"}`)
			if r.status != 200 {
				t.Fatalf("page %d: %d %s", pages, r.status, r.body)
			}
			var pg struct {
				Postings []struct {
					PostingNumber string `json:"posting_number"`
					Products      []struct {
						Price struct {
							Amount   any    `json:"amount"`
							Currency string `json:"currency"`
						} `json:"price"`
						CurrencyCode *string `json:"currency_code"`
					} `json:"products"`
				} `json:"postings"`
				Cursor  string `json:"cursor"`
				HasNext bool   `json:"has_next"`
				Count   int    `json:"count"`
			}
			ozonDecodeReply(t, r, &pg)
			for _, p := range pg.Postings {
				numbers = append(numbers, p.PostingNumber)
				pr := p.Products[0]
				want := any("1530.5")
				if asNumber {
					want = json.Number("1530.5")
				}
				if pr.Price.Amount != want || pr.Price.Currency != "RUB" || pr.CurrencyCode != nil {
					t.Errorf("v4 price = %#v %q (currency_code %v), want amount %#v RUB", pr.Price.Amount, pr.Price.Currency, pr.CurrencyCode, want)
				}
			}
			if pg.Count != 5 {
				t.Errorf("count = %d, want 5", pg.Count)
			}
			if !pg.HasNext {
				break
			}
			cursor = pg.Cursor
		}
		if pages != 3 || len(numbers) != 5 {
			t.Errorf("amount as number %v: %d pages gave %v, want 3 pages of the 5 postings", asNumber, pages, numbers)
		}
	}
}

func TestOzonRequestsAreStrict(t *testing.T) {
	t.Parallel()
	_, base := newOzonTest(t, Options{})
	cases := []struct{ name, path, body string }{
		{"v3 offset on v4", PathListV4, `{"filter":{"since":"2026-09-15T00:00:00Z","to":"2026-09-16T00:00:00Z"},"limit":10,"offset":0}`},
		{"v3 status on v4", PathListV4, `{"filter":{"since":"2026-09-15T00:00:00Z","to":"2026-09-16T00:00:00Z","status":"cancelled"},"limit":10}`},
		{"v4 cursor on v3", PathListV3, `{"filter":{"since":"2026-09-15T00:00:00Z","to":"2026-09-16T00:00:00Z"},"limit":10,"offset":0,"cursor":""}`},
		{"v4 limit above 100", PathListV4, `{"filter":{"since":"2026-09-15T00:00:00Z","to":"2026-09-16T00:00:00Z"},"limit":101}`},
		{"v3 without offset", PathListV3, `{"filter":{"since":"2026-09-15T00:00:00Z","to":"2026-09-16T00:00:00Z"},"limit":10}`},
		{"period over a year", PathListV3, `{"filter":{"since":"2025-01-01T00:00:00Z","to":"2026-09-16T00:00:00Z"},"limit":10,"offset":0}`},
		{"unfulfilled without cutoff", PathUnfulfilledV4, `{"filter":{},"limit":10}`},
		{"unfulfilled with both filters", PathUnfulfilledV3, `{"filter":{"cutoff_from":"2026-09-15T00:00:00Z","cutoff_to":"2026-09-16T00:00:00Z","delivering_date_from":"2026-09-15T00:00:00Z","delivering_date_to":"2026-09-16T00:00:00Z"},"limit":10,"offset":0}`},
		{"unfulfilled with since", PathUnfulfilledV4, `{"filter":{"since":"2026-09-15T00:00:00Z","to":"2026-09-16T00:00:00Z"},"limit":10}`},
		{"bad cursor", PathListV4, `{"filter":{"since":"2026-09-15T00:00:00Z","to":"2026-09-16T00:00:00Z"},"limit":10,"cursor":"%%%"}`},
	}
	for _, c := range cases {
		r := ozonCall(t, base, c.path, c.body)
		if code, _ := ozonErrorCode(t, r); r.status != 400 || code != 3 {
			t.Errorf("%s: got %d code %d: %s", c.name, r.status, code, r.body)
		}
	}
	if r := ozonCall(t, base, "/v1/nothing", `{}`); r.status != 404 {
		t.Errorf("unknown path: %d", r.status)
	}
	req, _ := http.NewRequest(http.MethodGet, base+PathListV4, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET: %d, want 405", resp.StatusCode)
	}
}

func TestOzonListFilters(t *testing.T) {
	t.Parallel()
	s, base := newOzonTest(t, Options{})
	day := 24 * time.Hour
	s.AddPosting(Posting{PostingNumber: "1-1-1", InProcessAt: ozonTestNow.Add(-2 * day), Products: []Product{{OfferID: "A", Quantity: 1}}})
	s.AddPosting(Posting{PostingNumber: "2-2-1", InProcessAt: ozonTestNow.Add(-time.Hour), NoCutoff: true, Products: []Product{{OfferID: "B", Quantity: 1}}})
	s.AddPosting(Posting{PostingNumber: "3-3-1", InProcessAt: ozonTestNow.Add(-40 * day), Status: "delivered", Products: []Product{{OfferID: "C", Quantity: 1}}})
	s.AddPosting(Posting{PostingNumber: "4-4-1", InProcessAt: ozonTestNow.Add(-30 * day), StatusChangedAt: ozonTestNow.Add(-30 * day), Products: []Product{{OfferID: "D", Quantity: 1}}})
	if err := s.Cancel("4-4-1", "Покупатель отменил", "Клиент"); err != nil {
		t.Fatal(err)
	}
	numbers := func(path, body string) []string {
		t.Helper()
		r := ozonCall(t, base, path, body)
		if r.status != 200 {
			t.Fatalf("%s %s: %d %s", path, body, r.status, r.body)
		}
		var pg struct {
			Postings []struct {
				PostingNumber string `json:"posting_number"`
			} `json:"postings"`
		}
		ozonDecodeReply(t, r, &pg)
		var out []string
		for _, p := range pg.Postings {
			out = append(out, p.PostingNumber)
		}
		return out
	}
	eq := func(name string, got []string, want ...string) {
		t.Helper()
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("%s: got %v, want %v", name, got, want)
		}
	}
	eq("cutoff window: no null cutoff, no delivered", numbers(PathUnfulfilledV4,
		`{"filter":{"cutoff_from":"2026-09-10T00:00:00Z","cutoff_to":"2026-10-10T00:00:00Z"},"limit":100}`), "1-1-1")
	eq("created since", numbers(PathListV4,
		`{"filter":{"since":"2026-09-15T00:00:00Z","to":"2026-09-17T00:00:00Z"},"limit":100}`), "2-2-1")
	eq("cancelled by status change", numbers(PathListV4,
		`{"filter":{"since":"2025-09-20T00:00:00Z","to":"2026-09-17T00:00:00Z","statuses":["cancelled"],"last_changed_status_date":{"from":"2026-09-16T00:00:00Z","to":"2026-09-17T00:00:00Z"}},"limit":100}`), "4-4-1")
	eq("status change outside", numbers(PathListV4,
		`{"filter":{"since":"2025-09-20T00:00:00Z","to":"2026-09-17T00:00:00Z","statuses":["cancelled"],"last_changed_status_date":{"from":"2026-09-10T00:00:00Z","to":"2026-09-15T00:00:00Z"}},"limit":100}`))
	r := ozonCall(t, base, PathGet, `{"posting_number":"4-4-1"}`)
	var got struct {
		Result struct {
			Status       string `json:"status"`
			Cancellation struct {
				Reason    string `json:"cancel_reason"`
				Initiator string `json:"cancellation_initiator"`
			} `json:"cancellation"`
		} `json:"result"`
	}
	ozonDecodeReply(t, r, &got)
	if got.Result.Status != "cancelled" || got.Result.Cancellation.Reason != "Покупатель отменил" || got.Result.Cancellation.Initiator != "Клиент" {
		t.Errorf("get of a cancelled posting: %s", r.body)
	}
}

func TestOzonShipOnceAndRecord(t *testing.T) {
	t.Parallel()
	s, base := newOzonTest(t, Options{})
	s.AddPosting(Posting{PostingNumber: "7-7-1", Products: []Product{
		{SKU: 11, OfferID: "A", Quantity: 2, Price: decimal.NewFromInt(10)},
		{SKU: 12, OfferID: "B", Quantity: 1, Price: decimal.NewFromInt(20)},
	}})
	if r := ozonCall(t, base, PathShip, `{"posting_number":"7-7-1","packages":[{"products":[{"product_id":11,"quantity":1}]}]}`); r.status != 400 {
		t.Errorf("ship of part of the products: %d %s", r.status, r.body)
	}
	ship := `{"posting_number":"7-7-1","packages":[{"products":[{"product_id":11,"quantity":2},{"product_id":12,"quantity":1}]}]}`
	if r := ozonCall(t, base, PathShip, ship); r.status != 200 || !strings.Contains(string(r.body), `"result":["7-7-1"]`) {
		t.Fatalf("ship: %d %s", r.status, r.body)
	}
	if r := ozonCall(t, base, PathShip, ship); r.status != 400 {
		t.Errorf("second ship: %d %s", r.status, r.body)
	}
	if r := ozonCall(t, base, PathShip, `{"posting_number":"nope","packages":[{"products":[]}]}`); r.status != 404 {
		t.Errorf("ship of an unknown posting: %d", r.status)
	}
	p, _ := s.Posting("7-7-1")
	if p.Status != "awaiting_deliver" || !p.StatusChangedAt.Equal(ozonTestNow) {
		t.Errorf("after ship: %s at %s", p.Status, p.StatusChangedAt)
	}
	if s.Shipped("7-7-1") != 1 || len(s.Shipments()) != 1 || s.ShipsRefused() != 2 {
		t.Errorf("record: shipped %d, shipments %v, refused %d", s.Shipped("7-7-1"), s.Shipments(), s.ShipsRefused())
	}
	if n := len(s.RequestsTo(PathShip)); n != 4 {
		t.Errorf("RequestsTo(ship) = %d, want 4", n)
	}
}

func TestOzonFaults(t *testing.T) {
	t.Parallel()
	s, base := newOzonTest(t, Options{})
	ozonSeed(s, 1)
	s.Faults.Add(1, sim.Fault{Status: http.StatusTooManyRequests, RetryAfter: 2 * time.Second})
	r := ozonCall(t, base, PathGet, `{"posting_number":"10000000-0001-1"}`)
	if code, _ := ozonErrorCode(t, r); r.status != 429 || code != 8 || r.header.Get("Retry-After") != "2" {
		t.Errorf("429: %d code %d Retry-After %q", r.status, code, r.header.Get("Retry-After"))
	}
	if r := ozonCall(t, base, PathGet, `{"posting_number":"10000000-0001-1"}`); r.status != 200 {
		t.Errorf("after the fault: %d", r.status)
	}

	s.Faults.Add(1, sim.Fault{Op: PathShip, Status: http.StatusServiceUnavailable})
	if r := ozonCall(t, base, PathGet, `{"posting_number":"10000000-0001-1"}`); r.status != 200 {
		t.Errorf("FailOn(ship) hit get: %d", r.status)
	}
	if r := ozonCall(t, base, PathShip, `{"posting_number":"10000000-0001-1","packages":[{"products":[]}]}`); r.status != 503 {
		t.Errorf("FailOn(ship): %d", r.status)
	}

	list := `{"filter":{"since":"2026-09-15T00:00:00Z","to":"2026-09-17T00:00:00Z"},"limit":10}`
	s.Faults.Add(1, sim.Fault{Kind: sim.Malformed, After: 1})
	if r := ozonCall(t, base, PathListV4, list); r.status != 200 || !json.Valid(r.body) {
		t.Errorf("skipped page: %d %s", r.status, r.body)
	}
	if r := ozonCall(t, base, PathListV4, list); r.status != 200 || json.Valid(r.body) {
		t.Errorf("malformed page: %d %s", r.status, r.body)
	}
	if r := ozonCall(t, base, PathListV4, list); !json.Valid(r.body) {
		t.Errorf("after the malformed page: %s", r.body)
	}
}

func TestOzonPatch(t *testing.T) {
	t.Parallel()
	s, base := newOzonTest(t, Options{})
	s.AddPosting(Posting{PostingNumber: "5-5-1", Products: []Product{{OfferID: "A", Quantity: 1}},
		Patch: map[string]json.RawMessage{"in_process_at": nil, "status": json.RawMessage(`"teleported"`)}})
	r := ozonCall(t, base, PathGet, `{"posting_number":"5-5-1"}`)
	var got struct {
		Result map[string]json.RawMessage `json:"result"`
	}
	ozonDecodeReply(t, r, &got)
	if _, ok := got.Result["in_process_at"]; ok {
		t.Errorf("in_process_at still served: %s", r.body)
	}
	if string(got.Result["status"]) != `"teleported"` {
		t.Errorf("status = %s", got.Result["status"])
	}
}

func TestOzonStartClose(t *testing.T) {
	t.Parallel()
	s := New(Options{})
	s.Close() // before Start
	if s.URL() != "" {
		t.Errorf("URL before Start = %q", s.URL())
	}
	if err := s.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	if err := s.Start("127.0.0.1:0"); err == nil {
		t.Error("second Start succeeded")
	}
	r := ozonCall(t, s.URL(), PathGet, `{"posting_number":"x"}`)
	if r.status != 404 {
		t.Errorf("get over Start: %d", r.status)
	}
	s.Close()
	s.Close()
}
