package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/ordersync/ordersync/internal/outbox"
)

// Outbox is the SQLite outbox.Store: what the relay and the operators read and write,
// with the semantics of PostgreSQL's (internal/store/postgres/outbox.go). Events are
// written by Enqueue, in the caller's transaction, or by a journal claim's Finish.
// Every time it writes comes from Config.Now.
//
// Where PostgreSQL locks rows (FOR UPDATE SKIP LOCKED), SQLite has one writer: a claim
// is one write transaction that reads the lane heads and leases them, so no other
// claim sees them in between. The lease and the token still matter as they do on
// PostgreSQL: a relay that stalls past its lease loses its events to the next claim,
// and once another claim has taken an event, the stalled relay's write-back of it
// changes nothing (Complete is fenced by the token). A late write-back that nobody
// overtook still lands, as on PostgreSQL: the destination has the event.
type Outbox struct {
	db *DB

	// The relay's two statements, prepared once per connection (database/sql keeps
	// them per connection and Tx.StmtContext reuses them): parsing the claim costs
	// more than running it over a short backlog.
	mu                  sync.Mutex
	claimStmt, doneStmt *sql.Stmt
}

var _ outbox.Store = (*Outbox)(nil)

// Outbox is the outbox store.
func (db *DB) Outbox() outbox.Store { return &Outbox{db: db} }

// Defaults of the outbox store.
const (
	DefaultClaimLimit      = 100
	DefaultPruneLimit      = 1000
	DefaultOutboxListLimit = 100
	DefaultDisabledReason  = "destination disabled"
)

const outboxColumns = `id, event_id, destination, event_type, aggregate_type, aggregate_id, sequence, data,
	occurred_at, created_at, attempts, next_attempt_at, lease_until, last_error, sent_at, dead_at`

// stmt returns the statement *p of query, prepared on the handle at its first use.
func (o *Outbox) stmt(ctx context.Context, p **sql.Stmt, query string) (*sql.Stmt, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if *p == nil {
		s, err := o.db.sql.PrepareContext(ctx, query)
		if err != nil {
			return nil, err
		}
		*p = s
	}
	return *p, nil
}

// scanOutboxRecord reads a row of outboxColumns.
func scanOutboxRecord(row interface{ Scan(...any) error }) (outbox.Record, error) {
	var (
		r                          outbox.Record
		data                       string
		occurred, created, next    int64
		leaseUntil, sentAt, deadAt sql.NullInt64
	)
	err := row.Scan(&r.ID, &r.EventID, &r.Destination, &r.Type, &r.AggregateType, &r.AggregateID, &r.Sequence, &data,
		&occurred, &created, &r.Attempts, &next, &leaseUntil, &r.LastError, &sentAt, &deadAt)
	if err != nil {
		return outbox.Record{}, err
	}
	r.Data = json.RawMessage(data)
	r.OccurredAt, r.CreatedAt, r.NextAttemptAt = fromTS(occurred), fromTS(created), fromTS(next)
	r.LeaseUntil, r.SentAt, r.DeadAt = nullTS(leaseUntil), nullTS(sentAt), nullTS(deadAt)
	return r, nil
}

func scanOutboxRecords(rows *sql.Rows) ([]outbox.Record, error) {
	defer rows.Close()
	var recs []outbox.Record
	for rows.Next() {
		r, err := scanOutboxRecord(rows)
		if err != nil {
			return nil, err
		}
		recs = append(recs, r)
	}
	return recs, rows.Err()
}

// claimSQL leases a batch of lane heads in one statement. The subquery walks the live
// unsent rows oldest id first (INDEXED BY outbox_due_idx: neither sent nor dead rows
// are in it) and keeps a row when:
//
//   - it is due and not leased, and its destination is neither disabled nor, when the
//     JSON array ?4 is not empty, outside it;
//   - it is its lane's head: no unsent row of its lane (destination, aggregate_id) has
//     a lower sequence (probe p, on outbox_unsent_lane_idx). A dead row counts as
//     unsent, so it blocks its lane, unless its destination is in the JSON array ?3
//     (on_dead: skip). A waiting (failed, not yet due) or leased head therefore holds
//     the rows behind it back: a later row never overtakes it;
//   - no later row of its lane is leased now (probe q, on outbox_leased_idx), so that a
//     lane never has two rows in flight, even when an operator's replay or requeue has
//     put an earlier row back while a later one was out.
//
// Neither probe reads sent rows, however long the lane's history, and the walk stops
// once ?2 rows qualify. The INDEXED BY clauses pin that plan: SQLite picks it without
// them today, but nothing else stops a planner from walking the table in rowid order
// (sent rows included) for the ORDER BY; with them, a claim that cannot use the
// indexes fails to prepare instead of growing slow (TestOutboxClaimPlan checks it).
//
// The statement runs in a write transaction (BEGIN IMMEDIATE), so no other claim or
// write-back interleaves between the walk and the lease: SQLite's single writer does
// what FOR UPDATE SKIP LOCKED does on PostgreSQL. The IN list is computed whole before
// the first row is leased.
//
// The UPDATE leases what the walk found with a fresh token (?6) and counts the attempt.
const claimSQL = `
UPDATE outbox SET lease_until = ?5, claim_token = ?6, attempts = attempts + 1
WHERE id IN (
	SELECT o.id
	FROM outbox AS o INDEXED BY outbox_due_idx
	WHERE o.sent_at IS NULL AND o.dead_at IS NULL AND o.next_attempt_at <= ?1
		AND (o.lease_until IS NULL OR o.lease_until <= ?1)
		AND (json_array_length(?4) = 0 OR o.destination IN (SELECT value FROM json_each(?4)))
		AND o.destination NOT IN (SELECT name FROM outbox_destinations WHERE disabled_at IS NOT NULL)
		AND NOT EXISTS (
			SELECT 1 FROM outbox AS p INDEXED BY outbox_unsent_lane_idx
			WHERE p.destination = o.destination AND p.aggregate_id = o.aggregate_id AND p.sequence < o.sequence
				AND p.sent_at IS NULL
				AND (p.dead_at IS NULL OR p.destination NOT IN (SELECT value FROM json_each(?3))))
		AND NOT EXISTS (
			SELECT 1 FROM outbox AS q INDEXED BY outbox_leased_idx
			WHERE q.destination = o.destination AND q.aggregate_id = o.aggregate_id AND q.sequence > o.sequence
				AND q.lease_until IS NOT NULL AND q.sent_at IS NULL AND q.lease_until > ?1)
	ORDER BY o.id
	LIMIT ?2
)
RETURNING ` + outboxColumns

// Claim writes back req.Complete's results (see Complete), then leases at most
// req.Limit lane heads (default 100) for req.Lease under a fresh token and counts an
// attempt on each; records come oldest first. Both in one write transaction. An empty
// batch has no token.
func (o *Outbox) Claim(ctx context.Context, req outbox.ClaimRequest) (outbox.Claim, error) {
	if req.Lease <= 0 {
		return outbox.Claim{}, fmt.Errorf("sqlite: outbox claim: the lease must be positive, got %v", req.Lease)
	}
	var (
		doneToken string
		done      *sql.Stmt
	)
	if len(req.Complete.Results) > 0 {
		var err error
		if doneToken, err = checkResults(req.Complete.Token, req.Complete.Results); err != nil {
			return outbox.Claim{}, fmt.Errorf("sqlite: outbox claim: write back: %w", err)
		}
		if done, err = o.stmt(ctx, &o.doneStmt, completeSQL); err != nil {
			return outbox.Claim{}, fmt.Errorf("sqlite: outbox claim: %w", err)
		}
	}
	limit := req.Limit
	if limit <= 0 {
		limit = DefaultClaimLimit
	}
	skipDead, err := jsonStrings(req.SkipDead)
	if err != nil {
		return outbox.Claim{}, fmt.Errorf("sqlite: outbox claim: %w", err)
	}
	only, err := jsonStrings(req.Only)
	if err != nil {
		return outbox.Claim{}, fmt.Errorf("sqlite: outbox claim: %w", err)
	}
	stmt, err := o.stmt(ctx, &o.claimStmt, claimSQL)
	if err != nil {
		return outbox.Claim{}, fmt.Errorf("sqlite: outbox claim: %w", err)
	}
	token := uuid.NewString()
	var (
		recs      []outbox.Record
		completed outbox.Completed
	)
	err = o.db.write(ctx, func(tx *sql.Tx) error {
		now := o.db.nowUTC() // read under the writer lock: leases are ordered as claims are
		if done != nil {
			var err error
			if completed, err = completeTx(ctx, tx.StmtContext(ctx, done), now, doneToken, req.Complete.Results); err != nil {
				return fmt.Errorf("write back: %w", err)
			}
		}
		rows, err := tx.StmtContext(ctx, stmt).QueryContext(ctx, ts(now), limit, skipDead, only, ts(now.Add(req.Lease)), token)
		if err != nil {
			return err
		}
		recs, err = scanOutboxRecords(rows)
		return err
	})
	if err != nil {
		return outbox.Claim{}, fmt.Errorf("sqlite: outbox claim: %w", err)
	}
	if len(recs) == 0 {
		return outbox.Claim{Completed: completed}, nil
	}
	slices.SortFunc(recs, func(a, b outbox.Record) int { return cmp.Compare(a.ID, b.ID) })
	return outbox.Claim{Token: token, Records: recs, Completed: completed}, nil
}

// completeSQL writes back one result, only where the claim token still matches and the
// row is unsent (fencing): a relay whose lease expired and whose event another relay
// re-claimed changes nothing. Sent clears a death that came while the event was in
// flight (a DisableDestination): the destination has it. A failure on a row that died
// meanwhile leaves it dead. A released result (never started, or a delivery that made
// progress and goes on later) clears the lease and gives back the attempt the claim
// counted; it is due at its next attempt time when it has one (?6 is NULL when it
// has not: the row keeps its own) and records its error when it has one.
// ?3 sent, ?4 dead, ?5 error, ?6 next attempt, ?7 now, ?8 released.
const completeSQL = `
UPDATE outbox SET
	sent_at = CASE WHEN ?3 THEN ?7 END,
	dead_at = CASE WHEN ?3 THEN NULL WHEN ?4 THEN coalesce(dead_at, ?7) ELSE dead_at END,
	last_error = CASE WHEN ?3 OR (?8 AND ?5 = '') THEN last_error ELSE ?5 END,
	next_attempt_at = CASE WHEN ?3 OR ?4 THEN next_attempt_at ELSE coalesce(?6, next_attempt_at) END,
	attempts = CASE WHEN ?8 AND attempts > 0 THEN attempts - 1 ELSE attempts END,
	lease_until = NULL
WHERE id = ?1 AND claim_token = ?2 AND sent_at IS NULL`

// Complete writes back results under the claim's token in one write transaction and
// returns how many rows it changed: fewer than len(results) when another claim has
// taken some over. A failed result with no NextAttemptAt is due now; a released one
// with no NextAttemptAt keeps its next attempt time (due at once) and, with no Error,
// its last error.
func (o *Outbox) Complete(ctx context.Context, token string, results []outbox.Result) (int, error) {
	if len(results) == 0 {
		return 0, nil
	}
	token, err := checkResults(token, results)
	if err != nil {
		return 0, fmt.Errorf("sqlite: outbox complete: %w", err)
	}
	done, err := o.stmt(ctx, &o.doneStmt, completeSQL)
	if err != nil {
		return 0, fmt.Errorf("sqlite: outbox complete: %w", err)
	}
	var c outbox.Completed
	err = o.db.write(ctx, func(tx *sql.Tx) error {
		var err error
		c, err = completeTx(ctx, tx.StmtContext(ctx, done), o.db.nowUTC(), token, results)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("sqlite: outbox complete: %w", err)
	}
	return c.Rows, nil
}

// checkResults checks a write-back and returns its token in canonical form.
func checkResults(token string, results []outbox.Result) (string, error) {
	u, err := uuid.Parse(token)
	if err != nil {
		return "", fmt.Errorf("claim token %q is not a UUID", token)
	}
	seen := make(map[int64]bool, len(results))
	for _, r := range results {
		if seen[r.ID] {
			return "", fmt.Errorf("event %d is in the results twice", r.ID)
		}
		seen[r.ID] = true
		if (r.Sent && r.Dead) || (r.Released && (r.Sent || r.Dead)) {
			return "", fmt.Errorf("event %d has two outcomes (sent %v, dead %v, released %v)", r.ID, r.Sent, r.Dead, r.Released)
		}
	}
	return u.String(), nil
}

// completeTx runs completeSQL (stmt, in the caller's write transaction) for each of
// the checked results and counts the rows it changed.
func completeTx(ctx context.Context, stmt *sql.Stmt, now time.Time, token string, results []outbox.Result) (outbox.Completed, error) {
	var c outbox.Completed
	for _, r := range results {
		var next *int64 // released with no time: NULL, the row keeps its own
		switch {
		case !r.NextAttemptAt.IsZero():
			us := ts(r.NextAttemptAt)
			next = &us
		case !r.Released:
			us := ts(now)
			next = &us
		}
		res, err := stmt.ExecContext(ctx, r.ID, token, r.Sent, r.Dead, r.Error, next, ts(now), r.Released)
		if err != nil {
			return outbox.Completed{}, fmt.Errorf("event %d: %w", r.ID, err)
		}
		k, err := res.RowsAffected()
		if err != nil {
			return outbox.Completed{}, err
		}
		c.Rows += int(k)
		if r.Sent {
			c.Sent += int(k)
		}
	}
	return c, nil
}

// DisableDestination records that destination is gone and marks its unsent events
// dead with reason (default "destination disabled"), leased ones included: their
// relays' write-backs still land, a success clearing the death. Claims skip the
// destination until Requeue re-enables it. It returns how many events died. One
// write transaction.
func (o *Outbox) DisableDestination(ctx context.Context, destination, reason string) (int, error) {
	if destination == "" {
		return 0, errors.New("sqlite: outbox disable: destination is required")
	}
	if reason == "" {
		reason = DefaultDisabledReason
	}
	var n int64
	err := o.db.write(ctx, func(tx *sql.Tx) error {
		now := ts(o.db.nowUTC())
		if _, err := tx.ExecContext(ctx, `
			INSERT INTO outbox_destinations (name, disabled_at, reason) VALUES (?1, ?2, ?3)
			ON CONFLICT (name) DO UPDATE SET disabled_at = coalesce(disabled_at, excluded.disabled_at), reason = excluded.reason`,
			destination, now, reason); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `
			UPDATE outbox SET dead_at = ?2, last_error = ?3, lease_until = NULL
			WHERE destination = ?1 AND sent_at IS NULL AND dead_at IS NULL`, destination, now, reason)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("sqlite: outbox disable %s: %w", destination, err)
	}
	return int(n), nil
}

// DisabledDestinations maps each disabled destination to the reason it was disabled.
func (o *Outbox) DisabledDestinations(ctx context.Context) (map[string]string, error) {
	rows, err := o.db.sql.QueryContext(ctx, `SELECT name, reason FROM outbox_destinations WHERE disabled_at IS NOT NULL`)
	if err != nil {
		return nil, fmt.Errorf("sqlite: outbox disabled destinations: %w", err)
	}
	defer rows.Close()
	m := map[string]string{}
	for rows.Next() {
		var name, reason string
		if err := rows.Scan(&name, &reason); err != nil {
			return nil, fmt.Errorf("sqlite: outbox disabled destinations: %w", err)
		}
		m[name] = reason
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: outbox disabled destinations: %w", err)
	}
	return m, nil
}

// Prune deletes at most limit (default 1000) events sent before sentBefore, oldest
// first, and returns how many. Unsent and dead events are never pruned; lane counters
// stay, so a lane never reuses a sequence. One short write transaction per call: the
// relay prunes in bounded batches.
func (o *Outbox) Prune(ctx context.Context, sentBefore time.Time, limit int) (int, error) {
	if limit <= 0 {
		limit = DefaultPruneLimit
	}
	var n int64
	err := o.db.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM outbox WHERE id IN (
			SELECT id FROM outbox WHERE sent_at < ?1 ORDER BY sent_at LIMIT ?2)`, ts(sentBefore), limit)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("sqlite: outbox prune: %w", err)
	}
	return int(n), nil
}

// statusSQL counts per destination, straight from the table (one scan of it), and adds
// the disabled destinations, events or not.
const statusSQL = `
WITH per AS (
	SELECT destination,
		count(*) FILTER (WHERE sent_at IS NULL AND dead_at IS NULL AND (lease_until IS NULL OR lease_until <= ?1)) AS pending,
		count(*) FILTER (WHERE sent_at IS NULL AND dead_at IS NULL AND lease_until > ?1) AS in_flight,
		count(*) FILTER (WHERE sent_at IS NULL AND dead_at IS NULL AND attempts > ?2) AS struggling,
		count(*) FILTER (WHERE sent_at IS NULL AND dead_at IS NOT NULL) AS dead,
		count(*) FILTER (WHERE sent_at IS NOT NULL) AS sent,
		min(created_at) FILTER (WHERE sent_at IS NULL AND dead_at IS NULL) AS oldest
	FROM outbox
	GROUP BY destination
), disabled AS (
	SELECT name, reason FROM outbox_destinations WHERE disabled_at IS NOT NULL
)
SELECT coalesce(per.destination, disabled.name) AS name, coalesce(pending, 0), coalesce(in_flight, 0),
	coalesce(struggling, 0), coalesce(dead, 0), coalesce(sent, 0), oldest, disabled.reason
FROM per FULL JOIN disabled ON disabled.name = per.destination
ORDER BY name`

// Status reports each destination that has events or is disabled, by name: pending
// (unsent, not dead, not leased now — waiting or due), in flight (leased now),
// struggling (unsent and not dead, with more than struggling attempts), dead, sent
// (not yet pruned), the lag (age of the oldest unsent event that is not dead) and the
// reason it was disabled.
func (o *Outbox) Status(ctx context.Context, struggling int) ([]outbox.DestinationStatus, error) {
	now := o.db.nowUTC()
	rows, err := o.db.sql.QueryContext(ctx, statusSQL, ts(now), struggling)
	if err != nil {
		return nil, fmt.Errorf("sqlite: outbox status: %w", err)
	}
	defer rows.Close()
	var st []outbox.DestinationStatus
	for rows.Next() {
		var (
			s        outbox.DestinationStatus
			oldest   sql.NullInt64
			disabled sql.NullString
		)
		if err := rows.Scan(&s.Destination, &s.Pending, &s.InFlight, &s.Struggling, &s.Dead, &s.Sent, &oldest, &disabled); err != nil {
			return nil, fmt.Errorf("sqlite: outbox status: %w", err)
		}
		if t := nullTS(oldest); t != nil && now.After(*t) {
			s.Lag = now.Sub(*t)
		}
		if disabled.Valid {
			s.Disabled = cmp.Or(disabled.String, DefaultDisabledReason)
		}
		st = append(st, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: outbox status: %w", err)
	}
	return st, nil
}

// List returns records newest first (by id), filtered, at most f.Limit (default 100).
func (o *Outbox) List(ctx context.Context, f outbox.ListFilter) ([]outbox.Record, error) {
	q := `SELECT ` + outboxColumns + ` FROM outbox WHERE true`
	var args []any
	if f.Dead {
		q += ` AND dead_at IS NOT NULL AND sent_at IS NULL`
	}
	if f.Unsent {
		q += ` AND sent_at IS NULL`
	}
	if f.AggregateID != "" {
		args = append(args, f.AggregateID)
		q += ` AND aggregate_id = ?`
	}
	if f.Destination != "" {
		args = append(args, f.Destination)
		q += ` AND destination = ?`
	}
	if f.BeforeID > 0 {
		args = append(args, f.BeforeID)
		q += ` AND id < ?`
	}
	limit := f.Limit
	if limit <= 0 {
		limit = DefaultOutboxListLimit
	}
	args = append(args, limit)
	q += ` ORDER BY id DESC LIMIT ?`
	rows, err := o.db.sql.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: outbox list: %w", err)
	}
	recs, err := scanOutboxRecords(rows)
	if err != nil {
		return nil, fmt.Errorf("sqlite: outbox list: %w", err)
	}
	return recs, nil
}

// Requeue makes the dead events among ids (every dead event when allDead) due now,
// with attempts, last error and lease cleared, and re-enables their destinations, in
// one write transaction. It returns how many events it requeued; events that are not
// dead are left alone. When an id names no event, nothing is requeued and the error
// wraps outbox.ErrNotFound with the unknown ids.
func (o *Outbox) Requeue(ctx context.Context, ids []int64, allDead bool) (int, error) {
	if len(ids) == 0 && !allDead {
		return 0, nil
	}
	idsJSON, err := json.Marshal(nonNilIDs(ids))
	if err != nil {
		return 0, fmt.Errorf("sqlite: outbox requeue: %w", err)
	}
	var (
		n       int
		missing []int64
	)
	err = o.db.write(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `
			SELECT DISTINCT m.value FROM json_each(?1) AS m
			WHERE NOT EXISTS (SELECT 1 FROM outbox WHERE outbox.id = m.value)
			ORDER BY m.value`, string(idsJSON))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				return err
			}
			missing = append(missing, id)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if len(missing) > 0 {
			return nil
		}
		rows, err = tx.QueryContext(ctx, `
			UPDATE outbox SET dead_at = NULL, last_error = '', attempts = 0, next_attempt_at = ?1,
				lease_until = NULL, claim_token = NULL
			WHERE dead_at IS NOT NULL AND sent_at IS NULL AND (?2 OR id IN (SELECT value FROM json_each(?3)))
			RETURNING destination`, ts(o.db.nowUTC()), allDead, string(idsJSON))
		if err != nil {
			return err
		}
		defer rows.Close()
		dests := map[string]bool{}
		for rows.Next() {
			var d string
			if err := rows.Scan(&d); err != nil {
				return err
			}
			dests[d] = true
			n++
		}
		if err := rows.Err(); err != nil {
			return err
		}
		for d := range dests {
			if _, err := tx.ExecContext(ctx, `UPDATE outbox_destinations SET disabled_at = NULL, reason = ''
				WHERE disabled_at IS NOT NULL AND name = ?`, d); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("sqlite: outbox requeue: %w", err)
	}
	if len(missing) > 0 {
		return 0, fmt.Errorf("sqlite: outbox requeue: %w: %s", outbox.ErrNotFound, joinOutboxIDs(missing))
	}
	return n, nil
}

// Replay makes every sent event of the aggregate (at one destination, or at all when
// destination is empty) unsent and due now with its attempts reset, keeping its event
// id; the lanes deliver them again in sequence order. Unsent events are left as they
// are. It returns how many events it replayed; outbox.ErrNotFound when the aggregate
// has no events there. One write transaction.
func (o *Outbox) Replay(ctx context.Context, aggregateID, destination string) (int, error) {
	if aggregateID == "" {
		return 0, errors.New("sqlite: outbox replay: aggregate id is required")
	}
	var known, n int64
	err := o.db.write(ctx, func(tx *sql.Tx) error {
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM outbox
			WHERE aggregate_id = ?1 AND (?2 = '' OR destination = ?2)`, aggregateID, destination).Scan(&known); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `
			UPDATE outbox SET sent_at = NULL, attempts = 0, next_attempt_at = ?3, lease_until = NULL,
				claim_token = NULL, last_error = ''
			WHERE aggregate_id = ?1 AND (?2 = '' OR destination = ?2) AND sent_at IS NOT NULL`,
			aggregateID, destination, ts(o.db.nowUTC()))
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("sqlite: outbox replay %s: %w", aggregateID, err)
	}
	if known == 0 {
		where := ""
		if destination != "" {
			where = " at " + destination
		}
		return 0, fmt.Errorf("sqlite: outbox replay: %w: aggregate %s has no events%s", outbox.ErrNotFound, aggregateID, where)
	}
	return int(n), nil
}

// jsonStrings is a list as the JSON array text that json_each reads ("[]" for none).
func jsonStrings(s []string) (string, error) {
	if len(s) == 0 {
		return "[]", nil
	}
	b, err := json.Marshal(s)
	return string(b), err
}

func nonNilIDs(ids []int64) []int64 {
	if ids == nil {
		return []int64{}
	}
	return ids
}

func joinOutboxIDs(ids []int64) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.FormatInt(id, 10)
	}
	return strings.Join(s, ", ")
}
