package postgres

import (
	"encoding/json"
	"time"

	"github.com/ordersync/ordersync/internal/journal"
)

// derived is journal.Derive as the accountant's list columns hold it: order_created_at
// (nil for NULL), order_total (the exact decimal as text, cast to numeric by the
// statement, nil for NULL), currency and search_text. Every statement that writes a
// payload or a result writes these with it.
type derived struct {
	orderAt  *time.Time
	total    *string
	currency string
	search   string
}

func derivedOf(key, source, externalID string, payload []byte, result *journal.Result) derived {
	d := journal.Derive(key, source, externalID, json.RawMessage(payload), result)
	out := derived{orderAt: d.OrderCreatedAt, currency: d.Currency, search: d.SearchText}
	if d.Total != nil {
		s := d.Total.String()
		out.total = &s
	}
	return out
}
