package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ordersync/ordersync/connectors"
	"github.com/ordersync/ordersync/internal/eventually"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/testdb"
)

type lockResult struct {
	l   journal.Locked
	err error
	at  time.Time
}

func lockAsync(ctx context.Context, j *Journal, key string) <-chan lockResult {
	ch := make(chan lockResult, 1)
	go func() {
		l, err := j.Lock(ctx, key)
		ch <- lockResult{l, err, time.Now()}
	}()
	return ch
}

// rowLockedElsewhere reports whether key's row is locked, asked on a connection of
// its own.
func rowLockedElsewhere(t *testing.T, db *DB, key string) bool {
	t.Helper()
	ctx := t.Context()
	other, err := pgx.Connect(ctx, db.cfg.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)
	_, err = other.Exec(ctx, "SELECT key FROM operations WHERE key = $1 FOR UPDATE NOWAIT", key)
	var pe *pgconn.PgError
	switch {
	case err == nil:
		return false
	case errors.As(err, &pe) && pe.Code == codeLockNotAvailable:
		return true
	}
	t.Fatal(err)
	return false
}

// A cancel's Lock waits while a worker holds the create's claim, and reads the row as
// the claim left it.
func TestLockWaitsForClaim(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := newDB(t, Config{})
	j := db.journalStore()
	key := "kaspi:order:wait:create"
	if _, err := j.Register(ctx, testOp(key)); err != nil {
		t.Fatal(err)
	}
	c, err := j.ClaimDue(ctx, "creator")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release(ctx)

	lctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	ch := lockAsync(lctx, j, key)
	select {
	case r := <-ch:
		if r.l != nil {
			r.l.Release(ctx)
		}
		t.Fatalf("lock of a claimed row returned at once: %v", r.err)
	case <-time.After(300 * time.Millisecond):
	}
	finished := time.Now()
	if err := c.Finish(ctx, journal.Finish{Status: journal.StatusDone, Result: &journal.Result{Ref: "r", Number: "7"}}); err != nil {
		t.Fatal(err)
	}
	r := <-ch
	if r.err != nil {
		t.Fatalf("lock after the claim finished: %v", r.err)
	}
	defer r.l.Release(ctx)
	if r.at.Before(finished) {
		t.Fatalf("the lock was granted at %v, before the claim finished at %v", r.at, finished)
	}
	if op := r.l.Operation(); op.Status != journal.StatusDone || op.Result == nil || op.Result.Ref != "r" || op.Attempts != 1 {
		t.Fatalf("locked operation: got %s %+v attempts %d, want done by the claim with ref r", op.Status, op.Result, op.Attempts)
	}
	if !rowLockedElsewhere(t, db, key) {
		t.Fatal("the row is not locked while the lock is held")
	}
	if err := r.l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if rowLockedElsewhere(t, db, key) {
		t.Fatal("the row is still locked after release")
	}
	if n := len(db.claimSlots); n != 0 {
		t.Fatalf("claim slots held after everything was released: %d", n)
	}
}

func TestLockBusy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := newDB(t, Config{ClaimLockTimeout: 200 * time.Millisecond})
	j := db.journalStore()
	key := "site:order:busy-lock:create"
	if _, err := j.Register(ctx, testOp(key)); err != nil {
		t.Fatal(err)
	}
	c, err := j.ClaimKey(ctx, key, "worker")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release(ctx)

	start := time.Now()
	l, err := j.Lock(ctx, key)
	if !errors.Is(err, journal.ErrBusy) {
		if l != nil {
			l.Release(ctx)
		}
		t.Fatalf("lock of a claimed row: got %v, want %v", err, journal.ErrBusy)
	}
	// Lock counts the whole wait (a claim slot, then the row) against the timeout, so
	// the server's lock_timeout is what is left of it: a lower bound of half the
	// timeout shows it waited rather than refused at once, whatever the machine's load.
	if waited := time.Since(start); waited < 100*time.Millisecond {
		t.Fatalf("gave up after %v, long before the lock timeout", waited)
	}
	t.Logf("busy: %v", err)
	if n := len(db.claimSlots); n != 1 {
		t.Fatalf("claim slots after a busy lock: got %d, want 1 (the claim's)", n)
	}
	if err := c.Release(ctx); err != nil {
		t.Fatal(err)
	}
	l, err = j.Lock(ctx, key)
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	l.Release(ctx)
}

// Claims and locks share the claim slots, so a connection stays free for attempt rows
// and other queries; a lock that finds no slot within the lock timeout is busy.
func TestLockUsesClaimSlots(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := newDB(t, Config{MaxConns: 3, ClaimLockTimeout: 300 * time.Millisecond})
	j := db.journalStore()
	for _, k := range []string{"a:order:1:cancel", "a:order:1:create", "a:order:2:create"} {
		if _, err := j.Register(ctx, testOp(k)); err != nil {
			t.Fatal(err)
		}
	}
	c, err := j.ClaimKey(ctx, "a:order:1:cancel", "w")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release(ctx)
	l1, err := j.Lock(ctx, "a:order:1:create")
	if err != nil {
		t.Fatalf("lock while holding a claim: %v", err)
	}
	defer l1.Release(ctx)

	start := time.Now()
	l2, err := j.Lock(ctx, "a:order:2:create")
	if !errors.Is(err, journal.ErrBusy) || !strings.Contains(err.Error(), "slots") {
		if l2 != nil {
			l2.Release(ctx)
		}
		t.Fatalf("third holder of a 3-connection pool: got %v, want %v naming the slots", err, journal.ErrBusy)
	}
	if waited := time.Since(start); waited < 300*time.Millisecond {
		t.Fatalf("gave up after %v, before the lock timeout", waited)
	}
	if _, err := j.Register(ctx, testOp("a:order:3:create")); err != nil {
		t.Fatalf("register while a claim and a lock are open: %v", err)
	}
	// A slot freed while a lock waits for one is taken.
	ch := lockAsync(ctx, j, "a:order:2:create")
	eventually.True(t, "the lock to wait for a claim slot", func() bool { return db.slotWaiters.Load() == 1 })
	if err := l1.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-ch
	if r.err != nil {
		t.Fatalf("lock once a slot was freed: %v", r.err)
	}
	r.l.Release(ctx)
}

func TestLockSettings(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := newDB(t, Config{ClaimIdleTimeout: 1500 * time.Millisecond, ClaimLockTimeout: 4 * time.Second})
	j := db.journalStore()
	key := "site:order:settings:create"
	if _, err := j.Register(ctx, testOp(key)); err != nil {
		t.Fatal(err)
	}
	l, err := j.Lock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	show := func(q interface {
		QueryRow(context.Context, string, ...any) pgx.Row
	}, name string) string {
		var s string
		if err := q.QueryRow(ctx, "SHOW "+name).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	conn := l.(*locked).conn
	if got, want := show(conn, "idle_in_transaction_session_timeout"), "1500ms"; got != want {
		t.Fatalf("idle_in_transaction_session_timeout in the lock: got %s, want %s", got, want)
	}
	if got, err := time.ParseDuration(show(conn, "lock_timeout")); err != nil || got <= 3*time.Second || got > 4*time.Second {
		t.Fatalf("lock_timeout in the lock: got %v (%v), want what is left of 4s", got, err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if got := show(db.Pool(), "idle_in_transaction_session_timeout"); got == "1500ms" {
			t.Fatal("the setting leaked out of the lock transaction onto a pooled connection")
		}
	}
}

// A lock idle past ClaimIdleTimeout loses its session and so its row lock; the late
// Fail fails, says why, and gives the slot back.
func TestLockIdleTimeoutEndsTheLock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := newDB(t, Config{ClaimIdleTimeout: 300 * time.Millisecond})
	j := db.journalStore()
	key := "site:order:idle-lock:create"
	if _, err := j.Register(ctx, testOp(key)); err != nil {
		t.Fatal(err)
	}
	l, err := j.Lock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	sessionEnded(t, db) // the server ends the lock's idle session
	c, err := j.ClaimDue(ctx, "next")
	if err != nil {
		t.Fatalf("claim after the lock's idle timeout: %v", err)
	}
	defer c.Release(ctx)
	err = l.Fail(ctx, "too late")
	if err == nil || !strings.Contains(err.Error(), "idle") && !strings.Contains(err.Error(), "lost the lock's connection") {
		t.Fatalf("fail after the idle timeout: got %v, want an error that explains it", err)
	}
	t.Logf("late fail: %v", err)
	if n := len(db.claimSlots); n != 1 {
		t.Fatalf("claim slots after the late fail: got %d, want 1 (the claim's)", n)
	}
	if err := c.Finish(ctx, journal.Finish{Status: journal.StatusDone, Result: &journal.Result{Ref: "r"}}); err != nil {
		t.Fatal(err)
	}
	if op, _ := j.Get(ctx, key); op.Status != journal.StatusDone {
		t.Fatalf("after the late fail: got %s, want done by the claim", op.Status)
	}
}

// Fail changes only a pending operation: a done one holds its effect in 1C, a failed
// one keeps its reason. The refused lock stays held until Release.
func TestLockFailRefusesNotPending(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := newDB(t, Config{})
	j := db.journalStore()
	done, failed := "site:order:done-lock:create", "site:order:failed-lock:create"
	for _, k := range []string{done, failed} {
		if _, err := j.Register(ctx, testOp(k)); err != nil {
			t.Fatal(err)
		}
	}
	for k, f := range map[string]journal.Finish{
		done:   {Status: journal.StatusDone, Result: &journal.Result{Ref: "r"}},
		failed: {Status: journal.StatusFailed, Error: "422"},
	} {
		c, err := j.ClaimKey(ctx, k, "w")
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Finish(ctx, f); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range []string{done, failed} {
		before, _ := j.Get(ctx, k)
		l, err := j.Lock(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		err = l.Fail(ctx, "cancelled")
		var npe *journal.NotPendingError
		if !errors.As(err, &npe) || npe.Operation.Status != before.Status {
			t.Fatalf("fail %s: got %v, want *journal.NotPendingError", before.Status, err)
		}
		if !rowLockedElsewhere(t, db, k) {
			t.Fatalf("%s: the refused lock let the row go before Release", k)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if after, _ := j.Get(ctx, k); after.Status != before.Status || after.LastError != before.LastError {
			t.Fatalf("%s after a refused fail: got %s %q", k, after.Status, after.LastError)
		}
	}
}

// A pending operation failed under a lock is not claimed again, so Fail closes the
// attempts a stopped worker left open.
func TestLockFailClosesOpenAttempts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := newDB(t, Config{})
	j := db.journalStore()
	key := "kaspi:order:crashed:create"
	if _, err := j.Register(ctx, testOp(key)); err != nil {
		t.Fatal(err)
	}
	c, err := j.ClaimDue(ctx, "crashed")
	if err != nil {
		t.Fatal(err)
	}
	c.Release(ctx)
	l, err := j.Lock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Fail(ctx, "cancelled before it was created in 1C"); err != nil {
		t.Fatal(err)
	}
	d, err := j.Show(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.History) != 1 || d.History[0].Outcome != journal.OutcomeInterrupted || d.History[0].FinishedAt == nil || d.History[0].Error != InterruptedError {
		t.Fatalf("attempts after fail: got %+v, want the open one interrupted", d.History)
	}
	if d.Status != journal.StatusFailed || d.Attempts != 1 {
		t.Fatalf("after fail: got %s attempts %d, want failed 1", d.Status, d.Attempts)
	}
}

// Revise waits for whoever holds the row, at most ClaimLockTimeout, and decides on
// the row as that holder left it.
func TestReviseWaitsForTheRow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := newDB(t, Config{ClaimLockTimeout: 200 * time.Millisecond})
	j := db.journalStore()
	key := "ozon:posting:9-9:create"
	raw := testOp(key)
	raw.Payload = []byte(`{"posting_number":"9-9","products":[{"offer_id":"X"}]}`)
	if _, err := j.RegisterFailed(ctx, raw, "unmapped SKU X"); err != nil {
		t.Fatal(err)
	}
	l, err := j.Lock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.Revise(ctx, testOp(key)); !errors.Is(err, journal.ErrBusy) {
		t.Fatalf("revise of a locked row: got %v, want %v", err, journal.ErrBusy)
	}
	l.Release(ctx)

	// A worker claims the requeued operation, reaches 1C and fails it while Revise
	// waits: Revise sees the attempt and refuses.
	db2 := open(t, Config{URL: db.cfg.URL, ClaimLockTimeout: 10 * time.Second})
	if _, err := j.Requeue(ctx, key); err != nil {
		t.Fatal(err)
	}
	c, err := j.ClaimKey(ctx, key, "w")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := db2.journalStore().Revise(ctx, testOp(key))
		done <- err
	}()
	lockWait(t, db) // Revise waits for the claim's row lock
	if err := c.Finish(ctx, journal.Finish{Status: journal.StatusFailed, Error: "422"}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, journal.ErrNotRevisable) {
		t.Fatalf("revise after the claim failed it in 1C: got %v, want %v", err, journal.ErrNotRevisable)
	}
}

// TestRoundTripsConnectors measures the new calls on a warm pool (statements
// prepared): RegisterFailed (1 new, 2 for an existing key), Revise 1, Lock 1, Fail 1,
// Release 1, and the cursor calls 1 each.
func TestRoundTripsConnectors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var rt testdb.RoundTrips
	db := newDB(t, Config{ClockCheckInterval: -1, ConfigurePool: func(c *pgxpool.Config) {
		rt.Install(c)
		c.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return false }
	}})
	j := db.journalStore()
	cur := db.Cursors()

	run := func(i int) map[string]int64 {
		key := fmt.Sprintf("kaspi:order:rt%d:create", i)
		raw := testOp(key)
		raw.Payload = []byte(`{"code":"rt","entries":[{"offer":{"code":"X"}}]}`)
		got := map[string]int64{}
		measure := func(name string, fn func()) { got[name] = rt.Measure(fn) }
		measure("RegisterFailed new", func() {
			if _, err := j.RegisterFailed(ctx, raw, "unmapped SKU X"); err != nil {
				t.Fatal(err)
			}
		})
		measure("RegisterFailed existing", func() {
			if _, err := j.RegisterFailed(ctx, raw, "unmapped SKU X"); err != nil {
				t.Fatal(err)
			}
		})
		measure("Revise", func() {
			if _, err := j.Revise(ctx, testOp(key)); err != nil {
				t.Fatal(err)
			}
		})
		var l journal.Locked
		measure("Lock", func() {
			var err error
			if l, err = j.Lock(ctx, key); err != nil {
				t.Fatal(err)
			}
		})
		measure("Fail", func() {
			if err := l.Fail(ctx, "cancelled"); err != nil {
				t.Fatal(err)
			}
		})
		measure("Release after Fail", func() { l.Release(ctx) })
		l, err := j.Lock(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		measure("Release", func() { l.Release(ctx) })
		measure("SaveCursor", func() {
			if err := cur.SaveCursor(ctx, connectors.Cursor{Connector: "kaspi", Position: time.Now()}); err != nil {
				t.Fatal(err)
			}
		})
		measure("Cursor", func() {
			if _, err := cur.Cursor(ctx, "kaspi"); err != nil {
				t.Fatal(err)
			}
		})
		measure("Cursors", func() {
			if _, err := cur.Cursors(ctx); err != nil {
				t.Fatal(err)
			}
		})
		return got
	}
	var got map[string]int64
	for i := range 6 {
		got = run(i)
	}
	want := map[string]int64{
		"RegisterFailed new": 1, "RegisterFailed existing": 2, "Revise": 1, "Lock": 1, "Fail": 1,
		"Release after Fail": 0, "Release": 1, "SaveCursor": 1, "Cursor": 1, "Cursors": 1,
	}
	var names []string
	for k := range want {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		t.Logf("%s: %d round trips", k, got[k])
		if got[k] != want[k] {
			t.Errorf("%s: %d round trips, want %d", k, got[k], want[k])
		}
	}
}
