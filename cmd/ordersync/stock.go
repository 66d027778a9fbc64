package main

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ordersync/ordersync/connectors"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/outbox"
	"github.com/ordersync/ordersync/internal/stock"
	"github.com/ordersync/ordersync/internal/stock/scheduler"
)

func (a *app) stockCommand() *cobra.Command {
	c := &cobra.Command{Use: "stock", Short: "Take, read and compare stock snapshots, and see what the marketplaces were sent"}
	c.AddCommand(a.stockSnapshotCommand(), a.stockShowCommand(), a.stockDiffCommand(), a.stockStatusCommand())
	return c
}

// stockEnv is what every stock command opens.
type stockEnv struct {
	setup *stockSetup
	w     worker
	db    database
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
	return &stockEnv{setup: setup, w: worker{a: a, cfg: cfg, log: log, db: db}, db: db}, nil
}

// snapshotOutput is one warehouse's manual snapshot, as `stock snapshot` prints it.
type snapshotOutput struct {
	Key       string          `json:"key"`
	Warehouse string          `json:"warehouse"`
	Status    string          `json:"status"`
	Items     int             `json:"items"`
	Warnings  []string        `json:"warnings"`
	LastError string          `json:"last_error,omitempty"`
	Published []stock.Publish `json:"published"`
	// Pending names the marketplaces whose publish had not finished when the
	// command stopped waiting (the service's relay goes on with it).
	Pending []string `json:"pending,omitempty"`
	Feed    string   `json:"feed,omitempty"` // Kaspi: served from the feed
	// Note says why a done snapshot was published nowhere.
	Note string `json:"note,omitempty"`
	// pendingNote says, in the table, who goes on with the pending publishes.
	pendingNote string
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
			whs := env.setup.warehouses()
			publishFor := env.setup.publishTo
			if schedule != "" {
				sc, ok := env.setup.schedule(schedule)
				if !ok {
					return usageError(fmt.Errorf("--schedule: no schedule %q in stock.schedules", schedule))
				}
				whs = sc.Warehouses
				publishFor = func(string) []string { return slices.Clone(sc.Publish) }
			}
			if warehouse != "" {
				if schedule != "" && !slices.Contains(whs, warehouse) {
					return usageError(fmt.Errorf("--warehouse: schedule %q does not take warehouse %q", schedule, warehouse))
				}
				whs = []string{warehouse}
			}
			if len(whs) == 0 {
				return usageError(errors.New("stock snapshot: no warehouse: give --warehouse, or configure stock.schedules"))
			}
			for _, wh := range whs {
				if strings.ContainsAny(wh, ":") || wh == "" {
					return usageError(fmt.Errorf("--warehouse: %q is not a warehouse code (it must not be empty or contain ':')", wh))
				}
			}
			now, err := manualTime(ctx, env.db.Journal(), whs, env.setup.loc)
			if err != nil {
				return err
			}
			label := stock.ManualLabel(now, env.setup.loc)
			var keys []string
			for _, wh := range whs {
				p := stock.Payload{Schedule: stock.Manual, Warehouse: wh, Slot: now.UTC(), Label: label, Publish: publishFor(wh)}
				reg, err := scheduler.Register(withCLIActor(ctx), env.db.Journal(), p)
				if err != nil {
					return err
				}
				if reg.Outcome == journal.Conflicted {
					return fmt.Errorf("stock snapshot: %s was taken meanwhile by another command, for other marketplaces: run this one again", reg.Operation.Key)
				}
				keys = append(keys, reg.Operation.Key)
			}
			ops, err := env.w.runKeys(ctx, keys)
			if err != nil {
				return fmt.Errorf("stock snapshot: %w", err)
			}
			outs := make([]snapshotOutput, len(ops))
			for i, op := range ops {
				outs[i] = snapshotOutput{Key: op.Key, Warehouse: whs[i], Status: string(op.Status), LastError: op.LastError,
					Warnings: []string{}, Published: []stock.Publish{}}
				if op.Status != journal.StatusDone {
					continue
				}
				snap, err := env.db.Stock().Snapshot(ctx, op.Key)
				if err != nil {
					return err
				}
				outs[i].Items, outs[i].Warnings = snap.ItemCount, snap.Warnings
				if len(publishFor(whs[i])) == 0 {
					outs[i].Note = "stored, published nowhere: no marketplace maps warehouse " + whs[i] +
						" (connectors.ozon.stock_warehouses, connectors.wildberries.stock_warehouses, connectors.kaspi.stores)"
					if schedule != "" {
						outs[i].Note = fmt.Sprintf("stored, published nowhere: schedule %s publishes to no marketplace", schedule)
					}
				}
				for _, mp := range publishFor(whs[i]) {
					if !stock.Pushed(mp) {
						outs[i].Feed = "served in the Kaspi feed from now on"
					}
				}
			}
			if err := a.publishNow(ctx, env, outs, publishFor, wait); err != nil {
				return err
			}
			if format == "json" {
				if err := writeJSON(a.stdout, outs); err != nil {
					return err
				}
			} else {
				printSnapshots(a.stdout, outs)
			}
			for _, o := range outs {
				if o.Status != string(journal.StatusDone) {
					return failedQuietly(errors.New(o.LastError))
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

// manualTime is the time of a manual snapshot: now, to the second, as its key
// (stock:manual:<warehouse>:<time>) and slot say it, so that --at with the printed
// time finds it. When a snapshot of one of the warehouses was already taken in this
// second, its key is taken: a new snapshot in the same second would be answered by
// the stored one (1C not asked again) and recorded as a conflict. It waits for the
// next second instead.
func manualTime(ctx context.Context, js journal.Store, whs []string, loc *time.Location) (time.Time, error) {
	for {
		now := time.Now().Truncate(time.Second)
		taken := false
		for _, wh := range whs {
			_, err := js.Get(ctx, stock.Key(stock.Manual, wh, stock.ManualLabel(now, loc)))
			if err == nil {
				taken = true
				break
			}
			if !errors.Is(err, journal.ErrNotFound) {
				return time.Time{}, err
			}
		}
		if !taken {
			return now, nil
		}
		select {
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-time.After(time.Until(now.Add(time.Second))):
		}
	}
}

// publishNow delivers the snapshots' publishing events in the foreground (unless a
// service on the embedded database does it) and waits for their publishes.
func (a *app) publishNow(ctx context.Context, env *stockEnv, outs []snapshotOutput, publishFor func(string) []string, wait time.Duration) error {
	want := map[string][]string{} // snapshot key → marketplaces still to publish
	for _, o := range outs {
		if o.Status != string(journal.StatusDone) {
			continue
		}
		for _, mp := range publishFor(o.Warehouse) {
			if stock.Pushed(mp) {
				want[o.Key] = append(want[o.Key], mp)
			}
		}
	}
	if len(want) == 0 {
		return nil
	}
	var relay *outbox.Relay
	if _, running := serviceRunning(env.db); !running {
		markets, err := enabledConnectors(env.w.cfg, env.w.log)
		if err != nil {
			return err
		}
		skus, err := connectors.NewSKUMap(env.w.cfg.Connectors.SKUMap)
		if err != nil {
			return usageError(err)
		}
		pubs, err := stockPublishers(env.w.cfg, env.db, markets, skus, env.w.log)
		if err != nil {
			return err
		}
		relay = outbox.NewRelay(env.db.Outbox(), relayConfig(env.w.cfg, pubs, nil, env.w.log))
	}
	deadline := time.Now().Add(wait)
	for delay := 50 * time.Millisecond; ; delay = min(2*delay, time.Second) {
		left := 0
		for i := range outs {
			o := &outs[i]
			o.Published, o.Pending = o.Published[:0], nil
			for _, mp := range want[o.Key] {
				ps, err := env.db.Stock().Publishes(ctx, stock.PublishFilter{Marketplace: mp, Warehouse: o.Warehouse, Limit: 20})
				if err != nil {
					return err
				}
				i := slices.IndexFunc(ps, func(p stock.Publish) bool { return p.SnapshotKey == o.Key && p.FinishedAt != nil })
				if i < 0 {
					o.Pending = append(o.Pending, mp)
					left++
					continue
				}
				o.Published = append(o.Published, ps[i])
			}
		}
		if left == 0 || time.Now().After(deadline) || ctx.Err() != nil {
			for i := range outs {
				outs[i].pendingNote = "not finished yet (the service's relay goes on with it; see `ordersync stock status`)"
				if relay != nil { // no service known to run: nothing goes on with it now
					outs[i].pendingNote = "not finished within --wait: its event stays in the outbox, for `ordersync run` " +
						"(or the next `ordersync stock snapshot`) to deliver; see `ordersync stock status`"
				}
			}
			return nil
		}
		if relay != nil {
			n, err := relay.RunOnce(ctx)
			if err != nil {
				return fmt.Errorf("stock snapshot: publishing: %w", err)
			}
			if n > 0 {
				delay = 50 * time.Millisecond
				continue
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(delay):
		}
	}
}

func printSnapshots(w io.Writer, outs []snapshotOutput) {
	for _, o := range outs {
		if o.Status != string(journal.StatusDone) {
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
			fmt.Fprintf(w, "  %s: %s\n", mp, o.pendingNote)
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
	var warehouse, at, format string
	c := &cobra.Command{
		Use:   "show [KEY]",
		Short: "Print a snapshot's items: the latest of each warehouse, or one by key or time",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(format, "table", "json", "csv"); err != nil {
				return err
			}
			ctx := cmd.Context()
			env, err := a.openStock(ctx)
			if err != nil {
				return err
			}
			defer env.db.Close()
			var snaps []stock.Snapshot
			switch {
			case len(args) == 1:
				s, err := env.findSnapshot(ctx, args[0], warehouse)
				if err != nil {
					return err
				}
				snaps = append(snaps, s)
			default:
				t := time.Time{}
				if at != "" {
					if t, err = parseStockTime(at, env.setup.loc); err != nil {
						return usageError(fmt.Errorf("--at: %w", err))
					}
				}
				whs := env.setup.warehouses()
				if warehouse != "" {
					whs = []string{warehouse}
				}
				for _, wh := range whs {
					s, err := env.db.Stock().Latest(ctx, wh, t)
					if errors.Is(err, stock.ErrNoSnapshot) {
						continue
					}
					if err != nil {
						return err
					}
					snaps = append(snaps, s)
				}
				if len(whs) == 0 {
					return usageError(errors.New("stock show: no warehouse is configured (stock.schedules, the marketplaces' warehouse maps): give --warehouse or a KEY"))
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
				items, err := env.db.Stock().Items(ctx, s.Key)
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
	return c
}

func atPhrase(at string) string {
	if at == "" {
		return "yet"
	}
	return "at or before " + at
}

// parseStockTime reads a time as the stock commands take it: RFC 3339, or local
// time in stock.timezone to the minute or second, or a date (its end: the snapshot
// in force that day).
func parseStockTime(s string, loc *time.Location) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	for _, layout := range []string{"2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02 15:04:05", "2006-01-02 15:04"} {
		if t, err := time.ParseInLocation(layout, s, loc); err == nil {
			return t, nil
		}
	}
	if t, err := time.ParseInLocation("2006-01-02", s, loc); err == nil {
		return t.AddDate(0, 0, 1).Add(-time.Nanosecond), nil
	}
	return time.Time{}, fmt.Errorf("%q is not a time: give 2026-09-16T10:00 (in %s), 2026-09-16, or an RFC 3339 time", s, loc)
}

// findSnapshot finds a snapshot by its key, or by a slot or time in a warehouse
// (the snapshot in force then).
func (env *stockEnv) findSnapshot(ctx context.Context, ref, warehouse string) (stock.Snapshot, error) {
	if strings.HasPrefix(ref, stock.Source+":") {
		s, err := env.db.Stock().Snapshot(ctx, ref)
		if errors.Is(err, stock.ErrNoSnapshot) {
			return s, fmt.Errorf("no snapshot %s is stored (see `ordersync stock show`)", ref)
		}
		return s, err
	}
	t, err := parseStockTime(ref, env.setup.loc)
	if err != nil {
		return stock.Snapshot{}, usageError(err)
	}
	whs := env.setup.warehouses()
	if warehouse != "" {
		whs = []string{warehouse}
	}
	if len(whs) != 1 {
		return stock.Snapshot{}, usageError(fmt.Errorf("%s: give --warehouse (one of %s) to pick a snapshot by time", ref, strings.Join(whs, ", ")))
	}
	s, err := env.db.Stock().Latest(ctx, whs[0], t)
	if errors.Is(err, stock.ErrNoSnapshot) {
		return s, fmt.Errorf("no snapshot of %s at or before %s", whs[0], ref)
	}
	return s, err
}

// diffRow is one SKU that differs between two snapshots.
type diffRow struct {
	SKU       string `json:"sku"`
	Change    string `json:"change"` // added, removed, changed
	QuantityA string `json:"quantity_a,omitempty"`
	QuantityB string `json:"quantity_b,omitempty"`
	PriceA    string `json:"price_a,omitempty"`
	PriceB    string `json:"price_b,omitempty"`
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
			var snaps [2]stock.Snapshot
			var items [2][]stock.Item
			for i, ref := range args {
				if snaps[i], err = env.findSnapshot(ctx, ref, warehouse); err != nil {
					return err
				}
				if items[i], err = env.db.Stock().Items(ctx, snaps[i].Key); err != nil {
					return err
				}
			}
			rows := diffItems(items[0], items[1])
			if format == "json" {
				return writeJSON(a.stdout, struct {
					A       string    `json:"a"`
					B       string    `json:"b"`
					Changes []diffRow `json:"changes"`
				}{snaps[0].Key, snaps[1].Key, rows})
			}
			fmt.Fprintf(a.stdout, "A %s (%d items)\nB %s (%d items)\n%d SKUs differ\n", snaps[0].Key, snaps[0].ItemCount, snaps[1].Key, snaps[1].ItemCount, len(rows))
			if len(rows) == 0 {
				return nil
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "SKU\tCHANGE\tQUANTITY A\tQUANTITY B\tPRICE A\tPRICE B")
			for _, r := range rows {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.SKU, r.Change, r.QuantityA, r.QuantityB, r.PriceA, r.PriceB)
			}
			return tw.Flush()
		},
	}
	c.Flags().StringVar(&warehouse, "warehouse", "", "the warehouse whose snapshots a slot or time picks")
	c.Flags().StringVar(&format, "format", "table", "output: table or json")
	return c
}

// diffItems compares two lists sorted by SKU.
func diffItems(a, b []stock.Item) []diffRow {
	rows := []diffRow{}
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j == len(b) || (i < len(a) && a[i].SKU < b[j].SKU):
			rows = append(rows, diffRow{SKU: a[i].SKU, Change: "removed", QuantityA: a[i].Quantity.String(), PriceA: a[i].Price.String()})
			i++
		case i == len(a) || b[j].SKU < a[i].SKU:
			rows = append(rows, diffRow{SKU: b[j].SKU, Change: "added", QuantityB: b[j].Quantity.String(), PriceB: b[j].Price.String()})
			j++
		default:
			if !a[i].Quantity.Equal(b[j].Quantity) || !a[i].Price.Equal(b[j].Price) {
				rows = append(rows, diffRow{SKU: a[i].SKU, Change: "changed", QuantityA: a[i].Quantity.String(), QuantityB: b[j].Quantity.String(),
					PriceA: a[i].Price.String(), PriceB: b[j].Price.String()})
			}
			i, j = i+1, j+1
		}
	}
	return rows
}

// statusOutput is `stock status`.
type statusOutput struct {
	Schedules []scheduleStatus  `json:"schedules"`
	Publishes []stock.Publish   `json:"publishes"`
	Kaspi     []kaspiStatus     `json:"kaspi,omitempty"`
	Problems  []stock.ItemState `json:"problems"`
}

type scheduleStatus struct {
	Name      string     `json:"name"`
	Cron      string     `json:"cron"`
	Warehouse string     `json:"warehouse"`
	Last      string     `json:"last_slot,omitempty"` // label of the latest stored snapshot
	LastAt    *time.Time `json:"last_at,omitempty"`
	Next      time.Time  `json:"next_slot"`
	Pending   int        `json:"pending"`
	Failed    string     `json:"last_failure,omitempty"`
}

type kaspiStatus struct {
	Warehouse string `json:"warehouse"`
	Store     string `json:"store"`
	Snapshot  string `json:"snapshot"`
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
			st := env.db.Stock()
			out := statusOutput{Schedules: []scheduleStatus{}}
			pending, err := env.db.Journal().List(ctx, journal.Filter{Source: stock.Source, Status: journal.StatusPending, Limit: 1000})
			if err != nil {
				return err
			}
			failed, err := env.db.Journal().List(ctx, journal.Filter{Source: stock.Source, Status: journal.StatusFailed, Limit: 100})
			if err != nil {
				return err
			}
			now := time.Now()
			for _, sc := range env.setup.schedules {
				for _, wh := range sc.Warehouses {
					row := scheduleStatus{Name: sc.Name, Cron: sc.Spec.String(), Warehouse: wh, Next: sc.Spec.Next(now)}
					ss, err := st.Snapshots(ctx, stock.Filter{Warehouse: wh, Schedule: sc.Name, Limit: 1})
					if err != nil {
						return err
					}
					if len(ss) > 0 {
						row.Last, row.LastAt = ss[0].Label, &ss[0].CreatedAt
					}
					ext := sc.Name + ":" + wh
					for _, op := range pending {
						if op.ExternalID == ext {
							row.Pending++
						}
					}
					for _, op := range failed {
						if op.ExternalID == ext {
							row.Failed = op.Key + ": " + op.LastError
							break
						}
					}
					out.Schedules = append(out.Schedules, row)
				}
			}
			if out.Publishes, err = st.Publishes(ctx, stock.PublishFilter{Latest: true}); err != nil {
				return err
			}
			for _, wh := range sortedKeys(env.setup.maps[stock.Kaspi]) {
				k := kaspiStatus{Warehouse: wh, Store: env.setup.maps[stock.Kaspi][wh], Snapshot: "(none yet: the feed answers 503)"}
				if s, err := st.Latest(ctx, wh, time.Time{}); err == nil {
					k.Snapshot = s.Key
				} else if !errors.Is(err, stock.ErrNoSnapshot) {
					return err
				}
				out.Kaspi = append(out.Kaspi, k)
			}
			problems := limit
			if problems == 0 { // 0 lists every one, as --limit 0 does everywhere
				problems = math.MaxInt32
			}
			if out.Problems, err = st.Problems(ctx, "", problems); err != nil {
				return err
			}
			if format == "json" {
				return writeJSON(a.stdout, out)
			}
			a.printStockStatus(out, env.setup.loc)
			return nil
		},
	}
	c.Flags().IntVar(&limit, "limit", 100, "list at most this many items that were not published (0: every one)")
	c.Flags().StringVar(&format, "format", "table", "output: table or json")
	return c
}

func (a *app) printStockStatus(out statusOutput, loc *time.Location) {
	w := a.stdout
	fmt.Fprintf(w, "Times are in %s (stock.timezone).\n\n", loc)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SCHEDULE\tCRON\tWAREHOUSE\tLAST SLOT\tNEXT SLOT\tPENDING\tLAST FAILURE")
	for _, s := range out.Schedules {
		last := "(none yet)"
		if s.Last != "" {
			last = s.Last
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\n", s.Name, s.Cron, s.Warehouse, last, s.Next.In(loc).Format("2006-01-02T15:04:05"), s.Pending, truncate(s.Failed, 80))
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
	if len(out.Problems) == 0 {
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
