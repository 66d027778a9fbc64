package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/outbox"
)

// WakeWaiting makes every pending operation that waits on a transient, configuration
// or authentication failure due now, and returns how many. One write transaction.
func (j *Journal) WakeWaiting(ctx context.Context) (int, error) {
	var n int64
	err := j.db.write(ctx, func(tx *sql.Tx) error {
		now := ts(j.db.nowUTC())
		res, err := tx.ExecContext(ctx, `UPDATE operations SET next_attempt_at = ?1
			WHERE status = 'pending' AND retry_class IN ('transient', 'configuration', 'auth') AND next_attempt_at > ?1`, now)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("sqlite: wake waiting operations: %w", err)
	}
	return int(n), nil
}

// ApplyWakes applies the wakes recorded while claims held their keys and left over
// by their Finish; keys a claim of this process still holds keep their wake.
func (j *Journal) ApplyWakes(ctx context.Context) (int, error) {
	var keys []string
	rows, err := j.db.sql.QueryContext(ctx, `SELECT operation_key FROM operation_wakes ORDER BY operation_key`)
	if err != nil {
		return 0, fmt.Errorf("sqlite: apply wakes: %w", err)
	}
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			rows.Close()
			return 0, fmt.Errorf("sqlite: apply wakes: %w", err)
		}
		keys = append(keys, k)
	}
	rows.Close()
	if err := rows.Err(); err != nil || len(keys) == 0 {
		return 0, err
	}
	var held []string
	for _, k := range keys {
		if j.db.keys.TryLock(k) {
			held = append(held, k)
		}
	}
	defer func() {
		for _, k := range held {
			j.db.keys.Unlock(k)
		}
	}()
	var n int64
	err = j.db.write(ctx, func(tx *sql.Tx) error {
		n = 0
		now := ts(j.db.nowUTC())
		for _, k := range held {
			res, err := tx.ExecContext(ctx, `UPDATE operations SET status = 'pending', next_attempt_at = ?2, updated_at = ?2
				WHERE key = ?1 AND status <> 'done'`, k, now)
			if err != nil {
				return err
			}
			m, err := res.RowsAffected()
			if err != nil {
				return err
			}
			n += m
			if _, err := tx.ExecContext(ctx, `DELETE FROM operation_wakes WHERE operation_key = ?`, k); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("sqlite: apply wakes: %w", err)
	}
	return int(n), nil
}

// ClaimVerification leases the done operation whose verification is due first: its
// verify_at moves ahead by lease, so no other claimer verifies it while 1C is asked.
// journal.ErrNothingDue when none is. One write transaction.
func (j *Journal) ClaimVerification(ctx context.Context, lease time.Duration) (journal.Operation, error) {
	var op journal.Operation
	err := j.db.write(ctx, func(tx *sql.Tx) error {
		now := j.db.nowUTC()
		var err error
		op, err = scanOperation(tx.QueryRowContext(ctx, `UPDATE operations SET verify_at = ?2
			WHERE key = (SELECT key FROM operations
				WHERE verify_at IS NOT NULL AND verify_at <= ?1 AND status = 'done'
				ORDER BY verify_at LIMIT 1)
			RETURNING `+opColumns, ts(now), ts(now.Add(lease))))
		return err
	})
	if errors.Is(err, sql.ErrNoRows) {
		return journal.Operation{}, journal.ErrNothingDue
	}
	if err != nil {
		return journal.Operation{}, fmt.Errorf("sqlite: claim verification: %w", err)
	}
	return op, nil
}

// FinishVerification ends the verification of key (its late verification, if one is
// still to come, becomes due at its time), replaces its warnings when
// warnings is not nil (and then marks it updated), and enqueues messages, in one
// write transaction; listeners are notified after a commit with messages.
func (j *Journal) FinishVerification(ctx context.Context, key string, warnings []journal.Warning, messages []outbox.Message) error {
	var enc *string
	if warnings != nil {
		b, err := journal.EncodeWarnings(warnings)
		if err != nil {
			return fmt.Errorf("sqlite: finish verification of %s: %w", key, err)
		}
		if b != nil {
			s := string(b)
			enc = &s
		}
	}
	if len(messages) > 0 {
		if _, err := outboxRows(j.db.nowUTC(), messages); err != nil {
			return fmt.Errorf("sqlite: finish verification of %s: outbox: %w", key, err)
		}
	}
	err := j.db.write(ctx, func(tx *sql.Tx) error {
		now := ts(j.db.nowUTC())
		res, err := tx.ExecContext(ctx, `UPDATE operations SET verify_at = late_verify_at, late_verify_at = NULL,
				warnings = CASE WHEN ?2 THEN ?3 ELSE warnings END,
				updated_at = CASE WHEN ?2 THEN ?4 ELSE updated_at END
			WHERE key = ?1`, key, warnings != nil, enc, now)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n != 1 {
			return journal.ErrNotFound
		}
		if len(messages) > 0 {
			return j.db.enqueueTx(ctx, tx, messages)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("sqlite: finish verification of %s: %w", key, err)
	}
	if len(messages) > 0 {
		j.db.Notify()
	}
	return nil
}
