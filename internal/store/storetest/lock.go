package storetest

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/order"
)

// Store.Lock: a cancel holds its create still while it asks 1C, and fails the create
// when 1C holds nothing.

func testLockUnknown(t *testing.T, s journal.Store) {
	// More than any pool holds: a refused lock gives back whatever it took.
	for range 20 {
		ctx, cancel := context.WithTimeout(t.Context(), lockTimeout)
		l, err := s.Lock(ctx, "no:order:such:create")
		cancel()
		if err == nil {
			l.Release(t.Context())
			t.Fatalf("unknown key: got a lock, want %v", journal.ErrNotFound)
		}
		if !errors.Is(err, journal.ErrNotFound) {
			t.Fatalf("unknown key: got %v, want %v", err, journal.ErrNotFound)
		}
	}
	key := "site:order:after-unknown:create"
	registerNew(t, s, key)
	lock(t, s, key)
}

func testLockHoldsTheRow(t *testing.T, s journal.Store) {
	key := "kaspi:order:5005:create"
	registerNew(t, s, key)
	want := get(t, s, key)
	l := lock(t, s, key)
	got := l.Operation()
	if !reflect.DeepEqual(stripPayload(got), stripPayload(want)) {
		t.Fatalf("locked operation: got %+v, want %+v", got, want)
	}
	sameJSON(t, "locked payload", got.Payload, want.Payload)
	wantNothingDue(t, s) // the due operation is held: claims skip it
	if err := l.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := claimDue(t, s, "w").Operation().Key; got != key {
		t.Fatalf("claim after release: got %s, want %s", got, key)
	}

	// Any status can be locked; the caller reads it under the lock.
	done := "kaspi:order:5006:create"
	registerNew(t, s, done)
	res := &journal.Result{Ref: "r", Number: "ТД-1"}
	setState(t, s, done, journal.Finish{Status: journal.StatusDone, Result: res})
	if op := lock(t, s, done).Operation(); op.Status != journal.StatusDone || op.Result == nil || !reflect.DeepEqual(*op.Result, *res) {
		t.Fatalf("locked done operation: got %s %+v, want done with %+v", op.Status, op.Result, res)
	}
	failed := "kaspi:order:5007:create"
	registerFailedNew(t, s, rawOp(failed), unmapped)
	if op := lock(t, s, failed).Operation(); op.Status != journal.StatusFailed || op.LastError != unmapped {
		t.Fatalf("locked failed operation: got %s %q, want failed with %q", op.Status, op.LastError, unmapped)
	}
}

func testLockFail(t *testing.T, s journal.Store) {
	key := "wb:order:6006:create"
	registerNew(t, s, key)
	setState(t, s, key, journal.Finish{Status: journal.StatusPending, Error: "1C answered 503", NextAttemptAt: time.Now().Add(time.Hour)})
	before := get(t, s, key)

	l := lock(t, s, key)
	reason := "cancelled (wb:order:6006:cancel) before it was created in 1C: nothing was created"
	if err := l.Fail(t.Context(), reason); err != nil {
		t.Fatalf("fail: %v", err)
	}
	op := get(t, s, key)
	if op.Status != journal.StatusFailed || op.LastError != reason {
		t.Fatalf("after fail: got %s %q, want failed %q", op.Status, op.LastError, reason)
	}
	if op.Attempts != before.Attempts || op.Result != nil || op.PayloadSHA256 != before.PayloadSHA256 || !op.CreatedAt.Equal(before.CreatedAt) {
		t.Fatalf("after fail: got %+v, want only status, last_error and updated_at changed from %+v", op, before)
	}
	wantUTC(t, "updated_at", op.UpdatedAt)
	if op.UpdatedAt.Before(before.UpdatedAt) {
		t.Fatalf("updated_at: got %v, before %v", op.UpdatedAt, before.UpdatedAt)
	}
	d := show(t, s, key)
	if len(d.History) != 1 || d.History[0].Outcome != journal.OutcomeRetry {
		t.Fatalf("attempts after fail: got %+v, want the one retry, untouched", d.History)
	}
	wantNothingDue(t, s)

	if err := l.Fail(t.Context(), "again"); err == nil {
		t.Fatal("second fail: got nil, want an error")
	}
	for i := range 2 {
		if err := l.Release(t.Context()); err != nil {
			t.Fatalf("release %d after fail: %v", i+1, err)
		}
	}
	if got := get(t, s, key).LastError; got != reason {
		t.Fatalf("after a second fail: last_error %q, want %q", got, reason)
	}
	// The commit let the lock go.
	if op := lock(t, s, key).Operation(); op.Status != journal.StatusFailed {
		t.Fatalf("lock after fail: got %s, want failed", op.Status)
	}
}

func testLockReleaseTwice(t *testing.T, s journal.Store) {
	key := "ozon:posting:7-7:create"
	registerNew(t, s, key)
	l := lock(t, s, key)
	ctx, cancel := context.WithCancel(t.Context())
	cancel() // a cancelled context still rolls back
	for i := range 2 {
		if err := l.Release(ctx); err != nil {
			t.Fatalf("release %d: %v", i+1, err)
		}
	}
	if err := l.Fail(t.Context(), "too late"); err == nil {
		t.Fatal("fail after release: got nil, want an error")
	}
	if op := get(t, s, key); op.Status != journal.StatusPending || op.LastError != "" {
		t.Fatalf("after release: got %s %q, want pending, untouched", op.Status, op.LastError)
	}
	if got := claimDue(t, s, "w").Operation().Key; got != key {
		t.Fatalf("claim after release: got %s, want %s", got, key)
	}
}

// The engine's cancel: its claim holds the cancel's row while it locks the create's.
func testLockWhileHoldingAClaim(t *testing.T, s journal.Store) {
	create, cancelKey := "kaspi:order:8008:create", "kaspi:order:8008:cancel"
	registerNew(t, s, create)
	register(t, s, journal.NewOperation{Key: cancelKey, Kind: order.KindCancel, Source: "kaspi", ExternalID: "8008",
		Payload: []byte(`{"source":"kaspi","external_id":"8008","create_key":"kaspi:order:8008:create"}`)})
	c := claimKey(t, s, cancelKey)
	l := lock(t, s, create)
	if op := l.Operation(); op.Key != create || op.Status != journal.StatusPending {
		t.Fatalf("locked: got %s %s, want %s pending", op.Key, op.Status, create)
	}
	wantNothingDue(t, s) // both rows are held
	if err := l.Fail(t.Context(), "cancelled before it was created in 1C"); err != nil {
		t.Fatal(err)
	}
	finish(t, c, journal.Finish{Status: journal.StatusDone, Result: &journal.Result{Note: "cancelled before creation"}})
	if got := get(t, s, create).Status; got != journal.StatusFailed {
		t.Fatalf("create: got %s, want failed", got)
	}
	if got := get(t, s, cancelKey).Status; got != journal.StatusDone {
		t.Fatalf("cancel: got %s, want done", got)
	}
}
