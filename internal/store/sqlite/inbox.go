package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ordersync/ordersync/internal/inbox"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/order"
)

// Inbox is the SQLite inbox.Store, with the outcomes of the PostgreSQL one.
//
// Receive answers a known event from one read (a duplicate writes nothing), and
// stores a new one in one write transaction that inserts the event (ON CONFLICT
// (source, event_id) DO NOTHING) and, only when the row went in, registers its
// operations: a failure leaves neither the event nor any operation, and a
// redelivery registers them exactly once.
//
// SQLite has one writer, so a second delivery of an event being registered would
// only wait for the writer and then find a duplicate. To answer it as PostgreSQL
// does (its transaction-scoped advisory lock), the event is held in this process
// while it is registered — a key of the DB's KeyLocks, taken without waiting — and a
// delivery that finds it held answers InProgress at once. A delivery from another
// process (or another DB handle on the file) that commits the event between the
// lookup and the insert is caught by the primary key: the insert does nothing, and
// the event is read again (Duplicate or Conflict).
type Inbox struct {
	db *DB
	// beforeRegister, when set (tests only), runs after a lookup that found no event
	// and before the event is held and registered: the window in which a concurrent
	// delivery may commit the same event.
	beforeRegister func()
	// beforeCommit, when set (tests only), runs inside the registering transaction
	// after every row of the delivery was written; an error fails the delivery.
	beforeCommit func() error
}

var _ inbox.Store = (*Inbox)(nil)

// Inbox is the webhook inbox store.
func (db *DB) Inbox() inbox.Store { return &Inbox{db: db} }

// inboxMaxTries bounds how often Receive starts over after a registering transaction
// that found the event committed since the lookup (by another process).
const inboxMaxTries = 5

// inboxListLimit is how many events List returns when the filter sets no limit.
const inboxListLimit = 100

// inboxLookupSQL is the duplicate path: a plain read by the primary key, no write.
const inboxLookupSQL = `SELECT body_sha256, answer_status, coalesce(answer_content_type, ''), answer_body, operations
FROM inbox_events WHERE source = ? AND event_id = ?`

// inboxConflictSQL records a delivery that reused a stored event id with another body.
const inboxConflictSQL = `INSERT INTO inbox_conflicts (source, event_id, at, body_sha256, body) VALUES (?, ?, ?, ?, ?)`

// inboxInsertSQL stores a new event; a row committed under the same (source,
// event_id) leaves it without effect (no row changed).
const inboxInsertSQL = `INSERT INTO inbox_events (source, event_id, body_sha256, body, content_type, status, received_at,
	answer_status, answer_content_type, answer_body, operations)
VALUES (?, ?, ?, ?, nullif(?, ''), 'processed', ?, ?, nullif(?, ''), ?, ?)
ON CONFLICT (source, event_id) DO NOTHING`

// inboxRegisterSQL registers one operation, pending and due now, unless its key
// exists, triggered by the receiving context's actor, with what journal.Derive reads
// off it (derivedOf).
const inboxRegisterSQL = `INSERT INTO operations (key, kind, source, external_id, status, payload, payload_sha256,
	attempts, last_error, next_attempt_at, created_at, updated_at, triggered_by, search_phone,
	order_created_at, order_total, currency, search_text)
VALUES (?, ?, ?, ?, 'pending', ?, ?, 0, '', ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (key) DO NOTHING`

// inboxIndexSQL indexes one key of a stored event's operations (ByOperation).
const inboxIndexSQL = `INSERT INTO inbox_event_operations (operation_key, source, event_id) VALUES (?, ?, ?)
ON CONFLICT (operation_key, source, event_id) DO NOTHING`

// inboxSavedOpSQL reads what a registration needs of an existing operation. Inside
// the write transaction (BEGIN IMMEDIATE) it sees every committed row.
const inboxSavedOpSQL = `SELECT payload_sha256, status FROM operations WHERE key = ?`

// inboxOpConflictSQL records a registration under an existing key with another
// payload, as the journal's Register does: one row per payload, counted.
const inboxOpConflictSQL = `INSERT INTO operation_conflicts (operation_key, at, last_at, payload_sha256, payload)
VALUES (?, ?, ?, ?, ?)
ON CONFLICT (operation_key, payload_sha256)
DO UPDATE SET times = operation_conflicts.times + 1, last_at = excluded.last_at`

// inboxWakeSQL makes an existing operation that is not done pending and due now.
const inboxWakeSQL = `UPDATE operations SET status = 'pending', next_attempt_at = ?, updated_at = ?
WHERE key = ? AND status <> 'done'`

// inboxEventLock is the KeyLocks key that holds an event while it is registered.
// It starts with NUL, which no operation key does, and separates the parts with NUL.
func inboxEventLock(source, eventID string) string {
	return "\x00inbox\x00" + source + "\x00" + eventID
}

// inboxSaved is what the lookup reads.
type inboxSaved struct {
	bodySHA256 string
	answer     inbox.Answer
	operations []string
}

// inboxRegistered is what the registering transaction did.
type inboxRegistered struct {
	inserted               bool // the event row went in
	registered, conflicted []string
	woken                  []string
}

// Receive answers a known event from one read: Duplicate with the saved answer and
// operations when the body's SHA-256 is the one stored (nothing is written), or
// Conflict, recording the other body in inbox_conflicts. A new event is held in the
// process (InProgress for a delivery that finds it held), then stored with its
// operations in one write transaction and answers Processed with answer. The event
// is stored with ev.ReceivedAt (the store's clock when zero); operations, conflicts
// and wakes take the store's clock.
//
// A Wake registration waits (at most Config.ClaimLockTimeout, then journal.ErrBusy)
// for the key lock of its operation, which a claim holds while 1C is called, and is
// applied to the claim's verdict: a retry is made due now, a done operation stays
// done — as PostgreSQL waits for the row lock.
func (ib *Inbox) Receive(ctx context.Context, ev inbox.Event, regs []inbox.Registration, answer inbox.Answer) (inbox.Receipt, error) {
	what := "inbox: receive " + ev.Source + " " + strconv.Quote(ev.ID)
	if err := inbox.CheckReceive(ev, regs, answer); err != nil {
		return inbox.Receipt{}, fmt.Errorf("sqlite: %s: %w", what, err)
	}
	sum := order.SHA256Hex(ev.Body)
	for try := 1; ; try++ {
		saved, found, err := ib.lookup(ctx, ev.Source, ev.ID)
		if err != nil {
			return inbox.Receipt{}, fmt.Errorf("sqlite: %s: %w", what, err)
		}
		if found {
			return ib.known(ctx, ev, sum, saved)
		}
		if ib.beforeRegister != nil {
			ib.beforeRegister()
		}
		lock := inboxEventLock(ev.Source, ev.ID)
		if !ib.db.keys.TryLock(lock) {
			return inbox.Receipt{Outcome: inbox.InProgress}, nil
		}
		r, err := ib.register(ctx, ev, sum, regs, answer)
		ib.db.keys.Unlock(lock)
		switch {
		case err != nil:
			return inbox.Receipt{}, fmt.Errorf("sqlite: %s: %w", what, err)
		case !r.inserted && try < inboxMaxTries:
			continue // committed by another delivery since the lookup: read it
		case !r.inserted:
			return inbox.Receipt{}, fmt.Errorf("sqlite: %s: the event was neither stored nor found after %d tries", what, try)
		}
		if len(r.conflicted) > 0 {
			ib.db.log.WarnContext(ctx, "inbox: registrations conflict with saved operations",
				"source", ev.Source, "event_id", ev.ID, "keys", r.conflicted)
		}
		return inbox.Receipt{Outcome: inbox.Processed, Answer: answer, Operations: inboxKeys(regs)}, nil
	}
}

func inboxKeys(regs []inbox.Registration) []string {
	keys := make([]string, len(regs))
	for i, r := range regs {
		keys[i] = r.Op.Key
	}
	return keys
}

// lookup reads a stored event; found is false when there is none.
func (ib *Inbox) lookup(ctx context.Context, source, eventID string) (saved inboxSaved, found bool, err error) {
	var (
		body []byte
		ops  string
	)
	err = ib.db.queryRow(ctx, inboxLookupSQL, source, eventID).Scan(
		&saved.bodySHA256, &saved.answer.Status, &saved.answer.ContentType, &body, &ops)
	if errors.Is(err, sql.ErrNoRows) {
		return inboxSaved{}, false, nil
	}
	if err != nil {
		return inboxSaved{}, false, fmt.Errorf("look up the event: %w", err)
	}
	if len(body) > 0 {
		saved.answer.Body = json.RawMessage(body)
	}
	if saved.operations, err = inboxDecodeKeys(ops); err != nil {
		return inboxSaved{}, false, fmt.Errorf("look up the event: %w", err)
	}
	return saved, true, nil
}

func inboxDecodeKeys(s string) ([]string, error) {
	keys := []string{}
	if err := json.Unmarshal([]byte(s), &keys); err != nil {
		return nil, fmt.Errorf("stored operations %q: %w", s, err)
	}
	if keys == nil {
		keys = []string{}
	}
	return keys, nil
}

// known answers a delivery of a stored event: Duplicate without a write, or Conflict
// with the other body recorded.
func (ib *Inbox) known(ctx context.Context, ev inbox.Event, sum string, saved inboxSaved) (inbox.Receipt, error) {
	if saved.bodySHA256 == sum {
		return inbox.Receipt{Outcome: inbox.Duplicate, Answer: saved.answer, Operations: saved.operations}, nil
	}
	body := ev.Body
	if body == nil {
		body = []byte{}
	}
	err := ib.db.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, inboxConflictSQL, ev.Source, ev.ID, ts(ib.db.nowUTC()), sum, body)
		return err
	})
	if err != nil {
		return inbox.Receipt{}, fmt.Errorf("sqlite: inbox: receive %s %q: record the conflict: %w", ev.Source, ev.ID, err)
	}
	ib.db.log.WarnContext(ctx, "inbox: event id reused with another body",
		"source", ev.Source, "event_id", ev.ID, "saved_sha256", saved.bodySHA256, "body_sha256", sum)
	return inbox.Receipt{Outcome: inbox.Conflict, Operations: saved.operations}, nil
}

// register stores the event and, when its row went in, registers the operations (in
// key order), in one write transaction. A wake registration takes its operation's
// key lock when it is free and otherwise records the wake for the claim holding it.
func (ib *Inbox) register(ctx context.Context, ev inbox.Event, sum string, regs []inbox.Registration, answer inbox.Answer) (inboxRegistered, error) {
	sorted := slices.SortedFunc(slices.Values(regs), func(a, b inbox.Registration) int { return strings.Compare(a.Op.Key, b.Op.Key) })

	// A wake takes its operation's key lock if it is free; one a claim holds (a 1C
	// call in flight) is recorded in operation_wakes instead, for the claim's Finish
	// to apply: no delivery waits for 1C.
	held := map[string]bool{}
	for _, r := range sorted {
		if r.Wake && !held[r.Op.Key] && ib.db.keys.TryLock(r.Op.Key) {
			held[r.Op.Key] = true
		}
	}
	defer func() {
		for k := range held {
			ib.db.keys.Unlock(k)
		}
	}()

	ops, err := json.Marshal(inboxKeys(regs))
	if err != nil {
		return inboxRegistered{}, err
	}
	body := ev.Body
	if body == nil {
		body = []byte{}
	}
	var answerBody []byte
	if len(answer.Body) > 0 {
		answerBody = []byte(answer.Body)
	}

	var r inboxRegistered
	err = ib.db.write(ctx, func(tx *sql.Tx) error {
		r = inboxRegistered{}
		now := ib.db.nowUTC()
		received := now
		if !ev.ReceivedAt.IsZero() {
			received = ev.ReceivedAt.UTC().Truncate(time.Microsecond)
		}
		res, err := ib.db.execTx(ctx, tx, inboxInsertSQL, ev.Source, ev.ID, sum, body, ev.ContentType, ts(received),
			answer.Status, answer.ContentType, answerBody, string(ops))
		if err != nil {
			return fmt.Errorf("store the event: %w", err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return fmt.Errorf("store the event: %w", err)
		}
		if n == 0 {
			return nil // committed since the lookup; nothing written
		}
		r.inserted = true
		for _, reg := range sorted {
			if _, err := ib.db.execTx(ctx, tx, inboxIndexSQL, reg.Op.Key, ev.Source, ev.ID); err != nil {
				return fmt.Errorf("index the event under %s: %w", reg.Op.Key, err)
			}
		}
		actor, detail := journal.ActorOf(ctx), inboxEventDetail(ev.Source, ev.ID)
		for _, reg := range sorted {
			if err := ib.registerOne(ctx, tx, reg, now, held[reg.Op.Key], actor, detail, &r); err != nil {
				return fmt.Errorf("register %s: %w", reg.Op.Key, err)
			}
		}
		if ib.beforeCommit != nil {
			return ib.beforeCommit()
		}
		return nil
	})
	if err != nil {
		return inboxRegistered{}, err
	}
	return r, nil
}

// registerOne registers one operation in tx, following the journal's rules: a new key
// is pending and due now; an existing key with another payload is a recorded conflict
// unless IfAbsent; Wake makes an existing operation that is not done due now.
//
// held says whether this delivery holds the operation's key lock; a wake without it
// is recorded in operation_wakes. A new operation records its registered event by
// actor, with detail naming the delivery.
func (ib *Inbox) registerOne(ctx context.Context, tx *sql.Tx, reg inbox.Registration, now time.Time, held bool,
	actor, detail string, r *inboxRegistered) error {
	op := reg.Op
	opSum := order.SHA256Hex(op.Payload)
	at := ts(now)
	dv := derivedOf(op.Key, op.Source, op.ExternalID, string(op.Payload), nil)
	res, err := ib.db.execTx(ctx, tx, inboxRegisterSQL, op.Key, op.Kind, op.Source, op.ExternalID,
		string(op.Payload), opSum, at, at, at, actor, searchPhone(string(op.Payload)),
		dv.orderAt, dv.total, dv.currency, dv.search)
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 1 {
		r.registered = append(r.registered, op.Key)
		return ib.db.addEvent(ctx, tx, op.Key, now, journal.EventRegistered, actor, detail)
	}
	var savedSum, status string
	if err := ib.db.queryRowTx(ctx, tx, inboxSavedOpSQL, op.Key).Scan(&savedSum, &status); err != nil {
		return fmt.Errorf("read the saved operation: %w", err)
	}
	if !reg.IfAbsent && savedSum != opSum {
		if _, err := tx.ExecContext(ctx, inboxOpConflictSQL, op.Key, at, at, opSum, string(op.Payload)); err != nil {
			return fmt.Errorf("record the conflict: %w", err)
		}
		r.conflicted = append(r.conflicted, op.Key)
	}
	switch {
	case reg.Wake && !held:
		if _, err := tx.ExecContext(ctx, deferWakeSQL, op.Key, at); err != nil {
			return fmt.Errorf("record the wake: %w", err)
		}
		r.woken = append(r.woken, op.Key)
	case reg.Wake && status != string(journal.StatusDone):
		if _, err := tx.ExecContext(ctx, inboxWakeSQL, at, at, op.Key); err != nil {
			return fmt.Errorf("wake: %w", err)
		}
		r.woken = append(r.woken, op.Key)
	}
	return nil
}

// deferWakeSQL records a wake for the claim that holds the operation.
const deferWakeSQL = `INSERT INTO operation_wakes (operation_key, at) VALUES (?1, ?2)
ON CONFLICT (operation_key) DO UPDATE SET at = excluded.at`

const inboxColumns = `e.source, e.event_id, e.body_sha256, e.status, e.received_at, coalesce(e.content_type, ''),
	e.answer_status, coalesce(e.answer_content_type, ''), e.answer_body, e.operations,
	(SELECT count(*) FROM inbox_conflicts c WHERE c.source = e.source AND c.event_id = e.event_id)`

type inboxScanner interface{ Scan(dest ...any) error }

// scanInboxRecord reads inboxColumns, then any extra columns into extra.
func scanInboxRecord(row inboxScanner, extra ...any) (inbox.Record, error) {
	var (
		r          inbox.Record
		received   int64
		answerBody []byte
		ops        string
	)
	dest := append([]any{&r.Source, &r.EventID, &r.BodySHA256, &r.Status, &received, &r.ContentType,
		&r.Answer.Status, &r.Answer.ContentType, &answerBody, &ops, &r.Conflicts}, extra...)
	if err := row.Scan(dest...); err != nil {
		return inbox.Record{}, err
	}
	r.ReceivedAt = fromTS(received)
	if len(answerBody) > 0 {
		r.Answer.Body = json.RawMessage(answerBody)
	}
	var err error
	if r.Operations, err = inboxDecodeKeys(ops); err != nil {
		return inbox.Record{}, err
	}
	return r, nil
}

// List returns stored events newest first (received_at descending, then source and
// event id), filtered by source and status, at most Limit (default 100), each with
// the number of conflicting deliveries. Bodies are left out (Show has them).
func (ib *Inbox) List(ctx context.Context, f inbox.Filter) ([]inbox.Record, error) {
	q := `SELECT ` + inboxColumns + ` FROM inbox_events e WHERE 1`
	var args []any
	if f.Source != "" {
		q += ` AND e.source = ?`
		args = append(args, f.Source)
	}
	if err := f.Check(); err != nil {
		return nil, fmt.Errorf("sqlite: inbox: list: %w", err)
	}
	if f.Status != "" {
		q += ` AND e.status = ?`
		args = append(args, f.Status)
	}
	if a := f.After; a != nil {
		at := ts(a.ReceivedAt)
		q += ` AND (e.received_at < ? OR (e.received_at = ? AND (e.source > ? OR (e.source = ? AND e.event_id > ?))))`
		args = append(args, at, at, a.Source, a.Source, a.EventID)
	}
	limit := f.Limit
	if limit <= 0 {
		limit = inboxListLimit
	}
	q += ` ORDER BY e.received_at DESC, e.source, e.event_id LIMIT ?`
	args = append(args, limit)
	rows, err := ib.db.sql.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: inbox: list: %w", err)
	}
	defer rows.Close()
	recs := []inbox.Record{}
	for rows.Next() {
		r, err := scanInboxRecord(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: inbox: list: %w", err)
		}
		recs = append(recs, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: inbox: list: %w", err)
	}
	return recs, nil
}

// inboxEventDetail is the detail of the registered event of an operation an inbox
// delivery brought: which delivery it was.
func inboxEventDetail(source, eventID string) string {
	return "inbox " + source + " " + strconv.Quote(eventID)
}

// ByOperation returns the stored events whose operations hold key, newest first
// (received_at descending, then source and event id), found through
// inbox_event_operations; none (an empty slice) for a key no delivery brought.
func (ib *Inbox) ByOperation(ctx context.Context, key string) ([]inbox.Record, error) {
	rows, err := ib.db.sql.QueryContext(ctx, `SELECT `+inboxColumns+`
		FROM inbox_event_operations x JOIN inbox_events e ON e.source = x.source AND e.event_id = x.event_id
		WHERE x.operation_key = ?
		ORDER BY e.received_at DESC, e.source, e.event_id`, key)
	if err != nil {
		return nil, fmt.Errorf("sqlite: inbox: deliveries of %s: %w", key, err)
	}
	defer rows.Close()
	recs := []inbox.Record{}
	for rows.Next() {
		r, err := scanInboxRecord(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: inbox: deliveries of %s: %w", key, err)
		}
		recs = append(recs, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: inbox: deliveries of %s: %w", key, err)
	}
	return recs, nil
}

// Show returns one event with its body and its conflicting deliveries (by time), read
// in one read transaction; inbox.ErrNotFound for an unknown one.
func (ib *Inbox) Show(ctx context.Context, source, eventID string) (inbox.Detail, error) {
	d, err := ib.show(ctx, source, eventID)
	if errors.Is(err, sql.ErrNoRows) {
		return inbox.Detail{}, fmt.Errorf("sqlite: inbox: show %s %q: %w", source, eventID, inbox.ErrNotFound)
	}
	if err != nil {
		return inbox.Detail{}, fmt.Errorf("sqlite: inbox: show %s %q: %w", source, eventID, err)
	}
	return d, nil
}

func (ib *Inbox) show(ctx context.Context, source, eventID string) (inbox.Detail, error) {
	tx, err := ib.db.sql.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return inbox.Detail{}, err
	}
	defer tx.Rollback()
	var (
		d    inbox.Detail
		body []byte
	)
	row := tx.QueryRowContext(ctx, `SELECT `+inboxColumns+`, e.body FROM inbox_events e WHERE e.source = ? AND e.event_id = ?`, source, eventID)
	if d.Record, err = scanInboxRecord(row, &body); err != nil {
		return inbox.Detail{}, err
	}
	if body == nil {
		body = []byte{}
	}
	d.Body = body
	d.BodyText = string(body)
	rows, err := tx.QueryContext(ctx, `SELECT at, body_sha256, body FROM inbox_conflicts
		WHERE source = ? AND event_id = ? ORDER BY at, id`, source, eventID)
	if err != nil {
		return inbox.Detail{}, err
	}
	defer rows.Close()
	d.Conflicts = []inbox.ConflictRecord{}
	for rows.Next() {
		var (
			c  inbox.ConflictRecord
			at int64
		)
		if err := rows.Scan(&at, &c.BodySHA256, &c.Body); err != nil {
			return inbox.Detail{}, err
		}
		c.At = fromTS(at)
		d.Conflicts = append(d.Conflicts, c)
	}
	if err := rows.Err(); err != nil {
		return inbox.Detail{}, err
	}
	return d, nil
}
