package main

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/shopspring/decimal"

	"github.com/ordersync/ordersync/internal/eventually"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/order"
	"github.com/ordersync/ordersync/internal/sim/onecsim"
)

// TestTheOperationPageInABrowser: against the real service and the simulated 1C,
// an order whose total an operator changed in 1C shows 1C's total now beside the
// marketplace's, the difference marked; a cancelled order's create and cancel say
// so at the top, with the reason; dates read 16.09.2026 10:00; an operation retried
// 460 times fits in two screens of a 1400×900 window, its repeats folded.
func TestTheOperationPageInABrowser(t *testing.T) {
	t.Parallel()
	bctx := newBrowser(t)
	e := newEnvOn(t, "sqlite", onecsim.Options{KnownSKUs: []string{"SKU-1"}}, true)
	lines := []string{orderJSON("D-1", "SKU-1", "2", "2509.50"), orderJSON("X-1", "SKU-1", "1", "100")}
	if _, stderr, code := e.cli(strings.Join(lines, "\n"), "order", "import"); code != 0 {
		t.Fatalf("import: exit %d: %s", code, stderr)
	}

	// An operation retried 460 times (1C answered 503 to each find), then refused
	// for good: written to the journal as the engine writes attempts.
	js := e.store()
	ctx := context.Background()
	long := order.Key("site", "order", "L-1", "create")
	o, err := order.Parse([]byte(orderJSON("L-1", "SKU-1", "1", "10")))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Register(ctx, journal.NewOperation{Key: long, Kind: order.KindCreate, Source: "site", ExternalID: "L-1", Payload: o.Canonical()}); err != nil {
		t.Fatal(err)
	}
	const attempts = 460
	for i := range attempts {
		c, err := js.ClaimKey(ctx, long, "w1")
		if err != nil {
			t.Fatalf("claim %d: %v", i, err)
		}
		f := journal.Finish{Status: journal.StatusPending, Class: journal.ClassTransient, NextAttemptAt: time.Now(),
			Error:     "1c find: transient (HTTP 503): Service Unavailable",
			Exchanges: json.RawMessage(`[{"method":"GET","path":"/orders?external_id=site:L-1","status":503,"error":"503 Service Unavailable"}]`)}
		if i == attempts-1 {
			f = journal.Finish{Status: journal.StatusFailed, Class: journal.ClassPermanent,
				Error: "1c create: permanent (HTTP 422): Не найдена номенклатура SKU-1 [field lines[0].sku] [code invalid]"}
		}
		if err := c.Finish(ctx, f); err != nil {
			t.Fatalf("finish %d: %v", i, err)
		}
	}

	if det, err := js.Show(ctx, long); err != nil || len(det.History) != attempts || det.Status != journal.StatusFailed {
		t.Fatalf("the long operation: %d attempts, %s, %v", len(det.History), det.Status, err)
	}
	e.environ = append(e.environ, "ORDERSYNC_UI__LISTEN=127.0.0.1:0", "ORDERSYNC_UI__TIMEZONE=Asia/Almaty")
	stop, log := e.runWithLog()
	defer stop()
	base := uiBase(t, log)
	done := func(key string) journal.Operation {
		return eventually.Value(t, key+" done", func() (journal.Operation, bool) {
			op, err := js.Get(ctx, key)
			return op, err == nil && op.Status == journal.StatusDone
		})
	}
	d1 := done("site:order:D-1:create")
	done("site:order:X-1:create")
	// An operator edits the order in 1C: 1C's total is no longer the marketplace's.
	if !e.onec.SetTotal(d1.Result.Ref, decimal.RequireFromString("10038")) {
		t.Fatalf("1C holds no order %s", d1.Result.Ref)
	}
	if _, stderr, code := e.cli("", "order", "cancel", "site", "X-1", "--reason", "покупатель отказался"); code != 0 {
		t.Fatalf("cancel: exit %d: %s", code, stderr)
	}
	done("site:order:X-1:cancel")

	anna := newPerson(t, bctx)
	browse(t, anna, "a window of 1400×900", chromedp.EmulateViewport(1400, 900))
	open := func(key string) {
		t.Helper()
		browse(t, anna, "opening "+key, chromedp.Navigate(base+"/ui/journal/op?key="+key), chromedp.WaitVisible(css(`#op`)))
	}
	text := func(sel string) string {
		t.Helper()
		return value(t, anna, "the text of "+sel, chromedp.Text(css(sel)))
	}

	// 1C's total now, beside the marketplace's, the difference marked.
	open("site:order:D-1:create")
	if got := text(`#mp-total`); got != "5\u00a0019,00\u00a0₸" {
		t.Errorf("the marketplace's total reads %q", got)
	}
	if st, differs := attr(t, anna, `#onec-total`, "data-state"), attr(t, anna, `#onec-total`, "data-differs"); st != "asked" || differs != "true" {
		t.Errorf("#onec-total data-state=%q data-differs=%q, want asked and true", st, differs)
	}
	if got := text(`#onec-total`); !strings.Contains(got, "10\u00a0038,00\u00a0₸") || !strings.Contains(got, "\u22125\u00a0019,00\u00a0₸") {
		t.Errorf("#onec-total says %q; want 1C's 10 038,00 ₸ and the difference −5 019,00 ₸", got)
	}
	if got := text(`#order-date`); got != "16.09.2026 10:00" {
		t.Errorf("the marketplace's order date reads %q, want 16.09.2026 10:00", got)
	}
	ru := regexp.MustCompile(`^\d\d\.\d\d\.\d{4} \d\d:\d\d$`)
	for _, when := range value(t, anna, "the page's times", chromedp.Evaluate[[]string](`[...document.querySelectorAll("#op time")].map(t => t.textContent.trim())`)) {
		if !ru.MatchString(when) {
			t.Errorf("a time reads %q, not as 02.12.2026 02:50", when)
		}
	}
	if got := count(t, anna, `#lines tr.line`); got != 1 {
		t.Errorf("the order's lines: %d rows, want 1", got)
	}
	if got := count(t, anna, `form#resync`); got != 0 {
		t.Error("a done operation offers a resync")
	}
	screenshot(t, anna, "operation-total-differs.png")

	// The cancelled order: its create says so at the top, with the reason; its
	// cancel speaks of the cancel and links the create.
	open("site:order:X-1:create")
	if got := attr(t, anna, `#state`, "data-state"); got != "cancelled" {
		t.Errorf("the cancelled order's create: #state %q", got)
	}
	if got := text(`#cancelled-note`); !strings.Contains(got, "Заказ отменён в 1С") || !strings.Contains(got, "покупатель отказался") {
		t.Errorf("#cancelled-note says %q", got)
	}
	open("site:order:X-1:cancel")
	if got := attr(t, anna, `#state`, "data-state"); got != "cancelled" {
		t.Errorf("the cancel's page: #state %q", got)
	}
	if got := text(`main`); strings.Contains(got, "Создан ordersync") {
		t.Error("the cancel's page says «Создан ordersync»")
	}
	if got := text(`#cancel-result`); !strings.Contains(got, "Заказ отменён в 1С.") {
		t.Errorf("the cancel's result says %q", got)
	}
	browse(t, anna, "the cancel's link to its create", chromedp.Click(css(`#create-link`)), chromedp.WaitVisible(css(`#op[data-key="site:order:X-1:create"]`)))
	screenshot(t, anna, "operation-cancelled.png")

	// 460 attempts under two screens; opened, the run is every attempt.
	open(long)
	height := func() int {
		return value(t, anna, "the page's height", chromedp.Evaluate[int](`document.documentElement.scrollHeight`))
	}
	if got := value(t, anna, "the attempts", chromedp.Evaluate[int](`document.querySelectorAll("li.attempt").length`)); got != attempts {
		t.Fatalf("the page holds %d attempts, want %d", got, attempts)
	}
	folded := height()
	if folded >= 2*900 {
		t.Errorf("the 460-attempt page is %d px high, more than two screens of 900", folded)
	}
	if got := text(`li.run summary`); !strings.Contains(got, fmt.Sprintf("ещё %d таких же", attempts-2)) {
		t.Errorf("the folded run says %q", got)
	}
	if got := text(`#last-error`); !strings.Contains(got, "1С отказала") || !strings.Contains(got, "Не найдена номенклатура SKU-1") {
		t.Errorf("the last error reads %q", got)
	}
	// 12: what the page shows is Russian: the engine's English error texts stay
	// folded in <details>, out of the visible text (1C's own message is quoted as
	// 1C's), and durations read the Russian way.
	shown := value(t, anna, "the page's visible text", chromedp.Evaluate[string](`document.querySelector("main").innerText`))
	for _, english := range []string{"permanent", "transient", "unknown outcome", "1c create:", "1c find:", "gave up"} {
		if strings.Contains(shown, english) {
			t.Errorf("the page shows %q outside a folded raw text", english)
		}
	}
	if m := regexp.MustCompile(`\d+ms\b`).FindString(shown); m != "" {
		t.Errorf("a duration reads %q, not in Russian", m)
	}
	screenshot(t, anna, "operation-460-attempts.png")
	browse(t, anna, "opening the run", chromedp.Click(css(`li.run summary`)), chromedp.WaitVisible(css(`ol.run-attempts li.attempt`)))
	if opened := height(); opened <= 4*folded {
		t.Errorf("opened, the run is %d px high against %d folded: the fold hides little", opened, folded)
	}
	t.Logf("the 460-attempt page: %d px folded, %d px opened", folded, height())
}
