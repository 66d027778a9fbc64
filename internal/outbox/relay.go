package outbox

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ordersync/ordersync/internal/backoff"
)

// RelayConfig configures a Relay. Zero values take the documented defaults (the
// relay.* configuration keys).
type RelayConfig struct {
	Name        string // for logs; default "relay"
	Concurrency int    // lanes published at once, default 16
	BatchSize   int    // lane heads claimed per round, default 100
	// Claimers is how many claim loops run at once, default 2. A round's claim and
	// write-back are one statement on one connection, so one loop keeps one
	// database backend busy; a second claims while the first's batch is written back
	// and delivered. Lanes stay in order whatever the count: a lane's head is claimed
	// by one loop only (SKIP LOCKED, the lease), as between replicas.
	Claimers      int
	PollInterval  time.Duration // default 1s
	MaxAttempts   int           // then the event is dead; default 12
	BackoffMin    time.Duration // default 1s
	BackoffMax    time.Duration // default 1h
	Lease         time.Duration // default 60s
	Retention     time.Duration // sent events older than this are pruned; default 720h
	PruneInterval time.Duration // default 1h
	PruneBatch    int           // rows deleted per statement; default 1000
	// StopTimeout bounds how long Stop waits for the round in flight before it
	// cancels its deliveries; default 30s.
	StopTimeout time.Duration
	// SkipDead lists destinations configured on_dead: skip: a dead event there does
	// not hold back the later events of its lane.
	SkipDead []string
	// Publishers deliver to each destination by name. Events for a destination
	// without a publisher stay in the table (outbox status shows them).
	Publishers map[string]Publisher
	// Listener wakes the relay on commit; nil polls only.
	Listener Listener
	Logger   *slog.Logger
	Now      func() time.Time
	Jitter   func(d time.Duration) time.Duration // picks a delay in [d/2, d]; nil: random
}

// RelayStats are running counters.
type RelayStats struct {
	Rounds, Claimed, Sent, Retried, Dead, Fenced, Pruned int64
	// Released counts claimed events whose delivery was never started (too little
	// of the lease left); they went back to their lanes.
	Released int64
	// Continued counts deliveries that made progress and go on later
	// (DeliveryError.Continue).
	Continued int64
}

// Relay delivers outbox events: it claims lane heads, publishes them outside any
// transaction (lanes in parallel, never two events of one lane) within the lease,
// and writes the results back as they finish, fenced by the claim token.
type Relay struct {
	store Store
	cfg   RelayConfig
	log   *slog.Logger
	only  []string

	backoff backoff.Policy

	wakes []chan struct{} // one per claim loop

	mu     sync.Mutex
	cancel context.CancelFunc
	abort  context.CancelFunc
	wg     sync.WaitGroup

	rounds, claimed, sent, retried, dead, fenced, pruned, released atomic.Int64
	continued                                                      atomic.Int64

	// rounds in flight, one per claim loop: when its round began (time since epoch,
	// plus 1), 0 between rounds. Alive reads them.
	inRound []atomic.Int64
	epoch   time.Time // monotonic
}

// NewRelay returns a relay over store.
func NewRelay(store Store, cfg RelayConfig) *Relay {
	cfg.Name = cmp.Or(cfg.Name, "relay")
	cfg.Concurrency = cmp.Or(cfg.Concurrency, 16)
	cfg.BatchSize = cmp.Or(cfg.BatchSize, 100)
	cfg.Claimers = max(cmp.Or(cfg.Claimers, 2), 1)
	cfg.PollInterval = cmp.Or(cfg.PollInterval, time.Second)
	cfg.MaxAttempts = cmp.Or(cfg.MaxAttempts, 12)
	cfg.BackoffMin = cmp.Or(cfg.BackoffMin, time.Second)
	cfg.BackoffMax = max(cmp.Or(cfg.BackoffMax, time.Hour), cfg.BackoffMin)
	cfg.Lease = cmp.Or(cfg.Lease, time.Minute)
	cfg.Retention = cmp.Or(cfg.Retention, 720*time.Hour)
	cfg.PruneInterval = cmp.Or(cfg.PruneInterval, time.Hour)
	cfg.PruneBatch = cmp.Or(cfg.PruneBatch, 1000)
	cfg.StopTimeout = cmp.Or(cfg.StopTimeout, 30*time.Second)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	only := make([]string, 0, len(cfg.Publishers))
	for name := range cfg.Publishers {
		only = append(only, name)
	}
	slices.Sort(only)
	wakes := make([]chan struct{}, cfg.Claimers)
	for i := range wakes {
		wakes[i] = make(chan struct{}, 1)
	}
	return &Relay{store: store, cfg: cfg, only: only, wakes: wakes, inRound: make([]atomic.Int64, cfg.Claimers), epoch: time.Now(),
		backoff: backoff.Policy{Min: cfg.BackoffMin, Max: cfg.BackoffMax, Jitter: cfg.Jitter},
		log:     cfg.Logger.With("relay", cfg.Name)}
}

// Stats returns a snapshot of the counters.
func (r *Relay) Stats() RelayStats {
	return RelayStats{Rounds: r.rounds.Load(), Claimed: r.claimed.Load(), Sent: r.sent.Load(),
		Retried: r.retried.Load(), Dead: r.dead.Load(), Fenced: r.fenced.Load(), Pruned: r.pruned.Load(),
		Released: r.released.Load(), Continued: r.continued.Load()}
}

// Wake makes an idle relay look for events now.
func (r *Relay) Wake() {
	for _, w := range r.wakes {
		select {
		case w <- struct{}{}:
		default:
		}
	}
}

// Start runs the delivery loop, the listener and the pruner until Stop.
func (r *Relay) Start(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cancel != nil {
		return errors.New("outbox: relay already started")
	}
	loopCtx, cancel := context.WithCancel(ctx)
	workCtx, abort := context.WithCancel(context.WithoutCancel(ctx))
	r.cancel, r.abort = cancel, abort
	r.wg.Add(1 + r.cfg.Claimers)
	for i := range r.cfg.Claimers {
		go func() { defer r.wg.Done(); r.loop(loopCtx, workCtx, i) }()
	}
	go func() { defer r.wg.Done(); r.pruneLoop(loopCtx) }()
	if r.cfg.Listener != nil {
		r.wg.Add(1)
		go func() { defer r.wg.Done(); r.listen(loopCtx) }()
	}
	r.log.InfoContext(ctx, "relay started", "destinations", r.only, "listen", r.cfg.Listener != nil,
		"batch_size", r.cfg.BatchSize, "concurrency", r.cfg.Concurrency)
	return nil
}

// Stop ends the loops; the round in flight may finish within StopTimeout, then its
// deliveries are cancelled and recorded as failed attempts. Safe twice and before Start.
func (r *Relay) Stop() {
	r.mu.Lock()
	cancel, abort := r.cancel, r.abort
	r.cancel = nil
	r.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	done := make(chan struct{})
	go func() { r.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(r.cfg.StopTimeout):
		r.log.Warn("relay stop timeout: cancelling deliveries in flight")
		abort()
		<-done
	}
	abort()
}

// loop runs rounds back to back while they find events, each round's last results
// riding with the next round's claim (one round trip between two rounds); before it
// waits, and when it stops, it writes back what it holds on its own.
func (r *Relay) loop(ctx, work context.Context, i int) {
	inRound, wake := &r.inRound[i], r.wakes[i]
	timer := time.NewTimer(0)
	defer timer.Stop()
	errDelay := r.cfg.PollInterval
	var held Completion
	for {
		if ctx.Err() != nil {
			r.flushHeld(context.WithoutCancel(work), &held)
			return
		}
		released := r.released.Load()
		inRound.Store(int64(time.Since(r.epoch)) + 1)
		n, err := r.runRound(work, &held)
		// A round that started nothing (every delivery needed more of the lease than
		// was left) has not moved any lane: it waits like an empty one.
		if n > 0 && r.released.Load()-released == int64(n) {
			n = 0
		}
		if err != nil || n == 0 {
			r.flushHeld(context.WithoutCancel(work), &held)
		}
		inRound.Store(0)
		switch {
		case err != nil:
			r.log.Error("relay round failed", "err", err)
			errDelay = min(2*errDelay, 30*time.Second)
			timer.Reset(errDelay)
		case n > 0:
			errDelay = r.cfg.PollInterval
			continue // more may be due: the lanes just advanced
		default:
			errDelay = r.cfg.PollInterval
			timer.Reset(r.cfg.PollInterval)
		}
		select {
		case <-ctx.Done():
			return
		case <-wake:
		case <-timer.C:
		}
	}
}

// Alive reports whether the delivery loop goes round: it is waiting for events, or
// in a round that has lasted less than any round may (the lease, within which every
// delivery ends, and the writes of the results after it, each bounded by
// StopTimeout). The error names the relay and how long its round has lasted: the
// service withholds its systemd watchdog ping while there is one.
func (r *Relay) Alive() error {
	limit := r.cfg.Lease + 4*r.cfg.StopTimeout
	for i := range r.inRound {
		began := r.inRound[i].Load()
		if began == 0 {
			continue
		}
		if d := time.Since(r.epoch) - time.Duration(began-1); d > limit {
			return fmt.Errorf("outbox relay %q has been in one round for %s, longer than any may take (%s): it is hung",
				r.cfg.Name, d.Round(100*time.Millisecond), limit)
		}
	}
	return nil
}

func (r *Relay) listen(ctx context.Context) {
	pause := time.Second
	for ctx.Err() == nil {
		err := r.cfg.Listener.Listen(ctx, r.Wake)
		if ctx.Err() != nil {
			return
		}
		r.log.Warn("relay: LISTEN connection lost; polling until it is back", "err", err, "retry_in", pause)
		select {
		case <-ctx.Done():
			return
		case <-time.After(pause):
		}
		pause = min(2*pause, 30*time.Second)
	}
}

func (r *Relay) pruneLoop(ctx context.Context) {
	t := time.NewTicker(r.cfg.PruneInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if n, err := r.Prune(ctx); err != nil {
			r.log.Error("relay: prune failed", "err", err)
		} else if n > 0 {
			r.log.Info("relay: pruned sent events", "deleted", n, "retention", r.cfg.Retention.String())
		}
	}
}

// Prune deletes sent events older than the retention, in bounded batches.
func (r *Relay) Prune(ctx context.Context) (int, error) {
	cut := r.cfg.Now().Add(-r.cfg.Retention)
	total := 0
	for {
		n, err := r.store.Prune(ctx, cut, r.cfg.PruneBatch)
		total += n
		r.pruned.Add(int64(n))
		if err != nil || n < r.cfg.PruneBatch {
			return total, err
		}
	}
}

// TimedPublisher is a Publisher that says how long one delivery may take (its HTTP
// timeout, its rate limit's wait). The relay starts a delivery only while at least
// that much of its lease is left; for other publishers it assumes half the lease.
type TimedPublisher interface {
	Publisher
	Timeout() time.Duration
}

// deliveryTimeout is how much of the lease one delivery to dest needs.
func (r *Relay) deliveryTimeout(dest string) time.Duration {
	if tp, ok := r.cfg.Publishers[dest].(TimedPublisher); ok {
		if d := tp.Timeout(); d > 0 {
			return d
		}
	}
	return r.cfg.Lease / 2
}

// writeBackDelay is the longest a finished delivery's result waits to be written back
// while other deliveries of its round are still running: a slow receiver holds the
// lanes its round finished with for no longer than this. A round whose deliveries are
// all done by then writes its results with the next round's claim.
const writeBackDelay = 100 * time.Millisecond

// flushHeld writes back held results on their own and forgets them: a write-back that
// fails leaves the events leased until the lease runs out, then they are delivered
// again (the consumers dedupe on the event id).
func (r *Relay) flushHeld(ctx context.Context, held *Completion) {
	if len(held.Results) == 0 {
		return
	}
	if err := r.complete(ctx, held.Token, held.Results); err != nil {
		r.log.Error("relay: write-back failed; the events go out again once their lease is over", "err", err,
			"events", len(held.Results))
	}
	*held = Completion{}
}

// RunOnce runs one round: claim, publish, write back. It returns how many events it
// claimed.
//
// The lease holds: the round reckons its lease from before the claim was sent (the
// store sets it from the database's clock), starts a delivery only while at least
// that delivery's timeout of the lease is left, and cuts a delivery off at the end of
// the lease. Deliveries it did not start go back to their lanes at once (the lease
// cleared, the attempt given back). Results are written back under the claim token,
// all together when the round's deliveries end together, and otherwise in groups, no
// result waiting longer than writeBackDelay, so a slow receiver holds nothing up and
// a second relay never re-claims what this one has done. Sent counts only rows the
// write-back changed; results refused because the lease ran out are counted Fenced.
//
// The running relay (Start) does the same, except that it writes a round's last
// results with the next round's claim, in one transaction.
func (r *Relay) RunOnce(ctx context.Context) (int, error) {
	var held Completion
	n, err := r.runRound(ctx, &held)
	if len(held.Results) > 0 {
		if werr := r.complete(context.WithoutCancel(ctx), held.Token, held.Results); err == nil {
			err = werr
		}
	}
	return n, err
}

// runRound runs one round. It writes back *held with its claim, and leaves in *held
// the results of this round that are still to be written: the next round's claim, or
// the caller, writes them. When the claim fails, *held is left as it was.
func (r *Relay) runRound(ctx context.Context, held *Completion) (int, error) {
	if len(r.only) == 0 {
		return 0, nil
	}
	r.rounds.Add(1)
	leaseStart := time.Now()
	claim, err := r.store.Claim(ctx, ClaimRequest{Limit: r.cfg.BatchSize, Lease: r.cfg.Lease, SkipDead: r.cfg.SkipDead,
		Only: r.only, Complete: *held})
	if err != nil {
		return 0, err
	}
	r.counted(held.Results, claim.Completed)
	*held = Completion{}
	if len(claim.Records) == 0 {
		return 0, nil
	}
	r.claimed.Add(int64(len(claim.Records)))
	// The last moment a delivery may still be running: the lease's end less the
	// time its result needs to be written back.
	margin := min(r.cfg.Lease/10, 5*time.Second)
	leaseEnd := leaseStart.Add(r.cfg.Lease - margin)

	wctx := context.WithoutCancel(ctx)
	results := make(chan Result, len(claim.Records))
	type gathered struct {
		left []Result
		err  error
	}
	written := make(chan gathered, 1)
	go func() {
		left, err := r.writeBack(wctx, claim.Token, results)
		written <- gathered{left, err}
	}()

	disable := map[string]string{}
	var mu sync.Mutex
	sem := make(chan struct{}, r.cfg.Concurrency)
	var wg sync.WaitGroup
	released := 0
	for _, rec := range claim.Records {
		sem <- struct{}{}
		if time.Until(leaseEnd) < r.deliveryTimeout(rec.Destination) || ctx.Err() != nil {
			<-sem
			results <- Result{ID: rec.ID, Released: true}
			released++
			continue
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			dctx, cancel := context.WithDeadline(ctx, leaseEnd)
			res, gone := r.deliver(dctx, rec)
			cancel()
			results <- res
			if gone != "" {
				mu.Lock()
				disable[rec.Destination] = gone
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(results)
	g := <-written
	*held = Completion{Token: claim.Token, Results: g.left}
	if g.err != nil {
		return len(claim.Records), g.err
	}
	if released > 0 {
		r.released.Add(int64(released))
		r.log.Info("relay: deliveries not started: too little of the lease was left; they go back to their lanes",
			"released", released, "lease", r.cfg.Lease.String())
	}
	if len(disable) > 0 && len(held.Results) > 0 {
		// The gone destination's event is written dead first, so that disabling the
		// destination does not count it again.
		err := r.complete(wctx, held.Token, held.Results)
		*held = Completion{}
		if err != nil {
			return len(claim.Records), err
		}
	}
	for dest, reason := range disable {
		dctx, cancel := context.WithTimeout(wctx, r.cfg.StopTimeout)
		killed, err := r.store.DisableDestination(dctx, dest, reason)
		cancel()
		if err != nil {
			return len(claim.Records), fmt.Errorf("outbox: disable destination %s: %w", dest, err)
		}
		r.dead.Add(int64(killed))
		r.log.Error("relay: destination disabled; its events are dead until an operator requeues them",
			"destination", dest, "reason", reason, "events", killed)
	}
	return len(claim.Records), nil
}

// writeBack gathers results as deliveries finish. Once the oldest result it holds
// has waited writeBackDelay, it writes what it holds (sent and not sent apart, so
// that Sent counts exactly the rows changed); when results is closed, it returns
// what it still holds, to be written with the next claim. The error is the first of
// its writes.
func (r *Relay) writeBack(ctx context.Context, token string, results <-chan Result) ([]Result, error) {
	var (
		held  []Result
		first error
	)
	timer := time.NewTimer(writeBackDelay)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case res, ok := <-results:
			if !ok {
				return held, first
			}
			if len(held) == 0 {
				timer.Reset(writeBackDelay)
			}
			held = append(held, res)
		case <-timer.C:
			if err := r.complete(ctx, token, held); err != nil && first == nil {
				first = err
			}
			held = nil
		}
	}
}

// counted counts the results a claim wrote back, from what the write-back changed.
func (r *Relay) counted(results []Result, c Completed) {
	if len(results) == 0 {
		return
	}
	if c.Rows < len(results) {
		// Our lease ran out and another relay claimed these events: it decides now.
		r.fenced.Add(int64(len(results) - c.Rows))
		r.log.Warn("relay: results refused, the lease expired and the events were claimed again",
			"refused", len(results)-c.Rows, "lease", r.cfg.Lease.String())
	}
	r.sent.Add(int64(c.Sent))
	for _, res := range results {
		switch {
		case res.Sent, res.Released:
		case res.Dead:
			r.dead.Add(1)
		default:
			r.retried.Add(1)
		}
	}
}

// complete writes one group back and counts what it changed.
func (r *Relay) complete(ctx context.Context, token string, group []Result) error {
	var sent, other []Result
	for _, res := range group {
		if res.Sent {
			sent = append(sent, res)
		} else {
			other = append(other, res)
		}
	}
	for _, part := range [][]Result{sent, other} {
		if len(part) == 0 {
			continue
		}
		// Bounded: a database that does not answer must not hold a stopping relay.
		cctx, cancel := context.WithTimeout(ctx, r.cfg.StopTimeout)
		n, err := r.store.Complete(cctx, token, part)
		cancel()
		if err != nil {
			return fmt.Errorf("outbox: write back %d results: %w", len(part), err)
		}
		if n < len(part) {
			// Our lease ran out and another relay claimed these events: it decides now.
			r.fenced.Add(int64(len(part) - n))
			r.log.Warn("relay: results refused, the lease expired and the events were claimed again",
				"refused", len(part)-n, "lease", r.cfg.Lease.String())
		}
		if part[0].Sent {
			r.sent.Add(int64(n))
			continue
		}
		for _, res := range part {
			switch {
			case res.Released:
			case res.Dead:
				r.dead.Add(1)
			default:
				r.retried.Add(1)
			}
		}
	}
	return nil
}

// deliver publishes one record and turns the outcome into a result. A non-empty
// second value disables the destination with that reason.
func (r *Relay) deliver(ctx context.Context, rec Record) (Result, string) {
	log := r.log.With("event_id", rec.EventID, "destination", rec.Destination,
		"aggregate_id", rec.AggregateID, "sequence", rec.Sequence, "attempt", rec.Attempts)
	pub := r.cfg.Publishers[rec.Destination]
	err := pub.Publish(ctx, rec)
	if err == nil {
		log.DebugContext(ctx, "event delivered")
		return Result{ID: rec.ID, Sent: true}, ""
	}
	res := Result{ID: rec.ID, Error: err.Error()}
	var de *DeliveryError
	errors.As(err, &de)
	switch {
	case de != nil && de.Continue:
		res.Released = true
		if de.RetryAfter > 0 {
			res.NextAttemptAt = r.cfg.Now().Add(de.RetryAfter)
		}
		r.continued.Add(1)
		log.InfoContext(ctx, "delivery goes on later", "progress", err.Error(), "next_attempt_at", res.NextAttemptAt)
		return res, ""
	case de != nil && de.Disable:
		res.Dead = true
		log.ErrorContext(ctx, "destination is gone", "err", err)
		return res, err.Error()
	case de != nil && de.Dead:
		res.Dead = true
	case rec.Attempts >= r.cfg.MaxAttempts:
		res.Dead = true
		res.Error = fmt.Sprintf("gave up after %d attempts (relay.max_attempts): %s", rec.Attempts, err)
	case de != nil && de.RetryAfter > 0:
		res.NextAttemptAt = r.cfg.Now().Add(de.RetryAfter)
	default:
		res.NextAttemptAt = r.cfg.Now().Add(r.backoff.After(rec.Attempts))
	}
	if res.Dead {
		log.ErrorContext(ctx, "event is dead", "err", res.Error)
	} else {
		log.WarnContext(ctx, "delivery failed, will retry", "err", err, "next_attempt_at", res.NextAttemptAt)
	}
	return res, ""
}
