package yandexmarket

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/go-resty/resty/v2"
	"golang.org/x/time/rate"

	"github.com/ordersync/ordersync/connectors"
	"github.com/ordersync/ordersync/internal/order"
	"github.com/ordersync/ordersync/internal/outbox"
	"github.com/ordersync/ordersync/internal/stock"
)

// Yandex's rules for PUT /v2/campaigns/{campaignId}/offers/stocks.
const (
	// StockBatchSize is the most SKUs one request carries.
	StockBatchSize = 2000
	// StockItemsPerMinute is the most SKUs a cabinet updates a minute.
	StockItemsPerMinute = 100_000
	// StockMaxCount is the largest count Yandex takes.
	StockMaxCount = 2_000_000_000
)

// Stock APIs (StockConfig.API).
const (
	// StockAPICampaign is PUT /v2/campaigns/{campaignId}/offers/stocks.
	StockAPICampaign = "campaign"
	// StockAPIBusiness is POST /v3/businesses/{businessId}/offers/stocks/update,
	// for a cabinet without warehouse groups.
	StockAPIBusiness = "business"
)

const (
	keyStockWarehouse         = "connectors.yandex_market.stock_warehouse"
	keyStockAPI               = "connectors.yandex_market.stock_api"
	keyPartnerWarehouseID     = "connectors.yandex_market.partner_warehouse_id"
	keyStockRequestsPerMinute = "connectors.yandex_market.stock_requests_per_minute"
)

// StockConfig configures the stock sender.
type StockConfig struct {
	// Warehouse is the 1C warehouse whose stock is published to the campaign
	// (connectors.yandex_market.stock_warehouse), default Config.Warehouse.
	Warehouse string
	// ItemsPerMinute bounds the SKUs sent a minute, default StockItemsPerMinute; a
	// lower value leaves room for the seller's other tools.
	ItemsPerMinute int
	// Now stamps updatedAt when the context carries no snapshot time
	// (WithSnapshotTime); default time.Now.
	Now func() time.Time
	// API is which method stock is sent with (connectors.yandex_market.stock_api):
	// StockAPICampaign (default) or StockAPIBusiness, which Yandex takes only from
	// a cabinet without warehouse groups and which needs Config.BusinessID.
	API string
	// PartnerWarehouseID is the seller's warehouse in Yandex that StockAPIBusiness
	// updates (connectors.yandex_market.partner_warehouse_id), required with it.
	PartnerWarehouseID string
	// RequestsPerMinute bounds the StockAPIBusiness requests a minute
	// (connectors.yandex_market.stock_requests_per_minute), default
	// StockBusinessRequestsPerMinute; a lower value leaves room for the seller's
	// other tools.
	RequestsPerMinute int
}

// StockSender publishes stock to the campaign with PUT …/offers/stocks, or to a
// partner warehouse of the cabinet with POST v3 …/offers/stocks/update
// (StockConfig.API): a stock.Sender. It holds the limiter of SKUs or requests a
// minute, so make one per process and share it; it is safe for concurrent use.
type StockSender struct {
	c         *Connector
	warehouse string
	lim       *rate.Limiter
	perMinute int
	now       func() time.Time

	// business is set with StockAPIBusiness.
	business *businessStock
}

var _ stock.Sender = (*StockSender)(nil)

type snapshotTimeKey struct{}

// WithSnapshotTime returns a context whose Sends stamp every count with t (the
// time 1C's snapshot was taken), so that Yandex can tell an older value from a
// newer one. stock.Sender's Send carries no time, so the caller that publishes a
// snapshot sets it.
func WithSnapshotTime(ctx context.Context, t time.Time) context.Context {
	return context.WithValue(ctx, snapshotTimeKey{}, t)
}

// StockSender returns the connector's stock sender. Errors name the configuration
// key.
func (c *Connector) StockSender(cfg StockConfig) (*StockSender, error) {
	wh := strings.TrimSpace(cfg.Warehouse)
	if wh == "" {
		wh = strings.TrimSpace(c.cfg.Warehouse)
	}
	if wh == "" {
		return nil, fmt.Errorf("%s: %s is required: the 1C warehouse whose stock the campaign is sent", c.cfg.Source, keyStockWarehouse)
	}
	switch {
	case cfg.ItemsPerMinute == 0:
		cfg.ItemsPerMinute = StockItemsPerMinute
	case cfg.ItemsPerMinute < 0 || cfg.ItemsPerMinute > StockItemsPerMinute:
		return nil, fmt.Errorf("%s: stock items per minute must be from 1 to %d, got %d", c.cfg.Source, StockItemsPerMinute, cfg.ItemsPerMinute)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	switch cfg.API = strings.TrimSpace(cfg.API); cfg.API {
	case "", StockAPICampaign:
	case StockAPIBusiness:
		b, err := c.newBusinessStock(cfg)
		if err != nil {
			return nil, err
		}
		return &StockSender{c: c, warehouse: wh, now: cfg.Now, business: b}, nil
	default:
		return nil, fmt.Errorf("%s: %s: %q is not %q or %q", c.cfg.Source, keyStockAPI, cfg.API, StockAPICampaign, StockAPIBusiness)
	}
	perSecond := rate.Limit(float64(cfg.ItemsPerMinute) / 60)
	return &StockSender{c: c, warehouse: wh, perMinute: cfg.ItemsPerMinute, now: cfg.Now,
		lim: rate.NewLimiter(perSecond, max(StockBatchSize, cfg.ItemsPerMinute/60))}, nil
}

// Marketplace is the connector's source, "ym" by default.
func (s *StockSender) Marketplace() string { return s.c.cfg.Source }

// BatchSize is Yandex's 2000 SKUs per request (of one warehouse, with the
// business API).
func (s *StockSender) BatchSize() int { return StockBatchSize }

// MinResend is 0: Yandex publishes no wait between two updates of one SKU.
func (s *StockSender) MinResend() time.Duration { return 0 }

// MaxAmount is the largest count Yandex takes.
func (s *StockSender) MaxAmount() int64 { return StockMaxCount }

// Timeout is the connector's request timeout plus the longest wait of the SKU
// limiter for a full batch (of the request limiter, with the business API), and
// the shared client's own.
func (s *StockSender) Timeout() time.Duration {
	t := s.c.cfg.Timeout
	if s.business != nil {
		t += time.Minute / time.Duration(s.business.perMinute)
	} else {
		t += time.Duration(float64(time.Minute) * float64(StockBatchSize) / float64(s.perMinute))
	}
	if rps := s.c.cfg.RatePerSecond; rps > 0 {
		t += time.Duration(float64(time.Second) / rps)
	}
	return t
}

// Warehouse is the campaign id for the configured 1C warehouse, or the partner
// warehouse id with the business API.
func (s *StockSender) Warehouse(warehouse string) (string, bool) {
	if warehouse != s.warehouse {
		return "", false
	}
	if s.business != nil {
		return s.business.warehouseText, true
	}
	return s.c.cfg.CampaignID, true
}

type stockSKU struct {
	SKU   string          `json:"sku"`
	Items []stockSKUCount `json:"items"`
}

type stockSKUCount struct {
	Count     int64  `json:"count"`
	UpdatedAt string `json:"updatedAt"`
}

// Send sends one batch of the warehouse's stock in one request: sku is the
// update's MarketSKU (the seller's offerId), count its Amount, updatedAt the
// snapshot time (WithSnapshotTime) or now; with the business API every item names
// the partner warehouse, and the requests are paced to RequestsPerMinute. An
// update without a SKU, with a negative amount or whose SKU another update of the
// batch already carries is Refused without being sent. A 200 publishes every item
// sent; a 400 (Yandex finds the request invalid) refuses every item with Yandex's
// reason, so the publish goes on.
//
// Errors fail the whole batch: 420 or 429 → *outbox.DeliveryError with RetryAfter
// (the wait Yandex gives, else a minute); refused credentials → a
// *connectors.AuthError naming connectors.yandex_market.api_key; another status or
// a transport error → a plain error, for the caller to retry.
func (s *StockSender) Send(ctx context.Context, warehouse string, batch []stock.Update) ([]stock.Result, error) {
	src := s.c.cfg.Source
	if len(batch) == 0 {
		return nil, nil
	}
	if len(batch) > StockBatchSize {
		return nil, fmt.Errorf("%s: update stocks: %d items in one batch, at most %d", src, len(batch), StockBatchSize)
	}
	if warehouse != s.warehouse {
		return nil, fmt.Errorf("%s: update stocks: 1C warehouse %q is not %s (%q)", src, warehouse, keyStockWarehouse, s.warehouse)
	}
	at, ok := ctx.Value(snapshotTimeKey{}).(time.Time)
	if !ok || at.IsZero() {
		at = s.now()
	}
	stamp := at.Format(time.RFC3339)
	results, kept := screen(batch)
	if len(kept) == 0 {
		return results, nil
	}
	if s.business != nil {
		return s.sendBusiness(ctx, batch, results, kept, stamp)
	}
	skus := make([]stockSKU, len(kept))
	for n, i := range kept {
		skus[n] = stockSKU{SKU: batch[i].MarketSKU, Items: []stockSKUCount{{Count: batch[i].Amount, UpdatedAt: stamp}}}
	}
	what := fmt.Sprintf("update stocks (%d SKUs, campaign %s)", len(skus), s.c.cfg.CampaignID)
	if err := s.lim.WaitN(ctx, len(skus)); err != nil {
		return nil, fmt.Errorf("%s: %s: waiting for the limit of %d SKUs a minute: %w", src, what, s.perMinute, err)
	}
	body, _ := json.Marshal(map[string]any{"skus": skus})
	resp, err := s.c.http.R().SetContext(ctx).SetHeader("Content-Type", "application/json").SetBody(body).
		Put(s.c.campaignPath("/offers/stocks"))
	return s.answer(what, resp, err, results, kept)
}

// screen gives every update of the batch its result and returns the indices of
// the ones to send: an update without a SKU, with a count Yandex does not take or
// whose SKU an earlier one carries is Refused here.
func screen(batch []stock.Update) ([]stock.Result, []int) {
	results := make([]stock.Result, len(batch))
	index := map[string]int{}
	kept := make([]int, 0, len(batch))
	for i, u := range batch {
		results[i].SKU = u.SKU
		switch j, dup := index[u.MarketSKU]; {
		case strings.TrimSpace(u.MarketSKU) == "":
			results[i].Outcome, results[i].Reason = stock.Refused, "no Yandex Market SKU (offerId)"
		case u.Amount < 0 || u.Amount > StockMaxCount:
			results[i].Outcome, results[i].Reason = stock.Refused, fmt.Sprintf("count %d is not from 0 to %d", u.Amount, int64(StockMaxCount))
		case dup:
			results[i].Outcome = stock.Refused
			results[i].Reason = fmt.Sprintf("SKU %q is sent for 1C SKU %q in the same batch", u.MarketSKU, batch[j].SKU)
		default:
			index[u.MarketSKU] = i
			kept = append(kept, i)
		}
	}
	return results, kept
}

// answer reads Yandex's answer to a stock update of the kept updates into their
// results; see Send.
func (s *StockSender) answer(what string, resp *resty.Response, err error, results []stock.Result, kept []int) ([]stock.Result, error) {
	src := s.c.cfg.Source
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %w", src, what, err)
	}
	switch st := resp.StatusCode(); {
	case resp.IsSuccess():
		for _, i := range kept {
			results[i].Outcome = stock.Published
		}
		return results, nil
	case st == http.StatusTooManyRequests:
		wait, ok := connectors.RetryAfter(resp.Header().Get("Retry-After"), time.Now())
		if !ok || wait <= 0 {
			wait = time.Minute
		}
		return nil, &outbox.DeliveryError{Err: connectors.Check(src, keyAPIKey, what, resp, nil), RetryAfter: wait}
	case st == http.StatusBadRequest:
		reason := "Yandex Market refused the request (HTTP 400): " + errorText(resp.Body())
		for _, i := range kept {
			results[i].Outcome, results[i].Reason = stock.Refused, reason
		}
		return results, nil
	default:
		return nil, connectors.Check(src, keyAPIKey, what, resp, nil)
	}
}

// errorText is the errors of a Yandex error answer, "code: message; …", bounded.
func errorText(body []byte) string {
	var ans struct {
		Errors []struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"errors"`
	}
	var parts []string
	if json.Unmarshal(body, &ans) == nil {
		for _, e := range ans.Errors {
			parts = append(parts, strings.TrimSuffix(e.Code+": "+e.Message, ": "))
		}
	}
	s := strings.Join(parts, "; ")
	if s == "" {
		s = string(body)
	}
	s = order.SafeText(s)
	if r := []rune(s); len(r) > 200 {
		s = string(r[:200]) + "…"
	}
	return s
}
