package ui

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"
	"golang.org/x/net/html"

	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/onec"
	"github.com/ordersync/ordersync/internal/order"
)

func TestStateOf(t *testing.T) {
	t.Parallel()
	op := func(st journal.Status, res *journal.Result) *journal.Operation {
		return &journal.Operation{Status: st, Result: res}
	}
	for _, tc := range []struct {
		create, cancel *journal.Operation
		want           orderState
	}{
		{op(journal.StatusPending, nil), nil, journal.StatePending},
		{op(journal.StatusFailed, nil), nil, journal.StateFailed},
		{op(journal.StatusDone, &journal.Result{Ref: "r"}), nil, journal.StateCreated},
		{op(journal.StatusDone, &journal.Result{Ref: "r", Recovered: true}), nil, journal.StateCreated},
		{op(journal.StatusDone, &journal.Result{Ref: "r", Found: true}), nil, stateFound},
		{op(journal.StatusDone, &journal.Result{Ref: "r"}), op(journal.StatusPending, nil), journal.StateCancelPending},
		{op(journal.StatusDone, &journal.Result{Ref: "r"}), op(journal.StatusFailed, nil), journal.StateCancelFailed},
		{op(journal.StatusDone, &journal.Result{Ref: "r"}), op(journal.StatusDone, &journal.Result{}), journal.StateCancelled},
		{op(journal.StatusFailed, nil), op(journal.StatusDone, &journal.Result{}), journal.StateCancelled},
		{nil, op(journal.StatusDone, &journal.Result{}), journal.StateCancelled},
	} {
		if got := stateOf(tc.create, tc.cancel); got != tc.want {
			t.Errorf("create %+v cancel %+v: %s, want %s", tc.create, tc.cancel, got, tc.want)
		}
	}
}

// TestNavigationRef: 1C's developer guide gives e1cib/data/Документ.РасходТовара?ref=
// 8ca0000d8843cd1b11dc8d043d71007f as a link to an object (not the GUID it was
// made of). Read back by the rule, it is a well-formed GUID of 1C's kind: version 1
// (the third group starts with 1) and the RFC 4122 variant (the fourth with 8–b).
func TestNavigationRef(t *testing.T) {
	t.Parallel()
	const documented = "8ca0000d8843cd1b11dc8d043d71007f"
	guid := documented[24:32] + "-" + documented[20:24] + "-" + documented[16:20] + "-" + documented[0:4] + "-" + documented[4:16]
	if guid != "3d71007f-8d04-11dc-8ca0-000d8843cd1b" || guid[14] != '1' || !strings.ContainsRune("89ab", rune(guid[19])) {
		t.Fatalf("the documented ref reads as %s, which is not a version-1 GUID", guid)
	}
	if got, ok := navigationRef(strings.ToUpper(guid)); !ok || got != documented {
		t.Fatalf("navigationRef(%s) = %q %v, want %s", guid, got, ok, documented)
	}
	for _, bad := range []string{"", "not-a-guid", "3d71007f8d0411dc8ca0000d8843cd1b", "3d71007f-8d04-11dc-8ca0-000d8843cd1z"} {
		if _, ok := navigationRef(bad); ok {
			t.Errorf("navigationRef(%q) accepted", bad)
		}
	}
	s := &Server{cfg: Config{OneCWebURL: "http://1c.local/trade/", OneCDocument: DocumentOrder}}
	if got := s.oneCLink(guid); got != "http://1c.local/trade/#e1cib/data/Документ.ЗаказКлиента?ref="+documented {
		t.Errorf("link %q", got)
	}
	if got := (&Server{cfg: Config{OneCDocument: DocumentOrder}}).oneCLink(guid); got != "" {
		t.Errorf("no ui.onec_web_url, link %q", got)
	}
}

func TestExplain(t *testing.T) {
	t.Parallel()
	s := &Server{cat: catalogues["ru"]}
	for _, tc := range []struct {
		raw, class string
		want       []string
		onec       string
	}{
		{"1c create: permanent (HTTP 422): Не найдена номенклатура SKU-9 [field lines[0].sku] [code invalid]", "permanent",
			[]string{"1С отказала (создание заказа)", "HTTP 422"}, "Не найдена номенклатура SKU-9"},
		{"1c create: unknown outcome: Post \"http://1c/orders\": EOF: the order may exist in 1C, which may still be writing it", "unknown",
			[]string{"Ответ 1С не пришёл", "дубля не будет"}, ""},
		{"1c find: transient (HTTP 503): Service Unavailable", "", []string{"1С временно не ответила (поиск заказа)", "HTTP 503"}, "Service Unavailable"},
		{"gave up after 10 attempts whose outcome was unknown (worker.max_attempts): 1c create: unknown outcome: EOF", "unknown",
			[]string{"после 10 попыток", "Ответ 1С не пришёл"}, ""},
		{"1c ping: authentication (HTTP 401)", "auth", []string{"имя пользователя или пароль"}, ""},
	} {
		e := s.explain(tc.raw, tc.class)
		for _, w := range tc.want {
			if !strings.Contains(e.Text, w) {
				t.Errorf("%q: %q does not say %q", tc.raw, e.Text, w)
			}
		}
		if e.OneC != tc.onec || e.Raw != tc.raw || e.Unknown {
			t.Errorf("%q: 1C said %q (want %q), raw %q, unknown %v", tc.raw, e.OneC, tc.onec, e.Raw, e.Unknown)
		}
		if strings.Contains(tc.raw, "[field") && e.Field != "lines[0].sku" {
			t.Errorf("%q: field %q", tc.raw, e.Field)
		}
		if strings.Contains(e.Text, "%!") {
			t.Errorf("%q: %q", tc.raw, e.Text)
		}
	}
	if e := s.explain("something new", ""); !e.Unknown || e.Raw != "something new" {
		t.Errorf("an unknown text: %+v", e)
	}
}

type finder struct {
	orders []onec.Order
	err    error
	block  bool
}

func (f finder) FindOrders(ctx context.Context, _ string) ([]onec.Order, error) {
	if f.block {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return f.orders, f.err
}

// doneCreate registers and finishes the create of id with a 1C result.
func doneCreate(t *testing.T, st stores, id, price string) (string, *journal.Result) {
	t.Helper()
	key := order.Key("site", "order", id, "create")
	register(t, st.journal, createOp("site", id, "Иван Петров", "+77011234567", price), "")
	res := &journal.Result{Ref: "3d71007f-8d04-11dc-8ca0-000d8843cd1b", Number: "ОС-000777", Date: "2026-11-03T10:05:00"}
	attempt(t, st.journal, key, journal.Finish{Status: journal.StatusDone, Result: res, Ref: res.Ref})
	return key, res
}

func TestOperationPageShowsOneCsTotalNow(t *testing.T) {
	t.Parallel()
	st := openStores(t, "sqlite")
	key, res := doneCreate(t, st, "T-1", "2509.50") // 2 × 2509.50 = 5019.00
	held := decimal.RequireFromString("10038")
	for _, tc := range []struct {
		name    string
		f       OneCFinder
		state   string
		differs string
		says    []string
	}{
		{"differs", finder{orders: []onec.Order{{Ref: res.Ref, Number: res.Number, Total: &held}}}, "asked", "true",
			[]string{"10\u00a0038,00\u00a0₸", "расходится с маркетплейсом на \u22125\u00a0019,00\u00a0₸"}},
		{"same", finder{orders: []onec.Order{{Ref: res.Ref, Total: ptr(decimal.RequireFromString("5019.00"))}}}, "asked", "false",
			[]string{"совпадает с маркетплейсом"}},
		{"silent", finder{block: true}, "unanswered", "false", []string{"1С не ответила", "5\u00a0019,00\u00a0₸"}},
		{"failing", finder{err: &onec.Error{Class: onec.Transient, Op: "find", Status: 503}}, "unanswered", "false", []string{"1С не ответила"}},
		{"absent", finder{orders: []onec.Order{}}, "absent", "false", []string{"В 1С нет заказа", "site:T-1"}},
		{"not asked", nil, "not_asked", "false", []string{"1С не спрашивали", "5\u00a0019,00\u00a0₸"}},
	} {
		s := newSite(t, st, func(c *Config) { c.OneC = tc.f; c.OneCTimeout = 200 * time.Millisecond })
		a := s.browser().get("/ui/journal/op?key=" + url.QueryEscape(key))
		cell := byID(a.doc, "onec-total")
		if a.status != http.StatusOK || cell == nil {
			t.Fatalf("%s: %d, #onec-total %v", tc.name, a.status, cell)
		}
		if attr(cell, "data-state") != tc.state || attr(cell, "data-differs") != tc.differs {
			t.Errorf("%s: #onec-total state %q differs %q, want %s %s", tc.name, attr(cell, "data-state"), attr(cell, "data-differs"), tc.state, tc.differs)
		}
		for _, w := range tc.says {
			if !strings.Contains(text(cell), w) {
				t.Errorf("%s: #onec-total says %q, not %q", tc.name, text(cell), w)
			}
		}
		if got := text(byID(a.doc, "mp-total")); got != "5\u00a0019,00\u00a0₸" {
			t.Errorf("%s: the marketplace's total %q", tc.name, got)
		}
	}
}

// hrefKey is the key a link to an operation's page names.
func hrefKey(a *html.Node) string {
	if a == nil {
		return ""
	}
	u, err := url.Parse(attr(a, "href"))
	if err != nil || u.Path != "/ui/journal/op" {
		return ""
	}
	return u.Query().Get("key")
}

func ptr[T any](v T) *T { return &v }

func TestCancelledOrdersPages(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, st stores) {
		key, _ := doneCreate(t, st, "C-1", "100")
		c, err := order.NewCancel("site", "C-1", "покупатель передумал")
		if err != nil {
			t.Fatal(err)
		}
		payload, _ := json.Marshal(c)
		ck := order.CancelKeyOf(key)
		register(t, st.journal, journal.NewOperation{Key: ck, Kind: order.KindCancel, Source: "site", ExternalID: "C-1", Payload: payload}, "")
		s := newSite(t, st, nil)
		b := s.browser()

		a := b.get("/ui/journal/op?key=" + url.QueryEscape(key))
		if st := byID(a.doc, "state"); st == nil || attr(st, "data-state") != string(journal.StateCancelPending) {
			t.Errorf("the create's page, cancel pending: #state %v", st)
		}
		attempt(t, st.journal, ck, journal.Finish{Status: journal.StatusDone, Result: &journal.Result{Ref: "3d71007f-8d04-11dc-8ca0-000d8843cd1b", Note: "cancelled in 1C"}})
		a = b.get("/ui/journal/op?key=" + url.QueryEscape(key))
		if st := byID(a.doc, "state"); st == nil || attr(st, "data-state") != string(journal.StateCancelled) || !strings.Contains(text(st), "отменён в 1С") {
			t.Errorf("the create's page: #state %v", st)
		}
		note := byID(a.doc, "cancelled-note")
		if note == nil || !strings.Contains(text(note), "покупатель передумал") || hrefKey(byID(a.doc, "cancel-link")) != ck {
			t.Fatalf("the create's page does not say near the top that it was cancelled, and why: %v\n%s", note, a.body)
		}

		a = b.get("/ui/journal/op?key=" + url.QueryEscape(ck))
		if a.status != http.StatusOK {
			t.Fatalf("the cancel's page: %d", a.status)
		}
		if st := byID(a.doc, "state"); st == nil || attr(st, "data-state") != string(journal.StateCancelled) {
			t.Errorf("the cancel's page: #state %v", st)
		}
		page := text(byTag(a.doc, "main"))
		if strings.Contains(page, "Создан ordersync") || byID(a.doc, "onec-order") != nil {
			t.Errorf("the cancel's page speaks of a create: %q", page)
		}
		if r := byID(a.doc, "cancel-result"); r == nil || !strings.Contains(text(r), "Заказ отменён в 1С.") {
			t.Errorf("the cancel's result: %v", r)
		}
		if hrefKey(byID(a.doc, "create-link")) != key || !strings.Contains(text(byID(a.doc, "op-title")), "C-1") {
			t.Errorf("the cancel's page does not link its create, or its title %q names no order", text(byID(a.doc, "op-title")))
		}
		if byID(a.doc, "resync") != nil {
			t.Errorf("a done cancel offers a resync")
		}
	})
}

// TestLongTimelineFolds: an operation retried 460 times with the same error shows
// a few lines, the rest folded under one that says how many and when.
func TestLongTimelineFolds(t *testing.T) {
	t.Parallel()
	st := openStores(t, "sqlite")
	key := order.Key("site", "order", "L-1", "create")
	register(t, st.journal, createOp("site", "L-1", "Иван Петров", "+77011234567", "10"), "")
	const n = 460
	for range n - 1 {
		attempt(t, st.journal, key, journal.Finish{Status: journal.StatusPending, Class: journal.ClassTransient,
			Error: "1c find: transient (HTTP 503): Service Unavailable", NextAttemptAt: time.Now()})
	}
	attempt(t, st.journal, key, journal.Finish{Status: journal.StatusFailed, Class: journal.ClassPermanent,
		Error: "1c create: permanent (HTTP 422): Не найдена номенклатура [field lines[0].sku]"})
	s := newSite(t, st, func(c *Config) { c.Users = []User{testUser(t, "vera", RoleViewer)} })
	b := s.browser()
	b.mustSignIn("vera")
	a := b.get("/ui/journal/op?key=" + url.QueryEscape(key))
	tl := byID(a.doc, "timeline")
	runs := byClass(tl, "li", "run")
	if len(runs) != 1 || attr(runs[0], "data-count") != fmt.Sprint(n-2) || !strings.Contains(text(runs[0]), fmt.Sprintf("ещё %d таких же", n-2)) {
		t.Fatalf("runs: %d", len(runs))
	}
	if got := len(byClass(tl, "li", "attempt")); got != n {
		t.Errorf("%d attempts in the page, want every one of %d (folded, not dropped)", got, n)
	}
	if got := len(byClass(tl, "span", "worker")); got != 0 {
		t.Errorf("a viewer is shown %d worker ids", got)
	}
	last := text(byID(a.doc, "last-error"))
	if !strings.Contains(last, "1С отказала") || !strings.Contains(last, "Не найдена номенклатура") {
		t.Errorf("the last error is not worded: %q", last)
	}
}

// TestOperationPageInRussian: what the journal writes in English (an event's
// detail, the inbox's outcome, an event type, a warning's message, an error) reads
// in Russian, the English text one click away.
func TestOperationPageInRussian(t *testing.T) {
	t.Parallel()
	st := openStores(t, "sqlite")
	w := seed(t, st)
	b := newSite(t, st, nil).browser()
	a := b.get("/ui/journal/op?key=" + url.QueryEscape(w.pending))
	ev := byClass(byID(a.doc, "timeline"), "li", "event")
	if len(ev) == 0 || !strings.Contains(text(ev[0]), "вебхук ozon, событие TYPE_NEW_POSTING:0570-1") {
		t.Errorf("the registration's detail is not worded")
	}
	if got := text(byID(a.doc, "inbox")); !strings.Contains(got, "принят, операции зарегистрированы") {
		t.Errorf("the inbox's outcome: %q", got)
	}
	a = b.get("/ui/journal/op?key=" + url.QueryEscape(w.done))
	if got := text(byID(a.doc, "outbox")); !strings.Contains(got, "заказ создан") {
		t.Errorf("the outbox's event type: %q", got)
	}
	ws := byClass(byID(a.doc, "warnings"), "li", "warning")
	if len(ws) != 1 {
		t.Fatalf("%d warnings", len(ws))
	}
	raw := byClass(ws[0], "details", "raw-text")
	if len(raw) != 1 || !strings.Contains(text(raw[0]), "1C holds 2 orders for site:A-1") {
		t.Errorf("the warning's English message is not kept beside it")
	}
	if first, _, _ := strings.Cut(text(ws[0]), "1C holds"); strings.Contains(first, "holds") {
		t.Errorf("the warning reads English: %q", text(ws[0]))
	}
	first := byClass(byID(a.doc, "timeline"), "li", "attempt")[0]
	if got := text(first); !strings.Contains(got, "1С временно не ответила") {
		t.Errorf("the 503 attempt reads %q", got)
	}
}
