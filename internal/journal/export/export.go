// Package export writes journal operations as the rows an accountant opens in a
// spreadsheet: CSV (UTF-8 with a BOM; for Russian, ';' between cells and a decimal
// comma, as Excel reads them in a Russian locale) and XLSX (excelize's stream
// writer: money as numbers with two decimals, times as dates). The CLI's
// `journal list --format csv|xlsx` and the pages' exports write the same columns.
package export

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"github.com/ordersync/ordersync/internal/journal"
)

// Row is one operation as exported.
type Row struct {
	Source            string
	MarketplaceNumber string
	ExternalID        string
	Key               string
	Kind              string
	Status            string
	Customer          string
	Phone             string
	OneCNumber        string
	OneCDate          string // as 1C wrote it: its local time, no zone
	OneCRef           string
	Total             *decimal.Decimal // nil when the payload names none (a fetch not made yet, a cancel)
	Currency          string
	Created           time.Time  // in the export's zone
	Done              *time.Time // when the operation was done, nil otherwise
	Attempts          int
	LastError         string
	Warnings          string // the warnings' codes, comma-separated
}

// RowOf reads the row of op, its times in loc.
func RowOf(op journal.Operation, loc *time.Location) Row {
	r := Row{Source: op.Source, ExternalID: op.ExternalID, Key: op.Key, Kind: op.Kind, Status: string(op.Status),
		Created: op.CreatedAt.In(loc), Attempts: op.Attempts, LastError: op.LastError}
	var p struct {
		Number   string `json:"number"`
		Currency string `json:"currency"`
		Customer struct {
			Name  string `json:"name"`
			Phone string `json:"phone"`
		} `json:"customer"`
		Lines []struct {
			Quantity decimal.Decimal `json:"quantity"`
			Price    decimal.Decimal `json:"price"`
		} `json:"lines"`
		Total *decimal.Decimal `json:"total"`
		Fetch struct {
			ID string `json:"id"`
		} `json:"fetch"`
	}
	_ = json.Unmarshal(op.Payload, &p) // a payload that is not an order leaves the order's columns empty
	r.MarketplaceNumber = firstOf(p.Number, p.Fetch.ID, op.ExternalID)
	r.Customer, r.Phone, r.Currency = p.Customer.Name, p.Customer.Phone, p.Currency
	switch {
	case p.Total != nil:
		t := *p.Total
		r.Total = &t
	case len(p.Lines) > 0:
		t := decimal.Zero
		for _, l := range p.Lines {
			t = t.Add(l.Quantity.Mul(l.Price))
		}
		r.Total = &t
	}
	if op.Result != nil {
		r.OneCNumber, r.OneCDate, r.OneCRef = op.Result.Number, op.Result.Date, op.Result.Ref
	}
	if op.Status == journal.StatusDone {
		d := op.UpdatedAt.In(loc)
		r.Done = &d
	}
	codes := make([]string, len(op.Warnings))
	for i, w := range op.Warnings {
		codes[i] = w.Code
	}
	r.Warnings = strings.Join(codes, ",")
	return r
}

func firstOf(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

// Columns are the exported columns, in order, by their stable names (the English
// headers).
var Columns = []string{"source", "marketplace_number", "external_id", "key", "kind", "status", "customer", "phone",
	"onec_number", "onec_date", "onec_ref", "total", "currency", "created", "done", "attempts", "last_error", "warnings"}

var headers = map[string][]string{
	"en": {"Source", "Marketplace number", "External id", "Key", "Kind", "Status", "Customer", "Phone",
		"1C number", "1C date", "1C ref", "Total", "Currency", "Created", "Done", "Attempts", "Last error", "Warnings"},
	"ru": {"Источник", "Номер на маркетплейсе", "Внешний идентификатор", "Ключ", "Вид", "Статус", "Покупатель", "Телефон",
		"Номер в 1С", "Дата в 1С", "Ссылка в 1С", "Сумма", "Валюта", "Создана", "Выполнена", "Попыток", "Последняя ошибка", "Предупреждения"},
}

// Header is the header row in lang (ru or en; anything else is en); the time
// columns name the zone of their times.
func Header(lang string, loc *time.Location) []string {
	h, ok := headers[lang]
	if !ok {
		h = headers["en"]
	}
	out := append([]string(nil), h...)
	for i, c := range Columns {
		if c == "created" || c == "done" {
			out[i] += " (" + loc.String() + ")"
		}
	}
	return out
}

// Writer writes rows, then Close finishes the file (it does not close the
// underlying writer).
type Writer interface {
	Write(Row) error
	Close() error
}

// Content types and file extensions of the formats.
const (
	ContentTypeCSV  = "text/csv; charset=utf-8"
	ContentTypeXLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
)
