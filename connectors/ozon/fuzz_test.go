package ozon

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"github.com/ordersync/ordersync/connectors"
	"github.com/ordersync/ordersync/internal/order"
)

const seedV3 = `{"posting_number":"05708065-0029-1","order_id":680420041,"order_number":"05708065-0029","status":"awaiting_packaging",` +
	`"in_process_at":"2026-09-16T06:00:00Z","customer":{"name":"Иван","phone":"+79990001122"},"addressee":null,` +
	`"cancellation":{"cancel_reason":"","cancellation_initiator":"","cancellation_type":""},` +
	`"products":[{"offer_id":"SKU-1","name":"Чайник","sku":1,"quantity":2,"price":"1530.0000","currency_code":"RUB"}],` +
	`"available_actions":["ship"],"requirements":{"products_requiring_gtd":[]}}`

const seedV4 = `{"posting_number":"05708065-0030-1","order_id":"680420042","status":"cancelled",` +
	`"in_process_at":"2026-09-16T06:00:00.123Z","cancellation":{"cancel_reason":"Покупатель отменил","cancellation_initiator":"Клиент"},` +
	`"products":[{"offer_id":"SKU-2","name":"Кофе","quantity":1,"price":{"amount":"1530.5","currency":"RUB"}}]}`

func fuzzConnector(tb testing.TB) *Connector {
	c, err := New(Config{BaseURL: "http://ozon.invalid", ClientID: "1", APIKey: "k", Warehouse: "WH1", RatePerSecond: -1})
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// checkItem asserts what every mapped posting must satisfy: an id that can stand in
// a key, an error that names a field, an order that validates and survives its
// canonical form.
func checkItem(t *testing.T, it connectors.Item) {
	t.Helper()
	if it.ID != "" && order.CheckKeyID(it.ID) != "" {
		t.Fatalf("item id %q cannot stand in a key", it.ID)
	}
	if it.Err != nil {
		var ve *order.ValidationError
		if !errors.As(it.Err, &ve) {
			t.Fatalf("item error %T %v names no field", it.Err, it.Err)
		}
		return
	}
	if it.Order == nil {
		t.Fatalf("an item with neither an order nor an error: %+v", it)
	}
	o := *it.Order
	if err := o.Validate(); err != nil {
		t.Fatalf("a mapped posting does not validate: %v", err)
	}
	c := o.Canonical()
	back, err := order.Parse(c)
	if err != nil || !bytes.Equal(back.Canonical(), c) {
		t.Fatalf("canonical form %s does not round-trip: %v", c, err)
	}
}

func FuzzPosting(f *testing.F) {
	c := fuzzConnector(f)
	f.Add([]byte(seedV3))
	f.Add([]byte(seedV4))
	f.Add([]byte(`{"posting_number":"1-1","status":"awaiting_packaging","in_process_at":"10000-01-01T00:00:00Z","products":[]}`))
	f.Add([]byte(`{"posting_number":"1-1","Posting_Number":"2-2","status":"delivered"}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		checkItem(t, c.item(raw))
	})
}

func FuzzPage(f *testing.F) {
	c := fuzzConnector(f)
	f.Add([]byte(`{"postings":[` + seedV3 + `,` + seedV4 + `],"cursor":"abc","has_next":false}`))
	f.Add([]byte(`{"result":{"postings":[` + seedV3 + `],"has_next":false}}`))
	f.Add([]byte(`{"result":` + seedV4 + `}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var v4 struct {
			Postings *[]json.RawMessage `json:"postings"`
			Cursor   string             `json:"cursor"`
			HasNext  bool               `json:"has_next"`
		}
		if decodePage(body, &v4) == nil && v4.Postings != nil {
			for _, raw := range *v4.Postings {
				checkItem(t, c.item(raw))
			}
		}
		var v3 struct {
			Result *struct {
				Postings *[]json.RawMessage `json:"postings"`
				HasNext  *bool              `json:"has_next"`
			} `json:"result"`
		}
		if decodePage(body, &v3) == nil && v3.Result != nil && v3.Result.Postings != nil {
			for _, raw := range *v3.Result.Postings {
				checkItem(t, c.item(raw))
			}
		}
		var get struct {
			Result json.RawMessage `json:"result"`
		}
		if decodePage(body, &get) == nil && len(get.Result) > 0 {
			checkItem(t, c.item(get.Result))
		}
	})
}
