package ozon_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ordersync/ordersync/connectors/ozon"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/order"
	"github.com/ordersync/ordersync/internal/sim/ozonsim"
)

// badPostings are the bad inputs ordersync must refuse as Ozon could send them, each with
// the field its refusal must name.
var badPostings = []struct {
	name  string
	patch map[string]json.RawMessage
	field string
}{
	{"year 10000", map[string]json.RawMessage{"in_process_at": json.RawMessage(`"10000-01-01T00:00:00Z"`)}, "in_process_at"},
	{"year 9999 is past 1C's dates", map[string]json.RawMessage{"in_process_at": json.RawMessage(`"9999-12-31T23:59:59Z"`)}, "in_process_at"},
	{"one-digit hour", map[string]json.RawMessage{"in_process_at": json.RawMessage(`"2026-09-16T1:00:00Z"`)}, "in_process_at"},
	{"NUL in the buyer's name", map[string]json.RawMessage{"customer": json.RawMessage(`{"name":"Ив\u0000ан","phone":"+79990001122"}`)}, "customer.name"},
	{"invalid UTF-8 in the buyer's name", map[string]json.RawMessage{"customer": json.RawMessage("{\"name\":\"Ив\xffан\"}")}, "customer.name"},
	{"lone surrogate", map[string]json.RawMessage{"customer": json.RawMessage(`{"name":"\udc00"}`)}, "customer.name"},
	{"NUL in a product's name", map[string]json.RawMessage{"products": json.RawMessage(`[{"offer_id":"A","name":"x\u0000","quantity":1,"price":"10","currency_code":"RUB"}]`)}, "products[0].name"},
	{"NUL in the SKU", map[string]json.RawMessage{"products": json.RawMessage(`[{"offer_id":"A\u0000","quantity":1,"price":"10","currency_code":"RUB"}]`)}, "products[0].offer_id"},
	{"case-variant key", map[string]json.RawMessage{"Status": json.RawMessage(`"cancelled"`)}, "Status"},
	{"case-variant nested key", map[string]json.RawMessage{"products": json.RawMessage(`[{"offer_id":"A","Offer_ID":"B","quantity":1,"price":"10","currency_code":"RUB"}]`)}, "products[0].Offer_ID"},
	{"price of 50 digits", map[string]json.RawMessage{"products": json.RawMessage(`[{"offer_id":"A","quantity":1,"price":"1` + strings.Repeat("0", 49) + `","currency_code":"RUB"}]`)}, "products[0].price"},
	{"NUL in the order number", map[string]json.RawMessage{"order_number": json.RawMessage(`"1\u00002"`)}, "order_number"},
}

func TestBadPostingsAreRefusedNamingTheField(t *testing.T) {
	t.Parallel()
	s, c := newTest(t, ozonsim.Options{}, ozon.Config{PageSize: 100})
	at := now.Add(-time.Hour)
	s.AddPosting(posting(1, at))
	numberOf := map[string]string{}
	for i, b := range badPostings {
		p := posting(10+i, at)
		p.Patch = b.patch
		s.AddPosting(p)
		numberOf[b.name] = p.PostingNumber
	}
	got := byID(mustCollect(t, c, now.Add(-72*time.Hour), now))
	if it := got[posting(1, at).PostingNumber]; it.Err != nil || it.Order == nil {
		t.Fatalf("the good posting: %+v", it)
	}
	for _, b := range badPostings {
		it := got[numberOf[b.name]]
		var ve *order.ValidationError
		if it.Err == nil || it.Order != nil || !errors.As(it.Err, &ve) || ve.Problems[0].Field != b.field {
			t.Errorf("%s: %v, want refused naming %s", b.name, it.Err, b.field)
		}
	}
}

// Two posting numbers that differ only in bytes that are not UTF-8 would both be
// read as "…\uFFFD": neither may become a key.
func TestBadPostingNumbersDoNotCollapse(t *testing.T) {
	t.Parallel()
	s, c := newTest(t, ozonsim.Options{}, ozon.Config{PageSize: 100})
	at := now.Add(-time.Hour)
	for i, pn := range []string{"\"0570-\xff\"", "\"0570-\xfe\"", `"0570-\u0000"`} {
		p := posting(20+i, at)
		p.Patch = map[string]json.RawMessage{"posting_number": json.RawMessage(pn)}
		s.AddPosting(p)
	}
	for _, it := range mustCollect(t, c, now.Add(-72*time.Hour), now) {
		if it.ID != "" {
			t.Errorf("a bad posting number became id %q", it.ID)
		}
	}
}

// The poller records each bad posting failed, naming the field, registers the good
// ones around them, and moves the cursor.
func TestPollerBadPostingBetweenGoodOnes(t *testing.T) {
	t.Parallel()
	s, c := newTest(t, ozonsim.Options{}, ozon.Config{PageSize: 100})
	db := openDB(t)
	s.AddPosting(posting(1, now.Add(-3*time.Hour)))
	numbers := map[string]string{}
	for i, b := range badPostings {
		p := posting(10+i, now.Add(-2*time.Hour))
		p.Patch = b.patch
		s.AddPosting(p)
		numbers[p.PostingNumber] = b.field
	}
	s.AddPosting(posting(2, now.Add(-time.Hour)))
	clock := now
	st, err := newPoller(c, db, &clock, nil).PollOnce(context.Background())
	if err != nil || st.Registered != 2 || st.Failed != len(badPostings) {
		t.Fatalf("poll: %+v, %v; want 2 registered, %d failed", st, err, len(badPostings))
	}
	ops := operations(t, db)
	for pn, field := range numbers {
		op := ops["ozon:posting:"+pn+":create"]
		if op.Status != journal.StatusFailed || !strings.Contains(op.LastError, field) {
			t.Errorf("%s: %s %q, want failed naming %s", pn, op.Status, op.LastError, field)
		}
	}
	cur, _ := db.Cursors().Cursor(context.Background(), "ozon")
	if !cur.Position.Equal(now) || cur.LastError != "" {
		t.Fatalf("cursor %+v, want moved to %s", cur, now)
	}
}
