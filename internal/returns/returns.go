// Package returns carries the return.register operations (order.KindReturn) into
// 1C: it is the engine's handler of their kind, registered by the service's wiring
// (engine.Config.Handlers). A return is a customer return based on the 1C document
// of its order, so it goes only once the order's create is done; it is found
// first by its own external id (<source>:return:<id>) and created only when 1C
// holds none, under the row lock the engine holds, by the same rules as an order's
// create (engine.FoundIn1C, engine.SentAt, engine.AnsweredAfterPost, engine.Failed,
// engine.Settled).
// A done return announces return.created in the lane of its order.
package returns

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ordersync/ordersync/internal/engine"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/onec"
	"github.com/ordersync/ordersync/internal/order"
	"github.com/ordersync/ordersync/internal/outbox"
)

// Journal is what the handler reads of the journal: the order's create.
type Journal interface {
	Get(ctx context.Context, key string) (journal.Operation, error)
}

// Handler carries out return.register operations.
type Handler struct {
	// Journal is where the order's create is read (its 1C ref is the return's base).
	Journal Journal
	// Routes address the return.created events.
	Routes outbox.Routes
}

var _ engine.Handler = Handler{}

const onecDateLayout = "2006-01-02T15:04:05"

// CarryOut registers the return in 1C, once.
func (h Handler) CarryOut(ctx context.Context, c engine.Call) engine.Verdict {
	op := c.Op
	r, err := order.ParseReturn(op.Payload)
	if err != nil {
		return engine.Verdict{Class: onec.Permanent, Err: fmt.Errorf("return payload: %w", err)}
	}
	base, v := h.baseOf(ctx, r)
	if v != nil {
		return *v
	}
	req := ToCreateReturn(r, base, c.Location)
	out := findOrCreate(ctx, c, req)
	if out.Err == nil {
		out.Messages = h.Routes.Address(CreatedEvent(op, r, out.Result, c.Now()))
		c.Log.InfoContext(ctx, "return in 1C", "ref", out.Result.Ref, "number", out.Result.Number, "order_ref", base.Ref)
	}
	return out
}

// baseOf reads the order's create: done, its result is the return's base
// document; not there yet or pending, the return waits (Transient); failed, the
// return fails with it.
func (h Handler) baseOf(ctx context.Context, r order.Return) (*journal.Result, *engine.Verdict) {
	wait := func(why string) (*journal.Result, *engine.Verdict) {
		return nil, &engine.Verdict{Class: onec.Transient, Err: fmt.Errorf(
			"the order %s (%s) is not in 1C yet: %s; the return is based on its document and waits for it", r.OrderID, r.OrderKey, why)}
	}
	o, err := h.Journal.Get(ctx, r.OrderKey)
	switch {
	case errors.Is(err, journal.ErrNotFound):
		return wait("its create is not in the journal")
	case err != nil:
		return nil, &engine.Verdict{Class: onec.Transient, Err: fmt.Errorf("read the order's create %s: %w", r.OrderKey, err)}
	}
	switch o.Status {
	case journal.StatusDone:
	case journal.StatusFailed:
		return nil, &engine.Verdict{Class: onec.Permanent, Err: fmt.Errorf(
			"the order %s (%s) failed and is not in 1C (%s): the return has no document to be based on; "+
				"requeue the order's create, then this return", r.OrderID, r.OrderKey, o.LastError)}
	default:
		return wait(fmt.Sprintf("its create is %s", o.Status))
	}
	if o.Result == nil || o.Result.Ref == "" {
		return nil, &engine.Verdict{Class: onec.Permanent, Err: fmt.Errorf(
			"the order %s (%s) is done without a 1C ref: the return has no document to be based on", r.OrderID, r.OrderKey)}
	}
	return o.Result, nil
}

// findOrCreate asks 1C for the return by its external id and creates it only when
// 1C holds none, by the rules of an order's create.
func findOrCreate(ctx context.Context, c engine.Call, req onec.CreateReturn) engine.Verdict {
	extID := req.ExternalID
	all, err := c.OneC.FindReturns(ctx, extID)
	if err != nil {
		return engine.Verdict{Class: onec.ClassOf(err), Err: err}
	}
	found, others := split(extID, all)
	if len(found) > 0 {
		res, ws := engine.FoundIn1C("return", extID, found, "1C already held the return: nothing was created", c.Now())
		if c.Op.Doubted {
			engine.Recovered(res, "ordersync created the return in an earlier attempt whose answer was lost or which was cut short; this attempt found it by its external id")
		}
		return settle(ctx, c, req, engine.Verdict{Result: res, Warnings: ws})
	}
	if len(others) > 0 {
		return engine.CaseConflict("return", extID, others, c.Now())
	}

	calledAt := c.Now()
	created, err := c.OneC.CreateReturn(ctx, req)
	postedAt := engine.SentAt(ctx, calledAt)
	if err == nil {
		if created.Existing && created.ExternalID != "" && created.ExternalID != extID {
			return engine.CaseConflict("return", extID, []onec.Order{{Ref: created.Ref, Number: created.Number, Date: created.Date,
				ExternalID: created.ExternalID}}, c.Now())
		}
		res := &journal.Result{Ref: created.Ref, Number: created.Number, Date: created.Date}
		if created.Existing {
			res.Found = true
			res.Note = "1C answered that it already held the return (409): nothing was created"
			if c.Op.Doubted {
				engine.Recovered(res, "ordersync created the return in an earlier attempt whose answer was lost or which was cut short; 1C refused this attempt's create as a repeat of it")
			}
		}
		return settle(ctx, c, req, engine.Verdict{Result: res, Ref: created.Ref})
	}
	if engine.AnsweredAfterPost(err) {
		listed, ferr := c.OneC.FindReturns(ctx, extID)
		again, others := split(extID, listed)
		switch {
		case ferr != nil:
			return engine.Verdict{Class: onec.Unknown, PostedAt: postedAt, Err: fmt.Errorf("%w; and the find that should settle it failed: %v", err, ferr)}
		case len(again) > 0:
			c.Log.WarnContext(ctx, "1C answered an error but holds the return", "err", err)
			res, ws := engine.FoundIn1C("return", extID, again, "", c.Now())
			engine.Recovered(res, "ordersync created the return; 1C answered its POST with an error after writing it: "+err.Error())
			return settle(ctx, c, req, engine.Verdict{Result: res, Warnings: ws})
		case len(others) > 0:
			return engine.CaseConflict("return", extID, others, c.Now())
		default:
			return engine.Verdict{Class: onec.Permanent, Err: fmt.Errorf("%w (1C holds no return %s, so nothing was created)", err, extID)}
		}
	}
	return engine.Failed(err, "return", postedAt, c.SettleTime)
}

// settle has the client make sure that the return of done, which 1C holds (found
// or just created), is what req asks and is posted (onec.Client.SettleReturn),
// by the rule an order's create settles by (engine.Settled).
func settle(ctx context.Context, c engine.Call, req onec.CreateReturn, done engine.Verdict) engine.Verdict {
	res := done.Result
	err := c.OneC.SettleReturn(ctx, onec.Return{Ref: res.Ref, Number: res.Number, Date: res.Date, ExternalID: req.ExternalID,
		OrderRef: req.OrderRef}, req)
	return engine.Settled("return", done, err, c.Now())
}

// split takes what 1C found for extID as the engine's rules read it: the returns
// whose external id is extID exactly, and the others (1C's search does not tell
// letter case apart).
func split(extID string, found []onec.Return) (same, others []onec.Order) {
	for _, r := range found {
		o := onec.Order{Ref: r.Ref, Number: r.Number, Date: r.Date, ExternalID: r.ExternalID, Posted: r.Posted, Deleted: r.Deleted, Total: r.Total}
		if r.ExternalID == extID {
			same = append(same, o)
		} else {
			others = append(others, o)
		}
	}
	return same, others
}

// ToCreateReturn maps a return to contract v1's CreateReturn, based on the order's
// 1C document: 1C's zone-less date in loc, each line's exact amount, the exact
// total.
func ToCreateReturn(r order.Return, base *journal.Result, loc *time.Location) onec.CreateReturn {
	lines := make([]onec.Line, len(r.Lines))
	for i, l := range r.Lines {
		lines[i] = onec.Line{SKU: l.SKU, Name: l.Name, Quantity: l.Quantity, Price: l.Price, Amount: l.Amount()}
	}
	comment := fmt.Sprintf("%s return %s of order %s", r.Source, r.ID, r.OrderID)
	if r.Status != "" {
		comment += " (" + r.Status + ")"
	}
	return onec.CreateReturn{
		ExternalID:      r.OneCExternalID(),
		Source:          r.Source,
		Number:          r.ID,
		Date:            r.CreatedAt.In(loc).Format(onecDateLayout),
		Type:            r.Type,
		OrderExternalID: order.OneCExternalID(r.Source, r.OrderID),
		OrderRef:        base.Ref,
		Currency:        r.Currency,
		Lines:           lines,
		Total:           r.LinesTotal(),
		Reason:          strings.TrimSpace(r.Reason),
		Comment:         comment,
	}
}

// CreatedEvent is what a done return tells the world: return.created with the
// return as registered and the 1C document that holds it, in the lane of its
// order, so that it is delivered after the order's own events.
func CreatedEvent(op journal.Operation, r order.Return, res *journal.Result, now time.Time) outbox.Event {
	data, _ := json.Marshal(struct {
		Key      string          `json:"key"`
		Return   json.RawMessage `json:"return"`
		OrderKey string          `json:"order_key"`
		OneC     *journal.Result `json:"onec"`
	}{op.Key, op.Payload, r.OrderKey, res})
	return outbox.Event{
		Type:          outbox.ReturnCreated,
		AggregateType: "order",
		AggregateID:   order.AggregateOfKey(r.OrderKey),
		Data:          data,
		OccurredAt:    now,
	}
}

var _ engine.Verifier = Handler{}

// Find asks 1C for the done return op made, by its own external id: the engine's
// verification of a return that was ever in doubt.
func (Handler) Find(ctx context.Context, client onec.Client, op journal.Operation) (what, extID string, found []onec.Order, err error) {
	r, err := order.ParseReturn(op.Payload)
	if err != nil {
		return "return", "", nil, fmt.Errorf("return payload: %w", err)
	}
	extID = r.OneCExternalID()
	all, err := client.FindReturns(ctx, extID)
	found, _ = split(extID, all) // another id's return is not this one's duplicate
	return "return", extID, found, err
}
