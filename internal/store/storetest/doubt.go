package storetest

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/outbox"
)

// DoubtTakeover is the TakeoverAfter the Doubt topic opens its stores with.
const DoubtTakeover = time.Minute

// runDoubt runs the topic of what keeps exactly-once when 1C is slow or a worker
// dies mid-call: settle times, the takeover wait for open attempts, the counters of
// the retry policy, waking what waits on 1C, and the verification of creates that
// were in doubt. Each case has a journal and the outbox it enqueues into, on one
// database whose clock is a stopped Clock and whose TakeoverAfter is DoubtTakeover.
func runDoubt(t *testing.T, h Harness) {
	t.Helper()
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, s Stores, clock *Clock)
	}{
		{"SettleUntilDefersTheClaim", testSettleUntilDefersTheClaim},
		{"FailedKeepsItsSettleTime", testFailedKeepsItsSettleTime},
		{"YoungOpenAttemptIsNotTakenOver", testYoungOpenAttemptIsNotTakenOver},
		{"LockReportsAnOpenAttemptAsUnsettled", testLockReportsAnOpenAttemptAsUnsettled},
		{"FinishCountsUnknownOutcomesAndRequeueResets", testFinishCountsUnknownOutcomes},
		{"WakeWaitingWakesWhatWaitsOn1C", testWakeWaiting},
		{"VerificationIsLeasedAndRecordsWarnings", testVerification},
		{"LateVerificationFollowsTheFirst", testLateVerification},
		{"ListByErrorTextAndWarnings", testListByErrorAndWarnings},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			clock := NewClock()
			tc.fn(t, h.open(t, Options{Clock: clock, TakeoverAfter: DoubtTakeover}, "Journal", "Outbox"), clock)
		})
	}
}

func testSettleUntilDefersTheClaim(t *testing.T, s Stores, clock *Clock) {
	j := s.Journal
	key := "site:order:slow:create"
	registerNew(t, j, key)
	c := claimDue(t, j, "w1")
	settle := clock.Now().Add(30 * time.Second)
	finish(t, c, journal.Finish{Status: journal.StatusPending, Class: journal.ClassUnknown, Error: "no answer to the POST",
		NextAttemptAt: clock.Now(), SettleUntil: settle})
	op := get(t, j, key)
	if op.SettleUntil == nil || !op.SettleUntil.Equal(settle) || op.UnknownAttempts != 1 || op.RetryClass != journal.ClassUnknown {
		t.Fatalf("after an unknown outcome: settle %v unknown %d class %q, want %v, 1, unknown", op.SettleUntil, op.UnknownAttempts, op.RetryClass, settle)
	}
	// Due by next_attempt_at (a requeue, a resync), but 1C may still be writing: no claim.
	wantNothingDue(t, j)
	if op := get(t, j, key); !op.NextAttemptAt.Equal(settle) {
		t.Fatalf("next_attempt_at %v after a deferred claim, want the settle time %v", op.NextAttemptAt, settle)
	}
	if _, err := j.Requeue(t.Context(), key); err != nil {
		t.Fatal(err)
	}
	_, err := j.ClaimKey(t.Context(), key, "resync")
	var ue *journal.UnsettledError
	if !errors.As(err, &ue) || !errors.Is(err, journal.ErrUnsettled) || !ue.Until.Equal(settle) {
		t.Fatalf("ClaimKey before the settle time: %v, want *UnsettledError until %v", err, settle)
	}
	if d := show(t, j, key); len(d.History) != 1 {
		t.Fatalf("%d attempts after refused claims, want 1: a refused claim writes none", len(d.History))
	}
	clock.Advance(31 * time.Second)
	c = claimDue(t, j, "w2")
	if !c.Operation().Doubted || c.Attempt() != 2 {
		t.Fatalf("claim after the settle time: doubted %v attempt %d, want a doubted attempt 2", c.Operation().Doubted, c.Attempt())
	}
	if got := c.Operation().AttemptStartedAt; !got.Equal(clock.Now()) {
		t.Fatalf("attempt started at %v, want the claim's time %v", got, clock.Now())
	}
	finish(t, c, journal.Finish{Status: journal.StatusDone, Result: &journal.Result{Ref: "r1", Found: true}, VerifyAt: clock.Now()})
}

// A create that fails on its unknown outcomes keeps the settle time of its last POST:
// the store records it with the failure, Lock reports it to a cancel, and a requeue
// (a resync, a page's button, a webhook's wake) is not claimed before it.
func testFailedKeepsItsSettleTime(t *testing.T, s Stores, clock *Clock) {
	j := s.Journal
	key := "site:order:gaveup:create"
	registerNew(t, j, key)
	c := claimDue(t, j, "w1")
	settle := clock.Now().Add(30 * time.Second)
	finish(t, c, journal.Finish{Status: journal.StatusFailed, Class: journal.ClassUnknown,
		Error: "gave up after 1 attempts whose outcome was unknown", SettleUntil: settle})
	op := get(t, j, key)
	if op.Status != journal.StatusFailed || op.SettleUntil == nil || !op.SettleUntil.Equal(settle) {
		t.Fatalf("failed on an unknown outcome: %s settle %v, want failed settling until %v", op.Status, op.SettleUntil, settle)
	}
	l, err := j.Lock(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	if got := l.Operation().SettleUntil; got == nil || !got.Equal(settle) {
		t.Fatalf("Lock reports settle %v, want %v", got, settle)
	}
	if err := l.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := j.Requeue(t.Context(), key); err != nil {
		t.Fatal(err)
	}
	wantNothingDue(t, j)
	if _, err := j.ClaimKey(t.Context(), key, "resync"); !errors.Is(err, journal.ErrUnsettled) {
		t.Fatalf("ClaimKey of a requeued create whose last POST has not settled: %v, want ErrUnsettled", err)
	}
	clock.Advance(31 * time.Second)
	c = claimDue(t, j, "w2")
	if c.Attempt() != 2 || !c.Operation().Doubted {
		t.Fatalf("claim after the settle time: attempt %d doubted %v, want a doubted attempt 2", c.Attempt(), c.Operation().Doubted)
	}
	finish(t, c, journal.Finish{Status: journal.StatusDone, Result: &journal.Result{Ref: "r1", Found: true}})
}

func testYoungOpenAttemptIsNotTakenOver(t *testing.T, s Stores, clock *Clock) {
	j := s.Journal
	key := "kaspi:order:died:create"
	registerNew(t, j, key)
	c := claimDue(t, j, "w1")
	started := c.Operation().AttemptStartedAt
	// The worker's session dies (its lock goes) while its POST is in 1C.
	if err := c.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	clock.Advance(DoubtTakeover / 2)
	wantNothingDue(t, j)
	op := get(t, j, key)
	if want := started.Add(DoubtTakeover); !op.NextAttemptAt.Equal(want) {
		t.Fatalf("next_attempt_at %v, want the open attempt's start plus the takeover time %v", op.NextAttemptAt, want)
	}
	if _, err := j.ClaimKey(t.Context(), key, "resync"); !errors.Is(err, journal.ErrUnsettled) {
		t.Fatalf("ClaimKey of a young open attempt: %v, want ErrUnsettled", err)
	}
	if d := show(t, j, key); len(d.History) != 1 || d.History[0].FinishedAt != nil {
		t.Fatalf("attempts %+v, want the one open attempt, untouched", d.History)
	}
	clock.Advance(DoubtTakeover/2 + time.Second)
	c = claimDue(t, j, "w2")
	if !c.Operation().Doubted {
		t.Fatal("the claim that takes over an open attempt does not say the operation is in doubt")
	}
	d := show(t, j, key)
	if len(d.History) != 2 || d.History[0].Outcome != journal.OutcomeInterrupted {
		t.Fatalf("attempts %+v, want the first interrupted and a second open", d.History)
	}
	finish(t, c, journal.Finish{Status: journal.StatusDone, Result: &journal.Result{Ref: "r"}})
}

func testLockReportsAnOpenAttemptAsUnsettled(t *testing.T, s Stores, clock *Clock) {
	j := s.Journal
	key := "site:order:lock-open:create"
	registerNew(t, j, key)
	c := claimDue(t, j, "w1")
	started := c.Operation().AttemptStartedAt
	if err := c.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	l, err := j.Lock(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(t.Context())
	if got := l.Operation().SettleUntil; got == nil || !got.Equal(started.Add(DoubtTakeover)) {
		t.Fatalf("Lock's settle time %v, want the open attempt's start plus the takeover time", got)
	}
}

func testFinishCountsUnknownOutcomes(t *testing.T, s Stores, clock *Clock) {
	j := s.Journal
	key := "wb:order:9:create"
	registerNew(t, j, key)
	first := clock.Now()
	for i, class := range []string{journal.ClassTransient, journal.ClassUnknown, journal.ClassConfiguration, journal.ClassUnknown} {
		c := claimDue(t, j, "w")
		if i == 0 && c.Operation().FirstAttemptAt != nil {
			t.Fatalf("first attempt at %v before any attempt finished", c.Operation().FirstAttemptAt)
		}
		finish(t, c, journal.Finish{Status: journal.StatusPending, Class: class, Error: class, NextAttemptAt: clock.Now(),
			FirstAttemptAt: c.Operation().AttemptStartedAt})
		clock.Advance(time.Second)
	}
	op := get(t, j, key)
	if op.UnknownAttempts != 2 || op.Attempts != 4 || op.RetryClass != journal.ClassUnknown {
		t.Fatalf("unknown %d attempts %d class %q, want 2 of 4, unknown", op.UnknownAttempts, op.Attempts, op.RetryClass)
	}
	if op.FirstAttemptAt == nil || !op.FirstAttemptAt.Equal(first) {
		t.Fatalf("first attempt at %v, want %v", op.FirstAttemptAt, first)
	}
	d := show(t, j, key)
	for i, want := range []string{journal.ClassTransient, journal.ClassUnknown, journal.ClassConfiguration, journal.ClassUnknown} {
		if d.History[i].Class != want {
			t.Fatalf("attempt %d class %q, want %q", i+1, d.History[i].Class, want)
		}
	}
	op, err := j.Requeue(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	if op.UnknownAttempts != 0 || op.FirstAttemptAt != nil {
		t.Fatalf("after requeue: unknown %d first %v, want a fresh count and give-up clock", op.UnknownAttempts, op.FirstAttemptAt)
	}
	c := claimDue(t, j, "w")
	finish(t, c, journal.Finish{Status: journal.StatusFailed, Class: journal.ClassPermanent, Error: "422"})
	if op := get(t, j, key); op.RetryClass != "" {
		t.Fatalf("retry class %q on a failed operation, want none", op.RetryClass)
	}
}

func testWakeWaiting(t *testing.T, s Stores, clock *Clock) {
	j := s.Journal
	later := clock.Now().Add(time.Hour)
	classes := map[string]string{
		"site:order:w1:create": journal.ClassTransient,
		"site:order:w2:create": journal.ClassConfiguration,
		"site:order:w3:create": journal.ClassAuth,
		"site:order:w4:create": journal.ClassUnknown, // waits for its settle time, not for 1C
		"site:order:w5:create": journal.ClassWaiting, // waits for its source
	}
	for key, class := range classes {
		registerNew(t, j, key)
		c, err := j.ClaimKey(t.Context(), key, "w")
		if err != nil {
			t.Fatal(err)
		}
		finish(t, c, journal.Finish{Status: journal.StatusPending, Class: class, Error: class, NextAttemptAt: later})
	}
	wantNothingDue(t, j)
	n, err := j.WakeWaiting(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if n != 3 {
		t.Fatalf("woke %d, want the 3 waiting on 1C", n)
	}
	woken := map[string]bool{}
	for range 3 {
		c := claimDue(t, j, "w")
		woken[c.Operation().Key] = true
		finish(t, c, journal.Finish{Status: journal.StatusDone, Result: &journal.Result{Ref: "r"}})
	}
	wantNothingDue(t, j)
	for key, class := range classes {
		want := class == journal.ClassTransient || class == journal.ClassConfiguration || class == journal.ClassAuth
		if woken[key] != want {
			t.Fatalf("%s (%s): woken %v, want %v", key, class, woken[key], want)
		}
	}
}

func testVerification(t *testing.T, s Stores, clock *Clock) {
	j := s.Journal
	key := "kaspi:order:77:create"
	registerNew(t, j, key)
	if _, err := j.ClaimVerification(t.Context(), time.Minute); !errors.Is(err, journal.ErrNothingDue) {
		t.Fatalf("verification with none due: %v, want ErrNothingDue", err)
	}
	c := claimDue(t, j, "w")
	verifyAt := clock.Now().Add(10 * time.Second)
	finish(t, c, journal.Finish{Status: journal.StatusDone, Result: &journal.Result{Ref: "ref-1", Number: "1"}, VerifyAt: verifyAt})
	if op := get(t, j, key); op.VerifyAt == nil || !op.VerifyAt.Equal(verifyAt) || len(op.Warnings) != 0 || op.Warnings == nil {
		t.Fatalf("done: verify at %v warnings %#v, want %v and an empty list", op.VerifyAt, op.Warnings, verifyAt)
	}
	if _, err := j.ClaimVerification(t.Context(), time.Minute); !errors.Is(err, journal.ErrNothingDue) {
		t.Fatalf("verification before its time: %v, want ErrNothingDue", err)
	}
	clock.Advance(11 * time.Second)
	op, err := j.ClaimVerification(t.Context(), time.Minute)
	if err != nil || op.Key != key {
		t.Fatalf("verification: %v %q", err, op.Key)
	}
	if _, err := j.ClaimVerification(t.Context(), time.Minute); !errors.Is(err, journal.ErrNothingDue) {
		t.Fatalf("a leased verification claimed again: %v", err)
	}
	ws := []journal.Warning{{Code: journal.WarningDuplicateIn1C, Message: "1C holds 2 orders", Refs: []string{"ref-1", "ref-2"},
		Numbers: []string{"1", "2"}, At: clock.Now()}}
	msg := outbox.Message{Destination: "crm", Event: outbox.Event{Type: outbox.OrderDuplicateIn1C, AggregateType: "order",
		AggregateID: "kaspi:order:77", Data: json.RawMessage(`{"refs":["ref-1","ref-2"]}`), OccurredAt: clock.Now()}}
	if err := j.FinishVerification(t.Context(), key, ws, []outbox.Message{msg}); err != nil {
		t.Fatal(err)
	}
	op = get(t, j, key)
	if op.VerifyAt != nil || len(op.Warnings) != 1 || op.Warnings[0].Code != journal.WarningDuplicateIn1C ||
		len(op.Warnings[0].Refs) != 2 || op.Warnings[0].Refs[1] != "ref-2" {
		t.Fatalf("after verification: verify at %v warnings %+v, want none due and the duplicate", op.VerifyAt, op.Warnings)
	}
	recs, err := s.Outbox.List(t.Context(), outbox.ListFilter{AggregateID: "kaspi:order:77"})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].Type != outbox.OrderDuplicateIn1C || recs[0].Destination != "crm" {
		t.Fatalf("outbox %+v, want the order.duplicate_in_1c event", recs)
	}
	clock.Advance(2 * time.Minute) // past the lease: nothing more to verify
	if _, err := j.ClaimVerification(t.Context(), time.Minute); !errors.Is(err, journal.ErrNothingDue) {
		t.Fatalf("verification after it was finished: %v, want ErrNothingDue", err)
	}
	if err := j.FinishVerification(t.Context(), "no:such:key", nil, nil); !errors.Is(err, journal.ErrNotFound) {
		t.Fatalf("finish verification of an unknown key: %v, want ErrNotFound", err)
	}
}

// A done create that was in doubt is verified twice: when its first verification
// ends, its late verification (onec.late_verify after the doubtful POST) becomes due
// at its own time, and when that one ends nothing more is.
func testLateVerification(t *testing.T, s Stores, clock *Clock) {
	j := s.Journal
	key := "kaspi:order:78:create"
	registerNew(t, j, key)
	c := claimDue(t, j, "w")
	verifyAt, lateAt := clock.Now(), clock.Now().Add(time.Hour)
	finish(t, c, journal.Finish{Status: journal.StatusDone, Result: &journal.Result{Ref: "ref-1", Number: "1"},
		VerifyAt: verifyAt, LateVerifyAt: lateAt})
	if op := get(t, j, key); op.LateVerifyAt == nil || !op.LateVerifyAt.Equal(lateAt) {
		t.Fatalf("done: late verify at %v, want %v", op.LateVerifyAt, lateAt)
	}
	op, err := j.ClaimVerification(t.Context(), time.Minute)
	if err != nil || op.Key != key {
		t.Fatalf("first verification: %v %q", err, op.Key)
	}
	if err := j.FinishVerification(t.Context(), key, nil, nil); err != nil {
		t.Fatal(err)
	}
	if op := get(t, j, key); op.VerifyAt == nil || !op.VerifyAt.Equal(lateAt) || op.LateVerifyAt != nil {
		t.Fatalf("after the first verification: verify at %v late %v, want %v and none", op.VerifyAt, op.LateVerifyAt, lateAt)
	}
	clock.Advance(2 * time.Minute) // past the first one's lease, before the late one
	if _, err := j.ClaimVerification(t.Context(), time.Minute); !errors.Is(err, journal.ErrNothingDue) {
		t.Fatalf("the late verification before its time: %v, want ErrNothingDue", err)
	}
	clock.Advance(time.Hour)
	if op, err := j.ClaimVerification(t.Context(), time.Minute); err != nil || op.Key != key {
		t.Fatalf("late verification: %v %q", err, op.Key)
	}
	if err := j.FinishVerification(t.Context(), key, nil, nil); err != nil {
		t.Fatal(err)
	}
	if op := get(t, j, key); op.VerifyAt != nil || op.LateVerifyAt != nil {
		t.Fatalf("after the late verification: verify at %v late %v, want none", op.VerifyAt, op.LateVerifyAt)
	}
	clock.Advance(2 * time.Minute)
	if _, err := j.ClaimVerification(t.Context(), time.Minute); !errors.Is(err, journal.ErrNothingDue) {
		t.Fatalf("a third verification: %v, want ErrNothingDue", err)
	}
}

func testListByErrorAndWarnings(t *testing.T, s Stores, clock *Clock) {
	j := s.Journal
	errs := map[string]string{
		"site:order:e1:create": "1c create: transient (HTTP 503): Service Unavailable",
		"site:order:e2:create": "1c create: permanent (HTTP 422): Номенклатура НЕ найдена",
		"site:order:e3:create": "",
	}
	for key, msg := range errs {
		registerNew(t, j, key)
		c, err := j.ClaimKey(t.Context(), key, "w")
		if err != nil {
			t.Fatal(err)
		}
		if msg == "" {
			finish(t, c, journal.Finish{Status: journal.StatusDone, Result: &journal.Result{Ref: "r"},
				Warnings: []journal.Warning{{Code: journal.WarningDuplicateIn1C, Message: "two", Refs: []string{"a", "b"}}}})
			continue
		}
		finish(t, c, journal.Finish{Status: journal.StatusFailed, Error: msg})
	}
	for _, tc := range []struct {
		f    journal.Filter
		want []string
	}{
		{journal.Filter{ErrorContains: "service unavailable"}, []string{"site:order:e1:create"}},
		{journal.Filter{ErrorContains: "НЕ НАЙДЕНА"}, []string{"site:order:e2:create"}},
		{journal.Filter{ErrorContains: "HTTP", Status: journal.StatusFailed, Limit: 1}, nil}, // one of the two
		{journal.Filter{WarningsOnly: true}, []string{"site:order:e3:create"}},
	} {
		ops, err := j.List(t.Context(), tc.f)
		if err != nil {
			t.Fatal(err)
		}
		if tc.want == nil {
			if len(ops) != 1 {
				t.Fatalf("%+v: %d operations, want the limit of 1", tc.f, len(ops))
			}
			continue
		}
		if len(ops) != len(tc.want) || ops[0].Key != tc.want[0] {
			t.Fatalf("%+v: got %d operations (%v), want %v", tc.f, len(ops), ops, tc.want)
		}
	}
}
