package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/order"
	"github.com/ordersync/ordersync/internal/stock"
)

// InterruptedError is written on an attempt left open when the next claim of its
// operation starts.
const InterruptedError = "interrupted: the worker stopped before recording an outcome (crash, kill or lost connection)"

// ErrClaimClosed is returned by Finish on a claim already finished or released.
var ErrClaimClosed = errors.New("postgres: the claim is already finished or released")

// The claims lock with FOR NO KEY UPDATE, not FOR UPDATE: the attempt row is inserted
// on another connection while the lock is held, and its foreign key check takes FOR KEY
// SHARE on the operation row, which FOR UPDATE would block until the claim ends — a
// deadlock between the claim's two connections that the server cannot see. FOR NO KEY
// UPDATE still excludes every other claim and every UPDATE of the row.
//
// The row is locked in a subquery with LIMIT 1, and what a claim asks of it besides
// (claimExtras) is computed for that one row outside it, so the planner never weighs
// the extras against every due row.
const claimDueSQL = `SELECT ` + opColumns + claimExtras + ` FROM (
	SELECT * FROM operations
	WHERE status = 'pending' AND next_attempt_at <= $1
	ORDER BY next_attempt_at, key
	LIMIT 1
	FOR NO KEY UPDATE SKIP LOCKED) operations`

const claimKeySQL = `SELECT ` + opColumns + claimExtras + ` FROM (
	SELECT * FROM operations WHERE key = $1 FOR NO KEY UPDATE) operations`

// lockKeySQL is Store.Lock's: the row under the same lock, and when its open attempt
// started.
const lockKeySQL = `SELECT ` + opColumns + openStartedColumn + ` FROM (
	SELECT * FROM operations WHERE key = $1 FOR NO KEY UPDATE) operations`

// claimExtras: whether the order of a create has a cancel registered (its key with
// :cancel for :create: the engine then never creates it); when the newest open attempt
// started (a worker that may still be at work in 1C); whether an earlier attempt
// was in doubt (an unknown outcome, or interrupted), so the done create is verified;
// the operation's pending trigger, which the attempt records; the number of the
// attempt to open (one more than the last, which the row lock keeps stable until the
// claim ends, as only a claimer writes attempts); and the database's
// clock once the row is locked (the outer list is computed for the row the locking
// subquery returns), which decides whether the earlier attempt has settled and
// stamps the new one (clock.go).
const claimExtras = `,
	operations.key LIKE '%:create' AND EXISTS (
		SELECT 1 FROM operations c WHERE c.key = left(operations.key, -7) || ':cancel')` + openStartedColumn + `,
	EXISTS (SELECT 1 FROM operation_attempts d WHERE d.operation_key = operations.key
		AND (d.outcome = 'interrupted' OR d.class = 'unknown')),
	operations.triggered_by,
	(SELECT coalesce(max(attempt), 0) + 1 FROM operation_attempts n WHERE n.operation_key = operations.key),
	clock_timestamp()`

const openStartedColumn = `,
	(SELECT max(started_at) FROM operation_attempts o WHERE o.operation_key = operations.key AND o.finished_at IS NULL)`

// deferSQL makes a claimed row due when the attempt that may still be at work in 1C
// has settled; the claim commits it and claims no attempt.
const deferSQL = `UPDATE operations SET next_attempt_at = $2 WHERE key = $1`

// maxDeferrals bounds how many unsettled rows one ClaimDue steps over before it
// answers journal.ErrNothingDue.
const maxDeferrals = 16

// attemptSQL runs on a connection of its own, in autocommit, while the claim holds the
// row lock: it closes the attempts a stopped worker left open (the claim has checked
// that they are older than the takeover time) and opens attempt $6, the number the
// claim read under the lock. $5 is who triggered the attempt.
const attemptSQL = `
WITH interrupted AS (
	UPDATE operation_attempts
	SET finished_at = $3, outcome = 'interrupted', error = $4
	WHERE operation_key = $1 AND finished_at IS NULL
	RETURNING attempt
), opened AS (
	INSERT INTO operation_attempts (operation_key, attempt, worker, started_at, triggered_by)
	VALUES ($1, $6, $2, $3, $5)
	RETURNING attempt
)
SELECT coalesce((SELECT array_agg(attempt ORDER BY attempt) FROM interrupted), '{}')
FROM opened`

// finishOperationSQL writes the verdict; $8 and $9, when not null, replace the payload
// and its SHA-256 (Finish.Payload: the order fetched for a fetch payload).
//
// $10 the retry class (kept only while pending), $11 whether the attempt's outcome was
// unknown (counted), $12 a settle time (the later one is kept), $13 the verification
// time, $14 the first attempt's time (kept if there is one), $15 and $16 whether to
// replace the warnings and with what, $17 the late verification's time, $18 to $21
// what journal.Derive reads off the payload and the result as written (derivedOf).
//
// A wake recorded while the claim held the row (operation_wakes: a webhook that did
// not wait) is applied here: unless the verdict is done, the operation is pending
// and due now.
//
// The verdict spends the pending trigger: the attempts after this one are the
// engine's retries (journal.ActorRetry) until a registration or requeue sets another.
// It is written here, in the claim's transaction, rather than when the attempt opens:
// the attempt row is written on another connection, which the claim's row lock
// would block.
const finishOperationSQL = `
WITH woken AS (
	DELETE FROM operation_wakes WHERE operation_key = $1 RETURNING 1
)
UPDATE operations
SET status = CASE WHEN $2 <> 'done' AND EXISTS (SELECT FROM woken) THEN 'pending' ELSE $2 END,
	result = $3, last_error = $4, attempts = $5,
	next_attempt_at = CASE WHEN $2 <> 'done' AND EXISTS (SELECT FROM woken) THEN $7 ELSE coalesce($6, next_attempt_at) END,
	updated_at = $7,
	payload = coalesce($8, payload), payload_sha256 = coalesce($9, payload_sha256),
	retry_class = CASE WHEN $2 = 'pending' OR ($2 <> 'done' AND EXISTS (SELECT FROM woken)) THEN $10 ELSE '' END,
	unknown_attempts = unknown_attempts + CASE WHEN $11 THEN 1 ELSE 0 END,
	settle_until = greatest(settle_until, $12),
	verify_at = CASE WHEN $2 = 'done' THEN $13 ELSE verify_at END,
	late_verify_at = CASE WHEN $2 = 'done' THEN $17 ELSE late_verify_at END,
	first_attempt_at = coalesce(first_attempt_at, $14),
	warnings = CASE WHEN $15 THEN $16 ELSE warnings END,
	order_created_at = $18, order_total = $19::numeric, currency = $20, search_text = $21,
	triggered_by = '` + journal.ActorRetry + `'
WHERE key = $1`

const finishAttemptSQL = `
UPDATE operation_attempts
SET finished_at = $3, outcome = $4, error = $5, onec_ref = $6, exchanges = $7, class = $8
WHERE operation_key = $1 AND attempt = $2`

// ClaimDue claims the pending operation that is due first (next_attempt_at, then key),
// skipping rows other workers hold, and commits its attempt row before returning.
// journal.ErrNothingDue when no operation is due.
//
// The returned claim holds a pooled connection and an open transaction: callers must
// `defer claim.Release(ctx)` (a no-op after Finish).
func (j *Journal) ClaimDue(ctx context.Context, worker string) (journal.Claim, error) {
	return j.claim(ctx, worker, "")
}

// ClaimKey claims one operation by key whatever its next_attempt_at (the operator's
// resync), waiting at most ClaimLockTimeout for a worker that holds it
// (journal.ErrBusy). journal.ErrNotFound for an unknown key; *journal.NotPendingError
// (journal.ErrNotPending) when it is done or failed, and then no attempt is written.
// Callers must `defer claim.Release(ctx)`.
func (j *Journal) ClaimKey(ctx context.Context, key, worker string) (journal.Claim, error) {
	if err := journal.CheckKey(key); err != nil {
		return nil, fmt.Errorf("postgres: claim: %w", err)
	}
	return j.claim(ctx, worker, key)
}

// claim is ClaimDue (key == "") or ClaimKey. Round trips: one for BEGIN + settings +
// SELECT … FOR NO KEY UPDATE (a pipelined batch), one for the attempt row on another
// connection — which, for a ClaimDue under journal.WithAttemptInBackground, is
// written while the caller already reads from 1C (Claim.Opened waits for it).
//
// A row whose earlier attempt may still be at work in 1C — its settle_until ahead, or
// an open attempt younger than TakeoverAfter — is not claimed: it is made due when
// that has settled and committed, and ClaimDue goes on to the next due row (ClaimKey
// answers *journal.UnsettledError). "Ahead" and "younger" are judged on the
// database's clock under the row lock (unless Config.Now injects one), and the new
// attempt starts at that time: replicas whose clocks disagree judge alike.
func (j *Journal) claim(ctx context.Context, worker, key string) (_ journal.Claim, err error) {
	db := j.db
	what := "claim due"
	if key != "" {
		what = "claim " + key
	}
	select {
	case db.claimSlots <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("postgres: %s: waiting for a free claim slot: %w", what, ctx.Err())
	}
	conn, err := db.pool.Acquire(ctx)
	if err != nil {
		<-db.claimSlots
		return nil, fmt.Errorf("postgres: %s: %w", what, err)
	}
	c := &claim{db: db, conn: conn}
	defer func() {
		if err != nil {
			_ = c.end(ctx)
		}
	}()

	var (
		row lockedRow
		now time.Time
	)
	for deferrals := 0; ; deferrals++ {
		due := db.nowUTC()
		row, err = j.lockForClaim(ctx, conn, key, due)
		switch {
		case errors.Is(err, pgx.ErrNoRows) && key == "":
			return nil, journal.ErrNothingDue
		case err != nil:
			return nil, fmt.Errorf("postgres: %s: %w", what, interpretError(err))
		case row.op.Status != journal.StatusPending:
			return nil, &journal.NotPendingError{Operation: row.op}
		}
		now = row.locked
		if db.injectedClock {
			now = due
		}
		until := journal.UnsettledUntil(row.op.SettleUntil, row.openStarted, db.cfg.TakeoverAfter)
		if until == nil || !until.After(now) {
			break
		}
		// An earlier attempt may still be at work in 1C: leave the row until it has settled.
		b := &pgx.Batch{}
		b.Queue(deferSQL, row.op.Key, *until)
		b.Queue("COMMIT")
		if err := conn.SendBatch(ctx, b).Close(); err != nil {
			return nil, fmt.Errorf("postgres: %s: defer %s: %w", what, row.op.Key, interpretError(err))
		}
		db.log.InfoContext(ctx, "journal: an earlier attempt may still be at work in 1C; the operation waits",
			"key", row.op.Key, "until", until.Format(time.RFC3339Nano), "open_attempt_started_at", row.openStarted)
		if key != "" {
			return nil, &journal.UnsettledError{Key: row.op.Key, Until: *until}
		}
		if deferrals+1 >= maxDeferrals {
			return nil, journal.ErrNothingDue
		}
	}
	op := row.op
	op.Doubted = op.Doubted || row.openStarted != nil
	op.Attempts = row.next
	op.AttemptStartedAt = now
	c.op, c.attempt = op, row.next

	// The attempt row, committed on another connection before 1C hears of anything
	// that may change it. Bounded by the claim's idle timeout, which ends the claim
	// transaction anyway while this statement runs, so that a lock it should never
	// meet fails instead of hanging. It is not cut short by ctx: a cancellation
	// arriving while the insert is on the wire would leave a committed attempt that no
	// claim owns (seen when a service stops); once the row is locked, the claim is
	// completed and returned. A resync's ClaimKey names its actor; otherwise the
	// attempt is the operation's pending trigger's (its registration, its requeue, or
	// a retry).
	trigger := row.trigger
	if a := journal.ActorOf(ctx); key != "" && a != "" {
		trigger = a
	}
	c.opened = make(chan struct{})
	open := func() {
		defer close(c.opened)
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), db.cfg.ClaimIdleTimeout)
		defer cancel()
		var interrupted []int32
		if err := db.pool.QueryRow(actx, attemptSQL, op.Key, worker, now, InterruptedError, trigger, c.attempt).Scan(&interrupted); err != nil {
			c.openErr = fmt.Errorf("postgres: %s: record attempt %d of %s: %w: %w", what, c.attempt, op.Key,
				journal.ErrAttemptNotRecorded, interpretError(err))
			return
		}
		if len(interrupted) > 0 {
			db.log.WarnContext(ctx, "journal: closed attempts left open by a stopped worker as interrupted",
				"key", op.Key, "interrupted", interrupted, "attempt", c.attempt, "worker", worker)
		}
	}
	if key == "" && journal.AttemptInBackground(ctx) {
		go open()
		return c, nil
	}
	open()
	if c.openErr != nil {
		return nil, c.openErr
	}
	return c, nil
}

// lockedRow is the row a claim locked: the operation with its claim extras, when
// its newest open attempt started (nil when none is open), its pending trigger, the
// number of the attempt to open, and the database's clock once the row was locked.
type lockedRow struct {
	op          journal.Operation
	openStarted *time.Time
	trigger     string
	next        int
	locked      time.Time
}

// lockForClaim begins a transaction on conn and locks the row to claim: the first
// due one at now (key == "") or key's.
func (j *Journal) lockForClaim(ctx context.Context, conn *pgxpool.Conn, key string, now time.Time) (lockedRow, error) {
	db := j.db
	b := &pgx.Batch{}
	b.BeginTx(pgx.TxOptions{})
	b.Queue(`SELECT set_config('idle_in_transaction_session_timeout', $1, true)`, millis(db.cfg.ClaimIdleTimeout))
	if key == "" {
		b.Queue(claimDueSQL, now)
	} else {
		b.Queue(`SELECT set_config('lock_timeout', $1, true)`, millis(db.cfg.ClaimLockTimeout))
		b.Queue(claimKeySQL, key)
	}
	br := conn.SendBatch(ctx, b)
	var row lockedRow
	err := func() error {
		for range b.Len() - 1 { // BEGIN and the settings
			if _, err := br.Exec(); err != nil {
				return err
			}
		}
		var cancelRequested, doubted bool
		var err error
		row.op, err = scanOperation(br.QueryRow(), &cancelRequested, &row.openStarted, &doubted, &row.trigger, &row.next, &row.locked)
		row.op.CancelRequested, row.op.Doubted = cancelRequested, doubted
		return err
	}()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = endTxKeep(ctx, conn)
	}
	row.openStarted = utcPtr(row.openStarted)
	row.locked = row.locked.UTC().Truncate(time.Microsecond)
	return row, err
}

// endTxKeep rolls back what is left of a transaction on conn and keeps the
// connection.
func endTxKeep(ctx context.Context, conn *pgxpool.Conn) error {
	pc := conn.Conn().PgConn()
	if pc.IsClosed() || pc.TxStatus() == 'I' {
		return nil
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout(ctx))
	defer cancel()
	_, err := conn.Exec(rctx, "ROLLBACK")
	return err
}

// claim is one claimed operation: a pooled connection in an open transaction that
// holds the operation's row lock.
type claim struct {
	db      *DB
	conn    *pgxpool.Conn
	op      journal.Operation
	attempt int

	// opened is closed once the attempt row is written, or could not be (openErr).
	opened  chan struct{}
	openErr error

	mu     sync.Mutex
	closed bool
}

var _ journal.Claim = (*claim)(nil)

func (c *claim) Operation() journal.Operation { return c.op }
func (c *claim) Attempt() int                 { return c.attempt }

// Opened waits for the attempt row (see journal.Claim).
func (c *claim) Opened(ctx context.Context) error {
	select {
	case <-c.opened:
		return c.openErr
	case <-ctx.Done():
		return fmt.Errorf("postgres: waiting for the attempt row of %s: %w", c.op.Key, ctx.Err())
	}
}

// Finish writes the operation's new state (and f.Payload, when set, as its payload,
// with that payload's SHA-256), closes the attempt row, stores f.Attachments when
// the verdict is done (a *stock.Snapshot: its row, and its items in one INSERT …
// SELECT FROM unnest of text arrays, whatever their number; created_at is now;
// attachments on any other verdict are not written) and enqueues f.Messages in the
// claim's transaction, and commits: one round trip (UPDATE, UPDATE, the snapshot's
// two INSERTs, one outbox statement per message and a NOTIFY, COMMIT pipelined), so
// a verdict, its snapshot and its events commit together. A snapshot whose key is
// not the operation's, a second snapshot, or an attachment of a type this store
// does not know is refused before anything is written (f is invalid). On an error
// the transaction is
// rolled back — no event is left behind — and the attempt stays open, to be marked
// interrupted by the next claim. The claim is closed afterwards either way, except
// when f itself is invalid.
func (c *claim) Finish(ctx context.Context, f journal.Finish) error {
	key := c.op.Key
	if err := f.Check(); err != nil {
		return fmt.Errorf("postgres: finish %s: %w", key, err)
	}
	outcome := f.Outcome()
	var exchanges []byte
	if len(f.Exchanges) > 0 {
		exchanges = f.Exchanges
	}
	var (
		payload       []byte
		payloadSHA256 *string
	)
	written := c.op.Payload
	if len(f.Payload) > 0 {
		payload, written = f.Payload, f.Payload
		sum := order.SHA256Hex(f.Payload)
		payloadSHA256 = &sum
	}
	warnings, err := journal.EncodeWarnings(f.Warnings)
	if err != nil {
		return fmt.Errorf("postgres: finish %s: warnings: %w", key, err)
	}
	var result []byte
	stored := f.StoredResult()
	if r := stored; r != nil {
		if result, err = json.Marshal(r); err != nil {
			return fmt.Errorf("postgres: finish %s: result: %w", key, err)
		}
	}
	dv := derivedOf(key, c.op.Source, c.op.ExternalID, written, stored)
	attachments, err := prepareAttachments(key, f)
	if err != nil {
		return fmt.Errorf("postgres: finish %s: %w", key, err)
	}
	now := c.db.nowUTC()
	var messages []enqueueRow
	if len(f.Messages) > 0 {
		var err error
		if messages, err = prepareMessages(now, f.Messages); err != nil {
			return fmt.Errorf("postgres: finish %s: outbox: %w", key, err)
		}
	}
	var next *time.Time
	if f.Status == journal.StatusPending {
		t := now
		if !f.NextAttemptAt.IsZero() {
			t = f.NextAttemptAt.UTC()
		}
		next = &t
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return fmt.Errorf("postgres: finish %s: %w", key, ErrClaimClosed)
	}
	c.closed = true
	<-c.opened // bounded by the claim's idle timeout
	if c.openErr != nil {
		if err := c.end(ctx); err != nil {
			return fmt.Errorf("postgres: finish %s: %w (and: %w)", key, c.openErr, err)
		}
		return fmt.Errorf("postgres: finish %s: %w", key, c.openErr)
	}

	b := &pgx.Batch{}
	b.Queue(finishOperationSQL, key, string(f.Status), result, f.LastError(), c.attempt, next, now, payload, payloadSHA256,
		f.Class, f.Class == journal.ClassUnknown, timeOrNil(f.SettleUntil), timeOrNil(f.VerifyAt),
		timeOrNil(f.FirstAttemptAt), f.Warnings != nil, warnings, timeOrNil(f.LateVerifyAt),
		dv.orderAt, dv.total, dv.currency, dv.search)
	b.Queue(finishAttemptSQL, key, c.attempt, now, string(outcome), f.Error, f.Ref, exchanges, f.Class)
	for _, a := range attachments {
		a.queue(b, now)
	}
	if len(messages) > 0 {
		queueMessages(b, messages)
	}
	b.Queue("COMMIT")
	br := c.conn.SendBatch(ctx, b)
	var tags [2]pgconn.CommandTag
	var commit pgconn.CommandTag
	err = func() (err error) {
		for i := range tags {
			if tags[i], err = br.Exec(); err != nil {
				return err
			}
		}
		for _, a := range attachments {
			if err := a.read(br); err != nil {
				return err
			}
		}
		if len(messages) > 0 {
			if err := readEnqueued(br, len(messages)); err != nil {
				return fmt.Errorf("outbox: %w", err)
			}
		}
		commit, err = br.Exec()
		return err
	}()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err == nil && (tags[0].RowsAffected() != 1 || tags[1].RowsAffected() != 1 || commit.String() != "COMMIT") {
		err = fmt.Errorf("unexpected result: operation rows %d, attempt rows %d, %q",
			tags[0].RowsAffected(), tags[1].RowsAffected(), commit.String())
	}
	lost := c.conn.Conn().IsClosed()
	if eerr := c.end(ctx); err == nil && eerr != nil {
		err = eerr
	}
	if err != nil {
		return fmt.Errorf("postgres: finish %s attempt %d: %w", key, c.attempt, c.explain(err, lost))
	}
	return nil
}

// attachmentWrite is an attachment of a verdict (journal.Finish.Attachments),
// checked and ready for the claim's batch: queue adds its statements, read reads
// their results in the same order.
type attachmentWrite interface {
	queue(b *pgx.Batch, now time.Time)
	read(br pgx.BatchResults) error
}

// prepareAttachments checks a verdict's attachments by stock.SnapshotToStore's rule
// and, when it is done, prepares the snapshot for the claim's batch.
func prepareAttachments(key string, f journal.Finish) ([]attachmentWrite, error) {
	snap, err := stock.SnapshotToStore(f)
	if err != nil || snap == nil {
		return nil, err
	}
	w, err := prepareSnapshot(key, snap)
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	return []attachmentWrite{w}, nil
}

// Release gives the claim up without a verdict: the transaction is rolled back (even
// when ctx is cancelled) and the attempt row stays open. Safe after Finish and twice.
func (c *claim) Release(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	// Not before the attempt row is written: the next claimer would number its
	// attempt as this one.
	<-c.opened
	if err := c.end(ctx); err != nil {
		return fmt.Errorf("postgres: release %s: %w", c.op.Key, err)
	}
	return nil
}

// end rolls back what is left of the transaction and gives the connection and the
// claim slot back.
func (c *claim) end(ctx context.Context) error {
	defer func() { <-c.db.claimSlots }()
	return endTx(ctx, c.conn)
}

// explain adds advice when the server ended an idle claim, which it does once the
// claim has waited longer than ClaimIdleTimeout (and the lock is gone with it).
func (c *claim) explain(err error, lost bool) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == codeIdleInTransactionTimed {
		return fmt.Errorf("the server ended the claim's transaction after %s idle "+
			"(idle_in_transaction_session_timeout: set the claim idle timeout above onec.timeout): %w",
			c.db.cfg.ClaimIdleTimeout, err)
	}
	if lost {
		return fmt.Errorf("lost the claim's connection before the commit was confirmed "+
			"(if it did not commit, the next claim marks this attempt interrupted): %w", err)
	}
	return interpretError(err)
}

// timeOrNil is t in UTC, or nil (SQL NULL) for the zero time.
func timeOrNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}
