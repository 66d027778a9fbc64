// Package reconcile compares, for one source and period, three sides: the
// marketplace's own list of orders, the journal, and the orders 1C holds; each order
// lands in one category.
package reconcile

import "github.com/shopspring/decimal"

// Category of a reconciled order.
type Category string

const (
	OK               Category = "ok"
	MissingInJournal Category = "missing_in_journal" // the marketplace has it, ordersync never saw it
	NotDone          Category = "not_done"           // pending or failed, with the last error
	MissingIn1C      Category = "missing_in_1c"      // done, but 1C no longer lists it
	DuplicateIn1C    Category = "duplicate_in_1c"    // 1C holds two or more orders for it
	AmountMismatch   Category = "amount_mismatch"    // marketplace total against 1C total
	CancelledButLive Category = "cancelled_but_live" // cancelled at the marketplace, live in 1C
	UnknownToJournal Category = "unknown_to_journal" // 1C holds it, ordersync did not create it
)

// Categories in the order reports list them.
var Categories = []Category{OK, MissingInJournal, NotDone, MissingIn1C, DuplicateIn1C,
	AmountMismatch, CancelledButLive, UnknownToJournal}

// OneCOrder is one order 1C holds for an item.
type OneCOrder struct {
	Ref       string           `json:"ref"`
	Number    string           `json:"number"`
	Total     *decimal.Decimal `json:"total"`
	Cancelled bool             `json:"cancelled"`
}

// Item is one reconciled order.
type Item struct {
	Category          Category         `json:"category"`
	ExternalID        string           `json:"external_id"`
	MarketplaceNumber string           `json:"marketplace_number"`
	Key               string           `json:"key"`
	Status            string           `json:"status"`
	MarketplaceTotal  *decimal.Decimal `json:"marketplace_total"`
	OneC              []OneCOrder      `json:"onec"`
	Note              string           `json:"note"`
}

// Report is the whole reconciliation: `ordersync reconcile --format json` prints it.
type Report struct {
	Source string `json:"source"`
	From   string `json:"from"` // YYYY-MM-DD
	To     string `json:"to"`   // YYYY-MM-DD, inclusive
	// Totals has every category, zero or not.
	Totals map[Category]int `json:"totals"`
	Items  []Item           `json:"items"`
}

// Clean reports whether every item is ok (the CLI exits 1 otherwise).
func (r Report) Clean() bool {
	for _, it := range r.Items {
		if it.Category != OK {
			return false
		}
	}
	return true
}
