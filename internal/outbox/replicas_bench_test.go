package outbox_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ordersync/ordersync/internal/outbox"
)

// slowSink is a destination that takes a fixed time per delivery, whoever sends
// it, and counts each event once: the relays wait on it, not on the CPU.
type slowSink struct {
	delay time.Duration
	mu    sync.Mutex
	seen  map[string]int // deliveries by event id
}

func (s *slowSink) Publish(ctx context.Context, r outbox.Record) error {
	t := time.NewTimer(s.delay)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return ctx.Err()
	}
	s.mu.Lock()
	s.seen[r.EventID]++
	s.mu.Unlock()
	return nil
}

func (s *slowSink) distinct() (events, deliveries int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range s.seen {
		deliveries += n
	}
	return len(s.seen), deliveries
}

// timedClaims is a store that times its claims.
type timedClaims struct {
	outbox.Store
	n, total atomic.Int64
}

func (t *timedClaims) Claim(ctx context.Context, req outbox.ClaimRequest) (outbox.Claim, error) {
	start := time.Now()
	c, err := t.Store.Claim(ctx, req)
	t.total.Add(int64(time.Since(start)))
	t.n.Add(1)
	return c, err
}

// BenchmarkRelayReplicas drains a backlog of one-event lanes with one relay and
// with four on one PostgreSQL, as four replicas run them: each relay its own pool
// and name, all started at once, against a receiver that takes a fixed time per
// delivery. Each relay is given the same backlog to do (events × relays), so a
// relay alone and each of four should take the same time. It reports events/s in
// all, events/s per relay, %-of-ideal per relay (ideal: its claim loops × its
// concurrency ÷ the delivery time) and, for more than one relay, each relay's
// rate as a % of one relay's alone in the same run (%-of-one), deliveries per
// event (above 1: an event delivered twice) and how long a claim took (claim-ms,
// the mean; a claim loop delivers nothing while it claims).
//
//	go test -run '^$' -bench RelayReplicas -benchtime 1x -count 3 ./internal/outbox/
func BenchmarkRelayReplicas(b *testing.B) {
	const (
		delay       = 50 * time.Millisecond
		concurrency = 16
		claimers    = 2
		perRelay    = 6000
	)
	var alone float64 // events/s of one relay in this run
	for _, relays := range []int{1, 4} {
		b.Run(fmt.Sprintf("relays=%d/delay=50ms", relays), func(b *testing.B) {
			ctx := context.Background()
			var elapsed time.Duration
			var rate, dups float64
			claims := &timedClaims{}
			for range b.N {
				b.StopTimer()
				w := newWorld(b)
				events := perRelay * relays
				w.fill(b, events, "sink")
				if _, err := w.db.Pool().Exec(ctx, `ANALYZE outbox`); err != nil {
					b.Fatal(err)
				}
				sink := &slowSink{delay: delay, seen: map[string]int{}}
				rs := make([]*outbox.Relay, relays)
				stores := make([]*timedClaims, relays)
				for i := range rs {
					cfg := relayConfig(map[string]outbox.Publisher{"sink": sink})
					cfg.Name = fmt.Sprintf("replica-%d", i+1)
					cfg.Concurrency, cfg.Claimers = concurrency, claimers
					stores[i] = &timedClaims{Store: w.open().Outbox()}
					rs[i] = outbox.NewRelay(stores[i], cfg)
				}
				b.StartTimer()
				start := time.Now()
				for _, r := range rs {
					if err := r.Start(ctx); err != nil {
						b.Fatal(err)
					}
				}
				for deadline := time.Now().Add(2 * time.Minute); ; {
					if n, _ := sink.distinct(); n >= events {
						break
					}
					if time.Now().After(deadline) {
						n, _ := sink.distinct()
						b.Fatalf("%d of %d events delivered after two minutes", n, events)
					}
					time.Sleep(100 * time.Microsecond)
				}
				took := time.Since(start)
				elapsed += took
				b.StopTimer()
				for _, r := range rs {
					r.Stop()
				}
				for _, st := range stores {
					claims.n.Add(st.n.Load())
					claims.total.Add(st.total.Load())
				}
				n, d := sink.distinct()
				if n != events {
					b.Fatalf("%d distinct events delivered, want %d", n, events)
				}
				rate += float64(events) / took.Seconds()
				dups += float64(d) / float64(n)
				b.StartTimer()
			}
			rate /= float64(b.N)
			per := rate / float64(relays)
			b.ReportMetric(rate, "events/s")
			b.ReportMetric(per, "events/s/relay")
			b.ReportMetric(100*per/(claimers*concurrency/delay.Seconds()), "%-of-ideal")
			b.ReportMetric(dups/float64(b.N), "deliveries/event")
			if n := claims.n.Load(); n > 0 {
				b.ReportMetric(float64(claims.total.Load())/float64(n)/1e6, "claim-ms")
			}
			if relays == 1 {
				alone = per
			} else if alone > 0 {
				b.ReportMetric(100*per/alone, "%-of-one")
			}
		})
	}
}
