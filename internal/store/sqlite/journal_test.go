package sqlite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/ordersync/ordersync/connectors"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/order"
	"github.com/ordersync/ordersync/internal/outbox"
	"github.com/ordersync/ordersync/internal/store/postgres"
)

// journalTestDB opens and migrates a database file in a temporary directory.
func journalTestDB(t testing.TB, cfg Config) *DB {
	t.Helper()
	if cfg.Path == "" {
		cfg.Path = filepath.Join(t.TempDir(), "ordersync.db")
	}
	if cfg.TakeoverAfter == 0 {
		// The suites take over released and failed claims at once; the takeover
		// wait has tests of its own (storetest's Doubt topic).
		cfg.TakeoverAfter = time.Nanosecond
	}
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

func journalTestOp(key string) journal.NewOperation {
	return journal.NewOperation{Key: key, Kind: order.KindCreate, Source: "site", ExternalID: key,
		Payload: json.RawMessage(`{"source":"site","total":1500.10}`)}
}

func mustRegister(t testing.TB, j *Journal, key string) {
	t.Helper()
	r, err := j.Register(context.Background(), journalTestOp(key))
	if err != nil {
		t.Fatal(err)
	}
	if r.Outcome != journal.Registered {
		t.Fatalf("register %s: got %s, want %s", key, r.Outcome, journal.Registered)
	}
}

// An accountant reads the same reason on either backend.
func TestInterruptedErrorIsPostgresText(t *testing.T) {
	t.Parallel()
	if InterruptedError != postgres.InterruptedError {
		t.Fatalf("InterruptedError: got %q, want PostgreSQL's %q", InterruptedError, postgres.InterruptedError)
	}
}

// A claim holds no database lock while 1C is called: another process (a CLI beside
// the service: a second *DB on the same file) registers meanwhile without waiting for
// the claim, and both see each other's commits. Their writes meet only on SQLite's
// writer lock, which busy_timeout waits for.
func TestJournalSecondHandleWritesWhileClaiming(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ordersync.db")
	svc := journalTestDB(t, Config{Path: path})
	// A busy timeout far below a 1C call: a claim that held the writer lock would fail it.
	cli := journalTestDB(t, Config{Path: path, BusyTimeout: time.Second})
	js, jc := svc.journalStore(), cli.journalStore()

	mustRegister(t, js, "site:order:claimed:create")
	c, err := js.ClaimDue(ctx, "svc")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release(ctx)
	// While the claim is open: the other handle registers, reads the open attempt,
	// and runs a write transaction that takes and holds the writer lock briefly.
	mustRegister(t, jc, "site:order:from-cli:create")
	d, err := jc.Show(ctx, "site:order:claimed:create")
	if err != nil {
		t.Fatal(err)
	}
	if len(d.History) != 1 || d.History[0].Outcome != "" || d.Attempts != 1 {
		t.Fatalf("the other handle sees: %+v, want one open attempt", d.History)
	}
	if err := cli.Cursors().SaveCursor(ctx, connectors.Cursor{Connector: "kaspi", OrdersSeen: 1}); err != nil {
		t.Fatal(err)
	}
	if err := c.Finish(ctx, journal.Finish{Status: journal.StatusDone, Result: &journal.Result{Ref: "r"}}); err != nil {
		t.Fatal(err)
	}
	if op, err := jc.Get(ctx, "site:order:claimed:create"); err != nil || op.Status != journal.StatusDone {
		t.Fatalf("the other handle after finish: %+v, %v; want done", op, err)
	}
	c2, err := js.ClaimDue(ctx, "svc")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c2.Operation().Key, "site:order:from-cli:create"; got != want {
		t.Fatalf("service claims: got %s, want the CLI's %s", got, want)
	}
	c2.Release(ctx)

	// Both at once: the service drains while the CLI registers; no write fails on a
	// busy file (the CLI waits on its busy timeout, the default here, while the
	// service writes back to back), nothing is lost, nothing is claimed twice.
	jc = journalTestDB(t, Config{Path: path}).journalStore()
	const n = 60
	var (
		wg      sync.WaitGroup
		claimed sync.Map
		dups    atomic.Int32
		done    atomic.Int32
		errs    = make(chan error, 2*n)
	)
	registering := make(chan struct{})
	wg.Go(func() {
		defer close(registering)
		for i := range n {
			if _, err := jc.Register(ctx, journalTestOp(fmt.Sprintf("cli:order:%03d:create", i))); err != nil {
				errs <- fmt.Errorf("cli register %d: %w", i, err)
			}
		}
	})
	for w := range 3 {
		wg.Go(func() {
			stop := false
			for {
				c, err := js.ClaimDue(ctx, fmt.Sprintf("svc-%d", w))
				if errors.Is(err, journal.ErrNothingDue) {
					if stop {
						return
					}
					select {
					case <-registering:
						stop = true // one more pass after the last registration
					case <-time.After(time.Millisecond):
					}
					continue
				}
				if err != nil {
					errs <- err
					return
				}
				if _, seen := claimed.LoadOrStore(c.Operation().Key, true); seen {
					dups.Add(1)
				}
				if err := c.Finish(ctx, journal.Finish{Status: journal.StatusDone, Result: &journal.Result{Ref: "r"}}); err != nil {
					errs <- err
					return
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if dups.Load() != 0 || done.Load() != n+1 { // the CLI's first one was released, not finished
		t.Fatalf("claimed twice %d, finished %d; want 0 and %d", dups.Load(), done.Load(), n+1)
	}
	pending, err := jc.List(ctx, journal.Filter{Status: journal.StatusPending})
	if err != nil || len(pending) != 0 {
		t.Fatalf("pending after draining: %d, %v; want none", len(pending), err)
	}
}

// ClaimKey, Lock, Requeue and Revise wait for a key a claim holds, at most
// ClaimLockTimeout (then journal.ErrBusy), and get it once it is let go; a cancelled
// wait answers with the context's error, not ErrBusy.
func TestJournalKeyLockWaitIsBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := journalTestDB(t, Config{ClaimLockTimeout: 50 * time.Millisecond})
	j := db.journalStore()
	key := "site:order:held:create"
	mustRegister(t, j, key)
	c, err := j.ClaimDue(ctx, "w")
	if err != nil {
		t.Fatal(err)
	}
	for name, try := range map[string]func(context.Context) error{
		"claim key": func(ctx context.Context) error { _, err := j.ClaimKey(ctx, key, "op"); return err },
		"lock":      func(ctx context.Context) error { _, err := j.Lock(ctx, key); return err },
		"requeue":   func(ctx context.Context) error { _, err := j.Requeue(ctx, key); return err },
		"revise":    func(ctx context.Context) error { _, err := j.Revise(ctx, journalTestOp(key)); return err },
	} {
		if err := try(ctx); !errors.Is(err, journal.ErrBusy) {
			t.Fatalf("%s while claimed: got %v, want %v", name, err, journal.ErrBusy)
		}
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if err := try(cctx); !errors.Is(err, context.Canceled) || errors.Is(err, journal.ErrBusy) {
			t.Fatalf("%s with a cancelled context: got %v, want %v", name, err, context.Canceled)
		}
	}
	if d, err := j.Show(ctx, key); err != nil || len(d.History) != 1 {
		t.Fatalf("attempts after refused claims: %+v, %v; want the one", d.History, err)
	}

	if err := c.Release(ctx); err != nil {
		t.Fatal(err)
	}

	// A waiter gets the key once the claim lets it go.
	j = journalTestDB(t, Config{}).journalStore()
	mustRegister(t, j, key)
	if c, err = j.ClaimDue(ctx, "w"); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		c2, err := j.ClaimKey(ctx, key, "resync")
		if err == nil {
			if c2.Attempt() != 2 {
				err = fmt.Errorf("attempt %d, want 2", c2.Attempt())
			}
			c2.Release(ctx)
		}
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("claim key returned while the key was held: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	if err := c.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("claim key after release: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("claim key did not get the released key")
	}
}

// A claimed create says whether its order has a cancel registered.
func TestJournalCancelRequested(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	j := journalTestDB(t, Config{}).journalStore()
	for _, k := range []string{"kaspi:order:1:create", "kaspi:order:1:cancel", "kaspi:order:2:create", "kaspi:order:10:create"} {
		mustRegister(t, j, k)
	}
	for key, want := range map[string]bool{
		"kaspi:order:1:create":  true,
		"kaspi:order:1:cancel":  false, // the cancel itself
		"kaspi:order:2:create":  false,
		"kaspi:order:10:create": false, // not kaspi:order:1's
	} {
		c, err := j.ClaimKey(ctx, key, "w")
		if err != nil {
			t.Fatal(err)
		}
		if got := c.Operation().CancelRequested; got != want {
			t.Errorf("%s: CancelRequested %v, want %v", key, got, want)
		}
		c.Release(ctx)
	}
	c, err := j.ClaimDue(ctx, "w") // the first registered, so the first due
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release(ctx)
	if got := c.Operation(); got.Key != "kaspi:order:1:create" || !got.CancelRequested {
		t.Fatalf("claim due: got %s CancelRequested %v, want kaspi:order:1:create with a cancel", got.Key, got.CancelRequested)
	}
}

func journalTestMsg(dest, agg string) outbox.Message {
	return outbox.Message{Destination: dest, Event: outbox.Event{
		Type: outbox.OrderCreated, AggregateType: "order", AggregateID: agg, Data: []byte(`{"ref":"r"}`),
	}}
}

// A verdict and its events commit together, and wake the relay; a Finish that fails
// in its transaction leaves neither and lets the key go; an invalid message is refused
// before anything is written, and the claim stays usable.
func TestJournalFinishWritesMessagesWithTheVerdict(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := journalTestDB(t, Config{})
	j := db.journalStore()
	key := "kaspi:order:77:create"
	mustRegister(t, j, key)
	taken := uuid.NewString()
	if err := db.EnqueueAndCommit(ctx, func() outbox.Message { m := journalTestMsg("bot", "other"); m.ID = taken; return m }()); err != nil {
		t.Fatal(err)
	}
	events := func() []string {
		t.Helper()
		rows, err := db.SQL().QueryContext(ctx, `SELECT destination, sequence FROM outbox WHERE aggregate_id = ? ORDER BY id`, "kaspi:order:77")
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var got []string
		for rows.Next() {
			var d string
			var s int
			if err := rows.Scan(&d, &s); err != nil {
				t.Fatal(err)
			}
			got = append(got, fmt.Sprintf("%s#%d", d, s))
		}
		return got
	}

	// The second message reuses an event id: its INSERT fails in the transaction, so
	// the verdict, the attempt's close and the first message roll back.
	c, err := j.ClaimDue(ctx, "w")
	if err != nil {
		t.Fatal(err)
	}
	dup := journalTestMsg("kaspi", "kaspi:order:77")
	dup.ID = taken
	if err := c.Finish(ctx, journal.Finish{Status: journal.StatusDone, Result: &journal.Result{Ref: "r1"},
		Messages: []outbox.Message{journalTestMsg("crm", "kaspi:order:77"), dup}}); err == nil {
		t.Fatal("finish with a taken event id: got nil, want an error")
	}
	if op, err := j.Get(ctx, key); err != nil || op.Status != journal.StatusPending || op.Attempts != 0 {
		t.Fatalf("after the failed finish: %+v, %v; want pending, untouched", op, err)
	}
	if got := events(); len(got) != 0 {
		t.Fatalf("events after the failed finish: %v, want none", got)
	}

	// The key was let go: the next claim gets it, and closes the attempt as interrupted.
	c, err = j.ClaimDue(ctx, "w")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release(ctx)
	if c.Attempt() != 2 {
		t.Fatalf("next claim: attempt %d, want 2", c.Attempt())
	}
	if err := c.Finish(ctx, journal.Finish{Status: journal.StatusDone, Messages: []outbox.Message{journalTestMsg("", "x")}}); err == nil {
		t.Fatal("finish with a message without destination: got nil, want an error")
	}
	wake, stop := db.notify.subscribe()
	defer stop()
	if err := c.Finish(ctx, journal.Finish{Status: journal.StatusDone, Result: &journal.Result{Ref: "r2"},
		Messages: []outbox.Message{journalTestMsg("crm", "kaspi:order:77"), journalTestMsg("kaspi", "kaspi:order:77")}}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-wake:
	default:
		t.Fatal("finish with messages did not notify")
	}
	if op, err := j.Get(ctx, key); err != nil || op.Status != journal.StatusDone || op.Attempts != 2 {
		t.Fatalf("after finish: %+v, %v; want done after 2 attempts", op, err)
	}
	if got, want := events(), []string{"crm#1", "kaspi#1"}; !slices.Equal(got, want) {
		t.Fatalf("events: got %v, want %v", got, want)
	}
	if d, err := j.Show(ctx, key); err != nil || len(d.History) != 2 || d.History[0].Outcome != journal.OutcomeInterrupted {
		t.Fatalf("attempts: %+v, %v; want the failed finish's attempt interrupted", d.History, err)
	}

	// A finish without messages notifies nobody.
	mustRegister(t, j, "site:order:quiet:create")
	c, err = j.ClaimDue(ctx, "w")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Finish(ctx, journal.Finish{Status: journal.StatusDone, Result: &journal.Result{Ref: "r"}}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-wake:
		t.Fatal("finish without messages notified")
	default:
	}
}

// The store's clock decides what is due and what is written.
func TestJournalInjectedClock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var now atomic.Pointer[time.Time]
	set := func(tm time.Time) { now.Store(&tm) }
	start := time.Date(2026, 9, 16, 10, 0, 0, 123456789, time.FixedZone("Asia/Almaty", 5*3600))
	set(start)
	j := journalTestDB(t, Config{Now: func() time.Time { return *now.Load() }}).journalStore()
	key := "site:order:clock:create"
	r, err := j.Register(ctx, journalTestOp(key))
	if err != nil {
		t.Fatal(err)
	}
	want := start.UTC().Truncate(time.Microsecond)
	if op := r.Operation; !op.CreatedAt.Equal(want) || op.CreatedAt.Location() != time.UTC || !op.NextAttemptAt.Equal(want) {
		t.Fatalf("registered at %v, due %v; want %v in UTC", op.CreatedAt, op.NextAttemptAt, want)
	}
	c, err := j.ClaimDue(ctx, "w")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Finish(ctx, journal.Finish{Status: journal.StatusPending, Error: "503", NextAttemptAt: start.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	set(start.Add(59 * time.Second))
	if _, err := j.ClaimDue(ctx, "w"); !errors.Is(err, journal.ErrNothingDue) {
		t.Fatalf("a second before it is due: got %v, want %v", err, journal.ErrNothingDue)
	}
	set(start.Add(time.Minute))
	c, err = j.ClaimDue(ctx, "w")
	if err != nil {
		t.Fatalf("when due: %v", err)
	}
	c.Release(ctx)
	d, err := j.Show(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if a := d.History[1]; !a.StartedAt.Equal(start.Add(time.Minute).UTC().Truncate(time.Microsecond)) {
		t.Fatalf("second attempt started at %v, want the store's clock", a.StartedAt)
	}
}
