// Package backoff computes retry delays: exponential from a minimum, capped, with
// jitter. The engine (1C attempts) and the relay (deliveries) share it.
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
