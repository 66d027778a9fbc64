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
const claimReadSQL = `SELECT ` + opColumns + `,
	substr(operations.key, -7) = ':create' AND EXISTS (
		SELECT 1 FROM operations c WHERE c.key = substr(operations.key, 1, length(operations.key) - 7) || ':cancel')
FROM operations WHERE key = ?`

// interruptSQL closes the attempts a stopped worker left open (or a released claim):
// while the key is held no other claim of it is in flight.
const interruptSQL = `UPDATE operation_attempts SET finished_at = ?2, outcome = 'interrupted', error = ?3
WHERE operation_key = ?1 AND finished_at IS NULL
RETURNING attempt`

// openAttemptSQL opens the next attempt, numbered max+1: safe because the key lock
// admits one claimer and the write transaction one writer.
const openAttemptSQL = `INSERT INTO operation_attempts (operation_key, attempt, worker, started_at)
SELECT ?1, coalesce(max(attempt), 0) + 1, ?2, ?3 FROM operation_attempts WHERE operation_key = ?1
RETURNING attempt`

// finishOperationSQL writes the verdict; ?8 and ?9, when not null, replace the payload
// and its SHA-256 (Finish.Payload: the order fetched for a fetch payload).
const finishOperationSQL = `
UPDATE operations
SET status = ?2, result = ?3, last_error = ?4, attempts = ?5,
	next_attempt_at = coalesce(?6, next_attempt_at), updated_at = ?7,
	payload = coalesce(?8, payload), payload_sha256 = coalesce(?9, payload_sha256)
WHERE key = ?1`

const finishAttemptSQL = `
UPDATE operation_attempts
SET finished_at = ?3, outcome = ?4, error = ?5, onec_ref = ?6, exchanges = ?7
WHERE operation_key = ?1 AND attempt = ?2 AND finished_at IS NULL`

// ClaimDue claims the pending operation that is due first (next_attempt_at, then key)
// whose key no claim or lock of this process holds — the SKIP LOCKED stand-in — and
// commits its attempt row before returning, in one short write transaction; the
// claim then holds the key and no database lock. journal.ErrNothingDue when no
// operation is due. Callers must `defer claim.Release(ctx)` (a no-op after Finish).
func (j *Journal) ClaimDue(ctx context.Context, worker string) (journal.Claim, error) {
	db := j.db
	var (
		key string // locked, once a due one was found
		c   *claim
	)
	err := db.write(ctx, func(tx *sql.Tx) error {
		now := db.nowUTC()
		var err error
		if key, err = lockDue(ctx, tx, db.keys, now); err != nil {
			return err
		}
		c, err = j.openAttempt(ctx, tx, key, worker, now)
		return err
	})
	if err != nil {
		if key != "" {
			db.keys.Unlock(key)
		}
		if errors.Is(err, journal.ErrNothingDue) {
			return nil, journal.ErrNothingDue
		}
		return nil, fmt.Errorf("sqlite: claim due: %w", err)
	}
	return c, nil
}

// lockDue returns the first due key it could lock, locked; journal.ErrNothingDue
// when every due key is held (or none is due).
func lockDue(ctx context.Context, tx *sql.Tx, keys *KeyLocks, now time.Time) (string, error) {
	rows, err := tx.QueryContext(ctx, dueSQL, ts(now))
	if err != nil {
		return "", err
	}
	defer rows.Close()
	for rows.Next() {
		var key string
		if err := rows.Scan(&key); err != nil {
			return "", err
		}
		if keys.TryLock(key) {
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
// no attempt is written. Callers must `defer claim.Release(ctx)`.
func (j *Journal) ClaimKey(ctx context.Context, key, worker string) (journal.Claim, error) {
	db := j.db
	if key == "" {
		return nil, errors.New("sqlite: claim: key is required")
	}
	if err := db.lockOperation(ctx, key); err != nil {
		return nil, fmt.Errorf("sqlite: claim %s: %w", key, err)
	}
	var c *claim
	err := db.write(ctx, func(tx *sql.Tx) error {
		var err error
		c, err = j.openAttempt(ctx, tx, key, worker, db.nowUTC())
		return err
	})
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
// tx. The claim it returns holds the key.
func (j *Journal) openAttempt(ctx context.Context, tx *sql.Tx, key, worker string, now time.Time) (*claim, error) {
	var cancelRequested bool
	op, err := scanOperation(tx.QueryRowContext(ctx, claimReadSQL, key), &cancelRequested)
	if err != nil {
		return nil, journalError(err)
	}
	if op.Status != journal.StatusPending {
		return nil, &journal.NotPendingError{Operation: op}
	}
	op.CancelRequested = cancelRequested
	rows, err := tx.QueryContext(ctx, interruptSQL, key, ts(now), InterruptedError)
	if err != nil {
		return nil, fmt.Errorf("close interrupted attempts of %s: %w", key, err)
	}
	var interrupted []int
	for rows.Next() {
		var n int
		if err := rows.Scan(&n); err != nil {
			rows.Close()
			return nil, fmt.Errorf("close interrupted attempts of %s: %w", key, err)
		}
		interrupted = append(interrupted, n)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("close interrupted attempts of %s: %w", key, err)
	}
	var attempt int
	if err := tx.QueryRowContext(ctx, openAttemptSQL, key, worker, ts(now)).Scan(&attempt); err != nil {
		return nil, fmt.Errorf("record attempt of %s: %w", key, err)
	}
	if len(interrupted) > 0 {
		j.db.log.WarnContext(ctx, "journal: closed attempts left open by a stopped worker as interrupted",
			"key", key, "interrupted", interrupted, "attempt", attempt, "worker", worker)
	}
	op.Attempts = attempt
	return &claim{db: j.db, op: op, attempt: attempt}, nil
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

// Finish writes the operation's new state (and f.Payload, when set, as its payload,
// with that payload's SHA-256), closes the attempt row and enqueues f.Messages in one
// write transaction, so a verdict and its events commit together (ARCHITECTURE.md
// rule 6); listeners are notified after a commit with messages. On an error the
// transaction is rolled back — no event is left behind — and the attempt stays open,
// to be marked interrupted by the next claim. The key is released afterwards either
// way, except when f itself is invalid: then nothing happened and the claim stays.
func (c *claim) Finish(ctx context.Context, f journal.Finish) error {
	key := c.op.Key
	var outcome journal.Outcome
	switch f.Status {
	case journal.StatusDone:
		outcome = journal.OutcomeDone
	case journal.StatusPending:
		outcome = journal.OutcomeRetry
	case journal.StatusFailed:
		outcome = journal.OutcomeFailed
	default:
		return fmt.Errorf("sqlite: finish %s: unknown status %q (want done, pending or failed)", key, f.Status)
	}
	var exchanges *string
	if len(f.Exchanges) > 0 {
		if !json.Valid(f.Exchanges) {
			return fmt.Errorf("sqlite: finish %s: exchanges are not valid JSON", key)
		}
		s := string(f.Exchanges)
		exchanges = &s
	}
	var payload, payloadSHA256 *string
	if len(f.Payload) > 0 {
		if !json.Valid(f.Payload) {
			return fmt.Errorf("sqlite: finish %s: payload is not valid JSON", key)
		}
		p, sum := string(f.Payload), order.SHA256Hex(f.Payload)
		payload, payloadSHA256 = &p, &sum
	}
	var result *string
	if f.Status == journal.StatusDone && f.Result != nil {
		b, err := json.Marshal(f.Result)
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
	lastError := f.Error
	if f.Status == journal.StatusDone {
		lastError = ""
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
		var next *int64
		if f.Status == journal.StatusPending {
			t := now
			if !f.NextAttemptAt.IsZero() {
				t = f.NextAttemptAt
			}
			us := ts(t)
			next = &us
		}
		res, err := tx.ExecContext(ctx, finishOperationSQL, key, string(f.Status), result, lastError, c.attempt,
			next, ts(now), payload, payloadSHA256)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			return fmt.Errorf("the operation row was not updated (%d rows, %v)", n, err)
		}
		res, err = tx.ExecContext(ctx, finishAttemptSQL, key, c.attempt, ts(now), string(outcome), f.Error, f.Ref, exchanges)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			// Closed meanwhile: another process (a CLI beside the service) claimed it.
			return fmt.Errorf("the attempt row is no longer open (%d rows, %v)", n, err)
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
