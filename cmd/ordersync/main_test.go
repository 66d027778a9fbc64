package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/logging"
	"github.com/ordersync/ordersync/internal/sim/onecsim"
	"github.com/ordersync/ordersync/internal/testdb"
)

// binary is the real ordersync, built once for the process tests.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "ordersync-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "ordersync")
	build := exec.Command("go", "build", "-o", binary, ".")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building ordersync for the process tests:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

const simPassword = "pa$$-Пароль"

// env is one test's world: a journal schema, a simulated 1C, and the environment that
// points ordersync at both.
type env struct {
	t        *testing.T
	dbURL    string
	stateDir string
	onec     *onecsim.OneC
	environ  []string
}

func newEnv(t *testing.T, opts onecsim.Options, migrate bool) *env {
	return newEnvOn(t, "postgres", opts, migrate)
}

// newEnvOn is newEnv on a backend: "postgres" (a schema of the test server) or
// "sqlite" (no database.url: the embedded file in a temporary STATE_DIRECTORY).
func newEnvOn(t *testing.T, backend string, opts onecsim.Options, migrate bool) *env {
	t.Helper()
	opts.Username, opts.Password = "ordersync", simPassword
	s := onecsim.New(opts)
	if err := s.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	e := &env{t: t, onec: s}
	switch backend {
	case "postgres":
		e.dbURL = testdb.URL(t)
		e.environ = []string{"ORDERSYNC_DATABASE__URL=" + e.dbURL}
	case "sqlite":
		e.stateDir = t.TempDir()
		e.environ = []string{"STATE_DIRECTORY=" + e.stateDir}
	default:
		t.Fatalf("unknown backend %q", backend)
	}
	e.environ = append(e.environ,
		"ORDERSYNC_ONEC__BASE_URL="+s.URL(),
		"ORDERSYNC_ONEC__USERNAME=ordersync",
		"ORDERSYNC_ONEC__PASSWORD="+simPassword,
		"ORDERSYNC_ONEC__TIMEOUT=5s",
		"ORDERSYNC_ONEC__SETTLE_TIME=6s",
		"ORDERSYNC_WORKER__BACKOFF_MIN=10ms",
		"ORDERSYNC_WORKER__BACKOFF_MAX=50ms",
		"ORDERSYNC_WORKER__POLL_INTERVAL=20ms",
		"ORDERSYNC_LOG__FORMAT=json",
		"ORDERSYNC_HTTP__LISTEN=127.0.0.1:0",
		"ORDERSYNC_ADMIN__LISTEN=127.0.0.1:0",
	)
	if migrate {
		if _, stderr, code := e.cli("", "migrate"); code != 0 {
			t.Fatalf("migrate: exit %d: %s", code, stderr)
		}
	}
	return e
}

// cli runs ordersync in-process, as a person would from a shell.
func (e *env) cli(stdin string, args ...string) (stdout, stderr string, code int) {
	e.t.Helper()
	var out, errb bytes.Buffer
	code = Main(context.Background(), args, strings.NewReader(stdin), &out, &errb, e.environ)
	return out.String(), errb.String(), code
}

// store opens the env's database the way the CLI does, whichever the backend.
func (e *env) store() journal.Store {
	e.t.Helper()
	a := &app{environ: e.environ, stdout: io.Discard, stderr: io.Discard}
	cfg, err := a.loadConfig()
	if err != nil {
		e.t.Fatal(err)
	}
	db, err := a.openReadyDB(context.Background(), cfg, logging.Discard())
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(db.Close)
	return db.Journal()
}

func orderJSON(id, sku, qty, price string) string {
	return fmt.Sprintf(`{"source":"site","external_id":%q,"number":%q,"created_at":"2026-09-16T10:00:00+05:00",`+
		`"customer":{"name":"Иван Петров","phone":"+77011234567","email":"ivan@example.kz"},"warehouse":"WH1","currency":"KZT",`+
		`"lines":[{"sku":%q,"name":"Чайник","quantity":%s,"price":%s}],"comment":""}`, id, id, sku, qty, price)
}

func TestVersionAndUsageErrors(t *testing.T) {
	t.Parallel()
	var out, errb bytes.Buffer
	if code := Main(context.Background(), []string{"version"}, nil, &out, &errb, []string{}); code != 0 || !strings.HasPrefix(out.String(), "ordersync ") {
		t.Fatalf("version: exit %d out %q", code, out.String())
	}
	want := out.String()
	out.Reset()
	if code := Main(context.Background(), []string{"--version"}, nil, &out, &errb, []string{}); code != 0 || out.String() != want {
		t.Fatalf("--version: exit %d out %q, want %q as `version` prints it", code, out.String(), want)
	}
	out.Reset()
	for _, args := range [][]string{{"no-such-command"}, {"journal", "list", "--no-such-flag"}, {"journal", "show"}} {
		errb.Reset()
		if code := Main(context.Background(), args, nil, &out, &errb, []string{}); code != 2 {
			t.Errorf("%v: exit %d, want 2 (usage)", args, code)
		}
		if n := strings.Count(strings.TrimSpace(errb.String()), "\n"); n != 0 {
			t.Errorf("%v: stderr has %d lines, want one: %q", args, n+1, errb.String())
		}
	}
}

func TestConfigurationErrorsExit2WithOneLineNamingTheKey(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	typo := filepath.Join(dir, "typo.yaml")
	os.WriteFile(typo, []byte("onec:\n  base_ulr: http://1c.local/trade/hs/ordersync/v1\n"), 0o600)
	for _, tc := range []struct {
		name    string
		args    []string
		environ []string
		want    string
	}{
		{"unknown key", []string{"run", "--config", typo}, nil, "onec.base_ulr"},
		{"bad duration", []string{"run"}, []string{"ORDERSYNC_ONEC__TIMEOUT=30"}, "onec.timeout"},
		{"missing config file", []string{"run", "--config", filepath.Join(dir, "absent.yaml")}, nil, "absent.yaml"},
		{"bad database url", []string{"run"}, []string{"ORDERSYNC_DATABASE__URL=mysql://x@127.0.0.1/x", "ORDERSYNC_ONEC__BASE_URL=http://1c.local/trade/hs/ordersync/v1"}, "database.url"},
		{"no 1C url", []string{"run"}, []string{"ORDERSYNC_DATABASE__URL=postgres://x@127.0.0.1:1/x"}, "onec.base_url"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			environ := append([]string{}, tc.environ...)
			code := Main(context.Background(), tc.args, nil, &out, &errb, environ)
			if code != 2 {
				t.Fatalf("exit %d, want 2; stderr %q", code, errb.String())
			}
			msg := strings.TrimSpace(errb.String())
			if strings.Contains(msg, "\n") || !strings.Contains(msg, tc.want) {
				t.Fatalf("stderr %q, want one line naming %s", msg, tc.want)
			}
		})
	}
}

func TestUnreachableDatabaseExits1NamingTheServer(t *testing.T) {
	t.Parallel()
	var out, errb bytes.Buffer
	code := Main(context.Background(), []string{"journal", "list"}, nil, &out, &errb, []string{
		"ORDERSYNC_DATABASE__URL=postgres://ordersync:topsecret@127.0.0.1:1/ordersync?connect_timeout=2",
	})
	msg := strings.TrimSpace(errb.String())
	if code != 1 || !strings.Contains(msg, "127.0.0.1:1") || strings.Contains(msg, "\n") {
		t.Fatalf("exit %d stderr %q; want 1 and one line naming 127.0.0.1:1", code, msg)
	}
	if strings.Contains(msg, "topsecret") {
		t.Fatalf("the database password reached stderr: %q", msg)
	}
}

func TestRunRefusesASchemaThatIsBehind(t *testing.T) {
	t.Parallel()
	e := newEnv(t, onecsim.Options{}, false)
	_, stderr, code := e.cli("", "run")
	if code != 1 || !strings.Contains(stderr, "ordersync migrate") {
		t.Fatalf("exit %d stderr %q; want 1 and advice to run ordersync migrate", code, stderr)
	}
	out, stderr, code := e.cli("", "migrate")
	if code != 0 || !strings.Contains(out, "applied") {
		t.Fatalf("migrate: exit %d out %q err %q", code, out, stderr)
	}
	out, _, _ = e.cli("", "migrate")
	if !strings.Contains(out, "up to date") {
		t.Fatalf("second migrate: %q, want up to date", out)
	}
}

func TestConfigCheckMasksSecrets(t *testing.T) {
	t.Parallel()
	e := newEnv(t, onecsim.Options{}, false)
	e.environ = append(e.environ, "ORDERSYNC_DATABASE__URL=postgres://ordersync:db-secret@127.0.0.1:5432/ordersync")
	out, stderr, code := e.cli("", "config", "check")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if strings.Contains(out, simPassword) || strings.Contains(out, "db-secret") {
		t.Fatalf("config check printed a secret:\n%s", out)
	}
	if !strings.Contains(out, "***") || !strings.Contains(out, "base_url: "+e.onec.URL()) {
		t.Fatalf("config check output lacks the masked secret or the effective base_url:\n%s", out)
	}
}

func TestOrderImportRejectsBadOrdersAndRegistersTheRest(t *testing.T) {
	t.Parallel()
	e := newEnv(t, onecsim.Options{}, true)
	good1 := orderJSON("A-1", "SKU-1", "2", "1500.00")
	good2 := orderJSON("A-2", "SKU-1", "0.5", "99.99")
	input := strings.Join([]string{
		good1,
		orderJSON("B-1", "SKU-1", "-1", "10"), // negative quantity
		strings.Replace(orderJSON("B-2", "SKU-1", "1", "10"), `"KZT"`, `"KZZ"`, 1),                                // unknown currency
		strings.Replace(orderJSON("B-3", "SKU-1", "1", "10"), `"comment":""`, `"total":11`, 1),                    // total off
		`{"source":"site","external_id":"B-4",`,                                                                   // malformed
		strings.Replace(orderJSON("B-5", "SKU-1", "1", "10"), `"created_at":"2026-09-16T10:00:00+05:00",`, ``, 1), // missing field
		good2,
	}, "\n")
	out, stderr, code := e.cli(input, "order", "import", "-")
	if code != 1 {
		t.Fatalf("exit %d, want 1; out %q err %q", code, out, stderr)
	}
	for _, want := range []string{"line 2 site:order:B-1:create: rejected: invalid order: lines[0].quantity",
		"line 3 site:order:B-2:create: rejected: invalid order: currency", "line 4 site:order:B-3:create: rejected: invalid order: total",
		"line 5: rejected: invalid order: (document)", "line 6 site:order:B-5:create: rejected: invalid order: created_at"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if !strings.Contains(out, "7 read: 2 registered, 0 duplicate, 0 conflict, 5 rejected") {
		t.Errorf("summary missing: %s", out)
	}
	list, _, code := e.cli("", "journal", "list", "--format", "json")
	var rows []struct {
		Key, Status string
		Attempts    int
		UpdatedAt   time.Time `json:"updated_at"`
	}
	if err := json.Unmarshal([]byte(list), &rows); err != nil || code != 0 {
		t.Fatalf("journal list: exit %d %v: %s", code, err, list)
	}
	if len(rows) != 2 || rows[0].Status != "pending" || rows[0].UpdatedAt.IsZero() {
		t.Fatalf("journal holds %+v, want the two good orders pending", rows)
	}
	// Importing the same file again registers nothing new.
	out, _, _ = e.cli(good1+"\n"+good2, "order", "import")
	if !strings.Contains(out, "2 read: 0 registered, 2 duplicate") {
		t.Fatalf("re-import: %s", out)
	}
	// A changed copy is a conflict: exit 1, nothing overwritten.
	_, stderr, code = e.cli(orderJSON("A-1", "SKU-1", "3", "1500.00"), "order", "import")
	if code != 1 || !strings.Contains(stderr, "conflict") {
		t.Fatalf("changed copy: exit %d stderr %q, want 1 and a conflict", code, stderr)
	}
}

func TestResyncAfterPermanentFailureAndJournalShowShape(t *testing.T) {
	t.Parallel()
	e := newEnv(t, onecsim.Options{KnownSKUs: []string{"SKU-1"}}, true)
	if _, stderr, code := e.cli(orderJSON("C-1", "SKU-NEW", "1", "250.50"), "order", "import"); code != 0 {
		t.Fatalf("import: %d %s", code, stderr)
	}
	key := "site:order:C-1:create"
	out, _, code := e.cli("", "resync", key)
	if code != 1 || !strings.Contains(out, "failed") || !strings.Contains(out, "SKU-NEW") {
		t.Fatalf("resync with an unknown SKU: exit %d out %q; want 1, failed, 1C's message", code, out)
	}
	if e.onec.CountExternal("site:C-1") != 0 {
		t.Fatalf("1C holds the order after a 422")
	}

	e.onec.SetKnownSKUs([]string{"SKU-1", "SKU-NEW"})
	out, stderr, code := e.cli("", "resync", key)
	if code != 0 || !strings.Contains(out, "done") {
		t.Fatalf("resync after the fix: exit %d out %q err %q", code, out, stderr)
	}
	if e.onec.CountExternal("site:C-1") != 1 {
		t.Fatalf("1C holds %d orders, want 1", e.onec.CountExternal("site:C-1"))
	}
	out, _, code = e.cli("", "resync", key, "--verify", "--format", "json")
	var v struct {
		Rerun  bool
		Verify struct{ Exists bool }
	}
	if json.Unmarshal([]byte(out), &v); code != 0 || v.Rerun || !v.Verify.Exists {
		t.Fatalf("resync --verify of a done operation: exit %d %s", code, out)
	}
	if e.onec.CountExternal("site:C-1") != 1 {
		t.Fatalf("a resync of a done operation touched 1C")
	}
	e.cli(orderJSON("C-1", "SKU-NEW", "2", "250.50"), "order", "import") // a conflict, for the record

	out, _, code = e.cli("", "journal", "show", key, "--format", "json")
	var show map[string]any
	if err := json.Unmarshal([]byte(out), &show); err != nil || code != 0 {
		t.Fatalf("journal show: exit %d %v: %s", code, err, out)
	}
	for _, k := range []string{"key", "status", "attempts", "result", "last_error", "attempts_history", "conflicts"} {
		if _, ok := show[k]; !ok {
			t.Errorf("journal show lacks %q", k)
		}
	}
	result := show["result"].(map[string]any)
	if result["ref"] == "" || result["number"] == "" || show["status"] != "done" {
		t.Fatalf("result %v status %v", result, show["status"])
	}
	hist := show["attempts_history"].([]any)
	if len(hist) != 2 {
		t.Fatalf("attempts_history has %d entries, want 2", len(hist))
	}
	for _, k := range []string{"attempt", "outcome", "started_at", "finished_at", "error"} {
		if _, ok := hist[0].(map[string]any)[k]; !ok {
			t.Errorf("attempts_history entry lacks %q", k)
		}
	}
	if hist[0].(map[string]any)["outcome"] != "failed" || hist[1].(map[string]any)["outcome"] != "done" {
		t.Fatalf("outcomes %v, %v; want failed, done", hist[0].(map[string]any)["outcome"], hist[1].(map[string]any)["outcome"])
	}
	conflicts := show["conflicts"].([]any)
	if len(conflicts) != 1 || conflicts[0].(map[string]any)["payload_sha256"] == "" || conflicts[0].(map[string]any)["at"] == "" {
		t.Fatalf("conflicts %v, want one with at and payload_sha256", conflicts)
	}
	table, _, _ := e.cli("", "journal", "show", key)
	for _, want := range []string{"status:       done", "failed", "conflicts"} {
		if !strings.Contains(table, want) {
			t.Errorf("journal show table lacks %q:\n%s", want, table)
		}
	}
}
