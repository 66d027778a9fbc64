package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ordersync/ordersync/internal/demo"
	"github.com/ordersync/ordersync/internal/logging"
)

func (a *app) demoCommand() *cobra.Command {
	var (
		keep bool
		onec string
	)
	c := &cobra.Command{
		Use:   "demo",
		Short: "Play a scripted day against simulated marketplaces and 1C, and check 1C holds each order and return once",
		Long: `demo needs nothing but this binary. In a temporary directory, on loopback, it starts a
simulated 1C base, the Kaspi, Ozon and Wildberries simulators with a few orders each,
and a webhook receiver standing for a CRM; then it runs the real service
(` + "`ordersync run`" + `, as a child process, on an embedded SQLite journal in that
directory, configured through its environment only) and plays a scripted day: new
marketplace orders, a site order delivered twice at once over a signed webhook, a
changed redelivery, 1C losing a reply after creating, no free 1C session (406)
and a lock conflict, a cancellation, a partial return at Ozon carried into 1C as
a customer return, a kill -9 of the service while 1C is creating an order,
followed by a restart, a stock snapshot, and the month's Ozon payouts read and
reconciled with this binary's ` + "`payouts fetch`" + ` and ` + "`reconcile payouts`" + `.

--onec says which interface of 1C the service talks to. httpservice, the
default, is the base's ordersync HTTP service (contract v1). odata is the base's
standard OData interface (…/odata/standard.odata, profile ut11), seeded with the
organization, warehouse, currency, each source's partner, counterparty and
agreement, and the items the orders name: the same day with OData's faults in
place of the HTTP service's. No free session is a 429, the lock conflict is a
create 1C commits and answers with a mangled Location and a body cut short (the
order is then found by its marker), and the create the service is killed in
takes longer than onec.timeout. The stock snapshot is of the seeded warehouse's
GUID, without prices (onec.odata.price_type is not set), so Kaspi's feed
answers 503 rather than an empty price list.

It ends with a table read from the journal and the simulators, and the journal of
the order that went through the crash. It exits 0 only when 1C holds each order
exactly once, each return exactly once, and the cancelled order is cancelled. The service's JSON log goes to a
file in the directory, which is removed at the end unless the demo fails.
--config is not read: the demo configures the service itself.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !slices.Contains(demo.Interfaces, onec) {
				return usageError(fmt.Errorf("--onec: must be one of %v, got %q", demo.Interfaces, onec))
			}
			exe, err := os.Executable()
			if err != nil {
				return fmt.Errorf("demo: find this program to run it as the service: %w", err)
			}
			return demo.Run(cmd.Context(), demo.Config{
				OneC:               onec,
				Out:                a.stdout,
				Keep:               keep,
				Executable:         exe,
				Environ:            a.environ,
				Open:               openDemoStore,
				ShowJournal:        showJournal,
				StrugglingAttempts: strugglingAttempts,
				Report:             func(err error) { fmt.Fprintln(a.stderr, "ordersync: "+logging.OneLine(err)) },
				Quietly:            failedQuietly,
			})
		},
	}
	c.Flags().StringVar(&onec, "onec", demo.HTTPService, "the 1C interface the service talks to: httpservice (its ordersync HTTP service) or odata (its standard OData interface, УТ 11)")
	c.Flags().BoolVar(&keep, "keep", false, "leave everything running after the script and print the addresses, until Ctrl-C")
	return c
}

// openDemoStore opens the service's journal as a command does, configured by env.
func openDemoStore(ctx context.Context, env []string) (demo.Store, error) {
	reader := &app{stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard, environ: env, configPath: os.DevNull}
	cfg, err := reader.loadConfig()
	if err != nil {
		return nil, err
	}
	db, err := reader.openDB(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		return nil, err
	}
	return db, nil
}

// showJournal is `ordersync journal show key`, run in this process.
func showJournal(ctx context.Context, out io.Writer, env []string, key string) error {
	var errb bytes.Buffer
	args := []string{"journal", "show", key, "--config", os.DevNull}
	if code := Main(ctx, args, strings.NewReader(""), out, &errb, env); code != 0 {
		return fmt.Errorf("journal show %s: exit %d: %s", key, code, strings.TrimSpace(errb.String()))
	}
	return nil
}
