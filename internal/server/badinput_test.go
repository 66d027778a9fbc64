package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ordersync/ordersync/internal/inbox"
	"github.com/ordersync/ordersync/internal/order"
	"github.com/ordersync/ordersync/internal/stdwebhook"
)

// badOrderBodies are the bad inputs ordersync must refuse in a generic delivery, each with
// the field the 400 must name.
func badOrderBodies() []struct{ name, body, field string } {
	good := string(orderJSON("site", "A-1001"))
	r := func(from, to string) string {
		s := strings.Replace(good, from, to, 1)
		if s == good {
			panic("test case did not change the body: " + from)
		}
		return s
	}
	return []struct{ name, body, field string }{
		{"year 10000", r(`"2026-09-16T10:00:00+05:00"`, `"10000-01-01T00:00:00Z"`), "created_at"},
		{"year 10000 in UTC", r(`"2026-09-16T10:00:00+05:00"`, `"9999-12-31T23:30:00-05:00"`), "created_at"},
		{"one-digit hour", r(`"2026-09-16T10:00:00+05:00"`, `"2026-09-16T1:00:00+05:00"`), "created_at"},
		{"NUL in the buyer's name", r(`"Иван Петров"`, `"Иван\u0000Петров"`), "customer.name"},
		{"invalid UTF-8 in the buyer's name", r(`"Иван Петров"`, "\"Иван\xffПетров\""), "customer.name"},
		{"lone surrogate", r(`"Иван Петров"`, `"\udc00"`), "customer.name"},
		{"case-variant duplicate key", r(`"external_id": "A-1001"`, `"external_id": "A-1001", "External_ID": "B-1001"`), "External_ID"},
		{"exact duplicate key", r(`"external_id": "A-1001"`, `"external_id": "A-1001", "external_id": "B-1001"`), "external_id"},
		{"invalid UTF-8 in the external id", r(`"external_id": "A-1001"`, "\"external_id\": \"A-\xff\""), "external_id"},
		{"cancel with a duplicate key", `{"external_id":"A-1","external_id":"B-1","cancelled":true}`, "external_id"},
		{"cancel with NUL in the reason", `{"external_id":"A-1","cancelled":true,"reason":"a\u0000b"}`, "reason"},
		{"cancel with invalid UTF-8 in the id", "{\"external_id\":\"A-\xff\",\"cancelled\":true}", "external_id"},
	}
}

func answerFields(t *testing.T, w *httptest.ResponseRecorder) []string {
	t.Helper()
	var ans genericAnswer
	if err := json.Unmarshal(w.Body.Bytes(), &ans); err != nil {
		t.Fatalf("answer %q: %v", w.Body, err)
	}
	return ans.Fields
}

func TestGenericRefusesBadInputNamingTheField(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	for i, b := range badOrderBodies() {
		w := h.do(signedRequest("site", "msg_bad_"+string(rune('a'+i)), testNow, []byte(b.body), siteSecret))
		if w.Code != http.StatusBadRequest {
			t.Errorf("%s: status %d %s, want 400", b.name, w.Code, w.Body)
			continue
		}
		if f := answerFields(t, w); len(f) == 0 || f[0] != b.field {
			t.Errorf("%s: fields %v (%s), want %s", b.name, f, w.Body, b.field)
		}
	}
	h.stored(0, 0)
	// And the server goes on.
	wantStatus(t, h.do(signedRequest("site", "msg_good", testNow, orderJSON("site", "A-1001"), siteSecret)), http.StatusOK)
	h.stored(1, 1)
	if h.srv.Panics() != 0 {
		t.Fatalf("%d panics", h.srv.Panics())
	}
}

// A signed delivery whose webhook-id is not valid UTF-8 (or holds a control
// character) is refused with 400 naming webhook-id: stored, PostgreSQL would refuse
// it (SQLSTATE 22021) and the sender would get 503 for ever. Two ids that differ
// only in such bytes are both refused, never taken for one.
func TestGenericRefusesABadWebhookID(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	body := orderJSON("site", "A-1001")
	for _, id := range []string{"msg_\xff", "msg_\xfe", "msg_\x01", "msg_\u200b"} {
		w := h.do(signedRequest("site", id, testNow, body, siteSecret))
		wantStatus(t, w, http.StatusBadRequest)
		if f := answerFields(t, w); len(f) != 1 || f[0] != stdwebhook.HeaderID {
			t.Fatalf("%q: fields %v, want webhook-id", id, f)
		}
	}
	// Unsigned, it is a bad signature like any other.
	r := signedRequest("site", "msg_\xff", testNow, body, otherSecret)
	wantStatus(t, h.do(r), http.StatusUnauthorized)
	h.stored(0, 0)
	if n := h.stat("site", outRejected, "bad_event_id"); n != 4 {
		t.Fatalf("bad_event_id counted %d times, want 4", n)
	}
	for _, l := range h.logs.lines(t) {
		if id, _ := l["event_id"].(string); !utf8.ValidString(id) {
			t.Fatalf("a log line carries invalid UTF-8: %v", l)
		}
	}
}

// On the real PostgreSQL inbox: the bad webhook-id is 400, not 503 (SQLSTATE 22021),
// and nothing is stored.
func TestPostgresBadWebhookIDIs400(t *testing.T) {
	t.Parallel()
	h := newPGHarness(t)
	body := orderJSON("site", "PG-BAD-1")
	for _, id := range []string{"msg_\xff", "msg_\xfe"} {
		if st, ans := h.post(signedRequest("site", id, testNow, body, siteSecret)); st != http.StatusBadRequest || !strings.Contains(ans, "webhook-id") {
			t.Fatalf("%q: %d %s, want 400 naming webhook-id", id, st, ans)
		}
	}
	for _, b := range badOrderBodies() {
		if st, ans := h.post(signedRequest("site", "msg_"+strings.ReplaceAll(b.name, " ", "_"), testNow, []byte(b.body), siteSecret)); st != http.StatusBadRequest {
			t.Fatalf("%s: %d %s, want 400", b.name, st, ans)
		}
	}
	h.rows(0, 0, 0)
	if st, ans := h.post(signedRequest("site", "msg_good", testNow, body, siteSecret)); st != http.StatusOK {
		t.Fatalf("good delivery: %d %s", st, ans)
	}
	h.rows(1, 0, 1)
}

// A panic while handling one delivery is answered 500, logged with its event id and
// counted; the next delivery is served.
func TestAPanicInOneDeliveryIsRecovered(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.inbox.hold = func(ev inbox.Event) {
		if ev.ID == "msg_boom" {
			panic("boom")
		}
	}
	w := h.do(signedRequest("site", "msg_boom", testNow, orderJSON("site", "A-1"), siteSecret))
	wantStatus(t, w, http.StatusInternalServerError)
	if h.srv.Panics() != 1 || h.stat("site", outError, "panic") != 1 {
		t.Fatalf("panics %d, stats %v", h.srv.Panics(), h.srv.Stats())
	}
	found := false
	for _, l := range h.logs.lines(t) {
		if l["event_id"] == "msg_boom" && l["reason"] == "panic" && strings.Contains(l["error"].(string), "boom") {
			found = true
		}
	}
	if !found {
		t.Fatalf("no log line names the event that panicked:\n%s", h.logs)
	}
	wantStatus(t, h.do(signedRequest("site", "msg_next", testNow, orderJSON("site", "A-2"), siteSecret)), http.StatusOK)
}

func TestOzonRefusesBadInputNamingTheField(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	for _, tc := range []struct{ name, body, field string }{
		{"invalid UTF-8 in the posting number", strings.Replace(ozonNewPosting, `"05708065-0029-1"`, "\"05708065-\xff\"", 1), "posting_number"},
		{"another invalid byte in it", strings.Replace(ozonNewPosting, `"05708065-0029-1"`, "\"05708065-\xfe\"", 1), "posting_number"},
		{"U+FFFD in the posting number", strings.Replace(ozonNewPosting, `"05708065-0029-1"`, `"05708065-\ufffd"`, 1), "posting_number"},
		{"case-variant key", strings.Replace(ozonNewPosting, `"posting_number"`, `"Posting_Number": "1-1", "posting_number"`, 1), "Posting_Number"},
		{"duplicate key", strings.Replace(ozonNewPosting, `"posting_number"`, `"posting_number": "1-1", "posting_number"`, 1), "posting_number"},
		{"one-digit hour", strings.Replace(ozonNewPosting, `"2026-09-16T10:00:00Z"`, `"2026-09-16T1:00:00Z"`, 1), "in_process_at"},
		{"year 10000", strings.Replace(ozonNewPosting, `"2026-09-16T10:00:00Z"`, `"10000-01-01T00:00:00Z"`, 1), "in_process_at"},
		{"NUL in the time", strings.Replace(ozonNewPosting, `"2026-09-16T10:00:00Z"`, `"2026-09-16T10:00:00Z\u0000"`, 1), "in_process_at"},
		{"NUL in the cancel reason", strings.Replace(ozonCancel, `"Покупатель передумал"`, `"Покупатель\u0000"`, 1), "reason.message"},
		{"bad cancel time", strings.Replace(ozonCancel, `"2026-09-16T12:30:00.294Z"`, `"16.09.2026"`, 1), "changed_state_date"},
	} {
		w := h.do(ozonRequest(ozonAddr, tc.body))
		if w.Code != http.StatusBadRequest {
			t.Errorf("%s: %d %s, want 400", tc.name, w.Code, w.Body)
			continue
		}
		if e := ozonErr(t, w); e.Details == nil || *e.Details != tc.field {
			t.Errorf("%s: %+v, want details naming %s", tc.name, e, tc.field)
		}
	}
	h.stored(0, 0)
	wantStatus(t, h.do(ozonRequest(ozonAddr, ozonNewPosting)), http.StatusOK)
	h.stored(1, 1)
}

func TestBitrix24RefusesBadFormNamingTheField(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	good := bitrixForm("ONCRMDEALADD", "42", "1726480800", bxTokenText)
	for _, tc := range []struct{ name, form, field string }{
		{"NUL in a value", strings.Replace(good, "portal.bitrix24.kz", "portal%00.kz", 1), "auth[domain]"},
		{"invalid UTF-8 in the event", strings.Replace(good, "event=ONCRMDEALADD", "event=ONCRMDEALADD%FF", 1), "event"},
		{"invalid UTF-8 in a key", good + "&x%FF=1", `"x\xff"`},
		{"the deal id twice", good + "&" + url.QueryEscape("data[FIELDS][ID]") + "=43", "data[FIELDS][ID]"},
		{"the event twice", good + "&event=ONCRMDEALUPDATE", "event"},
	} {
		w := h.do(bitrixRequest(tc.form))
		if w.Code != http.StatusBadRequest || decode(t, w)["field"] != tc.field {
			t.Errorf("%s: %d %s, want 400 naming %s", tc.name, w.Code, w.Body, tc.field)
		}
	}
	h.stored(0, 0)
	wantStatus(t, h.do(bitrixRequest(good)), http.StatusOK)
}

// checkStored asserts that whatever the inbox took is storable on either store:
// event ids and keys valid text, order payloads that validate.
func checkStored(t *testing.T, h *harness) {
	t.Helper()
	if n := h.srv.Panics(); n != 0 {
		t.Fatalf("%d handler panics", n)
	}
	h.inbox.mu.Lock()
	defer h.inbox.mu.Unlock()
	for k := range h.inbox.events {
		if stdwebhook.CheckID(k[1]) != "" || !utf8.ValidString(k[0]) {
			t.Fatalf("stored event id %q", k[1])
		}
	}
	for key, op := range h.inbox.ops {
		idOK := order.CheckKeyID(op.ExternalID) == ""
		if op.Source == "site" {
			idOK = order.CheckID(op.ExternalID, 64) == "" // a generic sender's ids follow the canonical order's rule
		}
		if order.CheckLine(key) != "" || !idOK {
			t.Fatalf("stored key %q external id %q", key, op.ExternalID)
		}
		if !json.Valid(op.Payload) || bytes.Contains(op.Payload, []byte(`\u0000`)) {
			t.Fatalf("payload %q cannot be stored as jsonb", op.Payload)
		}
		if _, isFetch := order.ParseFetch(op.Payload); isFetch || op.Kind == order.KindCancel {
			continue
		}
		if _, err := order.Parse(op.Payload); err != nil {
			t.Fatalf("stored order payload %s does not parse: %v", op.Payload, err)
		}
	}
}

func FuzzGenericDelivery(f *testing.F) {
	f.Add("msg_1", orderJSON("site", "A-1001"))
	f.Add("msg_2", []byte(`{"external_id":"A-1","cancelled":true,"reason":"передумал"}`))
	for _, b := range badOrderBodies() {
		f.Add("msg_\xff", []byte(b.body))
	}
	f.Fuzz(func(t *testing.T, id string, body []byte) {
		h := newHarness(t, nil)
		w := h.do(signedRequest("site", id, testNow, body, siteSecret))
		switch w.Code {
		case http.StatusOK, http.StatusBadRequest, http.StatusUnauthorized:
		default:
			t.Fatalf("status %d %s", w.Code, w.Body)
		}
		checkStored(t, h)
	})
}

func FuzzOzonPush(f *testing.F) {
	f.Add([]byte(ozonNewPosting))
	f.Add([]byte(ozonCancel))
	f.Add([]byte(`{"message_type": "TYPE_PING", "time": "2026-09-16T09:59:59Z"}`))
	f.Add([]byte(`{"message_type": "TYPE_STATE_CHANGED", "posting_number": "1-1"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		h := newHarness(t, nil)
		w := h.do(ozonRequest(ozonAddr, string(body)))
		if w.Code != http.StatusOK && w.Code != http.StatusBadRequest {
			t.Fatalf("status %d %s", w.Code, w.Body)
		}
		checkStored(t, h)
	})
}

func FuzzBitrix24Form(f *testing.F) {
	f.Add(bitrixForm("ONCRMDEALADD", "42", "1726480800", bxTokenText))
	f.Add(bitrixForm("ONCRMDEALUPDATE", "43", "1726480801", bxTokenText) + "&data[FIELDS][ID]=44")
	f.Add(bitrixForm("ONCRMDEALDELETE", "42", "1", bxTokenText))
	f.Add(bitrixForm("ONCRMDEALADD", "42%FF", "1", bxTokenText))
	f.Fuzz(func(t *testing.T, form string) {
		h := newHarness(t, nil)
		w := h.do(bitrixRequest(form))
		switch w.Code {
		case http.StatusOK, http.StatusBadRequest, http.StatusUnauthorized:
		default:
			t.Fatalf("status %d %s", w.Code, w.Body)
		}
		checkStored(t, h)
	})
}
