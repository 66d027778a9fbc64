package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"

	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/journal/export"
	"github.com/ordersync/ordersync/internal/journal/filter"
	"github.com/ordersync/ordersync/internal/resync"
)

// Bulk resync: `ordersync resync --status failed|pending [--source S] [--since D]
// [--error-contains TEXT] [--dry-run]` retries every operation the filters select
// (internal/resync); here are its flags and its output.

type bulkFlags struct {
	status, source, since, errorContains string
	dryRun                               bool
}

var bulkFlagNames = []string{"status", "source", "since", "error-contains", "dry-run"}

func (b *bulkFlags) register(c *cobra.Command) {
	c.Flags().StringVar(&b.status, "status", "", "retry every failed or pending operation the filters select (no KEY)")
	c.Flags().StringVar(&b.source, "source", "", "with --status: only operations of this source (kaspi, ozon, site, …)")
	c.Flags().StringVar(&b.since, "since", "", "with --status: only operations updated since: a duration (24h), a date (2026-09-16) or an RFC 3339 time")
	c.Flags().StringVar(&b.errorContains, "error-contains", "", "with --status: only operations whose last error contains this text (case-insensitive)")
	c.Flags().BoolVar(&b.dryRun, "dry-run", false, "with --status: list what would be retried and change nothing")
}

// used tells whether any bulk flag was given: then it is bulk mode (or a usage error).
func (b *bulkFlags) used(cmd *cobra.Command) bool {
	for _, name := range bulkFlagNames {
		if cmd.Flags().Changed(name) {
			return true
		}
	}
	return false
}

// filter is the journal filter the flags select. Its errors are usage errors.
func (b *bulkFlags) filter(now time.Time) (journal.Filter, error) {
	f := journal.Filter{Status: journal.Status(b.status), Source: b.source, ErrorContains: b.errorContains}
	switch f.Status {
	case journal.StatusFailed, journal.StatusPending:
	case "":
		return f, errors.New("resync: --source, --since, --error-contains and --dry-run filter a bulk resync: give --status failed or --status pending")
	default:
		return f, fmt.Errorf("resync: --status: must be failed or pending, got %q", b.status)
	}
	if b.since != "" {
		t, err := filter.ParseSince(b.since, now, time.Local)
		if err != nil {
			return f, fmt.Errorf("resync: %w", err)
		}
		f.Since = t
	}
	return f, nil
}

type bulkRow struct {
	Key       string          `json:"key"`
	Status    string          `json:"status"`
	Attempts  int             `json:"attempts"`
	UpdatedAt time.Time       `json:"updated_at"`
	LastError string          `json:"last_error"`
	Result    *journal.Result `json:"result,omitempty"`
}

func toBulkRow(op journal.Operation) bulkRow {
	return bulkRow{Key: op.Key, Status: string(op.Status), Attempts: op.Attempts, UpdatedAt: op.UpdatedAt,
		LastError: op.LastError, Result: op.Result}
}

type bulkDryRun struct {
	DryRun     bool      `json:"dry_run"`
	Count      int       `json:"count"`
	Operations []bulkRow `json:"operations"`
}

type bulkOutput struct {
	Retried      int       `json:"retried"`
	Done         int       `json:"done"`
	StillFailing int       `json:"still_failing"`
	Operations   []bulkRow `json:"operations"`
	Error        string    `json:"error,omitempty"` // why it stopped before the end
}

func (a *app) resyncBulk(ctx context.Context, b bulkFlags, format string) error {
	// The requeues and attempts are the operator's, in bulk (bulk:cli:anna).
	ctx = journal.WithActor(ctx, journal.ActorBulk(journal.ActorCLI(cliUser())))
	f, err := b.filter(time.Now())
	if err != nil {
		return usageError(err)
	}
	reads := a.use().secrets
	if b.dryRun {
		reads = nil // it lists the journal and changes nothing
	}
	cfg, err := a.loadConfigReading(reads)
	if err != nil {
		return err
	}
	prog := resync.NewProgress(a.stderr, isTerminal(a.stderr) && !b.dryRun)
	// Log lines (the engine's, when this process does the work) are written around
	// the bar, not across it; a hand-off says once where the work went instead of
	// once a batch.
	quiet := *a
	quiet.stderr = prog
	log, err := quiet.logger(cfg)
	if err != nil {
		return err
	}
	quiet.stderr = io.Discard
	if !b.dryRun {
		if _, err := a.newClient(cfg, log); err != nil { // onec.base_url is needed to carry them out
			return err
		}
	}
	db, err := a.openReadyDB(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer db.Close()
	store := db.Journal()

	ops, err := resync.Select(ctx, store, f)
	if err != nil {
		return fmt.Errorf("resync: list the journal: %w", err)
	}

	if b.dryRun {
		return a.printBulkDryRun(ops, f.Status, format)
	}

	batchSize := resync.BatchSize(cfg.OneC.MaxConcurrency)
	if pid, ok := serviceRunning(db); ok && len(ops) > 0 {
		fmt.Fprintf(prog, "handing %d operation(s) to the running service (pid %d), %d at a time, and waiting for the outcome\n", len(ops), pid, batchSize)
	}
	prog.Start(len(ops))
	// One line per operation on stdout for a table, unless the bar shows progress; a
	// JSON document keeps stdout for itself, so its lines go to stderr.
	bar := prog.Bar() && len(ops) > 0
	var lines io.Writer
	switch {
	case bar:
	case format == "json":
		lines = a.stderr
	default:
		lines = a.stdout
	}
	w := worker{a: &quiet, cfg: cfg, log: log, db: db}
	res := resync.Run(ctx, resync.Config{Journal: store, Run: w.runKeys, Batch: batchSize,
		Ended: func(op journal.Operation, n int) {
			prog.Step(op.Status == journal.StatusDone)
			if lines != nil {
				fmt.Fprintf(lines, "[%d/%d] %s\n", n, len(ops), describeOutcome(op))
			}
		}}, ops)
	prog.Finish()
	out := bulkOutput{Retried: res.Retried, Done: res.Done, StillFailing: res.StillFailing, Operations: []bulkRow{}}
	for _, op := range res.Operations {
		out.Operations = append(out.Operations, toBulkRow(op))
	}
	runErr := res.Err
	if runErr != nil {
		out.Error = runErr.Error()
	}

	if format == "json" {
		if err := writeJSON(a.stdout, out); err != nil {
			return err
		}
	} else {
		if len(ops) == 0 {
			fmt.Fprintf(a.stdout, "no %s operation matches\n", f.Status)
		}
		if bar { // the bar did not name them: the ones still failing
			for _, r := range out.Operations {
				if r.Status != string(journal.StatusDone) {
					fmt.Fprintf(a.stdout, "%s: %s after attempt %d: %s\n", r.Key, r.Status, r.Attempts, r.LastError)
				}
			}
		}
		fmt.Fprintf(a.stdout, "%d retried: %d done, %d still failing\n", out.Retried, out.Done, out.StillFailing)
	}
	if runErr != nil {
		return fmt.Errorf("resync: stopped after %d of %d: %w", out.Retried, len(ops), runErr)
	}
	if out.StillFailing > 0 {
		return failedQuietly(fmt.Errorf("%d still failing", out.StillFailing))
	}
	return nil
}

// describeOutcome is one operation's line: key, status, attempt, and 1C's number or
// the error.
func describeOutcome(op journal.Operation) string {
	var s strings.Builder
	fmt.Fprintf(&s, "%s: %s after attempt %d", op.Key, op.Status, op.Attempts)
	switch {
	case op.Status == journal.StatusDone && op.Result != nil && op.Result.Number != "":
		fmt.Fprintf(&s, " (1C № %s)", op.Result.Number)
	case op.Status == journal.StatusDone && op.Result != nil && op.Result.Note != "":
		fmt.Fprintf(&s, " (%s)", op.Result.Note)
	case op.Status == journal.StatusPending:
		fmt.Fprintf(&s, ", next attempt at %s: %s", op.NextAttemptAt.Local().Format(time.DateTime), op.LastError)
	case op.Status != journal.StatusDone:
		fmt.Fprintf(&s, ": %s", op.LastError)
	}
	return s.String()
}

func (a *app) printBulkDryRun(ops []journal.Operation, status journal.Status, format string) error {
	if format == "json" {
		rows := make([]bulkRow, len(ops))
		for i, op := range ops {
			rows[i] = toBulkRow(op)
		}
		return writeJSON(a.stdout, bulkDryRun{DryRun: true, Count: len(ops), Operations: rows})
	}
	if len(ops) > 0 {
		tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "KEY\tSTATUS\tATTEMPTS\tLAST ERROR")
		for _, op := range ops {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", op.Key, op.Status, op.Attempts, export.Clip(op.LastError, 100))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(a.stdout, "no %s operation matches\n", status)
	}
	_, err := fmt.Fprintf(a.stdout, "%d would be retried (dry run: nothing was changed)\n", len(ops))
	return err
}

// isTerminal tells whether w is a terminal (the progress bar is drawn only there).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}
