package outbox_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ordersync/ordersync/internal/eventually"
	"github.com/ordersync/ordersync/internal/outbox"
)

// timed is a recorder that says how long one delivery may take.
type timed struct {
	*recorder
	timeout time.Duration
}

func (t timed) Timeout() time.Duration { return t.timeout }

// Two replicas' relays against one outbox and a slow receiver (each delivery slower
// than lease ÷ batch): leases hold, so every event is delivered, a duplicate happens
// only where a lease really expired (a fenced write-back), no lane goes out of order,
// and the work done stays that of one relay (deliveries per event).
func TestTwoRelaysWithASlowReceiver(t *testing.T) {
	t.Parallel()
	const lanes, perLane = 12, 2
	// lease ÷ batch: 3s ÷ 10 < 700ms. The lease leaves the write-back a tenth of
	// itself, 300ms, which a loaded machine's database still meets.
	const lease, delay = 3 * time.Second, 700 * time.Millisecond
	run := func(t *testing.T, relays int) (deliveries, unique int, fenced, released int64, took time.Duration) {
		w := newWorld(t)
		for n := 1; n <= perLane; n++ {
			for l := range lanes {
				w.enqueue(msg("crm", fmt.Sprintf("site:order:L%d", l), n))
			}
		}
		rec := &recorder{delay: delay}
		cfg := relayConfig(map[string]outbox.Publisher{"crm": timed{rec, delay + 50*time.Millisecond}})
		cfg.Lease, cfg.BatchSize, cfg.Concurrency = lease, 10, 2
		var rs []*outbox.Relay
		for range relays {
			r := outbox.NewRelay(w.open().Outbox(), cfg)
			rs = append(rs, r)
		}
		start := time.Now()
		for _, r := range rs {
			if err := r.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		eventually.True(t, fmt.Sprintf("%d relays to send every event", relays), func() bool {
			left, err := w.db.Outbox().List(context.Background(), outbox.ListFilter{Unsent: true})
			if err != nil {
				t.Fatal(err)
			}
			return len(left) == 0
		})
		took = time.Since(start)
		for _, r := range rs {
			r.Stop()
			st := r.Stats()
			fenced += st.Fenced
			released += st.Released
		}
		got := rec.records()
		seen := map[string]bool{}
		last := map[string]int64{}
		for _, g := range got {
			if seen[g.EventID] {
				continue
			}
			seen[g.EventID] = true
			if g.Sequence <= last[g.AggregateID] {
				t.Fatalf("%d relays: lane %s delivered sequence %d after %d", relays, g.AggregateID, g.Sequence, last[g.AggregateID])
			}
			last[g.AggregateID] = g.Sequence
		}
		return len(got), len(seen), fenced, released, took
	}

	d1, u1, f1, r1, t1 := run(t, 1)
	d2, u2, f2, r2, t2 := run(t, 2)
	t.Logf("one relay: %d deliveries of %d events in %s (%d released); two relays: %d deliveries of %d in %s (%d released, %d fenced)",
		d1, u1, t1.Round(time.Millisecond), r1, d2, u2, t2.Round(time.Millisecond), r2, f2)
	const events = lanes * perLane
	if u1 != events || u2 != events {
		t.Fatalf("delivered %d and %d distinct events, want %d each", u1, u2, events)
	}
	// Every duplicate is explained by a write-back refused because its lease had
	// run out (on a loaded machine a write-back can come late); none comes of a
	// round that outlived its lease.
	if dup := int64(d2 - u2); dup > f2 {
		t.Fatalf("two relays: %d duplicate deliveries but %d fenced write-backs: a duplicate without an expired lease", dup, f2)
	}
	if f1 != 0 || d1 != u1 {
		t.Fatalf("one relay: %d fenced, %d deliveries of %d events; want none fenced, each once", f1, d1, u1)
	}
	// The work two replicas do is one relay's: at most 20% more deliveries.
	if float64(d2) > 1.2*float64(d1) {
		t.Fatalf("two relays made %d deliveries, one made %d: more than 20%% more work", d2, d1)
	}
}
