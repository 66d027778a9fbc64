package ui

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"
	"golang.org/x/net/html"

	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/outbox"
	"github.com/ordersync/ordersync/internal/reconcile"
)

func TestCataloguesHaveTheSameKeys(t *testing.T) {
	t.Parallel()
	for k := range ru {
		if _, ok := en[k]; !ok {
			t.Errorf("en lacks %q", k)
		}
	}
	for k := range en {
		if _, ok := ru[k]; !ok {
			t.Errorf("ru lacks %q", k)
		}
	}
	// A format's verbs agree, so that one language never shows %!d(MISSING).
	for k, v := range ru {
		if strings.Count(v, "%") != strings.Count(en[k], "%") {
			t.Errorf("%q: ru %q and en %q take different arguments", k, v, en[k])
		}
	}
}

func TestSignIn(t *testing.T) {
	t.Parallel()
	st := openStores(t, "sqlite")
	s := newSite(t, st, func(c *Config) {
		c.Users = []User{testUser(t, "anna", RoleOperator)}
		c.SecureCookie = true
	})

	b := s.browser()
	a := b.get("/ui/signin")
	if a.status != http.StatusOK || byID(a.doc, "signin") == nil {
		t.Fatalf("GET /ui/signin: %d, form#signin %v", a.status, byID(a.doc, "signin") != nil)
	}
	a = b.signIn("anna", "wrong")
	if a.status != http.StatusUnauthorized || byID(a.doc, "signin-error") == nil {
		t.Fatalf("wrong password: %d, #signin-error %v", a.status, byID(a.doc, "signin-error") != nil)
	}
	if a.header.Get("Set-Cookie") != "" && strings.Contains(a.header.Get("Set-Cookie"), sessionCookie) {
		t.Fatalf("a wrong password set a session cookie: %s", a.header.Get("Set-Cookie"))
	}
	a = b.signIn("nobody", testPassword)
	if a.status != http.StatusUnauthorized {
		t.Fatalf("unknown name: %d", a.status)
	}
	logs := s.log.String()
	if !strings.Contains(logs, "sign-in failed") || !strings.Contains(logs, "name=anna") || !strings.Contains(logs, "name=nobody") {
		t.Errorf("failed sign-ins are not logged with the name:\n%s", logs)
	}
	if strings.Contains(logs, "wrong") && strings.Contains(logs, "password=") || strings.Contains(logs, testPassword) {
		t.Errorf("a password reached the log:\n%s", logs)
	}

	a = b.signIn("anna", testPassword)
	if a.status != http.StatusSeeOther || a.header.Get("Location") != "/ui/journal" {
		t.Fatalf("right password: %d to %q", a.status, a.header.Get("Location"))
	}
	var session *http.Cookie
	for _, c := range (&http.Response{Header: a.header}).Cookies() {
		if c.Name == sessionCookie {
			session = c
		}
	}
	if session == nil {
		t.Fatalf("no session cookie: %v", a.header["Set-Cookie"])
	}
	if !session.HttpOnly || !session.Secure || session.SameSite != http.SameSiteStrictMode || session.Path != "/ui" || len(session.Value) < 43 {
		t.Errorf("session cookie %+v: want HttpOnly, Secure, SameSite=Strict, Path=/ui, a 32-byte id", session)
	}
	// The jar will not send a Secure cookie over http: hand it over as a browser on TLS would.
	req, _ := http.NewRequest(http.MethodGet, s.url+"/ui/journal", nil)
	req.AddCookie(&http.Cookie{Name: sessionCookie, Value: session.Value})
	a = s.browser().do(req)
	if a.status != http.StatusOK || attr(byTag(a.doc, "body"), "data-user") != "anna" {
		t.Fatalf("with the session: %d, user %q", a.status, attr(byTag(a.doc, "body"), "data-user"))
	}

	// Signing out ends the session.
	csrf := formValue(t, a.doc, "signout", "csrf")
	req, _ = http.NewRequest(http.MethodPost, s.url+"/ui/signout", strings.NewReader(url.Values{"csrf": {csrf}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.AddCookie(&http.Cookie{Name: sessionCookie, Value: session.Value})
	if a := s.browser().do(req); a.status != http.StatusSeeOther {
		t.Fatalf("sign-out: %d", a.status)
	}
	req, _ = http.NewRequest(http.MethodGet, s.url+"/ui/journal", nil)
	req.AddCookie(&http.Cookie{Name: sessionCookie, Value: session.Value})
	if a := s.browser().do(req); a.status != http.StatusSeeOther {
		t.Fatalf("after sign-out the session still works: %d", a.status)
	}
}

func TestSignInWithoutTheFormsTokenIsRefused(t *testing.T) {
	t.Parallel()
	s := newSite(t, openStores(t, "sqlite"), func(c *Config) { c.Users = []User{testUser(t, "anna", RoleOperator)} })
	b := s.browser()
	a := b.post("/ui/signin", url.Values{"name": {"anna"}, "password": {testPassword}})
	if a.status != http.StatusForbidden {
		t.Fatalf("sign-in without csrf: %d, want 403", a.status)
	}
}

func TestSessionExpiresWithoutUse(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 3, 9, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	s := newSite(t, openStores(t, "sqlite"), func(c *Config) {
		c.Users = []User{testUser(t, "anna", RoleViewer)}
		c.SessionTTL = time.Hour
		c.Now = clock
	})
	b := s.browser()
	b.mustSignIn("anna")
	now = now.Add(50 * time.Minute)
	if a := b.get("/ui/journal"); a.status != http.StatusOK {
		t.Fatalf("within the TTL: %d", a.status)
	}
	now = now.Add(50 * time.Minute) // 100 minutes since sign-in, 50 since the last use
	if a := b.get("/ui/journal"); a.status != http.StatusOK {
		t.Fatalf("the expiry does not slide: %d", a.status)
	}
	now = now.Add(61 * time.Minute)
	if a := b.get("/ui/journal"); a.status != http.StatusSeeOther {
		t.Fatalf("after the TTL without use: %d, want a redirect to sign in", a.status)
	}
}

func TestUnauthenticatedRequestsGoToSignIn(t *testing.T) {
	t.Parallel()
	s := newSite(t, openStores(t, "sqlite"), func(c *Config) { c.Users = []User{testUser(t, "anna", RoleViewer)} })
	b := s.browser()
	a := b.get("/ui/journal/op?key=site:order:A-1:create")
	want := "/ui/signin?next=" + url.QueryEscape("/ui/journal/op?key=site:order:A-1:create")
	if a.status != http.StatusSeeOther || a.header.Get("Location") != want {
		t.Fatalf("GET without a session: %d to %q, want 303 to %q", a.status, a.header.Get("Location"), want)
	}
	if a := b.post("/ui/journal/resync", url.Values{"key": {"x"}}); a.status != http.StatusForbidden {
		t.Fatalf("POST without a session: %d, want 403", a.status)
	}
	// Sign-in honours only a local /ui/ path as next.
	for next, want := range map[string]string{
		"/ui/journal/op?key=k":  "/ui/journal/op?key=k",
		"//evil.example/ui/":    "/ui/journal",
		"https://evil.example/": "/ui/journal",
		"/ui/../admin":          "/ui/journal",
		"/elsewhere":            "/ui/journal",
		"/ui/\\evil":            "/ui/journal",
	} {
		if got := safeNext(next); got != want {
			t.Errorf("next %q: got %q, want %q", next, got, want)
		}
	}
	b2 := s.browser()
	form := b2.get("/ui/signin?next=" + url.QueryEscape("/ui/reconcile"))
	a = b2.post("/ui/signin", url.Values{"name": {"anna"}, "password": {testPassword},
		"csrf": {formValue(t, form.doc, "signin", "csrf")}, "next": {formValue(t, form.doc, "signin", "next")}})
	if a.header.Get("Location") != "/ui/reconcile" {
		t.Fatalf("after sign-in: to %q, want /ui/reconcile", a.header.Get("Location"))
	}
}

func TestSecurityHeadersAndRedirects(t *testing.T) {
	t.Parallel()
	s := newSite(t, openStores(t, "sqlite"), nil)
	b := s.browser()
	for _, path := range []string{"/ui/journal", "/ui/signin", "/ui/static/style.css", "/ui/journal/op?key=none"} {
		a := b.get(path)
		for h, want := range map[string]string{"X-Frame-Options": "DENY", "Referrer-Policy": "same-origin",
			"X-Content-Type-Options": "nosniff"} {
			if got := a.header.Get(h); got != want {
				t.Errorf("%s: %s %q, want %q", path, h, got, want)
			}
		}
		if csp := a.header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") || strings.Contains(csp, "unsafe-inline") {
			t.Errorf("%s: Content-Security-Policy %q", path, csp)
		}
	}
	for _, path := range []string{"/ui/", "/ui", "/"} {
		if a := b.get(path); a.status != http.StatusSeeOther || a.header.Get("Location") != "/ui/journal" {
			t.Errorf("GET %s: %d to %q, want 303 to /ui/journal", path, a.status, a.header.Get("Location"))
		}
	}
	if a := b.get("/ui/static/style.css"); a.status != http.StatusOK || !strings.HasPrefix(a.header.Get("Content-Type"), "text/css") {
		t.Errorf("style sheet: %d %s", a.status, a.header.Get("Content-Type"))
	}
	// Nothing is loaded from elsewhere, and no page runs a script.
	a := b.get("/ui/journal")
	if n := len(all(a.doc, func(n *html.Node) bool { return n.Data == "script" })); n != 0 {
		t.Errorf("the list has %d script elements", n)
	}
	if strings.Contains(a.body, "http://") || strings.Contains(a.body, "https://") {
		t.Errorf("the list names an address elsewhere:\n%s", a.body)
	}
}

func TestGetOnAPostRouteIs405(t *testing.T) {
	t.Parallel()
	s := newSite(t, openStores(t, "sqlite"), nil)
	b := s.browser()
	for _, path := range []string{"/ui/journal/resync", "/ui/outbox/requeue", "/ui/signout"} {
		if a := b.get(path); a.status != http.StatusMethodNotAllowed {
			t.Errorf("GET %s: %d, want 405", path, a.status)
		}
	}
}

func TestServerRefusesAnAddressOthersReachWithoutUsers(t *testing.T) {
	t.Parallel()
	st := openStores(t, "sqlite")
	for _, listen := range []string{"0.0.0.0:8081", ":8081", "192.0.2.10:8081"} {
		_, err := New(Config{Listen: listen, Journal: st.journal, Outbox: st.outbox})
		if err == nil || !strings.Contains(err.Error(), "ui.users") {
			t.Errorf("listen %s without users: got %v, want an error naming ui.users", listen, err)
		}
	}
	if _, err := New(Config{Listen: "127.0.0.1:0", Journal: st.journal, Outbox: st.outbox}); err != nil {
		t.Errorf("loopback without users: %v", err)
	}
	if _, err := New(Config{Listen: "0.0.0.0:8081", Journal: st.journal, Outbox: st.outbox,
		Users: []User{testUser(t, "anna", RoleViewer)}}); err != nil {
		t.Errorf("any address with users: %v", err)
	}
	if _, err := New(Config{Lang: "kk", Journal: st.journal, Outbox: st.outbox}); err == nil {
		t.Error("lang kk: got nil, want an error")
	}
}

func TestServerStartsAndStops(t *testing.T) {
	t.Parallel()
	st := openStores(t, "sqlite")
	s, err := New(Config{Listen: "127.0.0.1:0", Journal: st.journal, Outbox: st.outbox})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(context.Background()); err != nil {
		t.Fatalf("stop before start: %v", err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(s.URL())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d", s.URL(), resp.StatusCode)
	}
	if err := s.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(context.Background()); err != nil {
		t.Fatalf("second stop: %v", err)
	}
}

func TestListShowsTheOperationsAndFilters(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, st stores) {
		w := seed(t, st)
		s := newSite(t, st, func(c *Config) { c.Users = []User{testUser(t, "anna", RoleViewer)} })
		b := s.browser()
		b.mustSignIn("anna")

		a := b.get("/ui/journal")
		if a.status != http.StatusOK {
			t.Fatalf("list: %d\n%s", a.status, a.body)
		}
		keys := rowKeys(a.doc)
		for _, k := range []string{w.done, w.failed, w.pending} {
			if !slices.Contains(keys, k) {
				t.Errorf("the list lacks %s: %v", k, keys)
			}
		}
		// The default period is the last 7 days, filled into the form.
		today := time.Now().In(almaty).Format(time.DateOnly)
		if got := formValue(t, a.doc, "filters", "to"); got != today {
			t.Errorf("default to %q, want today %q", got, today)
		}
		// The done row's cells.
		var row = rowOf(t, a.doc, w.done)
		for class, want := range map[string]string{"state": "создан в 1С", "onec-number": "ОС-000123", "customer": "Иван Петров",
			"total": "3\u00a0000,20 KZT", "attempts": "2", "source": "сайт", "key": "A-1" + w.done, "warnings": "1"} {
			if got := text(cell(t, row, class)); got != want {
				t.Errorf("%s: %q, want %q", class, got, want)
			}
		}
		// The order's date in the Russian format, in the pages' zone (the footer names it).
		if got := text(cell(t, row, "created")); !regexp.MustCompile(`^\d\d\.\d\d\.\d{4} \d\d:\d\d$`).MatchString(got) {
			t.Errorf("created %q, want dd.mm.yyyy hh:mm", got)
		}
		if u, err := url.Parse(attr(byTag(cell(t, row, "key"), "a"), "href")); err != nil || u.Path != "/ui/journal/op" || u.Query().Get("key") != w.done {
			t.Errorf("key link %v %v", u, err)
		}
		failedRow := rowOf(t, a.doc, w.failed)
		if got := text(cell(t, failedRow, "last-error")); !strings.Contains(got, "1C rejected") {
			t.Errorf("last error %q", got)
		}
		if exp := byID(a.doc, "export-csv"); exp == nil || !strings.HasPrefix(attr(exp, "href"), "/ui/journal/export.csv?") {
			t.Errorf("no export link")
		}

		for query, want := range map[string][]string{
			"status=done":                   {w.done},
			"status=failed":                 {w.failed},
			"source=ozon":                   {w.pending},
			"warnings=1":                    {w.done},
			"q=ОС-000123":                   {w.done},
			"q=512344101":                   {w.failed},
			"q=8+701+234+56+78":             {w.done},
			"kind=order.cancel":             nil,
			"from=2020-01-01&to=2020-01-31": nil,
			"from=&to=":                     {w.done, w.failed, w.pending},
		} {
			a := b.get("/ui/journal?" + strings.ReplaceAll(query, "ОС", url.QueryEscape("ОС")))
			if a.status != http.StatusOK {
				t.Errorf("%s: %d", query, a.status)
				continue
			}
			got := rowKeys(a.doc)
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("%s: rows %v, want %v", query, got, want)
			}
			if len(want) == 0 && byID(a.doc, "empty") == nil {
				t.Errorf("%s: no #empty", query)
			}
		}

		// Invalid input: the page says what is wrong, 400, never 500.
		for _, query := range []string{"status=stuck", "from=2026-13-01", "to=yesterday", "from=2026-11-07&to=2026-11-01",
			"source=Kaspi!", "after=garbage", "q=" + strings.Repeat("x", 201)} {
			a := b.get("/ui/journal?" + query)
			if a.status != http.StatusBadRequest || byID(a.doc, "problems") == nil {
				t.Errorf("%s: %d, #problems %v", query, a.status, byID(a.doc, "problems") != nil)
			}
		}
	})
}

func TestListPagesWithACursor(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, st stores) {
		const n = pageSize + 7
		want := map[string]bool{}
		for i := range n {
			op := createOp("site", "P-"+strings.Repeat("0", 3-len(itoa(i)))+itoa(i), "Покупатель", "", "10")
			register(t, st.journal, op, "")
			want[op.Key] = true
		}
		s := newSite(t, st, nil)
		b := s.browser()
		a := b.get("/ui/journal")
		first := rowKeys(a.doc)
		next := byID(a.doc, "next-page")
		if len(first) != pageSize || next == nil {
			t.Fatalf("first page: %d rows, next %v", len(first), next != nil)
		}
		a = b.get(attr(next, "href"))
		second := rowKeys(a.doc)
		if len(second) != n-pageSize || byID(a.doc, "next-page") != nil || byID(a.doc, "first-page") == nil {
			t.Fatalf("second page: %d rows, next %v", len(second), byID(a.doc, "next-page") != nil)
		}
		for _, k := range append(first, second...) {
			if !want[k] {
				t.Errorf("%s listed twice or unknown", k)
			}
			delete(want, k)
		}
		if len(want) != 0 {
			t.Errorf("never listed: %v", want)
		}
	})
}

func itoa(i int) string { return decimal.NewFromInt(int64(i)).String() }

func TestOperationPage(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, st stores) {
		w := seed(t, st)
		s := newSite(t, st, func(c *Config) { c.Users = []User{testUser(t, "anna", RoleOperator)} })
		b := s.browser()
		b.mustSignIn("anna")

		a := b.get("/ui/journal/op?key=" + url.QueryEscape(w.done))
		if a.status != http.StatusOK {
			t.Fatalf("op page: %d\n%s", a.status, a.body)
		}
		doc := a.doc
		if op := byID(doc, "op"); op == nil || attr(op, "data-key") != w.done || attr(op, "data-status") != "done" {
			t.Fatalf("#op: %v", op)
		}
		onec := byID(doc, "onec-order")
		if onec == nil || attr(onec, "data-found") != "false" || !strings.Contains(text(onec), "Создан ordersync") {
			t.Errorf("#onec-order: %v", onec)
		}
		if got := text(byID(doc, "onec-number")); got != "ОС-000123" {
			t.Errorf("1C number %q", got)
		}
		if got := text(byID(doc, "onec-date")); got != "03.11.2026 10:05" {
			t.Errorf("1C date %q, want it as 1C shows it", got)
		}

		// The timeline: the registration by the site's webhook, then both attempts.
		tl := byID(doc, "timeline")
		events := byClass(tl, "li", "event")
		attempts := byClass(tl, "li", "attempt")
		if len(attempts) != 2 || attr(attempts[0], "data-outcome") != "retry" || attr(attempts[1], "data-outcome") != "done" {
			t.Fatalf("attempts in the timeline: %d", len(attempts))
		}
		if got := text(attempts[0]); !strings.Contains(got, "503") || !strings.Contains(got, "временный сбой") || !strings.Contains(got, "POST /orders") {
			t.Errorf("the first attempt does not say what 1C answered: %q", got)
		}
		if got := len(byClass(attempts[1], "tr", "exchange")); got != 2 {
			t.Errorf("the second attempt shows %d exchanges, want 2", got)
		}
		if len(events) == 0 || attr(events[0], "data-action") != journal.EventRegistered || attr(events[0], "data-actor") != "webhook:site" {
			t.Errorf("the registration event: %d events", len(events))
		} else if !strings.Contains(text(events[0]), "вебхук от site") {
			t.Errorf("the registration's actor in words: %q", text(events[0]))
		}
		if got := attr(attempts[0], "data-triggered-by"); got != "webhook:site" {
			t.Errorf("the first attempt was triggered by %q, want webhook:site", got)
		}

		// Warnings: the duplicate, with both refs and numbers.
		ws := byClass(byID(doc, "warnings"), "li", "warning")
		if len(ws) != 1 || attr(ws[0], "data-code") != journal.WarningDuplicateIn1C ||
			!strings.Contains(text(ws[0]), "7f1c2a3e-0000-4000-8000-000000000002") || !strings.Contains(text(ws[0]), "ОС-000124") {
			t.Errorf("warnings: %d", len(ws))
		}

		// The conflict, field by field.
		cs := byClass(byID(doc, "conflicts"), "div", "conflict")
		if len(cs) != 1 {
			t.Fatalf("conflicts: %d", len(cs))
		}
		diff := map[string][2]string{}
		for _, tr := range byClass(cs[0], "tr", "diff") {
			diff[attr(tr, "data-path")] = [2]string{text(byClass(tr, "td", "saved")[0]), text(byClass(tr, "td", "other")[0])}
		}
		wantDiff := map[string][2]string{"customer.name": {`"Иван Петров"`, `"Пётр Иванов"`}, "lines.0.price": {"1500.10", "1600"}}
		if len(diff) != len(wantDiff) {
			t.Errorf("diff %v, want %v", diff, wantDiff)
		}
		for p, v := range wantDiff {
			if diff[p] != v {
				t.Errorf("diff at %s: %v, want %v", p, diff[p], v)
			}
		}

		// The outbox: the dead delivery to the CRM, with a requeue button.
		evs := byClass(byID(doc, "outbox"), "tr", "event")
		if len(evs) != 1 || attr(evs[0], "data-destination") != "crm" || attr(evs[0], "data-state") != "dead" ||
			!strings.Contains(text(evs[0]), "410 Gone") {
			t.Fatalf("outbox rows: %d", len(evs))
		}
		if fs := byClass(evs[0], "form", "requeue-event"); len(fs) != 1 || attr(fs[0], "data-id") != itoa(int(w.deadEvent)) {
			t.Errorf("no requeue form for the dead event")
		}
		if byID(doc, "resync") != nil {
			t.Errorf("a done operation's page offers form#resync")
		}
		if c := byID(doc, "cancel"); c != nil {
			t.Errorf("a cancel is shown, none exists")
		}

		// The pending one came by webhook: its delivery is shown.
		a = b.get("/ui/journal/op?key=" + url.QueryEscape(w.pending))
		ds := byClass(byID(a.doc, "inbox"), "tr", "delivery")
		if len(ds) != 1 || attr(ds[0], "data-event-id") != "TYPE_NEW_POSTING:0570-1" || !strings.Contains(text(ds[0]), "ozon") {
			t.Errorf("the inbox delivery: %d rows; inbox says %q", len(ds), text(byID(a.doc, "inbox")))
		}

		// An unknown key is a 404 page.
		a = b.get("/ui/journal/op?key=no:such:key")
		if a.status != http.StatusNotFound || attr(byID(a.doc, "error"), "data-code") != "404" {
			t.Errorf("unknown key: %d", a.status)
		}
	})
}

func TestViewerSeesNoButtonsAndIsRefused(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, st stores) {
		w := seed(t, st)
		s := newSite(t, st, func(c *Config) { c.Users = []User{testUser(t, "vera", RoleViewer)} })
		b := s.browser()
		b.mustSignIn("vera")
		a := b.get("/ui/journal/op?key=" + url.QueryEscape(w.failed))
		if byID(a.doc, "resync") != nil {
			t.Error("a viewer's page has form#resync")
		}
		a = b.get("/ui/journal/op?key=" + url.QueryEscape(w.done))
		if len(byClass(a.doc, "form", "requeue-event")) != 0 {
			t.Error("a viewer's page has a requeue form")
		}
		csrf := formValue(t, a.doc, "signout", "csrf")
		if a := b.post("/ui/journal/resync", url.Values{"key": {w.failed}, "csrf": {csrf}}); a.status != http.StatusForbidden {
			t.Errorf("a viewer's resync: %d, want 403", a.status)
		}
		if a := b.post("/ui/outbox/requeue", url.Values{"id": {itoa(int(w.deadEvent))}, "key": {w.done}, "csrf": {csrf}}); a.status != http.StatusForbidden {
			t.Errorf("a viewer's requeue: %d, want 403", a.status)
		}
		if op, _ := st.journal.Get(context.Background(), w.failed); op.Status != journal.StatusFailed {
			t.Errorf("after a viewer's resync the operation is %s", op.Status)
		}
	})
}

func TestForgedPostsAreRefused(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, st stores) {
		w := seed(t, st)
		s := newSite(t, st, func(c *Config) { c.Users = []User{testUser(t, "anna", RoleOperator)} })
		b := s.browser()
		b.mustSignIn("anna")
		for name, form := range map[string]url.Values{
			"no csrf":    {"key": {w.failed}},
			"wrong csrf": {"key": {w.failed}, "csrf": {randomToken()}},
		} {
			if a := b.post("/ui/journal/resync", form); a.status != http.StatusForbidden {
				t.Errorf("%s: %d, want 403", name, a.status)
			}
		}
		// Local mode (no users): the pre-session cookie's token is the one.
		local := newSite(t, st, nil)
		lb := local.browser()
		lb.get("/ui/journal")
		if a := lb.post("/ui/journal/resync", url.Values{"key": {w.failed}, "csrf": {randomToken()}}); a.status != http.StatusForbidden {
			t.Errorf("local, wrong csrf: %d, want 403", a.status)
		}
		op, err := st.journal.Get(context.Background(), w.failed)
		if err != nil || op.Status != journal.StatusFailed {
			t.Fatalf("after forged posts: %s %v", op.Status, err)
		}
	})
}

func TestOperatorResyncLandsInTheTimeline(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, st stores) {
		w := seed(t, st)
		woken := make(chan struct{}, 10)
		s := newSite(t, st, func(c *Config) {
			c.Users = []User{testUser(t, "anna", RoleOperator)}
			c.Wake = func() { woken <- struct{}{} }
		})
		b := s.browser()
		b.mustSignIn("anna")
		page := b.get("/ui/journal/op?key=" + url.QueryEscape(w.failed))
		form := byID(page.doc, "resync")
		if form == nil || attr(form, "method") != "post" || attr(form, "action") != "/ui/journal/resync" {
			t.Fatalf("form#resync: %v", form)
		}
		a := b.post("/ui/journal/resync", url.Values{"key": {formValue(t, page.doc, "resync", "key")},
			"csrf": {formValue(t, page.doc, "resync", "csrf")}})
		wantBack := "/ui/journal/op?key=" + url.QueryEscape(w.failed) + "&msg=requeued"
		if a.status != http.StatusSeeOther || a.header.Get("Location") != wantBack {
			t.Fatalf("resync: %d to %q, want 303 to %q", a.status, a.header.Get("Location"), wantBack)
		}
		select {
		case <-woken:
		default:
			t.Error("the engine was not woken")
		}
		det, err := st.journal.Show(context.Background(), w.failed)
		if err != nil {
			t.Fatal(err)
		}
		if det.Status != journal.StatusPending {
			t.Errorf("after resync: %s, want pending", det.Status)
		}
		if !slices.ContainsFunc(det.Events, func(e journal.Event) bool {
			return e.Action == journal.EventRequeued && e.Actor == journal.ActorUI("anna")
		}) {
			t.Errorf("no requeued event by ui:anna: %+v", det.Events)
		}
		a = b.get(wantBack)
		if f := byID(a.doc, "flash"); f == nil || attr(f, "data-msg") != "requeued" {
			t.Errorf("no #flash[data-msg=requeued]")
		}
		got := all(byID(a.doc, "timeline"), func(n *html.Node) bool {
			return attr(n, "data-action") == journal.EventRequeued && attr(n, "data-actor") == "ui:anna"
		})
		if len(got) != 1 || !strings.Contains(text(got[0]), "страницы журнала, пользователь anna") {
			t.Errorf("the timeline shows %d requeues by ui:anna", len(got))
		}

		// A done one is not requeued, and the page says so.
		csrf := formValue(t, a.doc, "resync", "csrf")
		a = b.post("/ui/journal/resync", url.Values{"key": {w.done}, "csrf": {csrf}})
		if !strings.HasSuffix(a.header.Get("Location"), "&msg=already_done") {
			t.Errorf("resync of a done one: to %q", a.header.Get("Location"))
		}
		if op, _ := st.journal.Get(context.Background(), w.done); op.Status != journal.StatusDone {
			t.Errorf("the done one is %s", op.Status)
		}

		// The dead event goes back to the queue.
		a = b.post("/ui/outbox/requeue", url.Values{"id": {itoa(int(w.deadEvent))}, "key": {w.done}, "csrf": {csrf}})
		if !strings.HasSuffix(a.header.Get("Location"), "&msg=event_requeued") {
			t.Errorf("requeue of the dead event: %d to %q", a.status, a.header.Get("Location"))
		}
		recs, err := st.outbox.List(context.Background(), outbox.ListFilter{Dead: true})
		if err != nil || len(recs) != 0 {
			t.Errorf("dead events after the requeue: %d %v", len(recs), err)
		}
		a = b.post("/ui/outbox/requeue", url.Values{"id": {itoa(int(w.deadEvent))}, "key": {w.done}, "csrf": {csrf}})
		if !strings.HasSuffix(a.header.Get("Location"), "&msg=event_not_dead") {
			t.Errorf("requeue of an event not dead: to %q", a.header.Get("Location"))
		}
	})
}

func TestLocalModeNeedsNoSignIn(t *testing.T) {
	t.Parallel()
	st := openStores(t, "sqlite")
	w := seed(t, st)
	s := newSite(t, st, nil)
	b := s.browser()
	a := b.get("/ui/journal/op?key=" + url.QueryEscape(w.failed))
	if a.status != http.StatusOK || byID(a.doc, "local-note") == nil || attr(byTag(a.doc, "body"), "data-user") != LocalUser {
		t.Fatalf("local: %d, #local-note %v", a.status, byID(a.doc, "local-note") != nil)
	}
	a = b.post("/ui/journal/resync", url.Values{"key": {w.failed}, "csrf": {formValue(t, a.doc, "resync", "csrf")}})
	if a.status != http.StatusSeeOther {
		t.Fatalf("local resync: %d", a.status)
	}
	det, _ := st.journal.Show(context.Background(), w.failed)
	if !slices.ContainsFunc(det.Events, func(e journal.Event) bool { return e.Actor == "ui:local" }) {
		t.Errorf("no event by ui:local: %+v", det.Events)
	}
	if a := b.get("/ui/signin"); a.status != http.StatusSeeOther {
		t.Errorf("sign-in with no users: %d, want a redirect to the journal", a.status)
	}
}

func TestLanguages(t *testing.T) {
	t.Parallel()
	st := openStores(t, "sqlite")
	w := seed(t, st)
	for lang, want := range map[string][]string{
		"ru": {"Журнал операций", "создан в 1С", "Дата заказа"},
		"en": {"Journal of operations", "created in 1C", "Order date"},
	} {
		s := newSite(t, st, func(c *Config) { c.Lang = lang })
		a := s.browser().get("/ui/journal")
		if got := attr(byTag(a.doc, "html"), "lang"); got != lang {
			t.Errorf("%s: html lang %q", lang, got)
		}
		for _, w := range want {
			if !strings.Contains(text(a.doc), w) {
				t.Errorf("%s: the list lacks %q", lang, w)
			}
		}
		// Every page renders in both languages: a key missing from a catalogue fails it.
		for _, path := range []string{"/ui/journal/op?key=" + url.QueryEscape(w.done), "/ui/journal/op?key=" + url.QueryEscape(w.pending),
			"/ui/journal/op?key=" + url.QueryEscape(w.failed), "/ui/reconcile", "/ui/journal?status=bad"} {
			if a := s.browser().get(path); a.status >= 500 {
				t.Errorf("%s %s: %d", lang, path, a.status)
			}
		}
	}
	if a := newSite(t, st, func(c *Config) { c.Lang = "en" }).browser().get("/ui/journal"); !strings.Contains(text(rowOf(t, a.doc, w.done)), "3,000.20 KZT") {
		t.Errorf("en money: %q", text(rowOf(t, a.doc, w.done)))
	}
}

func TestExports(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, st stores) {
		w := seed(t, st)
		s := newSite(t, st, nil)
		s.srv.exportPage = 2 // so that three rows take two pages and a half
		b := s.browser()
		a := b.get("/ui/journal/export.csv?from=&to=")
		if a.status != http.StatusOK || !strings.HasPrefix(a.header.Get("Content-Type"), "text/csv") {
			t.Fatalf("csv: %d %s", a.status, a.header.Get("Content-Type"))
		}
		if got := a.header.Get("Content-Disposition"); got != `attachment; filename="journal.csv"` {
			t.Errorf("csv disposition %q", got)
		}
		lines := strings.Split(strings.TrimSpace(a.body), "\r\n")
		if len(lines) != 4 {
			t.Errorf("csv: %d lines, want a header and 3 rows:\n%s", len(lines), a.body)
		}
		for _, k := range []string{w.done, w.failed, w.pending} {
			if !strings.Contains(a.body, k) {
				t.Errorf("csv lacks %s", k)
			}
		}
		a = b.get("/ui/journal/export.csv?status=done&from=2026-11-01&to=2030-11-07")
		if got := a.header.Get("Content-Disposition"); got != `attachment; filename="journal-2026-11-01-2030-11-07.csv"` {
			t.Errorf("csv disposition %q", got)
		}
		if lines := strings.Split(strings.TrimSpace(a.body), "\r\n"); len(lines) != 2 || !strings.Contains(lines[1], w.done) {
			t.Errorf("filtered csv:\n%s", a.body)
		}
		a = b.get("/ui/journal/export.xlsx")
		if a.status != http.StatusOK || a.header.Get("Content-Type") != "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet" ||
			!strings.HasPrefix(a.body, "PK") {
			t.Errorf("xlsx: %d %s", a.status, a.header.Get("Content-Type"))
		}
		if a := b.get("/ui/journal/export.csv?status=stuck"); a.status != http.StatusBadRequest {
			t.Errorf("csv with a bad filter: %d", a.status)
		}
	})
}

func TestReconcilePage(t *testing.T) {
	t.Parallel()
	st := openStores(t, "sqlite")
	if a := newSite(t, st, nil).browser().get("/ui/reconcile?source=kaspi&from=2026-11-01&to=2026-11-07"); byID(a.doc, "unavailable") == nil {
		t.Errorf("no #unavailable without a reconciliation")
	}
	total := decimal.RequireFromString("15990")
	var gotFrom, gotTo time.Time
	s := newSite(t, st, func(c *Config) {
		c.ReconcileSources = []string{"site", "kaspi"}
		c.Reconcile = func(_ context.Context, source string, from, to time.Time) (reconcile.Report, error) {
			if source == "ozon" {
				return reconcile.Report{}, errors.New("the connector ozon is not enabled")
			}
			gotFrom, gotTo = from, to
			return reconcile.Report{Source: source, From: from.Format(time.DateOnly), To: to.Format(time.DateOnly),
				Totals: map[reconcile.Category]int{reconcile.OK: 1, reconcile.MissingIn1C: 1},
				Items: []reconcile.Item{{Category: reconcile.OK, Key: "kaspi:order:1:create"},
					{Category: reconcile.MissingIn1C, Key: "kaspi:order:2:create", MarketplaceTotal: &total, Status: "done"}}}, nil
		}
	})
	b := s.browser()
	a := b.get("/ui/reconcile?source=kaspi&from=2026-11-01&to=2026-11-07")
	if a.status != http.StatusOK {
		t.Fatalf("reconcile: %d\n%s", a.status, a.body)
	}
	if !gotFrom.Equal(time.Date(2026, 11, 1, 0, 0, 0, 0, almaty)) || !gotTo.Equal(time.Date(2026, 11, 7, 0, 0, 0, 0, almaty)) {
		t.Errorf("asked for %v..%v", gotFrom, gotTo)
	}
	items := byClass(byID(a.doc, "items"), "tr", "item")
	if len(items) != 2 || attr(items[1], "data-category") != "missing_in_1c" || !strings.Contains(text(items[1]), "15\u00a0990,00") {
		t.Errorf("items: %d\n%s", len(items), a.body)
	}
	if a := b.get("/ui/reconcile?source=kaspi&from=2026-11-07&to=2026-11-01"); a.status != http.StatusBadRequest || byID(a.doc, "problems") == nil {
		t.Errorf("a period backwards: %d", a.status)
	}
	if a := b.get("/ui/reconcile?source=ozon&from=2026-11-01&to=2026-11-07"); a.status >= 500 && a.status != http.StatusBadGateway ||
		!strings.Contains(text(byID(a.doc, "problems")), "ozon is not enabled") {
		t.Errorf("a failed reconciliation: %d", a.status)
	}
}

func TestDiffJSON(t *testing.T) {
	t.Parallel()
	got := diffJSON([]byte(`{"a":1,"b":{"c":"x","d":[1,2]},"e":1.10}`), []byte(`{"a":1,"b":{"c":"y","d":[1]},"f":null,"e":1.1}`))
	want := []diffLine{
		{Path: "b.c", Saved: `"x"`, Other: `"y"`, InSaved: true, InOther: true},
		{Path: "b.d.1", Saved: "2", InSaved: true},
		{Path: "e", Saved: "1.10", Other: "1.1", InSaved: true, InOther: true},
		{Path: "f", Other: "null", InOther: true},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("diff:\n got %+v\nwant %+v", got, want)
	}
	if d := diffJSON([]byte(`not json`), []byte(`{}`)); len(d) != 1 || d[0].Path != "" || d[0].Saved != "not json" || d[0].Other != "{}" {
		t.Fatalf("not JSON: %+v", d)
	}
}

func TestFormats(t *testing.T) {
	t.Parallel()
	for in, want := range map[string][2]string{"1500.1": {"1\u00a0500,10", "1,500.10"}, "-1234567.899": {"-1\u00a0234\u00a0567,90", "-1,234,567.90"},
		"0": {"0,00", "0.00"}, "999": {"999,00", "999.00"}} {
		d := decimal.RequireFromString(in)
		if got := formatMoney(d, "ru"); got != want[0] {
			t.Errorf("ru %s: %q, want %q", in, got, want[0])
		}
		if got := formatMoney(d, "en"); got != want[1] {
			t.Errorf("en %s: %q, want %q", in, got, want[1])
		}
	}
	kolkata, _ := time.LoadLocation("Asia/Kolkata")
	at := time.Date(2026, 11, 3, 9, 5, 9, 0, time.UTC)
	if got := formatTime(at, almaty); got != "2026-11-03 14:05:09 +05" {
		t.Errorf("Almaty: %q", got)
	}
	if got := formatTime(at, kolkata); got != "2026-11-03 14:35:09 +05:30" {
		t.Errorf("Kolkata: %q", got)
	}
}
