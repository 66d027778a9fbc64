package yandexmarket_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/ordersync/ordersync/connectors/yandexmarket"
	"github.com/ordersync/ordersync/internal/sim/ymsim"
	"github.com/ordersync/ordersync/internal/stock"
)

func TestReadBackWhatWasSent(t *testing.T) {
	t.Parallel()
	s := startSim(t, ymsim.Options{})
	sender, err := newConn(t, s, nil).StockSender(yandexmarket.StockConfig{})
	if err != nil {
		t.Fatal(err)
	}
	const total = 250
	batch := make([]stock.Update, total)
	for i := range batch {
		batch[i] = stock.Update{SKU: fmt.Sprint("1C-", i), MarketSKU: fmt.Sprintf("YM-%03d", i), Amount: int64(i * 2)}
	}
	if _, err := sender.Send(context.Background(), "WH-YM", batch); err != nil {
		t.Fatal(err)
	}
	all, err := sender.ReadBack(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != total || all["YM-123"] != 246 {
		t.Fatalf("read %d SKUs, YM-123 %d; want %d and 246", len(all), all["YM-123"], total)
	}
	if s.StockReads() != 3 || s.BadStockReads() != 0 {
		t.Fatalf("reads %d bad %d, want 3 pages of %d and none bad", s.StockReads(), s.BadStockReads(), yandexmarket.StockReadLimit)
	}
	var want []string
	for i := range 150 {
		want = append(want, fmt.Sprintf("YM-%03d", i))
	}
	want = append(want, "YM-007", "NOT-SENT")
	some, err := sender.ReadBack(context.Background(), want)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := some["NOT-SENT"]; len(some) != 150 || ok || some["YM-149"] != 298 || some["YM-000"] != 0 {
		t.Fatalf("read %d SKUs: %v", len(some), some)
	}
	if s.StockReads() != 5 || s.BadStockReads() != 0 {
		t.Fatalf("reads %d bad %d, want 2 more of at most %d SKUs", s.StockReads(), s.BadStockReads(), yandexmarket.StockReadLimit)
	}
}
