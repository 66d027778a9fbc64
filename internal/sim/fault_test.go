package sim

import (
	"errors"
	"slices"
	"testing"
	"time"
)

func TestFaultsFireInOrderAndRunOut(t *testing.T) {
	t.Parallel()
	q := NewFaults(nil)
	q.Add(2, Fault{Op: "a", Status: 503})
	q.Add(1, Fault{Status: 429})
	q.Add(0, Fault{Status: 500}) // nothing
	on := func(op string) func(Fault) bool { return func(f Fault) bool { return f.Matches(op, "") } }
	var got []int
	for _, op := range []string{"b", "a", "a", "a"} {
		f, ok := q.Take(on(op))
		if !ok {
			got = append(got, 0)
			continue
		}
		got = append(got, f.Status)
	}
	if want := []int{429, 503, 503, 0}; !slices.Equal(got, want) {
		t.Fatalf("statuses %v, want %v", got, want)
	}
	if q.Pending() != 0 {
		t.Fatalf("pending %d, want 0", q.Pending())
	}
}

func TestFaultsAfterAndForever(t *testing.T) {
	t.Parallel()
	q := NewFaults(nil)
	q.Add(Forever, Fault{Status: 502, After: 2})
	all := func(Fault) bool { return true }
	for i := range 2 {
		if _, ok := q.Take(all); ok {
			t.Fatalf("request %d: fired before After ran out", i+1)
		}
	}
	for i := range 5 {
		if _, ok := q.Take(all); !ok {
			t.Fatalf("request %d: a Forever fault ran out", i+3)
		}
	}
	q.Clear()
	if _, ok := q.Take(all); ok {
		t.Fatal("fired after Clear")
	}
}

func TestFaultsCheck(t *testing.T) {
	t.Parallel()
	errOwn := errors.New("own rule")
	q := NewFaults(func(f Fault) error {
		if f.Status == 418 {
			return errOwn
		}
		return nil
	})
	for _, tt := range []struct {
		n   int
		f   Fault
		bad bool
	}{
		{1, Fault{Status: 503}, false},
		{-2, Fault{Status: 503}, true},
		{1, Fault{Status: 99}, true},
		{1, Fault{Status: 503, After: -1}, true},
		{1, Fault{Status: 429, RetryAfter: -time.Second}, true},
		{1, Fault{Status: 429, RetryAfter: RetryNow}, false},
		{1, Fault{Delay: -time.Second}, true},
		{1, Fault{Status: 418}, true},
	} {
		if err := q.Check(tt.n, tt.f); (err != nil) != tt.bad {
			t.Errorf("Check(%d, %+v) = %v, want an error: %t", tt.n, tt.f, err, tt.bad)
		}
	}
	defer func() {
		if recover() == nil {
			t.Fatal("Add queued a fault its check refuses")
		}
	}()
	q.Add(1, Fault{Status: 418})
}

func TestRetryAfterSeconds(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		d    time.Duration
		want string
		ok   bool
	}{
		{0, "", false},
		{RetryNow, "0", true},
		{time.Second, "1", true},
		{1500 * time.Millisecond, "2", true},
		{7 * time.Second, "7", true},
	} {
		got, ok := Fault{RetryAfter: tt.d}.RetryAfterSeconds()
		if got != tt.want || ok != tt.ok {
			t.Errorf("RetryAfter %s: %q %t, want %q %t", tt.d, got, ok, tt.want, tt.ok)
		}
	}
}
