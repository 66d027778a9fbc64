package yandexmarket

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"golang.org/x/time/rate"

	"github.com/ordersync/ordersync/internal/stock"
)

// Yandex's rules for POST /v3/businesses/{businessId}/offers/stocks/update: at
// most StockBatchSize unique (sku, partnerWarehouseId) pairs a request, counts
// from 0 to StockMaxCount, and this many requests a minute.
const StockBusinessRequestsPerMinute = 50

// businessStock is the state of a StockSender on the business API.
type businessStock struct {
	warehouse     int64  // the partner warehouse, a JSON integer on the wire
	warehouseText string // as configured, for Warehouse
	perMinute     int
	// lim paces the requests: one at a time, a minute / perMinute apart.
	lim *rate.Limiter
}

// newBusinessStock validates the business API's part of cfg. Errors name the
// configuration key.
func (c *Connector) newBusinessStock(cfg StockConfig) (*businessStock, error) {
	src := c.cfg.Source
	if c.cfg.BusinessID == "" {
		return nil, fmt.Errorf("%s: %s is required with %s %q (the cabinet whose partner warehouse is updated)",
			src, keyBusinessID, keyStockAPI, StockAPIBusiness)
	}
	text := strings.TrimSpace(cfg.PartnerWarehouseID)
	if text == "" {
		return nil, fmt.Errorf("%s: %s is required with %s %q (the seller's warehouse id in Yandex Market)",
			src, keyPartnerWarehouseID, keyStockAPI, StockAPIBusiness)
	}
	wh, err := strconv.ParseInt(text, 10, 64)
	if err != nil || wh <= 0 {
		return nil, fmt.Errorf("%s: %s: %q is not a warehouse id (a whole number greater than 0)", src, keyPartnerWarehouseID, text)
	}
	switch {
	case cfg.RequestsPerMinute == 0:
		cfg.RequestsPerMinute = StockBusinessRequestsPerMinute
	case cfg.RequestsPerMinute < 0 || cfg.RequestsPerMinute > StockBusinessRequestsPerMinute:
		return nil, fmt.Errorf("%s: %s must be from 1 to %d, got %d", src, keyStockRequestsPerMinute,
			StockBusinessRequestsPerMinute, cfg.RequestsPerMinute)
	}
	lim := rate.NewLimiter(rate.Every(time.Minute/time.Duration(cfg.RequestsPerMinute)), 1)
	// No credit at the start: a process started again at once must not send
	// sooner than the one before it would have.
	lim.Allow()
	return &businessStock{warehouse: wh, warehouseText: text, perMinute: cfg.RequestsPerMinute, lim: lim}, nil
}

type stockSKUItem struct {
	SKU                string `json:"sku"`
	PartnerWarehouseID int64  `json:"partnerWarehouseId"`
	Count              int64  `json:"count"`
	UpdatedAt          string `json:"updatedAt"`
}

// sendBusiness sends the kept updates of a screened batch to the partner
// warehouse in one request, after the request limiter's wait.
func (s *StockSender) sendBusiness(ctx context.Context, batch []stock.Update, results []stock.Result, kept []int, stamp string) ([]stock.Result, error) {
	b := s.business
	items := make([]stockSKUItem, len(kept))
	for n, i := range kept {
		items[n] = stockSKUItem{SKU: batch[i].MarketSKU, PartnerWarehouseID: b.warehouse, Count: batch[i].Amount, UpdatedAt: stamp}
	}
	what := fmt.Sprintf("update stocks (%d SKUs, business %s, warehouse %d)", len(items), s.c.cfg.BusinessID, b.warehouse)
	if err := b.lim.Wait(ctx); err != nil {
		return nil, fmt.Errorf("%s: %s: waiting for the limit of %d requests a minute: %w", s.c.cfg.Source, what, b.perMinute, err)
	}
	body, _ := json.Marshal(map[string]any{"skuItems": items})
	resp, err := s.c.http.R().SetContext(ctx).SetHeader("Content-Type", "application/json").SetBody(body).
		Post("/v3/businesses/" + s.c.cfg.BusinessID + "/offers/stocks/update")
	return s.answer(what, resp, err, results, kept)
}
