package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ordersync/ordersync/internal/eventually"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/testdb"
)

// databaseClock is the database's clock_timestamp().
func databaseClock(t *testing.T, db *DB) time.Time {
	t.Helper()
	var now time.Time
	if err := db.Pool().QueryRow(context.Background(), `SELECT clock_timestamp()`).Scan(&now); err != nil {
		t.Fatal(err)
	}
	return now.UTC()
}

// skewedStore is a second replica on url whose process clock runs skew ahead; with
// stepped, the clock steps ahead only once Open has measured it, and the store never
// measures it again: its DB.Now is then skew ahead too, and only the database's own
// clock in SQL keeps its judgement right.
func skewedStore(t *testing.T, url string, takeover, skew time.Duration, stepped bool) *DB {
	var ahead atomic.Int64
	cfg := Config{URL: url, TakeoverAfter: takeover,
		ProcessClock: func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) }}
	if stepped {
		cfg.ClockCheckInterval = -1
	} else {
		ahead.Store(int64(skew))
	}
	db := newDB(t, cfg)
	ahead.Store(int64(skew))
	return db
}

// Two replicas share one database; one's clock runs ahead (2 s, 5 min) of the
// database's by more than the settle time (1.5 s). An earlier attempt that may still
// be at work in 1C — left open by the honest replica, or settled by its Finish until
// its now + 1.5 s — must not be taken over by the skewed one, nor its verification
// claimed, until that time has passed on the database's clock. Also when the skewed
// clock stepped ahead after the store measured it (its correction is stale).
func TestSkewedReplicaWaitsOnTheDatabaseClock(t *testing.T) {
	t.Parallel()
	const settle = 1500 * time.Millisecond
	for _, skew := range []time.Duration{2 * time.Second, 5 * time.Minute} {
		for _, stepped := range []bool{false, true} {
			for _, how := range []string{"open attempt", "settle_until", "verify_at"} {
				name := fmt.Sprintf("%s/%s ahead", how, skew)
				if stepped {
					name += ", stepped after the measurement"
				}
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					testSkewedReplica(t, how, settle, skew, stepped)
				})
			}
		}
	}
}

func testSkewedReplica(t *testing.T, how string, settle, skew time.Duration, stepped bool) {
	ctx := context.Background()
	url := testdb.URL(t)
	honest := newDB(t, Config{URL: url, TakeoverAfter: settle})
	skewed := skewedStore(t, url, settle, skew, stepped)
	honestNow := honest.Now

	key := "site:order:skew:create"
	if _, err := honest.journalStore().Register(ctx, testOp(key)); err != nil {
		t.Fatal(err)
	}
	c, err := honest.journalStore().ClaimKey(ctx, key, "honest")
	if err != nil {
		t.Fatal(err)
	}
	var until time.Time
	switch how {
	case "open attempt":
		// The honest worker's session dies with its attempt open (its POST may
		// still be at work in 1C).
		var started time.Time
		if err := honest.Pool().QueryRow(ctx, `SELECT started_at FROM operation_attempts
			WHERE operation_key = $1 AND finished_at IS NULL`, key).Scan(&started); err != nil {
			t.Fatal(err)
		}
		if err := c.Release(ctx); err != nil {
			t.Fatal(err)
		}
		until = started.UTC().Add(settle)
	case "settle_until":
		// 1C did not answer the POST: the create may be at work until settle.
		now := honestNow()
		until = now.Add(settle).UTC().Truncate(time.Microsecond)
		if err := c.Finish(ctx, journal.Finish{Status: journal.StatusPending, Class: journal.ClassUnknown,
			Error: "timeout", SettleUntil: until, NextAttemptAt: now}); err != nil {
			t.Fatal(err)
		}
	case "verify_at":
		now := honestNow()
		until = now.Add(settle).UTC().Truncate(time.Microsecond)
		if err := c.Finish(ctx, journal.Finish{Status: journal.StatusDone, Result: &journal.Result{Ref: "r"},
			VerifyAt: until}); err != nil {
			t.Fatal(err)
		}
	}

	// The skewed replica tries, ClaimDue and ClaimKey in turn (ClaimVerification for
	// verify_at), until it gets the operation: never before until on the database's
	// clock.
	j := skewed.journalStore()
	i := -1
	eventually.True(t, "the skewed replica to get "+key, func() bool {
		i++
		var (
			got     bool
			started time.Time
			err     error
			what    string
		)
		switch {
		case how == "verify_at":
			what = "ClaimVerification"
			var op journal.Operation
			if op, err = j.ClaimVerification(ctx, time.Minute); err == nil {
				got = true
				if op.Key != key {
					t.Fatalf("verification of %s, want %s", op.Key, key)
				}
			} else if !errors.Is(err, journal.ErrNothingDue) {
				t.Fatalf("%s: got %v, want %v", what, err, journal.ErrNothingDue)
			}
		case i%2 == 0:
			what = "ClaimDue"
			var cl journal.Claim
			if cl, err = j.ClaimDue(ctx, "skewed"); err == nil {
				got, started = true, cl.Operation().AttemptStartedAt
				defer cl.Release(ctx)
			} else if !errors.Is(err, journal.ErrNothingDue) {
				t.Fatalf("%s: got %v, want %v", what, err, journal.ErrNothingDue)
			}
		default:
			what = "ClaimKey"
			var cl journal.Claim
			if cl, err = j.ClaimKey(ctx, key, "skewed"); err == nil {
				got, started = true, cl.Operation().AttemptStartedAt
				defer cl.Release(ctx)
			} else {
				var ue *journal.UnsettledError
				if !errors.As(err, &ue) {
					t.Fatalf("%s: got %v, want a *journal.UnsettledError", what, err)
				}
				if !ue.Until.Equal(until) {
					t.Fatalf("%s: unsettled until %s, want %s", what, ue.Until, until)
				}
			}
		}
		after := databaseClock(t, honest)
		if !got {
			return false
		}
		if after.Before(until) {
			t.Fatalf("the replica whose clock runs %s ahead got %s by %s by %s on the database's clock, "+
				"%s before the earlier attempt settled at %s", skew, key, what, after, until.Sub(after), until)
		}
		if how != "verify_at" && started.Before(until) {
			t.Fatalf("%s: the attempt started at %s, before the earlier one settled at %s", what, started, until)
		}
		t.Logf("got by %s at %s on the database's clock, %s after it settled", what, after, after.Sub(until))
		return true
	})
}

// A store whose process clock runs 5 minutes ahead tells the database's time, and
// says by how much the two differ (database minus process).
func TestNowIsTheDatabaseClock(t *testing.T) {
	t.Parallel()
	const skew = 5 * time.Minute
	db := newDB(t, Config{ProcessClock: func() time.Time { return time.Now().Add(skew) }})
	if off := db.ClockOffset(); (off + skew).Abs() > time.Second {
		t.Fatalf("clock offset: got %s, want about %s", off, -skew)
	}
	before := db.Now()
	at := databaseClock(t, db)
	after := db.Now()
	if at.Before(before.Add(-time.Second)) || at.After(after.Add(time.Second)) {
		t.Fatalf("DB.Now: %s … %s, the database's clock_timestamp() %s between them: more than a second apart",
			before, after, at)
	}
	if got := db.nowUTC(); got.Sub(at).Abs() > time.Second || got.Location() != time.UTC {
		t.Fatalf("nowUTC: got %s, the database says %s", got, at)
	}
	// What the store writes is on that clock too.
	r, err := db.journalStore().Register(context.Background(), testOp("site:order:now:create"))
	if err != nil {
		t.Fatal(err)
	}
	if d := r.Operation.CreatedAt.Sub(at); d.Abs() > 2*time.Second {
		t.Fatalf("created_at %s is %s off the database's clock", r.Operation.CreatedAt, d)
	}
}

// The difference is measured again every ClockCheckInterval: a process clock that
// steps is caught up with, WatchClock hears each measurement, and Close ends the
// measuring goroutine.
func TestClockIsMeasuredAgain(t *testing.T) {
	t.Parallel()
	var ahead atomic.Int64
	db, err := Open(context.Background(), Config{URL: testdb.URL(t), ClockCheckInterval: 20 * time.Millisecond,
		ProcessClock: func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) }})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if off := db.ClockOffset(); off.Abs() > time.Second {
		t.Fatalf("clock offset of an honest clock: %s", off)
	}
	heard := make(chan time.Duration, 1000)
	var calls atomic.Int64
	db.WatchClock(func(off time.Duration) {
		calls.Add(1)
		select {
		case heard <- off:
		default:
		}
	})
	if off := <-heard; off.Abs() > time.Second {
		t.Fatalf("WatchClock's first call: %s, want the last offset (about 0)", off)
	}
	ahead.Store(int64(time.Hour))
	deadline := time.After(30 * time.Second)
	for {
		select {
		case off := <-heard:
			if (off + time.Hour).Abs() > time.Second {
				continue // measured before the step
			}
		case <-deadline:
			t.Fatalf("the step of an hour was not measured: offset %s", db.ClockOffset())
		}
		break
	}
	if off := db.ClockOffset(); (off + time.Hour).Abs() > time.Second {
		t.Fatalf("ClockOffset after the step: %s, want about -1h", off)
	}
	if d := db.Now().Sub(databaseClock(t, db)); d.Abs() > time.Second {
		t.Fatalf("DB.Now is %s off the database's clock after the step was measured", d)
	}
	db.Close()
	n := calls.Load()
	time.Sleep(100 * time.Millisecond) // five intervals: a measurement would have been heard
	if got := calls.Load(); got != n {
		t.Fatalf("WatchClock heard %d measurements after Close", got-n)
	}
}

func TestClockConfig(t *testing.T) {
	t.Parallel()
	_, err := Open(context.Background(), Config{URL: testdb.BaseURL(), Now: time.Now, ProcessClock: time.Now})
	if err == nil {
		t.Fatal("Now and ProcessClock both set: got nil, want an error")
	}
	// An injected clock is used as is: no offset, and WatchClock hears 0 once.
	fixed := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	db := newDB(t, Config{Now: func() time.Time { return fixed }})
	if !db.Now().Equal(fixed) || db.ClockOffset() != 0 {
		t.Fatalf("injected clock: Now %s, offset %s", db.Now(), db.ClockOffset())
	}
	var heard []time.Duration
	db.WatchClock(func(off time.Duration) { heard = append(heard, off) })
	if len(heard) != 1 || heard[0] != 0 {
		t.Fatalf("WatchClock on an injected clock heard %v, want [0]", heard)
	}
}

// The measured difference is the value nearest zero of what the round trip allows:
// clocks that agree within it are taken to agree exactly.
func TestNearestZero(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	for _, c := range []struct{ lo, hi, want time.Duration }{
		{-3 * ms, 2 * ms, 0}, {0, 0, 0}, {2 * ms, 5 * ms, 2 * ms}, {-5 * ms, -2 * ms, -2 * ms},
		{-5*time.Minute - ms, -5 * time.Minute, -5 * time.Minute},
	} {
		if got := nearestZero(c.lo, c.hi); got != c.want {
			t.Errorf("nearestZero(%s, %s) = %s, want %s", c.lo, c.hi, got, c.want)
		}
	}
}
