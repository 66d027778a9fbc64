package httpservice

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ordersync/ordersync/internal/onec"
)

// A lock conflict is recognised by the contract's JSON error code only; whatever
// else a 5xx or a 2xx carries, a POST that got it may have been carried out.
func TestClassificationByContract(t *testing.T) {
	t.Parallel()
	// A reverse proxy's error page: its style sheet says "display:block", which holds
	// the letters of "lock" and says nothing about 1C.
	const proxyPage = `<!DOCTYPE html><html><head><title>500 Internal Server Error</title>` +
		`<style>.err{display:block;margin:2em auto}</style></head>` +
		`<body><div class="err"><h1>Internal Server Error</h1><p>The upstream server failed.</p></div></body></html>`
	const nginx502 = "<html><head><title>502 Bad Gateway</title></head><body><center><h1>502 Bad Gateway</h1></center><hr><center>nginx</center></body></html>"
	const lockText = "{ОбщийМодуль.ordersync.Модуль(118)}: Конфликт блокировок при выполнении транзакции:\nПревышено максимальное время ожидания предоставления блокировки"
	const lockJSON = `{"error":{"code":"lock_conflict","message":"Конфликт блокировок при выполнении транзакции: Превышено максимальное время ожидания предоставления блокировки"}}`
	const exceptionJSON = `{"error":{"code":"exception","message":"ordersync: у партнера \"Kaspi\" нет контрагента"}}`
	const lockWordJSON = `{"error":{"code":"exception","message":"Lock request timeout on the proxy"}}`
	const login = "<!DOCTYPE html><html><body>Идентификация пользователя не выполнена</body></html>"
	const text, jsonType, htmlType = "text/plain; charset=utf-8", "application/json", "text/html; charset=utf-8"
	tests := []struct {
		name     string
		op       string
		h        http.HandlerFunc
		class    onec.Class
		api      bool
		code     string
		requests int
	}{
		// A POST answered by something that is not the module's JSON error.
		{"500 proxy page with display:block on create", "create", reply(500, htmlType, proxyPage), onec.Unknown, false, "", 1},
		{"500 proxy page with display:block on cancel", "cancel", reply(500, htmlType, proxyPage), onec.Unknown, false, "", 1},
		{"502 page on create", "create", reply(502, htmlType, nginx502), onec.Unknown, false, "", 1},
		{"502 text on create", "create", reply(502, text, "Bad Gateway"), onec.Unknown, false, "", 1},
		{"503 text on create", "create", reply(503, text, "Service Unavailable"), onec.Unknown, false, "", 1},
		{"503 text on cancel", "cancel", reply(503, text, "Service Unavailable"), onec.Unknown, false, "", 1},
		{"504 text on create", "create", reply(504, text, "Gateway Timeout"), onec.Unknown, false, "", 1},
		{"500 plain lock text without JSON on create", "create", reply(500, text, lockText), onec.Unknown, false, "", 1},
		{"500 plain «заблокирована» on cancel", "cancel", reply(500, text, "Таблица заблокирована другим сеансом"), onec.Unknown, false, "", 1},
		{"500 plain LOCK in English on create", "create", reply(500, text, "Lock request timeout"), onec.Unknown, false, "", 1},
		{"200 HTML on create", "create", reply(200, htmlType, login), onec.Unknown, false, "", 1},
		{"201 HTML on create", "create", reply(201, htmlType, login), onec.Unknown, false, "", 1},
		{"200 plain text on cancel", "cancel", reply(200, text, "OK"), onec.Unknown, false, "", 1},

		// The module's own JSON error.
		{"500 lock_conflict on create", "create", reply(500, jsonType, lockJSON), onec.Transient, true, "lock_conflict", 1},
		{"500 lock_conflict on cancel", "cancel", reply(500, jsonType, lockJSON), onec.Transient, true, "lock_conflict", 1},
		{"500 lock_conflict on find is retried", "find", reply(500, jsonType, lockJSON), onec.Transient, true, "lock_conflict", 3},
		{"500 lock_conflict on ping is retried", "ping", reply(500, jsonType, lockJSON), onec.Transient, true, "lock_conflict", 3},
		{"500 exception on create: the handler has finished", "create", reply(500, jsonType, exceptionJSON), onec.Unknown, true, "exception", 1},
		{"500 exception on cancel", "cancel", reply(500, jsonType, exceptionJSON), onec.Unknown, true, "exception", 1},
		{"500 exception whose message says lock on create", "create", reply(500, jsonType, lockWordJSON), onec.Unknown, true, "exception", 1},
		{"500 exception on find is retried", "find", reply(500, jsonType, exceptionJSON), onec.Transient, true, "exception", 3},

		// A GET changes nothing: whatever the 5xx, it is tried again.
		{"500 proxy page on find is retried", "find", reply(500, htmlType, proxyPage), onec.Transient, false, "", 3},
		{"502 page on find is retried", "find", reply(502, htmlType, nginx502), onec.Transient, false, "", 3},
		{"503 on ping is retried", "ping", reply(503, text, "Service Unavailable"), onec.Transient, false, "", 3},
		{"504 on stock is retried", "stock", reply(504, text, "Gateway Timeout"), onec.Transient, false, "", 3},
		{"200 HTML on find is auth", "find", reply(200, htmlType, login), onec.Auth, false, "", 1},
		{"200 HTML on ping is auth", "ping", reply(200, htmlType, login), onec.Auth, false, "", 1},

		// Refused before the handler ran.
		{"406 on create", "create", reply(406, text, "Нет свободной лицензии"), onec.Transient, false, "", 1},
		{"429 on create", "create", reply(429, text, "Too Many Requests"), onec.Transient, false, "", 1},
		{"404 page on create", "create", reply(404, htmlType, "<html><body><h1>404 Not Found</h1></body></html>"), onec.Configuration, false, "", 1},
		{"405 page on create", "create", reply(405, text, "Method Not Allowed"), onec.Configuration, false, "", 1},
		{"404 page on find", "find", reply(404, text, "Не найден шаблон URL"), onec.Configuration, false, "", 1},
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
			if got, want := e.API, tt.api; got != want {
				t.Fatalf("API = %v, want %v (%v)", got, want, err)
			}
			if got, want := e.Code, tt.code; got != want {
				t.Fatalf("code = %q, want %q", got, want)
			}
			if got, want := srv.count(), tt.requests; got != want {
				t.Fatalf("server received %d requests, want %d", got, want)
			}
			if e.Message == "" {
				t.Fatalf("no message in %v", err)
			}
			if tt.class == onec.Auth {
				checkAuthMessage(t, e, srv.URL+testPrefix)
			}
		})
	}
}

// A 2xx that is not JSON on a POST may be 1C's answer mangled on the way, or the
// page a publication shows for refused credentials: the message says both.
func TestNonJSON2xxOnPostSaysBoth(t *testing.T) {
	t.Parallel()
	srv := newServer(t, reply(200, "text/html", "<html><body>Идентификация пользователя не выполнена</body></html>"))
	_, err := newClient(t, srv.URL).CreateOrder(context.Background(), testOrder())
	e := asError(t, err)
	if e.Class != onec.Unknown {
		t.Fatalf("class = %v, want %v (%v)", e.Class, onec.Unknown, err)
	}
	for _, want := range []string{"may have", "created", "credentials", "find", `onec.username "` + testUser + `"`} {
		if !strings.Contains(e.Message, want) {
			t.Fatalf("message %q does not say %q", e.Message, want)
		}
	}
	if strings.Contains(err.Error(), testPassword) {
		t.Fatalf("the error shows the password: %v", err)
	}
}

// A POST that never reached the wire is not marked sent.
func TestCreateNotWrittenIsNotMarked(t *testing.T) {
	t.Parallel()
	srv := newServer(t, reply(201, "application/json", `{"ref":"r"}`))
	d := &hangingDialer{}
	c := newClient(t, srv.URL, func(c *Config) { c.Timeout = 50 * time.Millisecond; c.Transport = d.transport() })
	rec := &onec.Recorder{}
	if _, err := c.CreateOrder(onec.WithRecorder(context.Background(), rec), testOrder()); err == nil {
		t.Fatal("a create that could not connect succeeded")
	}
	if got := rec.LastSent(); !got.IsZero() {
		t.Fatalf("LastSent = %v for a create never written, want zero", got)
	}
}
