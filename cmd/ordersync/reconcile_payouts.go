package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ordersync/ordersync/connectors/kaspi"
	"github.com/ordersync/ordersync/connectors/wildberries"
	"github.com/ordersync/ordersync/internal/config"
	payrec "github.com/ordersync/ordersync/internal/payouts/reconcile"
	"github.com/ordersync/ordersync/internal/reconcile"
)

// alsoACommand marks a command that has subcommands and runs as a command of its
// own too (reconcile, and reconcile payouts).
const alsoACommand = "also_a_command"

// payoutSource is the journal's name of the source a person named: kaspi, or an
// Ozon or Wildberries account by its configuration name (wildberries, ozon-ip) or
// by its source (wb).
func payoutSource(cfg *config.Config, s string) (string, error) {
	if s == kaspi.Name {
		return s, nil
	}
	if s == wildberries.Name {
		s = "wildberries"
	}
	if acc, ok := cfg.PayoutAccount(s); ok {
		return acc.Source, nil
	}
	return "", fmt.Errorf("the source must be kaspi or an Ozon or Wildberries account (%s), got %q",
		strings.Join(cfg.PayoutAccounts(), ", "), s)
}

func (a *app) reconcilePayoutsCommand() *cobra.Command {
	var source, from, to, format, output string
	c := &cobra.Command{
		Use:   "payouts --source kaspi|ACCOUNT --from DATE --to DATE",
		Short: "Reconcile a payout period line by line against the journal and 1C",
		Long: `reconcile payouts takes the payout lines ordersync holds for one marketplace and
a period of days (YYYY-MM-DD, both inclusive, in ui.timezone or else onec.timezone),
puts each order beside its journal operations and its 1C order, and puts it in one
category: paid_as_sold, paid_with_difference, returned_in_1c, returned_not_in_1c,
paid_unknown, in_1c_not_paid, cancelled_but_paid. Lines of the cabinet as a whole
are totalled by the marketplace's type; the totals are checked against the sum of
every line and against the marketplace's own total of the period when it stated one.

The table shows the summary, then every order that needs something done; json,
csv and xlsx hold every order (xlsx: a summary sheet and a sheet per category, in
ui.language). --output writes the report to a file instead of standard output.
Exit status 0 when every order is paid as sold or returned in 1C and the totals
agree, 1 otherwise.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(format, "table", "json", "csv", "xlsx"); err != nil {
				return err
			}
			if source == "" {
				return usageError(errors.New("reconcile payouts: --source is required: kaspi, ozon or wildberries"))
			}
			if from == "" || to == "" {
				return usageError(errors.New("reconcile payouts: --from and --to are required, as YYYY-MM-DD (both inclusive)"))
			}
			fromDay, err := time.Parse(time.DateOnly, from)
			if err != nil {
				return usageError(fmt.Errorf("reconcile payouts: --from %q is not a date YYYY-MM-DD", from))
			}
			toDay, err := time.Parse(time.DateOnly, to)
			if err != nil {
				return usageError(fmt.Errorf("reconcile payouts: --to %q is not a date YYYY-MM-DD", to))
			}
			if toDay.Before(fromDay) {
				return usageError(fmt.Errorf("reconcile payouts: --to %s is before --from %s", to, from))
			}
			if format == "xlsx" && output == "" && isTerminal(a.stdout) {
				return usageError(errors.New("reconcile payouts: an xlsx workbook is not for a terminal: redirect it to a file or give --output FILE"))
			}
			ctx := cmd.Context()
			cfg, err := a.loadConfigReading(readOneC)
			if err != nil {
				return err
			}
			name, err := payoutSource(cfg, source)
			if err != nil {
				return usageError(fmt.Errorf("reconcile payouts: --source: %w", err))
			}
			log, err := a.logger(cfg)
			if err != nil {
				return err
			}
			client, err := a.newClient(cfg, log)
			if err != nil {
				return err
			}
			defer client.Close(ctx)
			db, err := a.openReadyDB(ctx, cfg, log)
			if err != nil {
				return err
			}
			defer db.Close()
			loc := cfg.UILocation()
			rep, err := payrec.Run(ctx, payrec.Params{Source: name, From: fromDay, To: toDay, Location: loc,
				OneCLocation: cfg.OneC.Location(), Lines: db.Payouts(), Journal: db.Journal(), OneC: client})
			if errors.Is(err, reconcile.ErrPeriodTooLong) {
				return usageError(err)
			}
			if err != nil {
				return err
			}
			var w io.Writer = a.stdout
			var file *os.File
			if output != "" {
				if file, err = os.Create(output); err != nil {
					return usageError(fmt.Errorf("reconcile payouts: --output: %w", err))
				}
				w = file
			}
			switch format {
			case "json":
				err = payrec.WriteJSON(w, rep)
			case "csv":
				err = payrec.WriteCSV(w, rep, loc)
			case "xlsx":
				err = payrec.WriteXLSX(w, rep, cfg.UI.Lang, loc)
			default:
				err = payrec.WriteTable(w, rep, loc)
			}
			if file != nil {
				if cerr := file.Close(); err == nil {
					err = cerr
				}
			}
			if err != nil {
				return fmt.Errorf("reconcile payouts: write the report: %w", err)
			}
			if !rep.Clean() {
				return &exitError{code: exitFailed, err: fmt.Errorf("reconcile payouts: %d of %d orders need something done; %s; %s",
					rep.NotFine(), len(rep.Items), payrec.Balance("en", rep.Totals, payrec.PlainMoney), payrec.Verdict("en", rep.Totals, payrec.PlainMoney))}
			}
			return nil
		},
	}
	c.Flags().StringVar(&source, "source", "", "kaspi, ozon or wildberries")
	c.Flags().StringVar(&from, "from", "", "first day of the period, YYYY-MM-DD")
	c.Flags().StringVar(&to, "to", "", "last day of the period, YYYY-MM-DD (inclusive)")
	c.Flags().StringVar(&format, "format", "table", "table, json, csv or xlsx")
	c.Flags().StringVar(&output, "output", "", "write the report to this file instead of standard output")
	return c
}
