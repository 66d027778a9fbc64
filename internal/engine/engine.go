// Package engine carries journal operations out in 1C. Its workers claim one due
// operation at a time, hold the journal row lock for one find-or-create against 1C
// (ARCHITECTURE.md rules 4, 5 and 9), and record the verdict together with the
// attempt. The retry policy lives here: transient failures and unknown outcomes come
// back later with exponential backoff and jitter, permanent ones fail at once.
package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ordersync/ordersync/internal/backoff"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/onec"
	"github.com/ordersync/ordersync/internal/order"
	"github.com/ordersync/ordersync/internal/outbox"
)

// Config of an Engine. Zero values take the documented defaults.
type Config struct {
	Workers         int           // concurrent claims: onec.max_concurrency, default 4
	MaxAttempts     int           // worker.max_attempts, default 10
	BackoffMin      time.Duration // worker.backoff_min, default 1s
	BackoffMax      time.Duration // worker.backoff_max, default 10m
	PollInterval    time.Duration // worker.poll_interval, default 1s
	ShutdownTimeout time.Duration // worker.shutdown_timeout, default 30s
	// OneCTimeout is onec.timeout; one find-or-create is bounded by CallBudget of it.
	OneCTimeout time.Duration
	Location    *time.Location // onec.timezone, for 1C's zone-less dates; default Asia/Almaty
	WorkerID    string         // default host:pid
	Logger      *slog.Logger
	Now         func() time.Time
	// Jitter picks the actual delay in [d/2, d]; tests make it deterministic.
	Jitter func(d time.Duration) time.Duration
	// Routes address the events of a verdict (order.created, …) to the outbox
	// destinations subscribed to them; they commit with the verdict.
	Routes outbox.Routes
	// Fetchers complete creates registered with a fetch payload (a push that only
	// named the order), by connector name: ozon, bitrix24.
	Fetchers map[string]Fetcher
	// WaitInterval is how long a create whose source says "not ready yet" waits
	// before it is looked at again, unless a push wakes it first; default 24h.
	WaitInterval time.Duration
}

// Fetcher fetches an order a push only named. An error wrapping order.ErrNotReady
// makes the operation wait; an *order.ValidationError or connectors' not-found
// fails it; anything else is retried.
type Fetcher interface {
	Fetch(ctx context.Context, id string) (order.Order, error)
}

// CallBudget bounds one find-or-create (a find with its retries, then a create) for a
// given onec.timeout. The claim transaction's idle_in_transaction_session_timeout must
// be set above it, so the database never kills a lock that a call still relies on.
func CallBudget(oneCTimeout time.Duration) time.Duration {
	return 3 * cmp.Or(oneCTimeout, 30*time.Second)
}

// Stats are running counters, read with Engine.Stats.
type Stats struct {
	Claimed, Done, Found, Retried, Failed, FinishErrors int64
}

// Engine runs the workers.
type Engine struct {
	store   journal.Store
	client  onec.Client
	cfg     Config
	log     *slog.Logger
	backoff backoff.Policy

	wake chan struct{}

	mu      sync.Mutex
	started bool
	cancel  context.CancelFunc // stops claiming
	abort   context.CancelFunc // cancels in-flight 1C calls after the shutdown timeout
	wg      sync.WaitGroup

	claimed, done, found, retried, failed, finishErrors atomic.Int64
}

// New returns an engine over a journal store and a 1C client.
func New(store journal.Store, client onec.Client, cfg Config) *Engine {
	cfg.Workers = cmp.Or(cfg.Workers, 4)
	cfg.MaxAttempts = cmp.Or(cfg.MaxAttempts, 10)
	cfg.BackoffMin = cmp.Or(cfg.BackoffMin, time.Second)
	cfg.BackoffMax = cmp.Or(cfg.BackoffMax, 10*time.Minute)
	cfg.PollInterval = cmp.Or(cfg.PollInterval, time.Second)
	cfg.ShutdownTimeout = cmp.Or(cfg.ShutdownTimeout, 30*time.Second)
	cfg.OneCTimeout = cmp.Or(cfg.OneCTimeout, 30*time.Second)
	cfg.WaitInterval = cmp.Or(cfg.WaitInterval, 24*time.Hour)
	if cfg.Location == nil {
		loc, err := time.LoadLocation("Asia/Almaty")
		if err != nil {
			loc = time.FixedZone("Asia/Almaty", 5*3600)
		}
		cfg.Location = loc
	}
	if cfg.WorkerID == "" {
		host, _ := os.Hostname()
		cfg.WorkerID = fmt.Sprintf("%s:%d", cmp.Or(host, "localhost"), os.Getpid())
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.BackoffMax < cfg.BackoffMin {
		panic("engine: BackoffMax below BackoffMin") // validated by config before this
	}
	return &Engine{store: store, client: client, cfg: cfg, log: cfg.Logger, wake: make(chan struct{}, 1),
		backoff: backoff.Policy{Min: cfg.BackoffMin, Max: cfg.BackoffMax, Jitter: cfg.Jitter}}
}

// Stats returns a snapshot of the counters.
func (e *Engine) Stats() Stats {
	return Stats{
		Claimed: e.claimed.Load(), Done: e.done.Load(), Found: e.found.Load(),
		Retried: e.retried.Load(), Failed: e.failed.Load(), FinishErrors: e.finishErrors.Load(),
	}
}

// Start launches the workers. It returns at once; Stop ends them.
func (e *Engine) Start(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.started {
		return errors.New("engine: already started")
	}
	e.started = true
	claimCtx, cancel := context.WithCancel(ctx)
	callCtx, abort := context.WithCancel(context.WithoutCancel(ctx))
	e.cancel, e.abort = cancel, abort
	for i := range e.cfg.Workers {
		e.wg.Add(1)
		worker := fmt.Sprintf("%s/w%d", e.cfg.WorkerID, i+1)
		go func() {
			defer e.wg.Done()
			e.loop(claimCtx, callCtx, worker)
		}()
	}
	e.log.InfoContext(ctx, "engine started", "workers", e.cfg.Workers, "worker_id", e.cfg.WorkerID)
	return nil
}

// Stop stops claiming and waits for in-flight calls to finish. Calls still running
// after ShutdownTimeout are cancelled; their outcome is recorded as unknown, so the
// next attempt finds before it creates. Safe to call twice and before Start.
func (e *Engine) Stop() {
	e.mu.Lock()
	cancel, abort := e.cancel, e.abort
	e.cancel, e.abort = nil, nil
	e.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	finished := make(chan struct{})
	go func() { e.wg.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(e.cfg.ShutdownTimeout):
		e.log.Warn("shutdown timeout reached: cancelling in-flight 1C calls", "shutdown_timeout", e.cfg.ShutdownTimeout)
		abort()
		<-finished
	}
	abort()
	e.log.Info("engine stopped")
}

// Wake tells an idle worker to look for due operations now instead of at its next poll.
func (e *Engine) Wake() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

func (e *Engine) loop(claimCtx, callCtx context.Context, worker string) {
	idle := time.NewTimer(0)
	defer idle.Stop()
	errDelay := e.cfg.PollInterval
	for {
		select {
		case <-claimCtx.Done():
			return
		default:
		}
		claim, err := e.store.ClaimDue(claimCtx, worker)
		switch {
		case err == nil:
			errDelay = e.cfg.PollInterval
			e.process(callCtx, claim)
			continue
		case errors.Is(err, journal.ErrNothingDue):
		case claimCtx.Err() != nil:
			return
		default:
			e.log.Error("claim failed", "worker", worker, "err", err)
			errDelay = min(errDelay*2, 30*time.Second)
			idle.Reset(errDelay)
			select {
			case <-claimCtx.Done():
				return
			case <-idle.C:
			}
			continue
		}
		idle.Reset(e.cfg.PollInterval)
		select {
		case <-claimCtx.Done():
			return
		case <-e.wake:
		case <-idle.C:
		}
	}
}

// RunDue claims and processes one due operation in the caller's goroutine. It
// reports whether there was one. Used by tests, benchmarks and one-shot commands.
func (e *Engine) RunDue(ctx context.Context) (bool, error) {
	claim, err := e.store.ClaimDue(ctx, e.cfg.WorkerID)
	if errors.Is(err, journal.ErrNothingDue) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return true, e.process(ctx, claim)
}

// RunKey carries out one operation now, in the foreground: the operator's resync.
// A failed operation is requeued first. An operation that is done (perhaps by a
// running service while this waited for the lock) is returned as it is.
func (e *Engine) RunKey(ctx context.Context, key string) (journal.Operation, error) {
	op, err := e.store.Get(ctx, key)
	if err != nil {
		return journal.Operation{}, err
	}
	if op.Status == journal.StatusDone {
		return op, nil
	}
	if op.Status == journal.StatusFailed {
		if _, err := e.store.Requeue(ctx, key); err != nil && !errors.Is(err, journal.ErrNotPending) {
			return op, err
		}
	}
	claim, err := e.store.ClaimKey(ctx, key, e.cfg.WorkerID+"/resync")
	if errors.Is(err, journal.ErrNotPending) {
		return e.store.Get(ctx, key)
	}
	if err != nil {
		return op, err
	}
	if err := e.process(ctx, claim); err != nil {
		return op, err
	}
	return e.store.Get(ctx, key)
}

// process runs one claimed attempt and records its verdict. The claim is always
// finished or released before it returns.
func (e *Engine) process(ctx context.Context, claim journal.Claim) error {
	defer claim.Release(context.WithoutCancel(ctx))
	e.claimed.Add(1)
	op := claim.Operation()
	attempt := claim.Attempt()
	log := e.log.With("key", op.Key, "attempt", attempt)

	rec := &onec.Recorder{}
	callCtx, cancel := context.WithTimeout(onec.WithRecorder(ctx, rec), CallBudget(e.cfg.OneCTimeout))
	v := e.carryOut(callCtx, log, op)
	cancel()

	f := e.finishFor(v, attempt)
	f.Exchanges = exchangesJSON(rec.Exchanges())
	if f.Status == journal.StatusDone {
		f.Messages = e.cfg.Routes.Address(eventFor(op, v.result, e.cfg.Now()))
	}
	if err := claim.Finish(context.WithoutCancel(ctx), f); err != nil {
		e.finishErrors.Add(1)
		log.ErrorContext(ctx, "could not record the outcome; the next attempt will find the order in 1C first",
			"outcome", string(f.Status), "err", err)
		return fmt.Errorf("engine: finish %s attempt %d: %w", op.Key, attempt, err)
	}
	switch f.Status {
	case journal.StatusDone:
		e.done.Add(1)
		if f.Result != nil && f.Result.Found {
			e.found.Add(1)
		}
		log.InfoContext(ctx, "operation done", "ref", f.Result.Ref, "number", f.Result.Number, "found", f.Result.Found)
		for _, w := range f.Result.Warnings {
			log.WarnContext(ctx, "1C warning", "warning", w)
		}
	case journal.StatusPending:
		e.retried.Add(1)
		log.WarnContext(ctx, "attempt failed, will retry", "err", f.Error, "next_attempt_at", f.NextAttemptAt)
	case journal.StatusFailed:
		e.failed.Add(1)
		log.ErrorContext(ctx, "operation failed", "err", f.Error)
	}
	return nil
}

// verdict is what carrying out an operation came to, before the retry policy.
type verdict struct {
	result *journal.Result // set when done
	class  onec.Class      // for failures
	err    error
	ref    string
	// waiting: the source says the order is not ready (order.ErrNotReady); the
	// operation waits WaitInterval or the next push about it, whatever its attempts.
	waiting bool
	// payload: the order fetched for a fetch payload, kept as the operation's payload.
	payload []byte
}

func (e *Engine) carryOut(ctx context.Context, log *slog.Logger, op journal.Operation) verdict {
	switch op.Kind {
	case order.KindCreate:
		return e.findOrCreate(ctx, log, op)
	case order.KindCancel:
		return e.cancelOrder(ctx, log, op)
	default:
		return verdict{class: onec.Permanent, err: fmt.Errorf("unknown operation kind %q", op.Kind)}
	}
}

// finishFor applies the retry policy to a verdict.
func (e *Engine) finishFor(v verdict, attempt int) journal.Finish {
	f := e.verdictFinish(v, attempt)
	f.Payload = v.payload
	return f
}

func (e *Engine) verdictFinish(v verdict, attempt int) journal.Finish {
	if v.err == nil {
		return journal.Finish{Status: journal.StatusDone, Result: v.result, Ref: v.result.Ref}
	}
	msg := v.err.Error()
	if v.waiting {
		return journal.Finish{Status: journal.StatusPending, Error: msg, NextAttemptAt: e.cfg.Now().Add(e.cfg.WaitInterval)}
	}
	if v.class == onec.Permanent {
		return journal.Finish{Status: journal.StatusFailed, Error: msg, Ref: v.ref}
	}
	if attempt >= e.cfg.MaxAttempts {
		return journal.Finish{
			Status: journal.StatusFailed, Ref: v.ref,
			Error: fmt.Sprintf("gave up after %d attempts (worker.max_attempts): %s", attempt, msg),
		}
	}
	return journal.Finish{
		Status: journal.StatusPending, Error: msg, Ref: v.ref,
		NextAttemptAt: e.cfg.Now().Add(e.Backoff(attempt)),
	}
}

// Backoff is the delay after the given failed attempt: BackoffMin doubled per
// attempt, capped at BackoffMax, with jitter, never below BackoffMin.
func (e *Engine) Backoff(attempt int) time.Duration { return e.backoff.After(attempt) }
