package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/shopspring/decimal"
	"github.com/spf13/cobra"

	"github.com/ordersync/ordersync/connectors/kaspi"
	"github.com/ordersync/ordersync/connectors/ozon"
	"github.com/ordersync/ordersync/connectors/wildberries"
	"github.com/ordersync/ordersync/internal/config"
	"github.com/ordersync/ordersync/internal/payouts"
	lifecycle "github.com/ordersync/ordersync/internal/service"
	"github.com/ordersync/ordersync/internal/store"
)

func init() {
	// How the payouts commands use the database: both fetch (which reads the one
	// marketplace's credentials it asks, readConnectors) and import write lines;
	// status only reads.
	commandUses["payouts fetch"] = dbUse{}
	commandUses["payouts import"] = dbUse{}
	commandUses["payouts status"] = dbUse{readOnly: true}
}

func (a *app) payoutsCommand() *cobra.Command {
	c := &cobra.Command{Use: "payouts", Short: "Read the marketplaces' financial lines (payouts, fees, returns) into the journal database"}
	c.AddCommand(a.payoutsFetchCommand(), a.payoutsImportCommand(), a.payoutsStatusCommand())
	return c
}

// payoutConnector is a --source as payouts fetch takes it: the configuration's name of
// the account (ozon, wildberries, ozon-ip; kaspi); whether the configuration has
// it is the reader's to say.
func payoutConnector(s string) (string, error) {
	switch s = strings.ToLower(strings.TrimSpace(s)); s {
	case "wb":
		return "wildberries", nil
	case "":
		return "", errors.New("--source is required: an Ozon or Wildberries account, such as ozon or wildberries (kaspi: payouts import)")
	}
	return s, nil
}

// payoutPeriod is [from, to+1 day) of the days given (both included) in loc, or by
// default the previous calendar month.
func payoutPeriod(fromS, toS string, loc *time.Location, now time.Time) (from, to time.Time, err error) {
	if fromS == "" && toS == "" {
		from, to = payouts.PreviousMonth(now.In(loc))
		return from, to, nil
	}
	if fromS == "" || toS == "" {
		return from, to, errors.New("--from and --to go together, as YYYY-MM-DD (both inclusive); neither: the previous month")
	}
	from, err = time.ParseInLocation(time.DateOnly, fromS, loc)
	if err != nil {
		return from, to, fmt.Errorf("--from %q is not a date YYYY-MM-DD", fromS)
	}
	last, err := time.ParseInLocation(time.DateOnly, toS, loc)
	if err != nil {
		return from, to, fmt.Errorf("--to %q is not a date YYYY-MM-DD", toS)
	}
	if last.Before(from) {
		return from, to, fmt.Errorf("--to %s is before --from %s", toS, fromS)
	}
	return from, last.AddDate(0, 0, 1), nil
}

// payoutReaders builds the readers of the sources named (ozon, wildberries), each
// from its connector's configuration: an error names the key to set. The Ozon
// reader goes through the connector in built when there is one (run's), so that
// its requests share the connector's rate limit.
func (a *app) payoutReaders(cfg *config.Config, log *slog.Logger, built []marketplace, sources ...string) ([]payouts.Reader, error) {
	var out []payouts.Reader
	for _, src := range sources {
		acc, ok := cfg.PayoutAccount(src)
		switch {
		case !ok:
			return nil, usageError(fmt.Errorf("payouts: no reader of %q: an Ozon or Wildberries account is one of %s",
				src, strings.Join(cfg.PayoutAccounts(), ", ")))
		case acc.Ozon != nil:
			var ms []marketplace
			for _, m := range built {
				if m.name == src {
					ms = append(ms, m)
				}
			}
			if len(ms) == 0 {
				var err error
				if ms, err = buildConnectors(cfg, log, src); err != nil {
					return nil, err
				}
			}
			if len(ms) == 0 {
				return nil, usageError(fmt.Errorf("%s.enabled: must be true to read Ozon's financial lines (its client_id and api_key)", acc.Key()))
			}
			conn, ok := ms[0].mp.(*ozon.Connector)
			if !ok {
				return nil, fmt.Errorf("%s: the connector is a %T", src, ms[0].mp)
			}
			out = append(out, conn.Finance(ozon.FinanceOptions{Source: acc.Source, Currency: cfg.Payouts.OzonCurrency, Location: cfg.UILocation()}))
		default:
			w := acc.Wildberries
			if !w.Enabled {
				return nil, usageError(fmt.Errorf("%s.enabled: must be true to read Wildberries' realization report (its token, with the Statistics category)", acc.Key()))
			}
			r, err := wildberries.NewReport(wildberries.ReportConfig{BaseURL: cfg.Payouts.WildberriesURL, Token: w.Token,
				Source: acc.Source, Clock: a.payoutsClock, Logger: log})
			if err != nil {
				return nil, usageError(fmt.Errorf("config: %w", err))
			}
			out = append(out, r)
		}
	}
	return out, nil
}

func (a *app) payoutsFetchCommand() *cobra.Command {
	var source, from, to, format string
	c := &cobra.Command{
		Use:   "fetch --source ACCOUNT [--from YYYY-MM-DD --to YYYY-MM-DD]",
		Short: "Read a period's financial lines of a marketplace into the journal database",
		Long: `fetch reads the financial lines of one marketplace for a period of days
(YYYY-MM-DD, both inclusive, in ui.timezone or else onec.timezone; by default the
previous calendar month) and keeps each once, by the marketplace's own id: a line
read again is counted as repeated and left as it was. Ozon is read a month a
request; Wildberries' report allows one request a minute, so a long period takes
that many minutes. Progress goes to stderr as the pages arrive; the summary says
how many lines were read, new and repeated, and the marketplace's own total when
it states one (Ozon does).

Exit status 0 when every line was kept, 1 when the reading failed or skipped
records (named on stderr), 2 for a usage or configuration error.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(format, "table", "json"); err != nil {
				return err
			}
			src, err := payoutConnector(source)
			if err != nil {
				return usageError(fmt.Errorf("payouts fetch: %w", err))
			}
			if src == "kaspi" {
				return usageError(errors.New("payouts fetch: Kaspi has no payout API: export the payouts from the cabinet and run `ordersync payouts import --source kaspi FILE.xlsx`"))
			}
			ctx := cmd.Context()
			cfg, err := a.loadConfigReading(readConnectors(src))
			if err != nil {
				return err
			}
			log, err := a.logger(cfg)
			if err != nil {
				return err
			}
			loc := cfg.UILocation()
			fromT, toT, err := payoutPeriod(from, to, loc, time.Now())
			if err != nil {
				return usageError(fmt.Errorf("payouts fetch: %w", err))
			}
			if _, ok := cfg.PayoutAccount(src); !ok {
				return usageError(fmt.Errorf("payouts fetch: --source must be an Ozon or Wildberries account (%s; kaspi: payouts import), got %q",
					strings.Join(cfg.PayoutAccounts(), ", "), src))
			}
			readers, err := a.payoutReaders(cfg, log, nil, src)
			if err != nil {
				return err
			}
			db, err := a.openReadyDB(ctx, cfg, log)
			if err != nil {
				return err
			}
			defer db.Close()
			read, sum := 0, decimal.Zero
			fmt.Fprintf(a.stderr, "reading %s's lines of %s – %s\n", src, fromT.Format(time.DateOnly), toT.AddDate(0, 0, -1).Format(time.DateOnly))
			f, err := payouts.Run(ctx, db.Payouts(), readers[0], fromT, toT, func(p payouts.Page, saved payouts.Saved) {
				read += len(p.Lines)
				for _, l := range p.Lines {
					sum = sum.Add(l.Amount)
				}
				of := ""
				if p.Of > 0 {
					of = fmt.Sprintf(" (of %d this month)", p.Of)
				}
				fmt.Fprintf(a.stderr, "page %d%s: %d lines, %d skipped; so far %d new, %d repeated\n", p.Number, of,
					len(p.Lines), len(p.Skipped), saved.Inserted, saved.Repeated)
			}, nil)
			if perr := printFetch(a.stdout, format, f, read, sum); perr != nil && err == nil {
				err = perr
			}
			if err != nil {
				return err
			}
			if f.Error != "" {
				fmt.Fprintln(a.stderr, "ordersync: payouts fetch: "+f.Error)
				return failedQuietly(errors.New(f.Error))
			}
			return nil
		},
	}
	c.Flags().StringVar(&source, "source", "", "the marketplace: ozon or wildberries")
	c.Flags().StringVar(&from, "from", "", "first day, YYYY-MM-DD (default: the previous month's first)")
	c.Flags().StringVar(&to, "to", "", "last day, YYYY-MM-DD, inclusive (default: the previous month's last)")
	c.Flags().StringVar(&format, "format", "table", "output: table or json")
	return c
}

// fetchJSON is a reading as `payouts fetch --format json` and `payouts import
// --format json` print it: the record kept, with the lines read and their sum.
type fetchJSON struct {
	payouts.Fetch
	Read int             `json:"read"`
	Sum  decimal.Decimal `json:"sum"`
}

func printFetch(w io.Writer, format string, f payouts.Fetch, read int, sum decimal.Decimal) error {
	if format == "json" {
		return writeJSON(w, fetchJSON{Fetch: f, Read: read, Sum: sum})
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "source\t%s\n", f.Source)
	if !f.From.IsZero() {
		fmt.Fprintf(tw, "period\t%s – %s\n", f.From.Format(time.DateOnly), f.To.Add(-time.Nanosecond).Format(time.DateOnly))
	}
	fmt.Fprintf(tw, "lines read\t%d\n", read)
	fmt.Fprintf(tw, "new\t%d\n", f.Saved.Inserted)
	fmt.Fprintf(tw, "repeated\t%d\n", f.Saved.Repeated)
	fmt.Fprintf(tw, "sum of the lines read\t%s\n", sum.StringFixed(2))
	if f.Total != nil {
		fmt.Fprintf(tw, "marketplace's total\t%s\n", f.Total.StringFixed(2))
	} else {
		fmt.Fprintf(tw, "marketplace's total\t(it states none)\n")
	}
	return tw.Flush()
}

func (a *app) payoutsImportCommand() *cobra.Command {
	var source, format string
	c := &cobra.Command{
		Use:   "import --source kaspi FILE.xlsx",
		Short: "Import a marketplace's payout export (Kaspi's cabinet) into the journal database",
		Long: `import reads the payout report exported from the Kaspi seller cabinet (xlsx)
and keeps each of its lines once: a row imported again, from this file or another
export that holds it, is counted as repeated. The columns are found by their
headers (see docs/payouts.md); a missing column or a cell that does not read is
named with its file, sheet, row and column, and then nothing is imported. A total
row («Итого»), if the file has one, is kept as the marketplace's total.

Exit status 0 when the file was imported, 1 when it was refused, 2 for a usage
error.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(format, "table", "json"); err != nil {
				return err
			}
			if s := strings.ToLower(strings.TrimSpace(source)); s != "kaspi" {
				if s == "" {
					return usageError(errors.New("payouts import: --source is required: kaspi"))
				}
				return usageError(fmt.Errorf("payouts import: only kaspi is imported from a file (ozon and wildberries: payouts fetch), got --source %q", source))
			}
			ctx := cmd.Context()
			cfg, err := a.loadConfigReading(nil)
			if err != nil {
				return err
			}
			log, err := a.logger(cfg)
			if err != nil {
				return err
			}
			path := args[0]
			file, err := os.Open(path)
			if err != nil {
				return usageError(fmt.Errorf("payouts import: %w", err))
			}
			defer file.Close()
			db, err := a.openReadyDB(ctx, cfg, log)
			if err != nil {
				return err
			}
			defer db.Close()
			return a.importKaspi(ctx, db, cfg, path, file, format)
		},
	}
	c.Flags().StringVar(&source, "source", "", "the marketplace whose export FILE is: kaspi")
	c.Flags().StringVar(&format, "format", "table", "output: table or json")
	return c
}

func (a *app) importKaspi(ctx context.Context, db store.DB, cfg *config.Config, path string, r io.Reader, format string) error {
	origin := filepath.Base(path)
	pf, err := kaspi.ReadPayouts(path, r, kaspi.PayoutOptions{Location: cfg.UILocation()})
	if err != nil {
		// The refusal is kept too, for `payouts status`.
		now := time.Now()
		if rerr := db.Payouts().RecordFetch(ctx, payouts.Fetch{Source: kaspi.Name, Origin: origin, StartedAt: now,
			FinishedAt: now, Error: err.Error()}); rerr != nil {
			err = errors.Join(err, rerr)
		}
		return fmt.Errorf("payouts import: %w", err)
	}
	f, err := payouts.Import(ctx, db.Payouts(), kaspi.Name, origin, pf.Lines, pf.Total, nil)
	if err != nil {
		return fmt.Errorf("payouts import: %s: %w", origin, err)
	}
	sum := decimal.Zero
	for _, l := range pf.Lines {
		sum = sum.Add(l.Amount)
	}
	if err := printFetch(a.stdout, format, f, len(pf.Lines), sum); err != nil {
		return err
	}
	if pf.Total != nil && !pf.Total.Equal(sum) {
		fmt.Fprintf(a.stderr, "ordersync: payouts import: the file's total row says %s, its lines sum to %s\n", pf.Total, sum)
	}
	return nil
}

func (a *app) payoutsStatusCommand() *cobra.Command {
	var format string
	c := &cobra.Command{
		Use:   "status",
		Short: "Show the latest reading of each marketplace's financial lines",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(format, "table", "json"); err != nil {
				return err
			}
			ctx := cmd.Context()
			cfg, err := a.loadConfigReading(nil)
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
			fs, err := db.Payouts().LastFetches(ctx)
			if err != nil {
				return err
			}
			if format == "json" {
				if fs == nil {
					fs = []payouts.Fetch{}
				}
				return writeJSON(a.stdout, fs)
			}
			if len(fs) == 0 {
				fmt.Fprintln(a.stdout, "no financial lines read yet: ordersync payouts fetch --source ozon (or another Ozon or Wildberries account), or payouts import --source kaspi FILE.xlsx")
				return nil
			}
			loc := cfg.UILocation()
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "SOURCE\tORIGIN\tPERIOD\tFINISHED\tNEW\tREPEATED\tTOTAL\tERROR")
			for _, f := range fs {
				period, finished, total := "", "", ""
				if !f.From.IsZero() {
					period = f.From.In(loc).Format(time.DateOnly) + " – " + f.To.Add(-time.Nanosecond).In(loc).Format(time.DateOnly)
				}
				if !f.FinishedAt.IsZero() {
					finished = f.FinishedAt.In(loc).Format("2006-01-02 15:04")
				}
				if f.Total != nil {
					total = f.Total.StringFixed(2)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\n", f.Source, f.Origin, period, finished, f.Saved.Inserted,
					f.Saved.Repeated, total, f.Error)
			}
			return tw.Flush()
		},
	}
	c.Flags().StringVar(&format, "format", "table", "output: table or json")
	return c
}

// payoutsService is the nightly reading of payouts.schedule, nil when it is off or
// no source is configured.
func (a *app) payoutsService(cfg *config.Config, db store.DB, markets []marketplace, log *slog.Logger) (lifecycle.Service, *payouts.Scheduler, error) {
	if !cfg.Payouts.ScheduleOn() {
		return nil, nil, nil
	}
	sources := cfg.ScheduledSources()
	if len(sources) == 0 {
		return nil, nil, nil
	}
	spec, err := payouts.ParseSchedule(cfg.Payouts.Schedule, cfg.UILocation())
	if err != nil {
		return nil, nil, usageError(fmt.Errorf("payouts.schedule: %w", err))
	}
	readers, err := a.payoutReaders(cfg, log, markets, sources...)
	if err != nil {
		return nil, nil, err
	}
	s := payouts.NewScheduler(payouts.SchedulerConfig{Schedule: spec, Window: cfg.Payouts.Window, Readers: readers,
		Store: db.Payouts(), Logger: log.With("component", "payouts")})
	return lifecycle.Go(s.Run, cfg.Worker.ShutdownTimeout), s, nil
}
