package ui

import (
	"encoding/json"

	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/order"
)

// orderState is an order's state as an accountant means it, read from its create
// and its cancel together: the header of both operations' pages (and a column of
// the list). The catalogue words it under state_<value>.
type orderState string

const (
	stateCreating      orderState = "creating"       // the create is pending
	stateNotCreated    orderState = "not_created"    // the create failed: 1C holds nothing of ordersync's
	stateCreated       orderState = "created"        // ordersync created it in 1C (a lost reply included)
	stateFound         orderState = "found"          // 1C held it already; ordersync created nothing
	stateCancelPending orderState = "cancel_pending" // a cancel is registered and not yet carried out
	stateCancelFailed  orderState = "cancel_failed"  // the cancel failed: the order is live in 1C
	stateCancelled     orderState = "cancelled"      // cancelled in 1C (or before it was created)
)

// stateOf derives the order's state from its create and its cancel; either may be
// nil (a cancel met before its create: a tombstone).
func stateOf(create, cancel *journal.Operation) orderState {
	if cancel != nil {
		switch cancel.Status {
		case journal.StatusDone:
			return stateCancelled
		case journal.StatusFailed:
			return stateCancelFailed
		default:
			return stateCancelPending
		}
	}
	if create == nil {
		return stateCreating
	}
	switch create.Status {
	case journal.StatusDone:
		if create.Result != nil && create.Result.Found {
			return stateFound
		}
		return stateCreated
	case journal.StatusFailed:
		return stateNotCreated
	}
	return stateCreating
}

// cancelReason is the reason a cancel operation's payload gives, "" when none.
func cancelReason(cancel *journal.Operation) string {
	if cancel == nil {
		return ""
	}
	var c order.Cancel
	_ = json.Unmarshal(cancel.Payload, &c) // a payload that is not a cancel has no reason
	return c.Reason
}
