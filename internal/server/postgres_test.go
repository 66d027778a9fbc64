package server

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ordersync/ordersync/internal/inbox"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/order"
	"github.com/ordersync/ordersync/internal/stdwebhook"
	"github.com/ordersync/ordersync/internal/store/postgres"
	"github.com/ordersync/ordersync/internal/testdb"
)

// pgHarness is a started server on the real PostgreSQL inbox.
type pgHarness struct {
	t    *testing.T
	db   *postgres.DB
	srv  *Server
	base string
}

func newPGHarness(t *testing.T) *pgHarness { return newPGHarnessWith(t, nil) }

// newPGHarnessWith is newPGHarness with the server's inbox wrap(the store's), when
// wrap is set.
func newPGHarnessWith(t *testing.T, wrap func(inbox.Store) inbox.Store) *pgHarness {
	t.Helper()
	ctx := context.Background()
	db, err := postgres.Open(ctx, postgres.Config{URL: testdb.URL(t), MaxConns: 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	if _, err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	ib := db.Inbox()
	if wrap != nil {
		ib = wrap(ib)
	}
	srv, err := New(Config{
		Listen:  "127.0.0.1:0",
		Inbox:   ib,
		Sources: map[string]SourceConfig{"site": {Secrets: []stdwebhook.Secret{stdwebhook.MustParseSecret(siteSecret)}}},
		// The test's connections come from 127.0.0.1.
		Ozon:     &OzonConfig{AllowNetworks: append([]netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, DefaultOzonNetworks...)},
		Bitrix24: &Bitrix24Config{ApplicationToken: bxTokenText},
		Logger:   slog.New(slog.DiscardHandler),
		Now:      func() time.Time { return testNow },
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Stop(context.Background()) })
	return &pgHarness{t: t, db: db, srv: srv, base: "http://" + srv.Addr()}
}

// post sends a test request over its own connection.
func (h *pgHarness) post(r *http.Request) (int, string) {
	h.t.Helper()
	req, err := http.NewRequest(http.MethodPost, h.base+r.URL.Path, r.Body)
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header = r.Header
	resp, err := (&http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (h *pgHarness) count(table string) int {
	h.t.Helper()
	var n int
	if err := h.db.Pool().QueryRow(context.Background(), "SELECT count(*) FROM "+table).Scan(&n); err != nil {
		h.t.Fatal(err)
	}
	return n
}

// rows asserts the inbox and journal row counts.
func (h *pgHarness) rows(events, conflicts, ops int) {
	h.t.Helper()
	e, c, o := h.count("inbox_events"), h.count("inbox_conflicts"), h.count("operations")
	if e != events || c != conflicts || o != ops {
		h.t.Fatalf("rows: %d inbox_events, %d inbox_conflicts, %d operations; want %d, %d, %d", e, c, o, events, conflicts, ops)
	}
}

// A new event, an exact repeat, the same id with another body — counted in rows.
func TestPostgresGeneric(t *testing.T) {
	t.Parallel()
	h := newPGHarness(t)
	body := orderJSON("site", "PG-1")
	st, first := h.post(signedRequest("site", "msg_pg1", testNow, body, siteSecret))
	if st != http.StatusOK {
		t.Fatalf("new: %d %s", st, first)
	}
	h.rows(1, 0, 1)
	op, err := h.db.Journal().Get(context.Background(), "site:order:PG-1:create")
	if err != nil || op.Status != journal.StatusPending {
		t.Fatalf("operation %+v: %v", op, err)
	}

	st, again := h.post(signedRequest("site", "msg_pg1", testNow, body, siteSecret))
	if st != http.StatusOK || again != first {
		t.Fatalf("repeat: %d %s, want the saved %s", st, again, first)
	}
	h.rows(1, 0, 1)

	st, _ = h.post(signedRequest("site", "msg_pg1", testNow, orderJSON("site", "PG-2"), siteSecret))
	if st != http.StatusConflict {
		t.Fatalf("changed body: %d, want 409", st)
	}
	h.rows(1, 1, 1)
	d, err := h.db.Inbox().Show(context.Background(), "site", "msg_pg1")
	if err != nil || !bytes.Equal(d.Body, body) {
		t.Fatalf("stored event %+v: %v; want the first body", d.Record, err)
	}

	// Bad requests store nothing.
	h.post(signedRequest("site", "msg_pg_bad", testNow, body, otherSecret))
	h.post(signedRequest("site", "msg_pg_invalid", testNow, []byte(`{"source":"site"}`), siteSecret))
	h.rows(1, 1, 1)
}

func TestPostgresOzonAndBitrix24(t *testing.T) {
	t.Parallel()
	h := newPGHarness(t)

	if st, b := h.post(ozonRequest("", `{"message_type":"TYPE_PING","time":"2026-09-16T10:00:00Z"}`)); st != http.StatusOK {
		t.Fatalf("ping: %d %s", st, b)
	}
	h.rows(0, 0, 0)
	if st, b := h.post(ozonRequest("", ozonNewPosting)); st != http.StatusOK || b != `{"result":true}` {
		t.Fatalf("new posting: %d %s", st, b)
	}
	if st, b := h.post(ozonRequest("", ozonCancel)); st != http.StatusOK {
		t.Fatalf("cancel: %d %s", st, b)
	}
	h.rows(2, 0, 2)
	op, err := h.db.Journal().Get(context.Background(), "ozon:posting:05708065-0029-1:create")
	if f, ok := order.ParseFetch(op.Payload); err != nil || !ok || f.ID != "05708065-0029-1" {
		t.Fatalf("create %+v: %v", op, err)
	}
	if op, err := h.db.Journal().Get(context.Background(), "ozon:posting:05708065-0029-1:cancel"); err != nil || op.Kind != order.KindCancel {
		t.Fatalf("cancel %+v: %v", op, err)
	}

	if st, _ := h.post(bitrixRequest(bitrixForm("ONCRMDEALADD", "456", "1700000000", "wrong"))); st != http.StatusUnauthorized {
		t.Fatalf("wrong token: %d", st)
	}
	h.rows(2, 0, 2)
	if st, b := h.post(bitrixRequest(bitrixForm("ONCRMDEALADD", "456", "1700000000", bxTokenText))); st != http.StatusOK {
		t.Fatalf("deal: %d %s", st, b)
	}
	if st, b := h.post(bitrixRequest(bitrixForm("ONCRMDEALUPDATE", "456", "1700000060", bxTokenText))); st != http.StatusOK {
		t.Fatalf("deal update: %d %s", st, b)
	}
	h.rows(4, 0, 3)
	d, err := h.db.Inbox().Show(context.Background(), "bitrix24", "ONCRMDEALADD:456:1700000000")
	if err != nil || bytes.Contains(d.Body, []byte(bxTokenText)) {
		t.Fatalf("stored Bitrix24 event %q: %v; want it without the token", d.Body, err)
	}
}

// 100 simultaneous deliveries of one event, each on its own connection: one inbox
// row, one operation; every answer is the processed one, a duplicate of it, or a
// request to retry.
func TestPostgresSimultaneousDeliveries(t *testing.T) {
	t.Parallel()
	h := newPGHarness(t)
	body := orderJSON("site", "SIM-1")
	const n = 100
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		answers = map[string]int{}
	)
	start := make(chan struct{})
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			st, b := h.post(signedRequest("site", "msg_sim", testNow, body, siteSecret))
			mu.Lock()
			answers[fmt.Sprintf("%d %s", st, b)]++
			mu.Unlock()
		}()
	}
	close(start)
	wg.Wait()
	h.rows(1, 0, 1)
	t.Logf("answers: %v", answers)
	ok := `200 {"status":"processed","key":"site:order:SIM-1:create"}`
	for a, k := range answers {
		if a != ok && a[:3] != "409" {
			t.Errorf("%d answers %s", k, a)
		}
	}
	if answers[ok] == 0 {
		t.Fatalf("no delivery was answered processed: %v", answers)
	}
}

// A redelivery answered from the stored event alone (inbox.Looker, before the body is
// parsed) gets what Receive gave it before: the saved answer, counted a duplicate,
// nothing written. The same id with another body still goes the whole way: an
// invalid order is refused as invalid (400), a valid one is a conflict.
func TestPostgresRedeliveryAnswersAsReceive(t *testing.T) {
	t.Parallel()
	h := newPGHarness(t)
	body := orderJSON("site", "RD-1")
	st, first := h.post(signedRequest("site", "msg_rd1", testNow, body, siteSecret))
	if st != http.StatusOK {
		t.Fatalf("new: %d %s", st, first)
	}
	var xmin string
	if err := h.db.Pool().QueryRow(context.Background(), `SELECT xmin::text FROM inbox_events`).Scan(&xmin); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if st, again := h.post(signedRequest("site", "msg_rd1", testNow, body, siteSecret)); st != http.StatusOK || again != first {
			t.Fatalf("repeat: %d %s, want the saved %s", st, again, first)
		}
	}
	if n := h.srv.Stats()[StatKey{Source: "site", Outcome: outDuplicate}]; n != 3 {
		t.Fatalf("duplicates counted: %d, want 3 (stats %v)", n, h.srv.Stats())
	}
	var after string
	if err := h.db.Pool().QueryRow(context.Background(), `SELECT xmin::text FROM inbox_events`).Scan(&after); err != nil || after != xmin {
		t.Fatalf("stored event's version %s after the repeats, %s before (%v)", after, xmin, err)
	}
	h.rows(1, 0, 1)

	if st, _ := h.post(signedRequest("site", "msg_rd1", testNow, []byte(`{"source":"site"}`), siteSecret)); st != http.StatusBadRequest {
		t.Fatalf("same id, invalid order: %d, want 400", st)
	}
	h.rows(1, 0, 1)
	if st, _ := h.post(signedRequest("site", "msg_rd1", testNow, orderJSON("site", "RD-2"), siteSecret)); st != http.StatusConflict {
		t.Fatalf("same id, another valid order: %d, want 409", st)
	}
	h.rows(1, 1, 1)
}

// countedInbox is a store's inbox that counts its Receives; it looks deliveries up
// as the store does.
type countedInbox struct {
	inbox.Store
	receives atomic.Int64
}

func (c *countedInbox) Receive(ctx context.Context, ev inbox.Event, regs []inbox.Registration, answer inbox.Answer) (inbox.Receipt, error) {
	c.receives.Add(1)
	return c.Store.Receive(ctx, ev, regs, answer)
}

func (c *countedInbox) Redelivered(ctx context.Context, ev inbox.Event) (inbox.Receipt, bool, error) {
	return c.Store.(inbox.Looker).Redelivered(ctx, ev)
}

// Every receiver answers a redelivery of a stored event from the lookup, with the
// answer it gave the first time and no Receive: the site's, Ozon's push and a
// Bitrix24 portal's.
func TestPostgresRedeliveriesOfEveryReceiverAreLookedUp(t *testing.T) {
	t.Parallel()
	var counted *countedInbox
	h := newPGHarnessWith(t, func(s inbox.Store) inbox.Store {
		counted = &countedInbox{Store: s}
		return counted
	})
	for _, tc := range []struct {
		name string
		req  func() *http.Request
	}{
		{"site", func() *http.Request {
			return signedRequest("site", "msg_every", testNow, orderJSON("site", "EV-1"), siteSecret)
		}},
		{"ozon", func() *http.Request { return ozonRequest("", ozonNewPosting) }},
		{"bitrix24", func() *http.Request {
			return bitrixRequest(bitrixForm("ONCRMDEALADD", "987", "1700000000", bxTokenText))
		}},
	} {
		before := counted.receives.Load()
		st, first := h.post(tc.req())
		if st != http.StatusOK || counted.receives.Load() != before+1 {
			t.Fatalf("%s: first delivery %d %s, %d receives", tc.name, st, first, counted.receives.Load()-before)
		}
		for range 2 {
			if st, again := h.post(tc.req()); st != http.StatusOK || again != first {
				t.Fatalf("%s: redelivery %d %s, want the first answer %s", tc.name, st, again, first)
			}
		}
		if n := counted.receives.Load() - before; n != 1 {
			t.Fatalf("%s: %d receives for a delivery and two redeliveries, want 1", tc.name, n)
		}
	}
}
