// Package payouts holds a marketplace's financial lines as ordersync keeps them: what
// the marketplace accrued for each order (the sale, its commission, its logistics,
// its penalties and other services), what it reversed for a return, and what it
// charged the cabinet as a whole (storage, advertising). The connectors read them
// (Ozon's transaction list, Wildberries' realization report, Kaspi's exported file);
// the stores keep them idempotently by the marketplace's own line id; the payout
// reconciliation (internal/payouts/reconcile) puts them beside the journal and 1C.
package payouts

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/shopspring/decimal"
)

// Kind is what a line is to the reconciliation.
type Kind string

const (
	// KindSale is the sale of an order's goods (with what was withheld for it).
	KindSale Kind = "sale"
	// KindReturn is a return's reversal of a sale (with its handling fee).
	KindReturn Kind = "return"
	// KindOrderService is a charge or credit for one order that is neither the sale
	// nor its reversal: logistics billed later, a penalty, a compensation.
	KindOrderService Kind = "order_service"
	// KindCabinet is a charge or credit for the cabinet as a whole (storage,
	// advertising, a subscription): it has no order.
	KindCabinet Kind = "cabinet"
)

// Kinds in the order reports list them.
var Kinds = []Kind{KindSale, KindReturn, KindOrderService, KindCabinet}

// Line is one financial line of a marketplace.
//
// Amount is what the line adds to (positive) or takes from (negative) the payout.
// It equals AccruedForSale + Commission + Logistics + Penalty + Other exactly
// (Validate): the parts are signed the same way, so a commission is negative and a
// return's AccruedForSale is negative.
type Line struct {
	Source string `json:"source"`
	// LineID is the marketplace's id of the line (Ozon: operation_id; Wildberries:
	// rrd_id; Kaspi: the row's id in the exported file). (Source, LineID) is unique.
	LineID string `json:"line_id"`
	// Type is the marketplace's own name of the operation
	// (OperationAgentDeliveredToCustomer, «Продажа», …).
	Type string `json:"type"`
	Kind Kind   `json:"kind"`
	// Date is when the marketplace booked the line: the period it falls in.
	Date time.Time `json:"date"`
	// OrderID is the order's external id as in its journal keys (the posting
	// number, the Wildberries order id, the Kaspi order code); "" for a cabinet line.
	OrderID string `json:"order_id"`
	// SKU is the line's item when the marketplace says (a sale or a return of one
	// item); "" otherwise.
	SKU      string           `json:"sku,omitempty"`
	Quantity *decimal.Decimal `json:"quantity,omitempty"`
	Currency string           `json:"currency"`

	Amount         decimal.Decimal `json:"amount"`
	AccruedForSale decimal.Decimal `json:"accrued_for_sale"`
	Commission     decimal.Decimal `json:"commission"`
	Logistics      decimal.Decimal `json:"logistics"`
	Penalty        decimal.Decimal `json:"penalty"`
	Other          decimal.Decimal `json:"other"`

	// Raw is the marketplace's own record of the line, kept for the accountant.
	Raw json.RawMessage `json:"raw,omitempty"`
	// FetchedAt is when ordersync first read the line (set by the store).
	FetchedAt time.Time `json:"fetched_at"`
}

// Parts is the sum of the itemised parts.
func (l Line) Parts() decimal.Decimal {
	return l.AccruedForSale.Add(l.Commission).Add(l.Logistics).Add(l.Penalty).Add(l.Other)
}

// Validate says what is wrong with a line a connector built, naming the field.
func (l Line) Validate() error {
	var ps []string
	if l.Source == "" {
		ps = append(ps, "source is required")
	}
	if strings.TrimSpace(l.LineID) == "" {
		ps = append(ps, "line_id is required")
	}
	switch l.Kind {
	case KindSale, KindReturn, KindOrderService:
		if l.OrderID == "" {
			ps = append(ps, fmt.Sprintf("order_id is required for a %s line", l.Kind))
		}
	case KindCabinet:
	default:
		ps = append(ps, fmt.Sprintf("kind %q is not one of sale, return, order_service, cabinet", l.Kind))
	}
	if l.Date.IsZero() {
		ps = append(ps, "date is required")
	}
	if l.Currency == "" {
		ps = append(ps, "currency is required")
	}
	if p := l.Parts(); !p.Equal(l.Amount) {
		ps = append(ps, fmt.Sprintf("amount %s is not the sum of its parts %s", l.Amount, p))
	}
	if len(ps) == 0 {
		return nil
	}
	return fmt.Errorf("payout line %s %s: %s", l.Source, l.LineID, strings.Join(ps, "; "))
}

// Saved counts what SaveLines did.
type Saved struct {
	// Inserted lines were new; Repeated were there already, with the same
	// (source, line_id), and were left as they were.
	Inserted, Repeated int
}

// Query selects lines.
type Query struct {
	Source string
	// From and To bound the lines' Date: From ≤ Date < To. Zero: unbounded.
	From, To time.Time
	// OrderIDs, when set, selects the lines of these orders only, whatever their date.
	OrderIDs []string
}

// Fetch is one reading of a source's lines: what `payouts fetch`, the schedule or
// `payouts import` did, for the operator's status.
type Fetch struct {
	Source string    `json:"source"`
	From   time.Time `json:"from"`
	To     time.Time `json:"to"`
	// Origin is "api" or the imported file's name.
	Origin     string    `json:"origin"`
	StartedAt  time.Time `json:"started_at"`
	FinishedAt time.Time `json:"finished_at"`
	Saved      Saved     `json:"saved"`
	// Total is the marketplace's own sum of the period's lines when it states one
	// (Ozon's transaction totals, the total row of Kaspi's file); nil otherwise.
	Total *decimal.Decimal `json:"total,omitempty"`
	Error string           `json:"error,omitempty"`
}

// Store keeps payout lines (both backends implement it; storetest's Payouts topic
// checks them).
type Store interface {
	// SaveLines writes lines in one transaction, idempotently by (Source, LineID):
	// a line already kept is left as it is and counted as Repeated. It refuses the
	// whole batch, writing nothing, when a line does not Validate.
	SaveLines(ctx context.Context, lines []Line) (Saved, error)
	// Lines returns the lines q selects, by Date, then LineID.
	Lines(ctx context.Context, q Query) ([]Line, error)
	// RecordFetch keeps a reading's record; LastFetches returns the latest of
	// each source, by source; Fetches the latest limit readings of source, the
	// newest first.
	RecordFetch(ctx context.Context, f Fetch) error
	LastFetches(ctx context.Context) ([]Fetch, error)
	Fetches(ctx context.Context, source string, limit int) ([]Fetch, error)
}
