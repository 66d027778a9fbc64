package ui

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"github.com/ordersync/ordersync/internal/inbox"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/journal/export"
	"github.com/ordersync/ordersync/internal/onec"
	"github.com/ordersync/ordersync/internal/order"
	"github.com/ordersync/ordersync/internal/outbox"
)

// deliveries is what an inbox store may also tell: the webhook deliveries that
// registered an operation.
type deliveries interface {
	ByOperation(ctx context.Context, key string) ([]inbox.Record, error)
}

// entry is one line of an operation's timeline: an event, an attempt, or a run of
// attempts like the one before it, folded.
type entry struct {
	At      time.Time
	Event   *journal.Event
	Attempt *attemptView
	Run     *attemptRun
}

type attemptView struct {
	journal.Attempt
	Duration  string // "" while open
	Exchanges []onec.Exchange
	// Raw is the exchanges' JSON, indented, when it is not the list of exchanges
	// this version reads.
	Raw     string
	Explain explanation
}

// attemptRun is attempts that repeat the one shown before them (same outcome,
// class and error), folded under one line.
type attemptRun struct {
	Attempts []entry
	From, To time.Time
}

type conflictView struct {
	journal.Conflict
	Diff []diffLine
}

// lineView is one line of the order, as the table shows it.
type lineView struct {
	SKU, Name     string
	Quantity      decimal.Decimal
	Price, Amount decimal.Decimal
}

// totalView is the order's total at the marketplace beside 1C's as 1C holds it
// now (asked when the page opened).
type totalView struct {
	Marketplace *decimal.Decimal
	Currency    string
	// State: asked (1C answered with a total), no_total (1C answered without one),
	// absent (1C holds no order), unanswered (1C did not answer), not_asked (the
	// pages do not call 1C).
	State   string
	OneC    *decimal.Decimal
	Differs bool
	Diff    decimal.Decimal // marketplace − 1C
	Error   string          // why 1C did not answer
	AskedAt time.Time
	ExtID   string
}

type opData struct {
	Op        journal.Detail
	Row       export.Row
	Timeline  []entry
	Conflicts []conflictView
	Payload   string // indented
	Inbox     []inbox.Record
	InboxNote string // why the deliveries are not shown, "" when they are
	Outbox    []outbox.Record
	Cancel    *journal.Operation
	CancelKey string
	Create    string // for a cancel: its create's key
	CreateOp  *journal.Operation
	Flash     string // the message of the action just taken
	FlashCode string
	OneCZone  string

	// State is the order's, from its create and its cancel (both pages).
	State        orderState
	IsCancel     bool
	CancelReason string
	Number       string
	OrderDate    *time.Time // the marketplace's own date (the payload's created_at)
	Lines        []lineView
	LinesTotal   *decimal.Decimal
	Total        totalView
	LastError    explanation
	Note         explanation // the result's note, worded
	OneCLink     string      // the document in 1C's web client, "" when not configured
	CanResync    bool
}

// flashes are the messages an action redirects back with (?msg=).
var flashes = map[string]string{
	"requeued":       "flash_requeued",
	"already_done":   "flash_already_done",
	"event_requeued": "flash_event_requeued",
	"event_not_dead": "flash_event_not_dead",
}

func (s *Server) opPage(w http.ResponseWriter, r *http.Request, u who) {
	ctx := r.Context()
	key := r.URL.Query().Get("key")
	if key == "" {
		s.notFound(w, r, u, s.cat.t("err_no_key"))
		return
	}
	det, err := s.cfg.Journal.Show(ctx, key)
	if errors.Is(err, journal.ErrNotFound) {
		s.notFound(w, r, u, s.cat.tf("err_unknown_key", key))
		return
	}
	if err != nil {
		s.failed(w, r, u, "show an operation", err)
		return
	}
	d := opData{Op: det, Row: export.RowOf(det.Operation, s.cfg.Location), Payload: indent(det.Payload),
		OneCZone: s.cfg.OneCLocation.String()}
	if m, ok := flashes[r.URL.Query().Get("msg")]; ok {
		d.Flash, d.FlashCode = s.cat.t(m), r.URL.Query().Get("msg")
	}
	d.Timeline = s.foldRuns(s.timeline(det, u.Operator()))
	for _, c := range det.Conflicts {
		d.Conflicts = append(d.Conflicts, conflictView{Conflict: c, Diff: diffJSON(det.Payload, c.Payload)})
	}
	if s.cfg.Inbox != nil {
		if by, ok := s.cfg.Inbox.(deliveries); ok {
			recs, err := by.ByOperation(ctx, key)
			if err != nil {
				s.failed(w, r, u, "read the inbox", err)
				return
			}
			d.Inbox = recs
		} else {
			d.InboxNote = s.cat.t("inbox_unavailable")
		}
	}
	recs, err := s.cfg.Outbox.List(ctx, outbox.ListFilter{AggregateID: order.AggregateOfKey(key), Limit: 1000})
	if err != nil {
		s.failed(w, r, u, "list the outbox", err)
		return
	}
	slices.SortStableFunc(recs, func(a, b outbox.Record) int { return int(a.ID - b.ID) }) // oldest first, as the timeline
	d.Outbox = recs
	if ck := order.CancelKeyOf(key); ck != "" {
		d.CancelKey = ck
		c, err := s.cfg.Journal.Get(ctx, ck)
		switch {
		case err == nil:
			d.Cancel = &c
		case !errors.Is(err, journal.ErrNotFound):
			s.failed(w, r, u, "read the cancel operation", err)
			return
		}
	}
	create := &det.Operation
	if base, ok := strings.CutSuffix(key, ":cancel"); ok {
		d.Create, d.IsCancel, d.Cancel, create = base+":create", true, &det.Operation, nil
		c, err := s.cfg.Journal.Get(ctx, d.Create)
		switch {
		case err == nil:
			d.CreateOp, create = &c, &c
		case !errors.Is(err, journal.ErrNotFound):
			s.failed(w, r, u, "read the create operation", err)
			return
		}
	}
	if det.Kind == order.KindCreate || d.IsCancel {
		d.State = stateOf(create, d.Cancel)
		d.CancelReason = cancelReason(d.Cancel)
	}
	if create != nil && (det.Kind == order.KindCreate || d.IsCancel) {
		s.orderFacts(ctx, &d, *create)
	}
	d.LastError = s.explain(det.LastError, lastClass(det))
	if det.Result != nil {
		d.Note = s.explainNote(det.Result.Note)
	}
	d.CanResync = u.Operator() && det.Status != journal.StatusDone
	s.render(w, r, http.StatusOK, "op", u, key, d)
}

// timeline merges the operation's events and attempts, oldest first; an event and
// an attempt at the same instant keep the event first (a requeue, then the attempt
// it caused). Only operators see which worker ran an attempt.
func (s *Server) timeline(d journal.Detail, operator bool) []entry {
	var es []entry
	for i := range d.Events {
		es = append(es, entry{At: d.Events[i].At, Event: &d.Events[i]})
	}
	for _, at := range d.History {
		v := &attemptView{Attempt: at, Explain: s.explain(at.Error, at.Class)}
		if !operator {
			v.Worker = "" // which process ran it is the operators' business
		}
		if at.FinishedAt != nil {
			v.Duration = formatDuration(at.FinishedAt.Sub(at.StartedAt), s.cfg.Lang)
		}
		if len(at.Exchanges) > 0 {
			var xs []onec.Exchange
			if err := json.Unmarshal(at.Exchanges, &xs); err == nil {
				v.Exchanges = xs
			} else {
				v.Raw = indent(at.Exchanges)
			}
		}
		es = append(es, entry{At: at.StartedAt, Attempt: v})
	}
	slices.SortStableFunc(es, func(a, b entry) int { return a.At.Compare(b.At) })
	return es
}

// minRun is the fewest attempts like the one before them that are folded.
const minRun = 2

// foldRuns folds each run of attempts that repeat the attempt before them (same
// outcome, class and error, nothing else between) under one line, so that an
// operation retried for days reads in one screen; the run opens on a click.
func (s *Server) foldRuns(es []entry) []entry {
	var out []entry
	for i := 0; i < len(es); {
		out = append(out, es[i])
		j := i + 1
		if es[i].Attempt != nil {
			for j < len(es) && es[j].Attempt != nil && sameAttempt(es[i].Attempt, es[j].Attempt) {
				j++
			}
			if n := j - i - 1; n >= minRun {
				run := &attemptRun{Attempts: es[i+1 : j], From: es[i+1].At, To: es[j-1].At}
				out = append(out, entry{At: run.From, Run: run})
			} else {
				j = i + 1
			}
		}
		i = j
	}
	return out
}

func sameAttempt(a, b *attemptView) bool {
	return a.Outcome == b.Outcome && a.Class == b.Class && a.Error == b.Error && a.Outcome != "" && b.Outcome != ""
}

// lastClass is the class of the operation's last error: its newest attempt's.
func lastClass(d journal.Detail) string {
	if d.RetryClass != "" {
		return d.RetryClass
	}
	for i := len(d.History) - 1; i >= 0; i-- {
		if d.History[i].Class != "" {
			return d.History[i].Class
		}
	}
	return ""
}

// orderFacts fills what the order says of itself (its number, date and lines) and
// its total beside 1C's.
func (s *Server) orderFacts(ctx context.Context, d *opData, create journal.Operation) {
	var o order.Order
	if json.Unmarshal(create.Payload, &o) == nil {
		d.Number = o.Number
		if !o.CreatedAt.IsZero() {
			t := o.CreatedAt
			d.OrderDate = &t
		}
		for _, l := range o.Lines {
			d.Lines = append(d.Lines, lineView{SKU: l.SKU, Name: l.Name, Quantity: l.Quantity, Price: l.Price, Amount: l.Amount()})
		}
		if len(o.Lines) > 0 {
			t := o.LinesTotal()
			d.LinesTotal = &t
		}
	}
	row := export.RowOf(create, s.cfg.Location)
	d.Number = cmp.Or(d.Number, row.MarketplaceNumber)
	d.Total = totalView{Marketplace: row.Total, Currency: row.Currency, State: "not_asked",
		ExtID: order.OneCExternalID(create.Source, create.ExternalID)}
	if create.Result != nil && create.Result.Ref != "" {
		d.OneCLink = s.oneCLink(create.Result.Ref)
	}
	switch {
	case create.Status != journal.StatusDone || create.Result == nil || create.Result.Ref == "":
		d.Total.State = "" // nothing in 1C to ask about
		return
	case s.cfg.OneC == nil:
		return
	}
	cctx, cancel := context.WithTimeout(ctx, s.cfg.OneCTimeout)
	defer cancel()
	d.Total.AskedAt = s.cfg.Now()
	found, err := s.cfg.OneC.FindOrders(cctx, d.Total.ExtID)
	if err != nil {
		d.Total.State, d.Total.Error = "unanswered", s.explain(err.Error(), "").Text
		switch {
		case errors.Is(err, context.DeadlineExceeded) || errors.Is(cctx.Err(), context.DeadlineExceeded):
			d.Total.Error = s.cat.tf("total_timeout", s.cfg.OneCTimeout)
		case d.Total.Error == "":
			d.Total.Error = s.classSentence(journal.ClassTransient, "find", 0)
		}
		s.log.WarnContext(ctx, "ui: 1C did not answer the operation page's find", "key", create.Key, "err", err)
		return
	}
	pick := -1
	for i, o := range found {
		if o.Ref == create.Result.Ref || (pick < 0 && !o.Deleted) {
			pick = i
		}
		if o.Ref == create.Result.Ref {
			break
		}
	}
	switch {
	case pick < 0:
		d.Total.State = "absent"
	case found[pick].Total == nil:
		d.Total.State = "no_total"
	default:
		t := *found[pick].Total
		d.Total.State, d.Total.OneC = "asked", &t
		if d.Total.Marketplace != nil && !d.Total.Marketplace.Equal(t) {
			d.Total.Differs, d.Total.Diff = true, d.Total.Marketplace.Sub(t)
		}
	}
}

// explainNote words a result's note (the engine writes them in English).
func (s *Server) explainNote(note string) explanation {
	e := explanation{Raw: note}
	switch {
	case note == "":
		return explanation{}
	case note == "cancelled in 1C":
		e.Text = s.cat.t("note_cancelled_in_1c")
	case strings.HasPrefix(note, "cancelled before creation"):
		e.Text = s.cat.t("note_cancelled_before_create")
	case strings.HasPrefix(note, "nothing to cancel"):
		e.Text = s.cat.t("note_nothing_to_cancel")
	default:
		e.Unknown = true
	}
	return e
}

// indent is JSON made readable; anything else as it is.
func indent(b []byte) string {
	var buf bytes.Buffer
	if err := json.Indent(&buf, b, "", "  "); err != nil {
		return string(b)
	}
	return buf.String()
}

func (s *Server) resync(w http.ResponseWriter, r *http.Request, u who) {
	key := r.PostFormValue("key")
	if key == "" {
		s.notFound(w, r, u, s.cat.t("err_no_key"))
		return
	}
	ctx := journal.WithActor(r.Context(), journal.ActorUI(u.Name))
	back := "/ui/journal/op?key=" + url.QueryEscape(key)
	_, err := s.cfg.Journal.Requeue(ctx, key)
	var np *journal.NotPendingError
	switch {
	case errors.As(err, &np) || errors.Is(err, journal.ErrNotPending):
		http.Redirect(w, r, back+"&msg=already_done", http.StatusSeeOther)
		return
	case errors.Is(err, journal.ErrNotFound):
		s.notFound(w, r, u, s.cat.tf("err_unknown_key", key))
		return
	case err != nil:
		s.failed(w, r, u, "requeue an operation", err)
		return
	}
	s.log.InfoContext(ctx, "ui: operation requeued", "key", key, "user", u.Name, "remote", r.RemoteAddr)
	if s.cfg.Wake != nil {
		s.cfg.Wake()
	}
	http.Redirect(w, r, back+"&msg=requeued", http.StatusSeeOther)
}

func (s *Server) requeueEvent(w http.ResponseWriter, r *http.Request, u who) {
	id, err := strconv.ParseInt(r.PostFormValue("id"), 10, 64)
	if err != nil || id <= 0 {
		s.render(w, r, http.StatusBadRequest, "error", u, s.cat.t("err_bad_request_title"),
			errorData{Code: http.StatusBadRequest, Message: s.cat.tf("err_event_id", r.PostFormValue("id"))})
		return
	}
	n, err := s.cfg.Outbox.Requeue(r.Context(), []int64{id}, false)
	if err != nil {
		s.failed(w, r, u, "requeue an outbox event", err)
		return
	}
	back := "/ui/journal"
	if key := r.PostFormValue("key"); key != "" {
		back = "/ui/journal/op?key=" + url.QueryEscape(key) + "&msg="
		if n > 0 {
			back += "event_requeued"
		} else {
			back += "event_not_dead"
		}
	}
	if n > 0 {
		s.log.InfoContext(r.Context(), "ui: outbox event requeued", "id", id, "user", u.Name, "remote", r.RemoteAddr)
	}
	http.Redirect(w, r, back, http.StatusSeeOther)
}
