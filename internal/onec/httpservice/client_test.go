package httpservice

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/shopspring/decimal"

	"github.com/ordersync/ordersync/internal/onec"
)

const (
	testUser     = "ordersync"
	testPassword = "s3cr3t-пароль"
	testPrefix   = "/trade/hs/ordersync/v1"
)

// server is one httptest server per case; it counts requests and keeps the last
// request body.
type server struct {
	*httptest.Server
	requests atomic.Int32
	mu       sync.Mutex
	bodies   [][]byte
}

func (s *server) count() int { return int(s.requests.Load()) }

func (s *server) lastBody() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.bodies) == 0 {
		return nil
	}
	return s.bodies[len(s.bodies)-1]
}

func newServer(t *testing.T, h http.HandlerFunc) *server {
	t.Helper()
	s := &server{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.bodies = append(s.bodies, b)
		s.mu.Unlock()
		s.requests.Add(1)
		h(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

func newClient(t *testing.T, baseURL string, mod ...func(*Config)) *Client {
	t.Helper()
	cfg := Config{
		BaseURL:      baseURL + testPrefix,
		Username:     testUser,
		Password:     testPassword,
		Timeout:      2 * time.Second,
		GetRetries:   2,
		RetryBackoff: time.Millisecond,
	}
	for _, m := range mod {
		m(&cfg)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c
}

func reply(status int, ctype, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if ctype != "" {
			w.Header().Set("Content-Type", ctype)
		}
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
}

func testOrder() onec.CreateOrder {
	return onec.CreateOrder{
		ExternalID: "kaspi:512344101", Source: "kaspi", Number: "512344101", Date: "2026-09-16T10:00:00",
		Customer:  onec.Customer{Name: "Иван Петров", Phone: "+77011234567"},
		Warehouse: "WH1", Currency: "KZT",
		Lines: []onec.Line{
			{SKU: "A", Name: "Чайник", Quantity: decimal.RequireFromString("1"), Price: decimal.RequireFromString("0.1"), Amount: decimal.RequireFromString("0.1")},
			{SKU: "B", Name: "Кружка", Quantity: decimal.RequireFromString("1"), Price: decimal.RequireFromString("0.2"), Amount: decimal.RequireFromString("0.2")},
		},
		Total: decimal.RequireFromString("0.3"),
	}
}

// ops runs one operation by name.
var ops = map[string]func(context.Context, *Client) error{
	"ping": func(ctx context.Context, c *Client) error { _, err := c.Ping(ctx); return err },
	"find": func(ctx context.Context, c *Client) error { _, err := c.FindOrders(ctx, "kaspi:1"); return err },
	"create": func(ctx context.Context, c *Client) error {
		_, err := c.CreateOrder(ctx, testOrder())
		return err
	},
	"cancel": func(ctx context.Context, c *Client) error { _, err := c.CancelOrder(ctx, "kaspi:1", "x"); return err },
	"stock":  func(ctx context.Context, c *Client) error { _, err := c.Stock(ctx, "WH1"); return err },
}

func asError(t *testing.T, err error) *onec.Error {
	t.Helper()
	var e *onec.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not a *onec.Error", err, err)
	}
	return e
}

func TestClassification(t *testing.T) {
	t.Parallel()
	const lock = "{ОбщийМодуль.ordersync.Модуль(118)}: Конфликт блокировок при выполнении транзакции:\nПревышено максимальное время ожидания предоставления блокировки"
	const lockJSON = `{"error":{"code":"lock_conflict","message":"Конфликт блокировок при выполнении транзакции"}}`
	const business = `{ОбщийМодуль.ordersync.Модуль(131)}: Не удалось записать "Заказ клиента"! Поле "Соглашение" не заполнено`
	const html = "<!DOCTYPE html><html><body>Идентификация пользователя не выполнена</body></html>"
	const text, jsonType, htmlType = "text/plain; charset=utf-8", "application/json", "text/html; charset=utf-8"
	tests := []struct {
		name     string
		op       string
		h        http.HandlerFunc
		class    onec.Class
		status   int
		requests int // what the server received: GETs 1+GetRetries when retried, a POST always 1
		code     string
		field    string
	}{
		{"503 on create is sent once, an unknown outcome", "create", reply(503, text, "Service Unavailable"), onec.Unknown, 503, 1, "", ""},
		{"503 on find is retried", "find", reply(503, text, "Service Unavailable"), onec.Transient, 503, 3, "", ""},
		{"502 on create is an unknown outcome", "create", reply(502, text, "Bad Gateway"), onec.Unknown, 502, 1, "", ""},
		{"504 on create is an unknown outcome", "create", reply(504, text, "Gateway Timeout"), onec.Unknown, 504, 1, "", ""},
		{"504 on stock is retried", "stock", reply(504, text, "Gateway Timeout"), onec.Transient, 504, 3, "", ""},
		{"406 no licence on create", "create", reply(406, text, "Нет свободной лицензии"), onec.Transient, 406, 1, "", ""},
		{"406 no licence on ping is retried", "ping", reply(406, text, "Нет свободной лицензии"), onec.Transient, 406, 3, "", ""},
		{"429 on cancel", "cancel", reply(429, text, "slow down"), onec.Transient, 429, 1, "", ""},
		{"500 lock_conflict on create", "create", reply(500, jsonType, lockJSON), onec.Transient, 500, 1, "lock_conflict", ""},
		{"500 lock text without the JSON error on create", "create", reply(500, text, lock), onec.Unknown, 500, 1, "", ""},
		{"500 «заблокирована» on cancel", "cancel", reply(500, text, "Таблица заблокирована другим сеансом"), onec.Unknown, 500, 1, "", ""},
		{"500 LOCK in English on create", "create", reply(500, text, "Lock request timeout"), onec.Unknown, 500, 1, "", ""},
		{"500 business exception on create", "create", reply(500, text, business), onec.Unknown, 500, 1, "", ""},
		{"500 business exception on cancel", "cancel", reply(500, text, business), onec.Unknown, 500, 1, "", ""},
		{"500 on find is retried", "find", reply(500, text, business), onec.Transient, 500, 3, "", ""},
		{"400 on create", "create", reply(400, jsonType, `{"error":{"code":"bad_request","message":"Ошибка чтения JSON"}}`), onec.Permanent, 400, 1, "bad_request", ""},
		{"400 on find is not retried", "find", reply(400, text, "bad"), onec.Permanent, 400, 1, "", ""},
		{"404 page on create is configuration", "create", reply(404, text, "Не найден шаблон URL"), onec.Configuration, 404, 1, "", ""},
		{"404 JSON error on create", "create", reply(404, jsonType, `{"error":{"code":"not_found","message":"нет склада"}}`), onec.Permanent, 404, 1, "not_found", ""},
		{"404 JSON error on cancel: no such order", "cancel", reply(404, jsonType, `{"error":{"code":"not_found","message":"нет"}}`), onec.Permanent, 404, 1, "not_found", ""},
		{"404 HTML page on cancel is configuration", "cancel", reply(404, htmlType, "<html><body><h1>404 Not Found</h1></body></html>"), onec.Configuration, 404, 1, "", ""},
		{"404 JSON without error on cancel is configuration", "cancel", reply(404, jsonType, `{}`), onec.Configuration, 404, 1, "", ""},
		{"404 page on find is configuration, not retried", "find", reply(404, text, "Не найден шаблон URL"), onec.Configuration, 404, 1, "", ""},
		{"404 page on ping is configuration", "ping", reply(404, htmlType, "<html>Not Found</html>"), onec.Configuration, 404, 1, "", ""},
		{"405 page on create is configuration", "create", reply(405, htmlType, "<html>Method Not Allowed</html>"), onec.Configuration, 405, 1, "", ""},
		{"200 cancel without status cancelled", "cancel", reply(200, jsonType, `{"ref":"x"}`), onec.Unknown, 200, 1, "", ""},
		{"422 with 1C's field", "create", reply(422, jsonType, `{"error":{"code":"unknown_sku","message":"Номенклатура не найдена","field":"lines[1].sku"}}`), onec.Permanent, 422, 1, "unknown_sku", "lines[1].sku"},
		{"409 on cancel", "cancel", reply(409, jsonType, `{"error":{"code":"conflict","message":"x"}}`), onec.Permanent, 409, 1, "conflict", ""},
		{"409 on create without the order", "create", reply(409, jsonType, `{"error":{"code":"already_exists","message":"есть"}}`), onec.Unknown, 409, 1, "already_exists", ""},
		{"201 without a ref", "create", reply(201, jsonType, `{}`), onec.Unknown, 201, 1, "", ""},
		{"302 is not followed", "find", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "/login", http.StatusFound)
		}, onec.Permanent, 302, 1, "", ""},
		{"401 on create", "create", reply(401, text, "Unauthorized"), onec.Auth, 401, 1, "", ""},
		{"403 on find is not retried", "find", reply(403, text, "Forbidden"), onec.Auth, 403, 1, "", ""},
		{"200 HTML on find", "find", reply(200, htmlType, html), onec.Auth, 200, 1, "", ""},
		{"200 HTML on create", "create", reply(200, htmlType, html), onec.Unknown, 200, 1, "", ""},
		{"201 HTML on create", "create", reply(201, htmlType, html), onec.Unknown, 201, 1, "", ""},
		{"200 plain text on ping", "ping", reply(200, text, "OK"), onec.Auth, 200, 1, "", ""},
		{"200 HTML on stock behind a BOM", "stock", reply(200, htmlType, "\uFEFF"+html), onec.Auth, 200, 1, "", ""},
		{"200 JSON of the wrong shape", "find", reply(200, jsonType, `{"orders":"none"}`), onec.Permanent, 200, 1, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := newServer(t, tt.h)
			c := newClient(t, srv.URL)
			err := ops[tt.op](context.Background(), c)
			e := asError(t, err)
			if got, want := e.Class, tt.class; got != want {
				t.Fatalf("class = %v, want %v (%v)", got, want, err)
			}
			if got, want := e.Op, tt.op; got != want {
				t.Fatalf("op = %q, want %q", got, want)
			}
			if got, want := e.Status, tt.status; got != want {
				t.Fatalf("status = %d, want %d", got, want)
			}
			if got, want := srv.count(), tt.requests; got != want {
				t.Fatalf("server received %d requests, want %d", got, want)
			}
			if got, want := e.Code, tt.code; got != want {
				t.Fatalf("code = %q, want %q", got, want)
			}
			if got, want := e.Field, tt.field; got != want {
				t.Fatalf("field = %q, want %q", got, want)
			}
			if e.Message == "" {
				t.Fatalf("no message in %v", err)
			}
			if tt.class == onec.Auth {
				checkAuthMessage(t, e, srv.URL+testPrefix)
			}
			if strings.Contains(err.Error(), testPassword) {
				t.Fatalf("the error shows the password: %v", err)
			}
		})
	}
}

func checkAuthMessage(t *testing.T, e *onec.Error, baseURL string) {
	t.Helper()
	for _, want := range []string{`onec.username "` + testUser + `"`, "onec.base_url " + baseURL, "Basic authentication"} {
		if !strings.Contains(e.Message, want) {
			t.Fatalf("auth message %q does not contain %q", e.Message, want)
		}
	}
	if strings.Contains(e.Error(), testPassword) {
		t.Fatalf("auth message shows the password: %v", e)
	}
}

func TestCreateSuccessAndConflict(t *testing.T) {
	t.Parallel()
	t.Run("201", func(t *testing.T) {
		t.Parallel()
		srv := newServer(t, reply(201, "application/json", "\uFEFF"+`{"ref":"5a1f","number":"ЗК-000123","date":"2026-09-16T10:00:00"}`))
		got, err := newClient(t, srv.URL).CreateOrder(context.Background(), testOrder())
		if err != nil {
			t.Fatal(err)
		}
		if want := (onec.Created{Ref: "5a1f", Number: "ЗК-000123", Date: "2026-09-16T10:00:00"}); got != want {
			t.Fatalf("created = %+v, want %+v", got, want)
		}
	})
	t.Run("409 is found, not an error", func(t *testing.T) {
		t.Parallel()
		srv := newServer(t, reply(409, "application/json", `{"error":{"code":"already_exists","message":"есть"},"order":{"ref":"77aa","number":"ЗК-000007","date":"2026-09-15T09:00:00","external_id":"kaspi:512344101","posted":true,"deleted":false}}`))
		got, err := newClient(t, srv.URL).CreateOrder(context.Background(), testOrder())
		if err != nil {
			t.Fatal(err)
		}
		if want := (onec.Created{Ref: "77aa", Number: "ЗК-000007", Date: "2026-09-15T09:00:00", Existing: true,
			ExternalID: "kaspi:512344101"}); got != want {
			t.Fatalf("created = %+v, want %+v", got, want)
		}
		if got := srv.count(); got != 1 {
			t.Fatalf("server received %d requests, want 1", got)
		}
	})
}

func TestRequestEncoding(t *testing.T) {
	t.Parallel()
	var gotUser, gotPass, gotCT, gotPath string
	var gotOK bool
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		gotUser, gotPass, gotOK = r.BasicAuth()
		gotCT = r.Header.Get("Content-Type")
		gotPath = r.URL.Path
		w.WriteHeader(201)
		io.WriteString(w, `{"ref":"r","number":"1","date":"2026-09-16T10:00:00"}`)
	})
	const user = "Обмен с маркетплейсами"
	c := newClient(t, srv.URL, func(c *Config) { c.Username = user })
	o := testOrder()
	o.Lines = append(o.Lines, onec.Line{SKU: "C", Quantity: decimal.RequireFromString("1"),
		Price: decimal.RequireFromString("12345678901234567890.123456789"), Amount: decimal.RequireFromString("12345678901234567890.123456789")})
	o.Total = decimal.RequireFromString("12345678901234567890.423456789")
	if _, err := c.CreateOrder(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	if !gotOK || gotUser != user || gotPass != testPassword {
		t.Fatalf("Basic auth = %q, %q, %v; want the UTF-8 user and password", gotUser, gotPass, gotOK)
	}
	if got, want := gotPath, testPrefix+"/orders"; got != want {
		t.Fatalf("path = %q, want %q", got, want)
	}
	if !strings.HasPrefix(gotCT, "application/json") || !strings.Contains(gotCT, "utf-8") {
		t.Fatalf("Content-Type = %q", gotCT)
	}
	body := string(srv.lastBody())
	for _, want := range []string{
		`"price":0.1,`, `"amount":0.2}`, `"price":12345678901234567890.123456789`,
		`"total":12345678901234567890.423456789`, `"name":"Иван Петров"`,
	} {
		if !strings.Contains(body, want) {
			t.Fatalf("body %s does not contain %s (exact, unquoted numbers; UTF-8 text)", body, want)
		}
	}
}

func TestDecodeExactAndBOM(t *testing.T) {
	t.Parallel()
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.Write([]byte{0xEF, 0xBB, 0xBF})
		switch {
		case strings.HasSuffix(r.URL.Path, "/stock"):
			io.WriteString(w, `{"warehouse":"WH1","taken_at":"2026-09-16T10:00:00","items":[{"sku":"A","quantity":0.1,"price":12345678901234567890.123456789}]}`)
		case strings.HasSuffix(r.URL.Path, "/ping"):
			io.WriteString(w, `{"service":"ordersync","version":"1.0"}`)
		case r.URL.Query().Get("external_id") == "none":
			io.WriteString(w, `{"orders":null}`)
		default:
			io.WriteString(w, `{"orders":[{"ref":"a","number":"1","date":"2026-09-16T10:00:00","external_id":"kaspi:1","posted":true,"deleted":false},{"ref":"b","number":"2","date":"2026-09-16T10:00:01","external_id":"kaspi:1","posted":false,"deleted":true}]}`)
		}
	})
	c := newClient(t, srv.URL)
	ctx := context.Background()
	st, err := c.Stock(ctx, "WH1")
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Items) != 1 || st.Items[0].Quantity.String() != "0.1" || st.Items[0].Price.String() != "12345678901234567890.123456789" {
		t.Fatalf("stock = %+v, want exact 0.1 and 12345678901234567890.123456789", st)
	}
	info, err := c.Ping(ctx)
	if err != nil || info != (onec.Info{Service: "ordersync", Version: "1.0"}) {
		t.Fatalf("ping = %+v, %v", info, err)
	}
	orders, err := c.FindOrders(ctx, "kaspi:1")
	if err != nil {
		t.Fatal(err)
	}
	if len(orders) != 2 || orders[1] != (onec.Order{Ref: "b", Number: "2", Date: "2026-09-16T10:00:01", ExternalID: "kaspi:1", Deleted: true}) {
		t.Fatalf("orders = %+v", orders)
	}
	none, err := c.FindOrders(ctx, "none")
	if err != nil {
		t.Fatal(err)
	}
	if none == nil || len(none) != 0 {
		t.Fatalf("FindOrders of nothing = %#v, want an empty, non-nil slice", none)
	}
}

func TestCancel(t *testing.T) {
	t.Parallel()
	srv := newServer(t, reply(200, "application/json", `{"ref":"r1","status":"cancelled"}`))
	got, err := newClient(t, srv.URL).CancelOrder(context.Background(), "kaspi:1", "отказ")
	if err != nil || got != (onec.Cancelled{Ref: "r1", Status: "cancelled"}) {
		t.Fatalf("cancel = %+v, %v", got, err)
	}
	if got, want := string(srv.lastBody()), `{"external_id":"kaspi:1","reason":"отказ"}`; got != want {
		t.Fatalf("body = %s, want %s", got, want)
	}
}

// hangingDialer never connects: every request times out before it is written.
type hangingDialer struct{ dials atomic.Int32 }

func (d *hangingDialer) transport() *http.Transport {
	return &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		d.dials.Add(1)
		<-ctx.Done()
		return nil, ctx.Err()
	}}
}

func TestTransportFailures(t *testing.T) {
	t.Parallel()
	stall := func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }
	drop := func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	}
	tests := []struct {
		name     string
		op       string
		h        http.HandlerFunc
		class    onec.Class
		requests int
	}{
		{"POST timed out after it was written", "create", stall, onec.Unknown, 1},
		{"cancel timed out after it was written", "cancel", stall, onec.Unknown, 1},
		{"GET timed out after it was written is retried", "find", stall, onec.Transient, 3},
		{"POST dropped after it was written", "create", drop, onec.Unknown, 1},
		{"GET dropped is retried", "stock", drop, onec.Transient, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := newServer(t, tt.h)
			c := newClient(t, srv.URL, func(c *Config) {
				c.Timeout = 100 * time.Millisecond
				// A fresh connection per request, so the transport never replays a
				// GET on a reused one and the count stays exact.
				c.Transport = &http.Transport{DisableKeepAlives: true}
			})
			err := ops[tt.op](context.Background(), c)
			e := asError(t, err)
			if got, want := e.Class, tt.class; got != want {
				t.Fatalf("class = %v, want %v (%v)", got, want, err)
			}
			if got, want := e.Status, 0; got != want {
				t.Fatalf("status = %d, want %d", got, want)
			}
			if got, want := srv.count(), tt.requests; got != want {
				t.Fatalf("server received %d requests, want %d", got, want)
			}
		})
	}

	t.Run("POST timed out before it was written", func(t *testing.T) {
		t.Parallel()
		srv := newServer(t, reply(201, "application/json", `{"ref":"r"}`))
		d := &hangingDialer{}
		c := newClient(t, srv.URL, func(c *Config) { c.Timeout = 50 * time.Millisecond; c.Transport = d.transport() })
		_, err := c.CreateOrder(context.Background(), testOrder())
		if got, want := asError(t, err).Class, onec.Transient; got != want {
			t.Fatalf("class = %v, want %v (%v)", got, want, err)
		}
		if !strings.Contains(err.Error(), "onec.timeout") {
			t.Fatalf("error %q does not name onec.timeout", err)
		}
		if got := srv.count(); got != 0 {
			t.Fatalf("server received %d requests, want 0", got)
		}
		if got, want := int(d.dials.Load()), 1; got != want {
			t.Fatalf("dialled %d times, want %d: a POST is never retried", got, want)
		}
	})
	t.Run("connection refused", func(t *testing.T) {
		t.Parallel()
		srv := httptest.NewServer(http.NotFoundHandler())
		url := srv.URL
		srv.Close()
		c := newClient(t, url)
		_, err := c.CreateOrder(context.Background(), testOrder())
		if got, want := asError(t, err).Class, onec.Transient; got != want {
			t.Fatalf("class = %v, want %v (%v)", got, want, err)
		}
	})
	t.Run("the caller gives up between GET retries", func(t *testing.T) {
		t.Parallel()
		srv := newServer(t, reply(503, "text/plain", "busy"))
		c := newClient(t, srv.URL, func(c *Config) { c.GetRetries = 100; c.RetryBackoff = 10 * time.Millisecond })
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		_, err := c.FindOrders(ctx, "kaspi:1")
		e := asError(t, err)
		if e.Class != onec.Transient || e.Status != 503 || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v; want Transient, status 503, wrapping the deadline", err)
		}
		if n := srv.count(); n < 1 || n >= 100 {
			t.Fatalf("server received %d requests, want the retries cut short", n)
		}
	})
	t.Run("a cancelled context sends nothing", func(t *testing.T) {
		t.Parallel()
		srv := newServer(t, reply(201, "application/json", `{"ref":"r"}`))
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := newClient(t, srv.URL).CreateOrder(ctx, testOrder())
		if got, want := asError(t, err).Class, onec.Transient; got != want || !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want Transient wrapping context.Canceled", err)
		}
		if got := srv.count(); got != 0 {
			t.Fatalf("server received %d requests, want 0", got)
		}
	})
}

func TestGetRetriedUntilItSucceeds(t *testing.T) {
	t.Parallel()
	var n atomic.Int32
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) <= 2 {
			w.WriteHeader(500)
			io.WriteString(w, "Конфликт блокировок при выполнении транзакции")
			return
		}
		io.WriteString(w, `{"orders":[]}`)
	})
	rec := &onec.Recorder{}
	orders, err := newClient(t, srv.URL).FindOrders(onec.WithRecorder(context.Background(), rec), "kaspi:1")
	if err != nil || len(orders) != 0 {
		t.Fatalf("find = %v, %v", orders, err)
	}
	xs := rec.Exchanges()
	if got, want := len(xs), 3; got != want {
		t.Fatalf("recorded %d exchanges, want %d", got, want)
	}
	if xs[0].Status != 500 || xs[2].Status != 200 {
		t.Fatalf("recorded statuses %d, %d; want 500 then 200", xs[0].Status, xs[2].Status)
	}
	if got, want := xs[2].Path, testPrefix+"/orders?external_id=kaspi%3A1"; got != want {
		t.Fatalf("recorded path = %q, want %q", got, want)
	}
	if got, want := xs[2].ResponseSHA256, onec.Digest([]byte(`{"orders":[]}`)); got != want {
		t.Fatalf("response digest = %s, want %s", got, want)
	}
}

func TestRecorderAndLogs(t *testing.T) {
	t.Parallel()
	srv := newServer(t, reply(201, "application/json", `{"ref":"r","number":"1","date":"2026-09-16T10:00:00"}`))
	var logs bytes.Buffer
	var mu sync.Mutex
	logger := slog.New(slog.NewJSONHandler(lockedWriter{&mu, &logs}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c := newClient(t, srv.URL, func(c *Config) { c.Logger = logger; c.SessionReuse = true })
	rec := &onec.Recorder{}
	ctx := onec.WithRecorder(context.Background(), rec)
	if _, err := c.CreateOrder(ctx, testOrder()); err != nil {
		t.Fatal(err)
	}
	xs := rec.Exchanges()
	if len(xs) != 1 {
		t.Fatalf("recorded %d exchanges, want 1", len(xs))
	}
	want := onec.Exchange{Method: "POST", Path: testPrefix + "/orders", Status: 201,
		RequestSHA256:  onec.Digest(srv.lastBody()),
		ResponseSHA256: onec.Digest([]byte(`{"ref":"r","number":"1","date":"2026-09-16T10:00:00"}`))}
	if xs[0] != want {
		t.Fatalf("exchange = %+v, want %+v", xs[0], want)
	}

	// A failed exchange is recorded with its error and no status.
	srv.Close()
	if _, err := c.CreateOrder(ctx, testOrder()); err == nil {
		t.Fatal("create on a closed server succeeded")
	}
	if xs := rec.Exchanges(); len(xs) != 2 || xs[1].Status != 0 || xs[1].Error == "" {
		t.Fatalf("exchanges = %+v, want a second one with an error", xs)
	}
	// Without a recorder nothing breaks.
	if _, err := c.Ping(context.Background()); err == nil {
		t.Fatal("ping on a closed server succeeded")
	}

	mu.Lock()
	out := logs.String()
	mu.Unlock()
	if !strings.Contains(out, `"msg":"1c exchange"`) {
		t.Fatalf("no debug line per exchange in %s", out)
	}
	creds := base64.StdEncoding.EncodeToString([]byte(testUser + ":" + testPassword))
	for _, secret := range []string{testPassword, creds, "Authorization"} {
		if strings.Contains(out, secret) {
			t.Fatalf("the log contains %q: %s", secret, out)
		}
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func TestMaxConcurrency(t *testing.T) {
	t.Parallel()
	var inFlight, peak atomic.Int32
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		time.Sleep(10 * time.Millisecond) // a slow 1C: the calls overlap
		inFlight.Add(-1)
		io.WriteString(w, `{"orders":[]}`)
	})
	c := newClient(t, srv.URL, func(c *Config) { c.MaxConcurrency = 2 })
	var wg sync.WaitGroup
	for range 12 {
		wg.Go(func() {
			if _, err := c.FindOrders(context.Background(), "kaspi:1"); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if got := peak.Load(); got > 2 {
		t.Fatalf("peak concurrency = %d, want at most 2", got)
	}
	if got, want := srv.count(), 12; got != want {
		t.Fatalf("server received %d, want %d", got, want)
	}
}

// forgetful is a base that starts numbered sessions and, once told to forget
// them, answers a cookie it does not know with 400 and its text, as 1C does.
type forgetful struct {
	mu    sync.Mutex
	n     int
	known map[string]bool
	last  string // the cookie of the last request
	body  string // the answer to a known session: the contract's, or this
}

func (f *forgetful) forget() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.known = nil
}

func (f *forgetful) lastCookie() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.last
}

func (f *forgetful) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	ck, err := r.Cookie("ibsession")
	f.last = ""
	if err == nil {
		f.last = ck.Value
	}
	if r.Header.Get("IBSession") == "start" {
		f.n++
		if f.known == nil {
			f.known = map[string]bool{}
		}
		v := fmt.Sprintf("s%d", f.n)
		f.known[v] = true
		http.SetCookie(w, &http.Cookie{Name: "ibsession", Value: v})
	}
	refused := err == nil && !f.known[ck.Value]
	f.mu.Unlock()
	switch {
	case refused:
		reply(400, "text/plain", "Сеанс отсутствует или удален")(w, r)
	case f.body != "":
		reply(400, "application/json", f.body)(w, r)
	case r.Method == http.MethodPost:
		reply(201, "application/json", `{"ref":"r","number":"1","date":"2026-09-16T10:00:00"}`)(w, r)
	default:
		reply(200, "application/json", `{"orders":[]}`)(w, r)
	}
}

func TestSessionExpiry(t *testing.T) {
	t.Parallel()
	session := func(c *Config) { c.SessionReuse = true; c.MaxConcurrency = 1 }
	ctx := context.Background()
	// expired is a client whose one session, started by a find, the base has
	// since forgotten.
	expired := func(t *testing.T) (*forgetful, *server, *Client) {
		base := &forgetful{}
		srv := newServer(t, base.ServeHTTP)
		c := newClient(t, srv.URL, session)
		if _, err := c.FindOrders(ctx, "kaspi:1"); err != nil {
			t.Fatal(err)
		}
		base.forget()
		return base, srv, c
	}
	t.Run("a GET starts a new session and goes on", func(t *testing.T) {
		t.Parallel()
		base, srv, c := expired(t)
		if _, err := c.FindOrders(ctx, "kaspi:1"); err != nil {
			t.Fatal(err)
		}
		if got, want := srv.count(), 3; got != want {
			t.Fatalf("server received %d, want %d (the first, the refused one, then one on a new session)", got, want)
		}
		if _, err := c.FindOrders(ctx, "kaspi:1"); err != nil {
			t.Fatal(err)
		}
		if got := base.lastCookie(); got != "s2" {
			t.Fatalf("kept cookie %q, want s2", got)
		}
	})
	t.Run("a POST is not resent", func(t *testing.T) {
		t.Parallel()
		_, srv, c := expired(t)
		_, err := c.CreateOrder(ctx, testOrder())
		e := asError(t, err)
		if e.Class != onec.Transient || e.Status != 400 {
			t.Fatalf("err = %v, want Transient 400", err)
		}
		if got := srv.count(); got != 2 {
			t.Fatalf("server received %d, want 2 (the find, the create once)", got)
		}
		if _, err := c.CreateOrder(ctx, testOrder()); err != nil {
			t.Fatalf("the next create, on a new session: %v", err)
		}
	})
	t.Run("a 400 from the service itself is permanent", func(t *testing.T) {
		t.Parallel()
		base := &forgetful{body: `{"error":{"code":"bad_request","message":"Ошибка чтения JSON"}}`}
		srv := newServer(t, base.ServeHTTP)
		c := newClient(t, srv.URL, session)
		for range 2 { // the first starts a session, the second is sent on it
			_, err := c.FindOrders(ctx, "kaspi:1")
			if got, want := asError(t, err).Class, onec.Permanent; got != want {
				t.Fatalf("class = %v, want %v", got, want)
			}
		}
		if got, want := base.lastCookie(), "s1"; got != want {
			t.Fatalf("the second find sent cookie %q, want %q", got, want)
		}
		if got := srv.count(); got != 2 {
			t.Fatalf("server received %d, want 2", got)
		}
	})
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	tests := []struct {
		cfg  Config
		want string
	}{
		{Config{}, "onec.base_url is required, e.g. http://1c.local/trade/hs/ordersync/v1"},
		{Config{BaseURL: "1c.local/trade"}, "onec.base_url"},
		{Config{BaseURL: "ftp://1c.local/trade"}, "http://"},
		{Config{BaseURL: "http://user:pw@1c.local/trade"}, "must not carry credentials"},
		{Config{BaseURL: "http://1c.local/trade?x=1"}, "query"},
		{Config{BaseURL: "http://1c.local", Timeout: -time.Second}, "onec.timeout"},
		{Config{BaseURL: "http://1c.local", MaxConcurrency: -1}, "onec.max_concurrency"},
		{Config{BaseURL: "http://1c.local", MaxResponse: -1}, "onec.max_response"},
	}
	for _, tt := range tests {
		_, err := New(tt.cfg)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Fatalf("New(%+v) = %v, want an error containing %q", tt.cfg, err, tt.want)
		}
		if strings.Contains(err.Error(), "pw@") {
			t.Fatalf("the error shows the URL's password: %v", err)
		}
	}
	c, err := New(Config{BaseURL: "https://1c.local/trade/hs/ordersync/v1/"})
	if err != nil {
		t.Fatal(err)
	}
	cfg := c.conn.Config()
	if c.conn.Base() != "https://1c.local/trade/hs/ordersync/v1" || cfg.Timeout != DefaultTimeout ||
		cfg.MaxConcurrency != DefaultMaxConcurrency || cfg.GetRetries != DefaultGetRetries || cfg.RetryBackoff != DefaultRetryBackoff ||
		cfg.MaxResponse != DefaultMaxResponse || cfg.FinishPath != "/ping" {
		t.Fatalf("defaults not applied: base %q, %+v", c.conn.Base(), cfg)
	}
}

// A NUL or invalid UTF-8 in 1C's answer never reaches the error text, which the
// journal stores as the operation's last error (PostgreSQL refuses a NUL in text).
func TestErrorQuotesAnAnswerSafely(t *testing.T) {
	t.Parallel()
	srv := newServer(t, reply(503, "text/plain", "Service\x00Unavailable \xff"))
	c := newClient(t, srv.URL)
	_, err := c.FindOrders(context.Background(), "site:A-1")
	if err == nil {
		t.Fatal("no error for a 503")
	}
	if msg := err.Error(); strings.ContainsRune(msg, 0) || !utf8.ValidString(msg) || !strings.Contains(msg, `Service\x00Unavailable \xff`) {
		t.Fatalf("error %q: want the answer quoted with escapes", msg)
	}
}
