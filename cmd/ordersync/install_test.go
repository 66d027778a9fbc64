package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/ordersync/ordersync/internal/eventually"
	"github.com/ordersync/ordersync/internal/listing"
	"github.com/ordersync/ordersync/internal/sim/onecsim"
	"github.com/ordersync/ordersync/internal/store/sqlite"
	"github.com/ordersync/ordersync/internal/testdb"
)

// Issue 13, item 4: the CLI on a real install, and item 2: waiting for the
// database at start.

// oneLine fails unless s (stderr) is one line, and returns it.
func wantOneLine(t *testing.T, what, s string) string {
	t.Helper()
	s = strings.TrimSpace(s)
	if strings.Contains(s, "\n") {
		t.Errorf("%s: stderr has several lines, want one:\n%s", what, s)
	}
	return s
}

// commands lists the commands under c: groups (with subcommands) and leaves, by
// their path without the program's name ("journal list").
func commands(c *cobra.Command) (groups, leaves []string) {
	for _, sub := range c.Commands() {
		if sub.Name() == "help" || sub.Name() == "completion" {
			continue
		}
		path := strings.TrimPrefix(sub.CommandPath(), c.Root().Name()+" ")
		if sub.HasSubCommands() && sub.Annotations[alsoACommand] != "" {
			// A command of its own with subcommands (reconcile and reconcile payouts).
			_, l := commands(sub)
			leaves = append(append(leaves, path), l...)
			continue
		}
		if sub.HasSubCommands() {
			groups = append(groups, path)
			g, l := commands(sub)
			groups, leaves = append(groups, g...), append(leaves, l...)
			continue
		}
		leaves = append(leaves, path)
	}
	return groups, leaves
}

func TestUnknownOrMissingSubcommandExits2(t *testing.T) {
	t.Parallel()
	groups, _ := commands((&app{}).rootCommand())
	if len(groups) < 6 {
		t.Fatalf("found the groups %v", groups)
	}
	for _, g := range groups {
		for _, args := range [][]string{append(strings.Fields(g), "nosuch"), strings.Fields(g), append(strings.Fields(g), "lst")} {
			var out, errb bytes.Buffer
			code := Main(context.Background(), args, strings.NewReader(""), &out, &errb, []string{})
			msg := wantOneLine(t, strings.Join(args, " "), errb.String())
			if code != exitUsage || out.Len() != 0 {
				t.Errorf("%v: exit %d, stdout %q; want 2 and nothing on stdout", args, code, out.String())
			}
			if !strings.Contains(msg, "subcommand") {
				t.Errorf("%v: %q does not name the subcommands", args, msg)
			}
		}
	}
	var out, errb bytes.Buffer
	if code := Main(context.Background(), []string{"jornal", "list"}, nil, &out, &errb, []string{}); code != exitUsage {
		t.Errorf("an unknown command: exit %d, want 2", code)
	}
	errb.Reset()
	Main(context.Background(), []string{"outbox", "lst"}, nil, &out, &errb, []string{})
	if !strings.Contains(errb.String(), `did you mean "list"`) {
		t.Errorf("outbox lst: %q, want a suggestion", errb.String())
	}
}

// Every command says how it uses the database, and only run, migrate and demo may
// create the embedded journal.
func TestEveryCommandSaysHowItUsesTheDatabase(t *testing.T) {
	t.Parallel()
	_, leaves := commands((&app{}).rootCommand())
	for _, l := range leaves {
		if _, ok := commandUses[l]; !ok {
			t.Errorf("command %q is not in commandUses: say whether it creates, waits, only reads, needs the secrets", l)
		}
	}
	for name, u := range commandUses {
		if !slices.Contains(leaves, name) {
			t.Errorf("commandUses names %q, which is no command", name)
		}
		if want := name == "run" || name == "migrate" || name == "demo"; u.create != want {
			t.Errorf("%s: create %v", name, u.create)
		}
		if want := name == "run" || name == "migrate"; u.wait != want {
			t.Errorf("%s: wait %v", name, u.wait)
		}
		if u.readOnly && (u.secrets != nil || u.create) {
			t.Errorf("%s reads only, yet %+v", name, u)
		}
	}
}

func TestInvalidFlagValuesExit2NamingTheFlag(t *testing.T) {
	t.Parallel()
	e := newEnvOn(t, "sqlite", onecsim.Options{}, true)
	for _, tc := range []struct {
		args []string
		flag string
	}{
		{[]string{"journal", "list", "--status", "stuck"}, "--status"},
		{[]string{"journal", "list", "--limit", "-1"}, "--limit"},
		{[]string{"journal", "list", "--limit", "many"}, "--limit"},
		{[]string{"journal", "list", "--since", "soon"}, "--since"},
		{[]string{"journal", "list", "--format", "xml"}, "--format"},
		{[]string{"journal", "list", "--warnings=maybe"}, "--warnings"},
		{[]string{"journal", "list", "--no-such-flag"}, "--no-such-flag"},
		{[]string{"journal", "show", "site:order:1:create", "--format", "xml"}, "--format"},
		{[]string{"inbox", "list", "--status", "stuck"}, "--status"},
		{[]string{"inbox", "list", "--limit", "-5"}, "--limit"},
		{[]string{"inbox", "list", "--format", "xml"}, "--format"},
		{[]string{"inbox", "show", "site", "ev-1", "--format", "xml"}, "--format"},
		{[]string{"outbox", "status", "--format", "xml"}, "--format"},
		{[]string{"outbox", "list", "--limit", "-1"}, "--limit"},
		{[]string{"outbox", "list", "--format", "xml"}, "--format"},
		{[]string{"outbox", "list", "--dead=maybe"}, "--dead"},
		{[]string{"outbox", "requeue", "--all-dead=maybe"}, "--all-dead"},
		{[]string{"outbox", "replay"}, "--aggregate"},
		{[]string{"connectors", "status", "--format", "xml"}, "--format"},
		{[]string{"order", "import", "--format", "xml"}, "--format"},
		{[]string{"order", "cancel", "site", "A-1", "--format", "xml"}, "--format"},
		{[]string{"resync", "site:order:1:create", "--format", "xml"}, "--format"},
		{[]string{"resync", "--status", "done"}, "--status"},
		{[]string{"resync", "--status", "failed", "--since", "soon"}, "--since"},
		{[]string{"resync", "--status", "failed", "--dry-run=maybe"}, "--dry-run"},
		{[]string{"stock", "snapshot", "--wait", "-1s"}, "--wait"},
		{[]string{"stock", "snapshot", "--wait", "soon"}, "--wait"},
		{[]string{"stock", "snapshot", "--format", "xml"}, "--format"},
		{[]string{"stock", "show", "--format", "xml"}, "--format"},
		{[]string{"stock", "show", "--at", "yesterday"}, "--at"},
		{[]string{"stock", "diff", "a", "b", "--format", "xml"}, "--format"},
		{[]string{"stock", "status", "--limit", "-1"}, "--limit"},
		{[]string{"stock", "status", "--format", "xml"}, "--format"},
		{[]string{"sim", "onec", "--latency", "-1s"}, "--latency"},
		{[]string{"sim", "onec", "--latency", "soon"}, "--latency"},
		{[]string{"sim", "onec", "--listen", "nowhere"}, "--listen"},
		{[]string{"sim", "onec", "--listen", "127.0.0.1:70000"}, "--listen"},
		{[]string{"demo", "--keep=maybe"}, "--keep"},
		{[]string{"journal", "list", "--config", "/nonexistent/ordersync.yaml"}, "/nonexistent/ordersync.yaml"},
	} {
		stdout, stderr, code := e.cli("", tc.args...)
		msg := wantOneLine(t, strings.Join(tc.args, " "), stderr)
		if code != exitUsage || !strings.Contains(msg, tc.flag) {
			t.Errorf("%s: exit %d stderr %q stdout %q; want 2 naming %s", strings.Join(tc.args, " "), code, msg, stdout, tc.flag)
		}
	}
}

// runBinary runs the real ordersync in dir with exactly env (and PATH).
func runBinary(t *testing.T, dir string, env []string, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=/usr/bin:/bin"}, env...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatal(err)
	}
	return out.String(), errb.String(), cmd.ProcessState.ExitCode()
}

// entries lists dir.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range des {
		names = append(names, d.Name())
	}
	return names
}

// With no database.url a command looks for the service's journal and never creates
// one: it exits 1 naming the places it looked. Only run, migrate and demo create it.
func TestACommandNeverCreatesAJournalItWasNotAskedTo(t *testing.T) {
	t.Parallel()
	service := filepath.Join(sqlite.ServiceDir, sqlite.FileName)
	if _, err := os.Stat(service); err == nil {
		t.Skipf("this machine has the service's journal %s: the lookup would find it", service)
	}
	dir, state := t.TempDir(), t.TempDir()
	onec := "ORDERSYNC_ONEC__BASE_URL=http://127.0.0.1:1/trade/hs/ordersync/v1"
	for _, withState := range []bool{false, true} {
		env := []string{onec}
		places := []string{service, filepath.Join(dir, sqlite.FileName)}
		if withState {
			env = append(env, "STATE_DIRECTORY="+state)
			places = append(places, filepath.Join(state, sqlite.FileName))
		}
		for _, args := range [][]string{
			{"journal", "list"}, {"journal", "show", "site:order:1:create"}, {"inbox", "list"}, {"outbox", "status"},
			{"outbox", "list"}, {"connectors", "status"}, {"stock", "show"}, {"stock", "status"},
			{"order", "import", "-"}, {"outbox", "requeue", "--all-dead"}, {"resync", "--status", "failed"},
		} {
			args = append(args, "--config", os.DevNull)
			_, stderr, code := runBinary(t, dir, env, "", args...)
			msg := wantOneLine(t, strings.Join(args, " "), stderr)
			if code != exitFailed {
				t.Errorf("%v: exit %d, want 1: %s", args, code, msg)
			}
			for _, p := range places {
				if !strings.Contains(msg, p) {
					t.Errorf("%v: %q does not name %s", args, msg, p)
				}
			}
			if got := append(entries(t, dir), entries(t, state)...); len(got) != 0 {
				t.Fatalf("%v left %v", args, got)
			}
		}
	}
	// A sqlite URL naming a file that does not exist: named, not created.
	missing := filepath.Join(dir, "journal.db")
	_, stderr, code := runBinary(t, dir, []string{"ORDERSYNC_DATABASE__URL=sqlite://" + missing}, "", "journal", "list", "--config", os.DevNull)
	if msg := wantOneLine(t, "sqlite URL", stderr); code != exitFailed || !strings.Contains(msg, missing) || !strings.Contains(msg, "ordersync migrate") {
		t.Errorf("a sqlite URL of a missing file: exit %d %q", code, msg)
	}
	if _, err := os.Stat(missing); err == nil {
		t.Fatal("journal list created the file database.url names")
	}

	// migrate creates it in the working directory; then the commands find it and say so.
	if _, stderr, code := runBinary(t, dir, nil, "", "migrate", "--config", os.DevNull); code != 0 {
		t.Fatalf("migrate: exit %d %s", code, stderr)
	}
	here := filepath.Join(dir, sqlite.FileName)
	if _, err := os.Stat(here); err != nil {
		t.Fatalf("migrate did not create %s: %v", here, err)
	}
	out, stderr, code := runBinary(t, dir, nil, "", "journal", "list", "--config", os.DevNull, "--format", "json")
	msg := wantOneLine(t, "journal list", stderr)
	if code != 0 || strings.TrimSpace(out) != "[]" || !strings.Contains(msg, "journal "+here) || !strings.Contains(msg, "working directory") {
		t.Fatalf("journal list beside the file: exit %d out %q stderr %q", code, out, msg)
	}
	// STATE_DIRECTORY comes first (migrate, elsewhere, creates its file there).
	if _, stderr, code := runBinary(t, t.TempDir(), []string{"STATE_DIRECTORY=" + state}, "", "migrate", "--config", os.DevNull); code != 0 {
		t.Fatalf("migrate with STATE_DIRECTORY: exit %d %s", code, stderr)
	}
	_, stderr, _ = runBinary(t, dir, []string{"STATE_DIRECTORY=" + state}, "", "outbox", "status", "--config", os.DevNull)
	if !strings.Contains(stderr, "journal "+filepath.Join(state, sqlite.FileName)+" ($STATE_DIRECTORY)") {
		t.Fatalf("with STATE_DIRECTORY: %q", stderr)
	}
	// A failing command names the journal in its one line.
	_, stderr, code = runBinary(t, dir, nil, "", "journal", "show", "site:order:404:create", "--config", os.DevNull)
	if msg := wantOneLine(t, "journal show", stderr); code != exitFailed || !strings.Contains(msg, "journal "+here) {
		t.Fatalf("journal show of an unknown key: exit %d %q", code, msg)
	}
}

// A command that only reads never writes the embedded file: it does not migrate a
// schema that is behind (it says to run migrate); a command that writes does.
func TestReadOnlyCommandsNeverWriteTheEmbeddedFile(t *testing.T) {
	t.Parallel()
	e := newEnvOn(t, "sqlite", onecsim.Options{}, false)
	path := filepath.Join(e.stateDir, sqlite.FileName)
	if err := os.WriteFile(path, nil, 0o600); err != nil { // an empty database: schema version 0
		t.Fatal(err)
	}
	for _, args := range [][]string{{"journal", "list"}, {"inbox", "list"}, {"outbox", "status"}, {"connectors", "status"}, {"stock", "status"}} {
		_, stderr, code := e.cli("", args...)
		if msg := wantOneLine(t, strings.Join(args, " "), stderr); code != exitFailed || !strings.Contains(msg, "ordersync migrate") {
			t.Errorf("%v on a schema that is behind: exit %d %q; want 1 and advice to migrate", args, code, msg)
		}
		if fi, err := os.Stat(path); err != nil || fi.Size() != 0 {
			t.Fatalf("%v wrote the file: %v %v", args, fi.Size(), err)
		}
	}
	if _, stderr, code := e.cli("", "outbox", "requeue", "--all-dead"); code != 0 {
		t.Fatalf("outbox requeue migrates the embedded file on the spot: exit %d %s", code, stderr)
	}
	if _, stderr, code := e.cli("", "journal", "list"); code != 0 {
		t.Fatalf("journal list after: exit %d %s", code, stderr)
	}
}

// With the example configuration and none of its credentials present (they exist
// only inside the unit, /run/credentials/ordersync.service/…), the commands that
// talk neither to 1C nor to a sender work; run and config check name the missing
// files.
func TestExampleConfigWithoutCredentials(t *testing.T) {
	t.Parallel()
	example, err := filepath.Abs("../../configs/ordersync.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("/run/credentials/ordersync.service"); err == nil {
		t.Skip("this machine has the unit's credentials")
	}
	env := []string{"ORDERSYNC_DATABASE__URL=" + testdb.URL(t), "ORDERSYNC_LOG__FORMAT=json"}
	cli := func(args ...string) (string, string, int) {
		var out, errb bytes.Buffer
		code := Main(context.Background(), append(args, "--config", example), strings.NewReader(""), &out, &errb, env)
		return out.String(), errb.String(), code
	}
	if _, stderr, code := cli("migrate"); code != 0 {
		t.Fatalf("migrate with the example config: exit %d %s", code, stderr)
	}
	for _, args := range [][]string{
		{"journal", "list"}, {"journal", "list", "--limit", "0", "--format", "csv"}, {"inbox", "list"},
		{"outbox", "status"}, {"outbox", "list"}, {"connectors", "status"}, {"stock", "status"},
		{"outbox", "requeue", "--all-dead"},
	} {
		if out, stderr, code := cli(args...); code != 0 {
			t.Errorf("%v with the example config: exit %d out %q stderr %q", args, code, out, stderr)
		}
	}
	for _, args := range [][]string{{"journal", "show", "site:order:404:create"}, {"stock", "show"}, {"inbox", "show", "site", "ev-404"}} {
		if _, stderr, code := cli(args...); code != exitFailed || strings.Contains(stderr, "credentials") {
			t.Errorf("%v: exit %d %q, want 1 for what is not there, not for the credentials", args, code, stderr)
		}
	}
	_, stderr, code := cli("run")
	if code != exitUsage || !strings.Contains(stderr, "onec.password_file") || !strings.Contains(stderr, "/run/credentials/ordersync.service/onec-password") {
		t.Errorf("run without the credentials: exit %d %q; want 2 naming onec.password_file", code, stderr)
	}
	_, stderr, code = cli("config", "check")
	if code != exitUsage || !strings.Contains(stderr, "relay.destinations.crm.secrets_file") {
		t.Errorf("config check without the credentials: exit %d %q", code, stderr)
	}
}

func TestLimitZeroListsEveryRowAPageAtATime(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"postgres", "sqlite"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			e := newEnvOn(t, backend, onecsim.Options{}, true)
			const n = listing.PageSize + 23 // more than a page
			var lines []string
			for i := range n {
				lines = append(lines, orderJSON(fmt.Sprintf("L-%04d", i), "SKU-1", "1", "10"))
			}
			if _, stderr, code := e.cli(strings.Join(lines, "\n"), "order", "import"); code != 0 {
				t.Fatalf("import: exit %d %s", code, stderr)
			}
			keys := func(args ...string) []string {
				t.Helper()
				out, stderr, code := e.cli("", append([]string{"journal", "list", "--format", "json"}, args...)...)
				var rows []struct{ Key string }
				if err := json.Unmarshal([]byte(out), &rows); err != nil || code != 0 {
					t.Fatalf("journal list %v: exit %d %v %s", args, code, err, stderr)
				}
				var ks []string
				for _, r := range rows {
					ks = append(ks, r.Key)
				}
				return ks
			}
			if got := keys(); len(got) != 100 {
				t.Fatalf("the default limit lists %d, want 100", len(got))
			}
			all := keys("--limit", "0")
			if len(all) != n {
				t.Fatalf("--limit 0 lists %d of %d", len(all), n)
			}
			if c := slices.Clone(all); len(slices.Compact(func() []string { slices.Sort(c); return c }())) != n {
				t.Fatal("--limit 0 lists an operation twice")
			}
			if got := keys("--limit", fmt.Sprint(n+100)); !slices.Equal(got, all) {
				t.Fatal("--limit 0 and one page of everything differ")
			}
			if got := keys("--limit", fmt.Sprint(listing.PageSize+5)); !slices.Equal(got, all[:listing.PageSize+5]) {
				t.Fatalf("--limit %d: %d rows, not the first ones", listing.PageSize+5, len(got))
			}
			out, _, _ := e.cli("", "journal", "list", "--limit", "0", "--format", "csv")
			r := csv.NewReader(strings.NewReader(strings.TrimPrefix(out, "\uFEFF"))) // ui.lang ru: ';', as a Russian Excel reads it
			r.Comma = ';'
			recs, err := r.ReadAll()
			if err != nil || len(recs) != n+1 {
				t.Fatalf("csv: %d records %v, want a header and %d", len(recs), err, n)
			}
			out, _, _ = e.cli("", "journal", "list", "--limit", "0")
			if got := strings.Count(out, "\n"); got != n+1 {
				t.Fatalf("table: %d lines, want a header and %d", got, n)
			}
			for _, args := range [][]string{{"inbox", "list", "--limit", "0", "--format", "json"}, {"outbox", "list", "--limit", "0", "--format", "json"}} {
				out, stderr, code := e.cli("", args...)
				var rows []json.RawMessage
				if err := json.Unmarshal([]byte(out), &rows); err != nil || code != 0 {
					t.Fatalf("%v: exit %d %v %q %s", args, code, err, out, stderr)
				}
			}
		})
	}
}

func TestConnectorsStatusShowsEveryConnectorAsConfigured(t *testing.T) {
	t.Parallel()
	e := newEnv(t, onecsim.Options{}, true)
	// Kaspi enabled, its token in a credential only the service has: status reads
	// no secret, and shows the three connectors and their returns as configured.
	e.environ = append(e.environ, "ORDERSYNC_CONNECTORS__KASPI__ENABLED=true", "ORDERSYNC_CONNECTORS__KASPI__WAREHOUSE=WH1",
		"ORDERSYNC_CONNECTORS__KASPI__TOKEN_FILE=/run/credentials/ordersync.service/kaspi-token")
	out, stderr, code := e.cli("", "connectors", "status", "--format", "json")
	var rows []struct {
		Connector, Config string
		Enabled           bool
	}
	if err := json.Unmarshal([]byte(out), &rows); err != nil || code != 0 {
		t.Fatalf("connectors status: exit %d %v %s %s", code, err, out, stderr)
	}
	want := []struct {
		Connector, Config string
		Enabled           bool
	}{{"kaspi", "connectors.kaspi", true}, {"ozon", "connectors.ozon", false}, {"wb", "connectors.wildberries", false},
		{"ym", "connectors.yandex_market", false}, {"uzum", "connectors.uzum", false},
		{"kaspi.returns", "connectors.kaspi.returns", true}, {"ozon.returns", "connectors.ozon.returns", false},
		{"wb.returns", "connectors.wildberries.returns", false}}
	if !slices.Equal(rows, want) {
		t.Fatalf("connectors status: %+v, want %+v", rows, want)
	}
	table, _, _ := e.cli("", "connectors", "status")
	for _, w := range []string{"kaspi", "true", "ozon", "false", "wb"} {
		if !strings.Contains(table, w) {
			t.Errorf("the table lacks %q:\n%s", w, table)
		}
	}
	// run needs the token: it refuses, naming the file.
	if _, stderr, code := e.cli("", "run"); code != exitUsage || !strings.Contains(stderr, "connectors.kaspi.token_file") {
		t.Errorf("run without the token: exit %d %q", code, stderr)
	}
}

func TestConfigCheckNamesEveryBadLineOfTheSKUMap(t *testing.T) {
	t.Parallel()
	e := newEnv(t, onecsim.Options{}, true)
	path := filepath.Join(t.TempDir(), "sku-map.csv")
	os.WriteFile(path, []byte("marketplace,marketplace_sku,onec_sku\nwb,1,SKU-1\nwildberries,2,SKU-2\nKaspi,3,SKU-3\n"), 0o600)
	env := append(slices.Clone(e.environ), "ORDERSYNC_CONNECTORS__SKU_MAP="+path)
	var out, errb bytes.Buffer
	if code := Main(context.Background(), []string{"config", "check"}, nil, &out, &errb, env); code != 0 {
		t.Fatalf("config check of a map naming wb and wildberries: exit %d %s", code, errb.String())
	}
	os.WriteFile(path, []byte("marketplace,marketplace_sku,onec_sku\nwb,1,SKU-1\nwilberries,2,SKU-2\nozon,3,SKU-3\nmarket,4,SKU-4\n"), 0o600)
	errb.Reset()
	code := Main(context.Background(), []string{"config", "check"}, nil, &out, &errb, env)
	if code != exitUsage || !strings.Contains(errb.String(), path+`: line 3: unknown marketplace "wilberries"`) ||
		!strings.Contains(errb.String(), path+`: line 5: unknown marketplace "market"`) {
		t.Fatalf("config check of a bad map: exit %d\n%s", code, errb.String())
	}
	errb.Reset()
	if code := Main(context.Background(), []string{"run"}, nil, &out, &errb, env); code != exitUsage || !strings.Contains(errb.String(), "line 3") {
		t.Fatalf("run with a bad map: exit %d %s", code, errb.String())
	}
}

func TestEveryDecodeErrorOfAConfigFileAtOnce(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "ordersync.yaml")
	os.WriteFile(path, []byte("onec:\n  timeout: 30\n  timeout: 40s\n  max_concurrency: four\nworker:\n  backoff_min: soon\nhttp:\n  listen: 8080\nlog:\n  levle: info\n"), 0o600)
	var out, errb bytes.Buffer
	code := Main(context.Background(), []string{"config", "check", "--config", path}, nil, &out, &errb, []string{})
	want := []string{`line 3: mapping key "timeout" already defined at line 2`, "onec.timeout", "onec.max_concurrency", "worker.backoff_min", "http.listen", "log.levle"}
	for _, w := range want {
		if !strings.Contains(errb.String(), w) {
			t.Errorf("config check does not report %q:\n%s", w, errb.String())
		}
	}
	if code != exitUsage || !strings.Contains(errb.String(), fmt.Sprintf("%d problem(s)", len(want))) {
		t.Errorf("config check: exit %d\n%s", code, errb.String())
	}
	errb.Reset()
	code = Main(context.Background(), []string{"journal", "list", "--config", path}, nil, &out, &errb, []string{})
	// Any other command says them as config check does: one a line, then the count.
	lines := strings.Split(strings.TrimSpace(errb.String()), "\n")
	if len(lines) != len(want)+1 || lines[len(lines)-1] != fmt.Sprintf("ordersync: config: %d problem(s) found", len(want)) {
		t.Errorf("journal list: want %d problems one a line, then the count:\n%s", len(want), errb.String())
	}
	for _, w := range want {
		n := 0
		for _, l := range lines {
			if strings.Contains(l, w) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("journal list reports %q on %d lines, want 1:\n%s", w, n, errb.String())
		}
	}
	if code != exitUsage {
		t.Errorf("journal list: exit %d", code)
	}
}

// run and migrate wait for a PostgreSQL that does not answer yet, logging each try
// (the server, never the password), up to database.connect_timeout; other commands
// fail at once. The command starts first, then the server.
func TestRunAndMigrateWaitForTheDatabase(t *testing.T) {
	t.Parallel()
	c := testdb.StartCluster(t)
	c.Stop()
	target := fmt.Sprintf("127.0.0.1:%d/test", c.Port())
	e := newEnv(t, onecsim.Options{}, false)
	e.environ = append(e.environ, "ORDERSYNC_DATABASE__URL="+strings.Replace(c.URL(), "postgres@", "postgres:never-shown@", 1),
		"ORDERSYNC_DATABASE__CONNECT_TIMEOUT=3m")

	// Another command fails at once.
	start := time.Now()
	_, stderr, code := e.cli("", "journal", "list")
	if msg := wantOneLine(t, "journal list", stderr); code != exitFailed || !strings.Contains(msg, target) || time.Since(start) > time.Minute {
		t.Fatalf("journal list with the server down: exit %d after %s: %q", code, time.Since(start), msg)
	}

	var logs []*lockedBuffer
	background := func(ctx context.Context, args ...string) (<-chan int, *lockedBuffer) {
		done, log := make(chan int, 1), &lockedBuffer{}
		logs = append(logs, log)
		go func() { done <- Main(ctx, args, strings.NewReader(""), &bytes.Buffer{}, log, e.environ) }()
		return done, log
	}
	waitLog := func(log *lockedBuffer, msg string) {
		t.Helper()
		eventually.True(t, msg+" in the log", func() bool { return strings.Contains(log.String(), msg) })
	}
	exit := func(done <-chan int, log *lockedBuffer) int {
		t.Helper()
		select {
		case code := <-done:
			return code
		case <-time.After(2 * time.Minute):
			t.Fatalf("the command did not end; its log:\n%s", log.String())
			return -1
		}
	}

	// migrate waits, then migrates once the server is up.
	done, log := background(context.Background(), "migrate")
	waitLog(log, "the database does not answer yet")
	var try struct {
		Msg, Database, Err string
		Try                int
	}
	for _, line := range strings.Split(log.String(), "\n") {
		if json.Unmarshal([]byte(line), &try) == nil && try.Msg == "the database does not answer yet; trying again" {
			break
		}
	}
	if !strings.Contains(try.Database, target) || try.Try != 1 || try.Err == "" {
		t.Fatalf("the try's log line: %+v", try)
	}
	c.Start()
	if code := exit(done, log); code != 0 {
		t.Fatalf("migrate: exit %d; log:\n%s", code, log.String())
	}
	if !strings.Contains(log.String(), "the database answers") {
		t.Errorf("migrate does not say when the database answered:\n%s", log.String())
	}

	// run waits likewise; it starts once the server is up, and stops with exit 0.
	c.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done, log = background(ctx, "run")
	waitLog(log, "the database does not answer yet")
	c.Start()
	waitLog(log, "the database answers")
	cancel()
	if code := exit(done, log); code != 0 {
		t.Fatalf("run: exit %d; log:\n%s", code, log.String())
	}

	// A stop requested while run waits is a clean stop.
	c.Stop()
	ctx, cancel = context.WithCancel(context.Background())
	done, log = background(ctx, "run")
	waitLog(log, "the database does not answer yet")
	cancel()
	if code := exit(done, log); code != 0 {
		t.Fatalf("run stopped while waiting: exit %d; log:\n%s", code, log.String())
	}

	// database.connect_timeout bounds the wait.
	e.environ = append(e.environ, "ORDERSYNC_DATABASE__CONNECT_TIMEOUT=1s")
	_, stderr, code = e.cli("", "migrate")
	if code != exitFailed || !strings.Contains(stderr, "database.connect_timeout") || !strings.Contains(stderr, target) {
		t.Fatalf("migrate past database.connect_timeout: exit %d %s", code, stderr)
	}
	c.Start() // as the cluster's clean-up expects it
	for _, l := range logs {
		if strings.Contains(l.String()+stderr, "never-shown") {
			t.Fatalf("the password reached the log:\n%s%s", l.String(), stderr)
		}
	}
}
