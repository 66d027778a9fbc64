package main

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ordersync/ordersync/internal/journal/export"
	"github.com/ordersync/ordersync/internal/outbox"
	"github.com/ordersync/ordersync/internal/stock"
	stocksvc "github.com/ordersync/ordersync/internal/stock/service"
	"github.com/ordersync/ordersync/internal/store"
)

func (a *app) stockCommand() *cobra.Command {
	c := &cobra.Command{Use: "stock", Short: "Take, read and compare stock snapshots, and see what the marketplaces were sent"}
	c.AddCommand(a.stockSnapshotCommand(), a.stockShowCommand(), a.stockDiffCommand(), a.stockStatusCommand())
	return c
}

// stockEnv is what every stock command opens: the stock service over the
// database, and the configuration's stock side it was made of.
type stockEnv struct {
	setup *stockSetup
	svc   *stocksvc.Service
	db    store.DB
}

func (a *app) openStock(ctx context.Context) (*stockEnv, error) {
	cfg, err := a.loadConfig()
	if err != nil {
		return nil, err
	}
	log, err := a.logger(cfg)
	if err != nil {
		return nil, err
	}
	setup, err := newStockSetup(cfg)
	if err != nil {
		return nil, err
	}
	db, err := a.openReadyDB(ctx, cfg, log)
	if err != nil {
		return nil, err
	}
	w := worker{a: a, cfg: cfg, log: log, db: db}
	// The items the Kaspi feed leaves out for want of a line in the SKU map.
	var kaspiSKUs func(string) []string
	if cfg.Connectors.Kaspi.Enabled && cfg.Connectors.SKUMap != "" {
		skus, err := skuMapOf(cfg.Connectors)
		if err != nil {
			db.Close()
			return nil, usageError(err)
		}
		kaspiSKUs = func(sku string) []string { return skus.MarketSKUs(stock.Kaspi, sku) }
	}
	svc := stocksvc.New(stocksvc.Config{
		Journal: db.Journal(), Stock: db.Stock(), Location: setup.loc,
		Schedules: setup.schedules, Warehouses: setup.warehouses(), PublishTo: setup.publishTo,
		KaspiStores: setup.maps[stock.Kaspi], KaspiSKUs: kaspiSKUs, KaspiSKUMap: cfg.Connectors.SKUMap,
		Run:      w.runKeys,
		Relay:    func() (stocksvc.Relay, error) { return foregroundStockRelay(w) },
		Reserves: cfg.Stock.Reserves(), Pending: stockPending(db), Accounts: setup.accounts,
		ReadBack: a.stockReadBack(log),
	})
	return &stockEnv{setup: setup, svc: svc, db: db}, nil
}

// foregroundStockRelay is the relay that publishes stock in this process, nil when
// a service on the embedded database runs (its relay publishes).
func foregroundStockRelay(w worker) (stocksvc.Relay, error) {
	if _, running := serviceRunning(w.db); running {
		return nil, nil
	}
	// Only the accounts stock is sent to, with their credentials, read now.
	var names []string
	for _, acc := range w.cfg.Connectors.Enabled() {
		if m, _, _ := acc.StockMap(); len(m) > 0 && acc.Kaspi == nil {
			names = append(names, acc.Name)
		}
	}
	if len(names) == 0 {
		return outbox.NewRelay(w.db.Outbox(), relayConfig(w.cfg, map[string]outbox.Publisher{}, nil, w.log)), nil
	}
	cfg, err := w.a.loadConfigReading(w.a.use().secrets.and(readConnectors(names...)))
	if err != nil {
		return nil, err
	}
	markets, err := buildConnectors(cfg, w.log, names...)
	if err != nil {
		return nil, err
	}
	skus, err := skuMapOf(cfg.Connectors)
	if err != nil {
		return nil, usageError(err)
	}
	pubs, err := stockPublishers(cfg, w.db, markets, skus, w.log)
	if err != nil {
		return nil, err
	}
	return outbox.NewRelay(w.db.Outbox(), relayConfig(cfg, pubs, nil, w.log)), nil
}

func (a *app) stockSnapshotCommand() *cobra.Command {
	var (
		warehouse, schedule, format string
		wait                        time.Duration
	)
	c := &cobra.Command{
		Use:   "snapshot",
		Short: "Take a snapshot now, publish it, and print the counts and what was published",
		Long: `snapshot reads the stock of a warehouse from 1C now (key stock:manual:<warehouse>:<time>),
stores it, and publishes it to the marketplaces that map the warehouse (with
--schedule, to the schedule's marketplaces), waiting up to --wait for the publishes
to finish. Without --warehouse it takes every warehouse of the schedule, or of the
configuration. Exit status 0 when every snapshot is done, 1 otherwise.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(format, "table", "json"); err != nil {
				return err
			}
			if wait < 0 {
				return usageError(fmt.Errorf("--wait: must not be negative (0 does not wait), got %s", wait))
			}
			ctx := cmd.Context()
			env, err := a.openStock(ctx)
			if err != nil {
				return err
			}
			defer env.db.Close()
			req := stocksvc.TakeRequest{Warehouses: env.setup.warehouses(), Wait: wait}
			if schedule != "" {
				sc, ok := env.setup.schedule(schedule)
				if !ok {
					return usageError(fmt.Errorf("--schedule: no schedule %q in stock.schedules", schedule))
				}
				req.Warehouses, req.Schedule = sc.Warehouses, &sc
			}
			if warehouse != "" {
				if schedule != "" && !slices.Contains(req.Warehouses, warehouse) {
					return usageError(fmt.Errorf("--warehouse: schedule %q does not take warehouse %q", schedule, warehouse))
				}
				req.Warehouses = []string{warehouse}
			}
			if len(req.Warehouses) == 0 {
				return usageError(errors.New("stock snapshot: no warehouse: give --warehouse, or configure stock.schedules"))
			}
			for _, wh := range req.Warehouses {
				if strings.ContainsAny(wh, ":") || wh == "" {
					return usageError(fmt.Errorf("--warehouse: %q is not a warehouse code (it must not be empty or contain ':')", wh))
				}
			}
			res, err := env.svc.Take(withCLIActor(ctx), req)
			if err != nil {
				return err
			}
			if format == "json" {
				if err := writeJSON(a.stdout, res.Snapshots); err != nil {
					return err
				}
			} else {
				printSnapshots(a.stdout, res)
			}
			for _, t := range res.Snapshots {
				if !t.Done() {
					return failedQuietly(errors.New(t.LastError))
				}
			}
			return nil
		},
	}
	c.Flags().StringVar(&warehouse, "warehouse", "", "only this 1C warehouse")
	c.Flags().StringVar(&schedule, "schedule", "", "the warehouses and marketplaces of this schedule")
	c.Flags().DurationVar(&wait, "wait", 10*time.Minute, "wait at most this long for the publishes to finish")
	c.Flags().StringVar(&format, "format", "table", "output: table or json")
	return c
}

func printSnapshots(w io.Writer, res stocksvc.TakeResult) {
	// Who goes on with a publish still pending.
	pendingNote := "not finished yet (the service's relay goes on with it; see `ordersync stock status`)"
	if res.Foreground { // no service known to run: nothing goes on with it now
		pendingNote = "not finished within --wait: its event stays in the outbox, for `ordersync run` " +
			"(or the next `ordersync stock snapshot`) to deliver; see `ordersync stock status`"
	}
	for _, o := range res.Snapshots {
		if !o.Done() {
			fmt.Fprintf(w, "%s: %s: %s\n", o.Key, o.Status, o.LastError)
			continue
		}
		fmt.Fprintf(w, "%s: %s", o.Key, plural(o.Items, "item"))
		if len(o.Warnings) > 0 {
			fmt.Fprintf(w, ", %s", plural(len(o.Warnings), "warning"))
		}
		fmt.Fprintln(w)
		for _, ws := range o.Warnings {
			fmt.Fprintln(w, "  warning: "+ws)
		}
		problems := false
		for _, p := range o.Published {
			fmt.Fprintf(w, "  %s: %s\n", p.Marketplace, publishLine(p))
			for _, ws := range p.Warnings {
				// A negative quantity is said once, with the snapshot's warnings.
				if !strings.Contains(ws, ": negative quantity ") {
					fmt.Fprintf(w, "  %s: warning: %s\n", p.Marketplace, ws)
				}
			}
			problems = problems || p.Refused+p.Mismatched+p.Skipped > 0
		}
		if problems {
			fmt.Fprintln(w, "  the items refused, mismatched or skipped, with their reasons: `ordersync stock status`")
		}
		if o.Note != "" {
			fmt.Fprintln(w, "  "+o.Note)
		}
		for _, mp := range o.Pending {
			fmt.Fprintf(w, "  %s: %s\n", mp, pendingNote)
		}
		if o.Feed != "" {
			fmt.Fprintln(w, "  kaspi: "+o.Feed)
		}
	}
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

func publishLine(p stock.Publish) string {
	if p.Note != "" {
		return p.Note
	}
	mode := "changes"
	if p.Full {
		mode = "full"
	}
	return fmt.Sprintf("%s publish: %d sent, %d published, %d refused, %d mismatched, %d skipped, %d unchanged",
		mode, p.Sent, p.Published, p.Refused, p.Mismatched, p.Skipped, p.Unchanged)
}

func (a *app) stockShowCommand() *cobra.Command {
	var warehouse, at, format, sku string
	c := &cobra.Command{
		Use:   "show [KEY]",
		Short: "Print a snapshot's items: the latest of each warehouse, or one by key or time; or, with --sku, what each marketplace is told of a SKU",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(format, "table", "json", "csv"); err != nil {
				return err
			}
			if sku != "" && (len(args) > 0 || at != "" || format == "csv") {
				return usageError(errors.New("stock show --sku: give no KEY nor --at (it shows the latest), and --format table or json"))
			}
			ctx := cmd.Context()
			env, err := a.openStock(ctx)
			if err != nil {
				return err
			}
			defer env.db.Close()
			if sku != "" {
				return a.showSKU(ctx, env, sku, warehouse, format)
			}
			var snaps []stock.Snapshot
			switch {
			case len(args) == 1:
				s, err := env.svc.Find(ctx, args[0], warehouse)
				if err != nil {
					return findError(err)
				}
				snaps = append(snaps, s)
			default:
				t := time.Time{}
				if at != "" {
					if t, err = env.svc.ParseTime(at); err != nil {
						return usageError(fmt.Errorf("--at: %w", err))
					}
				}
				whs := env.svc.Warehouses()
				if warehouse != "" {
					whs = []string{warehouse}
				}
				if len(whs) == 0 {
					return usageError(errors.New("stock show: no warehouse is configured (stock.schedules, the marketplaces' warehouse maps): give --warehouse or a KEY"))
				}
				if snaps, err = env.svc.InForce(ctx, whs, t); err != nil {
					return err
				}
				if len(snaps) == 0 {
					return fmt.Errorf("stock show: no snapshot of %s %s (take one with `ordersync stock snapshot`)",
						strings.Join(whs, ", "), atPhrase(at))
				}
			}
			type shown struct {
				stock.Snapshot
				Items []stock.Item `json:"items"`
			}
			out := make([]shown, len(snaps))
			for i, s := range snaps {
				items, err := env.svc.Items(ctx, s.Key)
				if err != nil {
					return err
				}
				out[i] = shown{Snapshot: s, Items: items}
			}
			switch format {
			case "json":
				return writeJSON(a.stdout, out)
			case "csv":
				w := csv.NewWriter(a.stdout)
				w.Write([]string{"snapshot", "warehouse", "slot", "sku", "quantity", "price"})
				for _, s := range out {
					for _, it := range s.Items {
						w.Write([]string{s.Key, s.Warehouse, s.Label, it.SKU, it.Quantity.String(), it.Price.String()})
					}
				}
				w.Flush()
				return w.Error()
			}
			for _, s := range out {
				fmt.Fprintf(a.stdout, "%s: warehouse %s, slot %s, taken by 1C at %s, %s\n", s.Key, s.Warehouse, s.Label, s.TakenAt, plural(s.ItemCount, "item"))
				for _, w := range s.Warnings {
					fmt.Fprintln(a.stdout, "  warning: "+w)
				}
				tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "SKU\tQUANTITY\tPRICE")
				for _, it := range s.Items {
					fmt.Fprintf(tw, "%s\t%s\t%s\n", it.SKU, it.Quantity.String(), it.Price.String())
				}
				if err := tw.Flush(); err != nil {
					return err
				}
			}
			return nil
		},
	}
	c.Flags().StringVar(&warehouse, "warehouse", "", "only this 1C warehouse")
	c.Flags().StringVar(&at, "at", "", "the snapshot in force at this time: 2026-09-16T10:00 (stock.timezone), a date, or RFC 3339")
	c.Flags().StringVar(&format, "format", "table", "output: table, json or csv")
	c.Flags().StringVar(&sku, "sku", "", "what each marketplace is told of this 1C SKU: 1C's quantity, the reserve, the orders not yet in 1C, what was published and when, and what the marketplace reads back (— when its connector cannot read)")
	return c
}

func atPhrase(at string) string {
	if at == "" {
		return "yet"
	}
	return "at or before " + at
}

// findError is an error of stocksvc.Find as the commands say it: a lookup that
// cannot be made is a usage error naming the flag to give; a key not stored says
// where to look.
func findError(err error) error {
	var (
		te *stocksvc.TimeError
		we *stocksvc.WarehouseError
		nf *stocksvc.NotFoundError
	)
	switch {
	case errors.As(err, &te):
		return usageError(err)
	case errors.As(err, &we):
		return usageError(fmt.Errorf("%s: give --warehouse (one of %s) to pick a snapshot by time", we.Ref, strings.Join(we.Warehouses, ", ")))
	case errors.As(err, &nf) && nf.Warehouse == "":
		return fmt.Errorf("%w (see `ordersync stock show`)", err)
	}
	return err
}

func (a *app) stockDiffCommand() *cobra.Command {
	var warehouse, format string
	c := &cobra.Command{
		Use:   "diff A B",
		Short: "Compare two snapshots (by key, or by slot or time with --warehouse): what was added, removed or changed",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(format, "table", "json"); err != nil {
				return err
			}
			ctx := cmd.Context()
			env, err := a.openStock(ctx)
			if err != nil {
				return err
			}
			defer env.db.Close()
			d, err := env.svc.Diff(ctx, args[0], args[1], warehouse)
			if err != nil {
				return findError(err)
			}
			if format == "json" {
				return writeJSON(a.stdout, struct {
					A       string            `json:"a"`
					B       string            `json:"b"`
					Changes []stocksvc.Change `json:"changes"`
				}{d.A.Key, d.B.Key, d.Changes})
			}
			fmt.Fprintf(a.stdout, "A %s (%d items)\nB %s (%d items)\n%d SKUs differ\n", d.A.Key, d.A.ItemCount, d.B.Key, d.B.ItemCount, len(d.Changes))
			if len(d.Changes) == 0 {
				return nil
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "SKU\tCHANGE\tQUANTITY A\tQUANTITY B\tPRICE A\tPRICE B")
			for _, r := range d.Changes {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.SKU, r.Change, r.QuantityA, r.QuantityB, r.PriceA, r.PriceB)
			}
			return tw.Flush()
		},
	}
	c.Flags().StringVar(&warehouse, "warehouse", "", "the warehouse whose snapshots a slot or time picks")
	c.Flags().StringVar(&format, "format", "table", "output: table or json")
	return c
}

func (a *app) stockStatusCommand() *cobra.Command {
	var format string
	var limit int
	c := &cobra.Command{
		Use:   "status",
		Short: "Each schedule's last and next slot, each marketplace's last publish, and the items not published with their reasons",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(format, "table", "json"); err != nil {
				return err
			}
			if limit < 0 {
				return usageError(fmt.Errorf("--limit: must not be negative, got %d", limit))
			}
			ctx := cmd.Context()
			env, err := a.openStock(ctx)
			if err != nil {
				return err
			}
			defer env.db.Close()
			out, err := env.svc.Status(ctx, limit) // --limit 0 lists every one, as everywhere
			if err != nil {
				return err
			}
			if format == "json" {
				return writeJSON(a.stdout, out)
			}
			a.printStockStatus(out, env.svc.Location())
			return nil
		},
	}
	c.Flags().IntVar(&limit, "limit", 100, "list at most this many items that were not published (0: every one)")
	c.Flags().StringVar(&format, "format", "table", "output: table or json")
	return c
}

func (a *app) printStockStatus(out stocksvc.Status, loc *time.Location) {
	w := a.stdout
	fmt.Fprintf(w, "Times are in %s (stock.timezone).\n\n", loc)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SCHEDULE\tCRON\tWAREHOUSE\tLAST SLOT\tNEXT SLOT\tPENDING\tLAST FAILURE")
	for _, s := range out.Schedules {
		last := "(none yet)"
		if s.Last != "" {
			last = s.Last
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\n", s.Name, s.Cron, s.Warehouse, last, s.Next.In(loc).Format("2006-01-02T15:04:05"), s.Pending, export.Clip(s.Failed, 80))
	}
	tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MARKETPLACE\tWAREHOUSE\tSNAPSHOT\tSTARTED\tFINISHED\tOUTCOME")
	for _, p := range out.Publishes {
		fin := "(in progress)"
		if p.FinishedAt != nil {
			fin = p.FinishedAt.In(loc).Format("2006-01-02T15:04:05")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", p.Marketplace, p.Warehouse, p.SnapshotKey, p.StartedAt.In(loc).Format("2006-01-02T15:04:05"), fin, publishLine(p))
	}
	for _, k := range out.Kaspi {
		fmt.Fprintf(tw, "kaspi\t%s\t%s\t\t\tfeed serves store %s\n", k.Warehouse, k.Snapshot, k.Store)
	}
	tw.Flush()
	switch {
	case len(out.Problems) == 0 && len(out.Publishes) == 0 && len(out.Kaspi) == 0:
		fmt.Fprintln(w, "\nNothing has been sent to a marketplace yet.")
		return
	case len(out.Problems) == 0:
		fmt.Fprintln(w, "\nEvery item sent was published.")
		return
	}
	fmt.Fprintf(w, "\n%d items not published:\n", len(out.Problems))
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MARKETPLACE\tWAREHOUSE\tSKU\tMARKETPLACE SKU\tVALUE\tOUTCOME\tREASON")
	for _, s := range out.Problems {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", s.Marketplace, s.Warehouse, s.SKU, s.MarketSKU, s.Value, s.Outcome, s.Reason)
	}
	tw.Flush()
}
