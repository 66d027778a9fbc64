package sim

import (
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"
)

// Fault is what a simulator answers, or does, instead of serving a request: the same
// type for every simulator, queued in its Faults. What it applies to is Op (and
// ExternalID); what happens is Status with RetryAfter and Body, or a Kind the
// simulator knows. A simulator refuses, when the fault is queued, a field it has no
// use for (see each one's Faults).
type Fault struct {
	// Op is the operation or path the fault applies to, in the simulator's own
	// names (kaspisim.OpList, ozonsim.PathShip, wbsim.OpOrders, "create" for 1C, …);
	// "" is every request.
	Op string
	// ExternalID, when set, narrows the fault to the requests about this order (1C:
	// finds, creates and cancels of this external id).
	ExternalID string
	// After lets this many matching requests through before the fault fires: the
	// second page of a listing, say.
	After int

	// Status is the HTTP status answered, with the simulator's own error body for
	// it (each marketplace's documented shape).
	Status int
	// RetryAfter, when positive, is sent as the simulator's API documents it: the
	// Retry-After header in whole seconds rounded up (Kaspi, Ozon, the webhook sink),
	// X-Ratelimit-Retry on a 429 (Wildberries). RetryNow sends 0 seconds; 0 sends
	// no header where the API may leave it out.
	RetryAfter time.Duration
	// Body, when set, is answered verbatim with Status instead of the simulator's
	// own error body.
	Body string

	// Kind is what the fault does beyond answering Status: Malformed, or one of the
	// kinds a simulator declares (onecsim.DropAfterCreate, …). "" answers Status.
	Kind Kind
	// Delay and Hold time the kinds that take time (1C's Stall, SlowCreate and
	// Gateway504After); other kinds ignore them.
	Delay, Hold time.Duration
}

// Kind is what a Fault does beyond answering a status. Its value is its name, as
// a simulator's control endpoint takes it.
type Kind string

// Malformed answers 200 with a truncated JSON body (Body, when set, instead), as a
// gateway that cut the answer short would: Ozon's and Wildberries' listings.
const Malformed Kind = "malformed"

// RetryNow, as a Fault's RetryAfter, sends a retry delay of 0 seconds.
const RetryNow time.Duration = -1

// Forever, as the n of Faults.Add, fires the fault on every matching request until
// Faults.Clear.
const Forever = -1

// RetryAfterSeconds is RetryAfter in whole seconds, rounded up, as a header value,
// and whether one is to be sent: RetryNow is "0", 0 is none.
func (f Fault) RetryAfterSeconds() (string, bool) {
	switch {
	case f.RetryAfter == RetryNow:
		return "0", true
	case f.RetryAfter <= 0:
		return "", false
	}
	return strconv.FormatInt(int64((f.RetryAfter+time.Second-1)/time.Second), 10), true
}

// Matches says whether the fault applies to a request of op about externalID: Op ""
// matches every op, ExternalID "" every external id.
func (f Fault) Matches(op, externalID string) bool {
	return (f.Op == "" || f.Op == op) && (f.ExternalID == "" || f.ExternalID == externalID)
}

func (f Fault) check() error {
	switch {
	case f.After < 0:
		return fmt.Errorf("sim: fault after %d is negative", f.After)
	case f.Status != 0 && (f.Status < 100 || f.Status > 599):
		return fmt.Errorf("sim: fault status %d is not an HTTP status", f.Status)
	case f.RetryAfter < 0 && f.RetryAfter != RetryNow:
		return fmt.Errorf("sim: fault retry after %s is negative (RetryNow sends 0)", f.RetryAfter)
	case f.Delay < 0:
		return fmt.Errorf("sim: fault delay %s is negative", f.Delay)
	case f.Hold < 0:
		return fmt.Errorf("sim: fault hold %s is negative", f.Hold)
	}
	return nil
}

// Faults is a simulator's queue of faults: each queued fault fires on the requests
// it matches, first queued first, until it has fired its n times. It is safe for
// concurrent use.
type Faults struct {
	check func(Fault) error

	mu     sync.Mutex
	queued []*queued
}

type queued struct {
	f    Fault
	skip int // matching requests still let through (After)
	left int // Forever: no end
}

// NewFaults returns an empty queue whose Add refuses a fault check returns an error
// for (check may be nil): the simulator's own rules on top of Fault's.
func NewFaults(check func(Fault) error) *Faults {
	return &Faults{check: check}
}

// Add queues f for the next n requests it matches, Forever for every one until
// Clear; n = 0 queues nothing. It panics on an invalid fault or n (a mistake in a
// test); Check says why without queueing.
func (q *Faults) Add(n int, f Fault) {
	if err := q.Check(n, f); err != nil {
		panic(err)
	}
	if n == 0 {
		return
	}
	q.mu.Lock()
	q.queued = append(q.queued, &queued{f: f, skip: f.After, left: n})
	q.mu.Unlock()
}

// Check is the error Add would panic with, nil when n and f can be queued.
func (q *Faults) Check(n int, f Fault) error {
	if n < Forever {
		return fmt.Errorf("sim: fault count %d: want Forever (-1), 0 or more", n)
	}
	if err := f.check(); err != nil {
		return err
	}
	if q.check != nil {
		return q.check(f)
	}
	return nil
}

// Clear drops every queued fault.
func (q *Faults) Clear() {
	q.mu.Lock()
	q.queued = nil
	q.mu.Unlock()
}

// Pending is the number of queued faults that have not fired out.
func (q *Faults) Pending() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.queued)
}

// Take fires the first queued fault that match accepts and whose After has run
// out, and reports whether there was one; a matching fault still letting requests
// through counts this one. The simulator calls it for each request, with its own
// notion of what matches (Fault.Matches, mostly).
func (q *Faults) Take(match func(Fault) bool) (Fault, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for i, e := range q.queued {
		if !match(e.f) {
			continue
		}
		if e.skip > 0 {
			e.skip--
			continue
		}
		if e.left > 0 {
			e.left--
			if e.left == 0 {
				q.queued = slices.Delete(q.queued, i, i+1)
			}
		}
		return e.f, true
	}
	return Fault{}, false
}
