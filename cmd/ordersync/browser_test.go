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

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"
	"github.com/xuri/excelize/v2"
	"golang.org/x/crypto/bcrypt"

	"github.com/ordersync/ordersync/internal/eventually"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/journal/export"
	"github.com/ordersync/ordersync/internal/sim"
	"github.com/ordersync/ordersync/internal/sim/onecsim"
)

// chromium finds Debian's chromium; a machine without it fails the browser tests
// (.ci/run installs it), since they are what proves the pages work in a browser.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("chromium not found: install Debian's chromium (apt-get install chromium) for the pages' browser tests")
	return ""
}

// artifactDir is where the browser tests leave their screenshots:
// $ORDERSYNC_TEST_ARTIFACTS when set (make test sets it), else the test's
// artifact directory.
func artifactDir(t *testing.T) string {
	if d := os.Getenv("ORDERSYNC_TEST_ARTIFACTS"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	return t.ArtifactDir()
}

// newBrowser starts one headless Chromium for the test; each person gets a
// context of their own (their own cookies) from newPerson.
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
		chromedp.NoSandbox, // root in CI containers
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1400, 1000),
	)
	alloc, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	ctx, cancelB := chromedp.NewContext(alloc)
	t.Cleanup(cancelB)
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		t.Fatalf("starting chromium: %v", err)
	}
	return ctx
}

// newPerson is a fresh browser context (no cookies shared with the others).
func newPerson(t *testing.T, b context.Context) context.Context {
	t.Helper()
	ctx, cancel := chromedp.NewContext(b, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil { // creates the browser context and its tab
		t.Fatalf("a browser context: %v", err)
	}
	ctx, cancelT := context.WithTimeout(ctx, 4*time.Minute) // a loaded machine is slow, never this slow
	t.Cleanup(cancelT)
	return ctx
}

func browse(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, actions...); err != nil {
		url, _ := chromedp.Run(ctx, chromedp.Location())
		t.Fatalf("%s (at %s): %v", what, url, err)
	}
}

// value runs one action that answers a value.
func value[T any](t *testing.T, ctx context.Context, what string, a chromedp.Action[T]) T {
	t.Helper()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		url, _ := chromedp.Run(ctx, chromedp.Location())
		t.Fatalf("%s (at %s): %v", what, url, err)
	}
	return v
}

// css is a CSS selector (a plain string would be a DOM search, which also
// matches text).
type css = chromedp.CSS

func count(t *testing.T, ctx context.Context, sel string) int {
	t.Helper()
	return len(value(t, ctx, "counting "+sel, chromedp.Nodes(css(sel), chromedp.AtLeast(0))))
}

func attr(t *testing.T, ctx context.Context, sel, name string) string {
	t.Helper()
	return value(t, ctx, "reading "+sel+" "+name, chromedp.AttributeValue(css(sel), name)).Value
}

func signIn(t *testing.T, ctx context.Context, base, name, password string) {
	t.Helper()
	browse(t, ctx, "signing in as "+name,
		chromedp.Navigate(base+"/ui/journal"),
		chromedp.WaitVisible(css(`form#signin`)),
		chromedp.SendKeys(css(`form#signin input[name=name]`), name),
		chromedp.SendKeys(css(`form#signin input[name=password]`), password),
		chromedp.Submit(css(`form#signin`)),
		chromedp.WaitVisible(css(`body[data-page=journal]`)),
	)
}

// uiBase is the pages' address, once the service's log says where they listen.
func uiBase(t *testing.T, log *lockedBuffer) string {
	t.Helper()
	var base string
	eventually.True(t, "the UI's listening address in the log", func() bool {
		for _, line := range strings.Split(log.String(), "\n") {
			var rec struct{ Msg, URL string }
			if json.Unmarshal([]byte(line), &rec) == nil && strings.HasPrefix(rec.Msg, "ui: listening on ") {
				base = strings.TrimSuffix(rec.URL, "/ui/journal")
			}
		}
		return base != ""
	})
	return base
}

// screenshot writes the full page as a PNG artifact.
func screenshot(t *testing.T, ctx context.Context, name string) string {
	t.Helper()
	png := value(t, ctx, "screenshot "+name, chromedp.FullScreenshot(100)) // 100: PNG, not JPEG
	if !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) {
		t.Fatalf("screenshot %s is not a PNG", name)
	}
	path := filepath.Join(artifactDir(t), name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
	return path
}

// download clicks sel with downloads going to dir and returns the file once the
// browser says the download completed (a file that merely appeared may still be
// being written).
func download(t *testing.T, ctx context.Context, sel, dir string) string {
	t.Helper()
	events := true
	if _, err := chromedp.CallBrowser(ctx, browser.SetDownloadBehavior, browser.SetDownloadBehaviorParams{
		Behavior: browser.SetDownloadBehaviorBehaviorAllowAndName, DownloadPath: dir,
		BrowserContextID: chromedp.FromContext(ctx).BrowserContextID, EventsEnabled: &events,
	}); err != nil {
		t.Fatalf("allowing downloads: %v", err)
	}
	evctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	progress := chromedp.BrowserEvents(evctx, browser.DownloadProgress) // subscribed before the click
	browse(t, ctx, "downloading "+sel, chromedp.Click(css(sel)))
	for ev, err := range progress {
		if err != nil {
			t.Fatalf("downloading %s: %v", sel, err)
		}
		switch ev.State {
		case browser.DownloadProgressStateCompleted:
			if ev.FilePath != "" {
				return ev.FilePath
			}
			return filepath.Join(dir, ev.GUID) // allowAndName: the file is named by its guid
		case browser.DownloadProgressStateCanceled:
			t.Fatalf("the download of %s was cancelled", sel)
		}
	}
	t.Fatalf("the download of %s did not complete", sel)
	return ""
}

// forgedPost POSTs form from the page, as a script another site planted would,
// and returns the status.
func forgedPost(t *testing.T, ctx context.Context, path string, form map[string]string) int {
	t.Helper()
	body, _ := json.Marshal(form)
	return value(t, ctx, "POST "+path, chromedp.Evaluate[int](fmt.Sprintf(
		`fetch(%q, {method: "POST", body: new URLSearchParams(%s), credentials: "same-origin", redirect: "manual"}).then(r => r.status)`,
		path, body), chromedp.EvalAwaitPromise))
}

// TestTheAccountantsPagesInABrowser drives the pages in headless Chromium against
// the real service: an accountant signs in, finds one order by its marketplace
// number, by 1C's external id and by the 1C number, opens its timeline after a lost
// reply and a conflict, and exports 250 operations as CSV and XLSX; a viewer has no
// resync button and a forged POST is refused; an operator's resync lands in the
// timeline and its attempt names her.
func TestTheAccountantsPagesInABrowser(t *testing.T) {
	t.Parallel()
	bctx := newBrowser(t)
	e := newEnvOn(t, "postgres", onecsim.Options{KnownSKUs: []string{"SKU-1"}}, true)

	// A lost reply: 1C creates the kaspi order and the answer never comes.
	e.onec.Faults.Add(1, sim.Fault{Op: "create", Kind: onecsim.DropAfterCreate, ExternalID: "kaspi:512344101"})
	const n = 250
	var lines []string
	lines = append(lines, strings.Replace(orderJSON("512344101", "SKU-1", "2", "1500.10"), `"source":"site"`, `"source":"kaspi"`, 1))
	lines = append(lines, orderJSON("BAD-1", "SKU-NEW", "1", "10.00")) // 1C refuses the SKU: failed
	for i := range n - 2 {
		lines = append(lines, orderJSON(fmt.Sprintf("B-%03d", i), "SKU-1", "1", fmt.Sprintf("%d.50", 100+i)))
	}
	lines = recentOrders(lines) // ordered in the list's default period (by the order's date)
	if _, stderr, code := e.cli(strings.Join(lines, "\n"), "order", "import"); code != 0 {
		t.Fatalf("import: exit %d: %s", code, stderr)
	}
	// The marketplace sends the order again, changed: a conflict, nothing overwritten.
	e.cli(recentOrders([]string{strings.Replace(orderJSON("512344101", "SKU-1", "3", "1500.10"), `"source":"site"`, `"source":"kaspi"`, 1)})[0], "order", "import")

	hash := func(pw string) string {
		h, err := bcrypt.GenerateFromPassword([]byte(pw), bcrypt.MinCost)
		if err != nil {
			t.Fatal(err)
		}
		return string(h)
	}
	users, _ := json.Marshal([]map[string]string{
		{"name": "anna", "password_hash": hash("пароль-анны"), "role": "operator"},
		{"name": "vera", "password_hash": hash("vera-pw"), "role": "viewer"},
	})
	e.environ = append(e.environ, "ORDERSYNC_UI__LISTEN=127.0.0.1:0", "ORDERSYNC_UI__USERS="+string(users),
		"ORDERSYNC_UI__TIMEZONE=Asia/Almaty")
	stop, log := e.runWithLog()
	defer stop()
	base := uiBase(t, log)
	js := e.store()
	key := "kaspi:order:512344101:create"
	// Wait for the engine: every good order done, the lost reply found in 1C.
	eventually.True(t, "every good order done and the lost reply found", func() bool {
		done, err := js.List(context.Background(), journal.Filter{Status: journal.StatusDone, Limit: n})
		if err != nil || len(done) != n-1 {
			return false
		}
		failed, _ := js.Get(context.Background(), "site:order:BAD-1:create")
		return failed.Status == journal.StatusFailed
	})
	if got := e.onec.CountExternal("kaspi:512344101"); got != 1 {
		t.Fatalf("1C holds %d orders for kaspi:512344101 after the lost reply, want 1", got)
	}
	d, err := js.Show(context.Background(), key)
	if err != nil || d.Result == nil || !d.Result.Recovered || d.Result.Found || len(d.History) < 2 || len(d.Conflicts) != 1 {
		t.Fatalf("the kaspi order: result %+v, %d attempts, %d conflicts, %v; want it created by ordersync with its reply lost, with a conflict",
			d.Result, len(d.History), len(d.Conflicts), err)
	}
	number := d.Result.Number

	anna := newPerson(t, bctx)
	signIn(t, anna, base, "anna", "пароль-анны")
	if got := count(t, anna, `tr.op`); got == 0 {
		t.Fatal("the journal lists no operation after sign-in")
	}
	screenshot(t, anna, "journal-list.png")

	// Each form a person has reaches the same operation.
	for _, term := range []string{"512344101", "kaspi:512344101", number} {
		browse(t, anna, "searching "+term,
			chromedp.Navigate(base+"/ui/journal"),
			chromedp.WaitVisible(css(`form#filters`)),
			chromedp.SetValue(css(`form#filters input[name=q]`), term),
			chromedp.Submit(css(`form#filters`)),
			chromedp.WaitVisible(css(`tr.op[data-key="`+key+`"]`)),
		)
		if got := count(t, anna, `tr.op`); got != 1 {
			t.Errorf("searching %q lists %d operations, want the one", term, got)
		}
		browse(t, anna, "opening "+key+" from the search for "+term,
			chromedp.Click(css(`tr.op[data-key="`+key+`"] td.key a`)),
			chromedp.WaitVisible(css(`#op`)),
		)
		if opKey := attr(t, anna, `#op`, "data-key"); opKey != key {
			t.Errorf("searching %q opened %q, want %s", term, opKey, key)
		}
	}

	// The timeline after a lost reply and a conflict: both are there.
	browse(t, anna, "reading the timeline",
		chromedp.Navigate(base+"/ui/journal/op?key="+key),
		chromedp.WaitVisible(css(`ol#timeline`)),
	)
	found, recovered := attr(t, anna, `#onec-order`, "data-found"), attr(t, anna, `#onec-order`, "data-recovered")
	said := value(t, anna, "the 1C order's origin", chromedp.Text(css(`#onec-order`)))
	outcomes := value(t, anna, "the attempts", chromedp.Evaluate[[]string](`[...document.querySelectorAll("li.attempt")].map(li => li.dataset.outcome)`))
	if found != "false" || recovered != "true" || !strings.Contains(said, "Создан ordersync") || !strings.Contains(said, "ответ 1С на создание был потерян") {
		t.Errorf("#onec-order data-found=%q data-recovered=%q says %q; want the order ordersync created, its reply lost", found, recovered, said)
	}
	if len(outcomes) < 2 || outcomes[0] != string(journal.OutcomeRetry) || outcomes[len(outcomes)-1] != string(journal.OutcomeDone) {
		t.Errorf("attempts %v, want a retry (the lost reply) and then done", outcomes)
	}
	if got := count(t, anna, `#conflicts .conflict tr.diff`); got == 0 {
		t.Error("the conflict shows no field that differs")
	}
	diffPaths := value(t, anna, "the conflict", chromedp.Evaluate[[]string](`[...document.querySelectorAll("#conflicts tr.diff")].map(tr => tr.dataset.path)`))
	if !slices.ContainsFunc(diffPaths, func(p string) bool { return strings.Contains(p, "quantity") }) {
		t.Errorf("the conflict's differences %v do not name the quantity that changed", diffPaths)
	}
	if got := count(t, anna, `li.event[data-action=registered]`); got != 1 {
		t.Errorf("%d registered events, want 1", got)
	}
	screenshot(t, anna, "operation-timeline.png")

	// Exports of every operation, read back: CSV (ru: ';', a BOM) and XLSX.
	dir := t.TempDir()
	browse(t, anna, "the journal of every operation", chromedp.Navigate(base+"/ui/journal"), chromedp.WaitVisible(css(`a#export-csv`)))
	csvPath := download(t, anna, `a#export-csv`, dir)
	raw, err := os.ReadFile(csvPath)
	if err != nil {
		t.Fatal(err)
	}
	r := csv.NewReader(strings.NewReader(strings.TrimPrefix(string(raw), "\uFEFF")))
	r.Comma = ';'
	recs, err := r.ReadAll()
	if err != nil || len(recs) != n+1 {
		t.Fatalf("the CSV export: %d records, %v; want a header and %d", len(recs), err, n)
	}
	keys := map[string]bool{}
	for _, rec := range recs[1:] {
		keys[rec[3]] = true
	}
	if len(keys) != n || !keys[key] {
		t.Fatalf("the CSV export holds %d distinct keys, want %d with %s", len(keys), n, key)
	}
	xlsxPath := download(t, anna, `a#export-xlsx`, dir)
	f, err := excelize.OpenFile(xlsxPath)
	if err != nil {
		t.Fatalf("the XLSX export does not open: %v", err)
	}
	defer f.Close()
	xrows, err := f.GetRows(export.Sheet)
	if err != nil || len(xrows) != n+1 {
		t.Fatalf("the XLSX export: %d rows, %v; want a header and %d", len(xrows), err, n)
	}
	xkeys := map[string]bool{}
	for _, row := range xrows[1:] {
		xkeys[row[3]] = true
	}
	if len(xkeys) != n {
		t.Fatalf("the XLSX export holds %d distinct keys, want %d", len(xkeys), n)
	}

	// A viewer sees no resync button, and her POSTs are refused, with her own
	// token or a forged one; so is an operator's POST with a forged token.
	vera := newPerson(t, bctx)
	signIn(t, vera, base, "vera", "vera-pw")
	badKey := "site:order:BAD-1:create"
	browse(t, vera, "the viewer opens the failed order", chromedp.Navigate(base+"/ui/journal/op?key="+badKey), chromedp.WaitVisible(css(`#op`)))
	if got := count(t, vera, `form#resync`); got != 0 {
		t.Fatal("a viewer is shown the resync button")
	}
	veraToken := value(t, vera, "the viewer's token", chromedp.Value(css(`form#signout input[name=csrf]`)))
	if got := forgedPost(t, vera, "/ui/journal/resync", map[string]string{"key": badKey, "csrf": veraToken}); got != 403 {
		t.Errorf("a viewer's resync POST answered %d, want 403", got)
	}
	if got := forgedPost(t, vera, "/ui/journal/resync", map[string]string{"key": badKey, "csrf": "forged"}); got != 403 {
		t.Errorf("a viewer's forged POST answered %d, want 403", got)
	}
	browse(t, anna, "the operator opens the failed order", chromedp.Navigate(base+"/ui/journal/op?key="+badKey), chromedp.WaitVisible(css(`form#resync`)))
	if got := forgedPost(t, anna, "/ui/journal/resync", map[string]string{"key": badKey, "csrf": "forged"}); got != 403 {
		t.Errorf("an operator's POST with a forged token answered %d, want 403", got)
	}
	if op, _ := js.Get(context.Background(), badKey); op.Status != journal.StatusFailed {
		t.Fatalf("a refused POST changed the operation: %s", op.Status)
	}

	// The operator's resync, once 1C knows the SKU: it lands in the timeline, and the
	// attempt it triggered names her.
	e.onec.SetKnownSKUs([]string{"SKU-1", "SKU-NEW"})
	browse(t, anna, "the operator resyncs",
		chromedp.Click(css(`form#resync button`)),
		chromedp.WaitVisible(css(`#flash[data-msg=requeued]`)),
		chromedp.WaitVisible(css(`li.event[data-action=requeued][data-actor="ui:anna"]`)),
	)
	eventually.True(t, "the requeued operation done", func() bool {
		op, _ := js.Get(context.Background(), badKey)
		return op.Status == journal.StatusDone
	})
	browse(t, anna, "the timeline after the resync",
		chromedp.Reload(),
		chromedp.WaitVisible(css(`li.attempt[data-outcome=done][data-triggered-by="ui:anna"]`)),
	)
	if got := e.onec.CountExternal("site:BAD-1"); got != 1 {
		t.Fatalf("1C holds %d orders for site:BAD-1 after the resync, want 1", got)
	}
}
