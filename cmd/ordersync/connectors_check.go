package main

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ordersync/ordersync/connectors"
)

// checker is a connector that can tell which of its settings is wrong (Yandex
// Market: a campaign id swapped with the business id answers an empty list).
type checker interface {
	Check(ctx context.Context) error
}

// checkWindow is the listing a connector with no Check of its own is tried with:
// it proves the address and the credentials, and registers nothing.
const checkWindow = time.Minute

func (a *app) connectorsCheckCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "check [ACCOUNT...]",
		Short: "Call each enabled account's marketplace (or those named) and say whether its address, credentials and ids work",
		Long: "Call each enabled account's marketplace (or those named, by connectors.<name>) once: a listing of the last " +
			"minute, or the marketplace's own check where it has one (Yandex Market tells a campaign id from a business or " +
			"shop id). Nothing is registered. Exits 1 when one fails.",
		RunE: func(cmd *cobra.Command, names []string) error {
			reads := readAll // every enabled account is called
			if len(names) > 0 {
				reads = readConnectors(names...)
			}
			cfg, err := a.loadConfigReading(reads)
			if err != nil {
				return err
			}
			log, err := a.logger(cfg)
			if err != nil {
				return err
			}
			ms, err := buildConnectors(cfg, log, names...)
			if err != nil {
				return err
			}
			if len(names) > 0 && len(ms) < len(names) {
				return usageError(fmt.Errorf("connectors check: %v: not all are enabled accounts (enabled: %s)", names, enabledNames(cfg)))
			}
			if len(ms) == 0 {
				return usageError(fmt.Errorf("connectors check: no account is enabled (connectors.<name>.enabled)"))
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ACCOUNT\tSOURCE\tRESULT")
			failed := 0
			for _, m := range ms {
				ctx, cancel := context.WithTimeout(cmd.Context(), 2*time.Minute)
				err := checkMarketplace(ctx, m.mp)
				cancel()
				result := "ok"
				if err != nil {
					failed++
					result = err.Error()
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\n", m.name, m.mp.Name(), result)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if failed > 0 {
				return failedQuietly(fmt.Errorf("%d of %d accounts failed their check", failed, len(ms)))
			}
			return nil
		},
	}
}

// checkMarketplace runs mp's own check, or lists the last minute of its orders.
func checkMarketplace(ctx context.Context, mp connectors.Marketplace) error {
	if c, ok := mp.(checker); ok {
		return c.Check(ctx)
	}
	now := time.Now()
	return mp.List(ctx, now.Add(-checkWindow), now, func([]connectors.Item) error { return nil })
}
