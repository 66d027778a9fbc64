package sdnotify

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ordersync/ordersync/internal/eventually"
	"github.com/ordersync/ordersync/internal/outbox"
)

// inbox keeps every datagram a test's socket receives.
type inbox struct {
	mu  sync.Mutex
	got []string
}

func collect(t *testing.T, c *net.UnixConn) *inbox {
	t.Helper()
	in := &inbox{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 4096)
		for {
			n, err := c.Read(buf)
			if err != nil {
				return
			}
			in.mu.Lock()
			in.got = append(in.got, string(buf[:n]))
			in.mu.Unlock()
		}
	}()
	t.Cleanup(func() { c.Close(); <-done })
	return in
}

func (in *inbox) all() []string {
	in.mu.Lock()
	defer in.mu.Unlock()
	return append([]string(nil), in.got...)
}

// waitFor waits until a message received from index from on contains want, and
// returns its index.
func (in *inbox) waitFor(t *testing.T, from int, want string) int {
	t.Helper()
	return eventually.Value(t, fmt.Sprintf("a message with %q", want), func() (int, bool) {
		got := in.all()
		for i := from; i < len(got); i++ {
			if strings.Contains(got[i], want) {
				return i, true
			}
		}
		return -1, false
	})
}

// count is how many messages received from index from on contain want.
func (in *inbox) count(from int, want string) int {
	n := 0
	for _, m := range in.all()[from:] {
		if strings.Contains(m, want) {
			n++
		}
	}
	return n
}

func managerOn(t *testing.T, env map[string]string) (*Manager, *inbox) {
	t.Helper()
	name := filepath.Join(shortDir(t), "notify")
	in := collect(t, listen(t, name))
	env["NOTIFY_SOCKET"] = name
	sm := NewManager(func(k string) string { return env[k] }, 42, slog.New(slog.DiscardHandler))
	if !sm.Enabled() {
		t.Fatal("a Manager with NOTIFY_SOCKET is not enabled")
	}
	return sm, in
}

type fakeDB struct{ err func() error }

func (d fakeDB) SchemaStatus(context.Context) (int, int, error) { return 1, 1, d.err() }

type fakeOutbox struct {
	dests []outbox.DestinationStatus
	err   error
}

func (o fakeOutbox) Status(_ context.Context, struggling int) ([]outbox.DestinationStatus, error) {
	if struggling != 5 {
		return nil, fmt.Errorf("struggling %d, want 5", struggling)
	}
	return o.dests, o.err
}

func TestManagerWithoutSocketDoesNothing(t *testing.T) {
	sm := NewManager(func(string) string { return "" }, 42, slog.New(slog.DiscardHandler))
	if sm.Enabled() {
		t.Fatal("enabled without NOTIFY_SOCKET")
	}
	sm.MarkReady("x")
	sm.Status("x")
	sm.MarkStopping("x")
	ran := false
	if err := sm.ExtendWhile("x", func() error { ran = true; return errors.New("step") }); !ran || err == nil || err.Error() != "step" {
		t.Fatalf("ExtendWhile: ran %v, err %v", ran, err)
	}
	sm.Supervise(context.Background(), Supervised{})()
}

// TestManagerReadyOnceAndNothingAfterStopping: READY=1 is sent once, STOPPING=1
// once, and nothing after it.
func TestManagerReadyOnceAndNothingAfterStopping(t *testing.T) {
	sm, in := managerOn(t, map[string]string{})
	sm.MarkReady("ready; 1")
	sm.MarkReady("ready; 2")
	sm.Status("working")
	sm.MarkStopping("stopping")
	sm.MarkStopping("stopping again")
	sm.Status("after")
	sm.MarkReady("after")
	// Each message is written before its call returns; one of the test's own,
	// written after them, arrives after them: all of them are in when it is.
	n, err := New(sm.n.Socket())
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Send("X_TEST_END=1"); err != nil {
		t.Fatal(err)
	}
	end := in.waitFor(t, 0, "X_TEST_END=1")
	want := []string{"READY=1\nSTATUS=ready; 1\n", "STATUS=working\n", "STOPPING=1\nSTATUS=stopping\n"}
	if got := in.all()[:end]; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("received %q, want %q", got, want)
	}
}

func TestManagerExtendWhileAStepRuns(t *testing.T) {
	sm, in := managerOn(t, map[string]string{})
	err := sm.ExtendWhile("starting: opening the database", func() error {
		in.waitFor(t, 0, "EXTEND_TIMEOUT_USEC=30000000\nSTATUS=starting: opening the database\n")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestManagerSupervise: the status line carries the counts and the outbox; the
// watchdog pings while every check passes, and while one fails sends none and says
// why in STATUS=; an outbox that does not answer is "unknown".
func TestManagerSupervise(t *testing.T) {
	sm, in := managerOn(t, map[string]string{"WATCHDOG_USEC": "200000"})
	var mu sync.Mutex
	var loopErr error
	dests := []outbox.DestinationStatus{
		{Destination: "a", Pending: 2, InFlight: 1, Dead: 1, Lag: 2 * time.Second},
		{Destination: "b", Disabled: "410 Gone"},
	}
	stop := sm.Supervise(context.Background(), Supervised{
		DB: fakeDB{err: func() error { return nil }}, Outbox: fakeOutbox{dests: dests}, Struggling: 5,
		Alive:  []func() error{func() error { mu.Lock(); defer mu.Unlock(); return loopErr }},
		Counts: func() string { return "since start: 1 done" },
	})
	in.waitFor(t, 0, "STATUS=since start: 1 done; outbox: 3 pending, 1 dead, lag 2.0s, 1 destination(s) disabled\n")
	in.waitFor(t, 0, "WATCHDOG=1")

	mu.Lock()
	loopErr = errors.New("engine worker 1 is hung")
	mu.Unlock()
	from := in.waitFor(t, 0, "STATUS=UNHEALTHY, watchdog withheld for ")
	in.waitFor(t, from+1, ": engine worker 1 is hung | since start: 1 done; outbox: 3 pending")
	// Several intervals (100ms) pass with none: the watchdog's loop says why in
	// STATUS= at each (the status loop, every 5s, may add one of these).
	eventually.True(t, "five more intervals with the watchdog withheld", func() bool {
		return in.count(from, "STATUS=UNHEALTHY, watchdog withheld for ") >= 5
	})
	withheld := in.all()[from:]
	for _, m := range withheld {
		if strings.Contains(m, "WATCHDOG=1") {
			t.Fatalf("WATCHDOG=1 while a check failed: %q", withheld)
		}
	}

	mu.Lock()
	loopErr = nil
	mu.Unlock()
	again := in.waitFor(t, from, "WATCHDOG=1")
	in.waitFor(t, again, "STATUS=since start: 1 done; outbox")
	stop()

	sm, in = managerOn(t, map[string]string{})
	stop = sm.Supervise(context.Background(), Supervised{Outbox: fakeOutbox{err: errors.New("no\n  such table")}, Struggling: 5,
		Counts: func() string { return "c" }})
	in.waitFor(t, 0, "STATUS=c; outbox: unknown (no; such table)\n")
	stop()
}

func TestLagText(t *testing.T) {
	for d, want := range map[time.Duration]string{0: "0.0s", 400 * time.Millisecond: "0.4s", 123 * time.Second: "2m3s"} {
		if got := lagText(d); got != want {
			t.Errorf("lagText(%s) = %q, want %q", d, got, want)
		}
	}
}
