package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/shopspring/decimal"

	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/sim/onecsim"
	"github.com/ordersync/ordersync/internal/store/sqlite"
)

// recentOrderTime is when the browser tests' orders were placed at the marketplace:
// an hour ago, to the second, the same for every order of the process (a conflict
// test imports one order twice), so they are in the list's default period, which is
// by the order's own date.
var recentOrderTime = time.Now().Add(-time.Hour).Truncate(time.Second)

// recentOrders dates the orders of orderJSON at recentOrderTime.
func recentOrders(lines []string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = strings.Replace(l, `"created_at":"2026-09-16T10:00:00+05:00"`,
			`"created_at":"`+recentOrderTime.UTC().Format(time.RFC3339)+`"`, 1)
	}
	return out
}

// listOrderJSON is a canonical order of source, placed at created, for customer.
func listOrderJSON(source, id, customer string, created time.Time, sku, qty, price string) string {
	return fmt.Sprintf(`{"source":%q,"external_id":%q,"number":%q,"created_at":%q,`+
		`"customer":{"name":%q,"phone":"+77011234567","email":""},"warehouse":"WH1","currency":"KZT",`+
		`"lines":[{"sku":%q,"name":"Чайник","quantity":%s,"price":%s}],"comment":""}`,
		source, id, id, created.UTC().Format(time.RFC3339), customer, sku, qty, price)
}

// TestTheListInABrowser drives the journal's list in headless Chromium, as an
// accountant in a dispute would: an order registered 40 days ago is found from the
// form (a search looks through the whole journal unless dates were chosen, and the
// page says so); the list is by the order's own date, written the Russian way; a
// cancelled order reads cancelled; 1C's total, from the reconciliation, stands
// beside the order's with the difference marked; the search finds part of a number,
// a name and an amount; the totals count every operation of the filter; the table
// fits a 1400-pixel window and the source is a choice.
func TestTheListInABrowser(t *testing.T) {
	t.Parallel()
	bctx := newBrowser(t)
	e := newEnvOn(t, "sqlite", onecsim.Options{KnownSKUs: []string{"SKU-1"}}, true)
	almaty, err := time.LoadLocation("Asia/Almaty")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()

	// An order ordersync registered 40 days ago, ordered then.
	files, err := filepath.Glob(filepath.Join(e.stateDir, "*.db"))
	if err != nil || len(files) != 1 {
		t.Fatalf("the embedded journal: %v %v", files, err)
	}
	old := now.AddDate(0, 0, -40)
	db, err := sqlite.Open(context.Background(), sqlite.Config{Path: files[0], Now: func() time.Time { return old }})
	if err != nil {
		t.Fatal(err)
	}
	oldJSON := listOrderJSON("site", "OLD-1", "Давний Покупатель", old, "SKU-1", "1", "500")
	if _, err := db.Journal().Register(context.Background(), journal.NewOperation{Key: "site:order:OLD-1:create",
		Kind: "order.create", Source: "site", ExternalID: "OLD-1", Payload: json.RawMessage(oldJSON)}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if out, stderr, code := e.cli("", "resync", "site:order:OLD-1:create"); code != 0 {
		t.Fatalf("resync OLD-1: exit %d: %s %s", code, out, stderr)
	}

	ordered := now.Add(-time.Hour).Truncate(time.Minute)
	lines := []string{
		listOrderJSON("site", "R-1", "Жанна Ахметова", ordered, "SKU-1", "2", "1500.10"),
		listOrderJSON("site", "R-2", "Отказавшийся Покупатель", ordered, "SKU-1", "1", "100"),
		listOrderJSON("kaspi", "512344101", "Покупатель Каспи", ordered, "SKU-1", "1", "700"),
		listOrderJSON("site", "A-000044", "Покупатель Сайта", ordered, "SKU-1", "1", "44"),
		listOrderJSON("site", "BAD-1", "Покупатель", ordered, "SKU-NEW", "1", "10"), // 1C refuses the SKU: failed
		// Ordered 40 days ago, registered now: outside the default period by the order's date.
		listOrderJSON("site", "LATE-1", "Поздний Покупатель", old, "SKU-1", "1", "1"),
	}
	if _, stderr, code := e.cli(strings.Join(lines, "\n"), "order", "import"); code != 0 && !strings.Contains(stderr, "BAD-1") {
		t.Fatalf("import: exit %d: %s", code, stderr)
	}
	if out, stderr, code := e.cli("", "order", "cancel", "site", "R-2", "--reason", "покупатель отказался"); code != 0 {
		t.Fatalf("cancel R-2: exit %d: %s %s", code, out, stderr)
	}
	js := e.store()
	want := map[string]journal.Status{"site:order:OLD-1:create": journal.StatusDone, "site:order:R-1:create": journal.StatusDone,
		"site:order:R-2:create": journal.StatusDone, "site:order:R-2:cancel": journal.StatusDone,
		"kaspi:order:512344101:create": journal.StatusDone, "site:order:A-000044:create": journal.StatusDone,
		"site:order:BAD-1:create": journal.StatusFailed, "site:order:LATE-1:create": journal.StatusDone}
	for k, st := range want {
		if op, err := js.Get(context.Background(), k); err != nil || op.Status != st {
			t.Fatalf("%s: %s %v, want %s", k, op.Status, err, st)
		}
	}
	r1, _ := js.Get(context.Background(), "site:order:R-1:create")
	if !e.onec.SetTotal(r1.Result.Ref, decimal.RequireFromString("2999.99")) {
		t.Fatal("1C's total of R-1 was not changed")
	}
	day := func(t time.Time) string { return t.In(almaty).Format(time.DateOnly) }
	if out, stderr, code := e.cli("", "reconcile", "--source", "site", "--from", day(now.AddDate(0, 0, -6)), "--to", day(now)); code != 0 && code != 1 {
		t.Fatalf("reconcile: exit %d: %s %s", code, out, stderr)
	}
	if op, _ := js.Get(context.Background(), "site:order:R-1:create"); op.OneCSeen == nil || op.OneCSeen.Total == nil {
		t.Fatalf("the reconciliation kept nothing of 1C for R-1: %+v", op.OneCSeen)
	}

	e.environ = append(e.environ, "ORDERSYNC_UI__LISTEN=127.0.0.1:0", "ORDERSYNC_UI__TIMEZONE=Asia/Almaty")
	stop, log := e.runWithLog()
	defer stop()
	base := uiBase(t, log)
	p := newPerson(t, bctx)
	rowKeys := func() []string {
		return value(t, p, "the rows", chromedp.Evaluate[[]string](`[...document.querySelectorAll("tr.op")].map(tr => tr.dataset.key)`))
	}
	search := func(term string) {
		t.Helper()
		browse(t, p, "searching "+term,
			chromedp.Navigate(base+"/ui/journal"),
			chromedp.WaitVisible(css(`form#filters`)),
			chromedp.SetValue(css(`form#filters input[name=q]`), term),
			chromedp.Submit(css(`form#filters`)),
			chromedp.WaitVisible(css(`#period`)),
		)
	}

	// The default list: the last 7 days by the order's date, the old orders not in it.
	browse(t, p, "the journal", chromedp.Navigate(base+"/ui/journal"), chromedp.WaitVisible(css(`#ops`)))
	keys := rowKeys()
	if slices.Contains(keys, "site:order:OLD-1:create") || slices.Contains(keys, "site:order:LATE-1:create") {
		t.Errorf("the default period lists %q: the orders of 40 days ago are in it", keys)
	}
	if !slices.Contains(keys, "site:order:R-1:create") {
		t.Fatalf("the default period lists %q, without R-1", keys)
	}

	// 1: found from the form, however old; the page says it searched everywhere.
	search("OLD-1")
	if got := rowKeys(); !slices.Equal(got, []string{"site:order:OLD-1:create"}) {
		t.Errorf("searching OLD-1 from the form lists %q, want the order registered 40 days ago", got)
	}
	if whole := attr(t, p, `#period`, "data-whole"); whole != "true" {
		t.Errorf("#period data-whole=%q after a search with the form's dates", whole)
	}
	if said := value(t, p, "the period", chromedp.Text(css(`#period`))); !strings.Contains(said, "по всему журналу") {
		t.Errorf("the page says %q, not that it searched the whole journal", said)
	}
	// Dates the person chose are honoured, and said.
	from := day(now.AddDate(0, 0, -2))
	browse(t, p, "searching OLD-1 in chosen dates",
		chromedp.Navigate(base+"/ui/journal?q=OLD-1&from="+from+"&to="+day(now)),
		chromedp.WaitVisible(css(`#period`)))
	if got := rowKeys(); len(got) != 0 {
		t.Errorf("searching OLD-1 in the dates chosen lists %q", got)
	}
	if said := value(t, p, "the period", chromedp.Text(css(`#period`))); !strings.Contains(said, day2ru(from)) || !strings.Contains(said, "по дате заказа") {
		t.Errorf("the page says %q, want the chosen period by the order's date", said)
	}

	// 13: part of a number, a customer's name, an amount.
	for term, wantKeys := range map[string][]string{
		"51234410": {"kaspi:order:512344101:create"},
		"000044":   {"site:order:A-000044:create"},
		"ахметова": {"site:order:R-1:create"},
		"3 000,20": {"site:order:R-1:create"},
		"R-2":      {"site:order:R-2:cancel", "site:order:R-2:create"},
	} {
		search(term)
		got := rowKeys()
		slices.Sort(got)
		if !slices.Equal(got, wantKeys) {
			t.Errorf("searching %q lists %q, want %q", term, got, wantKeys)
		}
	}

	// 5, 4, 3, 16: the whole journal by registration, each row as the accountant reads it.
	browse(t, p, "the whole journal",
		chromedp.Navigate(base+"/ui/journal?by=registered&from=&to="), chromedp.WaitVisible(css(`#ops`)))
	if got := len(rowKeys()); got != len(want) {
		t.Fatalf("the whole journal lists %d operations, want %d", got, len(want))
	}
	cellOf := func(key, class string) string {
		return value(t, p, key+" "+class, chromedp.Text(css(`tr.op[data-key="`+key+`"] td.`+class)))
	}
	stateOf := func(key string) string { return attr(t, p, `tr.op[data-key="`+key+`"]`, "data-state") }
	if got := cellOf("site:order:R-1:create", "created"); got != ordered.In(almaty).Format("02.01.2006 15:04") {
		t.Errorf("R-1's date %q, want the order's own %s, the Russian way", got, ordered.In(almaty).Format("02.01.2006 15:04"))
	}
	if got := cellOf("site:order:LATE-1:create", "created"); got != old.In(almaty).Format("02.01.2006 15:04") {
		t.Errorf("LATE-1's date %q, want the marketplace's %s, not the registration's", got, old.In(almaty).Format("02.01.2006 15:04"))
	}
	if done := cellOf("site:order:R-1:create", "done"); !regexp.MustCompile(`^\d\d\.\d\d\.\d{4} \d\d:\d\d$`).MatchString(done) {
		t.Errorf("R-1's done time %q", done)
	}
	for key, st := range map[string]journal.State{"site:order:R-1:create": journal.StateCreated, "site:order:R-2:create": journal.StateCancelled,
		"site:order:R-2:cancel": journal.StateCancelled, "site:order:BAD-1:create": journal.StateFailed} {
		if got := stateOf(key); got != string(st) {
			t.Errorf("%s: state %q, want %q", key, got, st)
		}
	}
	if got := cellOf("site:order:R-2:create", "state"); got != "отменён в 1С" {
		t.Errorf("the cancelled order's create reads %q, want «отменён в 1С»", got)
	}
	if d := attr(t, p, `tr.op[data-key="site:order:R-1:create"] td.onec-total`, "data-differs"); d != "true" {
		t.Errorf("R-1's 1C total: data-differs=%q, want the difference marked", d)
	}
	if got := cellOf("site:order:R-1:create", "onec-total"); !strings.Contains(got, "2\u00a0999,99") {
		t.Errorf("R-1's 1C total %q, want 2 999,99", got)
	}
	if d := attr(t, p, `tr.op[data-key="site:order:A-000044:create"] td.onec-total`, "data-differs"); d != "false" {
		t.Errorf("A-000044's 1C total: data-differs=%q, want no difference", d)
	}
	if got := cellOf("kaspi:order:512344101:create", "onec-total"); !strings.Contains(got, "сверки не было") {
		t.Errorf("an order no reconciliation covered: %q", got)
	}
	// The totals count every operation of the filter, by state, with money.
	counts := value(t, p, "the totals", chromedp.Evaluate[map[string]string](
		`Object.fromEntries([...document.querySelectorAll("#totals tr[data-count]")].map(tr => [tr.dataset.state || "all", tr.dataset.count]))`))
	if counts["all"] != fmt.Sprint(len(want)) || counts["created"] != "5" || counts["cancelled"] != "2" || counts["failed"] != "1" {
		t.Errorf("totals %v, want all %d: 5 created, 2 cancelled, 1 failed", counts, len(want))
	}
	if sum := value(t, p, "the created sum", chromedp.Text(css(`#totals tr[data-state=created] td:last-child`))); !strings.Contains(sum, "4\u00a0245,20 KZT") {
		t.Errorf("the created orders' sum %q, want 4 245,20 KZT (500 + 3000.20 + 700 + 44 + 1)", sum)
	}

	// 17: the table fits a 1400-pixel window; the source is a choice.
	if w := value(t, p, "the page's width", chromedp.Evaluate[int](`document.documentElement.scrollWidth`)); w > 1400 {
		t.Errorf("the list is %d pixels wide in a 1400-pixel window", w)
	}
	sources := value(t, p, "the sources", chromedp.Evaluate[[]string](`[...document.querySelectorAll("select[name=source] option")].map(o => o.value)`))
	if !slices.Contains(sources, "site") {
		t.Errorf("the source is not a choice of the sources: %q", sources)
	}
	screenshot(t, p, "journal-list-states.png")

	// 15: the reconciliation page of the same week: headed by its source and period,
	// money per category and for the period with the currency, R-1's difference in
	// words, the downloads offered.
	from, to := day(now.AddDate(0, 0, -6)), day(now)
	browse(t, p, "the reconciliation",
		chromedp.Navigate(base+"/ui/reconcile?source=site&from="+from+"&to="+to), chromedp.WaitVisible(css(`#reconcile-heading`)))
	if h := value(t, p, "the heading", chromedp.Text(css(`#reconcile-heading`))); !strings.Contains(h, "site") ||
		!strings.Contains(h, day2ru(from)) || !strings.Contains(h, day2ru(to)) {
		t.Errorf("the reconciliation's heading %q names neither the source nor the period", h)
	}
	if got := value(t, p, "the mismatch's 1C sum", chromedp.Text(css(`#totals tr[data-category=amount_mismatch] td.sum-onec`))); !strings.Contains(got, "2\u00a0999,99\u00a0₸") {
		t.Errorf("the mismatch's 1C sum %q, want 2 999,99 ₸", got)
	}
	if got := value(t, p, "the period's total", chromedp.Text(css(`#period-total td.sum-mp`))); !strings.Contains(got, "₸") {
		t.Errorf("the period's marketplace total %q carries no currency", got)
	}
	note := value(t, p, "R-1's note", chromedp.Evaluate[string](`document.querySelector('tr.item[data-key="site:order:R-1:create"] td.rnote').innerText`))
	if !strings.Contains(note, "0,21\u00a0₸") || strings.Contains(note, "difference") {
		t.Errorf("R-1's note reads %q; want the difference of 0,21 ₸ in words, the English folded away", note)
	}
	if got := count(t, p, `#downloads a[href*="format=csv"]`) + count(t, p, `#downloads a[href*="format=xlsx"]`); got != 2 {
		t.Errorf("the reconciliation offers %d downloads, want CSV and XLSX", got)
	}
	screenshot(t, p, "reconcile-week.png")
}

// day2ru writes a YYYY-MM-DD date as the Russian pages do.
func day2ru(d string) string {
	t, err := time.Parse(time.DateOnly, d)
	if err != nil {
		return d
	}
	return t.Format("02.01.2006")
}
