package yandexmarket_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/ordersync/ordersync/connectors/yandexmarket"
	"github.com/ordersync/ordersync/internal/outbox"
	"github.com/ordersync/ordersync/internal/sim/ymsim"
	"github.com/ordersync/ordersync/internal/stock"
)

const partnerWH = "880011"

func businessSender(t *testing.T, s *ymsim.YM, mod func(*yandexmarket.StockConfig)) *yandexmarket.StockSender {
	t.Helper()
	cfg := yandexmarket.StockConfig{API: yandexmarket.StockAPIBusiness, PartnerWarehouseID: partnerWH}
	if mod != nil {
		mod(&cfg)
	}
	sender, err := newConn(t, s, nil).StockSender(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return sender
}

func TestBusinessStockConfigErrorsNameTheKey(t *testing.T) {
	t.Parallel()
	s := startSim(t, ymsim.Options{PartnerWarehouses: []string{partnerWH}})
	for _, tc := range []struct {
		mod  func(*yandexmarket.Config)
		cfg  yandexmarket.StockConfig
		want string
	}{
		{nil, yandexmarket.StockConfig{API: "shop"}, "connectors.yandex_market.stock_api"},
		{nil, yandexmarket.StockConfig{API: "business"}, "connectors.yandex_market.partner_warehouse_id"},
		{nil, yandexmarket.StockConfig{API: "business", PartnerWarehouseID: "WH-1"}, "connectors.yandex_market.partner_warehouse_id"},
		{func(c *yandexmarket.Config) { c.BusinessID = "" }, yandexmarket.StockConfig{API: "business", PartnerWarehouseID: partnerWH},
			"connectors.yandex_market.business_id"},
		{nil, yandexmarket.StockConfig{API: "business", PartnerWarehouseID: partnerWH, RequestsPerMinute: 51},
			"connectors.yandex_market.stock_requests_per_minute"},
	} {
		_, err := newConn(t, s, tc.mod).StockSender(tc.cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: err %v, want one naming %s", tc.cfg, err, tc.want)
		}
	}
}

// TestBusinessStockPace: the sender waits a minute / 50 between requests, one at
// a time, from its start.
func TestBusinessStockPace(t *testing.T) {
	t.Parallel()
	s := startSim(t, ymsim.Options{PartnerWarehouses: []string{partnerWH}})
	limit, burst, ok := yandexmarket.StockRequestPace(businessSender(t, s, nil))
	if want := rate.Every(time.Minute / ymsim.MaxStockV3PerMinute); !ok || limit != want || burst != 1 {
		t.Fatalf("pace %v burst %d (%v), want %v and 1", limit, burst, ok, want)
	}
	limit, _, _ = yandexmarket.StockRequestPace(businessSender(t, s, func(c *yandexmarket.StockConfig) { c.RequestsPerMinute = 10 }))
	if limit != rate.Every(6*time.Second) {
		t.Fatalf("pace %v at 10 a minute", limit)
	}
	campaignSender, err := newConn(t, s, nil).StockSender(yandexmarket.StockConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, ok := yandexmarket.StockRequestPace(campaignSender); ok {
		t.Fatal("the campaign sender has a request pace")
	}
}

func TestBusinessStockSendsBatchesToThePartnerWarehouse(t *testing.T) {
	t.Parallel()
	s := startSim(t, ymsim.Options{PartnerWarehouses: []string{partnerWH}})
	sender := businessSender(t, s, nil)
	yandexmarket.UnpaceStockRequests(sender)
	if id, ok := sender.Warehouse("WH-YM"); !ok || id != partnerWH {
		t.Fatalf("warehouse WH-YM → %q %v, want the partner warehouse", id, ok)
	}
	if sender.BatchSize() != 2000 || sender.Marketplace() != "ym" {
		t.Fatalf("batch %d marketplace %s", sender.BatchSize(), sender.Marketplace())
	}
	snap := time.Date(2026, 9, 16, 10, 0, 0, 0, time.UTC)
	ctx := yandexmarket.WithSnapshotTime(context.Background(), snap)
	const total = 4500
	published := 0
	for start := 0; start < total; start += sender.BatchSize() {
		var batch []stock.Update
		for i := start; i < min(start+sender.BatchSize(), total); i++ {
			batch = append(batch, stock.Update{SKU: fmt.Sprint("1C-", i), MarketSKU: fmt.Sprint("YM-", i), Amount: int64(i)})
		}
		if start == 0 {
			batch[len(batch)-1] = stock.Update{SKU: "1C-dup", MarketSKU: "YM-5", Amount: 1}
		}
		results, err := sender.Send(ctx, "WH-YM", batch)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range results {
			if r.Outcome == stock.Published {
				published++
			}
		}
	}
	got := s.StocksV3()
	if published != total-1 || len(got) != total-1 {
		t.Fatalf("published %d, the simulator holds %d; want %d", published, len(got), total-1)
	}
	if v := got[partnerWH+"/YM-4321"]; v.Count != 4321 || !v.UpdatedAt.Equal(snap) {
		t.Fatalf("YM-4321 %+v, want 4321 at %v", v, snap)
	}
	if s.StockV3Calls() != 3 || s.BadStockV3Requests() != 0 || s.Violations() != 0 || len(s.Stocks()) != 0 {
		t.Fatalf("calls %d bad %d violations %d campaign stocks %d; want 3, 0, 0, 0",
			s.StockV3Calls(), s.BadStockV3Requests(), s.Violations(), len(s.Stocks()))
	}
}

// TestBusinessStockRefusedWarehouse: a warehouse the cabinet does not have is
// Yandex's 400, every item refused with its reason; a 420 fails the batch with
// the wait.
func TestBusinessStockRefusedWarehouse(t *testing.T) {
	t.Parallel()
	s := startSim(t, ymsim.Options{PartnerWarehouses: []string{"1"}})
	sender := businessSender(t, s, nil)
	yandexmarket.UnpaceStockRequests(sender)
	results, err := sender.Send(context.Background(), "WH-YM", []stock.Update{{SKU: "a", MarketSKU: "A", Amount: 3}})
	if err != nil {
		t.Fatal(err)
	}
	if results[0].Outcome != stock.Refused || !strings.Contains(results[0].Reason, "HTTP 400") {
		t.Fatalf("result %+v, want refused with Yandex's reason", results[0])
	}
	if s.BadStockV3Requests() != 1 || len(s.StocksV3()) != 0 {
		t.Fatalf("bad %d stocks %d", s.BadStockV3Requests(), len(s.StocksV3()))
	}
	s.Throttle(1)
	_, err = sender.Send(context.Background(), "WH-YM", []stock.Update{{SKU: "a", MarketSKU: "A", Amount: 3}})
	var de *outbox.DeliveryError
	if !errors.As(err, &de) || de.RetryAfter <= 0 {
		t.Fatalf("err %v, want a DeliveryError with RetryAfter", err)
	}
}
