// Package stock owns the stock snapshots: what 1C held in a warehouse at a scheduled
// slot, and what each marketplace was told of it. A snapshot is a journal operation
// (kind stock.snapshot, key stock:<schedule>:<warehouse>:<slot>), so replicas that
// fire the same slot make one; the engine carries it out with the handler of its
// kind (subpackage snapshot), which reads GET /stock, and the stores write the
// snapshot in the transaction that marks the operation done, with one outbox event
// per marketplace that is sent stock. The package declares the types, the Store the
// stores implement, the schedules (slots computed from cron specs) and the Sender a
// connector implements to publish; the handler, the scheduler, the publishing and
// the use cases the command line and the pages share (service) live in its
// subpackages.
package stock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/shopspring/decimal"
)

// Journal terms of a snapshot operation.
const (
	KindSnapshot = "stock.snapshot" // the operation's kind
	Source       = "stock"          // the operation's source
	// Manual is the schedule name of a snapshot taken by `ordersync stock snapshot`.
	Manual = "manual"
	// Refresh is the schedule name of a snapshot taken because orders were
	// registered (stock.refresh_after_order; subpackage refresh).
	Refresh = "refresh"
)

// Marketplaces that are sent stock. Kaspi pulls a feed instead (no outbox event).
const (
	Kaspi       = "kaspi"
	Ozon        = "ozon"
	Wildberries = "wildberries"
)

// Marketplaces lists the marketplaces stock may be published to, in the order
// commands show them.
var Marketplaces = []string{Kaspi, Ozon, Wildberries}

// Item is one line of a snapshot: a 1C SKU, its quantity and price, exact.
type Item struct {
	SKU      string          `json:"sku"`
	Quantity decimal.Decimal `json:"quantity"`
	Price    decimal.Decimal `json:"price"`
}

// Snapshot is what 1C held in one warehouse when a slot was taken.
type Snapshot struct {
	// Key is the journal operation's key: stock:main:WH1:2026-09-16T10:00.
	Key       string `json:"key"`
	Schedule  string `json:"schedule"`
	Warehouse string `json:"warehouse"`
	// Slot is the scheduled fire time (a manual snapshot: when it was asked for).
	Slot time.Time `json:"slot"`
	// Label is the slot as written in the key, local time in stock.timezone.
	Label string `json:"label"`
	// TakenAt is 1C's taken_at, its zone-less local time as it sent it.
	TakenAt string `json:"taken_at"`
	// CreatedAt is when the snapshot was stored (its operation became done).
	CreatedAt time.Time `json:"created_at"`
	ItemCount int       `json:"item_count"`
	// Warnings about the answer (negative quantities), one per item.
	Warnings []string `json:"warnings"`
	// Items are set when the snapshot is written (journal.Finish.Attachments) and
	// when read with Store.Items; the other reads leave them nil.
	Items []Item `json:"items,omitempty"`
}

// Payload is the payload of a snapshot operation.
type Payload struct {
	Schedule  string    `json:"schedule"`
	Warehouse string    `json:"warehouse"`
	Slot      time.Time `json:"slot"`
	Label     string    `json:"label"`
	// Publish names the marketplaces sent this snapshot (kaspi serves it in its feed).
	Publish []string `json:"publish"`
	// Until is the end of the slot's life, the schedule's next slot: a snapshot not
	// taken by then fails as too late. Zero for a manual snapshot.
	Until time.Time `json:"until,omitzero"`
}

// Outcome is what became of one item at one marketplace.
type Outcome string

const (
	// Published: the marketplace took the value.
	Published Outcome = "published"
	// Refused: the marketplace refused the item for a reason other than a rate
	// limit. It is not sent again until its value changes or the next full refresh.
	Refused Outcome = "refused"
	// Mismatch: the marketplace accepted the item but reads back another value.
	Mismatch Outcome = "mismatch"
	// Skipped: never sent (no line for the marketplace in the SKU map, no card).
	Skipped Outcome = "skipped"
	// Deferred: rate-limited; it is sent again later within the same publish.
	Deferred Outcome = "deferred"
)

// ItemState is what a marketplace was last told of one item of one warehouse.
type ItemState struct {
	Marketplace string `json:"marketplace"`
	Warehouse   string `json:"warehouse"` // the 1C warehouse
	SKU         string `json:"sku"`       // the 1C SKU
	MarketSKU   string `json:"market_sku"`
	// Value is the quantity last sent (or, skipped, that would have been).
	Value   int64   `json:"value"`
	Outcome Outcome `json:"outcome"`
	Reason  string  `json:"reason,omitempty"`
	// Warning is about the value (a fractional quantity floored), if any.
	Warning string `json:"warning,omitempty"`
	// SnapshotKey is the snapshot whose publish last handled the item.
	SnapshotKey string     `json:"snapshot"`
	SentAt      *time.Time `json:"sent_at,omitempty"`      // last sent
	PublishedAt *time.Time `json:"published_at,omitempty"` // last taken
	UpdatedAt   time.Time  `json:"updated_at"`
}

// Publish is one snapshot's publishing to one marketplace.
type Publish struct {
	SnapshotKey string `json:"snapshot"`
	Marketplace string `json:"marketplace"`
	Warehouse   string `json:"warehouse"`
	// Full: every item is sent, not only those whose value changed.
	Full       bool       `json:"full"`
	StartedAt  time.Time  `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
	// Counts of the finished publish.
	Sent       int `json:"sent"`      // items sent (each once, retries not counted)
	Published  int `json:"published"` // taken by the marketplace
	Refused    int `json:"refused"`
	Mismatched int `json:"mismatched"`
	Skipped    int `json:"skipped"`
	Unchanged  int `json:"unchanged"` // not sent: the marketplace holds the value
	// Note says why a publish ended without sending (superseded by a newer snapshot).
	Note string `json:"note,omitempty"`
	// Warnings about values (negative or fractional quantities), at most a few
	// listed; the item states carry each.
	Warnings []string `json:"warnings"`
}

// Filter selects snapshots for Store.Snapshots.
type Filter struct {
	Warehouse string
	Schedule  string
	Limit     int // 0: 100
}

// PublishFilter selects publishes for Store.Publishes.
type PublishFilter struct {
	Marketplace string
	Warehouse   string
	// Latest keeps only the newest publish of each marketplace and warehouse.
	Latest bool
	Limit  int // 0: 100
}

// ErrNoSnapshot answers a read for a snapshot that is not stored.
var ErrNoSnapshot = errors.New("stock: no such snapshot")

// Store is the stock snapshots' persistence. Snapshots are written by the journal
// (a *Snapshot in journal.Finish.Attachments) in the transaction that marks their
// operation done.
type Store interface {
	// Snapshot returns the snapshot stored under an operation key, without items.
	Snapshot(ctx context.Context, key string) (Snapshot, error)
	// Latest returns the newest snapshot of warehouse (the latest slot, then the
	// latest stored) whose slot is at or before at; zero at: the newest of all.
	Latest(ctx context.Context, warehouse string, at time.Time) (Snapshot, error)
	// Snapshots lists snapshots, newest first, without items.
	Snapshots(ctx context.Context, f Filter) ([]Snapshot, error)
	// Items returns a snapshot's items sorted by SKU.
	Items(ctx context.Context, key string) ([]Item, error)

	// States returns what marketplace was last told of warehouse's items, by 1C SKU.
	States(ctx context.Context, marketplace, warehouse string) (map[string]ItemState, error)
	// RecordStates writes item states (insert or replace by marketplace,
	// warehouse and SKU), in one transaction.
	RecordStates(ctx context.Context, states []ItemState) error
	// LastSent is the latest SentAt of any item at marketplace, zero when none.
	LastSent(ctx context.Context, marketplace string) (time.Time, error)
	// StartPublish records a publish unless one of the snapshot and marketplace is
	// recorded, and returns the recorded one: a resumed publish keeps its Full and
	// StartedAt.
	StartPublish(ctx context.Context, p Publish) (Publish, error)
	// FinishPublish writes a publish's counts, note, warnings and FinishedAt.
	FinishPublish(ctx context.Context, p Publish) error
	// LastFull is when the latest full publish of warehouse to marketplace
	// finished, zero when none has.
	LastFull(ctx context.Context, marketplace, warehouse string) (time.Time, error)
	// Publishes lists publishes, newest first.
	Publishes(ctx context.Context, f PublishFilter) ([]Publish, error)
	// Problems lists marketplace's items that are refused, mismatched or skipped,
	// newest first, at most limit (0: 100); marketplace "" is every marketplace.
	Problems(ctx context.Context, marketplace string, limit int) ([]ItemState, error)
	// Prune deletes at most limit snapshots stored before the given time, with
	// their items and publishes, oldest first, and returns how many. It never
	// deletes the newest snapshot of a warehouse (the Kaspi feed serves it) nor one
	// whose publish has not finished.
	Prune(ctx context.Context, before time.Time, limit int) (int, error)

	// ScheduleRuns reads the journal's snapshot operations of schedule and
	// warehouse (source stock, external id <schedule>:<warehouse>, as the scheduler
	// registers them): how many are pending, and the newest failed one.
	ScheduleRuns(ctx context.Context, schedule, warehouse string) (ScheduleRuns, error)
}

// ScheduleRuns is what Store.ScheduleRuns reads of one schedule's snapshots of one
// warehouse.
type ScheduleRuns struct {
	Pending int // operations pending
	// LastFailed is the key and LastError the last error of the newest failed
	// operation (updated_at descending, then key, as journal.Store.List orders
	// them); both "" when none failed.
	LastFailed, LastError string
}

// Update is one item as a marketplace is sent it.
type Update struct {
	SKU       string // the 1C SKU
	MarketSKU string // the marketplace's: Ozon's offer_id, Wildberries' vendor code
	Amount    int64  // the quantity published
}

// Result is what the marketplace made of one Update.
type Result struct {
	SKU     string // the 1C SKU of the update
	Outcome Outcome
	Reason  string // for any outcome but Published
	// RetryAfter: for Deferred, wait at least this before sending it again.
	RetryAfter time.Duration
}

// Sender is what a connector implements to publish stock. It holds its own rate
// limiter (a request never exceeds the marketplace's rate) and its warehouse map.
type Sender interface {
	Marketplace() string // ozon, wildberries
	// BatchSize is the most items one request carries.
	BatchSize() int
	// MinResend is how soon the same item may be sent again (Ozon: 30s); 0: at once.
	MinResend() time.Duration
	// MaxAmount is the largest quantity the marketplace takes (Wildberries:
	// 100000); a larger one is sent as that with a warning. 0: no limit.
	MaxAmount() int64
	// Timeout is how long one Send may take, its rate limiter's wait included.
	Timeout() time.Duration
	// Warehouse is the marketplace's id for a 1C warehouse; false when the
	// connector has none configured.
	Warehouse(warehouse string) (string, bool)
	// Send sends one batch (at most BatchSize) of one warehouse and returns a
	// result per update. An error fails the whole batch: an *outbox.DeliveryError
	// with RetryAfter asks for the batch to be sent again then.
	Send(ctx context.Context, warehouse string, batch []Update) ([]Result, error)
}

// Reader is what a sender that can read a marketplace's stock back implements
// (optional): the quantity the marketplace holds of each of a warehouse's market
// SKUs asked for, those it does not know left out.
type Reader interface {
	ReadStock(ctx context.Context, warehouse string, marketSKUs []string) (map[string]int64, error)
}

// Amount is the quantity a marketplace is sent for q: negative quantities as 0,
// fractional ones floored, above max (when max > 0) capped; the warning says what
// was changed, "" when nothing was.
func Amount(q decimal.Decimal, max int64) (int64, string) {
	switch {
	case q.IsNegative():
		return 0, fmt.Sprintf("negative quantity %s published as 0", q.String())
	}
	f := q.Floor()
	warning := ""
	if !f.Equal(q) {
		warning = fmt.Sprintf("fractional quantity %s floored to %s", q.String(), f.String())
	}
	if max > 0 && f.GreaterThan(decimal.NewFromInt(max)) {
		return max, fmt.Sprintf("quantity %s above the marketplace's limit, published as %d", q.String(), max)
	}
	if !f.IsInteger() || f.GreaterThan(decimal.NewFromInt(1<<53)) {
		return 1 << 53, fmt.Sprintf("quantity %s too large, published as %d", q.String(), int64(1<<53))
	}
	return f.IntPart(), warning
}

// Destination is the outbox destination of a marketplace's stock publishing:
// ozon-stock, wildberries-stock.
func Destination(marketplace string) string { return marketplace + "-stock" }

// Lane is the outbox aggregate of a marketplace's stock: one lane per marketplace,
// so that its publishes, whatever the warehouse, go one at a time across replicas
// and the marketplace's rate limit holds.
func Lane(marketplace string) string { return Source + ":" + marketplace }

// EventData is the data of a stock.snapshot event: which snapshot to publish.
type EventData struct {
	Snapshot  string `json:"snapshot"`
	Warehouse string `json:"warehouse"`
}

// Pushed reports whether a marketplace is sent stock through the outbox (Kaspi
// pulls its feed instead).
func Pushed(marketplace string) bool { return marketplace != Kaspi }
