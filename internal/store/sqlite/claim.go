package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/order"
	"github.com/ordersync/ordersync/internal/stock"
)

// InterruptedError is written on an attempt left open when the next claim of its
// operation starts (the same text as the PostgreSQL store's).
const InterruptedError = "interrupted: the worker stopped before recording an outcome (crash, kill or lost connection)"

// ErrClaimClosed is returned by Finish on a claim already finished or released.
var ErrClaimClosed = errors.New("sqlite: the claim is already finished or released")

// dueSQL lists the due pending operations in claim order (next_attempt_at, then key),
// on the partial index operations_due_idx. ClaimDue reads it only as far as the first
// key it can lock.
const dueSQL = `SELECT key FROM operations
WHERE status = 'pending' AND next_attempt_at <= ?
ORDER BY next_attempt_at, key`

// claimReadSQL reads the operation to claim and whether the order of a create has a
// cancel registered (its key with :cancel for :create): the engine then never
// creates it. The suffix is compared exactly (LIKE would ignore case).
//
// It also reads when the newest open attempt started (a worker that may still be at
// work in 1C) and whether an earlier attempt was in doubt (an unknown outcome, or
// interrupted), so the done create is verified.
const claimReadSQL = `SELECT ` + opColumns + `,
	substr(operations.key, -7) = ':create' AND EXISTS (
		SELECT 1 FROM operations c WHERE c.key = substr(operations.key, 1, length(operations.key) - 7) || ':cancel'),
	(SELECT max(started_at) FROM operation_attempts o WHERE o.operation_key = operations.key AND o.finished_at IS NULL),
	EXISTS (SELECT 1 FROM operation_attempts d WHERE d.operation_key = operations.key
		AND (d.outcome = 'interrupted' OR d.class = 'unknown')),
	triggered_by
FROM operations WHERE key = ?`

// deferSQL makes an operation due when the attempt that may still be at work in 1C
// has settled; the claim claims no attempt.
const deferSQL = `UPDATE operations SET next_attempt_at = ?2 WHERE key = ?1`

// maxDeferrals bounds how many unsettled operations one ClaimDue steps over before it
// answers journal.ErrNothingDue.
const maxDeferrals = 16

// interruptSQL closes the attempts a stopped worker left open (or a released claim):
// while the key is held no other claim of it is in flight.
const interruptSQL = `UPDATE operation_attempts SET finished_at = ?2, outcome = 'interrupted', error = ?3
WHERE operation_key = ?1 AND finished_at IS NULL
RETURNING attempt`

// openAttemptSQL opens the next attempt, numbered max+1: safe because the key lock
// admits one claimer and the write transaction one writer. ?4 is who triggered it.
const openAttemptSQL = `INSERT INTO operation_attempts (operation_key, attempt, worker, started_at, triggered_by)
SELECT ?1, coalesce(max(attempt), 0) + 1, ?2, ?3, ?4 FROM operation_attempts WHERE operation_key = ?1
RETURNING attempt`

// finishOperationSQL writes the verdict; ?8 and ?9, when not null, replace the payload
// and its SHA-256 (Finish.Payload: the order fetched for a fetch payload).
//
// ?10 the retry class (kept only while pending), ?11 whether the attempt's outcome was
// unknown (counted), ?12 a settle time (the later one is kept), ?13 the verification
// time, ?14 the first attempt's time (kept if there is one), ?15 and ?16 whether to
// replace the warnings and with what, ?17 the search_phone of the new payload (when
// ?8 is set), ?18 and ?19 the result's search_result_number and search_result_ref,
// ?20 the late verification's time, ?21 to ?24 what journal.Derive reads off the
// payload (the new one, when ?8 is set) and the result (derivedOf).
//
// The verdict spends the pending trigger: the attempts after this one are the
// engine's retries (journal.ActorRetry) until a registration or requeue sets another.
const finishOperationSQL = `
UPDATE operations
SET status = ?2, result = ?3, last_error = ?4, attempts = ?5,
	triggered_by = 'retry',
	search_phone = CASE WHEN ?8 IS NOT NULL THEN ?17 ELSE search_phone END,
	search_result_number = ?18, search_result_ref = ?19,
	order_created_at = ?21, order_total = ?22, currency = ?23, search_text = ?24,
	next_attempt_at = coalesce(?6, next_attempt_at), updated_at = ?7,
	payload = coalesce(?8, payload), payload_sha256 = coalesce(?9, payload_sha256),
	retry_class = CASE WHEN ?2 = 'pending' THEN ?10 ELSE '' END,
	unknown_attempts = unknown_attempts + CASE WHEN ?11 THEN 1 ELSE 0 END,
	settle_until = CASE WHEN ?12 IS NOT NULL AND (settle_until IS NULL OR ?12 > settle_until) THEN ?12 ELSE settle_until END,
	verify_at = CASE WHEN ?2 = 'done' THEN ?13 ELSE verify_at END,
	late_verify_at = CASE WHEN ?2 = 'done' THEN ?20 ELSE late_verify_at END,
	first_attempt_at = coalesce(first_attempt_at, ?14),
	warnings = CASE WHEN ?15 THEN ?16 ELSE warnings END
WHERE key = ?1`

const finishAttemptSQL = `
UPDATE operation_attempts
SET finished_at = ?3, outcome = ?4, error = ?5, onec_ref = ?6, exchanges = ?7, class = ?8
WHERE operation_key = ?1 AND attempt = ?2 AND finished_at IS NULL`

// ClaimDue claims the pending operation that is due first (next_attempt_at, then key)
// whose key no claim or lock of this process holds — the SKIP LOCKED stand-in — and
// commits its attempt row before returning, in one short write transaction; the
// claim then holds the key and no database lock. An operation whose earlier attempt
// may still be at work in 1C is made due when that has settled and stepped over.
// journal.ErrNothingDue when no operation is due. Callers must
// `defer claim.Release(ctx)` (a no-op after Finish).
func (j *Journal) ClaimDue(ctx context.Context, worker string) (journal.Claim, error) {
	db := j.db
	var (
		key string // locked, once a due one was found
		c   *claim
	)
	err := db.write(ctx, func(tx *sql.Tx) error {
		now := db.nowUTC()
		for range maxDeferrals {
			var err error
			if key, err = db.lockDue(ctx, tx, now); err != nil {
				if errors.Is(err, journal.ErrNothingDue) {
					return nil // commits the deferrals made so far
				}
				return err
			}
			var until *time.Time
			c, until, err = j.openAttempt(ctx, tx, key, worker, "", now)
			if err != nil || until == nil {
				return err
			}
			if err := j.deferUntil(ctx, tx, key, *until); err != nil {
				return err
			}
			db.keys.Unlock(key)
			key = ""
		}
		return nil // stepped over maxDeferrals: the deferrals commit, nothing is claimed
	})
	if err != nil || c == nil {
		if key != "" {
			db.keys.Unlock(key)
		}
		if err == nil || errors.Is(err, journal.ErrNothingDue) {
			return nil, journal.ErrNothingDue
		}
		return nil, fmt.Errorf("sqlite: claim due: %w", err)
	}
	return c, nil
}

// deferUntil makes key due at until: an earlier attempt may still be at work in 1C.
func (j *Journal) deferUntil(ctx context.Context, tx *sql.Tx, key string, until time.Time) error {
	if _, err := tx.ExecContext(ctx, deferSQL, key, ts(until)); err != nil {
		return fmt.Errorf("defer %s: %w", key, err)
	}
	j.db.log.InfoContext(ctx, "journal: an earlier attempt may still be at work in 1C; the operation waits",
		"key", key, "until", until.Format(time.RFC3339Nano))
	return nil
}

// lockDue returns the first due key it could lock, locked; journal.ErrNothingDue
// when every due key is held (or none is due).
func (db *DB) lockDue(ctx context.Context, tx *sql.Tx, now time.Time) (string, error) {
	rows, err := db.queryTx(ctx, tx, dueSQL, ts(now))
	if err != nil {
		return "", err
	}
	defer rows.Close()
	for rows.Next() {
		var key string
		if err := rows.Scan(&key); err != nil {
			return "", err
		}
		if db.keys.TryLock(key) {
			return key, nil
		}
	}
	if err := rows.Err(); err != nil {
		return "", err
	}
	return "", journal.ErrNothingDue
}

// ClaimKey claims one operation by key whatever its next_attempt_at (the operator's
// resync), waiting at most ClaimLockTimeout for a claim or lock of this process that
// holds it (journal.ErrBusy). journal.ErrNotFound for an unknown key;
// *journal.NotPendingError (journal.ErrNotPending) when it is done or failed, and then
// no attempt is written; *journal.UnsettledError when an earlier attempt may still be
// at work in 1C (the operation is made due then). Callers must
// `defer claim.Release(ctx)`.
func (j *Journal) ClaimKey(ctx context.Context, key, worker string) (journal.Claim, error) {
	db := j.db
	if err := journal.CheckKey(key); err != nil {
		return nil, fmt.Errorf("sqlite: claim: %w", err)
	}
	if err := db.lockOperation(ctx, key); err != nil {
		return nil, fmt.Errorf("sqlite: claim %s: %w", key, err)
	}
	var (
		c     *claim
		until *time.Time
	)
	err := db.write(ctx, func(tx *sql.Tx) error {
		var err error
		c, until, err = j.openAttempt(ctx, tx, key, worker, journal.ActorOf(ctx), db.nowUTC())
		if err != nil || until == nil {
			return err
		}
		return j.deferUntil(ctx, tx, key, *until)
	})
	if err == nil && until != nil {
		db.keys.Unlock(key)
		return nil, &journal.UnsettledError{Key: key, Until: *until}
	}
	if err != nil {
		db.keys.Unlock(key)
		var npe *journal.NotPendingError
		if errors.As(err, &npe) {
			return nil, npe
		}
		return nil, fmt.Errorf("sqlite: claim %s: %w", key, err)
	}
	return c, nil
}

// openAttempt reads the operation under its (held) key, refuses one that is not
// pending, closes the attempts left open as interrupted and opens the next one, in
// tx. The claim it returns holds the key. When an earlier attempt may still be at
// work in 1C (settle_until ahead, or an open attempt younger than TakeoverAfter) it
// writes nothing and returns when that will have settled instead.
//
// The attempt is triggered by actor when it is not empty (a resync's ClaimKey), else
// by the operation's pending trigger.
func (j *Journal) openAttempt(ctx context.Context, tx *sql.Tx, key, worker, actor string, now time.Time) (*claim, *time.Time, error) {
	var (
		cancelRequested, doubted bool
		openStarted              sql.NullInt64
		trigger                  string
	)
	op, err := scanOperation(j.db.queryRowTx(ctx, tx, claimReadSQL, key), &cancelRequested, &openStarted, &doubted, &trigger)
	if err != nil {
		return nil, nil, journalError(err)
	}
	if op.Status != journal.StatusPending {
		return nil, nil, &journal.NotPendingError{Operation: op}
	}
	if until := journal.UnsettledUntil(op.SettleUntil, nullTS(openStarted), j.db.cfg.TakeoverAfter); until != nil && until.After(now) {
		return nil, until, nil
	}
	op.CancelRequested = cancelRequested
	op.Doubted = doubted || openStarted.Valid
	rows, err := j.db.queryTx(ctx, tx, interruptSQL, key, ts(now), InterruptedError)
	if err != nil {
		return nil, nil, fmt.Errorf("close interrupted attempts of %s: %w", key, err)
	}
	var interrupted []int
	for rows.Next() {
		var n int
		if err := rows.Scan(&n); err != nil {
			rows.Close()
			return nil, nil, fmt.Errorf("close interrupted attempts of %s: %w", key, err)
		}
		interrupted = append(interrupted, n)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("close interrupted attempts of %s: %w", key, err)
	}
	var attempt int
	if actor != "" {
		trigger = actor
	}
	if err := j.db.queryRowTx(ctx, tx, openAttemptSQL, key, worker, ts(now), trigger).Scan(&attempt); err != nil {
		return nil, nil, fmt.Errorf("record attempt of %s: %w", key, err)
	}
	if len(interrupted) > 0 {
		j.db.log.WarnContext(ctx, "journal: closed attempts left open by a stopped worker as interrupted",
			"key", key, "interrupted", interrupted, "attempt", attempt, "worker", worker)
	}
	op.Attempts = attempt
	op.AttemptStartedAt = now
	return &claim{db: j.db, op: op, attempt: attempt}, nil, nil
}

// claim is one claimed operation: it holds the operation's key lock, and nothing in
// the database, until Finish or Release.
type claim struct {
	db      *DB
	op      journal.Operation
	attempt int

	mu     sync.Mutex
	closed bool
}

var _ journal.Claim = (*claim)(nil)

func (c *claim) Operation() journal.Operation { return c.op }
func (c *claim) Attempt() int                 { return c.attempt }

// Opened answers at once: the attempt row was committed with the claim, in the
// write transaction that found the operation.
func (c *claim) Opened(context.Context) error { return nil }

// Finish writes the operation's new state (and f.Payload, when set, as its payload,
// with that payload's SHA-256), closes the attempt row, stores f.Attachments when
// the verdict is done (a *stock.Snapshot: its row, and its items in one INSERT …
// SELECT FROM json_each; created_at is now; attachments on any other verdict are
// not written) and enqueues f.Messages in one write transaction, so a verdict, its
// snapshot and its events commit together; listeners are notified after a commit
// with messages. A snapshot whose key is not the operation's, a second snapshot, or
// an attachment of a type this store does not know is refused before anything is
// written (f is invalid). On an error the
// transaction is rolled back — no event is left behind — and the attempt stays open,
// to be marked interrupted by the next claim. The key is released afterwards either
// way, except when f itself is invalid: then nothing happened and the claim stays.
func (c *claim) Finish(ctx context.Context, f journal.Finish) error {
	key := c.op.Key
	if err := f.Check(); err != nil {
		return fmt.Errorf("sqlite: finish %s: %w", key, err)
	}
	outcome := f.Outcome()
	var exchanges *string
	if len(f.Exchanges) > 0 {
		s := string(f.Exchanges)
		exchanges = &s
	}
	var payload, payloadSHA256 *string
	if len(f.Payload) > 0 {
		p, sum := string(f.Payload), order.SHA256Hex(f.Payload)
		payload, payloadSHA256 = &p, &sum
	}
	var (
		result                                 *string
		resultNumber, resultRef, payloadSearch string
	)
	if payload != nil {
		payloadSearch = searchPhone(*payload)
	}
	newPayload := string(c.op.Payload)
	if payload != nil {
		newPayload = *payload
	}
	dv := derivedOf(c.op.Key, c.op.Source, c.op.ExternalID, newPayload, f.StoredResult())
	if r := f.StoredResult(); r != nil {
		resultNumber, resultRef = resultSearch(r)
		b, err := json.Marshal(r)
		if err != nil {
			return fmt.Errorf("sqlite: finish %s: result: %w", key, err)
		}
		s := string(b)
		result = &s
	}
	if len(f.Messages) > 0 {
		// Invalid messages are refused before the claim is spent, as the PostgreSQL
		// store refuses them, by the outbox's own validation; enqueueTx checks them
		// again in the transaction.
		if _, err := outboxRows(c.db.nowUTC(), f.Messages); err != nil {
			return fmt.Errorf("sqlite: finish %s: outbox: %w", key, err)
		}
	}
	attachments, aerr := prepareAttachments(key, f)
	if aerr != nil {
		return fmt.Errorf("sqlite: finish %s: %w", key, aerr)
	}
	var warnings *string
	if f.Warnings != nil {
		b, err := journal.EncodeWarnings(f.Warnings)
		if err != nil {
			return fmt.Errorf("sqlite: finish %s: warnings: %w", key, err)
		}
		if b != nil {
			w := string(b)
			warnings = &w
		}
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return fmt.Errorf("sqlite: finish %s: %w", key, ErrClaimClosed)
	}
	c.closed = true
	defer c.db.keys.Unlock(key)

	err := c.db.write(ctx, func(tx *sql.Tx) error {
		now := c.db.nowUTC()
		status := f.Status
		// A wake recorded while this claim held the key (a webhook that did not
		// wait) is applied here: unless the verdict is done, the operation is due now.
		res, err := c.db.execTx(ctx, tx, `DELETE FROM operation_wakes WHERE operation_key = ?`, key)
		if err != nil {
			return err
		}
		woken, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if woken > 0 && status != journal.StatusDone {
			status = journal.StatusPending
		}
		var next *int64
		if status == journal.StatusPending {
			t := now
			if !f.NextAttemptAt.IsZero() && woken == 0 {
				t = f.NextAttemptAt
			}
			us := ts(t)
			next = &us
		}
		res, err = c.db.execTx(ctx, tx, finishOperationSQL, key, string(status), result, f.LastError(), c.attempt,
			next, ts(now), payload, payloadSHA256,
			f.Class, f.Class == journal.ClassUnknown, tsOrNil(f.SettleUntil), tsOrNil(f.VerifyAt),
			tsOrNil(f.FirstAttemptAt), f.Warnings != nil, warnings, payloadSearch, resultNumber, resultRef,
			tsOrNil(f.LateVerifyAt), dv.orderAt, dv.total, dv.currency, dv.search)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			return fmt.Errorf("the operation row was not updated (%d rows, %v)", n, err)
		}
		res, err = c.db.execTx(ctx, tx, finishAttemptSQL, key, c.attempt, ts(now), string(outcome), f.Error, f.Ref, exchanges, f.Class)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			// Closed meanwhile: another process (a CLI beside the service) claimed it.
			return fmt.Errorf("the attempt row is no longer open (%d rows, %v)", n, err)
		}
		for _, a := range attachments {
			if err := a.write(ctx, tx, now); err != nil {
				return err
			}
		}
		if len(f.Messages) > 0 {
			if err := c.db.enqueueTx(ctx, tx, f.Messages); err != nil {
				return fmt.Errorf("outbox: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("sqlite: finish %s attempt %d: %w", key, c.attempt, err)
	}
	if len(f.Messages) > 0 {
		c.db.Notify()
	}
	return nil
}

// attachmentWrite is an attachment of a verdict (journal.Finish.Attachments),
// checked and ready for the claim's write transaction.
type attachmentWrite interface {
	write(ctx context.Context, tx *sql.Tx, now time.Time) error
}

// prepareAttachments checks a verdict's attachments by stock.SnapshotToStore's rule
// and, when it is done, prepares the snapshot for the claim's write transaction.
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

// Release gives the claim up without a verdict: it lets the key go; the attempt row
// stays open, and the next claim marks it interrupted. Safe after Finish and twice.
func (c *claim) Release(context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	c.db.keys.Unlock(c.op.Key)
	return nil
}

// tsOrNil is t as stored, or nil (SQL NULL) for the zero time.
func tsOrNil(t time.Time) *int64 {
	if t.IsZero() {
		return nil
	}
	us := ts(t)
	return &us
}
