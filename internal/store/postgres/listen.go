package postgres

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ordersync/ordersync/internal/outbox"
)

// Listener wakes the relay on NOTIFY ordersync_outbox, which Enqueue and a claim's
// Finish send when events commit. Every Listen of a store shares one connection of
// its own (ListenConns), outside the pool, for as long as any of them listens: the
// order relay and the stock relay cost one connection between them. Connection
// poolers in transaction mode break LISTEN: there the relay polls only.
type Listener struct {
	db *DB
}

var _ outbox.Listener = (*Listener)(nil)

// Listener is the outbox's LISTEN/NOTIFY listener.
func (db *DB) Listener() outbox.Listener { return &Listener{db: db} }

// Listen runs LISTEN ordersync_outbox on the store's LISTEN connection (the pool's
// connection settings, not one of its connections; opened by the first Listen, closed
// when the last one ends) and calls wake once when the LISTEN is in place — events
// committed before it are found at once rather than at the next poll — and then on
// every notification, until ctx ends (nil) or the connection fails (an error, to
// every Listen sharing it: the relay listens again after a pause). wake should not
// block.
//
// NOTIFY reaches every session of the database that listens on the channel, whatever
// its search_path: ordersync instances in several schemas of one database wake each
// other, which costs them an empty claim each.
func (l *Listener) Listen(ctx context.Context, wake func()) error {
	err := l.db.listener.listen(ctx, wake)
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// listenHub is the LISTEN connection that every Listen of a store shares.
type listenHub struct {
	db *DB

	mu   sync.Mutex
	subs map[*listenSub]struct{}
	// ready: LISTEN is in place on the running connection. cancel ends it, nil
	// when none runs; done is closed once the last one started has closed its
	// connection, so that a new one never runs beside it.
	ready  bool
	cancel context.CancelFunc
	done   chan struct{}
}

type listenSub struct {
	wake   func()
	failed chan error // buffered
}

func (h *listenHub) listen(ctx context.Context, wake func()) error {
	s := &listenSub{wake: wake, failed: make(chan error, 1)}
	h.mu.Lock()
	if h.subs == nil {
		h.subs = map[*listenSub]struct{}{}
	}
	h.subs[s] = struct{}{}
	switch {
	case h.cancel == nil:
		runCtx, cancel := context.WithCancel(context.Background())
		prev, done := h.done, make(chan struct{})
		h.cancel, h.done, h.ready = cancel, done, false
		go h.run(runCtx, prev, done)
	case h.ready:
		wake() // LISTEN is in place already
	}
	h.mu.Unlock()

	select {
	case <-ctx.Done():
		h.mu.Lock()
		defer h.mu.Unlock()
		if _, ok := h.subs[s]; ok {
			delete(h.subs, s)
			if len(h.subs) == 0 && h.cancel != nil {
				h.cancel()
				h.cancel, h.ready = nil, false
			}
		}
		return nil
	case err := <-s.failed:
		return err
	}
}

// run is the LISTEN connection: opened after the previous one (prev) has closed,
// it wakes the subscribers until ctx ends (no one listens any more) or it fails.
func (h *listenHub) run(ctx context.Context, prev <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	if prev != nil {
		select {
		case <-prev:
		case <-ctx.Done():
			return
		}
	}
	conn, err := pgx.ConnectConfig(ctx, h.db.listenConn)
	if err != nil {
		h.fail(ctx, fmt.Errorf("postgres: listen: cannot connect to %s: %s", h.db.target, connectErrorCause(err)))
		return
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{NotifyChannel}.Sanitize()); err != nil {
		h.fail(ctx, fmt.Errorf("postgres: listen on %s: %w", NotifyChannel, err))
		return
	}
	h.mu.Lock()
	if ctx.Err() == nil {
		h.ready = true
		for s := range h.subs {
			s.wake()
		}
	}
	h.mu.Unlock()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			h.fail(ctx, fmt.Errorf("postgres: listen on %s: lost the connection to %s: %w", NotifyChannel, h.db.target, err))
			return
		}
		if n.Channel == NotifyChannel {
			h.mu.Lock()
			for s := range h.subs {
				s.wake()
			}
			h.mu.Unlock()
		}
	}
}

// fail hands err to every subscriber, unless ctx ended (no one listens any more).
func (h *listenHub) fail(ctx context.Context, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if ctx.Err() != nil {
		return
	}
	for s := range h.subs {
		s.failed <- err
		delete(h.subs, s)
	}
	h.cancel() // the current run's: ctx is not ended, so it is this one
	h.cancel, h.ready = nil, false
}

// close ends the LISTEN connection (Close): every Listen still running returns an
// error, and the connection is closed before close returns, or within 5s.
func (h *listenHub) close() {
	h.mu.Lock()
	done := h.done
	if h.cancel != nil {
		for s := range h.subs {
			s.failed <- fmt.Errorf("postgres: listen on %s: the store is closed", NotifyChannel)
			delete(h.subs, s)
		}
		h.cancel()
		h.cancel, h.ready = nil, false
	}
	h.mu.Unlock()
	if done != nil {
		<-done
	}
}
