package journal

import (
	"encoding/json"

	"github.com/ordersync/ordersync/internal/order"
)

// CreateOrder is the operation that creates a canonical order in 1C: key
// <source>:order:<external_id>:create, payload the order's canonical JSON.
func CreateOrder(o order.Order) NewOperation {
	return NewOperation{
		Key:        o.CreateKey(),
		Kind:       order.KindCreate,
		Source:     o.Source,
		ExternalID: o.ExternalID,
		Payload:    o.Canonical(),
	}
}

// CancelOrder is the operation that cancels an order in 1C: key
// <source>:order:<external_id>:cancel, payload the cancel as JSON. Every path that
// cancels (a marketplace poll, a webhook, the CLI) builds it here, so the same cancel
// by another path is a duplicate, not a conflict.
func CancelOrder(c order.Cancel) NewOperation {
	if c.CreateKey == "" {
		c.CreateKey = order.Key(c.Source, "order", c.ExternalID, "create")
	}
	payload, _ := json.Marshal(c) // four strings: always encodable
	return NewOperation{
		Key:        order.CancelKeyOf(c.CreateKey),
		Kind:       order.KindCancel,
		Source:     c.Source,
		ExternalID: c.ExternalID,
		Payload:    payload,
	}
}
