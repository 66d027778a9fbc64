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

func TestRetryDoublesJittersAndCaps(t *testing.T) {
	t.Parallel()
	const base, ceiling = 100 * time.Millisecond, 5 * time.Second
	for n, want := range map[int]time.Duration{1: base, 2: 2 * base, 6: 32 * base, 7: ceiling, 200: ceiling} {
		if got := Retry(base, ceiling, n, 0); got != want {
			t.Errorf("Retry(%d) without jitter = %s, want %s", n, got, want)
		}
	}
	seen := map[time.Duration]bool{}
	for range 500 {
		d := Retry(base, ceiling, 3, 20)
		if d < 4*base*81/100 || d > 4*base*120/100 {
			t.Fatalf("Retry(3) = %s, outside 400ms -19%%/+20%%", d)
		}
		seen[d] = true
		// 6.4s less a fifth is still beyond the cap.
		if d := Retry(base, ceiling, 7, 20); d != ceiling {
			t.Fatalf("Retry(7) = %s, want the ceiling %s", d, ceiling)
		}
	}
	if len(seen) < 10 {
		t.Fatalf("%d distinct waits in 500 draws: no jitter", len(seen))
	}
}
