package export

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/shopspring/decimal"

	"github.com/ordersync/ordersync/internal/journal"
)

// ZonedLayout is how the command line's tables write times: in ui.timezone, with
// its offset.
const ZonedLayout = "2006-01-02 15:04:05 -07:00"

// WarningCodes lists the codes of ws for a table or CSV cell: "duplicate_in_1c".
func WarningCodes(ws []journal.Warning) string {
	codes := make([]string, len(ws))
	for i, w := range ws {
		codes[i] = w.Code
	}
	return strings.Join(codes, ",")
}

// ListRow is a row of `journal list --format json`: the operation's state and the
// exports' columns.
type ListRow struct {
	Key       string    `json:"key"`
	Status    string    `json:"status"`
	Attempts  int       `json:"attempts"`
	UpdatedAt time.Time `json:"updated_at"`
	Source    string    `json:"source"`
	Ref       string    `json:"ref,omitempty"`
	Number    string    `json:"number,omitempty"`
	LastError string    `json:"last_error"`
	// Warnings are [{"code","message","refs"}], never null.
	Warnings []journal.Warning `json:"warnings"`
	// The exports' columns.
	Kind              string           `json:"kind"`
	ExternalID        string           `json:"external_id"`
	MarketplaceNumber string           `json:"marketplace_number"`
	Customer          string           `json:"customer"`
	Phone             string           `json:"phone"`
	OneCDate          string           `json:"onec_date,omitempty"`
	Total             *decimal.Decimal `json:"total"`
	Currency          string           `json:"currency"`
	// CreatedAt is when ordersync registered the operation, as it always was; the
	// same as RegisteredAt, which names it without doubt.
	CreatedAt    time.Time `json:"created_at"`
	RegisteredAt time.Time `json:"registered_at"`
	// OrderCreatedAt is the marketplace's own date of the order, null when the
	// payload names none.
	OrderCreatedAt *time.Time `json:"order_created_at"`
	DoneAt         *time.Time `json:"done_at"`
	// OneCSeen is what the latest reconciliation saw of the order in 1C; null when
	// none has.
	OneCSeen *journal.OneCSeen `json:"onec_seen"`
	// State is the order's state as the pages show it (journal.StateOf, its cancel
	// looked up); empty where the caller did not look.
	State journal.State `json:"state,omitempty"`
}

// ListRowOf is op as a ListRow, its times in loc.
func ListRowOf(op journal.Operation, loc *time.Location) ListRow {
	x := RowOf(op, loc)
	r := ListRow{Key: op.Key, Status: string(op.Status), Attempts: op.Attempts, UpdatedAt: op.UpdatedAt.In(loc),
		Source: op.Source, LastError: op.LastError, Warnings: op.Warnings,
		Kind: op.Kind, ExternalID: op.ExternalID, MarketplaceNumber: x.MarketplaceNumber, Customer: x.Customer,
		Phone: x.Phone, OneCDate: x.OneCDate, Total: x.Total, Currency: x.Currency, CreatedAt: x.Created, DoneAt: x.Done,
		RegisteredAt: x.Created, OrderCreatedAt: x.Ordered, OneCSeen: op.OneCSeen}
	if r.Warnings == nil {
		r.Warnings = []journal.Warning{}
	}
	if op.Result != nil {
		r.Ref, r.Number = op.Result.Ref, op.Result.Number
	}
	return r
}

// DetailJSON is the documented shape of `journal show --format json`; attempts_history and
// conflicts are arrays, never null.
func DetailJSON(d journal.Detail) journal.Detail {
	if d.Warnings == nil {
		d.Warnings = []journal.Warning{}
	}
	if d.History == nil {
		d.History = []journal.Attempt{}
	}
	if d.Conflicts == nil {
		d.Conflicts = []journal.Conflict{}
	}
	if d.Events == nil {
		d.Events = []journal.Event{}
	}
	return d
}

// Clip is s on one line, cut to n runes with an ellipsis: a table's cell.
func Clip(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// WriteDetail writes one operation as `journal show` prints it: its state, result,
// warnings, events, attempts with their 1C exchanges, and conflicts, times in loc.
func WriteDetail(w io.Writer, d journal.Detail, loc *time.Location) {
	ts := func(t time.Time) string { return t.In(loc).Format("2006-01-02 15:04:05.000 -07:00") }
	fmt.Fprintf(w, "key:          %s\n", d.Key)
	fmt.Fprintf(w, "kind:         %s\n", d.Kind)
	fmt.Fprintf(w, "source:       %s   external id: %s\n", d.Source, d.ExternalID)
	fmt.Fprintf(w, "status:       %s\n", d.Status)
	fmt.Fprintf(w, "attempts:     %d\n", d.Attempts)
	fmt.Fprintf(w, "created:      %s   updated: %s\n", ts(d.CreatedAt), ts(d.UpdatedAt))
	if d.Status == journal.StatusPending {
		fmt.Fprintf(w, "next attempt: %s\n", ts(d.NextAttemptAt))
	}
	fmt.Fprintf(w, "payload:      sha256 %s\n", d.PayloadSHA256)
	if d.Result != nil {
		if d.Result.Number != "" {
			fmt.Fprintf(w, "1C order:     № %s of %s (1C's time), ref %s\n", d.Result.Number, d.Result.Date, d.Result.Ref)
		} else if d.Result.Ref != "" {
			fmt.Fprintf(w, "1C order:     ref %s\n", d.Result.Ref)
		}
		switch {
		case d.Result.Recovered:
			fmt.Fprintf(w, "              created by ordersync (its answer was lost; found again by the find that followed): %s\n", d.Result.Note)
		case d.Result.Found:
			fmt.Fprintf(w, "              found in 1C, not created by this operation: %s\n", d.Result.Note)
		case d.Result.Note != "":
			fmt.Fprintf(w, "              %s\n", d.Result.Note)
		}
	}
	for _, warn := range d.Warnings {
		fmt.Fprintf(w, "WARNING:      %s: %s\n", warn.Code, warn.Message)
		if len(warn.Refs) > 0 {
			fmt.Fprintf(w, "              refs: %s\n", strings.Join(warn.Refs, ", "))
		}
	}
	if len(d.Warnings) == 0 && d.Result != nil { // recorded before warnings had codes
		for _, warn := range d.Result.Warnings {
			fmt.Fprintf(w, "warning:      %s\n", warn)
		}
	}
	if d.LastError != "" {
		fmt.Fprintf(w, "last error:   %s\n", d.LastError)
	}
	if d.Status == journal.StatusPending && d.RetryClass != "" {
		fmt.Fprintf(w, "waiting on:   %s failure", d.RetryClass)
		if d.UnknownAttempts > 0 {
			fmt.Fprintf(w, " (%d attempt(s) with an unknown outcome count toward worker.max_attempts)", d.UnknownAttempts)
		}
		fmt.Fprintln(w)
	}
	if d.SettleUntil != nil && d.Status == journal.StatusPending {
		fmt.Fprintf(w, "settles:      %s (1C may still be writing what an earlier attempt sent)\n", ts(*d.SettleUntil))
	}
	if len(d.Events) > 0 {
		fmt.Fprintf(w, "\nevents:\n")
		for _, ev := range d.Events {
			line := fmt.Sprintf("  %s  %s", ts(ev.At), ev.Action)
			if ev.Actor != "" {
				line += " by " + ev.Actor
			}
			if ev.Detail != "" {
				line += ": " + ev.Detail
			}
			fmt.Fprintln(w, line)
		}
	}
	fmt.Fprintf(w, "\nattempts (times in %s):\n", loc)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  #\tOUTCOME\tSTARTED\tFINISHED\tTRIGGERED BY\tWORKER\t1C REF\tERROR")
	for _, at := range d.History {
		fin, outcome := "—", string(at.Outcome)
		if at.FinishedAt != nil {
			fin = ts(*at.FinishedAt)
		}
		if outcome == "" {
			outcome = "(open)"
		}
		if at.Class != "" && at.Outcome != journal.OutcomeDone {
			outcome += " (" + at.Class + ")"
		}
		by := at.TriggeredBy
		if by == "" {
			by = "—"
		}
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", at.Attempt, outcome, ts(at.StartedAt), fin, by, at.Worker, at.Ref, Clip(at.Error, 100))
	}
	tw.Flush()
	for _, at := range d.History {
		if len(at.Exchanges) == 0 {
			continue
		}
		var xs []struct {
			Method, Path   string
			Status         int
			RequestSHA256  string `json:"request_sha256"`
			ResponseSHA256 string `json:"response_sha256"`
			Error          string
		}
		if json.Unmarshal(at.Exchanges, &xs) != nil {
			continue
		}
		fmt.Fprintf(w, "  attempt %d exchanged with 1C:\n", at.Attempt)
		for _, x := range xs {
			status := fmt.Sprint(x.Status)
			if x.Status == 0 {
				status = "no answer"
			}
			line := fmt.Sprintf("    %s %s → %s", x.Method, x.Path, status)
			if x.RequestSHA256 != "" {
				line += " sent sha256:" + x.RequestSHA256[:min(16, len(x.RequestSHA256))]
			}
			if x.ResponseSHA256 != "" {
				line += " got sha256:" + x.ResponseSHA256[:min(16, len(x.ResponseSHA256))]
			}
			if x.Error != "" {
				line += " (" + Clip(x.Error, 80) + ")"
			}
			fmt.Fprintln(w, line)
		}
	}
	if len(d.Conflicts) > 0 {
		fmt.Fprintf(w, "\nconflicts (same key, another payload; nothing was overwritten):\n")
		for _, c := range d.Conflicts {
			seen := ""
			if c.Times > 1 {
				seen = fmt.Sprintf("  (%d times, last %s)", c.Times, ts(c.LastAt))
			}
			fmt.Fprintf(w, "  %s  payload sha256 %s%s\n", ts(c.At), c.PayloadSHA256, seen)
		}
	}
}
