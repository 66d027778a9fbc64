package ozonsim

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/shopspring/decimal"
)

// The finance methods the simulator serves: the transaction list and its totals.
const (
	PathTransactionList   = "/v3/finance/transaction/list"
	PathTransactionTotals = "/v3/finance/transaction/totals"
)

// MaxTransactionPageSize is the largest page_size the transaction list accepts.
const MaxTransactionPageSize = 1000

// Operation is one financial operation of the transaction list.
type Operation struct {
	ID       int64
	Type     string // operation_type: OperationAgentDeliveredToCustomer, ClientReturnAgentOperation, …
	TypeName string // operation_type_name
	// TransactionType is the operation's "type": orders, returns, services,
	// compensation, transferDelivery, other (default orders with a posting,
	// services without).
	TransactionType string
	Date            time.Time // operation_date, served as "YYYY-MM-DD hh:mm:ss" in UTC
	PostingNumber   string    // "" for an operation of the cabinet
	Amount          decimal.Decimal
	AccrualsForSale decimal.Decimal
	SaleCommission  decimal.Decimal
	// DeliveryCharge and ReturnDeliveryCharge are the charges of the tariffs before
	// February 2021 (and of bulky goods).
	DeliveryCharge, ReturnDeliveryCharge decimal.Decimal
	Items                                []OperationItem
	Services                             []OperationService
}

// OperationItem is a product of an operation.
type OperationItem struct {
	SKU  int64
	Name string
}

// OperationService is a service charged in an operation.
type OperationService struct {
	Name  string
	Price decimal.Decimal
}

// FinanceViolation is a rule of the finance methods a client broke.
type FinanceViolation struct {
	Path   string
	Reason string // "period longer than a month", "concurrent request", …
}

// ozonFinance is the state of the finance methods, guarded by Ozon.mu.
type ozonFinance struct {
	operations []Operation
	violations []FinanceViolation
	inFlight   int
}

// AddOperation adds financial operations to the transaction list.
func (s *Ozon) AddOperation(ops ...Operation) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, op := range ops {
		if op.TransactionType == "" {
			op.TransactionType = "orders"
			if op.PostingNumber == "" {
				op.TransactionType = "services"
			}
		}
		op.Items, op.Services = slices.Clone(op.Items), slices.Clone(op.Services)
		s.finance.operations = append(s.finance.operations, op)
	}
}

// FinanceViolations returns the finance rules clients broke: a period longer than
// a month (answered 400, as Ozon does) and a request sent while another was being
// answered (Ozon asks for one after another; answered all the same).
func (s *Ozon) FinanceViolations() []FinanceViolation {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.finance.violations)
}

func (s *Ozon) financeViolation(path, reason string) {
	s.mu.Lock()
	s.finance.violations = append(s.finance.violations, FinanceViolation{Path: path, Reason: reason})
	s.mu.Unlock()
}

type financeDate struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// financePeriod reads a request's period and holds it to a month at most: the
// period runs from `from` to `to`, both included.
func (s *Ozon) financePeriod(w http.ResponseWriter, path string, d *financeDate) (from, to time.Time, ok bool) {
	if d == nil || d.From == "" || d.To == "" {
		ozonWriteError(w, http.StatusBadRequest, 3, "date.from and date.to are required")
		return from, to, false
	}
	var err1, err2 error
	from, err1 = time.Parse(time.RFC3339Nano, d.From)
	to, err2 = time.Parse(time.RFC3339Nano, d.To)
	if err1 != nil || err2 != nil {
		ozonWriteError(w, http.StatusBadRequest, 3, "invalid date: want YYYY-MM-DDTHH:mm:ss.sssZ")
		return from, to, false
	}
	if to.Before(from) {
		ozonWriteError(w, http.StatusBadRequest, 3, "date.to is before date.from")
		return from, to, false
	}
	if to.After(from.AddDate(0, 1, 0)) {
		s.financeViolation(path, "period longer than a month")
		ozonWriteError(w, http.StatusBadRequest, 3, "Period must be less than one month")
		return from, to, false
	}
	return from, to, true
}

// selectOperations are the operations of the period (both ends included), of a
// posting when one is named, sorted by date and id.
func (s *Ozon) selectOperations(from, to time.Time, posting, transactionType string, types []string) []Operation {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Operation
	for _, op := range s.finance.operations {
		switch {
		case op.Date.Before(from) || op.Date.After(to):
		case posting != "" && op.PostingNumber != posting:
		case transactionType != "" && transactionType != "all" && op.TransactionType != transactionType:
		case len(types) > 0 && !slices.Contains(types, op.Type):
		default:
			out = append(out, op)
		}
	}
	slices.SortStableFunc(out, func(a, b Operation) int {
		if c := a.Date.Compare(b.Date); c != 0 {
			return c
		}
		return int(a.ID - b.ID)
	})
	return out
}

// enterFinance counts the finance requests being answered; a second at once is a
// violation of "one after another".
func (s *Ozon) enterFinance(path string) func() {
	s.mu.Lock()
	s.finance.inFlight++
	concurrent := s.finance.inFlight > 1
	s.mu.Unlock()
	if concurrent {
		s.financeViolation(path, "concurrent request")
	}
	return func() {
		s.mu.Lock()
		s.finance.inFlight--
		s.mu.Unlock()
	}
}

func (s *Ozon) serveFinance(w http.ResponseWriter, path string, body []byte) {
	defer s.enterFinance(path)()
	if path == PathTransactionTotals {
		s.serveTransactionTotals(w, body)
		return
	}
	var req struct {
		Filter *struct {
			Date            *financeDate `json:"date"`
			OperationType   []string     `json:"operation_type"`
			PostingNumber   string       `json:"posting_number"`
			TransactionType string       `json:"transaction_type"`
		} `json:"filter"`
		Page     *int64 `json:"page"`
		PageSize *int64 `json:"page_size"`
	}
	if err := ozonDecode(body, &req); err != nil {
		ozonWriteError(w, http.StatusBadRequest, 3, err.Error())
		return
	}
	switch {
	case req.Page == nil || *req.Page < 1:
		ozonWriteError(w, http.StatusBadRequest, 3, "page is required, from 1")
		return
	case req.PageSize == nil || *req.PageSize < 1 || *req.PageSize > MaxTransactionPageSize:
		ozonWriteError(w, http.StatusBadRequest, 3, "page_size must be between 1 and 1000")
		return
	case req.Filter == nil:
		ozonWriteError(w, http.StatusBadRequest, 3, "filter is required")
		return
	}
	from, to, ok := s.financePeriod(w, PathTransactionList, req.Filter.Date)
	if !ok {
		return
	}
	ops := s.selectOperations(from, to, strings.TrimSpace(req.Filter.PostingNumber), req.Filter.TransactionType, req.Filter.OperationType)
	size := int(*req.PageSize)
	pages := (len(ops) + size - 1) / size
	start := min(int(*req.Page-1)*size, len(ops))
	page := ops[start:min(start+size, len(ops))]
	out := make([]map[string]any, len(page))
	for i, op := range page {
		out[i] = wireOperation(op)
	}
	ozonWriteJSON(w, http.StatusOK, map[string]any{"result": map[string]any{
		"operations": out, "page_count": pages, "row_count": len(ops)}})
}

func num(d decimal.Decimal) json.Number { return json.Number(d.String()) }

func wireOperation(op Operation) map[string]any {
	items := make([]map[string]any, len(op.Items))
	for i, it := range op.Items {
		items[i] = map[string]any{"sku": it.SKU, "name": it.Name}
	}
	services := make([]map[string]any, len(op.Services))
	for i, sv := range op.Services {
		services[i] = map[string]any{"name": sv.Name, "price": num(sv.Price)}
	}
	schema, orderDate := "", ""
	if op.PostingNumber != "" {
		schema, orderDate = "FBS", op.Date.UTC().Format(time.DateTime)
	}
	return map[string]any{
		"operation_id":           op.ID,
		"operation_type":         op.Type,
		"operation_date":         op.Date.UTC().Format(time.DateTime),
		"operation_type_name":    op.TypeName,
		"delivery_charge":        num(op.DeliveryCharge),
		"return_delivery_charge": num(op.ReturnDeliveryCharge),
		"accruals_for_sale":      num(op.AccrualsForSale),
		"sale_commission":        num(op.SaleCommission),
		"amount":                 num(op.Amount),
		"type":                   op.TransactionType,
		"posting": map[string]any{"delivery_schema": schema, "order_date": orderDate,
			"posting_number": op.PostingNumber, "warehouse_id": 0},
		"items":    items,
		"services": services,
	}
}

// serveTransactionTotals sums the period's operations into Ozon's totals: the
// sales' accruals and commissions, and the rest of each operation's amount under
// its transaction type, so that the totals add up to the operations' amounts.
func (s *Ozon) serveTransactionTotals(w http.ResponseWriter, body []byte) {
	var req struct {
		Date            *financeDate `json:"date"`
		PostingNumber   string       `json:"posting_number"`
		TransactionType string       `json:"transaction_type"`
	}
	if err := ozonDecode(body, &req); err != nil {
		ozonWriteError(w, http.StatusBadRequest, 3, err.Error())
		return
	}
	from, to, ok := s.financePeriod(w, PathTransactionTotals, req.Date)
	if !ok {
		return
	}
	t := map[string]decimal.Decimal{}
	for _, k := range []string{"accruals_for_sale", "sale_commission", "processing_and_delivery", "refunds_and_cancellations",
		"services_amount", "compensation_amount", "money_transfer", "others_amount"} {
		t[k] = decimal.Zero
	}
	for _, op := range s.selectOperations(from, to, strings.TrimSpace(req.PostingNumber), req.TransactionType, nil) {
		t["accruals_for_sale"] = t["accruals_for_sale"].Add(op.AccrualsForSale)
		t["sale_commission"] = t["sale_commission"].Add(op.SaleCommission)
		rest := op.Amount.Sub(op.AccrualsForSale).Sub(op.SaleCommission)
		k := "others_amount"
		switch op.TransactionType {
		case "orders":
			k = "processing_and_delivery"
		case "returns":
			k = "refunds_and_cancellations"
		case "services":
			k = "services_amount"
		case "compensation":
			k = "compensation_amount"
		case "transferDelivery":
			k = "money_transfer"
		}
		t[k] = t[k].Add(rest)
	}
	out := map[string]json.Number{}
	for k, v := range t {
		out[k] = num(v)
	}
	ozonWriteJSON(w, http.StatusOK, map[string]any{"result": out})
}
