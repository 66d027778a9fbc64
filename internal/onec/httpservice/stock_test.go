package httpservice

import (
	"context"
	"strings"
	"testing"

	"github.com/ordersync/ordersync/internal/onec"
)

func TestStockReadsExactDecimalsAndNamesABadItem(t *testing.T) {
	good := `{"warehouse":"WH1","taken_at":"2026-09-16T10:00:00","items":[{"sku":"A","quantity":12.500,"price":12345678901234567890.123456789},{"sku":"B","quantity":-3,"price":0}]}`
	s := newServer(t, reply(200, "application/json", good))
	st, err := newClient(t, s.URL).Stock(context.Background(), "WH1")
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Items) != 2 || st.Items[0].Quantity.String() != "12.5" || st.Items[0].Price.String() != "12345678901234567890.123456789" ||
		st.Items[1].Quantity.String() != "-3" {
		t.Fatalf("stock = %+v", st)
	}
	for _, tc := range []struct{ body, want string }{
		{`{"warehouse":"WH1","items":[{"sku":"A","quantity":1,"price":1},{"sku":"B","quantity":"много","price":1}]}`, `items[1] (sku "B"): quantity "много" is not a number`},
		{`{"warehouse":"WH1","items":[{"sku":"A","quantity":"12","price":1}]}`, `items[0] (sku "A"): quantity "12" is not a number`},
		{`{"warehouse":"WH1","items":[{"sku":"A","price":1}]}`, `items[0] (sku "A"): quantity is missing`},
		{`{"warehouse":"WH1","items":[{"quantity":1,"price":1}]}`, `items[0] has no sku`},
		{`{"warehouse":"WH1","items":[{"sku":"A","quantity":1,"price":true}]}`, `items[0] (sku "A"): price true is not a number`},
	} {
		s := newServer(t, reply(200, "application/json", tc.body))
		_, err := newClient(t, s.URL).Stock(context.Background(), "WH1")
		if err == nil || !strings.Contains(err.Error(), tc.want) || onec.ClassOf(err) != onec.Permanent {
			t.Errorf("stock %s: err = %v (class %v), want a permanent error containing %q", tc.body, err, onec.ClassOf(err), tc.want)
		}
	}
}
