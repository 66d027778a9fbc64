// Package engine carries journal operations out in 1C. Its workers claim one due
// operation at a time, hold the journal row lock while the handler of its kind
// carries it out (for a create, one find-or-create against 1C), and record the
// verdict together with the attempt. The engine carries out the orders' creates and
// cancels itself; a feature registers the handler of its own kind (Handler,
// Config.Handlers), so the engine knows no feature. The retry policy lives here:
// transient failures and unknown outcomes come back later with exponential backoff and jitter, permanent ones fail at once.
package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ordersync/ordersync/internal/backoff"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/logging"
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
	// OneCTimeout is onec.timeout; one find-or-create is bounded by CallBudget of it,
	// counted from the attempt's start.
	OneCTimeout time.Duration
	// SettleTime is onec.settle_time, default 2m: after an unknown outcome the next
	// attempt, and any cancel that would conclude "never created", waits this long
	// from the moment the POST was sent, since 1C may still be writing the order.
	SettleTime time.Duration
	// LateVerify is onec.late_verify, default 1h: a create that was ever in doubt is
	// looked up in 1C once more this long after its newest doubtful POST, so that a
	// duplicate that a 1C slower than the settle time committed late is still found.
	LateVerify time.Duration
	// GiveUpAfter is worker.give_up_after, default 72h: failures that are not the
	// order's (1C down, a missing publication) never fail an operation before this
	// has passed since its first attempt. MaxAttempts counts only unknown outcomes.
	GiveUpAfter time.Duration
	// PingInterval bounds how often 1C is pinged while it fails or while the engine
	// is paused by a configuration problem; default 15s. The first ping comes
	// BackoffMin after the failure, and the interval doubles up to this.
	PingInterval time.Duration
	// VerifyLease is how long a verification is leased to this engine; default
	// CallBudget.
	VerifyLease time.Duration
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
	// Mappings, when set, give the 1C mapping (organisation, warehouse, partner,
	// counterparty, agreement) an order of a source is written with. An error (an
	// *onec.MappingError, as a rule: an account with no organisation where others
	// have one) refuses the order before anything is sent to 1C: it stays pending,
	// as a configuration failure naming the key to set, until worker.give_up_after.
	Mappings func(source string) (onec.Mapping, error)
	// Handlers carry out the operations of the kinds the engine does not know
	// itself, by kind (stock.snapshot). The engine carries out order.create and
	// order.cancel; an operation of any other kind fails permanently. A nil
	// handler, the empty kind or one of the engine's own kinds is refused: such an
	// engine does not start, nor run an operation.
	Handlers map[string]Handler
}

// Fetcher fetches an order a push only named. An error wrapping order.ErrNotReady
// makes the operation wait; an *order.ValidationError or connectors' not-found
// fails it; anything else is retried.
type Fetcher interface {
	Fetch(ctx context.Context, id string) (order.Order, error)
}

// CallBudget bounds one find-or-create (a find with its retries, then a create) for a
// given onec.timeout, counted from the moment the attempt row was written. The claim
// transaction's idle_in_transaction_session_timeout must be set above it, so the
// database never kills a lock that a call still relies on.
func CallBudget(oneCTimeout time.Duration) time.Duration {
	return 3 * cmp.Or(oneCTimeout, 30*time.Second)
}

// TakeoverAfter is how old an open attempt must be before a claim takes it over: the
// call budget, by which its worker has stopped calling 1C, plus the settle time, by
// which 1C has finished what it was sent. The stores are configured with it.
func TakeoverAfter(oneCTimeout, settleTime time.Duration) time.Duration {
	return CallBudget(oneCTimeout) + cmp.Or(settleTime, 2*time.Minute)
}

// Stats are running counters, read with Engine.Stats.
type Stats struct {
	Claimed, Done, Found, Retried, Failed, FinishErrors int64
	// Verified counts verification finds made; Duplicates the operations they, or a
	// find before a create, found duplicated in 1C.
	Verified, Duplicates int64
	// Woken counts operations made due at once because 1C answered again.
	Woken int64
}

// Engine runs the workers.
type Engine struct {
	store   journal.Store
	client  onec.Client // watched: every answer and failure updates health
	raw     onec.Client // the same client unwatched, for the pings of watch
	cfg     Config
	log     *slog.Logger
	backoff backoff.Policy
	health  *health
	// repeats keeps a database outage to one ERROR line per kind of failure.
	repeats logging.Repeats

	wake chan struct{}

	mu      sync.Mutex
	started bool
	cancel  context.CancelFunc // stops claiming
	abort   context.CancelFunc // cancels in-flight 1C calls after the shutdown timeout
	wg      sync.WaitGroup

	claimed, done, found, retried, failed, finishErrors atomic.Int64
	verified, duplicates, woken                         atomic.Int64

	// kinds are the handlers by operation kind; invalid is why Config.Handlers
	// were refused, if they were.
	kinds   map[string]Handler
	invalid error

	// steps holds, per claim loop, when the step it is in began (time since epoch,
	// plus 1), 0 while it waits for work: Alive reads them.
	steps []atomic.Int64
	epoch time.Time // monotonic: a wall clock that jumps does not make a loop look hung
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
	cfg.SettleTime = cmp.Or(cfg.SettleTime, 2*time.Minute)
	cfg.LateVerify = cmp.Or(cfg.LateVerify, time.Hour)
	cfg.GiveUpAfter = cmp.Or(cfg.GiveUpAfter, 72*time.Hour)
	cfg.PingInterval = cmp.Or(cfg.PingInterval, 15*time.Second)
	cfg.VerifyLease = cmp.Or(cfg.VerifyLease, CallBudget(cfg.OneCTimeout))
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
	e := &Engine{store: store, cfg: cfg, log: cfg.Logger, wake: make(chan struct{}, cfg.Workers),
		backoff: backoff.Policy{Min: cfg.BackoffMin, Max: cfg.BackoffMax, Jitter: cfg.Jitter},
		steps:   make([]atomic.Int64, cfg.Workers), epoch: time.Now()}
	e.health = newHealth(cfg.Logger, cfg.BackoffMax)
	e.kinds, e.invalid = e.register(cfg.Handlers)
	e.client, e.raw = watchedClient{Client: client, h: e.health}, client
	return e
}

// Stats returns a snapshot of the counters.
func (e *Engine) Stats() Stats {
	return Stats{
		Claimed: e.claimed.Load(), Done: e.done.Load(), Found: e.found.Load(),
		Retried: e.retried.Load(), Failed: e.failed.Load(), FinishErrors: e.finishErrors.Load(),
		Verified: e.verified.Load(), Duplicates: e.duplicates.Load(), Woken: e.woken.Load(),
	}
}

// Start launches the workers. It returns at once; Stop ends them.
func (e *Engine) Start(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.started {
		return errors.New("engine: already started")
	}
	if e.invalid != nil {
		return e.invalid
	}
	e.started = true
	claimCtx, cancel := context.WithCancel(ctx)
	callCtx, abort := context.WithCancel(context.WithoutCancel(ctx))
	e.cancel, e.abort = cancel, abort
	for i := range e.cfg.Workers {
		e.wg.Add(1)
		worker := fmt.Sprintf("%s/w%d", e.cfg.WorkerID, i+1)
		step := &e.steps[i]
		go func() {
			defer e.wg.Done()
			e.loop(claimCtx, callCtx, worker, step)
		}()
	}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		e.watch(claimCtx)
	}()
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
		// A cancelled call records its verdict, itself bounded by the shutdown
		// timeout; a database that does not answer at all is not waited for longer.
		select {
		case <-finished:
		case <-time.After(e.verdictTimeout() + time.Second):
			e.log.Error("engine: workers still writing verdicts; leaving them "+
				"(their attempts stay open and are taken over after the restart)", "shutdown_timeout", e.cfg.ShutdownTimeout)
			return
		}
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

// wakeAll tells every idle worker to look for due operations now.
func (e *Engine) wakeAll() {
	for range e.cfg.Workers {
		e.Wake()
	}
}

// Alive reports whether every claim loop goes round: each is waiting for work (or
// for 1C to answer again), or inside a step — a claim, one operation carried out
// and recorded, a verification — that has lasted less than any step may. The error
// names the first loop that is not, blocked in a call that does not return, and how
// long it has been in its step: the service withholds its systemd watchdog ping
// while there is one, so that systemd restarts it. Nil before Start and after Stop.
func (e *Engine) Alive() error {
	limit := e.stepLimit()
	now := time.Since(e.epoch)
	for i := range e.steps {
		began := e.steps[i].Load()
		if began == 0 {
			continue
		}
		if d := now - time.Duration(began-1); d > limit {
			return fmt.Errorf("engine worker w%d has been in one step for %s, longer than any may take (%s): it is hung",
				i+1, d.Round(100*time.Millisecond), limit)
		}
	}
	return nil
}

// stepLimit is the longest one step of a claim loop may take: a claim, which may
// wait for a row lock (the stores' claim lock timeout, CallBudget + 10s), the call
// budget of its operation (or of a verification), and the writes of its verdict and
// of its release, each bounded by the verdict timeout.
func (e *Engine) stepLimit() time.Duration {
	return 2*CallBudget(e.cfg.OneCTimeout) + 10*time.Second + 2*e.verdictTimeout()
}

// OneCState says what the engine knows of 1C from its last call or ping: "up" or
// "not answering", and the endpoints that answer a configuration or authentication
// failure, if any ("up; failing: /orders/cancel (configuration)").
func (e *Engine) OneCState() string {
	e.health.mu.Lock()
	state := stateName(e.health.state)
	e.health.mu.Unlock()
	var failing []string
	for _, b := range e.Broken() {
		failing = append(failing, fmt.Sprintf("%s (%s)", b.Path, b.Class))
	}
	if len(failing) > 0 {
		state += "; failing: " + strings.Join(failing, ", ")
	}
	return state
}

// PingOneC pings 1C through the engine's client, so that what it learns counts as
// any other call does: 1C not answering has the engine ping it until it does.
func (e *Engine) PingOneC(ctx context.Context) (onec.Info, error) { return e.client.Ping(ctx) }

// loop is one claim loop. step holds when the step it is in began, 0 while it waits.
func (e *Engine) loop(claimCtx, callCtx context.Context, worker string, step *atomic.Int64) {
	idle := time.NewTimer(0)
	defer idle.Stop()
	defer step.Store(0)
	busy := func() { step.Store(int64(time.Since(e.epoch)) + 1) }
	errDelay := e.cfg.PollInterval
	for {
		busy()
		select {
		case <-claimCtx.Done():
			return
		default:
		}
		claim, err := e.store.ClaimDue(journal.WithAttemptInBackground(claimCtx), worker)
		if err == nil {
			// A claim whose attempt row could not be written failed as a claim does.
			if err = e.process(callCtx, claim); !errors.Is(err, journal.ErrAttemptNotRecorded) {
				err = nil
			}
		}
		switch {
		case err == nil:
			errDelay = e.cfg.PollInterval
			e.databaseAnswers(claimCtx, msgClaimFailed)
			continue
		case errors.Is(err, journal.ErrNothingDue):
			errDelay = e.cfg.PollInterval
			e.databaseAnswers(claimCtx, msgClaimFailed)
			if e.verifyDue(callCtx, claimCtx, worker) {
				continue
			}
		case claimCtx.Err() != nil:
			return
		default:
			// The database is away or failing: one ERROR for the run, not one a try.
			// The loop tries again soon (the database's return must not wait out a
			// long backoff), and any loop that finds it back wakes the others.
			e.repeats.Fail(claimCtx, e.log, msgClaimFailed, err, "worker", worker)
			errDelay = min(errDelay*2, maxDatabaseRetry)
			idle.Reset(errDelay)
			step.Store(0)
			select {
			case <-claimCtx.Done():
				return
			case <-e.wake:
			case <-idle.C:
			}
			continue
		}
		idle.Reset(e.cfg.PollInterval)
		step.Store(0)
		select {
		case <-claimCtx.Done():
			return
		case <-e.wake:
		case <-idle.C:
		}
	}
}

// Messages of the runs of database failures that the engine logs once (Repeats).
const (
	msgClaimFailed       = "claim failed: the journal's database does not answer or refuses the claim"
	msgApplyWakesFailed  = "could not apply recorded wakes"
	msgWakeWaitingFailed = "could not make the operations waiting on 1C due"
	msgClaimVerifyFailed = "claim a verification failed"
	maxDatabaseRetry     = time.Second // how long a claim loop waits, at most, to try a failing database again
)

// databaseAnswers ends the run of failures msg, if there was one: the database
// answers again, so every claim loop, whatever its backoff, looks for work now.
func (e *Engine) databaseAnswers(ctx context.Context, msg string) {
	if e.repeats.OK(ctx, e.log, msg) {
		e.wakeAll()
	}
}

// RunDue claims and processes one due operation in the caller's goroutine. It
// reports whether there was one. Used by tests, benchmarks and one-shot commands.
func (e *Engine) RunDue(ctx context.Context) (bool, error) {
	if e.invalid != nil {
		return false, e.invalid
	}
	claim, err := e.store.ClaimDue(journal.WithAttemptInBackground(ctx), e.cfg.WorkerID)
	if errors.Is(err, journal.ErrNothingDue) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return true, e.process(ctx, claim)
}

// ResyncActor is the journal actor of RunKey's requeue when its caller names none.
const ResyncActor = "resync"

// RunKey carries out one operation now, in the foreground: the operator's resync.
// A failed operation is requeued first. An operation that is done (perhaps by a
// running service while this waited for the lock) is returned as it is; one whose
// earlier attempt may still be at work in 1C is returned pending, its LastError
// saying until when it waits.
func (e *Engine) RunKey(ctx context.Context, key string) (journal.Operation, error) {
	if e.invalid != nil {
		return journal.Operation{}, e.invalid
	}
	// The requeue and the attempt are the resync's: the caller's actor (cli:anna)
	// when it names one, else the resync itself, never "retry".
	if journal.ActorOf(ctx) == "" {
		ctx = journal.WithActor(ctx, ResyncActor)
	}
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
	if errors.Is(err, journal.ErrUnsettled) {
		// An earlier attempt may still be at work in 1C: nothing is tried now. The
		// operation is returned pending, with that as the reason it gives.
		cur, gerr := e.store.Get(ctx, key)
		if gerr != nil {
			return op, gerr
		}
		cur.LastError = err.Error()
		return cur, nil
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
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.verdictTimeout())
		defer cancel()
		claim.Release(rctx)
	}()
	e.claimed.Add(1)
	op := claim.Operation()
	attempt := claim.Attempt()
	log := e.log.With("key", op.Key, "attempt", attempt)

	rec := &onec.Recorder{Now: e.cfg.Now}
	// The attempt's deadline counts from the moment its row was written, so a claim
	// that takes it over (TakeoverAfter past that moment) never races its calls. That
	// moment is on the engine's clock (the database's); the deadline is set on this
	// process's own clock, by what is left of the budget, so that a process clock that
	// differs from the database's neither cuts the call short nor stretches it.
	started := op.AttemptStartedAt
	if started.IsZero() {
		started = e.cfg.Now()
	}
	left := CallBudget(e.cfg.OneCTimeout) - e.cfg.Now().Sub(started)
	callCtx, cancel := context.WithTimeout(onec.WithRecorder(ctx, rec), left)
	// The handler's reads from 1C (the find) may go out while the attempt row is
	// still being committed; anything that may change 1C waits for it (opened).
	v := e.carryOut(withOpened(callCtx, claim.Opened), log, op)
	cancel()
	if err := claim.Opened(context.WithoutCancel(ctx)); err != nil {
		// Nothing was sent that may have changed 1C, and there is no row to record
		// a verdict on: the claim is released (deferred), and the claim loop logs
		// and backs off as from a failed claim.
		return fmt.Errorf("engine: %s attempt %d: %w", op.Key, attempt, err)
	}

	f := e.finishFor(op, v, attempt, started)
	f.Exchanges = exchangesJSON(rec.Exchanges())
	if f.Status == journal.StatusDone {
		// What the handler made of it commits with the verdict: its events
		// (order.created, a snapshot's publishing) and what the stores keep beside
		// the operation (the snapshot itself).
		f.Messages = v.Messages
		f.Attachments = v.Attachments
	}
	// Warnings are kept whatever the verdict: a create refused for a conflict in 1C,
	// or stopped by a cancel that came first, says so in `journal list --warnings`.
	if len(v.Warnings) > 0 {
		f.Warnings = mergeWarnings(op.Warnings, v.Warnings)
		if added := len(f.Warnings) - len(op.Warnings); added > 0 && f.Status == journal.StatusDone {
			if ev, ok := duplicateEvent(op, f.Warnings[len(op.Warnings):], e.cfg.Now()); ok {
				e.duplicates.Add(1)
				f.Messages = append(f.Messages, e.cfg.Routes.Address(ev)...)
			}
		}
	}
	// The verdict is written even when the call was cut short, but not for ever: a
	// database that does not answer must not hold a stopping service past
	// worker.shutdown_timeout (the attempt then stays open and is taken over later).
	fctx, fcancel := context.WithTimeout(context.WithoutCancel(ctx), e.verdictTimeout())
	defer fcancel()
	if err := claim.Finish(fctx, f); err != nil {
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
	case journal.StatusPending:
		e.retried.Add(1)
		log.WarnContext(ctx, "attempt failed, will retry", "err", f.Error, "next_attempt_at", f.NextAttemptAt)
	case journal.StatusFailed:
		e.failed.Add(1)
		log.ErrorContext(ctx, "operation failed", "err", f.Error)
	}
	for _, w := range v.Warnings {
		log.WarnContext(ctx, "1C warning", "code", w.Code, "warning", w.Message, "refs", w.Refs)
	}
	return nil
}

// finishFor applies the retry policy to a verdict of the attempt that started at
// started.
func (e *Engine) finishFor(op journal.Operation, v Verdict, attempt int, started time.Time) journal.Finish {
	f := e.verdictFinish(op, v, attempt, started)
	f.Payload = v.Payload
	f.FirstAttemptAt = started
	return f
}

// verdictFinish is the retry policy:
//
//   - done: done; a create (or an operation of a Verifier's kind) that was ever in
//     doubt is verified once settled;
//   - permanent: failed at once;
//   - unknown outcome: retried no sooner than settle time after the POST; it counts
//     toward worker.max_attempts, and failing for that is the only way an unknown
//     outcome fails before worker.give_up_after;
//   - transient, configuration, authentication, not ready: retried, never counted;
//     failed only once worker.give_up_after has passed since the first attempt.
func (e *Engine) verdictFinish(op journal.Operation, v Verdict, attempt int, started time.Time) journal.Finish {
	now := e.cfg.Now()
	if v.Err == nil {
		f := journal.Finish{Status: journal.StatusDone, Result: v.Result, Ref: v.Result.Ref}
		if e.verifies(op.Kind) && (op.Doubted || op.UnknownAttempts > 0) {
			// Looked up again once its newest doubtful POST has settled (by now, as a
			// rule), and once more onec.late_verify after that POST, for a 1C slower
			// than the settle time. The POST's time is its settle time less
			// settle_time; a doubt known only from an interrupted attempt counts
			// from now, which is later than any POST that attempt made.
			f.VerifyAt = now
			base := now
			if op.SettleUntil != nil {
				if op.SettleUntil.After(now) {
					f.VerifyAt = *op.SettleUntil
				}
				base = op.SettleUntil.Add(-e.cfg.SettleTime)
			}
			if late := base.Add(e.cfg.LateVerify); late.After(f.VerifyAt) {
				f.LateVerifyAt = late
			}
		}
		return f
	}
	msg := v.Err.Error()
	if v.Waiting {
		return journal.Finish{Status: journal.StatusPending, Class: journal.ClassWaiting, Error: msg,
			NextAttemptAt: now.Add(e.cfg.WaitInterval)}
	}
	class := classOf(v.Class)
	if class == journal.ClassPermanent {
		return journal.Finish{Status: journal.StatusFailed, Class: class, Error: msg, Ref: v.Ref}
	}
	first := started
	if op.FirstAttemptAt != nil && op.FirstAttemptAt.Before(first) {
		first = *op.FirstAttemptAt
	}
	f := journal.Finish{Status: journal.StatusPending, Class: class, Error: msg, Ref: v.Ref}
	if class == journal.ClassUnknown {
		// The settle time of this POST is kept whatever the verdict: a create that
		// fails here may still be being written by 1C, and a cancel, a resync or a
		// wake of it waits that out (failed is not settled).
		if !v.PostedAt.IsZero() {
			f.SettleUntil = v.PostedAt.Add(e.cfg.SettleTime)
		}
		unknown := op.UnknownAttempts + 1
		if unknown >= e.cfg.MaxAttempts {
			f.Status = journal.StatusFailed
			f.Error = fmt.Sprintf("gave up after %d attempts whose outcome was unknown (worker.max_attempts): %s", unknown, msg)
			if !f.SettleUntil.IsZero() {
				f.Error += fmt.Sprintf("; its last POST may still be at work in 1C until %s: a cancel or resync waits for that",
					f.SettleUntil.UTC().Format(time.RFC3339))
			}
			return f
		}
	}
	if since := now.Sub(first); since >= e.cfg.GiveUpAfter {
		f.Status = journal.StatusFailed
		f.Error = fmt.Sprintf("gave up after %s of failures since the first attempt at %s (worker.give_up_after %s): %s",
			since.Round(time.Second), first.UTC().Format(time.RFC3339), e.cfg.GiveUpAfter, msg)
		return f
	}
	// A configuration or authentication failure of one endpoint backs off like any
	// other, up to worker.backoff_max; it is woken sooner when a call to that
	// endpoint works again (watch), never by a ping of another.
	delay := e.Backoff(attempt)
	f.NextAttemptAt = now.Add(delay)
	for _, t := range []time.Time{f.SettleUntil, v.RetryAt} {
		if t.After(f.NextAttemptAt) {
			f.NextAttemptAt = t
		}
	}
	return f
}

// classOf names a 1C class as the journal records it.
func classOf(c onec.Class) string {
	switch c {
	case onec.Unknown:
		return journal.ClassUnknown
	case onec.Permanent:
		return journal.ClassPermanent
	case onec.Auth:
		return journal.ClassAuth
	case onec.Configuration:
		return journal.ClassConfiguration
	default:
		return journal.ClassTransient
	}
}

// verdictTimeout bounds one write of a verdict (and the release of its claim): the
// shutdown timeout, and no less than 5s, so that a short shutdown timeout does not
// lose verdicts to a merely busy database; a database that does not answer at all is
// not waited for longer.
func (e *Engine) verdictTimeout() time.Duration { return max(e.cfg.ShutdownTimeout, 5*time.Second) }

// Backoff is the delay after the given failed attempt: BackoffMin doubled per
// attempt, capped at BackoffMax, with jitter, never below BackoffMin.
func (e *Engine) Backoff(attempt int) time.Duration { return e.backoff.After(attempt) }
