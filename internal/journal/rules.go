package journal

import (
	"encoding/json"
	"errors"
	"fmt"
)

// The rules of what a store may write, decided here once: a store translates them
// into its statements and wraps their errors with what it was doing ("postgres:
// register …: key is required"); it does not decide them again.

// CheckKey refuses an empty operation key (a registration, ClaimKey, Lock).
func CheckKey(key string) error {
	if key == "" {
		return errors.New("key is required")
	}
	return nil
}

// Validate refuses a new operation a store must not write (Register, RegisterFailed,
// Revise, an inbox delivery's registration): one without its key, kind or payload,
// or whose payload is not JSON.
func (op NewOperation) Validate() error {
	if err := CheckKey(op.Key); err != nil {
		return err
	}
	switch {
	case op.Kind == "":
		return errors.New("kind is required")
	case len(op.Payload) == 0:
		return errors.New("payload is required")
	case !json.Valid(op.Payload):
		return errors.New("payload is not valid JSON")
	}
	return nil
}

// ValidateFailed is Validate for an operation failed from the start
// (RegisterFailed), which also says why it failed.
func (op NewOperation) ValidateFailed(reason string) error {
	if err := op.Validate(); err != nil {
		return err
	}
	return CheckReason(reason)
}

// CheckReason refuses an empty reason: an operation is never failed without saying
// why (RegisterFailed, Locked.Fail).
func CheckReason(reason string) error {
	if reason == "" {
		return errors.New("the reason is required")
	}
	return nil
}

// CheckFail is Locked.Fail's guard on the operation it holds: only a pending one is
// failed. A done one holds its effect in 1C and a failed one keeps its reason: both
// answer *NotPendingError (ErrNotPending).
func CheckFail(op Operation) error {
	if op.Status != StatusPending {
		return &NotPendingError{Operation: op}
	}
	return nil
}

// Known reports whether s is one of the statuses.
func (s Status) Known() bool {
	switch s {
	case StatusPending, StatusDone, StatusFailed:
		return true
	}
	return false
}

// Check refuses a listing's filter no store can answer: an unknown status.
func (f Filter) Check() error {
	if f.Status != "" && !f.Status.Known() {
		return fmt.Errorf("unknown status %q (want pending, done or failed)", f.Status)
	}
	return nil
}

// Outcome is the outcome of the attempt the verdict closes: OutcomeDone for a done
// operation, OutcomeRetry for one still pending, OutcomeFailed for a failed one; ""
// for any other status, which Check refuses.
func (f Finish) Outcome() Outcome {
	switch f.Status {
	case StatusDone:
		return OutcomeDone
	case StatusPending:
		return OutcomeRetry
	case StatusFailed:
		return OutcomeFailed
	}
	return ""
}

// Check refuses a verdict a store must not write: an unknown status, exchanges or a
// payload that are not JSON. Nothing is written, and the claim is not spent, when it
// fails. (Its messages and attachments are checked by the store that writes them.)
func (f Finish) Check() error {
	switch {
	case f.Outcome() == "":
		return fmt.Errorf("unknown status %q (want done, pending or failed)", f.Status)
	case len(f.Exchanges) > 0 && !json.Valid(f.Exchanges):
		return errors.New("exchanges are not valid JSON")
	case len(f.Payload) > 0 && !json.Valid(f.Payload):
		return errors.New("payload is not valid JSON")
	}
	return nil
}

// LastError is the operation's last error once the verdict is written: the
// verdict's error, none for a done operation.
func (f Finish) LastError() string {
	if f.Status == StatusDone {
		return ""
	}
	return f.Error
}

// StoredResult is the result the verdict writes: its Result when done, nil
// otherwise (a retry or a failure keeps no result).
func (f Finish) StoredResult() *Result {
	if f.Status != StatusDone {
		return nil
	}
	return f.Result
}
