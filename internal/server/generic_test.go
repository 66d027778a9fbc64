package server

import (
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ordersync/ordersync/internal/inbox"
	"github.com/ordersync/ordersync/internal/order"
	"github.com/ordersync/ordersync/internal/stdwebhook"
)

// The Standard Webhooks test vector: its signature passes verification (the body,
// not being an order, is then refused as one: 400), and the same body with other
// white space does not verify (401). Nothing is stored either way.
func TestStandardWebhooksVector(t *testing.T) {
	t.Parallel()
	const (
		id   = "msg_p5jXN8AQM9LWM0D4loKWxJek"
		sig  = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
		body = `{"test": 2432232314}`
	)
	h := newHarness(t, func(c *Config) { c.Now = func() time.Time { return time.Unix(1614265330, 0) } })
	req := func(body string) *http.Request {
		r := httptest.NewRequest(http.MethodPost, "/webhooks/site", strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("webhook-id", id)
		r.Header.Set("webhook-timestamp", "1614265330")
		r.Header.Set("webhook-signature", sig)
		return r
	}

	w := h.do(req(body))
	wantStatus(t, w, http.StatusBadRequest)
	ans := decode(t, w)
	if fields, _ := ans["fields"].([]any); len(fields) != 1 || fields[0] != "test" {
		t.Fatalf("answer %v, want the invalid order's field named: test", ans)
	}
	if h.stat("site", outRejected, "invalid_order") != 1 || h.stat("site", outRejected, "bad_signature") != 0 {
		t.Fatalf("the vector was not counted as verified and invalid: %v", h.srv.Stats())
	}

	w = h.do(req(`{"test":2432232314}`))
	wantStatus(t, w, http.StatusUnauthorized)
	if got := decode(t, w)["reason"]; got != "no signature matches" {
		t.Fatalf("reason %v", got)
	}
	h.stored(0, 0)
}

func TestGenericRegistersOrder(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	body := orderJSON("site", "A-1001")
	w := h.do(signedRequest("site", "msg_1", testNow, body, siteSecret))
	wantStatus(t, w, http.StatusOK)
	ans := decode(t, w)
	if ans["status"] != "processed" || ans["key"] != "site:order:A-1001:create" {
		t.Fatalf("answer %v", ans)
	}
	op, ok := h.inbox.op("site:order:A-1001:create")
	if !ok || op.Kind != order.KindCreate || op.Source != "site" || op.ExternalID != "A-1001" {
		t.Fatalf("operation %+v (found %v)", op, ok)
	}
	o, err := order.Parse(op.Payload)
	if err != nil || o.LinesTotal().String() != "3000" {
		t.Fatalf("payload %s: %v", op.Payload, err)
	}
	ev, ok := h.inbox.event("site", "msg_1")
	if !ok || !bytes.Equal(ev.ev.Body, body) || ev.ev.ContentType != "application/json" || !ev.ev.ReceivedAt.Equal(testNow) {
		t.Fatalf("stored event %+v (found %v): want the raw body", ev, ok)
	}
	if h.registered() != 1 {
		t.Fatalf("OnRegistered called %d times, want 1", h.registered())
	}
	h.stored(1, 1)
}

// An order without a source takes the path's; another source is refused naming it.
func TestGenericSource(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	w := h.do(signedRequest("site", "msg_nosource", testNow, orderJSON("", "B-1"), siteSecret))
	wantStatus(t, w, http.StatusOK)
	if op, ok := h.inbox.op("site:order:B-1:create"); !ok || op.Source != "site" {
		t.Fatalf("operation %+v (found %v)", op, ok)
	}

	w = h.do(signedRequest("site", "msg_othersource", testNow, orderJSON("kaspi", "B-2"), siteSecret))
	wantStatus(t, w, http.StatusBadRequest)
	if f, _ := decode(t, w)["fields"].([]any); len(f) != 1 || f[0] != "source" {
		t.Fatalf("answer %s, want the field source named", w.Body)
	}
	h.stored(1, 1)
}

// A rotated secret list accepts deliveries signed with the old secret and with the
// new one; a third is refused.
func TestGenericRotatedSecrets(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) {
		c.Sources = map[string]SourceConfig{"site": {Secrets: []stdwebhook.Secret{
			stdwebhook.MustParseSecret(otherSecret), stdwebhook.MustParseSecret(siteSecret),
		}}}
	})
	wantStatus(t, h.do(signedRequest("site", "msg_old", testNow, orderJSON("site", "R-1"), siteSecret)), http.StatusOK)
	wantStatus(t, h.do(signedRequest("site", "msg_new", testNow, orderJSON("site", "R-2"), otherSecret)), http.StatusOK)
	third, _ := stdwebhook.GenerateSecret()
	wantStatus(t, h.do(signedRequest("site", "msg_third", testNow, orderJSON("site", "R-3"), third.Encode())), http.StatusUnauthorized)
	h.stored(2, 2)
}

// webhook-timestamp may be off by the tolerance either way, not more.
func TestGenericTolerance(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) { c.Tolerance = 2 * time.Minute })
	cases := []struct {
		id     string
		offset time.Duration
		status int
	}{
		{"msg_past_edge", -2 * time.Minute, http.StatusOK},
		{"msg_future_edge", 2 * time.Minute, http.StatusOK},
		{"msg_too_old", -2*time.Minute - time.Second, http.StatusUnauthorized},
		{"msg_too_new", 2*time.Minute + time.Second, http.StatusUnauthorized},
	}
	for i, c := range cases {
		w := h.do(signedRequest("site", c.id, testNow.Add(c.offset), orderJSON("site", "T-"+string(rune('1'+i))), siteSecret))
		if w.Code != c.status {
			t.Errorf("%s: status %d, want %d", c.id, w.Code, c.status)
		}
		if c.status == http.StatusUnauthorized {
			if got := decode(t, w)["reason"]; got != "timestamp outside tolerance" {
				t.Errorf("%s: reason %v", c.id, got)
			}
		}
	}
	h.stored(2, 2)
	if n := h.stat("site", outRejected, "bad_timestamp"); n != 2 {
		t.Fatalf("bad_timestamp counted %d times, want 2", n)
	}
}

// Every bad request gets its status and a short reason, and stores nothing.
func TestGenericRejects(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) { c.MaxBody = 2048 })
	good := orderJSON("site", "X-1")

	unsigned := signedRequest("site", "msg_x", testNow, good, siteSecret)
	unsigned.Header.Del("webhook-signature")

	textPlain := signedRequest("site", "msg_x", testNow, good, siteSecret)
	textPlain.Header.Set("Content-Type", "text/plain")

	big := append(bytes.Repeat([]byte(" "), 4096), good...)
	bigChunked := signedRequest("site", "msg_big", testNow, big, siteSecret)
	bigChunked.ContentLength = -1 // no Content-Length: the limit is found while reading

	noLines := []byte(strings.Replace(string(good), `"lines": [{"sku": "SKU-8812", "name": "Чайник", "quantity": 2, "price": 1500.00}]`, `"lines": []`, 1))
	badQty := []byte(strings.Replace(string(good), `"quantity": 2`, `"quantity": "two"`, 1))

	cases := []struct {
		name   string
		req    *http.Request
		status int
		reason string
		field  string
	}{
		{"unknown source", signedRequest("shop", "msg_x", testNow, good, siteSecret), http.StatusNotFound, "no such webhook source", ""},
		{"ozon is not generic", signedRequest("ozon", "msg_x", testNow, good, siteSecret), 0, "", ""},
		{"missing signature", unsigned, http.StatusUnauthorized, "missing webhook-signature", ""},
		{"wrong secret", signedRequest("site", "msg_x", testNow, good, otherSecret), http.StatusUnauthorized, "no signature matches", ""},
		{"content type", textPlain, http.StatusUnsupportedMediaType, "Content-Type must be application/json", ""},
		{"too large", signedRequest("site", "msg_big", testNow, big, siteSecret), http.StatusRequestEntityTooLarge, "body larger than 2 KiB", ""},
		{"too large, chunked", bigChunked, http.StatusRequestEntityTooLarge, "body larger than 2 KiB", ""},
		{"no lines", signedRequest("site", "msg_nolines", testNow, noLines, siteSecret), http.StatusBadRequest, "", "lines"},
		{"bad quantity", signedRequest("site", "msg_badqty", testNow, badQty, siteSecret), http.StatusBadRequest, "", "lines[0].quantity"},
		{"not JSON", signedRequest("site", "msg_notjson", testNow, []byte("<xml/>"), siteSecret), http.StatusBadRequest, "", "(document)"},
	}
	for _, c := range cases {
		w := h.do(c.req)
		if c.status == 0 { // ozon's own endpoint answers it (403 here: the test's address)
			if w.Code == http.StatusOK {
				t.Errorf("%s: accepted", c.name)
			}
			continue
		}
		if w.Code != c.status {
			t.Errorf("%s: status %d (%s), want %d", c.name, w.Code, w.Body, c.status)
			continue
		}
		ans := decode(t, w)
		if c.reason != "" && ans["reason"] != c.reason {
			t.Errorf("%s: reason %v, want %q", c.name, ans["reason"], c.reason)
		}
		if c.field != "" {
			if f, _ := ans["fields"].([]any); len(f) == 0 || f[0] != c.field {
				t.Errorf("%s: answer %v, want the field %s named", c.name, ans, c.field)
			}
		}
	}
	h.stored(0, 0)
	if h.inbox.receives != 0 {
		t.Fatalf("Receive called %d times for bad requests", h.inbox.receives)
	}
	if n := h.stat(sourceUnknown, outRejected, "unknown_source"); n != 1 {
		t.Fatalf("unknown source counted %d times under %q: %v", n, sourceUnknown, h.srv.Stats())
	}
}

// A redelivery gets the saved answer and registers nothing again; the same id with
// another body is a conflict, 409.
func TestGenericDuplicateAndConflict(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	body := orderJSON("site", "D-1")
	first := h.do(signedRequest("site", "msg_dup", testNow, body, siteSecret))
	wantStatus(t, first, http.StatusOK)
	again := h.do(signedRequest("site", "msg_dup", testNow.Add(time.Minute), body, siteSecret))
	wantStatus(t, again, http.StatusOK)
	if again.Body.String() != first.Body.String() {
		t.Fatalf("duplicate answered %s, want the saved %s", again.Body, first.Body)
	}
	if h.registered() != 1 || h.stat("site", outDuplicate, "") != 1 {
		t.Fatalf("OnRegistered %d times, stats %v", h.registered(), h.srv.Stats())
	}

	// The answer given is the one saved with the event, not a fresh one.
	e, _ := h.inbox.event("site", "msg_dup")
	h.inbox.mu.Lock()
	e.answer.Body = []byte(`{"status":"processed","key":"site:order:D-1:create","saved":true}`)
	h.inbox.mu.Unlock()
	saved := h.do(signedRequest("site", "msg_dup", testNow, body, siteSecret))
	wantStatus(t, saved, http.StatusOK)
	if decode(t, saved)["saved"] != true {
		t.Fatalf("duplicate answered %s, not the saved answer", saved.Body)
	}

	changed := orderJSON("site", "D-2")
	w := h.do(signedRequest("site", "msg_dup", testNow, changed, siteSecret))
	wantStatus(t, w, http.StatusConflict)
	if decode(t, w)["status"] != "conflict" {
		t.Fatalf("conflict answer %s", w.Body)
	}
	h.stored(1, 1)
	if e, _ := h.inbox.event("site", "msg_dup"); !bytes.Equal(e.ev.Body, body) || e.conflicts != 1 {
		t.Fatalf("the stored event was overwritten or the conflict not recorded: %+v", e)
	}
}

// A delivery racing one still being registered is told to retry, and is never
// registered a second time.
func TestGenericInProgress(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	h.inbox.hold = func(inbox.Event) {
		once.Do(func() { close(entered); <-release })
	}
	body := orderJSON("site", "P-1")
	done := make(chan *httptest.ResponseRecorder)
	go func() { done <- h.do(signedRequest("site", "msg_race", testNow, body, siteSecret)) }()
	<-entered

	w := h.do(signedRequest("site", "msg_race", testNow, body, siteSecret))
	wantStatus(t, w, http.StatusConflict)
	if w.Header().Get("Retry-After") != "1" || decode(t, w)["status"] != "in_progress" {
		t.Fatalf("in progress answered %v %s", w.Header(), w.Body)
	}
	close(release)
	wantStatus(t, <-done, http.StatusOK)
	h.stored(1, 1)
	wantStatus(t, h.do(signedRequest("site", "msg_race", testNow, body, siteSecret)), http.StatusOK)
	if h.registered() != 1 {
		t.Fatalf("OnRegistered %d times, want 1", h.registered())
	}
}

// An inbox that fails answers 503: the sender retries.
func TestGenericInboxFailure(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.inbox.fail = errors.New("connection refused")
	w := h.do(signedRequest("site", "msg_fail", testNow, orderJSON("site", "F-1"), siteSecret))
	wantStatus(t, w, http.StatusServiceUnavailable)
	if h.registered() != 0 || h.stat("site", outError, "inbox_error") != 1 {
		t.Fatalf("OnRegistered %d, stats %v", h.registered(), h.srv.Stats())
	}
	h.stored(0, 0)

	// The sender's redelivery registers it, once.
	h.inbox.mu.Lock()
	h.inbox.fail = nil
	h.inbox.mu.Unlock()
	for range 2 {
		wantStatus(t, h.do(signedRequest("site", "msg_fail", testNow, orderJSON("site", "F-1"), siteSecret)), http.StatusOK)
	}
	h.stored(1, 1)
	if h.registered() != 1 {
		t.Fatalf("OnRegistered %d times, want 1", h.registered())
	}
}
