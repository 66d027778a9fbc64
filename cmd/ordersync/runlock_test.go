package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ordersync/ordersync/internal/eventually"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/sim/onecsim"
	"github.com/ordersync/ordersync/internal/store/sqlite"
)

// slowCreates is a 1C whose creates take long enough for a second command to start
// while the first one holds the run lock.
var slowCreates = onecsim.Options{OpLatency: map[string]time.Duration{"create": 1500 * time.Millisecond, "find": 0, "ping": 0}}

// registerOnly registers orders in the journal without carrying them out (no 1C).
func (e *env) registerOnly(input string) {
	e.t.Helper()
	env := e.environ
	e.environ = append(append([]string{}, env...), "ORDERSYNC_ONEC__BASE_URL=")
	defer func() { e.environ = env }()
	if _, stderr, code := e.cli(input, "order", "import"); code != 0 {
		e.t.Fatalf("register: exit %d: %s", code, stderr)
	}
}

// waitForHolder waits until the command p holds the embedded database's run lock
// under its role and has asked 1C for its order (the find-th find): its create is in
// flight.
func (e *env) waitForHolder(p *service, role string, find int) {
	e.t.Helper()
	want := sqlite.Holder{PID: p.cmd.Process.Pid, Role: role}
	eventually.True(e.t, "the run lock held by the process", func() bool {
		h, held := sqlite.RunLockHolder(filepath.Join(e.stateDir, "ordersync.db"))
		return (held && h == want && e.onec.Stats().Requests["find"] >= find) || p.exited()
	})
	if p.exited() {
		e.t.Fatalf("%s ended before its create: %s\n%s", role, p.cmd.ProcessState, p.stderr.String())
	}
}

// TestACLICommandWaitsForAnotherCLICommandOnSQLite: on an embedded file, a CLI
// command that finds another CLI command holding the run lock (doing its own work
// against a slow 1C) waits for it and then does its own work — it never hands its
// operations to it as if it were `ordersync run`.
func TestACLICommandWaitsForAnotherCLICommandOnSQLite(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ first, second string }{
		{"order import", "resync"},
		{"resync", "order import"},
	} {
		t.Run(strings.ReplaceAll(c.first, " ", "-")+"-then-"+strings.ReplaceAll(c.second, " ", "-"), func(t *testing.T) {
			t.Parallel()
			e := newEnvOn(t, "sqlite", slowCreates, true)
			one, two := orderJSON("L-1", "SKU-1", "1", "10"), orderJSON("L-2", "SKU-1", "1", "10")
			key1, key2 := "site:order:L-1:create", "site:order:L-2:create"

			// The first command works L-1 itself, holding the run lock for the slow create.
			var first *service
			if c.first == "order import" {
				first = e.startCommand(one, nil, "order", "import")
			} else {
				e.registerOnly(one)
				first = e.startCommand("", nil, "resync", key1)
			}
			e.waitForHolder(first, c.first, 1)

			// The second one, meanwhile.
			var out, stderr string
			var code int
			if c.second == "order import" {
				out, stderr, code = e.cli(two, "order", "import")
			} else {
				e.registerOnly(two)
				out, stderr, code = e.cli("", "resync", key2)
			}
			t.Logf("second command (%s): exit %d\nstdout: %s\nstderr: %s", c.second, code, out, stderr)
			waitingFor := fmt.Sprintf("waiting for `ordersync %s` (pid %d)", c.first, first.cmd.Process.Pid)
			if strings.Contains(stderr, "handed") || !strings.Contains(stderr, waitingFor) {
				t.Errorf("second command's stderr %q: want %q and no hand-off to a CLI command", stderr, waitingFor)
			}
			if code != 0 || !strings.Contains(out, key2+": done") {
				t.Errorf("second command: exit %d stdout %q; want 0 and %s done", code, out, key2)
			}

			if code := first.wait(30 * time.Second); code != 0 {
				t.Errorf("first command (%s): exit %d, want 0; stderr:\n%s", c.first, code, first.stderr.String())
			}
			store := e.store()
			for _, key := range []string{key1, key2} {
				op, err := store.Get(t.Context(), key)
				if err != nil || op.Status != journal.StatusDone {
					t.Errorf("%s: %s %v, want done", key, op.Status, err)
				}
			}
			for _, id := range []string{"site:L-1", "site:L-2"} {
				if n := e.onec.CountExternal(id); n != 1 {
					t.Errorf("1C holds %d orders for %s, want 1", n, id)
				}
			}
		})
	}
}

// TestRunWaitsForACLICommandHoldingTheRunLock: `ordersync run` started while a CLI
// command does its own work on the embedded file waits for it, says so, and starts
// once it is done; SIGTERM while it waits exits 0.
func TestRunWaitsForACLICommandHoldingTheRunLock(t *testing.T) {
	t.Parallel()
	e := newEnvOn(t, "sqlite", slowCreates, true)
	for round, stopWhileWaiting := range []bool{false, true} {
		id := fmt.Sprintf("W-%d", round)
		imp := e.startCommand(orderJSON(id, "SKU-1", "1", "10"), nil, "order", "import")
		e.waitForHolder(imp, "order import", round+1)
		svc := e.startService()
		waiting := fmt.Sprintf("waiting for `ordersync order import` (pid %d)", imp.cmd.Process.Pid)
		eventually.True(t, waiting+" in the log, or a process gone", func() bool { return strings.Contains(svc.stderr.String(), waiting) || svc.exited() || imp.exited() })
		if !strings.Contains(svc.stderr.String(), waiting) {
			t.Fatalf("run beside a CLI command: its log lacks %q:\n%s", waiting, svc.stderr.String())
		}
		if stopWhileWaiting {
			svc.signal(syscall.SIGTERM)
			if code := svc.wait(20 * time.Second); code != 0 {
				t.Fatalf("SIGTERM while waiting for the run lock: exit %d, want 0; log:\n%s", code, svc.stderr.String())
			}
		}
		if code := imp.wait(30 * time.Second); code != 0 || !strings.Contains(imp.stdout.String(), "done") {
			t.Fatalf("import: exit %d stdout %q stderr %q", code, imp.stdout.String(), imp.stderr.String())
		}
		if stopWhileWaiting {
			break
		}
		eventually.True(t, "engine started in the log, or the service gone", func() bool { return strings.Contains(svc.stderr.String(), "engine started") || svc.exited() })
		svc.signal(syscall.SIGTERM)
		if code := svc.wait(20 * time.Second); code != 0 {
			t.Fatalf("SIGTERM: exit %d, want 0; log:\n%s", code, svc.stderr.String())
		}
	}
	if e.onec.CountExternal("site:W-0") != 1 || e.onec.CountExternal("site:W-1") != 1 {
		t.Fatalf("1C holds %v", externalIDs(e.onec.Orders()))
	}
}
