package connectors

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"net/http"
	"sync"
	"time"

	"github.com/go-resty/resty/v2"

	"github.com/ordersync/ordersync/internal/outbox"
)

// CreatedOrder is the order an order.created event names, as a connector that
// acknowledges orders reads it ({"order": <canonical order>, "onec": {…}}).
type CreatedOrder struct {
	Source        string `json:"source"`
	ExternalID    string `json:"external_id"`
	MarketplaceID string `json:"marketplace_id"`
}

// OrderToAcknowledge reads the order of an event the connector named source
// acknowledges: ok is false for an event that is not its to act on (another type,
// another source's order). Data that does not read, or an order without an
// external id (idName says what it is to the marketplace), is a dead delivery
// named by action ("kaspi: accept").
func OrderToAcknowledge(r outbox.Record, source, action, idName string) (o CreatedOrder, ok bool, err error) {
	if r.Type != outbox.OrderCreated {
		return o, false, nil
	}
	var d struct {
		Order *CreatedOrder `json:"order"`
	}
	if err := json.Unmarshal(r.Data, &d); err != nil || d.Order == nil {
		if err == nil {
			err = errors.New(`no "order"`)
		}
		return o, false, &outbox.DeliveryError{Dead: true,
			Err: fmt.Errorf("%s: event %s: data is not {\"order\":…}: %w", action, r.EventID, err)}
	}
	if d.Order.Source != source {
		return o, false, nil
	}
	if d.Order.ExternalID == "" {
		return o, false, &outbox.DeliveryError{Dead: true,
			Err: fmt.Errorf("%s: event %s: the order has no external_id (%s)", action, r.EventID, idName)}
	}
	return *d.Order, true, nil
}

// OrderLocks serialise the acknowledgement of one order within the process (a
// relay delivering the same event twice at once acts once); its zero value is
// ready.
type OrderLocks struct {
	locks [64]sync.Mutex
}

// Of is the lock of the order id.
func (l *OrderLocks) Of(id string) *sync.Mutex {
	h := fnv.New32a()
	h.Write([]byte(id))
	return &l.locks[h.Sum32()%uint32(len(l.locks))]
}

// Permanent reports whether an HTTP status of an acknowledgement will not change
// on a retry: a 4xx other than 401/403 (credentials, fixable), 408 and 429.
func Permanent(st int) bool {
	switch st {
	case http.StatusUnauthorized, http.StatusForbidden, http.StatusRequestTimeout, http.StatusTooManyRequests:
		return false
	}
	return st >= 400 && st < 500
}

// DeliveryError classifies a failed acknowledgement call of the connector named
// connector for the relay: nil for a success; refused credentials are an
// *AuthError naming key; 429 or 503 with Retry-After an *outbox.DeliveryError with
// RetryAfter; a Permanent status a dead delivery. A transport failure or a timeout
// (for a POST, an unknown outcome) is a plain error: the next attempt reads the
// marketplace's state before it acts again.
func DeliveryError(connector, key, what string, resp *resty.Response, err error) error {
	if err != nil || resp == nil {
		return fmt.Errorf("%s: %s: %w", connector, what, err)
	}
	cerr := Check(connector, key, what, resp, nil)
	st := resp.StatusCode()
	switch {
	case cerr == nil:
		return nil
	case st == http.StatusUnauthorized || st == http.StatusForbidden:
		return cerr
	case st == http.StatusTooManyRequests || st == http.StatusServiceUnavailable:
		if d, ok := RetryAfter(resp.Header().Get("Retry-After"), time.Now()); ok {
			return &outbox.DeliveryError{Err: cerr, RetryAfter: d}
		}
		return cerr
	case Permanent(st):
		return &outbox.DeliveryError{Err: cerr, Dead: true}
	}
	return cerr
}
