package main

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ordersync/ordersync/internal/journal"
)

func (a *app) journalCommand() *cobra.Command {
	c := &cobra.Command{Use: "journal", Short: "Read the journal of operations and attempts"}
	c.AddCommand(a.journalListCommand(), a.journalShowCommand())
	return c
}

func (a *app) journalListCommand() *cobra.Command {
	var (
		status, source, since, format string
		limit                         int
		warnings                      bool
	)
	c := &cobra.Command{
		Use:   "list",
		Short: "List operations, most recently updated first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(format, "table", "json", "csv"); err != nil {
				return err
			}
			f := journal.Filter{Status: journal.Status(status), Source: source, Limit: limit, WarningsOnly: warnings}
			switch f.Status {
			case "", journal.StatusPending, journal.StatusDone, journal.StatusFailed:
			default:
				return usageError(fmt.Errorf("--status: must be pending, done or failed, got %q", status))
			}
			if limit < 0 {
				return usageError(fmt.Errorf("--limit: must not be negative (0 lists every operation), got %d", limit))
			}
			if since != "" {
				t, err := parseSince(since, time.Now())
				if err != nil {
					return usageError(err)
				}
				f.Since = t
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
			// Page by page: --limit 0 lists the whole journal in bounded memory, and the
			// output streams.
			pages := func(emit func([]journal.Operation) error) error {
				return eachPage(limit, func(after *journal.Operation, n int) ([]journal.Operation, error) {
					page := f
					page.Limit, page.After = n, after
					return db.Journal().List(ctx, page)
				}, emit)
			}
			switch format {
			case "json":
				return writeJSONPages(a.stdout, pages, func(op journal.Operation) any { return toListRow(op) })
			case "csv":
				w := csv.NewWriter(a.stdout)
				w.Write([]string{"key", "status", "attempts", "updated_at", "ref", "number", "last_error", "warnings"})
				return pages(func(ops []journal.Operation) error {
					for _, op := range ops {
						r := toListRow(op)
						w.Write([]string{r.Key, r.Status, fmt.Sprint(r.Attempts), r.UpdatedAt.Format(time.RFC3339), r.Ref, r.Number, r.LastError,
							warningCodes(r.Warnings)})
					}
					w.Flush()
					return w.Error()
				})
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "KEY\tSTATUS\tATTEMPTS\tUPDATED\t1C NUMBER\tWARNINGS\tLAST ERROR")
			return pages(func(ops []journal.Operation) error {
				for _, op := range ops {
					r := toListRow(op)
					fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\n", r.Key, r.Status, r.Attempts,
						r.UpdatedAt.Local().Format("2006-01-02 15:04:05"), r.Number, warningCodes(r.Warnings), truncate(r.LastError, 80))
				}
				return tw.Flush() // each page is aligned on its own
			})
		},
	}
	c.Flags().StringVar(&status, "status", "", "only pending, done or failed operations")
	c.Flags().StringVar(&source, "source", "", "only operations of this source (kaspi, ozon, site, …)")
	c.Flags().StringVar(&since, "since", "", "only operations updated since: a duration (24h), a date (2026-09-16) or an RFC 3339 time")
	c.Flags().IntVar(&limit, "limit", 100, "at most this many operations; 0 lists them all")
	c.Flags().StringVar(&format, "format", "table", "output: table, json or csv")
	c.Flags().BoolVar(&warnings, "warnings", false, "only operations with warnings (a duplicate in 1C, an order gone from 1C)")
	return c
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
}

func toListRow(op journal.Operation) listRow {
	r := listRow{Key: op.Key, Status: string(op.Status), Attempts: op.Attempts, UpdatedAt: op.UpdatedAt,
		Source: op.Source, LastError: op.LastError, Warnings: op.Warnings}
	if r.Warnings == nil {
		r.Warnings = []journal.Warning{}
	}
	if op.Result != nil {
		r.Ref, r.Number = op.Result.Ref, op.Result.Number
	}
	return r
}

// parseSince accepts a duration back from now, a date, or an RFC 3339 time.
func parseSince(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		return now.Add(-d), nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	if t, err := time.ParseInLocation("2006-01-02", s, time.Local); err == nil {
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
		Use:   "show KEY",
		Short: "Show one operation with every attempt and conflict",
		Args:  cobra.ExactArgs(1),
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
			d, err := db.Journal().Show(ctx, args[0])
			if err != nil {
				return fmt.Errorf("journal show %s: %w", args[0], err)
			}
			if format == "json" {
				return writeJSON(a.stdout, showJSON(d))
			}
			a.printDetail(d)
			return nil
		},
	}
	c.Flags().StringVar(&format, "format", "table", "output: table or json")
	return c
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
	return d
}

func (a *app) printDetail(d journal.Detail) {
	w := a.stdout
	ts := func(t time.Time) string { return t.Local().Format("2006-01-02 15:04:05.000") }
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
		fmt.Fprintf(w, "1C order:     № %s of %s, ref %s\n", d.Result.Number, d.Result.Date, d.Result.Ref)
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
	fmt.Fprintf(w, "\nattempts:\n")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  #\tOUTCOME\tSTARTED\tFINISHED\tWORKER\t1C REF\tERROR")
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
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%s\t%s\n", at.Attempt, outcome, ts(at.StartedAt), fin, at.Worker, at.Ref, truncate(at.Error, 100))
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
