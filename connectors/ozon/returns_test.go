package ozon_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/ordersync/ordersync/connectors"
	"github.com/ordersync/ordersync/connectors/ozon"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/order"
	"github.com/ordersync/ordersync/internal/sim/ozonsim"
	"github.com/ordersync/ordersync/internal/store/postgres"
)

func returnsPoller(c *ozon.Connector, db *postgres.DB, clock *time.Time, woke *int) *connectors.Poller {
	return connectors.NewPoller(c, connectors.PollerConfig{
		Lookback: 72 * time.Hour, Journal: db.Journal(), Cursors: db.Cursors(), Returns: true,
		Now:        func() time.Time { return *clock },
		Registered: func() { *woke++ },
	})
}

func returnOps(t *testing.T, ops map[string]journal.Operation) map[string]journal.Operation {
	t.Helper()
	out := map[string]journal.Operation{}
	for k, op := range ops {
		if op.Kind == order.KindReturn {
			out[k] = op
		}
	}
	return out
}

func TestReturnsMapEveryType(t *testing.T) {
	t.Parallel()
	s, c := newTest(t, ozonsim.Options{}, ozon.Config{ReturnsPageSize: 2})
	db := openDB(t)
	ctx := context.Background()
	at := now.Add(-2 * time.Hour)
	price := decimal.RequireFromString("1530.50")
	ids := map[string]int64{}
	for _, tc := range []struct{ typ, posting string }{
		{"FullReturn", "05708065-0029-1"}, {"PartialReturn", "05708066-0029-1"},
		{"Cancellation", "05708067-0029-1"}, {"ClientReturn", "05708068-0029-1"}, {"FullReturn", "05708069-0029-1"},
	} {
		ids[tc.typ+tc.posting] = s.AddReturn(ozonsim.Return{Type: tc.typ, PostingNumber: tc.posting, OfferID: "SKU-1",
			Name: "Чайник", Quantity: 3, Price: price, ReturnDate: at, Reason: "не подошёл"})
	}
	// FBO, and one outside the window: neither is listed.
	s.AddReturn(ozonsim.Return{Schema: "Fbo", PostingNumber: "1-1-1", OfferID: "SKU-1", Price: price, ReturnDate: at})
	s.AddReturn(ozonsim.Return{PostingNumber: "2-2-2", OfferID: "SKU-1", Price: price, ReturnDate: now.Add(-30 * 24 * time.Hour)})

	clock, woke := now, 0
	p := returnsPoller(c, db, &clock, &woke)
	st, err := p.PollReturnsOnce(ctx)
	if err != nil || st.ReturnsRegistered != 5 || st.ReturnsFailed != 0 {
		t.Fatalf("poll: %+v, %v: want 5 registered", st, err)
	}
	if woke != 1 {
		t.Errorf("the engine was woken %d times, want 1", woke)
	}
	if n := len(s.RequestsTo(ozonsim.PathReturns)); n != 3 {
		t.Errorf("%d pages asked for, want 3 (5 returns, 2 a page)", n)
	}
	ops := returnOps(t, operations(t, db))
	if len(ops) != 5 {
		t.Fatalf("%d return operations, want 5", len(ops))
	}
	want := map[string]string{"FullReturn": order.ReturnFull, "PartialReturn": order.ReturnPartial,
		"Cancellation": order.ReturnCancellation, "ClientReturn": order.ReturnPartial}
	for k, id := range ids {
		typ, posting := k[:strings.IndexByte(k, '0')], k[strings.IndexByte(k, '0'):]
		key := order.ReturnKey("ozon", jsonID(id))
		op, ok := ops[key]
		if !ok {
			t.Fatalf("no operation %s", key)
		}
		r, err := order.ParseReturn(op.Payload)
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		if r.Type != want[typ] || r.OrderID != posting || r.OrderKey != "ozon:posting:"+posting+":create" {
			t.Errorf("%s: type %s, order %s %s; want %s of %s", key, r.Type, r.OrderID, r.OrderKey, want[typ], posting)
		}
		if len(r.Lines) != 1 || r.Lines[0].SKU != "SKU-1" || !r.Lines[0].Quantity.Equal(decimal.NewFromInt(3)) || !r.Lines[0].Price.Equal(price) {
			t.Errorf("%s: lines %+v", key, r.Lines)
		}
		if r.Currency != "RUB" || !r.CreatedAt.Equal(at) || r.Reason != "не подошёл" {
			t.Errorf("%s: %+v", key, r)
		}
		if op.ExternalID != "return:"+jsonID(id) || op.Status != journal.StatusPending {
			t.Errorf("%s: external id %q, status %s", key, op.ExternalID, op.Status)
		}
	}

	// The next poll overlaps: the same returns are duplicates, nothing new.
	clock = clock.Add(time.Hour)
	st, err = p.PollReturnsOnce(ctx)
	if err != nil || st.ReturnsRegistered != 0 || st.ReturnsDuplicates != 5 || st.ReturnsConflicts != 0 {
		t.Fatalf("second poll: %+v, %v: want 5 duplicates", st, err)
	}
	if n := len(returnOps(t, operations(t, db))); n != 5 || woke != 1 {
		t.Errorf("%d return operations, woken %d times; want 5 and 1", n, woke)
	}
	// The cursor is the returns' own, and it resumes: a restart lists from it less
	// the lookback, not from the orders' cursor.
	cur, err := db.Cursors().Cursor(ctx, "ozon.returns")
	if err != nil || !cur.Position.Equal(clock) {
		t.Fatalf("returns cursor %+v, %v: want position %s", cur, err, clock)
	}
	if o, _ := db.Cursors().Cursor(ctx, "ozon"); !o.Position.IsZero() {
		t.Errorf("the orders' cursor moved: %+v", o)
	}
	var body struct {
		Filter struct {
			Range struct {
				From time.Time `json:"time_from"`
			} `json:"logistic_return_date"`
		} `json:"filter"`
	}
	reqs := s.RequestsTo(ozonsim.PathReturns)
	if err := json.Unmarshal(reqs[len(reqs)-1].Body, &body); err != nil || !body.Filter.Range.From.Equal(now.Add(-72*time.Hour)) {
		t.Errorf("second poll listed from %s (%v), want the first poll's end less the lookback %s", body.Filter.Range.From, err, now.Add(-72*time.Hour))
	}
}

func jsonID(id int64) string { return decimal.NewFromInt(id).String() }

func TestBadReturnFailsOnlyItself(t *testing.T) {
	t.Parallel()
	s, c := newTest(t, ozonsim.Options{}, ozon.Config{})
	db := openDB(t)
	ctx := context.Background()
	at := now.Add(-time.Hour)
	good := s.AddReturn(ozonsim.Return{PostingNumber: "05708065-0029-1", OfferID: "SKU-1", Quantity: 2, Price: decimal.NewFromInt(100), ReturnDate: at})
	noOffer := s.AddReturn(ozonsim.Return{PostingNumber: "05708066-0029-1", Price: decimal.NewFromInt(100), ReturnDate: at})
	badType := s.AddReturn(ozonsim.Return{Type: "Unknown", PostingNumber: "05708067-0029-1", OfferID: "SKU-1", Price: decimal.NewFromInt(100), ReturnDate: at})
	noPosting := s.AddReturn(ozonsim.Return{OfferID: "SKU-1", Price: decimal.NewFromInt(100), ReturnDate: at,
		Patch: map[string]json.RawMessage{"posting_number": nil}})
	s.AddReturn(ozonsim.Return{PostingNumber: "05708068-0029-1", OfferID: "SKU-1", ReturnDate: at,
		Patch: map[string]json.RawMessage{"id": json.RawMessage(`"x"`)}}) // no readable id: counted only

	clock, woke := now, 0
	st, err := returnsPoller(c, db, &clock, &woke).PollReturnsOnce(ctx)
	if err != nil || st.ReturnsRegistered != 1 || st.ReturnsFailed != 3 || st.ReturnsUnreadable != 1 {
		t.Fatalf("poll: %+v, %v: want 1 registered, 3 failed, 1 unreadable", st, err)
	}
	ops := returnOps(t, operations(t, db))
	if op := ops[order.ReturnKey("ozon", jsonID(good))]; op.Status != journal.StatusPending {
		t.Errorf("the good return: %+v", op)
	}
	for id, field := range map[int64]string{noOffer: "product.offer_id", badType: "type", noPosting: "posting_number"} {
		op := ops[order.ReturnKey("ozon", jsonID(id))]
		if op.Status != journal.StatusFailed || !strings.Contains(op.LastError, field) {
			t.Errorf("return %d: status %s, error %q: want failed naming %s", id, op.Status, op.LastError, field)
		}
	}
	if len(ops) != 4 {
		t.Errorf("%d return operations, want 4", len(ops))
	}
}

func TestReturnsLimitAbove500Refused(t *testing.T) {
	t.Parallel()
	s, _ := newTest(t, ozonsim.Options{}, ozon.Config{})
	for _, limit := range []string{"501", "0"} {
		req := httptest.NewRequest(http.MethodPost, ozonsim.PathReturns, strings.NewReader(`{"filter":{},"limit":`+limit+`,"last_id":0}`))
		req.Header.Set("Client-Id", clientID)
		req.Header.Set("Api-Key", apiKey)
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		if rec.Code != http.StatusBadRequest {
			t.Errorf("limit %s: HTTP %d, want 400", limit, rec.Code)
		}
	}
	if _, err := ozon.New(ozon.Config{ClientID: "1", APIKey: "k", ReturnsPageSize: 501}); err == nil {
		t.Error("a returns page of 501 was accepted")
	}
}
