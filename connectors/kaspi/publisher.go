package kaspi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"

	"github.com/ordersync/ordersync/connectors"
	"github.com/ordersync/ordersync/internal/outbox"
)

// Statuses in which an order needs no acceptance any more: it was accepted (by this
// connector, an earlier delivery, or the merchant in the cabinet) and may have moved on.
var acceptedOrLater = []string{StatusAcceptedByMerchant, StatusCompleted, StatusArrived,
	StatusReturned, StatusReturnRequested}

// Publisher returns the outbox destination that accepts orders at Kaspi: for an
// order.created event of a Kaspi order, it sets the order's status to
// ACCEPTED_BY_MERCHANT. Other events and other sources' orders are not its business
// and are acknowledged as they are.
//
// Kaspi takes no idempotency key, so the call is guarded, find-before-create style:
// the order's status is read first and the POST is skipped when the order is
// accepted already (or has moved past that, or was cancelled). Kaspi allows the
// change only from APPROVED_BY_BANK, so a POST refused because a concurrent delivery
// got there first is recognised by reading the status again, and is a success. A
// relay that delivers the same event twice therefore accepts the order once.
//
// Errors: 429 or 503 with Retry-After is an *outbox.DeliveryError with RetryAfter;
// refused credentials are a *connectors.AuthError naming connectors.kaspi.token;
// an answer that will never change (another 4xx, an order Kaspi does not know, an
// event that is not an order) is a DeliveryError with Dead. Any other failure is a
// plain error and the relay tries again later, reading the status first: a POST
// whose answer was lost is not repeated blindly.
func (c *Connector) Publisher() outbox.Publisher { return outbox.PublisherFunc(c.publish) }

func (c *Connector) publish(ctx context.Context, r outbox.Record) error {
	o, ok, err := connectors.OrderToAcknowledge(r, c.cfg.Source, "kaspi: accept", "the Kaspi order code")
	if !ok {
		return err
	}
	code := o.ExternalID
	log := c.log.With("code", code, "event_id", r.EventID)

	mu := c.locks.Of(code)
	mu.Lock()
	defer mu.Unlock()

	id, status, err := c.orderStatus(ctx, code)
	if err != nil {
		return err
	}
	if o.MarketplaceID != "" && o.MarketplaceID != id {
		log.WarnContext(ctx, "the order's Kaspi id differs from the one recorded; using Kaspi's",
			"recorded_id", o.MarketplaceID, "kaspi_id", id)
	}
	switch {
	case slices.Contains(acceptedOrLater, status):
		log.DebugContext(ctx, "order already accepted at Kaspi", "status", status)
		return nil
	case cancelled(status):
		log.InfoContext(ctx, "order cancelled at Kaspi: nothing to accept", "status", status)
		return nil
	case status != StatusApprovedByBank:
		return fmt.Errorf("kaspi: accept order %s: unexpected status %q", code, status)
	}

	body, _ := json.Marshal(map[string]any{"data": map[string]any{
		"type": "orders",
		"id":   id,
		"attributes": map[string]string{
			"code":   code,
			"status": StatusAcceptedByMerchant,
		},
	}})
	resp, err := c.http.R().SetContext(ctx).SetHeader("Content-Type", contentType).SetBody(body).Post(pathOrders)
	if err == nil && resp.IsSuccess() {
		log.InfoContext(ctx, "order accepted at Kaspi")
		return nil
	}
	what := "accept order " + code
	if err == nil && connectors.Permanent(resp.StatusCode()) {
		// Refused. If it is because the order is accepted already (a concurrent
		// delivery, the merchant), that is the outcome wanted.
		_, now, rerr := c.orderStatus(ctx, code)
		switch {
		case rerr != nil:
			return fmt.Errorf("kaspi: %s: refused (HTTP %d), and the status could not be read again: %w",
				what, resp.StatusCode(), rerr)
		case slices.Contains(acceptedOrLater, now):
			log.InfoContext(ctx, "order accepted at Kaspi meanwhile", "status", now)
			return nil
		case cancelled(now):
			log.InfoContext(ctx, "order cancelled at Kaspi meanwhile: nothing to accept", "status", now)
			return nil
		}
	}
	return connectors.DeliveryError(Name, keyToken, what, resp, err)
}

// orderStatus reads the order's id and status by its code
// (GET /orders?filter[orders][code]=…). It is tried once: the relay schedules retries.
func (c *Connector) orderStatus(ctx context.Context, code string) (id, status string, err error) {
	q := url.Values{paramCode: {code}, paramPage: {"0"}, paramSize: {"1"}}
	what := "read the status of order " + code
	resp, err := c.http.R().SetContext(ctx).SetQueryParamsFromValues(q).Get(pathOrders)
	if err != nil || !resp.IsSuccess() {
		return "", "", connectors.DeliveryError(Name, keyToken, what, resp, err)
	}
	pg, err := decodePage(resp.Body())
	if err != nil {
		return "", "", fmt.Errorf("kaspi: %s: %w", what, err)
	}
	for _, raw := range pg.Data {
		if codeOf(raw) != code {
			continue
		}
		o, _ := asObj(raw)
		attrs, _ := o.object("attributes")
		id, _ = o.str("id")
		status, _ = attrs.str("status")
		if id == "" || status == "" {
			return "", "", fmt.Errorf("kaspi: %s: the order has no id or status", what)
		}
		return id, status, nil
	}
	return "", "", &outbox.DeliveryError{Dead: true,
		Err: fmt.Errorf("kaspi: %s: %w", what, connectors.ErrNotFound)}
}
