// Package eventually is the tests' one way to wait for something another goroutine,
// process or server does: poll a condition until it holds, or fail the test after a
// bound generous enough for a busy two-core machine. A test waits on a condition the
// code makes true, never on a fixed sleep standing in for "the other side got there".
package eventually

import (
	"testing"
	"time"
)

// Within is how long True and Value wait before they fail the test: as long as the
// longest wait the tests had bounded by hand (a command's run through injected
// faults, on a busy two-core machine). A wait that passes costs nothing for it; only
// a failing one waits it out.
const Within = 3 * time.Minute

// True polls cond every few milliseconds until it returns true, and fails tb
// (naming what it waited for) if that takes longer than Within.
func True(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	if !poll(cond) {
		tb.Fatalf("waited %s for %s", Within, what)
	}
}

// Value polls f as True polls its condition, until f reports ok, and returns the
// value f returned with it: for a wait whose caller needs what it waited for (the
// record that reached a status, the index of a message). When it fails tb, it shows
// the last value f returned.
func Value[T any](tb testing.TB, what string, f func() (T, bool)) T {
	tb.Helper()
	var v T
	if !poll(func() (ok bool) { v, ok = f(); return ok }) {
		tb.Fatalf("waited %s for %s; last: %+v", Within, what, v)
	}
	return v
}

func poll(cond func() bool) bool {
	deadline := time.Now().Add(Within)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(2 * time.Millisecond)
	}
	return true
}
