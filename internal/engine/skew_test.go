package engine_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ordersync/ordersync/internal/engine"
	"github.com/ordersync/ordersync/internal/eventually"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/order"
	"github.com/ordersync/ordersync/internal/sim"
	"github.com/ordersync/ordersync/internal/sim/onecsim"
	"github.com/ordersync/ordersync/internal/store/postgres"
)

// Two replicas on one PostgreSQL, one of them with a clock five minutes ahead, many
// orders, creates slower than onec.timeout (1C commits them after the client gave
// up) and cancels arriving at random: every order is in 1C at most once, a done
// create exactly once, and every cancel is effective in 1C or visibly not done.
// "Young" and "settled" are judged on the database's clock, so the replica whose
// clock runs ahead never takes over an attempt the other has just opened, nor
// concludes that a POST in doubt has settled.
func TestTwoReplicasOneClockAheadCreateEachOrderOnce(t *testing.T) {
	t.Parallel()
	const (
		orders  = 30
		timeout = 300 * time.Millisecond
		slow    = time.Second // a slow create commits this long after it came, whatever the client does
		settle  = 1500 * time.Millisecond
		skew    = 5 * time.Minute
	)
	h := newHarness(t, onecsim.Options{OpLatency: map[string]time.Duration{"create": 20 * time.Millisecond}})
	h.client = h.scaledClient(timeout)
	takeover := engine.TakeoverAfter(timeout, settle)
	honest := h.openDBWith(postgres.Config{TakeoverAfter: takeover})
	ahead := h.openDBWith(postgres.Config{TakeoverAfter: takeover,
		ProcessClock: func() time.Time { return time.Now().Add(skew) }})
	if off := ahead.ClockOffset(); off > -skew+time.Second || off < -skew-time.Second {
		t.Fatalf("the replica ahead measured an offset of %s, want about -%s", off, skew)
	}

	rng := rand.New(rand.NewPCG(1, 2))
	var all []order.Order
	for i := range orders {
		o := testOrder(fmt.Sprintf("SKEW-%02d", i))
		all = append(all, o)
		if i%3 == 0 { // a third of the creates outlast the client
			h.onec.Faults.Add(1, sim.Fault{Op: "create", Kind: onecsim.SlowCreate, Delay: slow, ExternalID: o.OneCExternalID()})
		}
	}
	cfg := engine.Config{Workers: 2, OneCTimeout: timeout, SettleTime: settle, LateVerify: 2 * settle,
		BackoffMin: 10 * time.Millisecond, BackoffMax: 100 * time.Millisecond}
	cfgA, cfgB := cfg, cfg
	cfgA.WorkerID, cfgA.Now = "honest", honest.Now
	cfgB.WorkerID, cfgB.Now = "ahead", ahead.Now
	running(t, h.engine(honest.Journal(), cfgA))
	running(t, h.engine(ahead.Journal(), cfgB))

	// Orders arrive, and a third of them are cancelled a moment later, at random.
	cancelled := map[string]string{} // external id → cancel key
	var wg sync.WaitGroup
	for i, o := range all {
		h.register(o)
		if rng.IntN(3) == 0 {
			delay := time.Duration(rng.IntN(int(2*settle/time.Millisecond))) * time.Millisecond
			cancelled[o.OneCExternalID()] = o.CancelKey()
			wg.Add(1)
			go func() {
				defer wg.Done()
				time.Sleep(delay) // when the buyer changes their mind, not a synchronisation
				h.registerCancel(o, "the buyer changed their mind")
			}()
		}
		if i%5 == 4 {
			time.Sleep(50 * time.Millisecond) // orders arrive over time
		}
	}
	wg.Wait()

	// Everything comes to a verdict, and every slow POST has been committed.
	eventually.Value(t, "every operation to a verdict and every slow POST committed", func() ([]journal.Operation, bool) {
		pending, err := h.store.List(context.Background(), journal.Filter{Status: journal.StatusPending, Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		return pending, len(pending) == 0 && h.onec.Faults.Pending() == 0
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := h.onec.WaitIdle(ctx); err != nil { // the slow POSTs the client gave up on have committed
		t.Fatal(err)
	}

	var takenOver, found int
	for _, o := range all {
		ext := o.OneCExternalID()
		n := h.onec.CountExternal(ext)
		if n > 1 {
			t.Errorf("1C holds %d orders %s", n, ext)
			continue
		}
		create := h.show(o.CreateKey())
		if create.Status == journal.StatusDone && n != 1 {
			t.Errorf("%s is done but 1C holds %d orders", o.CreateKey(), n)
		}
		if create.Result != nil && create.Result.Found {
			found++
		}
		for _, a := range create.History {
			if a.Outcome == journal.OutcomeInterrupted {
				takenOver++
			}
		}
		key, ok := cancelled[ext]
		if !ok {
			if create.Status != journal.StatusDone {
				t.Errorf("%s is %s (%q), want done", o.CreateKey(), create.Status, create.LastError)
			}
			continue
		}
		c := h.show(key)
		_, cancelledIn1C := h.cancelledIn1C(ext)
		switch {
		case c.Status != journal.StatusDone:
			t.Errorf("cancel %s is %s (%q), want done", key, c.Status, c.LastError)
		case n == 1 && !cancelledIn1C:
			t.Errorf("cancel %s is done (%+v) but 1C's order %s is live", key, c.Result, ext)
		case n == 0 && create.Status == journal.StatusDone:
			t.Errorf("create %s done with nothing in 1C", o.CreateKey())
		case n == 0 && !strings.Contains(c.Result.Note, "cancelled before creation") && !strings.Contains(c.Result.Note, "nothing to cancel"):
			t.Errorf("cancel %s done with %+v while 1C holds nothing", key, c.Result)
		}
	}
	t.Logf("%d orders, %d cancelled; %d creates found what a POST in doubt had made, %d attempts interrupted",
		orders, len(cancelled), found, takenOver)
}
