package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ordersync/ordersync/internal/admin"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/journal/export"
	"github.com/ordersync/ordersync/internal/listing"
	"github.com/ordersync/ordersync/internal/stock"
	"github.com/ordersync/ordersync/internal/store"
)

// exitAttention is status's exit code when something needs the operator.
const exitAttention = 3

// statusTimeout bounds each question status asks the admin listener.
const statusTimeout = 5 * time.Second

// serviceStatus is what the admin listener says of the running service.
type serviceStatus struct {
	Admin   string         `json:"admin"`   // the admin listener's URL, "" when admin.listen is empty
	Running bool           `json:"running"` // /healthz answered 200
	Ready   bool           `json:"ready"`   // /readyz answered 200
	Checks  []admin.Result `json:"checks"`  // /readyz's checks
	Error   string         `json:"error,omitempty"`
}

type oldestPending struct {
	Key       string    `json:"key"`
	CreatedAt time.Time `json:"created_at"`
	LastError string    `json:"last_error,omitempty"`
}

type operationsStatus struct {
	Pending      int64          `json:"pending"`
	Failed       int64          `json:"failed"`
	Done         int64          `json:"done"`
	WithWarnings int            `json:"with_warnings"`
	Oldest       *oldestPending `json:"oldest_pending"`
}

type outboxSummary struct {
	Pending int `json:"pending"`
	Dead    int `json:"dead"`
}

type snapshotStatus struct {
	Key       string    `json:"key"`
	Warehouse string    `json:"warehouse"`
	CreatedAt time.Time `json:"created_at"`
}

// statusReport is `ordersync status`'s one screen.
type statusReport struct {
	Service serviceStatus `json:"service"`
	// OneC is 1C's state as the running service last saw it: up, down or unknown
	// (the service is not running or not asked).
	OneC       string            `json:"onec"`
	OneCReason string            `json:"onec_reason,omitempty"`
	Database   string            `json:"database"`
	Operations *operationsStatus `json:"operations"`
	Outbox     *outboxSummary    `json:"outbox"`
	Stock      *snapshotStatus   `json:"last_stock_snapshot"`
	// Attention lists what needs the operator; empty, everything is fine.
	Attention []string `json:"attention"`
}

func (a *app) statusCommand() *cobra.Command {
	var format string
	c := &cobra.Command{
		Use:   "status",
		Short: "The service's state in one screen: running, ready, 1C, the journal, the outbox, stock",
		Long: `status asks the running service's admin listener (admin.listen) whether it is
running (/healthz) and ready (/readyz, which includes whether 1C answers), and reads
the journal: operations pending and failed, those with warnings, the oldest
pending; the outbox's pending and dead events; the newest stock snapshot.

Exit codes: 0 everything is fine; 3 something needs attention (each thing is listed
under "attention": the service not running or not ready, 1C down, failed operations,
dead events); 1 the journal could not be read; 2 a usage or configuration error.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(format, "table", "json"); err != nil {
				return err
			}
			cfg, err := a.loadConfig()
			if err != nil {
				return err
			}
			log, err := a.logger(cfg)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			r := statusReport{Service: askService(ctx, cfg.Admin.Listen), OneC: "unknown", Attention: []string{}}
			r.judgeService()

			db, dbErr := a.openReadyDB(ctx, cfg, log)
			if dbErr == nil {
				defer db.Close()
				r.Database = db.String()
				dbErr = r.readJournal(ctx, db)
			}
			if dbErr != nil {
				if codeOf(dbErr) == exitUsage {
					return dbErr
				}
				r.Attention = append(r.Attention, "the journal cannot be read: "+dbErr.Error())
			}
			if format == "json" {
				if err := writeJSON(a.stdout, r); err != nil {
					return err
				}
			} else {
				r.print(a.stdout, cfg.OneC.Location())
			}
			switch {
			case dbErr != nil:
				return failedQuietly(dbErr)
			case len(r.Attention) > 0:
				return &exitError{code: exitAttention, err: errors.New("needs attention"), silent: true}
			}
			return nil
		},
	}
	c.Flags().StringVar(&format, "format", "table", "output: table or json")
	return c
}

// adminURL is the base URL that reaches admin.listen from this host: an address
// that listens on every interface is asked on loopback.
func adminURL(listen string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "http://" + listen
	}
	switch host {
	case "", "0.0.0.0":
		host = "127.0.0.1"
	case "::":
		host = "::1"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// askService asks the admin listener for /healthz and /readyz.
func askService(ctx context.Context, listen string) serviceStatus {
	if listen == "" {
		return serviceStatus{Error: "admin.listen is empty: the service cannot be asked"}
	}
	s := serviceStatus{Admin: adminURL(listen)}
	client := &http.Client{Timeout: statusTimeout}
	get := func(path string) (int, admin.Report, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.Admin+path, nil)
		if err != nil {
			return 0, admin.Report{}, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, admin.Report{}, err
		}
		defer resp.Body.Close()
		var rep admin.Report
		body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if err != nil {
			return 0, admin.Report{}, err
		}
		if err := json.Unmarshal(body, &rep); err != nil {
			return resp.StatusCode, admin.Report{}, fmt.Errorf("%s%s answered %d, not ordersync's report", s.Admin, path, resp.StatusCode)
		}
		return resp.StatusCode, rep, nil
	}
	code, _, err := get("/healthz")
	if err != nil {
		s.Error = err.Error()
		return s
	}
	s.Running = code == http.StatusOK
	code, rep, err := get("/readyz")
	if err != nil {
		s.Error = err.Error()
		return s
	}
	s.Ready, s.Checks = code == http.StatusOK, rep.Checks
	return s
}

// judgeService notes 1C's state and what of the service needs attention.
func (r *statusReport) judgeService() {
	s := r.Service
	switch {
	case s.Admin == "" || (!s.Running && s.Error != ""):
		r.Attention = append(r.Attention, "the service does not answer: "+s.Error)
		return
	case !s.Running:
		r.Attention = append(r.Attention, "the service is not healthy ("+s.Admin+"/healthz)")
	}
	for _, c := range s.Checks {
		if c.Name == "onec" {
			r.OneC, r.OneCReason = "up", ""
			if !c.OK {
				r.OneC, r.OneCReason = "down", c.Reason
				r.Attention = append(r.Attention, "1C does not answer: "+c.Reason)
			}
			continue
		}
		if !c.OK {
			r.Attention = append(r.Attention, "not ready: "+c.Name+": "+c.Reason)
		}
	}
}

// readJournal reads the journal's counts, its oldest pending operation, the
// outbox's and the newest stock snapshot.
func (r *statusReport) readJournal(ctx context.Context, db store.DB) error {
	ops := &operationsStatus{}
	js := db.Journal()
	if counter, ok := js.(journal.Counter); ok {
		counts, err := counter.Counts(ctx)
		if err != nil {
			return err
		}
		for _, c := range counts {
			switch c.Status {
			case journal.StatusPending:
				ops.Pending += c.Operations
			case journal.StatusFailed:
				ops.Failed += c.Operations
			case journal.StatusDone:
				ops.Done += c.Operations
			}
		}
	}
	err := listing.Each(0, func(after *journal.Operation, n int) ([]journal.Operation, error) {
		return js.List(ctx, journal.Filter{Status: journal.StatusPending, Limit: n, After: after})
	}, func(page []journal.Operation) error {
		for _, op := range page {
			if ops.Oldest == nil || op.CreatedAt.Before(ops.Oldest.CreatedAt) {
				ops.Oldest = &oldestPending{Key: op.Key, CreatedAt: op.CreatedAt, LastError: op.LastError}
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	err = listing.Each(0, func(after *journal.Operation, n int) ([]journal.Operation, error) {
		return js.List(ctx, journal.Filter{WarningsOnly: true, Limit: n, After: after})
	}, func(page []journal.Operation) error {
		ops.WithWarnings += len(page)
		return nil
	})
	if err != nil {
		return err
	}
	r.Operations = ops
	if ops.Failed > 0 {
		r.Attention = append(r.Attention, fmt.Sprintf("%d operations failed: ordersync journal list --status failed", ops.Failed))
	}

	dests, err := db.Outbox().Status(ctx, strugglingAttempts)
	if err != nil {
		return err
	}
	r.Outbox = &outboxSummary{}
	for _, d := range dests {
		r.Outbox.Pending += d.Pending + d.InFlight
		r.Outbox.Dead += d.Dead
	}
	if r.Outbox.Dead > 0 {
		r.Attention = append(r.Attention, fmt.Sprintf("%d outbox events are dead: ordersync outbox list --dead", r.Outbox.Dead))
	}

	snaps, err := db.Stock().Snapshots(ctx, stock.Filter{Limit: 1})
	if err != nil {
		return err
	}
	if len(snaps) > 0 {
		r.Stock = &snapshotStatus{Key: snaps[0].Key, Warehouse: snaps[0].Warehouse, CreatedAt: snaps[0].CreatedAt}
	}
	return nil
}

func (r *statusReport) print(w io.Writer, loc *time.Location) {
	at := func(t time.Time) string { return t.In(loc).Format("2006-01-02 15:04:05") }
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	s := r.Service
	switch {
	case s.Admin == "":
		fmt.Fprintf(tw, "service\tunknown: %s\n", s.Error)
	case s.Error != "" && !s.Running:
		fmt.Fprintf(tw, "service\tnot running (%s does not answer)\n", s.Admin)
	case s.Ready:
		fmt.Fprintf(tw, "service\trunning, ready (%s)\n", s.Admin)
	case s.Running:
		fmt.Fprintf(tw, "service\trunning, not ready (%s/readyz)\n", s.Admin)
	default:
		fmt.Fprintf(tw, "service\tnot healthy (%s/healthz)\n", s.Admin)
	}
	switch r.OneC {
	case "down":
		fmt.Fprintf(tw, "1C\tdown: %s\n", r.OneCReason)
	case "unknown":
		fmt.Fprintln(tw, "1C\tunknown (only the running service knows)")
	default:
		fmt.Fprintln(tw, "1C\tup")
	}
	if r.Database != "" {
		fmt.Fprintf(tw, "journal\t%s\n", r.Database)
	}
	if o := r.Operations; o != nil {
		fmt.Fprintf(tw, "operations\t%d pending, %d failed, %d done, %d with warnings\n", o.Pending, o.Failed, o.Done, o.WithWarnings)
		if o.Oldest != nil {
			fmt.Fprintf(tw, "oldest pending\t%s, registered %s", o.Oldest.Key, at(o.Oldest.CreatedAt))
			if o.Oldest.LastError != "" {
				fmt.Fprintf(tw, ": %s", export.Clip(o.Oldest.LastError, 80))
			}
			fmt.Fprintln(tw)
		}
	}
	if o := r.Outbox; o != nil {
		fmt.Fprintf(tw, "outbox\t%d pending, %d dead\n", o.Pending, o.Dead)
	}
	switch {
	case r.Stock != nil:
		fmt.Fprintf(tw, "last stock snapshot\t%s, stored %s\n", r.Stock.Key, at(r.Stock.CreatedAt))
	case r.Operations != nil:
		fmt.Fprintln(tw, "last stock snapshot\tnone yet")
	}
	tw.Flush()
	fmt.Fprintf(w, "times in %s (onec.timezone)\n", loc)
	if len(r.Attention) == 0 {
		fmt.Fprintln(w, "\nEverything is fine.")
		return
	}
	fmt.Fprintln(w, "\nNeeds attention:")
	for _, a := range r.Attention {
		fmt.Fprintf(w, "  - %s\n", a)
	}
}
