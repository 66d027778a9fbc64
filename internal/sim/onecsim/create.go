package onecsim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/shopspring/decimal"
)

// createWire is CreateOrder of contract v1 as it comes off the wire. Numbers stay
// raw so they are parsed exactly, and so a number sent as a string is caught, as a
// 1C module that checks the types it reads would.
type createWire struct {
	ExternalID string          `json:"external_id"`
	Source     string          `json:"source"`
	Number     string          `json:"number"`
	Date       string          `json:"date"`
	Customer   Customer        `json:"customer"`
	Warehouse  string          `json:"warehouse"`
	Currency   string          `json:"currency"`
	Lines      []lineWire      `json:"lines"`
	Total      json.RawMessage `json:"total"`
	Comment    string          `json:"comment"`
	// The account's mapping, optional (contract v1, an addition).
	Organization string `json:"organization"`
	Partner      string `json:"partner"`
	Counterparty string `json:"counterparty"`
	Agreement    string `json:"agreement"`
}

type lineWire struct {
	SKU      string          `json:"sku"`
	Name     string          `json:"name"`
	Quantity json.RawMessage `json:"quantity"`
	Price    json.RawMessage `json:"price"`
	Amount   json.RawMessage `json:"amount"`
}

var (
	errMissing   = errors.New("обязательное поле не заполнено")
	errNotNumber = errors.New("ожидается число JSON")
)

// number parses a raw JSON value as an exact decimal; strings and null are refused.
func number(raw json.RawMessage) (decimal.Decimal, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return decimal.Decimal{}, errMissing
	}
	if c := raw[0]; c != '-' && (c < '0' || c > '9') {
		return decimal.Decimal{}, errNotNumber
	}
	d, err := decimal.NewFromString(string(raw))
	if err != nil {
		return decimal.Decimal{}, errNotNumber
	}
	return d, nil
}

// parseCreate decodes and checks a CreateOrder. On a problem it returns the status
// (400 for a body that is not JSON, 422 for a rejected order) and the error to send.
func parseCreate(body []byte) (OrderRequest, int, *apiError) {
	var w createWire
	if err := json.Unmarshal(bytes.TrimPrefix(body, bom), &w); err != nil {
		var typ *json.UnmarshalTypeError
		if errors.As(err, &typ) {
			return OrderRequest{}, http.StatusUnprocessableEntity, &apiError{
				Code: "invalid", Message: "Неверный тип значения: " + err.Error(), Field: typ.Field,
			}
		}
		return OrderRequest{}, http.StatusBadRequest, &apiError{
			Code: "bad_request", Message: "Ошибка чтения JSON: " + err.Error(),
		}
	}
	reject := func(field, format string, args ...any) (OrderRequest, int, *apiError) {
		return OrderRequest{}, http.StatusUnprocessableEntity, &apiError{
			Code: "invalid", Message: fmt.Sprintf(format, args...), Field: field,
		}
	}
	if w.ExternalID == "" {
		return reject("external_id", "Не заполнен внешний номер заказа (external_id)")
	}
	if len(w.Lines) == 0 {
		return reject("lines", "В заказе нет строк")
	}
	lines, total, problem := parseLines(w.Lines, w.Total)
	if problem != nil {
		return OrderRequest{}, http.StatusUnprocessableEntity, problem
	}
	return OrderRequest{
		ExternalID: w.ExternalID, Source: w.Source, Number: w.Number, Date: w.Date,
		Customer: w.Customer, Warehouse: w.Warehouse, Currency: w.Currency, Comment: w.Comment,
		Lines: lines, Total: total,
		Organization: w.Organization, Partner: w.Partner, Counterparty: w.Counterparty, Agreement: w.Agreement,
	}, 0, nil
}

// parseLines checks the lines and the total of a create (an order's or a
// return's): exact numbers, positive quantities, each amount quantity × price, the
// total their sum.
func parseLines(ws []lineWire, rawTotal json.RawMessage) ([]OrderLine, decimal.Decimal, *apiError) {
	reject := func(field, format string, args ...any) ([]OrderLine, decimal.Decimal, *apiError) {
		return nil, decimal.Decimal{}, &apiError{Code: "invalid", Message: fmt.Sprintf(format, args...), Field: field}
	}
	lines := make([]OrderLine, len(ws))
	sum := decimal.Zero
	for i, lw := range ws {
		f := fmt.Sprintf("lines[%d]", i)
		if lw.SKU == "" {
			return reject(f+".sku", "Строка %d: не заполнен артикул", i+1)
		}
		q, err := number(lw.Quantity)
		if err != nil {
			return reject(f+".quantity", "Строка %d, количество: %v", i+1, err)
		}
		if !q.IsPositive() {
			return reject(f+".quantity", "Строка %d: количество %s должно быть больше нуля", i+1, q)
		}
		p, err := number(lw.Price)
		if err != nil {
			return reject(f+".price", "Строка %d, цена: %v", i+1, err)
		}
		if p.IsNegative() {
			return reject(f+".price", "Строка %d: цена %s отрицательна", i+1, p)
		}
		a, err := number(lw.Amount)
		if err != nil {
			return reject(f+".amount", "Строка %d, сумма: %v", i+1, err)
		}
		if want := q.Mul(p); !a.Equal(want) {
			return reject(f+".amount", "Строка %d: сумма %s не равна количеству × цене = %s", i+1, a, want)
		}
		sum = sum.Add(a)
		lines[i] = OrderLine{SKU: lw.SKU, Name: lw.Name, Quantity: q, Price: p, Amount: a}
	}
	total, err := number(rawTotal)
	if err != nil {
		return reject("total", "Итог: %v", err)
	}
	if !total.Equal(sum) {
		return reject("total", "Итог %s не равен сумме строк %s", total, sum)
	}
	return lines, total, nil
}
