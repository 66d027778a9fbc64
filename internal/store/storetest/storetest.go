// Package storetest is the conformance suite of journal.Store (and of outbox.Store,
// inbox.Store, stock.Store, connectors.CursorStore and session.Store): the behaviour every store
// (PostgreSQL, SQLite) must show, run by each store's tests through one entry, Run,
// with a Harness that opens a fresh, migrated, empty database per case (see Run).
//
// The suite is split into topics, one file each: the journal (this file, failed.go,
// lock.go, counts.go), cursors, doubt, accountant, inbox, outbox, paging, stock and
// sessions.
// Subtests run in parallel, each on its own database.
package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/order"
)

// runJournal runs the journal topic, on the store's own clock.
func runJournal(t *testing.T, h Harness) {
	t.Helper()
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, s journal.Store)
	}{
		{"RegisterNew", testRegisterNew},
		{"RegisterValidates", testRegisterValidates},
		{"RegisterDuplicateReturnsSaved", testRegisterDuplicateReturnsSaved},
		{"RegisterConflictIsRecorded", testRegisterConflictIsRecorded},
		{"RegisterConcurrentOneWins", testRegisterConcurrentOneWins},
		{"GetShowUnknown", testGetShowUnknown},
		{"ClaimDueNothingDue", testClaimDueNothingDue},
		{"ClaimDueOnlyDuePending", testClaimDueOnlyDuePending},
		{"ClaimDueOrder", testClaimDueOrder},
		{"ClaimDueSkipsLocked", testClaimDueSkipsLocked},
		{"ClaimDueConcurrentWorkers", testClaimDueConcurrentWorkers},
		{"AttemptCommittedWhileClaimOpen", testAttemptCommittedWhileClaimOpen},
		{"FinishDone", testFinishDone},
		{"FinishPending", testFinishPending},
		{"FinishFailed", testFinishFailed},
		{"FinishPayload", testFinishPayload},
		{"FinishOnceReleaseTwice", testFinishOnceReleaseTwice},
		{"ReleaseThenInterrupted", testReleaseThenInterrupted},
		{"ClaimKey", testClaimKey},
		{"Requeue", testRequeue},
		{"List", testList},
		{"ShowOrdering", testShowOrdering},
		{"ExactDecimals", testExactDecimals},
		{"RegisterFailedNew", testRegisterFailedNew},
		{"RegisterFailedValidates", testRegisterFailedValidates},
		{"RegisterFailedDuplicate", testRegisterFailedDuplicate},
		{"RegisterFailedConflict", testRegisterFailedConflict},
		{"RegisterFailedExistingKeyStays", testRegisterFailedExistingKeyStays},
		{"ReviseFailedAtRegistration", testReviseFailedAtRegistration},
		{"ReviseAfterConflictingRegistration", testReviseAfterConflictingRegistration},
		{"ReviseRefusesWhatReached1C", testReviseRefusesWhatReached1C},
		{"ReviseRefusesInterruptedAttempt", testReviseRefusesInterruptedAttempt},
		{"ReviseRefusesDoneAndPending", testReviseRefusesDoneAndPending},
		{"ReviseUnknownAndInvalid", testReviseUnknownAndInvalid},
		{"LockUnknown", testLockUnknown},
		{"LockHoldsTheRow", testLockHoldsTheRow},
		{"LockFail", testLockFail},
		{"LockReleaseTwice", testLockReleaseTwice},
		{"LockWhileHoldingAClaim", testLockWhileHoldingAClaim},
		{"Counts", testCounts},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, h.open(t, Options{}, "Journal").Journal)
		})
	}
}

// ---- helpers ----

func payload(key string, n int) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"key":%q,"n":%d,"lines":[{"sku":"SKU-1","quantity":2,"price":1500.10}]}`, key, n))
}

func newOp(key string) journal.NewOperation {
	return journal.NewOperation{
		Key:        key,
		Kind:       order.KindCreate,
		Source:     strings.SplitN(key, ":", 2)[0],
		ExternalID: key,
		Payload:    payload(key, 1),
	}
}

func register(t *testing.T, s journal.Store, op journal.NewOperation) journal.Registration {
	t.Helper()
	r, err := s.Register(t.Context(), op)
	if err != nil {
		t.Fatalf("register %s: %v", op.Key, err)
	}
	return r
}

func registerNew(t *testing.T, s journal.Store, key string) journal.Operation {
	t.Helper()
	r := register(t, s, newOp(key))
	if r.Outcome != journal.Registered {
		t.Fatalf("register %s: got %s, want %s", key, r.Outcome, journal.Registered)
	}
	return r.Operation
}

// released releases c when the test ends (a no-op when it was finished).
func released(t *testing.T, c journal.Claim) journal.Claim {
	t.Cleanup(func() {
		if err := c.Release(context.Background()); err != nil {
			t.Errorf("release: %v", err)
		}
	})
	return c
}

// claimTimeout bounds a claim in the helpers, so that a store that waits where it
// should skip fails the test rather than hanging it.
const claimTimeout = 10 * time.Second

func claimDue(t *testing.T, s journal.Store, worker string) journal.Claim {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), claimTimeout)
	defer cancel()
	c, err := s.ClaimDue(ctx, worker)
	if err != nil {
		t.Fatalf("claim due (%s): %v", worker, err)
	}
	return released(t, c)
}

func claimKey(t *testing.T, s journal.Store, key string) journal.Claim {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), claimTimeout)
	defer cancel()
	c, err := s.ClaimKey(ctx, key, "test")
	if err != nil {
		t.Fatalf("claim %s: %v", key, err)
	}
	return released(t, c)
}

func finish(t *testing.T, c journal.Claim, f journal.Finish) {
	t.Helper()
	if err := c.Finish(t.Context(), f); err != nil {
		t.Fatalf("finish %s: %v", c.Operation().Key, err)
	}
}

// setState claims key and finishes it with f.
func setState(t *testing.T, s journal.Store, key string, f journal.Finish) {
	t.Helper()
	finish(t, claimKey(t, s, key), f)
}

func wantNothingDue(t *testing.T, s journal.Store) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), claimTimeout)
	defer cancel()
	c, err := s.ClaimDue(ctx, "probe")
	if err == nil {
		c.Release(ctx)
		t.Fatalf("claim due: got %s, want %v", c.Operation().Key, journal.ErrNothingDue)
	}
	if !errors.Is(err, journal.ErrNothingDue) {
		t.Fatalf("claim due: got %v, want %v", err, journal.ErrNothingDue)
	}
}

func get(t *testing.T, s journal.Store, key string) journal.Operation {
	t.Helper()
	op, err := s.Get(t.Context(), key)
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	return op
}

func show(t *testing.T, s journal.Store, key string) journal.Detail {
	t.Helper()
	d, err := s.Show(t.Context(), key)
	if err != nil {
		t.Fatalf("show %s: %v", key, err)
	}
	return d
}

// decode parses JSON keeping numbers as written (json.Number).
func decode(t *testing.T, b []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return v
}

// sameJSON compares values, not bytes: a store may normalise key order and spaces,
// never a number.
func sameJSON(t *testing.T, what string, got, want []byte) {
	t.Helper()
	if !reflect.DeepEqual(decode(t, got), decode(t, want)) {
		t.Fatalf("%s: got %s, want %s", what, got, want)
	}
}

func near(got, want time.Time) bool {
	d := got.Sub(want)
	return d < time.Millisecond && d > -time.Millisecond
}

func wantUTC(t *testing.T, what string, tm time.Time) {
	t.Helper()
	if tm.IsZero() || tm.Location() != time.UTC {
		t.Fatalf("%s: got %v, want a UTC time", what, tm)
	}
}

// ---- tests ----

func testRegisterNew(t *testing.T, s journal.Store) {
	op := newOp("kaspi:order:1001:create")
	before := time.Now()
	r := register(t, s, op)
	if got, want := r.Outcome, journal.Registered; got != want {
		t.Fatalf("outcome: got %s, want %s", got, want)
	}
	got := r.Operation
	if got.Key != op.Key || got.Kind != op.Kind || got.Source != "kaspi" || got.ExternalID != op.ExternalID {
		t.Fatalf("operation: got %+v, want the registered fields of %+v", got, op)
	}
	if got.Status != journal.StatusPending {
		t.Fatalf("status: got %s, want %s", got.Status, journal.StatusPending)
	}
	if got.Attempts != 0 || got.LastError != "" || got.Result != nil {
		t.Fatalf("new operation: got attempts %d, last_error %q, result %v; want 0, empty, nil", got.Attempts, got.LastError, got.Result)
	}
	if got, want := got.PayloadSHA256, order.SHA256Hex(op.Payload); got != want {
		t.Fatalf("payload_sha256: got %s, want %s", got, want)
	}
	sameJSON(t, "payload", got.Payload, op.Payload)
	wantUTC(t, "next_attempt_at", got.NextAttemptAt)
	wantUTC(t, "created_at", got.CreatedAt)
	wantUTC(t, "updated_at", got.UpdatedAt)
	if got.NextAttemptAt.Before(before.Add(-time.Minute)) || got.NextAttemptAt.After(time.Now().Add(time.Minute)) {
		t.Fatalf("next_attempt_at: got %v, want about now (%v)", got.NextAttemptAt, before)
	}
	if !got.CreatedAt.Equal(got.UpdatedAt) || !got.NextAttemptAt.Equal(got.CreatedAt) {
		t.Fatalf("times: created %v, updated %v, next attempt %v: want all equal", got.CreatedAt, got.UpdatedAt, got.NextAttemptAt)
	}

	saved := get(t, s, op.Key)
	if !reflect.DeepEqual(stripPayload(saved), stripPayload(got)) {
		t.Fatalf("get: got %+v, want %+v", saved, got)
	}
	sameJSON(t, "saved payload", saved.Payload, op.Payload)
}

func stripPayload(op journal.Operation) journal.Operation {
	op.Payload = nil
	return op
}

func testRegisterValidates(t *testing.T, s journal.Store) {
	valid := newOp("site:order:A-1:create")
	for name, op := range map[string]journal.NewOperation{
		"empty key":       {Kind: valid.Kind, Payload: valid.Payload},
		"empty kind":      {Key: valid.Key, Payload: valid.Payload},
		"empty payload":   {Key: valid.Key, Kind: valid.Kind},
		"invalid payload": {Key: valid.Key, Kind: valid.Kind, Payload: json.RawMessage(`{"a":`)},
	} {
		if r, err := s.Register(t.Context(), op); err == nil {
			t.Fatalf("%s: got %s, want an error", name, r.Outcome)
		}
	}
	if _, err := s.Get(t.Context(), valid.Key); !errors.Is(err, journal.ErrNotFound) {
		t.Fatalf("get after rejected registrations: got %v, want %v", err, journal.ErrNotFound)
	}
}

func testRegisterDuplicateReturnsSaved(t *testing.T, s journal.Store) {
	op := newOp("ozon:posting:05708065-0029-1:create")
	first := register(t, s, op)
	again := register(t, s, op)
	if got, want := again.Outcome, journal.Duplicate; got != want {
		t.Fatalf("second registration: got %s, want %s", got, want)
	}
	if !reflect.DeepEqual(stripPayload(again.Operation), stripPayload(first.Operation)) {
		t.Fatalf("duplicate: got %+v, want the saved %+v", again.Operation, first.Operation)
	}

	// Once done, the same registration answers with the saved result.
	res := &journal.Result{Ref: "7f1c2a3e-0000-4000-8000-000000000001", Number: "ТД-000123", Date: "2026-09-16T10:00:00"}
	setState(t, s, op.Key, journal.Finish{Status: journal.StatusDone, Result: res, Ref: res.Ref})
	done := register(t, s, op)
	if got, want := done.Outcome, journal.Duplicate; got != want {
		t.Fatalf("registration after done: got %s, want %s", got, want)
	}
	if done.Operation.Status != journal.StatusDone || done.Operation.Result == nil || !reflect.DeepEqual(*done.Operation.Result, *res) {
		t.Fatalf("registration after done: got status %s result %+v, want done with %+v", done.Operation.Status, done.Operation.Result, res)
	}
	if d := show(t, s, op.Key); len(d.Conflicts) != 0 {
		t.Fatalf("conflicts after duplicates: got %+v, want none", d.Conflicts)
	}
}

func testRegisterConflictIsRecorded(t *testing.T, s journal.Store) {
	a := newOp("wb:order:1234567:create")
	b := a
	b.Payload = payload(a.Key, 2)
	saved := register(t, s, a).Operation

	r := register(t, s, b)
	if got, want := r.Outcome, journal.Conflicted; got != want {
		t.Fatalf("other payload: got %s, want %s", got, want)
	}
	if got, want := r.Operation.PayloadSHA256, order.SHA256Hex(a.Payload); got != want {
		t.Fatalf("conflict answers with payload_sha256 %s, want the saved %s", got, want)
	}
	sameJSON(t, "conflict answers with payload", r.Operation.Payload, a.Payload)
	if !reflect.DeepEqual(stripPayload(r.Operation), stripPayload(saved)) {
		t.Fatalf("conflict: got %+v, want the untouched %+v", r.Operation, saved)
	}
	now := get(t, s, a.Key)
	sameJSON(t, "saved payload after conflict", now.Payload, a.Payload)
	if !reflect.DeepEqual(stripPayload(now), stripPayload(saved)) {
		t.Fatalf("operation after conflict: got %+v, want %+v", now, saved)
	}

	d := show(t, s, a.Key)
	if len(d.Conflicts) != 1 {
		t.Fatalf("conflicts: got %d, want 1", len(d.Conflicts))
	}
	c := d.Conflicts[0]
	if got, want := c.PayloadSHA256, order.SHA256Hex(b.Payload); got != want {
		t.Fatalf("conflict payload_sha256: got %s, want %s", got, want)
	}
	sameJSON(t, "conflict payload", c.Payload, b.Payload)
	wantUTC(t, "conflict at", c.At)

	// The same payload as saved is still a duplicate; the other one conflicts again.
	if got := register(t, s, a).Outcome; got != journal.Duplicate {
		t.Fatalf("saved payload again: got %s, want %s", got, journal.Duplicate)
	}
	if got := register(t, s, b).Outcome; got != journal.Conflicted {
		t.Fatalf("other payload again: got %s, want %s", got, journal.Conflicted)
	}
	// The same conflicting payload is one record, counted; another one is a second.
	cs := show(t, s, a.Key).Conflicts
	if len(cs) != 1 || cs[0].Times != 2 || cs[0].LastAt.Before(cs[0].At) {
		t.Fatalf("conflicts after the same one again: got %+v, want one record seen twice", cs)
	}
	c2 := b
	c2.Payload = json.RawMessage(`{"n": 3}`)
	if got := register(t, s, c2).Outcome; got != journal.Conflicted {
		t.Fatalf("third payload: got %s, want %s", got, journal.Conflicted)
	}
	if got := len(show(t, s, a.Key).Conflicts); got != 2 {
		t.Fatalf("conflicts after a different one: got %d, want 2", got)
	}
}

func testRegisterConcurrentOneWins(t *testing.T, s journal.Store) {
	const n = 50
	op := newOp("kaspi:order:777:create")
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		outcomes = map[journal.RegisterOutcome]int{}
		errs     []error
	)
	start := make(chan struct{})
	for range n {
		wg.Go(func() {
			<-start
			r, err := s.Register(context.Background(), op)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			if r.Operation.Key != op.Key {
				errs = append(errs, fmt.Errorf("answered with operation %q", r.Operation.Key))
			}
			outcomes[r.Outcome]++
		})
	}
	close(start)
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d of %d registrations failed, first: %v", len(errs), n, errs[0])
	}
	if outcomes[journal.Registered] != 1 || outcomes[journal.Duplicate] != n-1 {
		t.Fatalf("outcomes: got %v, want 1 registered and %d duplicates", outcomes, n-1)
	}
}

func testGetShowUnknown(t *testing.T, s journal.Store) {
	if _, err := s.Get(t.Context(), "no:such:key"); !errors.Is(err, journal.ErrNotFound) {
		t.Fatalf("get: got %v, want %v", err, journal.ErrNotFound)
	}
	if _, err := s.Show(t.Context(), "no:such:key"); !errors.Is(err, journal.ErrNotFound) {
		t.Fatalf("show: got %v, want %v", err, journal.ErrNotFound)
	}
}

func testClaimDueNothingDue(t *testing.T, s journal.Store) {
	wantNothingDue(t, s)
}

func testClaimDueOnlyDuePending(t *testing.T, s journal.Store) {
	registerNew(t, s, "a:order:due:create")
	registerNew(t, s, "b:order:done:create")
	registerNew(t, s, "c:order:failed:create")
	registerNew(t, s, "d:order:later:create")
	setState(t, s, "b:order:done:create", journal.Finish{Status: journal.StatusDone, Result: &journal.Result{Ref: "r", Number: "1"}})
	setState(t, s, "c:order:failed:create", journal.Finish{Status: journal.StatusFailed, Error: "422 rejected"})
	setState(t, s, "d:order:later:create", journal.Finish{Status: journal.StatusPending, Error: "503", NextAttemptAt: time.Now().Add(time.Hour)})

	c := claimDue(t, s, "w1")
	if got, want := c.Operation().Key, "a:order:due:create"; got != want {
		t.Fatalf("claimed: got %s, want %s", got, want)
	}
	wantNothingDue(t, s)
	finish(t, c, journal.Finish{Status: journal.StatusDone, Result: &journal.Result{Ref: "r2", Number: "2"}})
	wantNothingDue(t, s)
}

func testClaimDueOrder(t *testing.T, s journal.Store) {
	registerNew(t, s, "x:order:1:create")
	registerNew(t, s, "y:order:2:create")
	registerNew(t, s, "z:order:3:create")
	// y waits an hour, then is requeued: due now, after x.
	setState(t, s, "y:order:2:create", journal.Finish{Status: journal.StatusPending, Error: "e", NextAttemptAt: time.Now().Add(time.Hour)})
	if _, err := s.Requeue(t.Context(), "y:order:2:create"); err != nil {
		t.Fatal(err)
	}
	var got []string
	for range 3 {
		c := claimDue(t, s, "w")
		got = append(got, c.Operation().Key)
		finish(t, c, journal.Finish{Status: journal.StatusDone, Result: &journal.Result{Ref: "r"}})
	}
	if want := []string{"x:order:1:create", "z:order:3:create", "y:order:2:create"}; !slices.Equal(got, want) {
		t.Fatalf("claim order: got %v, want %v (by next_attempt_at, then key)", got, want)
	}
}

func testClaimDueSkipsLocked(t *testing.T, s journal.Store) {
	registerNew(t, s, "s:order:1:create")
	registerNew(t, s, "s:order:2:create")
	c1 := claimDue(t, s, "w1")
	c2 := claimDue(t, s, "w2")
	if c1.Operation().Key == c2.Operation().Key {
		t.Fatalf("two open claims got the same operation %s", c1.Operation().Key)
	}
	wantNothingDue(t, s) // both are held: the third claim skips them rather than waiting
	if err := c1.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	c3 := claimDue(t, s, "w3")
	if got, want := c3.Operation().Key, c1.Operation().Key; got != want {
		t.Fatalf("after release: got %s, want %s", got, want)
	}
}

func testClaimDueConcurrentWorkers(t *testing.T, s journal.Store) {
	const ops, workers = 30, 4
	for i := range ops {
		registerNew(t, s, fmt.Sprintf("cw:order:%03d:create", i))
	}
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		claimed = map[string]int{}
		errs    []error
	)
	for w := range workers {
		wg.Go(func() {
			ctx := context.Background()
			for {
				c, err := s.ClaimDue(ctx, fmt.Sprintf("w%d", w))
				if errors.Is(err, journal.ErrNothingDue) {
					return
				}
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					return
				}
				mu.Lock()
				claimed[c.Operation().Key]++
				mu.Unlock()
				err = c.Finish(ctx, journal.Finish{Status: journal.StatusDone, Result: &journal.Result{Ref: "r"}})
				c.Release(ctx)
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("workers failed: %v", errs)
	}
	if len(claimed) != ops {
		t.Fatalf("claimed %d operations, want %d", len(claimed), ops)
	}
	for k, n := range claimed {
		if n != 1 {
			t.Fatalf("%s was claimed %d times, want once", k, n)
		}
	}
}

func testAttemptCommittedWhileClaimOpen(t *testing.T, s journal.Store) {
	op := registerNew(t, s, "site:order:A-2:create")
	c := claimDue(t, s, "worker-1")
	if got, want := c.Attempt(), 1; got != want {
		t.Fatalf("attempt: got %d, want %d", got, want)
	}
	got := c.Operation()
	if got.Key != op.Key || got.Attempts != 1 || got.Status != journal.StatusPending {
		t.Fatalf("claimed operation: got key %s attempts %d status %s, want %s 1 pending", got.Key, got.Attempts, got.Status, op.Key)
	}
	sameJSON(t, "claimed payload", got.Payload, op.Payload)

	// Another connection sees the attempt row while the claim is still open.
	d := show(t, s, op.Key)
	if len(d.History) != 1 {
		t.Fatalf("attempts visible during the claim: got %d, want 1", len(d.History))
	}
	a := d.History[0]
	if a.Attempt != 1 || a.Worker != "worker-1" || a.Outcome != "" || a.FinishedAt != nil {
		t.Fatalf("open attempt: got %+v, want attempt 1 by worker-1, no outcome, not finished", a)
	}
	wantUTC(t, "started_at", a.StartedAt)
}

func testFinishDone(t *testing.T, s journal.Store) {
	key := "kaspi:order:512344101:create"
	registerNew(t, s, key)
	setState(t, s, key, journal.Finish{Status: journal.StatusPending, Error: "1C answered 503", NextAttemptAt: time.Now().Add(-time.Second)})
	if got := get(t, s, key).LastError; got != "1C answered 503" {
		t.Fatalf("last_error after retry: got %q, want %q", got, "1C answered 503")
	}

	c := claimDue(t, s, "w")
	if got, want := c.Attempt(), 2; got != want {
		t.Fatalf("attempt: got %d, want %d", got, want)
	}
	res := &journal.Result{Ref: "0f8fad5b-d9cb-469f-a165-70867728950e", Number: "ТД-000777", Date: "2026-09-16T10:00:00",
		Found: true, Note: "found by external id", Warnings: []string{"two orders in 1C"}}
	ex := json.RawMessage(`{"calls":[{"method":"GET","status":200,"sha256":"ab"}]}`)
	finish(t, c, journal.Finish{Status: journal.StatusDone, Result: res, Ref: res.Ref, Exchanges: ex})

	op := get(t, s, key)
	if op.Status != journal.StatusDone || op.LastError != "" || op.Attempts != 2 {
		t.Fatalf("done: got status %s last_error %q attempts %d, want done, empty, 2", op.Status, op.LastError, op.Attempts)
	}
	if op.Result == nil || !reflect.DeepEqual(*op.Result, *res) {
		t.Fatalf("result: got %+v, want %+v", op.Result, res)
	}
	if !op.UpdatedAt.After(op.CreatedAt) && !op.UpdatedAt.Equal(op.CreatedAt) {
		t.Fatalf("updated_at %v before created_at %v", op.UpdatedAt, op.CreatedAt)
	}
	d := show(t, s, key)
	if len(d.History) != 2 {
		t.Fatalf("attempts: got %d, want 2", len(d.History))
	}
	if a := d.History[0]; a.Outcome != journal.OutcomeRetry || a.Error != "1C answered 503" || a.FinishedAt == nil {
		t.Fatalf("first attempt: got %+v, want retry with its error", a)
	}
	a := d.History[1]
	if a.Attempt != 2 || a.Outcome != journal.OutcomeDone || a.FinishedAt == nil || a.Ref != res.Ref || a.Error != "" {
		t.Fatalf("second attempt: got %+v, want attempt 2 done with ref %s", a, res.Ref)
	}
	wantUTC(t, "finished_at", *a.FinishedAt)
	sameJSON(t, "exchanges", a.Exchanges, ex)
	wantNothingDue(t, s)
}

func testFinishPending(t *testing.T, s journal.Store) {
	key := "ozon:posting:1-1:create"
	registerNew(t, s, key)
	next := time.Now().Add(time.Hour).UTC()
	c := claimDue(t, s, "w")
	finish(t, c, journal.Finish{Status: journal.StatusPending, Error: "timeout after POST: maybe created", NextAttemptAt: next})
	op := get(t, s, key)
	if op.Status != journal.StatusPending || op.LastError != "timeout after POST: maybe created" || op.Attempts != 1 || op.Result != nil {
		t.Fatalf("retry: got status %s last_error %q attempts %d result %v", op.Status, op.LastError, op.Attempts, op.Result)
	}
	if !near(op.NextAttemptAt, next) {
		t.Fatalf("next_attempt_at: got %v, want %v", op.NextAttemptAt, next)
	}
	if a := show(t, s, key).History[0]; a.Outcome != journal.OutcomeRetry || a.Error != op.LastError || a.FinishedAt == nil {
		t.Fatalf("attempt: got %+v, want retry with the error", a)
	}
	wantNothingDue(t, s)
}

func testFinishFailed(t *testing.T, s journal.Store) {
	key := "site:order:bad:create"
	registerNew(t, s, key)
	c := claimDue(t, s, "w")
	finish(t, c, journal.Finish{Status: journal.StatusFailed, Error: "422 lines[0].sku: unknown", Exchanges: json.RawMessage(`[]`)})
	op := get(t, s, key)
	if op.Status != journal.StatusFailed || op.LastError != "422 lines[0].sku: unknown" || op.Attempts != 1 || op.Result != nil {
		t.Fatalf("failed: got status %s last_error %q attempts %d result %v", op.Status, op.LastError, op.Attempts, op.Result)
	}
	if a := show(t, s, key).History[0]; a.Outcome != journal.OutcomeFailed || a.Error != op.LastError || a.FinishedAt == nil {
		t.Fatalf("attempt: got %+v, want failed with the error", a)
	}
	wantNothingDue(t, s)
}

// A create registered with a fetch payload keeps the order fetched for it: Finish with
// Payload replaces the payload and its SHA-256 (of the bytes given), with any verdict;
// a Finish without Payload leaves the payload alone.
func testFinishPayload(t *testing.T, s journal.Store) {
	key := "ozon:posting:05708065-0029-1:create"
	fetch := newOp(key)
	fetch.Payload = json.RawMessage(`{"fetch":{"source":"ozon","posting_number":"05708065-0029-1"}}`)
	if r := register(t, s, fetch); r.Outcome != journal.Registered {
		t.Fatalf("register the fetch payload: got %s, want %s", r.Outcome, journal.Registered)
	}
	fetched := json.RawMessage(`{"source": "ozon", "external_id": "05708065-0029-1",
		"lines": [{"sku": "SKU-1", "quantity": 2, "price": 1500.10}], "total": 3000.20}`)

	c := claimDue(t, s, "w")
	finish(t, c, journal.Finish{Status: journal.StatusPending, Error: "1C answered 503",
		NextAttemptAt: time.Now().Add(-time.Second), Payload: fetched})
	op := get(t, s, key)
	if got, want := op.PayloadSHA256, order.SHA256Hex(fetched); got != want {
		t.Fatalf("payload_sha256 after finish with a payload: got %s, want %s (of the bytes given)", got, want)
	}
	sameJSON(t, "payload after finish with a payload", op.Payload, fetched)
	if op.Status != journal.StatusPending || op.LastError != "1C answered 503" || op.Attempts != 1 {
		t.Fatalf("verdict: got status %s last_error %q attempts %d, want the retry written with the payload", op.Status, op.LastError, op.Attempts)
	}
	if r := register(t, s, journal.NewOperation{Key: key, Kind: fetch.Kind, Source: fetch.Source, ExternalID: fetch.ExternalID, Payload: fetched}); r.Outcome != journal.Duplicate {
		t.Fatalf("registering the fetched order: got %s, want %s (it is the saved payload now)", r.Outcome, journal.Duplicate)
	}

	// An invalid payload is refused before anything is written, and the claim stays
	// open for a valid verdict; one without Payload keeps the payload.
	c = claimDue(t, s, "w")
	if err := c.Finish(t.Context(), journal.Finish{Status: journal.StatusDone, Payload: json.RawMessage(`{"a":`)}); err == nil {
		t.Fatal("finish with an invalid payload: got nil, want an error")
	}
	res := &journal.Result{Ref: "7f1c2a3e-0000-4000-8000-000000000002", Number: "ТД-000124"}
	finish(t, c, journal.Finish{Status: journal.StatusDone, Result: res, Ref: res.Ref})
	op = get(t, s, key)
	if op.Status != journal.StatusDone || op.PayloadSHA256 != order.SHA256Hex(fetched) {
		t.Fatalf("after a finish without payload: got status %s payload_sha256 %s, want done with %s", op.Status, op.PayloadSHA256, order.SHA256Hex(fetched))
	}
	sameJSON(t, "payload after a finish without payload", op.Payload, fetched)
	if d := show(t, s, key); len(d.Conflicts) != 0 || len(d.History) != 2 {
		t.Fatalf("show: got %d conflicts and %d attempts, want none and 2", len(d.Conflicts), len(d.History))
	}
}

func testFinishOnceReleaseTwice(t *testing.T, s journal.Store) {
	key := "site:order:once:create"
	registerNew(t, s, key)
	c := claimDue(t, s, "w")
	if err := c.Finish(t.Context(), journal.Finish{Status: "bogus"}); err == nil {
		t.Fatal("finish with an unknown status: got nil, want an error")
	}
	finish(t, c, journal.Finish{Status: journal.StatusFailed, Error: "first"})
	if err := c.Finish(t.Context(), journal.Finish{Status: journal.StatusDone, Result: &journal.Result{Ref: "r"}}); err == nil {
		t.Fatal("second finish: got nil, want an error")
	}
	if got := get(t, s, key); got.Status != journal.StatusFailed || got.LastError != "first" {
		t.Fatalf("after a second finish: got %s %q, want the first verdict", got.Status, got.LastError)
	}
	for i := range 2 {
		if err := c.Release(t.Context()); err != nil {
			t.Fatalf("release %d after finish: %v", i+1, err)
		}
	}

	registerNew(t, s, "site:order:twice:create")
	c2 := claimDue(t, s, "w")
	ctx, cancel := context.WithCancel(t.Context())
	cancel() // a cancelled context still rolls back
	for i := range 2 {
		if err := c2.Release(ctx); err != nil {
			t.Fatalf("release %d: %v", i+1, err)
		}
	}
	c3 := claimDue(t, s, "w")
	if got, want := c3.Operation().Key, "site:order:twice:create"; got != want {
		t.Fatalf("after release: got %s, want %s", got, want)
	}
}

func testReleaseThenInterrupted(t *testing.T, s journal.Store) {
	key := "kaspi:order:crash:create"
	registerNew(t, s, key)
	c1 := claimDue(t, s, "w1")
	if err := c1.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	d := show(t, s, key)
	if len(d.History) != 1 || d.History[0].Outcome != "" || d.History[0].FinishedAt != nil {
		t.Fatalf("after release: got attempts %+v, want one open attempt", d.History)
	}
	if d.Status != journal.StatusPending {
		t.Fatalf("after release: got status %s, want pending", d.Status)
	}
	if d.Attempts != 1 {
		t.Fatalf("after release: show reports %d attempts, want 1 (an interrupted attempt was started)", d.Attempts)
	}

	c2 := claimDue(t, s, "w2")
	if got, want := c2.Attempt(), 2; got != want {
		t.Fatalf("next claim: got attempt %d, want %d", got, want)
	}
	if got, want := c2.Operation().Attempts, 2; got != want {
		t.Fatalf("next claim: operation attempts %d, want %d", got, want)
	}
	d = show(t, s, key)
	if len(d.History) != 2 {
		t.Fatalf("attempts: got %d, want 2", len(d.History))
	}
	a1, a2 := d.History[0], d.History[1]
	if a1.Attempt != 1 || a1.Outcome != journal.OutcomeInterrupted || a1.FinishedAt == nil || a1.Error == "" || a1.Worker != "w1" {
		t.Fatalf("released attempt: got %+v, want attempt 1 by w1 interrupted with a reason", a1)
	}
	if a2.Attempt != 2 || a2.Outcome != "" || a2.FinishedAt != nil || a2.Worker != "w2" {
		t.Fatalf("new attempt: got %+v, want attempt 2 by w2, open", a2)
	}
	finish(t, c2, journal.Finish{Status: journal.StatusDone, Result: &journal.Result{Ref: "r"}})
	if got := get(t, s, key).Attempts; got != 2 {
		t.Fatalf("attempts after finish: got %d, want 2", got)
	}
}

func testClaimKey(t *testing.T, s journal.Store) {
	if _, err := s.ClaimKey(t.Context(), "no:such:key", "op"); !errors.Is(err, journal.ErrNotFound) {
		t.Fatalf("unknown key: got %v, want %v", err, journal.ErrNotFound)
	}

	later := "site:order:later:create"
	registerNew(t, s, later)
	setState(t, s, later, journal.Finish{Status: journal.StatusPending, Error: "503", NextAttemptAt: time.Now().Add(time.Hour)})
	c := claimKey(t, s, later) // not due, but resync does not wait
	if got, want := c.Attempt(), 2; got != want {
		t.Fatalf("resync attempt: got %d, want %d", got, want)
	}
	finish(t, c, journal.Finish{Status: journal.StatusDone, Result: &journal.Result{Ref: "r", Number: "9"}})

	for _, tc := range []struct {
		key string
		f   journal.Finish
	}{
		{"site:order:done:create", journal.Finish{Status: journal.StatusDone, Result: &journal.Result{Ref: "r"}}},
		{"site:order:failed:create", journal.Finish{Status: journal.StatusFailed, Error: "422"}},
	} {
		registerNew(t, s, tc.key)
		setState(t, s, tc.key, tc.f)
		c, err := s.ClaimKey(t.Context(), tc.key, "op")
		if err == nil {
			c.Release(t.Context())
			t.Fatalf("%s: got a claim, want %v", tc.key, journal.ErrNotPending)
		}
		if !errors.Is(err, journal.ErrNotPending) {
			t.Fatalf("%s: got %v, want %v", tc.key, err, journal.ErrNotPending)
		}
		var npe *journal.NotPendingError
		if !errors.As(err, &npe) || npe.Operation.Key != tc.key || npe.Operation.Status != tc.f.Status {
			t.Fatalf("%s: got %#v, want a *journal.NotPendingError with the %s operation", tc.key, err, tc.f.Status)
		}
		if got := len(show(t, s, tc.key).History); got != 1 {
			t.Fatalf("%s: attempts after a refused claim: got %d, want 1", tc.key, got)
		}
	}
}

func testRequeue(t *testing.T, s journal.Store) {
	if _, err := s.Requeue(t.Context(), "no:such:key"); !errors.Is(err, journal.ErrNotFound) {
		t.Fatalf("unknown key: got %v, want %v", err, journal.ErrNotFound)
	}

	failed := "site:order:failed:create"
	registerNew(t, s, failed)
	setState(t, s, failed, journal.Finish{Status: journal.StatusFailed, Error: "1C rejected"})
	wantNothingDue(t, s)
	before := time.Now()
	op, err := s.Requeue(t.Context(), failed)
	if err != nil {
		t.Fatal(err)
	}
	if op.Key != failed || op.Status != journal.StatusPending || op.NextAttemptAt.Before(before.Add(-time.Minute)) {
		t.Fatalf("requeued: got %s %s next %v, want %s pending due now", op.Key, op.Status, op.NextAttemptAt, failed)
	}
	c := claimDue(t, s, "w")
	if got := c.Operation().Key; got != failed {
		t.Fatalf("claim after requeue: got %s, want %s", got, failed)
	}
	finish(t, c, journal.Finish{Status: journal.StatusDone, Result: &journal.Result{Ref: "r"}})

	_, err = s.Requeue(t.Context(), failed)
	if !errors.Is(err, journal.ErrNotPending) {
		t.Fatalf("requeue done: got %v, want %v", err, journal.ErrNotPending)
	}
	if got := get(t, s, failed); got.Status != journal.StatusDone {
		t.Fatalf("done after requeue: got %s, want done", got.Status)
	}

	later := "site:order:later:create"
	registerNew(t, s, later)
	setState(t, s, later, journal.Finish{Status: journal.StatusPending, Error: "503", NextAttemptAt: time.Now().Add(time.Hour)})
	wantNothingDue(t, s)
	if _, err := s.Requeue(t.Context(), later); err != nil {
		t.Fatal(err)
	}
	if got := claimDue(t, s, "w").Operation().Key; got != later {
		t.Fatalf("claim after requeue of a waiting operation: got %s, want %s", got, later)
	}
}

func testList(t *testing.T, s journal.Store) {
	keys := []string{
		"kaspi:order:1:create", "kaspi:order:2:create", "kaspi:order:3:create",
		"ozon:posting:1:create", "ozon:posting:2:create", "site:order:1:create",
	}
	for _, k := range keys {
		registerNew(t, s, k)
	}
	setState(t, s, "kaspi:order:2:create", journal.Finish{Status: journal.StatusDone, Result: &journal.Result{Ref: "r"}})
	setState(t, s, "ozon:posting:1:create", journal.Finish{Status: journal.StatusFailed, Error: "x"})
	setState(t, s, "site:order:1:create", journal.Finish{Status: journal.StatusDone, Result: &journal.Result{Ref: "r"}})

	var all []journal.Operation
	for _, k := range keys {
		all = append(all, get(t, s, k))
	}
	slices.SortFunc(all, func(a, b journal.Operation) int {
		if c := b.UpdatedAt.Compare(a.UpdatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.Key, b.Key)
	})
	want := func(pred func(journal.Operation) bool, limit int) []string {
		var ks []string
		for _, op := range all {
			if pred(op) && (limit == 0 || len(ks) < limit) {
				ks = append(ks, op.Key)
			}
		}
		return ks
	}
	list := func(f journal.Filter) []string {
		t.Helper()
		ops, err := s.List(t.Context(), f)
		if err != nil {
			t.Fatalf("list %+v: %v", f, err)
		}
		var ks []string
		for _, op := range ops {
			ks = append(ks, op.Key)
		}
		return ks
	}
	every := func(journal.Operation) bool { return true }
	since := all[2].UpdatedAt
	for _, tc := range []struct {
		name string
		f    journal.Filter
		want []string
	}{
		{"all", journal.Filter{}, want(every, 0)},
		{"status done", journal.Filter{Status: journal.StatusDone}, want(func(op journal.Operation) bool { return op.Status == journal.StatusDone }, 0)},
		{"status pending", journal.Filter{Status: journal.StatusPending}, want(func(op journal.Operation) bool { return op.Status == journal.StatusPending }, 0)},
		{"source kaspi", journal.Filter{Source: "kaspi"}, want(func(op journal.Operation) bool { return op.Source == "kaspi" }, 0)},
		{"source and status", journal.Filter{Source: "kaspi", Status: journal.StatusPending}, want(func(op journal.Operation) bool {
			return op.Source == "kaspi" && op.Status == journal.StatusPending
		}, 0)},
		{"since", journal.Filter{Since: since}, want(func(op journal.Operation) bool { return !op.UpdatedAt.Before(since) }, 0)},
		{"limit", journal.Filter{Limit: 2}, want(every, 2)},
		{"no match", journal.Filter{Source: "wb"}, nil},
	} {
		if got := list(tc.f); !slices.Equal(got, tc.want) {
			t.Fatalf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
	if len(want(func(op journal.Operation) bool { return op.Status == journal.StatusDone }, 0)) != 2 {
		t.Fatal("test set-up: want two done operations")
	}
	if _, err := s.List(t.Context(), journal.Filter{Status: "bogus"}); err == nil {
		t.Fatal("list with an unknown status: got nil, want an error")
	}
}

func testShowOrdering(t *testing.T, s journal.Store) {
	key := "kaspi:order:show:create"
	op := newOp(key)
	registerNew(t, s, key)
	for i := range 3 {
		c := op
		c.Payload = payload(key, 10+i)
		register(t, s, c)
	}
	for range 2 {
		c := claimKey(t, s, key)
		if err := c.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	setState(t, s, key, journal.Finish{Status: journal.StatusDone, Result: &journal.Result{Ref: "r"}})

	d := show(t, s, key)
	if d.Key != key || d.Status != journal.StatusDone || d.Attempts != 3 {
		t.Fatalf("show: got %s %s attempts %d, want %s done 3", d.Key, d.Status, d.Attempts, key)
	}
	var attempts []int
	var outcomes []journal.Outcome
	for _, a := range d.History {
		attempts = append(attempts, a.Attempt)
		outcomes = append(outcomes, a.Outcome)
	}
	if want := []int{1, 2, 3}; !slices.Equal(attempts, want) {
		t.Fatalf("attempt order: got %v, want %v", attempts, want)
	}
	if want := []journal.Outcome{journal.OutcomeInterrupted, journal.OutcomeInterrupted, journal.OutcomeDone}; !slices.Equal(outcomes, want) {
		t.Fatalf("outcomes: got %v, want %v", outcomes, want)
	}
	if len(d.Conflicts) != 3 {
		t.Fatalf("conflicts: got %d, want 3", len(d.Conflicts))
	}
	for i, c := range d.Conflicts {
		if want := order.SHA256Hex(payload(key, 10+i)); c.PayloadSHA256 != want {
			t.Fatalf("conflict %d: got sha256 %s, want %s (ordered by time)", i, c.PayloadSHA256, want)
		}
		if i > 0 && c.At.Before(d.Conflicts[i-1].At) {
			t.Fatalf("conflicts out of time order: %v after %v", c.At, d.Conflicts[i-1].At)
		}
	}
}

func testExactDecimals(t *testing.T, s journal.Store) {
	key := "site:order:decimals:create"
	raw := `{"price":1500.10,"big":12345678901234567890.123456789,"qty":0.001,"neg":-0.50,"int":3000}`
	registerNew(t, s, key) // then a conflict carrying the exact numbers too
	if _, err := s.Register(t.Context(), journal.NewOperation{Key: "site:order:exact:create", Kind: order.KindCreate, Payload: json.RawMessage(raw)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Register(t.Context(), journal.NewOperation{Key: key, Kind: order.KindCreate, Payload: json.RawMessage(raw)}); err != nil {
		t.Fatal(err)
	}
	wantNumbers := map[string]string{
		"price": "1500.10",
		"big":   "12345678901234567890.123456789",
		"qty":   "0.001",
		"neg":   "-0.50",
		"int":   "3000",
	}
	check := func(what string, b []byte) {
		t.Helper()
		m, ok := decode(t, b).(map[string]any)
		if !ok {
			t.Fatalf("%s: got %s, want an object", what, b)
		}
		for k, want := range wantNumbers {
			if got, _ := m[k].(json.Number); string(got) != want {
				t.Fatalf("%s: %s: got %v, want exactly %s (stored %s)", what, k, m[k], want, b)
			}
		}
	}
	check("saved payload", get(t, s, "site:order:exact:create").Payload)
	d := show(t, s, key)
	if len(d.Conflicts) != 1 {
		t.Fatalf("conflicts: got %d, want 1", len(d.Conflicts))
	}
	check("conflict payload", d.Conflicts[0].Payload)
	c := claimKey(t, s, "site:order:exact:create")
	check("claimed payload", c.Operation().Payload)
}
