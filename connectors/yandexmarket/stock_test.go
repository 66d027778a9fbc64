package yandexmarket_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/ordersync/ordersync/connectors/yandexmarket"
	"github.com/ordersync/ordersync/internal/outbox"
	"github.com/ordersync/ordersync/internal/sim/ymsim"
	"github.com/ordersync/ordersync/internal/stock"
)

func TestStockSenderStampsTheSnapshotTime(t *testing.T) {
	t.Parallel()
	s := startSim(t, ymsim.Options{})
	c := newConn(t, s, nil)
	sender, err := c.StockSender(yandexmarket.StockConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if id, ok := sender.Warehouse("WH-YM"); !ok || id != strconv.Itoa(campaign) {
		t.Fatalf("warehouse WH-YM → %q %v, want the campaign", id, ok)
	}
	if sender.BatchSize() != 2000 || sender.Marketplace() != "ym" {
		t.Fatalf("batch %d marketplace %s", sender.BatchSize(), sender.Marketplace())
	}
	batch := make([]stock.Update, 0, 2000)
	for i := range 1998 {
		batch = append(batch, stock.Update{SKU: fmt.Sprint("1C-", i), MarketSKU: fmt.Sprint("YM-", i), Amount: int64(i)})
	}
	batch = append(batch,
		stock.Update{SKU: "1C-dup", MarketSKU: "YM-5", Amount: 1},
		stock.Update{SKU: "1C-none", Amount: 1})
	snap := time.Date(2026, 9, 16, 10, 0, 0, 0, time.UTC)
	results, err := sender.Send(yandexmarket.WithSnapshotTime(context.Background(), snap), "WH-YM", batch)
	if err != nil {
		t.Fatal(err)
	}
	counts := map[stock.Outcome]int{}
	for _, r := range results {
		counts[r.Outcome]++
	}
	if counts[stock.Published] != 1998 || counts[stock.Refused] != 2 {
		t.Fatalf("outcomes %v, want 1998 published and 2 refused", counts)
	}
	got := s.Stocks()
	if len(got) != 1998 || got["YM-7"].Count != 7 || !got["YM-7"].UpdatedAt.Equal(snap) {
		t.Fatalf("%d SKUs, YM-7 %+v; want 1998 and 7 at %v", len(got), got["YM-7"], snap)
	}
	if s.BadStockRequests() != 0 || s.StockCalls() != 1 {
		t.Fatalf("bad %d calls %d, want 0 and 1", s.BadStockRequests(), s.StockCalls())
	}
}

func TestStockSenderRateLimited(t *testing.T) {
	t.Parallel()
	s := startSim(t, ymsim.Options{})
	c := newConn(t, s, nil)
	sender, err := c.StockSender(yandexmarket.StockConfig{})
	if err != nil {
		t.Fatal(err)
	}
	s.Throttle(1)
	_, err = sender.Send(context.Background(), "WH-YM", []stock.Update{{SKU: "a", MarketSKU: "A", Amount: 3}})
	var de *outbox.DeliveryError
	if !errors.As(err, &de) || de.RetryAfter <= 0 {
		t.Fatalf("err %v, want a DeliveryError with RetryAfter", err)
	}
	if _, err := c.StockSender(yandexmarket.StockConfig{Warehouse: " "}); err != nil {
		t.Fatalf("the connector's warehouse is the default: %v", err)
	}
}
