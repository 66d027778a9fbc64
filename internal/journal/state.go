package journal

import (
	"context"
	"strings"

	"github.com/ordersync/ordersync/internal/order"
)

// State is an order's state as an accountant means it, read off its create operation
// and its cancel operation together: a cancelled order's create is done, and it is
// still cancelled. One column of the list, and the head of an operation's page.
type State string

const (
	StateCreated       State = "created"        // the create is done: 1C holds the order (created, or found there)
	StatePending       State = "pending"        // the create waits to be made
	StateFailed        State = "failed"         // the create failed
	StateCancelled     State = "cancelled"      // the cancel is done: cancelled in 1C (or never created)
	StateCancelPending State = "cancel_pending" // a cancel is registered and not done yet
	StateCancelFailed  State = "cancel_failed"  // the cancel failed: 1C's order may still be live
	StateDone          State = "done"           // any other operation, done
)

// States lists them in the order the list's totals show them.
var States = []State{StateCreated, StatePending, StateFailed, StateCancelled, StateCancelPending, StateCancelFailed, StateDone}

// StateOf is the state of an operation of kind in status, whose cancel operation
// is in cancel ("" when it has none; only an order's create has one). A cancel
// operation's own state is the cancel's.
func StateOf(kind string, status Status, cancel Status) State {
	switch {
	case strings.HasSuffix(kind, ".cancel"):
		return cancelState(status)
	case cancel != "":
		return cancelState(cancel)
	}
	switch status {
	case StatusPending:
		return StatePending
	case StatusFailed:
		return StateFailed
	}
	if !strings.HasSuffix(kind, ".create") {
		return StateDone
	}
	return StateCreated
}

func cancelState(s Status) State {
	switch s {
	case StatusDone:
		return StateCancelled
	case StatusFailed:
		return StateCancelFailed
	}
	return StateCancelPending
}

// Lister lists operations (a Store does).
type Lister interface {
	List(ctx context.Context, f Filter) ([]Operation, error)
}

// CancelsOf reads, in one listing, the status of the cancel operation of each
// order create in ops, by the cancel's key: the third argument of StateOf for each.
// A create with no cancel has none in the map.
func CancelsOf(ctx context.Context, l Lister, ops []Operation) (map[string]Status, error) {
	var keys []string
	for _, op := range ops {
		if k := order.CancelKeyOf(op.Key); k != "" && op.Kind == order.KindCreate {
			keys = append(keys, k)
		}
	}
	out := map[string]Status{}
	if len(keys) == 0 {
		return out, nil
	}
	found, err := l.List(ctx, Filter{Keys: keys, Limit: len(keys)})
	if err != nil {
		return nil, err
	}
	for _, c := range found {
		out[c.Key] = c.Status
	}
	return out, nil
}

// OrderStateOf is op's state with its cancel's status looked up in cancels (from
// CancelsOf).
func OrderStateOf(op Operation, cancels map[string]Status) State {
	return StateOf(op.Kind, op.Status, cancels[order.CancelKeyOf(op.Key)])
}
