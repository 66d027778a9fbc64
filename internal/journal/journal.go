// Package journal owns the record of business operations and of every attempt to
// carry them out in 1C. It declares the types and
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

// Retry classes: why a pending operation waits (Operation.RetryClass, Attempt.Class).
const (
	ClassTransient     = "transient"     // 1C (or a source) did not run the request: safe to retry
	ClassUnknown       = "unknown"       // a POST was sent and no verdict came back
	ClassConfiguration = "configuration" // the publication or its URL is wrong: nothing is the order's fault
	ClassAuth          = "auth"          // 1C refused the credentials
	ClassWaiting       = "waiting"       // the source says the order is not ready
	ClassPermanent     = "permanent"     // refused for a reason retrying will not change
)

// Warning codes.
const (
	// WarningDuplicateIn1C: 1C holds two or more orders for the operation's external id.
	WarningDuplicateIn1C = "duplicate_in_1c"
	// WarningDeletedIn1C: the order 1C holds is marked for deletion.
	WarningDeletedIn1C = "deleted_in_1c"
	// WarningMissingIn1C: a done create's order is no longer found in 1C.
	WarningMissingIn1C = "missing_in_1c"
	// WarningExternalIDConflict: 1C's search for the operation's external id found an
	// order of another external id (one that differs only in letter case): nothing
	// was done in 1C.
	WarningExternalIDConflict = "external_id_conflict"
	// WarningCancelBeforeCreate: a cancel was recorded for an order ordersync had not
	// seen (a tombstone: the create, if it ever comes, is not made), or a create met
	// such a cancel and was not made.
	WarningCancelBeforeCreate = "cancel_before_create"
	// WarningMismatchIn1C: 1C holds the order otherwise than it was written (a read
	// back over the standard OData interface found fields cut, ignored or broken):
	// the order is not done until it matches.
	WarningMismatchIn1C = "mismatch_in_1c"
	// WarningUnmatchedSKU: a line's SKU matches no item of 1C's catalog (or several):
	// the order is not created until it does.
	WarningUnmatchedSKU = "unmatched_sku"
)

// Warning is something about a done operation that a person must look at: a
// duplicate in 1C is never silent.
type Warning struct {
	Code    string    `json:"code"`
	Message string    `json:"message"`
	Refs    []string  `json:"refs"`
	Numbers []string  `json:"numbers,omitempty"`
	At      time.Time `json:"at"`
}

// DecodeWarnings reads a stored warnings column: nil or empty is no warnings (an
// empty, non-nil slice, so JSON shows []).
func DecodeWarnings(b []byte) ([]Warning, error) {
	ws := []Warning{}
	if len(b) == 0 {
		return ws, nil
	}
	if err := json.Unmarshal(b, &ws); err != nil {
		return nil, fmt.Errorf("warnings: %w", err)
	}
	if ws == nil {
		ws = []Warning{}
	}
	return ws, nil
}

// EncodeWarnings is the stored form of ws: nil (SQL NULL) when there are none.
func EncodeWarnings(ws []Warning) ([]byte, error) {
	if len(ws) == 0 {
		return nil, nil
	}
	return json.Marshal(ws)
}

// HasWarning reports whether ws holds a warning with code and the same refs.
func HasWarning(ws []Warning, code string, refs []string) bool {
	for _, w := range ws {
		if w.Code != code || len(w.Refs) != len(refs) {
			continue
		}
		same := true
		for i := range refs {
			if w.Refs[i] != refs[i] {
				same = false
				break
			}
		}
		if same {
			return true
		}
	}
	return false
}

// Sentinel errors the stores map their driver errors to.
var (
	ErrNotFound   = errors.New("journal: operation not found")
	ErrNothingDue = errors.New("journal: no operation is due")
	ErrNotPending = errors.New("journal: operation is not pending")
	ErrBusy       = errors.New("journal: operation is locked by another worker")
	// ErrUnsettled: an earlier attempt may still be at work in 1C (a POST whose
	// outcome is unknown, younger than onec.settle_time, or an open attempt younger
	// than the call budget plus the settle time); no attempt may start before Until.
	ErrUnsettled = errors.New("journal: an earlier attempt may still be at work in 1C")
)

// UnsettledError is how ClaimKey answers ErrUnsettled: the operation, and the time
// from which an attempt may start (the operation is made due then).
// errors.Is(err, ErrUnsettled) holds for it.
type UnsettledError struct {
	Key   string
	Until time.Time
}

func (e *UnsettledError) Error() string {
	return fmt.Sprintf("journal: %s: an earlier attempt may still be at work in 1C; the next attempt waits until %s",
		e.Key, e.Until.UTC().Format(time.RFC3339))
}

// Is reports whether target is ErrUnsettled.
func (e *UnsettledError) Is(target error) bool { return target == ErrUnsettled }

// UnsettledUntil is what the stores compute for a claim: the time before which no
// attempt may start — the operation's settle_until, or takeover past the start of an
// attempt left open, whichever is later; nil when neither applies.
func UnsettledUntil(settle, openStarted *time.Time, takeover time.Duration) *time.Time {
	var until *time.Time
	if settle != nil {
		t := *settle
		until = &t
	}
	if openStarted != nil {
		t := openStarted.Add(takeover)
		if until == nil || t.After(*until) {
			until = &t
		}
	}
	return until
}

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
	// SettleUntil: no attempt starts, and no cancel concludes "never created",
	// before it: a POST an earlier attempt sent may still be being written by 1C.
	// As read by Lock it also covers an open attempt (started_at plus the takeover
	// time).
	SettleUntil *time.Time `json:"settle_until,omitempty"`
	// FirstAttemptAt is when the first attempt since registration (or the last
	// requeue) finished; worker.give_up_after counts from it.
	FirstAttemptAt *time.Time `json:"first_attempt_at,omitempty"`
	// UnknownAttempts counts the attempts whose outcome was unknown (a POST sent,
	// no verdict): worker.max_attempts bounds these only. Requeue resets it.
	UnknownAttempts int `json:"unknown_attempts"`
	// RetryClass is why a pending operation waits (ClassTransient, …), "" otherwise.
	RetryClass string `json:"retry_class,omitempty"`
	// VerifyAt: a done create that was ever in doubt is looked up in 1C once more
	// then, to find duplicates.
	VerifyAt *time.Time `json:"verify_at,omitempty"`
	// LateVerifyAt: that create is looked up once more then (its newest doubtful
	// POST plus onec.late_verify), for a 1C slower than the settle time; it becomes
	// VerifyAt when the verification before it ends.
	LateVerifyAt *time.Time `json:"late_verify_at,omitempty"`
	// Warnings a person must look at (duplicates in 1C); never null in JSON.
	Warnings []Warning `json:"warnings"`
	// OrderCreatedAt is the marketplace's own date of the order (the payload's
	// created_at; Derive), nil when the payload names none. CreatedAt is when
	// ordersync registered the operation.
	OrderCreatedAt *time.Time `json:"order_created_at,omitempty"`
	// OneCSeen is what the latest reconciliation that covered the order saw of it
	// in 1C, nil when none has.
	OneCSeen *OneCSeen `json:"onec_seen,omitempty"`

	// CancelRequested is set on a claimed create whose order has a cancel operation
	// registered (its key with :cancel for :create): the engine then never creates it.
	CancelRequested bool `json:"-"`
	// Doubted is set on a claimed operation when an earlier attempt had an unknown
	// outcome or was interrupted: once done, it is verified.
	Doubted bool `json:"-"`
	// AttemptStartedAt is, on a claimed operation, when its attempt row was
	// written: the engine's deadline for the attempt counts from it.
	AttemptStartedAt time.Time `json:"-"`
}

// Result is what 1C answered when the operation succeeded.
type Result struct {
	Ref    string `json:"ref"`
	Number string `json:"number"`
	Date   string `json:"date,omitempty"`
	// Found is true when 1C already held an order this operation had not sent (one
	// created outside ordersync, or by an earlier operation) and nothing was
	// created.
	Found bool `json:"found,omitempty"`
	// Recovered is true when ordersync created the order in an earlier attempt of
	// this operation whose answer was lost (no answer, a proxy's error, or an attempt
	// cut short), and the find that followed found it: created by ordersync, not
	// found. Found is then false.
	Recovered bool     `json:"recovered,omitempty"`
	Note      string   `json:"note,omitempty"`
	Warnings  []string `json:"warnings,omitempty"`
}

// Attempt is one try at an operation.
type Attempt struct {
	Attempt    int        `json:"attempt"`
	Worker     string     `json:"worker"`
	Outcome    Outcome    `json:"outcome"`
	StartedAt  time.Time  `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at"`
	Error      string     `json:"error"`
	// Class is the failure's class when the attempt failed (ClassTransient, …).
	Class string `json:"class,omitempty"`
	Ref   string `json:"ref,omitempty"`
	// TriggeredBy is who or what started the attempt (an Actor: "poller:kaspi",
	// "webhook:ozon", "cli:anna", "ui:anna", "bulk:cli:anna", "retry"); "" for
	// attempts made before triggers were recorded.
	TriggeredBy string `json:"triggered_by,omitempty"`
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

// Event actions: what happened to an operation besides its attempts, for its timeline.
const (
	EventRegistered = "registered" // the operation was written (Register, RegisterFailed, the inbox)
	EventRequeued   = "requeued"   // Requeue made it due now (a resync, bulk resync, a page's button)
	EventRevised    = "revised"    // Revise replaced the payload of an order that now maps
)

// Event is one entry of an operation's timeline other than an attempt: who
// registered it, who requeued it.
type Event struct {
	At     time.Time `json:"at"`
	Action string    `json:"action"`
	// Actor is ActorOf the context that did it; "" when none was given.
	Actor  string `json:"actor"`
	Detail string `json:"detail,omitempty"`
}

// Detail is an operation with its attempts, conflicts and events, for `journal show`
// and the operation's page.
type Detail struct {
	Operation
	History   []Attempt  `json:"attempts_history"`
	Conflicts []Conflict `json:"conflicts"`
	// Events, oldest first; never null in JSON.
	Events []Event `json:"events"`
}

// Actors: who or what triggers a registration, a requeue or an attempt. The stores
// record ActorOf(ctx) on the operation's events (registered, requeued) and as the
// pending trigger of its next attempt; a claimed attempt records that trigger as its
// TriggeredBy, and the operation's trigger becomes ActorRetry for the attempts after.
const (
	ActorRetry = "retry" // the engine's retry after an earlier attempt
)

// ActorPoller, ActorWebhook, ActorCLI, ActorUI and ActorBulk build the actors the
// callers put on their contexts.
func ActorPoller(source string) string  { return "poller:" + source }
func ActorWebhook(source string) string { return "webhook:" + source }
func ActorCLI(user string) string       { return "cli:" + user }
func ActorUI(user string) string        { return "ui:" + user }
func ActorBulk(actor string) string     { return "bulk:" + actor }

type actorKey struct{}

// WithActor returns ctx carrying actor: the stores record it on what they write
// under ctx (registrations, requeues).
func WithActor(ctx context.Context, actor string) context.Context {
	return context.WithValue(ctx, actorKey{}, actor)
}

// ActorOf is the actor ctx carries, "" when none.
func ActorOf(ctx context.Context) string {
	a, _ := ctx.Value(actorKey{}).(string)
	return a
}

type attemptInBackgroundKey struct{}

// WithAttemptInBackground returns ctx under which ClaimDue may return as soon as
// the operation is claimed, its attempt row still being written on another
// connection, so that the caller's reads from 1C (the find) overlap that commit:
// the caller must wait for Claim.Opened before anything that may change 1C. The
// engine claims so; any other caller gets a claim whose attempt is committed. A
// store that cannot write the row alongside ignores it.
func WithAttemptInBackground(ctx context.Context) context.Context {
	return context.WithValue(ctx, attemptInBackgroundKey{}, true)
}

// AttemptInBackground reports whether ctx was made by WithAttemptInBackground.
func AttemptInBackground(ctx context.Context) bool {
	b, _ := ctx.Value(attemptInBackgroundKey{}).(bool)
	return b
}

// ErrAttemptNotRecorded is what Claim.Opened wraps when the attempt's row could
// not be committed: the claim must be released, and nothing sent to 1C.
var ErrAttemptNotRecorded = errors.New("the attempt row could not be recorded")

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

// Filter selects operations for `journal list` and bulk resync.
type Filter struct {
	Status Status
	Source string
	Since  time.Time // updated at or after
	Limit  int       // 0: the store's default (100)
	// ErrorContains keeps the operations whose last error contains this text
	// (case-insensitive).
	ErrorContains string
	// WarningsOnly keeps the operations that carry at least one warning.
	WarningsOnly bool
	// Kind keeps the operations of this kind (order.create, …).
	Kind string
	// CreatedFrom and CreatedBefore, when set, keep the operations created in
	// [CreatedFrom, CreatedBefore).
	CreatedFrom, CreatedBefore time.Time
	// Query keeps the operations a person's search term names, in any form they
	// have at hand (see Matches): the key; the external id (512344101) or 1C's
	// external id (kaspi:512344101); the marketplace's order number; the id a fetch
	// payload names (an Ozon posting number, a deal id); the 1C number (ОС-000123)
	// or ref of the result; a customer phone (digits compared, the last ten when
	// both have ten or more, so +7 701 234-56-78 finds 87012345678).
	Query string
	// Search keeps the operations the accountant's broader search names (see
	// SearchMatches): part of a number, a key or a customer's name, a phone's
	// digits, an amount. Query, not Search, is what resolves one operation.
	Search string
	// OrderedFrom and OrderedBefore, when set, keep the operations whose order is
	// dated in [OrderedFrom, OrderedBefore): the marketplace's own date of the order,
	// or the registration time for an operation whose payload names none.
	OrderedFrom, OrderedBefore time.Time
	// Keys, when not empty, keeps the operations of these keys.
	Keys []string
	// After, when set, keeps the operations that come after it in the listing's
	// order (updated_at descending, then key): the last operation of a page, to read
	// the next page. An operation updated meanwhile moves to the front and is not
	// listed again.
	After *Operation
}

// Finish is how an attempt ended, written together with the operation's new state.
type Finish struct {
	Status        Status          // done, pending (retry later) or failed
	Result        *Result         // when done
	Error         string          // when pending or failed
	NextAttemptAt time.Time       // when pending
	Ref           string          // 1C ref touched by the attempt, if any
	Exchanges     json.RawMessage // digests of the 1C calls
	// Messages are outbox events written in the same transaction as the verdict: a
	// result and its consequences commit together.
	Messages []outbox.Message
	// Payload, when set, replaces the operation's payload (and its SHA-256): a create
	// registered with a fetch payload keeps the order that was fetched for it.
	Payload json.RawMessage
	// Class is the failure's class (ClassTransient, ClassUnknown, …), written on the
	// attempt row and, when pending, as the operation's RetryClass.
	Class string
	// SettleUntil, when set, becomes the operation's SettleUntil if later than the
	// one it has: an unknown outcome's POST time plus onec.settle_time.
	SettleUntil time.Time
	// VerifyAt, when set on a done create, schedules its verification find.
	VerifyAt time.Time
	// LateVerifyAt, when set on a done create, schedules a second verification,
	// after the first (FinishVerification moves it to VerifyAt).
	LateVerifyAt time.Time
	// FirstAttemptAt is kept as the operation's FirstAttemptAt unless it has one.
	FirstAttemptAt time.Time
	// Warnings, when not nil, replace the operation's warnings (the caller holds the
	// lock, so it read the current ones).
	Warnings []Warning
	// Attachments are what an operation's kind keeps beside the operation when it
	// is done, written in the verdict's transaction with its messages, so that a
	// result and what was made of it commit together (a stock.snapshot operation:
	// the *stock.Snapshot taken, items and all, under the operation's key). The
	// journal does not know their types: a store writes those it knows and refuses
	// any other with an error before anything is written, whatever the status. On a
	// verdict that is not done, nothing of them is written.
	Attachments []any
}

// Claim is one operation claimed by one worker. A claim never takes over an attempt
// that may still be at work in 1C: an operation whose SettleUntil is ahead, or whose
// open attempt is younger than the store's takeover time (the call budget plus
// onec.settle_time), is made due then and not claimed (ClaimKey: *UnsettledError).
// In PostgreSQL it holds the row lock
// (SELECT … FOR UPDATE) in an open transaction until Finish or Release; that
// transaction does nothing else while 1C is called.
//
// The attempt's row is committed before the claim is returned, unless the claim was
// asked for under WithAttemptInBackground: then it may still be on its way, and
// Opened waits for it.
type Claim interface {
	Operation() Operation
	// Attempt is the number of this attempt.
	Attempt() int
	// Opened waits until the attempt's row is committed and says whether it could
	// be (ErrAttemptNotRecorded when not; ctx's error when ctx ends first). Nothing
	// that may change 1C is sent before it has answered nil. Finish and Release wait
	// for the row themselves.
	Opened(ctx context.Context) error
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
	// Totals groups every operation f keeps (f.After and f.Limit aside) by kind,
	// status, the status of its cancel operation and currency, with their count and
	// the sum of their totals (Derive): the list's totals for a whole period.
	Totals(ctx context.Context, f Filter) ([]TotalGroup, error)
	OneCRecorder

	// ClaimDue claims the pending operation that is due first, skipping locked rows.
	// ErrNothingDue when none is.
	ClaimDue(ctx context.Context, worker string) (Claim, error)
	// ClaimKey claims one operation by key, waiting for its lock (the resync path).
	// ErrNotPending (with the operation) when it is done or failed; ErrNotFound.
	ClaimKey(ctx context.Context, key, worker string) (Claim, error)
	// Requeue makes a failed or pending operation due now, with a fresh give-up
	// clock and unknown-attempt count. A done one is left alone and ErrNotPending is
	// returned.
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
	// when the wait runs out, ErrNotFound for an unknown key. The operation's
	// SettleUntil also covers an attempt left open (its start plus the takeover time).
	Lock(ctx context.Context, key string) (Locked, error)

	// ApplyWakes applies the wakes recorded while claims held their operations and
	// not yet applied by those claims' Finish (a wake that committed just after it):
	// an operation not done is made pending and due now. Returns how many.
	ApplyWakes(ctx context.Context) (int, error)
	// WakeWaiting makes every pending operation that waits on a transient,
	// configuration or authentication failure due now (1C answers again) and
	// returns how many it woke. Claims still honour SettleUntil.
	WakeWaiting(ctx context.Context) (int, error)
	// ClaimVerification takes the done operation whose verification is due first
	// and leases it (its VerifyAt moves lease ahead), so no other replica verifies it
	// meanwhile; no lock is held. ErrNothingDue when none is.
	ClaimVerification(ctx context.Context, lease time.Duration) (Operation, error)
	// FinishVerification ends the verification due: the operation's VerifyAt becomes
	// its LateVerifyAt (and that is cleared), so a late verification still to come is
	// then due; it replaces the warnings with warnings when not nil, and enqueues
	// messages, in one transaction.
	FinishVerification(ctx context.Context, key string, warnings []Warning, messages []outbox.Message) error
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
