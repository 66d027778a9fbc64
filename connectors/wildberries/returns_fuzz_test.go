package wildberries

import (
	"bytes"
	"errors"
	"testing"

	"github.com/ordersync/ordersync/internal/order"
)

// Every goods-return row is a return that validates (its lines come from the
// order later), a row not yet handed back, or an error naming a field.
func FuzzGoodsReturn(f *testing.F) {
	c := fuzzConnector(f)
	f.Add([]byte(`{"srid":"1a2b3c","orderId":4100001,"nmId":123,"barcode":"0460","reason":"Брак","returnType":"Возврат брака","status":"Выдан продавцу","orderDt":"2026-10-01","completedDt":"2026-10-20T12:00:00"}`))
	f.Add([]byte(`{"srid":"x","orderId":"7","completedDt":null}`))
	f.Add([]byte(`{"srid":"","orderId":-1,"completedDt":"вчера"}`))
	f.Add([]byte(`{"srid":"a","SRID":"b"}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		it, ok := c.returnItem(raw)
		if !ok {
			if it.Err != nil || it.Return != nil {
				t.Fatalf("a row not handed back yet, with %+v", it)
			}
			return
		}
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
			t.Fatalf("neither a return nor an error: %+v", it)
		}
		r := *it.Return
		if r.OrderID == "" || r.OrderKey == "" || r.CreatedAt.IsZero() || order.CheckKeyID(r.OrderID) != "" {
			t.Fatalf("a mapped return without its order or date: %+v", r)
		}
		back, err := order.ParseReturn(r.Canonical())
		if err == nil && !bytes.Equal(back.Canonical(), r.Canonical()) {
			t.Fatalf("canonical form does not round-trip: %s", r.Canonical())
		}
	})
}
