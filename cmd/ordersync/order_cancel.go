package main

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/order"
)

func (a *app) orderCancelCommand() *cobra.Command {
	var reason, format string
	var beforeCreate bool
	c := &cobra.Command{
		Use:   "cancel SOURCE EXTERNAL_ID",
		Short: "Register the cancel of an order and carry it out now",
		Long: `cancel registers <source>:order:<external_id>:cancel, the same operation a
marketplace poller registers when the marketplace cancels an order, and carries it
out now, as resync does (handed to a running service on an embedded database):
the order's create is settled first, then 1C cancels the order. An order never
created in 1C ends done with a note saying there was nothing to cancel.

A cancel of an order the journal has never seen is refused unless --before-create
is given: it would stay as a tombstone, and a create of that order registered later
would not be made, so a mistyped id would lose a future order. With the flag it is
recorded, and the journal shows it (and any create it stops) as a warning.

Registering the same cancel again is a duplicate (the saved operation, carried out
if it is not done yet); the same cancel with another reason is a conflict, recorded
and not applied. Exit status 0 when the cancel ends done, 1 otherwise.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(format, "table", "json"); err != nil {
				return err
			}
			c, err := order.NewCancel(args[0], args[1], reason)
			if err != nil {
				return usageError(fmt.Errorf("order cancel: %w", err))
			}
			ctx := withCLIActor(cmd.Context()) // what it registers and attempts is the operator's
			cfg, err := a.loadConfig()
			if err != nil {
				return err
			}
			log, err := a.logger(cfg)
			if err != nil {
				return err
			}
			if _, err := a.newClient(cfg, log); err != nil { // onec.base_url is needed to carry it out
				return err
			}
			db, err := a.openReadyDB(ctx, cfg, log)
			if err != nil {
				return err
			}
			defer db.Close()

			if !beforeCreate {
				seen, err := journal.HoldsOrder(ctx, db.Journal(), c)
				if err != nil {
					return fmt.Errorf("order cancel: %w", err)
				}
				if !seen {
					return usageError(fmt.Errorf("order cancel: the journal holds no create of %s %s (%s) and no cancel of it: "+
						"check SOURCE and EXTERNAL_ID; to record the cancel before the order arrives (its create will then "+
						"not be made), pass --before-create", c.Source, c.ExternalID, c.CreateKey))
				}
			}
			reg, err := db.Journal().Register(ctx, journal.CancelOrder(c))
			if err != nil {
				return fmt.Errorf("order cancel: register %s: %w", order.CancelKeyOf(c.CreateKey), err)
			}
			op := reg.Operation
			out := cancelOutput{Key: op.Key, Outcome: string(reg.Outcome)}
			switch {
			case reg.Outcome == journal.Conflicted:
				var saved order.Cancel
				_ = json.Unmarshal(op.Payload, &saved)
				out.Message = fmt.Sprintf("the journal already holds this cancel with another payload (reason %q); "+
					"the conflict is recorded and nothing was changed", saved.Reason)
			case op.Status != journal.StatusDone:
				if reg.Outcome == journal.Duplicate {
					out.Message = fmt.Sprintf("the journal already holds this cancel, %s; carrying it out now", op.Status)
				}
				ops, err := worker{a: a, cfg: cfg, log: log, db: db}.runKeys(ctx, []string{op.Key})
				if err != nil {
					return fmt.Errorf("order cancel: %w", err)
				}
				op, out.Rerun = ops[0], true
			default:
				out.Message = "the journal already holds this cancel, done; its saved result:"
			}
			out.Status, out.Attempts, out.Result, out.LastError = string(op.Status), op.Attempts, op.Result, op.LastError
			if op.Result != nil {
				out.Note = op.Result.Note
			}
			if format == "json" {
				if err := writeJSON(a.stdout, out); err != nil {
					return err
				}
			} else {
				a.printCancel(out)
			}
			switch {
			case reg.Outcome == journal.Conflicted:
				return failedQuietly(errors.New("conflict"))
			case op.Status != journal.StatusDone:
				return failedQuietly(errors.New(op.LastError))
			}
			return nil
		},
	}
	c.Flags().StringVar(&reason, "reason", "", "why the order is cancelled (sent to 1C)")
	c.Flags().StringVar(&format, "format", "table", "output: table or json")
	c.Flags().BoolVar(&beforeCreate, "before-create", false,
		"record the cancel of an order the journal has not seen yet (its create, if it comes, is not made)")
	return c
}

type cancelOutput struct {
	Key       string          `json:"key"`
	Outcome   string          `json:"outcome"` // registered, duplicate, conflict
	Message   string          `json:"message,omitempty"`
	Rerun     bool            `json:"rerun"` // carried out by this command
	Status    string          `json:"status"`
	Attempts  int             `json:"attempts"`
	Note      string          `json:"note"`
	Result    *journal.Result `json:"result"`
	LastError string          `json:"last_error"`
}

func (a *app) printCancel(o cancelOutput) {
	w := a.stdout
	if o.Message != "" {
		fmt.Fprintf(w, "%s: %s: %s\n", o.Key, o.Outcome, o.Message)
	} else {
		fmt.Fprintf(w, "%s: %s\n", o.Key, o.Outcome)
	}
	if o.Rerun {
		fmt.Fprintf(w, "  status: %s after attempt %d\n", o.Status, o.Attempts)
	} else {
		fmt.Fprintf(w, "  status: %s\n", o.Status)
	}
	if o.Note != "" {
		fmt.Fprintf(w, "  note:   %s\n", o.Note)
	}
	if o.Result != nil && o.Result.Ref != "" {
		fmt.Fprintf(w, "  1C ref: %s\n", o.Result.Ref)
	}
	if o.Status != string(journal.StatusDone) && o.LastError != "" {
		fmt.Fprintf(w, "  error:  %s\n", o.LastError)
	}
}
