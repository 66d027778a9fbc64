package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/order"
)

// Journal is the PostgreSQL journal.Store.
type Journal struct {
	db *DB
}

var _ journal.Store = (*Journal)(nil)

// DefaultListLimit is how many operations List returns when the filter sets no limit.
const DefaultListLimit = 100

const opColumns = `key, kind, source, external_id, status, payload, payload_sha256, result,
	attempts, last_error, next_attempt_at, created_at, updated_at,
	settle_until, first_attempt_at, unknown_attempts, retry_class, verify_at, warnings, late_verify_at,
	order_created_at, onec_seen`

// scanOperation reads opColumns, then any extra columns into extra.
func scanOperation(row pgx.Row, extra ...any) (journal.Operation, error) {
	var (
		op                        journal.Operation
		status                    string
		payload, result, warnings []byte
		onecSeen                  []byte
	)
	dest := append([]any{&op.Key, &op.Kind, &op.Source, &op.ExternalID, &status, &payload, &op.PayloadSHA256, &result,
		&op.Attempts, &op.LastError, &op.NextAttemptAt, &op.CreatedAt, &op.UpdatedAt,
		&op.SettleUntil, &op.FirstAttemptAt, &op.UnknownAttempts, &op.RetryClass, &op.VerifyAt, &warnings, &op.LateVerifyAt,
		&op.OrderCreatedAt, &onecSeen}, extra...)
	err := row.Scan(dest...)
	if err != nil {
		return journal.Operation{}, err
	}
	op.Status = journal.Status(status)
	op.Payload = json.RawMessage(payload)
	if result != nil {
		var r journal.Result
		if err := json.Unmarshal(result, &r); err != nil {
			return journal.Operation{}, fmt.Errorf("operation %s: result: %w", op.Key, err)
		}
		op.Result = &r
	}
	op.Warnings, err = journal.DecodeWarnings(warnings)
	if err != nil {
		return journal.Operation{}, fmt.Errorf("operation %s: %w", op.Key, err)
	}
	op.NextAttemptAt = op.NextAttemptAt.UTC()
	op.CreatedAt = op.CreatedAt.UTC()
	op.UpdatedAt = op.UpdatedAt.UTC()
	op.SettleUntil, op.FirstAttemptAt, op.VerifyAt = utcPtr(op.SettleUntil), utcPtr(op.FirstAttemptAt), utcPtr(op.VerifyAt)
	op.LateVerifyAt, op.OrderCreatedAt = utcPtr(op.LateVerifyAt), utcPtr(op.OrderCreatedAt)
	if op.OneCSeen, err = decodeOneCSeen(op.Key, onecSeen); err != nil {
		return journal.Operation{}, err
	}
	return op, nil
}

func scanOperations(rows pgx.Rows) ([]journal.Operation, error) {
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (journal.Operation, error) { return scanOperation(row) })
}

// registerSQL inserts a new operation, pending ($5 = 'pending', due now) or failed
// from the start ($5 = 'failed', $8 its reason), unless the key exists, with its
// registered event: by the actor $10 (who is also the trigger of its first attempt),
// the reason of a failed one its detail; $11 to $14 what journal.Derive reads off it
// (derivedOf). Nothing is recorded for an existing key.
const registerSQL = `
WITH inserted AS (
	INSERT INTO operations (key, kind, source, external_id, status, payload, payload_sha256,
		attempts, last_error, next_attempt_at, created_at, updated_at, triggered_by,
		order_created_at, order_total, currency, search_text)
	VALUES ($1, $2, $3, $4, $5, $6, $7, 0, $8, $9, $9, $9, $10, $11, $12::numeric, $13, $14)
	ON CONFLICT (key) DO NOTHING
	RETURNING *
), event AS (
	INSERT INTO operation_events (operation_key, at, action, actor, detail)
	SELECT key, $9, '` + journal.EventRegistered + `', $10, $8 FROM inserted
)
SELECT ` + opColumns + ` FROM inserted`

// registerExistingSQL reads the saved operation after ON CONFLICT did nothing and,
// when the payload differs, records the conflict. It is a separate statement from the
// INSERT so that its snapshot sees a row a concurrent registration has just committed.
const registerExistingSQL = `
WITH saved AS (
	SELECT ` + opColumns + ` FROM operations WHERE key = $1
), conflict AS (
	INSERT INTO operation_conflicts (operation_key, at, last_at, payload_sha256, payload)
	SELECT key, $2, $2, $3, $4 FROM saved WHERE payload_sha256 <> $3
	ON CONFLICT (operation_key, payload_sha256)
	DO UPDATE SET times = operation_conflicts.times + 1, last_at = excluded.last_at
)
SELECT ` + opColumns + ` FROM saved`

// Register inserts a new pending operation, due now. An existing key answers
// Duplicate with the saved operation when the payload's SHA-256 is the same, and
// otherwise records a conflict and answers Conflicted with the saved, untouched
// operation. One round trip for a new operation, two for an existing key.
func (j *Journal) Register(ctx context.Context, op journal.NewOperation) (journal.Registration, error) {
	return j.register(ctx, op, journal.StatusPending, "")
}

// RegisterFailed inserts a new operation that is failed from the start, reason its
// last error, with no attempt: a marketplace order that could not be mapped. It is
// never claimed (only pending operations are); Revise makes it pending once it maps.
// An existing key behaves as in Register — Duplicate or a recorded conflict — and is
// never failed by it. One round trip for a new operation, two for an existing key.
func (j *Journal) RegisterFailed(ctx context.Context, op journal.NewOperation, reason string) (journal.Registration, error) {
	return j.register(ctx, op, journal.StatusFailed, reason)
}

// register is Register (status pending) or RegisterFailed (status failed, reason).
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
		return journal.Registration{}, fmt.Errorf("postgres: %s %q: %w", verb, op.Key, err)
	}
	what := verb + " " + op.Key
	sum := order.SHA256Hex(op.Payload)
	now := j.db.nowUTC()
	dv := derivedOf(op.Key, op.Source, op.ExternalID, op.Payload, nil)
	saved, err := scanOperation(j.db.pool.QueryRow(ctx, registerSQL,
		op.Key, op.Kind, op.Source, op.ExternalID, string(status), []byte(op.Payload), sum, reason, now, journal.ActorOf(ctx),
		dv.orderAt, dv.total, dv.currency, dv.search))
	if err == nil {
		return journal.Registration{Outcome: journal.Registered, Operation: saved}, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return journal.Registration{}, fmt.Errorf("postgres: %s: %w", what, interpretError(err))
	}
	saved, err = scanOperation(j.db.pool.QueryRow(ctx, registerExistingSQL, op.Key, now, sum, []byte(op.Payload)))
	if err != nil {
		return journal.Registration{}, fmt.Errorf("postgres: %s: read the saved operation: %w", what, interpretError(err))
	}
	if saved.PayloadSHA256 == sum {
		return journal.Registration{Outcome: journal.Duplicate, Operation: saved}, nil
	}
	j.db.log.WarnContext(ctx, "journal: registration conflicts with the saved operation",
		"key", op.Key, "saved_sha256", saved.PayloadSHA256, "payload_sha256", sum)
	return journal.Registration{Outcome: journal.Conflicted, Operation: saved}, nil
}

// Get returns one operation; journal.ErrNotFound when the key is unknown.
func (j *Journal) Get(ctx context.Context, key string) (journal.Operation, error) {
	op, err := scanOperation(j.db.pool.QueryRow(ctx, `SELECT `+opColumns+` FROM operations WHERE key = $1`, key))
	if err != nil {
		return journal.Operation{}, fmt.Errorf("postgres: get %s: %w", key, interpretError(err))
	}
	return op, nil
}

// Show returns the operation with its attempts (by number), conflicts and events (by
// time), read in one round trip.
func (j *Journal) Show(ctx context.Context, key string) (journal.Detail, error) {
	b := &pgx.Batch{}
	b.Queue(`SELECT `+opColumns+` FROM operations WHERE key = $1`, key)
	b.Queue(`SELECT attempt, worker, coalesce(outcome, ''), started_at, finished_at, error, onec_ref, exchanges, class,
		triggered_by
		FROM operation_attempts WHERE operation_key = $1 ORDER BY attempt`, key)
	b.Queue(`SELECT at, last_at, times, payload_sha256, payload FROM operation_conflicts
		WHERE operation_key = $1 ORDER BY at, id`, key)
	b.Queue(`SELECT at, action, actor, detail FROM operation_events
		WHERE operation_key = $1 ORDER BY at, id`, key)
	br := j.db.pool.SendBatch(ctx, b)
	d, err := readDetail(br)
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return journal.Detail{}, fmt.Errorf("postgres: show %s: %w", key, interpretError(err))
	}
	return d, nil
}

func readDetail(br pgx.BatchResults) (journal.Detail, error) {
	var d journal.Detail
	op, err := scanOperation(br.QueryRow())
	if err != nil {
		return d, err
	}
	d.Operation = op
	rows, err := br.Query()
	if err != nil {
		return d, err
	}
	d.History, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (journal.Attempt, error) {
		var (
			a         journal.Attempt
			outcome   string
			exchanges []byte
		)
		err := row.Scan(&a.Attempt, &a.Worker, &outcome, &a.StartedAt, &a.FinishedAt, &a.Error, &a.Ref, &exchanges, &a.Class, &a.TriggeredBy)
		a.Outcome = journal.Outcome(outcome)
		a.StartedAt = a.StartedAt.UTC()
		if a.FinishedAt != nil {
			t := a.FinishedAt.UTC()
			a.FinishedAt = &t
		}
		if exchanges != nil {
			a.Exchanges = json.RawMessage(exchanges)
		}
		return a, err
	})
	if err != nil {
		return d, err
	}
	// operations.attempts is written when an attempt finishes; an attempt that was
	// interrupted (a crash, kill -9) still counts as started.
	if n := len(d.History); n > 0 && d.History[n-1].Attempt > d.Attempts {
		d.Attempts = d.History[n-1].Attempt
	}
	rows, err = br.Query()
	if err != nil {
		return d, err
	}
	d.Conflicts, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (journal.Conflict, error) {
		var (
			c       journal.Conflict
			payload []byte
		)
		err := row.Scan(&c.At, &c.LastAt, &c.Times, &c.PayloadSHA256, &payload)
		c.At, c.LastAt = c.At.UTC(), c.LastAt.UTC()
		c.Payload = json.RawMessage(payload)
		return c, err
	})
	if d.History == nil {
		d.History = []journal.Attempt{}
	}
	if d.Conflicts == nil {
		d.Conflicts = []journal.Conflict{}
	}
	if err != nil {
		return d, err
	}
	rows, err = br.Query()
	if err != nil {
		return d, err
	}
	d.Events, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (journal.Event, error) {
		var e journal.Event
		err := row.Scan(&e.At, &e.Action, &e.Actor, &e.Detail)
		e.At = e.At.UTC()
		return e, err
	})
	if d.Events == nil {
		d.Events = []journal.Event{}
	}
	return d, err
}

// List returns operations newest first (updated_at descending, then key), filtered by
// status, source, kind, updated_at >= Since, created_at in [CreatedFrom,
// CreatedBefore) and the search term Query (journal.Matches; see querySQL), at most
// Limit (default 100).
func (j *Journal) List(ctx context.Context, f journal.Filter) ([]journal.Operation, error) {
	q, args, err := listSQL(f)
	if err != nil {
		return nil, err
	}
	rows, err := j.db.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("postgres: list: %w", interpretError(err))
	}
	ops, err := scanOperations(rows)
	if err != nil {
		return nil, fmt.Errorf("postgres: list: %w", interpretError(err))
	}
	return ops, nil
}

// listSQL is List's statement for f, and its arguments.
func listSQL(f journal.Filter) (string, []any, error) {
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	if err := f.Check(); err != nil {
		return "", nil, fmt.Errorf("postgres: list: %w", err)
	}
	with, where := listWhere(f, arg)
	q := with + `SELECT ` + opColumns + ` FROM operations WHERE true` + where
	if f.After != nil {
		at := arg(f.After.UpdatedAt)
		q += ` AND (updated_at < ` + at + ` OR (updated_at = ` + at + ` AND key > ` + arg(f.After.Key) + `))`
	}
	limit := f.Limit
	if limit <= 0 {
		limit = DefaultListLimit
	}
	q += ` ORDER BY updated_at DESC, key LIMIT ` + arg(limit)
	return q, args, nil
}

// journalRequeueSQL makes the operation pending and due now, with a fresh give-up clock,
// triggered by the actor $3, and records its requeued event; nothing for a done or
// unknown one.
const journalRequeueSQL = `
WITH requeued AS (
	UPDATE operations SET status = 'pending', next_attempt_at = $2, updated_at = $2,
		first_attempt_at = NULL, unknown_attempts = 0, triggered_by = $3
	WHERE key = $1 AND status IN ('pending', 'failed')
	RETURNING *
), event AS (
	INSERT INTO operation_events (operation_key, at, action, actor, detail)
	SELECT key, $2, '` + journal.EventRequeued + `', $3, '' FROM requeued
)
SELECT ` + opColumns + ` FROM requeued`

// Requeue makes a failed or pending operation pending and due now, waiting at most
// ClaimLockTimeout for a worker that holds it (journal.ErrBusy past that). A done
// operation is left alone: *journal.NotPendingError (journal.ErrNotPending).
func (j *Journal) Requeue(ctx context.Context, key string) (journal.Operation, error) {
	conn, err := j.db.pool.Acquire(ctx)
	if err != nil {
		return journal.Operation{}, fmt.Errorf("postgres: requeue %s: %w", key, err)
	}
	defer endTx(ctx, conn)
	now := j.db.nowUTC()
	b := &pgx.Batch{}
	b.BeginTx(pgx.TxOptions{})
	b.Queue(`SELECT set_config('lock_timeout', $1, true)`, millis(j.db.cfg.ClaimLockTimeout))
	b.Queue(journalRequeueSQL, key, now, journal.ActorOf(ctx))
	b.Queue(`COMMIT`)
	br := conn.SendBatch(ctx, b)
	op, err := func() (journal.Operation, error) {
		if _, err := br.Exec(); err != nil { // BEGIN
			return journal.Operation{}, err
		}
		if _, err := br.Exec(); err != nil { // set_config
			return journal.Operation{}, err
		}
		op, err := scanOperation(br.QueryRow())
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return journal.Operation{}, err // COMMIT was skipped: endTx rolls back
		}
		if _, cerr := br.Exec(); cerr != nil { // COMMIT
			return journal.Operation{}, cerr
		}
		return op, err
	}()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		return op, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return journal.Operation{}, fmt.Errorf("postgres: requeue %s: %w", key, interpretError(err))
	}
	// Nothing was updated: unknown, or done.
	op, err = j.Get(ctx, key)
	if err != nil {
		return journal.Operation{}, err
	}
	return journal.Operation{}, &journal.NotPendingError{Operation: op}
}

// reviseLockSQL takes the row lock before reviseSQL looks at the row. They are two
// statements so that reviseSQL's snapshot is taken after the lock is granted: under
// READ COMMITTED a single statement that waited for the lock would re-read the row
// but not the attempt rows a claim committed meanwhile, and could revise an operation
// that has just reached 1C.
const reviseLockSQL = `SELECT FROM operations WHERE key = $1 FOR NO KEY UPDATE`

// reviseSQL revises the operation only when it is failed and has no attempt row: it
// never reached 1C (operations.attempts would miss an attempt whose worker died). The
// superseded payload becomes a conflict row, unless it is the new one; the revised
// event records the actor $8 (the trigger of the next attempt) and the reason the
// operation had failed with; $9 to $12 are what journal.Derive reads off the new
// payload (derivedOf). It answers one row: revised and the operation as written, or
// not revised, whether an attempt row exists, and the operation as it stands; none
// for an unknown key.
const reviseSQL = `
WITH cur AS (
	SELECT ` + opColumns + `,
		EXISTS (SELECT FROM operation_attempts WHERE operation_key = $1) AS reached
	FROM operations WHERE key = $1
), ok AS (
	SELECT key, payload, payload_sha256 FROM cur WHERE status = 'failed' AND NOT reached
), superseded AS (
	INSERT INTO operation_conflicts (operation_key, at, last_at, payload_sha256, payload)
	SELECT key, $2, $2, payload_sha256, payload FROM ok WHERE payload_sha256 <> $7
	ON CONFLICT (operation_key, payload_sha256)
	DO UPDATE SET times = operation_conflicts.times + 1, last_at = excluded.last_at
), revised AS (
	UPDATE operations SET kind = $3, source = $4, external_id = $5, payload = $6, payload_sha256 = $7,
		status = 'pending', last_error = '', next_attempt_at = $2, updated_at = $2, triggered_by = $8,
		order_created_at = $9, order_total = $10::numeric, currency = $11, search_text = $12
	WHERE key = $1 AND EXISTS (SELECT FROM ok)
	RETURNING ` + opColumns + `
), event AS (
	INSERT INTO operation_events (operation_key, at, action, actor, detail)
	SELECT cur.key, $2, '` + journal.EventRevised + `', $8, cur.last_error FROM cur WHERE EXISTS (SELECT FROM revised)
)
SELECT true, false, ` + opColumns + ` FROM revised
UNION ALL
SELECT false, reached, ` + opColumns + ` FROM cur WHERE NOT EXISTS (SELECT FROM revised)`

// Revise replaces the payload (and kind, source, external id) of an operation that
// failed without reaching 1C — failed, with no attempt row — keeps the superseded
// payload as a conflict row, and makes the operation pending and due now. Any other
// operation answers journal.ErrNotRevisable and is left alone; an unknown key
// journal.ErrNotFound. It waits at most ClaimLockTimeout for whoever holds the row
// (journal.ErrBusy past that). One round trip: BEGIN, lock_timeout, the row lock, the
// revision and COMMIT are pipelined.
func (j *Journal) Revise(ctx context.Context, op journal.NewOperation) (journal.Operation, error) {
	if err := op.Validate(); err != nil {
		return journal.Operation{}, fmt.Errorf("postgres: revise %q: %w", op.Key, err)
	}
	conn, err := j.db.pool.Acquire(ctx)
	if err != nil {
		return journal.Operation{}, fmt.Errorf("postgres: revise %s: %w", op.Key, err)
	}
	defer endTx(ctx, conn)
	now := j.db.nowUTC()
	b := &pgx.Batch{}
	b.BeginTx(pgx.TxOptions{})
	b.Queue(`SELECT set_config('lock_timeout', $1, true)`, millis(j.db.cfg.ClaimLockTimeout))
	b.Queue(reviseLockSQL, op.Key)
	// A revisable operation never reached 1C: it has no result to derive from.
	dv := derivedOf(op.Key, op.Source, op.ExternalID, op.Payload, nil)
	b.Queue(reviseSQL, op.Key, now, op.Kind, op.Source, op.ExternalID, []byte(op.Payload), order.SHA256Hex(op.Payload),
		journal.ActorOf(ctx), dv.orderAt, dv.total, dv.currency, dv.search)
	b.Queue(`COMMIT`)
	br := conn.SendBatch(ctx, b)
	var revised, reached bool
	saved, err := func() (journal.Operation, error) {
		for range 3 { // BEGIN, set_config, the lock
			if _, err := br.Exec(); err != nil {
				return journal.Operation{}, err
			}
		}
		saved, err := scanOperation(prefixedRow{br.QueryRow(), []any{&revised, &reached}})
		if err != nil {
			return journal.Operation{}, err // COMMIT was skipped: endTx rolls back
		}
		_, err = br.Exec() // COMMIT
		return saved, err
	}()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	switch {
	case err != nil:
		return journal.Operation{}, fmt.Errorf("postgres: revise %s: %w", op.Key, interpretError(err))
	case !revised && saved.Status != journal.StatusFailed:
		return journal.Operation{}, fmt.Errorf("postgres: revise %s: %w (it is %s)", op.Key, journal.ErrNotRevisable, saved.Status)
	case !revised:
		return journal.Operation{}, fmt.Errorf("postgres: revise %s: %w (it failed after an attempt in 1C)", op.Key, journal.ErrNotRevisable)
	}
	return saved, nil
}

// prefixedRow scans a row whose first columns go to dest and the rest to Scan's.
type prefixedRow struct {
	row  pgx.Row
	dest []any
}

func (r prefixedRow) Scan(dest ...any) error { return r.row.Scan(append(r.dest, dest...)...) }

// endTx rolls back whatever transaction conn is still in (a batch whose COMMIT was
// skipped after an error) and returns conn to the pool.
func endTx(ctx context.Context, conn *pgxpool.Conn) error {
	defer conn.Release() // destroys the connection when it is not idle
	pc := conn.Conn().PgConn()
	if pc.IsClosed() || pc.TxStatus() == 'I' {
		return nil
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout(ctx))
	defer cancel()
	_, err := conn.Exec(rctx, "ROLLBACK")
	if err != nil && pc.IsClosed() {
		return nil // the server has rolled it back with the session
	}
	return err
}

// rollbackTimeout bounds the ROLLBACK that ends a claim or a lock: it runs even when
// ctx is cancelled, but within ctx's deadline when it has one (a stopping service
// must not wait for a database that does not answer), and never more than 15s. A
// ROLLBACK that does not finish closes the connection, which rolls back too.
func rollbackTimeout(ctx context.Context) time.Duration {
	d := 15 * time.Second
	if dl, ok := ctx.Deadline(); ok {
		d = min(d, max(time.Until(dl), 100*time.Millisecond))
	}
	return d
}

// millis renders a duration as a PostgreSQL setting in milliseconds (0 disables).
func millis(d time.Duration) string {
	ms := d.Milliseconds()
	if d > 0 && ms == 0 {
		ms = 1
	}
	return strconv.FormatInt(ms, 10)
}
