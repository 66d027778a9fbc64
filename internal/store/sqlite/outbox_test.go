package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ordersync/ordersync/internal/outbox"
	"github.com/ordersync/ordersync/internal/store/storetest"
)

// newOutboxDB opens a migrated database in a temporary directory, closed at cleanup.
func newOutboxDB(tb testing.TB, cfg Config) *DB {
	tb.Helper()
	ctx := context.Background()
	cfg.Path = filepath.Join(tb.TempDir(), "ordersync.db")
	cfg.TakeoverAfter = cmp.Or(cfg.TakeoverAfter, time.Nanosecond)
	db, err := Open(ctx, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	if _, err := db.Migrate(ctx); err != nil {
		tb.Fatal(err)
	}
	return db
}

// outboxEnqueueIn is the suite's EnqueueFunc on db: a write transaction on the handle
// (BEGIN IMMEDIATE), Enqueue, commit or rollback, and the notification a committing
// caller owes the relay.
func outboxEnqueueIn(db *DB) storetest.EnqueueFunc {
	return func(ctx context.Context, commit bool, msgs ...outbox.Message) error {
		tx, err := db.SQL().BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		if err := Enqueue(ctx, tx, msgs...); err != nil {
			return err
		}
		if !commit {
			return tx.Rollback()
		}
		if err := tx.Commit(); err != nil {
			return err
		}
		db.Notify()
		return nil
	}
}

func outboxMsg(dest, agg string) outbox.Message {
	return outbox.Message{Destination: dest, Event: outbox.Event{
		Type: outbox.OrderCreated, AggregateType: "order", AggregateID: agg, Data: []byte(`{"ref":"r","total":1500.10}`),
	}}
}

// Enqueue writes on the caller's transaction: what else the transaction wrote and the
// events commit or roll back together, and a committed enqueue wakes the listener
// only once the caller notifies.
func TestEnqueueRidesTheCallersTransaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := newOutboxDB(t, Config{})
	ob := db.Outbox()

	wakes := make(chan struct{}, 10)
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go db.Listener().Listen(lctx, func() { wakes <- struct{}{} })
	<-wakes // in place

	for _, commit := range []bool{false, true} {
		tx, err := db.SQL().BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO outbox_destinations (name, reason) VALUES ('marker', ?)`,
			fmt.Sprint(commit)); err != nil {
			t.Fatal(err)
		}
		if err := Enqueue(ctx, tx, outboxMsg("crm", "A"), outboxMsg("erp", "A")); err != nil {
			t.Fatal(err)
		}
		if !commit {
			if err := tx.Rollback(); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	var markers, lanes int
	if err := db.SQL().QueryRowContext(ctx, `SELECT (SELECT count(*) FROM outbox_destinations), (SELECT count(*) FROM outbox_lanes)`).
		Scan(&markers, &lanes); err != nil {
		t.Fatal(err)
	}
	rs, err := ob.List(ctx, outbox.ListFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if markers != 1 || lanes != 2 || len(rs) != 2 || rs[0].Sequence != 1 || rs[1].Sequence != 1 {
		t.Fatalf("after a rolled-back and a committed transaction: %d markers, %d lanes, %d events; want 1, 2, 2 at sequence 1", markers, lanes, len(rs))
	}
	select {
	case <-wakes:
		t.Fatal("the listener woke before anyone notified")
	case <-time.After(20 * time.Millisecond):
	}
	db.Notify()
	select {
	case <-wakes:
	case <-time.After(5 * time.Second):
		t.Fatal("no wake after Notify")
	}

	// EnqueueAndCommit notifies by itself, and writes with the store's clock.
	if err := db.EnqueueAndCommit(ctx, outboxMsg("crm", "A")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-wakes:
	case <-time.After(5 * time.Second):
		t.Fatal("no wake after EnqueueAndCommit")
	}
	if err := db.EnqueueAndCommit(ctx, outboxMsg("", "A")); err == nil || !strings.Contains(err.Error(), "destination is required") {
		t.Fatalf("EnqueueAndCommit of an invalid message: %v", err)
	}
	rs, err = ob.List(ctx, outbox.ListFilter{AggregateID: "A", Destination: "crm"})
	if err != nil || len(rs) != 2 || rs[0].Sequence != 2 {
		t.Fatalf("crm/A after EnqueueAndCommit: %d records, %v", len(rs), err)
	}
}

// enqueueTx, as the journal's Finish calls it, writes with the store's clock and lets
// the caller's transaction decide.
func TestEnqueueTxUsesTheStoreClock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	at := time.Date(2026, 9, 16, 10, 0, 0, 0, time.UTC)
	db := newOutboxDB(t, Config{Now: func() time.Time { return at }})
	err := db.write(ctx, func(tx *sql.Tx) error {
		return db.enqueueTx(ctx, tx, []outbox.Message{outboxMsg("crm", "A")})
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.write(ctx, func(tx *sql.Tx) error { return db.enqueueTx(ctx, tx, nil) }); err != nil {
		t.Fatalf("enqueueTx of nothing: %v", err)
	}
	rs, err := db.Outbox().List(ctx, outbox.ListFilter{})
	if err != nil || len(rs) != 1 {
		t.Fatalf("list: %d, %v", len(rs), err)
	}
	if r := rs[0]; !r.CreatedAt.Equal(at) || !r.OccurredAt.Equal(at) || !r.NextAttemptAt.Equal(at) {
		t.Fatalf("times: created %v, occurred %v, next %v; want %v", r.CreatedAt, r.OccurredAt, r.NextAttemptAt, at)
	}
}

// The claim reads only the partial indexes over unsent rows: the plan never scans the
// table or an index that holds sent rows.
func TestOutboxClaimPlan(t *testing.T) {
	t.Parallel()
	db := newOutboxDB(t, Config{})
	plan := explainOutboxClaim(t, db)
	t.Logf("plan of the claim:\n%s", plan)
	for _, want := range []string{
		"SCAN o USING INDEX outbox_due_idx", // the walk in id order, stopped by LIMIT
		"SEARCH p USING INDEX outbox_unsent_lane_idx (destination=? AND aggregate_id=? AND sequence<?)",
		"SEARCH q USING INDEX outbox_leased_idx (destination=? AND aggregate_id=? AND sequence>?)",
		"SEARCH outbox USING INTEGER PRIMARY KEY (rowid=?)", // the UPDATE, by the ids found
	} {
		if !strings.Contains(plan, want) {
			t.Errorf("the plan lacks %q", want)
		}
	}
	if strings.Contains(plan, "TEMP B-TREE") {
		t.Error("the plan sorts: the walk must come in id order from outbox_due_idx")
	}
	for _, line := range strings.Split(plan, "\n") {
		line = strings.TrimSpace(line)
		// A scan without an index reads every row: only the tiny destinations table
		// and the JSON arguments may be read so.
		if strings.HasPrefix(line, "SCAN ") && !strings.Contains(line, " USING ") &&
			line != "SCAN outbox_destinations" && !strings.HasPrefix(line, "SCAN json_each ") {
			t.Errorf("the plan reads a table whole: %q", line)
		}
	}
}

// explainOutboxClaim is EXPLAIN QUERY PLAN of claimSQL with the arguments Claim
// passes, one step a line, indented by depth.
func explainOutboxClaim(tb testing.TB, db *DB) string {
	tb.Helper()
	now := time.Now()
	rows, err := db.SQL().Query(`EXPLAIN QUERY PLAN `+claimSQL,
		ts(now), 100, `["crm"]`, `[]`, ts(now.Add(time.Minute)), "00000000-0000-4000-8000-000000000000")
	if err != nil {
		tb.Fatal(err)
	}
	defer rows.Close()
	depth := map[int]int{}
	var b strings.Builder
	for rows.Next() {
		var (
			id, parent, notused int
			detail              string
		)
		if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
			tb.Fatal(err)
		}
		depth[id] = depth[parent] + 1
		fmt.Fprintf(&b, "%s%s\n", strings.Repeat("  ", depth[id]-1), detail)
	}
	if err := rows.Err(); err != nil {
		tb.Fatal(err)
	}
	return b.String()
}

// A relay whose lease expired while it published cannot mark sent what another relay
// re-claimed, even in one batch with rows it still owns; its write-back of those
// counts only them.
func TestOutboxCompleteCountsOnlyFencedRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// Ahead of the real time Enqueue writes, by more than a loaded machine can lag
	// between here and the Enqueue (one second was not: the claim found nothing).
	clock := time.Now().Add(time.Hour)
	db := newOutboxDB(t, Config{Now: func() time.Time { return clock }})
	ob := db.Outbox()
	if err := outboxEnqueueIn(db)(ctx, true, outboxMsg("crm", "A"), outboxMsg("crm", "B")); err != nil {
		t.Fatal(err)
	}
	old, err := ob.Claim(ctx, outbox.ClaimRequest{Limit: 1, Lease: time.Minute})
	if err != nil || len(old.Records) != 1 {
		t.Fatalf("claim: %v, %v", old, err)
	}
	clock = clock.Add(2 * time.Minute)
	cur, err := ob.Claim(ctx, outbox.ClaimRequest{Limit: 10, Lease: time.Minute})
	if err != nil || len(cur.Records) != 2 {
		t.Fatalf("re-claim: %v, %v", cur, err)
	}
	n, err := ob.Complete(ctx, old.Token, []outbox.Result{{ID: cur.Records[0].ID, Sent: true}, {ID: cur.Records[1].ID, Sent: true}})
	if err != nil || n != 0 {
		t.Fatalf("stale complete: %d, %v; want 0", n, err)
	}
	n, err = ob.Complete(ctx, cur.Token, []outbox.Result{{ID: cur.Records[0].ID, Sent: true}, {ID: cur.Records[1].ID, Error: "503"}})
	if err != nil || n != 2 {
		t.Fatalf("complete: %d, %v; want 2", n, err)
	}
	for _, bad := range [][]outbox.Result{
		{{ID: 1, Sent: true}, {ID: 1, Sent: true}},
		{{ID: 1, Sent: true, Dead: true}},
	} {
		if _, err := ob.Complete(ctx, cur.Token, bad); err == nil {
			t.Fatalf("complete %+v: got nil, want an error", bad)
		}
	}
	if _, err := ob.Complete(ctx, "not-a-token", []outbox.Result{{ID: 1, Sent: true}}); err == nil {
		t.Fatal("complete with a token that is not a UUID: got nil, want an error")
	}
}
