// Package eventually is the tests' one way to wait for something another goroutine,
// process or server does: poll a condition until it holds, or fail the test after a
// bound generous enough for a busy two-core machine. A test waits on a condition the
// code makes true, never on a fixed sleep standing in for "the other side got there".
package eventually

import (
	"testing"
	"time"
)

// Within is how long True waits before it fails the test.
const Within = time.Minute

// True polls cond every few milliseconds until it returns true, and fails tb
// (naming what it waited for) if that takes longer than Within.
func True(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(Within)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("waited %s for %s", Within, what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
