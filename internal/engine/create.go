package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"time"

	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/onec"
	"github.com/ordersync/ordersync/internal/order"
	"github.com/ordersync/ordersync/internal/outbox"
)

// onecDateLayout is 1C's zone-less date-time.
const onecDateLayout = "2006-01-02T15:04:05"

// findOrCreate asks 1C for the order by its external id and creates it only when 1C
// holds none. It runs while the caller holds the journal row lock.
func (e *Engine) findOrCreate(ctx context.Context, log *slog.Logger, op journal.Operation) Verdict {
	o, fetched, v := e.orderOf(ctx, op)
	if v != nil {
		return *v
	}
	out := e.findOrCreateOrder(ctx, log, op, o)
	out.Payload = fetched
	return out
}

// orderOf reads the operation's order: its payload, or, for a fetch payload, the
// order fetched from the source now (returned canonical, to be kept as the payload).
func (e *Engine) orderOf(ctx context.Context, op journal.Operation) (order.Order, []byte, *Verdict) {
	f, isFetch := order.ParseFetch(op.Payload)
	if !isFetch {
		o, err := decodeOrder(op.Payload)
		if err != nil {
			return o, nil, &Verdict{Class: onec.Permanent, Err: fmt.Errorf("payload: %w", err)}
		}
		return o, nil, nil
	}
	fetcher, ok := e.cfg.Fetchers[f.Connector]
	if !ok {
		return order.Order{}, nil, &Verdict{Class: onec.Transient,
			Err: fmt.Errorf("the order is to be fetched from %s, which is not configured here", f.Connector)}
	}
	o, err := fetcher.Fetch(ctx, f.ID)
	var ve *order.ValidationError
	switch {
	case errors.Is(err, order.ErrNotReady):
		return o, nil, &Verdict{Waiting: true, Err: fmt.Errorf("not created yet: %w", err)}
	case errors.As(err, &ve), errors.Is(err, order.ErrNoSuchOrder):
		return o, nil, &Verdict{Class: onec.Permanent, Err: fmt.Errorf("fetch %s %s: %w", f.Connector, f.ID, err)}
	case err != nil:
		return o, nil, &Verdict{Class: onec.Transient, Err: fmt.Errorf("fetch %s %s: %w", f.Connector, f.ID, err)}
	}
	o.Source, o.ExternalID = op.Source, op.ExternalID // the key was built from them
	if err := o.Validate(); err != nil {
		return o, nil, &Verdict{Class: onec.Permanent, Err: fmt.Errorf("fetched %s %s: %w", f.Connector, f.ID, err)}
	}
	return o, o.Canonical(), nil
}

func (e *Engine) findOrCreateOrder(ctx context.Context, log *slog.Logger, op journal.Operation, o order.Order) Verdict {
	extID := o.OneCExternalID()
	req := ToCreateOrder(o, e.cfg.Location)
	if e.cfg.Mappings != nil {
		m, err := e.cfg.Mappings(o.Source)
		if err != nil {
			return MappingRefused(err)
		}
		req.Mapping = m
	}

	all, err := e.client.FindOrders(ctx, extID)
	if err != nil {
		return Verdict{Class: onec.ClassOf(err), Err: err}
	}
	found, others := sameExternalID(extID, all)
	if len(found) > 0 {
		res, ws := FoundIn1C("order", extID, found, "1C already held the order: nothing was created", e.cfg.Now())
		if op.Doubted {
			Recovered(res, "ordersync created the order in an earlier attempt whose answer was lost or which was cut short; this attempt found it by its external id")
		}
		return e.settle(ctx, req, Verdict{Result: res, Warnings: ws})
	}
	if len(others) > 0 {
		return CaseConflict("order", extID, others, e.cfg.Now())
	}

	if op.CancelRequested {
		// The marketplace cancelled it before it reached 1C: creating it now would
		// leave a created, uncancelled order.
		cancelKey := order.CancelKeyOf(op.Key)
		v := Verdict{Class: onec.Permanent, Err: fmt.Errorf("cancelled (%s) before it was created in 1C: not created", cancelKey)}
		if c, err := e.store.Get(ctx, cancelKey); err == nil && c.CreatedAt.Before(op.CreatedAt) {
			// The cancel was there before this order was: a tombstone, perhaps of a
			// mistyped id, that a person should see.
			msg := fmt.Sprintf("not created: the cancel %s was recorded %s, before this order was registered "+
				"(a cancel that came first, or one given for a mistyped id); if the order is live, create it in 1C by hand",
				cancelKey, c.CreatedAt.UTC().Format(time.RFC3339))
			v.Warnings = []journal.Warning{{Code: journal.WarningCancelBeforeCreate, Message: msg, Refs: []string{}, At: e.cfg.Now().UTC()}}
		}
		return v
	}
	// The settle time counts from the moment the POST was written whole (the client
	// stamps it on the attempt's recorder), not from before a wait for a free
	// onec.max_concurrency slot; a client that does not stamp falls back to the
	// moment the call was made, which is no later.
	calledAt := e.cfg.Now()
	created, err := e.client.CreateOrder(ctx, req)
	postedAt := SentAt(ctx, calledAt)
	if err == nil {
		if created.Existing && created.ExternalID != "" && created.ExternalID != extID {
			// 1C's lock took this order for another one it holds.
			return CaseConflict("order", extID, []onec.Order{{Ref: created.Ref, Number: created.Number, Date: created.Date,
				ExternalID: created.ExternalID}}, e.cfg.Now())
		}
		res := &journal.Result{Ref: created.Ref, Number: created.Number, Date: created.Date}
		if created.Existing {
			res.Found = true
			res.Note = "1C answered that it already held the order (the HTTP service's 409, or the OData interface's \"key exists\"): nothing was created"
			if op.Doubted {
				Recovered(res, "ordersync created the order in an earlier attempt whose answer was lost or which was cut short; 1C refused this attempt's create as a repeat of it")
			}
		}
		return e.settle(ctx, req, Verdict{Result: res, Ref: created.Ref})
	}

	class := onec.ClassOf(err)
	if u := onec.UnmatchedOf(err); u != nil {
		// Refused before anything was written: the order waits for its items.
		return Verdict{Class: class, Err: err, Warnings: []journal.Warning{{Code: journal.WarningUnmatchedSKU,
			Message: "not created in 1C: " + u.Error(), Refs: []string{}, At: e.cfg.Now().UTC()}}}
	}
	if AnsweredAfterPost(err) {
		// The service's handler itself answered 500 with the contract's error after
		// the POST: a business exception, or a failure after the order was written.
		// 1C has finished with the request, so asking now settles which. Any other
		// 5xx (a proxy's page, a 504) may come while 1C is still writing; that waits
		// for the next attempt, after the settle time.
		again, ferr := e.client.FindOrders(ctx, extID)
		again, others := sameExternalID(extID, again)
		switch {
		case ferr != nil:
			return Verdict{Class: onec.Unknown, PostedAt: postedAt, Err: fmt.Errorf("%w; and the find that should settle it failed: %v", err, ferr)}
		case len(again) > 0:
			log.WarnContext(ctx, "1C answered an error but holds the order", "err", err)
			res, ws := FoundIn1C("order", extID, again, "", e.cfg.Now())
			Recovered(res, "ordersync created the order; 1C answered its POST with an error after writing it: "+err.Error())
			return e.settle(ctx, req, Verdict{Result: res, Warnings: ws})
		case len(others) > 0:
			return CaseConflict("order", extID, others, e.cfg.Now())
		default:
			return Verdict{Class: onec.Permanent, Err: fmt.Errorf("%w (1C holds no order %s, so nothing was created)", err, extID)}
		}
	}
	return Failed(err, "order", postedAt, e.cfg.SettleTime)
}

// SentAt is when the POST of a find-or-create's create was sent, for its settle
// time: the moment the client stamped on the attempt's recorder when it wrote the
// request whole (not before a wait for a free onec.max_concurrency slot), or, for
// a client that does not stamp, calledAt, the moment the call was made, which is
// no later.
func SentAt(ctx context.Context, calledAt time.Time) time.Time {
	postedAt := onec.RecorderFrom(ctx).LastSent()
	if postedAt.Before(calledAt) {
		return calledAt
	}
	return postedAt
}

// AnsweredAfterPost reports whether err, the failure of a create's POST, is the
// service's handler itself answering 500 with the contract's error: a business
// exception, or a failure after the document was written. 1C has finished with the
// request, so a find now settles which. Any other 5xx (a proxy's page, a 504) may
// come while 1C is still writing; that waits for the next attempt, after the
// settle time.
func AnsweredAfterPost(err error) bool {
	var oe *onec.Error
	return onec.ClassOf(err) == onec.Unknown && errors.As(err, &oe) && oe.Status == 500 && oe.API
}

// Failed is the verdict on a create whose POST failed with err: of its class, and
// for an unknown outcome with the settle time of the POST sent at postedAt (no
// attempt starts before it has passed) and a message saying so. what names the
// document ("order", "return").
func Failed(err error, what string, postedAt time.Time, settle time.Duration) Verdict {
	class := onec.ClassOf(err)
	if class == onec.Unknown {
		err = fmt.Errorf("%w: the %s may exist in 1C, which may still be writing it; the next attempt asks 1C first, "+
			"not before onec.settle_time (%s) has passed", err, what, settle)
		return Verdict{Class: class, Err: err, PostedAt: postedAt}
	}
	return Verdict{Class: class, Err: err}
}

// settle has the client make sure that the order of done, which 1C holds (found or
// just created), is what req asks and is posted (onec.Client.SettleOrder). Until it
// is, the operation is not done, so nothing tells a marketplace that 1C holds the
// order: a difference is a mismatch_in_1c warning naming the fields, and the next
// attempt finds the order and looks again; a posting that failed is tried again,
// and the order is never created twice for it.
func (e *Engine) settle(ctx context.Context, req onec.CreateOrder, done Verdict) Verdict {
	res := done.Result
	err := e.client.SettleOrder(ctx, onec.Order{Ref: res.Ref, Number: res.Number, Date: res.Date, ExternalID: req.ExternalID}, req)
	return Settled("order", done, err, e.cfg.Now())
}

// Settled is the verdict on a document what (an "order", a "return") that 1C
// holds, found or just created (done), once the client settled it with err: done
// when err is nil; otherwise not done, of err's class, a *onec.Mismatch recorded
// as a mismatch_in_1c warning naming the fields, so that the next attempt finds
// the document and looks again, and never creates it twice.
func Settled(what string, done Verdict, err error, now time.Time) Verdict {
	if err == nil {
		return done
	}
	res := done.Result
	v := Verdict{Class: onec.ClassOf(err), Ref: res.Ref, Warnings: done.Warnings,
		Err: fmt.Errorf("1C holds the %s as %s (№ %s), but it is not done: %w", what, res.Ref, res.Number, err)}
	if m := onec.MismatchOf(err); m != nil {
		v.Warnings = append(v.Warnings, journal.Warning{Code: journal.WarningMismatchIn1C, Message: m.Error(),
			Refs: []string{res.Ref}, Numbers: []string{res.Number}, At: now.UTC()})
	}
	return v
}

// sameExternalID splits what 1C found for extID into the orders whose external id is
// extID exactly and the others. 1C compares strings without regard to letter case
// (its queries and the reference module's lock key do), while ordersync's external
// ids are case-sensitive: site:AB12 and site:ab12 are two orders to ordersync and
// one to 1C's search.
func sameExternalID(extID string, found []onec.Order) (same, others []onec.Order) {
	for _, o := range found {
		if o.ExternalID == extID {
			same = append(same, o)
		} else {
			others = append(others, o)
		}
	}
	return same, others
}

// CaseConflict is the verdict on a create whose external id 1C cannot tell from
// another's: 1C holds a document (what: "order", "return") whose external id
// differs from extID only in letter case (or is otherwise not extID). Creating it
// would give 1C two documents that its search, its lock and a cancel take for one,
// so nothing is created: the operation fails with a warning naming the other, for
// a person to decide.
func CaseConflict(what, extID string, others []onec.Order, now time.Time) Verdict {
	refs := make([]string, len(others))
	numbers := make([]string, len(others))
	var named []string
	for i, o := range others {
		refs[i], numbers[i] = o.Ref, o.Number
		named = append(named, fmt.Sprintf("%s (№ %s, external id %q)", o.Ref, o.Number, o.ExternalID))
	}
	msg := fmt.Sprintf("1C's search for external id %q found %s, %s %s with another external id that 1C does not tell "+
		"from this one (they differ only in letter case): nothing was created, so that 1C does not hold two %ss it "+
		"takes for one; give one of the %ss another id in its source, or create it in 1C by hand",
		extID, strings.Join(named, ", "), article(what), what, what, what)
	return Verdict{Class: onec.Permanent, Err: errors.New(msg), Warnings: []journal.Warning{{
		Code: journal.WarningExternalIDConflict, Message: msg, Refs: refs, Numbers: numbers, At: now.UTC(),
	}}}
}

func article(what string) string {
	if strings.ContainsRune("aeiou", rune(what[0])) {
		return "an"
	}
	return "a"
}

// FoundIn1C picks the earliest of the documents 1C holds for one external id (what
// names them: "order", "return") and warns about any others: they are duplicates
// that were made outside this operation.
func FoundIn1C(what, extID string, orders []onec.Order, note string, now time.Time) (*journal.Result, []journal.Warning) {
	sorted := sortFound(orders)
	pick := sorted[0]
	res := &journal.Result{Ref: pick.Ref, Number: pick.Number, Date: pick.Date, Found: true, Note: note}
	ws := warningsFor(what, extID, sorted, now)
	for _, w := range ws {
		res.Warnings = append(res.Warnings, w.Message)
	}
	return res, ws
}

// Recovered marks a result as ordersync's own create whose answer was lost, with
// the note saying how it was found.
func Recovered(res *journal.Result, note string) {
	res.Found, res.Recovered, res.Note = false, true, note
}

// sortFound orders what 1C holds for one external id: the one to use first.
func sortFound(orders []onec.Order) []onec.Order {
	sorted := append([]onec.Order(nil), orders...)
	sort.SliceStable(sorted, func(i, j int) bool {
		a, b := sorted[i], sorted[j]
		if a.Deleted != b.Deleted {
			return !a.Deleted // an order marked for deletion is the last choice
		}
		if a.Date != b.Date {
			return a.Date < b.Date // zone-less ISO dates sort as text
		}
		if a.Number != b.Number {
			return a.Number < b.Number
		}
		return a.Ref < b.Ref
	})
	return sorted
}

// warningsFor says what is wrong with what 1C holds for one external id (sorted by
// sortFound): two or more orders are a duplicate, naming every ref and number; the
// order in use marked for deletion is a warning too.
func warningsFor(what, extID string, sorted []onec.Order, now time.Time) []journal.Warning {
	if len(sorted) == 0 {
		return nil
	}
	pick := sorted[0]
	var ws []journal.Warning
	if len(sorted) > 1 {
		refs := make([]string, len(sorted))
		numbers := make([]string, len(sorted))
		var others []string
		for i, o := range sorted {
			refs[i], numbers[i] = o.Ref, o.Number
			if i > 0 {
				others = append(others, fmt.Sprintf("%s (№ %s, %s)", o.Ref, o.Number, o.Date))
			}
		}
		ws = append(ws, journal.Warning{
			Code: journal.WarningDuplicateIn1C,
			Message: fmt.Sprintf("1C holds %d %ss with external id %s: using the earliest, %s (№ %s); duplicates: %s",
				len(sorted), what, extID, pick.Ref, pick.Number, strings.Join(others, ", ")),
			Refs: refs, Numbers: numbers, At: now.UTC(),
		})
	}
	if pick.Deleted {
		ws = append(ws, journal.Warning{
			Code:    journal.WarningDeletedIn1C,
			Message: fmt.Sprintf("the %s %s (№ %s) is marked for deletion in 1C", what, pick.Ref, pick.Number),
			Refs:    []string{pick.Ref}, Numbers: []string{pick.Number}, At: now.UTC(),
		})
	}
	return ws
}

// mergeWarnings adds to old the warnings of add it does not hold yet (same code and
// refs), and returns nil when there is nothing new.
func mergeWarnings(old, add []journal.Warning) []journal.Warning {
	merged := append([]journal.Warning{}, old...)
	for _, w := range add {
		if !journal.HasWarning(merged, w.Code, w.Refs) {
			merged = append(merged, w)
		}
	}
	if len(merged) == len(old) {
		return nil
	}
	return merged
}

// duplicateEvent is what a newly found duplicate tells the world:
// order.duplicate_in_1c, naming every ref and number. ok is false when ws holds no
// duplicate.
func duplicateEvent(op journal.Operation, ws []journal.Warning, now time.Time) (outbox.Event, bool) {
	for _, w := range ws {
		if w.Code != journal.WarningDuplicateIn1C {
			continue
		}
		data, _ := json.Marshal(struct {
			Key        string   `json:"key"`
			Source     string   `json:"source"`
			ExternalID string   `json:"external_id"`
			Message    string   `json:"message"`
			Refs       []string `json:"refs"`
			Numbers    []string `json:"numbers"`
		}{op.Key, op.Source, op.ExternalID, w.Message, w.Refs, w.Numbers})
		return outbox.Event{
			Type:          outbox.OrderDuplicateIn1C,
			AggregateType: "order",
			AggregateID:   order.AggregateOfKey(op.Key),
			Data:          data,
			OccurredAt:    now,
		}, true
	}
	return outbox.Event{}, false
}

// MappingRefused is the verdict on a document whose account has no 1C mapping:
// nothing is sent to 1C, and the operation waits, as a configuration failure
// naming the key to set, for the operator (worker.give_up_after).
func MappingRefused(err error) Verdict {
	return Verdict{Class: onec.Configuration, Err: fmt.Errorf("not sent to 1C: %w", err)}
}

// decodeOrder reads a journal payload back into the canonical order.
func decodeOrder(payload []byte) (order.Order, error) {
	var o order.Order
	if err := json.Unmarshal(payload, &o); err != nil {
		return o, err
	}
	return o, o.Validate()
}

// ToCreateOrder maps a canonical order to contract v1's CreateOrder: 1C's zone-less
// date in loc, each line's exact amount, and the exact total.
func ToCreateOrder(o order.Order, loc *time.Location) onec.CreateOrder {
	lines := make([]onec.Line, len(o.Lines))
	for i, l := range o.Lines {
		lines[i] = onec.Line{SKU: l.SKU, Name: l.Name, Quantity: l.Quantity, Price: l.Price, Amount: l.Amount()}
	}
	return onec.CreateOrder{
		ExternalID: o.OneCExternalID(),
		Source:     o.Source,
		Number:     o.EffectiveNumber(),
		Date:       o.CreatedAt.In(loc).Format(onecDateLayout),
		Customer:   onec.Customer(o.Customer),
		Warehouse:  o.Warehouse,
		Currency:   o.Currency,
		Lines:      lines,
		Total:      o.LinesTotal(),
		Comment:    o.Comment,
	}
}

// createdEvent is what a done create tells the world: order.created with the
// canonical order and the 1C order that holds it.
func createdEvent(op journal.Operation, res *journal.Result, now time.Time) outbox.Event {
	data, _ := json.Marshal(struct {
		Order json.RawMessage `json:"order"`
		OneC  *journal.Result `json:"onec"`
	}{op.Payload, res})
	return outbox.Event{
		Type:          outbox.OrderCreated,
		AggregateType: "order",
		AggregateID:   order.AggregateOfKey(op.Key),
		Data:          data,
		OccurredAt:    now,
	}
}

func exchangesJSON(xs []onec.Exchange) json.RawMessage {
	if len(xs) == 0 {
		return nil
	}
	b, err := json.Marshal(xs)
	if err != nil {
		return nil
	}
	return b
}
