package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/outbox"
)

// wakeWaitingSQL makes due now every pending operation that waits on a failure of
// 1C's that is not the order's (operations_waiting_idx).
const wakeWaitingSQL = `UPDATE operations SET next_attempt_at = $1
WHERE status = 'pending' AND retry_class IN ('transient', 'configuration', 'auth') AND next_attempt_at > $1`

// WakeWaiting makes every pending operation that waits on a transient, configuration
// or authentication failure due now, and returns how many. One round trip.
func (j *Journal) WakeWaiting(ctx context.Context) (int, error) {
	tag, err := j.db.pool.Exec(ctx, wakeWaitingSQL, j.db.nowUTC())
	if err != nil {
		return 0, fmt.Errorf("postgres: wake waiting operations: %w", interpretError(err))
	}
	return int(tag.RowsAffected()), nil
}

// applyWakesSQL applies the wakes recorded while a claim held their rows and left
// over by its Finish (they committed just after it): rows still claimed are skipped
// and keep their wake.
//
// The operations are found through key arrays, not joins: with statistics, a join of
// the few wakes against operations was planned as a hash over a sequential scan of
// the whole journal (twice: the lock and the update). An array is a primary-key
// probe per wake under every plan, custom or generic.
const applyWakesSQL = `
WITH locked AS MATERIALIZED (
	SELECT o.key, o.status FROM operations o
	WHERE o.key = ANY (ARRAY(SELECT operation_key FROM operation_wakes))
	FOR NO KEY UPDATE OF o SKIP LOCKED
), woken AS (
	UPDATE operations o SET status = 'pending', next_attempt_at = $1, updated_at = $1
	WHERE o.key = ANY (ARRAY(SELECT key FROM locked WHERE status <> 'done'))
	RETURNING 1
), applied AS (
	DELETE FROM operation_wakes w WHERE w.operation_key = ANY (ARRAY(SELECT key FROM locked))
)
SELECT count(*) FROM woken`

// ApplyWakes applies the wakes left over by claims (see applyWakesSQL) and returns
// how many operations it made due. One round trip; nothing to do costs one index
// probe of an empty table.
func (j *Journal) ApplyWakes(ctx context.Context) (int, error) {
	var n int
	if err := j.db.pool.QueryRow(ctx, applyWakesSQL, j.db.nowUTC()).Scan(&n); err != nil {
		return 0, fmt.Errorf("postgres: apply wakes: %w", interpretError(err))
	}
	return n, nil
}

// claimVerificationSQL leases the done operation whose verification is due first:
// its verify_at moves ahead by the lease ($3), so that no other replica verifies it
// while this one asks 1C, and no lock is held meanwhile. Due-ness and the lease are
// reckoned on the database's clock (now()), as the outbox's leases are; $1 and $2
// replace it only when the store runs on an injected clock (tests).
const claimVerificationSQL = `UPDATE operations SET verify_at = coalesce($2, now() + $3::interval)
WHERE key = (
	SELECT key FROM operations
	WHERE verify_at IS NOT NULL AND verify_at <= coalesce($1, now()) AND status = 'done'
	ORDER BY verify_at
	LIMIT 1
	FOR NO KEY UPDATE SKIP LOCKED)
RETURNING ` + opColumns

// ClaimVerification leases the done operation whose verification is due first.
// journal.ErrNothingDue when none is. One round trip.
func (j *Journal) ClaimVerification(ctx context.Context, lease time.Duration) (journal.Operation, error) {
	var clock, until *time.Time // nil: the database's clock
	if j.db.injectedClock {
		now := j.db.nowUTC()
		u := now.Add(lease)
		clock, until = &now, &u
	}
	op, err := scanOperation(j.db.pool.QueryRow(ctx, claimVerificationSQL, clock, until, lease))
	if errors.Is(err, pgx.ErrNoRows) {
		return journal.Operation{}, journal.ErrNothingDue
	}
	if err != nil {
		return journal.Operation{}, fmt.Errorf("postgres: claim verification: %w", interpretError(err))
	}
	return op, nil
}

// FinishVerification ends the verification of key (its late verification, if one is
// still to come, becomes due at its time), replaces its warnings when
// warnings is not nil (and then marks it updated), and enqueues messages, in one
// transaction: one round trip.
func (j *Journal) FinishVerification(ctx context.Context, key string, warnings []journal.Warning, messages []outbox.Message) error {
	enc, err := journal.EncodeWarnings(warnings)
	if err != nil {
		return fmt.Errorf("postgres: finish verification of %s: %w", key, err)
	}
	now := j.db.nowUTC()
	var rows []enqueueRow
	if len(messages) > 0 {
		if rows, err = prepareMessages(now, messages); err != nil {
			return fmt.Errorf("postgres: finish verification of %s: outbox: %w", key, err)
		}
	}
	conn, err := j.db.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("postgres: finish verification of %s: %w", key, err)
	}
	defer endTx(ctx, conn)
	b := &pgx.Batch{}
	b.BeginTx(pgx.TxOptions{})
	b.Queue(`UPDATE operations SET verify_at = late_verify_at, late_verify_at = NULL,
			warnings = CASE WHEN $2 THEN $3 ELSE warnings END,
			updated_at = CASE WHEN $2 THEN $4 ELSE updated_at END
		WHERE key = $1`, key, warnings != nil, enc, now)
	if len(rows) > 0 {
		queueMessages(b, rows)
	}
	b.Queue("COMMIT")
	br := conn.SendBatch(ctx, b)
	err = func() error {
		if _, err := br.Exec(); err != nil { // BEGIN
			return err
		}
		tag, err := br.Exec()
		if err != nil {
			return err
		}
		if tag.RowsAffected() != 1 {
			return journal.ErrNotFound
		}
		if len(rows) > 0 {
			if err := readEnqueued(br, len(rows)); err != nil {
				return fmt.Errorf("outbox: %w", err)
			}
		}
		_, err = br.Exec() // COMMIT
		return err
	}()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("postgres: finish verification of %s: %w", key, interpretError(err))
	}
	return nil
}
