package inbox

import (
	"errors"
	"fmt"
)

// CheckReceive refuses a delivery a store must not receive (Store.Receive): one
// without its source or event id, an answer whose status is not an HTTP status, a
// registration that is no valid new operation (journal.NewOperation.Validate), or
// one key registered twice. Nothing is stored when it fails; a store wraps the error
// with the delivery it was receiving.
func CheckReceive(ev Event, regs []Registration, answer Answer) error {
	switch {
	case ev.Source == "":
		return errors.New("the source is required")
	case ev.ID == "":
		return errors.New("the event id is required")
	case answer.Status < 100 || answer.Status > 599:
		return fmt.Errorf("answer status %d is not an HTTP status", answer.Status)
	}
	seen := make(map[string]bool, len(regs))
	for i, r := range regs {
		if err := r.Op.Validate(); err != nil {
			return fmt.Errorf("registration %d (%q): %w", i+1, r.Op.Key, err)
		}
		if seen[r.Op.Key] {
			return fmt.Errorf("registration %d: key %q appears twice", i+1, r.Op.Key)
		}
		seen[r.Op.Key] = true
	}
	return nil
}

// Check refuses a listing's filter no store can answer: a status other than
// Processed, the only one an event is stored with.
func (f Filter) Check() error {
	if f.Status != "" && f.Status != string(Processed) {
		return fmt.Errorf("unknown status %q (stored events are %s)", f.Status, Processed)
	}
	return nil
}
