package onecsim

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/ordersync/ordersync/internal/sim"
)

var testNow = time.Date(2026, 9, 16, 5, 0, 0, 0, time.UTC) // 10:00 in Almaty

// newSim serves a simulator on an httptest server and returns it with the
// service's base URL.
func newSim(t *testing.T, opts Options) (*OneC, string) {
	t.Helper()
	if opts.Now == nil {
		opts.Now = func() time.Time { return testNow }
	}
	s := New(opts)
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	t.Cleanup(s.Close) // runs first: ends stalls so ts.Close does not wait on them
	return s, ts.URL + s.Prefix()
}

type reply struct {
	status int
	header http.Header
	body   []byte
}

// send makes one request on a fresh connection; headers come as name, value pairs.
func send(t *testing.T, method, url, body string, headers ...string) (reply, error) {
	t.Helper()
	return sendCtx(context.Background(), t, method, url, body, headers...)
}

func sendCtx(ctx context.Context, t *testing.T, method, url, body string, headers ...string) (reply, error) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		t.Fatalf("new request: %v", err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Add(headers[i], headers[i+1])
	}
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := hc.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return reply{}, err
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: b}, nil
}

func mustSend(t *testing.T, method, url, body string, headers ...string) reply {
	t.Helper()
	r, err := send(t, method, url, body, headers...)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	return r
}

func orderJSON(externalID string) string {
	return fmt.Sprintf(`{"external_id":%q,"source":"kaspi","number":"512344101","date":"2026-09-16T10:00:00",
		"customer":{"name":"Иван Петров","phone":"+77011234567","email":"ivan@example.kz"},
		"warehouse":"WH1","currency":"KZT",
		"lines":[{"sku":"SKU-8812","name":"Чайник","quantity":2,"price":1500.00,"amount":3000.00}],
		"total":3000,"comment":""}`, externalID)
}

func decodeJSON(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(bytes.TrimPrefix(b, bom), v); err != nil {
		t.Fatalf("decode %q: %v", b, err)
	}
}

type errorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Field   string `json:"field"`
	} `json:"error"`
	Order *order1C `json:"order"`
}

func TestOneCContract(t *testing.T) {
	t.Parallel()
	s, base := newSim(t, Options{})

	r := mustSend(t, "GET", base+"/ping", "")
	if got, want := r.status, 200; got != want {
		t.Fatalf("ping status = %d, want %d", got, want)
	}
	if got, want := string(r.body), `{"service":"ordersync","version":"1.0"}`; got != want {
		t.Fatalf("ping body = %s, want %s", got, want)
	}

	r = mustSend(t, "GET", base+"/orders?external_id=kaspi:1", "")
	if got, want := string(r.body), `{"orders":[]}`; r.status != 200 || got != want {
		t.Fatalf("find nothing = %d %s, want 200 %s", r.status, got, want)
	}

	r = mustSend(t, "POST", base+"/orders", orderJSON("kaspi:1"), "Content-Type", "application/json")
	if got, want := r.status, 201; got != want {
		t.Fatalf("create status = %d, want %d: %s", got, want, r.body)
	}
	var created struct{ Ref, Number, Date string }
	decodeJSON(t, r.body, &created)
	if !regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`).MatchString(created.Ref) {
		t.Fatalf("ref = %q, want a UUID", created.Ref)
	}
	if got, want := created.Number, "ЗК-000001"; got != want {
		t.Fatalf("number = %q, want %q", got, want)
	}
	if got, want := created.Date, "2026-09-16T10:00:00"; got != want {
		t.Fatalf("date = %q, want %q (zone-less, Asia/Almaty)", got, want)
	}

	r = mustSend(t, "GET", base+"/orders?external_id=kaspi:1", "")
	var found struct{ Orders []order1C }
	decodeJSON(t, r.body, &found)
	if got, want := len(found.Orders), 1; got != want {
		t.Fatalf("found %d orders, want %d", got, want)
	}
	got := found.Orders[0]
	if tot := decimal.Decimal(got.Total); tot.String() != "3000" {
		t.Fatalf("found total %s, want 3000", tot)
	}
	got.Total = exact{}
	if want := (order1C{Ref: created.Ref, Number: created.Number, Date: created.Date, ExternalID: "kaspi:1", Posted: true, Currency: "KZT"}); got != want {
		t.Fatalf("found %+v, want %+v", got, want)
	}

	orders := s.Orders()
	if got, want := len(orders), 1; got != want {
		t.Fatalf("Orders() holds %d, want %d", got, want)
	}
	o := orders[0]
	if got, want := o.Request.Customer.Name, "Иван Петров"; got != want {
		t.Fatalf("stored customer = %q, want %q", got, want)
	}
	if got, want := o.Request.Lines[0].Price.String(), "1500"; got != want {
		t.Fatalf("stored price = %s, want %s", got, want)
	}
	if !json.Valid(o.Body) || !bytes.Contains(o.Body, []byte(`"price":1500.00`)) {
		t.Fatalf("stored body is not the request as sent: %s", o.Body)
	}

	for i := range 2 { // idempotent
		r = mustSend(t, "POST", base+"/orders/cancel", `{"external_id":"kaspi:1","reason":"покупатель отказался"}`)
		if got, want := string(r.body), fmt.Sprintf(`{"ref":%q,"status":"cancelled"}`, created.Ref); r.status != 200 || got != want {
			t.Fatalf("cancel #%d = %d %s, want 200 %s", i+1, r.status, got, want)
		}
	}
	if o := s.Orders()[0]; !o.Cancelled || o.CancelReason != "покупатель отказался" {
		t.Fatalf("after cancel: cancelled=%v reason=%q", o.Cancelled, o.CancelReason)
	}
	r = mustSend(t, "POST", base+"/orders/cancel", `{"external_id":"kaspi:404","reason":"x"}`)
	if got, want := r.status, 404; got != want {
		t.Fatalf("cancel unknown status = %d, want %d", got, want)
	}

	s.SetStock("WH1",
		StockItem{SKU: "SKU-1", Quantity: decimal.RequireFromString("12.500"), Price: decimal.RequireFromString("0.1")},
		StockItem{SKU: "SKU-2", Quantity: decimal.RequireFromString("3"), Price: decimal.RequireFromString("12345678901234567890.123456789")},
	)
	r = mustSend(t, "GET", base+"/stock?warehouse=WH1", "")
	want := `{"warehouse":"WH1","taken_at":"2026-09-16T10:00:00","items":[{"sku":"SKU-1","quantity":12.5,"price":0.1},{"sku":"SKU-2","quantity":3,"price":12345678901234567890.123456789}]}`
	if got := string(r.body); r.status != 200 || got != want {
		t.Fatalf("stock = %d %s, want 200 %s", r.status, got, want)
	}
	s.SetStock("WH2")
	r = mustSend(t, "GET", base+"/stock?warehouse=WH2", "")
	if got, want := string(r.body), `{"warehouse":"WH2","taken_at":"2026-09-16T10:00:00","items":[]}`; got != want {
		t.Fatalf("empty stock = %s, want %s", got, want)
	}
	if r = mustSend(t, "GET", base+"/stock?warehouse=WH9", ""); r.status != 422 || !strings.Contains(string(r.body), "unknown_warehouse") {
		t.Fatalf("unknown warehouse = %d %s, want 422 unknown_warehouse", r.status, r.body)
	}

	if r := mustSend(t, "GET", base+"/nowhere", ""); r.status != 404 {
		t.Fatalf("unknown path status = %d, want 404", r.status)
	}
	if r := mustSend(t, "DELETE", base+"/orders", ""); r.status != 405 {
		t.Fatalf("DELETE /orders status = %d, want 405", r.status)
	}
	st := s.Stats()
	for op, want := range map[string]int{"ping": 1, "find": 2, "create": 1, "cancel": 3, "stock": 3, "other": 2} {
		if got := st.Requests[op]; got != want {
			t.Fatalf("Stats().Requests[%s] = %d, want %d (all: %v)", op, got, want, st.Requests)
		}
	}
}

func TestOneCCreateValidation(t *testing.T) {
	t.Parallel()
	line := func(q, p, a string) string {
		return fmt.Sprintf(`{"sku":"S","name":"n","quantity":%s,"price":%s,"amount":%s}`, q, p, a)
	}
	body := func(lines, total string) string {
		return fmt.Sprintf(`{"external_id":"x:1","lines":[%s],"total":%s}`, lines, total)
	}
	tests := []struct {
		name      string
		body      string
		status    int
		field     string
		wantTotal string // on success
	}{
		{"malformed JSON", `{"external_id":`, 400, "", ""},
		{"not an object", `[1,2]`, 422, "", ""},
		{"missing external_id", `{"lines":[` + line("1", "1", "1") + `],"total":1}`, 422, "external_id", ""},
		{"no lines", `{"external_id":"x:1","lines":[],"total":0}`, 422, "lines", ""},
		{"missing sku", body(`{"quantity":1,"price":1,"amount":1}`, "1"), 422, "lines[0].sku", ""},
		{"zero quantity", body(line("0", "1", "0"), "0"), 422, "lines[0].quantity", ""},
		{"negative quantity", body(line("-1", "1", "-1"), "-1"), 422, "lines[0].quantity", ""},
		{"quantity as string", body(line(`"2"`, "1", "2"), "2"), 422, "lines[0].quantity", ""},
		{"missing amount", body(`{"sku":"S","quantity":1,"price":1}`, "1"), 422, "lines[0].amount", ""},
		{"negative price", body(line("1", "-1", "-1"), "-1"), 422, "lines[0].price", ""},
		{"amount is not quantity × price", body(line("3", "0.1", "0.30000000000000004"), "0.30000000000000004"), 422, "lines[0].amount", ""},
		{"total is not the sum", body(line("1", "0.1", "0.1")+","+line("1", "0.2", "0.2"), "0.30000000000000004"), 422, "total", ""},
		{"missing total", `{"external_id":"x:1","lines":[` + line("1", "1", "1") + `]}`, 422, "total", ""},
		{"second line wrong", body(line("1", "1", "1")+","+line("2", "2", "5"), "6"), 422, "lines[1].amount", ""},
		{"0.1 + 0.2 is exactly 0.3", body(line("1", "0.1", "0.1")+","+line("1", "0.2", "0.2"), "0.3"), 201, "", "0.3"},
		{"fractional quantity", body(line("1.5", "0.1", "0.15"), "0.150"), 201, "", "0.15"},
		{"exponent form", body(line("1", "1e3", "1000"), "1E3"), 201, "", "1000"},
		{"beyond float64", body(line("1", "12345678901234567890.123456789", "12345678901234567890.123456789"), "12345678901234567890.123456789"), 201, "", "12345678901234567890.123456789"},
		{"BOM in request", "\uFEFF" + body(line("1", "1", "1"), "1"), 201, "", "1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, base := newSim(t, Options{})
			r := mustSend(t, "POST", base+"/orders", tt.body)
			if got, want := r.status, tt.status; got != want {
				t.Fatalf("status = %d, want %d: %s", got, want, r.body)
			}
			if tt.status != 201 {
				var e errorBody
				decodeJSON(t, r.body, &e)
				if e.Error.Message == "" || e.Error.Code == "" {
					t.Fatalf("error body lacks code or message: %s", r.body)
				}
				if got, want := e.Error.Field, tt.field; got != want {
					t.Fatalf("field = %q, want %q (%s)", got, want, e.Error.Message)
				}
				if got := s.Count(); got != 0 {
					t.Fatalf("Count() = %d after a rejected create, want 0", got)
				}
				return
			}
			if got := s.Count(); got != 1 {
				t.Fatalf("Count() = %d, want 1", got)
			}
			if got, want := s.Orders()[0].Request.Total.String(), tt.wantTotal; got != want {
				t.Fatalf("stored total = %s, want %s", got, want)
			}
		})
	}
}

func TestOneCKnownSKUs(t *testing.T) {
	t.Parallel()
	s, base := newSim(t, Options{KnownSKUs: []string{"A"}})
	body := `{"external_id":"x:1","lines":[{"sku":"A","quantity":1,"price":1,"amount":1},{"sku":"B","quantity":1,"price":1,"amount":1}],"total":2}`
	r := mustSend(t, "POST", base+"/orders", body)
	var e errorBody
	decodeJSON(t, r.body, &e)
	if r.status != 422 || e.Error.Code != "unknown_sku" || e.Error.Field != "lines[1].sku" {
		t.Fatalf("unknown SKU = %d %s, want 422 unknown_sku lines[1].sku", r.status, r.body)
	}
	if got := s.Count(); got != 0 {
		t.Fatalf("Count() = %d, want 0", got)
	}
	s.SetKnownSKUs([]string{"A", "B"}) // the cause is fixed in 1C
	if r := mustSend(t, "POST", base+"/orders", body); r.status != 201 {
		t.Fatalf("after SetKnownSKUs status = %d, want 201: %s", r.status, r.body)
	}
	s.SetKnownSKUs(nil)
	if r := mustSend(t, "POST", base+"/orders", strings.Replace(body, `"B"`, `"C"`, 1)); r.status != 201 {
		t.Fatalf("with no catalogue status = %d, want 201", r.status)
	}
}

func TestOneCFaults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		fault     sim.Fault
		status    int    // 0: the connection is dropped
		text      string // in the answer
		wantCount int    // orders after the faulty create
	}{
		{sim.Fault{Status: 503}, 503, "", 0},
		{sim.Fault{Status: 502}, 502, "", 0},
		{sim.Fault{Status: 504}, 504, "", 0},
		{sim.Fault{Status: 406}, 406, "лицензи", 0},
		{sim.Fault{Kind: LockConflict500}, 500, `{"error":{"code":"lock_conflict","message":"{ОбщийМодуль.ordersync.Модуль(118)}: Ошибка при вызове метода контекста (Записать)`, 0},
		{sim.Fault{Kind: BusinessError500}, 500, `"code":"exception"`, 0},
		{sim.Fault{Status: 422}, 422, `"error"`, 0},
		{sim.Fault{Kind: HTMLLogin200}, 200, "<html", 0},
		{sim.Fault{Kind: HTML404}, 404, "<html>", 0},
		{sim.Fault{Kind: DropBeforeCreate}, 0, "", 0},
		{sim.Fault{Kind: DropAfterCreate}, 0, "", 1},
	}
	for _, tt := range tests {
		t.Run(FaultName(tt.fault), func(t *testing.T) {
			t.Parallel()
			s, base := newSim(t, Options{})
			f := tt.fault
			f.Op = "create"
			s.Faults.Add(1, f)
			r, err := send(t, "POST", base+"/orders", orderJSON("kaspi:1"))
			if tt.status == 0 {
				if err == nil {
					t.Fatalf("got an answer %d %s, want a dropped connection", r.status, r.body)
				}
				if got, want := s.Stats().ConnectionsDropped, 1; got != want {
					t.Fatalf("ConnectionsDropped = %d, want %d", got, want)
				}
			} else {
				if err != nil {
					t.Fatalf("create: %v", err)
				}
				if got, want := r.status, tt.status; got != want {
					t.Fatalf("status = %d, want %d", got, want)
				}
				if !strings.Contains(string(r.body), tt.text) {
					t.Fatalf("answer %q does not contain %q", r.body, tt.text)
				}
			}
			if got, want := s.Count(), tt.wantCount; got != want {
				t.Fatalf("Count() = %d, want %d", got, want)
			}
			if got, want := s.Stats().FaultsFired, 1; got != want {
				t.Fatalf("FaultsFired = %d, want %d", got, want)
			}
			// The fault fired once; the next create goes through.
			if r := mustSend(t, "POST", base+"/orders", orderJSON("kaspi:1")); r.status != 201 {
				t.Fatalf("create after the fault: %d %s, want 201", r.status, r.body)
			}
			if got, want := s.CountExternal("kaspi:1"), tt.wantCount+1; got != want {
				t.Fatalf("CountExternal = %d, want %d", got, want)
			}
		})
	}
}

func TestOneCFaultStall(t *testing.T) {
	t.Parallel()
	t.Run("until the client gives up, then the order is created", func(t *testing.T) {
		t.Parallel()
		s, base := newSim(t, Options{})
		s.Faults.Add(1, sim.Fault{Op: "create", Kind: Stall})
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		if r, err := sendCtx(ctx, t, "POST", base+"/orders", orderJSON("kaspi:1")); err == nil {
			t.Fatalf("got an answer %d, want the client to give up", r.status)
		}
		wctx, wcancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer wcancel()
		if err := s.WaitIdle(wctx); err != nil {
			t.Fatal(err)
		}
		if got, want := s.Count(), 1; got != want {
			t.Fatalf("Count() = %d, want %d: a stalled create still creates", got, want)
		}
	})
	t.Run("with a delay, answers normally", func(t *testing.T) {
		t.Parallel()
		s, base := newSim(t, Options{})
		s.Faults.Add(1, sim.Fault{Op: "find", Kind: Stall, Delay: 20 * time.Millisecond})
		if r := mustSend(t, "GET", base+"/orders?external_id=a", ""); r.status != 200 {
			t.Fatalf("stalled find = %d, want 200", r.status)
		}
		if got := s.Stats().FaultsFired; got != 1 {
			t.Fatalf("FaultsFired = %d, want 1", got)
		}
	})
}

func TestOneCFaultMatching(t *testing.T) {
	t.Parallel()
	s, base := newSim(t, Options{})
	s.Faults.Add(1, sim.Fault{Op: "create", Status: 503, ExternalID: "kaspi:2"})
	s.Faults.Add(2, sim.Fault{Status: 502})
	s.Faults.Add(sim.Forever, sim.Fault{Op: "stock", Status: 406})
	s.SetStock("WH1")

	status := func(method, path, body string) int {
		t.Helper()
		return mustSend(t, method, base+path, body).status
	}
	// FIFO among matching faults: the create of kaspi:1 skips the first fault.
	if got, want := status("POST", "/orders", orderJSON("kaspi:1")), 502; got != want {
		t.Fatalf("create kaspi:1 = %d, want %d", got, want)
	}
	if got, want := status("POST", "/orders", orderJSON("kaspi:2")), 503; got != want {
		t.Fatalf("create kaspi:2 = %d, want %d", got, want)
	}
	if got, want := status("GET", "/ping", ""), 502; got != want {
		t.Fatalf("ping = %d, want %d", got, want)
	}
	if got, want := status("GET", "/ping", ""), 200; got != want {
		t.Fatalf("ping after faults = %d, want %d", got, want)
	}
	for range 3 {
		if got, want := status("GET", "/stock?warehouse=WH1", ""), 406; got != want {
			t.Fatalf("stock under a forever fault = %d, want %d", got, want)
		}
	}
	if got, want := s.Faults.Pending(), 1; got != want {
		t.Fatalf("PendingFaults = %d, want %d", got, want)
	}
	if got, want := s.Stats().FaultsFired, 6; got != want {
		t.Fatalf("FaultsFired = %d, want %d", got, want)
	}
	s.Faults.Clear()
	if got, want := status("GET", "/stock?warehouse=WH1", ""), 200; got != want {
		t.Fatalf("stock after ClearFaults = %d, want %d", got, want)
	}
	if got := s.Count(); got != 0 {
		t.Fatalf("Count() = %d, want 0", got)
	}
}

func TestOneCDuplicates(t *testing.T) {
	t.Parallel()
	const n = 16
	createConcurrently := func(t *testing.T, base string) []reply {
		t.Helper()
		replies := make([]reply, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				replies[i], errs[i] = send(t, "POST", base+"/orders", orderJSON("kaspi:dup"))
			})
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatalf("create: %v", err)
			}
		}
		return replies
	}

	t.Run("a naive base creates every copy", func(t *testing.T) {
		t.Parallel()
		s, base := newSim(t, Options{})
		for _, r := range createConcurrently(t, base) {
			if r.status != 201 {
				t.Fatalf("status = %d, want 201", r.status)
			}
		}
		if got, want := s.CountExternal("kaspi:dup"), n; got != want {
			t.Fatalf("CountExternal = %d, want %d", got, want)
		}
		var found struct{ Orders []order1C }
		decodeJSON(t, mustSend(t, "GET", base+"/orders?external_id=kaspi:dup", "").body, &found)
		if got, want := len(found.Orders), n; got != want {
			t.Fatalf("find lists %d, want %d", got, want)
		}
	})
	t.Run("the reference module creates one and answers 409 with it", func(t *testing.T) {
		t.Parallel()
		s, base := newSim(t, Options{Dedupe: true})
		var created, conflicts int
		var refs []string
		for _, r := range createConcurrently(t, base) {
			switch r.status {
			case 201:
				created++
				var c struct{ Ref string }
				decodeJSON(t, r.body, &c)
				refs = append(refs, c.Ref)
			case 409:
				conflicts++
				var e errorBody
				decodeJSON(t, r.body, &e)
				if e.Order == nil || e.Error.Code != "already_exists" {
					t.Fatalf("409 body = %s, want the error and the order", r.body)
				}
				refs = append(refs, e.Order.Ref)
			default:
				t.Fatalf("status = %d, want 201 or 409", r.status)
			}
		}
		if created != 1 || conflicts != n-1 {
			t.Fatalf("created %d, conflicts %d; want 1 and %d", created, conflicts, n-1)
		}
		if got, want := s.CountExternal("kaspi:dup"), 1; got != want {
			t.Fatalf("CountExternal = %d, want %d", got, want)
		}
		for _, ref := range refs {
			if ref != s.Orders()[0].Ref {
				t.Fatalf("ref %s, want every answer to name %s", ref, s.Orders()[0].Ref)
			}
		}
	})
}

func TestOneCSessions(t *testing.T) {
	t.Parallel()
	s, base := newSim(t, Options{})
	r := mustSend(t, "GET", base+"/ping", "", "IBSession", "start")
	var cookie *http.Cookie
	for _, c := range (&http.Response{Header: r.header}).Cookies() {
		if c.Name == "ibsession" {
			cookie = c
		}
	}
	if r.status != 200 || cookie == nil || cookie.Value == "" {
		t.Fatalf("start: status %d, Set-Cookie %q; want 200 and an ibsession cookie", r.status, r.header.Values("Set-Cookie"))
	}
	for range 3 {
		if r := mustSend(t, "GET", base+"/ping", "", "Cookie", "ibsession="+cookie.Value); r.status != 200 || r.header.Get("Set-Cookie") != "" {
			t.Fatalf("reuse: status %d, Set-Cookie %q; want 200 and no new cookie", r.status, r.header.Get("Set-Cookie"))
		}
	}
	r = mustSend(t, "GET", base+"/ping", "", "Cookie", "ibsession=00000000-0000-0000-0000-000000000000")
	if r.status != 400 || !strings.Contains(string(r.body), "Сеанс отсутствует или удален") {
		t.Fatalf("unknown session = %d %s, want 400 «Сеанс отсутствует или удален»", r.status, r.body)
	}
	// ExpireSessions as a fault: this very request is refused, and the session is gone.
	s.Faults.Add(1, sim.Fault{Op: "find", Kind: ExpireSessions})
	r = mustSend(t, "GET", base+"/orders?external_id=a", "", "Cookie", "ibsession="+cookie.Value)
	if r.status != 400 {
		t.Fatalf("after ExpireSessions = %d, want 400", r.status)
	}
	if r := mustSend(t, "GET", base+"/ping", "", "Cookie", "ibsession="+cookie.Value); r.status != 400 {
		t.Fatalf("expired session reused = %d, want 400", r.status)
	}
	// finish ends a session.
	r = mustSend(t, "GET", base+"/ping", "", "IBSession", "start")
	id := strings.TrimPrefix(strings.Split(r.header.Get("Set-Cookie"), ";")[0], "ibsession=")
	mustSend(t, "GET", base+"/ping", "", "Cookie", "ibsession="+id, "IBSession", "finish")
	if got := s.Sessions(); got != 0 {
		t.Fatalf("Sessions() = %d after finish, want 0", got)
	}
	st := s.Stats()
	if st.SessionsStarted != 2 || st.SessionsRejected != 3 || st.SessionConflicts != 0 {
		t.Fatalf("stats = %+v, want 2 started, 3 rejected, no conflicts", st)
	}
	if got := s.Count(); got != 0 {
		t.Fatalf("Count() = %d, want 0", got)
	}
}

func TestOneCAuth(t *testing.T) {
	t.Parallel()
	basic := func(user, pass string) string {
		return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
	}
	const user, pass = "Обмен с маркетплейсами", "пароль-1"
	tests := []struct {
		name   string
		mode   AuthFailureMode
		auth   string
		status int
		ctype  string
	}{
		{"UTF-8 credentials accepted", AuthHTML200, basic(user, pass), 201, "application/json"},
		{"missing credentials, HTML 200", AuthHTML200, "", 200, "text/html"},
		{"wrong password, HTML 200", AuthHTML200, basic(user, "nope"), 200, "text/html"},
		{"wrong user, 401", AuthStatus401, basic("ordersync", pass), 401, "text/plain"},
		{"missing credentials, 401", AuthStatus401, "", 401, "text/plain"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, base := newSim(t, Options{Username: user, Password: pass, AuthFailure: tt.mode})
			var hdr []string
			if tt.auth != "" {
				hdr = []string{"Authorization", tt.auth}
			}
			r := mustSend(t, "POST", base+"/orders", orderJSON("kaspi:1"), hdr...)
			if r.status != tt.status || !strings.HasPrefix(r.header.Get("Content-Type"), tt.ctype) {
				t.Fatalf("= %d %s, want %d %s", r.status, r.header.Get("Content-Type"), tt.status, tt.ctype)
			}
			if tt.status == 401 && r.header.Get("WWW-Authenticate") == "" {
				t.Fatal("401 without WWW-Authenticate")
			}
			wantCount, wantFailures := 0, 1
			if tt.status == 201 {
				wantCount, wantFailures = 1, 0
			}
			if got := s.Count(); got != wantCount {
				t.Fatalf("Count() = %d, want %d", got, wantCount)
			}
			if got := s.Stats().AuthFailures; got != wantFailures {
				t.Fatalf("AuthFailures = %d, want %d", got, wantFailures)
			}
		})
	}
}

func TestOneCBOM(t *testing.T) {
	t.Parallel()
	_, base := newSim(t, Options{BOM: true})
	for _, tt := range []struct{ method, path, body string }{
		{"GET", "/ping", ""},
		{"POST", "/orders", orderJSON("kaspi:1")},
		{"GET", "/orders?external_id=kaspi:1", ""},
		{"POST", "/orders", `{"external_id":""}`},
	} {
		r := mustSend(t, tt.method, base+tt.path, tt.body)
		if !bytes.HasPrefix(r.body, bom) {
			t.Fatalf("%s %s = %q, want a leading BOM", tt.method, tt.path, r.body)
		}
		if !json.Valid(bytes.TrimPrefix(r.body, bom)) {
			t.Fatalf("%s %s: not JSON after the BOM: %q", tt.method, tt.path, r.body)
		}
	}
}

func TestOneCLatency(t *testing.T) {
	t.Parallel()
	s, base := newSim(t, Options{})
	s.SetLatency(time.Hour) // ends when the client gives up
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	if _, err := sendCtx(ctx, t, "GET", base+"/ping", ""); err == nil {
		t.Fatal("got an answer through an hour of latency")
	}
	s.SetLatency(0)
	if r := mustSend(t, "GET", base+"/ping", ""); r.status != 200 {
		t.Fatalf("ping = %d, want 200", r.status)
	}
}

func TestOneCOpLatencyAppliesToItsOperationOnly(t *testing.T) {
	t.Parallel()
	_, base := newSim(t, Options{OpLatency: map[string]time.Duration{"create": time.Hour}})
	if r := mustSend(t, "GET", base+"/orders?external_id=kaspi:1", ""); r.status != 200 {
		t.Fatalf("find = %d, want 200 at once", r.status)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	if _, err := sendCtx(ctx, t, "POST", base+"/orders", orderJSON("kaspi:1")); err == nil {
		t.Fatal("a create answered through an hour of create latency")
	}
}

func TestOneCControl(t *testing.T) {
	t.Parallel()
	s, base := newSim(t, Options{Username: "u", Password: "p", AuthFailure: AuthStatus401})
	auth := []string{"Authorization", "Basic " + base64.StdEncoding.EncodeToString([]byte("u:p"))}
	remote, err := NewRemote(base) // the base URL works: only the host is used
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	if err := remote.AddFaults(ctx, 1, sim.Fault{Op: "create", Kind: DropAfterCreate}); err != nil {
		t.Fatal(err)
	}
	if _, err := send(t, "POST", base+"/orders", orderJSON("kaspi:1"), auth...); err == nil {
		t.Fatal("a fault injected over HTTP did not drop the connection")
	}
	orders, err := remote.Orders(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(orders) != 1 || orders[0].ExternalID != "kaspi:1" || orders[0].Request.Lines[0].Amount.String() != "3000" {
		t.Fatalf("remote orders = %+v, want kaspi:1 with its request", orders)
	}
	if n, err := remote.CountExternal(ctx, "kaspi:1"); err != nil || n != 1 {
		t.Fatalf("remote CountExternal = %d, %v; want 1", n, err)
	}

	if err := remote.SetKnownSKUs(ctx, []string{"OTHER"}); err != nil {
		t.Fatal(err)
	}
	if r := mustSend(t, "POST", base+"/orders", orderJSON("kaspi:2"), auth...); r.status != 422 {
		t.Fatalf("create with unknown SKU = %d, want 422", r.status)
	}
	if err := remote.SetKnownSKUs(ctx, nil); err != nil {
		t.Fatal(err)
	}

	if err := remote.SetStock(ctx, "WH1", StockItem{SKU: "A", Quantity: decimal.RequireFromString("0.1"), Price: decimal.RequireFromString("12345678901234567890.123456789")}); err != nil {
		t.Fatal(err)
	}
	r := mustSend(t, "GET", base+"/stock?warehouse=WH1", "", auth...)
	if !bytes.Contains(r.body, []byte(`{"sku":"A","quantity":0.1,"price":12345678901234567890.123456789}`)) {
		t.Fatalf("stock after remote SetStock = %s", r.body)
	}

	if err := remote.SetLatency(ctx, 250*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	latency := s.latency
	s.mu.Unlock()
	if latency != 250*time.Millisecond {
		t.Fatalf("latency = %s, want 250ms", latency)
	}
	if err := remote.SetLatency(ctx, 0); err != nil {
		t.Fatal(err)
	}

	st, err := remote.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Requests["create"] != 2 || st.ConnectionsDropped != 1 || st.FaultsFired != 1 {
		t.Fatalf("remote stats = %+v", st)
	}

	// Raw control requests: kinds by name, errors for nonsense.
	r = mustSend(t, "POST", strings.TrimSuffix(base, s.Prefix())+"/_sim/faults", `{"op":"ping","kind":"status_503","times":2}`)
	if r.status != 200 || s.Faults.Pending() != 1 {
		t.Fatalf("POST /_sim/faults = %d %s, pending %d", r.status, r.body, s.Faults.Pending())
	}
	r = mustSend(t, "POST", strings.TrimSuffix(base, s.Prefix())+"/_sim/faults", `{"kind":"meteor_strike"}`)
	if r.status != 400 {
		t.Fatalf("unknown kind = %d, want 400", r.status)
	}
	if err := remote.ClearFaults(ctx); err != nil || s.Faults.Pending() != 0 {
		t.Fatalf("ClearFaults: %v, pending %d", err, s.Faults.Pending())
	}
	if err := remote.ExpireSessions(ctx); err != nil {
		t.Fatal(err)
	}
	r = mustSend(t, "GET", strings.TrimSuffix(base, s.Prefix())+"/_sim/nothing", "")
	if r.status != 404 {
		t.Fatalf("unknown control endpoint = %d, want 404", r.status)
	}
}

func TestFaultJSON(t *testing.T) {
	t.Parallel()
	for _, name := range FaultNames() {
		k, err := ParseFault(name)
		if err != nil {
			t.Fatal(err)
		}
		k.Op, k.Delay, k.Hold, k.ExternalID = "create", 1500*time.Millisecond, 3*time.Second, "kaspi:1"
		f := ControlFault{Fault: k, Times: -1}
		b, err := json.Marshal(f)
		if err != nil {
			t.Fatal(err)
		}
		var back ControlFault
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		if back != f {
			t.Fatalf("round trip of %s = %+v, want %+v", b, back, f)
		}
	}
	var f ControlFault
	if err := json.Unmarshal([]byte(`{"op":"delete","kind":"stall"}`), &f); err == nil {
		t.Fatal("an unknown op was accepted")
	}
	if err := json.Unmarshal([]byte(`{"kind":"gateway_504_after","hold":"-1s"}`), &f); err == nil {
		t.Fatal("a negative hold was accepted")
	}
	if err := json.Unmarshal([]byte(`{"kind":"gateway_504_after","delay":"1s","hold":"3s"}`), &f); err != nil || f.Fault.Kind != Gateway504After || f.Fault.Hold != 3*time.Second {
		t.Fatalf("gateway_504_after = %+v, %v", f, err)
	}
}

func TestOneCStartClose(t *testing.T) {
	t.Parallel()
	s := New(Options{Prefix: "/base/hs/ordersync/v1/"})
	if s.URL() != "" {
		t.Fatalf("URL before Start = %q, want empty", s.URL())
	}
	s.Close() // before Start: harmless
	s = New(Options{Prefix: "/base/hs/ordersync/v1/"})
	if err := s.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !strings.HasSuffix(s.URL(), "/base/hs/ordersync/v1") {
		t.Fatalf("URL = %q", s.URL())
	}
	if r := mustSend(t, "GET", s.URL()+"/ping", ""); r.status != 200 {
		t.Fatalf("ping = %d, want 200", r.status)
	}
	s.Close()
	s.Close()
	if _, err := send(t, "GET", s.URL()+"/ping", ""); err == nil {
		t.Fatal("served after Close")
	}
}

// A base set to date orders by the request dates the document by the order's date,
// and by the time of creation otherwise.
func TestOneCOrderDateFromRequest(t *testing.T) {
	t.Parallel()
	for _, fromRequest := range []bool{false, true} {
		s, base := newSim(t, Options{OrderDateFromRequest: fromRequest})
		body := strings.Replace(orderJSON("kaspi:512344101"), "2026-09-16T10:00:00", "2026-09-01T08:30:00", 1)
		if r := mustSend(t, "POST", base+"/orders", body); r.status != 201 {
			t.Fatalf("create: %d %s", r.status, r.body)
		}
		want := testNow.In(s.loc).Format(dateLayout)
		if fromRequest {
			want = "2026-09-01T08:30:00"
		}
		if got := s.Orders()[0].Date; got != want {
			t.Errorf("from request %v: the document's date %q, want %q", fromRequest, got, want)
		}
	}
}
