package ozon

import (
	"bytes"
	"errors"
	"testing"

	"github.com/ordersync/ordersync/connectors"
	"github.com/ordersync/ordersync/internal/order"
)

const seedReturn = `{"id":1000000101,"type":"PartialReturn","schema":"FBS","posting_number":"05708065-0029-1",` +
	`"return_reason_name":"Брак","product":{"offer_id":"SKU-1","name":"Чайник","quantity":1,` +
	`"price":{"currency_code":"RUB","price":1530.5}},"logistic":{"return_date":"2026-10-20T09:00:00Z"},` +
	`"visual":{"change_moment":"2026-10-20T09:00:00Z"}}`

// checkReturnItem asserts what every mapped return must satisfy: an id that can
// stand in a key, an error that names a field, or a return that validates and
// survives its canonical form (the payload the journal keeps).
func checkReturnItem(t *testing.T, it connectors.ReturnItem) {
	t.Helper()
	if it.ID != "" && order.CheckKeyID(it.ID) != "" {
		t.Fatalf("return id %q cannot stand in a key", it.ID)
	}
	if it.Err != nil {
		var ve *order.ValidationError
		if !errors.As(it.Err, &ve) {
			t.Fatalf("return error %T %v names no field", it.Err, it.Err)
		}
		return
	}
	if it.Return == nil {
		t.Fatalf("a return item with neither a return nor an error: %+v", it)
	}
	if err := it.Return.Validate(); err != nil {
		t.Fatalf("a mapped return does not validate: %v", err)
	}
	c := it.Return.Canonical()
	back, err := order.ParseReturn(c)
	if err != nil || !bytes.Equal(back.Canonical(), c) {
		t.Fatalf("canonical form %s does not round-trip: %v", c, err)
	}
}

func FuzzReturn(f *testing.F) {
	c := fuzzConnector(f)
	f.Add([]byte(seedReturn))
	f.Add([]byte(`{"id":7,"type":"Cancellation","posting_number":"1-1","product":{"offer_id":"S","quantity":"2","price":{"price":"0.01"}},"logistic":{"return_date":"2026-10-20 09:00:00"}}`))
	f.Add([]byte(`{"id":"7","type":"Unknown","posting_number":"","product":null}`))
	f.Add([]byte(`{"id":8,"ID":9,"type":"FullReturn"}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		checkReturnItem(t, c.returnItem(raw))
	})
}
