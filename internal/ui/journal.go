package ui

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/journal/export"
	"github.com/ordersync/ordersync/internal/journal/filter"
	"github.com/ordersync/ordersync/internal/order"
	"github.com/ordersync/ordersync/internal/stock"
)

// pageSize is how many operations one page of the list shows.
const pageSize = 50

// defaultDays is the period the list shows when none is asked for: the last 7 days,
// today included.
const defaultDays = 7

// maxQuery is the longest search term the list takes, in characters.
const maxQuery = 200

// kinds are offered in the list's filter.
var kinds = []string{order.KindCreate, order.KindCancel, stock.KindSnapshot}

// Date bases of the list's period: the order's own date (the marketplace's, the
// default) or when ordersync registered the operation.
const (
	byOrder      = "order"
	byRegistered = "registered"
)

// listQuery is the list's filters as the form sends them.
type listQuery struct {
	Q, Status, Source, Kind string
	From, To                string // YYYY-MM-DD, as typed
	By                      string // byOrder or byRegistered
	// Auto: the period is the form's default, not one the person chose (the form
	// sends it back as auto=1 with the dates it was filled with).
	Auto     bool
	Warnings bool
	After    string // the cursor of the next page
}

// values is the query string of q (without the cursor unless withAfter).
func (q listQuery) values(withAfter bool) url.Values {
	v := url.Values{}
	set := func(k, val string) {
		if val != "" {
			v.Set(k, val)
		}
	}
	set("q", q.Q)
	set("status", q.Status)
	set("source", q.Source)
	set("kind", q.Kind)
	v.Set("from", q.From) // empty is kept: it asks for no bound, unlike an absent one
	v.Set("to", q.To)
	if q.By == byRegistered {
		v.Set("by", q.By)
	}
	if q.Auto {
		v.Set("auto", "1")
	}
	if q.Warnings {
		v.Set("warnings", "1")
	}
	if withAfter {
		set("after", q.After)
	}
	return v
}

// parseList reads the list's filters: the journal.Filter, the form as typed (with
// the default period filled in), whether a search looks through the whole journal,
// and what is wrong with the filters, as catalogue messages.
//
// A search term searches the whole journal unless the person chose the dates: the
// form comes filled with the last days and auto=1, and sends them back as they were;
// a period that is still that default is no choice. The form then shows the default
// period again, so that clearing the term lists the last days.
func (s *Server) parseList(r *http.Request) (journal.Filter, listQuery, bool, []string) {
	v := r.URL.Query()
	q := listQuery{Q: strings.TrimSpace(v.Get("q")), Status: v.Get("status"), Source: strings.TrimSpace(v.Get("source")),
		Kind: v.Get("kind"), From: strings.TrimSpace(v.Get("from")), To: strings.TrimSpace(v.Get("to")), By: byOrder,
		Warnings: v.Get("warnings") == "1" || v.Get("warnings") == "on", After: v.Get("after")}
	if v.Get("by") == byRegistered {
		q.By = byRegistered
	}
	today := s.cfg.Now().In(s.cfg.Location)
	defTo := today.Format(time.DateOnly)
	defFrom := today.AddDate(0, 0, -(defaultDays - 1)).Format(time.DateOnly)
	noDates := !v.Has("from") && !v.Has("to")
	isDefault := noDates || v.Get("auto") == "1" && q.From == defFrom && q.To == defTo
	from, to := q.From, q.To
	whole := false
	switch {
	case isDefault && q.Q != "":
		whole = true // a search finds an order however old it is
		from, to = "", ""
		q.From, q.To, q.Auto = defFrom, defTo, true
	case isDefault:
		q.From, q.To, q.Auto = defFrom, defTo, true
		from, to = defFrom, defTo
	}
	parsed, err := filter.Parse(filter.Values{Query: q.Q, Status: q.Status, Source: q.Source, Kind: q.Kind,
		From: from, To: to, Warnings: q.Warnings}, filter.Options{Names: true, MaxQuery: maxQuery})
	bad := s.filterProblems(err)
	f := parsed.Filter(s.cfg.Location)
	// The page's search is the broad one (part of a number, a name, an amount); the
	// exact Query stays what resolves one operation for the CLI.
	f.Search, f.Query = f.Query, ""
	if q.By == byOrder {
		f.OrderedFrom, f.OrderedBefore = f.CreatedFrom, f.CreatedBefore
		f.CreatedFrom, f.CreatedBefore = time.Time{}, time.Time{}
	}
	if q.After != "" {
		after, ok := parseCursor(q.After)
		if !ok {
			bad = append(bad, s.cat.t("bad_after"))
		} else {
			f.After = &after
		}
	}
	return f, q, whole, bad
}

// filterProblems words what filter.Parse or filter.ParsePeriod found wrong, each
// field as the catalogue says it; none for a nil err.
func (s *Server) filterProblems(err error) []string {
	var fe *filter.Error
	if !errors.As(err, &fe) {
		return nil
	}
	v := fe.Values
	var bad []string
	for _, f := range fe.Fields {
		switch f {
		case filter.FieldQuery:
			bad = append(bad, s.cat.t("bad_q"))
		case filter.FieldStatus:
			bad = append(bad, fmt.Sprintf(s.cat.t("bad_status"), v.Status))
		case filter.FieldSource:
			bad = append(bad, fmt.Sprintf(s.cat.t("bad_source"), v.Source))
		case filter.FieldKind:
			bad = append(bad, fmt.Sprintf(s.cat.t("bad_kind"), v.Kind))
		case filter.FieldFrom:
			bad = append(bad, fmt.Sprintf(s.cat.t("bad_date_from"), v.From))
		case filter.FieldTo:
			bad = append(bad, fmt.Sprintf(s.cat.t("bad_date_to"), v.To))
		case filter.FieldPeriod:
			bad = append(bad, fmt.Sprintf(s.cat.t("bad_period"), v.To, v.From))
		}
	}
	return bad
}

// A cursor is the last operation of a page: its updated_at (Unix microseconds,
// the stores' precision) and key.
func cursorOf(op journal.Operation) string {
	return strconv.FormatInt(op.UpdatedAt.UnixMicro(), 10) + ":" + op.Key
}

func parseCursor(c string) (journal.Operation, bool) {
	us, key, ok := strings.Cut(c, ":")
	if !ok || key == "" {
		return journal.Operation{}, false
	}
	n, err := strconv.ParseInt(us, 10, 64)
	if err != nil {
		return journal.Operation{}, false
	}
	return journal.Operation{Key: key, UpdatedAt: time.UnixMicro(n).UTC()}, true
}

// listRow is one operation in the list.
type listRow struct {
	export.Row
	Warnings int
	// Ordered is the order's date as the list shows it (the registration's when
	// the payload names none); Done when it was done, "" otherwise.
	Ordered, Done string
	// OrderDated: Ordered is the marketplace's date, not the registration's.
	OrderDated bool
	// OneCTotal is 1C's total at the latest reconciliation ("" when none said);
	// OneCNote what else it saw (none held, cancelled, marked for deletion), and
	// Differs whether 1C's total is not the marketplace's.
	OneCTotal, OneCNote, OneCSeen string
	Differs                       bool
}

// totalRow is one state's line of the period's totals.
type totalRow struct {
	State journal.State
	Count int
	Sums  []string // money per currency, "15 990,00 KZT"
}

type listData struct {
	Query     listQuery
	Problems  []string
	Rows      []listRow
	Next      string // the next page's address, "" on the last
	First     string // the first page's address, "" on the first
	Kinds     []string
	Statuses  []string
	Sources   []string
	ExportCSV string
	ExportXLS string
	// Period says which period the list looked in.
	Period string
	Whole  bool // a search through the whole journal
	Totals []totalRow
	Count  int // operations in the whole filtered set
}

func (s *Server) listData(q listQuery, bad []string) listData {
	return listData{Query: q, Problems: bad, Kinds: kinds, Sources: s.sources(q.Source),
		Statuses: []string{string(journal.StatusPending), string(journal.StatusDone), string(journal.StatusFailed)}}
}

// sources are offered in the filter: the configured ones, the usual marketplaces and
// the one asked for.
func (s *Server) sources(asked string) []string {
	out := append([]string(nil), s.cfg.ReconcileSources...)
	for _, src := range append([]string{"kaspi", "ozon", "wb", "site"}, asked) {
		if src != "" && !slices.Contains(out, src) && !(src == "wb" && slices.Contains(out, "wildberries")) {
			out = append(out, src)
		}
	}
	return out
}

// dateTime is t as the pages write a date with its time: 02.12.2026 02:50 (ru),
// 2026-12-02 02:50 (en), in the pages' zone.
func (s *Server) dateTime(t time.Time) string { return formatWhen(t, s.cfg.Location, s.cfg.Lang) }

// day is a YYYY-MM-DD date as the pages write it.
func (s *Server) day(d string) string {
	t, err := time.Parse(time.DateOnly, d)
	if err != nil {
		return d
	}
	return formatDay(t, time.UTC, s.cfg.Lang)
}

// period says which period a list looked in.
func (s *Server) period(q listQuery, whole bool) string {
	by := s.cat.t("period_by_" + q.By)
	switch {
	case whole:
		return s.cat.t("period_whole")
	case q.From != "" && q.To != "":
		return s.cat.tf("period_days", s.day(q.From), s.day(q.To), by)
	case q.From != "":
		return s.cat.tf("period_from", s.day(q.From), by)
	case q.To != "":
		return s.cat.tf("period_to", s.day(q.To), by)
	}
	return s.cat.t("period_all")
}

// rowOf is op as the list shows it; cancels holds the status of the creates'
// cancels (journal.CancelsOf).
func (s *Server) rowOf(op journal.Operation, cancels map[string]journal.Status) listRow {
	r := listRow{Row: export.RowOf(op, s.cfg.Location), Warnings: len(op.Warnings)}
	r.Row.State = string(journal.OrderStateOf(op, cancels))
	ordered := op.CreatedAt
	if op.OrderCreatedAt != nil {
		ordered, r.OrderDated = *op.OrderCreatedAt, true
	}
	r.Ordered = s.dateTime(ordered)
	if r.Row.Done != nil {
		r.Done = s.dateTime(*r.Row.Done)
	}
	if seen := op.OneCSeen; seen != nil {
		r.OneCSeen = s.dateTime(seen.SeenAt)
		if seen.Total != nil {
			r.OneCTotal = formatMoney(*seen.Total, s.cfg.Lang)
			r.Differs = r.Row.Total != nil && !seen.Total.Equal(*r.Row.Total)
		}
		switch {
		case seen.Held == 0 && seen.Deleted:
			r.OneCNote = s.cat.t("onec_seen_deleted")
		case seen.Held == 0:
			r.OneCNote = s.cat.t("onec_seen_none")
		case seen.Cancelled:
			r.OneCNote = s.cat.t("onec_seen_cancelled")
		case seen.Held > 1:
			r.OneCNote = s.cat.tf("onec_seen_several", seen.Held)
		}
	}
	return r
}

// cancels reads the status of the cancel operation of each create in ops.
func (s *Server) cancels(r *http.Request, ops []journal.Operation) (map[string]journal.Status, error) {
	return journal.CancelsOf(r.Context(), s.cfg.Journal, ops)
}

// totals are the period's totals by state, for the whole filtered set.
func (s *Server) totals(r *http.Request, f journal.Filter) ([]totalRow, int, error) {
	f.After, f.Limit = nil, 0
	groups, err := s.cfg.Journal.Totals(r.Context(), f)
	if err != nil {
		return nil, 0, err
	}
	type sum struct {
		count int
		money map[string]decimal.Decimal
		order []string
	}
	by := map[journal.State]*sum{}
	all := 0
	for _, g := range groups {
		st := journal.StateOf(g.Kind, g.Status, g.CancelStatus)
		x := by[st]
		if x == nil {
			x = &sum{money: map[string]decimal.Decimal{}}
			by[st] = x
		}
		x.count += g.Count
		all += g.Count
		if g.Sum.IsZero() && g.Currency == "" {
			continue
		}
		if _, ok := x.money[g.Currency]; !ok {
			x.order = append(x.order, g.Currency)
		}
		x.money[g.Currency] = x.money[g.Currency].Add(g.Sum)
	}
	var rows []totalRow
	for _, st := range journal.States {
		x := by[st]
		if x == nil {
			continue
		}
		slices.Sort(x.order)
		row := totalRow{State: st, Count: x.count}
		for _, c := range x.order {
			row.Sums = append(row.Sums, strings.TrimSpace(formatMoney(x.money[c], s.cfg.Lang)+" "+c))
		}
		rows = append(rows, row)
	}
	return rows, all, nil
}

func (s *Server) journalPage(w http.ResponseWriter, r *http.Request, u who) {
	f, q, whole, bad := s.parseList(r)
	d := s.listData(q, bad)
	if len(bad) > 0 {
		s.render(w, r, http.StatusBadRequest, "journal", u, s.cat.t("journal_title"), d)
		return
	}
	d.Period, d.Whole = s.period(q, whole), whole
	exportQuery := q.values(false).Encode()
	d.ExportCSV = "/ui/journal/export.csv?" + exportQuery
	d.ExportXLS = "/ui/journal/export.xlsx?" + exportQuery
	f.Limit = pageSize + 1 // one more tells whether a next page exists
	ops, err := s.cfg.Journal.List(r.Context(), f)
	if err != nil {
		s.failed(w, r, u, "list the journal", err)
		return
	}
	if len(ops) > pageSize {
		ops = ops[:pageSize]
		next := q
		next.After = cursorOf(ops[len(ops)-1])
		d.Next = "/ui/journal?" + next.values(true).Encode()
	}
	if q.After != "" {
		d.First = "/ui/journal?" + exportQuery
	}
	cancels, err := s.cancels(r, ops)
	if err != nil {
		s.failed(w, r, u, "list the journal's cancels", err)
		return
	}
	for _, op := range ops {
		d.Rows = append(d.Rows, s.rowOf(op, cancels))
	}
	if d.Totals, d.Count, err = s.totals(r, f); err != nil {
		s.failed(w, r, u, "total the journal", err)
		return
	}
	s.render(w, r, http.StatusOK, "journal", u, s.cat.t("journal_title"), d)
}

// exportName is the attachment's file name: journal-FROM-TO.ext, the period's
// dates as the filter has them.
func exportName(q listQuery, ext string) string {
	switch {
	case q.From != "" && q.To != "":
		return fmt.Sprintf("journal-%s-%s.%s", q.From, q.To, ext)
	case q.From != "":
		return fmt.Sprintf("journal-from-%s.%s", q.From, ext)
	case q.To != "":
		return fmt.Sprintf("journal-to-%s.%s", q.To, ext)
	}
	return "journal." + ext
}

// exportPage is how many operations an export reads from the store at a time.
const exportPage = 500

func (s *Server) exportCSV(w http.ResponseWriter, r *http.Request, u who) {
	s.export(w, r, u, "csv", export.ContentTypeCSV, func() (export.Writer, error) {
		return export.NewCSV(w, s.cfg.Lang, s.cfg.Location), nil
	})
}

func (s *Server) exportXLSX(w http.ResponseWriter, r *http.Request, u who) {
	s.export(w, r, u, "xlsx", export.ContentTypeXLSX, func() (export.Writer, error) {
		return export.NewXLSX(w, s.cfg.Lang, s.cfg.Location)
	})
}

// export streams every operation the list's filters match, page by page, however
// many. A store failing after the first bytes were sent cuts the connection, so the
// file is visibly broken rather than silently short.
func (s *Server) export(w http.ResponseWriter, r *http.Request, u who, ext, contentType string, open func() (export.Writer, error)) {
	f, q, _, bad := s.parseList(r)
	if len(bad) > 0 {
		s.render(w, r, http.StatusBadRequest, "journal", u, s.cat.t("journal_title"), s.listData(q, bad))
		return
	}
	f.After = nil
	f.Limit = s.exportPage
	ctx := r.Context()
	first, err := s.cfg.Journal.List(ctx, f)
	if err != nil {
		s.failed(w, r, u, "export the journal", err)
		return
	}
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="%s"`, exportName(q, ext)))
	ew, err := open()
	if err != nil {
		w.Header().Del("Content-Disposition") // the error page is not the file
		s.failed(w, r, u, "start the export", err)
		return
	}
	rows := 0
	abort := func(what string, err error) {
		s.log.ErrorContext(ctx, "ui: export cut short", "what", what, "rows", rows, "err", err)
		panic(http.ErrAbortHandler)
	}
	for page := first; ; {
		cancels, err := s.cancels(r, page)
		if err != nil {
			abort("list the cancels", err)
		}
		for _, op := range page {
			row := export.RowOf(op, s.cfg.Location)
			row.State = string(journal.OrderStateOf(op, cancels))
			if err := ew.Write(row); err != nil {
				abort("write", err)
			}
			rows++
		}
		if len(page) < s.exportPage {
			break
		}
		last := page[len(page)-1]
		f.After = &last
		if page, err = s.cfg.Journal.List(ctx, f); err != nil {
			abort("list", err)
		}
	}
	if err := ew.Close(); err != nil {
		abort("close", err)
	}
	s.log.InfoContext(ctx, "ui: journal exported", "format", ext, "rows", rows, "user", u.Name)
}
