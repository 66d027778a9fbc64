package bitrix24

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"github.com/ordersync/ordersync/internal/order"
)

// decodeFuzz reads an answer the way call does on a 2xx.
func decodeFuzz(method string, body []byte, out any) bool {
	var env envelope
	if json.Unmarshal(body, &env) != nil || env.Error != "" || len(env.Result) == 0 || string(env.Result) == "null" {
		return false
	}
	if decodeResult(method, body, env.Result, out) != nil {
		return false
	}
	return json.Unmarshal(env.Result, out) == nil
}

// FuzzDeal is a deal and its product rows as crm.deal.get and
// crm.deal.productrows.get answer them, mapped to the canonical order.
func FuzzDeal(f *testing.F) {
	c, err := New(Config{RESTURL: "https://portal.invalid/rest/1/code/", RatePerSecond: -1, SKUField: SKUFromProductID, Warehouse: "WH1"})
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte(`{"result":{"ID":"42","TITLE":"Заказ","STAGE_ID":"WON","CURRENCY_ID":"KZT","DATE_CREATE":"2026-09-16T10:00:00+05:00","COMMENTS":"a\nb"}}`),
		[]byte(`{"result":[{"PRODUCT_ID":450,"PRODUCT_NAME":"Чайник","PRICE":1500,"QUANTITY":2}]}`))
	f.Add([]byte(`{"result":{"ID":42,"TITLE":null,"CURRENCY_ID":"RUB","DATE_CREATE":"2026-09-16T10:00:00Z"}}`),
		[]byte(`{"result":[{"PRODUCT_ID":"451","PRODUCT_NAME":"Яблоки, кг","PRICE":"333.33","QUANTITY":"1.5"}],"time":{}}`))
	f.Add([]byte(`{"result":{"DATE_CREATE":"10000-01-01T00:00:00Z","TITLE":"x","Title":"y"}}`), []byte(`{"result":[]}`))
	f.Fuzz(func(t *testing.T, dealBody, rowsBody []byte) {
		var d wireDeal
		var rows []wireRow
		if !decodeFuzz("crm.deal.get", dealBody, &d) || !decodeFuzz("crm.deal.productrows.get", rowsBody, &rows) {
			return
		}
		o, err := c.mapDeal("42", d, rows, order.Customer{}, nil)
		if err != nil {
			var ve *order.ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("mapDeal error %T %v names no field", err, err)
			}
			return
		}
		if err := o.Validate(); err != nil {
			t.Fatalf("a mapped deal does not validate: %v", err)
		}
		b := o.Canonical()
		back, err := order.Parse(b)
		if err != nil || !bytes.Equal(back.Canonical(), b) {
			t.Fatalf("canonical form %s does not round-trip: %v", b, err)
		}
	})
}
