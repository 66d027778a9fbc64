package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ordersync/ordersync/internal/eventually"
	"github.com/ordersync/ordersync/internal/inbox"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/order"
	"github.com/ordersync/ordersync/internal/testdb"
)

// ---- helpers ----

func inboxEv(id, body string) inbox.Event {
	return inbox.Event{Source: "site", ID: id, Body: []byte(body), ContentType: "application/json", ReceivedAt: time.Now()}
}

func inboxReg(key string, n int) inbox.Registration {
	return inbox.Registration{Op: journal.NewOperation{Key: key, Kind: order.KindCreate, Source: "site", ExternalID: key,
		Payload: json.RawMessage(fmt.Sprintf(`{"n":%d}`, n))}}
}

var inboxOK = inbox.Answer{Status: 200, ContentType: "application/json", Body: json.RawMessage(`{"ok":true}`)}

func mustReceive(t *testing.T, ib *Inbox, ev inbox.Event, regs []inbox.Registration, want inbox.Outcome) inbox.Receipt {
	t.Helper()
	r, err := ib.Receive(context.Background(), ev, regs, inboxOK)
	return wantReceipt(t, ev, r, err, want)
}

// receiving starts ib.Receive in a goroutine of its own, for a test that must act
// while the delivery waits; the function returned waits for the receipt and checks
// it as mustReceive does.
func receiving(t *testing.T, ib *Inbox, ev inbox.Event, regs []inbox.Registration) func(want inbox.Outcome) inbox.Receipt {
	done := make(chan struct{})
	var (
		r   inbox.Receipt
		err error
	)
	go func() {
		defer close(done)
		r, err = ib.Receive(context.Background(), ev, regs, inboxOK)
	}()
	return func(want inbox.Outcome) inbox.Receipt {
		t.Helper()
		<-done
		return wantReceipt(t, ev, r, err, want)
	}
}

func wantReceipt(t *testing.T, ev inbox.Event, r inbox.Receipt, err error, want inbox.Outcome) inbox.Receipt {
	t.Helper()
	if err != nil {
		t.Fatalf("receive %s: %v", ev.ID, err)
	}
	if r.Outcome != want {
		t.Fatalf("receive %s: got %s, want %s", ev.ID, r.Outcome, want)
	}
	return r
}

// count runs a SELECT count(*) … and returns the number.
func count(t *testing.T, db *DB, q string, args ...any) int {
	t.Helper()
	var n int
	if err := db.Pool().QueryRow(context.Background(), q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

func wantCounts(t *testing.T, db *DB, what string, events, ops int) {
	t.Helper()
	gotEvents := count(t, db, `SELECT count(*) FROM inbox_events`)
	gotOps := count(t, db, `SELECT count(*) FROM operations`)
	if gotEvents != events || gotOps != ops {
		t.Fatalf("%s: %d events and %d operations, want %d and %d", what, gotEvents, gotOps, events, ops)
	}
}

// lockWait waits until a session of this test's schema waits for a lock.
// wakeBehindClaim registers key and claims it, as the engine does while it calls
// 1C, then sends a delivery (event "update-"+key) that wakes the operation, and
// returns the claim once the delivery has been answered: a wake never waits for the
// claim's row lock (a 1C call can take minutes; a webhook answer must not).
func wakeBehindClaim(t *testing.T, db *DB, key string) journal.Claim {
	t.Helper()
	ctx := context.Background()
	if _, err := db.journalStore().Register(ctx, testOp(key)); err != nil {
		t.Fatal(err)
	}
	c, err := db.journalStore().ClaimKey(ctx, key, "w")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Release(context.Background()) })
	wake := inboxReg(key, 1)
	wake.IfAbsent, wake.Wake = true, true
	done := make(chan error, 1)
	go func() {
		_, err := db.inboxStore().Receive(ctx, inboxEv("update-"+key, `{}`), []inbox.Registration{wake}, inboxOK)
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the wake of %s was not answered within 30s while a claim held the row: it waits for the claim", key)
	}
	var wakes int
	if err := db.Pool().QueryRow(ctx, `SELECT count(*) FROM operation_wakes WHERE operation_key = $1`, key).Scan(&wakes); err != nil {
		t.Fatal(err)
	}
	if wakes != 1 {
		t.Fatalf("%d wakes recorded for %s, want 1", wakes, key)
	}
	return c
}

func lockWait(t *testing.T, db *DB) {
	t.Helper()
	eventually.True(t, "a session of the test to wait for a lock", func() bool {
		var waiting bool
		if err := db.Pool().QueryRow(context.Background(), `SELECT EXISTS (SELECT FROM pg_stat_activity
			WHERE application_name = current_setting('application_name') AND wait_event_type = 'Lock')`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		return waiting
	})
}

// ---- tests ----

// A failure anywhere before commit leaves neither the event nor an operation: here a
// deferred constraint trigger fails the COMMIT, after every row of the delivery was
// written, and a row trigger fails the insert of one operation.
func TestInboxFailureBeforeCommitLeavesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := newDB(t, Config{})
	ib := db.inboxStore()
	if _, err := db.Pool().Exec(ctx, `
		CREATE FUNCTION fail_inbox_test() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN RAISE EXCEPTION 'injected failure (%)', TG_NAME; END $$;
		CREATE CONSTRAINT TRIGGER fail_at_commit AFTER INSERT ON inbox_events
			DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
			WHEN (NEW.event_id = 'fails-at-commit') EXECUTE FUNCTION fail_inbox_test();
		CREATE TRIGGER fail_operation BEFORE INSERT ON operations
			FOR EACH ROW WHEN (NEW.key = 'site:order:poison:create') EXECUTE FUNCTION fail_inbox_test();`); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		id   string
		regs []inbox.Registration
		drop string
	}{
		{"fails-at-commit", []inbox.Registration{inboxReg("site:order:G-1:create", 1), inboxReg("site:order:G-2:create", 1)},
			`DROP TRIGGER fail_at_commit ON inbox_events`},
		{"fails-in-an-operation", []inbox.Registration{inboxReg("site:order:G-3:create", 1), inboxReg("site:order:poison:create", 1)},
			`DROP TRIGGER fail_operation ON operations`},
	} {
		before := count(t, db, `SELECT count(*) FROM operations`)
		ev := inboxEv(tc.id, `{"id":"`+tc.id+`"}`)
		if r, err := ib.Receive(ctx, ev, tc.regs, inboxOK); err == nil {
			t.Fatalf("%s: got %s, want the injected failure", tc.id, r.Outcome)
		} else {
			t.Logf("%s: %v", tc.id, err)
		}
		if n := count(t, db, `SELECT count(*) FROM inbox_events WHERE event_id = $1`, tc.id); n != 0 {
			t.Fatalf("%s: the event is stored after a failed delivery", tc.id)
		}
		if n := count(t, db, `SELECT count(*) FROM operations`); n != before {
			t.Fatalf("%s: %d operations after a failed delivery, want %d", tc.id, n, before)
		}
		if _, err := db.Pool().Exec(ctx, tc.drop); err != nil {
			t.Fatal(err)
		}
		mustReceive(t, ib, ev, tc.regs, inbox.Processed)
		mustReceive(t, ib, ev, tc.regs, inbox.Duplicate)
		if n := count(t, db, `SELECT count(*) FROM operations`); n != before+2 {
			t.Fatalf("%s: %d operations after the redelivery, want %d", tc.id, n, before+2)
		}
	}
	wantCounts(t, db, "in the end", 2, 4)
}

// A delivery of an event whose lock another transaction holds is in progress:
// nothing is written, and the redelivery after that transaction is processed.
func TestInboxInProgress(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := newDB(t, Config{})
	ib := db.inboxStore()
	ev := inboxEv("held", `{}`)
	regs := []inbox.Registration{inboxReg("site:order:H-1:create", 1)}

	tx, err := db.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, inboxLockKey(ev.Source, ev.ID)); err != nil {
		t.Fatal(err)
	}
	r := mustReceive(t, ib, ev, regs, inbox.InProgress)
	if r.Answer.Status != 0 || len(r.Operations) != 0 {
		t.Fatalf("in progress: got %+v, want no answer and no operations", r)
	}
	wantCounts(t, db, "while another delivery holds the event", 0, 0)
	mustReceive(t, ib, inboxEv("other-event", `{}`), nil, inbox.Processed) // other events go on

	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	mustReceive(t, ib, ev, regs, inbox.Processed)
	wantCounts(t, db, "after the holder ended", 2, 1)
}

// An event that another transaction stores and commits while a delivery's statement
// runs (after its snapshot, which so shows no stored event) is not stored twice: the
// statement's insert waits for that transaction, then fails to serialize, and the
// delivery starts again and answers from the committed event — a duplicate, or a
// conflict when the bodies differ. Nothing of the delivery is registered.
func TestInboxEventCommittedDuringTheStatement(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := newDB(t, Config{})
	for _, tc := range []struct {
		name, first string
		want        inbox.Outcome
	}{
		{"same body", `{"a":1}`, inbox.Duplicate},
		{"other body", `{"a":2}`, inbox.Conflict},
	} {
		id := "race-" + tc.name
		key := "site:order:" + id + ":create"
		first := []byte(`{"n":1}`)
		tx, err := db.Pool().Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, registerSQL, key, order.KindCreate, "site", id, "pending", first, order.SHA256Hex(first), "", time.Now().UTC(), "",
			nil, nil, "", ""); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO inbox_events (source, event_id, body_sha256, body, status, received_at, answer_status, operations)
			VALUES ('site', $1, $2, $3, 'processed', now(), 200, $4)`, id, order.SHA256Hex([]byte(tc.first)), []byte(tc.first), []string{key}); err != nil {
			t.Fatal(err)
		}
		received := receiving(t, db.inboxStore(), inboxEv(id, `{"a":1}`), []inbox.Registration{inboxReg(key, 2)})
		lockWait(t, db) // the delivery's insert waits for the uncommitted event
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		r := received(tc.want)
		if !slices.Equal(r.Operations, []string{key}) {
			t.Fatalf("%s: operations %q, want the stored event's %q", tc.name, r.Operations, []string{key})
		}
		op, err := db.journalStore().Get(ctx, key)
		if err != nil || op.PayloadSHA256 != order.SHA256Hex(first) {
			t.Fatalf("%s: operation %+v, %v; want the committed one", tc.name, op, err)
		}
	}
	wantCounts(t, db, "after both races", 2, 2)
	if n := count(t, db, `SELECT count(*) FROM inbox_conflicts`); n != 1 {
		t.Fatalf("inbox conflicts: got %d, want 1", n)
	}
	if n := count(t, db, `SELECT count(*) FROM operation_conflicts`); n != 0 {
		t.Fatalf("journal conflicts: got %d, want none (the losing deliveries registered nothing)", n)
	}
}

// An operation that another transaction registers and commits while the statement
// runs (after its snapshot) is not passed over: the statement fails to serialize,
// and the delivery starts again and records the conflict with the committed payload.
func TestInboxRegistrationCommittedDuringTheStatement(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := newDB(t, Config{})
	key := "site:order:R-1:create"
	other := []byte(`{"n":9}`)

	tx, err := db.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, registerSQL, key, order.KindCreate, "site", key, "pending", other, order.SHA256Hex(other), "", time.Now().UTC(), "",
		nil, nil, "", ""); err != nil {
		t.Fatal(err)
	}
	received := receiving(t, db.inboxStore(), inboxEv("during", `{}`), []inbox.Registration{inboxReg(key, 1)})
	lockWait(t, db) // the statement waits for the uncommitted key
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	received(inbox.Processed)
	d, err := db.journalStore().Show(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if d.PayloadSHA256 != order.SHA256Hex(other) {
		t.Fatalf("operation: payload_sha256 %s, want the committed one's %s", d.PayloadSHA256, order.SHA256Hex(other))
	}
	if len(d.Conflicts) != 1 || d.Conflicts[0].PayloadSHA256 != order.SHA256Hex([]byte(`{"n":1}`)) {
		t.Fatalf("journal conflicts: got %+v, want the delivery's payload recorded", d.Conflicts)
	}
	wantCounts(t, db, "in the end", 1, 1)
}

// Wake of an operation a claim holds is answered at once and recorded; the claim's
// Finish applies it: a retry is made due now (and so is a failure: the update may
// have fixed what failed), a done operation stays done. A wake recorded after the
// Finish committed is applied by ApplyWakes.
func TestInboxWakeOfAClaimedOperationDoesNotWait(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := newDB(t, Config{})
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
		c := wakeBehindClaim(t, db, key)
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
			t.Fatalf("%s: ApplyWakes after the Finish applied %d (%v), want 0: the Finish took the wake", key, n, err)
		}
	}

	// A wake recorded for an operation whose claim has ended (it committed just after
	// the Finish) waits in operation_wakes until ApplyWakes.
	key := "bitrix24:deal:late:create"
	if _, err := j.Register(ctx, testOp(key)); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool().Exec(ctx, `UPDATE operations SET next_attempt_at = now() + interval '1 hour' WHERE key = $1`, key); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool().Exec(ctx, `INSERT INTO operation_wakes (operation_key, at) VALUES ($1, now())`, key); err != nil {
		t.Fatal(err)
	}
	c, err := j.ClaimKey(ctx, "bitrix24:deal:done:create", "w") // done: not claimable
	if err == nil {
		c.Release(ctx)
	}
	if n, err := j.ApplyWakes(ctx); err != nil || n != 1 {
		t.Fatalf("ApplyWakes: %d (%v), want 1", n, err)
	}
	if op, _ := j.Get(ctx, key); op.NextAttemptAt.After(time.Now().Add(time.Minute)) {
		t.Fatalf("after ApplyWakes %s is due at %v, want now", key, op.NextAttemptAt)
	}
}

// Times come from Config.Now (UTC): the receipt time when the event has none, the
// operations, both kinds of conflict and the wake.
func TestInboxInjectedClock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := time.Date(2026, 9, 16, 10, 0, 0, 123456789, time.FixedZone("Asia/Almaty", 5*3600))
	want := now.UTC().Truncate(time.Microsecond)
	db := newDB(t, Config{Now: func() time.Time { return now }})
	ib, j := db.inboxStore(), db.journalStore()

	if _, err := j.Register(ctx, testOp("site:order:old:create")); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool().Exec(ctx, `UPDATE operations SET next_attempt_at = $1 WHERE key = 'site:order:old:create'`, want.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	ev := inboxEv("clock", `{}`)
	ev.ReceivedAt = time.Time{}
	wake := inboxReg("site:order:old:create", 5)
	wake.Wake = true
	mustReceive(t, ib, ev, []inbox.Registration{inboxReg("site:order:new:create", 1), wake}, inbox.Processed)
	mustReceive(t, ib, inbox.Event{Source: ev.Source, ID: ev.ID, Body: []byte(`{"other":1}`)}, nil, inbox.Conflict)

	d, err := ib.Show(ctx, ev.Source, ev.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !d.ReceivedAt.Equal(want) || d.ReceivedAt.Location() != time.UTC || len(d.Conflicts) != 1 || !d.Conflicts[0].At.Equal(want) {
		t.Fatalf("event: received_at %v, conflicts %+v; want %v", d.ReceivedAt, d.Conflicts, want)
	}
	created, err := j.Get(ctx, "site:order:new:create")
	if err != nil {
		t.Fatal(err)
	}
	woken, err := j.Show(ctx, "site:order:old:create")
	if err != nil {
		t.Fatal(err)
	}
	if !created.CreatedAt.Equal(want) || !created.NextAttemptAt.Equal(want) || !woken.NextAttemptAt.Equal(want) ||
		!woken.UpdatedAt.Equal(want) || len(woken.Conflicts) != 1 || !woken.Conflicts[0].At.Equal(want) {
		t.Fatalf("times: created %v/%v, woken %v/%v, conflicts %+v; want all %v",
			created.CreatedAt, created.NextAttemptAt, woken.NextAttemptAt, woken.UpdatedAt, woken.Conflicts, want)
	}
}

// TestInboxRoundTrips measures Receive on a warm pool: a new event is the pipelined
// statement (1), and so is a duplicate (1); a conflict is the statement and the
// conflict row (2).
func TestInboxRoundTrips(t *testing.T) {
	t.Parallel()
	var rt testdb.RoundTrips
	db := newDB(t, Config{ClockCheckInterval: -1, ConfigurePool: func(c *pgxpool.Config) {
		rt.Install(c)
		c.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return false }
	}})
	ib := db.inboxStore()
	var newRT, dupRT, conflictRT int64
	for i := range 6 {
		id := fmt.Sprintf("rt-%d", i)
		regs := []inbox.Registration{inboxReg("site:order:"+id+":create", 1), inboxReg("site:order:"+id+":cancel", 1)}
		newRT = rt.Measure(func() { mustReceive(t, ib, inboxEv(id, `{"a":1}`), regs, inbox.Processed) })
		dupRT = rt.Measure(func() { mustReceive(t, ib, inboxEv(id, `{"a":1}`), regs, inbox.Duplicate) })
		conflictRT = rt.Measure(func() { mustReceive(t, ib, inboxEv(id, `{"a":2}`), regs, inbox.Conflict) })
		t.Logf("event %d: new %d, duplicate %d, conflict %d round trips", i+1, newRT, dupRT, conflictRT)
	}
	if newRT != 1 || dupRT != 1 || conflictRT != 2 {
		t.Fatalf("warm path: new %d, duplicate %d, conflict %d round trips; want 1, 1, 2", newRT, dupRT, conflictRT)
	}
}

// A duplicate writes nothing. Its statement (alone, or in a batch with others) reads
// the stored event and stops there: run in a transaction of the test's, it leaves
// that transaction without a transaction id, which any row written, updated or
// locked would have assigned; the rows it answers from keep their versions; and
// the server's WAL is logged for the record.
func TestInboxDuplicateWritesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := newDB(t, Config{})
	ib := db.inboxStore()
	evs := []inbox.Event{inboxEv("dup-1", `{"a":1}`), inboxEv("dup-2", `{"a":2}`), inboxEv("dup-3", `{"a":3}`)}
	regs := func(ev inbox.Event) []inbox.Registration {
		return []inbox.Registration{inboxReg("site:order:"+ev.ID+":create", 1)}
	}
	for _, ev := range evs {
		mustReceive(t, ib, ev, regs(ev), inbox.Processed)
	}
	versions := func() string {
		var s string
		if err := db.Pool().QueryRow(ctx, `SELECT (SELECT string_agg(xmin || '/' || ctid, ',' ORDER BY event_id) FROM inbox_events) || ' ' ||
			(SELECT string_agg(xmin || '/' || ctid, ',' ORDER BY key) FROM operations) || ' ' || (SELECT count(*) FROM inbox_conflicts)`).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	before := versions()
	var lsn string
	if err := db.Pool().QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&lsn); err != nil {
		t.Fatal(err)
	}
	const n = 200
	for i := range n {
		ev := evs[i%len(evs)]
		mustReceive(t, ib, ev, regs(ev), inbox.Duplicate)
	}
	var walBytes int64
	if err := db.Pool().QueryRow(ctx, `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)::bigint`, lsn).Scan(&walBytes); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d duplicates: the server's WAL grew %d bytes meanwhile (all sessions of the cluster count)", n, walBytes)
	if after := versions(); after != before {
		t.Fatalf("row versions: %s before the duplicates, %s after", before, after)
	}

	var batch []*groupRequest
	for _, ev := range evs {
		batch = append(batch, &groupRequest{ctx: ctx, row: newReceiveRow(ev, order.SHA256Hex(ev.Body), regs(ev), inboxOK, "", db.nowUTC())})
	}
	args, err := db.batchArgs(batch)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range []struct {
		name, sql string
		args      []any
		rows      int
	}{
		{"single", inboxReceiveSQL, batch[0].row.args(), 1},
		{"batch", inboxReceiveBatchSQL, args, len(evs)},
	} {
		tx, err := db.Pool().BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		rows, err := tx.Query(ctx, st.sql, st.args...)
		if err != nil {
			t.Fatal(err)
		}
		got := 0
		for rows.Next() {
			vals, err := rows.Values()
			if err != nil {
				t.Fatal(err)
			}
			if sha := vals[len(vals)-5]; sha == nil {
				t.Fatalf("%s statement: answered %v, want the stored event", st.name, vals)
			}
			got++
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		var xid string
		if err := tx.QueryRow(ctx, `SELECT coalesce(pg_current_xact_id_if_assigned()::text, 'none')`).Scan(&xid); err != nil {
			t.Fatal(err)
		}
		// The plan finds events and operations by their primary keys, even on
		// tables this small.
		if text := explain(t, tx, st.sql, st.args...); strings.Contains(text, "Seq Scan on inbox_events") || strings.Contains(text, "Seq Scan on operations") {
			t.Fatalf("%s statement scans a table:\n%s", st.name, text)
		}
		tx.Rollback(ctx)
		if got != st.rows || xid != "none" {
			t.Fatalf("%s statement for duplicates: %d rows, transaction id %s; want %d rows and none (nothing written)", st.name, got, xid, st.rows)
		}
	}
	if n := count(t, db, `SELECT count(*) FROM operations`); n != len(evs) {
		t.Fatalf("operations: got %d, want %d", n, len(evs))
	}
}

// Redelivered answers a delivery of a stored event with the stored body as Receive
// answers a duplicate, by a read alone: many at once (batched lookups) each get
// their own event's answer; another body, an unknown event and an id JSON cannot
// carry are left to Receive; and the lookup writes nothing and reads by key.
func TestInboxRedelivered(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := newDB(t, Config{})
	ib := db.inboxStore()
	const n = 40
	answer := func(i int) inbox.Answer {
		return inbox.Answer{Status: 200, ContentType: "application/json", Body: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))}
	}
	ev := func(i int) inbox.Event { return inboxEv(fmt.Sprintf("rd-%d", i), fmt.Sprintf(`{"i":%d}`, i)) }
	key := func(i int) string { return fmt.Sprintf("site:order:rd-%d:create", i) }
	for i := range n {
		if r, err := ib.Receive(ctx, ev(i), []inbox.Registration{inboxReg(key(i), i)}, answer(i)); err != nil || r.Outcome != inbox.Processed {
			t.Fatalf("receive %d: %v %v", i, r.Outcome, err)
		}
	}
	versions := func() string {
		var s string
		if err := db.Pool().QueryRow(ctx, `SELECT string_agg(xmin || '/' || ctid, ',' ORDER BY event_id) || ' ' ||
			(SELECT count(*) FROM inbox_conflicts) FROM inbox_events`).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	before := versions()
	errs := make(chan error, 4*n)
	for range 4 {
		for i := range n {
			go func() {
				r, ok, err := ib.Redelivered(ctx, ev(i))
				switch {
				case err != nil:
					errs <- err
				case !ok || r.Outcome != inbox.Duplicate || string(r.Answer.Body) != string(answer(i).Body) ||
					!slices.Equal(r.Operations, []string{key(i)}):
					errs <- fmt.Errorf("event %d: got %v %+v, want the duplicate with its own answer", i, ok, r)
				default:
					errs <- nil
				}
			}()
		}
	}
	for range 4 * n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name string
		ev   inbox.Event
	}{
		{"another body", inboxEv("rd-1", `{"i":2}`)},
		{"an unknown event", inboxEv("rd-unknown", `{"i":1}`)},
		{"an id of invalid UTF-8", inboxEv("rd-\xff", `{"i":1}`)},
		{"an id with NUL", inboxEv("rd-1\x00", `{"i":1}`)},
	} {
		if r, ok, err := ib.Redelivered(ctx, c.ev); err != nil || ok {
			t.Fatalf("%s: got %v %+v %v, want not ok and no error", c.name, ok, r, err)
		}
	}
	if after := versions(); after != before {
		t.Fatalf("row versions: %s before the lookups, %s after", before, after)
	}

	tx, err := db.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	pairs := `[{"s":"site","e":"rd-1"},{"s":"site","e":"rd-unknown"},{"s":"site","e":"rd-3"}]`
	rows, err := tx.Query(ctx, inboxLookupSQL, pairs)
	if err != nil {
		t.Fatal(err)
	}
	var idx []int64
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			t.Fatal(err)
		}
		idx = append(idx, vals[0].(int64))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(idx)
	if !slices.Equal(idx, []int64{1, 3}) {
		t.Fatalf("lookup of %s answered %v, want 1 and 3", pairs, idx)
	}
	var xid string
	if err := tx.QueryRow(ctx, `SELECT coalesce(pg_current_xact_id_if_assigned()::text, 'none')`).Scan(&xid); err != nil {
		t.Fatal(err)
	}
	if xid != "none" {
		t.Fatalf("the lookup took transaction id %s; want none (nothing written)", xid)
	}
	if text := explain(t, tx, inboxLookupSQL, pairs); strings.Contains(text, "Seq Scan on inbox_events") {
		t.Fatalf("the lookup scans the inbox:\n%s", text)
	}
}

// The advisory lock keys of distinct events differ, and depend on both parts.
func TestInboxLockKey(t *testing.T) {
	t.Parallel()
	seen := map[int64]string{}
	for _, p := range [][2]string{{"site", "a"}, {"site", "b"}, {"sitea", ""}, {"site", "a\x00"}, {"ozon", "a"}} {
		k := inboxLockKey(p[0], p[1])
		if prev, ok := seen[k]; ok {
			t.Fatalf("%q and %s share lock key %d", p, prev, k)
		}
		seen[k] = fmt.Sprintf("%q", p)
	}
	if inboxLockKey("site", "a") != inboxLockKey("site", "a") {
		t.Fatal("lock key is not deterministic")
	}
}

// explain is the plan of sql with args on tx, one line of EXPLAIN's a line.
func explain(t *testing.T, tx pgx.Tx, sql string, args ...any) string {
	t.Helper()
	rows, err := tx.Query(context.Background(), "EXPLAIN "+sql, args...)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(plan, "\n")
}
