package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ordersync/ordersync/internal/inbox"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/order"
)

// ---- helpers ----

// inboxTestDB opens and migrates a database file in a temporary directory.
func inboxTestDB(t testing.TB, cfg Config) *DB {
	t.Helper()
	if cfg.Path == "" {
		cfg.Path = filepath.Join(t.TempDir(), "ordersync.db")
	}
	cfg.TakeoverAfter = cmp.Or(cfg.TakeoverAfter, time.Nanosecond)
	db, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return db
}

func inboxEv(id, body string) inbox.Event {
	return inbox.Event{Source: "site", ID: id, Body: []byte(body), ContentType: "application/json", ReceivedAt: time.Now()}
}

func inboxReg(key string, n int) inbox.Registration {
	return inbox.Registration{Op: journal.NewOperation{Key: key, Kind: order.KindCreate, Source: "site", ExternalID: key,
		Payload: json.RawMessage(fmt.Sprintf(`{"n":%d}`, n))}}
}

var inboxOK = inbox.Answer{Status: 200, ContentType: "application/json", Body: json.RawMessage(`{"ok":true}`)}

func mustReceive(t testing.TB, ib *Inbox, ev inbox.Event, regs []inbox.Registration, want inbox.Outcome) inbox.Receipt {
	t.Helper()
	r, err := ib.Receive(context.Background(), ev, regs, inboxOK)
	if err != nil {
		t.Fatalf("receive %s: %v", ev.ID, err)
	}
	if r.Outcome != want {
		t.Fatalf("receive %s: got %s, want %s", ev.ID, r.Outcome, want)
	}
	return r
}

// inboxCount runs a SELECT count(*) … and returns the number.
func inboxCount(t testing.TB, db *DB, q string, args ...any) int {
	t.Helper()
	var n int
	if err := db.SQL().QueryRowContext(context.Background(), q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

func wantInboxCounts(t testing.TB, db *DB, what string, events, ops int) {
	t.Helper()
	gotEvents := inboxCount(t, db, `SELECT count(*) FROM inbox_events`)
	gotOps := inboxCount(t, db, `SELECT count(*) FROM operations`)
	if gotEvents != events || gotOps != ops {
		t.Fatalf("%s: %d events and %d operations, want %d and %d", what, gotEvents, gotOps, events, ops)
	}
}

// inboxOp reads what the tests check of an operation, straight from the table.
type inboxOp struct {
	status, sha, payload   string
	next, created, updated time.Time
	attempts               int
	lastError              string
}

func readInboxOp(t testing.TB, db *DB, key string) inboxOp {
	t.Helper()
	var (
		op                     inboxOp
		next, created, updated int64
	)
	err := db.SQL().QueryRowContext(context.Background(), `SELECT status, payload_sha256, payload, next_attempt_at,
		created_at, updated_at, attempts, last_error FROM operations WHERE key = ?`, key).Scan(
		&op.status, &op.sha, &op.payload, &next, &created, &updated, &op.attempts, &op.lastError)
	if err != nil {
		t.Fatalf("operation %s: %v", key, err)
	}
	op.next, op.created, op.updated = fromTS(next), fromTS(created), fromTS(updated)
	return op
}

// ---- tests ----

// The outcomes, counted in rows: new, an exact repeat (the saved answer, nothing
// registered again), the same id with another body (recorded, nothing overwritten).
func TestInboxOutcomesInRows(t *testing.T) {
	t.Parallel()
	db := inboxTestDB(t, Config{})
	ib := db.inboxStore()
	key := "site:order:A-1:create"
	ev := inboxEv("msg_1", `{"a":1}`)

	r := mustReceive(t, ib, ev, []inbox.Registration{inboxReg(key, 1), inboxReg("site:order:A-1:cancel", 1)}, inbox.Processed)
	if !slices.Equal(r.Operations, []string{key, "site:order:A-1:cancel"}) {
		t.Fatalf("operations: got %q", r.Operations)
	}
	wantInboxCounts(t, db, "after a new event", 1, 2)
	if op := readInboxOp(t, db, key); op.status != "pending" || op.sha != order.SHA256Hex([]byte(`{"n":1}`)) || op.payload != `{"n":1}` {
		t.Fatalf("operation: got %+v", op)
	}

	other := inbox.Answer{Status: 202, Body: json.RawMessage(`"x"`)}
	d, err := ib.Receive(context.Background(), ev, []inbox.Registration{inboxReg(key, 2), inboxReg("site:order:A-9:create", 1)}, other)
	if err != nil || d.Outcome != inbox.Duplicate || d.Answer.Status != 200 || string(d.Answer.Body) != `{"ok":true}` ||
		d.Answer.ContentType != "application/json" || !slices.Equal(d.Operations, r.Operations) {
		t.Fatalf("duplicate: got %+v, %v", d, err)
	}
	wantInboxCounts(t, db, "after a duplicate", 1, 2)
	if n := inboxCount(t, db, `SELECT count(*) FROM operation_conflicts`); n != 0 {
		t.Fatalf("journal conflicts after a duplicate: %d", n)
	}

	c := mustReceive(t, ib, inboxEv("msg_1", `{"a":2}`), []inbox.Registration{inboxReg(key, 3)}, inbox.Conflict)
	if c.Answer.Status != 0 || !slices.Equal(c.Operations, r.Operations) {
		t.Fatalf("conflict: got %+v", c)
	}
	wantInboxCounts(t, db, "after a conflict", 1, 2)
	if n := inboxCount(t, db, `SELECT count(*) FROM inbox_conflicts WHERE body_sha256 = ?`, order.SHA256Hex([]byte(`{"a":2}`))); n != 1 {
		t.Fatalf("inbox conflicts: %d, want 1", n)
	}
	if n := inboxCount(t, db, `SELECT count(*) FROM inbox_events WHERE body = ?`, []byte(`{"a":1}`)); n != 1 {
		t.Fatal("the stored body was overwritten")
	}
}

// A failure anywhere before commit leaves neither the event nor an operation: a
// trigger fails the insert of one operation (after the event row and another
// operation were written), and a hook fails the transaction after every row of the
// delivery was written.
func TestInboxFailureBeforeCommitLeavesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := inboxTestDB(t, Config{})
	if _, err := db.SQL().ExecContext(ctx, `CREATE TRIGGER fail_operation BEFORE INSERT ON operations
		WHEN NEW.key = 'site:order:poison:create' BEGIN SELECT RAISE(ABORT, 'injected failure'); END`); err != nil {
		t.Fatal(err)
	}
	failCommit := false
	ib := db.inboxStore()
	ib.beforeCommit = func() error {
		if failCommit {
			return errors.New("injected failure before commit")
		}
		return nil
	}

	for _, tc := range []struct {
		id   string
		regs []inbox.Registration
		fail func(on bool)
	}{
		{"fails-before-commit", []inbox.Registration{inboxReg("site:order:G-1:create", 1), inboxReg("site:order:G-2:create", 1)},
			func(on bool) { failCommit = on }},
		{"fails-in-an-operation", []inbox.Registration{inboxReg("site:order:G-3:create", 1), inboxReg("site:order:poison:create", 1)},
			func(on bool) {
				if !on {
					if _, err := db.SQL().ExecContext(ctx, `DROP TRIGGER fail_operation`); err != nil {
						t.Fatal(err)
					}
				}
			}},
	} {
		before := inboxCount(t, db, `SELECT count(*) FROM operations`)
		ev := inboxEv(tc.id, `{"id":"`+tc.id+`"}`)
		tc.fail(true)
		if r, err := ib.Receive(ctx, ev, tc.regs, inboxOK); err == nil {
			t.Fatalf("%s: got %s, want the injected failure", tc.id, r.Outcome)
		} else {
			t.Logf("%s: %v", tc.id, err)
		}
		if n := inboxCount(t, db, `SELECT count(*) FROM inbox_events WHERE event_id = ?`, tc.id); n != 0 {
			t.Fatalf("%s: the event is stored after a failed delivery", tc.id)
		}
		if n := inboxCount(t, db, `SELECT count(*) FROM operations`); n != before {
			t.Fatalf("%s: %d operations after a failed delivery, want %d", tc.id, n, before)
		}
		if db.Keys().Held(inboxEventLock(ev.Source, ev.ID)) {
			t.Fatalf("%s: the event is still held after a failed delivery", tc.id)
		}
		tc.fail(false)
		mustReceive(t, ib, ev, tc.regs, inbox.Processed)
		mustReceive(t, ib, ev, tc.regs, inbox.Duplicate)
		if n := inboxCount(t, db, `SELECT count(*) FROM operations`); n != before+2 {
			t.Fatalf("%s: %d operations after the redelivery, want %d", tc.id, n, before+2)
		}
	}
	wantInboxCounts(t, db, "in the end", 2, 4)
}

// A cancelled request rolls its delivery back; the redelivery registers it.
func TestInboxCancelledReceiveLeavesNothing(t *testing.T) {
	t.Parallel()
	db := inboxTestDB(t, Config{})
	ib := db.inboxStore()
	ctx, cancel := context.WithCancel(context.Background())
	ib.beforeCommit = func() error { cancel(); return nil }
	ev := inboxEv("cancelled", `{}`)
	regs := []inbox.Registration{inboxReg("site:order:K-1:create", 1)}
	if r, err := ib.Receive(ctx, ev, regs, inboxOK); err == nil {
		t.Fatalf("cancelled receive: got %s, want an error", r.Outcome)
	}
	wantInboxCounts(t, db, "after a cancelled delivery", 0, 0)
	ib.beforeCommit = nil
	mustReceive(t, ib, ev, regs, inbox.Processed)
	wantInboxCounts(t, db, "after the redelivery", 1, 1)
}

// A delivery of an event that another delivery in the process is registering is in
// progress: nothing is written, and the redelivery after it is processed.
func TestInboxInProgress(t *testing.T) {
	t.Parallel()
	db := inboxTestDB(t, Config{})
	ib := db.inboxStore()
	ev := inboxEv("held", `{}`)
	regs := []inbox.Registration{inboxReg("site:order:H-1:create", 1)}

	lock := inboxEventLock(ev.Source, ev.ID)
	if !db.Keys().TryLock(lock) {
		t.Fatal("the event's lock is held before any delivery")
	}
	r := mustReceive(t, db.inboxStore(), ev, regs, inbox.InProgress)
	if r.Answer.Status != 0 || len(r.Operations) != 0 {
		t.Fatalf("in progress: got %+v, want no answer and no operations", r)
	}
	wantInboxCounts(t, db, "while another delivery holds the event", 0, 0)
	mustReceive(t, ib, inboxEv("other-event", `{}`), nil, inbox.Processed) // other events go on
	db.Keys().Unlock(lock)

	mustReceive(t, ib, ev, regs, inbox.Processed)
	wantInboxCounts(t, db, "after the holder ended", 2, 1)
}

// A delivery held in the write transaction makes a second delivery of the same event
// answer in progress at once (it does not wait for the writer), while a delivery of
// another event waits for the writer and is processed.
func TestInboxInProgressWhileRegistering(t *testing.T) {
	t.Parallel()
	db := inboxTestDB(t, Config{})
	ev := inboxEv("slow", `{}`)
	regs := []inbox.Registration{inboxReg("site:order:S-1:create", 1)}
	inTx, release := make(chan struct{}), make(chan struct{})
	slow := db.inboxStore()
	slow.beforeCommit = func() error {
		close(inTx)
		<-release
		return nil
	}
	done := make(chan error, 1)
	go func() {
		_, err := slow.Receive(context.Background(), ev, regs, inboxOK)
		done <- err
	}()
	<-inTx
	start := time.Now()
	mustReceive(t, db.inboxStore(), ev, regs, inbox.InProgress)
	if d := time.Since(start); d > time.Second {
		t.Fatalf("in progress took %v, want at once", d)
	}
	other := make(chan error, 1)
	go func() {
		_, err := db.inboxStore().Receive(context.Background(), inboxEv("other", `{}`), nil, inboxOK)
		other <- err
	}()
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := <-other; err != nil {
		t.Fatal(err)
	}
	mustReceive(t, db.inboxStore(), ev, regs, inbox.Duplicate)
	wantInboxCounts(t, db, "in the end", 2, 1)
}

// A delivery that another process commits between this delivery's lookup and its
// transaction: the insert does nothing and the event is read again.
func TestInboxCommittedBetweenLookupAndInsert(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := inboxTestDB(t, Config{})
	otherProcess, err := Open(ctx, Config{Path: db.Path()})
	if err != nil {
		t.Fatal(err)
	}
	defer otherProcess.Close()
	for _, tc := range []struct {
		name, first string
		want        inbox.Outcome
	}{
		{"same body", `{"a":1}`, inbox.Duplicate},
		{"other body", `{"a":2}`, inbox.Conflict},
	} {
		id := "race-" + tc.name
		key := "site:order:" + id + ":create"
		ib := db.inboxStore()
		var once sync.Once
		ib.beforeRegister = func() {
			once.Do(func() {
				mustReceive(t, otherProcess.inboxStore(), inboxEv(id, tc.first), []inbox.Registration{inboxReg(key, 1)}, inbox.Processed)
			})
		}
		r := mustReceive(t, ib, inboxEv(id, `{"a":1}`), []inbox.Registration{inboxReg(key, 2)}, tc.want)
		if !slices.Equal(r.Operations, []string{key}) {
			t.Fatalf("%s: operations %q, want the first delivery's %q", tc.name, r.Operations, []string{key})
		}
		if op := readInboxOp(t, db, key); op.sha != order.SHA256Hex([]byte(`{"n":1}`)) {
			t.Fatalf("%s: operation %+v; want the first delivery's", tc.name, op)
		}
	}
	wantInboxCounts(t, db, "after both races", 2, 2)
	if n := inboxCount(t, db, `SELECT count(*) FROM inbox_conflicts`); n != 1 {
		t.Fatalf("inbox conflicts: got %d, want 1", n)
	}
	if n := inboxCount(t, db, `SELECT count(*) FROM operation_conflicts`); n != 0 {
		t.Fatalf("journal conflicts: got %d, want none (the losing deliveries registered nothing)", n)
	}
}

// 100 simultaneous deliveries of one event, spread over four handles of the file (as
// if from four processes), end with one event, one operation and exactly one
// Processed.
func TestInboxConcurrentAcrossHandles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := inboxTestDB(t, Config{})
	handles := []*DB{db}
	for range 3 {
		h, err := Open(ctx, Config{Path: db.Path()})
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		handles = append(handles, h)
	}
	key := "site:order:C-1:create"
	ev := inboxEv("msg_concurrent", `{"external_id":"C-1"}`)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		outcomes = map[inbox.Outcome]int{}
		errs     []error
	)
	start := make(chan struct{})
	for i := range 100 {
		ib := handles[i%len(handles)].inboxStore()
		wg.Go(func() {
			<-start
			r, err := ib.Receive(ctx, ev, []inbox.Registration{inboxReg(key, 1)}, inboxOK)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			outcomes[r.Outcome]++
		})
	}
	close(start)
	wg.Wait()
	t.Logf("100 simultaneous deliveries on %d handles: %v", len(handles), outcomes)
	if len(errs) > 0 {
		t.Fatalf("%d deliveries failed, first: %v", len(errs), errs[0])
	}
	if outcomes[inbox.Processed] != 1 || outcomes[inbox.Processed]+outcomes[inbox.Duplicate]+outcomes[inbox.InProgress] != 100 {
		t.Fatalf("outcomes: %v, want exactly one processed", outcomes)
	}
	wantInboxCounts(t, db, "after simultaneous deliveries", 1, 1)
	if n := inboxCount(t, db, `SELECT count(*) FROM operation_conflicts`) + inboxCount(t, db, `SELECT count(*) FROM inbox_conflicts`); n != 0 {
		t.Fatalf("conflicts after simultaneous deliveries: %d, want none", n)
	}
}

// Wake of an operation whose key is held (a claim's 1C call) does not wait for the
// key: it is recorded, and applied once the key is free (ApplyWakes, for a holder
// that was not a claim with a Finish): a retry is made due now, a done operation
// stays done.
func TestInboxWakeDoesNotWaitForTheKeyLock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := inboxTestDB(t, Config{ClaimLockTimeout: 10 * time.Second})
	for _, tc := range []struct {
		verdict string // SQL applied while the key is held, as a claim's Finish would
		want    string
		dueNow  bool
	}{
		{`UPDATE operations SET status = 'pending', next_attempt_at = ?, last_error = 'portal 503' WHERE key = ?`, "pending", true},
		{`UPDATE operations SET status = 'done', result = '{"ref":"r"}', next_attempt_at = ? WHERE key = ?`, "done", false},
	} {
		key := "bitrix24:deal:" + tc.want + ":create"
		mustReceive(t, db.inboxStore(), inboxEv("create-"+key, `{}`), []inbox.Registration{inboxReg(key, 1)}, inbox.Processed)
		if err := db.Keys().Lock(ctx, key); err != nil {
			t.Fatal(err)
		}
		wake := inboxReg(key, 2)
		wake.IfAbsent, wake.Wake = true, true
		mustReceive(t, db.inboxStore(), inboxEv("update-"+key, `{}`), []inbox.Registration{wake}, inbox.Processed)
		later := time.Now().Add(time.Hour)
		if _, err := db.SQL().ExecContext(ctx, tc.verdict, ts(later), key); err != nil {
			t.Fatal(err)
		}
		if n, err := db.journalStore().ApplyWakes(ctx); err != nil || n != 0 {
			t.Fatalf("%s: ApplyWakes while the key is held applied %d (%v), want 0", key, n, err)
		}
		finishedAt := time.Now()
		db.Keys().Unlock(key)
		if _, err := db.journalStore().ApplyWakes(ctx); err != nil {
			t.Fatal(err)
		}
		op := readInboxOp(t, db, key)
		if op.status != tc.want || (tc.dueNow && op.next.Before(finishedAt.Add(-time.Second))) || (!tc.dueNow && !op.next.Equal(fromTS(ts(later)))) {
			t.Fatalf("%s after the wake: got %+v, want %s (due now: %v)", key, op, tc.want, tc.dueNow)
		}
		if db.Keys().Held(key) {
			t.Fatalf("%s: the wake left the key locked", key)
		}
	}
}

// Times come from Config.Now (UTC): the receipt time when the event has none, the
// operations, both kinds of conflict and the wake.
func TestInboxInjectedClock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := time.Date(2026, 9, 16, 10, 0, 0, 123456789, time.FixedZone("Asia/Almaty", 5*3600))
	want := now.UTC().Truncate(time.Microsecond)
	db := inboxTestDB(t, Config{Now: func() time.Time { return now }})
	ib := db.inboxStore()

	old := "site:order:old:create"
	mustReceive(t, ib, inboxEv("first", `{}`), []inbox.Registration{inboxReg(old, 1)}, inbox.Processed)
	if _, err := db.SQL().ExecContext(ctx, `UPDATE operations SET next_attempt_at = ?, updated_at = ? WHERE key = ?`,
		ts(want.Add(time.Hour)), ts(want.Add(-time.Hour)), old); err != nil {
		t.Fatal(err)
	}
	ev := inboxEv("clock", `{}`)
	ev.ReceivedAt = time.Time{}
	wake := inboxReg(old, 5)
	wake.Wake = true
	mustReceive(t, ib, ev, []inbox.Registration{inboxReg("site:order:new:create", 1), wake}, inbox.Processed)
	mustReceive(t, ib, inbox.Event{Source: ev.Source, ID: ev.ID, Body: []byte(`{"other":1}`)}, nil, inbox.Conflict)

	d, err := ib.Show(ctx, ev.Source, ev.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !d.ReceivedAt.Equal(want) || d.ReceivedAt.Location() != time.UTC || len(d.Conflicts) != 1 || !d.Conflicts[0].At.Equal(want) ||
		d.Conflicts[0].At.Location() != time.UTC {
		t.Fatalf("event: received_at %v, conflicts %+v; want %v", d.ReceivedAt, d.Conflicts, want)
	}
	created, woken := readInboxOp(t, db, "site:order:new:create"), readInboxOp(t, db, old)
	var conflictAt, lastAt int64
	if err := db.SQL().QueryRowContext(ctx, `SELECT at, last_at FROM operation_conflicts WHERE operation_key = ?`, old).Scan(&conflictAt, &lastAt); err != nil {
		t.Fatal(err)
	}
	if !created.created.Equal(want) || !created.next.Equal(want) || !created.updated.Equal(want) || !woken.next.Equal(want) ||
		!woken.updated.Equal(want) || !fromTS(conflictAt).Equal(want) || !fromTS(lastAt).Equal(want) {
		t.Fatalf("times: created %+v, woken %+v, conflict %v/%v; want all %v", created, woken, fromTS(conflictAt), fromTS(lastAt), want)
	}
}

// An event without a body, content type or answer body is stored and shown as such.
func TestInboxBareEvent(t *testing.T) {
	t.Parallel()
	db := inboxTestDB(t, Config{})
	ib := db.inboxStore()
	ev := inbox.Event{Source: "ozon", ID: "bare"}
	if _, err := ib.Receive(context.Background(), ev, nil, inbox.Answer{Status: 204}); err != nil {
		t.Fatal(err)
	}
	r, err := ib.Receive(context.Background(), ev, nil, inbox.Answer{Status: 200})
	if err != nil || r.Outcome != inbox.Duplicate || r.Answer.Status != 204 || r.Answer.Body != nil || r.Answer.ContentType != "" ||
		r.Operations == nil || len(r.Operations) != 0 {
		t.Fatalf("duplicate of a bare event: got %+v, %v", r, err)
	}
	d, err := ib.Show(context.Background(), "ozon", "bare")
	if err != nil {
		t.Fatal(err)
	}
	if d.BodyText != "" || d.Body == nil || len(d.Body) != 0 || d.ContentType != "" || d.BodySHA256 != order.SHA256Hex(nil) {
		t.Fatalf("bare event: got %+v", d)
	}
	if n := inboxCount(t, db, `SELECT count(*) FROM inbox_events WHERE body IS NOT NULL AND length(body) = 0`); n != 1 {
		t.Fatalf("the empty body is not stored as an empty blob (%d rows)", n)
	}
}

// A duplicate writes nothing: no connection commits while 200 duplicates are
// answered (PRAGMA data_version of another connection changes on any commit by
// another connection, of this process or another), and the WAL does not grow.
func TestInboxDuplicateWritesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := inboxTestDB(t, Config{})
	ib := db.inboxStore()
	ev := inboxEv("dup", `{"a":1}`)
	key := "site:order:dup:create"
	mustReceive(t, ib, ev, []inbox.Registration{inboxReg(key, 1)}, inbox.Processed)

	watcher, err := db.SQL().Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Close()
	dataVersion := func() int64 {
		var v int64
		if err := watcher.QueryRowContext(ctx, `PRAGMA data_version`).Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	walFrames := func() int {
		var busy, log, ckpt int
		if err := watcher.QueryRowContext(ctx, `PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &log, &ckpt); err != nil {
			t.Fatal(err)
		}
		return log
	}
	before, frames := dataVersion(), walFrames()
	for range 200 {
		mustReceive(t, ib, ev, []inbox.Registration{inboxReg(key, 1)}, inbox.Duplicate)
	}
	if after := dataVersion(); after != before {
		t.Fatalf("data_version went from %d to %d while duplicates were answered: something committed", before, after)
	}
	if f := walFrames(); f != frames {
		t.Fatalf("the WAL went from %d to %d frames while duplicates were answered", frames, f)
	}
	wantInboxCounts(t, db, "after duplicates", 1, 1)
}

// The lookup finds an event by its primary key.
func TestInboxLookupUsesThePrimaryKey(t *testing.T) {
	t.Parallel()
	db := inboxTestDB(t, Config{})
	rows, err := db.SQL().QueryContext(context.Background(), `EXPLAIN QUERY PLAN `+inboxLookupSQL, "site", "x")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if len(plan) != 1 || plan[0] != "SEARCH e USING INDEX sqlite_autoindex_inbox_events_1 (source=? AND event_id=?)" &&
		plan[0] != "SEARCH inbox_events USING INDEX sqlite_autoindex_inbox_events_1 (source=? AND event_id=?)" {
		t.Fatalf("lookup plan: %q, want a search on the primary key", plan)
	}
}

// Wake of an operation claimed by a worker (ClaimKey holds its key while 1C is
// called) is answered at once and recorded; the claim's Finish applies it: a retry
// or a failure is due now, a done operation stays done.
func TestInboxWakeOfAClaimedOperationDoesNotWait(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := inboxTestDB(t, Config{})
	j := db.journalStore()
	for _, tc := range []struct {
		verdict journal.Finish
		want    journal.Status
		dueNow  bool
	}{
		{journal.Finish{Status: journal.StatusPending, Error: "portal 503", NextAttemptAt: time.Now().Add(time.Hour)}, journal.StatusPending, true},
		{journal.Finish{Status: journal.StatusFailed, Error: "unknown SKU"}, journal.StatusPending, true},
		{journal.Finish{Status: journal.StatusDone, Result: &journal.Result{Ref: "r", Number: "1"}}, journal.StatusDone, false},
	} {
		key := "bitrix24:deal:" + string(tc.verdict.Status) + ":create"
		if _, err := j.Register(ctx, inboxReg(key, 1).Op); err != nil {
			t.Fatal(err)
		}
		c, err := j.ClaimKey(ctx, key, "w")
		if err != nil {
			t.Fatal(err)
		}
		wake := inboxReg(key, 2)
		wake.IfAbsent, wake.Wake = true, true
		// Answered while the claim holds the key: this returns, or the test times out.
		mustReceive(t, db.inboxStore(), inboxEv("update-"+key, `{}`), []inbox.Registration{wake}, inbox.Processed)
		finishedAt := time.Now()
		if err := c.Finish(ctx, tc.verdict); err != nil {
			t.Fatal(err)
		}
		op, err := j.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if op.Status != tc.want || (tc.dueNow && op.NextAttemptAt.Before(finishedAt.Add(-time.Second))) || (!tc.dueNow && op.Result == nil) {
			t.Fatalf("%s after the wake: got status %s next_attempt_at %v result %v, want %s (due now: %v)",
				key, op.Status, op.NextAttemptAt, op.Result, tc.want, tc.dueNow)
		}
		if n, err := j.ApplyWakes(ctx); err != nil || n != 0 {
			t.Fatalf("%s: ApplyWakes after the Finish applied %d (%v), want 0", key, n, err)
		}
	}
}

// Rounds of 100 simultaneous deliveries of one event on one handle whose pool is
// warm (its connections open, so the deliveries really overlap): each round ends with
// one more event and one more operation and exactly one Processed; the others are
// duplicates or, while the first is being registered, in progress.
func TestInboxConcurrentRounds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := inboxTestDB(t, Config{})
	var conns []*sql.Conn
	for range 8 {
		c, err := db.SQL().Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	for _, c := range conns {
		c.Close()
	}
	total := map[inbox.Outcome]int{}
	for round := range 10 {
		ev := inboxEv(fmt.Sprintf("round-%d", round), `{}`)
		key := fmt.Sprintf("site:order:round-%d:create", round)
		var (
			wg       sync.WaitGroup
			mu       sync.Mutex
			outcomes = map[inbox.Outcome]int{}
		)
		start := make(chan struct{})
		for range 100 {
			wg.Go(func() {
				<-start
				r, err := db.inboxStore().Receive(ctx, ev, []inbox.Registration{inboxReg(key, 1)}, inboxOK)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				outcomes[r.Outcome]++
				total[r.Outcome]++
				mu.Unlock()
			})
		}
		close(start)
		wg.Wait()
		if outcomes[inbox.Processed] != 1 || outcomes[inbox.Processed]+outcomes[inbox.Duplicate]+outcomes[inbox.InProgress] != 100 {
			t.Fatalf("round %d: outcomes %v, want exactly one processed", round, outcomes)
		}
		wantInboxCounts(t, db, fmt.Sprintf("after round %d", round), round+1, round+1)
	}
	t.Logf("10 rounds of 100 simultaneous deliveries: %v", total)
}
