package bitrix24_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ordersync/ordersync/connectors/bitrix24"
	"github.com/ordersync/ordersync/internal/order"
	"github.com/ordersync/ordersync/internal/sim/bitrix24sim"
)

const (
	goodDeal = `{"result":{"ID":"42","TITLE":"Заказ","STAGE_ID":"WON","CURRENCY_ID":"KZT","CONTACT_ID":"0",` +
		`"COMPANY_ID":"0","DATE_CREATE":"2026-09-16T10:00:00+05:00","COMMENTS":"строка 1\nстрока 2"}}`
	goodRows = `{"result":[{"PRODUCT_ID":450,"PRODUCT_NAME":"Чайник","PRICE":1500,"QUANTITY":2}]}`
)

// portal answers crm.deal.get and crm.deal.productrows.get with the bodies given,
// exactly as written (the simulator would re-encode them).
func portal(t *testing.T, deal, rows string) *bitrix24.Client {
	t.Helper()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case strings.HasSuffix(r.URL.Path, "/crm.deal.get"):
			io.WriteString(w, deal)
		case strings.HasSuffix(r.URL.Path, "/crm.deal.productrows.get"):
			io.WriteString(w, rows)
		default:
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `{"error":"","error_description":"Not found"}`)
		}
	}))
	t.Cleanup(ts.Close)
	c, err := bitrix24.New(bitrix24.Config{RESTURL: ts.URL + "/rest/1/" + code + "/", RatePerSecond: -1,
		SKUField: bitrix24.SKUFromProductID, Warehouse: "WH1"})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestFetchRefusesBadDealsNamingTheField(t *testing.T) {
	t.Parallel()
	c := portal(t, goodDeal, goodRows)
	o, err := c.Fetch(context.Background(), "42")
	if err != nil || o.Comment != "Заказ\nстрока 1\nстрока 2" {
		t.Fatalf("the good deal: %+v, %v", o, err)
	}
	for _, tc := range []struct {
		name, deal, rows, field string
	}{
		{"year 10000", strings.Replace(goodDeal, "2026-09-16T10:00:00+05:00", "10000-01-01T00:00:00+05:00", 1), goodRows, "created_at"},
		{"year 9999 is past 1C's dates", strings.Replace(goodDeal, "2026-09-16T10:00:00+05:00", "9999-12-31T23:59:59+05:00", 1), goodRows, "created_at"},
		{"one-digit hour", strings.Replace(goodDeal, "2026-09-16T10:00:00+05:00", "2026-09-16T1:00:00+05:00", 1), goodRows, "created_at"},
		{"NUL in the title", strings.Replace(goodDeal, `"Заказ"`, `"За\u0000каз"`, 1), goodRows, "comment"},
		{"NUL in a product name", goodDeal, strings.Replace(goodRows, `"Чайник"`, `"Чай\u0000ник"`, 1), "lines[0].name"},
		{"invalid UTF-8 in the title", strings.Replace(goodDeal, `"Заказ"`, "\"За\xffказ\"", 1), goodRows, "crm.deal.get result.TITLE"},
		{"invalid UTF-8 in a product name", goodDeal, strings.Replace(goodRows, `"Чайник"`, "\"Чай\xffник\"", 1), "crm.deal.productrows.get result[0].PRODUCT_NAME"},
		{"case-variant key", strings.Replace(goodDeal, `"TITLE":"Заказ"`, `"TITLE":"Заказ","Title":"Другой"`, 1), goodRows, "crm.deal.get result.Title"},
		{"duplicate key", strings.Replace(goodDeal, `"TITLE":"Заказ"`, `"TITLE":"Заказ","TITLE":"Другой"`, 1), goodRows, "crm.deal.get result.TITLE"},
		{"lone surrogate", strings.Replace(goodDeal, `"Заказ"`, `"\udc00"`, 1), goodRows, "crm.deal.get result.TITLE"},
		{"a price of 50 digits", goodDeal, strings.Replace(goodRows, `"PRICE":1500`, `"PRICE":1`+strings.Repeat("0", 49), 1), "lines[0].price"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := portal(t, tc.deal, tc.rows).Fetch(context.Background(), "42")
			var ve *order.ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("Fetch = %v, want a *order.ValidationError (the deal's fault, not worth retrying)", err)
			}
			found := false
			for _, p := range ve.Problems {
				found = found || p.Field == tc.field
			}
			if !found {
				t.Fatalf("Fetch = %v, want a problem naming %s", err, tc.field)
			}
		})
	}
}

// A contact whose name holds a NUL, as the simulator serves it.
func TestFetchRefusesANULInTheContactsName(t *testing.T) {
	t.Parallel()
	e := newEnv(t, bitrix24sim.Options{}, bitrix24.Config{Warehouse: "WH1"})
	e.sim.AddDeal(wonDeal())
	e.sim.AddContact(bitrix24sim.Contact{ID: "7", Name: "Иван\x00", LastName: "Петров"})
	_, err := e.client.Fetch(context.Background(), "42")
	var ve *order.ValidationError
	if !errors.As(err, &ve) || !strings.Contains(err.Error(), "customer.name") {
		t.Fatalf("Fetch = %v, want customer.name refused", err)
	}
}
