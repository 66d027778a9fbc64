package outbox_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ordersync/ordersync/internal/eventually"
	"github.com/ordersync/ordersync/internal/outbox"
)

// blockingStore holds every Claim until release is closed, as a database
// connection whose answer never comes does.
type blockingStore struct {
	outbox.Store
	entered chan struct{}
	release chan struct{}
}

func (s *blockingStore) Claim(ctx context.Context, req outbox.ClaimRequest) (outbox.Claim, error) {
	select {
	case s.entered <- struct{}{}:
	default:
	}
	<-s.release
	return s.Store.Claim(ctx, req)
}

// A relay whose round is stuck in a store call longer than any round may take
// (its lease and the bounded writes after it) says so in Alive; once the call
// returns, it is alive again. Idle, it is alive whatever its poll interval.
func TestRelayAliveReportsARoundThatDoesNotEnd(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	bs := &blockingStore{Store: w.db.Outbox(), entered: make(chan struct{}, 1), release: make(chan struct{})}
	cfg := relayConfig(map[string]outbox.Publisher{"crm": &recorder{}})
	cfg.Name = "test"
	cfg.Lease, cfg.StopTimeout = 200*time.Millisecond, 50*time.Millisecond // a round may take 400ms
	cfg.PollInterval = time.Hour
	r := outbox.NewRelay(bs, cfg)
	if err := r.Alive(); err != nil {
		t.Fatalf("before Start: %v", err)
	}
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	release := func() { once.Do(func() { close(bs.release) }) }
	defer func() { release(); r.Stop() }() // Stop is safe twice
	<-bs.entered
	eventually.True(t, "Alive to report the round stuck in Claim", func() bool { return r.Alive() != nil })
	err := r.Alive()
	if !strings.Contains(err.Error(), `relay "test"`) || !strings.Contains(err.Error(), "hung") {
		t.Fatalf("Alive = %v, want it to name the relay and say it is hung", err)
	}
	release()
	// The round ends (nothing to claim) and the relay waits an hour for the next.
	eventually.True(t, "Alive to clear once the round ended", func() bool { return r.Alive() == nil })
	r.Stop()
	if err := r.Alive(); err != nil {
		t.Fatalf("after Stop: %v", err)
	}
}
