package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/order"
)

// Operations failed at registration (an order that does not map) and their revision
// once they map: Store.RegisterFailed and Store.Revise.

const unmapped = "lines[0].sku: marketplace SKU X-1 is not in the SKU map"

func registerFailed(t *testing.T, s journal.Store, op journal.NewOperation, reason string) journal.Registration {
	t.Helper()
	r, err := s.RegisterFailed(t.Context(), op, reason)
	if err != nil {
		t.Fatalf("register %s as failed: %v", op.Key, err)
	}
	return r
}

func registerFailedNew(t *testing.T, s journal.Store, op journal.NewOperation, reason string) journal.Operation {
	t.Helper()
	r := registerFailed(t, s, op, reason)
	if r.Outcome != journal.Registered {
		t.Fatalf("register %s as failed: got %s, want %s", op.Key, r.Outcome, journal.Registered)
	}
	return r.Operation
}

// rawOp is what a poller records for an order that does not map: the marketplace's
// own JSON.
func rawOp(key string) journal.NewOperation {
	op := newOp(key)
	op.Payload = json.RawMessage(`{"posting_number":"1-2","products":[{"offer_id":"X-1","price":"1530.0000","quantity":1}]}`)
	return op
}

func wantNotRevisable(t *testing.T, s journal.Store, op journal.NewOperation) {
	t.Helper()
	before := get(t, s, op.Key)
	conflicts := len(show(t, s, op.Key).Conflicts)
	got, err := s.Revise(t.Context(), op)
	if !errors.Is(err, journal.ErrNotRevisable) {
		t.Fatalf("revise %s (%s): got %+v, %v; want %v", op.Key, before.Status, got, err, journal.ErrNotRevisable)
	}
	after := get(t, s, op.Key)
	if !reflect.DeepEqual(stripPayload(after), stripPayload(before)) {
		t.Fatalf("refused revision changed the operation: got %+v, want %+v", after, before)
	}
	sameJSON(t, "payload after a refused revision", after.Payload, before.Payload)
	if n := len(show(t, s, op.Key).Conflicts); n != conflicts {
		t.Fatalf("refused revision: conflicts %d, want %d (nothing recorded)", n, conflicts)
	}
}

func testRegisterFailedNew(t *testing.T, s journal.Store) {
	op := rawOp("ozon:posting:1-2:create")
	before := time.Now()
	got := registerFailedNew(t, s, op, unmapped)
	if got.Key != op.Key || got.Kind != op.Kind || got.Source != op.Source || got.ExternalID != op.ExternalID {
		t.Fatalf("operation: got %+v, want the registered fields of %+v", got, op)
	}
	if got.Status != journal.StatusFailed || got.LastError != unmapped {
		t.Fatalf("status %s, last_error %q; want failed, %q", got.Status, got.LastError, unmapped)
	}
	if got.Attempts != 0 || got.Result != nil {
		t.Fatalf("attempts %d, result %v; want 0, nil", got.Attempts, got.Result)
	}
	if want := order.SHA256Hex(op.Payload); got.PayloadSHA256 != want {
		t.Fatalf("payload_sha256: got %s, want %s", got.PayloadSHA256, want)
	}
	sameJSON(t, "payload", got.Payload, op.Payload)
	wantUTC(t, "created_at", got.CreatedAt)
	wantUTC(t, "updated_at", got.UpdatedAt)
	wantUTC(t, "next_attempt_at", got.NextAttemptAt)
	if got.CreatedAt.Before(before.Add(-time.Minute)) || got.CreatedAt.After(time.Now().Add(time.Minute)) {
		t.Fatalf("created_at: got %v, want about now (%v)", got.CreatedAt, before)
	}

	saved := get(t, s, op.Key)
	if !reflect.DeepEqual(stripPayload(saved), stripPayload(got)) {
		t.Fatalf("get: got %+v, want %+v", saved, got)
	}
	d := show(t, s, op.Key)
	if len(d.History) != 0 || len(d.Conflicts) != 0 || d.Attempts != 0 {
		t.Fatalf("show: attempts %d, history %+v, conflicts %+v; want none (it never reached 1C)", d.Attempts, d.History, d.Conflicts)
	}
	wantNothingDue(t, s) // a failed operation is never claimed
	ops, err := s.List(t.Context(), journal.Filter{Status: journal.StatusFailed})
	if err != nil {
		t.Fatal(err)
	}
	if len(ops) != 1 || ops[0].Key != op.Key {
		t.Fatalf("list failed: got %v, want %s", ops, op.Key)
	}
}

func testRegisterFailedValidates(t *testing.T, s journal.Store) {
	valid := rawOp("site:order:A-9:create")
	if r, err := s.RegisterFailed(t.Context(), valid, ""); err == nil {
		t.Fatalf("no reason: got %s, want an error", r.Outcome)
	}
	for name, op := range map[string]journal.NewOperation{
		"empty key":       {Kind: valid.Kind, Payload: valid.Payload},
		"empty kind":      {Key: valid.Key, Payload: valid.Payload},
		"empty payload":   {Key: valid.Key, Kind: valid.Kind},
		"invalid payload": {Key: valid.Key, Kind: valid.Kind, Payload: json.RawMessage(`{"a":`)},
	} {
		if r, err := s.RegisterFailed(t.Context(), op, unmapped); err == nil {
			t.Fatalf("%s: got %s, want an error", name, r.Outcome)
		}
	}
	if _, err := s.Get(t.Context(), valid.Key); !errors.Is(err, journal.ErrNotFound) {
		t.Fatalf("get after rejected registrations: got %v, want %v", err, journal.ErrNotFound)
	}
}

func testRegisterFailedDuplicate(t *testing.T, s journal.Store) {
	op := rawOp("kaspi:order:512344101:create")
	first := registerFailedNew(t, s, op, unmapped)
	again := registerFailed(t, s, op, "another reason")
	if again.Outcome != journal.Duplicate {
		t.Fatalf("second registration: got %s, want %s", again.Outcome, journal.Duplicate)
	}
	if !reflect.DeepEqual(stripPayload(again.Operation), stripPayload(first)) {
		t.Fatalf("duplicate: got %+v, want the saved %+v", again.Operation, first)
	}
	// Register with the same payload is a duplicate too, of the failed operation.
	if r := register(t, s, op); r.Outcome != journal.Duplicate || r.Operation.Status != journal.StatusFailed || r.Operation.LastError != unmapped {
		t.Fatalf("register the same payload: got %s %s %q, want duplicate of the failed operation", r.Outcome, r.Operation.Status, r.Operation.LastError)
	}
	if d := show(t, s, op.Key); len(d.Conflicts) != 0 {
		t.Fatalf("conflicts after duplicates: got %+v, want none", d.Conflicts)
	}
	wantNothingDue(t, s)
}

func testRegisterFailedConflict(t *testing.T, s journal.Store) {
	a := rawOp("wb:order:1234567:create")
	b := a
	b.Payload = json.RawMessage(`{"id":1234567,"article":"X-1","convertedPrice":153000}`)
	saved := registerFailedNew(t, s, a, unmapped)

	r := registerFailed(t, s, b, "another reason")
	if r.Outcome != journal.Conflicted {
		t.Fatalf("other payload: got %s, want %s", r.Outcome, journal.Conflicted)
	}
	if !reflect.DeepEqual(stripPayload(r.Operation), stripPayload(saved)) {
		t.Fatalf("conflict: got %+v, want the untouched %+v", r.Operation, saved)
	}
	sameJSON(t, "conflict answers with payload", r.Operation.Payload, a.Payload)
	now := get(t, s, a.Key)
	if now.LastError != unmapped || now.PayloadSHA256 != order.SHA256Hex(a.Payload) {
		t.Fatalf("after conflict: last_error %q, sha256 %s; want the first reason and payload", now.LastError, now.PayloadSHA256)
	}
	d := show(t, s, a.Key)
	if len(d.Conflicts) != 1 {
		t.Fatalf("conflicts: got %d, want 1", len(d.Conflicts))
	}
	if got, want := d.Conflicts[0].PayloadSHA256, order.SHA256Hex(b.Payload); got != want {
		t.Fatalf("conflict payload_sha256: got %s, want %s", got, want)
	}
	sameJSON(t, "conflict payload", d.Conflicts[0].Payload, b.Payload)
	wantUTC(t, "conflict at", d.Conflicts[0].At)
	wantNothingDue(t, s)
}

// RegisterFailed under an existing key never fails the saved operation.
func testRegisterFailedExistingKeyStays(t *testing.T, s journal.Store) {
	key := "kaspi:order:2001:create"
	saved := registerNew(t, s, key)
	same := registerFailed(t, s, newOp(key), unmapped)
	if same.Outcome != journal.Duplicate || same.Operation.Status != journal.StatusPending || same.Operation.LastError != "" {
		t.Fatalf("same payload: got %s %s %q, want a duplicate of the pending operation", same.Outcome, same.Operation.Status, same.Operation.LastError)
	}
	other := registerFailed(t, s, rawOp(key), unmapped)
	if other.Outcome != journal.Conflicted || other.Operation.Status != journal.StatusPending {
		t.Fatalf("other payload: got %s %s, want a conflict with the pending operation", other.Outcome, other.Operation.Status)
	}
	if got := get(t, s, key); !reflect.DeepEqual(stripPayload(got), stripPayload(saved)) {
		t.Fatalf("after failed registrations: got %+v, want the untouched %+v", got, saved)
	}
	if got := claimDue(t, s, "w").Operation().Key; got != key {
		t.Fatalf("claim: got %s, want %s", got, key)
	}
}

func testReviseFailedAtRegistration(t *testing.T, s journal.Store) {
	key := "ozon:posting:05708065-0029-1:create"
	old := rawOp(key)
	old.ExternalID = "05708065-0029-1"
	failed := registerFailedNew(t, s, old, unmapped)

	rev := journal.NewOperation{Key: key, Kind: order.KindCreate, Source: "ozon", ExternalID: "05708065-0029-1/revised",
		Payload: payload(key, 2)}
	before := time.Now()
	got, err := s.Revise(t.Context(), rev)
	if err != nil {
		t.Fatalf("revise: %v", err)
	}
	if got.Key != key || got.Kind != rev.Kind || got.Source != rev.Source || got.ExternalID != rev.ExternalID {
		t.Fatalf("revised: got %+v, want kind, source and external id of %+v", got, rev)
	}
	if got.Status != journal.StatusPending || got.LastError != "" || got.Attempts != 0 || got.Result != nil {
		t.Fatalf("revised: status %s, last_error %q, attempts %d, result %v; want pending, empty, 0, nil",
			got.Status, got.LastError, got.Attempts, got.Result)
	}
	if want := order.SHA256Hex(rev.Payload); got.PayloadSHA256 != want {
		t.Fatalf("revised payload_sha256: got %s, want %s", got.PayloadSHA256, want)
	}
	sameJSON(t, "revised payload", got.Payload, rev.Payload)
	wantUTC(t, "next_attempt_at", got.NextAttemptAt)
	wantUTC(t, "updated_at", got.UpdatedAt)
	if got.NextAttemptAt.Before(before.Add(-time.Minute)) || got.NextAttemptAt.After(time.Now().Add(time.Minute)) {
		t.Fatalf("next_attempt_at: got %v, want about now (%v)", got.NextAttemptAt, before)
	}
	if !got.CreatedAt.Equal(failed.CreatedAt) || got.UpdatedAt.Before(failed.UpdatedAt) {
		t.Fatalf("times: created %v (was %v), updated %v (was %v); want created kept, updated not earlier",
			got.CreatedAt, failed.CreatedAt, got.UpdatedAt, failed.UpdatedAt)
	}
	if saved := get(t, s, key); !reflect.DeepEqual(stripPayload(saved), stripPayload(got)) {
		t.Fatalf("get after revise: got %+v, want %+v", saved, got)
	}

	// The superseded payload is kept among the conflicts.
	d := show(t, s, key)
	if len(d.Conflicts) != 1 {
		t.Fatalf("conflicts after revise: got %+v, want the superseded payload", d.Conflicts)
	}
	if c := d.Conflicts[0]; c.PayloadSHA256 != order.SHA256Hex(old.Payload) {
		t.Fatalf("superseded payload_sha256: got %s, want %s", c.PayloadSHA256, order.SHA256Hex(old.Payload))
	}
	sameJSON(t, "superseded payload", d.Conflicts[0].Payload, old.Payload)
	wantUTC(t, "superseded at", d.Conflicts[0].At)

	// The revised payload is now the saved one: a duplicate; the old one conflicts.
	if r := register(t, s, rev); r.Outcome != journal.Duplicate {
		t.Fatalf("register the revised payload: got %s, want %s", r.Outcome, journal.Duplicate)
	}
	if r := register(t, s, old); r.Outcome != journal.Conflicted {
		t.Fatalf("register the superseded payload: got %s, want %s", r.Outcome, journal.Conflicted)
	}

	c := claimDue(t, s, "w")
	if c.Operation().Key != key || c.Attempt() != 1 {
		t.Fatalf("claim after revise: got %s attempt %d, want %s attempt 1", c.Operation().Key, c.Attempt(), key)
	}
	sameJSON(t, "claimed payload", c.Operation().Payload, rev.Payload)
	finish(t, c, journal.Finish{Status: journal.StatusDone, Result: &journal.Result{Ref: "r", Number: "1"}})
	wantNotRevisable(t, s, rev) // done now
}

// The poller's path: the order failed to map; a later poll maps it, Register answers
// Conflicted with the failed operation, and Revise applies the new payload.
func testReviseAfterConflictingRegistration(t *testing.T, s journal.Store) {
	key := "kaspi:order:3003:create"
	old := rawOp(key)
	registerFailedNew(t, s, old, unmapped)
	mapped := newOp(key)
	r := register(t, s, mapped)
	if r.Outcome != journal.Conflicted || r.Operation.Status != journal.StatusFailed || r.Operation.Attempts != 0 {
		t.Fatalf("register the mapped order: got %s %s attempts %d, want a conflict with the failed operation",
			r.Outcome, r.Operation.Status, r.Operation.Attempts)
	}
	if _, err := s.Revise(t.Context(), mapped); err != nil {
		t.Fatalf("revise: %v", err)
	}
	var shas []string
	for _, c := range show(t, s, key).Conflicts {
		shas = append(shas, c.PayloadSHA256)
	}
	if want := []string{order.SHA256Hex(mapped.Payload), order.SHA256Hex(old.Payload)}; !slices.Equal(shas, want) {
		t.Fatalf("conflicts: got %v, want %v (the conflicting registration, then the superseded payload)", shas, want)
	}
	if r := register(t, s, mapped); r.Outcome != journal.Duplicate || r.Operation.Status != journal.StatusPending {
		t.Fatalf("register again: got %s %s, want a duplicate of the pending operation", r.Outcome, r.Operation.Status)
	}
	wantNotRevisable(t, s, mapped) // pending now: a second revision is refused
	if got := claimDue(t, s, "w").Operation().Key; got != key {
		t.Fatalf("claim: got %s, want %s", got, key)
	}
}

func testReviseRefusesWhatReached1C(t *testing.T, s journal.Store) {
	key := "site:order:rejected:create"
	registerNew(t, s, key)
	setState(t, s, key, journal.Finish{Status: journal.StatusFailed, Error: "422 lines[0].sku: unknown"})
	rev := newOp(key)
	rev.Payload = payload(key, 2)
	wantNotRevisable(t, s, rev)
}

// An attempt that never finished still counts: the worker may have called 1C before
// it stopped, though operations.attempts was never written.
func testReviseRefusesInterruptedAttempt(t *testing.T, s journal.Store) {
	key := "kaspi:order:4004:create"
	registerFailedNew(t, s, rawOp(key), unmapped)
	if _, err := s.Requeue(t.Context(), key); err != nil {
		t.Fatal(err)
	}
	if err := claimDue(t, s, "crashed").Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	l := lock(t, s, key)
	if err := l.Fail(t.Context(), unmapped); err != nil {
		t.Fatal(err)
	}
	if op := get(t, s, key); op.Status != journal.StatusFailed || len(show(t, s, key).History) != 1 {
		t.Fatalf("set-up: got %s with %d attempt rows, want failed with 1", op.Status, len(show(t, s, key).History))
	}
	wantNotRevisable(t, s, newOp(key))
}

func testReviseRefusesDoneAndPending(t *testing.T, s journal.Store) {
	pending, done := "site:order:pending:create", "site:order:done:create"
	registerNew(t, s, pending)
	registerNew(t, s, done)
	setState(t, s, done, journal.Finish{Status: journal.StatusDone, Result: &journal.Result{Ref: "r"}})
	for _, key := range []string{pending, done} {
		rev := newOp(key)
		rev.Payload = payload(key, 2)
		wantNotRevisable(t, s, rev)
	}
}

func testReviseUnknownAndInvalid(t *testing.T, s journal.Store) {
	if _, err := s.Revise(t.Context(), newOp("no:order:such:create")); !errors.Is(err, journal.ErrNotFound) {
		t.Fatalf("unknown key: got %v, want %v", err, journal.ErrNotFound)
	}
	key := "site:order:invalid:create"
	registerFailedNew(t, s, rawOp(key), unmapped)
	for name, op := range map[string]journal.NewOperation{
		"empty kind":      {Key: key, Payload: payload(key, 2)},
		"empty payload":   {Key: key, Kind: order.KindCreate},
		"invalid payload": {Key: key, Kind: order.KindCreate, Payload: json.RawMessage(`{"a":`)},
	} {
		if _, err := s.Revise(t.Context(), op); err == nil || errors.Is(err, journal.ErrNotRevisable) {
			t.Fatalf("%s: got %v, want a validation error", name, err)
		}
	}
	if op := get(t, s, key); op.Status != journal.StatusFailed {
		t.Fatalf("after invalid revisions: got %s, want failed", op.Status)
	}
}

// lockTimeout bounds Lock in the helpers.
const lockTimeout = 10 * time.Second

// lock locks key and releases the lock when the test ends.
func lock(t *testing.T, s journal.Store, key string) journal.Locked {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), lockTimeout)
	defer cancel()
	l, err := s.Lock(ctx, key)
	if err != nil {
		t.Fatalf("lock %s: %v", key, err)
	}
	t.Cleanup(func() {
		if err := l.Release(context.Background()); err != nil {
			t.Errorf("release the lock of %s: %v", key, err)
		}
	})
	return l
}
