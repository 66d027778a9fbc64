// Package reconcile compares, for one source and period, three sides: the
// marketplace's own list of orders, the journal, and the orders 1C holds; each order
// lands in one category.
package reconcile

import (
	"fmt"
	"strings"

	"github.com/shopspring/decimal"
)

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
	// Currency of the marketplace's total, "" when not known.
	Currency string      `json:"currency,omitempty"`
	OneC     []OneCOrder `json:"onec"`
	// Note is why the item is in its category, in English (the CLI's table, the
	// CSV and XLSX); NoteCode and NoteArgs say the same for a reader that words it
	// in its own language (the pages).
	Note     string    `json:"note"`
	NoteCode NoteCode  `json:"note_code,omitempty"`
	NoteArgs *NoteArgs `json:"note_args,omitempty"`
}

// NoteCode names the reason an item is in its category.
type NoteCode string

const (
	NoteCancelledUnseen  NoteCode = "cancelled_unseen"   // cancelled at the marketplace before ordersync saw it
	NoteNeverRegistered  NoteCode = "never_registered"   // listed by the marketplace, never registered (Numbers: 1C holds them)
	NoteNotFromOrdersync NoteCode = "not_from_ordersync" // 1C holds it, ordersync did not create it (Deleted)
	NoteCancelled        NoteCode = "cancelled"          // cancelled, and 1C holds nothing live (Numbers: cancelled in 1C too)
	NoteNotDone          NoteCode = "not_done"           // Error: the last error, "" not yet carried out (Numbers: 1C holds them)
	NoteGoneFrom1C       NoteCode = "gone_from_1c"       // done as Number, 1C holds nothing (Numbers: marked for deletion)
	NoteDuplicate        NoteCode = "duplicate"          // Count orders in 1C: Numbers; Live: those live although cancelled
	NoteCancelledLive    NoteCode = "cancelled_live"     // Cancel says by what; Number is live in 1C
	NoteTotalUnknown     NoteCode = "total_unknown"      // the marketplace's total is not known
	NoteNo1CTotal        NoteCode = "no_1c_total"        // 1C did not report the order's total
	NoteAmountDiffers    NoteCode = "amount_differs"     // Marketplace against OneC: Difference
)

// NoteArgs are a note's arguments; each code uses some.
type NoteArgs struct {
	Numbers     []string         `json:"numbers,omitempty"`
	Live        []string         `json:"live,omitempty"`
	Count       int              `json:"count,omitempty"`
	Number      string           `json:"number,omitempty"`
	Deleted     bool             `json:"deleted,omitempty"`
	Error       string           `json:"error,omitempty"`
	Cancel      *CancelNote      `json:"cancel,omitempty"`
	Marketplace *decimal.Decimal `json:"marketplace,omitempty"`
	OneC        *decimal.Decimal `json:"onec,omitempty"`
	Difference  *decimal.Decimal `json:"difference,omitempty"`
}

// CancelNote says what cancelled an order: the marketplace (with its reason), or a
// cancel operation of the journal (its status and last error).
type CancelNote struct {
	ByMarketplace bool   `json:"by_marketplace"`
	Reason        string `json:"reason,omitempty"`
	Status        string `json:"status,omitempty"`
	Error         string `json:"error,omitempty"`
}

// English is the cancel's part of a note.
func (c CancelNote) English() string {
	if c.ByMarketplace {
		s := "cancelled at the marketplace"
		if c.Reason != "" {
			s += " (" + c.Reason + ")"
		}
		return s
	}
	s := "a cancel was registered (" + c.Status + ")"
	if c.Error != "" {
		s += ": " + c.Error
	}
	return s
}

// English is the note of code with args, as the CLI and the exports write it.
func English(code NoteCode, a NoteArgs) string {
	nums := strings.Join(a.Numbers, ", ")
	switch code {
	case NoteCancelledUnseen:
		return "cancelled at the marketplace before ordersync saw it; nothing to create"
	case NoteNeverRegistered:
		s := "the marketplace lists the order; ordersync never registered it"
		if len(a.Numbers) > 0 {
			s += fmt.Sprintf("; 1C holds %s, not created by ordersync", nums)
		}
		return s
	case NoteNotFromOrdersync:
		s := "1C holds it, but ordersync did not create it: made by hand in 1C?"
		if a.Deleted {
			s += " (marked for deletion in 1C)"
		}
		return s
	case NoteCancelled:
		if len(a.Numbers) > 0 {
			return "cancelled; cancelled in 1C too"
		}
		return "cancelled; 1C holds nothing live"
	case NoteNotDone:
		s := a.Error
		if s == "" {
			s = "not yet carried out in 1C"
		}
		if len(a.Numbers) > 0 {
			s += fmt.Sprintf(" (1C holds %s)", nums)
		}
		return s
	case NoteGoneFrom1C:
		s := "done"
		if a.Number != "" {
			s += " as " + a.Number
		}
		if len(a.Numbers) > 0 {
			return s + fmt.Sprintf(", but 1C's %s is marked for deletion", nums)
		}
		return s + ", but 1C no longer holds an order with this external id"
	case NoteDuplicate:
		s := fmt.Sprintf("1C holds %d orders for it: %s", a.Count, nums)
		if len(a.Live) > 0 {
			s += "; cancelled at the marketplace, " + strings.Join(a.Live, ", ") + " live in 1C"
		}
		return s
	case NoteCancelledLive:
		c := ""
		if a.Cancel != nil {
			c = a.Cancel.English()
		}
		return fmt.Sprintf("%s, but %s is live in 1C (not cancelled, not marked for deletion)", c, a.Number)
	case NoteTotalUnknown:
		return "the marketplace's total is not known"
	case NoteNo1CTotal:
		return "1C did not report the order's total"
	case NoteAmountDiffers:
		return fmt.Sprintf("the marketplace's total %s, 1C's %s: a difference of %s", str(a.Marketplace), str(a.OneC), str(a.Difference))
	}
	return ""
}

func str(d *decimal.Decimal) string {
	if d == nil {
		return ""
	}
	return d.String()
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
