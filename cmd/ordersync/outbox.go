package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ordersync/ordersync/internal/journal/export"
	"github.com/ordersync/ordersync/internal/listing"
	"github.com/ordersync/ordersync/internal/outbox"
)

// strugglingAttempts is where `outbox status` starts calling an event struggling.
const strugglingAttempts = 5

func (a *app) outboxCommand() *cobra.Command {
	c := &cobra.Command{Use: "outbox", Short: "Inspect and steer the delivery of events to marketplaces and other systems"}
	c.AddCommand(a.outboxStatusCommand(), a.outboxListCommand(), a.outboxRequeueCommand(), a.outboxReplayCommand())
	return c
}

// withOutbox opens the database and runs fn with its outbox store.
func (a *app) withOutbox(ctx context.Context, fn func(outbox.Store) error) error {
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
	return fn(db.Outbox())
}

func (a *app) outboxStatusCommand() *cobra.Command {
	var format string
	c := &cobra.Command{
		Use:   "status",
		Short: "Per destination: lag, pending, in flight, struggling, dead",
		Long: `status reads the outbox table: lag is the age of the oldest unsent event that is not
dead; struggling events have failed more than 5 times; dead ones wait for
` + "`ordersync outbox requeue`" + `.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(format, "table", "json"); err != nil {
				return err
			}
			return a.withOutbox(cmd.Context(), func(s outbox.Store) error {
				st, err := s.Status(cmd.Context(), strugglingAttempts)
				if err != nil {
					return err
				}
				if format == "json" {
					type row struct {
						outbox.DestinationStatus
						LagSeconds float64 `json:"lag_seconds"`
					}
					rows := make([]row, len(st))
					for i, d := range st {
						rows[i] = row{d, d.Lag.Seconds()}
					}
					return writeJSON(a.stdout, rows)
				}
				tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "DESTINATION\tLAG\tPENDING\tIN FLIGHT\tSTRUGGLING\tDEAD\tSENT\tDISABLED")
				for _, d := range st {
					fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\n", d.Destination, d.Lag.Round(time.Millisecond),
						d.Pending, d.InFlight, d.Struggling, d.Dead, d.Sent, d.Disabled)
				}
				return tw.Flush()
			})
		},
	}
	c.Flags().StringVar(&format, "format", "table", "output: table or json")
	return c
}

func (a *app) outboxListCommand() *cobra.Command {
	var (
		dead, unsent           bool
		aggregate, destination string
		limit                  int
		format                 string
	)
	c := &cobra.Command{
		Use:   "list",
		Short: "List events, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(format, "table", "json"); err != nil {
				return err
			}
			if limit < 0 {
				return usageError(fmt.Errorf("--limit: must not be negative (0 lists every event), got %d", limit))
			}
			return a.withOutbox(cmd.Context(), func(s outbox.Store) error {
				pages := func(emit func([]outbox.Record) error) error {
					return listing.Each(limit, func(after *outbox.Record, n int) ([]outbox.Record, error) {
						f := outbox.ListFilter{Dead: dead, Unsent: unsent, AggregateID: aggregate, Destination: destination, Limit: n}
						if after != nil {
							f.BeforeID = after.ID
						}
						return s.List(cmd.Context(), f)
					}, emit)
				}
				if format == "json" {
					return listing.WriteJSON(a.stdout, pages, func(r outbox.Record) any { return r })
				}
				tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "ID\tDESTINATION\tTYPE\tAGGREGATE\tSEQ\tSTATE\tATTEMPTS\tEVENT ID\tLAST ERROR")
				return pages(func(recs []outbox.Record) error {
					for _, r := range recs {
						fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%s\t%d\t%s\t%s\n", r.ID, r.Destination, r.Type, r.AggregateID,
							r.Sequence, state(r), r.Attempts, r.EventID, export.Clip(r.LastError, 60))
					}
					return tw.Flush()
				})
			})
		},
	}
	c.Flags().BoolVar(&dead, "dead", false, "only dead events")
	c.Flags().BoolVar(&unsent, "unsent", false, "only events not delivered yet")
	c.Flags().StringVar(&aggregate, "aggregate", "", "only this aggregate (an order: site:order:A-1001)")
	c.Flags().StringVar(&destination, "destination", "", "only this destination")
	c.Flags().IntVar(&limit, "limit", 100, "at most this many events; 0 lists them all")
	c.Flags().StringVar(&format, "format", "table", "output: table or json")
	return c
}

func state(r outbox.Record) string {
	switch {
	case r.SentAt != nil:
		return "sent"
	case r.DeadAt != nil:
		return "dead"
	case r.LeaseUntil != nil && r.LeaseUntil.After(time.Now()):
		return "in flight"
	default:
		return "pending"
	}
}

func (a *app) outboxRequeueCommand() *cobra.Command {
	var allDead bool
	c := &cobra.Command{
		Use:   "requeue ID... | --all-dead",
		Short: "Deliver dead events again (and re-enable their destinations)",
		RunE: func(cmd *cobra.Command, args []string) error {
			if allDead == (len(args) > 0) {
				return usageError(errors.New("outbox requeue: give event ids or --all-dead, not both or neither"))
			}
			ids := make([]int64, len(args))
			for i, s := range args {
				id, err := strconv.ParseInt(s, 10, 64)
				if err != nil || id <= 0 {
					return usageError(fmt.Errorf("outbox requeue: %q is not an event id (the ID column of `outbox list`)", s))
				}
				ids[i] = id
			}
			return a.withOutbox(cmd.Context(), func(s outbox.Store) error {
				n, err := s.Requeue(cmd.Context(), ids, allDead)
				if err != nil {
					return err
				}
				fmt.Fprintf(a.stdout, "requeued %d dead event(s); the running service delivers them now\n", n)
				if !allDead && n < len(ids) {
					return failedQuietly(fmt.Errorf("%d of the ids were not dead events", len(ids)-n))
				}
				return nil
			})
		},
	}
	c.Flags().BoolVar(&allDead, "all-dead", false, "requeue every dead event")
	return c
}

func (a *app) outboxReplayCommand() *cobra.Command {
	var aggregate, destination string
	c := &cobra.Command{
		Use:   "replay --aggregate A",
		Short: "Send an aggregate's events again, in order (consumers dedupe by event id)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if aggregate == "" {
				return usageError(errors.New("outbox replay: --aggregate is required (an order: site:order:A-1001)"))
			}
			return a.withOutbox(cmd.Context(), func(s outbox.Store) error {
				n, err := s.Replay(cmd.Context(), aggregate, destination)
				if err != nil {
					return err
				}
				if n == 0 {
					return fmt.Errorf("outbox replay: no sent events of %s to replay", aggregate)
				}
				fmt.Fprintf(a.stdout, "%d event(s) of %s will be sent again, with their original event ids\n", n, aggregate)
				return nil
			})
		},
	}
	c.Flags().StringVar(&aggregate, "aggregate", "", "the aggregate whose events are sent again")
	c.Flags().StringVar(&destination, "destination", "", "only to this destination")
	return c
}
