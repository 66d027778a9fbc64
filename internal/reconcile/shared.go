package reconcile

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/ordersync/ordersync/internal/onec"
	"github.com/ordersync/ordersync/internal/order"
)

// The rules of reading 1C and the journal that every reconciliation shares (this
// one and the payouts' in internal/payouts/reconcile).

// SourceOrder is one of 1C's orders of a source, with the source's own id of it
// (1C's external id less the "<source>:" prefix).
type SourceOrder struct {
	ID    string
	Order onec.Order
}

// ListOneC lists 1C's orders of source dated in [start, end), asking 1C in its own
// zone (oneCLoc), and keeps those whose external id is of the source: a module that
// filters loosely may list others.
func ListOneC(ctx context.Context, c OneC, source string, start, end time.Time, oneCLoc *time.Location) ([]SourceOrder, error) {
	list, err := c.ListOrders(ctx, onec.ListQuery{
		Source:   source,
		DateFrom: start.In(oneCLoc).Format(oneCDate),
		DateTo:   end.Add(-time.Second).In(oneCLoc).Format(oneCDate),
	})
	if err != nil {
		return nil, fmt.Errorf("list 1C's orders of %s: %w", source, err)
	}
	prefix := source + ":"
	var out []SourceOrder
	for _, o := range list {
		if len(o.ExternalID) < len(prefix) || !strings.EqualFold(o.ExternalID[:len(prefix)], prefix) {
			continue
		}
		out = append(out, SourceOrder{ID: o.ExternalID[len(prefix):], Order: o})
	}
	return out, nil
}

// CreateKey is the journal key of the create of the source's order id (Ozon's
// orders are postings).
func CreateKey(source, id string) string { return order.Key(source, entityOf(source), id, "create") }

// PickOneC is the order that stands for the ones 1C holds under one external id:
// the earliest not marked for deletion, or the earliest marked when all are; nil
// for none. Held is how many are not marked for deletion.
func PickOneC(os []onec.Order) (pick *onec.Order, held int) {
	for i := range os {
		o := &os[i]
		if !o.Deleted {
			held++
		}
		if pick == nil || pick.Deleted && !o.Deleted || pick.Deleted == o.Deleted && o.Date < pick.Date {
			pick = o
		}
	}
	return pick, held
}

// OneCDateLayout is how 1C writes its zone-less dates.
const OneCDateLayout = oneCDate

// Day is the start of t's date in loc.
func Day(t time.Time, loc *time.Location) time.Time { return day(t, loc) }
