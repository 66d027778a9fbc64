package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/ordersync/ordersync/connectors"
	"github.com/ordersync/ordersync/internal/reconcile"
)

func (a *app) reconcileCommand() *cobra.Command {
	var source, from, to, format string
	c := &cobra.Command{
		Use:   "reconcile --source kaspi|ozon|wildberries|site --from DATE --to DATE",
		Short: "Compare a period's orders at the marketplace, in the journal and in 1C",
		Long: `reconcile compares, for one source and a period of days (YYYY-MM-DD, both
inclusive, in ui.timezone or else onec.timezone), the marketplace's own list of
orders (none for site), the journal, and the orders 1C holds for that source, and
puts each order in one category: ok, missing_in_journal, not_done, missing_in_1c,
duplicate_in_1c, amount_mismatch, cancelled_but_live, unknown_to_journal.

The table shows the totals per category, then every order that is not ok; json,
csv and xlsx hold every order. Exit status 0 when every order is ok, 1 otherwise.

reconcile payouts reconciles a payout period's lines instead (see its --help).`,
		Args:        cobra.NoArgs,
		Annotations: map[string]string{alsoACommand: "true"},
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(format, "table", "json", "csv", "xlsx"); err != nil {
				return err
			}
			if source == "" {
				return usageError(errors.New("reconcile: --source is required: kaspi, ozon, wildberries or site"))
			}
			if from == "" || to == "" {
				return usageError(errors.New("reconcile: --from and --to are required, as YYYY-MM-DD (both inclusive)"))
			}
			fromDay, err := time.Parse(time.DateOnly, from)
			if err != nil {
				return usageError(fmt.Errorf("reconcile: --from %q is not a date YYYY-MM-DD", from))
			}
			toDay, err := time.Parse(time.DateOnly, to)
			if err != nil {
				return usageError(fmt.Errorf("reconcile: --to %q is not a date YYYY-MM-DD", to))
			}
			if toDay.Before(fromDay) {
				return usageError(fmt.Errorf("reconcile: --to %s is before --from %s", to, from))
			}
			ctx := cmd.Context()
			cfg, err := a.loadConfigReading(readOneC.and(readConnectors(source)))
			if err != nil {
				return err
			}
			log, err := a.logger(cfg)
			if err != nil {
				return err
			}

			// The source as the journal and 1C name it: the connector's name (wb
			// for wildberries); site has no listing to compare with.
			var mp connectors.Marketplace
			name := source
			switch source {
			case "site":
			case "kaspi", "ozon", "wildberries":
				ms, err := buildConnectors(cfg, log, source)
				if err != nil {
					return err
				}
				for i := range ms {
					if ms[i].name == source {
						mp = ms[i].mp
					}
				}
				if mp == nil {
					return usageError(fmt.Errorf("reconcile: the connector %s is not enabled (connectors.%s.enabled): its orders cannot be listed", source, source))
				}
				name = mp.Name()
			default:
				return usageError(fmt.Errorf("reconcile: --source must be kaspi, ozon, wildberries or site, got %q", source))
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

			// Progress while the marketplace is listed, on a terminal only.
			var progress func(int)
			tty := isTerminal(a.stderr)
			if tty && mp != nil {
				progress = func(n int) { fmt.Fprintf(a.stderr, "\rlisting %s: %d orders", source, n) }
			}
			rep, err := reconcile.Run(ctx, reconcile.Params{
				Source:       name,
				From:         fromDay,
				To:           toDay,
				Location:     cfg.UILocation(),
				OneCLocation: cfg.OneC.Location(),
				Journal:      db.Journal(),
				OneC:         client,
				Marketplace:  mp,
				Progress:     progress,
			})
			if progress != nil {
				fmt.Fprint(a.stderr, "\r\033[K")
			}
			if errors.Is(err, reconcile.ErrPeriodTooLong) {
				return usageError(err)
			}
			if err != nil {
				return err
			}
			switch format {
			case "json":
				err = reconcile.WriteJSON(a.stdout, rep)
			case "csv":
				err = reconcile.WriteCSV(a.stdout, rep)
			case "xlsx":
				err = reconcile.WriteXLSX(a.stdout, rep)
			default:
				err = reconcile.WriteTable(a.stdout, rep)
			}
			if err != nil {
				return err
			}
			if !rep.Clean() {
				n := 0
				for _, it := range rep.Items {
					if it.Category != reconcile.OK {
						n++
					}
				}
				return &exitError{code: exitFailed, err: fmt.Errorf("reconcile: %d of %d orders are not ok", n, len(rep.Items))}
			}
			return nil
		},
	}
	c.Flags().StringVar(&source, "source", "", "kaspi, ozon, wildberries or site")
	c.Flags().StringVar(&from, "from", "", "first day of the period, YYYY-MM-DD")
	c.Flags().StringVar(&to, "to", "", "last day of the period, YYYY-MM-DD (inclusive)")
	c.Flags().StringVar(&format, "format", "table", "table, json, csv or xlsx")
	c.AddCommand(a.reconcilePayoutsCommand())
	return c
}
