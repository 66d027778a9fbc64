package engine

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/logging"
	"github.com/ordersync/ordersync/internal/onec"
)

// healthState is what the engine knows of 1C as a whole from its last answers.
type healthState int

const (
	healthUp      healthState = iota // the last call was answered
	healthFailing                    // 1C cannot be reached (refused, 502/503/504): pinged until it answers
)

// health follows 1C's answers. When 1C answers again after failing, every operation
// that waits on a transient, configuration or authentication failure is made due at
// once (watch). A configuration or authentication failure is 1C's answer about one
// endpoint (a publication without POST /orders/cancel, a user without rights to
// stock): it is remembered for that endpoint alone. The operations that need it
// wait with their own backoff, the others go on, and it ends when a call to that
// endpoint succeeds.
type health struct {
	log *slog.Logger

	mu      sync.Mutex
	state   healthState
	recover bool          // set on a return to healthUp or an endpoint that works again, for watch to wake the waiting
	signal  chan struct{} // cap 1: the state changed
	broken  map[string]*BrokenEndpoint
	// repeats logs each broken endpoint once, then at most once per
	// worker.backoff_max with a count.
	repeats logging.Repeats
}

// BrokenEndpoint is a 1C endpoint whose last answer was a configuration or
// authentication failure: the publication does not serve it (a web server's 404 or
// 405 page), or 1C refuses the credentials for it. /readyz and the metrics name it.
type BrokenEndpoint struct {
	Op       string    `json:"op"`   // ping, find, create, cancel, stock, list, find_returns, create_return
	Path     string    `json:"path"` // below onec.base_url, e.g. /orders/cancel
	Class    string    `json:"class"`
	Since    time.Time `json:"since"`
	Failures int       `json:"failures"`
	Error    string    `json:"error"`
}

// Broken lists the 1C endpoints that answer a configuration or authentication
// failure, by path.
func (e *Engine) Broken() []BrokenEndpoint {
	e.health.mu.Lock()
	defer e.health.mu.Unlock()
	out := make([]BrokenEndpoint, 0, len(e.health.broken))
	for _, b := range e.health.broken {
		out = append(out, *b)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

func newHealth(log *slog.Logger, every time.Duration) *health {
	return &health{log: log, signal: make(chan struct{}, 1), broken: map[string]*BrokenEndpoint{},
		repeats: logging.Repeats{Every: every}}
}

func (h *health) notify() {
	select {
	case h.signal <- struct{}{}:
	default:
	}
}

// snapshot returns the state and whether a recovery is to be acted on (cleared).
func (h *health) snapshot() (healthState, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := h.recover
	h.recover = false
	return h.state, r
}

// observe updates the state from one call of op's outcome. Calls cut short by
// their own context say nothing about 1C.
func (h *health) observe(ctx context.Context, op string, err error) {
	if err == nil {
		h.answered(ctx, op)
		return
	}
	if ctx.Err() != nil {
		return
	}
	var oe *onec.Error
	if !errors.As(err, &oe) {
		return
	}
	if oe.PerOrder {
		h.answered(ctx, op) // 1C answered about this order alone
		return
	}
	switch oe.Class {
	case onec.Configuration, onec.Auth:
		h.breaks(ctx, op, oe)
	case onec.Transient, onec.Unknown:
		if unreachable(oe) {
			h.failing()
		}
		// 406 (no free session), 429 and lock conflicts: 1C is there, only busy;
		// a timeout after a POST: 1C is slow.
	case onec.Permanent:
		h.answered(ctx, op) // 1C's own answer
	}
}

// unreachable tells a failure that means 1C cannot be reached from one where it
// answered busy or slow: no answer before anything was sent, or the web server's
// 502/503/504 rather than the service's own error.
func unreachable(e *onec.Error) bool {
	switch {
	case e.API:
		return false
	case e.Status == 0:
		return e.Class == onec.Transient // an unknown outcome with no answer is a slow 1C
	case e.Status == http.StatusBadGateway, e.Status == http.StatusServiceUnavailable, e.Status == http.StatusGatewayTimeout:
		return true
	}
	return false
}

// answered records an answer from 1C to a call of op.
func (h *health) answered(ctx context.Context, op string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if b := h.broken[op]; b != nil {
		delete(h.broken, op)
		h.repeats.OK(ctx, h.log, brokenMessage(b), "path", b.Path)
		h.recover = true
		h.notify()
	}
	if h.state == healthUp {
		return
	}
	h.state = healthUp
	h.recover = true
	h.log.Info("1C answers again: operations waiting on it are due now", "was", stateName(healthFailing))
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

// breaks records a configuration or authentication failure of op's endpoint and
// logs it: at once the first time, then at most once per worker.backoff_max.
func (h *health) breaks(ctx context.Context, op string, e *onec.Error) {
	h.mu.Lock()
	b := h.broken[op]
	if b == nil {
		b = &BrokenEndpoint{Op: op, Path: e.Path, Since: time.Now().UTC()}
		h.broken[op] = b
		h.notify()
	}
	b.Failures++
	b.Class, b.Error = classOf(e.Class), e.Error()
	msg := brokenMessage(b)
	h.mu.Unlock()
	h.repeats.Fail(ctx, h.log, msg, e, "path", e.Path, "status", e.Status)
}

// brokenMessage is what the log says of a broken endpoint; one run of lines per
// endpoint and class.
func brokenMessage(b *BrokenEndpoint) string {
	what := "1C's publication is not there for " + b.Path
	if b.Class == journal.ClassAuth {
		what = "1C refuses the credentials for " + b.Path
	}
	return what + ": the operations that need it wait, up to worker.backoff_max between tries, and the others go on; " +
		"none fails for it before worker.give_up_after"
}

func stateName(s healthState) string {
	switch s {
	case healthFailing:
		return "not answering"
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
	w.h.observe(ctx, "ping", err)
	return v, err
}

func (w watchedClient) FindOrders(ctx context.Context, externalID string) ([]onec.Order, error) {
	v, err := w.Client.FindOrders(ctx, externalID)
	w.h.observe(ctx, "find", err)
	return v, err
}

// The calls that may change 1C wait for the attempt's row first (opened); one whose
// row could not be written sends nothing, and says nothing of 1C's health.

func (w watchedClient) CreateOrder(ctx context.Context, req onec.CreateOrder) (onec.Created, error) {
	if err := opened(ctx, "create"); err != nil {
		return onec.Created{}, err
	}
	v, err := w.Client.CreateOrder(ctx, req)
	w.h.observe(ctx, "create", err)
	return v, err
}

func (w watchedClient) CancelOrder(ctx context.Context, externalID, reason string) (onec.Cancelled, error) {
	if err := opened(ctx, "cancel"); err != nil {
		return onec.Cancelled{}, err
	}
	v, err := w.Client.CancelOrder(ctx, externalID, reason)
	w.h.observe(ctx, "cancel", err)
	return v, err
}

func (w watchedClient) Stock(ctx context.Context, warehouse string) (onec.Stock, error) {
	v, err := w.Client.Stock(ctx, warehouse)
	w.h.observe(ctx, "stock", err)
	return v, err
}

func (w watchedClient) ListOrders(ctx context.Context, q onec.ListQuery) ([]onec.Order, error) {
	v, err := w.Client.ListOrders(ctx, q)
	w.h.observe(ctx, "list", err)
	return v, err
}

func (w watchedClient) SettleOrder(ctx context.Context, o onec.Order, req onec.CreateOrder) error {
	if err := opened(ctx, "settle"); err != nil {
		return err
	}
	err := w.Client.SettleOrder(ctx, o, req)
	w.h.observe(ctx, "settle", err)
	return err
}

func (w watchedClient) SettleReturn(ctx context.Context, r onec.Return, req onec.CreateReturn) error {
	if err := opened(ctx, "settle_return"); err != nil {
		return err
	}
	err := w.Client.SettleReturn(ctx, r, req)
	w.h.observe(ctx, "settle_return", err)
	return err
}

func (w watchedClient) FindReturns(ctx context.Context, externalID string) ([]onec.Return, error) {
	v, err := w.Client.FindReturns(ctx, externalID)
	w.h.observe(ctx, "find_returns", err)
	return v, err
}

func (w watchedClient) CreateReturn(ctx context.Context, req onec.CreateReturn) (onec.Created, error) {
	if err := opened(ctx, "create_return"); err != nil {
		return onec.Created{}, err
	}
	v, err := w.Client.CreateReturn(ctx, req)
	w.h.observe(ctx, "create_return", err)
	return v, err
}

// watch applies left-over wakes each poll, pings 1C while it fails (BackoffMin after
// the trouble began, doubling up to PingInterval), and when 1C answers again, or an
// endpoint that failed works again, makes every
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
			delay = e.cfg.BackoffMin
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
		case <-tick:
			nextPing = time.Time{}
			pctx, cancel := context.WithTimeout(ctx, e.cfg.OneCTimeout)
			_, err := e.raw.Ping(pctx)
			cancel()
			if err == nil {
				e.health.answered(ctx, "ping")
			} else {
				e.log.Debug("1C ping failed", "err", err)
				delay = min(delay*2, e.cfg.PingInterval)
			}
		}
		timer.Stop()
	}
}

type openedKey struct{}

// withOpened returns ctx whose calls that may change 1C wait, through the engine's
// client, for the attempt's row: opened is the claim's Opened.
func withOpened(ctx context.Context, opened func(context.Context) error) context.Context {
	return context.WithValue(ctx, openedKey{}, opened)
}

// opened waits for the attempt's row of the claim ctx carries, if any. Its failure
// comes back as a transient *onec.Error of op that says nothing was sent.
func opened(ctx context.Context, op string) error {
	wait, _ := ctx.Value(openedKey{}).(func(context.Context) error)
	if wait == nil {
		return nil
	}
	if err := wait(ctx); err != nil {
		return &onec.Error{Class: onec.Transient, Op: op,
			Message: "the attempt could not be recorded in the journal; nothing was sent to 1C", Err: err}
	}
	return nil
}
