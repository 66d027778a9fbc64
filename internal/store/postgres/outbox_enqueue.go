package postgres

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/ordersync/ordersync/internal/outbox"
)

// NotifyChannel is the channel on which Enqueue (and a claim's Finish with messages)
// sends NOTIFY, once per transaction, and on which the Listener listens. NOTIFY is
// delivered at commit and not at all on rollback.
const NotifyChannel = "ordersync_outbox"

// enqueueSQL bumps the lane's counter and inserts the row in one statement. The upsert
// takes the counter row's lock until the transaction ends, so concurrent enqueuers of
// one lane are serialised: sequences are 1, 2, 3… without gaps or duplicates (a
// rollback undoes its bump) and commit in sequence order.
const enqueueSQL = `
WITH lane AS (
	INSERT INTO outbox_lanes AS l (destination, aggregate_id, last_sequence)
	VALUES ($1, $2, 1)
	ON CONFLICT (destination, aggregate_id) DO UPDATE SET last_sequence = l.last_sequence + 1
	RETURNING last_sequence
)
INSERT INTO outbox (event_id, destination, aggregate_type, aggregate_id, sequence, event_type, data,
	occurred_at, created_at, next_attempt_at)
SELECT $3, $1, $4, $2, lane.last_sequence, $5, $6, $7, $8, $8 FROM lane`

const notifySQL = `SELECT pg_notify('` + NotifyChannel + `', '')`

// Enqueue writes msgs to the outbox in the caller's transaction, and nothing else: the
// events commit or roll back with whatever else tx holds.
// Each message gets the next sequence of its lane (destination, aggregate id), a UUID
// event id when it has none, and the current time as occurred_at when it has none; a
// NOTIFY on NotifyChannel wakes the relays when tx commits. One round trip (a
// pipelined batch). Nothing is written when a message is invalid.
//
// Messages that share a lane keep the order they are given in; they are written in
// lane order so that two transactions enqueuing into the same lanes lock the lane
// counters in the same order.
func Enqueue(ctx context.Context, tx pgx.Tx, msgs ...outbox.Message) error {
	if len(msgs) == 0 {
		return nil
	}
	rows, err := prepareMessages(time.Now().UTC().Truncate(time.Microsecond), msgs)
	if err != nil {
		return fmt.Errorf("postgres: enqueue: %w", err)
	}
	b := &pgx.Batch{}
	queueMessages(b, rows)
	br := tx.SendBatch(ctx, b)
	err = readEnqueued(br, len(rows))
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("postgres: enqueue: %w", interpretError(err))
	}
	return nil
}

// enqueueRow is one validated message, ready for enqueueSQL.
type enqueueRow struct {
	eventID, destination, aggregateType, aggregateID, eventType string
	data                                                        []byte
	occurredAt, now                                             time.Time
}

// prepareMessages validates msgs and fills in event ids and times; it returns the rows
// in the order to write them (stable by lane).
func prepareMessages(now time.Time, msgs []outbox.Message) ([]enqueueRow, error) {
	rows := make([]enqueueRow, 0, len(msgs))
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
		r := enqueueRow{
			eventID: m.ID, destination: m.Destination, aggregateType: m.AggregateType,
			aggregateID: m.AggregateID, eventType: m.Type, data: []byte("null"),
			occurredAt: m.OccurredAt.UTC().Truncate(time.Microsecond), now: now,
		}
		if r.eventID == "" {
			r.eventID = uuid.NewString()
		} else {
			u, err := uuid.Parse(r.eventID)
			if err != nil {
				return nil, fmt.Errorf("message %d (%s, %s): event id %q is not a UUID", i, m.Destination, m.AggregateID, m.ID)
			}
			r.eventID = u.String()
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
			r.data = m.Data
		}
		if m.OccurredAt.IsZero() {
			r.occurredAt = now
		}
		rows = append(rows, r)
	}
	slices.SortStableFunc(rows, func(a, b enqueueRow) int {
		return cmp.Or(cmp.Compare(a.destination, b.destination), cmp.Compare(a.aggregateID, b.aggregateID))
	})
	return rows, nil
}

// queueMessages queues one enqueueSQL per row and one NOTIFY.
func queueMessages(b *pgx.Batch, rows []enqueueRow) {
	for _, r := range rows {
		b.Queue(enqueueSQL, r.destination, r.aggregateID, r.eventID, r.aggregateType, r.eventType,
			r.data, r.occurredAt, r.now)
	}
	b.Queue(notifySQL)
}

// readEnqueued reads the results of queueMessages(n rows) from br.
func readEnqueued(br pgx.BatchResults, n int) error {
	for i := range n {
		tag, err := br.Exec()
		if err != nil {
			return err
		}
		if tag.RowsAffected() != 1 {
			return fmt.Errorf("message %d: inserted %d rows, want 1", i, tag.RowsAffected())
		}
	}
	_, err := br.Exec()
	return err
}
