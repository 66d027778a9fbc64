package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/ordersync/ordersync/internal/outbox"
)

// EnqueueFunc writes msgs in one transaction of the store's database, through the
// store's Enqueue on that transaction, and commits it — or rolls it back when commit
// is false.
type EnqueueFunc func(ctx context.Context, commit bool, msgs ...outbox.Message) error

// runOutbox runs the outbox topic: enqueue in a transaction, per-lane sequences,
// lane-head claims, leases and fencing, dead events, disabled destinations, the
// operators' commands, concurrent claimers, and a claim that carries the previous
// round's write-back. Each case has an outbox store and an EnqueueFunc on the same
// database, whose clock is a running Clock: the topic moves it forward to expire
// leases and backoffs, and it never runs behind time.Now, so an event enqueued at
// the real time is due by the store's clock.
func runOutbox(t *testing.T, h Harness) {
	t.Helper()
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, e *outboxEnv)
	}{
		{"RolledBackEnqueueLeavesNothing", testOutboxRollback},
		{"EnqueueFields", testOutboxEnqueueFields},
		{"EnqueueRejectsInvalid", testOutboxEnqueueRejectsInvalid},
		{"SequencesPerLane", testOutboxSequencesPerLane},
		{"ConcurrentEnqueueOneLane", testOutboxConcurrentEnqueueOneLane},
		{"ClaimOnlyLaneHeads", testOutboxClaimOnlyLaneHeads},
		{"ClaimLimitOrderAndOnly", testOutboxClaimLimitOrderAndOnly},
		{"FailedHeadBlocksLane", testOutboxFailedHeadBlocksLane},
		{"LeaseExpiry", testOutboxLeaseExpiry},
		{"Released", testOutboxReleased},
		{"Fencing", testOutboxFencing},
		{"ClaimWritesBackFirst", testOutboxClaimWritesBackFirst},
		{"DeadBlocksLane", testOutboxDeadBlocksLane},
		{"DisableDestination", testOutboxDisableDestination},
		{"Requeue", testOutboxRequeue},
		{"Replay", testOutboxReplay},
		{"PutBackNeverRunsALaneTwice", testOutboxPutBackNeverRunsALaneTwice},
		{"Prune", testOutboxPrune},
		{"StatusAndList", testOutboxStatusAndList},
		{"ConcurrentClaimers", testOutboxConcurrentClaimers},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := NewRunningClock()
			s := h.open(t, Options{Clock: c}, "Outbox", "Enqueue")
			tc.fn(t, &outboxEnv{t: t, s: s.Outbox, enqueue: s.Enqueue, clock: c})
		})
	}
}

// ---- helpers ----

type outboxEnv struct {
	t       *testing.T
	s       outbox.Store
	enqueue EnqueueFunc
	clock   *Clock
}

const lease = time.Minute

func msg(dest, agg string, n int) outbox.Message {
	return outbox.Message{Destination: dest, Event: outbox.Event{
		Type: outbox.OrderCreated, AggregateType: "order", AggregateID: agg,
		Data: json.RawMessage(fmt.Sprintf(`{"n":%d,"total":1500.10}`, n)),
	}}
}

func (e *outboxEnv) put(msgs ...outbox.Message) {
	e.t.Helper()
	if err := e.enqueue(e.t.Context(), true, msgs...); err != nil {
		e.t.Fatalf("enqueue: %v", err)
	}
}

func (e *outboxEnv) claim(req outbox.ClaimRequest) outbox.Claim {
	e.t.Helper()
	if req.Lease == 0 {
		req.Lease = lease
	}
	if req.Limit == 0 {
		req.Limit = 100
	}
	ctx, cancel := context.WithTimeout(e.t.Context(), claimTimeout)
	defer cancel()
	c, err := e.s.Claim(ctx, req)
	if err != nil {
		e.t.Fatalf("claim: %v", err)
	}
	if len(c.Records) > 0 && c.Token == "" {
		e.t.Fatalf("claim of %d records has no token", len(c.Records))
	}
	return c
}

func (e *outboxEnv) complete(token string, results ...outbox.Result) int {
	e.t.Helper()
	n, err := e.s.Complete(e.t.Context(), token, results)
	if err != nil {
		e.t.Fatalf("complete: %v", err)
	}
	return n
}

// sendAll completes every record of c as sent.
func (e *outboxEnv) sendAll(c outbox.Claim) {
	e.t.Helper()
	var rs []outbox.Result
	for _, r := range c.Records {
		rs = append(rs, outbox.Result{ID: r.ID, Sent: true})
	}
	if got, want := e.complete(c.Token, rs...), len(rs); got != want {
		e.t.Fatalf("complete sent: changed %d rows, want %d", got, want)
	}
}

// deliverAll claims and sends until nothing is claimable.
func (e *outboxEnv) deliverAll() {
	e.t.Helper()
	for range 1000 {
		c := e.claim(outbox.ClaimRequest{})
		if len(c.Records) == 0 {
			return
		}
		e.sendAll(c)
	}
	e.t.Fatal("deliverAll: still claiming after 1000 rounds")
}

func (e *outboxEnv) list(f outbox.ListFilter) []outbox.Record {
	e.t.Helper()
	if f.Limit == 0 {
		f.Limit = 100000
	}
	rs, err := e.s.List(e.t.Context(), f)
	if err != nil {
		e.t.Fatalf("list %+v: %v", f, err)
	}
	return rs
}

func (e *outboxEnv) record(id int64) outbox.Record {
	e.t.Helper()
	for _, r := range e.list(outbox.ListFilter{}) {
		if r.ID == id {
			return r
		}
	}
	e.t.Fatalf("record %d not found", id)
	return outbox.Record{}
}

// lane names a record's lane and sequence for messages: "crm/A#1".
func lane(r outbox.Record) string {
	return fmt.Sprintf("%s/%s#%d", r.Destination, r.AggregateID, r.Sequence)
}

func lanes(rs []outbox.Record) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = lane(r)
	}
	return out
}

func wantLanes(t *testing.T, what string, rs []outbox.Record, want ...string) {
	t.Helper()
	if got := lanes(rs); !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
}

func near2(got, want time.Time, tol time.Duration) bool {
	d := got.Sub(want)
	return d < tol && d > -tol
}

// ---- tests ----

func testOutboxRollback(t *testing.T, e *outboxEnv) {
	if err := e.enqueue(t.Context(), false, msg("crm", "A", 1), msg("crm", "A", 2)); err != nil {
		t.Fatalf("enqueue, rolled back: %v", err)
	}
	if got := e.list(outbox.ListFilter{}); len(got) != 0 {
		t.Fatalf("after a rolled-back enqueue: got %v, want no rows", lanes(got))
	}
	if c := e.claim(outbox.ClaimRequest{}); len(c.Records) != 0 {
		t.Fatalf("claim after a rolled-back enqueue: got %v", lanes(c.Records))
	}
	// The lane counter's bump went with the transaction: the lane starts at 1.
	e.put(msg("crm", "A", 3))
	wantLanes(t, "after a committed enqueue", e.list(outbox.ListFilter{}), "crm/A#1")
}

func testOutboxEnqueueFields(t *testing.T, e *outboxEnv) {
	occurred := time.Date(2026, 9, 16, 10, 0, 0, 123456000, time.FixedZone("Asia/Almaty", 5*3600))
	given := uuid.NewString()
	m1 := msg("crm", "kaspi:order:1", 1)
	m1.ID = given
	m1.OccurredAt = occurred
	m2 := msg("kaspi", "kaspi:order:1", 2)
	m3 := msg("crm", "kaspi:order:2", 3)
	m3.Data = nil
	before := time.Now()
	e.put(m1, m3, m2)
	after := time.Now()

	rs := e.list(outbox.ListFilter{})
	slices.Reverse(rs)
	wantLanes(t, "records", rs, "crm/kaspi:order:1#1", "crm/kaspi:order:2#1", "kaspi/kaspi:order:1#1")
	ids := map[string]bool{}
	for _, r := range rs {
		if _, err := uuid.Parse(r.EventID); err != nil {
			t.Fatalf("%s: event id %q is not a UUID", lane(r), r.EventID)
		}
		if ids[r.EventID] {
			t.Fatalf("%s: event id %s is used twice", lane(r), r.EventID)
		}
		ids[r.EventID] = true
		if r.Type != outbox.OrderCreated || r.AggregateType != "order" {
			t.Fatalf("%s: type %q, aggregate type %q", lane(r), r.Type, r.AggregateType)
		}
		if r.Attempts != 0 || r.LastError != "" || r.LeaseUntil != nil || r.SentAt != nil || r.DeadAt != nil {
			t.Fatalf("%s: a new record has state: %+v", lane(r), r)
		}
		wantUTC(t, "created_at", r.CreatedAt)
		wantUTC(t, "occurred_at", r.OccurredAt)
		wantUTC(t, "next_attempt_at", r.NextAttemptAt)
		if r.CreatedAt.Before(before.Add(-time.Second)) || r.CreatedAt.After(after.Add(time.Second)) {
			t.Fatalf("%s: created_at %v, want between %v and %v", lane(r), r.CreatedAt, before, after)
		}
		if r.NextAttemptAt.After(e.clock.Now()) {
			t.Fatalf("%s: next_attempt_at %v is not due now", lane(r), r.NextAttemptAt)
		}
	}
	if got := rs[0].EventID; got != given {
		t.Fatalf("given event id: got %s, want %s", got, given)
	}
	if got := rs[0].OccurredAt; !got.Equal(occurred) {
		t.Fatalf("given occurred_at: got %v, want %v", got, occurred)
	}
	if got := rs[2].OccurredAt; !near2(got, rs[2].CreatedAt, time.Second) {
		t.Fatalf("default occurred_at: got %v, want about created_at %v", got, rs[2].CreatedAt)
	}
	sameJSON(t, "data", rs[0].Data, m1.Data)
	sameJSON(t, "empty data", rs[1].Data, []byte("null"))
}

func testOutboxEnqueueRejectsInvalid(t *testing.T, e *outboxEnv) {
	bad := map[string]outbox.Message{}
	m := msg("", "A", 1)
	bad["no destination"] = m
	m = msg("crm", "", 1)
	bad["no aggregate"] = m
	m = msg("crm", "A", 1)
	m.Type = ""
	bad["no type"] = m
	m = msg("crm", "A", 1)
	m.Data = json.RawMessage(`{"broken"`)
	bad["invalid data"] = m
	m = msg("crm", "A", 1)
	m.ID = "not-a-uuid"
	bad["event id not a UUID"] = m
	for name, m := range bad {
		if err := e.enqueue(t.Context(), true, msg("crm", "B", 0), m); err == nil {
			t.Fatalf("%s: got nil, want an error", name)
		}
	}
	id := uuid.NewString()
	a, b := msg("crm", "A", 1), msg("erp", "A", 1)
	a.ID, b.ID = id, id
	if err := e.enqueue(t.Context(), true, a, b); err == nil {
		t.Fatal("one event id for two messages: got nil, want an error")
	}
	if got := e.list(outbox.ListFilter{}); len(got) != 0 {
		t.Fatalf("after refused enqueues: got %v, want no rows", lanes(got))
	}
}

func testOutboxSequencesPerLane(t *testing.T, e *outboxEnv) {
	// One transaction, interleaved lanes: each lane keeps the order it was given.
	e.put(msg("crm", "A", 1), msg("crm", "B", 1), msg("crm", "A", 2), msg("erp", "A", 1))
	e.put(msg("crm", "A", 3))
	e.put(msg("erp", "A", 2), msg("crm", "B", 2))
	got := map[string][]int{}
	for _, r := range e.list(outbox.ListFilter{}) {
		var d struct{ N int }
		if err := json.Unmarshal(r.Data, &d); err != nil {
			t.Fatal(err)
		}
		k := r.Destination + "/" + r.AggregateID
		got[k] = append(got[k], int(r.Sequence)*10+d.N) // sequence and the message's n agree
	}
	want := map[string][]int{"crm/A": {33, 22, 11}, "crm/B": {22, 11}, "erp/A": {22, 11}}
	for k, w := range want {
		if !slices.Equal(got[k], w) {
			t.Fatalf("lane %s: got sequence*10+n %v, want %v", k, got[k], w)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("lanes: got %v, want %v", got, want)
	}
}

func testOutboxConcurrentEnqueueOneLane(t *testing.T, e *outboxEnv) {
	const n = 40
	var (
		wg    sync.WaitGroup
		start = make(chan struct{})
		errs  = make(chan error, n)
	)
	for i := range n {
		wg.Go(func() {
			<-start
			errs <- e.enqueue(t.Context(), i%4 != 0, msg("crm", "hot", i)) // every 4th rolls back
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("enqueue: %v", err)
		}
	}
	var seqs []int64
	for _, r := range e.list(outbox.ListFilter{}) {
		seqs = append(seqs, r.Sequence)
	}
	slices.Sort(seqs)
	var want []int64
	for s := int64(1); s <= n-n/4; s++ {
		want = append(want, s)
	}
	if !slices.Equal(seqs, want) {
		t.Fatalf("sequences of %d committed enqueues into one lane: got %v, want 1..%d without gaps or duplicates", len(want), seqs, len(want))
	}
}

func testOutboxClaimOnlyLaneHeads(t *testing.T, e *outboxEnv) {
	e.put(msg("crm", "A", 1), msg("crm", "A", 2), msg("crm", "A", 3))
	e.put(msg("crm", "B", 1), msg("erp", "A", 1), msg("erp", "A", 2))

	now := e.clock.Now()
	c := e.claim(outbox.ClaimRequest{Limit: 10})
	wantLanes(t, "first claim", c.Records, "crm/A#1", "crm/B#1", "erp/A#1")
	for _, r := range c.Records {
		if r.Attempts != 1 || r.LeaseUntil == nil || !near2(*r.LeaseUntil, now.Add(lease), 5*time.Second) {
			t.Fatalf("%s: attempts %d, lease until %v; want 1 and about %v", lane(r), r.Attempts, r.LeaseUntil, now.Add(lease))
		}
	}
	// A second relay gets nothing: every lane's head is in flight.
	if c2 := e.claim(outbox.ClaimRequest{Limit: 10}); len(c2.Records) != 0 {
		t.Fatalf("claim while the heads are in flight: got %v, want nothing", lanes(c2.Records))
	}
	if got := e.complete(c.Token, outbox.Result{ID: c.Records[0].ID, Sent: true}); got != 1 {
		t.Fatalf("complete: changed %d rows, want 1", got)
	}
	c3 := e.claim(outbox.ClaimRequest{Limit: 10})
	wantLanes(t, "after crm/A#1 was sent", c3.Records, "crm/A#2")
	if c3.Token == c.Token {
		t.Fatal("two claims share a token")
	}
}

func testOutboxClaimLimitOrderAndOnly(t *testing.T, e *outboxEnv) {
	for _, a := range []string{"E", "D", "C", "B", "A"} { // ids in this order
		e.put(msg("crm", a, 1))
	}
	e.put(msg("erp", "A", 1), msg("erp", "B", 1))
	wantLanes(t, "only erp", e.claim(outbox.ClaimRequest{Only: []string{"erp"}}).Records, "erp/A#1", "erp/B#1")
	wantLanes(t, "limit 2", e.claim(outbox.ClaimRequest{Limit: 2}).Records, "crm/E#1", "crm/D#1")
	wantLanes(t, "limit 2 again", e.claim(outbox.ClaimRequest{Limit: 2}).Records, "crm/C#1", "crm/B#1")
	wantLanes(t, "only crm", e.claim(outbox.ClaimRequest{Only: []string{"crm", "nowhere"}}).Records, "crm/A#1")
	if _, err := e.s.Claim(t.Context(), outbox.ClaimRequest{Limit: 1}); err == nil {
		t.Fatal("claim with no lease: got nil, want an error")
	}
}

func testOutboxFailedHeadBlocksLane(t *testing.T, e *outboxEnv) {
	e.put(msg("crm", "A", 1), msg("crm", "A", 2), msg("crm", "A", 3), msg("crm", "B", 1))
	c := e.claim(outbox.ClaimRequest{})
	wantLanes(t, "claim", c.Records, "crm/A#1", "crm/B#1")
	retry := e.clock.Now().Add(5 * time.Minute)
	n := e.complete(c.Token,
		outbox.Result{ID: c.Records[0].ID, Error: "HTTP 503", NextAttemptAt: retry},
		outbox.Result{ID: c.Records[1].ID, Sent: true})
	if n != 2 {
		t.Fatalf("complete: changed %d rows, want 2", n)
	}
	r := e.record(c.Records[0].ID)
	if r.LastError != "HTTP 503" || !r.NextAttemptAt.Equal(retry.UTC().Truncate(time.Microsecond)) || r.LeaseUntil != nil || r.SentAt != nil {
		t.Fatalf("failed record: last error %q, next attempt %v (want %v), lease %v, sent %v",
			r.LastError, r.NextAttemptAt, retry, r.LeaseUntil, r.SentAt)
	}
	// Sequence 2 never overtakes sequence 1, however often the relay asks.
	for range 3 {
		if c := e.claim(outbox.ClaimRequest{}); len(c.Records) != 0 {
			t.Fatalf("claim while crm/A#1 waits for its retry: got %v, want nothing", lanes(c.Records))
		}
	}
	e.clock.Advance(4 * time.Minute)
	if c := e.claim(outbox.ClaimRequest{}); len(c.Records) != 0 {
		t.Fatalf("claim a minute before the retry: got %v, want nothing", lanes(c.Records))
	}
	e.clock.Advance(2 * time.Minute)
	c = e.claim(outbox.ClaimRequest{})
	wantLanes(t, "after the retry time", c.Records, "crm/A#1")
	if got := c.Records[0]; got.Attempts != 2 || got.LastError != "HTTP 503" {
		t.Fatalf("retried record: attempts %d, last error %q; want 2, HTTP 503", got.Attempts, got.LastError)
	}
	// A failure without a time is due at once, and still first in its lane.
	e.complete(c.Token, outbox.Result{ID: c.Records[0].ID, Error: "reset"})
	c = e.claim(outbox.ClaimRequest{})
	wantLanes(t, "failed with no next attempt time", c.Records, "crm/A#1")
	e.sendAll(c)
	wantLanes(t, "after crm/A#1 was sent", e.claim(outbox.ClaimRequest{}).Records, "crm/A#2")
}

func testOutboxLeaseExpiry(t *testing.T, e *outboxEnv) {
	e.put(msg("crm", "A", 1), msg("crm", "A", 2))
	c1 := e.claim(outbox.ClaimRequest{})
	wantLanes(t, "claim", c1.Records, "crm/A#1")
	e.clock.Advance(lease / 2)
	if c := e.claim(outbox.ClaimRequest{}); len(c.Records) != 0 {
		t.Fatalf("claim within the lease: got %v, want nothing", lanes(c.Records))
	}
	e.clock.Advance(lease)
	c2 := e.claim(outbox.ClaimRequest{})
	wantLanes(t, "claim after the lease expired", c2.Records, "crm/A#1")
	if c2.Token == c1.Token {
		t.Fatal("the re-claim kept the old token")
	}
	if got := c2.Records[0]; got.Attempts != 2 || got.EventID != c1.Records[0].EventID {
		t.Fatalf("re-claimed record: attempts %d, event id %s; want 2, %s", got.Attempts, got.EventID, c1.Records[0].EventID)
	}
}

// A released result gives the lease and the attempt back. Without a time or an
// error (a delivery never started) the event keeps its next attempt time and last
// error and is due at once; with a time (a delivery that made progress and goes on
// later: a long stock publish cut at its lease's end) it is due then, and with an
// error that is its last error. Its lane waits for it either way.
func testOutboxReleased(t *testing.T, e *outboxEnv) {
	e.put(msg("crm", "A", 1), msg("crm", "A", 2), msg("crm", "B", 1))
	c := e.claim(outbox.ClaimRequest{})
	wantLanes(t, "claim", c.Records, "crm/A#1", "crm/B#1")
	a, b := c.Records[0].ID, c.Records[1].ID
	retry := e.clock.Now().Add(time.Minute).UTC().Truncate(time.Microsecond)
	e.complete(c.Token, outbox.Result{ID: a, Error: "HTTP 503", NextAttemptAt: retry}, outbox.Result{ID: b, Sent: true})
	e.clock.Advance(2 * time.Minute)

	// Never started: everything as it was, but for the lease and the attempt.
	c = e.claim(outbox.ClaimRequest{})
	wantLanes(t, "after the retry time", c.Records, "crm/A#1")
	if got := c.Records[0].Attempts; got != 2 {
		t.Fatalf("claimed: attempts %d, want 2", got)
	}
	if n := e.complete(c.Token, outbox.Result{ID: a, Released: true}); n != 1 {
		t.Fatalf("complete released: changed %d rows, want 1", n)
	}
	r := e.record(a)
	if r.Attempts != 1 || r.LastError != "HTTP 503" || !r.NextAttemptAt.Equal(retry) || r.LeaseUntil != nil || r.SentAt != nil || r.DeadAt != nil {
		t.Fatalf("released, never started: %+v; want attempts 1, last error HTTP 503, next attempt %v, no lease, unsent", r, retry)
	}

	// Made progress, goes on later: due then, with its error.
	c = e.claim(outbox.ClaimRequest{})
	wantLanes(t, "released at once", c.Records, "crm/A#1")
	later := e.clock.Now().Add(10 * time.Minute).UTC().Truncate(time.Microsecond)
	const cut = "cut at the lease's end: 300 of 1000 items sent"
	if n := e.complete(c.Token, outbox.Result{ID: a, Released: true, NextAttemptAt: later, Error: cut}); n != 1 {
		t.Fatalf("complete released with a time: changed %d rows, want 1", n)
	}
	r = e.record(a)
	if r.Attempts != 1 || r.LastError != cut || !r.NextAttemptAt.Equal(later) || r.LeaseUntil != nil || r.SentAt != nil || r.DeadAt != nil {
		t.Fatalf("released with a time and an error: %+v; want attempts 1, last error %q, next attempt %v, no lease, unsent", r, cut, later)
	}
	e.clock.Advance(9 * time.Minute)
	if c := e.claim(outbox.ClaimRequest{}); len(c.Records) != 0 {
		t.Fatalf("claim before the released event's time: got %v, want nothing (crm/A#2 waits behind it)", lanes(c.Records))
	}
	e.clock.Advance(2 * time.Minute)
	c = e.claim(outbox.ClaimRequest{})
	wantLanes(t, "at the released event's time", c.Records, "crm/A#1")
	if got := c.Records[0]; got.Attempts != 2 || got.LastError != cut {
		t.Fatalf("claimed again: attempts %d, last error %q; want 2, %q", got.Attempts, got.LastError, cut)
	}

	// An error without a time: recorded, and due at once.
	if n := e.complete(c.Token, outbox.Result{ID: a, Released: true, Error: "shutting down"}); n != 1 {
		t.Fatalf("complete released with an error: changed %d rows, want 1", n)
	}
	if r := e.record(a); r.Attempts != 1 || r.LastError != "shutting down" || !r.NextAttemptAt.Equal(later) {
		t.Fatalf("released with an error only: %+v; want attempts 1, last error %q, next attempt kept (%v)", r, "shutting down", later)
	}
	c = e.claim(outbox.ClaimRequest{})
	wantLanes(t, "released with an error only", c.Records, "crm/A#1")
	e.sendAll(c)
	wantLanes(t, "after crm/A#1 was sent", e.claim(outbox.ClaimRequest{}).Records, "crm/A#2")
}

func testOutboxFencing(t *testing.T, e *outboxEnv) {
	e.put(msg("crm", "A", 1), msg("crm", "A", 2))
	old := e.claim(outbox.ClaimRequest{})
	id := old.Records[0].ID
	e.clock.Advance(2 * lease) // the first relay stalls past its lease
	cur := e.claim(outbox.ClaimRequest{})
	wantLanes(t, "re-claim", cur.Records, "crm/A#1")

	for _, r := range []outbox.Result{{ID: id, Sent: true}, {ID: id, Error: "late"}, {ID: id, Dead: true, Error: "late"}} {
		if got := e.complete(old.Token, r); got != 0 {
			t.Fatalf("complete %+v with the expired claim's token: changed %d rows, want 0", r, got)
		}
	}
	r := e.record(id)
	if r.SentAt != nil || r.DeadAt != nil || r.LastError != "" || r.LeaseUntil == nil || r.Attempts != 2 {
		t.Fatalf("after the stale write-backs: %+v; want unsent, alive, leased by the second claim", r)
	}
	if got := e.complete(uuid.NewString(), outbox.Result{ID: id, Sent: true}); got != 0 {
		t.Fatalf("complete with a token never issued: changed %d rows, want 0", got)
	}
	if got := e.complete(cur.Token, outbox.Result{ID: id, Sent: true}); got != 1 {
		t.Fatalf("complete with the current token: changed %d rows, want 1", got)
	}
	if got := e.complete(cur.Token, outbox.Result{ID: id, Error: "again"}); got != 0 {
		t.Fatalf("a second write-back after sent: changed %d rows, want 0", got)
	}
	next := e.claim(outbox.ClaimRequest{})
	wantLanes(t, "next", next.Records, "crm/A#2")
	if got := e.complete(old.Token, outbox.Result{ID: next.Records[0].ID, Sent: true}); got != 0 {
		t.Fatalf("an old token on another event: changed %d rows, want 0", got)
	}
}

// A claim that carries the previous round's results writes them first, fenced as
// Complete is, and in the same transaction: it sees the lanes they advanced, and a
// write-back it refuses leaves both undone.
func testOutboxClaimWritesBackFirst(t *testing.T, e *outboxEnv) {
	e.put(msg("crm", "A", 1), msg("crm", "A", 2), msg("crm", "B", 1), msg("crm", "C", 1), msg("crm", "D", 1))
	first := e.claim(outbox.ClaimRequest{})
	wantLanes(t, "first claim", first.Records, "crm/A#1", "crm/B#1", "crm/C#1", "crm/D#1")
	if first.Completed != (outbox.Completed{}) {
		t.Fatalf("a claim with no write-back reports %+v written", first.Completed)
	}
	a1, b1, c1, d1 := first.Records[0].ID, first.Records[1].ID, first.Records[2].ID, first.Records[3].ID
	later := e.clock.Now().Add(time.Hour)
	done := outbox.Completion{Token: first.Token, Results: []outbox.Result{
		{ID: a1, Sent: true},
		{ID: b1, Error: "crm answered 500", NextAttemptAt: later},
		{ID: c1, Released: true},
		{ID: d1, Dead: true, Error: "crm rejects it"},
	}}

	// Refused: a result with two outcomes. Nothing is written, nothing claimed.
	bad := done
	bad.Results = append(slices.Clone(done.Results[:1]), outbox.Result{ID: b1, Sent: true, Dead: true})
	if _, err := e.s.Claim(e.t.Context(), outbox.ClaimRequest{Limit: 100, Lease: lease, Complete: bad}); err == nil {
		t.Fatal("a claim carrying a result with two outcomes: no error")
	}
	if r := e.record(a1); r.SentAt != nil || r.LeaseUntil == nil {
		t.Fatalf("after the refused claim, A#1 is %+v; want unsent and still leased", r)
	}

	second := e.claim(outbox.ClaimRequest{Complete: done})
	// A#1 is sent, so A#2 is its lane's head now; C#1 was given back; B#1 waits an
	// hour; D#1 is dead.
	wantLanes(t, "second claim", second.Records, "crm/A#2", "crm/C#1")
	if want := (outbox.Completed{Rows: 4, Sent: 1}); second.Completed != want {
		t.Fatalf("second claim wrote back %+v, want %+v", second.Completed, want)
	}
	if r := e.record(a1); r.SentAt == nil || r.LeaseUntil != nil {
		t.Fatalf("A#1 after the write-back: %+v; want sent, lease cleared", r)
	}
	if r := e.record(b1); r.SentAt != nil || r.LastError != "crm answered 500" || r.LeaseUntil != nil || !near2(r.NextAttemptAt, later, time.Second) {
		t.Fatalf("B#1 after the write-back: %+v; want unsent with its error, due in an hour", r)
	}
	if r := e.record(c1); r.Attempts != 1 || r.LeaseUntil == nil {
		t.Fatalf("C#1 after it was given back and claimed again: %+v; want 1 attempt (the given-back one not counted), leased", r)
	}
	if r := e.record(d1); r.DeadAt == nil || r.LastError != "crm rejects it" {
		t.Fatalf("D#1 after the write-back: %+v; want dead with its error", r)
	}

	// Fenced: the first claim's token is spent on C#1 (claimed again), and a write-back
	// under it changes nothing there; a claim with nothing left to lease still writes
	// back and says so.
	third := e.claim(outbox.ClaimRequest{Complete: outbox.Completion{Token: first.Token, Results: []outbox.Result{{ID: c1, Sent: true}}}})
	if len(third.Records) != 0 || third.Completed != (outbox.Completed{}) {
		t.Fatalf("a stale write-back with the claim: claimed %d, wrote %+v; want nothing of either", len(third.Records), third.Completed)
	}
	var rs []outbox.Result
	for _, r := range second.Records {
		rs = append(rs, outbox.Result{ID: r.ID, Sent: true})
	}
	last := e.claim(outbox.ClaimRequest{Complete: outbox.Completion{Token: second.Token, Results: rs}})
	if len(last.Records) != 0 || last.Token != "" || last.Completed != (outbox.Completed{Rows: 2, Sent: 2}) {
		t.Fatalf("the last claim: %d records, token %q, wrote %+v; want none, no token, 2 rows sent", len(last.Records), last.Token, last.Completed)
	}
	if unsent := e.list(outbox.ListFilter{Unsent: true}); len(unsent) != 2 {
		t.Fatalf("unsent at the end: %v; want B#1 (waiting) and D#1 (dead)", lanes(unsent))
	}
}

func testOutboxDeadBlocksLane(t *testing.T, e *outboxEnv) {
	e.put(msg("crm", "A", 1), msg("crm", "A", 2), msg("erp", "A", 1), msg("erp", "A", 2))
	c := e.claim(outbox.ClaimRequest{})
	wantLanes(t, "claim", c.Records, "crm/A#1", "erp/A#1")
	e.complete(c.Token,
		outbox.Result{ID: c.Records[0].ID, Dead: true, Error: "HTTP 400"},
		outbox.Result{ID: c.Records[1].ID, Dead: true, Error: "HTTP 400"})
	e.clock.Advance(time.Hour)
	if c := e.claim(outbox.ClaimRequest{}); len(c.Records) != 0 {
		t.Fatalf("claim behind dead heads: got %v, want nothing", lanes(c.Records))
	}
	dead := e.list(outbox.ListFilter{Dead: true})
	wantLanes(t, "list --dead", dead, "erp/A#1", "crm/A#1")
	for _, r := range dead {
		if r.DeadAt == nil || r.LastError != "HTTP 400" || r.LeaseUntil != nil {
			t.Fatalf("dead record %s: %+v", lane(r), r)
		}
	}
	c = e.claim(outbox.ClaimRequest{SkipDead: []string{"crm"}})
	wantLanes(t, "claim with on_dead: skip for crm", c.Records, "crm/A#2")
	e.sendAll(c)
	if c := e.claim(outbox.ClaimRequest{SkipDead: []string{"crm"}}); len(c.Records) != 0 {
		t.Fatalf("claim after the skip: got %v, want nothing (erp still blocks)", lanes(c.Records))
	}
}

func testOutboxDisableDestination(t *testing.T, e *outboxEnv) {
	e.put(msg("crm", "A", 1), msg("crm", "A", 2), msg("crm", "B", 1), msg("erp", "A", 1))
	c := e.claim(outbox.ClaimRequest{})
	wantLanes(t, "claim", c.Records, "crm/A#1", "crm/B#1", "erp/A#1")
	n, err := e.s.DisableDestination(t.Context(), "crm", "HTTP 410 Gone")
	if err != nil {
		t.Fatal(err)
	}
	if n != 3 {
		t.Fatalf("disable crm: %d events died, want 3 (the leased ones too)", n)
	}
	if got, err := e.s.DisabledDestinations(t.Context()); err != nil || len(got) != 1 || got["crm"] != "HTTP 410 Gone" {
		t.Fatalf("disabled destinations: got %v, %v", got, err)
	}
	// The relays' write-backs still land; a failure keeps the event dead.
	if got := e.complete(c.Token,
		outbox.Result{ID: c.Records[0].ID, Dead: true, Error: "HTTP 410 Gone"},
		outbox.Result{ID: c.Records[1].ID, Error: "HTTP 410 Gone"},
		outbox.Result{ID: c.Records[2].ID, Sent: true}); got != 3 {
		t.Fatalf("complete: changed %d rows, want 3", got)
	}
	for _, r := range e.list(outbox.ListFilter{Destination: "crm"}) {
		if r.DeadAt == nil || r.SentAt != nil {
			t.Fatalf("%s after disable: dead %v, sent %v; want dead", lane(r), r.DeadAt, r.SentAt)
		}
	}
	e.put(msg("crm", "C", 1), msg("erp", "C", 1))
	e.clock.Advance(2 * lease)
	wantLanes(t, "claim with crm disabled", e.claim(outbox.ClaimRequest{SkipDead: []string{"crm"}}).Records, "erp/C#1")

	st := status(t, e, 5)
	if got := st["crm"]; got.Disabled != "HTTP 410 Gone" || got.Dead != 3 || got.Pending != 1 {
		t.Fatalf("status of crm: %+v; want disabled with the reason, 3 dead, 1 pending", got)
	}
	if _, err := e.s.DisableDestination(t.Context(), "", "x"); err == nil {
		t.Fatal("disable with no destination: got nil, want an error")
	}
}

func testOutboxRequeue(t *testing.T, e *outboxEnv) {
	e.put(msg("crm", "A", 1), msg("crm", "A", 2), msg("crm", "B", 1), msg("erp", "A", 1))
	c := e.claim(outbox.ClaimRequest{})
	e.complete(c.Token,
		outbox.Result{ID: c.Records[0].ID, Dead: true, Error: "HTTP 422"},                                  // crm/A#1
		outbox.Result{ID: c.Records[1].ID, Error: "HTTP 503", NextAttemptAt: e.clock.Now().Add(time.Hour)}, // crm/B#1
		outbox.Result{ID: c.Records[2].ID, Dead: true, Error: "HTTP 422"})                                  // erp/A#1
	deadA, waitingB, deadErp := c.Records[0].ID, c.Records[1].ID, c.Records[2].ID

	// An unknown id: nothing is requeued, and the error says which.
	n, err := e.s.Requeue(t.Context(), []int64{deadA, 987654321}, false)
	if !errors.Is(err, outbox.ErrNotFound) || n != 0 {
		t.Fatalf("requeue with an unknown id: got %d, %v; want 0, %v", n, err, outbox.ErrNotFound)
	}
	if r := e.record(deadA); r.DeadAt == nil {
		t.Fatal("a requeue that named an unknown id requeued the others")
	}
	// Not dead: left alone.
	if n, err := e.s.Requeue(t.Context(), []int64{waitingB}, false); err != nil || n != 0 {
		t.Fatalf("requeue of an event that is not dead: got %d, %v; want 0", n, err)
	}
	if n, err := e.s.Requeue(t.Context(), []int64{deadA}, false); err != nil || n != 1 {
		t.Fatalf("requeue by id: got %d, %v; want 1", n, err)
	}
	r := e.record(deadA)
	if r.DeadAt != nil || r.Attempts != 0 || r.LastError != "" || r.LeaseUntil != nil || r.NextAttemptAt.After(e.clock.Now()) {
		t.Fatalf("requeued record: %+v; want alive, due, attempts 0, no error", r)
	}
	c = e.claim(outbox.ClaimRequest{})
	wantLanes(t, "claim after requeue", c.Records, "crm/A#1")
	if c.Records[0].Attempts != 1 {
		t.Fatalf("attempts after requeue and claim: got %d, want 1", c.Records[0].Attempts)
	}
	e.sendAll(c)

	// --all-dead requeues every dead event and re-enables its destination.
	if _, err := e.s.DisableDestination(t.Context(), "erp", "HTTP 410 Gone"); err != nil {
		t.Fatal(err)
	}
	if n, err := e.s.Requeue(t.Context(), nil, true); err != nil || n != 1 {
		t.Fatalf("requeue --all-dead: got %d, %v; want 1", n, err)
	}
	if got, err := e.s.DisabledDestinations(t.Context()); err != nil || len(got) != 0 {
		t.Fatalf("disabled destinations after requeue: got %v, %v; want none", got, err)
	}
	wantLanes(t, "claim after requeue --all-dead", e.claim(outbox.ClaimRequest{}).Records, "crm/A#2", "erp/A#1")
	if r := e.record(deadErp); r.Attempts != 1 {
		t.Fatalf("requeued erp/A#1: attempts %d, want 1", r.Attempts)
	}
	if n, err := e.s.Requeue(t.Context(), nil, false); err != nil || n != 0 {
		t.Fatalf("requeue of nothing: got %d, %v", n, err)
	}
}

func testOutboxReplay(t *testing.T, e *outboxEnv) {
	e.put(msg("crm", "A", 1), msg("crm", "A", 2), msg("erp", "A", 1), msg("crm", "B", 1))
	e.deliverAll()
	before := map[int64]string{}
	for _, r := range e.list(outbox.ListFilter{}) {
		before[r.ID] = r.EventID
	}
	n, err := e.s.Replay(t.Context(), "A", "crm")
	if err != nil || n != 2 {
		t.Fatalf("replay A at crm: got %d, %v; want 2", n, err)
	}
	wantLanes(t, "unsent after replay", e.list(outbox.ListFilter{Unsent: true}), "crm/A#2", "crm/A#1")
	c := e.claim(outbox.ClaimRequest{})
	wantLanes(t, "claim after replay", c.Records, "crm/A#1")
	if got := c.Records[0]; got.EventID != before[got.ID] || got.Attempts != 1 {
		t.Fatalf("replayed record: event id %s, attempts %d; want the same event id %s, 1", got.EventID, got.Attempts, before[got.ID])
	}
	e.sendAll(c)
	c = e.claim(outbox.ClaimRequest{})
	wantLanes(t, "then", c.Records, "crm/A#2")
	e.sendAll(c)

	if n, err := e.s.Replay(t.Context(), "A", ""); err != nil || n != 3 {
		t.Fatalf("replay A everywhere: got %d, %v; want 3", n, err)
	}
	if _, err := e.s.Replay(t.Context(), "nothing-here", ""); !errors.Is(err, outbox.ErrNotFound) {
		t.Fatalf("replay of an unknown aggregate: got %v, want %v", err, outbox.ErrNotFound)
	}
	if _, err := e.s.Replay(t.Context(), "B", "erp"); !errors.Is(err, outbox.ErrNotFound) {
		t.Fatalf("replay of an aggregate at a destination it has no events for: got %v, want %v", err, outbox.ErrNotFound)
	}
}

// An operator's replay or requeue can put an earlier event of a lane back while a
// later one is in flight; the earlier one waits until the lane is idle.
func testOutboxPutBackNeverRunsALaneTwice(t *testing.T, e *outboxEnv) {
	e.put(msg("crm", "A", 1), msg("crm", "A", 2))
	e.sendAll(e.claim(outbox.ClaimRequest{}))
	out := e.claim(outbox.ClaimRequest{})
	wantLanes(t, "claim", out.Records, "crm/A#2")
	if n, err := e.s.Replay(t.Context(), "A", "crm"); err != nil || n != 1 {
		t.Fatalf("replay: got %d, %v; want 1", n, err)
	}
	if c := e.claim(outbox.ClaimRequest{}); len(c.Records) != 0 {
		t.Fatalf("claim after a replay while crm/A#2 is in flight: got %v, want nothing", lanes(c.Records))
	}
	e.sendAll(out)
	wantLanes(t, "claim once crm/A#2 is sent", e.claim(outbox.ClaimRequest{}).Records, "crm/A#1")

	// on_dead: skip, then a requeue of the dead head while the next is out.
	e.put(msg("erp", "B", 1), msg("erp", "B", 2))
	c := e.claim(outbox.ClaimRequest{Only: []string{"erp"}})
	e.complete(c.Token, outbox.Result{ID: c.Records[0].ID, Dead: true, Error: "HTTP 422"})
	out = e.claim(outbox.ClaimRequest{Only: []string{"erp"}, SkipDead: []string{"erp"}})
	wantLanes(t, "claim past the dead head", out.Records, "erp/B#2")
	if n, err := e.s.Requeue(t.Context(), []int64{c.Records[0].ID}, false); err != nil || n != 1 {
		t.Fatalf("requeue: got %d, %v; want 1", n, err)
	}
	if c := e.claim(outbox.ClaimRequest{Only: []string{"erp"}, SkipDead: []string{"erp"}}); len(c.Records) != 0 {
		t.Fatalf("claim after a requeue while erp/B#2 is in flight: got %v, want nothing", lanes(c.Records))
	}
	e.clock.Advance(2 * lease) // the lease of erp/B#2 runs out: the lane is free
	wantLanes(t, "claim after the lease expired", e.claim(outbox.ClaimRequest{Only: []string{"erp"}}).Records, "erp/B#1")
}

func testOutboxPrune(t *testing.T, e *outboxEnv) {
	e.put(msg("crm", "A", 1), msg("crm", "B", 1), msg("crm", "C", 1), msg("crm", "D", 1), msg("crm", "E", 1))
	c := e.claim(outbox.ClaimRequest{})
	recs := c.Records // A, B, C, D, E
	t0 := e.clock.Now()
	for i, r := range recs[:3] { // A, B, C sent an hour apart
		if i > 0 {
			e.clock.Advance(time.Hour)
		}
		e.complete(c.Token, outbox.Result{ID: r.ID, Sent: true})
	}
	e.complete(c.Token, outbox.Result{ID: recs[3].ID, Dead: true, Error: "gone"}) // D dead
	// E stays in flight.

	n, err := e.s.Prune(t.Context(), e.clock.Now().Add(time.Hour), 1)
	if err != nil || n != 1 {
		t.Fatalf("prune, limit 1: got %d, %v; want 1", n, err)
	}
	wantLanes(t, "after prune limit 1", e.list(outbox.ListFilter{}), "crm/E#1", "crm/D#1", "crm/C#1", "crm/B#1")
	n, err = e.s.Prune(t.Context(), t0.Add(90*time.Minute), 10)
	if err != nil || n != 1 {
		t.Fatalf("prune before the cut: got %d, %v; want 1 (B; C was sent after the cut)", n, err)
	}
	wantLanes(t, "after prune before the cut", e.list(outbox.ListFilter{}), "crm/E#1", "crm/D#1", "crm/C#1")
	e.clock.Advance(1000 * time.Hour)
	n, err = e.s.Prune(t.Context(), e.clock.Now(), 10)
	if err != nil || n != 1 {
		t.Fatalf("prune everything sent: got %d, %v; want 1", n, err)
	}
	wantLanes(t, "unsent and dead are never pruned", e.list(outbox.ListFilter{}), "crm/E#1", "crm/D#1")
	// A pruned lane does not reuse its sequence.
	e.put(msg("crm", "A", 2))
	wantLanes(t, "after pruning A", e.list(outbox.ListFilter{AggregateID: "A"}), "crm/A#2")
}

func status(t *testing.T, e *outboxEnv, struggling int) map[string]outbox.DestinationStatus {
	t.Helper()
	st, err := e.s.Status(t.Context(), struggling)
	if err != nil {
		t.Fatalf("status: %v", err)
	}
	m := map[string]outbox.DestinationStatus{}
	var names []string
	for _, s := range st {
		m[s.Destination] = s
		names = append(names, s.Destination)
	}
	if !slices.IsSorted(names) {
		t.Fatalf("status: destinations %v are not sorted", names)
	}
	return m
}

func testOutboxStatusAndList(t *testing.T, e *outboxEnv) {
	if st := status(t, e, 5); len(st) != 0 {
		t.Fatalf("status of an empty outbox: got %v", st)
	}
	e.put(msg("crm", "A", 1), msg("crm", "A", 2), msg("crm", "A", 3))
	e.put(msg("crm", "B", 1))
	e.put(msg("erp", "C", 1))
	e.put(msg("bot", "D", 1))
	c := e.claim(outbox.ClaimRequest{Lease: 24 * time.Hour})
	wantLanes(t, "claim", c.Records, "crm/A#1", "crm/B#1", "erp/C#1", "bot/D#1")
	e.complete(c.Token,
		outbox.Result{ID: c.Records[1].ID, Sent: true},
		outbox.Result{ID: c.Records[2].ID, Error: "HTTP 503", NextAttemptAt: e.clock.Now().Add(time.Hour)},
		outbox.Result{ID: c.Records[3].ID, Dead: true, Error: "HTTP 400"})
	e.clock.Advance(10 * time.Minute)

	st := status(t, e, 0)
	want := map[string]outbox.DestinationStatus{
		"crm": {Destination: "crm", Pending: 2, InFlight: 1, Struggling: 1, Sent: 1},
		"erp": {Destination: "erp", Pending: 1, Struggling: 1},
		"bot": {Destination: "bot", Dead: 1},
	}
	for name, w := range want {
		g := st[name]
		lag := g.Lag
		g.Lag, w.Lag = 0, 0
		if g != w {
			t.Fatalf("status of %s (struggling > 0): got %+v, want %+v", name, g, w)
		}
		if name == "bot" {
			if lag != 0 {
				t.Fatalf("status of bot: lag %v with only a dead event, want 0", lag)
			}
			continue
		}
		if lag < 10*time.Minute || lag > 11*time.Minute {
			t.Fatalf("status of %s: lag %v, want about 10m", name, lag)
		}
	}
	if len(st) != len(want) {
		t.Fatalf("status: got %v", st)
	}
	if got := status(t, e, 1)["crm"].Struggling; got != 0 {
		t.Fatalf("struggling > 1: got %d, want 0", got)
	}

	all := e.list(outbox.ListFilter{})
	wantLanes(t, "list, newest first", all, "bot/D#1", "erp/C#1", "crm/B#1", "crm/A#3", "crm/A#2", "crm/A#1")
	for i := 1; i < len(all); i++ {
		if all[i].ID >= all[i-1].ID {
			t.Fatalf("list: ids %d then %d, want descending", all[i-1].ID, all[i].ID)
		}
	}
	wantLanes(t, "list --limit 2", e.list(outbox.ListFilter{Limit: 2}), "bot/D#1", "erp/C#1")
	wantLanes(t, "list --dead", e.list(outbox.ListFilter{Dead: true}), "bot/D#1")
	wantLanes(t, "list unsent", e.list(outbox.ListFilter{Unsent: true}), "bot/D#1", "erp/C#1", "crm/A#3", "crm/A#2", "crm/A#1")
	wantLanes(t, "list --aggregate A", e.list(outbox.ListFilter{AggregateID: "A"}), "crm/A#3", "crm/A#2", "crm/A#1")
	wantLanes(t, "list erp", e.list(outbox.ListFilter{Destination: "erp"}), "erp/C#1")
	wantLanes(t, "list crm unsent A", e.list(outbox.ListFilter{Destination: "crm", Unsent: true, AggregateID: "A"}), "crm/A#3", "crm/A#2", "crm/A#1")
	if got := e.list(outbox.ListFilter{AggregateID: "nothing"}); len(got) != 0 {
		t.Fatalf("list of an unknown aggregate: got %v", lanes(got))
	}
	if r := e.list(outbox.ListFilter{Destination: "erp"})[0]; r.LastError != "HTTP 503" || r.Attempts != 1 {
		t.Fatalf("list record erp/C#1: %+v", r)
	}
}

// Four relays claim over many lanes at once: no lane is ever in flight twice, and
// each lane's events are claimed once each, in sequence order.
func testOutboxConcurrentClaimers(t *testing.T, e *outboxEnv) {
	const (
		nLanes   = 40
		perLane  = 5
		claimers = 4
	)
	for l := range nLanes {
		var ms []outbox.Message
		for i := range perLane {
			ms = append(ms, msg([]string{"crm", "erp"}[l%2], fmt.Sprintf("lane-%02d", l), i))
		}
		e.put(ms...)
	}
	var (
		mu        sync.Mutex
		inFlight  = map[string]string{} // lane → claim token
		lastSeq   = map[string]int64{}
		delivered atomic.Int64
		failed    atomic.Bool
		wg        sync.WaitGroup
	)
	fail := func(format string, args ...any) {
		failed.Store(true)
		t.Errorf(format, args...)
	}
	deadline := time.Now().Add(30 * time.Second)
	for w := range claimers {
		wg.Go(func() {
			for delivered.Load() < nLanes*perLane && !failed.Load() {
				if time.Now().After(deadline) {
					fail("claimer %d: gave up with %d of %d delivered", w, delivered.Load(), nLanes*perLane)
					return
				}
				c, err := e.s.Claim(context.Background(), outbox.ClaimRequest{Limit: 7, Lease: time.Hour})
				if err != nil {
					fail("claimer %d: %v", w, err)
					return
				}
				mu.Lock()
				for _, r := range c.Records {
					k := r.Destination + "/" + r.AggregateID
					if other, ok := inFlight[k]; ok {
						fail("lane %s claimed by %s while claim %s holds it", lane(r), c.Token, other)
					}
					if r.Sequence != lastSeq[k]+1 {
						fail("lane %s: claimed after sequence %d", lane(r), lastSeq[k])
					}
					inFlight[k], lastSeq[k] = c.Token, r.Sequence
				}
				mu.Unlock()
				runtime.Gosched() // publish
				var rs []outbox.Result
				mu.Lock()
				for _, r := range c.Records {
					delete(inFlight, r.Destination+"/"+r.AggregateID)
					rs = append(rs, outbox.Result{ID: r.ID, Sent: true})
				}
				mu.Unlock()
				if len(rs) == 0 {
					time.Sleep(time.Millisecond)
					continue
				}
				n, err := e.s.Complete(context.Background(), c.Token, rs)
				if err != nil || n != len(rs) {
					fail("claimer %d: complete %d: got %d, %v", w, len(rs), n, err)
					return
				}
				delivered.Add(int64(n))
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	if got := len(e.list(outbox.ListFilter{Unsent: true})); got != 0 {
		t.Fatalf("unsent after the claimers stopped: %d", got)
	}
	for k, s := range lastSeq {
		if s != perLane {
			t.Fatalf("lane %s: last claimed sequence %d, want %d", k, s, perLane)
		}
	}
}
