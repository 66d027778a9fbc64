// Package journal owns the record of business operations and of every attempt to
// carry them out in 1C (ARCHITECTURE.md rules 1–3 and 8). It declares the types and
// the Store interface; internal/store/postgres (and later sqlite) implement it.
package journal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/ordersync/ordersync/internal/outbox"
)

// Status of an operation.
type Status string

const (
	StatusPending Status = "pending"
	StatusDone    Status = "done"
	StatusFailed  Status = "failed"
)

// Outcome of one attempt. An attempt with an empty outcome is still open: either in
// flight, or its process died; the next claim of the operation marks it interrupted.
type Outcome string

const (
	OutcomeDone        Outcome = "done"
	OutcomeRetry       Outcome = "retry"
	OutcomeFailed      Outcome = "failed"
	OutcomeInterrupted Outcome = "interrupted"
)

// Sentinel errors the stores map their driver errors to.
var (
	ErrNotFound   = errors.New("journal: operation not found")
	ErrNothingDue = errors.New("journal: no operation is due")
	ErrNotPending = errors.New("journal: operation is not pending")
	ErrBusy       = errors.New("journal: operation is locked by another worker")
)

// NotPendingError is how ClaimKey and Requeue answer ErrNotPending: it carries the
// operation as it stands (done, or failed for ClaimKey), so the caller can say what it
// found. errors.Is(err, ErrNotPending) holds for it.
type NotPendingError struct {
	Operation Operation
}

func (e *NotPendingError) Error() string {
	return fmt.Sprintf("journal: operation %s is %s, not pending", e.Operation.Key, e.Operation.Status)
}

// Is reports whether target is ErrNotPending.
func (e *NotPendingError) Is(target error) bool { return target == ErrNotPending }

// Operation is one business operation under its key.
type Operation struct {
	Key           string          `json:"key"`
	Kind          string          `json:"kind"`
	Source        string          `json:"source"`
	ExternalID    string          `json:"external_id"`
	Status        Status          `json:"status"`
	Payload       json.RawMessage `json:"payload"`
	PayloadSHA256 string          `json:"payload_sha256"`
	Result        *Result         `json:"result"`
	Attempts      int             `json:"attempts"`
	LastError     string          `json:"last_error"`
	NextAttemptAt time.Time       `json:"next_attempt_at"`
	CreatedAt     time.Time       `json:"created_at"`
	UpdatedAt     time.Time       `json:"updated_at"`
	// CancelRequested is set on a claimed create whose order has a cancel operation
	// registered (its key with :cancel for :create): the engine then never creates it.
	CancelRequested bool `json:"-"`
}

// Result is what 1C answered when the operation succeeded.
type Result struct {
	Ref    string `json:"ref"`
	Number string `json:"number"`
	Date   string `json:"date,omitempty"`
	// Found is true when 1C already held the order (a lost reply, a 409, or a
	// duplicate created outside ordersync) and nothing was created by this attempt.
	Found    bool     `json:"found,omitempty"`
	Note     string   `json:"note,omitempty"`
	Warnings []string `json:"warnings,omitempty"`
}

// Attempt is one try at an operation.
type Attempt struct {
	Attempt    int        `json:"attempt"`
	Worker     string     `json:"worker"`
	Outcome    Outcome    `json:"outcome"`
	StartedAt  time.Time  `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at"`
	Error      string     `json:"error"`
	Ref        string     `json:"ref,omitempty"`
	// Exchanges digests what was sent to and received from 1C during the attempt.
	Exchanges json.RawMessage `json:"exchanges,omitempty"`
}

// Conflict records registrations under an existing key with a different payload,
// one record per distinct payload. The saved operation is never overwritten.
type Conflict struct {
	At            time.Time       `json:"at"`      // first seen
	LastAt        time.Time       `json:"last_at"` // last seen
	Times         int             `json:"times"`   // registrations that brought this payload
	PayloadSHA256 string          `json:"payload_sha256"`
	Payload       json.RawMessage `json:"payload"`
}

// Detail is an operation with its attempts and conflicts, for `journal show`.
type Detail struct {
	Operation
	History   []Attempt  `json:"attempts_history"`
	Conflicts []Conflict `json:"conflicts"`
}

// NewOperation is what a connector, the CLI or the inbox registers.
type NewOperation struct {
	Key        string
	Kind       string
	Source     string
	ExternalID string
	Payload    json.RawMessage // canonical bytes; their SHA-256 decides duplicate vs conflict
}

// RegisterOutcome says what registration did.
type RegisterOutcome string

const (
	Registered RegisterOutcome = "registered" // a new operation was written
	Duplicate  RegisterOutcome = "duplicate"  // same key, same payload: the saved one
	Conflicted RegisterOutcome = "conflict"   // same key, other payload: recorded, nothing overwritten
)

// Registration is the answer to Register: the outcome and the saved operation.
type Registration struct {
	Outcome   RegisterOutcome
	Operation Operation
}

// Filter selects operations for `journal list`.
type Filter struct {
	Status Status
	Source string
	Since  time.Time // updated at or after
	Limit  int       // 0: the store's default (100)
}

// Finish is how an attempt ended, written together with the operation's new state.
type Finish struct {
	Status        Status          // done, pending (retry later) or failed
	Result        *Result         // when done
	Error         string          // when pending or failed
	NextAttemptAt time.Time       // when pending
	Ref           string          // 1C ref touched by the attempt, if any
	Exchanges     json.RawMessage // digests of the 1C calls
	// Messages are outbox events written in the same transaction as the verdict
	// (ARCHITECTURE.md rule 6): a result and its consequences commit together.
	Messages []outbox.Message
	// Payload, when set, replaces the operation's payload (and its SHA-256): a create
	// registered with a fetch payload keeps the order that was fetched for it.
	Payload json.RawMessage
}

// Claim is one operation claimed by one worker. In PostgreSQL it holds the row lock
// (SELECT … FOR UPDATE) in an open transaction until Finish or Release; that
// transaction does nothing else while 1C is called (ARCHITECTURE.md rule 9).
type Claim interface {
	Operation() Operation
	// Attempt is the number of this attempt; its row was committed before Claim returned.
	Attempt() int
	// Finish writes the operation's state and closes the attempt row, then commits
	// and releases the lock. It may be called once.
	Finish(ctx context.Context, f Finish) error
	// Release gives the claim up without a verdict (rolls back); the attempt row stays
	// open and the next claim marks it interrupted. Safe after Finish.
	Release(ctx context.Context) error
}

// Store is the journal's persistence.
type Store interface {
	// Register inserts the operation unless its key exists (INSERT … ON CONFLICT (key)
	// DO NOTHING); an existing key with another payload is recorded as a conflict.
	Register(ctx context.Context, op NewOperation) (Registration, error)
	Get(ctx context.Context, key string) (Operation, error)
	Show(ctx context.Context, key string) (Detail, error)
	List(ctx context.Context, f Filter) ([]Operation, error)

	// ClaimDue claims the pending operation that is due first, skipping locked rows.
	// ErrNothingDue when none is.
	ClaimDue(ctx context.Context, worker string) (Claim, error)
	// ClaimKey claims one operation by key, waiting for its lock (the resync path).
	// ErrNotPending (with the operation) when it is done or failed; ErrNotFound.
	ClaimKey(ctx context.Context, key, worker string) (Claim, error)
	// Requeue makes a failed or pending operation due now. A done one is left alone
	// and ErrNotPending is returned.
	Requeue(ctx context.Context, key string) (Operation, error)

	// RegisterFailed registers an operation that is failed from the start: a
	// marketplace order that could not be mapped (a missing field, an unmapped SKU).
	// It never reaches 1C; the reason is its last error. An existing key behaves as
	// in Register.
	RegisterFailed(ctx context.Context, op NewOperation, reason string) (Registration, error)
	// Revise replaces the payload of an operation that failed without ever reaching
	// 1C (no attempt was made: it failed at registration) and makes it pending again:
	// the order maps now (the SKU map was fixed). The superseded payload is kept as a
	// conflict record. Any other operation answers ErrNotRevisable.
	Revise(ctx context.Context, op NewOperation) (Operation, error)
	// Lock takes the row lock of an operation, waiting for it (bounded), in a
	// transaction of its own: a cancel uses it to settle its create first. ErrBusy
	// when the wait runs out, ErrNotFound for an unknown key.
	Lock(ctx context.Context, key string) (Locked, error)
}

// ErrNotRevisable answers Revise for an operation that reached 1C or is not failed.
var ErrNotRevisable = errors.New("journal: only an operation that failed before reaching 1C can be revised")

// Locked is an operation held under its row lock by Store.Lock.
type Locked interface {
	Operation() Operation
	// Fail marks the locked operation failed with the reason, closes any attempt a
	// stopped worker left open as interrupted (a failed operation is never claimed
	// again to do it), and commits. An operation that is not pending is left alone
	// and a *NotPendingError returned.
	Fail(ctx context.Context, reason string) error
	// Release rolls back and lets the lock go. Safe after Fail and twice.
	Release(ctx context.Context) error
}
