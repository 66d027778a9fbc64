package journal

import "github.com/ordersync/ordersync/internal/order"

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
