package publish_test

import (
	"context"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/ordersync/ordersync/internal/stock"
	"github.com/ordersync/ordersync/internal/stock/publish"
)

// The marketplace is told 1C's quantity less the largest reserve that matches it
// and less what orders not yet in 1C hold, never below 0.
func TestPublishHoldsBackReservesAndPending(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	f := newFake()
	f.batch = 10
	one, two := decimal.NewFromInt(1), decimal.NewFromInt(2)
	pending := map[string]decimal.Decimal{"B": one, "C": two}
	p := publish.New(publish.Config{Sender: f, Store: w.st, Now: time.Now,
		Reserves: stock.Reserves{
			{Account: stock.AnyAccount, SKU: "*", Quantity: one},
			{Account: stock.Ozon, SKU: "A", Quantity: two},
			{Account: stock.Wildberries, SKU: "*", Quantity: decimal.NewFromInt(100)}, // another account
		},
		Pending: func(_ context.Context, wh string) (map[string]decimal.Decimal, error) {
			if wh != "WH1" {
				t.Errorf("pending read for %s, want WH1", wh)
			}
			return pending, nil
		},
	})
	if err := p.Publish(context.Background(), w.snapshot("A=5", "B=5", "C=2", "D=0.5")); err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"A": 3, "B": 3, "C": 0, "D": 0}
	for sku, n := range want {
		if got, ok := f.holds[sku]; !ok || got != n {
			t.Errorf("%s: the marketplace holds %d (sent: %v), want %d", sku, got, ok, n)
		}
	}
}
