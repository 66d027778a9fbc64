package ui

import (
	"bytes"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"github.com/ordersync/ordersync/internal/journal/export"
	"github.com/ordersync/ordersync/internal/journal/filter"
	"github.com/ordersync/ordersync/internal/reconcile"
)

// categoryTotal is one category's line of the totals: its orders and their money,
// at the marketplace and in 1C, per currency.
type categoryTotal struct {
	Category    reconcile.Category
	Orders      int
	Marketplace []string // formatted sums, one per currency
	OneC        []string
}

type reconcileData struct {
	Available  bool
	Sources    []string
	Source     string
	From, To   string
	Problems   []string
	Report     *reconcile.Report
	Categories []reconcile.Category
	NotOK      int
	Totals     []categoryTotal
	Period     categoryTotal // every order of the period
	FromText   string        // the period as the language writes dates
	ToText     string
	RanAt      time.Time
	CSVURL     template.URL // the same reconciliation, to download
	XLSXURL    template.URL
	Notes      map[int]string
}

func (s *Server) reconcilePage(w http.ResponseWriter, r *http.Request, u who) {
	v := r.URL.Query()
	d := reconcileData{Available: s.cfg.Reconcile != nil, Sources: s.cfg.ReconcileSources,
		Source: strings.TrimSpace(v.Get("source")), From: strings.TrimSpace(v.Get("from")), To: strings.TrimSpace(v.Get("to")),
		Categories: reconcile.Categories}
	title := s.cat.t("reconcile_title")
	if !d.Available || (d.Source == "" && d.From == "" && d.To == "") {
		if d.From == "" && d.To == "" {
			today := s.cfg.Now().In(s.cfg.Location)
			d.To = today.Format("2006-01-02")
			d.From = today.AddDate(0, 0, -(defaultDays - 1)).Format("2006-01-02")
		}
		s.render(w, r, http.StatusOK, "reconcile", u, title, d)
		return
	}
	period, bad := s.sourceAndPeriod(d.Source, d.From, d.To)
	if len(bad) > 0 {
		d.Problems = bad
		s.render(w, r, http.StatusBadRequest, "reconcile", u, title, d)
		return
	}
	rep, err := s.cfg.Reconcile(r.Context(), d.Source, period.From.In(s.cfg.Location), period.To.In(s.cfg.Location))
	if err != nil {
		// The reconciliation's own errors name their cause (a connector not enabled,
		// 1C not answering): the accountant reads them.
		s.log.WarnContext(r.Context(), "ui: reconciliation failed", "source", d.Source, "err", err)
		d.Problems = []string{fmt.Sprintf(s.cat.t("err_reconcile"), err.Error())}
		s.render(w, r, http.StatusBadGateway, "reconcile", u, title, d)
		return
	}
	for _, it := range rep.Items {
		if it.Category != reconcile.OK {
			d.NotOK++
		}
	}
	switch v.Get("format") {
	case "csv", "xlsx":
		s.reconcileFile(w, r, v.Get("format"), rep)
		return
	}
	d.Report = &rep
	d.RanAt = s.cfg.Now()
	d.FromText, d.ToText = s.dateText(period.From.In(s.cfg.Location)), s.dateText(period.To.In(s.cfg.Location))
	// Built of encoded values only, so safe as an address.
	q := url.Values{"source": {d.Source}, "from": {d.From}, "to": {d.To}}
	q.Set("format", "csv")
	d.CSVURL = template.URL("/ui/reconcile?" + q.Encode())
	q.Set("format", "xlsx")
	d.XLSXURL = template.URL("/ui/reconcile?" + q.Encode())
	d.Totals, d.Period = s.reconcileTotals(rep)
	d.Notes = map[int]string{}
	for i, it := range rep.Items {
		d.Notes[i] = s.reconcileNote(it)
	}
	title = s.cat.tf("reconcile_heading", d.Source, d.FromText, d.ToText)
	s.render(w, r, http.StatusOK, "reconcile", u, title, d)
}

// dateText is a date as the language writes it: 01.11.2026 (ru).
func (s *Server) dateText(t time.Time) string { return formatDay(t, s.cfg.Location, s.cfg.Lang) }

// reconcileFile sends the report as the CLI writes it (reconcile.WriteCSV,
// WriteXLSX), for a spreadsheet.
func (s *Server) reconcileFile(w http.ResponseWriter, r *http.Request, format string, rep reconcile.Report) {
	var buf bytes.Buffer
	write, ctype := reconcile.WriteCSV, export.ContentTypeCSV
	if format == "xlsx" {
		write, ctype = reconcile.WriteXLSX, export.ContentTypeXLSX
	}
	if err := write(&buf, rep); err != nil {
		s.failed(w, r, who{}, "write the reconciliation's "+format, err)
		return
	}
	name := fmt.Sprintf("reconcile-%s-%s-%s.%s", rep.Source, rep.From, rep.To, format)
	w.Header().Set("Content-Type", ctype)
	w.Header().Set("Content-Disposition", `attachment; filename="`+name+`"`)
	w.Write(buf.Bytes())
}

// reconcileTotals sums each category's orders and money, and the period's.
func (s *Server) reconcileTotals(rep reconcile.Report) ([]categoryTotal, categoryTotal) {
	type sums struct {
		n      int
		mp, oc map[string]decimal.Decimal
	}
	by := map[reconcile.Category]*sums{}
	all := &sums{mp: map[string]decimal.Decimal{}, oc: map[string]decimal.Decimal{}}
	for _, c := range reconcile.Categories {
		by[c] = &sums{mp: map[string]decimal.Decimal{}, oc: map[string]decimal.Decimal{}}
	}
	for _, it := range rep.Items {
		cs, ok := by[it.Category]
		if !ok {
			continue
		}
		for _, x := range []*sums{cs, all} {
			x.n++
			if it.MarketplaceTotal != nil {
				x.mp[it.Currency] = x.mp[it.Currency].Add(*it.MarketplaceTotal)
			}
			for _, o := range it.OneC {
				if o.Total != nil && !o.Cancelled {
					x.oc[it.Currency] = x.oc[it.Currency].Add(*o.Total)
				}
			}
		}
	}
	format := func(m map[string]decimal.Decimal) []string {
		cur := make([]string, 0, len(m))
		for c := range m {
			cur = append(cur, c)
		}
		slices.Sort(cur)
		out := make([]string, len(cur))
		for i, c := range cur {
			out[i] = formatAmount(m[c], c, s.cfg.Lang)
		}
		return out
	}
	var out []categoryTotal
	for _, c := range reconcile.Categories {
		x := by[c]
		out = append(out, categoryTotal{Category: c, Orders: max(x.n, rep.Totals[c]), Marketplace: format(x.mp), OneC: format(x.oc)})
	}
	return out, categoryTotal{Orders: all.n, Marketplace: format(all.mp), OneC: format(all.oc)}
}

// reconcileNote words an item's note from the catalogue (its code and arguments);
// an item without a code keeps its English note.
func (s *Server) reconcileNote(it reconcile.Item) string {
	if it.NoteCode == "" || it.NoteArgs == nil {
		return it.Note
	}
	a := *it.NoteArgs
	nums := strings.Join(a.Numbers, ", ")
	money := func(d *decimal.Decimal) string {
		if d == nil {
			return ""
		}
		return formatAmount(*d, it.Currency, s.cfg.Lang)
	}
	c := s.cat
	switch it.NoteCode {
	case reconcile.NoteNeverRegistered:
		if nums != "" {
			return c.tf("rnote_never_registered_held", nums)
		}
	case reconcile.NoteNotFromOrdersync:
		if a.Deleted {
			return c.t("rnote_not_from_ordersync_deleted")
		}
	case reconcile.NoteCancelled:
		if nums != "" {
			return c.t("rnote_cancelled_in_1c_too")
		}
	case reconcile.NoteNotDone:
		text := c.t("rnote_not_done")
		if a.Error != "" {
			text = s.explain(a.Error, "").Text
			if text == "" {
				text = a.Error
			}
		}
		if nums != "" {
			text += " " + c.tf("rnote_held", nums)
		}
		return text
	case reconcile.NoteGoneFrom1C:
		if nums != "" {
			return c.tf("rnote_gone_deleted", a.Number, nums)
		}
		return c.tf("rnote_gone_from_1c", a.Number)
	case reconcile.NoteDuplicate:
		text := c.tf("rnote_duplicate", a.Count, nums)
		if len(a.Live) > 0 {
			text += " " + c.tf("rnote_duplicate_live", strings.Join(a.Live, ", "))
		}
		return text
	case reconcile.NoteCancelledLive:
		by := c.t("rnote_cancel_by_journal")
		if a.Cancel != nil && a.Cancel.ByMarketplace {
			by = c.t("rnote_cancel_by_marketplace")
			if a.Cancel.Reason != "" {
				by += " (" + a.Cancel.Reason + ")"
			}
		} else if a.Cancel != nil {
			by = c.tf("rnote_cancel_by_journal_status", c.label("status", a.Cancel.Status))
		}
		return c.tf("rnote_cancelled_live", by, a.Number)
	case reconcile.NoteAmountDiffers:
		return c.tf("rnote_amount_differs", money(a.Marketplace), money(a.OneC), money(a.Difference))
	}
	if f, ok := c["rnote_"+string(it.NoteCode)]; ok {
		return f
	}
	return it.Note
}

// sourceAndPeriod checks a reconciliation form's source and period (both
// reconciliation pages ask for the same), returning the period and what is wrong
// in the accountant's words.
func (s *Server) sourceAndPeriod(source, from, to string) (filter.Period, []string) {
	var bad []string
	if source == "" {
		bad = append(bad, s.cat.t("bad_reconcile_source"))
	} else if !filter.IsSource(source) {
		bad = append(bad, fmt.Sprintf(s.cat.t("bad_source"), source))
	}
	if from == "" || to == "" {
		bad = append(bad, s.cat.t("bad_reconcile_period"))
	}
	period, err := filter.ParsePeriod(from, to)
	return period, append(bad, s.filterProblems(err)...)
}
