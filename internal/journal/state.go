package journal

import "strings"

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
