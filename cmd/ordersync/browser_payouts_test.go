package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	payrec "github.com/ordersync/ordersync/internal/payouts/reconcile"
	"github.com/ordersync/ordersync/internal/sim/onecsim"
)

// TestThePayoutsPageInABrowser reconciles the invented October of Ozon payouts on
// /ui/payouts in headless Chromium: each category is a section holding its planted
// orders, the cabinet is totalled by type, the totals add up, the workbook is
// offered, and the words are Russian. With ORDERSYNC_DOCS_SCREENSHOT set to the
// repository's docs directory it also writes docs/ui-payouts.png.
func TestThePayoutsPageInABrowser(t *testing.T) {
	t.Parallel()
	bctx := newBrowser(t)
	e := newEnvOn(t, "sqlite", onecsim.Options{}, true)
	e.environ = append(e.environ, payoutZone...)
	want, _ := plantPayoutMonth(t, e)
	e.environ = append(e.environ, "ORDERSYNC_UI__LISTEN=127.0.0.1:0")
	stop, log := e.runWithLog()
	defer stop()
	base := uiBase(t, log)
	p := newPerson(t, bctx)

	browse(t, p, "the payouts page from the nav",
		chromedp.Navigate(base+"/ui/journal"), chromedp.WaitVisible(css(`a#nav-payouts`)),
		chromedp.Click(css(`a#nav-payouts`)), chromedp.WaitVisible(css(`form#payouts`)),
		chromedp.SetValue(css(`form#payouts select[name=source]`), "ozon"),
		chromedp.SetValue(css(`form#payouts input[name=from]`), payoutFrom),
		chromedp.SetValue(css(`form#payouts input[name=to]`), payoutTo),
		chromedp.Submit(css(`form#payouts`)),
		chromedp.WaitVisible(css(`#payouts-heading`)))

	got := value(t, p, "the rows by category", chromedp.Evaluate[map[string]string](
		`Object.fromEntries([...document.querySelectorAll("section.payout-category tr.item")].map(tr => [tr.dataset.order, tr.closest("section").dataset.category]))`))
	for id, c := range want {
		if got[id] != string(c) {
			t.Errorf("%s is in the section %q, want %q", id, got[id], c)
		}
	}
	if len(got) != len(want) {
		t.Errorf("the page lists %d orders, want %d: %v", len(got), len(want), got)
	}
	if n := value(t, p, "the sections", chromedp.Evaluate[int](`document.querySelectorAll("section.payout-category").length`)); n != len(payrec.Categories) {
		t.Errorf("%d sections, want one per category", n)
	}
	if h := value(t, p, "the heading", chromedp.Text(css(`#payouts-heading`))); h != "Выплаты Ozon: 01.10.2026 — 31.10.2026" {
		t.Errorf("the heading %q", h)
	}
	if got := value(t, p, "the storage", chromedp.Text(css(`tr.cabinet[data-type="Хранение (услуга размещения)"] td.amount`))); got != "\u2212811,05\u00a0₽" {
		t.Errorf("the storage lines' sum %q, want −811,05 ₽", got)
	}
	if b := attr(t, p, `table#check`, "data-balanced"); b != "true" {
		t.Errorf("the totals do not add up: data-balanced=%q", b)
	}
	if v := attr(t, p, `table#check`, "data-verdict"); v != payrec.StatedNone {
		t.Errorf("verdict %q with no stated total", v)
	}
	note := value(t, p, "the failed return's note", chromedp.Text(css(`tr.item[data-order="0104-0001-1"] td.pnote`)))
	if !strings.Contains(note, "провести возврат в 1С не удалось") {
		t.Errorf("the failed return reads %q", note)
	}
	if got := count(t, p, `a#payouts-xlsx[href*="format=xlsx"]`); got != 1 {
		t.Errorf("the workbook is offered %d times", got)
	}
	// Russian pages carry no English words of the page's own (the data, such as a
	// return's last error from 1C, aside).
	body := value(t, p, "the page's text", chromedp.Evaluate[string](
		`[...document.querySelectorAll("h1, h2, h3, th, caption, p.hint, #balance, #verdict, button, label")].map(n => n.innerText).join("\n")`))
	for _, w := range []string{"Paid", "Order", "Return", "Note", "accrued", "the "} {
		if strings.Contains(body, w) {
			t.Errorf("the Russian page says %q", w)
		}
	}
	path := screenshot(t, p, "ui-payouts.png")
	if dir := os.Getenv("ORDERSYNC_DOCS_SCREENSHOT"); dir != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "ui-payouts.png"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
