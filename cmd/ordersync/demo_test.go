package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// demoOrders is how many orders the demo's script sends: 4 from Kaspi, 3 from Ozon,
// 3 from Wildberries, 1 from the site.
const demoOrders = 11

// demoReturns is how many returns it plants: a partial return at Ozon.
const demoReturns = 1

// demoEnviron is a clean machine: no ORDERSYNC_ variables, no database, no state
// directory; the demo's temporary directory goes under tmp.
func demoEnviron(tmp string) []string {
	return []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "TMPDIR=" + tmp}
}

// demoCount reads one count of the demo's table.
func demoCount(t *testing.T, out, label string) int {
	t.Helper()
	m := regexp.MustCompile(`(?m)^\s+` + regexp.QuoteMeta(label) + `\S*\s+(\d+)\s`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("the demo's table has no %q row:\n%s", label, out)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// TestDemoExitsZeroAndItsCountsHold runs `ordersync demo` as a newcomer would, on a
// machine with nothing configured: it must exit 0, and its table must show each
// order in 1C once and the trouble it scripted.
func TestDemoExitsZeroAndItsCountsHold(t *testing.T) {
	t.Parallel()
	out := runDemo(t)
	// Scripted: one webhook delivery answered from the inbox, two creates found in 1C
	// (the lost reply and the crash); re-sightings by the pollers come on top.
	if n := demoCount(t, out, "duplicates prevented"); n < 3 {
		t.Errorf("duplicates prevented %d, want at least the 3 scripted", n)
	}
	for _, want := range []string{"1C over its ordersync HTTP service, contract v1 (--onec httpservice)",
		"no free 1C session and a lock conflict … ok", "Kaspi's feed lists 4 offers, then 304"} {
		if !strings.Contains(out, want) {
			t.Errorf("the demo's output lacks %q:\n%s", want, out)
		}
	}
}

// TestDemoODataExitsZeroAndItsCountsHold runs `ordersync demo --onec odata`: the
// same day against the base's standard OData interface must exit 0 with each
// order in 1C once, OData's faults in place of the HTTP service's.
func TestDemoODataExitsZeroAndItsCountsHold(t *testing.T) {
	t.Parallel()
	out := runDemo(t, "--onec", "odata")
	// Scripted: one webhook delivery answered from the inbox, three creates found in
	// 1C (the lost reply, the mangled Location and the crash).
	if n := demoCount(t, out, "duplicates prevented"); n < 4 {
		t.Errorf("duplicates prevented %d, want at least the 4 scripted", n)
	}
	// The snapshot holds every item of the catalog, the sold-out SKU-IRON at 0.
	for _, want := range []string{"1C over its standard OData interface, УТ 11 (--onec odata): its orders counted by НомерПоДаннымКлиента",
		"7 items: Ozon took",
		"1C busy (429) and a create answered with a mangled Location … ok",
		"1C finished the create after the service died",
		"Kaspi's feed answers 503", "/standard.odata/"} {
		if !strings.Contains(out, want) {
			t.Errorf("the demo's output lacks %q:\n%s", want, out)
		}
	}
}

// runDemo runs `ordersync demo args…` on a clean machine and checks what every
// interface's day must show; it returns the output.
func runDemo(t *testing.T, args ...string) string {
	t.Helper()
	tmp := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, append([]string{"demo"}, args...)...)
	cmd.Env, cmd.Dir = demoEnviron(tmp), tmp
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	out := stdout.String()
	if err != nil {
		t.Fatalf("demo %v: %v after %s\nstderr: %s\nstdout:\n%s", args, err, time.Since(start).Round(time.Millisecond), stderr.String(), out)
	}
	t.Logf("demo %v took %s", args, time.Since(start).Round(time.Millisecond))
	if stderr.Len() != 0 {
		t.Errorf("the demo wrote to stderr on success: %q", stderr.String())
	}

	if n := demoCount(t, out, "orders in 1C"); n != demoOrders {
		t.Errorf("orders in 1C %d, want %d", n, demoOrders)
	}
	if n := demoCount(t, out, "orders seen"); n != demoOrders {
		t.Errorf("orders seen %d, want %d", n, demoOrders)
	}
	if n := demoCount(t, out, "returns in 1C"); n != demoReturns {
		t.Errorf("returns in 1C %d, want %d", n, demoReturns)
	}
	if n := demoCount(t, out, "conflicts recorded"); n < 1 {
		t.Errorf("conflicts recorded %d, want at least the changed redelivery", n)
	}
	if n := demoCount(t, out, "interrupted attempts"); n < 1 {
		t.Errorf("interrupted attempts %d, want at least the one killed", n)
	}
	// Two transient answers (406s, 429s over OData), a lock conflict (a mangled
	// Location) and a lost reply each end an attempt with "retry".
	if n := demoCount(t, out, "retries"); n < 4 {
		t.Errorf("retries %d, want at least 4", n)
	}
	// 11 order.created, 1 order.cancelled and 1 return.created to the CRM, 10
	// acknowledgements.
	if n := demoCount(t, out, "events delivered"); n < 23 {
		t.Errorf("events delivered %d, want at least 23", n)
	}
	// The month's Ozon lines: two sales paid as sold, the returned posting's sale and
	// reversal with its return in 1C, the storage charge of the cabinet.
	for _, want := range []string{"[14/14] stop the service (SIGTERM) … ok",
		"a return at Ozon, carried into 1C once … ok", "once; return.created to the CRM",
		"payouts fetch read 5 lines", "reconcile payouts: paid_as_sold 2, returned_in_1c 1, 1 cabinet line",
		"OK: 1C holds each of the 11 orders exactly once, each of the 1 returns exactly once",
		"a stock snapshot published to Kaspi, Ozon and Wildberries … ok", "status:       done", "interrupted", "found in 1C",
		"OK: 1C holds each of the 11 orders exactly once"} {
		if !strings.Contains(out, want) {
			t.Errorf("the demo's output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, `"level"`) {
		t.Errorf("the service's JSON log reached the demo's output:\n%s", out)
	}
	// Everything it made is gone.
	left, _ := filepath.Glob(filepath.Join(tmp, "ordersync-demo-*"))
	if len(left) != 0 {
		t.Errorf("the demo left %v behind", left)
	}
	return out
}

// TestDemoRefusesAnUnknownOneC: --onec takes httpservice or odata; anything else
// is a usage error, before anything starts.
func TestDemoRefusesAnUnknownOneC(t *testing.T) {
	var out, errb bytes.Buffer
	code := Main(context.Background(), []string{"demo", "--onec", "soap"}, strings.NewReader(""), &out, &errb, []string{})
	want := `--onec: must be one of [httpservice odata], got "soap"`
	if code != exitUsage || out.Len() != 0 || !strings.Contains(errb.String(), want) {
		t.Errorf("demo --onec soap: exit %d stdout %q stderr %q; want %d and %q", code, out.String(), errb.String(), exitUsage, want)
	}
}

// TestDemoKeepLeavesTheServiceRunningUntilInterrupted runs `ordersync demo --keep`:
// once it prints the addresses, the journal it names answers `ordersync journal list`
// beside the running service; SIGINT then stops everything and removes the directory.
func TestDemoKeepLeavesTheServiceRunningUntilInterrupted(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	cmd := exec.Command(binary, "demo", "--keep")
	cmd.Env, cmd.Dir = demoEnviron(tmp), tmp
	pr, pw := io.Pipe()
	cmd.Stdout = pw
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); pw.Close(); close(done) }()
	t.Cleanup(func() {
		select {
		case <-done:
		default:
			cmd.Process.Kill()
			<-done
		}
	})

	// The output is read as it comes, never blocking the demo, whatever the test does.
	var (
		mu  sync.Mutex
		buf strings.Builder
	)
	output := func() string { mu.Lock(); defer mu.Unlock(); return buf.String() }
	ready, ended := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(ended)
		sc := bufio.NewScanner(pr)
		seen := false
		for sc.Scan() {
			mu.Lock()
			buf.WriteString(sc.Text() + "\n")
			mu.Unlock()
			if !seen && strings.Contains(sc.Text(), "try               STATE_DIRECTORY=") {
				seen = true
				close(ready)
			}
		}
		io.Copy(io.Discard, pr)
	}()
	select {
	case <-ready:
	case <-ended:
		t.Fatalf("demo --keep ended before printing the addresses; stderr %q\n%s", stderr.String(), output())
	case <-time.After(2 * time.Minute):
		t.Fatalf("demo --keep printed no addresses within 2 minutes:\n%s", output())
	}
	out := output()
	m0 := regexp.MustCompile(`try +STATE_DIRECTORY=(\S+) `).FindStringSubmatch(out)
	if m0 == nil {
		t.Fatalf("no state directory in:\n%s", out)
	}
	stateDir := m0[1]
	m := regexp.MustCompile(`service log .*\(pid (\d+)\)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("demo --keep names no service pid:\n%s", out)
	}
	pid, _ := strconv.Atoi(m[1])
	if !strings.Contains(out, "OK: 1C holds each of the 11 orders exactly once") {
		t.Fatalf("demo --keep did not succeed:\n%s", out)
	}

	// The service still runs: the operator's command works beside it.
	list := exec.Command(binary, "journal", "list", "--format", "json")
	list.Env = append(demoEnviron(tmp), "STATE_DIRECTORY="+stateDir)
	b, err := list.Output()
	if err != nil {
		t.Fatalf("journal list beside the kept service: %v", err)
	}
	var all, rows []struct{ Key, Status, Source string }
	if err := json.Unmarshal(b, &all); err != nil {
		t.Fatalf("journal list: %v: %s", err, b)
	}
	for _, r := range all {
		if r.Source != "stock" { // the kept service goes on taking stock snapshots
			rows = append(rows, r)
		}
	}
	if want := demoOrders + 1 + demoReturns; len(rows) != want { // the creates, the cancel and the return
		t.Fatalf("journal list shows %d operations, want %d: %s", len(rows), want, b)
	}
	for _, r := range rows {
		if r.Status != "done" {
			t.Errorf("%s is %s, want done", r.Key, r.Status)
		}
	}

	cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-done:
		if waitErr != nil {
			t.Fatalf("demo --keep after SIGINT: %v; stderr %q", waitErr, stderr.String())
		}
	case <-time.After(time.Minute):
		t.Fatalf("demo --keep did not stop within a minute of SIGINT")
	}
	if err := syscall.Kill(pid, 0); err != syscall.ESRCH {
		t.Errorf("the service (pid %d) still runs after the demo stopped (%v)", pid, err)
	}
	if _, err := os.Stat(stateDir); !os.IsNotExist(err) {
		t.Errorf("%s is still there after the demo stopped (%v)", stateDir, err)
	}
}
