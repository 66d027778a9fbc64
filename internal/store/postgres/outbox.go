package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/ordersync/ordersync/internal/outbox"
)

// Outbox is the PostgreSQL outbox.Store: what the relay and the operators read and
// write. Events are written by Enqueue, in the caller's transaction, or by a journal
// claim's Finish. Every time it writes comes from Config.Now.
type Outbox struct {
	db *DB
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

func scanRecord(row pgx.Row) (outbox.Record, error) {
	var (
		r    outbox.Record
		data []byte
	)
	err := row.Scan(&r.ID, &r.EventID, &r.Destination, &r.Type, &r.AggregateType, &r.AggregateID, &r.Sequence, &data,
		&r.OccurredAt, &r.CreatedAt, &r.Attempts, &r.NextAttemptAt, &r.LeaseUntil, &r.LastError, &r.SentAt, &r.DeadAt)
	if err != nil {
		return outbox.Record{}, err
	}
	r.Data = data
	r.OccurredAt = r.OccurredAt.UTC()
	r.CreatedAt = r.CreatedAt.UTC()
	r.NextAttemptAt = r.NextAttemptAt.UTC()
	for _, t := range []**time.Time{&r.LeaseUntil, &r.SentAt, &r.DeadAt} {
		if *t != nil {
			u := (*t).UTC()
			*t = &u
		}
	}
	return r, nil
}

func scanRecords(rows pgx.Rows) ([]outbox.Record, error) {
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (outbox.Record, error) { return scanRecord(row) })
}

// claimSQL leases a batch of lane heads in one statement (so in one transaction and
// one round trip). locked walks the unsent rows oldest id first (partial index
// outbox_unsent_id_idx) and keeps a row when:
//
//   - it is due, not dead, not leased, and its destination is neither disabled nor,
//     when $5 is not empty, outside $5;
//   - it is its lane's head: no unsent row of its lane (destination, aggregate_id) has
//     a lower sequence (probe p, on outbox_unsent_lane_idx). A dead row counts as
//     unsent, so it blocks its lane, unless its destination is in $4 (on_dead: skip).
//     A waiting (failed, not yet due) or leased head therefore holds the rows behind
//     it back: a later row never overtakes it;
//   - no later row of its lane is leased now (probe q, on outbox_unsent_lane_idx: the
//     lane's later unsent rows, their leases read from the table), so that a lane never
//     has two rows in flight, even when an operator's replay or requeue has put an
//     earlier row back while a later one was out. q is a scalar subquery, run per row
//     on the lane's index: as a NOT EXISTS the planner, expecting one leased row in
//     the whole table, materialised a Seq Scan of the outbox once per claim (11.7 ms
//     at a backlog of 100k unsent rows; 0.85 ms this way).
//
// Neither probe reads sent rows, however long the lane's history, and the walk stops
// once $2 rows are locked FOR UPDATE SKIP LOCKED (rows skipped do not count).
//
// No index names a column the UPDATE writes (lease_until, claim_token, attempts),
// and the table leaves room in its pages (fillfactor, migration 0010), so the lease is
// a HOT update: no index entries, a fraction of the WAL.
//
// Concurrency (READ COMMITTED). A row another relay is claiming or completing right
// now is skipped. A row whose claim or write-back committed after this statement's
// snapshot is locked in its newest version and its own conditions are evaluated again,
// so a row just leased or sent by another relay drops out. Head-ness is decided on the
// snapshot: a lane's next row becomes its head only once the row before it is sent
// (committed), and a sent row is never claimed; so two relays that both see a lane
// see the same head, and only one of them locks it.
//
// Leases are reckoned on the database's clock (now()), so replicas whose clocks
// disagree never shorten each other's leases; $1 and $3 replace it only when the
// store runs on an injected clock (tests).
//
// The UPDATE leases what was locked with a fresh token and counts the attempt. It
// finds the rows through an id array, not a join: pgx prepares the statement, and
// after five runs PostgreSQL may use a generic plan, which estimated the CTE's size
// from LIMIT $2 and hash-joined it against a sequential scan of the whole table (sent
// rows and dead tuples included): 10 ms a claim over 2,000 unsent rows instead of
// 0.6. An id array is an index scan on the primary key under every plan.
const claimSQL = `
WITH locked AS (
	SELECT o.id AS locked_id
	FROM outbox o
	WHERE o.sent_at IS NULL AND o.dead_at IS NULL AND o.next_attempt_at <= coalesce($1, now())
		AND (o.lease_until IS NULL OR o.lease_until <= coalesce($1, now()))
		AND (cardinality($5::text[]) = 0 OR o.destination = ANY ($5::text[]))
		AND o.destination NOT IN (SELECT name FROM outbox_destinations WHERE disabled_at IS NOT NULL)
		AND NOT EXISTS (
			SELECT 1 FROM outbox p
			WHERE p.destination = o.destination AND p.aggregate_id = o.aggregate_id AND p.sequence < o.sequence
				AND p.sent_at IS NULL AND (p.dead_at IS NULL OR p.destination <> ALL ($4::text[])))
		AND coalesce((
			SELECT max(q.lease_until) FROM outbox q
			WHERE q.destination = o.destination AND q.aggregate_id = o.aggregate_id AND q.sequence > o.sequence
				AND q.sent_at IS NULL), '-infinity') <= coalesce($1, now())
	ORDER BY o.id
	LIMIT $2
	FOR UPDATE OF o SKIP LOCKED
)
UPDATE outbox SET lease_until = coalesce($3, now() + $7::interval), claim_token = $6, attempts = attempts + 1
WHERE id = ANY (ARRAY(SELECT locked_id FROM locked))
RETURNING ` + outboxColumns

// Claim writes back req.Complete's results (see Complete), then leases at most
// req.Limit lane heads (default 100) for req.Lease under a fresh token and counts an
// attempt on each; records come oldest first. Both in one transaction, in one round
// trip: the claim sees the lanes the write-back advanced. An empty batch has no token.
func (o *Outbox) Claim(ctx context.Context, req outbox.ClaimRequest) (outbox.Claim, error) {
	if req.Lease <= 0 {
		return outbox.Claim{}, fmt.Errorf("postgres: outbox claim: the lease must be positive, got %v", req.Lease)
	}
	limit := req.Limit
	if limit <= 0 {
		limit = DefaultClaimLimit
	}
	now := o.db.nowUTC()
	var done [][]any
	if len(req.Complete.Results) > 0 {
		var err error
		if done, err = completeArgs(now, req.Complete.Token, req.Complete.Results); err != nil {
			return outbox.Claim{}, fmt.Errorf("postgres: outbox claim: write back: %w", err)
		}
	}
	token := uuid.NewString()
	var clock, leaseUntil *time.Time // nil: the database's clock
	if o.db.injectedClock {
		until := now.Add(req.Lease)
		clock, leaseUntil = &now, &until
	}
	// The walk in id order that stops after $2 heads is the plan wanted. Without
	// statistics (a fresh or freshly filled table) the planner estimates one unsent
	// row, reads every unsent row through the lane index, probes each, and sorts: 7 ms
	// over 2,000 rows, growing with the backlog. Disabling sorts for this transaction
	// leaves it the id-ordered walk. BEGIN, SET LOCAL, the write-back, the claim and
	// COMMIT travel in one round trip.
	// (BEGIN is queued as a plain query, not with Batch.BeginTx: the pool keeps a
	// BeginTx batch's connection until its Tx is ended, and this batch commits itself.
	// Should the batch fail, the pool discards the connection left in a transaction.)
	//
	// The transaction commits without waiting for its WAL to reach the disk
	// (synchronous_commit off, for it alone): it holds only the relay's bookkeeping,
	// leases and results, and delivery is at least once. A server that crashes may
	// forget the last fraction of a second of them; those events are then claimed and
	// delivered again, and the receivers dedupe on the event id, as after a relay that
	// dies between a delivery and its write-back. The events themselves are written
	// with the operation's verdict, whose commit waits as every other does. The wait
	// was about 1 ms of a round's 9 (no-op relay, 50k events, eight runs each:
	// 15.7k -> 17.0k events/s, +8%).
	b := &pgx.Batch{}
	b.Queue(`BEGIN`)
	b.Queue(`SET LOCAL enable_sort = off`)
	b.Queue(`SET LOCAL synchronous_commit = off`)
	queueComplete(b, done)
	b.Queue(claimSQL, clock, limit, leaseUntil, nonNil(req.SkipDead), nonNil(req.Only), token, req.Lease)
	b.Queue(`COMMIT`)
	br := o.db.pool.SendBatch(ctx, b)
	var completed outbox.Completed
	recs, err := func() ([]outbox.Record, error) {
		for range 3 { // BEGIN, SET LOCAL, SET LOCAL
			if _, err := br.Exec(); err != nil {
				return nil, err
			}
		}
		var err error
		if completed, err = readCompleted(br, done); err != nil {
			return nil, err
		}
		rows, err := br.Query()
		if err != nil {
			return nil, err
		}
		recs, err := scanRecords(rows)
		if err != nil {
			return nil, err
		}
		_, err = br.Exec()
		return recs, err
	}()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return outbox.Claim{}, fmt.Errorf("postgres: outbox claim: %w", interpretError(err))
	}
	if len(recs) == 0 {
		return outbox.Claim{Completed: completed}, nil
	}
	slices.SortFunc(recs, func(a, b outbox.Record) int { return cmp.Compare(a.ID, b.ID) })
	return outbox.Claim{Token: token, Records: recs, Completed: completed}, nil
}

// completeSQL writes back a batch of results, each only where the claim token still
// matches and the row is unsent (fencing): a relay whose lease expired and whose
// event another relay re-claimed changes nothing. A released result (never started,
// or a delivery that made progress and goes on later) clears the lease and gives back
// the attempt the claim counted; it is due at its next time when it has one (r.next
// is NULL when it has not: the row keeps its own) and records its error when it has
// one (else the row keeps its last error). Sent clears a death that came while
// the event was in flight (a DisableDestination): the destination has it. A failure
// on a row that died meanwhile leaves it dead.
//
// The rows are found by id ($3, an index scan), and each row finds its result by
// its position in $3 (array_position): there is no join for the planner to choose.
// A join of the unnested results against the table was planned with the table as the
// outer side, reading the results again for every row (100 × 100 result rows: 5 of a
// round's 6 ms at a backlog of 50,000), and without "o.id = ANY ($3)" as a walk over
// every unsent row filtered by token. TestClaimPlans holds both off. (array_position
// makes the statement quadratic in its results: see completeChunk.) It returns how
// many rows it changed and how many of them it marked sent.
const completeSQL = `
WITH done AS (
	UPDATE outbox o SET (sent_at, dead_at, last_error, next_attempt_at, attempts, lease_until) = (
		SELECT CASE WHEN r.sent THEN $2::timestamptz END,
			CASE WHEN r.sent THEN NULL WHEN r.dead THEN coalesce(o.dead_at, $2) ELSE o.dead_at END,
			CASE WHEN r.sent OR (r.released AND r.error = '') THEN o.last_error ELSE r.error END,
			CASE WHEN r.sent OR r.dead THEN o.next_attempt_at ELSE coalesce(r.next, o.next_attempt_at) END,
			CASE WHEN r.released AND o.attempts > 0 THEN o.attempts - 1 ELSE o.attempts END,
			NULL::timestamptz
		FROM (SELECT ($4::bool[])[i], ($5::bool[])[i], ($6::text[])[i], ($7::timestamptz[])[i], ($8::bool[])[i]
			FROM (SELECT array_position($3::bigint[], o.id)) AS p (i)) AS r (sent, dead, error, next, released))
	WHERE o.id = ANY ($3::bigint[]) AND o.claim_token = $1 AND o.sent_at IS NULL
	RETURNING o.sent_at IS NOT NULL AS sent
)
SELECT count(*), count(*) FILTER (WHERE sent) FROM done`

// Complete writes back results under the claim's token in one round trip (a
// statement for each completeChunk of them) and returns how many rows it changed:
// fewer than len(results) when another claim has taken some over. A failed result with no NextAttemptAt is due now; a
// released one with no NextAttemptAt keeps its next attempt time (due at once) and,
// with no Error, its last error. The relay writes most of its results with its next
// Claim instead (ClaimRequest.Complete).
func (o *Outbox) Complete(ctx context.Context, token string, results []outbox.Result) (int, error) {
	if len(results) == 0 {
		return 0, nil
	}
	chunks, err := completeArgs(o.db.nowUTC(), token, results)
	if err != nil {
		return 0, fmt.Errorf("postgres: outbox complete: %w", err)
	}
	b := &pgx.Batch{}
	queueComplete(b, chunks)
	br := o.db.pool.SendBatch(ctx, b)
	done, err := readCompleted(br, chunks)
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, fmt.Errorf("postgres: outbox complete: %w", interpretError(err))
	}
	return done.Rows, nil
}

// queueComplete queues completeSQL once for each chunk of completeArgs; readCompleted
// reads their counts back from the batch, added up.
func queueComplete(b *pgx.Batch, chunks [][]any) {
	for _, args := range chunks {
		b.Queue(completeSQL, args...)
	}
}

func readCompleted(br pgx.BatchResults, chunks [][]any) (outbox.Completed, error) {
	var done outbox.Completed
	for range chunks {
		var rows, sent int
		if err := br.QueryRow().Scan(&rows, &sent); err != nil {
			return outbox.Completed{}, err
		}
		done.Rows, done.Sent = done.Rows+rows, done.Sent+sent
	}
	return done, nil
}

// completeChunk is the most results one completeSQL statement writes back: its
// array_position lookups cost n²/2 comparisons for n results, 125,000 at 500, and a
// larger batch is written as several statements in the same round trip.
const completeChunk = 500

// completeArgs checks results and turns them into completeSQL's arguments, one set
// for each completeChunk of them.
func completeArgs(now time.Time, token string, results []outbox.Result) ([][]any, error) {
	if _, err := uuid.Parse(token); err != nil {
		return nil, fmt.Errorf("claim token %q is not a UUID", token)
	}
	n := len(results)
	var (
		ids    = make([]int64, 0, n)
		rel    = make([]bool, 0, n)
		sent   = make([]bool, 0, n)
		dead   = make([]bool, 0, n)
		errs   = make([]string, 0, n)
		nexts  = make([]*time.Time, 0, n)
		seenID = make(map[int64]bool, n)
	)
	for _, r := range results {
		if seenID[r.ID] {
			return nil, fmt.Errorf("event %d is in the results twice", r.ID)
		}
		seenID[r.ID] = true
		if (r.Sent && r.Dead) || (r.Released && (r.Sent || r.Dead)) {
			return nil, fmt.Errorf("event %d has two outcomes (sent %v, dead %v, released %v)", r.ID, r.Sent, r.Dead, r.Released)
		}
		rel = append(rel, r.Released)
		var next *time.Time // released with no time: NULL, the row keeps its own
		switch {
		case !r.NextAttemptAt.IsZero():
			t := r.NextAttemptAt.UTC()
			next = &t
		case !r.Released:
			next = &now
		}
		ids, sent, dead, errs, nexts = append(ids, r.ID), append(sent, r.Sent), append(dead, r.Dead), append(errs, r.Error), append(nexts, next)
	}
	var chunks [][]any
	for lo := 0; lo < n; lo += completeChunk {
		hi := min(lo+completeChunk, n)
		chunks = append(chunks, []any{token, now, ids[lo:hi], sent[lo:hi], dead[lo:hi], errs[lo:hi], nexts[lo:hi], rel[lo:hi]})
	}
	return chunks, nil
}

const disableSQL = `
WITH disabled AS (
	INSERT INTO outbox_destinations AS d (name, disabled_at, reason) VALUES ($1, $2, $3)
	ON CONFLICT (name) DO UPDATE SET disabled_at = coalesce(d.disabled_at, excluded.disabled_at), reason = excluded.reason
), killed AS (
	UPDATE outbox SET dead_at = $2, last_error = $3, lease_until = NULL
	WHERE destination = $1 AND sent_at IS NULL AND dead_at IS NULL
	RETURNING 1
)
SELECT count(*) FROM killed`

// DisableDestination records that destination is gone and marks its unsent events
// dead with reason (default "destination disabled"), leased ones included: their
// relays' write-backs still land, a success clearing the death. Claims skip the
// destination until Requeue re-enables it. It returns how many events died. One round
// trip.
func (o *Outbox) DisableDestination(ctx context.Context, destination, reason string) (int, error) {
	if destination == "" {
		return 0, errors.New("postgres: outbox disable: destination is required")
	}
	if reason == "" {
		reason = DefaultDisabledReason
	}
	var n int
	if err := o.db.pool.QueryRow(ctx, disableSQL, destination, o.db.nowUTC(), reason).Scan(&n); err != nil {
		return 0, fmt.Errorf("postgres: outbox disable %s: %w", destination, interpretError(err))
	}
	return n, nil
}

// DisabledDestinations maps each disabled destination to the reason it was disabled.
func (o *Outbox) DisabledDestinations(ctx context.Context) (map[string]string, error) {
	rows, err := o.db.pool.Query(ctx, `SELECT name, reason FROM outbox_destinations WHERE disabled_at IS NOT NULL`)
	if err != nil {
		return nil, fmt.Errorf("postgres: outbox disabled destinations: %w", interpretError(err))
	}
	m := map[string]string{}
	var name, reason string
	_, err = pgx.ForEachRow(rows, []any{&name, &reason}, func() error {
		m[name] = reason
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: outbox disabled destinations: %w", interpretError(err))
	}
	return m, nil
}

// Prune deletes at most limit (default 1000) events sent before sentBefore, oldest
// first, and returns how many. Unsent and dead events are never pruned; lane counters
// stay, so a lane never reuses a sequence.
func (o *Outbox) Prune(ctx context.Context, sentBefore time.Time, limit int) (int, error) {
	if limit <= 0 {
		limit = DefaultPruneLimit
	}
	tag, err := o.db.pool.Exec(ctx, `DELETE FROM outbox WHERE id IN (
		SELECT id FROM outbox WHERE sent_at < $1 ORDER BY sent_at LIMIT $2)`, sentBefore.UTC(), limit)
	if err != nil {
		return 0, fmt.Errorf("postgres: outbox prune: %w", interpretError(err))
	}
	return int(tag.RowsAffected()), nil
}

// statusSQL counts per destination, straight from the table (one scan of it).
const statusSQL = `
WITH per AS (
	SELECT destination,
		count(*) FILTER (WHERE sent_at IS NULL AND dead_at IS NULL AND (lease_until IS NULL OR lease_until <= $1)) AS pending,
		count(*) FILTER (WHERE sent_at IS NULL AND dead_at IS NULL AND lease_until > $1) AS in_flight,
		count(*) FILTER (WHERE sent_at IS NULL AND dead_at IS NULL AND attempts > $2) AS struggling,
		count(*) FILTER (WHERE sent_at IS NULL AND dead_at IS NOT NULL) AS dead,
		count(*) FILTER (WHERE sent_at IS NOT NULL) AS sent,
		min(created_at) FILTER (WHERE sent_at IS NULL AND dead_at IS NULL) AS oldest
	FROM outbox
	GROUP BY destination
), disabled AS (
	SELECT name, reason FROM outbox_destinations WHERE disabled_at IS NOT NULL
)
SELECT coalesce(per.destination, disabled.name), coalesce(pending, 0), coalesce(in_flight, 0),
	coalesce(struggling, 0), coalesce(dead, 0), coalesce(sent, 0), oldest, disabled.reason
FROM per FULL JOIN disabled ON disabled.name = per.destination
ORDER BY 1`

// Status reports each destination that has events or is disabled, by name: pending
// (unsent, not dead, not leased now — waiting or due), in flight (leased now),
// struggling (unsent and not dead, with more than struggling attempts), dead, sent
// (not yet pruned), the lag (age of the oldest unsent event that is not dead) and the
// reason it was disabled.
func (o *Outbox) Status(ctx context.Context, struggling int) ([]outbox.DestinationStatus, error) {
	now := o.db.nowUTC()
	rows, err := o.db.pool.Query(ctx, statusSQL, now, struggling)
	if err != nil {
		return nil, fmt.Errorf("postgres: outbox status: %w", interpretError(err))
	}
	st, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (outbox.DestinationStatus, error) {
		var (
			s        outbox.DestinationStatus
			oldest   *time.Time
			disabled *string
		)
		err := row.Scan(&s.Destination, &s.Pending, &s.InFlight, &s.Struggling, &s.Dead, &s.Sent, &oldest, &disabled)
		if oldest != nil && now.After(*oldest) {
			s.Lag = now.Sub(*oldest)
		}
		if disabled != nil {
			s.Disabled = cmp.Or(*disabled, DefaultDisabledReason)
		}
		return s, err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: outbox status: %w", interpretError(err))
	}
	return st, nil
}

// List returns records newest first (by id), filtered, at most f.Limit (default 100).
func (o *Outbox) List(ctx context.Context, f outbox.ListFilter) ([]outbox.Record, error) {
	q := `SELECT ` + outboxColumns + ` FROM outbox WHERE true`
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	if f.Dead {
		q += ` AND dead_at IS NOT NULL AND sent_at IS NULL`
	}
	if f.Unsent {
		q += ` AND sent_at IS NULL`
	}
	if f.AggregateID != "" {
		q += ` AND aggregate_id = ` + arg(f.AggregateID)
	}
	if f.Destination != "" {
		q += ` AND destination = ` + arg(f.Destination)
	}
	if f.BeforeID > 0 {
		q += ` AND id < ` + arg(f.BeforeID)
	}
	limit := f.Limit
	if limit <= 0 {
		limit = DefaultOutboxListLimit
	}
	q += ` ORDER BY id DESC LIMIT ` + arg(limit)
	rows, err := o.db.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("postgres: outbox list: %w", interpretError(err))
	}
	recs, err := scanRecords(rows)
	if err != nil {
		return nil, fmt.Errorf("postgres: outbox list: %w", interpretError(err))
	}
	return recs, nil
}

// requeueSQL makes dead events due now with their attempts, error and lease cleared,
// and re-enables their destinations; when an id is unknown it changes nothing and
// names the unknown ids. $3 selects every dead event.
const requeueSQL = `
WITH missing AS (
	SELECT m.id FROM unnest($2::bigint[]) AS m (id)
	WHERE NOT EXISTS (SELECT 1 FROM outbox WHERE outbox.id = m.id)
), requeued AS (
	UPDATE outbox SET dead_at = NULL, last_error = '', attempts = 0, next_attempt_at = $1,
		lease_until = NULL, claim_token = NULL
	WHERE dead_at IS NOT NULL AND sent_at IS NULL AND ($3 OR id = ANY ($2::bigint[]))
		AND NOT EXISTS (SELECT 1 FROM missing)
	RETURNING destination
), enabled AS (
	UPDATE outbox_destinations SET disabled_at = NULL, reason = ''
	WHERE disabled_at IS NOT NULL AND name IN (SELECT destination FROM requeued)
)
SELECT (SELECT count(*) FROM requeued), coalesce((SELECT array_agg(id ORDER BY id) FROM missing), '{}')`

// Requeue makes the dead events among ids (every dead event when allDead) due now,
// with attempts, last error and lease cleared, and re-enables their destinations, in
// one statement. It returns how many events it requeued; events that are not dead are
// left alone. When an id names no event, nothing is requeued and the error wraps
// outbox.ErrNotFound with the unknown ids.
func (o *Outbox) Requeue(ctx context.Context, ids []int64, allDead bool) (int, error) {
	if len(ids) == 0 && !allDead {
		return 0, nil
	}
	var (
		n       int
		missing []int64
	)
	if ids == nil {
		ids = []int64{}
	}
	if err := o.db.pool.QueryRow(ctx, requeueSQL, o.db.nowUTC(), ids, allDead).Scan(&n, &missing); err != nil {
		return 0, fmt.Errorf("postgres: outbox requeue: %w", interpretError(err))
	}
	if len(missing) > 0 {
		return 0, fmt.Errorf("postgres: outbox requeue: %w: %s", outbox.ErrNotFound, joinIDs(missing))
	}
	return n, nil
}

// replaySQL makes an aggregate's sent events unsent and due now, attempts cleared;
// their event ids stay, for the consumers to dedupe on.
const replaySQL = `
WITH known AS (
	SELECT count(*) AS n FROM outbox WHERE aggregate_id = $1 AND ($2 = '' OR destination = $2)
), replayed AS (
	UPDATE outbox SET sent_at = NULL, attempts = 0, next_attempt_at = $3, lease_until = NULL,
		claim_token = NULL, last_error = ''
	WHERE aggregate_id = $1 AND ($2 = '' OR destination = $2) AND sent_at IS NOT NULL
	RETURNING 1
)
SELECT (SELECT n FROM known), (SELECT count(*) FROM replayed)`

// Replay makes every sent event of the aggregate (at one destination, or at all when
// destination is empty) unsent and due now with its attempts reset, keeping its event
// id; the lanes deliver them again in sequence order. Unsent events are left as they
// are. It returns how many events it replayed; outbox.ErrNotFound when the aggregate
// has no events there.
func (o *Outbox) Replay(ctx context.Context, aggregateID, destination string) (int, error) {
	if aggregateID == "" {
		return 0, errors.New("postgres: outbox replay: aggregate id is required")
	}
	var known, n int
	if err := o.db.pool.QueryRow(ctx, replaySQL, aggregateID, destination, o.db.nowUTC()).Scan(&known, &n); err != nil {
		return 0, fmt.Errorf("postgres: outbox replay %s: %w", aggregateID, interpretError(err))
	}
	if known == 0 {
		where := ""
		if destination != "" {
			where = " at " + destination
		}
		return 0, fmt.Errorf("postgres: outbox replay: %w: aggregate %s has no events%s", outbox.ErrNotFound, aggregateID, where)
	}
	return n, nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func joinIDs(ids []int64) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.FormatInt(id, 10)
	}
	return strings.Join(s, ", ")
}
