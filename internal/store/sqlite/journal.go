package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/order"
)

// Journal is the SQLite journal.Store. It keeps the semantics of the PostgreSQL
// journal (internal/store/postgres): the same registration, attempt numbering,
// interrupted attempts, revision and locking rules, on one file.
//
// Row locks are the in-process key locks (DB.Keys): a claim or a Lock holds its
// operation's key, and no database lock, until it ends. Every write to an existing
// operation row (Finish, Requeue, Revise, Fail) is made under its key; Register only
// inserts, so it needs none. Writes are short BEGIN IMMEDIATE transactions.
type Journal struct {
	db *DB
}

var _ journal.Store = (*Journal)(nil)

// Journal is the journal store.
func (db *DB) Journal() journal.Store { return &Journal{db: db} }

// DefaultListLimit is how many operations List returns when the filter sets no limit.
const DefaultListLimit = 100

const opColumns = `key, kind, source, external_id, status, payload, payload_sha256, result,
	attempts, last_error, next_attempt_at, created_at, updated_at,
	settle_until, first_attempt_at, unknown_attempts, retry_class, verify_at, warnings, late_verify_at,
	order_created_at, onec_seen`

// rowScanner is *sql.Row or *sql.Rows.
type rowScanner interface{ Scan(dest ...any) error }

// scanOperation reads opColumns, then any extra columns into extra.
func scanOperation(row rowScanner, extra ...any) (journal.Operation, error) {
	var (
		op                      journal.Operation
		status, payload         string
		result, warnings        sql.NullString
		next, created, updated  int64
		settle, first, verifyAt sql.NullInt64
		lateVerify, orderAt     sql.NullInt64
		onecSeen                sql.NullString
	)
	dest := append([]any{&op.Key, &op.Kind, &op.Source, &op.ExternalID, &status, &payload, &op.PayloadSHA256, &result,
		&op.Attempts, &op.LastError, &next, &created, &updated,
		&settle, &first, &op.UnknownAttempts, &op.RetryClass, &verifyAt, &warnings, &lateVerify,
		&orderAt, &onecSeen}, extra...)
	if err := row.Scan(dest...); err != nil {
		return journal.Operation{}, err
	}
	op.SettleUntil, op.FirstAttemptAt, op.VerifyAt = nullTS(settle), nullTS(first), nullTS(verifyAt)
	op.LateVerifyAt, op.OrderCreatedAt = nullTS(lateVerify), nullTS(orderAt)
	var err error
	if op.OneCSeen, err = decodeOneCSeen(op.Key, onecSeen); err != nil {
		return journal.Operation{}, err
	}
	if op.Warnings, err = journal.DecodeWarnings([]byte(warnings.String)); err != nil {
		return journal.Operation{}, fmt.Errorf("operation %s: %w", op.Key, err)
	}
	op.Status = journal.Status(status)
	op.Payload = json.RawMessage(payload)
	if result.Valid {
		var r journal.Result
		if err := json.Unmarshal([]byte(result.String), &r); err != nil {
			return journal.Operation{}, fmt.Errorf("operation %s: result: %w", op.Key, err)
		}
		op.Result = &r
	}
	op.NextAttemptAt, op.CreatedAt, op.UpdatedAt = fromTS(next), fromTS(created), fromTS(updated)
	return op, nil
}

// journalError maps the driver's answers to the journal's sentinels.
func journalError(err error) error {
	if errors.Is(err, sql.ErrNoRows) {
		return journal.ErrNotFound
	}
	return err
}

// registerSQL inserts a new operation, pending (?5 = 'pending', due now) or failed
// from the start (?5 = 'failed', ?8 its reason), unless the key exists. ?10 is the
// actor that registers it (the trigger of its first attempt), ?11 its search_phone,
// ?12 to ?15 what journal.Derive reads off it (derivedOf).
const registerSQL = `
INSERT INTO operations (key, kind, source, external_id, status, payload, payload_sha256,
	attempts, last_error, next_attempt_at, created_at, updated_at, triggered_by, search_phone,
	order_created_at, order_total, currency, search_text)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 0, ?8, ?9, ?9, ?9, ?10, ?11, ?12, ?13, ?14, ?15)
ON CONFLICT (key) DO NOTHING
RETURNING ` + opColumns

// eventSQL records one entry of an operation's timeline (journal.Event).
const eventSQL = `INSERT INTO operation_events (operation_key, at, action, actor, detail) VALUES (?1, ?2, ?3, ?4, ?5)`

// addEvent records an event of key in tx.
func (db *DB) addEvent(ctx context.Context, tx *sql.Tx, key string, at time.Time, action, actor, detail string) error {
	if _, err := db.execTx(ctx, tx, eventSQL, key, ts(at), action, actor, detail); err != nil {
		return fmt.Errorf("record the %s event: %w", action, err)
	}
	return nil
}

// conflictSQL records a payload seen under a key whose saved payload is another: one
// row per distinct payload, counted.
const conflictSQL = `
INSERT INTO operation_conflicts (operation_key, at, last_at, payload_sha256, payload)
VALUES (?1, ?2, ?2, ?3, ?4)
ON CONFLICT (operation_key, payload_sha256)
DO UPDATE SET times = operation_conflicts.times + 1, last_at = excluded.last_at`

// Register inserts a new pending operation, due now. An existing key answers
// Duplicate with the saved operation when the payload's SHA-256 is the same, and
// otherwise records a conflict and answers Conflicted with the saved, untouched
// operation. One write transaction.
func (j *Journal) Register(ctx context.Context, op journal.NewOperation) (journal.Registration, error) {
	return j.register(ctx, op, journal.StatusPending, "")
}

// RegisterFailed inserts a new operation that is failed from the start, reason its
// last error, with no attempt: a marketplace order that could not be mapped. It is
// never claimed; Revise makes it pending once it maps. An existing key behaves as in
// Register and is never failed by it.
func (j *Journal) RegisterFailed(ctx context.Context, op journal.NewOperation, reason string) (journal.Registration, error) {
	return j.register(ctx, op, journal.StatusFailed, reason)
}

func (j *Journal) register(ctx context.Context, op journal.NewOperation, status journal.Status, reason string) (journal.Registration, error) {
	verb := "register"
	if status == journal.StatusFailed {
		verb = "record failed operation"
	}
	err := op.Validate()
	if status == journal.StatusFailed {
		err = op.ValidateFailed(reason)
	}
	if err != nil {
		return journal.Registration{}, fmt.Errorf("sqlite: %s %q: %w", verb, op.Key, err)
	}
	var reg journal.Registration
	err = j.db.write(ctx, func(tx *sql.Tx) error {
		var err error
		reg, err = j.db.registerTx(ctx, tx, op, status, reason, journal.ActorOf(ctx), j.db.nowUTC())
		return err
	})
	if err != nil {
		return journal.Registration{}, fmt.Errorf("sqlite: %s %s: %w", verb, op.Key, err)
	}
	if reg.Outcome == journal.Conflicted {
		j.db.log.WarnContext(ctx, "journal: registration conflicts with the saved operation",
			"key", op.Key, "saved_sha256", reg.Operation.PayloadSHA256, "payload_sha256", order.SHA256Hex(op.Payload))
	}
	return reg, nil
}

// registerTx registers op in tx (a write transaction), as Register does: INSERT … ON
// CONFLICT (key) DO NOTHING, then, for an existing key, the saved operation and, when
// its payload differs, the conflict record. op must have passed Validate. A new
// operation records its registered event, by actor (the reason of a failed one is
// the event's detail), and actor as the trigger of its first attempt.
func (db *DB) registerTx(ctx context.Context, tx *sql.Tx, op journal.NewOperation, status journal.Status, reason, actor string, now time.Time) (journal.Registration, error) {
	sum := order.SHA256Hex(op.Payload)
	dv := derivedOf(op.Key, op.Source, op.ExternalID, string(op.Payload), nil)
	saved, err := scanOperation(db.queryRowTx(ctx, tx, registerSQL,
		op.Key, op.Kind, op.Source, op.ExternalID, string(status), string(op.Payload), sum, reason, ts(now),
		actor, searchPhone(string(op.Payload)), dv.orderAt, dv.total, dv.currency, dv.search))
	if err == nil {
		if err := db.addEvent(ctx, tx, op.Key, now, journal.EventRegistered, actor, reason); err != nil {
			return journal.Registration{}, err
		}
		return journal.Registration{Outcome: journal.Registered, Operation: saved}, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return journal.Registration{}, err
	}
	saved, err = scanOperation(db.queryRowTx(ctx, tx, `SELECT `+opColumns+` FROM operations WHERE key = ?`, op.Key))
	if err != nil {
		return journal.Registration{}, fmt.Errorf("read the saved operation: %w", journalError(err))
	}
	if saved.PayloadSHA256 == sum {
		return journal.Registration{Outcome: journal.Duplicate, Operation: saved}, nil
	}
	if _, err := tx.ExecContext(ctx, conflictSQL, op.Key, ts(now), sum, string(op.Payload)); err != nil {
		return journal.Registration{}, fmt.Errorf("record the conflict: %w", err)
	}
	return journal.Registration{Outcome: journal.Conflicted, Operation: saved}, nil
}

// Get returns one operation; journal.ErrNotFound when the key is unknown.
func (j *Journal) Get(ctx context.Context, key string) (journal.Operation, error) {
	op, err := scanOperation(j.db.sql.QueryRowContext(ctx, `SELECT `+opColumns+` FROM operations WHERE key = ?`, key))
	if err != nil {
		return journal.Operation{}, fmt.Errorf("sqlite: get %s: %w", key, journalError(err))
	}
	return op, nil
}

// Show returns the operation with its attempts (by number) and conflicts (by time),
// read in one read transaction (a snapshot: it never waits for a writer).
func (j *Journal) Show(ctx context.Context, key string) (journal.Detail, error) {
	d, err := j.show(ctx, key)
	if err != nil {
		return journal.Detail{}, fmt.Errorf("sqlite: show %s: %w", key, journalError(err))
	}
	return d, nil
}

func (j *Journal) show(ctx context.Context, key string) (journal.Detail, error) {
	// ReadOnly: a deferred BEGIN, not the IMMEDIATE one writes take.
	tx, err := j.db.sql.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return journal.Detail{}, err
	}
	defer tx.Rollback()

	var d journal.Detail
	if d.Operation, err = scanOperation(tx.QueryRowContext(ctx, `SELECT `+opColumns+` FROM operations WHERE key = ?`, key)); err != nil {
		return d, err
	}
	rows, err := tx.QueryContext(ctx, `SELECT attempt, worker, coalesce(outcome, ''), started_at, finished_at, error, onec_ref, exchanges, class,
		triggered_by
		FROM operation_attempts WHERE operation_key = ? ORDER BY attempt`, key)
	if err != nil {
		return d, err
	}
	d.History = []journal.Attempt{}
	for rows.Next() {
		var (
			a         journal.Attempt
			outcome   string
			started   int64
			finished  sql.NullInt64
			exchanges sql.NullString
		)
		if err := rows.Scan(&a.Attempt, &a.Worker, &outcome, &started, &finished, &a.Error, &a.Ref, &exchanges, &a.Class,
			&a.TriggeredBy); err != nil {
			rows.Close()
			return d, err
		}
		a.Outcome = journal.Outcome(outcome)
		a.StartedAt = fromTS(started)
		a.FinishedAt = nullTS(finished)
		if exchanges.Valid {
			a.Exchanges = json.RawMessage(exchanges.String)
		}
		d.History = append(d.History, a)
	}
	if err := rows.Err(); err != nil {
		return d, err
	}
	// operations.attempts is written when an attempt finishes; an attempt that was
	// interrupted (a crash, kill -9) still counts as started.
	if n := len(d.History); n > 0 && d.History[n-1].Attempt > d.Attempts {
		d.Attempts = d.History[n-1].Attempt
	}

	if d.Events, err = readEvents(ctx, tx, key); err != nil {
		return d, err
	}

	rows, err = tx.QueryContext(ctx, `SELECT at, last_at, times, payload_sha256, payload FROM operation_conflicts
		WHERE operation_key = ? ORDER BY at, id`, key)
	if err != nil {
		return d, err
	}
	defer rows.Close()
	d.Conflicts = []journal.Conflict{}
	for rows.Next() {
		var (
			c       journal.Conflict
			at, lst int64
			payload string
		)
		if err := rows.Scan(&at, &lst, &c.Times, &c.PayloadSHA256, &payload); err != nil {
			return d, err
		}
		c.At, c.LastAt = fromTS(at), fromTS(lst)
		c.Payload = json.RawMessage(payload)
		d.Conflicts = append(d.Conflicts, c)
	}
	return d, rows.Err()
}

// readEvents reads the timeline of key, oldest first (never nil).
func readEvents(ctx context.Context, tx *sql.Tx, key string) ([]journal.Event, error) {
	rows, err := tx.QueryContext(ctx, `SELECT at, action, actor, detail FROM operation_events
		WHERE operation_key = ? ORDER BY at, id`, key)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	events := []journal.Event{}
	for rows.Next() {
		var (
			e  journal.Event
			at int64
		)
		if err := rows.Scan(&at, &e.Action, &e.Actor, &e.Detail); err != nil {
			return nil, err
		}
		e.At = fromTS(at)
		events = append(events, e)
	}
	return events, rows.Err()
}

// List returns operations newest first (updated_at descending, then key), filtered by
// status, source, kind, updated_at >= Since, created_at in [CreatedFrom,
// CreatedBefore) and the search term Query (journal.Matches; see querySQL), at most
// Limit (default 100).
func (j *Journal) List(ctx context.Context, f journal.Filter) ([]journal.Operation, error) {
	if err := f.Check(); err != nil {
		return nil, fmt.Errorf("sqlite: list: %w", err)
	}
	where, args := listWhere(f)
	q := `SELECT ` + opColumns + ` FROM operations WHERE 1` + where
	if f.After != nil {
		at := ts(f.After.UpdatedAt)
		q += ` AND (updated_at < ? OR (updated_at = ? AND key > ?))`
		args = append(args, at, at, f.After.Key)
	}
	limit := f.Limit
	if limit <= 0 {
		limit = DefaultListLimit
	}
	q += ` ORDER BY updated_at DESC, key`
	if f.ErrorContains == "" {
		q += ` LIMIT ?`
		args = append(args, limit)
	}
	needle := strings.ToLower(f.ErrorContains)
	rows, err := j.db.sql.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list: %w", err)
	}
	defer rows.Close()
	var ops []journal.Operation
	for rows.Next() {
		op, err := scanOperation(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: list: %w", err)
		}
		if needle != "" && !strings.Contains(strings.ToLower(op.LastError), needle) {
			continue
		}
		ops = append(ops, op)
		if len(ops) == limit {
			break
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list: %w", err)
	}
	return ops, nil
}

// Requeue makes a failed or pending operation pending and due now, waiting at most
// ClaimLockTimeout for a claim or lock of this process that holds it (journal.ErrBusy
// past that). A done operation is left alone: *journal.NotPendingError
// (journal.ErrNotPending). journal.ErrNotFound for an unknown key.
func (j *Journal) Requeue(ctx context.Context, key string) (journal.Operation, error) {
	if err := j.db.lockOperation(ctx, key); err != nil {
		return journal.Operation{}, fmt.Errorf("sqlite: requeue %s: %w", key, err)
	}
	defer j.db.keys.Unlock(key)
	actor := journal.ActorOf(ctx)
	var op journal.Operation
	err := j.db.write(ctx, func(tx *sql.Tx) error {
		var err error
		now := j.db.nowUTC()
		op, err = scanOperation(tx.QueryRowContext(ctx, `UPDATE operations
			SET status = 'pending', next_attempt_at = ?2, updated_at = ?2,
				first_attempt_at = NULL, unknown_attempts = 0, triggered_by = ?3
			WHERE key = ?1 AND status IN ('pending', 'failed')
			RETURNING `+opColumns, key, ts(now), actor))
		if errors.Is(err, sql.ErrNoRows) { // unknown, or done
			if op, err = scanOperation(tx.QueryRowContext(ctx, `SELECT `+opColumns+` FROM operations WHERE key = ?`, key)); err != nil {
				return journalError(err)
			}
			return &journal.NotPendingError{Operation: op}
		}
		if err != nil {
			return err
		}
		return j.db.addEvent(ctx, tx, key, now, journal.EventRequeued, actor, "")
	})
	var npe *journal.NotPendingError
	switch {
	case errors.As(err, &npe):
		return journal.Operation{}, npe
	case err != nil:
		return journal.Operation{}, fmt.Errorf("sqlite: requeue %s: %w", key, err)
	}
	return op, nil
}

// Revise replaces the payload (and kind, source, external id) of an operation that
// failed without reaching 1C — failed, with no attempt row — keeps the superseded
// payload as a conflict row, and makes the operation pending and due now. Any other
// operation answers journal.ErrNotRevisable and is left alone; an unknown key
// journal.ErrNotFound. It waits at most ClaimLockTimeout for a claim or lock of this
// process that holds the key (journal.ErrBusy past that).
func (j *Journal) Revise(ctx context.Context, op journal.NewOperation) (journal.Operation, error) {
	if err := op.Validate(); err != nil {
		return journal.Operation{}, fmt.Errorf("sqlite: revise %q: %w", op.Key, err)
	}
	if err := j.db.lockOperation(ctx, op.Key); err != nil {
		return journal.Operation{}, fmt.Errorf("sqlite: revise %s: %w", op.Key, err)
	}
	defer j.db.keys.Unlock(op.Key)
	sum := order.SHA256Hex(op.Payload)
	var revised journal.Operation
	err := j.db.write(ctx, func(tx *sql.Tx) error {
		var reached bool
		cur, err := scanOperation(tx.QueryRowContext(ctx, `SELECT `+opColumns+`,
			EXISTS (SELECT 1 FROM operation_attempts WHERE operation_key = ?1)
			FROM operations WHERE key = ?1`, op.Key), &reached)
		switch {
		case err != nil:
			return journalError(err)
		case cur.Status != journal.StatusFailed:
			return fmt.Errorf("%w (it is %s)", journal.ErrNotRevisable, cur.Status)
		case reached:
			// Any attempt row counts, an interrupted one too: its worker may have
			// called 1C before it stopped.
			return fmt.Errorf("%w (it failed after an attempt in 1C)", journal.ErrNotRevisable)
		}
		at := j.db.nowUTC()
		now := ts(at)
		if cur.PayloadSHA256 != sum {
			if _, err := tx.ExecContext(ctx, conflictSQL, op.Key, now, cur.PayloadSHA256, string(cur.Payload)); err != nil {
				return fmt.Errorf("keep the superseded payload: %w", err)
			}
		}
		actor := journal.ActorOf(ctx)
		dv := derivedOf(op.Key, op.Source, op.ExternalID, string(op.Payload), cur.Result)
		revised, err = scanOperation(tx.QueryRowContext(ctx, `UPDATE operations
			SET kind = ?2, source = ?3, external_id = ?4, payload = ?5, payload_sha256 = ?6,
				status = 'pending', last_error = '', next_attempt_at = ?7, updated_at = ?7,
				triggered_by = ?8, search_phone = ?9,
				order_created_at = ?10, order_total = ?11, currency = ?12, search_text = ?13
			WHERE key = ?1
			RETURNING `+opColumns, op.Key, op.Kind, op.Source, op.ExternalID, string(op.Payload), sum, now,
			actor, searchPhone(string(op.Payload)), dv.orderAt, dv.total, dv.currency, dv.search))
		if err != nil {
			return err
		}
		return j.db.addEvent(ctx, tx, op.Key, at, journal.EventRevised, actor, cur.LastError)
	})
	if err != nil {
		return journal.Operation{}, fmt.Errorf("sqlite: revise %s: %w", op.Key, err)
	}
	return revised, nil
}

// lockOperation takes key's in-process lock (the FOR UPDATE stand-in), waiting at
// most ClaimLockTimeout: journal.ErrBusy past that, ctx's error when ctx ends first.
func (db *DB) lockOperation(ctx context.Context, key string) error {
	wait := db.cfg.ClaimLockTimeout
	lctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	if err := db.keys.Lock(lctx, key); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("%w (a claim or lock of this process held it for %s)", journal.ErrBusy, wait)
	}
	return nil
}
