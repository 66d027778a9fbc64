package server

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/ordersync/ordersync/internal/order"
)

const ozonAddr = "195.34.21.10:40000" // inside Ozon's published 195.34.21.0/24

func ozonRequest(remote, body string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/webhooks/ozon", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.RemoteAddr = remote
	return r
}

const (
	ozonNewPosting = `{
  "message_type": "TYPE_NEW_POSTING",
  "posting_number": "05708065-0029-1",
  "products": [{"sku": 147451959, "quantity": 2}],
  "in_process_at": "2026-09-16T10:00:00Z",
  "warehouse_id": 18850503335000,
  "seller_id": 15
}`
	ozonCancel = `{
  "message_type": "TYPE_POSTING_CANCELLED",
  "posting_number": "05708065-0029-1",
  "products": [{"sku": 147451959, "quantity": 1}],
  "old_state": "posting_transferred_to_courier_service",
  "new_state": "posting_canceled",
  "changed_state_date": "2026-09-16T12:30:00.294Z",
  "reason": {"id": 352, "message": "Покупатель передумал"},
  "warehouse_id": 0,
  "seller_id": 15
}`
)

// ozonErr decodes Ozon's error shape.
func ozonErr(t *testing.T, w *httptest.ResponseRecorder) ozonErrorBody {
	t.Helper()
	var e ozonError
	if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || e.Error.Code == "" {
		t.Fatalf("answer %d %s is not Ozon's error shape (%v)", w.Code, w.Body, err)
	}
	return e.Error
}

func TestOzonPing(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	w := h.do(ozonRequest(ozonAddr, `{"message_type": "TYPE_PING", "time": "2026-09-16T09:59:59Z"}`))
	wantStatus(t, w, http.StatusOK)
	if ct := w.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type %q", ct)
	}
	var got map[string]string
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"version": "1.2.3", "name": "ordersync-test", "time": "2026-09-16T10:00:00Z"}
	if len(got) != len(want) {
		t.Fatalf("ping answer %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("ping answer %v, want %v", got, want)
		}
	}
	h.stored(0, 0)
}

func TestOzonNewPosting(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	w := h.do(ozonRequest(ozonAddr, ozonNewPosting))
	wantStatus(t, w, http.StatusOK)
	if strings.TrimSpace(w.Body.String()) != `{"result":true}` {
		t.Fatalf("answer %s", w.Body)
	}
	const id = "TYPE_NEW_POSTING:05708065-0029-1:2026-09-16T10:00:00Z"
	if _, ok := h.inbox.event("ozon", id); !ok {
		t.Fatalf("no event %s", id)
	}
	op, ok := h.inbox.op("ozon:posting:05708065-0029-1:create")
	if !ok || op.Kind != order.KindCreate || op.ExternalID != "05708065-0029-1" || op.Source != "ozon" {
		t.Fatalf("operation %+v (found %v)", op, ok)
	}
	if f, ok := order.ParseFetch(op.Payload); !ok || f.Connector != "ozon" || f.ID != "05708065-0029-1" {
		t.Fatalf("payload %s is not a fetch of the posting", op.Payload)
	}
	if h.registered() != 1 {
		t.Fatalf("OnRegistered %d times", h.registered())
	}

	// Ozon repeats it: the saved answer, nothing registered again.
	w = h.do(ozonRequest(ozonAddr, ozonNewPosting))
	wantStatus(t, w, http.StatusOK)
	if strings.TrimSpace(w.Body.String()) != `{"result":true}` || h.stat("ozon", outDuplicate, "") != 1 {
		t.Fatalf("duplicate: %s %v", w.Body, h.srv.Stats())
	}
	h.stored(1, 1)

	// The same id with another body is a conflict in Ozon's error shape.
	changed := strings.Replace(ozonNewPosting, `"quantity": 2`, `"quantity": 3`, 1)
	w = h.do(ozonRequest(ozonAddr, changed))
	wantStatus(t, w, http.StatusConflict)
	if e := ozonErr(t, w); e.Code != ozonErrDuplicated {
		t.Fatalf("conflict code %s", e.Code)
	}
	h.stored(1, 1)
}

// A new posting the poller already registered in full keeps its payload.
func TestOzonNewPostingIfAbsent(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	full := orderJSON("ozon", "05708065-0029-1")
	h.inbox.ops["ozon:posting:05708065-0029-1:create"] = opWith("ozon:posting:05708065-0029-1:create", full)
	wantStatus(t, h.do(ozonRequest(ozonAddr, ozonNewPosting)), http.StatusOK)
	op, _ := h.inbox.op("ozon:posting:05708065-0029-1:create")
	if string(op.Payload) != string(full) || h.inbox.opConfl[op.Key] != 0 {
		t.Fatalf("the poller's payload was replaced or a conflict recorded: %s", op.Payload)
	}
}

func TestOzonCancel(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	wantStatus(t, h.do(ozonRequest(ozonAddr, ozonCancel)), http.StatusOK)
	const id = "TYPE_POSTING_CANCELLED:05708065-0029-1:2026-09-16T12:30:00.294Z"
	if _, ok := h.inbox.event("ozon", id); !ok {
		t.Fatalf("no event %s", id)
	}
	op, ok := h.inbox.op("ozon:posting:05708065-0029-1:cancel")
	if !ok || op.Kind != order.KindCancel {
		t.Fatalf("cancel operation %+v (found %v)", op, ok)
	}
	var c order.Cancel
	if err := json.Unmarshal(op.Payload, &c); err != nil {
		t.Fatal(err)
	}
	want := order.Cancel{Source: "ozon", ExternalID: "05708065-0029-1", Reason: "Покупатель передумал", CreateKey: "ozon:posting:05708065-0029-1:create"}
	if c != want {
		t.Fatalf("cancel payload %+v, want %+v", c, want)
	}
	h.stored(1, 1)
}

// A cancel the poller registered first, its reason worded from the API, stands;
// the push's is not recorded as a conflict.
func TestOzonCancelIfAbsent(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	polled := []byte(`{"source":"ozon","external_id":"05708065-0029-1","reason":"Покупатель передумал (initiator: Клиент)","create_key":"ozon:posting:05708065-0029-1:create"}`)
	h.inbox.ops["ozon:posting:05708065-0029-1:cancel"] = opWith("ozon:posting:05708065-0029-1:cancel", polled)
	wantStatus(t, h.do(ozonRequest(ozonAddr, ozonCancel)), http.StatusOK)
	op, _ := h.inbox.op("ozon:posting:05708065-0029-1:cancel")
	if string(op.Payload) != string(polled) || h.inbox.opConfl[op.Key] != 0 {
		t.Fatalf("the poller's cancel was replaced or a conflict recorded: %s", op.Payload)
	}
}

// Other message types are answered {"result":true} and neither stored nor registered.
func TestOzonOtherTypesIgnored(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	for _, body := range []string{
		`{"message_type": "TYPE_STATE_CHANGED", "posting_number": "1-2-3", "new_state": "posting_delivered", "changed_state_date": "2026-09-16T10:00:00Z", "warehouse_id": 0, "seller_id": 15}`,
		`{"message_type": "TYPE_NEW_MESSAGE", "chat_id": "b646d975", "data": ["Здравствуйте"], "seller_id": "7"}`,
	} {
		w := h.do(ozonRequest(ozonAddr, body))
		wantStatus(t, w, http.StatusOK)
		if strings.TrimSpace(w.Body.String()) != `{"result":true}` {
			t.Fatalf("answer %s", w.Body)
		}
	}
	h.stored(0, 0)
	if h.stat("ozon", outIgnored, "message_type") != 2 {
		t.Fatalf("stats %v", h.srv.Stats())
	}
}

func TestOzonRejects(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) { c.MaxBody = 1024 })
	textPlain := ozonRequest(ozonAddr, ozonNewPosting)
	textPlain.Header.Set("Content-Type", "text/plain")
	cases := []struct {
		name   string
		req    *http.Request
		status int
		code   string
		detail string
	}{
		{"disallowed address", ozonRequest("203.0.113.5:5000", ozonNewPosting), http.StatusForbidden, ozonErrUnknown, ""},
		{"content type", textPlain, http.StatusUnsupportedMediaType, ozonErrUnknown, ""},
		{"too large", ozonRequest(ozonAddr, ozonNewPosting+strings.Repeat(" ", 2048)), http.StatusRequestEntityTooLarge, ozonErrUnknown, ""},
		{"not JSON", ozonRequest(ozonAddr, `message_type=TYPE_PING`), http.StatusBadRequest, ozonErrUnknown, ""},
		{"no message type", ozonRequest(ozonAddr, `{"posting_number": "1-2-3"}`), http.StatusBadRequest, ozonErrMissed, "message_type"},
		{"no posting number", ozonRequest(ozonAddr, `{"message_type": "TYPE_NEW_POSTING", "in_process_at": "2026-09-16T10:00:00Z"}`), http.StatusBadRequest, ozonErrMissed, "posting_number"},
		{"bad posting number", ozonRequest(ozonAddr, `{"message_type": "TYPE_NEW_POSTING", "posting_number": "1 2:3"}`), http.StatusBadRequest, ozonErrUnknown, "posting_number"},
	}
	for _, c := range cases {
		w := h.do(c.req)
		if w.Code != c.status {
			t.Errorf("%s: status %d (%s), want %d", c.name, w.Code, w.Body, c.status)
			continue
		}
		e := ozonErr(t, w)
		if e.Code != c.code || e.Message == "" {
			t.Errorf("%s: error %+v, want code %s", c.name, e, c.code)
		}
		if c.detail != "" && (e.Details == nil || *e.Details != c.detail) {
			t.Errorf("%s: details %v, want %s", c.name, e.Details, c.detail)
		}
	}
	h.stored(0, 0)
}

// Behind a trusted proxy the client is the right-most X-Forwarded-For address that
// is not a trusted proxy; from anywhere else X-Forwarded-For is not believed.
func TestOzonAddressThroughProxy(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) {
		c.Ozon.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	})
	cases := []struct {
		name, remote, xff string
		status            int
	}{
		{"through the proxy", "10.0.0.2:1234", "195.34.21.7", http.StatusOK},
		{"through two proxies", "10.0.0.2:1234", "195.34.21.7, 10.1.1.1", http.StatusOK},
		{"spoofed left of the client", "10.0.0.2:1234", "195.34.21.7, 203.0.113.9", http.StatusForbidden},
		{"disallowed through the proxy", "10.0.0.2:1234", "203.0.113.9", http.StatusForbidden},
		{"the proxy itself, no header", "10.0.0.2:1234", "", http.StatusForbidden},
		{"garbage in the header", "10.0.0.2:1234", "not-an-address", http.StatusForbidden},
		{"untrusted peer claiming Ozon", "203.0.113.9:1234", "195.34.21.7", http.StatusForbidden},
		{"IPv4-mapped peer", "[::ffff:195.34.21.8]:1234", "", http.StatusOK},
	}
	for i, c := range cases {
		body := strings.Replace(ozonNewPosting, "05708065-0029-1", "05708065-0029-"+string(rune('a'+i)), 1)
		r := ozonRequest(c.remote, body)
		if c.xff != "" {
			r.Header.Set("X-Forwarded-For", c.xff)
		}
		if w := h.do(r); w.Code != c.status {
			t.Errorf("%s: status %d (%s), want %d", c.name, w.Code, w.Body, c.status)
		}
	}
	h.stored(3, 3)
}

func TestClientAddr(t *testing.T) {
	t.Parallel()
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")}
	cases := []struct {
		remote string
		xff    []string
		want   string
	}{
		{"192.0.2.1:80", nil, "192.0.2.1"},
		{"192.0.2.1:80", []string{"198.51.100.1"}, "192.0.2.1"},
		{"10.0.0.1:80", []string{"198.51.100.1"}, "198.51.100.1"},
		{"10.0.0.1:80", []string{"198.51.100.1, 10.0.0.9", "10.0.0.8"}, "198.51.100.1"},
		{"10.0.0.1:80", []string{"10.0.0.7, 10.0.0.9"}, "10.0.0.7"},
		{"10.0.0.1:80", nil, "10.0.0.1"},
		{"[fd00::1]:80", []string{"[2001:db8::5]:443"}, "2001:db8::5"},
		{"10.0.0.1:80", []string{"198.51.100.1:5555"}, "198.51.100.1"},
	}
	for _, c := range cases {
		r := httptest.NewRequest(http.MethodPost, "/", nil)
		r.RemoteAddr = c.remote
		for _, v := range c.xff {
			r.Header.Add("X-Forwarded-For", v)
		}
		got, err := clientAddr(r, trusted)
		if err != nil || got.String() != c.want {
			t.Errorf("%s %v: %v, %v; want %s", c.remote, c.xff, got, err, c.want)
		}
	}
}

// The Ozon endpoint answers well inside Ozon's 5-second budget: the inbox call has
// its own deadline, after which Ozon is told to retry.
func TestOzonReceiveDeadline(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) { c.ReceiveTimeout = 10 * time.Millisecond })
	h.inbox.fail = nil
	slow := &slowInbox{fakeInbox: h.inbox}
	h.srv.cfg.Inbox = slow
	w := h.do(ozonRequest(ozonAddr, ozonNewPosting))
	wantStatus(t, w, http.StatusInternalServerError)
	if e := ozonErr(t, w); e.Code != ozonErrUnknown || w.Header().Get("Retry-After") == "" {
		t.Fatalf("answer %v %s", w.Header(), w.Body)
	}
}
