package engine

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/onec"
	"github.com/ordersync/ordersync/internal/order"
	"github.com/ordersync/ordersync/internal/outbox"
)

// Handler carries out the operations of one kind (journal.Operation.Kind) in 1C.
// The engine claims an operation, calls the handler of its kind while the claim holds
// the operation's row lock, applies the retry policy to the Verdict it returns, and
// writes the verdict with its messages and attachments in the claim's one
// transaction. A handler writes nothing of the operation itself: what must commit
// with the verdict it returns in it.
//
// The engine carries out order.create and order.cancel itself; a feature registers
// the handler of its own kind in Config.Handlers (the stock snapshots:
// internal/stock/snapshot; the returns: internal/returns). A handler that finds
// or creates a document in 1C follows the orders' rules with FoundIn1C,
// Recovered, SentAt, AnsweredAfterPost and Failed.
type Handler interface {
	CarryOut(ctx context.Context, c Call) Verdict
}

// Verifier is a Handler whose done operations are verified as an order's create
// is: once an operation that was ever in doubt (a lost reply, an interrupted
// attempt) is done, the engine asks 1C again when its doubtful POST has settled, and
// once more onec.late_verify after it, so that a duplicate or a document gone from
// 1C is recorded as a warning, never silent.
type Verifier interface {
	Handler
	// Find asks 1C, through client, for what op made, by its external id: the
	// noun the warnings name it by ("return"), the external id, and the documents
	// 1C holds with that id exactly.
	Find(ctx context.Context, client onec.Client, op journal.Operation) (what, extID string, found []onec.Order, err error)
}

// HandlerFunc is a func as a Handler.
type HandlerFunc func(ctx context.Context, c Call) Verdict

// CarryOut calls f.
func (f HandlerFunc) CarryOut(ctx context.Context, c Call) Verdict { return f(ctx, c) }

// Call is one claimed attempt as its handler is given it. Its context is bounded by
// the attempt's call budget (CallBudget of onec.timeout, counted from the attempt's
// start) and records the 1C exchanges on the attempt.
type Call struct {
	Op journal.Operation
	// OneC is the engine's 1C client: what it answers and how it fails counts
	// toward the engine's view of 1C (a failing endpoint is pinged, a configuration
	// failure is remembered for its endpoint), as every call of the engine's does.
	// Its calls that may change 1C (creates, cancels, settles) wait until the
	// attempt's row is committed, which its reads need not: a handler sends
	// everything through it.
	OneC onec.Client
	// Log names the operation's key and the attempt.
	Log *slog.Logger
	// Now is the engine's clock: the database's, on which every replica reckons.
	Now func() time.Time
	// Location is onec.timezone, the zone of 1C's zone-less dates.
	Location *time.Location
	// SettleTime is onec.settle_time: after a POST whose outcome is unknown
	// (Verdict.PostedAt), no attempt starts before it has passed.
	SettleTime time.Duration
}

// Verdict is what carrying out an operation came to, before the retry policy. A
// nil Err is done, with Result (which a done verdict must have); otherwise Class
// says what kind of failure it was: onec.Permanent fails the operation at once,
// the others are retried (see verdictFinish).
type Verdict struct {
	Result *journal.Result // set when done
	Class  onec.Class      // for failures
	Err    error
	// Ref is the 1C ref the attempt touched, if any.
	Ref string
	// Waiting: the source says the order is not ready (order.ErrNotReady); the
	// operation waits Config.WaitInterval or the next push about it, whatever its
	// attempts.
	Waiting bool
	// Payload, when set, is kept as the operation's payload (the order fetched for
	// a fetch payload).
	Payload []byte
	// PostedAt is when the POST whose outcome is unknown was sent: no attempt
	// starts before it has settled (onec.settle_time).
	PostedAt time.Time
	// RetryAt is the earliest time for the next attempt (a create still settling).
	RetryAt time.Time
	// Warnings about what 1C holds (duplicates), kept on the operation whatever
	// the verdict.
	Warnings []journal.Warning
	// Messages are the outbox messages of a done verdict, addressed (Routes): they
	// commit with it. On any other verdict they are dropped.
	Messages []outbox.Message
	// Attachments are the results of a done verdict that the stores keep beside
	// the operation, in the verdict's transaction (journal.Finish.Attachments: a
	// stock snapshot). On any other verdict they are dropped.
	Attachments []any
}

// register returns the engine's handlers by kind: its own, for the order kinds,
// and those of Config.Handlers; the error says why the engine must not run (a
// registration it refused).
func (e *Engine) register(registered map[string]Handler) (map[string]Handler, error) {
	hs := map[string]Handler{
		order.KindCreate: HandlerFunc(e.create),
		order.KindCancel: HandlerFunc(e.cancelOp),
	}
	var problems []string
	for _, kind := range slices.Sorted(maps.Keys(registered)) {
		h := registered[kind]
		switch {
		case kind == "":
			problems = append(problems, "a handler is registered for the empty kind")
		case h == nil:
			problems = append(problems, fmt.Sprintf("the handler of %s is nil", kind))
		case hs[kind] != nil:
			problems = append(problems, fmt.Sprintf("%s is carried out by the engine itself", kind))
		default:
			hs[kind] = h
		}
	}
	if len(problems) > 0 {
		return hs, fmt.Errorf("engine: Config.Handlers: %s", strings.Join(problems, "; "))
	}
	return hs, nil
}

// Kinds are the operation kinds the engine carries out, sorted.
func (e *Engine) Kinds() []string { return slices.Sorted(maps.Keys(e.kinds)) }

// verifies reports whether the done operations of kind are verified: an order's
// create, and the kinds whose handler is a Verifier.
func (e *Engine) verifies(kind string) bool {
	if kind == order.KindCreate {
		return true
	}
	_, ok := e.kinds[kind].(Verifier)
	return ok
}

// carryOut calls the handler of the operation's kind. A kind none is registered
// for fails permanently.
func (e *Engine) carryOut(ctx context.Context, log *slog.Logger, op journal.Operation) Verdict {
	h, ok := e.kinds[op.Kind]
	if !ok {
		return Verdict{Class: onec.Permanent, Err: fmt.Errorf("unknown operation kind %q (this engine carries out %s)",
			op.Kind, strings.Join(e.Kinds(), ", "))}
	}
	v := h.CarryOut(ctx, Call{Op: op, OneC: e.client, Log: log, Now: e.cfg.Now, Location: e.cfg.Location,
		SettleTime: e.cfg.SettleTime})
	if v.Err == nil && v.Result == nil {
		v.Result = &journal.Result{} // done says what was done; a handler that said nothing did nothing more
	}
	return v
}

// create is the handler of order.create: find or create, then announce
// order.created with the order as it was carried out.
func (e *Engine) create(ctx context.Context, c Call) Verdict {
	v := e.findOrCreate(ctx, c.Log, c.Op)
	if v.Err == nil {
		announced := c.Op
		if v.Payload != nil {
			announced.Payload = v.Payload // the order fetched, not the push's stub
		}
		v.Messages = e.cfg.Routes.Address(createdEvent(announced, v.Result, e.cfg.Now()))
	}
	return v
}

// cancelOp is the handler of order.cancel: cancel, then announce order.cancelled.
func (e *Engine) cancelOp(ctx context.Context, c Call) Verdict {
	v := e.cancelOrder(ctx, c.Log, c.Op)
	if v.Err == nil {
		v.Messages = e.cfg.Routes.Address(cancelEvent(c.Op, v.Result, e.cfg.Now()))
	}
	return v
}
