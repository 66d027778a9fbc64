// Package inbox owns the webhook inbox: every event a sender pushes is stored under
// (source, event id), unique in the database, together with the journal operations it
// registers, in one transaction. A redelivery gets the saved answer and registers
// nothing; the same id with another body is a recorded conflict; a delivery racing
// one still being registered is told to retry. The HTTP handlers live in
// internal/server; the stores implement Store.
package inbox

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/ordersync/ordersync/internal/journal"
)

// Outcome of receiving one event.
type Outcome string

const (
	Processed  Outcome = "processed"   // new: stored, operations registered
	Duplicate  Outcome = "duplicate"   // same id, same body: the saved answer, nothing registered
	Conflict   Outcome = "conflict"    // same id, other body: recorded, nothing overwritten
	InProgress Outcome = "in_progress" // a concurrent delivery is registering it right now
)

// Event is one delivery as received.
type Event struct {
	Source      string // the sender: site, ozon, bitrix24, …
	ID          string // the sender's event id (webhook-id, Ozon's type+posting+time, …)
	Body        []byte // the raw bytes, as verified
	ContentType string
	ReceivedAt  time.Time
}

// Answer is the HTTP answer given to a delivery; a duplicate gets it again.
type Answer struct {
	Status      int             `json:"status"`
	ContentType string          `json:"content_type"`
	Body        json.RawMessage `json:"body"`
}

// Registration is one journal operation an event registers.
type Registration struct {
	Op journal.NewOperation
	// IfAbsent registers the operation only when its key is new; an existing one,
	// whatever its payload, counts as registered (no conflict is recorded). For a
	// fetch payload that only names the order: a poller may have registered the full
	// order under the same key already.
	IfAbsent bool
	// Wake makes an existing operation that is not done due now (a Bitrix24 deal
	// that changed: the engine looks at it again).
	Wake bool
}

// Receipt is what Receive did.
type Receipt struct {
	Outcome Outcome
	// Answer is the answer to give: the one passed in for a new event, the saved one
	// for a duplicate; unset for a conflict or in progress (the caller answers those).
	Answer Answer
	// Operations are the keys the event registered (for a duplicate: the first time).
	Operations []string
}

// Record is a stored event.
type Record struct {
	Source      string    `json:"source"`
	EventID     string    `json:"event_id"`
	BodySHA256  string    `json:"body_sha256"`
	Status      string    `json:"status"`
	ReceivedAt  time.Time `json:"received_at"`
	ContentType string    `json:"content_type"`
	Body        []byte    `json:"-"`
	Answer      Answer    `json:"answer"`
	Operations  []string  `json:"operations"`
	Conflicts   int       `json:"conflicts"`
}

// ConflictRecord is a delivery that reused an event id with another body.
type ConflictRecord struct {
	At         time.Time `json:"at"`
	BodySHA256 string    `json:"body_sha256"`
	Body       []byte    `json:"-"`
}

// Detail is a record with its body and conflicts, for `inbox show`.
type Detail struct {
	Record
	BodyText  string           `json:"body"`
	Conflicts []ConflictRecord `json:"conflicts"`
}

// Filter selects records for `inbox list`.
type Filter struct {
	Source string
	Status string
	Limit  int // 0: 100
	// After, when set, keeps the records that come after it in the listing's order
	// (received_at descending, then source, then event id): the last record of a
	// page, to read the next page.
	After *Record
}

// Looker is a Store that can answer a redelivery by reading alone, before the
// delivery's registrations are built (and, where the event id is not in the body,
// before the body is parsed).
type Looker interface {
	// Redelivered answers a delivery of a stored event whose body is the one
	// stored: ok, and the receipt Receive would give (Duplicate, the saved answer
	// and operations), having written nothing and taken no lock. ok is false for an
	// event not stored, or stored with another body: Receive decides those.
	Redelivered(ctx context.Context, ev Event) (r Receipt, ok bool, err error)
}

// ErrNotFound answers Show for an unknown event.
var ErrNotFound = errors.New("inbox: no such event")

// Store keeps the inbox.
type Store interface {
	// Receive stores the event and registers its operations in one transaction,
	// unless the event id is known: then it answers Duplicate (with the saved
	// answer and without writing anything), Conflict (recording the other body) or
	// InProgress. The database's unique (source, event id) decides, never an if.
	Receive(ctx context.Context, ev Event, regs []Registration, answer Answer) (Receipt, error)
	List(ctx context.Context, f Filter) ([]Record, error)
	Show(ctx context.Context, source, eventID string) (Detail, error)
	// ByOperation returns the stored events whose operations hold key — the
	// deliveries that brought or named the operation — newest first (received_at
	// descending, then source and event id); an empty slice when there are none.
	ByOperation(ctx context.Context, key string) ([]Record, error)
}
