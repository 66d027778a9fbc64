package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ordersync/ordersync/internal/eventually"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/sim/onecsim"
)

// service is the real ordersync binary running `run` (or another command, see
// startCommand) as a child process.
type service struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdout *lockedBuffer
	stderr *lockedBuffer
	done   chan struct{}
	err    error
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (e *env) startService(extra ...string) *service {
	e.t.Helper()
	return e.startCommand("", extra, "run")
}

// startCommand runs the ordersync binary with args in the background, stdin given,
// the env's environment plus extra.
func (e *env) startCommand(stdin string, extra []string, args ...string) *service {
	e.t.Helper()
	s := &service{t: e.t, stdout: &lockedBuffer{}, stderr: &lockedBuffer{}, done: make(chan struct{})}
	s.cmd = exec.Command(binary, args...)
	s.cmd.Env = append(append([]string{"PATH=/usr/bin:/bin"}, e.environ...), extra...)
	s.cmd.Stdin = strings.NewReader(stdin)
	s.cmd.Stdout = s.stdout
	s.cmd.Stderr = s.stderr
	if err := s.cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	go func() { s.err = s.cmd.Wait(); close(s.done) }()
	e.t.Cleanup(func() {
		select {
		case <-s.done:
		default:
			s.cmd.Process.Kill()
			<-s.done
		}
	})
	return s
}

func (s *service) signal(sig syscall.Signal) { s.cmd.Process.Signal(sig) }

func (s *service) wait(within time.Duration) int {
	s.t.Helper()
	select {
	case <-s.done:
		return s.cmd.ProcessState.ExitCode()
	case <-time.After(within):
		s.t.Fatalf("ordersync did not exit within %s; its log:\n%s", within, s.stderr.String())
		return -1
	}
}

func countStatus(t *testing.T, store journal.Store, st journal.Status) int {
	t.Helper()
	ops, err := store.List(context.Background(), journal.Filter{Status: st, Limit: 10000})
	if err != nil {
		t.Fatal(err)
	}
	return len(ops)
}

// TestKill9MidCallThenRestartCreatesEveryOrderOnce kills `ordersync run` with calls
// to 1C in flight, restarts it, stops it with SIGTERM while calls are in flight
// again, and restarts it once more: 1C must end with every order exactly once, the
// killed attempts visible as interrupted, and SIGTERM must exit 0 with nothing left
// open. On PostgreSQL and on the embedded SQLite file.
func TestKill9MidCallThenRestartCreatesEveryOrderOnce(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"postgres", "sqlite"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			testKill9(t, backend)
		})
	}
}

func testKill9(t *testing.T, backend string) {
	e := newEnvOn(t, backend, onecsim.Options{Latency: 150 * time.Millisecond}, true)
	// A killed attempt is taken over 3 × timeout + settle_time after it started.
	e.environ = append(e.environ, "ORDERSYNC_ONEC__MAX_CONCURRENCY=8", "ORDERSYNC_ONEC__TIMEOUT=2s", "ORDERSYNC_ONEC__SETTLE_TIME=3s")
	const n = 60
	var input strings.Builder
	for i := range n {
		fmt.Fprintln(&input, orderJSON(fmt.Sprintf("K-%03d", i), "SKU-1", "1", "100.00"))
	}
	store := e.store()

	// 1. Run, hand it the orders, and kill -9 once creates are in flight.
	svc := e.startService()
	eventually.True(t, "engine started in the log", func() bool { return strings.Contains(svc.stderr.String(), "engine started") })
	if _, stderr, code := e.cli(input.String(), "order", "import"); code != 0 {
		t.Fatalf("import: %d %s", code, stderr)
	}
	eventually.True(t, "10 creates in 1C", func() bool { return e.onec.Stats().Requests["create"] >= 10 })
	svc.signal(syscall.SIGKILL)
	svc.wait(10 * time.Second)
	open := len(openAttempts(t, store))
	if open == 0 {
		t.Fatalf("no attempt was in flight at the kill: the test did not test anything")
	}
	t.Logf("killed with %d attempts open; 1C holds %d orders", open, e.onec.Count())

	// 2. Restart; SIGTERM while calls are in flight: exit 0, every call finished.
	svc = e.startService()
	before := e.onec.Stats().Requests["create"]
	eventually.True(t, "before+8 creates in 1C", func() bool { return e.onec.Stats().Requests["create"] >= before+8 })
	svc.signal(syscall.SIGTERM)
	if code := svc.wait(30 * time.Second); code != 0 {
		t.Fatalf("SIGTERM: exit %d, want 0; log:\n%s", code, svc.stderr.String())
	}
	// Attempts left open by the kill stay open until their operation is claimed
	// again (only the claim's lock proves nobody else works on it); none that the
	// gracefully stopped service started may be open.
	// (A killed process's last attempt insert may even commit after its death, so
	// the attempts are told apart by the worker id, which carries the pid.)
	stopped := fmt.Sprintf(":%d/", svc.cmd.Process.Pid)
	for a, worker := range openAttempts(t, store) {
		if strings.Contains(worker, stopped) {
			t.Fatalf("%s by %s still open after a graceful stop", a, worker)
		}
	}

	// 3. Restart and let it finish.
	svc = e.startService()
	eventually.True(t, "every operation done", func() bool { return countStatus(t, store, journal.StatusDone) == n })
	svc.signal(syscall.SIGTERM)
	if code := svc.wait(30 * time.Second); code != 0 {
		t.Fatalf("final SIGTERM: exit %d", code)
	}

	if got := e.onec.Count(); got != n {
		t.Fatalf("1C holds %d orders, want %d", got, n)
	}
	interrupted := 0
	for i := range n {
		id := fmt.Sprintf("K-%03d", i)
		if c := e.onec.CountExternal("site:" + id); c != 1 {
			t.Fatalf("1C holds %d orders for %s, want 1", c, id)
		}
		out, _, code := e.cli("", "journal", "show", "site:order:"+id+":create", "--format", "json")
		if code != 0 {
			t.Fatalf("journal show: exit %d", code)
		}
		interrupted += strings.Count(out, `"outcome": "interrupted"`)
	}
	if interrupted < open {
		t.Fatalf("journal show lists %d interrupted attempts, want at least the %d open at the kill", interrupted, open)
	}
	if strings.Contains(svc.stderr.String(), simPassword) {
		t.Fatalf("the 1C password reached the service log")
	}
}

// openAttempts maps the attempts without an outcome, as "key#attempt", to their worker.
func openAttempts(t *testing.T, store journal.Store) map[string]string {
	t.Helper()
	open := map[string]string{}
	for _, op := range mustList(t, store) {
		d, err := store.Show(context.Background(), op.Key)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range d.History {
			if a.FinishedAt == nil {
				open[fmt.Sprintf("%s#%d", op.Key, a.Attempt)] = a.Worker
			}
		}
	}
	return open
}

func mustList(t *testing.T, store journal.Store) []journal.Operation {
	t.Helper()
	ops, err := store.List(context.Background(), journal.Filter{Limit: 10000})
	if err != nil {
		t.Fatal(err)
	}
	return ops
}

// TestASecondRunOnTheSameSQLiteFileRefuses: one process works an embedded file.
func TestASecondRunOnTheSameSQLiteFileRefuses(t *testing.T) {
	t.Parallel()
	e := newEnvOn(t, "sqlite", onecsim.Options{}, true)
	svc := e.startService()
	eventually.True(t, "engine started in the log", func() bool { return strings.Contains(svc.stderr.String(), "engine started") })
	_, stderr, code := e.cli("", "run")
	want := fmt.Sprintf("pid %d", svc.cmd.Process.Pid)
	if code != 1 || !strings.Contains(stderr, want) || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
		t.Fatalf("second run: exit %d stderr %q; want 1 and one line naming %s", code, stderr, want)
	}
	// Reads work beside the running service.
	if _, stderr, code := e.cli("", "journal", "list"); code != 0 {
		t.Fatalf("journal list beside the service: %d %s", code, stderr)
	}
	svc.signal(syscall.SIGTERM)
	if code := svc.wait(20 * time.Second); code != 0 {
		t.Fatalf("SIGTERM: exit %d", code)
	}
}

// TestCLIHandsWorkToTheServiceOnSQLite: import and resync beside a running service
// on an embedded file hand their operations to it; with none running they do the
// work themselves.
func TestCLIHandsWorkToTheServiceOnSQLite(t *testing.T) {
	t.Parallel()
	e := newEnvOn(t, "sqlite", onecsim.Options{KnownSKUs: []string{"SKU-1"}}, true)
	e.environ = append(e.environ, "ORDERSYNC_WORKER__POLL_INTERVAL=1h") // only a wake-up makes it claim at once

	// No service: import does the work itself.
	out, stderr, code := e.cli(orderJSON("S-1", "SKU-1", "1", "10"), "order", "import")
	if code != 0 || !strings.Contains(out, "site:order:S-1:create: done") || e.onec.CountExternal("site:S-1") != 1 {
		t.Fatalf("import without a service: exit %d out %q err %q; 1C holds %d", code, out, stderr, e.onec.CountExternal("site:S-1"))
	}

	svc := e.startService()
	eventually.True(t, "engine started in the log", func() bool { return strings.Contains(svc.stderr.String(), "engine started") })
	// Beside the service: import hands it over, and the service picks it up at once.
	if _, stderr, code := e.cli(orderJSON("S-2", "SKU-1", "1", "10"), "order", "import"); code != 0 || !strings.Contains(stderr, "handed") {
		t.Fatalf("import beside the service: exit %d err %q", code, stderr)
	}
	eventually.True(t, "site:S-2 in 1C", func() bool { return e.onec.CountExternal("site:S-2") == 1 })

	// A failed operation, resynced beside the service after its cause is fixed.
	e.cli(orderJSON("S-3", "SKU-NEW", "1", "10"), "order", "import")
	eventually.True(t, "S-3 failed", func() bool {
		op, err := e.store().Get(context.Background(), "site:order:S-3:create")
		return err == nil && op.Status == "failed"
	})
	e.onec.SetKnownSKUs([]string{"SKU-1", "SKU-NEW"})
	out, stderr, code = e.cli("", "resync", "site:order:S-3:create")
	if code != 0 || !strings.Contains(out, "done") || !strings.Contains(stderr, "handed") {
		t.Fatalf("resync beside the service: exit %d out %q err %q", code, out, stderr)
	}
	if e.onec.CountExternal("site:S-3") != 1 || e.onec.Count() != 3 {
		t.Fatalf("1C holds %v", externalIDs(e.onec.Orders()))
	}
	svc.signal(syscall.SIGTERM)
	svc.wait(20 * time.Second)
}

// TestSIGTERMExitsZeroAtAnyMoment stops `ordersync run` with SIGTERM at different
// moments — as soon as it started, during its start-up (before "engine started"),
// with 1C calls in flight, and once its work is done — many times, on both
// backends: the contract is exit 0 every time. The log of every run that exits
// otherwise is kept in the test output. ORDERSYNC_TEST_SIGTERM_ITERATIONS sets the
// number of runs per backend (default 16); each backend stops starting new runs
// after 45s.
func TestSIGTERMExitsZeroAtAnyMoment(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"postgres", "sqlite"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			testSIGTERM(t, backend)
		})
	}
}

func testSIGTERM(t *testing.T, backend string) {
	iterations := 16
	if s := os.Getenv("ORDERSYNC_TEST_SIGTERM_ITERATIONS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("ORDERSYNC_TEST_SIGTERM_ITERATIONS=%q: want a positive number", s)
		}
		iterations = n
	}
	e := newEnvOn(t, backend, onecsim.Options{OpLatency: map[string]time.Duration{"create": 120 * time.Millisecond, "find": 30 * time.Millisecond}}, true)
	store := e.store()
	// Orders are registered without 1C (no onec.base_url): only the service works them.
	register := append(append([]string{}, e.environ...), "ORDERSYNC_ONEC__BASE_URL=")
	const perRun = 6
	moments := []string{"at once", "during start-up", "calls in flight", "work done", "import beside the start-up"}
	deadline := time.Now().Add(45 * time.Second)
	total, runs, signalled := 0, 0, 0
	var failures []string
	for i := 0; i < iterations && time.Now().Before(deadline); i++ {
		moment := moments[i%len(moments)]
		var input strings.Builder
		for j := range perRun {
			fmt.Fprintln(&input, orderJSON(fmt.Sprintf("T-%03d-%d", i, j), "SKU-1", "1", "10"))
		}
		if moment != "import beside the start-up" {
			var out, errb bytes.Buffer
			if code := Main(context.Background(), []string{"order", "import"}, strings.NewReader(input.String()), &out, &errb, register); code != 0 {
				t.Fatalf("import: exit %d: %s", code, errb.String())
			}
		}
		total += perRun
		creates := e.onec.Stats().Requests["create"]
		allDone := func() bool { return countStatus(t, store, journal.StatusDone) == total }

		// round spreads the moments within a phase over the runs.
		round := i / len(moments)
		var svc *service
		if moment == "import beside the start-up" {
			// As a script does: start the service and import at once (which of the
			// two comes first is up to the scheduler), wait for the orders, stop it.
			imported := make(chan string, 1)
			go func() {
				var out, errb bytes.Buffer
				code := Main(context.Background(), []string{"order", "import"}, strings.NewReader(input.String()), &out, &errb, e.environ)
				imported <- fmt.Sprintf("exit %d: %s%s", code, out.String(), errb.String())
			}()
			time.Sleep(time.Duration(round%5) * 2 * time.Millisecond) // the start, 0-8ms after the import's
			svc = e.startService()
			if res := <-imported; !strings.HasPrefix(res, "exit 0") {
				t.Fatalf("import beside the service: %s", res)
			}
		} else {
			svc = e.startService()
		}
		switch moment {
		case "at once":
			// Anywhere from before the runtime has installed its handler to the
			// first steps of run.
			time.Sleep(time.Duration(round%10) * 2 * time.Millisecond)
		case "during start-up":
			eventually.True(t, "the service's first log line", func() bool { return svc.stderr.String() != "" || svc.exited() })
			time.Sleep(time.Duration(round%4) * time.Millisecond) // 0-3ms into the start-up
		case "calls in flight":
			eventually.True(t, "a create in flight", func() bool { return e.onec.Stats().Requests["create"] > creates || svc.exited() })
		case "work done", "import beside the start-up":
			eventually.True(t, "the run's orders done", func() bool { return allDone() || svc.exited() })
		}
		started := strings.Contains(svc.stderr.String(), "engine started")
		linesAtSignal := strings.Count(svc.stderr.String(), "\n")
		signalledAt := time.Now()
		svc.signal(syscall.SIGTERM)
		runs++
		code := svc.wait(60 * time.Second)
		t.Logf("run %d (%s): exit %d %s after the signal, %d log lines before it", i, moment, code, time.Since(signalledAt).Round(time.Millisecond), linesAtSignal)
		log := svc.stderr.String()
		ws, _ := svc.cmd.ProcessState.Sys().(syscall.WaitStatus)
		switch {
		case code == 0:
		case ws.Signaled() && ws.Signal() == syscall.SIGTERM && log == "":
			// Killed by the signal's default action: it came before main had
			// installed its handler (after that, SIGTERM cannot kill it).
			signalled++
		default:
			failures = append(failures, fmt.Sprintf("run %d (%s, engine started %v): %s; its log:\n%s", i, moment, started, svc.cmd.ProcessState, log))
		}
	}
	t.Logf("%s: %d runs, %d exited non-zero, %d ended by SIGTERM before main", backend, runs, len(failures), signalled)
	for _, f := range failures {
		t.Errorf("SIGTERM did not exit 0: %s", f)
	}
	if len(failures) > 0 {
		return
	}
	// Whatever the moments, every order is created once in the end.
	svc := e.startService()
	eventually.True(t, "engine started in the log", func() bool { return strings.Contains(svc.stderr.String(), "engine started") })
	eventually.Value(t, fmt.Sprintf("all %d operations done", total), func() (int, bool) {
		n := countStatus(t, store, journal.StatusDone)
		return n, n == total || svc.exited()
	})
	if n := countStatus(t, store, journal.StatusDone); n != total {
		t.Fatalf("%d of %d operations done; log:\n%s", n, total, svc.stderr.String())
	}
	svc.signal(syscall.SIGTERM)
	if code := svc.wait(30 * time.Second); code != 0 {
		t.Fatalf("final SIGTERM: exit %d; log:\n%s", code, svc.stderr.String())
	}
	if got := e.onec.Count(); got != total {
		t.Fatalf("1C holds %d orders, want %d", got, total)
	}
	for _, o := range e.onec.Orders() {
		if c := e.onec.CountExternal(o.ExternalID); c != 1 {
			t.Fatalf("1C holds %d orders for %s, want 1", c, o.ExternalID)
		}
	}
}

// exited reports whether the process has ended.
func (s *service) exited() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}
