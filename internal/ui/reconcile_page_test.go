package ui

import (
	"context"
	"encoding/csv"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"
	"golang.org/x/net/html"

	"github.com/ordersync/ordersync/internal/reconcile"
)

// TestReconcilePageInWords: money per category and for the period, notes worded
// from the catalogue with money formatted, no link to an operation the journal
// lacks, the same report as CSV and XLSX.
func TestReconcilePageInWords(t *testing.T) {
	t.Parallel()
	st := openStores(t, "sqlite")
	d := func(s string) *decimal.Decimal { v := decimal.RequireFromString(s); return &v }
	mp, oc := d("10000"), d("15019")
	diff := mp.Sub(*oc)
	items := []reconcile.Item{
		{Category: reconcile.OK, Key: "kaspi:order:1:create", Status: "done", MarketplaceTotal: d("2500.50"), Currency: "KZT",
			OneC: []reconcile.OneCOrder{{Ref: "r1", Number: "ОС-1", Total: d("2500.50")}}},
		{Category: reconcile.AmountMismatch, Key: "kaspi:order:2:create", Status: "done", MarketplaceTotal: mp, Currency: "KZT",
			OneC: []reconcile.OneCOrder{{Ref: "r2", Number: "ОС-2", Total: oc}}, NoteCode: reconcile.NoteAmountDiffers,
			NoteArgs: &reconcile.NoteArgs{Marketplace: mp, OneC: oc, Difference: &diff}},
		{Category: reconcile.UnknownToJournal, ExternalID: "3", Key: "kaspi:order:3:create", Currency: "KZT",
			OneC: []reconcile.OneCOrder{{Ref: "r3", Number: "ОС-3", Total: d("700")}}, NoteCode: reconcile.NoteNotFromOrdersync,
			NoteArgs: &reconcile.NoteArgs{}},
	}
	for i := range items {
		if items[i].NoteArgs != nil {
			items[i].Note = reconcile.English(items[i].NoteCode, *items[i].NoteArgs)
		}
	}
	s := newSite(t, st, func(c *Config) {
		c.Reconcile = func(_ context.Context, source string, from, to time.Time) (reconcile.Report, error) {
			return reconcile.Report{Source: source, From: from.Format(time.DateOnly), To: to.Format(time.DateOnly),
				Totals: map[reconcile.Category]int{reconcile.OK: 1, reconcile.AmountMismatch: 1, reconcile.UnknownToJournal: 1}, Items: items}, nil
		}
	})
	b := s.browser()
	a := b.get("/ui/reconcile?source=kaspi&from=2026-11-01&to=2026-11-30")
	if a.status != http.StatusOK {
		t.Fatalf("%d\n%s", a.status, a.body)
	}
	if h := text(byID(a.doc, "reconcile-heading")); h != "Сверка: kaspi, 01.11.2026 — 30.11.2026" {
		t.Errorf("heading %q", h)
	}
	sums := map[string][2]string{}
	for _, tr := range all(byID(a.doc, "totals"), func(n *html.Node) bool { return n.Data == "tr" && attr(n, "data-category") != "" }) {
		sums[attr(tr, "data-category")] = [2]string{text(byClass(tr, "td", "sum-mp")[0]), text(byClass(tr, "td", "sum-onec")[0])}
	}
	if got := sums["amount_mismatch"]; got != [2]string{"10\u00a0000,00\u00a0₸", "15\u00a0019,00\u00a0₸"} {
		t.Errorf("amount_mismatch sums %q", got)
	}
	period := byID(a.doc, "period-total")
	if got := text(byClass(period, "td", "sum-mp")[0]); got != "12\u00a0500,50\u00a0₸" {
		t.Errorf("the period's marketplace total %q", got)
	}
	if got := text(byClass(period, "td", "sum-onec")[0]); got != "18\u00a0219,50\u00a0₸" {
		t.Errorf("the period's 1C total %q", got)
	}
	rows := byClass(byID(a.doc, "items"), "tr", "item")
	if len(rows) != 3 {
		t.Fatalf("%d rows", len(rows))
	}
	if got := text(byClass(rows[1], "td", "rnote")[0]); !strings.Contains(got, "разница \u22125\u00a0019,00\u00a0₸") {
		t.Errorf("the mismatch's note %q", got)
	}
	if links := all(rows[2], func(n *html.Node) bool { return n.Data == "a" }); len(links) != 0 {
		t.Errorf("an order the journal lacks links to its (missing) operation")
	}
	if links := all(rows[1], func(n *html.Node) bool { return n.Data == "a" }); len(links) != 1 {
		t.Errorf("an order of the journal has %d links", len(links))
	}
	csvHref := attr(byID(a.doc, "reconcile-csv"), "href")
	f := b.get(csvHref)
	if f.status != http.StatusOK || !strings.HasPrefix(f.header.Get("Content-Type"), "text/csv") ||
		!strings.Contains(f.header.Get("Content-Disposition"), "reconcile-kaspi-2026-11-01-2026-11-30.csv") {
		t.Fatalf("CSV: %d %v", f.status, f.header)
	}
	recs, err := csv.NewReader(strings.NewReader(f.body)).ReadAll()
	if err != nil || len(recs) != 4 || recs[2][len(recs[2])-1] != items[1].Note {
		t.Errorf("CSV: %d records %v", len(recs), err)
	}
	x := b.get(attr(byID(a.doc, "reconcile-xlsx"), "href"))
	if x.status != http.StatusOK || !strings.HasPrefix(x.body, "PK") {
		t.Errorf("XLSX: %d", x.status)
	}
}
