package httpservice

import (
	"bytes"
	"errors"
	"net/http"
	"testing"

	"github.com/ordersync/ordersync/internal/onec"
	"github.com/ordersync/ordersync/internal/onec/wire"
)

// fuzzOps are the operations whose answers FuzzAnswer judges, by the byte that
// picks one.
var fuzzOps = []string{"ping", "find", "create", "cancel", "stock"}

var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

// judgeAnswer runs an answer of status and raw body for op through what a call
// does with it after the exchange (which removes a BOM): judge, then the
// operation's result.
func judgeAnswer(c *Client, op string, status int, raw []byte) (any, error) {
	ans := wire.Answer{Status: status, Body: bytes.TrimPrefix(raw, utf8BOM), Header: http.Header{}}
	var k wire.Call
	switch op {
	case "ping":
		k = pingCall()
	case "find":
		k = findCall("kaspi:1")
	case "create":
		k = createCall([]byte(`{}`))
	case "cancel":
		k = cancelCall([]byte(`{}`))
	case "stock":
		k = stockCall("WH1")
	}
	a, err := c.judge(k, ans)
	if err != nil {
		return nil, err
	}
	switch op {
	case "ping":
		return c.pingResult(k, a)
	case "find":
		return c.findResult(k, a)
	case "create":
		return c.createResult(k, a)
	case "cancel":
		return c.cancelResult(k, a)
	default:
		return c.stockResult(k, a)
	}
}

// FuzzAnswer feeds any status and body to the judgement of every 1C answer the
// client parses. It must never panic; an error is a classified *onec.Error of the
// operation that explains itself; a success has the documented shape.
func FuzzAnswer(f *testing.F) {
	seeds := []struct {
		op     string
		status int
		body   string
	}{
		{"ping", 200, `{"service":"ordersync","version":"1.0"}`},
		{"ping", 200, "OK"},
		{"ping", 404, "<html>Not Found</html>"},
		{"ping", 406, "Нет свободной лицензии"},
		{"find", 200, `{"orders":[{"ref":"a","number":"1","date":"2026-09-16T10:00:00","external_id":"kaspi:1","posted":true,"deleted":false},{"ref":"b","number":"2","date":"2026-09-16T10:00:01","external_id":"kaspi:1","posted":false,"deleted":true}]}`},
		{"find", 200, `{"orders":null}`},
		{"find", 200, `{"orders":"none"}`},
		{"find", 200, "\uFEFF" + `{"orders":[]}`},
		{"find", 200, "<!DOCTYPE html><html><body>Идентификация пользователя не выполнена</body></html>"},
		{"find", 302, ""},
		{"find", 400, "bad"},
		{"find", 403, "Forbidden"},
		{"find", 500, `{ОбщийМодуль.ordersync.Модуль(131)}: Не удалось записать "Заказ клиента"!`},
		{"find", 503, "Service Unavailable"},
		{"create", 201, "\uFEFF" + `{"ref":"5a1f","number":"ЗК-000123","date":"2026-09-16T10:00:00"}`},
		{"create", 201, `{}`},
		{"create", 409, `{"error":{"code":"already_exists","message":"есть"},"order":{"ref":"77aa","number":"ЗК-000007","date":"2026-09-15T09:00:00","external_id":"kaspi:512344101","posted":true,"deleted":false}}`},
		{"create", 409, `{"error":{"code":"already_exists","message":"есть"}}`},
		{"create", 409, `{"error":{"code":"already_exists"}}`},
		{"create", 400, `{"error":{"code":"bad_request","message":"Ошибка чтения JSON"}}`},
		{"create", 422, `{"error":{"code":"unknown_sku","message":"Номенклатура не найдена","field":"lines[1].sku"}}`},
		{"create", 404, `{"error":{"code":"not_found","message":"нет склада"}}`},
		{"create", 404, "Не найден шаблон URL"},
		{"create", 500, "{ОбщийМодуль.ordersync.Модуль(118)}: Конфликт блокировок при выполнении транзакции"},
		{"create", 504, "Gateway Timeout"},
		{"create", 500, `{"error":{"code":"lock_conflict","message":"Конфликт блокировок при выполнении транзакции"}}`},
		{"create", 500, `{"error":{"code":"exception","message":"Lock request timeout"}}`},
		{"create", 500, `<html><head><style>.e{display:block}</style></head><body>Internal Server Error</body></html>`},
		{"create", 502, `{"error":"Bad Gateway"}`},
		{"create", 200, "<!DOCTYPE html><html><body>Идентификация пользователя не выполнена</body></html>"},
		{"find", 500, `{"error":{"code":"lock_conflict","message":"Конфликт блокировок"}}`},
		{"create", 401, "Unauthorized"},
		{"cancel", 200, `{"ref":"r1","status":"cancelled"}`},
		{"cancel", 200, `{"ref":"x"}`},
		{"cancel", 404, `{"error":{"code":"not_found","message":"нет"}}`},
		{"cancel", 404, `{}`},
		{"cancel", 409, `{"error":{"code":"conflict","message":"x"}}`},
		{"cancel", 500, "Таблица заблокирована другим сеансом"},
		{"stock", 200, `{"warehouse":"WH1","taken_at":"2026-09-16T10:00:00","items":[{"sku":"A","quantity":0.1,"price":12345678901234567890.123456789}]}`},
		{"stock", 200, `{"warehouse":"WH1","items":null}`},
		{"stock", 200, `{"items":[{"sku":"A","quantity":1e999999999}]}`},
		{"stock", 504, "Gateway Timeout"},
	}
	for _, s := range seeds {
		for i, op := range fuzzOps {
			if op == s.op {
				f.Add(uint8(i), s.status, []byte(s.body))
			}
		}
	}
	c, err := New(Config{BaseURL: "http://1c.test/trade/hs/ordersync/v1", Username: testUser, Password: testPassword})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, pick uint8, status int, body []byte) {
		op := fuzzOps[int(pick)%len(fuzzOps)]
		if status < 100 || status > 599 {
			status = 100 + (status%500+500)%500 // 100..599, what a server can send
		}
		res, err := judgeAnswer(c, op, status, body)
		if err != nil {
			var e *onec.Error
			if !errors.As(err, &e) {
				t.Fatalf("%s %d: error %v (%T) is not a *onec.Error", op, status, err, err)
			}
			if e.Op != op || e.Status != status {
				t.Fatalf("%s %d: error %+v names op %q, status %d", op, status, e, e.Op, e.Status)
			}
			if e.Class < onec.Transient || e.Class > onec.Configuration || e.Class.String() == "" {
				t.Fatalf("%s %d: error %v has class %v", op, status, err, e.Class)
			}
			if e.Message == "" {
				t.Fatalf("%s %d: error %v does not say what 1C answered", op, status, err)
			}
			if bytes.Contains([]byte(err.Error()), []byte(testPassword)) {
				t.Fatalf("%s %d: error shows the password: %v", op, status, err)
			}
			post := op == "create" || op == "cancel"
			trimmed := bytes.TrimPrefix(body, utf8BOM)
			if e.API && !isAPIError(trimmed) {
				t.Fatalf("%s %d: API set for a body that is not the contract's error: %q", op, status, body)
			}
			if post && status >= 500 && e.Class == onec.Transient && (!e.API || e.Code != codeLockConflict) {
				t.Fatalf("%s %d: transient without the lock_conflict error: %v", op, status, err)
			}
			if post && status >= 200 && status < 300 && !isJSON(trimmed) && e.Class != onec.Unknown {
				t.Fatalf("%s %d: a 2xx that is not JSON is %v, want an unknown outcome", op, status, e.Class)
			}
			return
		}
		ok2xx := status >= 200 && status < 300
		switch v := res.(type) {
		case onec.Info:
			if status != 200 {
				t.Fatalf("ping %d succeeded: %+v", status, v)
			}
		case []onec.Order:
			if status != 200 || v == nil {
				t.Fatalf("find %d = %#v, want 200 and a non-nil slice", status, v)
			}
		case onec.Created:
			switch {
			case v.Ref == "":
				t.Fatalf("create %d succeeded without a ref: %+v", status, v)
			case status == http.StatusConflict && !v.Existing, status != http.StatusConflict && v.Existing:
				t.Fatalf("create %d = %+v: Existing must be set exactly on 409", status, v)
			case status != http.StatusConflict && status != 200 && status != 201:
				t.Fatalf("create %d succeeded: %+v", status, v)
			}
		case onec.Cancelled:
			if status != 200 || v.Status != "cancelled" {
				t.Fatalf("cancel %d = %+v, want 200 and status cancelled", status, v)
			}
		case onec.Stock:
			if status != 200 || v.Items == nil {
				t.Fatalf("stock %d = %#v, want 200 and non-nil items", status, v)
			}
		default:
			t.Fatalf("%s: unexpected result %T", op, res)
		}
		if ok2xx && !isJSON(bytes.TrimPrefix(body, utf8BOM)) {
			t.Fatalf("%s %d succeeded on a body that is not JSON: %q", op, status, body)
		}
	})
}
