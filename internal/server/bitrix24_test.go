package server

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/ordersync/ordersync/internal/order"
)

// bitrixForm is an outgoing webhook call as Bitrix24 sends it.
func bitrixForm(event, dealID, ts, token string) string {
	v := []string{"event=" + url.QueryEscape(event), "event_handler_id=42"}
	if dealID != "" {
		v = append(v, url.QueryEscape("data[FIELDS][ID]")+"="+url.QueryEscape(dealID))
	}
	if ts != "" {
		v = append(v, "ts="+ts)
	}
	v = append(v,
		url.QueryEscape("auth[domain]")+"=portal.bitrix24.kz",
		url.QueryEscape("auth[client_endpoint]")+"="+url.QueryEscape("https://portal.bitrix24.kz/rest/"),
		url.QueryEscape("auth[member_id]")+"=a223c6b3710f85df22e9377d6c4f7553",
	)
	if token != "" {
		v = append(v, url.QueryEscape("auth[application_token]")+"="+url.QueryEscape(token))
	}
	return strings.Join(v, "&")
}

func bitrixRequest(form string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/webhooks/bitrix24", strings.NewReader(form))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return r
}

func TestBitrix24Registers(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	w := h.do(bitrixRequest(bitrixForm("ONCRMDEALADD", "456", "1700000000", bxTokenText)))
	wantStatus(t, w, http.StatusOK)
	if ans := decode(t, w); ans["status"] != "processed" || ans["key"] != "bitrix24:deal:456:create" {
		t.Fatalf("answer %v", ans)
	}
	op, ok := h.inbox.op("bitrix24:deal:456:create")
	if !ok || op.Kind != order.KindCreate || op.Source != "bitrix24" || op.ExternalID != "456" {
		t.Fatalf("operation %+v (found %v)", op, ok)
	}
	if f, ok := order.ParseFetch(op.Payload); !ok || f.Connector != "bitrix24" || f.ID != "456" {
		t.Fatalf("payload %s is not a fetch of the deal", op.Payload)
	}
	ev, ok := h.inbox.event("bitrix24", "ONCRMDEALADD:456:1700000000")
	if !ok {
		t.Fatal("no event ONCRMDEALADD:456:1700000000")
	}
	body := string(ev.ev.Body)
	if strings.Contains(body, bxTokenText) || strings.Contains(body, "application_token") || !strings.Contains(body, "member_id") {
		t.Fatalf("stored body %q: want the form without its token", body)
	}

	// An update of the deal is a new event; it registers nothing new and wakes the
	// pending create.
	wantStatus(t, h.do(bitrixRequest(bitrixForm("ONCRMDEALUPDATE", "456", "1700000100", bxTokenText))), http.StatusOK)
	h.stored(2, 1)
	if h.inbox.wakes["bitrix24:deal:456:create"] != 1 {
		t.Fatalf("wakes %v, want the create woken once", h.inbox.wakes)
	}

	// A redelivery is a duplicate with the saved answer.
	again := h.do(bitrixRequest(bitrixForm("ONCRMDEALADD", "456", "1700000000", bxTokenText)))
	wantStatus(t, again, http.StatusOK)
	if again.Body.String() != w.Body.String() || h.stat("bitrix24", outDuplicate, "") != 1 {
		t.Fatalf("duplicate %s, stats %v", again.Body, h.srv.Stats())
	}
	h.stored(2, 1)
}

func TestBitrix24Rejects(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) { c.MaxBody = 1024 })
	jsonCT := bitrixRequest(bitrixForm("ONCRMDEALADD", "1", "1700000000", bxTokenText))
	jsonCT.Header.Set("Content-Type", "application/json")
	cases := []struct {
		name   string
		req    *http.Request
		status int
		reason string
	}{
		{"wrong token", bitrixRequest(bitrixForm("ONCRMDEALADD", "1", "1700000000", "0000"+bxTokenText[4:])), http.StatusUnauthorized, "wrong auth[application_token]"},
		{"missing token", bitrixRequest(bitrixForm("ONCRMDEALADD", "1", "1700000000", "")), http.StatusUnauthorized, "missing auth[application_token]"},
		{"token twice", bitrixRequest(bitrixForm("ONCRMDEALADD", "1", "1700000000", bxTokenText) + "&auth%5Bapplication_token%5D=x"), http.StatusUnauthorized, ""},
		{"content type", jsonCT, http.StatusUnsupportedMediaType, "Content-Type must be application/x-www-form-urlencoded"},
		{"too large", bitrixRequest(bitrixForm("ONCRMDEALADD", "1", "1700000000", bxTokenText) + "&pad=" + strings.Repeat("x", 2048)), http.StatusRequestEntityTooLarge, ""},
		{"malformed form", bitrixRequest("event=%zz"), http.StatusBadRequest, ""},
		{"no deal id", bitrixRequest(bitrixForm("ONCRMDEALADD", "", "1700000000", bxTokenText)), http.StatusBadRequest, "data[FIELDS][ID] is required"},
		{"deal id not a number", bitrixRequest(bitrixForm("ONCRMDEALADD", "1:2", "1700000000", bxTokenText)), http.StatusBadRequest, "data[FIELDS][ID] must be a deal number"},
		{"no ts", bitrixRequest(bitrixForm("ONCRMDEALADD", "1", "", bxTokenText)), http.StatusBadRequest, "ts is required"},
	}
	for _, c := range cases {
		w := h.do(c.req)
		if w.Code != c.status {
			t.Errorf("%s: status %d (%s), want %d", c.name, w.Code, w.Body, c.status)
			continue
		}
		if ans := decode(t, w); c.reason != "" && ans["reason"] != c.reason {
			t.Errorf("%s: reason %v, want %q", c.name, ans["reason"], c.reason)
		}
	}
	h.stored(0, 0)
	if h.inbox.receives != 0 {
		t.Fatalf("Receive called %d times", h.inbox.receives)
	}
	if n := h.stat("bitrix24", outRejected, "bad_token"); n != 3 {
		t.Fatalf("bad_token counted %d times, want 3", n)
	}
}

// Other events are answered 200 and ignored, but only for the right token.
func TestBitrix24OtherEvents(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	wantStatus(t, h.do(bitrixRequest(bitrixForm("ONCRMDEALDELETE", "9", "1700000000", bxTokenText))), http.StatusOK)
	wantStatus(t, h.do(bitrixRequest(bitrixForm("ONCRMLEADADD", "9", "1700000000", bxTokenText))), http.StatusOK)
	wantStatus(t, h.do(bitrixRequest(bitrixForm("ONCRMDEALDELETE", "9", "1700000000", "nope"))), http.StatusUnauthorized)
	h.stored(0, 0)
	if h.stat("bitrix24", outIgnored, "event") != 2 {
		t.Fatalf("stats %v", h.srv.Stats())
	}
	// The event name is matched whatever its case (applications send onCrmDealAdd).
	wantStatus(t, h.do(bitrixRequest(bitrixForm("onCrmDealAdd", "9", "1700000000", bxTokenText))), http.StatusOK)
	h.stored(1, 1)
}

func TestWithoutFields(t *testing.T) {
	t.Parallel()
	in := "a=1&auth%5Bapplication_token%5D=s3cret&b=%D0%B4&auth[access_token]=t&c="
	got := string(withoutFields([]byte(in), bxSecretFields))
	if want := "a=1&b=%D0%B4&c="; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}
