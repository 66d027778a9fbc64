package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ordersync/ordersync/internal/inbox"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/order"
)

// ConcurrentDeliveries is how many simultaneous deliveries of one event the inbox
// topic makes; it asks for that many connections (Options.Conns), for them to run on
// separate connections.
const ConcurrentDeliveries = 100

// runInbox runs the inbox topic: the four outcomes of a delivery, counted in inbox
// records and journal operations (never only in answers), IfAbsent and Wake,
// simultaneous deliveries of one event, a failed delivery and its redelivery, and the
// operators' List and Show. Each case has an inbox store and the journal store of the
// same database.
func runInbox(t *testing.T, h Harness) {
	t.Helper()
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, ib inbox.Store, j journal.Store)
	}{
		{"New", testInboxNew},
		{"ExactRepeat", testInboxExactRepeat},
		{"SameIDOtherBody", testInboxSameIDOtherBody},
		{"IfAbsentRecordsNoConflict", testInboxIfAbsent},
		{"ConflictingRegistration", testInboxConflictingRegistration},
		{"Wake", testInboxWake},
		{"ConcurrentDeliveries", testInboxConcurrent},
		{"FailedReceiveLeavesNothing", testInboxFailedReceive},
		{"ListShow", testInboxListShow},
		{"Validates", testInboxValidates},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := h.open(t, Options{Conns: ConcurrentDeliveries}, "Inbox", "Journal")
			tc.fn(t, s.Inbox, s.Journal)
		})
	}
}

// ---- helpers ----

func inboxEvent(source, id, body string) inbox.Event {
	return inbox.Event{Source: source, ID: id, Body: []byte(body), ContentType: "application/json",
		ReceivedAt: time.Now().UTC().Truncate(time.Microsecond)}
}

func okAnswer() inbox.Answer {
	return inbox.Answer{Status: 200, ContentType: "application/json", Body: json.RawMessage(`{"result":true}`)}
}

// reg registers newOp(key) with the payload numbered n.
func reg(key string, n int) inbox.Registration {
	op := newOp(key)
	op.Payload = payload(key, n)
	return inbox.Registration{Op: op}
}

func receive(t *testing.T, ib inbox.Store, ev inbox.Event, regs []inbox.Registration, a inbox.Answer) inbox.Receipt {
	t.Helper()
	r, err := ib.Receive(t.Context(), ev, regs, a)
	if err != nil {
		t.Fatalf("receive %s %s: %v", ev.Source, ev.ID, err)
	}
	return r
}

func wantReceipt(t *testing.T, what string, r inbox.Receipt, outcome inbox.Outcome) {
	t.Helper()
	if r.Outcome != outcome {
		t.Fatalf("%s: got %s, want %s", what, r.Outcome, outcome)
	}
}

func sameAnswer(t *testing.T, what string, got, want inbox.Answer) {
	t.Helper()
	if got.Status != want.Status || got.ContentType != want.ContentType || !bytes.Equal(got.Body, want.Body) {
		t.Fatalf("%s: got %d %q %s, want %d %q %s", what, got.Status, got.ContentType, got.Body, want.Status, want.ContentType, want.Body)
	}
}

func listInbox(t *testing.T, ib inbox.Store, f inbox.Filter) []inbox.Record {
	t.Helper()
	rs, err := ib.List(t.Context(), f)
	if err != nil {
		t.Fatalf("inbox list %+v: %v", f, err)
	}
	return rs
}

func showInbox(t *testing.T, ib inbox.Store, source, id string) inbox.Detail {
	t.Helper()
	d, err := ib.Show(t.Context(), source, id)
	if err != nil {
		t.Fatalf("inbox show %s %s: %v", source, id, err)
	}
	return d
}

// journalKeys lists every operation's key, sorted.
func journalKeys(t *testing.T, j journal.Store) []string {
	t.Helper()
	ops, err := j.List(t.Context(), journal.Filter{Limit: 10_000})
	if err != nil {
		t.Fatalf("journal list: %v", err)
	}
	keys := make([]string, len(ops))
	for i, op := range ops {
		keys[i] = op.Key
	}
	slices.Sort(keys)
	return keys
}

func wantJournalKeys(t *testing.T, what string, j journal.Store, want ...string) {
	t.Helper()
	slices.Sort(want)
	if got := journalKeys(t, j); !slices.Equal(got, want) {
		t.Fatalf("%s: journal holds %q, want %q", what, got, want)
	}
}

func wantNoOperation(t *testing.T, j journal.Store, key string) {
	t.Helper()
	if op, err := j.Get(t.Context(), key); !errors.Is(err, journal.ErrNotFound) {
		t.Fatalf("get %s: got %+v, %v; want %v", key, op, err, journal.ErrNotFound)
	}
}

func wantInboxEmpty(t *testing.T, ib inbox.Store, what string) {
	t.Helper()
	if rs := listInbox(t, ib, inbox.Filter{}); len(rs) != 0 {
		t.Fatalf("%s: inbox holds %d events (%s %s …), want none", what, len(rs), rs[0].Source, rs[0].EventID)
	}
}

// ---- tests ----

func testInboxNew(t *testing.T, ib inbox.Store, j journal.Store) {
	body := `{"source":"site","external_id":"A-1001","lines":[{"sku":"SKU-8812","quantity":2,"price":1500.00}]}`
	ev := inboxEvent("site", "msg_2KWPBgLlAfxdpx2AI54pPJ85f4W", body)
	regs := []inbox.Registration{reg("site:order:A-1001:create", 1), reg("site:order:A-1001:cancel", 2)}
	answer := okAnswer()
	before := time.Now()

	r := receive(t, ib, ev, regs, answer)
	wantReceipt(t, "new event", r, inbox.Processed)
	sameAnswer(t, "answer", r.Answer, answer)
	if want := []string{"site:order:A-1001:create", "site:order:A-1001:cancel"}; !slices.Equal(r.Operations, want) {
		t.Fatalf("operations: got %q, want %q", r.Operations, want)
	}

	wantJournalKeys(t, "after a new event", j, "site:order:A-1001:create", "site:order:A-1001:cancel")
	for _, rg := range regs {
		op := get(t, j, rg.Op.Key)
		if op.Status != journal.StatusPending || op.Kind != rg.Op.Kind || op.Source != rg.Op.Source || op.ExternalID != rg.Op.ExternalID {
			t.Fatalf("operation %s: got %+v, want pending with the registered fields", rg.Op.Key, op)
		}
		if op.PayloadSHA256 != order.SHA256Hex(rg.Op.Payload) {
			t.Fatalf("operation %s: payload_sha256 %s, want %s", rg.Op.Key, op.PayloadSHA256, order.SHA256Hex(rg.Op.Payload))
		}
		sameJSON(t, "payload of "+rg.Op.Key, op.Payload, rg.Op.Payload)
		wantUTC(t, "next_attempt_at", op.NextAttemptAt)
		if op.NextAttemptAt.Before(before.Add(-time.Minute)) || op.NextAttemptAt.After(time.Now().Add(time.Minute)) {
			t.Fatalf("operation %s: next_attempt_at %v, want due now", rg.Op.Key, op.NextAttemptAt)
		}
	}

	rs := listInbox(t, ib, inbox.Filter{})
	if len(rs) != 1 {
		t.Fatalf("inbox list: got %d events, want 1", len(rs))
	}
	rec := rs[0]
	if rec.Source != ev.Source || rec.EventID != ev.ID || rec.Status != string(inbox.Processed) || rec.ContentType != ev.ContentType {
		t.Fatalf("record: got %+v, want %s %s processed %s", rec, ev.Source, ev.ID, ev.ContentType)
	}
	if got, want := rec.BodySHA256, order.SHA256Hex(ev.Body); got != want {
		t.Fatalf("body_sha256: got %s, want %s", got, want)
	}
	wantUTC(t, "received_at", rec.ReceivedAt)
	if !rec.ReceivedAt.Equal(ev.ReceivedAt) {
		t.Fatalf("received_at: got %v, want %v", rec.ReceivedAt, ev.ReceivedAt)
	}
	sameAnswer(t, "saved answer", rec.Answer, answer)
	if !slices.Equal(rec.Operations, r.Operations) || rec.Conflicts != 0 {
		t.Fatalf("record: operations %q conflicts %d, want %q and 0", rec.Operations, rec.Conflicts, r.Operations)
	}

	d := showInbox(t, ib, ev.Source, ev.ID)
	if d.BodyText != body || !bytes.Equal(d.Body, ev.Body) || len(d.Conflicts) != 0 {
		t.Fatalf("show: body %q (%d bytes), %d conflicts; want %q and none", d.BodyText, len(d.Body), len(d.Conflicts), body)
	}
	if d.BodySHA256 != rec.BodySHA256 || !slices.Equal(d.Operations, rec.Operations) || !d.ReceivedAt.Equal(rec.ReceivedAt) {
		t.Fatalf("show: got %+v, want the listed %+v", d.Record, rec)
	}
}

func testInboxExactRepeat(t *testing.T, ib inbox.Store, j journal.Store) {
	ev := inboxEvent("ozon", "TYPE_NEW_POSTING:05708065-0029-1:2026-09-16T10:00:00Z", `{"message_type":"TYPE_NEW_POSTING","posting_number":"05708065-0029-1"}`)
	key := "ozon:posting:05708065-0029-1:create"
	answer := okAnswer()
	first := receive(t, ib, ev, []inbox.Registration{reg(key, 1)}, answer)
	wantReceipt(t, "first delivery", first, inbox.Processed)
	saved := get(t, j, key)

	// The redelivery brings other registrations and another answer: neither counts.
	again := ev
	again.ReceivedAt = ev.ReceivedAt.Add(time.Minute)
	other := inbox.Answer{Status: 202, ContentType: "text/plain", Body: json.RawMessage(`"other"`)}
	for i := range 3 {
		r := receive(t, ib, again, []inbox.Registration{reg(key, 2), reg("ozon:posting:other:create", 1)}, other)
		wantReceipt(t, fmt.Sprintf("redelivery %d", i+1), r, inbox.Duplicate)
		sameAnswer(t, "duplicate's answer", r.Answer, answer)
		if !slices.Equal(r.Operations, []string{key}) {
			t.Fatalf("duplicate's operations: got %q, want %q", r.Operations, []string{key})
		}
	}

	wantJournalKeys(t, "after redeliveries", j, key)
	now := get(t, j, key)
	if !reflect.DeepEqual(stripPayload(now), stripPayload(saved)) || now.PayloadSHA256 != order.SHA256Hex(payload(key, 1)) {
		t.Fatalf("operation after redeliveries: got %+v, want the untouched %+v", now, saved)
	}
	if cs := show(t, j, key).Conflicts; len(cs) != 0 {
		t.Fatalf("journal conflicts after redeliveries: got %+v, want none", cs)
	}
	rs := listInbox(t, ib, inbox.Filter{})
	if len(rs) != 1 || rs[0].Conflicts != 0 || !rs[0].ReceivedAt.Equal(ev.ReceivedAt) {
		t.Fatalf("inbox after redeliveries: got %+v, want the first delivery alone, no conflict", rs)
	}
	sameAnswer(t, "saved answer after redeliveries", rs[0].Answer, answer)
}

func testInboxSameIDOtherBody(t *testing.T, ib inbox.Store, j journal.Store) {
	key := "site:order:A-2001:create"
	ev := inboxEvent("site", "msg_conflict", `{"external_id":"A-2001","total":3000.00}`)
	changed := ev
	changed.Body = []byte(`{"external_id":"A-2001","total":3500.00}`)
	first := receive(t, ib, ev, []inbox.Registration{reg(key, 1)}, okAnswer())
	wantReceipt(t, "first delivery", first, inbox.Processed)
	saved := get(t, j, key)

	r := receive(t, ib, changed, []inbox.Registration{reg(key, 2), reg("site:order:A-2002:create", 1)}, okAnswer())
	wantReceipt(t, "same id, other body", r, inbox.Conflict)
	if r.Answer.Status != 0 {
		t.Fatalf("conflict's answer: got %+v, want none (the caller answers a conflict)", r.Answer)
	}

	// Nothing registered, nothing overwritten.
	wantJournalKeys(t, "after a conflicting delivery", j, key)
	if now := get(t, j, key); !reflect.DeepEqual(stripPayload(now), stripPayload(saved)) {
		t.Fatalf("operation after a conflicting delivery: got %+v, want %+v", now, saved)
	}
	if cs := show(t, j, key).Conflicts; len(cs) != 0 {
		t.Fatalf("journal conflicts: got %+v, want none (the conflicting delivery registers nothing)", cs)
	}
	rs := listInbox(t, ib, inbox.Filter{})
	if len(rs) != 1 || rs[0].Conflicts != 1 || rs[0].BodySHA256 != order.SHA256Hex(ev.Body) {
		t.Fatalf("inbox list: got %+v, want the first body with 1 conflict", rs)
	}
	d := showInbox(t, ib, ev.Source, ev.ID)
	if d.BodyText != string(ev.Body) || d.Record.Conflicts != 1 || len(d.Conflicts) != 1 {
		t.Fatalf("show: body %q, %d/%d conflicts; want the first body and 1 conflict", d.BodyText, d.Record.Conflicts, len(d.Conflicts))
	}
	c := d.Conflicts[0]
	if c.BodySHA256 != order.SHA256Hex(changed.Body) || !bytes.Equal(c.Body, changed.Body) {
		t.Fatalf("conflict: got %s %q, want %s %q", c.BodySHA256, c.Body, order.SHA256Hex(changed.Body), changed.Body)
	}
	wantUTC(t, "conflict at", c.At)

	// Each conflicting delivery is recorded; the first body is still a duplicate.
	wantReceipt(t, "other body again", receive(t, ib, changed, nil, okAnswer()), inbox.Conflict)
	wantReceipt(t, "first body again", receive(t, ib, ev, nil, okAnswer()), inbox.Duplicate)
	if d := showInbox(t, ib, ev.Source, ev.ID); len(d.Conflicts) != 2 || d.BodyText != string(ev.Body) {
		t.Fatalf("after a second conflict: %d conflicts, body %q; want 2 and the first body", len(d.Conflicts), d.BodyText)
	}
}

// A push that only names the order registers a fetch payload with IfAbsent: the full
// order a poller registered under the key already counts, without a conflict.
func testInboxIfAbsent(t *testing.T, ib inbox.Store, j journal.Store) {
	key := "ozon:posting:0570-2:create"
	polled := register(t, j, newOp(key)).Operation
	fetch := reg(key, 9)
	fetch.Op.Payload = json.RawMessage(`{"fetch":{"posting_number":"0570-2"}}`)
	fetch.IfAbsent = true

	r := receive(t, ib, inboxEvent("ozon", "TYPE_NEW_POSTING:0570-2:t1", `{"posting_number":"0570-2"}`), []inbox.Registration{fetch}, okAnswer())
	wantReceipt(t, "event whose operation exists", r, inbox.Processed)
	if !slices.Equal(r.Operations, []string{key}) {
		t.Fatalf("operations: got %q, want %q (an existing key counts as registered)", r.Operations, []string{key})
	}
	now := get(t, j, key)
	if !reflect.DeepEqual(stripPayload(now), stripPayload(polled)) {
		t.Fatalf("operation: got %+v, want the polled one untouched %+v", now, polled)
	}
	sameJSON(t, "payload", now.Payload, newOp(key).Payload)
	if cs := show(t, j, key).Conflicts; len(cs) != 0 {
		t.Fatalf("journal conflicts: got %+v, want none for IfAbsent", cs)
	}
	wantJournalKeys(t, "after IfAbsent", j, key)

	// IfAbsent on a new key registers it like any registration.
	fresh := reg("ozon:posting:0570-3:create", 1)
	fresh.IfAbsent = true
	wantReceipt(t, "IfAbsent on a new key", receive(t, ib, inboxEvent("ozon", "TYPE_NEW_POSTING:0570-3:t1", `{}`), []inbox.Registration{fresh}, okAnswer()), inbox.Processed)
	if op := get(t, j, fresh.Op.Key); op.PayloadSHA256 != order.SHA256Hex(fresh.Op.Payload) || op.Status != journal.StatusPending {
		t.Fatalf("IfAbsent on a new key: got %+v, want it registered pending", op)
	}
}

// Without IfAbsent, an existing key with another payload is a journal conflict,
// recorded as Register records it; the same payload is not.
func testInboxConflictingRegistration(t *testing.T, ib inbox.Store, j journal.Store) {
	a, same := "site:order:B-1:create", "site:order:B-2:create"
	savedA := register(t, j, newOp(a)).Operation
	register(t, j, newOp(same))

	regs := []inbox.Registration{reg(a, 2), {Op: newOp(same)}}
	wantReceipt(t, "event conflicting with a saved operation", receive(t, ib, inboxEvent("site", "evt-b1", `{"n":1}`), regs, okAnswer()), inbox.Processed)
	if now := get(t, j, a); !reflect.DeepEqual(stripPayload(now), stripPayload(savedA)) {
		t.Fatalf("operation after a conflicting registration: got %+v, want %+v untouched", now, savedA)
	} else {
		sameJSON(t, "payload", now.Payload, newOp(a).Payload)
	}
	cs := show(t, j, a).Conflicts
	if len(cs) != 1 || cs[0].PayloadSHA256 != order.SHA256Hex(payload(a, 2)) || cs[0].Times != 1 {
		t.Fatalf("journal conflicts of %s: got %+v, want one for payload 2", a, cs)
	}
	sameJSON(t, "conflict payload", cs[0].Payload, payload(a, 2))
	wantUTC(t, "conflict at", cs[0].At)
	if cs := show(t, j, same).Conflicts; len(cs) != 0 {
		t.Fatalf("journal conflicts of %s: got %+v, want none (same payload)", same, cs)
	}

	// Another event bringing the same payload counts it, as Register does.
	wantReceipt(t, "second event", receive(t, ib, inboxEvent("site", "evt-b2", `{"n":2}`), []inbox.Registration{reg(a, 2)}, okAnswer()), inbox.Processed)
	if cs := show(t, j, a).Conflicts; len(cs) != 1 || cs[0].Times != 2 {
		t.Fatalf("journal conflicts after a second event: got %+v, want one seen twice", cs)
	}
	wantJournalKeys(t, "after conflicting registrations", j, a, same)
}

// Wake makes a failed or pending operation due now and leaves a done one alone.
func testInboxWake(t *testing.T, ib inbox.Store, j journal.Store) {
	failed, pending, done, fresh := "bitrix24:deal:1:create", "bitrix24:deal:2:create", "bitrix24:deal:3:create", "bitrix24:deal:4:create"
	registerFailed(t, j, newOp(failed), "stage NEW is not a create stage")
	registerNew(t, j, pending)
	registerNew(t, j, done)
	later := time.Now().Add(time.Hour)
	setState(t, j, pending, journal.Finish{Status: journal.StatusPending, Error: "portal answered 503", NextAttemptAt: later})
	setState(t, j, done, journal.Finish{Status: journal.StatusDone, Result: &journal.Result{Ref: "r-3", Number: "ТД-3"}, Ref: "r-3"})
	doneBefore := get(t, j, done)

	wake := func(key string) inbox.Registration {
		r := reg(key, 7)
		r.Op.Payload = json.RawMessage(fmt.Sprintf(`{"fetch":{"deal":%q}}`, key))
		r.IfAbsent, r.Wake = true, true
		return r
	}
	ev := inboxEvent("bitrix24", "ONCRMDEALUPDATE:1-4:1758016800", "event=ONCRMDEALUPDATE")
	before := time.Now()
	r := receive(t, ib, ev, []inbox.Registration{wake(failed), wake(pending), wake(done), wake(fresh)}, okAnswer())
	wantReceipt(t, "deal update", r, inbox.Processed)
	after := time.Now()
	dueNow := func(op journal.Operation) bool {
		return !op.NextAttemptAt.Before(before.Add(-time.Second)) && !op.NextAttemptAt.After(after.Add(time.Second))
	}
	for _, key := range []string{failed, pending, fresh} {
		op := get(t, j, key)
		if op.Status != journal.StatusPending || !dueNow(op) {
			t.Fatalf("%s after wake: got status %s next_attempt_at %v, want pending and due now (%v)", key, op.Status, op.NextAttemptAt, before)
		}
	}
	if now := get(t, j, done); !reflect.DeepEqual(stripPayload(now), stripPayload(doneBefore)) {
		t.Fatalf("done operation after wake: got %+v, want it untouched %+v", now, doneBefore)
	}
	for _, key := range []string{failed, pending, done} {
		if cs := show(t, j, key).Conflicts; len(cs) != 0 {
			t.Fatalf("%s: journal conflicts %+v, want none (IfAbsent)", key, cs)
		}
	}

	// A redelivery of the same event is a duplicate: it wakes nothing again.
	setState(t, j, pending, journal.Finish{Status: journal.StatusPending, Error: "portal answered 503", NextAttemptAt: later})
	wantReceipt(t, "redelivered update", receive(t, ib, ev, []inbox.Registration{wake(pending)}, okAnswer()), inbox.Duplicate)
	if op := get(t, j, pending); !near(op.NextAttemptAt, later) {
		t.Fatalf("after a redelivered update: next_attempt_at %v, want %v (not woken again)", op.NextAttemptAt, later)
	}
}

// ConcurrentDeliveries simultaneous deliveries of one event end with one event, one
// operation and exactly one Processed; the others are duplicates or in progress.
func testInboxConcurrent(t *testing.T, ib inbox.Store, j journal.Store) {
	key := "site:order:C-1:create"
	ev := inboxEvent("site", "msg_concurrent", `{"external_id":"C-1"}`)
	answer := okAnswer()
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		outcomes = map[inbox.Outcome]int{}
		errs     []error
	)
	start := make(chan struct{})
	for range ConcurrentDeliveries {
		wg.Go(func() {
			<-start
			r, err := ib.Receive(context.Background(), ev, []inbox.Registration{reg(key, 1)}, answer)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			outcomes[r.Outcome]++
			if r.Outcome == inbox.Processed || r.Outcome == inbox.Duplicate {
				if r.Answer.Status != answer.Status || !bytes.Equal(r.Answer.Body, answer.Body) || !slices.Equal(r.Operations, []string{key}) {
					errs = append(errs, fmt.Errorf("%s answered %+v", r.Outcome, r))
				}
			}
		})
	}
	close(start)
	wg.Wait()
	t.Logf("%d simultaneous deliveries: %v", ConcurrentDeliveries, outcomes)
	if len(errs) > 0 {
		t.Fatalf("%d of %d deliveries failed, first: %v", len(errs), ConcurrentDeliveries, errs[0])
	}
	if outcomes[inbox.Processed] != 1 || outcomes[inbox.Processed]+outcomes[inbox.Duplicate]+outcomes[inbox.InProgress] != ConcurrentDeliveries {
		t.Fatalf("outcomes: got %v, want exactly one processed and the rest duplicate or in progress", outcomes)
	}
	if rs := listInbox(t, ib, inbox.Filter{}); len(rs) != 1 || rs[0].Conflicts != 0 {
		t.Fatalf("inbox: got %+v, want one event without conflicts", rs)
	}
	wantJournalKeys(t, "after simultaneous deliveries", j, key)
	if d := show(t, j, key); len(d.Conflicts) != 0 || d.Status != journal.StatusPending {
		t.Fatalf("operation: got %+v, want one pending operation without conflicts", d)
	}
}

// A delivery that fails before commit leaves neither the event nor any operation, so
// the redelivery registers everything exactly once.
func testInboxFailedReceive(t *testing.T, ib inbox.Store, j journal.Store) {
	ev := inboxEvent("site", "msg_fails_once", `{"external_id":"D-1"}`)
	good, bad := reg("site:order:D-1:create", 1), reg("site:order:D-1:cancel", 1)
	bad.Op.Payload = json.RawMessage(`{"reason":`)
	if r, err := ib.Receive(t.Context(), ev, []inbox.Registration{good, bad}, okAnswer()); err == nil {
		t.Fatalf("receive with an invalid payload: got %s, want an error", r.Outcome)
	}
	wantInboxEmpty(t, ib, "after a failed delivery")
	if _, err := ib.Show(t.Context(), ev.Source, ev.ID); !errors.Is(err, inbox.ErrNotFound) {
		t.Fatalf("show after a failed delivery: got %v, want %v", err, inbox.ErrNotFound)
	}
	wantJournalKeys(t, "after a failed delivery", j)

	bad = reg("site:order:D-1:cancel", 1)
	wantReceipt(t, "redelivery", receive(t, ib, ev, []inbox.Registration{good, bad}, okAnswer()), inbox.Processed)
	wantReceipt(t, "second redelivery", receive(t, ib, ev, []inbox.Registration{good, bad}, okAnswer()), inbox.Duplicate)
	wantJournalKeys(t, "after the redeliveries", j, good.Op.Key, bad.Op.Key)
	if rs := listInbox(t, ib, inbox.Filter{}); len(rs) != 1 {
		t.Fatalf("inbox after the redeliveries: got %d events, want 1", len(rs))
	}
}

func testInboxListShow(t *testing.T, ib inbox.Store, j journal.Store) {
	t0 := time.Date(2026, 9, 16, 10, 0, 0, 0, time.FixedZone("Asia/Almaty", 5*3600))
	put := func(source, id string, at time.Time) {
		ev := inboxEvent(source, id, fmt.Sprintf(`{"id":%q}`, id))
		ev.ReceivedAt = at
		wantReceipt(t, "receive "+id, receive(t, ib, ev, nil, okAnswer()), inbox.Processed)
	}
	put("site", "s1", t0)
	put("ozon", "o1", t0.Add(time.Minute))
	put("site", "s2", t0.Add(2*time.Minute))
	put("ozon", "o2", t0.Add(2*time.Minute)) // same time: source, then id
	wantReceipt(t, "conflict", receive(t, ib, inboxEvent("site", "s1", `{"other":true}`), nil, okAnswer()), inbox.Conflict)

	ids := func(rs []inbox.Record) []string {
		var out []string
		for _, r := range rs {
			out = append(out, r.Source+"/"+r.EventID)
		}
		return out
	}
	for _, tc := range []struct {
		f    inbox.Filter
		want []string
	}{
		{inbox.Filter{}, []string{"ozon/o2", "site/s2", "ozon/o1", "site/s1"}},
		{inbox.Filter{Source: "site"}, []string{"site/s2", "site/s1"}},
		{inbox.Filter{Status: string(inbox.Processed), Source: "ozon"}, []string{"ozon/o2", "ozon/o1"}},
		{inbox.Filter{Limit: 2}, []string{"ozon/o2", "site/s2"}},
		{inbox.Filter{Source: "bitrix24"}, nil},
	} {
		rs := listInbox(t, ib, tc.f)
		if got := ids(rs); !slices.Equal(got, tc.want) {
			t.Fatalf("list %+v: got %q, want %q", tc.f, got, tc.want)
		}
		for _, r := range rs {
			wantUTC(t, "received_at", r.ReceivedAt)
			if wantConflicts := map[bool]int{true: 1, false: 0}[r.EventID == "s1"]; r.Conflicts != wantConflicts {
				t.Fatalf("list: %s has %d conflicts, want %d", r.EventID, r.Conflicts, wantConflicts)
			}
		}
	}
	if rs := listInbox(t, ib, inbox.Filter{Source: "site"}); !rs[1].ReceivedAt.Equal(t0) {
		t.Fatalf("received_at: got %v, want %v", rs[1].ReceivedAt, t0)
	}
	if _, err := ib.List(t.Context(), inbox.Filter{Status: "bogus"}); err == nil {
		t.Fatal("list with an unknown status: got nil, want an error")
	}
	if _, err := ib.Show(t.Context(), "site", "nope"); !errors.Is(err, inbox.ErrNotFound) {
		t.Fatalf("show of an unknown event: got %v, want %v", err, inbox.ErrNotFound)
	}
	if _, err := ib.Show(t.Context(), "ozon", "s1"); !errors.Is(err, inbox.ErrNotFound) {
		t.Fatalf("show of a known id under another source: got %v, want %v", err, inbox.ErrNotFound)
	}

	// A receipt time left zero is the store's now.
	ev := inboxEvent("site", "no-time", `{}`)
	ev.ReceivedAt = time.Time{}
	before := time.Now()
	receive(t, ib, ev, nil, inbox.Answer{Status: 204})
	d := showInbox(t, ib, "site", "no-time")
	wantUTC(t, "received_at", d.ReceivedAt)
	if d.ReceivedAt.Before(before.Add(-time.Minute)) || d.ReceivedAt.After(time.Now().Add(time.Minute)) {
		t.Fatalf("received_at of an event without one: got %v, want about %v", d.ReceivedAt, before)
	}
	if d.Answer.Status != 204 || d.Answer.ContentType != "" || len(d.Answer.Body) != 0 || len(d.Operations) != 0 {
		t.Fatalf("bare answer: got %+v with operations %q, want 204 without content and no operations", d.Answer, d.Operations)
	}

	// The default limit is 100.
	for i := range 100 {
		put("bulk", fmt.Sprintf("b%03d", i), t0.Add(-time.Duration(i+1)*time.Second))
	}
	if n := len(listInbox(t, ib, inbox.Filter{})); n != 100 {
		t.Fatalf("list without a limit: got %d events, want 100", n)
	}
	wantJournalKeys(t, "after events without registrations", j)
}

func testInboxValidates(t *testing.T, ib inbox.Store, j journal.Store) {
	ev := inboxEvent("site", "msg_invalid", `{}`)
	ok := reg("site:order:E-1:create", 1)
	noKind := reg("site:order:E-2:create", 1)
	noKind.Op.Kind = ""
	for name, tc := range map[string]struct {
		ev     inbox.Event
		regs   []inbox.Registration
		answer inbox.Answer
	}{
		"no source":      {inbox.Event{ID: ev.ID, Body: ev.Body}, nil, okAnswer()},
		"no event id":    {inbox.Event{Source: ev.Source, Body: ev.Body}, nil, okAnswer()},
		"no answer":      {ev, nil, inbox.Answer{}},
		"duplicate keys": {ev, []inbox.Registration{ok, ok}, okAnswer()},
		"no kind":        {ev, []inbox.Registration{ok, noKind}, okAnswer()},
	} {
		if r, err := ib.Receive(t.Context(), tc.ev, tc.regs, tc.answer); err == nil {
			t.Fatalf("%s: got %s, want an error", name, r.Outcome)
		}
	}
	wantInboxEmpty(t, ib, "after rejected deliveries")
	wantJournalKeys(t, "after rejected deliveries", j)
}
