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
	// State is the order's state as an accountant means it (journal.State); RowOf
	// knows only the operation, so a create's cancel is the caller's to add
	// (journal.StateOf).
	State string
	// Ordered is the marketplace's own date of the order, in the export's zone; nil
	// when the payload names none.
	Ordered *time.Time
	// OneCTotal is 1C's total at the latest reconciliation; nil when none said.
	OneCTotal *decimal.Decimal
}

// RowOf reads the row of op, its times in loc.
func RowOf(op journal.Operation, loc *time.Location) Row {
	r := Row{Source: op.Source, ExternalID: op.ExternalID, Key: op.Key, Kind: op.Kind, Status: string(op.Status),
		Created: op.CreatedAt.In(loc), Attempts: op.Attempts, LastError: op.LastError,
		State: string(journal.StateOf(op.Kind, op.Status, ""))}
	if op.OrderCreatedAt != nil {
		t := op.OrderCreatedAt.In(loc)
		r.Ordered = &t
	}
	if op.OneCSeen != nil && op.OneCSeen.Total != nil {
		t := *op.OneCSeen.Total
		r.OneCTotal = &t
	}
	var p struct {
		Number   string `json:"number"`
		Currency string `json:"currency"`
		Customer struct {
			Name  string `json:"name"`
			Phone string `json:"phone"`
		} `json:"customer"`
		Fetch struct {
			ID string `json:"id"`
		} `json:"fetch"`
	}
	_ = json.Unmarshal(op.Payload, &p) // a payload that is not an order leaves the order's columns empty
	r.MarketplaceNumber = firstOf(p.Number, p.Fetch.ID, op.ExternalID)
	r.Customer, r.Phone, r.Currency = p.Customer.Name, p.Customer.Phone, p.Currency
	r.Total = journal.Derive(op.Key, op.Source, op.ExternalID, op.Payload, op.Result).Total
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
	"onec_number", "onec_date", "onec_ref", "total", "currency", "created", "done", "attempts", "last_error", "warnings",
	"state", "ordered", "onec_total"}

var headers = map[string][]string{
	"en": {"Source", "Order number", "External id", "Key", "Kind", "Status", "Customer", "Phone",
		"1C number", "1C date", "1C ref", "Total", "Currency", "Registered", "Done", "Attempts", "Last error", "Warnings",
		"State", "Order date", "1C total"},
	"ru": {"Источник", "Номер заказа", "Внешний идентификатор", "Ключ", "Вид", "Статус", "Покупатель", "Телефон",
		"Номер в 1С", "Дата в 1С", "Ссылка в 1С", "Сумма", "Валюта", "Зарегистрирована", "Выполнена", "Попыток", "Последняя ошибка", "Предупреждения",
		"Состояние", "Дата заказа", "Сумма в 1С"},
}

// words are the Russian words of the values an export writes: statuses, kinds,
// states and sources. English keeps the values themselves.
var words = map[string]string{
	"status:pending": "в работе", "status:done": "выполнена", "status:failed": "ошибка",
	"kind:order.create": "создание заказа", "kind:order.cancel": "отмена заказа", "kind:stock.snapshot": "снимок остатков",
	"state:created": "создан в 1С", "state:pending": "ждёт создания", "state:failed": "ошибка создания",
	"state:cancelled": "отменён в 1С", "state:cancel_pending": "ждёт отмены", "state:cancel_failed": "ошибка отмены",
	"state:done": "выполнена",
}

// Word is value (of what: status, kind, state) in lang: Russian words for ru, the
// value itself otherwise or when there is no word for it.
func Word(lang, what, value string) string {
	if lang == "ru" {
		if w, ok := words[what+":"+value]; ok {
			return w
		}
	}
	return value
}

// SourceName is how a source is shown: the marketplaces by their names (wb and
// wildberries both as Wildberries), any other source as it is.
func SourceName(source string) string {
	switch source {
	case "kaspi":
		return "Kaspi"
	case "ozon":
		return "Ozon"
	case "wb", "wildberries":
		return "Wildberries"
	case "yandex_market":
		return "Yandex Market"
	case "uzum":
		return "Uzum"
	}
	return source
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
		if c == "created" || c == "done" || c == "ordered" {
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
