package main

// The systemd side of `ordersync run` and `ordersync migrate`: the notifications
// the real binary sends to a test's datagram socket (NOTIFY_SOCKET), the watchdog
// that stops when a loop hangs, and the unit file as systemd-analyze sees it.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ordersync/ordersync/internal/eventually"
	"github.com/ordersync/ordersync/internal/sdnotify"
	"github.com/ordersync/ordersync/internal/sim"
	"github.com/ordersync/ordersync/internal/sim/onecsim"
)

// notification is one datagram received: its assignments, one a line.
type notification struct {
	at    time.Time
	lines []string
}

func (n notification) has(prefix string) bool {
	for _, l := range n.lines {
		if strings.HasPrefix(l, prefix) {
			return true
		}
	}
	return false
}

func (n notification) value(name string) (string, bool) {
	for _, l := range n.lines {
		if v, ok := strings.CutPrefix(l, name+"="); ok {
			return v, true
		}
	}
	return "", false
}

// notifySocket is a test's service manager: an abstract datagram socket that keeps
// what it receives.
type notifySocket struct {
	addr string
	conn *net.UnixConn
	mu   sync.Mutex
	got  []notification
}

var notifySockets atomic.Int64

func newNotifySocket(t *testing.T) *notifySocket {
	t.Helper()
	s := &notifySocket{addr: fmt.Sprintf("@ordersync-test-%d-%d", os.Getpid(), notifySockets.Add(1))}
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: s.addr, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	s.conn = c
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 64<<10)
		for {
			k, err := c.Read(buf)
			if err != nil {
				return
			}
			msg := notification{at: time.Now(), lines: strings.Split(strings.TrimSuffix(string(buf[:k]), "\n"), "\n")}
			s.mu.Lock()
			s.got = append(s.got, msg)
			s.mu.Unlock()
		}
	}()
	t.Cleanup(func() { c.Close(); <-done })
	return s
}

func (s *notifySocket) all() []notification {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]notification(nil), s.got...)
}

// index is the position of the first notification at or after from that has
// prefix, -1 when none.
func (s *notifySocket) index(from int, prefix string) int {
	got := s.all()
	for i := max(from, 0); i < len(got); i++ {
		if got[i].has(prefix) {
			return i
		}
	}
	return -1
}

func (s *notifySocket) count(prefix string) int {
	n := 0
	for _, m := range s.all() {
		if m.has(prefix) {
			n++
		}
	}
	return n
}

// statuses are the STATUS= lines received, in order.
func (s *notifySocket) statuses() []string {
	var out []string
	for _, m := range s.all() {
		if v, ok := m.value("STATUS"); ok {
			out = append(out, v)
		}
	}
	return out
}

func (s *notifySocket) dump() string {
	var b strings.Builder
	for _, m := range s.all() {
		fmt.Fprintf(&b, "%s %q\n", m.at.Format("15:04:05.000"), m.lines)
	}
	return b.String()
}

// watchdogUSec is the test services' WATCHDOG_USEC: a WATCHDOG=1 every 200ms.
const watchdogUSec = 400_000

// TestNotifyReadyStatusWatchdogAndStopping runs `ordersync run` as systemd would
// (NOTIFY_SOCKET, WATCHDOG_USEC): the start-up extends its timeout while it opens
// the database, READY=1 comes once the listener is up, STATUS= follows the work
// done, WATCHDOG=1 comes about every half of WATCHDOG_USEC, and SIGTERM sends
// STOPPING=1, after which nothing is sent.
func TestNotifyReadyStatusWatchdogAndStopping(t *testing.T) {
	t.Parallel()
	e := newEnvOn(t, "sqlite", onecsim.Options{}, true)
	sock := newNotifySocket(t)
	svc := e.startService("NOTIFY_SOCKET="+sock.addr, "WATCHDOG_USEC="+strconv.Itoa(watchdogUSec))

	eventually.True(t, "READY=1, or the service gone", func() bool { return sock.index(0, "READY=1") >= 0 || svc.exited() })
	ready := sock.index(0, "READY=1")
	if ready < 0 {
		t.Fatalf("no READY=1; the service exited: %s\n%s", svc.cmd.ProcessState, svc.stderr.String())
	}
	// The service's log reaches the test through a pipe, after READY=1 may have:
	// wait for the line, then compare the time it was written with READY=1's.
	eventually.True(t, "the log's webhooks listening line", func() bool {
		return strings.Contains(svc.stderr.String(), "webhooks listening") || svc.exited()
	})
	if at, ok := logTime(svc.stderr.String(), "webhooks listening"); !ok || at.After(sock.all()[ready].at) {
		t.Fatalf("READY=1 (at %s) came before the listener was up; log:\n%s",
			sock.all()[ready].at.Format(time.RFC3339Nano), svc.stderr.String())
	}
	if ext := sock.index(0, "EXTEND_TIMEOUT_USEC="); ext < 0 || ext > ready {
		t.Errorf("no EXTEND_TIMEOUT_USEC= before READY=1 while the database was opened (and migrated):\n%s", sock.dump())
	}
	if w := sock.index(0, "WATCHDOG=1"); w >= 0 && w < ready {
		t.Errorf("WATCHDOG=1 before READY=1:\n%s", sock.dump())
	}

	// STATUS= follows what happens: 1C answered its ping, an order is done.
	hasStatus := func(parts ...string) func() bool {
		return func() bool {
			for _, st := range sock.statuses() {
				ok := true
				for _, p := range parts {
					ok = ok && strings.Contains(st, p)
				}
				if ok {
					return true
				}
			}
			return false
		}
	}
	eventually.True(t, `the status "1C up", "outbox: 0 pending, 0 dead, lag 0.0s"`, hasStatus("1C up", "outbox: 0 pending, 0 dead, lag 0.0s"))
	if _, stderr, code := e.cli(orderJSON("N-1", "SKU-1", "1", "10"), "order", "import"); code != 0 {
		t.Fatalf("import: %d %s", code, stderr)
	}
	eventually.True(t, `the status "since start: 1 done", "1C up"`, hasStatus("since start: 1 done", "1C up"))

	// The watchdog's rate: a WATCHDOG=1 about every 200ms. Bounds are generous (a
	// loaded machine delays timers); what they catch is a ping per status line, per
	// loop round, or one per WATCHDOG_USEC or slower.
	from := len(sock.all())
	const pings = 12
	var stamps []time.Time
	eventually.True(t, "12 watchdog pings", func() bool {
		stamps = stamps[:0]
		for _, m := range sock.all()[from:] {
			if m.has("WATCHDOG=1") && len(stamps) < pings {
				stamps = append(stamps, m.at)
			}
		}
		return len(stamps) == pings
	})
	mean := stamps[len(stamps)-1].Sub(stamps[0]) / time.Duration(len(stamps)-1)
	half := time.Duration(watchdogUSec) * time.Microsecond / 2
	t.Logf("%d WATCHDOG=1 %s apart on average (WATCHDOG_USEC/2 = %s)", len(stamps), mean.Round(time.Millisecond), half)
	if mean < half/2 || mean > 3*half {
		t.Errorf("WATCHDOG=1 every %s on average, want about %s:\n%s", mean, half, sock.dump())
	}

	svc.signal(syscall.SIGTERM)
	if code := svc.wait(30 * time.Second); code != 0 {
		t.Fatalf("SIGTERM: exit %d; log:\n%s", code, svc.stderr.String())
	}
	got := sock.all()
	stop := sock.index(0, "STOPPING=1")
	if stop < 0 {
		t.Fatalf("no STOPPING=1 on SIGTERM:\n%s", sock.dump())
	}
	if stop != len(got)-1 {
		t.Errorf("notifications after STOPPING=1:\n%s", sock.dump())
	}
	if n := sock.count("READY=1"); n != 1 {
		t.Errorf("READY=1 sent %d times, want once", n)
	}
}

// TestNotifyWatchdogStopsWhileAnEngineLoopIsHung stalls the service's database
// connections (a TCP proxy holds every answer back): the database ping fails at
// once and the watchdog stops. Then the proxy passes new answers again: the ping
// answers, but the claim loops stay blocked in the calls whose answers are held, and
// once they have been in that step longer than any may take the watchdog stays
// withheld for the engine alone — systemd would restart the service.
func TestNotifyWatchdogStopsWhileAnEngineLoopIsHung(t *testing.T) {
	t.Parallel()
	e := newEnv(t, onecsim.Options{}, true)
	dbURL, dbProxy := viaProxy(t, e.dbURL, 7)
	for i, kv := range e.environ {
		if strings.HasPrefix(kv, "ORDERSYNC_DATABASE__URL=") {
			e.environ[i] = "ORDERSYNC_DATABASE__URL=" + dbURL
		}
	}
	// Short timeouts make the longest step short: 2 × 3 × onec.timeout + 10s + 2 × 5s
	// (the floor of a verdict's write) = 23s.
	e.environ = append(e.environ, "ORDERSYNC_ONEC__TIMEOUT=500ms", "ORDERSYNC_ONEC__SETTLE_TIME=1s",
		"ORDERSYNC_WORKER__SHUTDOWN_TIMEOUT=1s")
	sock := newNotifySocket(t)
	svc := e.startService("NOTIFY_SOCKET="+sock.addr, "WATCHDOG_USEC="+strconv.Itoa(watchdogUSec))
	eventually.True(t, "3 watchdog pings, or the service gone", func() bool { return sock.count("WATCHDOG=1") >= 3 || svc.exited() })
	if svc.exited() {
		t.Fatalf("the service exited: %s\n%s", svc.cmd.ProcessState, svc.stderr.String())
	}

	// 1. Every answer of the database held back: the ping fails, the watchdog stops.
	dbProxy.SetFaults(sim.ProxyFaults{Stall: 1, StallFor: 10 * time.Minute})
	stalled := len(sock.all())
	eventually.True(t, "STATUS=UNHEALTHY for the stalled database", func() bool {
		i := sock.index(stalled, "STATUS=UNHEALTHY")
		return i >= 0 && strings.Contains(sock.all()[i].lines[0], "the database does not answer")
	})
	// The claim loops poll every 20ms: each has met the stall by now.
	eventually.True(t, "dbProxy.Stats().Stalls >= 4", func() bool { return dbProxy.Stats().Stalls >= 4 })

	// 2. New answers pass again; the calls already held stay held.
	dbProxy.SetFaults(sim.ProxyFaults{})
	cleared := len(sock.all())
	engineOnly := func(st string) bool {
		return strings.HasPrefix(st, "UNHEALTHY") && strings.Contains(st, "engine worker") &&
			strings.Contains(st, "is hung") && !strings.Contains(st, "database")
	}
	var hung int
	eventually.True(t, "a status line of the hung engine only", func() bool {
		for i, m := range sock.all()[cleared:] {
			if st, ok := m.value("STATUS"); ok && engineOnly(st) {
				hung = cleared + i
				return true
			}
		}
		return false
	})
	// From then on, several watchdog intervals in a row with no WATCHDOG=1, each
	// saying why in STATUS=.
	const withheld = 5
	eventually.True(t, "the watchdog withheld 5 intervals", func() bool {
		n := 0
		for _, m := range sock.all()[hung:] {
			if m.has("WATCHDOG=1") {
				return true // checked below
			}
			if st, ok := m.value("STATUS"); ok && engineOnly(st) {
				n++
			}
		}
		return n >= withheld
	})
	n := 0
	for _, m := range sock.all()[hung:] {
		if m.has("WATCHDOG=1") {
			break
		}
		if st, ok := m.value("STATUS"); ok && engineOnly(st) {
			n++
		}
	}
	if n < withheld {
		t.Fatalf("a WATCHDOG=1 came after %d withheld intervals with an engine loop hung, want none for %d:\n%s", n, withheld, sock.dump())
	}
	if !strings.Contains(svc.stderr.String(), "systemd watchdog pings withheld") {
		t.Errorf("the log does not say the watchdog is withheld:\n%s", svc.stderr.String())
	}
	st, _ := sock.all()[hung].value("STATUS")
	t.Logf("withheld for the engine alone: %s", st)

	svc.signal(syscall.SIGTERM)
	if code := svc.wait(60 * time.Second); code != 0 {
		t.Errorf("SIGTERM with loops hung: exit %d; log:\n%s", code, svc.stderr.String())
	}
	if sock.index(hung, "STOPPING=1") < 0 {
		t.Errorf("no STOPPING=1 on SIGTERM:\n%s", sock.dump())
	}
}

// TestNotifyListenersDoNotWaitFor1CsStartUpPing: a 1C that takes a minute to answer
// its ping (onec.timeout 1m) does not hold up the webhook listener: it is up and
// answers, and READY=1 is sent, while the ping is still in flight; SIGTERM then
// ends the service at once.
func TestNotifyListenersDoNotWaitFor1CsStartUpPing(t *testing.T) {
	t.Parallel()
	e := newEnvOn(t, "sqlite", onecsim.Options{OpLatency: map[string]time.Duration{"ping": time.Minute}}, true)
	e.environ = append(e.environ, "ORDERSYNC_ONEC__TIMEOUT=1m", "ORDERSYNC_ONEC__SETTLE_TIME=2m")
	sock := newNotifySocket(t)
	started := time.Now()
	svc := e.startService("NOTIFY_SOCKET=" + sock.addr)
	addr := webhooksURL(t, svc.stderr)
	eventually.True(t, "READY=1", func() bool { return sock.index(0, "READY=1") >= 0 })
	resp, err := http.Get(addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	log := svc.stderr.String()
	if resp.StatusCode != http.StatusOK || strings.Contains(log, "1C answers") || strings.Contains(log, "does not answer") {
		t.Fatalf("GET /healthz: %d; the ping must still be in flight; log:\n%s", resp.StatusCode, log)
	}
	t.Logf("listening and ready %s after the start, 1C's ping in flight", time.Since(started).Round(time.Millisecond))
	readyStatus, _ := sock.all()[sock.index(0, "READY=1")].value("STATUS")
	if !strings.Contains(readyStatus, "start-up ping in flight") {
		t.Errorf("READY=1's STATUS=%q does not say the ping is in flight", readyStatus)
	}
	stopped := time.Now()
	svc.signal(syscall.SIGTERM)
	if code := svc.wait(30 * time.Second); code != 0 {
		t.Fatalf("SIGTERM: exit %d; log:\n%s", code, svc.stderr.String())
	}
	if took := time.Since(stopped); took > 20*time.Second {
		t.Errorf("SIGTERM took %s: the start-up ping held the stop", took)
	}
}

// TestNotifyMigrateExtendsTheStartTimeout: `ordersync migrate`, as the unit's
// ExecStartPre= runs it, extends the start timeout while it works and sends no
// READY=1 (that is run's).
func TestNotifyMigrateExtendsTheStartTimeout(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"postgres", "sqlite"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			e := newEnvOn(t, backend, onecsim.Options{}, false)
			sock := newNotifySocket(t)
			e.environ = append(e.environ, "NOTIFY_SOCKET="+sock.addr)
			out, stderr, code := e.cli("", "migrate")
			if code != 0 || !strings.Contains(out, "applied migrations") {
				t.Fatalf("migrate: exit %d out %q err %q", code, out, stderr)
			}
			eventually.True(t, "migrate's EXTEND_TIMEOUT_USEC and status", func() bool {
				return sock.index(0, "EXTEND_TIMEOUT_USEC=") >= 0 && sock.count("STATUS=migrate: bringing the schema") >= 1
			})
			if sock.count("READY=1") != 0 || sock.count("WATCHDOG=1") != 0 {
				t.Errorf("migrate sent READY=1 or WATCHDOG=1:\n%s", sock.dump())
			}
			for _, m := range sock.all() {
				if v, ok := m.value("EXTEND_TIMEOUT_USEC"); ok && v != strconv.FormatInt(sdnotify.ExtendBy.Microseconds(), 10) {
					t.Errorf("EXTEND_TIMEOUT_USEC=%s, want %d", v, sdnotify.ExtendBy.Microseconds())
				}
			}
		})
	}
}

// unitFile is the repository's unit with its Exec lines pointed at the test binary
// (systemd-analyze verify checks that they are executable), in a directory of its
// own.
func unitFile(t *testing.T) (path string, unit string) {
	t.Helper()
	raw, err := os.ReadFile("../../deploy/systemd/ordersync.service")
	if err != nil {
		t.Fatal(err)
	}
	unit = string(raw)
	var b strings.Builder
	for _, line := range strings.Split(unit, "\n") {
		if strings.HasPrefix(line, "Exec") {
			line = strings.ReplaceAll(line, "/usr/local/bin/ordersync", binary)
		}
		b.WriteString(line + "\n")
	}
	path = filepath.Join(t.TempDir(), "ordersync.service")
	if err := os.WriteFile(path, []byte(strings.TrimSuffix(b.String(), "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	return path, unit
}

func systemdAnalyze(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Fatal("systemd-analyze is not installed: install the systemd package (apt-get install systemd); the unit's tests need it")
	}
	return p
}

// unitKeys are the [Service] assignments of unit: active ones, and the ones
// commented out (#Key=value).
func unitKeys(unit string) (active, commented map[string][]string) {
	active, commented = map[string][]string{}, map[string][]string{}
	section := ""
	for _, line := range strings.Split(unit, "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "[") {
			section = line
			continue
		}
		if section != "[Service]" {
			continue
		}
		into := active
		if rest, ok := strings.CutPrefix(line, "#"); ok {
			into, line = commented, rest
		}
		if k, v, ok := strings.Cut(line, "="); ok && !strings.ContainsAny(k, " \t") && k != "" {
			into[k] = append(into[k], v)
		}
	}
	return active, commented
}

// TestSystemdUnitVerifiesAndScores: systemd-analyze verify accepts the unit, and
// systemd-analyze security scores its exposure at most 2.0 (the score is in the
// test's log). The unit is a notify service with the watchdog.
func TestSystemdUnitVerifiesAndScores(t *testing.T) {
	t.Parallel()
	analyze := systemdAnalyze(t)
	path, unit := unitFile(t)
	out, err := exec.Command(analyze, "verify", "--man=no", path).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	out, err = exec.Command(analyze, "security", "--offline=yes", "--no-pager", path).CombinedOutput()
	m := regexp.MustCompile(`Overall exposure level for ordersync\.service: ([0-9.]+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("systemd-analyze security: %v; no score in:\n%s", err, out)
	}
	score, _ := strconv.ParseFloat(string(m[1]), 64)
	t.Logf("systemd-analyze security --offline=yes: exposure %.1f", score)
	fmt.Printf("systemd-analyze security --offline=yes deploy/systemd/ordersync.service: exposure level %.1f\n", score)
	if score > 2.0 {
		t.Errorf("exposure %.1f, want at most 2.0:\n%s", score, out)
	}

	active, _ := unitKeys(unit)
	for k, want := range map[string]string{"Type": "notify", "WatchdogSec": "60s", "Restart": "on-failure", "NotifyAccess": "exec"} {
		if got := active[k]; len(got) == 0 || got[len(got)-1] != want {
			t.Errorf("%s=%v, want %s", k, got, want)
		}
	}
	if strings.Contains(unit, "admin_listen") || strings.Contains(unit, "admin-listen") {
		t.Errorf("the unit names the admin listener other than as admin.listen")
	}
}

// TestSystemdUnitLoadsEveryExampleCredential: the unit loads exactly the credentials
// the packaged configuration (deploy/ordersync.yaml) reads, and no other (a missing
// file keeps the unit from starting); every other credential the example
// configuration names under /run/credentials/ordersync.service/ is offered, commented
// out, by the example drop-in deploy/systemd/credentials.conf, which offers no other
// and loads nothing as it is.
func TestSystemdUnitLoadsEveryExampleCredential(t *testing.T) {
	t.Parallel()
	const dir = "/run/credentials/ordersync.service/"
	keyLine := regexp.MustCompile(`^\s*(#\s*)?([a-z0-9_]+_file):\s*` + regexp.QuoteMeta(dir) + `([A-Za-z0-9._-]+)\s*$`)
	credentials := func(path string) map[string]bool { // credential name -> active
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		m := map[string]bool{}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k := keyLine.FindStringSubmatch(sc.Text()); k != nil {
				m[k[3]] = m[k[3]] || k[1] == ""
			}
		}
		return m
	}
	example, packaged := credentials("../../configs/ordersync.example.yaml"), credentials("../../deploy/ordersync.yaml")
	if len(example) < 5 {
		t.Fatalf("found only %d *_file keys in the example configuration: %v", len(example), example)
	}
	loaded := func(lines []string) map[string]string {
		m := map[string]string{}
		for _, v := range lines {
			id, src, _ := strings.Cut(v, ":")
			m[id] = src
		}
		return m
	}
	_, unit := unitFile(t)
	active, _ := unitKeys(unit)
	on := loaded(active["LoadCredential"])
	dropIn, err := os.ReadFile("../../deploy/systemd/credentials.conf")
	if err != nil {
		t.Fatal(err)
	}
	dropOn, dropOff := unitKeys(string(dropIn))
	if len(dropOn["LoadCredential"]) > 0 {
		t.Errorf("the example drop-in loads %v as it is: its lines are to uncomment", dropOn["LoadCredential"])
	}
	offered := loaded(dropOff["LoadCredential"])

	for id, isActive := range packaged {
		if isActive && on[id] == "" {
			t.Errorf("deploy/ordersync.yaml reads %s%s: the unit needs LoadCredential=%s:/etc/ordersync/%s", dir, id, id, id)
		}
	}
	for id := range on {
		if !packaged[id] {
			t.Errorf("the unit loads %s, which deploy/ordersync.yaml does not read: offer it in the drop-in instead", id)
		}
	}
	for id := range example {
		switch {
		case on[id] != "" && offered[id] != "":
			t.Errorf("%s is both in the unit and in the drop-in", id)
		case on[id] == "" && offered[id] == "":
			t.Errorf("the example configuration offers %s%s: neither the unit nor the drop-in has its LoadCredential= line", dir, id)
		}
		if src := on[id] + offered[id]; src != "" && src != "/etc/ordersync/"+id {
			t.Errorf("LoadCredential=%s:%s, want the file /etc/ordersync/%s", id, src, id)
		}
	}
	for id := range offered {
		if _, ok := example[id]; !ok {
			t.Errorf("the drop-in offers %s, for no key of the example configuration", id)
		}
	}
}

// TestSystemdUnitWatchdogAbortIsRestartable: a service that the watchdog aborts
// (SIGABRT) must not end with exit code 2, which RestartPreventExitStatus=2 keeps
// from being restarted. A Go program does exit 2 on SIGABRT, unless GOTRACEBACK=crash
// (the unit sets it) makes it die of the signal, after printing every goroutine.
func TestSystemdUnitWatchdogAbortIsRestartable(t *testing.T) {
	t.Parallel()
	_, unit := unitFile(t)
	active, _ := unitKeys(unit)
	var traceback string
	for _, v := range active["Environment"] {
		if tb, ok := strings.CutPrefix(v, "GOTRACEBACK="); ok {
			traceback = tb
		}
	}
	if prevent := active["RestartPreventExitStatus"]; len(prevent) == 0 || prevent[len(prevent)-1] != "2" {
		t.Fatalf("RestartPreventExitStatus=%v: the test assumes 2", prevent)
	}
	if traceback != "crash" {
		t.Fatalf("the unit sets GOTRACEBACK=%q, want crash", traceback)
	}
	if lc := active["LimitCORE"]; len(lc) == 0 || lc[len(lc)-1] != "0" {
		t.Errorf("LimitCORE=%v, want 0: a core file would hold the secrets", lc)
	}
	// As LimitCORE=0 does: the aborted processes leave no core file behind.
	if err := syscall.Setrlimit(syscall.RLIMIT_CORE, &syscall.Rlimit{}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		traceback string
		killed    bool
	}{{"", false}, {traceback, true}} {
		e := newEnvOn(t, "sqlite", onecsim.Options{}, true)
		extra := []string{}
		if tc.traceback != "" {
			extra = append(extra, "GOTRACEBACK="+tc.traceback)
		}
		svc := e.startService(extra...)
		eventually.True(t, "engine started in the log, or the service gone", func() bool { return strings.Contains(svc.stderr.String(), "engine started") || svc.exited() })
		svc.signal(syscall.SIGABRT)
		svc.wait(30 * time.Second)
		ws, _ := svc.cmd.ProcessState.Sys().(syscall.WaitStatus)
		t.Logf("GOTRACEBACK=%q: SIGABRT ends it with %s", tc.traceback, svc.cmd.ProcessState)
		switch {
		case tc.killed && !(ws.Signaled() && ws.Signal() == syscall.SIGABRT):
			t.Errorf("GOTRACEBACK=%s: %s, want death by SIGABRT (restartable)", tc.traceback, svc.cmd.ProcessState)
		case !tc.killed && ws.ExitStatus() != 2:
			t.Logf("without GOTRACEBACK, SIGABRT no longer exits 2 (%s): GOTRACEBACK=crash may be unneeded", svc.cmd.ProcessState)
		}
		if !strings.Contains(svc.stderr.String(), "goroutine ") {
			t.Errorf("GOTRACEBACK=%q: no goroutine stacks in the log", tc.traceback)
		}
	}
}

// logTime is the time of the first JSON log line whose msg is msg.
func logTime(log, msg string) (time.Time, bool) {
	for _, line := range strings.Split(log, "\n") {
		var l struct {
			Time time.Time `json:"time"`
			Msg  string    `json:"msg"`
		}
		if json.Unmarshal([]byte(line), &l) == nil && l.Msg == msg {
			return l.Time, true
		}
	}
	return time.Time{}, false
}
