package yandexmarket

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/ordersync/ordersync/connectors"
	"github.com/ordersync/ordersync/internal/outbox"
)

// Publisher returns the outbox destination that acknowledges orders at Yandex
// Market: for an order.created event of this connector's order, first POST
// …/orders/{orderId}/external-id with the 1C number (Yandex prints it on labels
// and acts, takes it once and only before READY_TO_SHIP), then PUT
// …/orders/{orderId}/status to PROCESSING/READY_TO_SHIP. Other events, other
// sources' orders, and every event when Config.Acknowledge is false are
// acknowledged as they are.
//
// Neither call takes an idempotency key, so each is guarded: the order is read
// first, and a step is skipped when the order shows it done (an external id set,
// a substatus past STARTED) or moot (the order cancelled or gone past
// PROCESSING). A call Yandex refuses is judged by reading the order again: done
// meanwhile is a success. A relay that delivers the same event twice therefore
// sets the external id once and changes the status once.
//
// Errors: 420, 429 or 503 is an *outbox.DeliveryError with RetryAfter; refused
// credentials are a *connectors.AuthError naming connectors.yandex_market.api_key;
// an answer that will never change is a DeliveryError with Dead. Any other failure
// is a plain error, and the relay tries again later, reading the order first.
func (c *Connector) Publisher() outbox.Publisher { return outbox.PublisherFunc(c.publish) }

func (c *Connector) publish(ctx context.Context, r outbox.Record) error {
	o, ok, err := connectors.OrderToAcknowledge(r, c.cfg.Source, c.cfg.Source+": acknowledge", "the Yandex Market order id")
	if !ok || !c.cfg.Acknowledge {
		return err
	}
	id := cmp.Or(o.MarketplaceID, o.ExternalID)
	number := oneCNumber(r.Data)
	log := c.log.With("order_id", id, "event_id", r.EventID)

	mu := c.locks.Of(id)
	mu.Lock()
	defer mu.Unlock()

	st, err := c.orderState(ctx, id)
	if err != nil {
		return err
	}
	if st.moot() {
		log.InfoContext(ctx, "order cancelled or past processing at Yandex Market: nothing to acknowledge",
			"status", st.status, "substatus", st.substatus)
		return nil
	}
	// The external id first: Yandex refuses it once the order is READY_TO_SHIP.
	switch {
	case number == "":
		log.WarnContext(ctx, "the event has no 1C number: the external id is not set")
	case st.externalID != "":
		if st.externalID != number {
			log.WarnContext(ctx, "the order has another external id at Yandex Market", "external_id", st.externalID, "onec_number", number)
		}
	case st.substatus == SubStarted:
		if st, err = c.setExternalID(ctx, id, number); err != nil {
			return err
		}
		if st.moot() {
			return nil
		}
	}
	if st.substatus != SubStarted {
		log.DebugContext(ctx, "order already past STARTED at Yandex Market", "substatus", st.substatus)
		return nil
	}
	return c.readyToShip(ctx, id)
}

// orderState is what the publisher reads of an order.
type orderState struct {
	status, substatus, externalID string
}

// moot: there is nothing to acknowledge any more.
func (s orderState) moot() bool { return s.status != StatusProcessing }

func (c *Connector) orderState(ctx context.Context, id string) (orderState, error) {
	what := "read order " + id
	resp, err := c.http.R().SetContext(ctx).Get(c.campaignPath("/orders/" + id))
	if err == nil && resp.StatusCode() == http.StatusNotFound {
		return orderState{}, &outbox.DeliveryError{Dead: true, Err: fmt.Errorf("%s: %s: %w", c.cfg.Source, what, connectors.ErrNotFound)}
	}
	if err != nil || !resp.IsSuccess() {
		return orderState{}, connectors.DeliveryError(c.cfg.Source, keyAPIKey, what, resp, err)
	}
	raw, err := decodeOne(resp.Body())
	if err != nil {
		return orderState{}, fmt.Errorf("%s: %s: %w", c.cfg.Source, what, err)
	}
	st := orderState{status: statusOf(raw), substatus: substatusOf(raw), externalID: externalIDOf(raw)}
	if st.status == "" {
		return orderState{}, fmt.Errorf("%s: %s: the order has no status", c.cfg.Source, what)
	}
	return st, nil
}

// setExternalID posts the 1C number and returns the order's state after it.
func (c *Connector) setExternalID(ctx context.Context, id, number string) (orderState, error) {
	what := "set the external id of order " + id
	body, _ := json.Marshal(map[string]string{"externalOrderId": number})
	resp, err := c.http.R().SetContext(ctx).SetHeader("Content-Type", "application/json").SetBody(body).
		Post(c.campaignPath("/orders/" + id + "/external-id"))
	if err == nil && resp.IsSuccess() {
		c.log.InfoContext(ctx, "external id set at Yandex Market", "order_id", id)
		return orderState{status: StatusProcessing, substatus: SubStarted, externalID: number}, nil
	}
	if err == nil && connectors.Permanent(resp.StatusCode()) {
		now, rerr := c.orderState(ctx, id)
		switch {
		case rerr != nil:
			return orderState{}, fmt.Errorf("%s: %s: refused (HTTP %d), and the order could not be read again: %w",
				c.cfg.Source, what, resp.StatusCode(), rerr)
		case now.externalID != "" || now.moot() || now.substatus != SubStarted:
			return now, nil // set meanwhile, or too late to matter: go on with the status
		}
	}
	return orderState{}, connectors.DeliveryError(c.cfg.Source, keyAPIKey, what, resp, err)
}

// readyToShip moves the order from STARTED to READY_TO_SHIP.
func (c *Connector) readyToShip(ctx context.Context, id string) error {
	what := "mark order " + id + " ready to ship"
	body, _ := json.Marshal(map[string]any{"order": map[string]string{"status": StatusProcessing, "substatus": SubReadyToShip}})
	resp, err := c.http.R().SetContext(ctx).SetHeader("Content-Type", "application/json").SetBody(body).
		Put(c.campaignPath("/orders/" + id + "/status"))
	if err == nil && resp.IsSuccess() {
		c.log.InfoContext(ctx, "order marked ready to ship at Yandex Market", "order_id", id)
		return nil
	}
	if err == nil && connectors.Permanent(resp.StatusCode()) {
		now, rerr := c.orderState(ctx, id)
		switch {
		case rerr != nil:
			return fmt.Errorf("%s: %s: refused (HTTP %d), and the order could not be read again: %w",
				c.cfg.Source, what, resp.StatusCode(), rerr)
		case now.moot() || now.substatus != SubStarted:
			return nil
		}
	}
	return connectors.DeliveryError(c.cfg.Source, keyAPIKey, what, resp, err)
}

// oneCNumber is the 1C order number of an order.created event, "" when absent.
func oneCNumber(data []byte) string {
	var d struct {
		OneC *struct {
			Number string `json:"number"`
		} `json:"onec"`
	}
	if json.Unmarshal(data, &d) != nil || d.OneC == nil {
		return ""
	}
	return d.OneC.Number
}
