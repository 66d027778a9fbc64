package postgres

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// The store's clock. Replicas share one database but not one clock: a replica whose
// clock runs ahead by more than onec.settle_time would judge an attempt another
// replica has just opened old enough to take over, and create the order twice. So,
// unless Config.Now injects a clock, every time the store reckons with is the
// database's:
//
//   - a claim compares settle_until and its open attempt's start (plus
//     TakeoverAfter) with the server's clock_timestamp() taken under the row lock,
//     and stamps its attempt with that same time (claim.go);
//   - a verification lease and the outbox's leases are reckoned on now() in SQL
//     (verify.go, outbox.go);
//   - every other time — what the store writes (updated_at, next_attempt_at, …) and
//     DB.Now, which `ordersync run` gives the engine for its settle, verification and
//     retry times and for a cancel's "is the create settled" — is the process's
//     clock corrected by the difference measured with SELECT clock_timestamp() at
//     Open and every ClockCheckInterval after (measureClock).

// clockSample is one measurement: the difference between the database's clock and
// the process's.
type clockSample struct {
	offset time.Duration // database minus process
}

// dbClock is the last measurement, the re-measuring goroutine and who listens.
type dbClock struct {
	last   atomic.Pointer[clockSample]
	cancel context.CancelFunc
	done   chan struct{} // closed when the goroutine has ended; nil when none runs

	mu       sync.Mutex
	watchers []func(time.Duration)
}

// clockQueryTimeout bounds one measurement after Open.
const clockQueryTimeout = 10 * time.Second

// Now is the store's clock: Config.Now when set; otherwise the database's, as the
// process's clock (Config.ProcessClock) plus the last measured ClockOffset. A step of
// the process's clock shows in Now until the next measurement (ClockCheckInterval);
// claims and verification leases, which read the server's clock in SQL, do not
// depend on it.
func (db *DB) Now() time.Time {
	if db.injectedClock {
		return db.cfg.Now()
	}
	return db.cfg.ProcessClock().Add(db.clock.last.Load().offset)
}

// ClockOffset is the last measured difference between the database's clock and the
// process's: positive when the process's clock is behind. 0 when Config.Now is set.
func (db *DB) ClockOffset() time.Duration {
	if db.injectedClock {
		return 0
	}
	return db.clock.last.Load().offset
}

// WatchClock calls f with the last measured ClockOffset at once, and again after each
// later measurement (from the store's goroutine, which f must not hold up) until
// Close. With Config.Now set it is called once, with 0.
func (db *DB) WatchClock(f func(offset time.Duration)) {
	if db.injectedClock {
		f(0)
		return
	}
	db.clock.mu.Lock()
	defer db.clock.mu.Unlock()
	db.clock.watchers = append(db.clock.watchers, f)
	f(db.clock.last.Load().offset)
}

// startClock measures the database's clock and, unless the clock is injected or
// ClockCheckInterval is negative, starts the goroutine that measures it again.
func (db *DB) startClock(ctx context.Context) error {
	if db.injectedClock {
		return nil
	}
	s, err := db.measureClock(ctx)
	if err != nil {
		return err
	}
	db.clock.last.Store(&s)
	if db.cfg.ClockCheckInterval < 0 {
		return nil
	}
	bg, cancel := context.WithCancel(context.WithoutCancel(ctx))
	db.clock.cancel, db.clock.done = cancel, make(chan struct{})
	go db.remeasureClock(bg, db.cfg.ClockCheckInterval)
	return nil
}

// stopClock ends the re-measuring goroutine and waits for it. Safe twice.
func (db *DB) stopClock() {
	if db.clock.done == nil {
		return
	}
	db.clock.cancel()
	<-db.clock.done
}

func (db *DB) remeasureClock(ctx context.Context, every time.Duration) {
	defer close(db.clock.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		mctx, cancel := context.WithTimeout(ctx, clockQueryTimeout)
		s, err := db.measureClock(mctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			db.log.Info("postgres: cannot measure the database's clock; keeping the last difference",
				"target", db.target, "clock_offset", db.ClockOffset().String(), "err", err)
			continue
		}
		db.clock.last.Store(&s)
		db.clock.mu.Lock()
		for _, f := range db.clock.watchers {
			f(s.offset)
		}
		db.clock.mu.Unlock()
	}
}

// measureClock asks the server for clock_timestamp() in one round trip (the simple
// protocol: no statement to prepare first) on a connection acquired beforehand.
//
// The server read its clock between the process's sending and its reading the
// answer, so the difference lies between at-answered and at-sent (plus the
// microsecond the server truncates). The measurement takes the value of that interval
// nearest zero: clocks that agree within one round trip (one machine, or NTP on both)
// are taken to agree exactly — the round trip's midpoint would be off by half an
// uneven round trip, a scheduling delay on a loaded machine — and a difference beyond
// it is measured to within one round trip.
func (db *DB) measureClock(ctx context.Context) (clockSample, error) {
	conn, err := db.pool.Acquire(ctx)
	if err != nil {
		return clockSample{}, fmt.Errorf("measure the database's clock: %w", err)
	}
	defer conn.Release()
	var at time.Time
	sent := db.cfg.ProcessClock()
	err = conn.QueryRow(ctx, `SELECT clock_timestamp()`, pgx.QueryExecModeSimpleProtocol).Scan(&at)
	answered := db.cfg.ProcessClock()
	if err != nil {
		return clockSample{}, fmt.Errorf("measure the database's clock: %w", err)
	}
	return clockSample{offset: nearestZero(at.Sub(answered), at.Add(time.Microsecond).Sub(sent))}, nil
}

// nearestZero is the value of [lo, hi] nearest zero.
func nearestZero(lo, hi time.Duration) time.Duration {
	switch {
	case lo > 0:
		return lo
	case hi < 0:
		return hi
	}
	return 0
}
