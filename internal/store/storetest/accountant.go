package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ordersync/ordersync/internal/inbox"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/order"
)

// runAccountant runs the topic of what the accountant's journal reads: List's search
// (exactly journal.Matches), kind and period filters with paging, who triggered each
// registration, requeue, revision and attempt (the timeline), and the inbox
// deliveries that brought an operation. Each case has a journal and the inbox of the
// same database, whose clock is a stopped Clock (TakeoverAfter as the Journal
// topic's: released claims are taken over at once).
func runAccountant(t *testing.T, h Harness) {
	t.Helper()
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, s Stores, clock *Clock)
	}{
		{"SearchIsMatches", testSearchIsMatches},
		{"KindAndPeriod", testKindAndPeriod},
		{"TimelineOfRegistrations", testTimelineOfRegistrations},
		{"AttemptTriggers", testAttemptTriggers},
		{"ReviseEvent", testReviseEvent},
		{"InboxActorAndDeliveries", testInboxActorAndDeliveries},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			clock := NewClock()
			tc.fn(t, h.open(t, Options{Clock: clock}, "Journal", "Inbox"), clock)
		})
	}
}

func as(t *testing.T, actor string) context.Context { return journal.WithActor(t.Context(), actor) }

func listAll(t *testing.T, j journal.Store, f journal.Filter) []journal.Operation {
	t.Helper()
	if f.Limit == 0 {
		f.Limit = 1000
	}
	ops, err := j.List(t.Context(), f)
	if err != nil {
		t.Fatalf("list %+v: %v", f, err)
	}
	return ops
}

func opKeys(ops []journal.Operation) []string {
	keys := make([]string, len(ops))
	for i, op := range ops {
		keys[i] = op.Key
	}
	return keys
}

// listPaged reads every page of f, limit operations at a time.
func listPaged(t *testing.T, j journal.Store, f journal.Filter, limit int) []string {
	t.Helper()
	f.Limit = limit
	var keys []string
	for range 100 {
		ops, err := j.List(t.Context(), f)
		if err != nil {
			t.Fatalf("list %+v: %v", f, err)
		}
		keys = append(keys, opKeys(ops)...)
		if len(ops) < limit {
			return keys
		}
		last := ops[len(ops)-1]
		f.After = &last
	}
	t.Fatalf("list %+v: more than 100 pages", f)
	return nil
}

// orderOp is a create whose payload is an order as the connectors write it.
func orderOp(source, id, number, marketplaceID, phone string) journal.NewOperation {
	p := map[string]any{"source": source, "external_id": id, "number": number,
		"lines": []any{map[string]any{"sku": "SKU-1", "quantity": 1, "price": 10}}}
	if marketplaceID != "" {
		p["marketplace_id"] = marketplaceID
	}
	if phone != "" {
		p["customer"] = map[string]any{"name": "Иван", "phone": phone}
	}
	b, _ := json.Marshal(p)
	return journal.NewOperation{Key: source + ":order:" + id + ":create", Kind: order.KindCreate, Source: source,
		ExternalID: id, Payload: b}
}

func testSearchIsMatches(t *testing.T, s Stores, clock *Clock) {
	j := s.Journal
	ops := []journal.NewOperation{
		orderOp("kaspi", "512344101", "512344101", "", "+7 701 234-56-78"),
		orderOp("kaspi", "512344102", "512344102", "", "8 (701) 234 56 79"),
		orderOp("site", "A-1001", "A-1001", "", "87012345678"), // the same phone as the first
		orderOp("wb", "1234567", "WB-77", "998877", "2345678"), // a short phone: compared whole
		orderOp("ozon", "05708065-0029-1", "05708065-0029-1", "", ""),
		orderOp("site", "A-1002", "ОС-000999", "", "+7 701 000 00 00"), // a number that looks like a 1C one
		{Key: "ozon:posting:05708065-0030-1:create", Kind: order.KindCreate, Source: "ozon", ExternalID: "05708065-0030-1",
			Payload: json.RawMessage(`{"fetch":{"id":"05708065-0030-1","marketplace":"ozon"}}`)},
		{Key: "bitrix24:deal:4711:create", Kind: order.KindCreate, Source: "bitrix24", ExternalID: "4711",
			Payload: json.RawMessage(`{"fetch":{"id":"deal-4711"}}`)},
		// A number and a phone that are JSON numbers are no terms (journal.TermsOf).
		{Key: "site:order:N-1:create", Kind: order.KindCreate, Source: "site", ExternalID: "N-1",
			Payload: json.RawMessage(`{"number":31337,"customer":{"phone":87019998877},"fetch":{"id":42}}`)},
		{Key: "stock:WH1:2026-09-16T10:00", Kind: "stock.snapshot", Source: "stock", ExternalID: "",
			Payload: json.RawMessage(`{"warehouse":"WH1","number":"WH1"}`)},
		{Key: "odd:order:x:create", Kind: order.KindCreate, Source: "", ExternalID: "x", Payload: json.RawMessage(`[1,2,3]`)},
	}
	for _, op := range ops {
		clock.Advance(time.Second)
		if r, err := j.Register(t.Context(), op); err != nil || r.Outcome != journal.Registered {
			t.Fatalf("register %s: %v, %v", op.Key, r.Outcome, err)
		}
	}
	results := map[string]journal.Result{
		"kaspi:order:512344101:create":        {Ref: "9b1c7e4a-0000-4000-8000-00000000a001", Number: "ОС-000123"},
		"site:order:A-1001:create":            {Ref: "9B1C7E4A-0000-4000-8000-00000000A002", Number: "ОС-000124"},
		"ozon:posting:05708065-0030-1:create": {Ref: "ref-3", Number: "ос-000125"},
	}
	for key, r := range results {
		clock.Advance(time.Second)
		f := journal.Finish{Status: journal.StatusDone, Result: &r}
		if strings.HasPrefix(key, "ozon:") {
			// The fetched order replaces a fetch payload: its terms are searched from now on.
			f.Payload = orderOp("ozon", "05708065-0030-1", "05708065-0030-1", "", "+7 777 111 22 33").Payload
		}
		setState(t, j, key, f)
	}
	clock.Advance(time.Second)
	setState(t, j, "kaspi:order:512344102:create", journal.Finish{Status: journal.StatusFailed, Error: "1c: refused"})

	all := listAll(t, j, journal.Filter{})
	if len(all) != len(ops) {
		t.Fatalf("list: %d operations, want %d", len(all), len(ops))
	}
	queries := []string{
		"", "   ",
		"kaspi:order:512344101:create", "512344101", "kaspi:512344101", " kaspi:512344101 ", "KASPI:512344101",
		"A-1001", "a-1001", "site:A-1001", "WB-77", "998877", "1234567", "wb:1234567",
		"05708065-0029-1", "05708065-0030-1", "ozon:05708065-0030-1", "deal-4711", "4711", "bitrix24:4711",
		"ОС-000123", "ос-000123", "Ос-000123", "ОС-000124", "ОС-000125", "ос-000125", "ОС-000999", "ос-000999", "ОС-000",
		"9b1c7e4a-0000-4000-8000-00000000a001", "9B1C7E4A-0000-4000-8000-00000000A001", "9b1c7e4a-0000-4000-8000-00000000a002", "ref-3",
		"+7 701 234-56-78", "87012345678", "7012345678", "+77012345678", "8 (701) 234-56-79", "701 234 56 79",
		"2345678", "+2345678", "234-56-78", "12345678", "7012345", "701234", "+7 777 111 22 33",
		"31337", "87019998877", "42", "WH1", "stock:WH1:2026-09-16T10:00", ":x", "x", "odd:order:x:create",
		"1", "[1,2,3]", "Иван", "%", "_", "kaspi:%", "' OR 1=1 --",
	}
	for _, q := range queries {
		var want []string
		for _, op := range all {
			if journal.Matches(op, q) {
				want = append(want, op.Key)
			}
		}
		if got := opKeys(listAll(t, j, journal.Filter{Query: q})); !slices.Equal(got, want) {
			t.Errorf("query %q: got %q, want %q (journal.Matches)", q, got, want)
		}
		// Paged one at a time, the same operations in the same order.
		if got := listPaged(t, j, journal.Filter{Query: q}, 1); !slices.Equal(got, want) {
			t.Errorf("query %q paged: got %q, want %q", q, got, want)
		}
	}
	// Sanity: the cases the search is for find what they name.
	for q, want := range map[string][]string{
		"ос-000123":        {"kaspi:order:512344101:create"},
		"kaspi:512344101":  {"kaspi:order:512344101:create"},
		"+7 701 234-56-78": {"site:order:A-1001:create", "kaspi:order:512344101:create"},
		"2345678":          {"wb:order:1234567:create"},
		"deal-4711":        {"bitrix24:deal:4711:create"},
	} {
		got := opKeys(listAll(t, j, journal.Filter{Query: q}))
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("query %q: got %q, want %q", q, got, want)
		}
	}
	// Combined with the other filters.
	for _, f := range []journal.Filter{
		{Query: "+7 701 234-56-78", Status: journal.StatusDone},
		{Query: "+7 701 234-56-78", Source: "site"},
		{Query: "+7 701 234-56-78", Status: journal.StatusPending},
		{Query: "ОС-000125", Kind: order.KindCreate, Status: journal.StatusDone},
		{Query: "WH1", Kind: "stock.snapshot"},
		{Query: "WH1", Kind: order.KindCreate},
		{Query: "512344102", Status: journal.StatusFailed, Source: "kaspi"},
	} {
		var want []string
		for _, op := range all {
			if journal.Matches(op, f.Query) && (f.Status == "" || op.Status == f.Status) &&
				(f.Source == "" || op.Source == f.Source) && (f.Kind == "" || op.Kind == f.Kind) {
				want = append(want, op.Key)
			}
		}
		if len(want) == 0 && f.Status != journal.StatusPending && f.Kind != order.KindCreate {
			t.Fatalf("%+v: the test expects a match", f)
		}
		if got := listPaged(t, j, f, 1); !slices.Equal(got, want) {
			t.Errorf("%+v: got %q, want %q", f, got, want)
		}
	}
}

func testKindAndPeriod(t *testing.T, s Stores, clock *Clock) {
	j := s.Journal
	start := clock.Now()
	type reg struct {
		key, kind string
		status    journal.Status
	}
	var regs []reg
	created := map[string]time.Time{}
	for i := range 12 {
		kind, key := order.KindCreate, fmt.Sprintf("site:order:P-%02d:create", i)
		if i%3 == 2 {
			kind, key = order.KindCancel, fmt.Sprintf("site:order:P-%02d:cancel", i)
		}
		op := newOp(key)
		op.Kind = kind
		if i%4 == 3 {
			op.Source = "kaspi"
		}
		created[key] = clock.Now()
		register(t, j, op)
		regs = append(regs, reg{key, kind, journal.StatusPending})
		clock.Advance(time.Minute)
	}
	// Some are done and failed later: updated_at moves, created_at does not.
	for i, r := range regs {
		switch i % 5 {
		case 1:
			setState(t, j, r.key, journal.Finish{Status: journal.StatusDone, Result: &journal.Result{Ref: "r", Number: "n"}})
		case 2:
			setState(t, j, r.key, journal.Finish{Status: journal.StatusFailed, Error: "no"})
		}
		clock.Advance(time.Second)
	}
	all := listAll(t, j, journal.Filter{})
	for _, op := range all {
		if !op.CreatedAt.Equal(created[op.Key]) {
			t.Fatalf("%s: created_at %v, want %v", op.Key, op.CreatedAt, created[op.Key])
		}
	}
	at := func(m int) time.Time { return start.Add(time.Duration(m) * time.Minute) }
	for _, f := range []journal.Filter{
		{Kind: order.KindCancel},
		{Kind: order.KindCreate},
		{Kind: "no.such"},
		{CreatedFrom: at(3)},
		{CreatedBefore: at(3)},
		{CreatedFrom: at(3), CreatedBefore: at(7)},
		{CreatedFrom: at(3).Add(time.Nanosecond), CreatedBefore: at(7).Add(time.Nanosecond)}, // between two microseconds
		{CreatedFrom: at(3).Add(-time.Nanosecond), CreatedBefore: at(7).Add(-time.Nanosecond)},
		{CreatedFrom: at(5), CreatedBefore: at(5)},
		{CreatedFrom: at(2), CreatedBefore: at(11), Kind: order.KindCreate, Status: journal.StatusDone},
		{CreatedFrom: at(2), CreatedBefore: at(11), Kind: order.KindCancel, Source: "kaspi"},
		{CreatedFrom: at(1), Kind: order.KindCreate, Status: journal.StatusPending, Source: "site"},
		{CreatedBefore: at(9), Status: journal.StatusFailed},
	} {
		var want []string
		for _, op := range all {
			if (f.Kind == "" || op.Kind == f.Kind) && (f.Status == "" || op.Status == f.Status) &&
				(f.Source == "" || op.Source == f.Source) &&
				(f.CreatedFrom.IsZero() || !op.CreatedAt.Before(f.CreatedFrom)) &&
				(f.CreatedBefore.IsZero() || op.CreatedAt.Before(f.CreatedBefore)) {
				want = append(want, op.Key)
			}
		}
		if got := opKeys(listAll(t, j, f)); !slices.Equal(got, want) {
			t.Errorf("%+v: got %q, want %q", f, got, want)
		}
		for _, limit := range []int{1, 2, 5} {
			if got := listPaged(t, j, f, limit); !slices.Equal(got, want) {
				t.Errorf("%+v paged by %d: got %q, want %q", f, limit, got, want)
			}
		}
	}
}

// wantEvents checks an operation's timeline (At aside, which must not go back).
func wantEvents(t *testing.T, what string, d journal.Detail, want ...journal.Event) {
	t.Helper()
	if d.Events == nil {
		t.Fatalf("%s: events are nil, want a slice", what)
	}
	got := make([]journal.Event, len(d.Events))
	for i, e := range d.Events {
		if i > 0 && e.At.Before(d.Events[i-1].At) {
			t.Fatalf("%s: events not oldest first: %+v", what, d.Events)
		}
		got[i] = journal.Event{Action: e.Action, Actor: e.Actor, Detail: e.Detail}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("%s: events %+v, want %+v", what, got, want)
	}
}

func testTimelineOfRegistrations(t *testing.T, s Stores, clock *Clock) {
	j := s.Journal
	key := "kaspi:order:T-1:create"
	if _, err := j.Register(as(t, journal.ActorPoller("kaspi")), newOp(key)); err != nil {
		t.Fatal(err)
	}
	registeredAt := clock.Now()
	clock.Advance(time.Second)
	// A duplicate and a conflict record no event and do not change the trigger.
	if r, err := j.Register(as(t, journal.ActorCLI("anna")), newOp(key)); err != nil || r.Outcome != journal.Duplicate {
		t.Fatalf("duplicate: %v, %v", r.Outcome, err)
	}
	other := newOp(key)
	other.Payload = payload(key, 2)
	if r, err := j.Register(as(t, journal.ActorCLI("anna")), other); err != nil || r.Outcome != journal.Conflicted {
		t.Fatalf("conflict: %v, %v", r.Outcome, err)
	}
	if r, err := j.RegisterFailed(as(t, journal.ActorCLI("anna")), newOp(key), "unmapped"); err != nil || r.Outcome != journal.Duplicate {
		t.Fatalf("failed duplicate: %v, %v", r.Outcome, err)
	}
	d := show(t, j, key)
	wantEvents(t, "after registration", d, journal.Event{Action: journal.EventRegistered, Actor: "poller:kaspi"})
	if !d.Events[0].At.Equal(registeredAt) {
		t.Fatalf("registered at %v, want the store's clock %v", d.Events[0].At, registeredAt)
	}

	// RegisterFailed: the reason is the event's detail.
	fkey := "kaspi:order:T-2:create"
	if _, err := j.RegisterFailed(as(t, journal.ActorPoller("kaspi")), newOp(fkey), "SKU-1 is not mapped"); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Second)
	if _, err := j.Requeue(as(t, journal.ActorUI("boris")), fkey); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Second)
	if _, err := j.Requeue(as(t, journal.ActorBulk(journal.ActorCLI("anna"))), fkey); err != nil {
		t.Fatal(err)
	}
	wantEvents(t, "failed, requeued twice", show(t, j, fkey),
		journal.Event{Action: journal.EventRegistered, Actor: "poller:kaspi", Detail: "SKU-1 is not mapped"},
		journal.Event{Action: journal.EventRequeued, Actor: "ui:boris"},
		journal.Event{Action: journal.EventRequeued, Actor: "bulk:cli:anna"})

	// Without an actor: recorded all the same, by nobody.
	nkey := "site:order:T-3:create"
	registerNew(t, j, nkey)
	wantEvents(t, "no actor", show(t, j, nkey), journal.Event{Action: journal.EventRegistered})

	// A done operation is not requeued, and records nothing.
	setState(t, j, nkey, journal.Finish{Status: journal.StatusDone, Result: &journal.Result{Ref: "r"}})
	if _, err := j.Requeue(as(t, "cli:anna"), nkey); err == nil {
		t.Fatal("requeue of a done operation succeeded")
	}
	d = show(t, j, nkey)
	wantEvents(t, "done, not requeued", d, journal.Event{Action: journal.EventRegistered})
	if d.History[0].TriggeredBy != "" {
		t.Fatalf("attempt without any actor: triggered by %q, want none", d.History[0].TriggeredBy)
	}
	b, err := json.Marshal(show(t, j, nkey))
	if err != nil || !strings.Contains(string(b), `"events":[`) {
		t.Fatalf("detail JSON %s (%v): want an events array", b, err)
	}
}

func attemptTriggers(d journal.Detail) []string {
	var got []string
	for _, a := range d.History {
		got = append(got, a.TriggeredBy)
	}
	return got
}

func testAttemptTriggers(t *testing.T, s Stores, clock *Clock) {
	j := s.Journal
	key := "kaspi:order:A-1:create"
	if _, err := j.Register(as(t, journal.ActorPoller("kaspi")), newOp(key)); err != nil {
		t.Fatal(err)
	}
	retry := journal.Finish{Status: journal.StatusPending, Error: "1c: 503", Class: journal.ClassTransient}
	// 1: the registration's; 2: a retry.
	finish(t, claimDue(t, j, "w1"), retry)
	finish(t, claimDue(t, j, "w1"), retry)
	// 3: a requeue's, claimed by the engine.
	if _, err := j.Requeue(as(t, journal.ActorUI("boris")), key); err != nil {
		t.Fatal(err)
	}
	finish(t, claimDue(t, j, "w1"), retry)
	// 4: a resync names itself on ClaimKey, whatever the pending trigger.
	if _, err := j.Requeue(as(t, journal.ActorBulk(journal.ActorCLI("anna"))), key); err != nil {
		t.Fatal(err)
	}
	c, err := j.ClaimKey(as(t, journal.ActorCLI("anna")), key, "resync")
	if err != nil {
		t.Fatal(err)
	}
	finish(t, released(t, c), retry)
	// 5: ClaimKey without an actor takes the pending trigger (a retry now).
	finish(t, claimKey(t, j, key), retry)
	// 6: ClaimKey without an actor after a requeue takes the requeue's.
	if _, err := j.Requeue(as(t, journal.ActorCLI("vera")), key); err != nil {
		t.Fatal(err)
	}
	finish(t, claimKey(t, j, key), journal.Finish{Status: journal.StatusFailed, Error: "1c: refused"})
	d := show(t, j, key)
	want := []string{"poller:kaspi", "retry", "ui:boris", "cli:anna", "retry", "cli:vera"}
	if got := attemptTriggers(d); !slices.Equal(got, want) {
		t.Fatalf("attempts triggered by %q, want %q", got, want)
	}
	wantEvents(t, "timeline", d,
		journal.Event{Action: journal.EventRegistered, Actor: "poller:kaspi"},
		journal.Event{Action: journal.EventRequeued, Actor: "ui:boris"},
		journal.Event{Action: journal.EventRequeued, Actor: "bulk:cli:anna"},
		journal.Event{Action: journal.EventRequeued, Actor: "cli:vera"})

	// A released claim reached no verdict: the next attempt still carries the trigger.
	key2 := "kaspi:order:A-2:create"
	if _, err := j.Register(as(t, journal.ActorPoller("kaspi")), newOp(key2)); err != nil {
		t.Fatal(err)
	}
	c2 := claimDue(t, j, "w1")
	if err := c2.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Second) // past the takeover time of the attempt left open
	finish(t, claimDue(t, j, "w1"), journal.Finish{Status: journal.StatusDone, Result: &journal.Result{Ref: "r"}})
	if got, want := attemptTriggers(show(t, j, key2)), []string{"poller:kaspi", "poller:kaspi"}; !slices.Equal(got, want) {
		t.Fatalf("after a released claim: attempts triggered by %q, want %q", got, want)
	}
}

func testReviseEvent(t *testing.T, s Stores, clock *Clock) {
	j := s.Journal
	key := "kaspi:order:R-1:create"
	registerFailedNew(t, j, rawOp(key), "SKU-9 is not mapped")
	clock.Advance(time.Second)
	if _, err := j.Revise(as(t, journal.ActorPoller("kaspi")), newOp(key)); err != nil {
		t.Fatal(err)
	}
	finish(t, claimDue(t, j, "w"), journal.Finish{Status: journal.StatusDone, Result: &journal.Result{Ref: "r"}})
	d := show(t, j, key)
	wantEvents(t, "revised", d,
		journal.Event{Action: journal.EventRegistered, Detail: "SKU-9 is not mapped"},
		journal.Event{Action: journal.EventRevised, Actor: "poller:kaspi", Detail: "SKU-9 is not mapped"})
	if got := attemptTriggers(d); !slices.Equal(got, []string{"poller:kaspi"}) {
		t.Fatalf("attempt after the revision triggered by %q, want the revision's", got)
	}
	// A revision refused records nothing.
	if _, err := j.Revise(as(t, "cli:anna"), newOp(key)); err == nil {
		t.Fatal("revise of a done operation succeeded")
	}
	if n := len(show(t, j, key).Events); n != 2 {
		t.Fatalf("after a refused revision: %d events, want 2", n)
	}
}

func testInboxActorAndDeliveries(t *testing.T, s Stores, clock *Clock) {
	ib, j := s.Inbox, s.Journal
	ctx := as(t, journal.ActorWebhook("site"))
	key, key2 := "site:order:W-1:create", "site:order:W-2:create"
	ev1 := inboxEvent("site", "evt-1", `{"a":1}`)
	if r, err := ib.Receive(ctx, ev1, []inbox.Registration{reg(key, 1), reg(key2, 1)}, okAnswer()); err != nil || r.Outcome != inbox.Processed {
		t.Fatalf("receive: %v, %v", r.Outcome, err)
	}
	// A redelivery, another delivery naming an existing key, and a conflicting one
	// register nothing and record no event.
	if _, err := ib.Receive(as(t, "webhook:other"), ev1, []inbox.Registration{reg(key, 1)}, okAnswer()); err != nil {
		t.Fatal(err)
	}
	ev2 := inboxEvent("site", "evt-2", `{"a":2}`)
	ev2.ReceivedAt = ev1.ReceivedAt.Add(time.Second)
	regIf := reg(key, 7)
	regIf.IfAbsent = true
	if _, err := ib.Receive(as(t, "webhook:other"), ev2, []inbox.Registration{regIf}, okAnswer()); err != nil {
		t.Fatal(err)
	}
	ev3 := inboxEvent("site", "evt-3", `{"a":3}`)
	ev3.ReceivedAt = ev1.ReceivedAt.Add(2 * time.Second)
	if _, err := ib.Receive(as(t, "webhook:other"), ev3, []inbox.Registration{reg(key, 8)}, okAnswer()); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{key, key2} {
		wantEvents(t, k, show(t, j, k),
			journal.Event{Action: journal.EventRegistered, Actor: "webhook:site", Detail: `inbox site "evt-1"`})
	}
	finish(t, claimKey(t, j, key), journal.Finish{Status: journal.StatusDone, Result: &journal.Result{Ref: "r"}})
	if got := attemptTriggers(show(t, j, key)); !slices.Equal(got, []string{"webhook:site"}) {
		t.Fatalf("attempt triggered by %q, want the webhook's", got)
	}

	deliveries := func(k string) []string {
		t.Helper()
		recs, err := ib.ByOperation(t.Context(), k)
		if err != nil {
			t.Fatalf("deliveries of %s: %v", k, err)
		}
		if recs == nil {
			t.Fatalf("deliveries of %s: nil, want a slice", k)
		}
		var ids []string
		for _, r := range recs {
			if !slices.Contains(r.Operations, k) {
				t.Fatalf("deliveries of %s: %s holds %q", k, r.EventID, r.Operations)
			}
			ids = append(ids, r.EventID)
		}
		return ids
	}
	if got, want := deliveries(key), []string{"evt-3", "evt-2", "evt-1"}; !slices.Equal(got, want) {
		t.Fatalf("deliveries of %s: %q, want %q (newest first)", key, got, want)
	}
	if got, want := deliveries(key2), []string{"evt-1"}; !slices.Equal(got, want) {
		t.Fatalf("deliveries of %s: %q, want %q", key2, got, want)
	}
	if got := deliveries("site:order:W:create"); len(got) != 0 {
		t.Fatalf("deliveries of a key no delivery named (a prefix of others): %q", got)
	}
	// Another source's event under the same key is listed too.
	ev4 := inboxEvent("bitrix24", "evt-1", `{"a":4}`)
	ev4.ReceivedAt = ev1.ReceivedAt.Add(-time.Second)
	if _, err := ib.Receive(ctx, ev4, []inbox.Registration{regIf}, okAnswer()); err != nil {
		t.Fatal(err)
	}
	if got, want := deliveries(key), []string{"evt-3", "evt-2", "evt-1", "evt-1"}; !slices.Equal(got, want) {
		t.Fatalf("deliveries of %s: %q, want %q", key, got, want)
	}
}
