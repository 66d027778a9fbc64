package ui

import (
	"encoding/json"

	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/order"
)

// orderState is an order's state as an accountant means it, read from its create
// and its cancel together: the header of both operations' pages. It is the list's
// state (journal.StateOf), with one more: found, when 1C held the order already and
// ordersync created nothing. The catalogue words it under state_<value>.
type orderState = journal.State

// stateFound is a done create that found the order in 1C rather than making it.
const stateFound orderState = "found"

// stateOf derives the order's state from its create and its cancel; either may be
// nil (a cancel met before its create: a tombstone).
func stateOf(create, cancel *journal.Operation) orderState {
	switch {
	case cancel != nil:
		return journal.StateOf(order.KindCancel, cancel.Status, "")
	case create == nil:
		return journal.StatePending
	}
	st := journal.StateOf(order.KindCreate, create.Status, "")
	if st == journal.StateCreated && create.Result != nil && create.Result.Found {
		return stateFound
	}
	return st
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
