package kaspisim

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/ordersync/ordersync/internal/sim"
)

const kaspiTestToken = "kaspi-test-token"

var kaspiTestNow = time.Date(2026, 9, 16, 5, 0, 0, 0, time.UTC) // 10:00 in Almaty

func newKaspiSim(t *testing.T, opts Options) (*Kaspi, string) {
	t.Helper()
	if opts.Token == "" {
		opts.Token = kaspiTestToken
	}
	if opts.Now == nil {
		opts.Now = func() time.Time { return kaspiTestNow }
	}
	s := New(opts)
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return s, ts.URL + Prefix
}

type kaspiReply struct {
	status int
	header http.Header
	body   []byte
}

func (r kaspiReply) decode(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("answer is not JSON: %v: %s", err, r.body)
	}
	return m
}

func kaspiDo(t *testing.T, method, u, token, contentType, body string) kaspiReply {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, u, rd)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("X-Auth-Token", token)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return kaspiReply{status: resp.StatusCode, header: resp.Header, body: b}
}

func kaspiGet(t *testing.T, base, path string, q url.Values) kaspiReply {
	t.Helper()
	u := base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	return kaspiDo(t, http.MethodGet, u, kaspiTestToken, "", "")
}

// kaspiListQuery is a listing of state over the day before kaspiTestNow.
func kaspiListQuery(state string, number, size int) url.Values {
	return url.Values{
		"page[number]":                      {strconv.Itoa(number)},
		"page[size]":                        {strconv.Itoa(size)},
		"filter[orders][state]":             {state},
		"filter[orders][creationDate][$ge]": {strconv.FormatInt(kaspiTestNow.Add(-24*time.Hour).UnixMilli(), 10)},
		"filter[orders][creationDate][$le]": {strconv.FormatInt(kaspiTestNow.UnixMilli(), 10)},
		"include[orders]":                   {"entries"},
	}
}

func kaspiAccept(id, code string) string {
	return fmt.Sprintf(`{"data":{"type":"orders","id":%q,"attributes":{"code":%q,"status":"ACCEPTED_BY_MERCHANT"}}}`, id, code)
}

func mustAddKaspi(t *testing.T, s *Kaspi, o Order) {
	t.Helper()
	if err := s.AddOrder(o); err != nil {
		t.Fatal(err)
	}
}

func kaspiTestOrder(code string, created time.Time) Order {
	return Order{
		Code:         code,
		CreationDate: created,
		Customer:     Customer{ID: "c-" + code, FirstName: "Даниела", LastName: "Муталидзе", CellPhone: "7066828008"},
		Entries: []Entry{{OfferCode: "SKU-" + code, Name: "Линейка",
			Quantity: decimal.NewFromInt(2), BasePrice: decimal.RequireFromString("1000")}},
	}
}

func TestKaspiListPaginates(t *testing.T) {
	t.Parallel()
	s, base := newKaspiSim(t, Options{})
	for i := range 250 {
		mustAddKaspi(t, s, kaspiTestOrder(fmt.Sprintf("5%08d", i), kaspiTestNow.Add(-time.Duration(i+1)*time.Minute)))
	}
	seen := map[string]bool{}
	var lastCreated float64
	for n, want := range []int{100, 100, 50, 0} {
		r := kaspiGet(t, base, "/orders", kaspiListQuery("NEW", n, 100))
		if r.status != http.StatusOK {
			t.Fatalf("page %d: HTTP %d %s", n, r.status, r.body)
		}
		if got := r.header.Get("Content-Type"); got != "application/vnd.api+json" {
			t.Errorf("Content-Type = %q", got)
		}
		m := r.decode(t)
		data := m["data"].([]any)
		if got := len(data); got != want {
			t.Fatalf("page %d: %d orders, want %d", n, got, want)
		}
		meta := m["meta"].(map[string]any)
		if got, want := meta["pageCount"], float64(3); got != want {
			t.Errorf("pageCount = %v, want %v", got, want)
		}
		if got, want := meta["totalCount"], float64(250); got != want {
			t.Errorf("totalCount = %v, want %v", got, want)
		}
		if got, want := len(m["included"].([]any)), want; got != want {
			t.Errorf("page %d: %d included entries, want %d", n, got, want)
		}
		for _, d := range data {
			o := d.(map[string]any)
			attrs := o["attributes"].(map[string]any)
			code := attrs["code"].(string)
			if seen[code] {
				t.Errorf("order %s listed twice", code)
			}
			seen[code] = true
			if o["type"] != "orders" || attrs["state"] != "NEW" || attrs["status"] != "APPROVED_BY_BANK" {
				t.Errorf("order %s: type %v state %v status %v", code, o["type"], attrs["state"], attrs["status"])
			}
			created := attrs["creationDate"].(float64)
			if created < lastCreated {
				t.Errorf("orders not in creation order: %v after %v", created, lastCreated)
			}
			lastCreated = created
		}
	}
	if got, want := len(seen), 250; got != want {
		t.Errorf("%d distinct orders listed, want %d", got, want)
	}
}

func TestKaspiListRefusesBadQueries(t *testing.T) {
	t.Parallel()
	s, base := newKaspiSim(t, Options{})
	mustAddKaspi(t, s, kaspiTestOrder("1", kaspiTestNow.Add(-time.Hour)))
	ge := kaspiTestNow.Add(-20 * 24 * time.Hour).UnixMilli()
	tests := []struct {
		name   string
		edit   func(q url.Values)
		status int
		title  string
	}{
		{"no page number", func(q url.Values) { q.Del("page[number]") }, 400, "page[number]"},
		{"page too big", func(q url.Values) { q.Set("page[size]", "101") }, 400, "page[size]"},
		{"no state", func(q url.Values) { q.Del("filter[orders][state]") }, 400, "filter[orders][state]"},
		{"unknown state", func(q url.Values) { q.Set("filter[orders][state]", "LOST") }, 400, "unknown state"},
		{"unknown status", func(q url.Values) { q.Set("filter[orders][status]", "LOST") }, 400, "unknown status"},
		{"no start", func(q url.Values) { q.Del("filter[orders][creationDate][$ge]") }, 400, "$ge"},
		{"start not ms", func(q url.Values) { q.Set("filter[orders][creationDate][$ge]", "yesterday") }, 400, "milliseconds"},
		{"over 14 days", func(q url.Values) { q.Set("filter[orders][creationDate][$ge]", strconv.FormatInt(ge, 10)) }, 400, "14 days"},
		{"over 14 days to now", func(q url.Values) {
			q.Set("filter[orders][creationDate][$ge]", strconv.FormatInt(ge, 10))
			q.Del("filter[orders][creationDate][$le]")
		}, 400, "14 days"},
		{"exactly 14 days", func(q url.Values) {
			q.Set("filter[orders][creationDate][$ge]", strconv.FormatInt(kaspiTestNow.Add(-MaxWindow).UnixMilli(), 10))
		}, 200, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := kaspiListQuery("NEW", 0, 100)
			tt.edit(q)
			r := kaspiGet(t, base, "/orders", q)
			if r.status != tt.status {
				t.Fatalf("HTTP %d, want %d: %s", r.status, tt.status, r.body)
			}
			if tt.title == "" {
				return
			}
			var doc struct {
				Errors []struct{ Status, Title string }
			}
			if err := json.Unmarshal(r.body, &doc); err != nil || len(doc.Errors) != 1 {
				t.Fatalf("not a JSON:API error document: %s", r.body)
			}
			if !strings.Contains(doc.Errors[0].Title, tt.title) {
				t.Errorf("title %q does not mention %q", doc.Errors[0].Title, tt.title)
			}
		})
	}
}

func TestKaspiListFilters(t *testing.T) {
	t.Parallel()
	s, base := newKaspiSim(t, Options{})
	ge := kaspiTestNow.Add(-24 * time.Hour)
	mustAddKaspi(t, s, kaspiTestOrder("at-start", ge))
	mustAddKaspi(t, s, kaspiTestOrder("at-end", kaspiTestNow))
	mustAddKaspi(t, s, kaspiTestOrder("before", ge.Add(-time.Millisecond)))
	mustAddKaspi(t, s, kaspiTestOrder("after", kaspiTestNow.Add(time.Millisecond)))
	pickup := kaspiTestOrder("pickup", kaspiTestNow.Add(-time.Hour))
	pickup.State, pickup.Status = StatePickup, StatusAcceptedByMerchant
	mustAddKaspi(t, s, pickup)
	gone := kaspiTestOrder("gone", kaspiTestNow.Add(-time.Hour))
	gone.State, gone.Status, gone.CancellationReason = StateArchive, StatusCancelled, "BUYER_CANCELLATION_BY_MERCHANT"
	mustAddKaspi(t, s, gone)
	done := kaspiTestOrder("done", kaspiTestNow.Add(-time.Hour))
	done.State, done.Status = StateArchive, StatusCompleted
	mustAddKaspi(t, s, done)

	codes := func(q url.Values) []string {
		t.Helper()
		r := kaspiGet(t, base, "/orders", q)
		if r.status != http.StatusOK {
			t.Fatalf("HTTP %d: %s", r.status, r.body)
		}
		var out []string
		for _, d := range r.decode(t)["data"].([]any) {
			out = append(out, d.(map[string]any)["attributes"].(map[string]any)["code"].(string))
		}
		return out
	}
	if got, want := strings.Join(codes(kaspiListQuery("NEW", 0, 100)), ","), "at-start,at-end"; got != want {
		t.Errorf("NEW = %s, want %s ($ge and $le inclusive)", got, want)
	}
	if got, want := strings.Join(codes(kaspiListQuery("PICKUP", 0, 100)), ","), "pickup"; got != want {
		t.Errorf("PICKUP = %s, want %s", got, want)
	}
	q := kaspiListQuery("ARCHIVE", 0, 100)
	q.Set("filter[orders][status]", "CANCELLED")
	if got, want := strings.Join(codes(q), ","), "gone"; got != want {
		t.Errorf("ARCHIVE CANCELLED = %s, want %s", got, want)
	}
	if got, want := len(codes(kaspiListQuery("ARCHIVE", 0, 100))), 2; got != want {
		t.Errorf("ARCHIVE lists %d orders, want %d", got, want)
	}
}

func TestKaspiOrderShapeAndExactNumbers(t *testing.T) {
	t.Parallel()
	s, base := newKaspiSim(t, Options{})
	o := kaspiTestOrder("700", kaspiTestNow.Add(-time.Hour))
	o.DeliveryCost = decimal.RequireFromString("500")
	o.Entries = []Entry{
		{OfferCode: "A", Name: "Чайник", Quantity: decimal.NewFromInt(3), BasePrice: decimal.RequireFromString("1500.10")},
		{OfferCode: "B", Name: "Пакет", Quantity: decimal.NewFromInt(1), BasePrice: decimal.RequireFromString("0.1")},
		{OfferCode: "C", Name: "Пакет", Quantity: decimal.NewFromInt(1), BasePrice: decimal.RequireFromString("0.2")},
	}
	mustAddKaspi(t, s, o)
	r := kaspiGet(t, base, "/orders", kaspiListQuery("NEW", 0, 10))
	body := string(r.body)
	for _, want := range []string{
		`"totalPrice":5000.6`, // 4500.30 + 0.1 + 0.2 + delivery 500
		`"basePrice":1500.1`, `"totalPrice":4500.3`, `"basePrice":0.1`, `"basePrice":0.2`,
		`"quantity":3`, `"deliveryCost":500.0`, `"cellPhone":"7066828008"`, `"name":null`,
		`"offer":{"code":"A","name":"Чайник"}`, `"unitType":"PIECES"`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("listing lacks %s: %s", want, body)
		}
	}
	m := r.decode(t)
	order := m["data"].([]any)[0].(map[string]any)
	refs := order["relationships"].(map[string]any)["entries"].(map[string]any)["data"].([]any)
	included := m["included"].([]any)
	if got, want := len(refs), 3; got != want {
		t.Fatalf("%d entry references, want %d", got, want)
	}
	for i, ref := range refs {
		if got, want := ref.(map[string]any)["id"], included[i].(map[string]any)["id"]; got != want {
			t.Errorf("entry %d: reference %v, included %v", i, got, want)
		}
	}
	if got, want := order["attributes"].(map[string]any)["creationDate"], float64(kaspiTestNow.Add(-time.Hour).UnixMilli()); got != want {
		t.Errorf("creationDate = %v, want %v", got, want)
	}
}

func TestKaspiEntriesOrderAndCode(t *testing.T) {
	t.Parallel()
	s, base := newKaspiSim(t, Options{IgnoreInclude: true})
	mustAddKaspi(t, s, kaspiTestOrder("801", kaspiTestNow.Add(-time.Hour)))
	o, _ := s.Order("801")

	if got := len(kaspiGet(t, base, "/orders", kaspiListQuery("NEW", 0, 10)).decode(t)["included"].([]any)); got != 0 {
		t.Errorf("IgnoreInclude: %d included entries, want 0", got)
	}
	r := kaspiGet(t, base, "/orders/"+o.ID+"/entries", nil)
	if r.status != http.StatusOK {
		t.Fatalf("entries: HTTP %d %s", r.status, r.body)
	}
	entries := r.decode(t)["data"].([]any)
	if got, want := len(entries), 1; got != want {
		t.Fatalf("%d entries, want %d", got, want)
	}
	offer := entries[0].(map[string]any)["attributes"].(map[string]any)["offer"].(map[string]any)
	if got, want := offer["code"], "SKU-801"; got != want {
		t.Errorf("offer.code = %v, want %v", got, want)
	}
	r = kaspiGet(t, base, "/orders/"+o.ID, nil)
	if got, want := r.decode(t)["data"].(map[string]any)["attributes"].(map[string]any)["code"], "801"; got != want {
		t.Errorf("GET /orders/{id}: code %v, want %v", got, want)
	}
	if r := kaspiGet(t, base, "/orders/nope/entries", nil); r.status != http.StatusNotFound {
		t.Errorf("entries of an unknown order: HTTP %d, want 404", r.status)
	}
	r = kaspiGet(t, base, "/orders", url.Values{"filter[orders][code]": {"801"}})
	if got, want := len(r.decode(t)["data"].([]any)), 1; got != want {
		t.Errorf("by code: %d orders, want %d", got, want)
	}
	r = kaspiGet(t, base, "/orders", url.Values{"filter[orders][code]": {"999"}})
	if got, want := len(r.decode(t)["data"].([]any)), 0; r.status != http.StatusOK || got != want {
		t.Errorf("unknown code: HTTP %d, %d orders, want 200 and %d", r.status, got, want)
	}
	if got, want := s.Requests()[OpByCode], 2; got != want {
		t.Errorf("Requests()[by_code] = %d, want %d", got, want)
	}
	if got, want := s.Requests()[OpEntries], 2; got != want {
		t.Errorf("Requests()[entries] = %d, want %d", got, want)
	}
}

func TestKaspiToken(t *testing.T) {
	t.Parallel()
	_, base := newKaspiSim(t, Options{})
	u := base + "/orders?" + kaspiListQuery("NEW", 0, 10).Encode()
	for _, token := range []string{"", "wrong"} {
		if r := kaspiDo(t, http.MethodGet, u, token, "", ""); r.status != http.StatusUnauthorized {
			t.Errorf("token %q: HTTP %d, want 401", token, r.status)
		}
	}
	if r := kaspiDo(t, http.MethodGet, u, kaspiTestToken, "", ""); r.status != http.StatusOK {
		t.Errorf("right token: HTTP %d, want 200", r.status)
	}
}

func TestKaspiFail(t *testing.T) {
	t.Parallel()
	s, base := newKaspiSim(t, Options{})
	s.Faults.Add(1, sim.Fault{Op: OpEntries, Status: http.StatusBadGateway})
	s.Faults.Add(2, sim.Fault{Status: http.StatusTooManyRequests, RetryAfter: 3 * time.Second})
	q := kaspiListQuery("NEW", 0, 10)
	for i := range 2 {
		r := kaspiGet(t, base, "/orders", q)
		if r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") != "3" {
			t.Fatalf("request %d: HTTP %d Retry-After %q, want 429 and 3", i, r.status, r.header.Get("Retry-After"))
		}
	}
	if r := kaspiGet(t, base, "/orders", q); r.status != http.StatusOK {
		t.Fatalf("after the faults: HTTP %d", r.status)
	}
	if r := kaspiGet(t, base, "/orders/x/entries", nil); r.status != http.StatusBadGateway {
		t.Errorf("entries fault: HTTP %d, want 502", r.status)
	}
	log := s.RequestLog()
	if got, want := len(log), 4; got != want {
		t.Fatalf("%d requests logged, want %d", got, want)
	}
	for i, want := range []int{429, 429, 200, 502} {
		if log[i].Status != want {
			t.Errorf("request %d: logged status %d, want %d", i, log[i].Status, want)
		}
	}
	if got, want := s.Requests()[OpList], 3; got != want {
		t.Errorf("Requests()[list] = %d, want %d", got, want)
	}
}

func TestKaspiAccept(t *testing.T) {
	t.Parallel()
	s, base := newKaspiSim(t, Options{})
	o := kaspiTestOrder("901", kaspiTestNow.Add(-time.Hour))
	o.AcceptedState = StateKaspiDelivery
	mustAddKaspi(t, s, o)
	o, _ = s.Order("901")
	const ct = "application/vnd.api+json"

	if r := kaspiDo(t, http.MethodPost, base+"/orders", kaspiTestToken, "application/json", kaspiAccept(o.ID, o.Code)); r.status != http.StatusUnsupportedMediaType {
		t.Errorf("plain JSON: HTTP %d, want 415", r.status)
	}
	if r := kaspiDo(t, http.MethodPost, base+"/orders", "wrong", ct, kaspiAccept(o.ID, o.Code)); r.status != http.StatusUnauthorized {
		t.Errorf("wrong token: HTTP %d, want 401", r.status)
	}
	if r := kaspiDo(t, http.MethodPost, base+"/orders", kaspiTestToken, ct, kaspiAccept(o.ID, "other")); r.status != http.StatusBadRequest {
		t.Errorf("code of another order: HTTP %d, want 400", r.status)
	}
	if r := kaspiDo(t, http.MethodPost, base+"/orders", kaspiTestToken, ct, kaspiAccept("nope", o.Code)); r.status != http.StatusNotFound {
		t.Errorf("unknown id: HTTP %d, want 404", r.status)
	}
	if got := s.Accepted()["901"]; got != 0 {
		t.Fatalf("refused requests counted as acceptances: %d", got)
	}

	r := kaspiDo(t, http.MethodPost, base+"/orders", kaspiTestToken, ct+"; charset=utf-8", kaspiAccept(o.ID, o.Code))
	if r.status != http.StatusOK {
		t.Fatalf("accept: HTTP %d %s", r.status, r.body)
	}
	attrs := r.decode(t)["data"].(map[string]any)["attributes"].(map[string]any)
	if attrs["status"] != "ACCEPTED_BY_MERCHANT" || attrs["code"] != "901" {
		t.Errorf("accept answer attributes = %v", attrs)
	}
	got, _ := s.Order("901")
	if got.Status != StatusAcceptedByMerchant || got.State != StateKaspiDelivery {
		t.Errorf("after accept: state %s status %s, want KASPI_DELIVERY ACCEPTED_BY_MERCHANT", got.State, got.Status)
	}

	r = kaspiDo(t, http.MethodPost, base+"/orders", kaspiTestToken, ct, kaspiAccept(o.ID, o.Code))
	if r.status != http.StatusBadRequest || !strings.Contains(string(r.body), "APPROVED_BY_BANK") {
		t.Errorf("second accept: HTTP %d %s, want 400 naming APPROVED_BY_BANK", r.status, r.body)
	}
	if got, want := s.Accepted()["901"], 2; got != want {
		t.Errorf("Accepted()[901] = %d, want %d (every call that reached the order)", got, want)
	}
	if got, want := s.Requests()[OpStatus], 6; got != want {
		t.Errorf("Requests()[status] = %d, want %d", got, want)
	}
}

func TestKaspiRawAndInjected(t *testing.T) {
	t.Parallel()
	s, base := newKaspiSim(t, Options{})
	mustAddKaspi(t, s, kaspiTestOrder("1001", kaspiTestNow.Add(-2*time.Hour)))
	raw := `{"type":"orders","id":"raw1","attributes":{"code":"1002","state":"NEW","status":"APPROVED_BY_BANK"}}`
	s.AddRawOrder(StateNew, kaspiTestNow.Add(-time.Hour), raw)
	s.AddRawOrder(StatePickup, kaspiTestNow.Add(-time.Hour), `{"broken`)

	r := kaspiGet(t, base, "/orders", kaspiListQuery("NEW", 0, 10))
	if !strings.Contains(string(r.body), raw) {
		t.Errorf("raw order not listed verbatim: %s", r.body)
	}
	if got, want := len(r.decode(t)["data"].([]any)), 2; got != want {
		t.Errorf("%d orders, want %d", got, want)
	}
	r = kaspiGet(t, base, "/orders", kaspiListQuery("PICKUP", 0, 10))
	if json.Valid(r.body) {
		t.Errorf("a page with a broken raw order is valid JSON: %s", r.body)
	}

	s.InjectRaw(1, `{"data": [`)
	if r := kaspiGet(t, base, "/orders", kaspiListQuery("NEW", 0, 10)); r.status != http.StatusOK || string(r.body) != `{"data": [` {
		t.Errorf("injected: HTTP %d %s", r.status, r.body)
	}
	if r := kaspiGet(t, base, "/orders", kaspiListQuery("NEW", 0, 10)); !json.Valid(r.body) {
		t.Errorf("the injection outlived its count: %s", r.body)
	}
	s.InjectRawPage(1, `{"data": [`)
	if r := kaspiGet(t, base, "/orders", kaspiListQuery("NEW", 0, 10)); !json.Valid(r.body) {
		t.Errorf("an injection for page 1 answered page 0: %s", r.body)
	}
	if r := kaspiGet(t, base, "/orders", kaspiListQuery("NEW", 1, 10)); string(r.body) != `{"data": [` {
		t.Errorf("page 1 after InjectRawPage(1): %s", r.body)
	}
}

func TestKaspiAddOrderChecks(t *testing.T) {
	t.Parallel()
	s := New(Options{})
	if err := s.AddOrder(Order{}); err == nil {
		t.Error("an order without a code was added")
	}
	if err := s.AddOrder(Order{Code: "1", State: "LOST"}); err == nil {
		t.Error("an order in an unknown state was added")
	}
	if err := s.AddOrder(Order{Code: "1"}); err != nil {
		t.Fatal(err)
	}
	if err := s.AddOrder(Order{Code: "1"}); err == nil {
		t.Error("a second order with the same code was added")
	}
	if err := s.SetStatus("1", "LOST"); err == nil {
		t.Error("an unknown status was set")
	}
	if err := s.SetStatus("2", StatusCancelled); err == nil {
		t.Error("the status of an unknown order was set")
	}
	if err := s.SetStatus("1", StatusCancelled); err != nil {
		t.Fatal(err)
	}
	if err := s.SetState("1", StateArchive); err != nil {
		t.Fatal(err)
	}
	o, _ := s.Order("1")
	if o.State != StateArchive || o.Status != StatusCancelled {
		t.Errorf("state %s status %s, want ARCHIVE CANCELLED", o.State, o.Status)
	}
}

func TestKaspiStartURLClose(t *testing.T) {
	t.Parallel()
	s := New(Options{Token: kaspiTestToken})
	if s.URL() != "" {
		t.Errorf("URL before Start = %q", s.URL())
	}
	s.Close() // before Start: no-op
	if err := s.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Start("127.0.0.1:0"); err == nil {
		t.Error("a second Start succeeded")
	}
	if !strings.HasSuffix(s.URL(), Prefix) {
		t.Errorf("URL = %q, want it to end in %s", s.URL(), Prefix)
	}
	q := url.Values{"filter[orders][code]": {"1"}}
	if r := kaspiDo(t, http.MethodGet, s.URL()+"/orders?"+q.Encode(), kaspiTestToken, "", ""); r.status != http.StatusOK {
		t.Errorf("HTTP %d", r.status)
	}
	s.Close()
	s.Close()
}

func TestKaspiConcurrent(t *testing.T) {
	t.Parallel()
	s, base := newKaspiSim(t, Options{})
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			code := strconv.Itoa(2000 + i)
			if err := s.AddOrder(kaspiTestOrder(code, kaspiTestNow.Add(-time.Minute))); err != nil {
				t.Error(err)
				return
			}
			o, _ := s.Order(code)
			kaspiGet(t, base, "/orders", kaspiListQuery("NEW", 0, 100))
			kaspiDo(t, http.MethodPost, base+"/orders", kaspiTestToken, "application/vnd.api+json", kaspiAccept(o.ID, code))
			_ = s.Accepted()
			_ = s.RequestLog()
		})
	}
	wg.Wait()
	acc := s.Accepted()
	for i := range 20 {
		if got := acc[strconv.Itoa(2000+i)]; got != 1 {
			t.Errorf("order %d accepted %d times", 2000+i, got)
		}
	}
	if got := len(kaspiGet(t, base, "/orders", kaspiListQuery("PICKUP", 0, 100)).decode(t)["data"].([]any)); got != 20 {
		t.Errorf("%d accepted orders in PICKUP, want 20", got)
	}
}
