package engine_test

// Exactly once at its edges: a doubt that outlives worker.max_attempts, a duplicate
// that 1C commits after the settle time, a found order whose external id is not the
// one asked for, the fetched order in order.created, and the settle time counted
// from the moment the POST was written. Each test counts what the simulated 1C holds.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ordersync/ordersync/internal/engine"
	"github.com/ordersync/ordersync/internal/eventually"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/onec"
	"github.com/ordersync/ordersync/internal/onec/httpservice"
	"github.com/ordersync/ordersync/internal/order"
	"github.com/ordersync/ordersync/internal/outbox"
	"github.com/ordersync/ordersync/internal/sim"
	"github.com/ordersync/ordersync/internal/sim/onecsim"
)

// A create whose unknown outcomes reach worker.max_attempts fails, but its newest
// POST may still be at work in 1C. A cancel that comes then must not conclude
// "nothing to cancel" before that POST has settled, and a resync or a wake must not
// POST again: failed is not settled. With max_attempts 2 the first POST is lost before
// 1C runs it (its settle time is long past) and the second is slow.
func TestDoubtThatReachesMaxAttemptsKeepsItsSettleTime(t *testing.T) {
	t.Parallel()
	for _, maxAttempts := range []int{1, 2} {
		for _, path := range []string{"cancel", "resync", "wake"} {
			t.Run(fmt.Sprintf("max_attempts=%d/%s", maxAttempts, path), func(t *testing.T) {
				t.Parallel()
				h := newHarness(t, onecsim.Options{})
				h.client = h.scaledClient(scaledTimeout)
				o := testOrder(fmt.Sprintf("MAX%d-%s", maxAttempts, path))
				ext := o.OneCExternalID()
				h.register(o)
				if maxAttempts == 2 {
					h.onec.Faults.Add(1, sim.Fault{Op: "create", Kind: onecsim.DropBeforeCreate})
				}
				h.onec.Faults.Add(1, sim.Fault{Op: "create", Kind: onecsim.SlowCreate, Delay: slowCreate})
				e := running(t, h.engine(nil, engine.Config{Workers: 2, MaxAttempts: maxAttempts,
					OneCTimeout: scaledTimeout, SettleTime: scaledSettle,
					BackoffMin: 10 * time.Millisecond, BackoffMax: 50 * time.Millisecond}))

				failed := h.waitStatus(o.CreateKey(), journal.StatusFailed)
				if failed.UnknownAttempts != maxAttempts {
					t.Fatalf("create failed after %d unknown outcomes (%q), want %d", failed.UnknownAttempts, failed.LastError, maxAttempts)
				}
				if got := h.onec.Stats().Requests["create"]; got != maxAttempts {
					t.Fatalf("1C received %d creates, want %d", got, maxAttempts)
				}
				// The newest POST is still being written by 1C: the journal must say so.
				if failed.SettleUntil == nil || !failed.SettleUntil.After(failed.History[maxAttempts-1].StartedAt) {
					t.Errorf("failed create settles until %v, want after its newest POST (attempt %d started %s)",
						failed.SettleUntil, maxAttempts, failed.History[maxAttempts-1].StartedAt)
				}

				switch path {
				case "cancel":
					cancelKey := h.registerCancel(o, "the buyer cancelled")
					c := h.waitStatus(cancelKey, journal.StatusDone)
					// Whatever the cancel concluded, 1C commits the slow create by now.
					eventually.True(t, "1C to commit the slow create", func() bool { return h.onec.CountExternal(ext) == 1 })
					held := h.onec.Orders()[0]
					if !held.Cancelled {
						t.Fatalf("1C holds %s live, but the journal's cancel is done: %+v", held.Ref, c.Result)
					}
					if c.Result.Ref != held.Ref {
						t.Fatalf("cancel result %+v, want 1C's ref %s", c.Result, held.Ref)
					}
				case "resync":
					op, err := e.RunKey(context.Background(), o.CreateKey())
					if err != nil {
						t.Fatal(err)
					}
					if op.Status == journal.StatusDone && !op.Result.Recovered {
						t.Fatalf("the resync created the order again: %+v", op.Result)
					}
					d := h.waitStatus(o.CreateKey(), journal.StatusDone)
					if !d.Result.Recovered {
						t.Fatalf("result %+v, want the order the slow POST created, found", d.Result)
					}
				case "wake": // a webhook about the order, or a page's requeue button
					if _, err := h.store.Requeue(context.Background(), o.CreateKey()); err != nil {
						t.Fatal(err)
					}
					e.Wake()
					d := h.waitStatus(o.CreateKey(), journal.StatusDone)
					if !d.Result.Recovered {
						t.Fatalf("result %+v, want the order the slow POST created, found", d.Result)
					}
				}
				h.wantOneCOrders(ext, 1)
				if got := h.onec.Stats().Requests["create"]; got != maxAttempts {
					t.Fatalf("1C received %d creates, want %d: a POST was sent before the last one settled", got, maxAttempts)
				}
			})
		}
	}
}

// order.created for a create registered with a fetch payload (a push that only
// named the order) carries the order that was fetched and created, not the stub.
func TestOrderCreatedOfAFetchPayloadCarriesTheFetchedOrder(t *testing.T) {
	t.Parallel()
	h := newHarness(t, onecsim.Options{})
	o := testOrder("ignored")
	f := &stubFetcher{orders: map[string]order.Order{"91": o}}
	key := h.registerFetch("bitrix24", "91")
	routes := outbox.Routes{}
	routes.Add("crm", "", outbox.OrderCreated)
	h.drain(h.engine(nil, engine.Config{Routes: routes, Fetchers: map[string]engine.Fetcher{"bitrix24": f}}))

	events, err := h.db.Outbox().List(context.Background(), outbox.ListFilter{AggregateID: order.AggregateOfKey(key)})
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 1 || events[0].Type != outbox.OrderCreated {
		t.Fatalf("events %+v, want one order.created", events)
	}
	var data struct {
		Order order.Order `json:"order"`
	}
	if err := json.Unmarshal(events[0].Data, &data); err != nil {
		t.Fatal(err)
	}
	want := o
	want.Source, want.ExternalID = "bitrix24", "91"
	if got := data.Order; got.ExternalID != "91" || len(got.Lines) != 1 || got.Customer.Name != o.Customer.Name ||
		!bytes.Equal(got.Canonical(), want.Canonical()) {
		t.Fatalf("order.created carries %s, want the fetched order %s", events[0].Data, want.Canonical())
	}
}

// The settle time counts from the moment the POST was written, not from before the
// client waited for one of the onec.max_concurrency slots: with the only slot taken
// by a slow find of another order just as the create is sent, the create's settle
// time ends no sooner than settle_time after that find gave the slot back.
func TestSettleTimeCountsFromThePostNotFromTheSlotWait(t *testing.T) {
	t.Parallel()
	const hold = 800 * time.Millisecond
	h := newHarness(t, onecsim.Options{})
	h.client = h.newClient("ordersync", testPassword, 1) // one slot
	o := testOrder("SLOT-1")
	h.register(o)
	// The create's POST is answered 504 by a proxy: unknown.
	h.onec.Faults.Add(1, sim.Fault{Op: "create", Kind: onecsim.Gateway504After, Delay: 10 * time.Millisecond, Hold: 10 * time.Millisecond})
	h.onec.Faults.Add(1, sim.Fault{Op: "find", Kind: onecsim.SlowCreate, Delay: hold, ExternalID: "site:OTHER"})
	const settle = 300 * time.Millisecond
	slotTaker := &slotTakingClient{Client: h.client, t: t, sim: h.onec, freed: make(chan time.Time, 1)}
	e := engine.New(h.store, slotTaker, engine.Config{Workers: 1, SettleTime: settle, OneCTimeout: 5 * time.Second,
		BackoffMin: time.Millisecond, BackoffMax: 5 * time.Millisecond, Logger: h.logger()})

	if ran, err := e.RunDue(context.Background()); !ran || err != nil {
		t.Fatalf("RunDue: %v %v", ran, err)
	}
	freed := <-slotTaker.freed
	d := h.show(o.CreateKey())
	if d.Status != journal.StatusPending || d.History[0].Class != journal.ClassUnknown || d.SettleUntil == nil {
		t.Fatalf("after the 504: %s %+v settle %v, want pending on an unknown outcome", d.Status, d.History[0], d.SettleUntil)
	}
	// The POST went out after the find gave the slot back; freed was read after the
	// find returned, so allow for the moment between the two.
	if earliest := freed.Add(settle - 50*time.Millisecond); d.SettleUntil.Before(earliest) {
		t.Fatalf("settles until %s, before the slot was free (%s) plus the settle time: the slot wait was counted",
			d.SettleUntil.Format(time.RFC3339Nano), freed.Format(time.RFC3339Nano))
	}
}

// slotTakingClient has another caller take the client's only slot with a slow find
// right before each create, so that the create waits for it.
type slotTakingClient struct {
	*httpservice.Client
	t     *testing.T // CreateOrder runs in the test's goroutine (RunDue)
	sim   *onecsim.OneC
	freed chan time.Time
}

func (c *slotTakingClient) CreateOrder(ctx context.Context, req onec.CreateOrder) (onec.Created, error) {
	finds := c.sim.Stats().Requests["find"]
	go func() {
		_, _ = c.Client.FindOrders(context.Background(), "site:OTHER")
		c.freed <- time.Now()
	}()
	// The slow find is in 1C, holding the slot, before the create asks for it.
	eventually.True(c.t, "the slow find in 1C", func() bool { return c.sim.Stats().Requests["find"] > finds })
	return c.Client.CreateOrder(ctx, req)
}

// 1C's search ignores letter case; ordersync's external ids do not. site:AB12 and
// site:ab12 are two orders: the second must not be taken for the first (and a
// cancel of it must not cancel the first). It is refused with a warning, and
// nothing is created for it.
func TestAFoundOrderOfAnotherExternalIDIsNotTakenForThisOne(t *testing.T) {
	t.Parallel()
	h := newHarness(t, onecsim.Options{})
	e := h.engine(nil, engine.Config{})
	upper, lower := testOrder("AB12"), testOrder("ab12")
	h.register(upper)
	h.drain(e)
	h.register(lower)
	h.drain(e)

	h.wantOneCOrders("site:AB12", 1)
	if n := h.onec.Count(); n != 1 {
		t.Fatalf("1C holds %d orders, want AB12's only", n)
	}
	d := h.show(lower.CreateKey())
	if d.Status != journal.StatusFailed || !strings.Contains(d.LastError, "letter case") {
		t.Fatalf("site:ab12's create is %s (%q, result %+v), want failed naming the conflict", d.Status, d.LastError, d.Result)
	}
	held := h.onec.Orders()[0]
	if len(d.Warnings) != 1 || d.Warnings[0].Code != journal.WarningExternalIDConflict || d.Warnings[0].Refs[0] != held.Ref {
		t.Fatalf("warnings %+v, want an external_id_conflict naming %s", d.Warnings, held.Ref)
	}
	listed, err := h.store.List(context.Background(), journal.Filter{WarningsOnly: true})
	if err != nil || len(listed) != 1 || listed[0].Key != lower.CreateKey() {
		t.Fatalf("journal list --warnings: %+v %v, want site:ab12's create", listed, err)
	}

	// A cancel of site:ab12 leaves AB12's order alone.
	key := h.registerCancel(lower, "mistyped")
	h.drain(e)
	if c := h.show(key); c.Status != journal.StatusDone || !strings.Contains(c.Result.Note, "nothing to cancel") {
		t.Fatalf("cancel of site:ab12 %s %+v, want done with nothing to cancel", c.Status, c.Result)
	}
	if _, cancelled := h.cancelledIn1C("site:AB12"); cancelled {
		t.Fatal("the cancel of site:ab12 cancelled site:AB12's order in 1C")
	}
}

// outageStore is the journal's database going away and coming back: while down,
// every call the engine's loops make fails as a refused connection does.
type outageStore struct {
	journal.Store
	down                      atomic.Bool
	failedClaims, failedWakes atomic.Int64
}

var errDatabaseDown = errors.New("dial tcp 127.0.0.1:5432: connect: connection refused")

func (s *outageStore) ClaimDue(ctx context.Context, worker string) (journal.Claim, error) {
	if s.down.Load() {
		s.failedClaims.Add(1)
		return nil, errDatabaseDown
	}
	return s.Store.ClaimDue(ctx, worker)
}

func (s *outageStore) ApplyWakes(ctx context.Context) (int, error) {
	if s.down.Load() {
		s.failedWakes.Add(1)
		return 0, errDatabaseDown
	}
	return s.Store.ApplyWakes(ctx)
}

func (s *outageStore) ClaimVerification(ctx context.Context, lease time.Duration) (journal.Operation, error) {
	if s.down.Load() {
		return journal.Operation{}, errDatabaseDown
	}
	return s.Store.ClaimVerification(ctx, lease)
}

// While the database is away the claim loops log one ERROR per kind of failure
// (with a count later), not one a try; when it is back they resume at once rather
// than at the end of a backoff that grew during the outage.
func TestADatabaseOutageLogsOnceAndTheLoopsResumeWhenItReturns(t *testing.T) {
	t.Parallel()
	h := newHarness(t, onecsim.Options{})
	store := &outageStore{Store: h.store}
	store.down.Store(true)
	running(t, h.engine(store, engine.Config{Workers: 2, PollInterval: 20 * time.Millisecond}))
	// Long enough for each loop's backoff to have doubled many times.
	eventually.True(t, "14 failed claims and 10 failed wakes", func() bool { return store.failedClaims.Load() >= 14 && store.failedWakes.Load() >= 10 })
	store.down.Store(false)
	back := time.Now()
	o := testOrder("BACK-1")
	h.register(o)
	h.waitStatus(o.CreateKey(), journal.StatusDone)
	t.Logf("after %d failed claims and %d failed wake rounds, the order registered when the database came back was done %s later",
		store.failedClaims.Load(), store.failedWakes.Load(), time.Since(back).Round(time.Millisecond))
	h.wantOneCOrders(o.OneCExternalID(), 1)

	logs := h.logs.String()
	if n := countLogs(t, logs, "ERROR", "claim failed"); n != 1 {
		t.Errorf("%d ERROR lines about failed claims for %d failures, want 1", n, store.failedClaims.Load())
	}
	if n := countLogs(t, logs, "ERROR", "could not apply recorded wakes"); n != 1 {
		t.Errorf("%d ERROR lines about recorded wakes for %d failures, want 1", n, store.failedWakes.Load())
	}
	if n := countLogs(t, logs, "INFO", "recovered: claim failed"); n != 1 {
		t.Errorf("%d INFO lines saying the claims recovered, want 1", n)
	}
}

// One endpoint missing from the publication (POST /orders/cancel) holds back only
// the operations that need it: they back off, each try at least its backoff after
// the last instead of at every successful ping, the ERROR is logged once for the
// endpoint, creates go on meanwhile, and the engine names the endpoint until a
// call to it works again.
func TestOneMissingEndpointHoldsBackOnlyWhatNeedsIt(t *testing.T) {
	t.Parallel()
	const backoffMin, backoffMax = 20 * time.Millisecond, 2 * time.Second
	h := newHarness(t, onecsim.Options{})
	e := running(t, h.engine(nil, engine.Config{Workers: 2, BackoffMin: backoffMin, BackoffMax: backoffMax,
		PingInterval: 30 * time.Millisecond}))
	o := testOrder("EP-1")
	h.register(o)
	h.waitStatus(o.CreateKey(), journal.StatusDone)

	h.onec.SetMissing("cancel")
	cancelKey := h.registerCancel(o, "")
	var others []string
	for i := range 4 {
		other := testOrder(fmt.Sprintf("EP-OK-%d", i))
		h.register(other)
		others = append(others, other.CreateKey())
	}
	for _, k := range others {
		h.waitStatus(k, journal.StatusDone) // the creates go on
	}
	eventually.True(t, "5 attempts of the cancel", func() bool { return h.show(cancelKey).Attempts >= 5 })
	d := h.show(cancelKey)
	if d.Status != journal.StatusPending || d.RetryClass != journal.ClassConfiguration {
		t.Fatalf("cancel %s class %q (%q), want pending on a configuration problem", d.Status, d.RetryClass, d.LastError)
	}
	for k := 1; k < len(d.History); k++ {
		want := min(backoffMin<<(k-1), backoffMax) // the backoff after attempt k
		if gap := d.History[k].StartedAt.Sub(d.History[k-1].StartedAt); gap < want-2*time.Millisecond {
			t.Fatalf("attempt %d came %s after attempt %d, sooner than its backoff %s (outcomes %s)",
				k+1, gap, k, want, outcomes(d))
		}
	}
	if n := countFirstLogs(t, h.logs.String(), "ERROR", "/orders/cancel"); n != 1 {
		t.Fatalf("%d ERROR lines first naming /orders/cancel for %d attempts, want 1", n, d.Attempts)
	}
	if b := e.Broken(); len(b) != 1 || b[0].Path != "/orders/cancel" || b[0].Class != journal.ClassConfiguration {
		t.Fatalf("broken endpoints %+v, want /orders/cancel (configuration)", b)
	}

	h.onec.ClearMissing()
	h.waitStatus(cancelKey, journal.StatusDone)
	if _, cancelled := h.cancelledIn1C(o.OneCExternalID()); !cancelled {
		t.Fatal("not cancelled in 1C once the endpoint came back")
	}
	if b := e.Broken(); len(b) != 0 {
		t.Fatalf("broken endpoints %+v after the cancel went through, want none", b)
	}
}
