package server

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestExtraHandlers(t *testing.T) {
	t.Parallel()
	feed := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/xml")
		_, _ = w.Write([]byte("<feed path=\"" + r.URL.Path + "\"/>"))
	})
	h := newHarness(t, func(c *Config) {
		c.Handlers = map[string]http.Handler{"GET /feeds/kaspi/": feed}
	})
	for _, method := range []string{http.MethodGet, http.MethodHead} {
		w := h.do(httptest.NewRequest(method, "/feeds/kaspi/token.xml", nil))
		wantStatus(t, w, http.StatusOK)
		if method == http.MethodGet && w.Body.String() != `<feed path="/feeds/kaspi/token.xml"/>` {
			t.Fatalf("GET body %q", w.Body)
		}
	}
	wantStatus(t, h.do(httptest.NewRequest(http.MethodPost, "/feeds/kaspi/token.xml", nil)), http.StatusMethodNotAllowed)
	// The server's own routes are still there, and an extra route is not counted
	// as a webhook.
	wantStatus(t, h.do(httptest.NewRequest(http.MethodGet, "/healthz", nil)), http.StatusOK)
	if n := len(h.srv.Stats()); n != 0 {
		t.Fatalf("extra routes counted in Stats: %v", h.srv.Stats())
	}

	for _, c := range []struct {
		name    string
		pattern string
		handler http.Handler
		want    string
	}{
		{"conflict", "POST /webhooks/{name}", feed, `route "POST /webhooks/{name}"`},
		{"taken", "GET /healthz", feed, `route "GET /healthz"`},
		{"bad pattern", "GET feeds", feed, `route "GET feeds"`},
		{"nil handler", "GET /feeds/", nil, "nil"},
	} {
		_, err := New(Config{Inbox: newFakeInbox(), Handlers: map[string]http.Handler{c.pattern: c.handler}})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: New error %v, want one naming %s", c.name, err, c.want)
		}
	}
}
