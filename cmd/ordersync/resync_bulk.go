package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"

	"github.com/ordersync/ordersync/internal/config"
	"github.com/ordersync/ordersync/internal/journal"
)

// Bulk resync: `ordersync resync --status failed|pending [--source S] [--since D]
// [--error-contains TEXT] [--dry-run]` retries every operation the filters select.

const (
	// bulkListLimit is the page asked of the journal: every selected operation (a
	// Filter's Limit 0 would mean the store's default of 100).
	bulkListLimit = 1_000_000
)

// bulkBatch is how many operations are made due and carried out together: as many
// as 1C is called for at once (onec.max_concurrency), so that a running service
// works a batch handed to it in one round, well inside the hand-off's deadline of
// two call budgets, and progress shows after every few operations.
func bulkBatch(cfg *config.Config) int { return max(cfg.OneC.MaxConcurrency, 1) }

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
	f := journal.Filter{Status: journal.Status(b.status), Source: b.source, ErrorContains: b.errorContains, Limit: bulkListLimit}
	switch f.Status {
	case journal.StatusFailed, journal.StatusPending:
	case "":
		return f, errors.New("resync: --source, --since, --error-contains and --dry-run filter a bulk resync: give --status failed or --status pending")
	default:
		return f, fmt.Errorf("resync: --status: must be failed or pending, got %q", b.status)
	}
	if b.since != "" {
		t, err := parseSince(b.since, now)
		if err != nil {
			return f, fmt.Errorf("resync: %w", err)
		}
		f.Since = t
	}
	return f, nil
}

// selects applies the filter's last-error condition in this process too, so that a
// store that does not know Filter.ErrorContains yet can never widen the selection
// (a bulk resync must not retry more than it was asked to).
func selects(f journal.Filter, op journal.Operation) bool {
	if f.Status != "" && op.Status != f.Status {
		return false
	}
	return f.ErrorContains == "" || strings.Contains(strings.ToLower(op.LastError), strings.ToLower(f.ErrorContains))
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
	cfg, err := a.loadConfig()
	if err != nil {
		return err
	}
	prog := newProgress(a.stderr, isTerminal(a.stderr) && !b.dryRun)
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

	listed, err := store.List(ctx, f)
	if err != nil {
		return fmt.Errorf("resync: list the journal: %w", err)
	}
	// The journal lists the most recently updated first; retry the oldest first.
	var ops []journal.Operation
	for i := len(listed) - 1; i >= 0; i-- {
		if selects(f, listed[i]) {
			ops = append(ops, listed[i])
		}
	}

	if b.dryRun {
		return a.printBulkDryRun(ops, f.Status, format)
	}

	out := bulkOutput{Operations: []bulkRow{}}
	batchSize := bulkBatch(cfg)
	if pid, ok := serviceRunning(db); ok && len(ops) > 0 {
		fmt.Fprintf(prog, "handing %d operation(s) to the running service (pid %d), %d at a time, and waiting for the outcome\n", len(ops), pid, batchSize)
	}
	prog.start(len(ops))
	// One line per operation on stdout for a table, unless the bar shows progress; a
	// JSON document keeps stdout for itself, so its lines go to stderr.
	bar := prog.tty && len(ops) > 0
	var lines io.Writer
	switch {
	case bar:
	case format == "json":
		lines = a.stderr
	default:
		lines = a.stdout
	}
	w := worker{a: &quiet, cfg: cfg, log: log, db: db}
	var runErr error
	for start := 0; start < len(ops) && runErr == nil; start += batchSize {
		batch := make([]string, 0, batchSize)
		for _, op := range ops[start:min(start+batchSize, len(ops))] {
			batch = append(batch, op.Key)
		}
		// Due now, batch by batch: a running service (or this process) takes them
		// up as they come, never all ten thousand at once.
		for _, key := range batch {
			if _, err := store.Requeue(ctx, key); err != nil && !errors.Is(err, journal.ErrNotPending) {
				runErr = fmt.Errorf("requeue %s: %w", key, err)
				break
			}
		}
		if runErr != nil {
			break
		}
		done, err := w.runKeys(ctx, batch)
		for _, op := range done {
			out.Retried++
			if op.Status == journal.StatusDone {
				out.Done++
			} else {
				out.StillFailing++
			}
			out.Operations = append(out.Operations, toBulkRow(op))
			prog.step(op.Status == journal.StatusDone)
			if lines != nil {
				fmt.Fprintf(lines, "[%d/%d] %s\n", out.Retried, len(ops), describeOutcome(op))
			}
		}
		runErr = err
	}
	prog.finish()
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
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", op.Key, op.Status, op.Attempts, truncate(op.LastError, 100))
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

// progress draws `\r[#####     ] 12/30, 3 still failing` on a terminal, and
// elsewhere nothing. As an io.Writer it passes what is written on to its stream,
// clearing the bar's line first and drawing the bar again after.
type progress struct {
	mu       sync.Mutex
	w        io.Writer
	tty      bool
	total, n int
	failing  int
	drawn    bool
}

const progressWidth = 30

func newProgress(w io.Writer, tty bool) *progress { return &progress{w: w, tty: tty} }

// start draws the empty bar for total operations.
func (p *progress) start(total int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.total = total
	p.draw()
}

// step counts one operation carried out.
func (p *progress) step(done bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n++
	if !done {
		p.failing++
	}
	p.draw()
}

func (p *progress) draw() {
	if !p.tty || p.total == 0 {
		return
	}
	filled := progressWidth * p.n / p.total
	fmt.Fprintf(p.w, "\r[%s%s] %d/%d", strings.Repeat("#", filled), strings.Repeat(" ", progressWidth-filled), p.n, p.total)
	if p.failing > 0 {
		fmt.Fprintf(p.w, ", %d still failing", p.failing)
	}
	p.drawn = true
}

func (p *progress) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.drawn {
		fmt.Fprint(p.w, "\r\033[K") // the start of the line, cleared
	}
	n, err := p.w.Write(b)
	if p.drawn {
		p.draw()
	}
	return n, err
}

// finish ends the bar's line; what is written after goes below it.
func (p *progress) finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.drawn {
		fmt.Fprintln(p.w)
		p.drawn = false
	}
	p.tty = false
}
