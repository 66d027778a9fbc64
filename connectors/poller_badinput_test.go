package connectors

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/order"
)

// memJournal is a Registrar in memory that refuses what PostgreSQL refuses (NUL,
// invalid UTF-8 in text; \u0000 in jsonb), and panics on the key it is told to.
type memJournal struct {
	mu      sync.Mutex
	ops     map[string]journal.NewOperation
	failed  map[string]string
	panicOn string
}

func newMemJournal() *memJournal {
	return &memJournal{ops: map[string]journal.NewOperation{}, failed: map[string]string{}}
}

func pgRefuses(op journal.NewOperation, reason string) error {
	for _, s := range []string{op.Key, op.Source, op.ExternalID, reason} {
		if order.SafeText(s) != s || strings.ContainsRune(s, 0) {
			return errors.New("SQLSTATE 22021: invalid byte sequence for encoding UTF8")
		}
	}
	var v any
	if json.Unmarshal(op.Payload, &v) != nil || hasNUL(v) || order.CheckJSON(op.Payload, order.JSONOptions{}) != nil {
		return errors.New("SQLSTATE 22P05: unsupported Unicode escape sequence")
	}
	return nil
}

// hasNUL reports whether a decoded JSON value holds a NUL in a string or key.
func hasNUL(v any) bool {
	switch v := v.(type) {
	case string:
		return strings.ContainsRune(v, 0)
	case []any:
		for _, e := range v {
			if hasNUL(e) {
				return true
			}
		}
	case map[string]any:
		for k, e := range v {
			if strings.ContainsRune(k, 0) || hasNUL(e) {
				return true
			}
		}
	}
	return false
}

func (j *memJournal) Register(ctx context.Context, op journal.NewOperation) (journal.Registration, error) {
	if j.panicOn != "" && op.Key == j.panicOn {
		panic("register " + op.Key)
	}
	if err := pgRefuses(op, ""); err != nil {
		return journal.Registration{}, err
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if old, ok := j.ops[op.Key]; ok {
		if bytes.Equal(old.Payload, op.Payload) {
			return journal.Registration{Outcome: journal.Duplicate}, nil
		}
		return journal.Registration{Outcome: journal.Conflicted}, nil
	}
	j.ops[op.Key] = op
	return journal.Registration{Outcome: journal.Registered}, nil
}

func (j *memJournal) RegisterFailed(ctx context.Context, op journal.NewOperation, reason string) (journal.Registration, error) {
	if err := pgRefuses(op, reason); err != nil {
		return journal.Registration{}, err
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if _, ok := j.ops[op.Key]; ok {
		return journal.Registration{Outcome: journal.Duplicate}, nil
	}
	j.ops[op.Key] = op
	j.failed[op.Key] = reason
	return journal.Registration{Outcome: journal.Registered}, nil
}

func (j *memJournal) Revise(ctx context.Context, op journal.NewOperation) (journal.Operation, error) {
	return journal.Operation{}, journal.ErrNotRevisable
}

type memCursors struct {
	mu sync.Mutex
	c  map[string]Cursor
}

func (m *memCursors) Cursor(ctx context.Context, name string) (Cursor, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.c[name], nil
}

func (m *memCursors) SaveCursor(ctx context.Context, c Cursor) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.c == nil {
		m.c = map[string]Cursor{}
	}
	m.c[c.Connector] = c
	return nil
}

func (m *memCursors) Cursors(ctx context.Context) ([]Cursor, error) { return nil, nil }

// fakeMarket lists one page; listPanics makes List panic outside any order.
type fakeMarket struct {
	page       []Item
	listPanics bool
	getPanics  bool
}

func (f *fakeMarket) Name() string { return "kaspi" }

func (f *fakeMarket) List(ctx context.Context, from, to time.Time, fn func([]Item) error) error {
	if f.listPanics {
		var m map[string]int
		m["x"]++ // a nil map: the kind of bug a connector could have
	}
	return fn(f.page)
}

func (f *fakeMarket) Get(ctx context.Context, id string) (Item, error) {
	if f.getPanics {
		panic("get " + id)
	}
	return Item{}, ErrNotFound
}

func goodOrder(id string) *order.Order {
	total := decimal.NewFromInt(2000)
	return &order.Order{ExternalID: id, CreatedAt: time.Date(2026, 9, 16, 10, 0, 0, 0, time.UTC), Currency: "KZT",
		Lines: []order.Line{{SKU: "SKU-1", Quantity: decimal.NewFromInt(2), Price: decimal.NewFromInt(1000)}}, Total: &total}
}

// A connector that let bad orders through (no validation of its own): the poller
// still refuses them, naming the field, records them failed in a form PostgreSQL
// stores, counts an id no key can hold as unreadable, recovers a panic in one
// order, and moves the cursor.
func TestPollerRefusesWhatAConnectorLetThrough(t *testing.T) {
	t.Parallel()
	year10000 := goodOrder("2")
	year10000.CreatedAt = time.UnixMilli(253402300800000)
	nul := goodOrder("3")
	nul.Customer.Name = "Ив\x00ан"
	badUTF8 := goodOrder("4")
	badUTF8.Lines[0].Name = "Чай\xffник"
	page := []Item{
		{ID: "1", Order: goodOrder("1"), Raw: json.RawMessage(`{"code":"1"}`)},
		{ID: "2", Order: year10000, Raw: json.RawMessage(`{"code":"2","creationDate":253402300800000}`)},
		{ID: "3", Order: nul, Raw: json.RawMessage(`{"code":"3","name":"Ив\u0000ан"}`)},
		{ID: "4", Order: badUTF8, Raw: json.RawMessage("{\"code\":\"4\",\"name\":\"\xff\"}")},
		{ID: "5\xff", Order: goodOrder("5\xff"), Raw: json.RawMessage(`{}`)},
		{ID: "5\xfe", Order: goodOrder("5\xfe"), Raw: json.RawMessage(`{}`)},
		{ID: "6", Err: errors.New("bad \x00 reason \xff"), Raw: json.RawMessage("not json \x00")},
		{ID: "7", Order: goodOrder("7"), Raw: json.RawMessage(`{"code":"7"}`)},
		{ID: "8", Order: goodOrder("8"), Raw: json.RawMessage(`{"code":"8"}`)},
		{ID: "9", Order: goodOrder("9"), Cancelled: true, CancelReason: "отменён \x00\xff"},
	}
	j := newMemJournal()
	j.panicOn = "kaspi:order:7:create"
	cur := &memCursors{}
	now := time.Date(2026, 9, 16, 12, 0, 0, 0, time.UTC)
	p := NewPoller(&fakeMarket{page: page}, PollerConfig{Journal: j, Cursors: cur, Now: func() time.Time { return now }})
	st, err := p.PollOnce(context.Background())
	if err != nil {
		t.Fatalf("PollOnce: %v", err)
	}
	if st.Registered != 3 || st.Failed != 4 || st.Unreadable != 2 || st.Panics != 1 || st.Cancels != 1 || p.Panics() != 1 {
		t.Fatalf("stats %+v (panics %d); want 3 registered (1, 8, 9), 4 failed, 2 unreadable, 1 panic, 1 cancel", st, p.Panics())
	}
	for key, field := range map[string]string{
		"kaspi:order:2:create": "created_at", "kaspi:order:3:create": "customer.name",
		"kaspi:order:4:create": "lines[0].name", "kaspi:order:6:create": "bad", "kaspi:order:7:create": "panicked",
	} {
		if !strings.Contains(j.failed[key], field) {
			t.Errorf("%s: failed with %q, want %s named", key, j.failed[key], field)
		}
	}
	if c, _ := cur.Cursor(context.Background(), "kaspi"); !c.Position.Equal(now) || c.LastError != "" || c.Unreadable != 2 {
		t.Fatalf("cursor %+v, want moved to %s", c, now)
	}
}

// A panic in a listing outside any order fails that poll (the cursor stays, as for
// an unreadable page), is counted, and the poller goes on.
func TestPollerRecoversAPanicInTheListing(t *testing.T) {
	t.Parallel()
	m := &fakeMarket{listPanics: true}
	cur := &memCursors{}
	p := NewPoller(m, PollerConfig{Journal: newMemJournal(), Cursors: cur})
	st, err := p.PollOnce(context.Background())
	if err == nil || !strings.Contains(err.Error(), "panicked") || st.Panics != 1 || p.Panics() != 1 {
		t.Fatalf("PollOnce = %+v, %v; want an error and one panic counted", st, err)
	}
	if c, _ := cur.Cursor(context.Background(), "kaspi"); !c.Position.IsZero() || !strings.Contains(c.LastError, "panicked") {
		t.Fatalf("cursor %+v, want it unmoved with the error", c)
	}
	m.listPanics = false
	if _, err := p.PollOnce(context.Background()); err != nil {
		t.Fatalf("the next poll: %v", err)
	}
}

// A panic while fetching an order for the engine fails that order, never the process.
func TestFetcherRecoversAPanic(t *testing.T) {
	t.Parallel()
	_, err := Fetcher{Marketplace: &fakeMarket{getPanics: true}}.Fetch(context.Background(), "1")
	var ve *order.ValidationError
	if !errors.As(err, &ve) || !strings.Contains(err.Error(), "panicked") {
		t.Fatalf("Fetch = %v, want a *order.ValidationError saying it panicked", err)
	}
}
