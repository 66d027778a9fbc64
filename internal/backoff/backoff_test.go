package backoff

import (
	"testing"
	"time"
)

func TestAfterGrowsCapsAndJitters(t *testing.T) {
	t.Parallel()
	exact := Policy{Min: time.Second, Max: 10 * time.Second, Jitter: func(d time.Duration) time.Duration { return d }}
	for attempt, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 5: 10 * time.Second, 60: 10 * time.Second} {
		if got := exact.After(attempt); got != want {
			t.Errorf("After(%d) = %s, want %s", attempt, got, want)
		}
	}
	p := Policy{Min: time.Second, Max: 10 * time.Second}
	seen := map[time.Duration]bool{}
	for range 200 {
		d := p.After(3)
		if d < 2*time.Second || d > 4*time.Second {
			t.Fatalf("After(3) = %s, outside [2s, 4s]", d)
		}
		seen[d] = true
		if d := p.After(1); d < time.Second {
			t.Fatalf("After(1) = %s, below Min", d)
		}
	}
	if len(seen) < 10 {
		t.Fatalf("%d distinct delays in 200 draws: no jitter", len(seen))
	}
}
