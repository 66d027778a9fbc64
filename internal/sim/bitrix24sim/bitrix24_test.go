package bitrix24sim

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/ordersync/ordersync/internal/sim"
)

var b24TestNow = time.Date(2026, 9, 16, 10, 0, 0, 0, time.FixedZone("+05", 5*3600))

func newB24Test(t *testing.T, opts Options) (*Bitrix24, string) {
	t.Helper()
	if opts.Now == nil {
		opts.Now = func() time.Time { return b24TestNow }
	}
	s := New(opts)
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return s, s.RESTURL(ts.URL)
}

type b24Reply struct {
	status int
	body   []byte
}

// b24Do sends one request: GET with params in the query, or POST with params as a
// form (contentType "form") or JSON ("json").
func b24Do(t *testing.T, rest, method, how string, params map[string]any) b24Reply {
	t.Helper()
	var req *http.Request
	var err error
	switch how {
	case "get":
		q := url.Values{}
		for k, v := range params {
			q.Set(k, toString(v))
		}
		req, err = http.NewRequest(http.MethodGet, rest+method+"?"+q.Encode(), nil)
	case "form":
		q := url.Values{}
		for k, v := range params {
			q.Set(k, toString(v))
		}
		req, err = http.NewRequest(http.MethodPost, rest+method, strings.NewReader(q.Encode()))
		if req != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
	default:
		b, _ := json.Marshal(params)
		req, err = http.NewRequest(http.MethodPost, rest+method, bytes.NewReader(b))
		if req != nil {
			req.Header.Set("Content-Type", "application/json")
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", how, method, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b24Reply{status: resp.StatusCode, body: b}
}

func toString(v any) string {
	switch v := v.(type) {
	case string:
		return v
	default:
		b, _ := json.Marshal(v)
		return string(b)
	}
}

// b24Result decodes a successful envelope's result, numbers kept exact.
func b24Result(t *testing.T, r b24Reply, v any) {
	t.Helper()
	if r.status != http.StatusOK {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	var env struct {
		Result json.RawMessage            `json:"result"`
		Time   map[string]json.RawMessage `json:"time"`
	}
	if err := json.Unmarshal(r.body, &env); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
	for _, k := range []string{"start", "finish", "duration", "date_start", "date_finish"} {
		if _, ok := env.Time[k]; !ok {
			t.Errorf("envelope time has no %q: %s", k, r.body)
		}
	}
	dec := json.NewDecoder(bytes.NewReader(env.Result))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("decode result %s: %v", env.Result, err)
	}
}

func b24Err(t *testing.T, r b24Reply) (code, descr string) {
	t.Helper()
	var e struct {
		Error       *string `json:"error"`
		Description string  `json:"error_description"`
	}
	if err := json.Unmarshal(r.body, &e); err != nil || e.Error == nil {
		t.Fatalf("not a Bitrix24 error body (status %d): %s", r.status, r.body)
	}
	return *e.Error, e.Description
}

func b24Deal() Deal {
	return Deal{
		ID: "42", Title: "Заказ с сайта", StageID: "WON", CurrencyID: "KZT",
		DateCreate: time.Date(2026, 9, 15, 14, 29, 0, 0, time.FixedZone("+05", 5*3600)),
		ContactID:  "7", Comments: "позвонить",
		Rows: []Row{
			{ProductID: 450, ProductName: "Чайник", Price: decimal.RequireFromString("1500.00"),
				Quantity: decimal.NewFromInt(2), Discount: decimal.RequireFromString("150.50"), XMLID: "SKU-8812"},
			{ProductName: "Доставка", Price: decimal.RequireFromString("990"), Quantity: decimal.NewFromInt(1)},
		},
	}
}

func TestBitrix24DealGetEveryWayTheRealOneAccepts(t *testing.T) {
	t.Parallel()
	s, rest := newB24Test(t, Options{})
	s.AddDeal(b24Deal())
	for _, how := range []string{"get", "form", "json"} {
		for _, key := range []string{"id", "ID"} {
			var d map[string]any
			b24Result(t, b24Do(t, rest, DealGet, how, map[string]any{key: "42"}), &d)
			if d["ID"] != "42" || d["STAGE_ID"] != "WON" || d["CURRENCY_ID"] != "KZT" || d["CONTACT_ID"] != "7" {
				t.Errorf("%s %s: deal = %v", how, key, d)
			}
			if d["DATE_CREATE"] != "2026-09-15T14:29:00+05:00" {
				t.Errorf("%s: DATE_CREATE = %v, want ISO 8601 with the offset", how, d["DATE_CREATE"])
			}
			// 2 × (1500.00 − 150.50) + 990 = 3689.00, a string as the portal sends it.
			if d["OPPORTUNITY"] != "3689.00" {
				t.Errorf("%s: OPPORTUNITY = %v, want \"3689.00\"", how, d["OPPORTUNITY"])
			}
		}
	}
	// The .json suffix and a JSON number id are accepted too.
	var d map[string]any
	b24Result(t, b24Do(t, rest, DealGet+".json", "json", map[string]any{"id": 42}), &d)
	if d["ID"] != "42" {
		t.Errorf("crm.deal.get.json = %v", d)
	}
	if got := s.RequestCount(DealGet); got != 7 {
		t.Errorf("RequestCount = %d, want 7", got)
	}
}

func TestBitrix24ProductRows(t *testing.T) {
	t.Parallel()
	for _, strs := range []bool{false, true} {
		s, rest := newB24Test(t, Options{RowNumbersAsStrings: strs})
		s.AddDeal(b24Deal())
		var rows []map[string]any
		b24Result(t, b24Do(t, rest, DealProductRow, "json", map[string]any{"id": "42"}), &rows)
		if len(rows) != 2 {
			t.Fatalf("rows = %v", rows)
		}
		want := []struct{ price, netto, qty, discount string }{
			{"1349.5", "1500", "2", "150.5"},
			{"990", "990", "1", "0"},
		}
		if strs {
			want = []struct{ price, netto, qty, discount string }{
				{"1349.50", "1500.00", "2", "150.50"},
				{"990.00", "990.00", "1", "0.00"},
			}
		}
		for i, w := range want {
			r := rows[i]
			for field, v := range map[string]string{"PRICE": w.price, "PRICE_NETTO": w.netto, "QUANTITY": w.qty, "DISCOUNT_SUM": w.discount} {
				got := r[field]
				if _, isNum := got.(json.Number); isNum == strs {
					t.Errorf("strings=%v: row %d %s = %#v: wrong JSON type", strs, i, field, got)
				}
				if toPlain(got) != v {
					t.Errorf("strings=%v: row %d %s = %v, want %s", strs, i, field, got, v)
				}
			}
		}
		if rows[0]["PRODUCT_ID"] != json.Number("450") || rows[0]["PRODUCT_NAME"] != "Чайник" {
			t.Errorf("row 0 = %v", rows[0])
		}
		if rows[1]["PRODUCT_ID"] != json.Number("0") {
			t.Errorf("a row typed by hand has PRODUCT_ID %v, want 0", rows[1]["PRODUCT_ID"])
		}
		if rows[0]["XML_ID"] != nil {
			t.Errorf("the row's own XML_ID = %v: the product's XML_ID belongs to crm.product.get", rows[0]["XML_ID"])
		}
	}
}

func toPlain(v any) string {
	switch v := v.(type) {
	case json.Number:
		return v.String()
	case string:
		return v
	}
	return ""
}

func TestBitrix24ProductContactCompany(t *testing.T) {
	t.Parallel()
	s, rest := newB24Test(t, Options{})
	s.AddProduct(Product{ID: 77, Name: "Утюг", XMLID: "a1b2", Code: "utyug", Properties: map[string]string{"PROPERTY_104": "ART-77"}})
	d := b24Deal()
	d.Rows = append(d.Rows, Row{ProductID: 77, ProductName: "Утюг", Price: decimal.NewFromInt(5), Quantity: decimal.NewFromInt(1)})
	s.AddDeal(d)
	s.AddContact(Contact{ID: "7", Name: "Иван", LastName: "Петров", Phones: []string{"+77011234567"}, Emails: []string{"ivan@example.kz"}})
	s.AddCompany(Company{ID: "9", Title: "ТОО Ромашка"})

	var p map[string]any
	b24Result(t, b24Do(t, rest, ProductGet, "json", map[string]any{"id": 450}), &p)
	if p["XML_ID"] != "SKU-8812" || p["NAME"] != "Чайник" {
		t.Errorf("product 450 (from the deal's row) = %v", p)
	}
	b24Result(t, b24Do(t, rest, ProductGet, "get", map[string]any{"id": "77"}), &p)
	prop, _ := p["PROPERTY_104"].(map[string]any)
	if p["XML_ID"] != "a1b2" || p["CODE"] != "utyug" || prop["value"] != "ART-77" || prop["valueId"] == nil {
		t.Errorf("product 77 = %v", p)
	}

	var c map[string]any
	b24Result(t, b24Do(t, rest, ContactGet, "form", map[string]any{"id": "7"}), &c)
	phones, _ := c["PHONE"].([]any)
	first, _ := phones[0].(map[string]any)
	if c["NAME"] != "Иван" || c["LAST_NAME"] != "Петров" || len(phones) != 1 || first["VALUE"] != "+77011234567" {
		t.Errorf("contact = %v", c)
	}
	var co map[string]any
	b24Result(t, b24Do(t, rest, CompanyGet, "json", map[string]any{"id": "9"}), &co)
	if co["TITLE"] != "ТОО Ромашка" {
		t.Errorf("company = %v", co)
	}
	if _, has := co["PHONE"]; has {
		t.Errorf("a company without phones has PHONE: the portal omits an empty multiple field")
	}
}

func TestBitrix24Errors(t *testing.T) {
	t.Parallel()
	s, rest := newB24Test(t, Options{UserID: "3", Code: "rightcode"})
	s.AddDeal(b24Deal())

	wrong := strings.Replace(rest, "rightcode", "wrongcode", 1)
	r := b24Do(t, wrong, DealGet, "json", map[string]any{"id": "42"})
	if code, _ := b24Err(t, r); r.status != http.StatusUnauthorized || code != "INVALID_CREDENTIALS" {
		t.Errorf("wrong code: %d %s", r.status, r.body)
	}
	wrongUser := strings.Replace(rest, "/rest/3/", "/rest/1/", 1)
	if r := b24Do(t, wrongUser, DealGet, "json", map[string]any{"id": "42"}); r.status != http.StatusUnauthorized {
		t.Errorf("wrong user id: %d %s", r.status, r.body)
	}
	if got := s.AuthFailures(); got != 2 {
		t.Errorf("AuthFailures = %d, want 2", got)
	}

	r = b24Do(t, rest, DealGet, "json", map[string]any{"id": "999"})
	if code, descr := b24Err(t, r); r.status != http.StatusBadRequest || code != "" || descr != "Not found" {
		t.Errorf("unknown deal: %d %s", r.status, r.body)
	}
	r = b24Do(t, rest, DealGet, "json", map[string]any{"id": "abc"})
	if _, descr := b24Err(t, r); r.status != http.StatusBadRequest || !strings.Contains(descr, "ID is not defined") {
		t.Errorf("bad id: %d %s", r.status, r.body)
	}
	r = b24Do(t, rest, "crm.lead.get", "json", map[string]any{"id": "1"})
	if code, _ := b24Err(t, r); r.status != http.StatusNotFound || code != "ERROR_METHOD_NOT_FOUND" {
		t.Errorf("other method: %d %s", r.status, r.body)
	}

	s2, rest2 := newB24Test(t, Options{NotFoundError: "NOT_FOUND"})
	_ = s2
	r = b24Do(t, rest2, ContactGet, "json", map[string]any{"id": "5"})
	if code, _ := b24Err(t, r); r.status != http.StatusBadRequest || code != "NOT_FOUND" {
		t.Errorf("NotFoundError option: %d %s", r.status, r.body)
	}
}

func TestBitrix24QueryLimitAndStage(t *testing.T) {
	t.Parallel()
	s, rest := newB24Test(t, Options{})
	s.AddDeal(b24Deal())
	s.Faults.Add(2, sim.Fault{Status: http.StatusServiceUnavailable})
	for i := range 2 {
		r := b24Do(t, rest, DealGet, "json", map[string]any{"id": "42"})
		if code, _ := b24Err(t, r); r.status != http.StatusServiceUnavailable || code != "QUERY_LIMIT_EXCEEDED" {
			t.Fatalf("request %d: %d %s", i, r.status, r.body)
		}
	}
	if err := s.SetStage("42", "C1:WON"); err != nil {
		t.Fatal(err)
	}
	var d map[string]any
	b24Result(t, b24Do(t, rest, DealGet, "json", map[string]any{"id": "42"}), &d)
	if d["STAGE_ID"] != "C1:WON" || d["CATEGORY_ID"] != "1" || d["STAGE_SEMANTIC_ID"] != "S" {
		t.Errorf("after SetStage: %v", d)
	}
	if err := s.SetStage("1", "WON"); err == nil {
		t.Error("SetStage of an unknown deal succeeded")
	}
	reqs := s.Requests()
	if len(reqs) != 3 || reqs[0].Status != 503 || reqs[2].Status != 200 || reqs[2].Params["id"] != "42" {
		t.Errorf("requests = %+v", reqs)
	}
}

func TestBitrix24OutgoingWebhook(t *testing.T) {
	t.Parallel()
	s := New(Options{Domain: "shop.bitrix24.kz"})
	ts := time.Unix(1789000000, 0)
	form := s.OutgoingForm("ONCRMDEALUPDATE", "42", ts, "tok-123")

	var got url.Values
	var ctype string
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctype = r.Header.Get("Content-Type")
		if err := r.ParseForm(); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		got = r.PostForm
		w.Write([]byte("ok"))
	}))
	defer recv.Close()
	status, body, err := s.PostOutgoing(context.Background(), recv.URL+"/webhooks/bitrix24", form)
	if err != nil || status != 200 || string(body) != "ok" {
		t.Fatalf("PostOutgoing = %d %q %v", status, body, err)
	}
	if ctype != "application/x-www-form-urlencoded" {
		t.Errorf("Content-Type = %q", ctype)
	}
	want := map[string]string{
		"event":                   "ONCRMDEALUPDATE",
		"data[FIELDS][ID]":        "42",
		"ts":                      "1789000000",
		"auth[domain]":            "shop.bitrix24.kz",
		"auth[client_endpoint]":   "https://shop.bitrix24.kz/rest/",
		"auth[server_endpoint]":   "https://oauth.bitrix.info/rest/",
		"auth[member_id]":         s.MemberID(),
		"auth[application_token]": "tok-123",
	}
	for k, v := range want {
		if got.Get(k) != v {
			t.Errorf("%s = %q, want %q", k, got.Get(k), v)
		}
	}
	if len(s.MemberID()) != 32 {
		t.Errorf("member_id %q is not 32 hex digits", s.MemberID())
	}
}
