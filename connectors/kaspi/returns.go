package kaspi

import (
	"context"
	"time"

	"github.com/ordersync/ordersync/connectors"
	"github.com/ordersync/ordersync/internal/order"
)

// StatusReturnAcceptedByMerchant is the status of a return the merchant accepted,
// before the goods are back (Kaspi's return flow: KASPI_DELIVERY_RETURN_REQUESTED,
// RETURN_ACCEPTED_BY_MERCHANT, RETURNED).
const StatusReturnAcceptedByMerchant = "RETURN_ACCEPTED_BY_MERCHANT"

// DefaultReturnsHorizon is how far back Config.ReturnsHorizon looks by default for
// the creation of an order that came back.
const DefaultReturnsHorizon = 45 * 24 * time.Hour

var _ connectors.ReturnLister = (*Connector)(nil)

// Returns calls fn with the orders that came back to the merchant: status RETURNED
// (the goods are with the merchant again; the return request and its acceptance
// before it are not yet a return), listed in the ARCHIVE state where Kaspi keeps
// finished orders. Kaspi filters its lists on the order's creation date only, so
// the orders created within ReturnsHorizon before the window's end are looked at,
// period by period as List does. Kaspi returns whole orders: each is one full
// return, kaspi:return:<code>:register, with the order's lines, based on
// kaspi:order:<code>:create. Kaspi gives no date of the return, so its date is the
// order's, which keeps the same return read twice a duplicate.
func (c *Connector) Returns(ctx context.Context, from, to time.Time, fn func(page []connectors.ReturnItem) error) error {
	if start := to.Add(-c.returnsHorizon()); start.Before(from) {
		from = start
	}
	l := listing{state: StateArchive, status: StatusReturned}
	emit := func(items []connectors.Item) error {
		page := make([]connectors.ReturnItem, 0, len(items))
		for _, it := range items {
			page = append(page, returnOf(it, c.cfg.Source))
		}
		return fn(page)
	}
	for _, w := range Windows(from, to) {
		if err := c.listWindowAll(ctx, l, w, emit); err != nil {
			return err
		}
	}
	return nil
}

func (c *Connector) returnsHorizon() time.Duration {
	if c.cfg.ReturnsHorizon > 0 {
		return c.cfg.ReturnsHorizon
	}
	return DefaultReturnsHorizon
}

// returnOf is the full return of a returned order as the connector mapped it.
func returnOf(it connectors.Item, source string) connectors.ReturnItem {
	ri := connectors.ReturnItem{ID: it.ID, Raw: it.Raw, Err: it.Err}
	switch {
	case ri.Err != nil:
	case it.Cancelled:
		ri.Err = invalid("attributes.status", "the order is cancelled, not returned")
	case it.Order == nil:
		ri.Err = invalid("(order)", "the connector mapped no order")
	default:
		o := it.Order
		ri.Return = &order.Return{Source: source, ID: it.ID, Type: order.ReturnFull, OrderID: o.ExternalID,
			OrderKey: it.CreateKey(source), CreatedAt: o.CreatedAt, Currency: o.Currency,
			Lines: append([]order.Line(nil), o.Lines...), Reason: "returned at Kaspi", Status: StatusReturned}
	}
	return ri
}
