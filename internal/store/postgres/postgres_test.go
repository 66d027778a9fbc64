package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ordersync/ordersync/internal/eventually"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/order"
	"github.com/ordersync/ordersync/internal/outbox"
	"github.com/ordersync/ordersync/internal/testdb"
	"github.com/ordersync/ordersync/migrations"
)

func latestVersion(t *testing.T) int {
	t.Helper()
	ms, err := migrations.Load(migrations.Postgres)
	if err != nil {
		t.Fatal(err)
	}
	return ms[len(ms)-1].Version
}

func open(t *testing.T, cfg Config) *DB {
	t.Helper()
	db, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	return db
}

func testOp(key string) journal.NewOperation {
	return journal.NewOperation{Key: key, Kind: order.KindCreate, Source: "site", ExternalID: key,
		Payload: []byte(`{"source":"site","total":1500.10}`)}
}

func TestOpenErrorNamesServerNotPassword(t *testing.T) {
	t.Parallel()
	_, err := Open(context.Background(), Config{URL: "postgres://someone:s3cret@127.0.0.1:1/nowhere?sslmode=disable&connect_timeout=2"})
	if err == nil {
		t.Fatal("open of a closed port: got nil, want an error")
	}
	msg := err.Error()
	for _, want := range []string{"127.0.0.1:1/nowhere", "someone"} {
		if !strings.Contains(msg, want) {
			t.Fatalf("error %q does not name %q", msg, want)
		}
	}
	if strings.Contains(msg, "s3cret") || strings.Contains(msg, "\n") {
		t.Fatalf("error %q shows the password or spans lines", msg)
	}
	t.Logf("connect error: %s", msg)

	_, err = Open(context.Background(), Config{URL: "postgres://someone:s3cret@127.0.0.1:5432/db?sslmode=bogus"})
	if err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("bad URL: got %v, want an error without the password", err)
	}
	t.Logf("parse error: %s", err)

	if _, err := Open(context.Background(), Config{URL: testdb.BaseURL(), MaxConns: 1}); err == nil {
		t.Fatal("MaxConns 1: got nil, want an error (a claim needs two connections)")
	}
}

func TestMigrateConcurrently(t *testing.T) {
	t.Parallel()
	url := testdb.URL(t)
	a, b := open(t, Config{URL: url}), open(t, Config{URL: url})
	var (
		wg       sync.WaitGroup
		got      [2][]int
		errs     [2]error
		start    = make(chan struct{})
		migrator = []*DB{a, b}
	)
	for i := range 2 {
		wg.Go(func() {
			<-start
			got[i], errs[i] = migrator[i].Migrate(context.Background())
		})
	}
	close(start)
	wg.Wait()
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("migrate: %v, %v", errs[0], errs[1])
	}
	all := append(slices.Clone(got[0]), got[1]...)
	var want []int
	for v := 1; v <= latestVersion(t); v++ {
		want = append(want, v)
	}
	if !slices.Equal(all, want) {
		t.Fatalf("applied by the two migrators: %v and %v, want %v between them, once", got[0], got[1], want)
	}
	if len(got[0]) > 0 && len(got[1]) > 0 {
		t.Fatalf("both migrators applied something: %v and %v", got[0], got[1])
	}
	again, err := a.Migrate(context.Background())
	if err != nil || len(again) != 0 {
		t.Fatalf("third migrate: got %v, %v; want nothing to do", again, err)
	}
	var n int
	if err := a.Pool().QueryRow(context.Background(), "SELECT count(*) FROM schema_migrations").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != len(want) {
		t.Fatalf("schema_migrations rows: got %d, want %d", n, len(want))
	}
}

func TestCheckSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := open(t, Config{URL: testdb.URL(t)})
	latest := latestVersion(t)

	err := db.CheckSchema(ctx) // no schema_migrations table yet
	if !errors.Is(err, ErrSchemaBehind) {
		t.Fatalf("empty database: got %v, want %v", err, ErrSchemaBehind)
	}
	if want := fmt.Sprintf("database schema is at version 0, this ordersync needs %d: run `ordersync migrate`", latest); err.Error() != want {
		t.Fatalf("message: got %q, want %q", err, want)
	}
	if cur, lat, err := db.SchemaStatus(ctx); err != nil || cur != 0 || lat != latest {
		t.Fatalf("status: got %d, %d, %v; want 0, %d", cur, lat, err, latest)
	}

	applied, err := db.Migrate(ctx)
	if err != nil || len(applied) != latest {
		t.Fatalf("migrate: got %v, %v", applied, err)
	}
	if err := db.CheckSchema(ctx); err != nil {
		t.Fatalf("after migrate: %v", err)
	}

	if _, err := db.Pool().Exec(ctx, "INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, 'future', now())", latest+1); err != nil {
		t.Fatal(err)
	}
	err = db.CheckSchema(ctx)
	if !errors.Is(err, ErrSchemaAhead) || errors.Is(err, ErrSchemaBehind) {
		t.Fatalf("newer database: got %v, want %v", err, ErrSchemaAhead)
	}
	if !strings.Contains(err.Error(), "older than the database") {
		t.Fatalf("message %q does not say the binary is older", err)
	}
	if _, err := db.Migrate(ctx); !errors.Is(err, ErrSchemaAhead) {
		t.Fatalf("migrate a newer database: got %v, want %v", err, ErrSchemaAhead)
	}
}

// The claim's BEGIN travels in the same pipelined batch as its SELECT … FOR NO KEY
// UPDATE; the transaction, and so the lock, must outlive that batch.
func TestClaimHoldsRowLockAcrossCalls(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := newDB(t, Config{})
	j := db.journalStore()
	if _, err := j.Register(ctx, testOp("site:order:lock:create")); err != nil {
		t.Fatal(err)
	}
	c, err := j.ClaimDue(ctx, "w")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release(ctx)
	pid := c.(*claim).conn.Conn().PgConn().PID()

	other, err := pgx.Connect(ctx, db.cfg.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)
	var state string
	if err := other.QueryRow(ctx, "SELECT state FROM pg_stat_activity WHERE pid = $1", pid).Scan(&state); err != nil {
		t.Fatal(err)
	}
	if state != "idle in transaction" {
		t.Fatalf("claim session state: got %q, want %q", state, "idle in transaction")
	}
	lockErr := func() error {
		_, err := other.Exec(ctx, "SELECT key FROM operations WHERE key = $1 FOR UPDATE NOWAIT", "site:order:lock:create")
		return err
	}
	var pe *pgconn.PgError
	if err := lockErr(); !errors.As(err, &pe) || pe.Code != codeLockNotAvailable {
		t.Fatalf("locking the claimed row elsewhere: got %v, want lock_not_available", err)
	}
	// The key-share lock of a foreign key check (the attempt insert) is not blocked.
	if _, err := other.Exec(ctx, "SELECT key FROM operations WHERE key = $1 FOR KEY SHARE NOWAIT", "site:order:lock:create"); err != nil {
		t.Fatalf("FOR KEY SHARE while claimed: %v", err)
	}
	if err := c.Finish(ctx, journal.Finish{Status: journal.StatusDone, Result: &journal.Result{Ref: "r"}}); err != nil {
		t.Fatal(err)
	}
	if err := lockErr(); err != nil {
		t.Fatalf("locking the row after finish: %v", err)
	}
}

func TestClaimSetsIdleInTransactionTimeout(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := newDB(t, Config{ClaimIdleTimeout: 1500 * time.Millisecond})
	j := db.journalStore()
	if _, err := j.Register(ctx, testOp("site:order:idle:create")); err != nil {
		t.Fatal(err)
	}
	c, err := j.ClaimDue(ctx, "w")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release(ctx)
	setting := func(q interface {
		QueryRow(context.Context, string, ...any) pgx.Row
	}) string {
		var s string
		if err := q.QueryRow(ctx, "SHOW idle_in_transaction_session_timeout").Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	if got, want := setting(c.(*claim).conn), "1500ms"; got != want {
		t.Fatalf("idle_in_transaction_session_timeout in the claim: got %s, want %s", got, want)
	}
	if err := c.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// Local to the transaction: a pooled connection does not keep it.
	for range 3 {
		if got := setting(db.Pool()); got == "1500ms" {
			t.Fatalf("the setting leaked out of the claim transaction onto a pooled connection")
		}
	}
}

// A claim idle past ClaimIdleTimeout loses its session, so its lock: another worker
// may claim the operation, and the late Finish fails and says why.
func TestClaimIdleTimeoutEndsTheClaim(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// The idle timeout also bounds the next claim's attempt write: long enough for a
	// loaded machine's INSERT, short enough to wait out.
	db := newDB(t, Config{ClaimIdleTimeout: time.Second})
	j := db.journalStore()
	if _, err := j.Register(ctx, testOp("site:order:slow:create")); err != nil {
		t.Fatal(err)
	}
	c1, err := j.ClaimDue(ctx, "slow")
	if err != nil {
		t.Fatal(err)
	}
	defer c1.Release(ctx)
	// A 1C call longer than the idle timeout: the server ends the claim's session.
	sessionEnded(t, db)

	c2, err := j.ClaimDue(ctx, "next")
	if err != nil {
		t.Fatalf("claim after the idle timeout: %v", err)
	}
	defer c2.Release(ctx)
	if got, want := c2.Attempt(), 2; got != want {
		t.Fatalf("attempt: got %d, want %d", got, want)
	}
	err = c1.Finish(ctx, journal.Finish{Status: journal.StatusDone, Result: &journal.Result{Ref: "late"}})
	if err == nil {
		t.Fatal("finish after the idle timeout: got nil, want an error")
	}
	if !strings.Contains(err.Error(), "idle") {
		t.Fatalf("finish error %q does not explain the idle timeout", err)
	}
	t.Logf("late finish: %v", err)
	if err := c2.Finish(ctx, journal.Finish{Status: journal.StatusDone, Result: &journal.Result{Ref: "r"}}); err != nil {
		t.Fatal(err)
	}
	d, err := j.Show(ctx, "site:order:slow:create")
	if err != nil {
		t.Fatal(err)
	}
	if d.Result.Ref != "r" || d.History[0].Outcome != journal.OutcomeInterrupted || d.History[1].Outcome != journal.OutcomeDone {
		t.Fatalf("after the timeout: result %+v, attempts %+v", d.Result, d.History)
	}
}

func TestClaimKeyLockTimeoutIsBusy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := newDB(t, Config{ClaimLockTimeout: 200 * time.Millisecond})
	j := db.journalStore()
	key := "site:order:busy:create"
	if _, err := j.Register(ctx, testOp(key)); err != nil {
		t.Fatal(err)
	}
	c, err := j.ClaimKey(ctx, key, "worker")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release(ctx)

	start := time.Now()
	if _, err := j.ClaimKey(ctx, key, "operator"); !errors.Is(err, journal.ErrBusy) {
		t.Fatalf("claim of a held key: got %v, want %v", err, journal.ErrBusy)
	}
	if waited := time.Since(start); waited < 200*time.Millisecond {
		t.Fatalf("gave up after %v, before the lock timeout", waited)
	}
	if _, err := j.Requeue(ctx, key); !errors.Is(err, journal.ErrBusy) {
		t.Fatalf("requeue of a held key: got %v, want %v", err, journal.ErrBusy)
	}
	d, err := j.Show(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.History) != 1 {
		t.Fatalf("attempts after busy claims: got %d, want 1", len(d.History))
	}
	if err := c.Release(ctx); err != nil {
		t.Fatal(err)
	}
	c2, err := j.ClaimKey(ctx, key, "operator")
	if err != nil {
		t.Fatalf("claim after release: %v", err)
	}
	c2.Release(ctx)
}

// Open claims are bounded to MaxConns-1, so an attempt row (and any other query)
// always finds a connection.
func TestClaimsLeaveAConnectionFree(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := newDB(t, Config{MaxConns: 3})
	j := db.journalStore()
	for i := range 3 {
		if _, err := j.Register(ctx, testOp(fmt.Sprintf("site:order:%d:create", i))); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		c, err := j.ClaimDue(cctx, "w")
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		defer c.Release(ctx)
	}
	wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if c, err := j.ClaimDue(wctx, "w"); !errors.Is(err, context.DeadlineExceeded) {
		if c != nil {
			c.Release(ctx)
		}
		t.Fatalf("third claim with two of three connections held: got %v, want to wait for a slot", err)
	}
	if _, err := j.Register(ctx, testOp("site:order:more:create")); err != nil {
		t.Fatalf("register while claims are open: %v", err)
	}
}

// TestRoundTrips measures the database round trips of one created order: register,
// claim (BEGIN + settings + SELECT … FOR NO KEY UPDATE), attempt row, finish
// (UPDATE + UPDATE + the order.created outbox event + NOTIFY + COMMIT). The target is
// at most 4.
func TestRoundTrips(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var rt testdb.RoundTrips
	db := newCountedDB(t, &rt)
	j := db.journalStore()

	type counts struct {
		register, claim, finish, total int64
		claimPerConn                   []int64
	}
	run := func(i int) counts {
		var cs counts
		key := fmt.Sprintf("kaspi:order:%d:create", i)
		cs.register = rt.Measure(func() {
			if _, err := j.Register(ctx, testOp(key)); err != nil {
				t.Fatal(err)
			}
		})
		var c journal.Claim
		cs.claim = rt.Measure(func() {
			var err error
			if c, err = j.ClaimDue(ctx, "w"); err != nil {
				t.Fatal(err)
			}
		})
		cs.claimPerConn = rt.PerConn()
		cs.finish = rt.Measure(func() {
			if err := c.Finish(ctx, journal.Finish{Status: journal.StatusDone, Result: &journal.Result{Ref: "r", Number: "1"},
				Messages: []outbox.Message{{Destination: "kaspi", Event: outbox.Event{
					Type: outbox.OrderCreated, AggregateType: "order", AggregateID: fmt.Sprintf("kaspi:order:%d", i),
					Data: []byte(`{"ref":"r","number":"1"}`),
				}}}}); err != nil {
				t.Fatal(err)
			}
		})
		cs.total = cs.register + cs.claim + cs.finish
		return cs
	}
	var last counts
	for i := range 6 {
		last = run(i)
		t.Logf("order %d: register %d, claim+attempt %d (per connection %v), finish %d: total %d round trips",
			i+1, last.register, last.claim, last.claimPerConn, last.finish, last.total)
	}
	if last.register != 1 || last.claim != 2 || !slices.Equal(last.claimPerConn, []int64{1, 1}) || last.finish != 1 {
		t.Fatalf("warm path: register %d, claim+attempt %d, finish %d round trips; want 1, 2 (claim 1 + attempt 1), 1",
			last.register, last.claim, last.finish)
	}

	var events int
	if err := db.Pool().QueryRow(ctx, "SELECT count(*) FROM outbox").Scan(&events); err != nil {
		t.Fatal(err)
	}
	if events != 6 {
		t.Fatalf("outbox events after 6 finishes with one message each: got %d, want 6", events)
	}

	nothing := rt.Measure(func() {
		if _, err := j.ClaimDue(ctx, "w"); !errors.Is(err, journal.ErrNothingDue) {
			t.Fatalf("got %v, want %v", err, journal.ErrNothingDue)
		}
	})
	t.Logf("ClaimDue with nothing due: %d round trips (batch + ROLLBACK)", nothing)
}

// The store takes every time from Config.Now: registration, due-ness, finish.
func TestInjectedClock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var (
		mu  sync.Mutex
		now = time.Date(2026, 9, 16, 10, 0, 0, 123456789, time.FixedZone("Asia/Almaty", 5*3600))
	)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); defer mu.Unlock(); now = now.Add(d) }
	db := newDB(t, Config{Now: clock})
	j := db.journalStore()

	key := "site:order:clock:create"
	r, err := j.Register(ctx, testOp(key))
	if err != nil {
		t.Fatal(err)
	}
	want := clock().UTC().Truncate(time.Microsecond)
	if got := r.Operation.CreatedAt; !got.Equal(want) || got.Location() != time.UTC {
		t.Fatalf("created_at: got %v, want %v in UTC", got, want)
	}
	c, err := j.ClaimDue(ctx, "w")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release(ctx)
	if err := c.Finish(ctx, journal.Finish{Status: journal.StatusPending, Exchanges: []byte(`{"broken"`)}); err == nil {
		t.Fatal("finish with invalid exchanges: got nil, want an error")
	}
	advance(time.Second)
	if err := c.Finish(ctx, journal.Finish{Status: journal.StatusPending, Error: "503", NextAttemptAt: clock().Add(time.Minute)}); err != nil {
		t.Fatalf("finish after a refused one: %v", err)
	}
	op, err := j.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if want := clock().UTC().Truncate(time.Microsecond); !op.UpdatedAt.Equal(want) {
		t.Fatalf("updated_at: got %v, want %v", op.UpdatedAt, want)
	}
	if _, err := j.ClaimDue(ctx, "w"); !errors.Is(err, journal.ErrNothingDue) {
		t.Fatalf("before next_attempt_at: got %v, want %v", err, journal.ErrNothingDue)
	}
	advance(2 * time.Minute)
	c2, err := j.ClaimDue(ctx, "w")
	if err != nil {
		t.Fatalf("after next_attempt_at: %v", err)
	}
	defer c2.Release(ctx)
	if got, want := c2.Attempt(), 2; got != want {
		t.Fatalf("attempt: got %d, want %d", got, want)
	}
}

// sessionEnded waits until no session of the test's schema is idle in a transaction:
// the server has ended the one a claim or a lock held past ClaimIdleTimeout, and
// its row lock with it.
func sessionEnded(t *testing.T, db *DB) {
	t.Helper()
	eventually.True(t, "the idle transaction's session to end", func() bool {
		var idle bool
		if err := db.Pool().QueryRow(context.Background(), `SELECT EXISTS (SELECT FROM pg_stat_activity
			WHERE application_name = current_setting('application_name') AND state LIKE 'idle in transaction%')`).Scan(&idle); err != nil {
			t.Fatal(err)
		}
		return !idle
	})
}

// A claim made under journal.WithAttemptInBackground is returned before its attempt
// row is written; Opened waits for the row, and a Release right after the claim
// waits for it too, so that the next claim numbers its attempt after it rather than
// as it (the attempts' primary key would refuse the second, or the trace lose one).
func TestAttemptInBackground(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := newDB(t, Config{})
	j := db.journalStore()
	key := "site:order:background:create"
	if _, err := j.Register(ctx, testOp(key)); err != nil {
		t.Fatal(err)
	}
	bg := journal.WithAttemptInBackground(ctx)
	for want := 1; want <= 3; want++ {
		c, err := j.ClaimDue(bg, "w")
		if err != nil {
			t.Fatalf("claim %d: %v", want, err)
		}
		if c.Attempt() != want {
			t.Fatalf("claim %d: attempt %d", want, c.Attempt())
		}
		if want == 2 {
			if err := c.Opened(ctx); err != nil {
				t.Fatalf("opened: %v", err)
			}
			d, err := j.Show(ctx, key)
			if err != nil || len(d.History) != 2 || d.History[1].FinishedAt != nil {
				t.Fatalf("once opened: %+v, %v; want attempt 2 open", d.History, err)
			}
		}
		if err := c.Release(ctx); err != nil { // at once: the row may be on its way
			t.Fatalf("release %d: %v", want, err)
		}
	}
	c, err := j.ClaimDue(bg, "w")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Finish(ctx, journal.Finish{Status: journal.StatusDone, Result: &journal.Result{Ref: "r"}}); err != nil {
		t.Fatalf("finish right after the claim: %v", err)
	}
	d, err := j.Show(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	var outcomes []string
	for _, a := range d.History {
		outcomes = append(outcomes, fmt.Sprintf("%d:%s", a.Attempt, a.Outcome))
	}
	if got, want := strings.Join(outcomes, " "), "1:interrupted 2:interrupted 3:interrupted 4:done"; got != want || d.Status != journal.StatusDone {
		t.Fatalf("attempts %q (%s), want %q, done", got, d.Status, want)
	}
}
