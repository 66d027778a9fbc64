package postgres

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/ordersync/ordersync/internal/eventually"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/outbox"
	"github.com/ordersync/ordersync/internal/store/storetest"
	"github.com/ordersync/ordersync/internal/testdb"
)

// enqueueIn is the suite's EnqueueFunc on db: pool.Begin, Enqueue, commit or rollback.
func enqueueIn(db *DB) storetest.EnqueueFunc {
	return func(ctx context.Context, commit bool, msgs ...outbox.Message) error {
		tx, err := db.Pool().Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(context.WithoutCancel(ctx))
		if err := Enqueue(ctx, tx, msgs...); err != nil {
			return err
		}
		if !commit {
			return tx.Rollback(ctx)
		}
		return tx.Commit(ctx)
	}
}

func outboxMsg(dest, agg string) outbox.Message {
	return outbox.Message{Destination: dest, Event: outbox.Event{
		Type: outbox.OrderCreated, AggregateType: "order", AggregateID: agg, Data: []byte(`{"ref":"r"}`),
	}}
}

// Many transactions are open at once and enqueue into one lane, holding their
// transactions open for a while and some rolling back: the committed sequences are
// 1..N, with no gap and no duplicate. (A MAX()+1 subquery gives duplicates here: the
// transactions read the same maximum.)
func TestEnqueueConcurrentTransactionsOneLane(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const txs = 48
	db := newDB(t, Config{MaxConns: txs + 2})
	var (
		wg        sync.WaitGroup
		opened    sync.WaitGroup
		start     = make(chan struct{})
		mu        sync.Mutex
		committed int
		errs      []error
	)
	opened.Add(txs)
	for i := range txs {
		wg.Go(func() {
			err := func() error {
				tx, err := db.Pool().Begin(ctx)
				if err != nil {
					opened.Done()
					return err
				}
				defer tx.Rollback(ctx)
				opened.Done()
				<-start // every transaction is open before any enqueues
				if err := Enqueue(ctx, tx, outboxMsg("crm", "hot"), outboxMsg("crm", "hot")); err != nil {
					return err
				}
				time.Sleep(time.Duration(rand.IntN(3)) * time.Millisecond) // the commits in a random order
				if i%5 == 0 {
					return tx.Rollback(ctx)
				}
				if err := tx.Commit(ctx); err != nil {
					return err
				}
				mu.Lock()
				committed++
				mu.Unlock()
				return nil
			}()
			if err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	opened.Wait()
	close(start)
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("enqueue: %v", errors.Join(errs...))
	}
	rows, err := db.Pool().Query(ctx, `SELECT sequence FROM outbox WHERE destination = 'crm' AND aggregate_id = 'hot' ORDER BY sequence`)
	if err != nil {
		t.Fatal(err)
	}
	seqs, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatal(err)
	}
	var want []int64
	for s := int64(1); s <= int64(2*committed); s++ {
		want = append(want, s)
	}
	if !slices.Equal(seqs, want) {
		t.Fatalf("%d committed transactions of 2 events each: sequences %v, want 1..%d", committed, seqs, 2*committed)
	}
	var last int64
	if err := db.Pool().QueryRow(ctx, `SELECT last_sequence FROM outbox_lanes WHERE destination = 'crm' AND aggregate_id = 'hot'`).Scan(&last); err != nil {
		t.Fatal(err)
	}
	if last != int64(2*committed) {
		t.Fatalf("lane counter: got %d, want %d", last, 2*committed)
	}
}

// A verdict and its events commit together: Finish writes f.Messages in the claim's
// transaction, and a Finish that fails leaves neither the verdict nor the events.
func TestFinishWritesMessagesWithTheVerdict(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := newDB(t, Config{})
	j, ob := db.journalStore(), db.Outbox()
	key := "kaspi:order:77:create"
	if _, err := j.Register(ctx, testOp(key)); err != nil {
		t.Fatal(err)
	}
	taken := uuid.NewString()
	if err := enqueueIn(db)(ctx, true, withID(outboxMsg("bot", "other"), taken)); err != nil {
		t.Fatal(err)
	}

	// The second message reuses an event id: its INSERT fails inside the batch, so the
	// whole transaction — verdict, attempt, first message — rolls back.
	c, err := j.ClaimDue(ctx, "w")
	if err != nil {
		t.Fatal(err)
	}
	err = c.Finish(ctx, journal.Finish{Status: journal.StatusDone, Result: &journal.Result{Ref: "r1"},
		Messages: []outbox.Message{outboxMsg("crm", "kaspi:order:77"), withID(outboxMsg("kaspi", "kaspi:order:77"), taken)}})
	if err == nil {
		t.Fatal("finish with a duplicate event id: got nil, want an error")
	}
	t.Logf("failed finish: %v", err)
	if op, err := j.Get(ctx, key); err != nil || op.Status != journal.StatusPending {
		t.Fatalf("after the failed finish: %+v, %v; want pending", op, err)
	}
	if rs, err := ob.List(ctx, outbox.ListFilter{AggregateID: "kaspi:order:77"}); err != nil || len(rs) != 0 {
		t.Fatalf("events after the failed finish: %d, %v; want none", len(rs), err)
	}

	// An invalid message is refused before anything is sent, and the claim stays usable.
	c, err = j.ClaimDue(ctx, "w")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release(ctx)
	if err := c.Finish(ctx, journal.Finish{Status: journal.StatusDone, Messages: []outbox.Message{outboxMsg("", "x")}}); err == nil {
		t.Fatal("finish with a message without destination: got nil, want an error")
	}
	err = c.Finish(ctx, journal.Finish{Status: journal.StatusDone, Result: &journal.Result{Ref: "r2"},
		Messages: []outbox.Message{outboxMsg("crm", "kaspi:order:77"), outboxMsg("kaspi", "kaspi:order:77")}})
	if err != nil {
		t.Fatal(err)
	}
	op, err := j.Get(ctx, key)
	if err != nil || op.Status != journal.StatusDone {
		t.Fatalf("after finish: %+v, %v; want done", op, err)
	}
	rs, err := ob.List(ctx, outbox.ListFilter{AggregateID: "kaspi:order:77"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rs {
		got = append(got, fmt.Sprintf("%s#%d", r.Destination, r.Sequence))
	}
	if want := []string{"kaspi#1", "crm#1"}; !slices.Equal(got, want) {
		t.Fatalf("events: got %v, want %v", got, want)
	}
}

func withID(m outbox.Message, id string) outbox.Message {
	m.ID = id
	return m
}

// Claim and Complete are one round trip each, whatever the batch size.
func TestOutboxRoundTrips(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var rt testdb.RoundTrips
	db := newCountedDB(t, &rt)
	ob := db.Outbox()
	enqueue := enqueueIn(db)
	for round := range 3 {
		var msgs []outbox.Message
		for i := range 20 {
			msgs = append(msgs, outboxMsg("crm", fmt.Sprintf("order-%d-%d", round, i)))
		}
		if err := enqueue(ctx, true, msgs...); err != nil {
			t.Fatal(err)
		}
		var c outbox.Claim
		claim := rt.Measure(func() {
			var err error
			if c, err = ob.Claim(ctx, outbox.ClaimRequest{Limit: 50, Lease: time.Minute, Only: []string{"crm"}}); err != nil {
				t.Fatal(err)
			}
		})
		if len(c.Records) != 20 {
			t.Fatalf("claimed %d, want 20", len(c.Records))
		}
		var rs []outbox.Result
		for i, r := range c.Records {
			rs = append(rs, outbox.Result{ID: r.ID, Sent: i%2 == 0, Error: "503", NextAttemptAt: time.Now().Add(time.Hour)})
		}
		complete := rt.Measure(func() {
			if n, err := ob.Complete(ctx, c.Token, rs); err != nil || n != 20 {
				t.Fatalf("complete: %d, %v", n, err)
			}
		})
		tx, err := db.Pool().Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		enq := rt.Measure(func() {
			if err := Enqueue(ctx, tx, outboxMsg("erp", "x"), outboxMsg("bot", "x"), outboxMsg("erp", "x")); err != nil {
				t.Fatal(err)
			}
		})
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		t.Logf("round %d: claim of 20 %d round trips, complete of 20 %d, enqueue of 3 in a transaction %d", round+1, claim, complete, enq)
		if round > 0 && (claim != 1 || complete != 1 || enq != 1) {
			t.Fatalf("warm path: claim %d, complete %d, enqueue %d round trips; want 1 each", claim, complete, enq)
		}
	}
}

// A write-back of more results than one statement takes (completeChunk) is written
// in several statements of one round trip, each result on its own row, whether it
// rides with a claim or goes on its own.
func TestWriteBackLargerThanAChunk(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var rt testdb.RoundTrips
	db := newCountedDB(t, &rt)
	const events, first = 3*completeChunk - 266, completeChunk + 200 // 1234, written back as 700 then 534
	if _, err := db.Pool().Exec(ctx, `
		INSERT INTO outbox (event_id, destination, aggregate_type, aggregate_id, sequence, event_type, data,
			occurred_at, created_at, next_attempt_at)
		SELECT gen_random_uuid(), 'crm', 'order', 'site:order:' || g, 1, 'order.created', '{"ref":"r"}', now(), now(), now()
		FROM generate_series(1, $1::int) AS g`, events); err != nil {
		t.Fatal(err)
	}
	ob := db.Outbox()
	c, err := ob.Claim(ctx, outbox.ClaimRequest{Limit: events, Lease: time.Minute})
	if err != nil || len(c.Records) != events {
		t.Fatalf("claimed %d (%v), want %d", len(c.Records), err, events)
	}
	later := time.Now().Add(time.Hour)
	var results []outbox.Result
	wantSent := 0
	for i, r := range c.Records {
		if i%3 == 0 {
			results = append(results, outbox.Result{ID: r.ID, Error: "HTTP 503", NextAttemptAt: later})
			continue
		}
		results = append(results, outbox.Result{ID: r.ID, Sent: true})
		wantSent++
	}
	firstSent := 0
	for _, r := range results[:first] {
		if r.Sent {
			firstSent++
		}
	}
	next, err := ob.Claim(ctx, outbox.ClaimRequest{Limit: 10, Lease: time.Minute,
		Complete: outbox.Completion{Token: c.Token, Results: results[:first]}})
	if err != nil {
		t.Fatal(err)
	}
	if next.Completed != (outbox.Completed{Rows: first, Sent: firstSent}) || len(next.Records) != 0 {
		t.Fatalf("claim with a write-back of %d: %+v and %d claimed; want %d rows, %d sent, nothing claimed",
			first, next.Completed, len(next.Records), first, firstSent)
	}
	var n int
	trips := rt.Measure(func() {
		if n, err = ob.Complete(ctx, c.Token, results[first:]); err != nil {
			t.Fatal(err)
		}
	})
	if n != events-first || trips != 1 {
		t.Fatalf("complete of %d: %d rows in %d round trips, want %d in 1", events-first, n, trips, events-first)
	}
	var sent, failed, leased int
	if err := db.Pool().QueryRow(ctx, `SELECT count(*) FILTER (WHERE sent_at IS NOT NULL),
		count(*) FILTER (WHERE sent_at IS NULL AND last_error = 'HTTP 503' AND next_attempt_at > now()),
		count(*) FILTER (WHERE lease_until IS NOT NULL) FROM outbox`).Scan(&sent, &failed, &leased); err != nil {
		t.Fatal(err)
	}
	if sent != wantSent || failed != events-wantSent || leased != 0 {
		t.Fatalf("after the write-backs: %d sent, %d failed and due later, %d leased; want %d, %d, 0",
			sent, failed, leased, wantSent, events-wantSent)
	}
}

// The listener wakes once when it is in place and then on every commit that enqueued,
// and reports a broken connection.
func TestListener(t *testing.T) {
	t.Parallel()
	url := testdb.URL(t)
	db := newDB(t, Config{URL: url})
	wakes := make(chan struct{}, 100)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- db.Listener().Listen(ctx, func() { wakes <- struct{}{} }) }()
	wait := func(what string) {
		t.Helper()
		select {
		case <-wakes:
		case err := <-done:
			t.Fatalf("%s: the listener stopped: %v", what, err)
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no wake", what)
		}
	}
	wait("listening")
	// Not a synchronisation: other tests' commits notify this channel too, and a
	// moment lets those already sent arrive, to be dropped with the others below.
	time.Sleep(50 * time.Millisecond)
	for len(wakes) > 0 { // notifications of other tests' schemas in this database
		<-wakes
	}
	if err := enqueueIn(db)(context.Background(), true, outboxMsg("crm", "A")); err != nil {
		t.Fatal(err)
	}
	wait("after a commit")

	// Finish with messages notifies too.
	j := db.journalStore()
	if _, err := j.Register(context.Background(), testOp("site:order:listen:create")); err != nil {
		t.Fatal(err)
	}
	c, err := j.ClaimDue(context.Background(), "w")
	if err != nil {
		t.Fatal(err)
	}
	for len(wakes) > 0 { // notifications of other tests' schemas in this database
		<-wakes
	}
	if err := c.Finish(context.Background(), journal.Finish{Status: journal.StatusDone, Result: &journal.Result{Ref: "r"},
		Messages: []outbox.Message{outboxMsg("crm", "site:order:listen")}}); err != nil {
		t.Fatal(err)
	}
	wait("after a finish with messages")

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("listen after ctx ended: got %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("listen did not return after ctx ended")
	}

	// A broken connection is an error.
	done2 := make(chan error, 1)
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	listening := make(chan struct{})
	var once sync.Once
	go func() { done2 <- db.Listener().Listen(ctx2, func() { once.Do(func() { close(listening) }) }) }()
	select {
	case <-listening:
	case err := <-done2:
		t.Fatalf("second listener stopped: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("second listener: no wake")
	}
	schema := url[strings.Index(url, "application_name=")+len("application_name="):]
	schema, _, _ = strings.Cut(schema, "&")
	// The first listener's session closed from the client's side; the server may
	// list it a moment longer, until its backend has exited.
	eventually.True(t, "one listening session once the first listener ended", func() bool {
		var n int
		if err := db.Pool().QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE application_name = $1 AND query LIKE 'LISTEN%'`, schema).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n <= 1
	})
	var killed int
	if err := db.Pool().QueryRow(context.Background(), `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE application_name = $1 AND query LIKE 'LISTEN%'`, schema).Scan(&killed); err != nil {
		t.Fatal(err)
	}
	if killed != 1 {
		t.Fatalf("terminated %d listening sessions, want 1", killed)
	}
	select {
	case err := <-done2:
		if err == nil {
			t.Fatal("listen after its connection was terminated: got nil, want an error")
		}
		t.Logf("broken connection: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("listen did not return after its connection was terminated")
	}
}
