package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/ordersync/ordersync/internal/config"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/order"
	"github.com/ordersync/ordersync/internal/store"
)

func (a *app) orderCommand() *cobra.Command {
	c := &cobra.Command{Use: "order", Short: "Register orders and cancels by hand"}
	var format string
	imp := &cobra.Command{
		Use:   "import [FILE|-]",
		Short: "Register canonical orders from a file or standard input",
		Long: `import reads canonical orders: one JSON object, a JSON array,
or JSON lines. Each valid order is registered as <source>:order:<external_id>:create;
the running service then creates it in 1C. An invalid order is rejected with a line
naming the field and the others are still registered; the exit status is then 1.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(format, "table", "json"); err != nil {
				return err
			}
			ctx := withCLIActor(cmd.Context()) // what it registers and attempts is the operator's
			in := a.stdin
			name := "standard input"
			if len(args) == 1 && args[0] != "-" {
				f, err := os.Open(args[0])
				if err != nil {
					return usageError(fmt.Errorf("order import: %w", err))
				}
				defer f.Close()
				in, name = f, args[0]
			}
			items, err := order.ReadBatch(in)
			if err != nil {
				return fmt.Errorf("order import: %s: %w", name, err)
			}
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
			store := db.Journal()

			results := make([]importResult, 0, len(items))
			for _, it := range items {
				r := importResult{Line: it.Line}
				if it.Err != nil {
					r.Outcome, r.Error = "rejected", it.Err.Error()
					var ve *order.ValidationError
					if errors.As(it.Err, &ve) {
						r.Field = ve.Problems[0].Field
					}
					if it.Order.Source != "" && it.Order.ExternalID != "" {
						r.Key = it.Order.CreateKey()
					}
					results = append(results, r)
					continue
				}
				r.Key = it.Order.CreateKey()
				reg, err := store.Register(ctx, journal.CreateOrder(it.Order))
				if err != nil {
					r.Outcome, r.Error = "error", err.Error()
					results = append(results, r)
					continue
				}
				r.Outcome, r.Status = string(reg.Outcome), string(reg.Operation.Status)
				if reg.Outcome == journal.Conflicted {
					r.Error = "the journal already holds this key with another payload; the conflict is recorded and nothing was changed"
				}
				results = append(results, r)
			}
			rerr := a.reportImport(results, format)
			if err := a.afterImport(ctx, cfg, log, db, results); err != nil {
				return err
			}
			return rerr
		},
	}
	imp.Flags().StringVar(&format, "format", "table", "output: table or json")
	c.AddCommand(imp, a.orderCancelCommand())
	return c
}

type importResult struct {
	Line    int    `json:"line"`
	Key     string `json:"key,omitempty"`
	Outcome string `json:"outcome"` // registered, duplicate, conflict, rejected, error
	Status  string `json:"status,omitempty"`
	Field   string `json:"field,omitempty"`
	Error   string `json:"error,omitempty"`
}

func (a *app) reportImport(results []importResult, format string) error {
	counts := map[string]int{}
	for _, r := range results {
		counts[r.Outcome]++
	}
	if format == "json" {
		if err := writeJSON(a.stdout, results); err != nil {
			return err
		}
	} else {
		tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "LINE\tKEY\tOUTCOME\tSTATUS")
		for _, r := range results {
			if r.Outcome == "rejected" || r.Outcome == "error" {
				continue
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", r.Line, r.Key, r.Outcome, r.Status)
		}
		tw.Flush()
		fmt.Fprintf(a.stdout, "%d read: %d registered, %d duplicate, %d conflict, %d rejected, %d error\n",
			len(results), counts["registered"], counts["duplicate"], counts["conflict"], counts["rejected"], counts["error"])
	}
	for _, r := range results {
		switch r.Outcome {
		case "rejected", "error", "conflict":
			key := ""
			if r.Key != "" {
				key = " " + r.Key
			}
			fmt.Fprintf(a.stderr, "line %d%s: %s: %s\n", r.Line, key, r.Outcome, r.Error)
		}
	}
	if bad := counts["rejected"] + counts["error"] + counts["conflict"]; bad > 0 {
		return failedQuietly(fmt.Errorf("%d of %d orders not registered", bad, len(results)))
	}
	return nil
}

// afterImport hands newly registered operations on: on PostgreSQL the service claims
// them at its next poll. On an embedded database, a running service is woken at once;
// with none running, this command carries them out itself when 1C is configured.
func (a *app) afterImport(ctx context.Context, cfg *config.Config, log *slog.Logger, db store.DB, results []importResult) error {
	var keys []string
	for _, r := range results {
		if r.Outcome == string(journal.Registered) {
			keys = append(keys, r.Key)
		}
	}
	if len(keys) == 0 || db.EmbeddedFile() == "" {
		return nil
	}
	if pid, ok := serviceRunning(db); ok {
		if err := wakeService(pid); err != nil {
			return fmt.Errorf("order import: wake the running service (pid %d): %w", pid, err)
		}
		fmt.Fprintf(a.stderr, "handed %d operation(s) to the running service (pid %d)\n", len(keys), pid)
		return nil
	}
	if cfg.OneC.BaseURL == "" {
		fmt.Fprintf(a.stderr, "no service runs on %s and onec.base_url is not set: `ordersync run` carries them out\n", db)
		return nil
	}
	ops, err := worker{a: a, cfg: cfg, log: log, db: db}.runKeys(ctx, keys)
	if err != nil {
		return fmt.Errorf("order import: %w", err)
	}
	failed := 0
	for _, op := range ops {
		fmt.Fprintf(a.stdout, "%s: %s", op.Key, op.Status)
		if op.Result != nil && op.Result.Number != "" {
			fmt.Fprintf(a.stdout, " (1C № %s)", op.Result.Number)
		}
		if op.Status != journal.StatusDone {
			failed++
			fmt.Fprintf(a.stdout, ": %s", op.LastError)
		}
		fmt.Fprintln(a.stdout)
	}
	if failed > 0 {
		return failedQuietly(fmt.Errorf("%d operation(s) not done", failed))
	}
	return nil
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

func checkFormat(got string, allowed ...string) error {
	for _, a := range allowed {
		if got == a {
			return nil
		}
	}
	return usageError(fmt.Errorf("--format: must be one of %v, got %q", allowed, got))
}
