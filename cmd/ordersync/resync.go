package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/order"
)

func (a *app) resyncCommand() *cobra.Command {
	var (
		verify bool
		format string
		bulk   bulkFlags
	)
	c := &cobra.Command{
		Use:   "resync KEY | resync CONNECTOR ID | resync --status failed|pending [filters]",
		Short: "Carry out one operation (or every one a filter selects) now, in the foreground, and print the outcome",
		Long: `resync retries a failed or pending operation now (finding the order in 1C before
creating it, as always) and prints the outcome. A done operation prints its saved
result; with --verify, 1C is asked by external id whether the order still exists.
Exit status 0 when the operation ends done, 1 otherwise.

With a connector and a marketplace order id (resync kaspi 512344101), the order is
fetched fresh from the marketplace and goes the same way as a polled one: registered
(or, if it had failed to map and maps now, revised), then carried out in the
foreground, its cancel too when the marketplace cancelled it.

With --status and no argument (resync --status failed --error-contains SKU), every
operation the filters select is made due now and carried out, in batches, as above;
a progress bar (on a terminal) or a line per operation shows how it goes, and a
summary line ends it: N retried: A done, B still failing. --dry-run lists what would
be retried and changes nothing. Exit status 0 when none is still failing, 1 otherwise.`,
		Args: cobra.MaximumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(format, "table", "json"); err != nil {
				return err
			}
			ctx := cmd.Context()
			if bulk.used(cmd) {
				if len(args) > 0 {
					return usageError(errors.New("resync: --status, --source, --since, --error-contains and --dry-run select operations in bulk; " +
						"give either a KEY (or a CONNECTOR and an ID) or those flags, not both"))
				}
				if verify {
					return usageError(errors.New("resync: --verify takes a journal key, not --status"))
				}
				return a.resyncBulk(ctx, bulk, format)
			}
			if len(args) == 0 {
				return usageError(errors.New("resync: give a KEY, a CONNECTOR and an ID, or --status failed|pending"))
			}
			// What this resync registers, requeues and attempts is the operator's.
			ctx = withCLIActor(ctx)
			if len(args) == 2 {
				if verify {
					return usageError(errors.New("resync: --verify takes a journal key, not a connector and an id"))
				}
				return a.resyncMarketplace(ctx, args[0], args[1], format)
			}
			key := args[0]
			cfg, err := a.loadConfig()
			if err != nil {
				return err
			}
			log, err := a.logger(cfg)
			if err != nil {
				return err
			}
			client, err := a.newClient(cfg, log)
			if err != nil {
				return err
			}
			db, err := a.openReadyDB(ctx, cfg, log)
			if err != nil {
				return err
			}
			defer db.Close()
			store := db.Journal()
			before, err := store.Get(ctx, key)
			if errors.Is(err, journal.ErrNotFound) {
				return fmt.Errorf("resync: the journal holds no operation %q (see `ordersync journal list`)", key)
			}
			if err != nil {
				return err
			}

			op := before
			rerun := before.Status != journal.StatusDone
			if rerun {
				ops, err := worker{a: a, cfg: cfg, log: log, db: db}.runKeys(ctx, []string{key})
				if err != nil {
					return fmt.Errorf("resync %s", err)
				}
				op = ops[0]
			}
			res := resyncOutput{Key: op.Key, Status: string(op.Status), Rerun: rerun, Attempts: op.Attempts,
				Result: op.Result, LastError: op.LastError}
			if verify && op.Status == journal.StatusDone {
				extID := order.OneCExternalID(op.Source, op.ExternalID)
				found, err := client.FindOrders(ctx, extID)
				if err != nil {
					return fmt.Errorf("resync --verify: asking 1C for %s: %w", extID, err)
				}
				v := &verifyOutput{ExternalID: extID, Count: len(found), Exists: len(found) > 0}
				for _, o := range found {
					v.Orders = append(v.Orders, fmt.Sprintf("№ %s of %s, ref %s, posted %v, deleted %v", o.Number, o.Date, o.Ref, o.Posted, o.Deleted))
				}
				res.Verify = v
			}
			if format == "json" {
				if err := writeJSON(a.stdout, res); err != nil {
					return err
				}
			} else {
				a.printResync(res)
			}
			switch {
			case op.Status != journal.StatusDone:
				return failedQuietly(errors.New(op.LastError))
			case res.Verify != nil && !res.Verify.Exists:
				return failedQuietly(errors.New("not in 1C"))
			}
			return nil
		},
	}
	c.Flags().BoolVar(&verify, "verify", false, "ask 1C by external id whether the order still exists")
	c.Flags().StringVar(&format, "format", "table", "output: table or json")
	bulk.register(c)
	return c
}

type resyncOutput struct {
	Key       string          `json:"key"`
	Status    string          `json:"status"`
	Rerun     bool            `json:"rerun"` // false: it was done already; the saved result is shown
	Attempts  int             `json:"attempts"`
	Result    *journal.Result `json:"result"`
	LastError string          `json:"last_error"`
	Verify    *verifyOutput   `json:"verify,omitempty"`
}

type verifyOutput struct {
	ExternalID string   `json:"external_id"`
	Exists     bool     `json:"exists"`
	Count      int      `json:"count"`
	Orders     []string `json:"orders,omitempty"`
}

func (a *app) printResync(o resyncOutput) {
	w := a.stdout
	if o.Rerun {
		fmt.Fprintf(w, "%s: %s after attempt %d\n", o.Key, o.Status, o.Attempts)
	} else {
		fmt.Fprintf(w, "%s: already done; the saved result:\n", o.Key)
	}
	if o.Result != nil {
		fmt.Fprintf(w, "  1C order № %s of %s, ref %s\n", o.Result.Number, o.Result.Date, o.Result.Ref)
		switch {
		case o.Result.Recovered:
			fmt.Fprintf(w, "  created by ordersync, its answer lost and the order found again: %s\n", o.Result.Note)
		case o.Result.Found:
			fmt.Fprintf(w, "  found in 1C rather than created: %s\n", o.Result.Note)
		}
		for _, warn := range o.Result.Warnings {
			fmt.Fprintf(w, "  warning: %s\n", warn)
		}
	}
	if o.Status != string(journal.StatusDone) && o.LastError != "" {
		fmt.Fprintf(w, "  error: %s\n", o.LastError)
	}
	if v := o.Verify; v != nil {
		if v.Exists {
			fmt.Fprintf(w, "  verified: 1C holds %d order(s) with external id %s\n", v.Count, v.ExternalID)
			for _, s := range v.Orders {
				fmt.Fprintf(w, "    %s\n", s)
			}
		} else {
			fmt.Fprintf(w, "  verify FAILED: 1C holds no order with external id %s (deleted in 1C after it was created?)\n", v.ExternalID)
		}
	}
}
