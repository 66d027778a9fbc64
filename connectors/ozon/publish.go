package ozon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/ordersync/ordersync/connectors"
	"github.com/ordersync/ordersync/internal/outbox"
)

// Publisher delivers order.created records of Ozon postings to Ozon. With
// Config.Acknowledge it ships each posting (see shipOnce); without it, and for every
// other record (another source's order, order.cancelled), it does nothing and reports
// success, so a route to it never piles up events.
func (c *Connector) Publisher() outbox.Publisher { return outbox.PublisherFunc(c.publish) }

func (c *Connector) publish(ctx context.Context, r outbox.Record) error {
	if r.Type != outbox.OrderCreated {
		return nil
	}
	pn, ok := strings.CutPrefix(r.AggregateID, c.cfg.Source+":"+Entity+":")
	if !ok || pn == "" {
		return nil // not an Ozon posting
	}
	if !c.cfg.Acknowledge {
		return nil
	}
	return c.shipOnce(ctx, pn)
}

// shipOnce moves a posting from awaiting_packaging to awaiting_deliver with
// /v4/posting/fbs/ship, as one package holding every product of the posting, so
// Ozon does not split it. The call is not idempotent, so it is guarded: the posting's
// status is read first, and a posting already past that step (a previous delivery
// shipped it, even one whose answer was lost; or the seller did by hand) is left
// alone. Ship is never retried within a call: the next delivery reads the status
// again.
//
// Errors: 429 → *outbox.DeliveryError with RetryAfter; a permanent refusal (the
// posting is gone, needs data the connector does not have, or Ozon answers 4xx) →
// Dead with Ozon's reason; anything else → a plain error, retried with backoff.
func (c *Connector) shipOnce(ctx context.Context, pn string) error {
	raw, err := c.fetch(ctx, pn)
	if err != nil {
		if errors.Is(err, connectors.ErrNotFound) {
			return &outbox.DeliveryError{Err: err, Dead: true}
		}
		return deliveryError(err)
	}
	var p struct {
		Status       string          `json:"status"`
		Actions      json.RawMessage `json:"available_actions"`
		Requirements json.RawMessage `json:"requirements"`
		Products     []struct {
			SKU      json.Number `json:"sku"`
			Quantity json.Number `json:"quantity"`
		} `json:"products"`
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		return fmt.Errorf("ozon: ship posting %s: read its status: %w", pn, err)
	}
	log := c.log.With("posting_number", pn, "status", p.Status)
	switch {
	case p.Status == statusAwaitingPackaging:
	case isCancelled(p.Status) || slices.Contains(statusesAfterAssembly, p.Status):
		log.DebugContext(ctx, "posting already past packaging: not shipped again")
		return nil
	case slices.Contains(statusesBeforeAssembly, p.Status):
		return fmt.Errorf("ozon: ship posting %s: Ozon has not released it for packing yet (status %s)", pn, p.Status)
	default:
		return fmt.Errorf("ozon: ship posting %s: unknown status %q", pn, p.Status)
	}
	if reason := blockedShip(p.Actions, p.Requirements); reason != "" {
		return &outbox.DeliveryError{Dead: true,
			Err: fmt.Errorf("ozon: ship posting %s: %s; ship it in the Ozon seller cabinet", pn, reason)}
	}

	type product struct {
		ProductID int64 `json:"product_id"`
		Quantity  int64 `json:"quantity"`
	}
	var products []product
	at := map[int64]int{}
	for i, pr := range p.Products {
		sku, err1 := pr.SKU.Int64()
		qty, err2 := pr.Quantity.Int64()
		if err1 != nil || err2 != nil || sku <= 0 || qty <= 0 {
			return &outbox.DeliveryError{Dead: true,
				Err: fmt.Errorf("ozon: ship posting %s: products[%d] has no usable sku and quantity (%q, %q)", pn, i, pr.SKU, pr.Quantity)}
		}
		if j, ok := at[sku]; ok {
			products[j].Quantity += qty
			continue
		}
		at[sku] = len(products)
		products = append(products, product{ProductID: sku, Quantity: qty})
	}
	if len(products) == 0 {
		return &outbox.DeliveryError{Dead: true, Err: fmt.Errorf("ozon: ship posting %s: Ozon lists no products", pn)}
	}
	body := map[string]any{
		"posting_number": pn,
		"packages":       []map[string]any{{"products": products}},
	}
	if _, err := c.post(ctx, "/v4/posting/fbs/ship", body, false, "ship posting "+pn); err != nil {
		return deliveryError(err)
	}
	log.InfoContext(ctx, "posting shipped at Ozon: awaiting_deliver")
	return nil
}

// blockedShip says why Ozon would refuse to ship a posting as it stands, "" when
// nothing stands in the way: the posting's actions do not offer "ship", or Ozon
// wants data for some products first (customs declaration, country, marks).
func blockedShip(actions, requirements json.RawMessage) string {
	var acts []string
	if json.Unmarshal(actions, &acts) == nil && len(acts) > 0 && !slices.Contains(acts, "ship") {
		return fmt.Sprintf("Ozon does not offer to ship it now (available actions: %s)", strings.Join(acts, ", "))
	}
	var req map[string]json.RawMessage
	if json.Unmarshal(requirements, &req) != nil {
		return ""
	}
	var wants []string
	for k, v := range req {
		var skus []json.RawMessage
		if json.Unmarshal(v, &skus) == nil && len(skus) > 0 {
			wants = append(wants, k)
		}
	}
	if len(wants) == 0 {
		return ""
	}
	slices.Sort(wants)
	return "Ozon wants more data before it can be shipped (" + strings.Join(wants, ", ") + ")"
}

// deliveryError tells the relay what to do with a failed call.
func deliveryError(err error) error {
	var ae *apiError
	if !errors.As(err, &ae) {
		return err // transport, authentication (fixed by the operator, then retried)
	}
	switch {
	case ae.Status == http.StatusTooManyRequests:
		return &outbox.DeliveryError{Err: err, RetryAfter: ae.RetryAfter}
	case ae.Status == http.StatusServiceUnavailable && ae.RetryAfter > 0:
		return &outbox.DeliveryError{Err: err, RetryAfter: ae.RetryAfter}
	case ae.Status == http.StatusConflict || ae.Status == http.StatusRequestTimeout:
		return err
	case ae.Status >= 400 && ae.Status < 500:
		return &outbox.DeliveryError{Err: err, Dead: true}
	default:
		return err
	}
}
