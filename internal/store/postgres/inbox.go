package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ordersync/ordersync/internal/inbox"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/order"
)

// Inbox is the PostgreSQL inbox.Store.
//
// Receive runs one statement for every delivery. It reads the stored event, if
// there is one, and answers from it (a duplicate writes nothing). Otherwise it takes
// a transaction-scoped advisory lock on the event, inserts the event and registers
// its operations: one round trip and one transaction, so a failure leaves neither
// the event nor any operation and a redelivery registers them exactly once.
type Inbox struct {
	db *DB
}

var (
	_ inbox.Store  = (*Inbox)(nil)
	_ inbox.Looker = (*Inbox)(nil)
)

// Inbox is the webhook inbox store.
func (db *DB) Inbox() inbox.Store { return &Inbox{db: db} }

// maxReceiveTries bounds how often Receive starts over after a serialization
// failure or a deadlock (a concurrent writer of the same operation or event).
const maxReceiveTries = 5

// inboxConflictSQL records a delivery that reused a stored event id with another body.
const inboxConflictSQL = `INSERT INTO inbox_conflicts (source, event_id, at, body_sha256, body) VALUES ($1, $2, $3, $4, $5)`

// inboxReceiveSQL answers a delivery of one event, in one statement run in a
// REPEATABLE READ transaction of its own (see receiveTx: one round trip).
//
//   - saved: the stored event, by its primary key. Found: nothing else happens and
//     the statement answers it (Receive answers Duplicate or Conflict from it); no
//     lock is taken and nothing is written.
//   - lock: only for an event not stored, pg_try_advisory_xact_lock on the event's
//     key ($1). Not taken: another delivery of the event is being registered right
//     now; nothing is written and the caller answers InProgress. Taken: it is held
//     until commit, so a second delivery arriving meanwhile is told InProgress
//     instead of waiting.
//   - event: the event row, only under the lock, ON CONFLICT (source, event_id) DO
//     NOTHING.
//   - reg: the registrations, only when the event row was inserted.
//   - inserted: new operations, pending and due now, ON CONFLICT (key) DO NOTHING.
//   - existing: registrations whose key was already in the journal, each looked up
//     by key (a correlated subquery: the plan uses the primary key whatever the
//     statistics). The statement's snapshot does not show the rows it inserts
//     itself, so these are exactly the keys that existed before it.
//   - conflicted: an existing key with another payload, for a registration without
//     IfAbsent: recorded as Register records it (one row per payload, counted).
//   - woken: Wake registrations whose operation is not done: pending, due now. A row a
//     claim holds is not waited for (SKIP LOCKED): its wake is recorded in
//     operation_wakes (deferred), and the claim's Finish applies it, so no webhook
//     answer ever waits for a 1C call.
//
// Under REPEATABLE READ a key that a concurrent transaction committed after this
// statement's snapshot (and so is missing from existing) does not slip through ON
// CONFLICT DO NOTHING unseen: the server raises a serialization failure, nothing is
// written, and Receive starts over with a snapshot that shows it. The same holds for
// an operation updated after the snapshot (a claim that finished while woken waited)
// and for the event row itself (a delivery that committed after saved read nothing):
// the next try finds it in saved.
var inboxReceiveSQL = `
WITH saved AS MATERIALIZED (
	SELECT * FROM inbox_events WHERE source = $2 AND event_id = $3
), lock AS MATERIALIZED (
	SELECT pg_try_advisory_xact_lock($1) AS taken WHERE NOT EXISTS (SELECT FROM saved)
), event AS (
	INSERT INTO inbox_events (source, event_id, body_sha256, body, content_type, status, received_at,
		answer_status, answer_content_type, answer_body, operations)
	SELECT $2, $3, $4, $5, nullif($6, ''), 'processed', $7, $8, nullif($9, ''), $10, $11
	FROM lock WHERE taken
	ON CONFLICT (source, event_id) DO NOTHING
	RETURNING true
), reg AS (
	SELECT 0 AS idx, r.* FROM unnest($13::text[], $14::text[], $15::text[], $16::text[], $17::text[], $18::text[], $19::bool[], $20::bool[],
			$21::text[], $22::text[], $23::timestamptz[], $24::text[], $25::text[], $26::text[])
		AS r (key, kind, source, external_id, payload, payload_sha256, if_absent, wake, actor, detail,
			order_created_at, order_total, currency, search_text)
	WHERE EXISTS (SELECT FROM event)
), ` + inboxJournalSteps("$12") + `
SELECT coalesce((SELECT taken FROM lock), false), EXISTS (SELECT FROM event),
	ARRAY(SELECT key FROM inserted ORDER BY key),
	ARRAY(SELECT operation_key FROM conflicted ORDER BY operation_key),
	ARRAY(SELECT key FROM woken UNION SELECT key FROM deferred ORDER BY key),
	` + savedColumns("s") + `
FROM (VALUES (1)) AS one LEFT JOIN saved s ON true`

// savedColumns are the stored event's columns the receiving statements answer, from
// a row s of inbox_events (all NULL when there is none); savedScan receives them.
func savedColumns(s string) string {
	return strings.ReplaceAll(`(s).body_sha256, (s).answer_status, (s).answer_content_type, (s).answer_body, (s).operations`, "(s)", "("+s+")")
}

// savedScan receives savedColumns.
type savedScan struct {
	sha256, contentType *string
	status              *int32
	body                []byte
	operations          []string
}

func (s *savedScan) dest() []any {
	return []any{&s.sha256, &s.status, &s.contentType, &s.body, &s.operations}
}

// event is the stored event, or nil when the statement found none.
func (s *savedScan) event() *savedEvent {
	if s.sha256 == nil || s.status == nil {
		return nil
	}
	e := &savedEvent{bodySHA256: *s.sha256, answer: inbox.Answer{Status: int(*s.status)}, operations: s.operations}
	if s.contentType != nil {
		e.answer.ContentType = *s.contentType
	}
	if s.body != nil {
		e.answer.Body = json.RawMessage(s.body)
	}
	return e
}

// inboxJournalSteps are the journal steps of both receiving statements (see
// inboxReceiveSQL): inserted, existing, conflicted and woken, after a reg step of
// (idx, key, kind, source, external_id, payload, payload_sha256, if_absent, wake,
// actor, detail, order_created_at, order_total, currency, search_text — the last four
// journal.Derive's, derivedOf); now names the statement's parameter for the store's clock. A new
// operation is triggered by its registration's actor (the receiving context's) and
// records its registered event, detail naming the delivery (registered).
func inboxJournalSteps(now string) string {
	return strings.ReplaceAll(`inserted AS (
	INSERT INTO operations (key, kind, source, external_id, status, payload, payload_sha256,
		attempts, last_error, next_attempt_at, created_at, updated_at, triggered_by,
		order_created_at, order_total, currency, search_text)
	SELECT key, kind, source, external_id, 'pending', payload::jsonb, payload_sha256, 0, '', $now, $now, $now, actor,
		order_created_at, order_total::numeric, currency, search_text
	FROM reg ORDER BY key
	ON CONFLICT (key) DO NOTHING
	RETURNING key
), registered AS (
	INSERT INTO operation_events (operation_key, at, action, actor, detail)
	SELECT reg.key, $now, '`+journal.EventRegistered+`', reg.actor, reg.detail
	FROM reg JOIN inserted USING (key)
	ORDER BY reg.key
), existing AS MATERIALIZED (
	SELECT * FROM (
		SELECT idx, key, payload, payload_sha256, if_absent, wake,
			(SELECT o.payload_sha256 FROM operations o WHERE o.key = reg.key) AS saved_sha256
		FROM reg OFFSET 0
	) r WHERE saved_sha256 IS NOT NULL
), conflicted AS (
	INSERT INTO operation_conflicts (operation_key, at, last_at, payload_sha256, payload)
	SELECT key, $now, $now, payload_sha256, payload::jsonb FROM existing
	WHERE NOT if_absent AND payload_sha256 <> saved_sha256
	ORDER BY key
	ON CONFLICT (operation_key, payload_sha256)
	DO UPDATE SET times = operation_conflicts.times + 1, last_at = excluded.last_at
	RETURNING operation_key
), wakeable AS MATERIALIZED (
	SELECT o.key, o.status FROM operations o JOIN existing e ON o.key = e.key
	WHERE e.wake
	FOR NO KEY UPDATE OF o SKIP LOCKED
), woken AS (
	UPDATE operations o SET status = 'pending', next_attempt_at = $now, updated_at = $now
	FROM wakeable w
	WHERE o.key = w.key AND w.status <> 'done'
	RETURNING o.key
), deferred AS (
	INSERT INTO operation_wakes (operation_key, at)
	SELECT DISTINCT e.key, $now::timestamptz FROM existing e
	WHERE e.wake AND NOT EXISTS (SELECT FROM wakeable w WHERE w.key = e.key)
	ORDER BY e.key
	ON CONFLICT (operation_key) DO UPDATE SET at = excluded.at
	RETURNING operation_key AS key
)`, "$now", now)
}

// inboxLockKey is the advisory lock key of one event: the first 8 bytes of
// SHA-256("inbox" NUL source NUL event id). Two events sharing a key (odds 2^-64)
// would only make simultaneous deliveries of both answer InProgress to one another.
func inboxLockKey(source, eventID string) int64 {
	h := sha256.New()
	h.Write([]byte("inbox\x00"))
	h.Write([]byte(source))
	h.Write([]byte{0})
	h.Write([]byte(eventID))
	return int64(binary.BigEndian.Uint64(h.Sum(nil)))
}

// savedEvent is a stored event as a receiving statement reads it.
type savedEvent struct {
	bodySHA256 string
	answer     inbox.Answer
	operations []string
}

// receiveResult is what inboxReceiveSQL answers.
type receiveResult struct {
	saved                  *savedEvent // the event was stored already; nothing else happened
	taken, inserted        bool
	registered, conflicted []string
	woken                  []string
}

// Receive runs inboxReceiveSQL (see there), grouped with other deliveries waiting
// at the same time (inbox_group.go). A stored event answers Duplicate with the saved
// answer and operations when the body's SHA-256 is the one stored (nothing is
// written), or Conflict, recording the other body in inbox_conflicts. A new event is
// stored with its operations and answers Processed with answer; InProgress when
// another delivery of the event holds its lock. The event is stored with
// ev.ReceivedAt (the store's clock when zero); operations, conflicts and wakes take
// the store's clock. Round trips: one for a new event or a duplicate, two for a
// conflict.
func (ib *Inbox) Receive(ctx context.Context, ev inbox.Event, regs []inbox.Registration, answer inbox.Answer) (inbox.Receipt, error) {
	what := "inbox: receive " + ev.Source + " " + strconv.Quote(ev.ID)
	if err := inbox.CheckReceive(ev, regs, answer); err != nil {
		return inbox.Receipt{}, fmt.Errorf("postgres: %s: %w", what, err)
	}
	sum := order.SHA256Hex(ev.Body)
	for try := 1; ; try++ {
		r, err := ib.db.inboxGroup().register(ctx, newReceiveRow(ev, sum, regs, answer, journal.ActorOf(ctx), ib.db.nowUTC()))
		switch {
		case retryable(err) && try < maxReceiveTries:
			ib.db.log.DebugContext(ctx, "inbox: a concurrent writer got in the way; receiving again",
				"source", ev.Source, "event_id", ev.ID, "error", err)
			continue
		case err != nil:
			return inbox.Receipt{}, fmt.Errorf("postgres: %s: %w", what, err)
		case r.saved != nil:
			return ib.known(ctx, ev, sum, *r.saved)
		case !r.taken:
			return inbox.Receipt{Outcome: inbox.InProgress}, nil
		case !r.inserted:
			// Under the lock, with no stored event in its snapshot, the insert either
			// inserts or fails to serialize; this is a broken invariant, not a race.
			return inbox.Receipt{}, fmt.Errorf("postgres: %s: the event was neither stored nor found", what)
		}
		if len(r.conflicted) > 0 {
			ib.db.log.WarnContext(ctx, "inbox: registrations conflict with saved operations",
				"source", ev.Source, "event_id", ev.ID, "keys", r.conflicted)
		}
		return inbox.Receipt{Outcome: inbox.Processed, Answer: answer, Operations: regKeys(regs)}, nil
	}
}

// Redelivered answers a delivery of a stored event with the body stored: Duplicate,
// with the saved answer and operations, as Receive would answer it. It only reads
// (inboxLookupSQL, in a batch with the lookups waiting at the same time): no
// transaction, no lock, no write. ok is false for an event not stored, or stored
// with another body; Receive answers those.
//
// A source or an event id that JSON cannot carry exactly (invalid UTF-8, NUL; see
// inboxLookupSQL) is not looked up: ok is false.
func (ib *Inbox) Redelivered(ctx context.Context, ev inbox.Event) (inbox.Receipt, bool, error) {
	if !jsonExact(ev.Source) || !jsonExact(ev.ID) {
		return inbox.Receipt{}, false, nil
	}
	saved, err := ib.db.inboxGroup().lookup(ctx, ev.Source, ev.ID)
	if err != nil {
		return inbox.Receipt{}, false, fmt.Errorf("postgres: inbox: look up %s %q: %w", ev.Source, ev.ID, err)
	}
	if saved == nil || saved.bodySHA256 != order.SHA256Hex(ev.Body) {
		return inbox.Receipt{}, false, nil
	}
	return inbox.Receipt{Outcome: inbox.Duplicate, Answer: saved.answer, Operations: saved.operations}, true, nil
}

// jsonExact reports whether s survives a JSON string and jsonb unchanged: valid
// UTF-8 without NUL.
func jsonExact(s string) bool {
	return utf8.ValidString(s) && !strings.ContainsRune(s, 0)
}

func regKeys(regs []inbox.Registration) []string {
	keys := make([]string, len(regs))
	for i, r := range regs {
		keys[i] = r.Op.Key
	}
	return keys
}

// receiveRow is one delivery's values for inboxReceiveSQL (args) or for one row of
// inboxReceiveBatchSQL. The registrations go in key order, so that two events
// registering the same keys take their locks in the same order.
type receiveRow struct {
	lockKey                           int64
	source, eventID, sum              string
	body                              []byte
	contentType                       string
	received                          time.Time
	answerStatus                      int
	answerContentType                 string
	answerBody                        []byte
	operations                        []string // in the order of the registrations
	now                               time.Time
	keys, kinds, sources, externalIDs []string
	payloads, sums                    []string
	ifAbsent, wake                    []bool
	actors, details                   []string // of each registration, for its registered event
	orderAts                          []*time.Time
	totals                            []*string
	currencies, searches              []string // with orderAts and totals: derivedOf each
}

func newReceiveRow(ev inbox.Event, sum string, regs []inbox.Registration, answer inbox.Answer, actor string, now time.Time) receiveRow {
	received := now
	if !ev.ReceivedAt.IsZero() {
		received = ev.ReceivedAt.UTC().Truncate(time.Microsecond)
	}
	sorted := slices.SortedFunc(slices.Values(regs), func(a, b inbox.Registration) int { return strings.Compare(a.Op.Key, b.Op.Key) })
	n := len(sorted)
	row := receiveRow{
		lockKey: inboxLockKey(ev.Source, ev.ID),
		source:  ev.Source, eventID: ev.ID, sum: sum, body: ev.Body, contentType: ev.ContentType, received: received,
		answerStatus: answer.Status, answerContentType: answer.ContentType,
		operations: regKeys(regs), now: now,
		keys: make([]string, n), kinds: make([]string, n), sources: make([]string, n), externalIDs: make([]string, n),
		payloads: make([]string, n), sums: make([]string, n), ifAbsent: make([]bool, n), wake: make([]bool, n),
		actors: make([]string, n), details: make([]string, n),
		orderAts: make([]*time.Time, n), totals: make([]*string, n), currencies: make([]string, n), searches: make([]string, n),
	}
	detail := inboxEventDetail(ev.Source, ev.ID)
	for i, r := range sorted {
		row.keys[i], row.kinds[i], row.sources[i], row.externalIDs[i] = r.Op.Key, r.Op.Kind, r.Op.Source, r.Op.ExternalID
		row.payloads[i], row.sums[i] = string(r.Op.Payload), order.SHA256Hex(r.Op.Payload)
		row.ifAbsent[i], row.wake[i] = r.IfAbsent, r.Wake
		row.actors[i], row.details[i] = actor, detail
		dv := derivedOf(r.Op.Key, r.Op.Source, r.Op.ExternalID, r.Op.Payload, nil)
		row.orderAts[i], row.totals[i], row.currencies[i], row.searches[i] = dv.orderAt, dv.total, dv.currency, dv.search
	}
	if row.body == nil {
		row.body = []byte{}
	}
	if len(answer.Body) > 0 {
		row.answerBody = []byte(answer.Body)
	}
	return row
}

// args are inboxReceiveSQL's arguments.
func (r receiveRow) args() []any {
	return []any{
		r.lockKey, r.source, r.eventID, r.sum, r.body, r.contentType, r.received,
		r.answerStatus, r.answerContentType, r.answerBody, r.operations, r.now,
		r.keys, r.kinds, r.sources, r.externalIDs, r.payloads, r.sums, r.ifAbsent, r.wake,
		r.actors, r.details, r.orderAts, r.totals, r.currencies, r.searches,
	}
}

// inboxEventDetail is the detail of the registered event of an operation an inbox
// delivery brought: which delivery it was.
func inboxEventDetail(source, eventID string) string {
	return "inbox " + source + " " + strconv.Quote(eventID)
}

// known answers a delivery of a stored event: Duplicate without a write, or Conflict
// with the other body recorded.
func (ib *Inbox) known(ctx context.Context, ev inbox.Event, sum string, saved savedEvent) (inbox.Receipt, error) {
	if saved.bodySHA256 == sum {
		return inbox.Receipt{Outcome: inbox.Duplicate, Answer: saved.answer, Operations: saved.operations}, nil
	}
	body := ev.Body
	if body == nil {
		body = []byte{}
	}
	if _, err := ib.db.pool.Exec(ctx, inboxConflictSQL, ev.Source, ev.ID, ib.db.nowUTC(), sum, body); err != nil {
		return inbox.Receipt{}, fmt.Errorf("postgres: inbox: receive %s %q: record the conflict: %w", ev.Source, ev.ID, err)
	}
	ib.db.log.WarnContext(ctx, "inbox: event id reused with another body",
		"source", ev.Source, "event_id", ev.ID, "saved_sha256", saved.bodySHA256, "body_sha256", sum)
	return inbox.Receipt{Outcome: inbox.Conflict, Operations: saved.operations}, nil
}

// registerOne runs inboxReceiveSQL for one delivery (see receiveTx).
func (db *DB) registerOne(ctx context.Context, row receiveRow) (receiveResult, error) {
	var (
		r     receiveResult
		saved savedScan
	)
	err := db.receiveTx(ctx, inboxReceiveSQL, row.args(), func(rows pgx.Rows) error {
		if !rows.Next() {
			return pgx.ErrNoRows
		}
		return rows.Scan(append([]any{&r.taken, &r.inserted, &r.registered, &r.conflicted, &r.woken}, saved.dest()...)...)
	})
	r.saved = saved.event()
	return r, err
}

// receiveTx runs a receiving statement (inboxReceiveSQL, inboxReceiveBatchSQL) as a
// REPEATABLE READ transaction of its own, in one round trip: alone, on a writer's
// session (writersConfig), whose default isolation is REPEATABLE READ, so that the
// statement is its own transaction and commits as it ends; read consumes its rows.
// An error anywhere, the commit's included, rolls all of it back and is returned.
//
// The statement runs on its generic plan (planned once per session and again when
// the tables' statistics change): the server's default plans it afresh on every
// execution, which took about half of its server time. The generic plan finds
// events and operations by key (correlated subqueries on the primary keys) whatever
// the tables' size; only the wake's join may scan the journal while its statistics
// say it is tiny (a new database before its first autoanalyze), and only for a
// registration that asks for a wake.
func (db *DB) receiveTx(ctx context.Context, query string, args []any, read func(pgx.Rows) error) error {
	conn, err := db.writers.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	rows, err := conn.Query(ctx, query, args...)
	if err != nil {
		return err
	}
	err = read(rows)
	rows.Close()
	if rerr := rows.Err(); rerr != nil {
		err = rerr // the cause, when read saw the rows end early
	}
	return err
}

// retryable reports a serialization failure or a deadlock: the transaction was
// rolled back and may run again.
func retryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == codeSerializationFailure || pe.Code == codeDeadlockDetected)
}

const (
	codeSerializationFailure = "40001"
	codeDeadlockDetected     = "40P01"
)

const inboxColumns = `e.source, e.event_id, e.body_sha256, e.status, e.received_at, coalesce(e.content_type, ''),
	e.answer_status, coalesce(e.answer_content_type, ''), e.answer_body, e.operations,
	(SELECT count(*) FROM inbox_conflicts c WHERE c.source = e.source AND c.event_id = e.event_id)`

// scanInboxRecord reads inboxColumns, then any extra columns into extra.
func scanInboxRecord(row pgx.Row, extra ...any) (inbox.Record, error) {
	var (
		r          inbox.Record
		answerBody []byte
	)
	dest := append([]any{&r.Source, &r.EventID, &r.BodySHA256, &r.Status, &r.ReceivedAt, &r.ContentType,
		&r.Answer.Status, &r.Answer.ContentType, &answerBody, &r.Operations, &r.Conflicts}, extra...)
	if err := row.Scan(dest...); err != nil {
		return inbox.Record{}, err
	}
	r.ReceivedAt = r.ReceivedAt.UTC()
	if answerBody != nil {
		r.Answer.Body = json.RawMessage(answerBody)
	}
	return r, nil
}

// List returns stored events newest first (received_at descending, then source and
// event id), filtered by source and status, at most Limit (default 100), each with
// the number of conflicting deliveries. Bodies are left out (Show has them).
func (ib *Inbox) List(ctx context.Context, f inbox.Filter) ([]inbox.Record, error) {
	q := `SELECT ` + inboxColumns + ` FROM inbox_events e WHERE true`
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	if f.Source != "" {
		q += ` AND e.source = ` + arg(f.Source)
	}
	if err := f.Check(); err != nil {
		return nil, fmt.Errorf("postgres: inbox: list: %w", err)
	}
	if f.Status != "" {
		q += ` AND e.status = ` + arg(f.Status)
	}
	if a := f.After; a != nil {
		at, src := arg(a.ReceivedAt), arg(a.Source)
		q += ` AND (e.received_at < ` + at + ` OR (e.received_at = ` + at + ` AND (e.source > ` + src +
			` OR (e.source = ` + src + ` AND e.event_id > ` + arg(a.EventID) + `))))`
	}
	limit := f.Limit
	if limit <= 0 {
		limit = DefaultListLimit
	}
	q += ` ORDER BY e.received_at DESC, e.source, e.event_id LIMIT ` + arg(limit)
	rows, err := ib.db.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("postgres: inbox: list: %w", err)
	}
	recs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (inbox.Record, error) { return scanInboxRecord(row) })
	if err != nil {
		return nil, fmt.Errorf("postgres: inbox: list: %w", err)
	}
	if recs == nil {
		recs = []inbox.Record{}
	}
	return recs, nil
}

// ByOperation returns the stored events whose operations hold key, newest first
// (received_at descending, then source and event id), found through the GIN index
// on operations; none (an empty slice) for a key no delivery brought.
func (ib *Inbox) ByOperation(ctx context.Context, key string) ([]inbox.Record, error) {
	rows, err := ib.db.pool.Query(ctx, `SELECT `+inboxColumns+` FROM inbox_events e
		WHERE e.operations @> ARRAY[$1::text]
		ORDER BY e.received_at DESC, e.source, e.event_id`, key)
	if err != nil {
		return nil, fmt.Errorf("postgres: inbox: deliveries of %s: %w", key, err)
	}
	recs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (inbox.Record, error) { return scanInboxRecord(row) })
	if err != nil {
		return nil, fmt.Errorf("postgres: inbox: deliveries of %s: %w", key, err)
	}
	if recs == nil {
		recs = []inbox.Record{}
	}
	return recs, nil
}

// Show returns one event with its body and its conflicting deliveries (by time), read
// in one round trip; inbox.ErrNotFound for an unknown one.
func (ib *Inbox) Show(ctx context.Context, source, eventID string) (inbox.Detail, error) {
	b := &pgx.Batch{}
	b.Queue(`SELECT `+inboxColumns+`, e.body FROM inbox_events e WHERE e.source = $1 AND e.event_id = $2`, source, eventID)
	b.Queue(`SELECT at, body_sha256, body FROM inbox_conflicts WHERE source = $1 AND event_id = $2 ORDER BY at, id`, source, eventID)
	br := ib.db.pool.SendBatch(ctx, b)
	d, err := func() (inbox.Detail, error) {
		var (
			d    inbox.Detail
			body []byte
		)
		rec, err := scanInboxRecord(br.QueryRow(), &body)
		if err != nil {
			return d, err
		}
		d.Record = rec
		d.Body = body
		d.BodyText = string(body)
		rows, err := br.Query()
		if err != nil {
			return d, err
		}
		d.Conflicts, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (inbox.ConflictRecord, error) {
			var c inbox.ConflictRecord
			err := row.Scan(&c.At, &c.BodySHA256, &c.Body)
			c.At = c.At.UTC()
			return c, err
		})
		if d.Conflicts == nil {
			d.Conflicts = []inbox.ConflictRecord{}
		}
		return d, err
	}()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return inbox.Detail{}, fmt.Errorf("postgres: inbox: show %s %q: %w", source, eventID, inbox.ErrNotFound)
	}
	if err != nil {
		return inbox.Detail{}, fmt.Errorf("postgres: inbox: show %s %q: %w", source, eventID, err)
	}
	return d, nil
}
