package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ordersync/ordersync/internal/eventually"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/sim/onecsim"
)

// TestKill9TwiceUnderLoadCreatesEveryOrderOnce kills `ordersync run` with SIGKILL
// twice while creates are in flight (restarting it in between), then lets a last
// run finish: 1C holds every order exactly once, every operation is done, no
// attempt is left open, and each attempt the kills cut short is visible as
// interrupted. On PostgreSQL and on the embedded SQLite file.
func TestKill9TwiceUnderLoadCreatesEveryOrderOnce(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"postgres", "sqlite"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			testKill9Twice(t, backend)
		})
	}
}

func testKill9Twice(t *testing.T, backend string) {
	e := newEnvOn(t, backend, onecsim.Options{OpLatency: map[string]time.Duration{"create": 200 * time.Millisecond, "find": 20 * time.Millisecond}}, true)
	// The service talks to 1C through a front that counts the creates in flight: the
	// kills must hit some.
	creating, front := postsInFlight(t, e, "/orders")
	// A killed attempt is taken over 3 × timeout + settle_time (9s) after it started.
	e.environ = append(e.environ, "ORDERSYNC_ONEC__BASE_URL="+front.URL+e.onec.Prefix(),
		"ORDERSYNC_ONEC__MAX_CONCURRENCY=8", "ORDERSYNC_ONEC__TIMEOUT=2s", "ORDERSYNC_ONEC__SETTLE_TIME=3s")
	const n = 64
	var input strings.Builder
	for i := range n {
		fmt.Fprintln(&input, orderJSON(fmt.Sprintf("KK-%03d", i), "SKU-1", "1", "100.00"))
	}
	store := e.store()

	// cutShort are the attempts open at a kill, "key#attempt", by the killed pid.
	cutShort := map[string]int{}
	for kill := 1; kill <= 2; kill++ {
		svc := e.startService()
		eventually.True(t, "engine started in the log, or the service gone", func() bool { return strings.Contains(svc.stderr.String(), "engine started") || svc.exited() })
		if svc.exited() {
			t.Fatalf("run %d ended before it started: %s; log:\n%s", kill, svc.cmd.ProcessState, svc.stderr.String())
		}
		if kill == 1 {
			if _, stderr, code := e.cli(input.String(), "order", "import"); code != 0 {
				t.Fatalf("import: %d %s", code, stderr)
			}
		}
		// Kill once some creates have been answered and others are in flight.
		before := e.onec.Stats().Requests["create"]
		eventually.True(t, "creates answered and in flight, or the service gone", func() bool {
			return (e.onec.Stats().Requests["create"] >= before+6 && creating.Load() >= 2) || svc.exited()
		})
		svc.signal(syscall.SIGKILL)
		svc.wait(10 * time.Second)
		if ws, _ := svc.cmd.ProcessState.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("run %d ended by itself before the kill: %s; log:\n%s", kill, svc.cmd.ProcessState, svc.stderr.String())
		}
		killed := fmt.Sprintf(":%d/", svc.cmd.Process.Pid)
		open := 0
		for a, worker := range openAttempts(t, store) {
			if strings.Contains(worker, killed) {
				cutShort[a] = svc.cmd.Process.Pid
				open++
			}
		}
		t.Logf("kill %d (pid %d): %d attempts of its open; 1C holds %d orders; %d operations done",
			kill, svc.cmd.Process.Pid, open, e.onec.Count(), countStatus(t, store, journal.StatusDone))
		if open == 0 {
			t.Fatalf("kill %d: no attempt of the killed process was open: the kill hit no create in flight", kill)
		}
	}

	// The last run: it takes over the cut-short attempts once they have settled and
	// finishes everything.
	svc := e.startService()
	eventually.Value(t, fmt.Sprintf("all %d operations done", n), func() (int, bool) {
		done := countStatus(t, store, journal.StatusDone)
		return done, done == n || svc.exited()
	})
	if countStatus(t, store, journal.StatusDone) != n || svc.exited() {
		t.Fatalf("%d of %d operations done (%d pending); log:\n%s", countStatus(t, store, journal.StatusDone), n,
			countStatus(t, store, journal.StatusPending), svc.stderr.String())
	}
	svc.signal(syscall.SIGTERM)
	if code := svc.wait(30 * time.Second); code != 0 {
		t.Fatalf("final SIGTERM: exit %d; log:\n%s", code, svc.stderr.String())
	}

	if got := e.onec.Count(); got != n {
		t.Errorf("1C holds %d orders, want %d", got, n)
	}
	for i := range n {
		id := fmt.Sprintf("site:KK-%03d", i)
		if c := e.onec.CountExternal(id); c != 1 {
			t.Errorf("1C holds %d orders for %s, want 1", c, id)
		}
	}
	if open := openAttempts(t, store); len(open) != 0 {
		t.Errorf("attempts still open after the last run: %v", open)
	}
	interrupted := map[string]bool{}
	closed := map[string]journal.Outcome{}
	for _, op := range mustList(t, store) {
		if op.Status != journal.StatusDone {
			t.Errorf("%s: %s, want done", op.Key, op.Status)
		}
		d, err := store.Show(context.Background(), op.Key)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range d.History {
			id := fmt.Sprintf("%s#%d", op.Key, a.Attempt)
			closed[id] = a.Outcome
			if a.Outcome == journal.OutcomeInterrupted {
				interrupted[id] = true
			}
		}
	}
	// An attempt open when the test looked after the kill is interrupted by the next
	// claim, unless the killed process's own verdict was already on the wire: the
	// server commits what a process sent before it died, sometimes after the test
	// looked. Either way it is closed, and most are interrupted.
	late := 0
	for a, pid := range cutShort {
		switch out := closed[a]; {
		case interrupted[a]:
		case out == journal.OutcomeDone || out == journal.OutcomeRetry || out == journal.OutcomeFailed:
			late++
			t.Logf("%s: the verdict pid %d sent before its kill committed after it (%s)", a, pid, out)
		default:
			t.Errorf("%s, cut short by the kill of pid %d, is neither interrupted nor closed by its own verdict (%q)", a, pid, out)
		}
	}
	if len(interrupted) == 0 || late*2 > len(cutShort) {
		t.Errorf("%d of %d attempts cut short are interrupted: the kills cut nothing", len(cutShort)-late, len(cutShort))
	}
	// And journal show says so, as an operator reads it, of an attempt the kill
	// interrupted (not of one its own verdict closed).
	for a := range cutShort {
		if !interrupted[a] {
			continue
		}
		key := a[:strings.LastIndex(a, "#")]
		out, _, code := e.cli("", "journal", "show", key, "--format", "json")
		if code != 0 || !strings.Contains(out, `"outcome": "interrupted"`) {
			t.Errorf("journal show %s: exit %d, no interrupted attempt:\n%s", key, code, out)
		}
		break
	}
	t.Logf("%d attempts cut short by two kills, %d interrupted (%d closed by a verdict already sent); 1C holds %d orders, each once",
		len(cutShort), len(cutShort)-late, late, e.onec.Count())
}

// postsInFlight puts a front before the env's 1C simulator that counts the POSTs to
// a path ending in suffix while 1C works on them, so that a test can kill the
// service while some are in flight. The service is to be pointed at front.
func postsInFlight(t *testing.T, e *env, suffix string) (*atomic.Int64, *httptest.Server) {
	t.Helper()
	var n atomic.Int64
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, suffix) {
			n.Add(1)
			defer n.Add(-1)
		}
		e.onec.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	return &n, front
}
