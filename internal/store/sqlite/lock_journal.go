package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"

	"github.com/ordersync/ordersync/internal/journal"
)

// ErrLockClosed is returned by Fail on a lock already failed or released.
var ErrLockClosed = errors.New("sqlite: the lock is already failed or released")

// Lock takes the key lock of one operation (as a claim does), whatever its status,
// waiting at most ClaimLockTimeout for a claim or lock of this process that holds it
// (journal.ErrBusy past that), and returns the operation as read under it. A cancel
// uses it to hold its create still while it asks 1C, and to fail the create when 1C
// holds nothing. It holds no database lock. journal.ErrNotFound for an unknown key.
// Callers must `defer locked.Release(ctx)` (a no-op after Fail).
func (j *Journal) Lock(ctx context.Context, key string) (journal.Locked, error) {
	if err := journal.CheckKey(key); err != nil {
		return nil, fmt.Errorf("sqlite: lock: %w", err)
	}
	if err := j.db.lockOperation(ctx, key); err != nil {
		return nil, fmt.Errorf("sqlite: lock %s: %w", key, err)
	}
	var openStarted sql.NullInt64
	op, err := scanOperation(j.db.sql.QueryRowContext(ctx, `SELECT `+opColumns+`,
		(SELECT max(started_at) FROM operation_attempts o WHERE o.operation_key = operations.key AND o.finished_at IS NULL)
		FROM operations WHERE key = ?`, key), &openStarted)
	if err != nil {
		j.db.keys.Unlock(key)
		return nil, fmt.Errorf("sqlite: lock %s: %w", key, journalError(err))
	}
	op.SettleUntil = journal.UnsettledUntil(op.SettleUntil, nullTS(openStarted), j.db.cfg.TakeoverAfter)
	return &locked{db: j.db, op: op}, nil
}

// locked is one operation held by Lock: its key lock.
type locked struct {
	db *DB
	op journal.Operation

	mu     sync.Mutex
	closed bool
}

var _ journal.Locked = (*locked)(nil)

// Operation is the operation as read under the lock.
func (l *locked) Operation() journal.Operation { return l.op }

// Fail marks the locked operation failed with reason as its last error, closes the
// attempts a stopped worker left open as interrupted (a failed operation is never
// claimed again to do it), and commits, in one write transaction, then lets the key
// go. Only a pending operation is failed: a done one holds its effect in 1C, a failed
// one keeps its reason; both answer *journal.NotPendingError (journal.ErrNotPending)
// and stay locked until Release. Afterwards the lock is closed whatever happened.
func (l *locked) Fail(ctx context.Context, reason string) error {
	key := l.op.Key
	if err := journal.CheckReason(reason); err != nil {
		return fmt.Errorf("sqlite: fail %s: %w", key, err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return fmt.Errorf("sqlite: fail %s: %w", key, ErrLockClosed)
	}
	if err := journal.CheckFail(l.op); err != nil {
		return fmt.Errorf("sqlite: fail %s: %w", key, err)
	}
	l.closed = true
	defer l.db.keys.Unlock(key)

	var interrupted int64
	err := l.db.write(ctx, func(tx *sql.Tx) error {
		now := ts(l.db.nowUTC())
		res, err := tx.ExecContext(ctx, `UPDATE operations SET status = 'failed', last_error = ?2, updated_at = ?3
			WHERE key = ?1 AND status = 'pending'`, key, reason, now)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n != 1 {
			// Settled since it was read, by another process (a CLI beside the service).
			op, err := scanOperation(tx.QueryRowContext(ctx, `SELECT `+opColumns+` FROM operations WHERE key = ?`, key))
			if err != nil {
				return journalError(err)
			}
			return &journal.NotPendingError{Operation: op}
		}
		res, err = tx.ExecContext(ctx, `UPDATE operation_attempts SET finished_at = ?2, outcome = 'interrupted', error = ?3
			WHERE operation_key = ?1 AND finished_at IS NULL`, key, now, InterruptedError)
		if err != nil {
			return err
		}
		interrupted, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlite: fail %s: %w", key, err)
	}
	if interrupted > 0 {
		l.db.log.WarnContext(ctx, "journal: closed attempts left open by a stopped worker as interrupted",
			"key", key, "interrupted", interrupted)
	}
	return nil
}

// Release lets the key go. Safe after Fail and twice.
func (l *locked) Release(context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	l.db.keys.Unlock(l.op.Key)
	return nil
}
