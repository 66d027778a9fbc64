package main

import (
	"context"
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/journal/export"
	"github.com/ordersync/ordersync/internal/journal/filter"
	"github.com/ordersync/ordersync/internal/listing"
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
				t, err := filter.ParseSince(since, time.Now(), loc)
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
				err := listing.Each(limit, func(after *journal.Operation, n int) ([]journal.Operation, error) {
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
				rows := func(emit func([]export.ListRow) error) error {
					return pages(func(ops []journal.Operation) error {
						cancels, err := journal.CancelsOf(ctx, db.Journal(), ops)
						if err != nil {
							return err
						}
						out := make([]export.ListRow, len(ops))
						for i, op := range ops {
							out[i] = export.ListRowOf(op, loc)
							out[i].State = journal.OrderStateOf(op, cancels)
						}
						return emit(out)
					})
				}
				return listing.WriteJSON(a.stdout, rows, func(r export.ListRow) any { return r })
			case "csv", "xlsx":
				var w export.Writer
				if format == "csv" {
					w = export.NewCSV(a.stdout, cfg.UI.Lang, loc)
				} else if w, err = export.NewXLSX(a.stdout, cfg.UI.Lang, loc); err != nil {
					return err
				}
				if err := pages(func(ops []journal.Operation) error {
					cancels, err := journal.CancelsOf(ctx, db.Journal(), ops)
					if err != nil {
						return err
					}
					for _, op := range ops {
						row := export.RowOf(op, loc)
						row.State = string(journal.OrderStateOf(op, cancels))
						if err := w.Write(row); err != nil {
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
					r := export.ListRowOf(op, loc)
					fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\n", r.Key, r.Status, r.Attempts,
						r.UpdatedAt.Format(export.ZonedLayout), r.Number, export.WarningCodes(r.Warnings), export.Clip(r.LastError, 80))
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
				return writeJSON(a.stdout, export.DetailJSON(d))
			}
			export.WriteDetail(a.stdout, d, cfg.UILocation())
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
		r := export.ListRowOf(op, loc)
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", r.Key, r.Status, r.CreatedAt.Format(export.ZonedLayout), r.Number)
	}
	tw.Flush()
	return "", fmt.Errorf("journal show %s: several operations match; name one by its key", term)
}
