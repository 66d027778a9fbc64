package ui

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
	"golang.org/x/net/html"

	"github.com/ordersync/ordersync/internal/inbox"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/order"
	"github.com/ordersync/ordersync/internal/outbox"
	"github.com/ordersync/ordersync/internal/store/postgres"
	"github.com/ordersync/ordersync/internal/store/sqlite"
	"github.com/ordersync/ordersync/internal/testdb"
)

// stores are one backend's journal, outbox and inbox, migrated and empty.
type stores struct {
	journal journal.Store
	outbox  outbox.Store
	inbox   inbox.Store
}

// eachStore runs fn on a fresh SQLite file and on a fresh PostgreSQL schema, in
// parallel.
func eachStore(t *testing.T, fn func(t *testing.T, st stores)) {
	t.Helper()
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			fn(t, openStores(t, backend))
		})
	}
}

func openStores(t *testing.T, backend string) stores {
	t.Helper()
	ctx := context.Background()
	switch backend {
	case "sqlite":
		db, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(t.TempDir(), "journal.db")})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		if _, err := db.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		return stores{db.Journal(), db.Outbox(), db.Inbox()}
	case "postgres":
		db, err := postgres.Open(ctx, postgres.Config{URL: testdb.URL(t)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(db.Close)
		if _, err := db.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		return stores{db.Journal(), db.Outbox(), db.Inbox()}
	}
	t.Fatalf("unknown backend %s", backend)
	return stores{}
}

// testPassword is every test user's; the hashes are bcrypt's cheapest.
const testPassword = "пароль-s3cret"

func testUser(t *testing.T, name, role string) User {
	t.Helper()
	h, err := bcrypt.GenerateFromPassword([]byte(testPassword), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	return User{Name: name, PasswordHash: string(h), Role: role}
}

var almaty = func() *time.Location {
	loc, err := time.LoadLocation("Asia/Almaty")
	if err != nil {
		panic(err)
	}
	return loc
}()

// logBuffer collects the server's log lines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// site is a server under test, reached through httptest.
type site struct {
	t   *testing.T
	srv *Server
	url string
	log *logBuffer
}

func newSite(t *testing.T, st stores, mutate func(*Config)) *site {
	t.Helper()
	logs := &logBuffer{}
	cfg := Config{Lang: "ru", Location: almaty, Journal: st.journal, Outbox: st.outbox, Inbox: st.inbox,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	if mutate != nil {
		mutate(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(hs.Close)
	return &site{t: t, srv: s, url: hs.URL, log: logs}
}

// browser is one person's cookie jar; it never follows redirects, so each answer
// is seen.
type browser struct {
	t    *testing.T
	site *site
	c    *http.Client
}

func (s *site) browser() *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: s.t, site: s, c: &http.Client{Jar: jar, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

type answer struct {
	status int
	header http.Header
	body   string
	doc    *html.Node
}

func (b *browser) do(req *http.Request) answer {
	b.t.Helper()
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		b.t.Fatal(err)
	}
	a := answer{status: resp.StatusCode, header: resp.Header, body: string(body)}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		doc, err := html.Parse(bytes.NewReader(body))
		if err != nil {
			b.t.Fatalf("%s %s: the page does not parse: %v", req.Method, req.URL, err)
		}
		a.doc = doc
	}
	return a
}

func (b *browser) get(path string) answer {
	b.t.Helper()
	req, err := http.NewRequest(http.MethodGet, b.site.url+path, nil)
	if err != nil {
		b.t.Fatal(err)
	}
	return b.do(req)
}

func (b *browser) post(path string, form url.Values) answer {
	b.t.Helper()
	req, err := http.NewRequest(http.MethodPost, b.site.url+path, strings.NewReader(form.Encode()))
	if err != nil {
		b.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return b.do(req)
}

// signIn signs in through the form, as a person does, and returns the answer to
// the form's POST.
func (b *browser) signIn(name, password string) answer {
	b.t.Helper()
	form := b.get("/ui/signin")
	if form.status != http.StatusOK {
		b.t.Fatalf("GET /ui/signin: %d", form.status)
	}
	csrf := formValue(b.t, form.doc, "signin", "csrf")
	return b.post("/ui/signin", url.Values{"name": {name}, "password": {password}, "csrf": {csrf}, "next": {"/ui/journal"}})
}

func (b *browser) mustSignIn(name string) {
	b.t.Helper()
	if a := b.signIn(name, testPassword); a.status != http.StatusSeeOther {
		b.t.Fatalf("sign-in of %s: %d\n%s", name, a.status, a.body)
	}
}

// csrfOf is the csrf field of the page's form with the id (the sign-out form is on
// every page of a signed-in person).
func formValue(t *testing.T, doc *html.Node, formID, field string) string {
	t.Helper()
	f := byID(doc, formID)
	if f == nil {
		t.Fatalf("the page has no form#%s", formID)
	}
	for _, in := range all(f, func(n *html.Node) bool { return n.Data == "input" && attr(n, "name") == field }) {
		return attr(in, "value")
	}
	t.Fatalf("form#%s has no field %s", formID, field)
	return ""
}

// HTML helpers.

func all(n *html.Node, pred func(*html.Node) bool) []*html.Node {
	var out []*html.Node
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode && pred(n) {
			out = append(out, n)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	if n != nil {
		walk(n)
	}
	return out
}

func byID(n *html.Node, id string) *html.Node {
	if got := all(n, func(n *html.Node) bool { return attr(n, "id") == id }); len(got) > 0 {
		return got[0]
	}
	return nil
}

func byClass(n *html.Node, tag, class string) []*html.Node {
	return all(n, func(n *html.Node) bool {
		return (tag == "" || n.Data == tag) && strings.Contains(" "+attr(n, "class")+" ", " "+class+" ")
	})
}

func attr(n *html.Node, name string) string {
	for _, a := range n.Attr {
		if a.Key == name {
			return a.Val
		}
	}
	return ""
}

func text(n *html.Node) string {
	var b strings.Builder
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.TextNode {
			b.WriteString(n.Data)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	// Runs of ASCII white space are one space, as a browser shows them; a no-break
	// space (between a number's digit groups) stays.
	return strings.Join(strings.FieldsFunc(b.String(), func(r rune) bool { return r == ' ' || r == '\n' || r == '\t' || r == '\r' }), " ")
}

// Journal fixtures.

// fixtureOrdered is when every fixture order was placed: an hour before the tests
// started, to the second, so it is in the list's default period (by the order's date)
// and two versions of one order differ only where a test changed them.
var fixtureOrdered = time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)

func orderPayload(source, id, name, phone, price string) json.RawMessage {
	created := fixtureOrdered
	return json.RawMessage(fmt.Sprintf(`{"source":%q,"external_id":%q,"number":%q,"created_at":%q,`+
		`"customer":{"name":%q,"phone":%q,"email":""},"warehouse":"WH1","currency":"KZT",`+
		`"lines":[{"sku":"SKU-1","name":"Чайник","quantity":2,"price":%s}],"comment":""}`, source, id, id, created, name, phone, price))
}

func createOp(source, id, name, phone, price string) journal.NewOperation {
	return journal.NewOperation{Key: order.Key(source, "order", id, "create"), Kind: order.KindCreate, Source: source,
		ExternalID: id, Payload: orderPayload(source, id, name, phone, price)}
}

func register(t *testing.T, s journal.Store, op journal.NewOperation, actor string) journal.Operation {
	t.Helper()
	ctx := context.Background()
	if actor != "" {
		ctx = journal.WithActor(ctx, actor)
	}
	r, err := s.Register(ctx, op)
	if err != nil {
		t.Fatal(err)
	}
	return r.Operation
}

// attempt claims key and finishes the attempt with f.
func attempt(t *testing.T, s journal.Store, key string, f journal.Finish) {
	t.Helper()
	ctx := context.Background()
	c, err := s.ClaimKey(ctx, key, "worker-1")
	if err != nil {
		t.Fatalf("claim %s: %v", key, err)
	}
	if err := c.Finish(ctx, f); err != nil {
		t.Fatalf("finish %s: %v", key, err)
	}
}

// world is the fixture most tests share:
//
//	done      site:order:A-1:create  — a retry (503), then done, found nothing, created
//	          ОС-000123; a warning (duplicate in 1C); an order.created event to crm,
//	          dead; a conflicting registration (another customer name and price)
//	failed    kaspi:order:512344101:create — 1C refused it (422)
//	pending   ozon:posting:0570-1:create  — registered by a webhook delivery
type world struct {
	done, failed, pending string
	deadEvent             int64
}

func seed(t *testing.T, st stores) world {
	t.Helper()
	ctx := context.Background()
	w := world{done: "site:order:A-1:create", failed: "kaspi:order:512344101:create", pending: "ozon:posting:0570-1:create"}

	register(t, st.journal, createOp("site", "A-1", "Иван Петров", "+7 701 234-56-78", "1500.10"), journal.ActorWebhook("site"))
	attempt(t, st.journal, w.done, journal.Finish{Status: journal.StatusPending, Error: "1C answered 503 Service Unavailable",
		Class: journal.ClassTransient, NextAttemptAt: time.Now(),
		Exchanges: json.RawMessage(`[{"method":"POST","path":"/orders","status":503,"error":"503 Service Unavailable"}]`)})
	res := &journal.Result{Ref: "7f1c2a3e-0000-4000-8000-000000000001", Number: "ОС-000123", Date: "2026-11-03T10:05:00"}
	attempt(t, st.journal, w.done, journal.Finish{Status: journal.StatusDone, Result: res, Ref: res.Ref,
		Exchanges: json.RawMessage(`[{"method":"GET","path":"/orders?external_id=site:A-1","status":200},{"method":"POST","path":"/orders","status":201}]`),
		Warnings: []journal.Warning{{Code: journal.WarningDuplicateIn1C, Message: "1C holds 2 orders for site:A-1",
			Refs: []string{res.Ref, "7f1c2a3e-0000-4000-8000-000000000002"}, Numbers: []string{"ОС-000123", "ОС-000124"}, At: time.Now()}},
		Messages: []outbox.Message{{Destination: "crm", Event: outbox.Event{Type: outbox.OrderCreated, AggregateType: "order",
			AggregateID: order.AggregateOfKey(w.done), Data: json.RawMessage(`{"ref":"7f1c2a3e-0000-4000-8000-000000000001"}`), OccurredAt: time.Now()}}}})
	// The same key with another payload: a conflict, nothing overwritten.
	if r, err := st.journal.Register(ctx, createOp("site", "A-1", "Пётр Иванов", "+7 701 234-56-78", "1600")); err != nil || r.Outcome != journal.Conflicted {
		t.Fatalf("conflicting registration: %v %v", r.Outcome, err)
	}
	// The crm's delivery fails for good.
	claim, err := st.outbox.Claim(ctx, outbox.ClaimRequest{Limit: 10, Lease: time.Minute})
	if err != nil || len(claim.Records) != 1 {
		t.Fatalf("outbox claim: %v %d", err, len(claim.Records))
	}
	w.deadEvent = claim.Records[0].ID
	if _, err := st.outbox.Complete(ctx, claim.Token, []outbox.Result{{ID: w.deadEvent, Dead: true, Error: "410 Gone: the CRM's hook was removed"}}); err != nil {
		t.Fatal(err)
	}

	register(t, st.journal, createOp("kaspi", "512344101", "Айгерим Нурланова", "87011112233", "15990"), journal.ActorPoller("kaspi"))
	attempt(t, st.journal, w.failed, journal.Finish{Status: journal.StatusFailed, Class: journal.ClassPermanent,
		Error:     "1C rejected the order (422): field lines[0].sku: no such item SKU-1",
		Exchanges: json.RawMessage(`[{"method":"POST","path":"/orders","status":422,"error":"no such item"}]`)})

	// A webhook delivery that registers the pending one.
	body := []byte(`{"posting_number":"0570-1"}`)
	pending := journal.NewOperation{Key: w.pending, Kind: order.KindCreate, Source: "ozon", ExternalID: "0570-1",
		Payload: json.RawMessage(`{"fetch":{"connector":"ozon","id":"0570-1"}}`)}
	_, err = st.inbox.Receive(journal.WithActor(ctx, journal.ActorWebhook("ozon")),
		inbox.Event{Source: "ozon", ID: "TYPE_NEW_POSTING:0570-1", Body: body, ContentType: "application/json", ReceivedAt: time.Now()},
		[]inbox.Registration{{Op: pending}}, inbox.Answer{Status: 200, ContentType: "application/json", Body: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// rowKeys are the data-key attributes of the list's rows.
func rowKeys(doc *html.Node) []string {
	var keys []string
	for _, tr := range byClass(doc, "tr", "op") {
		keys = append(keys, attr(tr, "data-key"))
	}
	return keys
}

func byTag(n *html.Node, tag string) *html.Node {
	if got := all(n, func(n *html.Node) bool { return n.Data == tag }); len(got) > 0 {
		return got[0]
	}
	return nil
}

// rowOf is the list's row of key.
func rowOf(t *testing.T, doc *html.Node, key string) *html.Node {
	t.Helper()
	for _, tr := range byClass(doc, "tr", "op") {
		if attr(tr, "data-key") == key {
			return tr
		}
	}
	t.Fatalf("the list has no row %s", key)
	return nil
}

// cell is the row's td of the class.
func cell(t *testing.T, row *html.Node, class string) *html.Node {
	t.Helper()
	cs := byClass(row, "td", class)
	if len(cs) == 0 {
		t.Fatalf("row %s has no td.%s", attr(row, "data-key"), class)
	}
	return cs[0]
}
