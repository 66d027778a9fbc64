package uzum

import (
	"context"
	"fmt"
	"net/http"
	"slices"

	"github.com/ordersync/ordersync/connectors"
	"github.com/ordersync/ordersync/internal/outbox"
)

// Publisher returns the outbox destination that confirms orders at Uzum: for an
// order.created event of an Uzum order, POST /v1/fbs/order/{orderId}/confirm.
// Other events and other sources' orders (another Uzum account's among them) are
// acknowledged as they are.
//
// Uzum takes no idempotency key, so the call is guarded: the order's status is read
// first and the POST is skipped when the order is confirmed already (or has moved
// past that, or was cancelled). A POST Uzum refuses is judged by reading the status
// again: an order confirmed meanwhile is a success. A relay that delivers the same
// event twice therefore confirms the order once.
//
// Errors: 429 or 503 with Retry-After is an *outbox.DeliveryError with RetryAfter;
// refused credentials are a *connectors.AuthError naming connectors.uzum.token; an
// answer that will never change is a DeliveryError with Dead. Any other failure is
// a plain error, and the relay tries again later, reading the status first.
func (c *Connector) Publisher() outbox.Publisher { return outbox.PublisherFunc(c.publish) }

func (c *Connector) publish(ctx context.Context, r outbox.Record) error {
	o, ok, err := connectors.OrderToAcknowledge(r, c.cfg.Source, "uzum: confirm", "the Uzum order id")
	if !ok {
		return err
	}
	id := o.ExternalID
	log := c.log.With("order_id", id, "event_id", r.EventID)

	mu := c.locks.Of(id)
	mu.Lock()
	defer mu.Unlock()

	status, err := c.orderStatus(ctx, id)
	if err != nil {
		return err
	}
	switch {
	case slices.Contains(confirmedOrLater, status):
		log.DebugContext(ctx, "order already confirmed at Uzum", "status", status)
		return nil
	case status == StatusCanceled || status == StatusPendingCancellation:
		log.InfoContext(ctx, "order cancelled at Uzum: nothing to confirm", "status", status)
		return nil
	case status != StatusCreated:
		return fmt.Errorf("uzum: confirm order %s: unexpected status %q", id, status)
	}
	what := "confirm order " + id
	resp, err := c.http.R().SetContext(ctx).Post(pathOrder + id + "/confirm")
	if err == nil && resp.IsSuccess() {
		log.InfoContext(ctx, "order confirmed at Uzum")
		return nil
	}
	if err == nil && connectors.Permanent(resp.StatusCode()) {
		now, rerr := c.orderStatus(ctx, id)
		switch {
		case rerr != nil:
			return fmt.Errorf("uzum: %s: refused (HTTP %d), and the status could not be read again: %w", what, resp.StatusCode(), rerr)
		case slices.Contains(confirmedOrLater, now):
			log.InfoContext(ctx, "order confirmed at Uzum meanwhile", "status", now)
			return nil
		case now == StatusCanceled || now == StatusPendingCancellation:
			log.InfoContext(ctx, "order cancelled at Uzum meanwhile: nothing to confirm", "status", now)
			return nil
		}
	}
	return connectors.DeliveryError(Name, keyToken, what, resp, err)
}

// orderStatus reads the order's status, once: the relay schedules retries.
func (c *Connector) orderStatus(ctx context.Context, id string) (string, error) {
	what := "read the status of order " + id
	resp, err := c.http.R().SetContext(ctx).Get(pathOrder + id)
	if err == nil && resp.StatusCode() == http.StatusNotFound {
		return "", &outbox.DeliveryError{Dead: true, Err: fmt.Errorf("uzum: %s: %w", what, connectors.ErrNotFound)}
	}
	if err != nil || !resp.IsSuccess() {
		return "", connectors.DeliveryError(Name, keyToken, what, resp, err)
	}
	raw, err := decodeOne(resp.Body())
	if err != nil {
		return "", fmt.Errorf("uzum: %s: %w", what, err)
	}
	status := statusOf(raw)
	if status == "" {
		return "", fmt.Errorf("uzum: %s: the order has no status", what)
	}
	return status, nil
}
