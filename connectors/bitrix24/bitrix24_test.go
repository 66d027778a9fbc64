package bitrix24_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/ordersync/ordersync/connectors"
	"github.com/ordersync/ordersync/connectors/bitrix24"
	"github.com/ordersync/ordersync/internal/order"
	"github.com/ordersync/ordersync/internal/sim"
	"github.com/ordersync/ordersync/internal/sim/bitrix24sim"
)

const (
	userID = "1"
	code   = "k7x9q2w4e6r8t0y1" // the webhook code: must never appear in an error or a log
)

var almaty = time.FixedZone("+05", 5*3600)

// syncBuffer collects log lines from concurrent requests.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type env struct {
	sim    *bitrix24sim.Bitrix24
	base   string // the portal's address
	rest   string // the REST URL with the right code
	client *bitrix24.Client
	logs   *syncBuffer
}

// newEnv starts a simulated portal and a client of it; cfg.RESTURL, when empty, is
// the right one. Every test checks afterwards that no log line carried the code.
func newEnv(t *testing.T, opts bitrix24sim.Options, cfg bitrix24.Config) *env {
	t.Helper()
	opts.UserID, opts.Code = userID, code
	s := bitrix24sim.New(opts)
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	e := &env{sim: s, base: ts.URL, rest: s.RESTURL(ts.URL), logs: &syncBuffer{}}
	if cfg.RESTURL == "" {
		cfg.RESTURL = e.rest
	}
	if cfg.RatePerSecond == 0 {
		cfg.RatePerSecond = -1
	}
	cfg.Logger = slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c, err := bitrix24.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	e.client = c
	t.Cleanup(func() {
		if strings.Contains(e.logs.String(), code) {
			t.Errorf("the webhook code reached the log:\n%s", e.logs.String())
		}
	})
	return e
}

func dec(s string) decimal.Decimal { return decimal.RequireFromString(s) }

// wonDeal is deal 42: two units of a kettle at 1500.00 less 150.50 each, 1.5 kg of
// apples at 333.33, a contact with a phone and an e-mail.
func wonDeal() bitrix24sim.Deal {
	return bitrix24sim.Deal{
		ID: "42", Title: "Заказ с сайта #A-1001", StageID: "WON", CurrencyID: "KZT",
		DateCreate: time.Date(2026, 9, 16, 10, 0, 0, 0, almaty),
		ContactID:  "7", Comments: "доставка после 18:00",
		Rows: []bitrix24sim.Row{
			{ProductID: 450, ProductName: "Чайник", Price: dec("1500.00"), Quantity: dec("2"), Discount: dec("150.50"), XMLID: "SKU-8812"},
			{ProductID: 451, ProductName: "Яблоки, кг", Price: dec("333.33"), Quantity: dec("1.5"), XMLID: "SKU-0042"},
		},
	}
}

func addContact(s *bitrix24sim.Bitrix24) {
	s.AddContact(bitrix24sim.Contact{ID: "7", Name: "Иван", LastName: "Петров",
		Phones: []string{"+77011234567", "+77019999999"}, Emails: []string{"ivan@example.kz"}})
}

func TestFetchWonDeal(t *testing.T) {
	t.Parallel()
	for _, strs := range []bool{false, true} {
		name := "numbers"
		if strs {
			name = "strings"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, bitrix24sim.Options{RowNumbersAsStrings: strs}, bitrix24.Config{Warehouse: "WH1"})
			e.sim.AddDeal(wonDeal())
			addContact(e.sim)

			o, err := e.client.Fetch(context.Background(), "42")
			if err != nil {
				t.Fatalf("Fetch: %v", err)
			}
			if err := o.Validate(); err != nil {
				t.Fatalf("the fetched order does not validate: %v", err)
			}
			if o.Source != "bitrix24" || o.ExternalID != "42" || o.Number != "42" || o.Warehouse != "WH1" || o.Currency != "KZT" {
				t.Errorf("order = %+v", o)
			}
			if want := time.Date(2026, 9, 16, 5, 0, 0, 0, time.UTC); !o.CreatedAt.Equal(want) {
				t.Errorf("CreatedAt = %s, want %s", o.CreatedAt, want)
			}
			if want := (order.Customer{Name: "Иван Петров", Phone: "+77011234567", Email: "ivan@example.kz"}); o.Customer != want {
				t.Errorf("Customer = %+v, want %+v", o.Customer, want)
			}
			if o.Comment != "Заказ с сайта #A-1001\nдоставка после 18:00" {
				t.Errorf("Comment = %q", o.Comment)
			}
			want := []struct{ sku, name, qty, price string }{
				{"SKU-8812", "Чайник", "2", "1349.50"},      // 1500.00 − 150.50, the price after the discount
				{"SKU-0042", "Яблоки, кг", "1.5", "333.33"}, // a fractional quantity
			}
			if len(o.Lines) != len(want) {
				t.Fatalf("lines = %+v", o.Lines)
			}
			for i, w := range want {
				l := o.Lines[i]
				if l.SKU != w.sku || l.Name != w.name || !l.Quantity.Equal(dec(w.qty)) || !l.Price.Equal(dec(w.price)) {
					t.Errorf("line %d = %s %q %s × %s, want %s %q %s × %s", i, l.SKU, l.Name, l.Quantity, l.Price, w.sku, w.name, w.qty, w.price)
				}
			}
			// 2 × 1349.50 + 1.5 × 333.33 = 2699.00 + 499.995: exact, not rounded, no float.
			if o.Total == nil || o.Total.String() != "3198.995" {
				t.Errorf("Total = %v, want 3198.995", o.Total)
			}
			if got := e.sim.RequestCount(bitrix24sim.ProductGet); got != 2 {
				t.Errorf("crm.product.get called %d times, want once per product", got)
			}
		})
	}
}

func TestFetchNotInCreateStage(t *testing.T) {
	t.Parallel()
	e := newEnv(t, bitrix24sim.Options{}, bitrix24.Config{})
	d := wonDeal()
	d.StageID = "PREPARATION"
	e.sim.AddDeal(d)
	addContact(e.sim)

	_, err := e.client.Fetch(context.Background(), "42")
	if !errors.Is(err, order.ErrNotReady) {
		t.Fatalf("Fetch = %v, want ErrNotReady", err)
	}
	if !strings.Contains(err.Error(), "deal 42 is in stage PREPARATION, not one of [WON]") {
		t.Errorf("error %q does not say which stage", err)
	}
	if n := e.sim.RequestCount(""); n != 1 {
		t.Errorf("%d requests for a deal not to be created, want only crm.deal.get", n)
	}

	// Moved to the won stage, the same deal is fetched.
	if err := e.sim.SetStage("42", "WON"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.Fetch(context.Background(), "42"); err != nil {
		t.Fatalf("Fetch after the deal was won: %v", err)
	}
}

func TestFetchPipelineStage(t *testing.T) {
	t.Parallel()
	d := wonDeal()
	d.StageID = "C1:WON"

	e := newEnv(t, bitrix24sim.Options{}, bitrix24.Config{CreateStages: []string{"WON", "C1:WON"}})
	e.sim.AddDeal(d)
	addContact(e.sim)
	o, err := e.client.Fetch(context.Background(), "42")
	if err != nil {
		t.Fatalf("Fetch with C1:WON among the create stages: %v", err)
	}
	if len(o.Lines) != 2 {
		t.Errorf("lines = %+v", o.Lines)
	}

	// The general pipeline's WON does not take pipeline 1's won deals.
	e2 := newEnv(t, bitrix24sim.Options{}, bitrix24.Config{})
	e2.sim.AddDeal(d)
	if _, err := e2.client.Fetch(context.Background(), "42"); !errors.Is(err, order.ErrNotReady) {
		t.Errorf("C1:WON with create stages [WON] = %v, want ErrNotReady", err)
	}
}

func TestFetchUnknownDeal(t *testing.T) {
	t.Parallel()
	for _, nf := range []string{"", "NOT_FOUND"} {
		e := newEnv(t, bitrix24sim.Options{NotFoundError: nf}, bitrix24.Config{})
		_, err := e.client.Fetch(context.Background(), "404")
		if !errors.Is(err, connectors.ErrNotFound) {
			t.Errorf("error %q: Fetch = %v, want ErrNotFound", nf, err)
		}
		if errors.Is(err, order.ErrNotReady) {
			t.Errorf("an unknown deal is not a deal waiting for its stage")
		}
	}
	e := newEnv(t, bitrix24sim.Options{}, bitrix24.Config{})
	for _, id := range []string{"", "abc", "0", "-1", "1 OR 1"} {
		if _, err := e.client.Fetch(context.Background(), id); !errors.Is(err, connectors.ErrNotFound) {
			t.Errorf("Fetch(%q) = %v, want ErrNotFound", id, err)
		}
	}
	if n := e.sim.RequestCount(""); n != 0 {
		t.Errorf("%d requests for ids that cannot be deals", n)
	}
}

func problems(t *testing.T, err error) map[string]string {
	t.Helper()
	var ve *order.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("err = %v, want an *order.ValidationError", err)
	}
	out := map[string]string{}
	for _, p := range ve.Problems {
		out[p.Field] = p.Message
	}
	return out
}

func TestFetchUnmappableDeal(t *testing.T) {
	t.Parallel()
	e := newEnv(t, bitrix24sim.Options{}, bitrix24.Config{})
	addContact(e.sim)

	noRows := wonDeal()
	noRows.Rows = nil
	e.sim.AddDeal(noRows)
	_, err := e.client.Fetch(context.Background(), "42")
	if ps := problems(t, err); len(ps) != 1 || !strings.Contains(ps["lines"], "no product rows") {
		t.Errorf("no rows: problems = %v, want one naming lines", ps)
	}

	badCurrency := wonDeal()
	badCurrency.ID, badCurrency.CurrencyID = "43", "KTZ"
	e.sim.AddDeal(badCurrency)
	_, err = e.client.Fetch(context.Background(), "43")
	if ps := problems(t, err); len(ps) != 1 || !strings.Contains(ps["currency"], `"KTZ"`) {
		t.Errorf("currency KTZ: problems = %v", ps)
	}

	// A product without XML_ID, and a row typed by hand outside the catalog.
	noSKU := wonDeal()
	noSKU.ID = "44"
	noSKU.Rows = []bitrix24sim.Row{
		{ProductID: 460, ProductName: "Без кода", Price: dec("10"), Quantity: dec("1")},
		{ProductName: "Сборка", Price: dec("500"), Quantity: dec("1")},
	}
	e.sim.AddDeal(noSKU)
	o, err := e.client.Fetch(context.Background(), "44")
	ps := problems(t, err)
	if len(ps) != 2 || !strings.Contains(ps["lines[0].sku"], "has no XML_ID") || !strings.Contains(ps["lines[1].sku"], "not a catalog product") {
		t.Errorf("no SKU: problems = %v", ps)
	}
	if len(o.Lines) != 2 {
		t.Errorf("the order is returned with the error, as far as it was mapped: %+v", o)
	}
}

func TestFetchSKUSources(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ field, want string }{
		{"", "SKU-8812"},
		{"xml_id", "SKU-8812"},
		{"code", "chainik"},
		{"property_104", "ART-450"},
		{"product_id", "450"},
	} {
		e := newEnv(t, bitrix24sim.Options{}, bitrix24.Config{SKUField: tc.field})
		e.sim.AddProduct(bitrix24sim.Product{ID: 450, Name: "Чайник", XMLID: "SKU-8812", Code: "chainik",
			Properties: map[string]string{"PROPERTY_104": "ART-450"}})
		d := wonDeal()
		d.Rows = d.Rows[:1]
		e.sim.AddDeal(d)
		o, err := e.client.Fetch(context.Background(), "42")
		if err != nil {
			t.Errorf("sku_field %q: %v", tc.field, err)
			continue
		}
		if o.Lines[0].SKU != tc.want {
			t.Errorf("sku_field %q: SKU = %q, want %q", tc.field, o.Lines[0].SKU, tc.want)
		}
		if n := e.sim.RequestCount(bitrix24sim.ProductGet); (tc.field == "product_id") != (n == 0) {
			t.Errorf("sku_field %q: %d crm.product.get calls", tc.field, n)
		}
	}
	if _, err := bitrix24.New(bitrix24.Config{RESTURL: "https://p.bitrix24.kz/rest/1/" + code + "/", SKUField: "article"}); err == nil ||
		!strings.Contains(err.Error(), "webhooks.bitrix24.sku_field") {
		t.Errorf("New with sku_field article = %v, want an error naming the key", err)
	}
}

func TestFetchCustomerFromCompanyOrNone(t *testing.T) {
	t.Parallel()
	e := newEnv(t, bitrix24sim.Options{}, bitrix24.Config{})
	e.sim.AddCompany(bitrix24sim.Company{ID: "9", Title: "ТОО Ромашка", Phones: []string{"+77272000000"}, Emails: []string{"buh@romashka.kz"}})
	d := wonDeal()
	d.ContactID, d.CompanyID = "", "9"
	e.sim.AddDeal(d)
	o, err := e.client.Fetch(context.Background(), "42")
	if err != nil {
		t.Fatal(err)
	}
	if want := (order.Customer{Name: "ТОО Ромашка", Phone: "+77272000000", Email: "buh@romashka.kz"}); o.Customer != want {
		t.Errorf("Customer = %+v, want the company %+v", o.Customer, want)
	}

	// A contact deleted since: the order goes on without a customer.
	gone := wonDeal()
	gone.ID, gone.ContactID = "43", "70"
	e.sim.AddDeal(gone)
	o, err = e.client.Fetch(context.Background(), "43")
	if err != nil || o.Customer != (order.Customer{}) {
		t.Errorf("deleted contact: %+v, %v", o.Customer, err)
	}
}

func TestFetchWrongCode(t *testing.T) {
	t.Parallel()
	e := newEnv(t, bitrix24sim.Options{}, bitrix24.Config{})
	e.sim.AddDeal(wonDeal())
	wrong := strings.Replace(e.rest, code, "a0b1c2d3e4f5g6h7", 1)
	c, err := bitrix24.New(bitrix24.Config{RESTURL: wrong, RatePerSecond: -1, Logger: slog.New(slog.NewTextHandler(e.logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Fetch(context.Background(), "42")
	var ae *connectors.AuthError
	if !errors.As(err, &ae) || ae.Key != bitrix24.KeyRESTURL || ae.Status != http.StatusUnauthorized {
		t.Fatalf("Fetch with a wrong code = %#v, want an AuthError naming %s", err, bitrix24.KeyRESTURL)
	}
	if msg := err.Error(); !strings.Contains(msg, "webhooks.bitrix24.rest_url") || !strings.Contains(msg, "INVALID_CREDENTIALS") ||
		strings.Contains(msg, "a0b1c2d3e4f5g6h7") {
		t.Errorf("message %q: want the key and the code Bitrix24 answered, never the webhook code", msg)
	}
	if e.sim.AuthFailures() != 1 {
		t.Errorf("AuthFailures = %d, want 1 (an auth failure is not retried)", e.sim.AuthFailures())
	}
}

// The webhook code appears in no error text, whatever fails: a transport error (Go's
// quotes the URL), a portal that redirects, bad configuration.
func TestCodeNeverInErrors(t *testing.T) {
	t.Parallel()
	var errs []error

	// A portal that is down.
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL + "/rest/1/" + code + "/"
	dead.Close()
	c, err := bitrix24.New(bitrix24.Config{RESTURL: deadURL, RatePerSecond: -1, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Fetch(context.Background(), "42")
	if err == nil {
		t.Fatal("Fetch from a closed server succeeded")
	}
	errs = append(errs, err)

	// A portal that redirects (http to https, a moved portal), and one whose error
	// page quotes the path.
	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "crm.deal.get") {
			http.Redirect(w, r, "https://elsewhere.example"+r.URL.Path, http.StatusMovedPermanently)
			return
		}
	}))
	defer redirect.Close()
	c, _ = bitrix24.New(bitrix24.Config{RESTURL: redirect.URL + "/rest/1/" + code + "/", RatePerSecond: -1})
	_, err = c.Fetch(context.Background(), "42")
	if err == nil || !strings.Contains(err.Error(), "redirect") || !strings.Contains(err.Error(), bitrix24.KeyRESTURL) {
		t.Errorf("a redirecting portal = %v, want an error naming the key", err)
	}
	errs = append(errs, err)

	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadGateway)
		io.WriteString(w, "<html>502 Bad Gateway: "+r.URL.Path+"</html>")
	}))
	defer echo.Close()
	c, _ = bitrix24.New(bitrix24.Config{RESTURL: echo.URL + "/rest/1/" + code + "/", RatePerSecond: -1})
	_, err = c.Fetch(context.Background(), "42")
	if err == nil || !strings.Contains(err.Error(), "502") {
		t.Errorf("a 502 page = %v", err)
	}
	errs = append(errs, err)

	// Configuration.
	for _, bad := range []string{
		"ftp://p.bitrix24.kz/rest/1/" + code + "/",
		"https://p.bitrix24.kz/rest/x/" + code + "/",
		"https://p.bitrix24.kz/rest/1/" + code + "/crm.deal.get",
		"https://p.bitrix24.kz/" + code + "/",
		"https://p.bitrix24.kz/rest/1/" + code + "/?x=1",
	} {
		_, err := bitrix24.New(bitrix24.Config{RESTURL: bad})
		if err == nil || !strings.HasPrefix(err.Error(), "webhooks.bitrix24.rest_url: ") {
			t.Errorf("New(%s) = %v, want an error naming the key", strings.ReplaceAll(bad, code, "…"), err)
		}
		errs = append(errs, err)
	}
	for _, err := range errs {
		if err != nil && strings.Contains(err.Error(), code) {
			t.Errorf("an error carries the webhook code: %s", err)
		}
	}
}

func TestQueryLimitRetried(t *testing.T) {
	t.Parallel()
	e := newEnv(t, bitrix24sim.Options{}, bitrix24.Config{})
	e.sim.AddDeal(wonDeal())
	addContact(e.sim)
	e.sim.Faults.Add(2, sim.Fault{Status: http.StatusServiceUnavailable})

	o, err := e.client.Fetch(context.Background(), "42")
	if err != nil {
		t.Fatalf("Fetch after two QUERY_LIMIT_EXCEEDED: %v", err)
	}
	if len(o.Lines) != 2 {
		t.Errorf("lines = %+v", o.Lines)
	}
	if got := e.sim.RequestCount(bitrix24sim.DealGet); got != 3 {
		t.Errorf("crm.deal.get asked %d times, want 3 (two refused, one answered)", got)
	}

	// A limit that outlasts the retries is an error to retry later, not a verdict.
	e.sim.Faults.Add(10, sim.Fault{Status: http.StatusServiceUnavailable})
	_, err = e.client.Fetch(context.Background(), "42")
	var ae *connectors.AuthError
	var ve *order.ValidationError
	if err == nil || errors.As(err, &ae) || errors.As(err, &ve) || errors.Is(err, connectors.ErrNotFound) || errors.Is(err, order.ErrNotReady) {
		t.Fatalf("Fetch under a lasting limit = %v, want a plain (retryable) error", err)
	}
	if !strings.Contains(err.Error(), "QUERY_LIMIT_EXCEEDED") {
		t.Errorf("error %q does not say the portal's limit was hit", err)
	}
}

// Error answers are classified the same whatever method gave them: one server per case.
func TestErrorAnswers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		status int
		body   string
		auth   bool
		nf     bool
	}{
		{"invalid credentials", 401, `{"error":"INVALID_CREDENTIALS","error_description":"Invalid request credentials"}`, true, false},
		{"no crm scope", 401, `{"error":"insufficient_scope","error_description":"The request requires higher privileges than provided by the webhook token"}`, true, false},
		{"method hidden outside the scope", 404, `{"error":"ERROR_METHOD_NOT_FOUND","error_description":"Method not found!"}`, true, false},
		{"no read permission", 400, `{"error":"","error_description":"Access denied."}`, true, false},
		{"expired", 401, `{"error":"expired_token","error_description":"The access token provided has expired."}`, true, false},
		{"not found, documented", 400, `{"error":"","error_description":"Not found"}`, false, true},
		{"not found, older portals", 400, `{"error":"NOT_FOUND","error_description":"Not found"}`, false, true},
		{"bad parameter", 400, `{"error":"","error_description":"ID is not defined or invalid."}`, false, false},
		{"error with 200", 200, `{"error":"INVALID_CREDENTIALS","error_description":"Invalid request credentials"}`, true, false},
		{"html", 400, `<html>Bad Request</html>`, false, false},
		{"no result", 200, `{"time":{}}`, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tc.status)
				io.WriteString(w, tc.body)
			}))
			defer ts.Close()
			c, err := bitrix24.New(bitrix24.Config{RESTURL: ts.URL + "/rest/1/" + code + "/", RatePerSecond: -1})
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.Fetch(context.Background(), "42")
			var ae *connectors.AuthError
			if got := errors.As(err, &ae) && ae.Key == bitrix24.KeyRESTURL; got != tc.auth {
				t.Errorf("AuthError naming the key: %v, want %v (err %v)", got, tc.auth, err)
			}
			if got := errors.Is(err, connectors.ErrNotFound); got != tc.nf {
				t.Errorf("ErrNotFound: %v, want %v (err %v)", got, tc.nf, err)
			}
			if err == nil {
				t.Error("no error")
			}
		})
	}
}

func TestNewDefaultsAndStages(t *testing.T) {
	t.Parallel()
	ok := "https://portal.bitrix24.kz/rest/1/" + code + "/"
	for _, u := range []string{ok, strings.TrimSuffix(ok, "/"), "https://crm.example.kz/b24/rest/12/" + code + "/"} {
		if _, err := bitrix24.New(bitrix24.Config{RESTURL: u}); err != nil {
			t.Errorf("New(%s): %v", strings.ReplaceAll(u, code, "…"), err)
		}
	}
	if _, err := bitrix24.New(bitrix24.Config{}); err == nil || !strings.Contains(err.Error(), "webhooks.bitrix24.rest_url: is required") {
		t.Errorf("New without a URL = %v", err)
	}
	if _, err := bitrix24.New(bitrix24.Config{RESTURL: ok, CreateStages: []string{"WON", " "}}); err == nil ||
		!strings.Contains(err.Error(), "webhooks.bitrix24.create_stages[1]") {
		t.Errorf("New with an empty stage = %v", err)
	}
}

func TestCreateStagesIgnoreCase(t *testing.T) {
	t.Parallel()
	e := newEnv(t, bitrix24sim.Options{}, bitrix24.Config{CreateStages: []string{" c2:final_invoice "}})
	d := wonDeal()
	d.StageID = "C2:FINAL_INVOICE"
	e.sim.AddDeal(d)
	addContact(e.sim)
	if _, err := e.client.Fetch(context.Background(), "42"); err != nil {
		t.Errorf("Fetch: %v", err)
	}
}
