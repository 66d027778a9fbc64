package ozon

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"github.com/ordersync/ordersync/internal/payouts"
)

// Ozon's finance methods: the transaction list (the financial lines of a period)
// and its totals. Both answer at most one month a request, and the list is to be
// called one request after another, never in parallel.
const (
	transactionListPath   = "/v3/finance/transaction/list"
	transactionTotalsPath = "/v3/finance/transaction/totals"
	// MaxFinancePageSize is the largest page of the transaction list the connector
	// asks for (Ozon's own example asks for as many).
	MaxFinancePageSize = 1000
	// maxFinancePages bounds one month's paging, against a list that never ends.
	maxFinancePages = 10000
)

// FinanceOptions configure the reading of Ozon's financial lines.
type FinanceOptions struct {
	// Source is the lines' source (default "ozon").
	Source string
	// Currency of the contract's amounts (default RUB): the transaction list does
	// not name it.
	Currency string
	// PageSize of the transaction list, 1 to MaxFinancePageSize (default the most).
	PageSize int
	// Location is the zone of operation_date, which Ozon writes without one, and
	// the zone months are cut in (default the connector's Config.Location).
	Location *time.Location
}

// Finance reads Ozon's financial lines. It implements payouts.Reader.
type Finance struct {
	c   *Connector
	opt FinanceOptions
}

var _ payouts.Reader = (*Finance)(nil)

// Finance returns the reader of the connector's financial lines.
func (c *Connector) Finance(opt FinanceOptions) *Finance {
	if opt.Source == "" {
		opt.Source = Name
	}
	if opt.Currency == "" {
		opt.Currency = "RUB"
	}
	if opt.PageSize <= 0 || opt.PageSize > MaxFinancePageSize {
		opt.PageSize = MaxFinancePageSize
	}
	if opt.Location == nil {
		opt.Location = c.cfg.Location
	}
	return &Finance{c: c, opt: opt}
}

// Source is the lines' source.
func (f *Finance) Source() string { return f.opt.Source }

type financePeriod struct {
	From string `json:"from"`
	To   string `json:"to"`
}

type transactionListRequest struct {
	Filter struct {
		Date            financePeriod `json:"date"`
		OperationType   []string      `json:"operation_type"`
		PostingNumber   string        `json:"posting_number"`
		TransactionType string        `json:"transaction_type"`
	} `json:"filter"`
	Page     int `json:"page"`
	PageSize int `json:"page_size"`
}

type transactionListResponse struct {
	Result struct {
		Operations []json.RawMessage `json:"operations"`
		PageCount  int64             `json:"page_count"`
		RowCount   int64             `json:"row_count"`
	} `json:"result"`
}

type transactionTotalsRequest struct {
	Date            financePeriod `json:"date"`
	PostingNumber   string        `json:"posting_number"`
	TransactionType string        `json:"transaction_type"`
}

// Read reads the operations of [from, to): one request period per calendar month
// (in FinanceOptions.Location), each paged by page and page_count, one request at a
// time; then the totals of each month, whose sum is the period's total.
func (f *Finance) Read(ctx context.Context, from, to time.Time, page func(payouts.Page) error) (*decimal.Decimal, error) {
	if !from.Before(to) {
		return nil, fmt.Errorf("ozon: financial lines: the period %s – %s is empty", from.Format(time.DateOnly), to.Format(time.DateOnly))
	}
	months := payouts.SplitMonths(from, to, f.opt.Location)
	n := 0
	for _, m := range months {
		period := financePeriod{From: timeParam(m[0]), To: timeParam(m[1].Add(-time.Millisecond))}
		for p := 1; ; p++ {
			if p > maxFinancePages {
				return nil, fmt.Errorf("ozon: transaction list %s: more than %d pages", period.From, maxFinancePages)
			}
			var req transactionListRequest
			req.Filter.Date = period
			req.Filter.OperationType = []string{}
			req.Filter.TransactionType = "all"
			req.Page, req.PageSize = p, f.opt.PageSize
			what := fmt.Sprintf("transaction list %s – %s, page %d", period.From, period.To, p)
			resp, err := f.c.post(ctx, transactionListPath, req, true, what)
			if err != nil {
				return nil, err
			}
			var body transactionListResponse
			if err := decodePage(resp.Body(), &body); err != nil {
				return nil, fmt.Errorf("ozon: %s: malformed answer: %w", what, err)
			}
			n++
			pg := payouts.Page{Number: n, Of: int(body.Result.PageCount)}
			for i, raw := range body.Result.Operations {
				l, err := f.line(raw)
				if err != nil {
					pg.Skipped = append(pg.Skipped, fmt.Sprintf("%s, operation %d: %v", what, i+1, err))
					continue
				}
				pg.Lines = append(pg.Lines, l)
			}
			if err := page(pg); err != nil {
				return nil, err
			}
			if len(body.Result.Operations) == 0 || int64(p) >= body.Result.PageCount {
				break
			}
		}
	}
	total := decimal.Zero
	for _, m := range months {
		t, err := f.totals(ctx, m[0], m[1])
		if err != nil {
			return nil, err
		}
		total = total.Add(t)
	}
	return &total, nil
}

// totals is the sum of the totals Ozon states for [from, to).
func (f *Finance) totals(ctx context.Context, from, to time.Time) (decimal.Decimal, error) {
	req := transactionTotalsRequest{Date: financePeriod{From: timeParam(from), To: timeParam(to.Add(-time.Millisecond))},
		TransactionType: "all"}
	what := fmt.Sprintf("transaction totals %s – %s", req.Date.From, req.Date.To)
	resp, err := f.c.post(ctx, transactionTotalsPath, req, true, what)
	if err != nil {
		return decimal.Zero, err
	}
	var body struct {
		Result map[string]json.RawMessage `json:"result"`
	}
	if err := decodePage(resp.Body(), &body); err != nil {
		return decimal.Zero, fmt.Errorf("ozon: %s: malformed answer: %w", what, err)
	}
	if body.Result == nil {
		return decimal.Zero, fmt.Errorf("ozon: %s: the answer has no result", what)
	}
	sum := decimal.Zero
	for _, k := range totalsFields {
		raw, ok := body.Result[k]
		if !ok {
			continue
		}
		d, err := parseNumber(raw)
		if err != nil {
			return decimal.Zero, fmt.Errorf("ozon: %s: result.%s %v", what, k, err)
		}
		sum = sum.Add(d)
	}
	return sum, nil
}

// totalsFields are the parts of the transaction totals; together they are the
// period's sum.
var totalsFields = []string{"accruals_for_sale", "sale_commission", "processing_and_delivery",
	"refunds_and_cancellations", "services_amount", "compensation_amount", "money_transfer", "others_amount"}

// wireOperation is one operation of the transaction list.
type wireOperation struct {
	OperationID          json.Number     `json:"operation_id"`
	OperationType        string          `json:"operation_type"`
	OperationDate        string          `json:"operation_date"`
	OperationTypeName    string          `json:"operation_type_name"`
	Amount               json.RawMessage `json:"amount"`
	AccrualsForSale      json.RawMessage `json:"accruals_for_sale"`
	SaleCommission       json.RawMessage `json:"sale_commission"`
	DeliveryCharge       json.RawMessage `json:"delivery_charge"`
	ReturnDeliveryCharge json.RawMessage `json:"return_delivery_charge"`
	Type                 string          `json:"type"`
	Posting              struct {
		PostingNumber string `json:"posting_number"`
	} `json:"posting"`
	Items []struct {
		SKU  json.Number `json:"sku"`
		Name string      `json:"name"`
	} `json:"items"`
	Services []struct {
		Name  string          `json:"name"`
		Price json.RawMessage `json:"price"`
	} `json:"services"`
}

// Operation types by what they are to the reconciliation (the rest is an order
// service when it names a posting, a cabinet charge when it does not).
var (
	saleOperations = map[string]bool{
		"OperationAgentDeliveredToCustomer":         true,
		"OperationAgentDeliveredToCustomerCanceled": true,
		"OperationAgentStornoDeliveredToCustomer":   true,
	}
	// returnOperations reverse a sale, or charge its return's delivery and handling
	// (which Ozon books later than the reversal, as a line of its own).
	returnOperations = map[string]bool{
		"ClientReturnAgentOperation":   true,
		"OperationItemReturn":          true,
		"OperationReturnGoodsFBSofRMS": true,
		"ReturnAgentOperationRFBS":     true,
	}
	penaltyOperations = map[string]bool{
		"OperationMarketplaceWithHoldingForUndeliverableGoods": true,
		"OperationClaim": true,
	}
	// logisticsOperations are delivery itself: what they withhold beyond the sale
	// and its commission is logistics.
	logisticsOperations = map[string]bool{
		"MarketplaceServiceItemDeliveryKGT":              true,
		"MarketplaceServiceItemDirectFlowLogistic":       true,
		"MarketplaceServiceItemDirectFlowLogisticVDC":    true,
		"MarketplaceServiceItemReturnFlowLogistic":       true,
		"OperationItemReturn":                            true,
		"OperationReturnGoodsFBSofRMS":                   true,
		"OperationMarketplaceCrossDockServiceWriteOff":   true,
		"MarketplaceServiceItemDropoffPPZ":               true,
		"MarketplaceServiceItemRedistributionReturnsPVZ": true,
	}
)

// logisticsService says whether a service of an operation is delivery, its
// processing or a return's flow back: Ozon's delivery, flow, drop-off, pick-up,
// fulfilment and return-handling items.
func logisticsService(name string) bool {
	switch name {
	case "MarketplaceNotDeliveredCostItem", "MarketplaceReturnAfterDeliveryCostItem", "MarketplaceDeliveryCostItem",
		"ItemAdvertisementForSupplierLogistic", "ItemAdvertisementForSupplierLogisticSeller",
		"MarketplaceServiceItemFulfillment", "MarketplaceServiceItemPickup",
		"MarketplaceServiceItemReturnAfterDelivToCustomer", "MarketplaceServiceItemReturnNotDelivToCustomer",
		"MarketplaceServiceItemReturnPartGoodsCustomer", "MarketplaceServiceItemRedistributionReturnsPVZ":
		return true
	}
	for _, w := range []string{"Deliv", "Flow", "Dropoff", "Logistic", "KGT"} {
		if strings.Contains(name, w) {
			return true
		}
	}
	return false
}

func penaltyService(name string) bool {
	return penaltyOperations[name] || strings.Contains(name, "Penalty") || strings.Contains(name, "Fine")
}

// line maps one operation. Its parts are Ozon's: the sale's accrual, the
// commission, the logistics (the pre-2021 delivery charges and the logistics
// services), the penalties; Other is whatever else the operation's amount holds,
// so that the parts always sum to Ozon's amount.
func (f *Finance) line(raw json.RawMessage) (payouts.Line, error) {
	var op wireOperation
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&op); err != nil {
		return payouts.Line{}, fmt.Errorf("does not decode: %w", err)
	}
	id := strings.TrimSpace(op.OperationID.String())
	if id == "" || id == "0" {
		return payouts.Line{}, fmt.Errorf("operation_id is missing")
	}
	errf := func(field string, err error) error { return fmt.Errorf("operation_id %s: %s %w", id, field, err) }
	date, err := parseOperationDate(op.OperationDate, f.opt.Location)
	if err != nil {
		return payouts.Line{}, errf("operation_date", err)
	}
	amount, err := parseNumber(op.Amount)
	if err != nil {
		return payouts.Line{}, errf("amount", err)
	}
	optional := func(field string, raw json.RawMessage) (decimal.Decimal, error) {
		if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
			return decimal.Zero, nil
		}
		d, err := parseNumber(raw)
		if err != nil {
			return d, errf(field, err)
		}
		return d, nil
	}
	l := payouts.Line{Source: f.opt.Source, LineID: id, Type: op.OperationType, Date: date,
		OrderID: strings.TrimSpace(op.Posting.PostingNumber), Currency: f.opt.Currency, Amount: amount, Raw: raw}
	if l.AccruedForSale, err = optional("accruals_for_sale", op.AccrualsForSale); err != nil {
		return payouts.Line{}, err
	}
	if l.Commission, err = optional("sale_commission", op.SaleCommission); err != nil {
		return payouts.Line{}, err
	}
	for _, fld := range []struct {
		name string
		raw  json.RawMessage
	}{{"delivery_charge", op.DeliveryCharge}, {"return_delivery_charge", op.ReturnDeliveryCharge}} {
		d, err := optional(fld.name, fld.raw)
		if err != nil {
			return payouts.Line{}, err
		}
		l.Logistics = l.Logistics.Add(d)
	}
	for i, s := range op.Services {
		d, err := optional(fmt.Sprintf("services[%d].price", i), s.Price)
		if err != nil {
			return payouts.Line{}, err
		}
		switch {
		case penaltyService(s.Name):
			l.Penalty = l.Penalty.Add(d)
		case logisticsService(s.Name):
			l.Logistics = l.Logistics.Add(d)
		}
	}
	rest := amount.Sub(l.AccruedForSale).Sub(l.Commission).Sub(l.Logistics).Sub(l.Penalty)
	switch {
	case len(op.Services) > 0:
		l.Other = rest // the services that are neither logistics nor penalties, and any difference
	case penaltyOperations[op.OperationType]:
		l.Penalty = l.Penalty.Add(rest)
	case logisticsOperations[op.OperationType]:
		l.Logistics = l.Logistics.Add(rest)
	default:
		l.Other = rest
	}
	switch {
	case l.OrderID == "":
		l.Kind = payouts.KindCabinet
	case saleOperations[op.OperationType]:
		l.Kind = payouts.KindSale
	case returnOperations[op.OperationType]:
		l.Kind = payouts.KindReturn
	default:
		l.Kind = payouts.KindOrderService
	}
	skus := map[string]bool{}
	for _, it := range op.Items {
		if s := strings.TrimSpace(it.SKU.String()); s != "" && s != "0" {
			skus[s] = true
		}
	}
	if len(skus) == 1 {
		for s := range skus {
			l.SKU = s
		}
	}
	if err := l.Validate(); err != nil {
		return payouts.Line{}, err
	}
	return l, nil
}

// parseOperationDate reads operation_date: "2021-11-01 00:00:00" in loc, or an RFC
// 3339 time with its own offset.
func parseOperationDate(s string, loc *time.Location) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, fmt.Errorf("is required")
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	for _, layout := range []string{time.DateTime, "2006-01-02T15:04:05", time.DateOnly} {
		if t, err := time.ParseInLocation(layout, s, loc); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is not a date (YYYY-MM-DD hh:mm:ss)", s)
}
