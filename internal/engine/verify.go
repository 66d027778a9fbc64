package engine

import (
	"context"
	"errors"

	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/onec"
	"github.com/ordersync/ordersync/internal/order"
	"github.com/ordersync/ordersync/internal/outbox"
)

// verifyDue makes the verification find of one done create that was ever in doubt,
// if one is due, and reports whether there was one. A duplicate may be impossible
// to prevent when 1C misbehaves (a POST that went on after its 504, a second client);
// it is never silent: it is recorded as a duplicate_in_1c warning and announced by an
// order.duplicate_in_1c event.
func (e *Engine) verifyDue(callCtx, claimCtx context.Context, worker string) bool {
	op, err := e.store.ClaimVerification(claimCtx, e.cfg.VerifyLease)
	switch {
	case errors.Is(err, journal.ErrNothingDue):
		e.repeats.OK(claimCtx, e.log, msgClaimVerifyFailed)
		return false
	case err != nil:
		if claimCtx.Err() == nil {
			e.repeats.Fail(claimCtx, e.log, msgClaimVerifyFailed, err, "worker", worker)
		}
		return false
	}
	e.repeats.OK(claimCtx, e.log, msgClaimVerifyFailed)
	if err := e.Verify(callCtx, op); err != nil {
		e.log.Warn("verification of a create that was in doubt failed; it is tried again when its lease ends",
			"key", op.Key, "err", err)
	}
	return true
}

// findDone asks 1C for what the done operation made, by its external id: an
// order's create itself, another kind through its handler (Verifier).
func (e *Engine) findDone(ctx context.Context, op journal.Operation) (what, extID string, found []onec.Order, err error) {
	if v, ok := e.kinds[op.Kind].(Verifier); ok && op.Kind != order.KindCreate {
		return v.Find(ctx, e.client, op)
	}
	extID = order.OneCExternalID(op.Source, op.ExternalID)
	all, err := e.client.FindOrders(ctx, extID)
	found, _ = sameExternalID(extID, all) // another id's order is not this one's duplicate
	return "order", extID, found, err
}

// Verify asks 1C once more for a done operation's external id and records what it
// finds: a duplicate as a warning (and an event), a missing order as a warning.
func (e *Engine) Verify(ctx context.Context, op journal.Operation) error {
	ctx, cancel := context.WithTimeout(ctx, CallBudget(e.cfg.OneCTimeout))
	defer cancel()
	what, extID, found, err := e.findDone(ctx, op)
	if err != nil {
		return err
	}
	e.verified.Add(1)
	now := e.cfg.Now()
	ws := warningsFor(what, extID, sortFound(found), now)
	if len(found) == 0 {
		ws = append(ws, journal.Warning{Code: journal.WarningMissingIn1C,
			Message: "1C holds no " + what + " with external id " + extID + " although the operation is done (deleted in 1C?)",
			Refs:    []string{}, At: now.UTC()})
	}
	merged := mergeWarnings(op.Warnings, ws)
	var msgs []outbox.Message
	if merged != nil {
		if ev, ok := duplicateEvent(op, merged[len(op.Warnings):], now); ok {
			e.duplicates.Add(1)
			msgs = e.cfg.Routes.Address(ev)
		}
		for _, w := range merged[len(op.Warnings):] {
			e.log.WarnContext(ctx, "1C warning", "key", op.Key, "code", w.Code, "warning", w.Message, "refs", w.Refs)
		}
	}
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.verdictTimeout())
	defer cancel()
	return e.store.FinishVerification(fctx, op.Key, merged, msgs)
}
