package storetest

import (
	"sync"
	"testing"
	"time"

	"github.com/ordersync/ordersync/connectors"
	"github.com/ordersync/ordersync/internal/inbox"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/outbox"
	"github.com/ordersync/ordersync/internal/payouts"
	"github.com/ordersync/ordersync/internal/stock"
	"github.com/ordersync/ordersync/internal/ui/session"
)

// Harness adapts a store (one backend) to the conformance suite. It is the one thing
// a store's tests give Run.
type Harness struct {
	// New opens a fresh, migrated, empty database for one subtest, configured as o
	// says, and returns its stores; it closes them in t.Cleanup. Every subtest calls
	// it once, from its own goroutine, and subtests run in parallel.
	New func(t *testing.T, o Options) Stores
}

// Options are what a topic of the suite asks of the database New opens.
type Options struct {
	// Clock, when set, is the store's clock, used as is (its Now is the store's
	// Config.Now). When nil the store keeps its own clock, as in production (on
	// PostgreSQL, the database's).
	Clock *Clock
	// TakeoverAfter is the store's TakeoverAfter. Zero: at once (the smallest the
	// store takes), so that released and failed claims are taken over straight away;
	// the takeover wait has tests of its own (the Doubt topic, DoubtTakeover).
	TakeoverAfter time.Duration
	// Conns, when set, is how many connections the topic uses at once (the inbox's
	// ConcurrentDeliveries): a store with a pool sizes it for them, as far as the
	// test server allows (the rest wait for a connection). Zero: the store's default.
	Conns int
}

// Stores are the stores of one database, as New returns them. Every topic uses
// some: a topic whose store is missing fails.
type Stores struct {
	Journal journal.Store
	Outbox  outbox.Store
	// Enqueue writes into Outbox through the store's Enqueue on a transaction of the
	// same database (see EnqueueFunc).
	Enqueue EnqueueFunc
	Inbox   inbox.Store
	Stock   stock.Store
	Cursors connectors.CursorStore
	// Sessions are the journal pages' sessions (the Sessions topic).
	Sessions session.Store
	// Payouts are the payout lines and their readings (the Payouts topic).
	Payouts payouts.Store
}

// Run runs the whole conformance suite against the store h opens: one subtest per
// topic, each split into its cases, so that a case is named by the caller, its topic
// and itself (TestConformance/Doubt/SettleUntilDefersTheClaim):
//
//	func TestConformance(t *testing.T) {
//		t.Parallel()
//		storetest.Run(t, storetest.Harness{New: func(t *testing.T, o storetest.Options) storetest.Stores {
//			db := open(t, o)
//			return storetest.Stores{Journal: db.Journal(), …}
//		}})
//	}
//
// Topics and cases run in parallel, each case on its own database.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.New == nil {
		t.Fatal("storetest: Harness.New is nil")
	}
	for _, topic := range []struct {
		name string
		run  func(t *testing.T, h Harness)
	}{
		{"Journal", runJournal},
		{"Cursors", runCursors},
		{"Doubt", runDoubt},
		{"Accountant", runAccountant},
		{"List", runList},
		{"Inbox", runInbox},
		{"Outbox", runOutbox},
		{"Paging", runPaging},
		{"Stock", runStock},
		{"Sessions", runSessions},
		{"Payouts", runPayouts},
	} {
		t.Run(topic.name, func(t *testing.T) {
			t.Parallel()
			topic.run(t, h)
		})
	}
}

// open is h.New for one case, with the stores the case needs checked.
func (h Harness) open(t *testing.T, o Options, need ...string) Stores {
	t.Helper()
	s := h.New(t, o)
	for _, name := range need {
		var missing bool
		switch name {
		case "Journal":
			missing = s.Journal == nil
		case "Outbox":
			missing = s.Outbox == nil
		case "Enqueue":
			missing = s.Enqueue == nil
		case "Inbox":
			missing = s.Inbox == nil
		case "Stock":
			missing = s.Stock == nil
		case "Cursors":
			missing = s.Cursors == nil
		case "Sessions":
			missing = s.Sessions == nil
		case "Payouts":
			missing = s.Payouts == nil
		default:
			t.Fatalf("storetest: no store %q", name)
		}
		if missing {
			t.Fatalf("storetest: the harness gives no %s store", name)
		}
	}
	return s
}

// Clock is a settable clock for the stores under test. A stopped clock (NewClock)
// moves only when Advance moves it; a running one (NewRunningClock) is the real
// clock plus what Advance added.
type Clock struct {
	mu      sync.Mutex
	now     time.Time     // a stopped clock's time
	offset  time.Duration // a running clock's lead on time.Now, which only grows
	running bool
}

// NewClock is a stopped clock at the current time, to the microsecond.
func NewClock() *Clock { return &Clock{now: time.Now().UTC().Truncate(time.Microsecond)} }

// NewRunningClock is the real clock, which Advance moves ahead of time.Now: it never
// runs behind it.
func NewRunningClock() *Clock { return &Clock{running: true} }

// Now is the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.running {
		return time.Now().Add(c.offset)
	}
	return c.now
}

// Advance moves the clock on by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.running {
		c.offset += d
		return
	}
	c.now = c.now.Add(d)
}
