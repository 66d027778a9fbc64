package engine

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/ordersync/ordersync/internal/onec"
)

// healthState is what the engine knows of 1C from its last answers.
type healthState int

const (
	healthUp      healthState = iota // the last call was answered
	healthFailing                    // 1C cannot be reached (refused, 502/503/504): pinged until it answers
	healthPaused                     // a configuration or authentication problem: nothing is claimed until a ping succeeds
)

// health follows 1C's answers. When 1C answers again after failing, every operation
// that waits on a transient, configuration or authentication failure is made due at
// once (watch); while a configuration problem lasts, workers claim nothing.
type health struct {
	log *slog.Logger

	mu     sync.Mutex
	state  healthState
	paused chan struct{} // open while paused; closed when the pause ends
	// recover is set on a return to healthUp, for watch to wake the waiting.
	recover bool
	// byPing: the last return to healthUp came from a ping only; a pause right
	// after it is the same problem, logged once.
	byPing bool
	signal chan struct{} // cap 1: the state changed
	// reason is the error that paused the engine, "" when it is not paused.
	reason string
}

// Paused reports whether a configuration or authentication problem keeps the
// workers from claiming (until a ping of 1C succeeds), and the 1C error that
// paused them. The admin listener's /readyz reports it.
func (e *Engine) Paused() (paused bool, reason string) {
	e.health.mu.Lock()
	defer e.health.mu.Unlock()
	return e.health.state == healthPaused, e.health.reason
}

func newHealth(log *slog.Logger) *health {
	return &health{log: log, signal: make(chan struct{}, 1)}
}

func (h *health) notify() {
	select {
	case h.signal <- struct{}{}:
	default:
	}
}

// pausedCh is the channel to wait on while paused, nil otherwise.
func (h *health) pausedCh() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.state != healthPaused {
		return nil
	}
	return h.paused
}

// snapshot returns the state and whether a recovery is to be acted on (cleared).
func (h *health) snapshot() (healthState, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := h.recover
	h.recover = false
	return h.state, r
}

// observe updates the state from one call's outcome. Calls cut short by their own
// context say nothing about 1C.
func (h *health) observe(ctx context.Context, err error) {
	if err == nil {
		h.answered(false)
		return
	}
	if ctx.Err() != nil {
		return
	}
	var oe *onec.Error
	if !errors.As(err, &oe) {
		return
	}
	switch oe.Class {
	case onec.Configuration, onec.Auth:
		h.pause(oe)
	case onec.Transient:
		if unreachable(oe) {
			h.failing()
		}
		// 406 (no free session), 429 and lock conflicts: 1C is there, only busy.
	case onec.Permanent:
		h.answered(false) // 1C's own answer
	}
}

// unreachable tells a transient failure that means 1C cannot be reached from one
// where it answered busy.
func unreachable(e *onec.Error) bool {
	switch e.Status {
	case 0, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// answered records an answer from 1C (byPing: to a ping of watch's).
func (h *health) answered(byPing bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !byPing {
		h.byPing = false
	}
	if h.state == healthUp {
		return
	}
	was := h.state
	h.state = healthUp
	h.reason = ""
	h.recover = true
	h.byPing = byPing
	if h.paused != nil {
		close(h.paused)
		h.paused = nil
	}
	h.log.Info("1C answers again: operations waiting on it are due now", "was", stateName(was))
	h.notify()
}

func (h *health) failing() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.state != healthUp {
		return
	}
	h.state = healthFailing
	h.log.Warn("1C does not answer: operations wait (worker.give_up_after) and 1C is pinged until it does")
	h.notify()
}

func (h *health) pause(e *onec.Error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.state == healthPaused {
		return
	}
	h.state = healthPaused
	h.paused = make(chan struct{})
	h.reason = e.Error()
	msg := "1C's publication is not there: the engine stops calling 1C until a ping succeeds; no operation fails for it"
	if e.Class == onec.Auth {
		msg = "1C refuses the credentials: the engine stops calling 1C until a ping succeeds; no operation fails for it"
	}
	if h.byPing {
		// The same problem as before the ping that ended the last pause.
		h.log.Debug(msg, "path", e.Path, "status", e.Status, "err", e.Error())
	} else {
		h.log.Error(msg, "path", e.Path, "status", e.Status, "err", e.Error())
	}
	h.notify()
}

func stateName(s healthState) string {
	switch s {
	case healthFailing:
		return "not answering"
	case healthPaused:
		return "paused (configuration)"
	default:
		return "up"
	}
}

// watchedClient is the engine's 1C client: every outcome updates health.
type watchedClient struct {
	onec.Client
	h *health
}

func (w watchedClient) Ping(ctx context.Context) (onec.Info, error) {
	v, err := w.Client.Ping(ctx)
	w.h.observe(ctx, err)
	return v, err
}

func (w watchedClient) FindOrders(ctx context.Context, externalID string) ([]onec.Order, error) {
	v, err := w.Client.FindOrders(ctx, externalID)
	w.h.observe(ctx, err)
	return v, err
}

func (w watchedClient) CreateOrder(ctx context.Context, req onec.CreateOrder) (onec.Created, error) {
	v, err := w.Client.CreateOrder(ctx, req)
	w.h.observe(ctx, err)
	return v, err
}

func (w watchedClient) CancelOrder(ctx context.Context, externalID, reason string) (onec.Cancelled, error) {
	v, err := w.Client.CancelOrder(ctx, externalID, reason)
	w.h.observe(ctx, err)
	return v, err
}

func (w watchedClient) Stock(ctx context.Context, warehouse string) (onec.Stock, error) {
	v, err := w.Client.Stock(ctx, warehouse)
	w.h.observe(ctx, err)
	return v, err
}

func (w watchedClient) ListOrders(ctx context.Context, q onec.ListQuery) ([]onec.Order, error) {
	v, err := w.Client.ListOrders(ctx, q)
	w.h.observe(ctx, err)
	return v, err
}

// watch applies left-over wakes each poll, pings 1C while it fails or while the engine is paused (BackoffMin after the
// trouble began, doubling up to PingInterval), and when 1C answers again makes every
// operation waiting on it due at once and wakes the workers: they claim them one at
// a time each, so 1C sees no more than onec.max_concurrency of them at once.
func (e *Engine) watch(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	// Wakes a webhook recorded while a claim held its operation, and that its
	// Finish did not see (they committed just after it), are applied each poll.
	wakes := time.NewTicker(e.cfg.PollInterval)
	defer wakes.Stop()
	delay := e.cfg.BackoffMin
	var nextPing time.Time // zero: no ping scheduled
	for {
		state, recovered := e.health.snapshot()
		if recovered {
			n, err := e.store.WakeWaiting(ctx)
			switch {
			case err != nil && ctx.Err() == nil:
				e.repeats.Fail(ctx, e.log, msgWakeWaitingFailed, err)
			case err == nil:
				e.repeats.OK(ctx, e.log, msgWakeWaitingFailed)
			}
			switch {
			case err != nil:
			case n > 0:
				e.woken.Add(int64(n))
				e.log.Info("operations waiting on 1C are due now", "operations", n)
			}
			e.wakeAll()
		}
		switch {
		case state == healthUp:
			nextPing = time.Time{}
		case nextPing.IsZero():
			nextPing = time.Now().Add(delay)
		}
		var tick <-chan time.Time
		if !nextPing.IsZero() {
			timer.Reset(time.Until(nextPing))
			tick = timer.C
		}
		select {
		case <-ctx.Done():
			return
		case <-wakes.C:
			n, err := e.store.ApplyWakes(ctx)
			switch {
			case err != nil && ctx.Err() == nil:
				e.repeats.Fail(ctx, e.log, msgApplyWakesFailed, err)
			case err == nil:
				// The database answers again: the claim loops need not wait out
				// their backoff to find it.
				e.databaseAnswers(ctx, msgApplyWakesFailed)
				if n > 0 {
					e.wakeAll()
				}
			}
		case <-e.health.signal:
			e.health.mu.Lock()
			byPing := e.health.byPing
			e.health.mu.Unlock()
			if !byPing {
				delay = e.cfg.BackoffMin
				nextPing = time.Time{}
			}
		case <-tick:
			nextPing = time.Time{}
			pctx, cancel := context.WithTimeout(ctx, e.cfg.OneCTimeout)
			_, err := e.raw.Ping(pctx)
			cancel()
			if err == nil {
				e.health.answered(true)
			} else {
				e.log.Debug("1C ping failed", "err", err)
				delay = min(delay*2, e.cfg.PingInterval)
			}
		}
		timer.Stop()
	}
}
