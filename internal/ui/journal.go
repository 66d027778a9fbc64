package ui

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

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

// listQuery is the list's filters as the form sends them.
type listQuery struct {
	Q, Status, Source, Kind string
	From, To                string // YYYY-MM-DD, as typed
	Warnings                bool
	After                   string // the cursor of the next page
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
	if q.Warnings {
		v.Set("warnings", "1")
	}
	if withAfter {
		set("after", q.After)
	}
	return v
}

// parseList reads the list's filters: the journal.Filter, the form as typed (with
// the default period filled in) and what is wrong with it, as catalogue messages.
func (s *Server) parseList(r *http.Request) (journal.Filter, listQuery, []string) {
	v := r.URL.Query()
	q := listQuery{Q: strings.TrimSpace(v.Get("q")), Status: v.Get("status"), Source: strings.TrimSpace(v.Get("source")),
		Kind: v.Get("kind"), From: strings.TrimSpace(v.Get("from")), To: strings.TrimSpace(v.Get("to")),
		Warnings: v.Get("warnings") == "1" || v.Get("warnings") == "on", After: v.Get("after")}
	// No period asked for: the last days, unless searching (a search finds an
	// order however old it is).
	if !v.Has("from") && !v.Has("to") && q.Q == "" {
		today := s.cfg.Now().In(s.cfg.Location)
		q.To = today.Format(time.DateOnly)
		q.From = today.AddDate(0, 0, -(defaultDays - 1)).Format(time.DateOnly)
	}
	parsed, err := filter.Parse(filter.Values{Query: q.Q, Status: q.Status, Source: q.Source, Kind: q.Kind,
		From: q.From, To: q.To, Warnings: q.Warnings}, filter.Options{Names: true, MaxQuery: maxQuery})
	bad := s.filterProblems(err)
	f := parsed.Filter(s.cfg.Location)
	if q.After != "" {
		after, ok := parseCursor(q.After)
		if !ok {
			bad = append(bad, s.cat.t("bad_after"))
		} else {
			f.After = &after
		}
	}
	return f, q, bad
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
}

type listData struct {
	Query     listQuery
	Problems  []string
	Rows      []listRow
	Next      string // the next page's address, "" on the last
	First     string // the first page's address, "" on the first
	Kinds     []string
	Statuses  []string
	ExportCSV string
	ExportXLS string
}

func (s *Server) journalPage(w http.ResponseWriter, r *http.Request, u who) {
	f, q, bad := s.parseList(r)
	d := listData{Query: q, Problems: bad, Kinds: kinds,
		Statuses: []string{string(journal.StatusPending), string(journal.StatusDone), string(journal.StatusFailed)}}
	if len(bad) > 0 {
		s.render(w, r, http.StatusBadRequest, "journal", u, s.cat.t("journal_title"), d)
		return
	}
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
	for _, op := range ops {
		d.Rows = append(d.Rows, listRow{Row: export.RowOf(op, s.cfg.Location), Warnings: len(op.Warnings)})
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
	f, q, bad := s.parseList(r)
	if len(bad) > 0 {
		d := listData{Query: q, Problems: bad, Kinds: kinds,
			Statuses: []string{string(journal.StatusPending), string(journal.StatusDone), string(journal.StatusFailed)}}
		s.render(w, r, http.StatusBadRequest, "journal", u, s.cat.t("journal_title"), d)
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
		for _, op := range page {
			if err := ew.Write(export.RowOf(op, s.cfg.Location)); err != nil {
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
