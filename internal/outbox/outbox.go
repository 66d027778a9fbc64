// Package outbox owns the transactional outbox: the
// events that tell marketplaces and other systems what happened, written in the same
// transaction as the journal's verdict, and the Relay that delivers them later, at
// least once, in order per lane.
//
// A lane is one aggregate (an order: "kaspi:order:512344101") at one destination. Its
// events carry a sequence that is unique within the lane; the relay sends only a
// lane's lowest unsent event, never two of one lane at once, and a lane stops at its
// first failure. Deliveries are leased and fenced: a claim token is checked on every
// write-back, so a relay whose lease expired cannot overwrite another's claim.
//
// The package declares the types, the Store the relay needs and the Publisher a
// destination implements; internal/store/postgres (and later sqlite) implement the
// store, with an Enqueue that takes the caller's transaction and nothing else.
package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Event types.
const (
	OrderCreated   = "order.created"
	OrderCancelled = "order.cancelled"
	// ReturnCreated: a marketplace's return is in 1C (created, or found there),
	// in the lane of the order it is based on.
	ReturnCreated = "return.created"
	StockSnapshot = "stock.snapshot"
	// OrderDuplicateIn1C: 1C holds two or more orders for one operation's external
	// id; the event names every ref and number.
	OrderDuplicateIn1C = "order.duplicate_in_1c"
)

// Event is something that happened, before it is addressed to destinations.
type Event struct {
	// ID is the consumer's dedupe key; the store assigns a UUID when empty. Each
	// destination's copy gets an id of its own.
	ID            string
	Type          string // order.created, …
	AggregateType string // "order", "stock"
	AggregateID   string // the lane within a destination, e.g. "kaspi:order:512344101"
	Data          json.RawMessage
	OccurredAt    time.Time
}

// Message is an event addressed to one destination: one outbox row.
type Message struct {
	Destination string
	Event
}

// Route subscribes a destination to an event type, optionally only for aggregates
// whose id starts with Prefix (a marketplace's acknowledgement hears only its own
// orders: "kaspi:").
type Route struct {
	Destination string
	Prefix      string
}

// Routes maps an event type to its routes.
type Routes map[string][]Route

// Add subscribes destination to the event types, for aggregates starting with prefix.
func (r Routes) Add(destination, prefix string, types ...string) {
	for _, t := range types {
		r[t] = append(r[t], Route{Destination: destination, Prefix: prefix})
	}
}

// Address returns one message per destination subscribed to the event, in the order
// the routes list them.
func (r Routes) Address(ev Event) []Message {
	var ms []Message
	for _, rt := range r[ev.Type] {
		if strings.HasPrefix(ev.AggregateID, rt.Prefix) {
			ms = append(ms, Message{Destination: rt.Destination, Event: ev})
		}
	}
	return ms
}

// Record is an outbox row.
type Record struct {
	ID            int64           `json:"id"`
	EventID       string          `json:"event_id"`
	Destination   string          `json:"destination"`
	Type          string          `json:"type"`
	AggregateType string          `json:"aggregate_type"`
	AggregateID   string          `json:"aggregate_id"`
	Sequence      int64           `json:"sequence"`
	Data          json.RawMessage `json:"data"`
	OccurredAt    time.Time       `json:"occurred_at"`
	CreatedAt     time.Time       `json:"created_at"`
	Attempts      int             `json:"attempts"` // deliveries started, including the current one
	NextAttemptAt time.Time       `json:"next_attempt_at"`
	LeaseUntil    *time.Time      `json:"lease_until,omitempty"`
	LastError     string          `json:"last_error"`
	SentAt        *time.Time      `json:"sent_at,omitempty"`
	DeadAt        *time.Time      `json:"dead_at,omitempty"`
}

// Claim is one batch of lane heads leased to one relay under one token.
type Claim struct {
	Token   string
	Records []Record
	// Completed is what the write-back the request carried (ClaimRequest.Complete)
	// changed.
	Completed Completed
}

// Completed counts the rows a write-back changed, and how many of them it marked
// sent: fewer than its results when another claim has taken some over.
type Completed struct {
	Rows, Sent int
}

// Completion is a write-back: results under the token of the claim that leased
// their events.
type Completion struct {
	Token   string
	Results []Result
}

// ClaimRequest asks for at most Limit lane heads that are due, not leased, and whose
// lanes hold nothing earlier that is unsent (a dead event blocks its lane unless its
// destination is in SkipDead). Disabled destinations are left alone; Only limits the
// claim to the destinations this relay can publish to (empty: every destination).
//
// Complete, when it holds results, is written back first, as Store.Complete writes
// it (fenced by its token), in the claim's transaction: the relay ends a round and
// begins the next in one round trip, and the claim sees the lanes those results
// advanced. When the claim fails, nothing of it is written either.
type ClaimRequest struct {
	Limit    int
	Lease    time.Duration
	SkipDead []string // destinations configured on_dead: skip
	Only     []string
	Complete Completion
}

// Result is what became of one claimed record.
type Result struct {
	ID   int64
	Sent bool
	// When not sent: the error, and either the next attempt's time or Dead.
	Error         string
	NextAttemptAt time.Time
	Dead          bool
	// Released: the relay never started the delivery (too little of its lease was
	// left), or the delivery made progress and goes on later (DeliveryError.Continue):
	// the lease is cleared and the attempt the claim counted is given back, so the
	// event is due again at once, for this relay or another — or at NextAttemptAt
	// when that is set, with Error, when set, as its last error.
	Released bool
}

// Store is the outbox persistence the relay and the operators use.
type Store interface {
	// Claim writes back req.Complete's results, if any, then leases a batch of lane
	// heads (FOR UPDATE SKIP LOCKED), with a fresh token, and counts the attempt, all
	// in one transaction. An empty batch is not an error.
	Claim(ctx context.Context, req ClaimRequest) (Claim, error)
	// Complete writes back a batch of results in one go, each only where the claim
	// token still matches; it returns how many rows it changed.
	Complete(ctx context.Context, token string, results []Result) (int, error)
	// DisableDestination records that a destination is gone (HTTP 410) and marks its
	// unsent events dead with the reason. It returns how many events died.
	DisableDestination(ctx context.Context, destination, reason string) (int, error)
	// DisabledDestinations lists the destinations disabled so far.
	DisabledDestinations(ctx context.Context) (map[string]string, error)
	// Prune deletes at most limit sent events sent before the given time.
	Prune(ctx context.Context, sentBefore time.Time, limit int) (int, error)

	// Operators.
	Status(ctx context.Context, struggling int) ([]DestinationStatus, error)
	List(ctx context.Context, f ListFilter) ([]Record, error)
	// Requeue makes dead events (by id) due again with their attempts reset, and
	// re-enables their destinations. allDead requeues every dead event.
	Requeue(ctx context.Context, ids []int64, allDead bool) (int, error)
	// Replay makes every event of an aggregate unsent again (same event ids; the
	// consumers dedupe), at every destination or only one.
	Replay(ctx context.Context, aggregateID, destination string) (int, error)
}

// Listener wakes the relay when an event is committed (PostgreSQL LISTEN/NOTIFY).
type Listener interface {
	// Listen calls wake for every notification until ctx ends; it returns an error
	// when the connection is lost, and the relay listens again after a pause.
	Listen(ctx context.Context, wake func()) error
}

// ListFilter selects records for `outbox list`.
type ListFilter struct {
	Dead        bool // only dead events
	Unsent      bool // only unsent events (dead included)
	AggregateID string
	Destination string
	Limit       int // 0: 100
	// BeforeID, when above 0, keeps the events whose id is below it (the listing is
	// newest first, by id): the last id of a page, to read the next page.
	BeforeID int64
}

// DestinationStatus is `outbox status` for one destination, straight from the table.
type DestinationStatus struct {
	Destination string        `json:"destination"`
	Pending     int           `json:"pending"`    // unsent, not dead, not in flight
	InFlight    int           `json:"in_flight"`  // leased now
	Struggling  int           `json:"struggling"` // unsent, attempts above the threshold
	Dead        int           `json:"dead"`
	Sent        int           `json:"sent"`
	Lag         time.Duration `json:"lag"` // age of the oldest unsent, not dead event
	Disabled    string        `json:"disabled,omitempty"`
}

// Publisher delivers one record to one destination. It returns nil when the
// destination has it, or an error; a *DeliveryError says more.
type Publisher interface {
	Publish(ctx context.Context, r Record) error
}

// PublisherFunc adapts a function to Publisher.
type PublisherFunc func(ctx context.Context, r Record) error

// Publish calls f.
func (f PublisherFunc) Publish(ctx context.Context, r Record) error { return f(ctx, r) }

// DeliveryError is a failed delivery with instructions for the relay.
type DeliveryError struct {
	Err error
	// RetryAfter, when set, is when the destination asked to be tried again
	// (429/503 Retry-After); it replaces the backoff.
	RetryAfter time.Duration
	// Dead gives up on this event now, whatever its attempts.
	Dead bool
	// Disable marks the destination gone (HTTP 410): this event and every other
	// unsent event of the destination die with the reason.
	Disable bool
	// Continue says the delivery made progress and must go on later (a long
	// publish cut off at its lease's end, or waiting on a marketplace's rule): the
	// attempt is not counted, the error is recorded, and the event is due again
	// after RetryAfter (at once when zero).
	Continue bool
}

func (e *DeliveryError) Error() string {
	if e.Err == nil {
		return "delivery failed"
	}
	return e.Err.Error()
}

func (e *DeliveryError) Unwrap() error { return e.Err }

// ErrNotFound is returned by operator commands for an unknown event.
var ErrNotFound = errors.New("outbox: no such event")

// Payload is the JSON body a webhook destination receives for a record: the event
// envelope the README documents, with the event id to dedupe on.
type Payload struct {
	EventID       string          `json:"event_id"`
	Type          string          `json:"type"`
	AggregateType string          `json:"aggregate_type"`
	AggregateID   string          `json:"aggregate_id"`
	Sequence      int64           `json:"sequence"`
	OccurredAt    time.Time       `json:"occurred_at"`
	Data          json.RawMessage `json:"data"`
}

// Body is the record's webhook body.
func (r Record) Body() ([]byte, error) {
	b, err := json.Marshal(Payload{
		EventID: r.EventID, Type: r.Type, AggregateType: r.AggregateType, AggregateID: r.AggregateID,
		Sequence: r.Sequence, OccurredAt: r.OccurredAt.UTC(), Data: r.Data,
	})
	if err != nil {
		return nil, fmt.Errorf("outbox: body of event %s: %w", r.EventID, err)
	}
	return b, nil
}
