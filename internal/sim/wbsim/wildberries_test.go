package wbsim

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ordersync/ordersync/internal/sim"
)

var wbNow = time.Date(2026, 9, 16, 7, 0, 0, 0, time.UTC)

const wbToken = "wb-test-token"

func newWB(t *testing.T) (*Wildberries, string) {
	t.Helper()
	s := New(Options{Token: wbToken, Now: func() time.Time { return wbNow }})
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return s, ts.URL
}

type wbReply struct {
	status int
	header http.Header
	body   []byte
}

// wbDo sends one request with the test token unless auth is given.
func wbDo(t *testing.T, method, url, body string, auth ...string) wbReply {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", wbToken)
	if len(auth) > 0 {
		req.Header.Set("Authorization", auth[0])
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return wbReply{status: resp.StatusCode, header: resp.Header, body: b}
}

func wbDecode(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
}

type wbPage struct {
	Next   int64            `json:"next"`
	Orders []map[string]any `json:"orders"`
}

func wbOrdersURL(base string, limit int, next int64, from, to time.Time) string {
	q := url.Values{}
	q.Set("limit", fmt.Sprint(limit))
	q.Set("next", fmt.Sprint(next))
	if !from.IsZero() {
		q.Set("dateFrom", fmt.Sprint(from.Unix()))
	}
	if !to.IsZero() {
		q.Set("dateTo", fmt.Sprint(to.Unix()))
	}
	return base + "/api/v3/orders?" + q.Encode()
}

func wbAddOrders(s *Wildberries, n int, first int64, created time.Time) {
	for i := range n {
		s.AddOrder(Order{
			ID: first + int64(i), Article: fmt.Sprintf("ART-%d", i), Price: 100000 + int64(i), ConvertedPrice: 153099,
			CurrencyCode: 643, ConvertedCurrencyCode: 643, CreatedAt: created.Add(time.Duration(i) * time.Minute),
		})
	}
}

func TestWildberriesOrdersPagination(t *testing.T) {
	t.Parallel()
	s, base := newWB(t)
	wbAddOrders(s, 25, 5000, wbNow.Add(-48*time.Hour))

	var ids []int64
	var sizes []int
	next := int64(0)
	for range 10 {
		r := wbDo(t, "GET", wbOrdersURL(base, 10, next, wbNow.Add(-72*time.Hour), wbNow), "")
		if r.status != 200 {
			t.Fatalf("status %d: %s", r.status, r.body)
		}
		var p wbPage
		wbDecode(t, r.body, &p)
		sizes = append(sizes, len(p.Orders))
		if len(p.Orders) == 0 {
			break
		}
		for _, o := range p.Orders {
			ids = append(ids, int64(o["id"].(float64)))
		}
		if got, want := p.Next, ids[len(ids)-1]; got != want {
			t.Fatalf("next = %d, want the last id %d", got, want)
		}
		next = p.Next
	}
	if got, want := sizes, []int{10, 10, 5, 0}; !slices.Equal(got, want) {
		t.Fatalf("page sizes = %v, want %v", got, want)
	}
	if len(ids) != 25 || !slices.IsSorted(ids) || len(slices.Compact(slices.Clone(ids))) != 25 {
		t.Fatalf("ids = %v, want 25 distinct ascending", ids)
	}
}

func TestWildberriesOrdersPeriod(t *testing.T) {
	t.Parallel()
	s, base := newWB(t)
	s.AddOrder(Order{ID: 1, Article: "A", CreatedAt: wbNow.Add(-40 * 24 * time.Hour)})
	s.AddOrder(Order{ID: 2, Article: "B", CreatedAt: wbNow.Add(-10 * 24 * time.Hour)})
	s.AddOrder(Order{ID: 3, Article: "C", CreatedAt: wbNow.Add(-100 * 24 * time.Hour)}) // beyond 3 months

	idsOf := func(r wbReply) []int64 {
		t.Helper()
		if r.status != 200 {
			t.Fatalf("status %d: %s", r.status, r.body)
		}
		var p wbPage
		wbDecode(t, r.body, &p)
		var ids []int64
		for _, o := range p.Orders {
			ids = append(ids, int64(o["id"].(float64)))
		}
		return ids
	}
	// Default period: the last 30 days.
	if got := idsOf(wbDo(t, "GET", base+"/api/v3/orders?limit=10&next=0", "")); !slices.Equal(got, []int64{2}) {
		t.Fatalf("default period ids = %v, want [2]", got)
	}
	// Both bounds inclusive.
	c1 := wbNow.Add(-40 * 24 * time.Hour)
	if got := idsOf(wbDo(t, "GET", wbOrdersURL(base, 10, 0, c1, c1.Add(24*time.Hour)), "")); !slices.Equal(got, []int64{1}) {
		t.Fatalf("ids from the creation second = %v, want [1]", got)
	}
	if got := idsOf(wbDo(t, "GET", wbOrdersURL(base, 10, 0, c1.Add(-time.Hour), c1), "")); !slices.Equal(got, []int64{1}) {
		t.Fatalf("ids up to the creation second = %v, want [1]", got)
	}
	// Older than three months: not served.
	c3 := wbNow.Add(-100 * 24 * time.Hour)
	if got := idsOf(wbDo(t, "GET", wbOrdersURL(base, 10, 0, c3.Add(-time.Hour), c3.Add(time.Hour)), "")); len(got) != 0 {
		t.Fatalf("ids older than 3 months = %v, want none", got)
	}
	// Exactly 30 days is allowed; one second more is not.
	if r := wbDo(t, "GET", wbOrdersURL(base, 10, 0, wbNow.Add(-MaxWindow), wbNow), ""); r.status != 200 {
		t.Fatalf("30-day period: status %d, want 200", r.status)
	}
	for name, u := range map[string]string{
		"31 days":       wbOrdersURL(base, 10, 0, wbNow.Add(-MaxWindow-time.Second), wbNow),
		"reversed":      wbOrdersURL(base, 10, 0, wbNow, wbNow.Add(-time.Hour)),
		"no limit":      base + "/api/v3/orders?next=0",
		"limit 1001":    base + "/api/v3/orders?limit=1001&next=0",
		"no next":       base + "/api/v3/orders?limit=10",
		"text dateFrom": base + "/api/v3/orders?limit=10&next=0&dateFrom=yesterday",
	} {
		r := wbDo(t, "GET", u, "")
		var e struct{ Code string }
		wbDecode(t, r.body, &e)
		if r.status != 400 || e.Code != "IncorrectParameter" {
			t.Errorf("%s: status %d code %q, want 400 IncorrectParameter", name, r.status, e.Code)
		}
	}
}

func TestWildberriesNewOrdersAndShapes(t *testing.T) {
	t.Parallel()
	s, base := newWB(t)
	created := wbNow.Add(-time.Hour)
	s.AddOrder(Order{ID: 10, Article: "A", Price: 1014, ConvertedPrice: 28322, CurrencyCode: 933, ConvertedCurrencyCode: 643, CreatedAt: created, Comment: "в плёнку"})
	s.AddOrder(Order{ID: 11, Article: "B", CreatedAt: created, SupplierStatus: "confirm"})
	s.AddOrder(Order{ID: 12, Article: "C", CreatedAt: created, WBStatus: "declined_by_client"})
	s.AddOrder(Order{ID: 13, Article: "D", CreatedAt: created, Omit: []string{"article", "convertedPrice"}})

	var p wbPage
	wbDecode(t, wbDo(t, "GET", base+"/api/v3/orders/new", "").body, &p)
	var ids []int64
	for _, o := range p.Orders {
		ids = append(ids, int64(o["id"].(float64)))
	}
	if !slices.Equal(ids, []int64{10, 13}) {
		t.Fatalf("new ids = %v, want [10 13] (not confirmed, not cancelled)", ids)
	}
	o := p.Orders[0]
	for k, want := range map[string]any{
		"article": "A", "price": 1014.0, "convertedPrice": 28322.0, "currencyCode": 933.0, "convertedCurrencyCode": 643.0,
		"createdAt": created.Format(time.RFC3339), "finalPrice": 1014.0, "deliveryType": "fbs", "comment": "в плёнку",
	} {
		if o[k] != want {
			t.Errorf("new order %s = %v, want %v", k, o[k], want)
		}
	}
	if _, ok := p.Orders[1]["article"]; ok {
		t.Errorf("omitted article is present: %v", p.Orders[1])
	}
	if _, ok := p.Orders[1]["convertedPrice"]; ok {
		t.Errorf("omitted convertedPrice is present: %v", p.Orders[1])
	}

	var q wbPage
	wbDecode(t, wbDo(t, "GET", wbOrdersURL(base, 100, 0, created.Add(-time.Minute), wbNow), "").body, &q)
	if len(q.Orders) != 4 {
		t.Fatalf("/api/v3/orders has %d orders, want all 4 whatever their status", len(q.Orders))
	}
	if _, ok := q.Orders[0]["finalPrice"]; ok {
		t.Errorf("the Order shape of /api/v3/orders carries finalPrice: %v", q.Orders[0])
	}

	// A malformed order is served verbatim.
	s.AddOrder(Order{ID: 14, Raw: json.RawMessage(`{"id":"fourteen","article":"E"}`)})
	r := wbDo(t, "GET", base+"/api/v3/orders/new", "")
	if !strings.Contains(string(r.body), `{"id":"fourteen","article":"E"}`) {
		t.Fatalf("raw order not served verbatim: %s", r.body)
	}
}

func TestWildberriesToken(t *testing.T) {
	t.Parallel()
	s, base := newWB(t)
	for _, auth := range []string{"", "wrong", "Bearer wrong"} {
		r := wbDo(t, "GET", base+"/api/v3/orders/new", "", auth)
		var e struct {
			Title  string `json:"title"`
			Status int    `json:"status"`
		}
		wbDecode(t, r.body, &e)
		if r.status != 401 || e.Title != "unauthorized" || e.Status != 401 {
			t.Errorf("auth %q: status %d body %s, want 401 unauthorized", auth, r.status, r.body)
		}
	}
	for _, auth := range []string{wbToken, "Bearer " + wbToken} {
		if r := wbDo(t, "GET", base+"/api/v3/orders/new", "", auth); r.status != 200 {
			t.Errorf("auth %q: status %d, want 200", auth, r.status)
		}
	}
	reqs := s.Requests()
	if got, want := len(reqs), 5; got != want {
		t.Fatalf("%d requests recorded, want %d", got, want)
	}
	if reqs[0].Status != 401 || reqs[4].Status != 200 || reqs[0].Op != OpNew {
		t.Fatalf("recorded %+v / %+v", reqs[0], reqs[4])
	}
}

func TestWildberriesFaults(t *testing.T) {
	t.Parallel()
	s, base := newWB(t)

	s.Faults.Add(1, sim.Fault{Status: http.StatusTooManyRequests, RetryAfter: 1500 * time.Millisecond})
	r := wbDo(t, "GET", base+"/api/v3/orders/new", "")
	if r.status != 429 {
		t.Fatalf("status %d, want 429", r.status)
	}
	for h, want := range map[string]string{"X-Ratelimit-Retry": "2", "X-Ratelimit-Reset": "2", "X-Ratelimit-Limit": "20"} {
		if got := r.header.Get(h); got != want {
			t.Errorf("%s = %q, want %q", h, got, want)
		}
	}
	if r := wbDo(t, "GET", base+"/api/v3/orders/new", ""); r.status != 200 {
		t.Fatalf("after the fault: status %d, want 200", r.status)
	}

	s.Faults.Add(1, sim.Fault{Op: OpOrders, Kind: sim.Malformed})
	if r := wbDo(t, "GET", base+"/api/v3/orders/new", ""); r.status != 200 || !json.Valid(r.body) {
		t.Fatalf("another op was hit by the malformed fault: %d %s", r.status, r.body)
	}
	r = wbDo(t, "GET", wbOrdersURL(base, 10, 0, time.Time{}, time.Time{}), "")
	if r.status != 200 || json.Valid(r.body) {
		t.Fatalf("malformed page: status %d body %s, want 200 with invalid JSON", r.status, r.body)
	}

	s.Faults.Add(1, sim.Fault{Op: OpStatus, After: 2, Status: http.StatusBadGateway})
	var got []int
	for range 4 {
		got = append(got, wbDo(t, "POST", base+"/api/v3/orders/status", `{"orders":[1]}`).status)
	}
	if want := []int{200, 200, 502, 200}; !slices.Equal(got, want) {
		t.Fatalf("statuses with After 2 = %v, want %v", got, want)
	}

	s.Faults.Add(sim.Forever, sim.Fault{Status: http.StatusServiceUnavailable})
	for range 3 {
		if r := wbDo(t, "POST", base+"/api/v3/orders/status", `{"orders":[1]}`); r.status != 503 {
			t.Fatalf("status %d, want 503 until cleared", r.status)
		}
	}
	s.Faults.Clear()
	if r := wbDo(t, "POST", base+"/api/v3/orders/status", `{"orders":[1]}`); r.status != 200 {
		t.Fatalf("after Faults.Clear: status %d, want 200", r.status)
	}
}

func TestWildberriesStatus(t *testing.T) {
	t.Parallel()
	s, base := newWB(t)
	wbAddOrders(s, 3, 100, wbNow)
	s.SetStatus(101, "cancel", "canceled")
	s.SetStatus(102, "mystery", "waiting")

	r := wbDo(t, "POST", base+"/api/v3/orders/status", `{"orders":[100,101,102,999]}`)
	var got struct {
		Orders []struct {
			ID             int64  `json:"id"`
			SupplierStatus string `json:"supplierStatus"`
			WBStatus       string `json:"wbStatus"`
		} `json:"orders"`
	}
	wbDecode(t, r.body, &got)
	want := fmt.Sprint([]any{[]any{100, "new", "waiting"}, []any{101, "cancel", "canceled"}, []any{102, "mystery", "waiting"}})
	var have []any
	for _, o := range got.Orders {
		have = append(have, []any{int(o.ID), o.SupplierStatus, o.WBStatus})
	}
	if fmt.Sprint(have) != want {
		t.Fatalf("statuses = %v, want %v (unknown ids left out)", have, want)
	}
	for _, body := range []string{`{"orders":[]}`, `{}`, `not json`} {
		if r := wbDo(t, "POST", base+"/api/v3/orders/status", body); r.status != 400 {
			t.Errorf("body %s: status %d, want 400", body, r.status)
		}
	}
}

func TestWildberriesSupplies(t *testing.T) {
	t.Parallel()
	s, base := newWB(t)
	wbAddOrders(s, 3, 1, wbNow)
	s.AddOrder(Order{ID: 4, Article: "KGT", CreatedAt: wbNow, CargoType: 3})
	s.AddOrder(Order{ID: 5, Article: "X", CreatedAt: wbNow, WBStatus: "canceled"})

	create := func(name string) string {
		t.Helper()
		r := wbDo(t, "POST", base+"/api/v3/supplies", fmt.Sprintf(`{"name":%q}`, name))
		if r.status != 201 {
			t.Fatalf("create supply: status %d %s", r.status, r.body)
		}
		var c struct{ ID string }
		wbDecode(t, r.body, &c)
		return c.ID
	}
	add := func(supply, body string) wbReply {
		return wbDo(t, "PATCH", base+"/api/marketplace/v3/supplies/"+supply+"/orders", body)
	}
	for _, body := range []string{`{}`, `{"name":""}`, fmt.Sprintf(`{"name":%q}`, strings.Repeat("я", 129))} {
		if r := wbDo(t, "POST", base+"/api/v3/supplies", body); r.status != 400 {
			t.Errorf("create with %s: status %d, want 400", body, r.status)
		}
	}
	a, b := create("ordersync"), create("ordersync")

	if r := add(a, `{"orders":[1,2]}`); r.status != 204 {
		t.Fatalf("add: status %d %s", r.status, r.body)
	}
	if o, _ := s.Order(1); o.SupplierStatus != "confirm" || o.SupplyID != a {
		t.Fatalf("order 1 after add: %s in %q, want confirm in %s", o.SupplierStatus, o.SupplyID, a)
	}
	// Another cargo type, a cancelled order, an unknown one: refused, nothing changes.
	for _, body := range []string{`{"orders":[4]}`, `{"orders":[3,5]}`, `{"orders":[3,77]}`} {
		r := add(a, body)
		var e struct{ Code string }
		wbDecode(t, r.body, &e)
		if r.status != 409 || e.Code != "FailedToAddSupplyOrder" {
			t.Errorf("add %s: status %d %s, want 409 FailedToAddSupplyOrder", body, r.status, r.body)
		}
	}
	if o, _ := s.Order(3); o.SupplierStatus != "new" || s.Acks(3) != 0 {
		t.Fatalf("order 3 changed by a refused batch: %s, %d acks", o.SupplierStatus, s.Acks(3))
	}
	// The deprecated one-order method; and a move from a to b.
	if r := wbDo(t, "PATCH", base+"/api/v3/supplies/"+b+"/orders/4", ""); r.status != 204 {
		t.Fatalf("deprecated add: status %d %s", r.status, r.body)
	}
	if r := wbDo(t, "PATCH", base+"/api/v3/supplies/"+b+"/orders/2", ""); r.status != 409 {
		t.Fatalf("cargo type 1 into a cargo type 3 supply: status %d, want 409", r.status)
	}
	c := create("other")
	if r := add(c, `{"orders":[2]}`); r.status != 204 {
		t.Fatalf("move: status %d %s", r.status, r.body)
	}
	sup := s.Supplies()
	if !slices.Equal(sup[0].Orders, []int64{1}) || !slices.Equal(sup[1].Orders, []int64{4}) || !slices.Equal(sup[2].Orders, []int64{2}) {
		t.Fatalf("supplies after the move: %+v", sup)
	}
	if got, want := s.Acknowledged(), map[int64]int{1: 1, 2: 2, 4: 1}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("acks = %v, want %v (every accepted add counts)", got, want)
	}
	if r := add("WB-GI-404", `{"orders":[3]}`); r.status != 404 {
		t.Fatalf("unknown supply: status %d, want 404", r.status)
	}

	// Deliver closes the supply and completes its orders; a closed supply takes none.
	if r := wbDo(t, "PATCH", base+"/api/v3/supplies/"+a+"/deliver", ""); r.status != 204 {
		t.Fatalf("deliver: status %d %s", r.status, r.body)
	}
	if o, _ := s.Order(1); o.SupplierStatus != "complete" {
		t.Fatalf("order 1 after deliver: %s, want complete", o.SupplierStatus)
	}
	if r := add(a, `{"orders":[3]}`); r.status != 409 {
		t.Fatalf("add to a closed supply: status %d, want 409", r.status)
	}
	if r := wbDo(t, "PATCH", base+"/api/v3/supplies/"+create("empty")+"/deliver", ""); r.status != 409 {
		t.Fatalf("deliver an empty supply: status %d, want 409", r.status)
	}

	// Listing supplies with next.
	var ids []string
	next := int64(0)
	for range 10 {
		r := wbDo(t, "GET", fmt.Sprintf("%s/api/v3/supplies?limit=2&next=%d", base, next), "")
		var p struct {
			Next     int64 `json:"next"`
			Supplies []struct {
				ID   string `json:"id"`
				Done bool   `json:"done"`
				Name string `json:"name"`
			} `json:"supplies"`
		}
		wbDecode(t, r.body, &p)
		if len(p.Supplies) == 0 {
			break
		}
		for _, sp := range p.Supplies {
			ids = append(ids, sp.ID)
			if sp.ID == a && !sp.Done {
				t.Errorf("supply %s listed open after deliver", a)
			}
		}
		next = p.Next
	}
	if len(ids) != 4 || ids[0] != a || ids[1] != b || ids[2] != c {
		t.Fatalf("listed supplies %v, want 4 in creation order", ids)
	}
	r := wbDo(t, "GET", base+"/api/v3/supplies/"+b, "")
	var one struct {
		ID        string `json:"id"`
		CargoType int    `json:"cargoType"`
	}
	wbDecode(t, r.body, &one)
	if r.status != 200 || one.ID != b || one.CargoType != 3 {
		t.Fatalf("get supply: %d %s", r.status, r.body)
	}
}

func TestWildberriesStart(t *testing.T) {
	t.Parallel()
	s := New(Options{})
	if s.URL() != "" {
		t.Fatalf("URL before Start = %q", s.URL())
	}
	if err := s.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Start("127.0.0.1:0"); err == nil {
		t.Fatal("second Start succeeded")
	}
	if r := wbDo(t, "GET", s.URL()+"/api/v3/orders/new", "", ""); r.status != 200 || string(r.body) != `{"orders":[]}` {
		t.Fatalf("no token configured: %d %s, want 200 with no orders", r.status, r.body)
	}
	if r := wbDo(t, "GET", s.URL()+"/api/v3/nothing", ""); r.status != 404 {
		t.Fatalf("unknown path: %d, want 404", r.status)
	}
	s.Close()
	s.Close()
}
