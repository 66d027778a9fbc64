package ui

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"
	"github.com/xuri/excelize/v2"
	"golang.org/x/net/html"

	payrec "github.com/ordersync/ordersync/internal/payouts/reconcile"
)

// cannedPayouts is a small report with two categories filled, the cabinet and a
// stated total that differs.
func cannedPayouts(source string, from, to time.Time) payrec.Report {
	d := decimal.RequireFromString
	p := func(s string) *decimal.Decimal { v := d(s); return &v }
	ordered := time.Date(2026, 10, 3, 10, 0, 0, 0, almaty)
	paid := time.Date(2026, 10, 9, 12, 0, 0, 0, almaty)
	sold := payrec.Item{Category: payrec.PaidAsSold, OrderID: "0101-1", Key: "ozon:posting:0101-1:create", OneCNumber: "ЗК-000001",
		Ordered: &ordered, FirstPaid: &paid, LastPaid: &paid, Currency: "RUB", OneCTotal: p("1250"), Accrued: d("1250"),
		Commission: d("-187.50"), Logistics: d("-63"), Paid: d("999.50"), Difference: p("0"), NoteCode: payrec.NoteAsSold,
		NoteArgs: payrec.NoteArgs{Accrued: p("1250"), OneC: p("1250"), Withheld: p("-250.50")}}
	diff := payrec.Item{Category: payrec.PaidWithDifference, OrderID: "0102-1", Key: "ozon:posting:0102-1:create", OneCNumber: "ЗК-000002",
		Ordered: &ordered, FirstPaid: &paid, LastPaid: &paid, Currency: "RUB", OneCTotal: p("2400"), Accrued: d("2280"),
		Commission: d("-342"), Penalty: d("-120"), Paid: d("1818"), Difference: p("-120"), NoteCode: payrec.NoteAccruedDiffers,
		NoteArgs: payrec.NoteArgs{Accrued: p("2280"), OneC: p("2400"), Difference: p("-120"), Withheld: p("-462")}}
	unknown := payrec.Item{Category: payrec.PaidUnknown, OrderID: "0105-1", FirstPaid: &paid, LastPaid: &paid, Currency: "RUB",
		Accrued: d("100"), Paid: d("100"), NoteCode: payrec.NotePaidUnknown}
	items := []payrec.Item{sold, diff, unknown}
	rep := payrec.Report{Source: source, From: from.Format(time.DateOnly), To: to.Format(time.DateOnly), Zone: "Asia/Almaty", Currency: "RUB",
		Items: items, Cabinet: []payrec.CabinetTotal{{Type: "Хранение", Lines: 2, Amount: d("-811.05")}}}
	for _, c := range payrec.Categories {
		t := payrec.CategoryTotal{Category: c}
		for _, it := range items {
			if it.Category == c {
				t.Orders++
				t.Paid = t.Paid.Add(it.Paid)
				t.Accrued = t.Accrued.Add(it.Accrued)
			}
		}
		rep.Categories = append(rep.Categories, t)
		rep.Totals.Orders = rep.Totals.Orders.Add(t.Paid)
	}
	rep.Totals.Cabinet = d("-811.05")
	rep.Totals.LinesSum = rep.Totals.Orders.Add(rep.Totals.Cabinet)
	rep.Totals.Lines = 5
	rep.Totals.Balanced = true
	rep.Totals.Stated, rep.Totals.StatedDifference, rep.Totals.StatedVerdict = p("2200"), p("-93.55"), payrec.StatedDiffers
	return rep
}

// TestPayoutsPage: the summary by category, the cabinet by type, the totals'
// check with the marketplace's total differing, a section per category with its
// orders in Russian words, and the workbook to download.
func TestPayoutsPage(t *testing.T) {
	t.Parallel()
	st := openStores(t, "sqlite")
	var asked []string
	s := newSite(t, st, func(c *Config) {
		c.PayoutSources = []string{"ozon", "wildberries"}
		c.Payouts = func(_ context.Context, source string, from, to time.Time) (payrec.Report, error) {
			asked = append(asked, source+" "+from.Format(time.DateOnly)+" "+to.Format(time.DateOnly))
			return cannedPayouts(source, from, to), nil
		}
	})
	b := s.browser()
	form := b.get("/ui/payouts")
	if form.status != http.StatusOK || byID(form.doc, "payouts") == nil || byID(form.doc, "nav-payouts") == nil {
		t.Fatalf("the form: %d\n%s", form.status, form.body)
	}
	a := b.get("/ui/payouts?source=ozon&from=2026-10-01&to=2026-10-31")
	if a.status != http.StatusOK {
		t.Fatalf("%d\n%s", a.status, a.body)
	}
	if len(asked) != 1 || asked[0] != "ozon 2026-10-01 2026-10-31" {
		t.Errorf("asked %q", asked)
	}
	if h := text(byID(a.doc, "payouts-heading")); h != "Выплаты Ozon: 01.10.2026 — 31.10.2026" {
		t.Errorf("heading %q", h)
	}
	sections := all(a.doc, func(n *html.Node) bool { return n.Data == "section" && attr(n, "data-category") != "" })
	if len(sections) != len(payrec.Categories) {
		t.Fatalf("%d sections, want one per category", len(sections))
	}
	diffSec := byID(a.doc, "cat-paid_with_difference")
	rows := byClass(diffSec, "tr", "item")
	if len(rows) != 1 || attr(rows[0], "data-order") != "0102-1" {
		t.Fatalf("the difference's rows: %d", len(rows))
	}
	if got := text(byClass(rows[0], "td", "difference")[0]); got != "\u2212120,00\u00a0₽" {
		t.Errorf("the difference %q", got)
	}
	if got := text(byClass(rows[0], "td", "pnote")[0]); !strings.Contains(got, "расхождение \u2212120,00\u00a0₽") {
		t.Errorf("the note %q", got)
	}
	if got := text(byClass(byID(a.doc, "cat-in_1c_not_paid"), "p", "empty")[0]); got != "Таких заказов нет." {
		t.Errorf("an empty category says %q", got)
	}
	sum := map[string]string{}
	for _, tr := range all(byID(a.doc, "summary"), func(n *html.Node) bool { return n.Data == "tr" && attr(n, "data-category") != "" }) {
		sum[attr(tr, "data-category")] = text(byClass(tr, "td", "orders")[0]) + " " + text(byClass(tr, "td", "paid")[0])
	}
	if sum["paid_as_sold"] != "1 999,50\u00a0₽" || sum["returned_in_1c"] != "0 0,00\u00a0₽" {
		t.Errorf("the summary %q", sum)
	}
	if got := text(byClass(byID(a.doc, "cabinet"), "td", "amount")[0]); got != "\u2212811,05\u00a0₽" {
		t.Errorf("the cabinet's storage %q", got)
	}
	check := byID(a.doc, "check")
	if attr(check, "data-balanced") != "true" || attr(check, "data-verdict") != "differs" ||
		!strings.Contains(text(byID(a.doc, "verdict")), "расходится с итогом маркетплейса на \u221293,55\u00a0₽") {
		t.Errorf("the check: %s %s %q", attr(check, "data-balanced"), attr(check, "data-verdict"), text(byID(a.doc, "verdict")))
	}
	href := attr(byID(a.doc, "payouts-xlsx"), "href")
	x := b.get(href)
	if x.status != http.StatusOK || !strings.Contains(x.header.Get("Content-Disposition"), "payouts-ozon-2026-10-01-2026-10-31.xlsx") {
		t.Fatalf("XLSX: %d %v", x.status, x.header)
	}
	f, err := excelize.OpenReader(strings.NewReader(x.body))
	if err != nil {
		t.Fatal(err)
	}
	if sheets := f.GetSheetList(); len(sheets) != 8 || sheets[0] != "итоги" {
		t.Errorf("the workbook's sheets %q", sheets)
	}

	if bad := b.get("/ui/payouts?source=ozon&from=2026-10-31&to=2026-10-01"); bad.status != http.StatusBadRequest || byID(bad.doc, "problems") == nil {
		t.Errorf("a period backwards: %d", bad.status)
	}
}

// TestPayoutsPageNeedsSignIn: the page, and its download, are behind the sign-in.
func TestPayoutsPageNeedsSignIn(t *testing.T) {
	t.Parallel()
	s := newSite(t, openStores(t, "sqlite"), func(c *Config) {
		c.Users = []User{testUser(t, "anna", RoleViewer)}
		c.Payouts = func(_ context.Context, source string, from, to time.Time) (payrec.Report, error) {
			t.Error("reconciled for nobody")
			return payrec.Report{}, nil
		}
	})
	b := s.browser()
	for _, p := range []string{"/ui/payouts", "/ui/payouts?source=ozon&from=2026-10-01&to=2026-10-31&format=xlsx"} {
		a := b.get(p)
		if want := "/ui/signin?next=" + url.QueryEscape(p); a.status != http.StatusSeeOther || a.header.Get("Location") != want {
			t.Errorf("%s without a session: %d to %q", p, a.status, a.header.Get("Location"))
		}
	}
}
