package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ordersync/ordersync/internal/eventually"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/sim/onecsim"
)

// failOrders registers n orders with an SKU 1C does not know and brings each to
// failed (422 from 1C): on the embedded file import does the work itself; on
// PostgreSQL a bulk resync of the pending ones does, and ends with exit 1.
func failOrders(t *testing.T, e *env, backend, prefix, sku string, n int) {
	t.Helper()
	var input strings.Builder
	for i := range n {
		fmt.Fprintln(&input, orderJSON(fmt.Sprintf("%s-%02d", prefix, i), sku, "1", "100.00"))
	}
	_, stderr, code := e.cli(input.String(), "order", "import")
	if backend == "postgres" {
		if code != 0 {
			t.Fatalf("import: exit %d: %s", code, stderr)
		}
		out, stderr, code := e.cli("", "resync", "--status", "pending", "--source", "site")
		if code != 1 || !strings.HasSuffix(out, fmt.Sprintf("%d retried: 0 done, %d still failing\n", n, n)) {
			t.Fatalf("resync --status pending with an unknown SKU: exit %d out %q err %q", code, out, stderr)
		}
	} else if code != 1 {
		t.Fatalf("import with an unknown SKU: exit %d, want 1: %s", code, stderr)
	}
}

// snapshot is every operation's key, status and attempts.
func snapshot(t *testing.T, store journal.Store) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, op := range mustList(t, store) {
		m[op.Key] = fmt.Sprintf("%s/%d/%s", op.Status, op.Attempts, op.NextAttemptAt)
	}
	return m
}

// TestBulkResync: 30 failed operations; --dry-run lists the 30 and changes nothing;
// once 1C knows the SKU, the real run brings all 30 to done with each order in 1C
// exactly once. On PostgreSQL and on the embedded file.
func TestBulkResync(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"postgres", "sqlite"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			const n = 30
			e := newEnvOn(t, backend, onecsim.Options{KnownSKUs: []string{"SKU-1"}}, true)
			failOrders(t, e, backend, "BR", "SKU-NEW", n)
			store := e.store()
			if got := countStatus(t, store, journal.StatusFailed); got != n {
				t.Fatalf("%d failed operations, want %d", got, n)
			}
			before, creates := snapshot(t, store), e.onec.Stats().Requests["create"]

			out, stderr, code := e.cli("", "resync", "--status", "failed", "--dry-run")
			if code != 0 || strings.Count(out, "site:order:BR-") != n || !strings.HasSuffix(out, "30 would be retried (dry run: nothing was changed)\n") {
				t.Fatalf("dry run: exit %d out %q err %q", code, out, stderr)
			}
			if !strings.Contains(out, "SKU-NEW") {
				t.Fatalf("dry run does not show the last error:\n%s", out)
			}
			out, _, code = e.cli("", "resync", "--status", "failed", "--dry-run", "--error-contains", "sku-new", "--format", "json")
			var dry bulkDryRun
			if err := json.Unmarshal([]byte(out), &dry); err != nil || code != 0 || !dry.DryRun || dry.Count != n || len(dry.Operations) != n {
				t.Fatalf("dry run --format json: exit %d %v: %s", code, err, out)
			}
			if after := snapshot(t, store); fmt.Sprint(after) != fmt.Sprint(before) {
				t.Fatalf("a dry run changed the journal:\nbefore %v\nafter  %v", before, after)
			}
			if e.onec.Count() != 0 || e.onec.Stats().Requests["create"] != creates {
				t.Fatalf("a dry run reached 1C: %d orders, %d creates (was %d)", e.onec.Count(), e.onec.Stats().Requests["create"], creates)
			}

			// Filters that select nothing: nothing retried, exit 0.
			for _, args := range [][]string{
				{"--source", "kaspi"},
				{"--error-contains", "no such error"},
				{"--since", time.Now().Add(time.Hour).Format(time.RFC3339)},
			} {
				out, stderr, code := e.cli("", append([]string{"resync", "--status", "failed"}, args...)...)
				if code != 0 || !strings.HasSuffix(out, "0 retried: 0 done, 0 still failing\n") {
					t.Fatalf("resync %v: exit %d out %q err %q", args, code, out, stderr)
				}
			}
			if after := snapshot(t, store); fmt.Sprint(after) != fmt.Sprint(before) {
				t.Fatalf("a resync that selected nothing changed the journal")
			}

			e.onec.SetKnownSKUs([]string{"SKU-1", "SKU-NEW"})
			sessions := e.onec.Sessions() // those the import and resync before left open
			out, stderr, code = e.cli("", "resync", "--status", "failed", "--source", "site", "--since", "24h", "--error-contains", "SKU-NEW")
			if code != 0 || !strings.HasSuffix(out, "30 retried: 30 done, 0 still failing\n") {
				t.Fatalf("resync after the fix: exit %d out %q err %q", code, out, stderr)
			}
			if lines := strings.Count(out, ": done after attempt 2 (1C № "); lines != n {
				t.Fatalf("%d lines of operations done, want %d:\n%s", lines, n, out)
			}
			if got := countStatus(t, store, journal.StatusDone); got != n {
				t.Fatalf("%d operations done, want %d", got, n)
			}
			if e.onec.Count() != n {
				t.Fatalf("1C holds %d orders, want %d", e.onec.Count(), n)
			}
			for i := range n {
				if id := fmt.Sprintf("site:BR-%02d", i); e.onec.CountExternal(id) != 1 {
					t.Fatalf("1C holds %d orders %s, want 1", e.onec.CountExternal(id), id)
				}
			}
			if s := e.onec.Sessions(); s != sessions {
				t.Fatalf("the bulk resync left %d 1C sessions open", s-sessions)
			}
			// Nothing failed is left: a second run retries nothing.
			out, _, code = e.cli("", "resync", "--status", "failed")
			if code != 0 || out != "no failed operation matches\n0 retried: 0 done, 0 still failing\n" {
				t.Fatalf("second run: exit %d out %q", code, out)
			}
		})
	}
}

// TestBulkResyncSomeStillFail: when only part of the cause is fixed, the rest still
// fails and the exit status is 1; the JSON says which.
func TestBulkResyncSomeStillFail(t *testing.T) {
	t.Parallel()
	e := newEnvOn(t, "sqlite", onecsim.Options{KnownSKUs: []string{"SKU-1"}}, true)
	failOrders(t, e, "sqlite", "PA", "SKU-A", 6)
	failOrders(t, e, "sqlite", "PB", "SKU-B", 4)
	e.onec.SetKnownSKUs([]string{"SKU-1", "SKU-A"})

	out, stderr, code := e.cli("", "resync", "--status", "failed")
	if code != 1 || !strings.HasSuffix(out, "10 retried: 6 done, 4 still failing\n") {
		t.Fatalf("partly fixed: exit %d out %q err %q", code, out, stderr)
	}
	if n := strings.Count(out, ": failed after attempt 2: "); n != 4 {
		t.Fatalf("%d lines of operations still failing, want 4:\n%s", n, out)
	}

	out, _, code = e.cli("", "resync", "--status", "failed", "--format", "json")
	var res bulkOutput
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != 1 {
		t.Fatalf("json: exit %d %v: %s", code, err, out)
	}
	if res.Retried != 4 || res.Done != 0 || res.StillFailing != 4 || len(res.Operations) != 4 {
		t.Fatalf("json: %+v", res)
	}
	for _, op := range res.Operations {
		if !strings.HasPrefix(op.Key, "site:order:PB-") || op.Status != "failed" || !strings.Contains(op.LastError, "SKU-B") {
			t.Fatalf("still failing: %+v", op)
		}
	}
	if e.onec.Count() != 6 {
		t.Fatalf("1C holds %d orders, want 6", e.onec.Count())
	}
}

// TestBulkResyncHandsWorkToTheServiceOnSQLite: beside a running service on an
// embedded file the operations are handed to it, batch by batch.
func TestBulkResyncHandsWorkToTheServiceOnSQLite(t *testing.T) {
	t.Parallel()
	const n = 20 // more than one batch
	e := newEnvOn(t, "sqlite", onecsim.Options{KnownSKUs: []string{"SKU-1"}}, true)
	e.environ = append(e.environ, "ORDERSYNC_WORKER__POLL_INTERVAL=1h") // only a wake-up makes it claim at once
	failOrders(t, e, "sqlite", "SV", "SKU-NEW", n)
	svc := e.startService()
	eventually.True(t, "engine started in the log", func() bool { return strings.Contains(svc.stderr.String(), "engine started") })

	e.onec.SetKnownSKUs([]string{"SKU-1", "SKU-NEW"})
	out, stderr, code := e.cli("", "resync", "--status", "failed")
	if code != 0 || !strings.HasSuffix(out, fmt.Sprintf("%d retried: %d done, 0 still failing\n", n, n)) {
		t.Fatalf("bulk resync beside the service: exit %d out %q err %q", code, out, stderr)
	}
	if want := fmt.Sprintf("to the running service (pid %d)", svc.cmd.Process.Pid); strings.Count(stderr, want) != 1 {
		t.Fatalf("stderr %q, want one line saying the work went %s", stderr, want)
	}
	if e.onec.Count() != n {
		t.Fatalf("1C holds %d orders, want %d", e.onec.Count(), n)
	}
	for i := range n {
		if id := fmt.Sprintf("site:SV-%02d", i); e.onec.CountExternal(id) != 1 {
			t.Fatalf("1C holds %d orders %s, want 1", e.onec.CountExternal(id), id)
		}
	}
	svc.signal(syscall.SIGTERM)
	if code := svc.wait(20 * time.Second); code != 0 {
		t.Fatalf("SIGTERM: exit %d", code)
	}
}

func TestResyncUsageErrors(t *testing.T) {
	t.Parallel()
	e := newEnvOn(t, "sqlite", onecsim.Options{}, false)
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"no argument", []string{"resync"}, "give a KEY"},
		{"key and --status", []string{"resync", "site:order:A-1:create", "--status", "failed"}, "not both"},
		{"connector and --status", []string{"resync", "kaspi", "1", "--status", "failed"}, "not both"},
		{"--verify with --status", []string{"resync", "--status", "failed", "--verify"}, "--verify"},
		{"--status done", []string{"resync", "--status", "done"}, `must be failed or pending, got "done"`},
		{"--dry-run without --status", []string{"resync", "--dry-run"}, "give --status"},
		{"a filter with a key", []string{"resync", "site:order:A-1:create", "--source", "site"}, "not both"},
		{"bad --since", []string{"resync", "--status", "failed", "--since", "yesterday"}, `--since: "yesterday"`},
		{"bad format", []string{"resync", "--status", "failed", "--format", "csv"}, "--format"},
	} {
		out, stderr, code := e.cli("", c.args...)
		if code != 2 || !strings.Contains(stderr, c.want) || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Errorf("%s: exit %d stderr %q out %q; want 2 and one line with %q", c.name, code, stderr, out, c.want)
		}
	}
}
