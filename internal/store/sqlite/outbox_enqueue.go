package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/ordersync/ordersync/internal/outbox"
)

// Enqueue writes msgs to the outbox in the caller's transaction, and nothing else: the
// events commit or roll back with whatever else tx holds. tx
// must be a write transaction of a *DB's handle (DB.SQL().BeginTx: the handle begins
// IMMEDIATE). Each message gets the next sequence of its lane (destination, aggregate
// id), a UUID event id when it has none, and the current time as occurred_at when it
// has none. Nothing is written when a message is invalid.
//
// SQLite has no NOTIFY: after tx commits, the caller must call the DB's Notify so that
// a relay of this process wakes at once (otherwise it finds the events at its next
// poll). DB.EnqueueAndCommit does all of it in a transaction of its own.
//
// Messages that share a lane keep the order they are given in; they are written in
// lane order, as PostgreSQL's Enqueue writes them, so ids come out alike on both.
func Enqueue(ctx context.Context, tx *sql.Tx, msgs ...outbox.Message) error {
	if err := enqueueAt(ctx, nil, tx, time.Now().UTC().Truncate(time.Microsecond), msgs); err != nil {
		return fmt.Errorf("sqlite: enqueue: %w", err)
	}
	return nil
}

// EnqueueAndCommit writes msgs in a write transaction of its own, commits it and wakes
// this process's relay: for events that belong to no other transaction (and tests).
// The times it writes come from Config.Now.
func (db *DB) EnqueueAndCommit(ctx context.Context, msgs ...outbox.Message) error {
	if len(msgs) == 0 {
		return nil
	}
	err := db.write(ctx, func(tx *sql.Tx) error { return db.enqueueTx(ctx, tx, msgs) })
	if err != nil {
		return fmt.Errorf("sqlite: enqueue: %w", err)
	}
	db.Notify()
	return nil
}

// enqueueTx writes msgs as outbox rows in tx (the caller's transaction), bumping each
// lane's counter, with the times of Config.Now; the caller notifies (db.Notify) after
// its commit, and wraps the error with where it was.
func (db *DB) enqueueTx(ctx context.Context, tx *sql.Tx, msgs []outbox.Message) error {
	return enqueueAt(ctx, db, tx, db.nowUTC(), msgs)
}

// bumpLaneSQL takes the lane's next sequence. The transaction is SQLite's one writer,
// so no other enqueuer reads the counter until this one commits or rolls back.
const bumpLaneSQL = `
INSERT INTO outbox_lanes (destination, aggregate_id, last_sequence) VALUES (?, ?, 1)
ON CONFLICT (destination, aggregate_id) DO UPDATE SET last_sequence = last_sequence + 1
RETURNING last_sequence`

const insertOutboxSQL = `
INSERT INTO outbox (event_id, destination, aggregate_type, aggregate_id, sequence, event_type, data,
	occurred_at, created_at, next_attempt_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`

// enqueueAt validates msgs and writes them in tx with now as their creation time,
// through db's statement cache when db is known (a verdict's events), else with
// statements prepared for tx alone (Enqueue on a caller's transaction).
func enqueueAt(ctx context.Context, db *DB, tx *sql.Tx, now time.Time, msgs []outbox.Message) error {
	if len(msgs) == 0 {
		return nil
	}
	if tx == nil {
		return fmt.Errorf("no transaction")
	}
	rows, err := outboxRows(now, msgs)
	if err != nil {
		return err
	}
	prepare := func(query string) (*sql.Stmt, error) {
		if db != nil {
			if s := db.stmt(ctx, tx, query); s != nil {
				return s, nil
			}
		}
		return tx.PrepareContext(ctx, query)
	}
	bump, err := prepare(bumpLaneSQL)
	if err != nil {
		return err
	}
	defer bump.Close()
	ins, err := prepare(insertOutboxSQL)
	if err != nil {
		return err
	}
	defer ins.Close()
	for i, r := range rows {
		var seq int64
		if err := bump.QueryRowContext(ctx, r.destination, r.aggregateID).Scan(&seq); err != nil {
			return fmt.Errorf("message %d (%s, %s): lane counter: %w", i, r.destination, r.aggregateID, err)
		}
		if _, err := ins.ExecContext(ctx, r.eventID, r.destination, r.aggregateType, r.aggregateID, seq, r.eventType,
			r.data, ts(r.occurredAt), ts(now), ts(now)); err != nil {
			return fmt.Errorf("message %d (%s, %s): %w", i, r.destination, r.aggregateID, err)
		}
	}
	return nil
}

// outboxRow is one validated message, ready for insertOutboxSQL.
type outboxRow struct {
	eventID, destination, aggregateType, aggregateID, eventType string
	data                                                        string
	occurredAt                                                  time.Time
}

// outboxRows validates msgs and fills in event ids and times; it returns the rows in
// the order to write them (stable by lane).
func outboxRows(now time.Time, msgs []outbox.Message) ([]outboxRow, error) {
	rows := make([]outboxRow, 0, len(msgs))
	ids := make(map[string]bool, len(msgs))
	for i, m := range msgs {
		switch {
		case m.Destination == "":
			return nil, fmt.Errorf("message %d: destination is required", i)
		case m.AggregateID == "":
			return nil, fmt.Errorf("message %d (%s): aggregate id is required", i, m.Destination)
		case m.Type == "":
			return nil, fmt.Errorf("message %d (%s, %s): event type is required", i, m.Destination, m.AggregateID)
		}
		r := outboxRow{
			eventID: m.ID, destination: m.Destination, aggregateType: m.AggregateType,
			aggregateID: m.AggregateID, eventType: m.Type, data: "null",
			occurredAt: m.OccurredAt.UTC().Truncate(time.Microsecond),
		}
		if r.eventID == "" {
			r.eventID = uuid.NewString()
		} else {
			u, err := uuid.Parse(r.eventID)
			if err != nil {
				return nil, fmt.Errorf("message %d (%s, %s): event id %q is not a UUID", i, m.Destination, m.AggregateID, m.ID)
			}
			r.eventID = u.String() // canonical, as PostgreSQL's uuid column prints it
		}
		if ids[r.eventID] {
			return nil, fmt.Errorf("message %d (%s, %s): event id %s is used twice; each destination's copy needs an id of its own (leave it empty to have one assigned)",
				i, m.Destination, m.AggregateID, r.eventID)
		}
		ids[r.eventID] = true
		if len(m.Data) > 0 {
			if !json.Valid(m.Data) {
				return nil, fmt.Errorf("message %d (%s, %s): data is not valid JSON", i, m.Destination, m.AggregateID)
			}
			r.data = string(m.Data)
		}
		if m.OccurredAt.IsZero() {
			r.occurredAt = now
		}
		rows = append(rows, r)
	}
	slices.SortStableFunc(rows, func(a, b outboxRow) int {
		return cmp.Or(cmp.Compare(a.destination, b.destination), cmp.Compare(a.aggregateID, b.aggregateID))
	})
	return rows, nil
}
