package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ordersync/ordersync/internal/journal"
)

// ErrLockClosed is returned by Fail on a lock already failed or released.
var ErrLockClosed = errors.New("postgres: the lock is already failed or released")

// lockFailSQL fails the locked operation. lockInterruptSQL closes the attempts a
// stopped worker left open: while the row lock is held no claim is in flight, and a
// failed operation is not claimed again, so no later claim would close them.
const (
	lockFailSQL      = `UPDATE operations SET status = 'failed', last_error = $2, updated_at = $3 WHERE key = $1`
	lockInterruptSQL = `UPDATE operation_attempts SET finished_at = $2, outcome = 'interrupted', error = $3
		WHERE operation_key = $1 AND finished_at IS NULL`
)

// Lock takes the row lock of one operation (SELECT … FOR NO KEY UPDATE, as a claim
// does) in a transaction of its own on a pooled connection, whatever the operation's
// status, and returns it as read under the lock. A cancel uses it to hold its create
// still while it asks 1C, and to fail the create when 1C holds nothing.
//
// It waits at most ClaimLockTimeout in all (journal.ErrBusy past that): first for a
// claim slot, which a lock takes like a claim so that attempt rows always find a
// connection, then for the row. A lock is taken while the caller holds a claim, so the
// wait for a slot must end: when claims and locks hold every slot, ErrBusy hands the
// caller back its claim to release. journal.ErrNotFound for an unknown key.
//
// The transaction runs with the claims' idle_in_transaction_session_timeout
// (ClaimIdleTimeout): a lock left idle longer loses its session and so its lock.
// Callers must `defer locked.Release(ctx)` (a no-op after Fail). One round trip (BEGIN,
// settings and the SELECT pipelined).
func (j *Journal) Lock(ctx context.Context, key string) (_ journal.Locked, err error) {
	db := j.db
	if err := journal.CheckKey(key); err != nil {
		return nil, fmt.Errorf("postgres: lock: %w", err)
	}
	wait := db.cfg.ClaimLockTimeout
	deadline := time.Now().Add(wait)
	timer := time.NewTimer(wait)
	defer timer.Stop()
	db.slotWaiters.Add(1)
	defer db.slotWaiters.Add(-1)
	select {
	case db.claimSlots <- struct{}{}:
	case <-timer.C:
		return nil, fmt.Errorf("postgres: lock %s: %w (claims and locks held all %d slots for %s; the pool keeps one connection for attempt rows)",
			key, journal.ErrBusy, cap(db.claimSlots), wait)
	case <-ctx.Done():
		return nil, fmt.Errorf("postgres: lock %s: waiting for a free claim slot: %w", key, ctx.Err())
	}
	conn, err := db.pool.Acquire(ctx)
	if err != nil {
		<-db.claimSlots
		return nil, fmt.Errorf("postgres: lock %s: %w", key, err)
	}
	l := &locked{db: db, conn: conn}
	defer func() {
		if err != nil {
			_ = l.end(ctx)
		}
	}()

	b := &pgx.Batch{}
	b.BeginTx(pgx.TxOptions{})
	b.Queue(`SELECT set_config('idle_in_transaction_session_timeout', $1, true)`, millis(db.cfg.ClaimIdleTimeout))
	b.Queue(`SELECT set_config('lock_timeout', $1, true)`, millis(max(time.Until(deadline), time.Millisecond)))
	b.Queue(lockKeySQL, key)
	br := conn.SendBatch(ctx, b)
	op, err := func() (journal.Operation, error) {
		for range b.Len() - 1 { // BEGIN and the settings
			if _, err := br.Exec(); err != nil {
				return journal.Operation{}, err
			}
		}
		var openStarted *time.Time
		op, err := scanOperation(br.QueryRow(), &openStarted)
		op.SettleUntil = journal.UnsettledUntil(op.SettleUntil, utcPtr(openStarted), db.cfg.TakeoverAfter)
		return op, err
	}()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("postgres: lock %s: %w", key, interpretError(err))
	}
	l.op = op
	return l, nil
}

// locked is one operation held by Lock: a pooled connection in an open transaction
// that holds the operation's row lock, and a claim slot.
type locked struct {
	db   *DB
	conn *pgxpool.Conn
	op   journal.Operation

	mu     sync.Mutex
	closed bool
}

var _ journal.Locked = (*locked)(nil)

// Operation is the operation as read under the lock.
func (l *locked) Operation() journal.Operation { return l.op }

// Fail marks the locked operation failed with reason as its last error, closes the
// attempts a stopped worker left open as interrupted, and commits, which lets the lock
// go: one round trip. Only a pending operation is failed: a done one holds its effect
// in 1C, a failed one keeps its reason; both answer *journal.NotPendingError
// (journal.ErrNotPending) and stay locked until Release. Afterwards the lock is
// closed whatever happened.
func (l *locked) Fail(ctx context.Context, reason string) error {
	key := l.op.Key
	if err := journal.CheckReason(reason); err != nil {
		return fmt.Errorf("postgres: fail %s: %w", key, err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return fmt.Errorf("postgres: fail %s: %w", key, ErrLockClosed)
	}
	if err := journal.CheckFail(l.op); err != nil {
		return fmt.Errorf("postgres: fail %s: %w", key, err)
	}
	l.closed = true

	now := l.db.nowUTC()
	b := &pgx.Batch{}
	b.Queue(lockFailSQL, key, reason, now)
	b.Queue(lockInterruptSQL, key, now, InterruptedError)
	b.Queue("COMMIT")
	br := l.conn.SendBatch(ctx, b)
	var failed, interrupted, commit pgconn.CommandTag
	err := func() (err error) {
		if failed, err = br.Exec(); err != nil {
			return err
		}
		if interrupted, err = br.Exec(); err != nil {
			return err
		}
		commit, err = br.Exec()
		return err
	}()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err == nil && (failed.RowsAffected() != 1 || commit.String() != "COMMIT") {
		err = fmt.Errorf("unexpected result: operation rows %d, %q", failed.RowsAffected(), commit.String())
	}
	lost := l.conn.Conn().IsClosed()
	if eerr := l.end(ctx); err == nil && eerr != nil {
		err = eerr
	}
	if err != nil {
		return fmt.Errorf("postgres: fail %s: %w", key, l.explain(err, lost))
	}
	if n := interrupted.RowsAffected(); n > 0 {
		l.db.log.WarnContext(ctx, "journal: closed attempts left open by a stopped worker as interrupted",
			"key", key, "interrupted", n)
	}
	return nil
}

// Release rolls back (even when ctx is cancelled) and lets the lock go. Safe after
// Fail and twice.
func (l *locked) Release(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	if err := l.end(ctx); err != nil {
		return fmt.Errorf("postgres: release the lock of %s: %w", l.op.Key, err)
	}
	return nil
}

// end rolls back what is left of the transaction and gives the connection and the
// claim slot back.
func (l *locked) end(ctx context.Context) error {
	defer func() { <-l.db.claimSlots }()
	return endTx(ctx, l.conn)
}

// explain adds advice when the server ended the lock's session, which it does once
// the lock has sat idle longer than ClaimIdleTimeout (and the row lock is gone).
func (l *locked) explain(err error, lost bool) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == codeIdleInTransactionTimed {
		return fmt.Errorf("the server ended the lock's transaction after %s idle "+
			"(idle_in_transaction_session_timeout: set the claim idle timeout above onec.timeout): %w",
			l.db.cfg.ClaimIdleTimeout, err)
	}
	if lost {
		return fmt.Errorf("lost the lock's connection before the commit was confirmed (the operation may still be pending): %w", err)
	}
	return interpretError(err)
}
