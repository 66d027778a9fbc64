package storetest

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/ordersync/ordersync/internal/inbox"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/order"
)

// runList runs the topic of the accountant's list: the broad search (exactly
// journal.SearchMatches), the period by the order's own date (journal.Derive), the
// period's totals by state and currency, and what reconciliations saw of 1C.
func runList(t *testing.T, h Harness) {
	t.Helper()
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, s Stores, clock *Clock)
	}{
		{"SearchIsSearchMatches", testSearchIsSearchMatches},
		{"OrderDate", testOrderDate},
		{"Totals", testTotals},
		{"OneCSeen", testOneCSeen},
		{"Keys", testKeys},
		{"ThroughTheInbox", testListThroughTheInbox},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			clock := NewClock()
			need := []string{"Journal"}
			if tc.name == "ThroughTheInbox" {
				need = append(need, "Inbox")
			}
			tc.fn(t, h.open(t, Options{Clock: clock}, need...), clock)
		})
	}
}

// listOrder is a create whose payload is an order with a date, a customer and a total.
func listOrder(source, id, number, name, phone, createdAt string, lines ...[2]string) journal.NewOperation {
	ls := []any{}
	for _, l := range lines {
		ls = append(ls, map[string]any{"sku": "SKU-1", "quantity": json.Number(l[0]), "price": json.Number(l[1])})
	}
	p := map[string]any{"source": source, "external_id": id, "number": number, "currency": "KZT", "lines": ls,
		"customer": map[string]any{"name": name, "phone": phone}}
	if createdAt != "" {
		p["created_at"] = createdAt
	}
	b, _ := json.Marshal(p)
	return journal.NewOperation{Key: order.Key(source, "order", id, "create"), Kind: order.KindCreate, Source: source,
		ExternalID: id, Payload: b}
}

func registerAll(t *testing.T, j journal.Store, clock *Clock, ops []journal.NewOperation) {
	t.Helper()
	for _, op := range ops {
		clock.Advance(time.Second)
		if r, err := j.Register(t.Context(), op); err != nil || r.Outcome != journal.Registered {
			t.Fatalf("register %s: %v, %v", op.Key, r.Outcome, err)
		}
	}
}

func testSearchIsSearchMatches(t *testing.T, s Stores, clock *Clock) {
	j := s.Journal
	ops := []journal.NewOperation{
		listOrder("kaspi", "512344101", "512344101", "Иван Петров", "+7 701 234-56-78", "2026-09-16T10:00:00+05:00", [2]string{"2", "1500.10"}),
		listOrder("kaspi", "512344102", "512344102", "Ivan Sidorov", "8 (701) 555 44 33", "", [2]string{"1", "3000"}),
		listOrder("site", "A-000044", "A-000044", "ЕЛЕНА", "", "", [2]string{"3", "999.99"}),
		listOrder("ozon", "05708065-0029-1", "05708065-0029-1", "Ольга", "", "", [2]string{"1", "10"}),
		{Key: "ozon:posting:05708065-0030-1:create", Kind: order.KindCreate, Source: "ozon", ExternalID: "05708065-0030-1",
			Payload: json.RawMessage(`{"fetch":{"id":"05708065-0030-1","marketplace":"ozon"}}`)},
		{Key: "site:order:T-1:create", Kind: order.KindCreate, Source: "site", ExternalID: "T-1",
			Payload: json.RawMessage(`{"number":"T-1","total":"1 500","lines":[{"quantity":"x"}]}`)}, // amounts that do not read
		{Key: "ozon:return:R-77:register", Kind: order.KindReturn, Source: "ozon", ExternalID: "return:R-77",
			Payload: json.RawMessage(`{"source":"ozon","id":"R-77","type":"partial","order_id":"05708065-0029-1",` +
				`"order_key":"ozon:order:05708065-0029-1:create","created_at":"2026-09-20T10:00:00Z","currency":"RUB",` +
				`"lines":[{"sku":"S-1","name":"","quantity":1,"price":10}],"reason":""}`)},
		{Key: "stock:WH1:2026-09-16T10:00", Kind: "stock.snapshot", Source: "stock", ExternalID: "",
			Payload: json.RawMessage(`{"warehouse":"WH1"}`)},
		{Key: "odd:order:x:create", Kind: order.KindCreate, Source: "", ExternalID: "x", Payload: json.RawMessage(`[1,2,3]`)},
	}
	registerAll(t, j, clock, ops)
	clock.Advance(time.Second)
	setState(t, j, "kaspi:order:512344101:create", journal.Finish{Status: journal.StatusDone,
		Result: &journal.Result{Ref: "ref-1", Number: "ОС-000123"}})
	clock.Advance(time.Second)
	// The fetched order replaces a fetch payload: its name is searched from now on.
	setState(t, j, "ozon:posting:05708065-0030-1:create", journal.Finish{Status: journal.StatusDone,
		Result:  &journal.Result{Ref: "ref-2", Number: "ОС-000124"},
		Payload: listOrder("ozon", "05708065-0030-1", "05708065-0030-1", "Пётр Ильич", "", "", [2]string{"1", "77.70"}).Payload})

	all := listAll(t, j, journal.Filter{})
	if len(all) != len(ops) {
		t.Fatalf("list: %d operations, want %d", len(all), len(ops))
	}
	terms := []string{"", "  ", "51234410", "5123441", "000044", "a-0000", "A-0000", "иван", "ИВАН", "петров", "ivan",
		"елена", "Елена", "05708065-0029", "05708065-0030", "пётр", "ос-000123", "ОС-00012", "3000", "3000.00", "3 000,00",
		"3001.1", "3000,20", "999.99", "2999.97", "701 234", "+7 701 555", "7015554433", "5554433", "77.7", "77,70",
		"WH1", "stock:", "x", "[1", "1 500", "%", "_", `\`, "' OR 1=1 --", "kaspi:order:%", "kaspi:512344101", "ozon:05708065", "ref-1", "REF-1"}
	for _, q := range terms {
		var want []string
		for _, op := range all {
			if journal.SearchMatches(op, q) {
				want = append(want, op.Key)
			}
		}
		if got := opKeys(listAll(t, j, journal.Filter{Search: q})); !slices.Equal(got, want) {
			t.Errorf("search %q: got %q, want %q (journal.SearchMatches)", q, got, want)
		}
		if got := listPaged(t, j, journal.Filter{Search: q}, 2); !slices.Equal(got, want) {
			t.Errorf("search %q paged: got %q, want %q", q, got, want)
		}
	}
	// The cases the search is for find what they name.
	for q, want := range map[string][]string{
		"51234410":      {"kaspi:order:512344101:create", "kaspi:order:512344102:create"},
		"000044":        {"site:order:A-000044:create"},
		"петров":        {"kaspi:order:512344101:create"},
		"3000,20":       {"kaspi:order:512344101:create"},
		"05708065-0029": {"ozon:order:05708065-0029-1:create", "ozon:return:R-77:register"}, // a return by its order's id
		"r-77":          {"ozon:return:R-77:register"},
		"пётр":          {"ozon:posting:05708065-0030-1:create"},
		"ос-000123":     {"kaspi:order:512344101:create"},
		"5554433":       {"kaspi:order:512344102:create"},
	} {
		got := opKeys(listAll(t, j, journal.Filter{Search: q}))
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("search %q: got %q, want %q", q, got, want)
		}
	}
	// Query keeps its exact meaning: a part of a number names nothing.
	if got := listAll(t, j, journal.Filter{Query: "51234410"}); len(got) != 0 {
		t.Errorf("Query 51234410 lists %q, want nothing (Query resolves one operation)", opKeys(got))
	}
	// Combined with the other filters.
	if got := opKeys(listAll(t, j, journal.Filter{Search: "51234410", Status: journal.StatusDone})); !slices.Equal(got, []string{"kaspi:order:512344101:create"}) {
		t.Errorf("search 51234410 done: %q", got)
	}
}

func testOrderDate(t *testing.T, s Stores, clock *Clock) {
	j := s.Journal
	ops := []journal.NewOperation{
		listOrder("kaspi", "1", "1", "", "", "2026-09-30T23:58:00+06:00", [2]string{"1", "1"}), // 17:58 UTC
		listOrder("kaspi", "2", "2", "", "", "2026-10-01T00:02:00.1234567+06:00", [2]string{"1", "1"}),
		listOrder("kaspi", "3", "3", "", "", "", [2]string{"1", "1"}),                     // no date: registration time
		listOrder("kaspi", "4", "4", "", "", "yesterday", [2]string{"1", "1"}),            // no date either
		listOrder("kaspi", "5", "5", "", "", "2026-02-30T10:00:00Z", [2]string{"1", "1"}), // no such day
	}
	registerAll(t, j, clock, ops)
	byKey := map[string]journal.Operation{}
	for _, op := range listAll(t, j, journal.Filter{}) {
		byKey[op.Key] = op
	}
	want := map[string]string{"kaspi:order:1:create": "2026-09-30T17:58:00Z", "kaspi:order:2:create": "2026-09-30T18:02:00.123456Z"}
	for _, op := range ops {
		got := byKey[op.Key]
		w, ok := want[op.Key]
		switch {
		case !ok && got.OrderCreatedAt != nil:
			t.Errorf("%s: order date %s, want none", op.Key, got.OrderCreatedAt)
		case ok && (got.OrderCreatedAt == nil || got.OrderCreatedAt.Format(time.RFC3339Nano) != w):
			t.Errorf("%s: order date %v, want %s", op.Key, got.OrderCreatedAt, w)
		}
		if d := journal.Derive(op.Key, op.Source, op.ExternalID, op.Payload, nil); (d.OrderCreatedAt == nil) != (got.OrderCreatedAt == nil) ||
			d.OrderCreatedAt != nil && !d.OrderCreatedAt.Equal(*got.OrderCreatedAt) {
			t.Errorf("%s: the store's order date %v, journal.Derive's %v", op.Key, got.OrderCreatedAt, d.OrderCreatedAt)
		}
		if got.OrderCreatedAt != nil {
			wantUTC(t, op.Key+" order date", *got.OrderCreatedAt)
		}
	}
	almaty := time.FixedZone("+06", 6*3600)
	sept := journal.Filter{OrderedFrom: time.Date(2026, 9, 1, 0, 0, 0, 0, almaty), OrderedBefore: time.Date(2026, 10, 1, 0, 0, 0, 0, almaty)}
	if got := opKeys(listAll(t, j, sept)); !slices.Equal(got, []string{"kaspi:order:1:create"}) {
		t.Errorf("ordered in September (+06): %q, want the order of 23:58", got)
	}
	// The order's date bounds exactly, to the microsecond.
	at := time.Date(2026, 9, 30, 18, 2, 0, 123456000, time.UTC)
	if got := opKeys(listAll(t, j, journal.Filter{OrderedFrom: at, OrderedBefore: at.Add(time.Microsecond)})); !slices.Equal(got, []string{"kaspi:order:2:create"}) {
		t.Errorf("ordered in its microsecond: %q", got)
	}
	if got := listAll(t, j, journal.Filter{OrderedFrom: at.Add(time.Nanosecond)}); slices.Contains(opKeys(got), "kaspi:order:2:create") {
		t.Error("a bound a nanosecond after the order's date admits it")
	}
	// An operation whose payload names no date is in the period of its registration.
	now := clock.Now()
	if got := opKeys(listAll(t, j, journal.Filter{OrderedFrom: now.Add(-time.Hour), OrderedBefore: now.Add(time.Hour)})); !slices.Equal(got,
		[]string{"kaspi:order:5:create", "kaspi:order:4:create", "kaspi:order:3:create"}) {
		t.Errorf("ordered around the registrations: %q, want the three without a date", got)
	}
}

func testTotals(t *testing.T, s Stores, clock *Clock) {
	j := s.Journal
	ops := []journal.NewOperation{
		listOrder("kaspi", "1", "1", "", "", "", [2]string{"2", "1500.10"}),                      // done: 3000.20
		listOrder("kaspi", "2", "2", "", "", "", [2]string{"1", "0.10"}, [2]string{"1", "0.20"}), // done, cancelled: 0.30
		listOrder("kaspi", "3", "3", "", "", "", [2]string{"1", "99.99"}),                        // pending
		listOrder("kaspi", "4", "4", "", "", "", [2]string{"1", "5"}),                            // failed
		journal.CancelOrder(order.Cancel{Source: "kaspi", ExternalID: "2", Reason: "buyer"}),
		journal.CancelOrder(order.Cancel{Source: "kaspi", ExternalID: "3", Reason: "buyer"}),
		{Key: "site:order:U-1:create", Kind: order.KindCreate, Source: "site", ExternalID: "U-1",
			Payload: json.RawMessage(`{"currency":"USD","total":0.1,"lines":[{"quantity":1,"price":0.1}]}`)},
		{Key: "site:order:U-2:create", Kind: order.KindCreate, Source: "site", ExternalID: "U-2",
			Payload: json.RawMessage(`{"currency":"USD","total":0.2,"lines":[{"quantity":1,"price":0.2}]}`)},
		{Key: "stock:WH1:2026-09-16T10:00", Kind: "stock.snapshot", Source: "stock", Payload: json.RawMessage(`{"warehouse":"WH1"}`)},
	}
	registerAll(t, j, clock, ops)
	for _, k := range []string{"kaspi:order:1:create", "kaspi:order:2:create", "kaspi:order:2:cancel", "site:order:U-1:create", "site:order:U-2:create"} {
		setState(t, j, k, journal.Finish{Status: journal.StatusDone, Result: &journal.Result{Ref: "r-" + k}})
	}
	setState(t, j, "kaspi:order:4:create", journal.Finish{Status: journal.StatusFailed, Error: "refused"})

	check := func(f journal.Filter) {
		t.Helper()
		groups, err := j.Totals(t.Context(), f)
		if err != nil {
			t.Fatalf("totals %+v: %v", f, err)
		}
		// What the listing holds, grouped in Go, is what Totals answers.
		type gk struct {
			kind     string
			status   journal.Status
			cancel   journal.Status
			currency string
		}
		want := map[gk]journal.TotalGroup{}
		listed := listAll(t, j, f)
		statuses := map[string]journal.Status{}
		for _, op := range listAll(t, j, journal.Filter{}) {
			statuses[op.Key] = op.Status
		}
		for _, op := range listed {
			d := journal.Derive(op.Key, op.Source, op.ExternalID, op.Payload, op.Result)
			k := gk{op.Kind, op.Status, statuses[order.CancelKeyOf(op.Key)], d.Currency}
			g := want[k]
			g.Kind, g.Status, g.CancelStatus, g.Currency = k.kind, k.status, k.cancel, k.currency
			g.Count++
			if d.Total != nil {
				g.Sum = g.Sum.Add(*d.Total)
			}
			want[k] = g
		}
		if len(groups) != len(want) {
			t.Errorf("totals %+v: %d groups %+v, want %d %+v", f, len(groups), groups, len(want), want)
		}
		for _, g := range groups {
			w, ok := want[gk{g.Kind, g.Status, g.CancelStatus, g.Currency}]
			if !ok || w.Count != g.Count || !w.Sum.Equal(g.Sum) {
				t.Errorf("totals %+v: group %+v, want %+v", f, g, w)
			}
		}
	}
	check(journal.Filter{})
	check(journal.Filter{Source: "kaspi"})
	check(journal.Filter{Search: "kaspi:order:2"})
	check(journal.Filter{Status: journal.StatusDone, Kind: order.KindCreate})
	groups, err := j.Totals(t.Context(), journal.Filter{Source: "site"})
	if err != nil || len(groups) != 1 || groups[0].Count != 2 || !groups[0].Sum.Equal(decimal.RequireFromString("0.3")) || groups[0].Currency != "USD" {
		t.Errorf("the site's totals %+v, %v: want two USD orders of 0.3 exactly", groups, err)
	}
	groups, err = j.Totals(t.Context(), journal.Filter{Keys: []string{"kaspi:order:2:create"}})
	if err != nil || len(groups) != 1 || groups[0].CancelStatus != journal.StatusDone || !groups[0].Sum.Equal(decimal.RequireFromString("0.3")) {
		t.Errorf("a cancelled order's totals %+v, %v: want its cancel done", groups, err)
	}
}

func testOneCSeen(t *testing.T, s Stores, clock *Clock) {
	j := s.Journal
	registerAll(t, j, clock, []journal.NewOperation{
		listOrder("kaspi", "1", "1", "", "", "", [2]string{"1", "10"}),
		listOrder("kaspi", "2", "2", "", "", "", [2]string{"1", "20"}),
	})
	before := get(t, j, "kaspi:order:1:create")
	if before.OneCSeen != nil {
		t.Fatalf("a new operation has seen %+v in 1C", before.OneCSeen)
	}
	total := decimal.RequireFromString("9.50")
	at := clock.Now().Add(time.Minute)
	seen := []journal.OneCSeen{
		{Key: "kaspi:order:1:create", Held: 1, Ref: "ref-1", Number: "ОС-000001", Date: "2026-09-16T10:00:00", Total: &total,
			Currency: "KZT", Posted: true, Cancelled: true, SeenAt: at},
		{Key: "kaspi:order:2:create", Held: 0, SeenAt: at},
		{Key: "kaspi:order:nobody:create", Held: 1, SeenAt: at}, // unknown: skipped
	}
	if err := j.RecordOneC(t.Context(), seen); err != nil {
		t.Fatal(err)
	}
	got := get(t, j, "kaspi:order:1:create")
	g := got.OneCSeen
	if g == nil || g.Key != "kaspi:order:1:create" || g.Held != 1 || g.Number != "ОС-000001" || g.Total == nil || !g.Total.Equal(total) ||
		!g.Posted || !g.Cancelled || g.Deleted || !g.SeenAt.Equal(at) || g.Ref != "ref-1" || g.Currency != "KZT" {
		t.Errorf("seen in 1C: %+v, want %+v", g, seen[0])
	}
	if g != nil {
		wantUTC(t, "seen at", g.SeenAt)
	}
	if !got.UpdatedAt.Equal(before.UpdatedAt) {
		t.Errorf("recording what 1C held moved updated_at from %s to %s: the list's order would change", before.UpdatedAt, got.UpdatedAt)
	}
	if g2 := get(t, j, "kaspi:order:2:create").OneCSeen; g2 == nil || g2.Held != 0 || g2.Total != nil {
		t.Errorf("1C held none: %+v", g2)
	}
	// The latest replaces the one before; List reads it too.
	seen[0].Total, seen[0].Cancelled = nil, false
	if err := j.RecordOneC(t.Context(), seen[:1]); err != nil {
		t.Fatal(err)
	}
	for _, op := range listAll(t, j, journal.Filter{Keys: []string{"kaspi:order:1:create"}}) {
		if op.OneCSeen == nil || op.OneCSeen.Total != nil || op.OneCSeen.Cancelled {
			t.Errorf("after the second reconciliation: %+v", op.OneCSeen)
		}
	}
	if err := j.RecordOneC(t.Context(), nil); err != nil {
		t.Errorf("recording nothing: %v", err)
	}
}

func testKeys(t *testing.T, s Stores, clock *Clock) {
	j := s.Journal
	registerAll(t, j, clock, []journal.NewOperation{newOp("k:1"), newOp("k:2"), newOp("k:3")})
	if got := opKeys(listAll(t, j, journal.Filter{Keys: []string{"k:3", "k:1", "k:missing"}})); !slices.Equal(got, []string{"k:3", "k:1"}) {
		t.Errorf("keys: %q", got)
	}
	if got := listAll(t, j, journal.Filter{Keys: []string{"k:2"}, Status: journal.StatusDone}); len(got) != 0 {
		t.Errorf("keys with a status: %q", opKeys(got))
	}
}

// testListThroughTheInbox: an order a webhook brought (the inbox registers it) has its
// date, total and search text as one Register wrote.
func testListThroughTheInbox(t *testing.T, s Stores, clock *Clock) {
	op := listOrder("site", "W-1", "W-1", "Гульнара", "", "2026-09-16T10:00:00+05:00", [2]string{"3", "1.10"})
	receive(t, s.Inbox, inboxEvent("site", "evt-1", `{"a":1}`), []inbox.Registration{{Op: op}}, okAnswer())
	got := get(t, s.Journal, op.Key)
	if got.OrderCreatedAt == nil || !got.OrderCreatedAt.Equal(time.Date(2026, 9, 16, 5, 0, 0, 0, time.UTC)) {
		t.Errorf("order date %v", got.OrderCreatedAt)
	}
	if keys := opKeys(listAll(t, s.Journal, journal.Filter{Search: "гульнара"})); !slices.Equal(keys, []string{op.Key}) {
		t.Errorf("search by the name: %q", keys)
	}
	if keys := opKeys(listAll(t, s.Journal, journal.Filter{Search: "3.30"})); !slices.Equal(keys, []string{op.Key}) {
		t.Errorf("search by the total: %q", keys)
	}
}
