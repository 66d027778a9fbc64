package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// Group commit of inbox deliveries.
//
// Each delivery would otherwise pay a statement and a commit of its own, and that
// cost is mostly per statement, not per row: storing one event alone took about
// 400 µs of CPU (ordersync and PostgreSQL together), in batches of 8 about 110 µs
// each, of 64 about 70 µs. So deliveries that arrive while a store is under way
// wait for it and are then stored together, in one statement
// (inboxReceiveBatchSQL) and one transaction.
//
// A delivery that finds both writers idle is stored at once, alone, by
// inboxReceiveSQL. A writer that finds the other one storing does not start beside
// it with a small batch: it goes on gathering until it holds groupMinBeside
// deliveries, the other writer is done, or groupBesideWait has passed, whichever
// comes first. Under load the batches so stay large instead of splitting in two;
// and a delivery never waits long for a store that is itself waiting (a wake
// waits for the row lock of an operation whose 1C call is under way).
//
// Each delivery keeps the outcome it would have had alone. A batch never holds two
// deliveries of one event or two that register one journal key (the later one waits
// for the next batch, and then finds the earlier one committed), so the deliveries of
// a batch touch disjoint rows and the batch statement is the single one repeated.
// When the batch statement fails (a serialization failure or a deadlock with another
// writer of the same rows, a broken connection), each delivery of the batch is
// stored again on its own, as it would have been without grouping, and its own error,
// if any, goes back to its Receive, which retries or reports it as before.

const (
	// groupWriters is how many batches may be stored at once: while one commits,
	// the next gathers.
	groupWriters = 2
	// groupMaxBatch bounds a batch: the statement's arrays and the time its locks
	// are held stay small.
	groupMaxBatch = 64
	// groupQueue is how many deliveries may wait for a writer before Receive blocks.
	groupQueue = 1024
	// groupMinBeside and groupBesideWait: a writer starts a batch beside a storing
	// one when it holds this many deliveries, or after this long (see above). With
	// 16 senders at once (BenchmarkIngest), 8 stored the most new events per second
	// of 4, 6, 8, 10, 12 and 16.
	groupMinBeside  = 8
	groupBesideWait = 2 * time.Millisecond
)

// inboxReceiveBatchSQL is inboxReceiveSQL for several events of disjoint event ids
// and journal keys: the events in $1…$12 (one array element each, idx numbering
// them), their registrations in $13…$21, $23 and $24 (idx says whose; $22 is the
// store's clock). It answers one row per
// event: idx, whether its advisory lock was taken, whether it was inserted, the
// keys whose saved payload differed (recorded as conflicts), and the stored event
// (savedColumns); data-modifying steps run whether or not the answer reads them.
// Each step is the single statement's step restricted to the events not stored
// before, whose lock was taken and whose row was inserted; see inboxReceiveSQL for
// why each is safe under REPEATABLE READ. The stored event is looked up by a
// correlated subquery, so the plan uses the primary key whatever the statistics.
var inboxReceiveBatchSQL = `
WITH ev AS MATERIALIZED (
	SELECT e.*, (SELECT i FROM inbox_events i WHERE i.source = e.source AND i.event_id = e.event_id) AS saved
	FROM unnest($1::int[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::bytea[], $7::text[],
		$8::timestamptz[], $9::int[], $10::text[], $11::bytea[], $12::text[])
		AS e (idx, lock_key, source, event_id, body_sha256, body, content_type, received_at,
			answer_status, answer_content_type, answer_body, operations)
), lock AS MATERIALIZED (
	SELECT idx, pg_try_advisory_xact_lock(lock_key) AS taken FROM ev WHERE (ev.saved).source IS NULL
), event AS (
	INSERT INTO inbox_events (source, event_id, body_sha256, body, content_type, status, received_at,
		answer_status, answer_content_type, answer_body, operations)
	SELECT ev.source, ev.event_id, ev.body_sha256, ev.body, nullif(ev.content_type, ''), 'processed', ev.received_at,
		ev.answer_status, nullif(ev.answer_content_type, ''), ev.answer_body,
		ARRAY(SELECT k FROM jsonb_array_elements_text(ev.operations::jsonb) WITH ORDINALITY AS o (k, n) ORDER BY n)
	FROM ev JOIN lock USING (idx) WHERE lock.taken
	ORDER BY ev.idx
	ON CONFLICT (source, event_id) DO NOTHING
	RETURNING source, event_id
), stored AS MATERIALIZED (
	SELECT ev.idx FROM ev JOIN event USING (source, event_id)
), reg AS (
	SELECT * FROM unnest($13::int[], $14::text[], $15::text[], $16::text[], $17::text[], $18::text[], $19::text[], $20::bool[], $21::bool[],
			$23::text[], $24::text[], $25::timestamptz[], $26::text[], $27::text[], $28::text[])
		AS r (idx, key, kind, source, external_id, payload, payload_sha256, if_absent, wake, actor, detail,
			order_created_at, order_total, currency, search_text)
	WHERE r.idx IN (SELECT idx FROM stored)
), ` + inboxJournalSteps("$22") + `
SELECT ev.idx, coalesce(l.taken, false), EXISTS (SELECT FROM stored s WHERE s.idx = ev.idx),
	ARRAY(SELECT e.key FROM existing e
		WHERE e.idx = ev.idx AND NOT e.if_absent AND e.payload_sha256 <> e.saved_sha256 ORDER BY e.key),
	` + savedColumns("ev.saved") + `
FROM ev LEFT JOIN lock l USING (idx) ORDER BY ev.idx`

// groupRequest is one delivery waiting to be stored.
type groupRequest struct {
	ctx  context.Context
	row  receiveRow
	done chan groupResult // buffered: a writer never waits for a Receive that gave up
}

type groupResult struct {
	r   receiveResult
	err error
}

// receiveGroup gathers deliveries into batches; its writers run from the first
// delivery until the DB is closed.
type receiveGroup struct {
	db       *DB
	requests chan *groupRequest
	stop     chan struct{}
	wg       sync.WaitGroup
	// storing counts the writers storing a batch; finished is signalled (without
	// blocking, so it may be stale) each time one of them is done.
	storing  atomic.Int32
	finished chan struct{}
	// lookups are the read-only lookups of stored events (Redelivered), answered
	// in batches by groupLookers goroutines of their own.
	lookups chan *lookupRequest
}

// errInboxClosed answers a delivery that reaches a closed store.
var errInboxClosed = errors.New("the store is closed")

// inboxGroup is the DB's group of inbox writers, started on first use.
func (db *DB) inboxGroup() *receiveGroup {
	db.groupOnce.Do(func() {
		g := &receiveGroup{db: db, requests: make(chan *groupRequest, groupQueue), stop: make(chan struct{}),
			finished: make(chan struct{}, 1), lookups: make(chan *lookupRequest, groupQueue)}
		for range groupWriters {
			g.wg.Add(1)
			go g.write()
		}
		for range groupLookers {
			g.wg.Add(1)
			go g.look()
		}
		db.group = g
	})
	return db.group
}

// close stops the writers once the batches under way are stored; deliveries still
// queued are answered errInboxClosed.
func (g *receiveGroup) close() {
	close(g.stop)
	g.wg.Wait()
	for {
		select {
		case req := <-g.requests:
			req.done <- groupResult{err: errInboxClosed}
		case req := <-g.lookups:
			req.done <- lookupResult{err: errInboxClosed}
		default:
			return
		}
	}
}

// register stores one delivery, with whichever others are waiting, and answers as
// registerOne would have answered it alone.
func (g *receiveGroup) register(ctx context.Context, row receiveRow) (receiveResult, error) {
	if g == nil { // the DB was closed before any delivery
		return receiveResult{}, errInboxClosed
	}
	req := &groupRequest{ctx: ctx, row: row, done: make(chan groupResult, 1)}
	select {
	case <-g.stop:
		return receiveResult{}, errInboxClosed
	default:
	}
	select {
	case g.requests <- req:
	case <-g.stop:
		return receiveResult{}, errInboxClosed
	case <-ctx.Done():
		return receiveResult{}, ctx.Err()
	}
	select {
	case res := <-req.done:
		return res.r, res.err
	case <-ctx.Done():
		// The batch may still commit the event: as with a lost answer, the sender's
		// redelivery is then a duplicate.
		return receiveResult{}, ctx.Err()
	}
}

// write is one writer: it waits for a delivery, takes every other one already
// waiting (up to groupMaxBatch, keeping back those that share an event or a key
// with the batch for the next one), gathers more while the other writer is storing
// (see groupMinBeside) and stores them.
func (g *receiveGroup) write() {
	defer g.wg.Done()
	var held []*groupRequest
	besideWait := time.NewTimer(groupBesideWait)
	defer besideWait.Stop()
	for {
		batch := make([]*groupRequest, 0, groupMaxBatch)
		events := map[string]bool{}
		keys := map[string]bool{}
		var later []*groupRequest
		add := func(req *groupRequest) {
			if req.ctx.Err() != nil {
				req.done <- groupResult{err: req.ctx.Err()}
				return
			}
			ev := req.row.source + "\x00" + req.row.eventID
			clash := events[ev]
			for _, k := range req.row.keys {
				clash = clash || keys[k]
			}
			if clash {
				later = append(later, req)
				return
			}
			events[ev] = true
			for _, k := range req.row.keys {
				keys[k] = true
			}
			batch = append(batch, req)
		}
		for _, req := range held {
			if len(batch) < groupMaxBatch {
				add(req)
			} else {
				later = append(later, req)
			}
		}
		if len(batch) == 0 && len(later) == 0 {
			select {
			case req := <-g.requests:
				add(req)
			case <-g.stop:
				return
			}
		}
	gather:
		for len(batch) < groupMaxBatch {
			select {
			case req := <-g.requests:
				add(req)
			default:
				break gather
			}
		}
		if len(batch) < groupMinBeside && g.storing.Load() > 0 {
			besideWait.Reset(groupBesideWait)
		beside:
			for len(batch) < groupMinBeside && g.storing.Load() > 0 {
				select {
				case req := <-g.requests:
					add(req)
				case <-g.finished: // perhaps stale: the condition says
				case <-besideWait.C:
					break beside
				case <-g.stop:
					break beside
				}
			}
			besideWait.Stop()
		}
		held = later
		if len(batch) > 0 {
			g.storing.Add(1)
			g.store(batch, len(later))
			g.storing.Add(-1)
			select {
			case g.finished <- struct{}{}:
			default:
			}
		}
	}
}

// store stores a batch and answers each of its deliveries.
func (g *receiveGroup) store(batch []*groupRequest, keptBack int) {
	if g.db.groupStore != nil {
		g.db.groupStore(len(batch), keptBack)
	}
	if len(batch) == 1 {
		req := batch[0]
		r, err := g.db.registerOne(req.ctx, req.row)
		req.done <- groupResult{r, err}
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var (
		results []receiveResult
		err     error
	)
	if g.db.groupFail != nil {
		err = g.db.groupFail(len(batch))
	}
	if err == nil {
		// A serialization failure (REPEATABLE READ: a concurrent writer committed a
		// key or an operation this batch reads) wrote nothing; the batch starts over
		// with a fresh snapshot, as a single delivery does, before it is given up
		// for one-by-one stores.
		for try := 1; ; try++ {
			results, err = g.db.registerBatch(ctx, batch)
			if err == nil || !retryable(err) || try >= maxReceiveTries {
				break
			}
		}
	}
	if err != nil {
		g.db.log.Debug("inbox: a grouped store failed; storing its deliveries one by one",
			"deliveries", len(batch), "error", err)
		if g.db.groupFellBack != nil {
			g.db.groupFellBack(len(batch), err)
		}
		for _, req := range batch {
			r, err := g.db.registerOne(req.ctx, req.row)
			req.done <- groupResult{r, err}
		}
		return
	}
	for i, req := range batch {
		req.done <- groupResult{r: results[i]}
	}
}

// registerBatch runs inboxReceiveBatchSQL for the batch (see receiveTx) and returns
// each delivery's result, in the batch's order.
func (db *DB) registerBatch(ctx context.Context, batch []*groupRequest) ([]receiveResult, error) {
	n := len(batch)
	args, err := db.batchArgs(batch)
	if err != nil {
		return nil, err
	}
	results := make([]receiveResult, n)
	seen := 0
	err = db.receiveTx(ctx, inboxReceiveBatchSQL, args, func(rows pgx.Rows) error {
		for rows.Next() {
			var (
				i     int32
				r     receiveResult
				saved savedScan
			)
			if err := rows.Scan(append([]any{&i, &r.taken, &r.inserted, &r.conflicted}, saved.dest()...)...); err != nil {
				return err
			}
			r.saved = saved.event()
			if i < 0 || int(i) >= n {
				return errors.New("the batch statement answered an unknown delivery")
			}
			results[i] = r
			seen++
		}
		return nil
	})
	if err == nil && seen != n {
		err = errors.New("the batch statement did not answer every delivery")
	}
	return results, err
}

// batchArgs are inboxReceiveBatchSQL's arguments for the batch.
func (db *DB) batchArgs(batch []*groupRequest) ([]any, error) {
	n := len(batch)
	var (
		idx, statuses                    = make([]int32, n), make([]int32, n)
		lockKeys                         = make([]int64, n)
		sources, eventIDs, sums, cts     = make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		answerCTs, operations            = make([]string, n), make([]string, n)
		bodies, answerBodies             = make([][]byte, n), make([][]byte, n)
		received                         = make([]time.Time, n)
		rIdx                             []int32
		rKeys, rKinds, rSources, rExtIDs []string
		rPayloads, rSums                 []string
		rIfAbsent, rWake                 []bool
		rActors, rDetails                []string
		rOrderAts                        []*time.Time
		rTotals                          []*string
		rCurrencies, rSearches           []string
	)
	now := db.nowUTC()
	for i, req := range batch {
		row := req.row
		ops, err := json.Marshal(row.operations)
		if err != nil {
			return nil, err
		}
		idx[i], lockKeys[i] = int32(i), row.lockKey
		sources[i], eventIDs[i], sums[i], bodies[i], cts[i], received[i] = row.source, row.eventID, row.sum, row.body, row.contentType, row.received
		statuses[i], answerCTs[i], answerBodies[i], operations[i] = int32(row.answerStatus), row.answerContentType, row.answerBody, string(ops)
		for j := range row.keys {
			rIdx = append(rIdx, int32(i))
			rKeys, rKinds = append(rKeys, row.keys[j]), append(rKinds, row.kinds[j])
			rSources, rExtIDs = append(rSources, row.sources[j]), append(rExtIDs, row.externalIDs[j])
			rPayloads, rSums = append(rPayloads, row.payloads[j]), append(rSums, row.sums[j])
			rIfAbsent, rWake = append(rIfAbsent, row.ifAbsent[j]), append(rWake, row.wake[j])
			rActors, rDetails = append(rActors, row.actors[j]), append(rDetails, row.details[j])
			rOrderAts, rTotals = append(rOrderAts, row.orderAts[j]), append(rTotals, row.totals[j])
			rCurrencies, rSearches = append(rCurrencies, row.currencies[j]), append(rSearches, row.searches[j])
		}
	}
	return []any{
		idx, lockKeys, sources, eventIDs, sums, bodies, cts, received, statuses, answerCTs, answerBodies, operations,
		rIdx, rKeys, rKinds, rSources, rExtIDs, rPayloads, rSums, rIfAbsent, rWake, now, rActors, rDetails,
		rOrderAts, rTotals, rCurrencies, rSearches,
	}, nil
}

// Batched lookups of stored events.
//
// A redelivery is answered from the stored event before its body is parsed and
// before any write or lock (Inbox.Redelivered): one read of inbox_events by its
// primary key, on the main pool, outside any transaction block, so it writes no
// WAL. Every delivery of a sender that supports it asks first, the new ones too, so
// the lookups are gathered as the writes are: whatever lookups wait while one is
// under way go in the next statement together.

// groupLookers is how many lookup statements may run at once (main pool sessions):
// one, so that the lookups arriving while it runs make the next batch.
const groupLookers = 1

// inboxLookupSQL reads the stored events of the (source, event id) pairs in $1, a
// JSON array of {"s": source, "e": event id}, each answered by idx, the pair's
// ordinal from 1; pairs not stored are left out. Each pair is looked up alone by the
// primary key: the lateral subquery is not pulled up, so no statistics make the plan
// scan the table. The pairs come as JSON, not as arrays, because the server
// estimates a JSON array's rows the same whatever its value: the custom plans cost
// what the generic one does, and the server keeps the generic plan instead of
// planning every lookup again (which took longer than the lookup).
const inboxLookupSQL = `
SELECT k.idx, s.body_sha256, s.answer_status, s.answer_content_type, s.answer_body, s.operations
FROM ROWS FROM (jsonb_to_recordset($1::jsonb) AS (s text, e text)) WITH ORDINALITY AS k (source, event_id, idx)
CROSS JOIN LATERAL (
	SELECT * FROM inbox_events e WHERE e.source = k.source AND e.event_id = k.event_id OFFSET 0
) s`

// lookupKey is one pair of inboxLookupSQL's $1.
type lookupKey struct {
	Source  string `json:"s"`
	EventID string `json:"e"`
}

type lookupRequest struct {
	ctx             context.Context
	source, eventID string
	done            chan lookupResult // buffered
}

type lookupResult struct {
	saved *savedEvent // nil: not stored
	err   error
}

// lookup reads the stored event (source, eventID), nil when there is none, in a
// batch with the lookups waiting at the same time.
func (g *receiveGroup) lookup(ctx context.Context, source, eventID string) (*savedEvent, error) {
	if g == nil {
		return nil, errInboxClosed
	}
	req := &lookupRequest{ctx: ctx, source: source, eventID: eventID, done: make(chan lookupResult, 1)}
	select {
	case <-g.stop:
		return nil, errInboxClosed
	default:
	}
	select {
	case g.lookups <- req:
	case <-g.stop:
		return nil, errInboxClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case res := <-req.done:
		return res.saved, res.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// look is one looker: it waits for a lookup, takes every other one already waiting
// (up to groupMaxBatch) and answers them with one statement.
func (g *receiveGroup) look() {
	defer g.wg.Done()
	for {
		batch := make([]*lookupRequest, 0, groupMaxBatch)
		select {
		case req := <-g.lookups:
			batch = append(batch, req)
		case <-g.stop:
			return
		}
	gather:
		for len(batch) < groupMaxBatch {
			select {
			case req := <-g.lookups:
				batch = append(batch, req)
			default:
				break gather
			}
		}
		live := batch[:0]
		for _, req := range batch {
			if err := req.ctx.Err(); err != nil {
				req.done <- lookupResult{err: err}
				continue
			}
			live = append(live, req)
		}
		if len(live) > 0 {
			g.db.lookupBatch(live)
		}
	}
}

// lookupBatch runs inboxLookupSQL for the batch and answers each lookup.
func (db *DB) lookupBatch(batch []*lookupRequest) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	keys := make([]lookupKey, len(batch))
	for i, req := range batch {
		keys[i] = lookupKey{req.source, req.eventID}
	}
	found := make([]*savedEvent, len(batch))
	err := func() error {
		pairs, err := json.Marshal(keys)
		if err != nil {
			return err
		}
		rows, err := db.pool.Query(ctx, inboxLookupSQL, string(pairs))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				idx   int64
				saved savedScan
			)
			if err := rows.Scan(append([]any{&idx}, saved.dest()...)...); err != nil {
				return err
			}
			if idx < 1 || int(idx) > len(batch) {
				return errors.New("the lookup answered an unknown event")
			}
			found[idx-1] = saved.event()
		}
		return rows.Err()
	}()
	for i, req := range batch {
		if err != nil {
			req.done <- lookupResult{err: err}
		} else {
			req.done <- lookupResult{saved: found[i]}
		}
	}
}
