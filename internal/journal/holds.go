package journal

import (
	"context"
	"errors"

	"github.com/ordersync/ordersync/internal/order"
)

// HoldsOrder reports whether the journal holds the order's create (under its order key
// or any other key of the same source and external id, such as an Ozon posting's) or
// this cancel already.
func HoldsOrder(ctx context.Context, j Store, c order.Cancel) (bool, error) {
	for _, key := range []string{c.CreateKey, order.CancelKeyOf(c.CreateKey)} {
		_, err := j.Get(ctx, key)
		if err == nil {
			return true, nil
		}
		if !errors.Is(err, ErrNotFound) {
			return false, err
		}
	}
	ops, err := j.List(ctx, Filter{Source: c.Source, Kind: order.KindCreate, Query: c.ExternalID, Limit: 20})
	if err != nil {
		return false, err
	}
	for _, op := range ops {
		if op.ExternalID == c.ExternalID {
			return true, nil
		}
	}
	return false, nil
}
