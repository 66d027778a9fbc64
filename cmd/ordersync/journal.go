package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/shopspring/decimal"
	"github.com/spf13/cobra"

	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/journal/export"
	"github.com/ordersync/ordersync/internal/journal/filter"
)

func (a *app) journalCommand() *cobra.Command {
	c := &cobra.Command{Use: "journal", Short: "Read the journal of operations and attempts"}
	c.AddCommand(a.journalListCommand(), a.journalShowCommand())
	return c
}

func (a *app) journalListCommand() *cobra.Command {
	var (
		status, source, kind, query, since, from, to, format string
		limit                                                int
		warnings                                             bool
	)
	c := &cobra.Command{
		Use:   "list",
		Short: "List operations, most recently updated first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(format, "table", "json", "csv", "xlsx"); err != nil {
				return err
			}
			// The dates are checked here, placed in ui.timezone once it is loaded.
			parsed, err := filter.Parse(filter.Values{Status: status, Source: source, Kind: kind, Query: query,
				From: from, To: to, Warnings: warnings}, filter.Options{})
			if err != nil {
				return usageError(filterFlagError(err))
			}
			if limit < 0 {
				return usageError(fmt.Errorf("--limit: must not be negative (0 lists every operation), got %d", limit))
			}
			if format == "xlsx" && isTerminal(a.stdout) {
				return usageError(errors.New("--format xlsx writes a workbook: send it to a file (> journal.xlsx)"))
			}
			ctx := cmd.Context()
			cfg, err := a.loadConfig()
			if err != nil {
				return err
			}
			loc := cfg.UILocation()
			f := parsed.Filter(loc)
			f.Limit = limit
			if since != "" {
				t, err := parseSinceIn(since, time.Now(), loc)
				if err != nil {
					return usageError(err)
				}
				f.Since = t
			}
			log, err := a.logger(cfg)
			if err != nil {
				return err
			}
			db, err := a.openReadyDB(ctx, cfg, log)
			if err != nil {
				return err
			}
			defer db.Close()
			// Page by page: --limit 0 lists the whole journal in bounded memory, and the
			// output streams.
			var (
				listed int
				last   journal.Operation
			)
			pages := func(emit func([]journal.Operation) error) error {
				err := eachPage(limit, func(after *journal.Operation, n int) ([]journal.Operation, error) {
					page := f
					page.Limit, page.After = n, after
					return db.Journal().List(ctx, page)
				}, func(ops []journal.Operation) error {
					if len(ops) > 0 {
						listed, last = listed+len(ops), ops[len(ops)-1]
					}
					return emit(ops)
				})
				if err == nil && limit > 0 && listed == limit {
					// A listing cut by --limit says so, on stderr, so that a CSV of the
					// first 100 is never taken for the whole journal.
					more := f
					more.Limit, more.After = 1, &last
					if rest, err := db.Journal().List(ctx, more); err == nil && len(rest) > 0 {
						fmt.Fprintf(a.stderr, "journal list: only the first %d operations are listed; --limit 0 lists every one\n", limit)
					}
				}
				return err
			}
			switch format {
			case "json":
				return writeJSONPages(a.stdout, pages, func(op journal.Operation) any { return toListRow(op, loc) })
			case "csv", "xlsx":
				var w export.Writer
				if format == "csv" {
					w = export.NewCSV(a.stdout, cfg.UI.Lang, loc)
				} else if w, err = export.NewXLSX(a.stdout, cfg.UI.Lang, loc); err != nil {
					return err
				}
				if err := pages(func(ops []journal.Operation) error {
					for _, op := range ops {
						if err := w.Write(export.RowOf(op, loc)); err != nil {
							return err
						}
					}
					return nil
				}); err != nil {
					return err
				}
				return w.Close()
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintf(tw, "KEY\tSTATUS\tATTEMPTS\tUPDATED (%s)\t1C NUMBER\tWARNINGS\tLAST ERROR\n", loc)
			return pages(func(ops []journal.Operation) error {
				for _, op := range ops {
					r := toListRow(op, loc)
					fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\n", r.Key, r.Status, r.Attempts,
						r.UpdatedAt.Format(zonedLayout), r.Number, warningCodes(r.Warnings), truncate(r.LastError, 80))
				}
				return tw.Flush() // each page is aligned on its own
			})
		},
	}
	c.Flags().StringVar(&status, "status", "", "only pending, done or failed operations")
	c.Flags().StringVar(&source, "source", "", "only operations of this source (kaspi, ozon, site, …)")
	c.Flags().StringVar(&kind, "kind", "", "only operations of this kind (order.create, order.cancel, stock.snapshot)")
	c.Flags().StringVarP(&query, "query", "q", "", "only the operations this names: a marketplace number (512344101), an external id (kaspi:512344101), a key, a 1C number (ОС-000123) or ref, a customer phone")
	c.Flags().StringVar(&since, "since", "", "only operations updated since: a duration (24h), a date (2026-09-16, in ui.timezone) or an RFC 3339 time")
	c.Flags().StringVar(&from, "from", "", "only operations created on or after this date (YYYY-MM-DD, in ui.timezone)")
	c.Flags().StringVar(&to, "to", "", "only operations created on or before this date (YYYY-MM-DD, in ui.timezone, inclusive)")
	c.Flags().IntVar(&limit, "limit", 100, "at most this many operations; 0 lists them all")
	c.Flags().StringVar(&format, "format", "table", "output: table, json, csv or xlsx (csv and xlsx: the columns of the pages' exports)")
	c.Flags().BoolVar(&warnings, "warnings", false, "only operations with warnings (a duplicate in 1C, an order gone from 1C)")
	return c
}

// zonedLayout is how the CLI's tables write times: in ui.timezone, with its offset.
const zonedLayout = "2006-01-02 15:04:05 -07:00"

// filterFlagError words what filter.Parse found wrong with journal list's flags: the
// first field, as one line naming its flag.
func filterFlagError(err error) error {
	var fe *filter.Error
	if !errors.As(err, &fe) || len(fe.Fields) == 0 {
		return err
	}
	v := fe.Values
	switch fe.Fields[0] {
	case filter.FieldStatus:
		return fmt.Errorf("--status: must be pending, done or failed, got %q", v.Status)
	case filter.FieldFrom:
		return fmt.Errorf("--from: %q is not a date YYYY-MM-DD", v.From)
	case filter.FieldTo:
		return fmt.Errorf("--to: %q is not a date YYYY-MM-DD", v.To)
	case filter.FieldPeriod:
		return fmt.Errorf("--from %s is after --to %s", v.From, v.To)
	}
	return err // the CLI asks for no other check
}

// listPage is how many rows a listing reads at a time: `--limit 0` lists every row,
// a page at a time, so that memory stays bounded and the output streams.
const listPage = 500

// eachPage reads a listing page by page, each after the last row of the one before
// (fetch's after, nil for the first), at most n rows a page, and hands each page to
// emit, until limit rows (0: no limit) or the listing's end.
func eachPage[T any](limit int, fetch func(after *T, n int) ([]T, error), emit func([]T) error) error {
	return pagesOf(listPage, limit, fetch, emit)
}

// pagesOf is eachPage with pages of size rows.
func pagesOf[T any](size, limit int, fetch func(after *T, n int) ([]T, error), emit func([]T) error) error {
	var after *T
	for done := 0; limit == 0 || done < limit; {
		n := size
		if limit > 0 {
			n = min(n, limit-done)
		}
		page, err := fetch(after, n)
		if err != nil {
			return err
		}
		page = page[:min(len(page), n)]
		if err := emit(page); err != nil {
			return err
		}
		done += len(page)
		if len(page) < n {
			return nil
		}
		last := page[len(page)-1]
		after = &last
	}
	return nil
}

// jsonArray writes a JSON array one element at a time, as writeJSON writes a whole
// one: indented by two spaces, "[]" when empty.
type jsonArray struct {
	w io.Writer
	n int
}

func (j *jsonArray) add(v any) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("  ", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	sep := ",\n  "
	if j.n == 0 {
		sep = "[\n  "
	}
	j.n++
	_, err := io.WriteString(j.w, sep+strings.TrimSuffix(b.String(), "\n"))
	return err
}

// writeJSONPages writes every page pages yields as one JSON array, each element
// turned by row, as the pages come.
func writeJSONPages[T any](w io.Writer, pages func(emit func([]T) error) error, row func(T) any) error {
	arr := &jsonArray{w: w}
	if err := pages(func(items []T) error {
		for _, it := range items {
			if err := arr.add(row(it)); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return err
	}
	return arr.close()
}

func (j *jsonArray) close() error {
	end := "\n]\n"
	if j.n == 0 {
		end = "[]\n"
	}
	_, err := io.WriteString(j.w, end)
	return err
}

// warningCodes lists the codes of ws for a table or CSV cell: "duplicate_in_1c".
func warningCodes(ws []journal.Warning) string {
	codes := make([]string, len(ws))
	for i, w := range ws {
		codes[i] = w.Code
	}
	return strings.Join(codes, ",")
}

type listRow struct {
	Key       string    `json:"key"`
	Status    string    `json:"status"`
	Attempts  int       `json:"attempts"`
	UpdatedAt time.Time `json:"updated_at"`
	Source    string    `json:"source"`
	Ref       string    `json:"ref,omitempty"`
	Number    string    `json:"number,omitempty"`
	LastError string    `json:"last_error"`
	// Warnings are [{"code","message","refs"}], never null.
	Warnings []journal.Warning `json:"warnings"`
	// The exports' columns.
	Kind              string           `json:"kind"`
	ExternalID        string           `json:"external_id"`
	MarketplaceNumber string           `json:"marketplace_number"`
	Customer          string           `json:"customer"`
	Phone             string           `json:"phone"`
	OneCDate          string           `json:"onec_date,omitempty"`
	Total             *decimal.Decimal `json:"total"`
	Currency          string           `json:"currency"`
	CreatedAt         time.Time        `json:"created_at"`
	DoneAt            *time.Time       `json:"done_at"`
}

func toListRow(op journal.Operation, loc *time.Location) listRow {
	x := export.RowOf(op, loc)
	r := listRow{Key: op.Key, Status: string(op.Status), Attempts: op.Attempts, UpdatedAt: op.UpdatedAt.In(loc),
		Source: op.Source, LastError: op.LastError, Warnings: op.Warnings,
		Kind: op.Kind, ExternalID: op.ExternalID, MarketplaceNumber: x.MarketplaceNumber, Customer: x.Customer,
		Phone: x.Phone, OneCDate: x.OneCDate, Total: x.Total, Currency: x.Currency, CreatedAt: x.Created, DoneAt: x.Done}
	if r.Warnings == nil {
		r.Warnings = []journal.Warning{}
	}
	if op.Result != nil {
		r.Ref, r.Number = op.Result.Ref, op.Result.Number
	}
	return r
}

// parseSince is parseSinceIn with dates in the machine's zone.
func parseSince(s string, now time.Time) (time.Time, error) { return parseSinceIn(s, now, time.Local) }

// parseSinceIn accepts a duration back from now, a date (in loc), or an RFC 3339 time.
func parseSinceIn(s string, now time.Time, loc *time.Location) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		return now.Add(-d), nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	if t, err := time.ParseInLocation("2006-01-02", s, loc); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("--since: %q is neither a duration (24h), a date (2026-09-16) nor an RFC 3339 time", s)
}

func truncate(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

func (a *app) journalShowCommand() *cobra.Command {
	var format string
	c := &cobra.Command{
		Use:   "show KEY|NUMBER|EXTERNAL-ID|1C-NUMBER|PHONE",
		Short: "Show one operation with every attempt and conflict",
		Long: `Show one operation with every attempt and conflict, named by its key or by any
form a person has at hand: the marketplace's number (512344101, an Ozon posting
number), the external id as 1C holds it (kaspi:512344101), the 1C number
(ОС-000123) or ref, a customer phone. When several operations match (an order's
create and its cancel, two orders of one phone), they are listed and none is shown.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(format, "table", "json"); err != nil {
				return err
			}
			ctx := cmd.Context()
			cfg, err := a.loadConfig()
			if err != nil {
				return err
			}
			log, err := a.logger(cfg)
			if err != nil {
				return err
			}
			db, err := a.openReadyDB(ctx, cfg, log)
			if err != nil {
				return err
			}
			defer db.Close()
			key, err := a.resolveOperation(ctx, db.Journal(), args[0], cfg.UILocation())
			if err != nil {
				return err
			}
			d, err := db.Journal().Show(ctx, key)
			if err != nil {
				return fmt.Errorf("journal show %s: %w", key, err)
			}
			if format == "json" {
				return writeJSON(a.stdout, showJSON(d))
			}
			a.printDetail(d, cfg.UILocation())
			return nil
		},
	}
	c.Flags().StringVar(&format, "format", "table", "output: table or json")
	return c
}

// maxMatches is how many operations `journal show` lists when a term names several.
const maxMatches = 20

// resolveOperation finds the one operation term names: its key, or else any form
// journal.Filter.Query accepts. Several matches are listed on stderr and refused.
func (a *app) resolveOperation(ctx context.Context, js journal.Store, term string, loc *time.Location) (string, error) {
	if _, err := js.Get(ctx, term); err == nil {
		return term, nil
	} else if !errors.Is(err, journal.ErrNotFound) {
		return "", fmt.Errorf("journal show %s: %w", term, err)
	}
	ops, err := js.List(ctx, journal.Filter{Query: term, Limit: maxMatches + 1})
	if err != nil {
		return "", fmt.Errorf("journal show %s: %w", term, err)
	}
	switch len(ops) {
	case 0:
		return "", fmt.Errorf("journal show %s: %w: no operation has this key, marketplace number, external id, 1C number or ref, or customer phone",
			term, journal.ErrNotFound)
	case 1:
		return ops[0].Key, nil
	}
	more := ""
	if len(ops) > maxMatches {
		ops, more = ops[:maxMatches], fmt.Sprintf(" (the first %d)", maxMatches)
	}
	fmt.Fprintf(a.stderr, "%q names several operations%s:\n", term, more)
	tw := tabwriter.NewWriter(a.stderr, 0, 4, 2, ' ', 0)
	for _, op := range ops {
		r := toListRow(op, loc)
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", r.Key, r.Status, r.CreatedAt.Format(zonedLayout), r.Number)
	}
	tw.Flush()
	return "", fmt.Errorf("journal show %s: several operations match; name one by its key", term)
}

// showJSON is the documented shape of `journal show --format json`; attempts_history and
// conflicts are arrays, never null.
func showJSON(d journal.Detail) journal.Detail {
	if d.Warnings == nil {
		d.Warnings = []journal.Warning{}
	}
	if d.History == nil {
		d.History = []journal.Attempt{}
	}
	if d.Conflicts == nil {
		d.Conflicts = []journal.Conflict{}
	}
	if d.Events == nil {
		d.Events = []journal.Event{}
	}
	return d
}

func (a *app) printDetail(d journal.Detail, loc *time.Location) {
	w := a.stdout
	ts := func(t time.Time) string { return t.In(loc).Format("2006-01-02 15:04:05.000 -07:00") }
	fmt.Fprintf(w, "key:          %s\n", d.Key)
	fmt.Fprintf(w, "kind:         %s\n", d.Kind)
	fmt.Fprintf(w, "source:       %s   external id: %s\n", d.Source, d.ExternalID)
	fmt.Fprintf(w, "status:       %s\n", d.Status)
	fmt.Fprintf(w, "attempts:     %d\n", d.Attempts)
	fmt.Fprintf(w, "created:      %s   updated: %s\n", ts(d.CreatedAt), ts(d.UpdatedAt))
	if d.Status == journal.StatusPending {
		fmt.Fprintf(w, "next attempt: %s\n", ts(d.NextAttemptAt))
	}
	fmt.Fprintf(w, "payload:      sha256 %s\n", d.PayloadSHA256)
	if d.Result != nil {
		fmt.Fprintf(w, "1C order:     № %s of %s (1C's time), ref %s\n", d.Result.Number, d.Result.Date, d.Result.Ref)
		if d.Result.Found {
			fmt.Fprintf(w, "              found in 1C, not created by this operation: %s\n", d.Result.Note)
		} else if d.Result.Note != "" {
			fmt.Fprintf(w, "              %s\n", d.Result.Note)
		}
	}
	for _, warn := range d.Warnings {
		fmt.Fprintf(w, "WARNING:      %s: %s\n", warn.Code, warn.Message)
		if len(warn.Refs) > 0 {
			fmt.Fprintf(w, "              refs: %s\n", strings.Join(warn.Refs, ", "))
		}
	}
	if len(d.Warnings) == 0 && d.Result != nil { // recorded before warnings had codes
		for _, warn := range d.Result.Warnings {
			fmt.Fprintf(w, "warning:      %s\n", warn)
		}
	}
	if d.LastError != "" {
		fmt.Fprintf(w, "last error:   %s\n", d.LastError)
	}
	if d.Status == journal.StatusPending && d.RetryClass != "" {
		fmt.Fprintf(w, "waiting on:   %s failure", d.RetryClass)
		if d.UnknownAttempts > 0 {
			fmt.Fprintf(w, " (%d attempt(s) with an unknown outcome count toward worker.max_attempts)", d.UnknownAttempts)
		}
		fmt.Fprintln(w)
	}
	if d.SettleUntil != nil && d.Status == journal.StatusPending {
		fmt.Fprintf(w, "settles:      %s (1C may still be writing what an earlier attempt sent)\n", ts(*d.SettleUntil))
	}
	if len(d.Events) > 0 {
		fmt.Fprintf(w, "\nevents:\n")
		for _, ev := range d.Events {
			line := fmt.Sprintf("  %s  %s", ts(ev.At), ev.Action)
			if ev.Actor != "" {
				line += " by " + ev.Actor
			}
			if ev.Detail != "" {
				line += ": " + ev.Detail
			}
			fmt.Fprintln(w, line)
		}
	}
	fmt.Fprintf(w, "\nattempts (times in %s):\n", loc)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  #\tOUTCOME\tSTARTED\tFINISHED\tTRIGGERED BY\tWORKER\t1C REF\tERROR")
	for _, at := range d.History {
		fin, outcome := "—", string(at.Outcome)
		if at.FinishedAt != nil {
			fin = ts(*at.FinishedAt)
		}
		if outcome == "" {
			outcome = "(open)"
		}
		if at.Class != "" && at.Outcome != journal.OutcomeDone {
			outcome += " (" + at.Class + ")"
		}
		by := at.TriggeredBy
		if by == "" {
			by = "—"
		}
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", at.Attempt, outcome, ts(at.StartedAt), fin, by, at.Worker, at.Ref, truncate(at.Error, 100))
	}
	tw.Flush()
	for _, at := range d.History {
		if len(at.Exchanges) == 0 {
			continue
		}
		var xs []struct {
			Method, Path   string
			Status         int
			RequestSHA256  string `json:"request_sha256"`
			ResponseSHA256 string `json:"response_sha256"`
			Error          string
		}
		if json.Unmarshal(at.Exchanges, &xs) != nil {
			continue
		}
		fmt.Fprintf(w, "  attempt %d exchanged with 1C:\n", at.Attempt)
		for _, x := range xs {
			status := fmt.Sprint(x.Status)
			if x.Status == 0 {
				status = "no answer"
			}
			line := fmt.Sprintf("    %s %s → %s", x.Method, x.Path, status)
			if x.RequestSHA256 != "" {
				line += " sent sha256:" + x.RequestSHA256[:min(16, len(x.RequestSHA256))]
			}
			if x.ResponseSHA256 != "" {
				line += " got sha256:" + x.ResponseSHA256[:min(16, len(x.ResponseSHA256))]
			}
			if x.Error != "" {
				line += " (" + truncate(x.Error, 80) + ")"
			}
			fmt.Fprintln(w, line)
		}
	}
	if len(d.Conflicts) > 0 {
		fmt.Fprintf(w, "\nconflicts (same key, another payload; nothing was overwritten):\n")
		for _, c := range d.Conflicts {
			seen := ""
			if c.Times > 1 {
				seen = fmt.Sprintf("  (%d times, last %s)", c.Times, ts(c.LastAt))
			}
			fmt.Fprintf(w, "  %s  payload sha256 %s%s\n", ts(c.At), c.PayloadSHA256, seen)
		}
	}
}
