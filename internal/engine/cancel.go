package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/onec"
	"github.com/ordersync/ordersync/internal/order"
	"github.com/ordersync/ordersync/internal/outbox"
)

// cancelOrder carries out a cancel operation while the caller holds its row lock. It
// settles the order's create first, so that a cancel arriving before the create has
// succeeded never leaves a created, uncancelled order in 1C:
//
//   - create done: cancel in 1C;
//   - create pending: take the create's row lock (waiting while a worker is creating
//     it right now), then ask 1C: an order there (a create whose reply was lost) is
//     cancelled; none means nothing was created, and the create is failed under its
//     lock so it never will be;
//   - create failed, or never registered: cancel in 1C whatever it holds; when it
//     holds nothing the cancel ends done with a note, not failed.
//
// A create whose POST may still be at work in 1C (an unknown outcome younger than
// onec.settle_time, or an open attempt younger than the takeover time) is never
// concluded "never created": the cancel retries once it has settled. A cancel ends
// done only on the contract's answer: "cancelled", or its JSON 404 (no such order).
func (e *Engine) cancelOrder(ctx context.Context, log *slog.Logger, op journal.Operation) Verdict {
	var c order.Cancel
	if err := json.Unmarshal(op.Payload, &c); err != nil {
		return Verdict{Class: onec.Permanent, Err: fmt.Errorf("payload: %w", err)}
	}
	if c.Source == "" || c.ExternalID == "" {
		return Verdict{Class: onec.Permanent, Err: errors.New("payload: source and external_id are required")}
	}
	extID := order.OneCExternalID(c.Source, c.ExternalID)
	createKey := c.CreateKey
	if createKey == "" {
		createKey = order.Key(c.Source, "order", c.ExternalID, "create")
	}

	create, err := e.store.Get(ctx, createKey)
	switch {
	case errors.Is(err, journal.ErrNotFound):
		v := e.cancelIfPresent(ctx, extID, c.Reason, "no create operation was registered")
		if v.Err == nil && v.Result.Ref == "" {
			// Nothing in 1C and nothing in the journal: the cancel stays as a
			// tombstone, so that a create of this order that comes later is not made
			// (a marketplace may send the cancel first). A mistyped id would lose a
			// future order that way, so it is a warning a person sees.
			v.Warnings = []journal.Warning{{Code: journal.WarningCancelBeforeCreate, At: e.cfg.Now().UTC(), Refs: []string{},
				Message: fmt.Sprintf("recorded before ordersync saw the order: if %s is ever registered it will not be created "+
					"in 1C; if the id was mistyped, that order must be created by hand", createKey)}}
		}
		return v
	case err != nil:
		return Verdict{Class: onec.Transient, Err: fmt.Errorf("read %s: %w", createKey, err)}
	case create.Status == journal.StatusDone:
		return e.cancelIn1C(ctx, extID, c.Reason)
	case create.Status == journal.StatusFailed:
		if v, unsettled := e.unsettled(createKey, create); unsettled {
			return v
		}
		return e.cancelIfPresent(ctx, extID, c.Reason, "its create failed: "+create.LastError)
	}

	// The create is pending: hold it still while 1C is asked.
	lock, err := e.store.Lock(ctx, createKey)
	if errors.Is(err, journal.ErrBusy) {
		return Verdict{Class: onec.Transient, Err: fmt.Errorf("%s is being created right now; the cancel follows it", createKey)}
	}
	if err != nil {
		return Verdict{Class: onec.Transient, Err: fmt.Errorf("lock %s: %w", createKey, err)}
	}
	defer lock.Release(context.WithoutCancel(ctx))
	cur := lock.Operation()
	if cur.Status == journal.StatusDone {
		lock.Release(ctx)
		return e.cancelIn1C(ctx, extID, c.Reason)
	}
	if v, unsettled := e.unsettled(createKey, cur); unsettled {
		// Its last POST may still be at work in 1C: finding nothing now proves nothing.
		lock.Release(ctx)
		log.InfoContext(ctx, "the create's last POST may still be at work in 1C; the cancel waits for it", "create", createKey)
		return v
	}
	if cur.Status == journal.StatusFailed {
		lock.Release(ctx)
		return e.cancelIfPresent(ctx, extID, c.Reason, "its create failed: "+cur.LastError)
	}
	all, err := e.client.FindOrders(ctx, extID)
	if err != nil {
		return Verdict{Class: onec.ClassOf(err), Err: err}
	}
	if found, _ := sameExternalID(extID, all); len(found) > 0 {
		// A create whose reply was lost: the order is there. Cancel it; the create
		// will find it and end done.
		log.WarnContext(ctx, "1C holds the order its pending create is still retrying; cancelling it")
		return e.cancelIn1C(ctx, extID, c.Reason)
	}
	reason := fmt.Sprintf("cancelled (%s) before it was created in 1C: nothing was created", op.Key)
	if c.Reason != "" {
		reason += "; reason: " + c.Reason
	}
	if err := lock.Fail(ctx, reason); err != nil {
		return Verdict{Class: onec.Transient, Err: fmt.Errorf("fail %s: %w", createKey, err)}
	}
	return Verdict{Result: &journal.Result{Note: fmt.Sprintf("cancelled before creation: %s was stopped, 1C holds no order %s", createKey, extID)}}
}

// unsettled tells whether a create's last POST may still be at work in 1C (its
// SettleUntil, as Lock and Get read it, is ahead); if so, the cancel's verdict is a
// retry at that time.
func (e *Engine) unsettled(createKey string, create journal.Operation) (Verdict, bool) {
	if create.SettleUntil == nil || !create.SettleUntil.After(e.cfg.Now()) {
		return Verdict{}, false
	}
	until := *create.SettleUntil
	return Verdict{Class: onec.Transient, RetryAt: until, Err: fmt.Errorf(
		"%s may still be at work in 1C (its last POST had no verdict); the cancel concludes after %s",
		createKey, until.UTC().Format(time.RFC3339))}, true
}

// cancelIfPresent cancels the order when 1C holds it, and otherwise ends done with a
// note saying why there was nothing to cancel.
func (e *Engine) cancelIfPresent(ctx context.Context, extID, reason, why string) Verdict {
	all, err := e.client.FindOrders(ctx, extID)
	if err != nil {
		return Verdict{Class: onec.ClassOf(err), Err: err}
	}
	found, others := sameExternalID(extID, all)
	if len(found) == 0 {
		note := fmt.Sprintf("nothing to cancel: 1C holds no order %s (%s)", extID, why)
		if len(others) > 0 {
			// Cancelling by this id in 1C would cancel the other order, which 1C
			// does not tell from it.
			note += fmt.Sprintf("; it holds %s (№ %s) of external id %q, which differs only in letter case and is not touched",
				others[0].Ref, others[0].Number, others[0].ExternalID)
		}
		return Verdict{Result: &journal.Result{Note: note}}
	}
	return e.cancelIn1C(ctx, extID, reason)
}

// cancelIn1C asks 1C to cancel; contract v1's cancel is idempotent, so a retry after
// a lost reply is safe. A 404 means 1C holds no such order: done, with a note.
func (e *Engine) cancelIn1C(ctx context.Context, extID, reason string) Verdict {
	res, err := e.client.CancelOrder(ctx, extID, reason)
	if err == nil {
		return Verdict{Result: &journal.Result{Ref: res.Ref, Note: "cancelled in 1C"}, Ref: res.Ref}
	}
	var oe *onec.Error
	if errors.As(err, &oe) && oe.Status == http.StatusNotFound && oe.API && oe.Class == onec.Permanent {
		// Only the service's own JSON 404 means "no such order"; a web server's page
		// is a configuration problem and the cancel waits for it.
		return Verdict{Result: &journal.Result{Note: fmt.Sprintf("nothing to cancel: 1C answered 404 for %s (deleted in 1C?)", extID)}}
	}
	class := onec.ClassOf(err)
	if class == onec.Unknown {
		class = onec.Transient // the cancel is idempotent: asking again is safe
	}
	return Verdict{Class: class, Err: err}
}

// cancelEvent is what a done cancel tells the world: order.cancelled, its data the
// cancel and 1C's answer.
func cancelEvent(op journal.Operation, res *journal.Result, now time.Time) outbox.Event {
	data, _ := json.Marshal(struct {
		Cancel json.RawMessage `json:"cancel"`
		OneC   *journal.Result `json:"onec"`
	}{op.Payload, res})
	return outbox.Event{
		Type:          outbox.OrderCancelled,
		AggregateType: "order",
		AggregateID:   order.AggregateOfKey(op.Key),
		Data:          data,
		OccurredAt:    now,
	}
}
