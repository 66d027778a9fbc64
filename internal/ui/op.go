package ui

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

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

// entry is one line of an operation's timeline: an event or an attempt.
type entry struct {
	At      time.Time
	Event   *journal.Event
	Attempt *attemptView
}

type attemptView struct {
	journal.Attempt
	Duration  string // "" while open
	Exchanges []onec.Exchange
	// Raw is the exchanges' JSON, indented, when it is not the list of exchanges
	// this version reads.
	Raw string
}

type conflictView struct {
	journal.Conflict
	Diff []diffLine
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
	Flash     string // the message of the action just taken
	FlashCode string
	OneCZone  string
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
	d.Timeline = timeline(det)
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
	if base, ok := strings.CutSuffix(key, ":cancel"); ok {
		d.Create = base + ":create"
	}
	s.render(w, r, http.StatusOK, "op", u, key, d)
}

// timeline merges the operation's events and attempts, oldest first; an event and
// an attempt at the same instant keep the event first (a requeue, then the attempt
// it caused).
func timeline(d journal.Detail) []entry {
	var es []entry
	for i := range d.Events {
		es = append(es, entry{At: d.Events[i].At, Event: &d.Events[i]})
	}
	for _, at := range d.History {
		v := &attemptView{Attempt: at}
		if at.FinishedAt != nil {
			v.Duration = at.FinishedAt.Sub(at.StartedAt).Round(time.Millisecond).String()
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
