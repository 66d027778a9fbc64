// Package backoff computes every retry delay of ordersync: exponential from a
// minimum, capped, with jitter. Policy is the delay of a try that is scheduled for
// later, the engine's (1C attempts), the relay's (deliveries) and the first
// connection's to the database, and also the wait between the tries of a
// marketplace read (resty runs those tries and asks Policy for each wait). Retry is
// the wait between the tries of a 1C GET, which its client runs itself.
package backoff

import (
	"math/rand/v2"
	"time"
)

// Policy is an exponential backoff between Min and Max.
type Policy struct {
	Min, Max time.Duration
	// Jitter picks the actual delay for a nominal one; nil means Equal.
	Jitter func(d time.Duration) time.Duration
}

// Equal is "equal jitter": a delay drawn uniformly from [d/2, d].
func Equal(d time.Duration) time.Duration { return d/2 + rand.N(d/2+1) }

// After is the delay after the given failed attempt (1-based): Min doubled per
// attempt, capped at Max, jittered, never below Min.
func (p Policy) After(attempt int) time.Duration {
	d := p.Min
	for i := 1; i < attempt && d < p.Max; i++ {
		d *= 2
	}
	d = min(d, p.Max)
	jitter := p.Jitter
	if jitter == nil {
		jitter = Equal
	}
	return max(jitter(d), p.Min)
}

// Retry is the wait before retry n (1-based) of a call tried again within itself:
// base doubled per retry, off by up to pct percent (below 50) either way, capped
// at ceiling.
func Retry(base, ceiling time.Duration, n, pct int) time.Duration {
	d := base
	// Doubling stops once d is so far past the ceiling that no jitter brings it
	// back below.
	for i := 1; i < n && d < 2*ceiling; i++ {
		d *= 2
	}
	if pct > 0 {
		off := rand.Int64N(int64(pct)*2) - int64(pct) // in [-pct, pct)
		d = time.Duration(float64(d) * (1 - float64(off)/100))
	}
	return min(d, ceiling)
}
