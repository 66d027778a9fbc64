// Package connectors is the home of the marketplace connectors, one subpackage each
// (kaspi, ozon, wildberries). A connector lists its marketplace's orders, maps them to
// the canonical order of internal/order, and acknowledges them once 1C holds them;
// it never talks to 1C itself. This package holds what they share: the Marketplace
// interface, the Poller that turns listings into journal operations with a cursor
// and an overlap window, the SKU map, and an HTTP client with rate limits.
package connectors

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/ordersync/ordersync/internal/order"
)

// Item is one marketplace order as a connector read it.
type Item struct {
	// ID is the marketplace's id of the order as it appears in keys (Kaspi: the
	// order code; Ozon: the posting number; Wildberries: the order id). Empty when
	// even the id could not be read: the item is then logged and counted only.
	ID string
	// Entity names the thing in keys: "order", or "posting" for Ozon.
	Entity string
	// Order is the mapped canonical order, SKUs still the marketplace's (the poller
	// applies the SKU map). Nil when Err is set.
	Order *order.Order
	// Cancelled says the marketplace cancelled the order: the poller registers its
	// cancel operation (and, when the order was mapped, its create too).
	Cancelled    bool
	CancelReason string
	// Err says why the order cannot be created, naming the field: it is recorded as
	// a failed operation with this reason.
	Err error
	// Raw is the marketplace's JSON of the order, kept with a failure.
	Raw json.RawMessage
	// UpdatedAt is when the marketplace last changed the order, if it says.
	UpdatedAt time.Time
}

// CreateKey is the journal key of creating the item's order: kaspi:order:<code>:create.
func (it Item) CreateKey(source string) string {
	return order.Key(source, it.entity(), it.ID, "create")
}

// CancelKey is the journal key of cancelling it: kaspi:order:<code>:cancel.
func (it Item) CancelKey(source string) string {
	return order.Key(source, it.entity(), it.ID, "cancel")
}

func (it Item) entity() string {
	if it.Entity == "" {
		return "order"
	}
	return it.Entity
}

// Marketplace is what each connector implements for the poller.
type Marketplace interface {
	// Name is the connector's name and the orders' source: kaspi, ozon, wildberries.
	Name() string
	// List calls fn with every page of orders created or changed in [from, to),
	// splitting the window where the marketplace limits it and following
	// pagination. A bad order is an Item with Err, never an error of the listing; a
	// listing error (HTTP, an unreadable page, authentication) ends it.
	List(ctx context.Context, from, to time.Time, fn func(page []Item) error) error
	// Get fetches one order fresh, by the id used in its keys (the operator's
	// `ordersync resync <connector> <id>`).
	Get(ctx context.Context, id string) (Item, error)
}

// AuthError is a marketplace refusing the credentials: the connector stops with a
// message naming the configuration key, and the others go on.
type AuthError struct {
	Connector string
	Key       string // the configuration key of the credential, e.g. connectors.kaspi.token
	Status    int
	Err       error
}

func (e *AuthError) Error() string {
	msg := fmt.Sprintf("%s: the marketplace refused the credentials (HTTP %d): check %s", e.Connector, e.Status, e.Key)
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *AuthError) Unwrap() error { return e.Err }

// ErrNotFound is Get's answer for an order the marketplace does not know. It is
// order.ErrNoSuchOrder, so the engine's fetchers fail such a create at once.
var ErrNotFound = order.ErrNoSuchOrder

// CancelPayload is the payload of a cancel operation.
type CancelPayload = order.Cancel

// MapSafely calls mapOrder on raw with a panic recovered: the order becomes an
// Item with Err, named by idOf(raw) where that can be read, and logged with its
// stack, so that the rest of the page goes on.
func MapSafely(log *slog.Logger, raw json.RawMessage, idOf func(json.RawMessage) string,
	mapOrder func(json.RawMessage) Item) (it Item) {
	defer func() {
		if v := recover(); v != nil {
			id := idOf(raw)
			if log != nil {
				log.Error("mapping an order panicked", "id", id, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			}
			it = Item{ID: id, Raw: raw, Err: &order.ValidationError{Problems: []order.FieldError{{
				Field: "(order)", Message: order.SafeText(fmt.Sprintf("internal error: mapping the order panicked: %v", v)),
			}}}}
		}
	}()
	return mapOrder(raw)
}
