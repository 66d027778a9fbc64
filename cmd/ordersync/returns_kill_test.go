package main

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/ordersync/ordersync/internal/eventually"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/order"
	"github.com/ordersync/ordersync/internal/sim/onecsim"
)

// TestKill9MidReturnPostCreatesEveryReturnOnce kills `ordersync run` with SIGKILL
// while POST /returns are in flight: 1C goes on with what it received and writes
// those returns after the process is gone, so the journal does not know of them.
// A restarted run takes the cut-short attempts over, finds the returns by their
// external ids, and 1C holds each exactly once.
func TestKill9MidReturnPostCreatesEveryReturnOnce(t *testing.T) {
	t.Parallel()
	e := newEnvOn(t, "postgres", onecsim.Options{Dedupe: true,
		OpLatency: map[string]time.Duration{"create_return": 400 * time.Millisecond}}, true)
	posting, front := postsInFlight(t, e, "/returns")
	e.environ = append(e.environ, "ORDERSYNC_ONEC__BASE_URL="+front.URL+e.onec.Prefix(),
		"ORDERSYNC_ONEC__MAX_CONCURRENCY=4", "ORDERSYNC_ONEC__TIMEOUT=2s", "ORDERSYNC_ONEC__SETTLE_TIME=3s")
	const n = 12
	var input strings.Builder
	for i := range n {
		fmt.Fprintln(&input, orderJSON(fmt.Sprintf("RK-%03d", i), "SKU-1", "2", "100.00"))
	}
	if _, stderr, code := e.cli(input.String(), "order", "import"); code != 0 {
		t.Fatalf("import: %d %s", code, stderr)
	}
	store := e.store()

	svc := e.startService()
	eventually.True(t, "every order done, or the service gone", func() bool {
		return countStatus(t, store, journal.StatusDone) == n || svc.exited()
	})
	if svc.exited() {
		t.Fatalf("the service ended: %s; log:\n%s", svc.cmd.ProcessState, svc.stderr.String())
	}
	// The returns, registered as a connector registers them: half of each order.
	for i := range n {
		id := fmt.Sprintf("RK-%03d", i)
		r := order.Return{Source: "site", ID: "RET-" + id, Type: order.ReturnPartial, OrderID: id,
			OrderKey: order.Key("site", "order", id, "create"), CreatedAt: time.Date(2026, 9, 18, 10, 0, 0, 0, time.UTC),
			Currency: "KZT", Reason: "не подошёл",
			Lines: []order.Line{{SKU: "SKU-1", Name: "Чайник", Quantity: decimal.NewFromInt(1), Price: decimal.RequireFromString("100.00")}}}
		if err := r.Validate(); err != nil {
			t.Fatal(err)
		}
		if _, err := store.Register(context.Background(), journal.NewOperation{Key: r.Key(), Kind: order.KindReturn,
			Source: r.Source, ExternalID: r.ID, Payload: r.Canonical()}); err != nil {
			t.Fatal(err)
		}
	}
	eventually.True(t, "POST /returns in flight, or the service gone", func() bool {
		return posting.Load() >= 2 || svc.exited()
	})
	svc.signal(syscall.SIGKILL)
	svc.wait(10 * time.Second)
	if ws, _ := svc.cmd.ProcessState.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("the run ended by itself before the kill: %s; log:\n%s", svc.cmd.ProcessState, svc.stderr.String())
	}
	killed := fmt.Sprintf(":%d/", svc.cmd.Process.Pid)
	cutShort := map[string]bool{}
	for a, worker := range openAttempts(t, store) {
		if strings.Contains(worker, killed) && strings.Contains(a, ":return:") {
			cutShort[a] = true
		}
	}
	if len(cutShort) == 0 {
		t.Fatal("no return attempt of the killed process was open: the kill hit no POST in flight")
	}
	// 1C finishes the requests the process left behind, as 1C does.
	eventually.True(t, "1C idle", func() bool { return e.onec.WaitIdle(context.Background()) == nil })
	// Returns 1C holds that the journal does not know as done: written behind its back.
	behind := e.onec.CountReturns() - (countStatus(t, store, journal.StatusDone) - n)
	t.Logf("kill: %d return attempts open; 1C holds %d returns, %d of them unknown to the journal",
		len(cutShort), e.onec.CountReturns(), behind)

	svc = e.startService()
	eventually.Value(t, fmt.Sprintf("all %d operations done", 2*n), func() (int, bool) {
		done := countStatus(t, store, journal.StatusDone)
		return done, done == 2*n || svc.exited()
	})
	if done := countStatus(t, store, journal.StatusDone); done != 2*n || svc.exited() {
		t.Fatalf("%d of %d operations done; log:\n%s", done, 2*n, svc.stderr.String())
	}
	svc.signal(syscall.SIGTERM)
	if code := svc.wait(30 * time.Second); code != 0 {
		t.Fatalf("SIGTERM: exit %d; log:\n%s", code, svc.stderr.String())
	}

	if got := e.onec.CountReturns(); got != n {
		t.Errorf("1C holds %d returns, want %d", got, n)
	}
	for i := range n {
		id := fmt.Sprintf("site:return:RET-RK-%03d", i)
		if c := e.onec.CountReturnsExternal(id); c != 1 {
			t.Errorf("1C holds %d returns %s, want 1", c, id)
		}
	}
	recovered := 0
	for _, op := range mustList(t, store) {
		if op.Kind != order.KindReturn {
			continue
		}
		if op.Result != nil && op.Result.Recovered {
			recovered++
		}
	}
	if recovered < behind {
		t.Errorf("1C wrote %d returns the journal did not know of, but %d return operations say they were recovered", behind, recovered)
	}
	if open := openAttempts(t, store); len(open) != 0 {
		t.Errorf("attempts still open after the last run: %v", open)
	}
	t.Logf("%d return attempts cut short; %d returns found again by their external ids; 1C holds %d returns, each once",
		len(cutShort), recovered, e.onec.CountReturns())
}
