// Package yandexmarket is the Yandex Market connector. It lists a seller's orders
// through the Partner API (header Api-Key), per shop or per cabinet, maps them to
// the canonical order of internal/order, and, once 1C holds an order, writes the 1C
// number back to Yandex and marks the order ready to ship, through the outbox. It
// also publishes stock (StockSender) and checks the configured ids (Check). It owns
// the Yandex Market wire format and nothing else.
//
// Facts it relies on, from Yandex's published reference: GET
// /v2/campaigns/{campaignId}/orders (updatedAtFrom and updatedAtTo in ISO 8601
// with an offset, limit at most 50, page_token) and POST
// /v1/businesses/{businessId}/orders (a dates filter in the body, the same paging)
// both answer {orders, paging:{nextPageToken}} and list at most 30 days a call.
// The cabinet (businessId), the shop (campaignId) and the shop id shown in the
// cabinet are three different numbers, and a wrong one answers an empty list, not
// an error: Check tells them apart. Prices come in RUR, Yandex's code for the
// rouble; creationDate is DD-MM-YYYY HH:MM:SS in Moscow time. A request beyond the
// limit is answered 420 with X-RateLimit-Resource-Until.
package yandexmarket

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/go-resty/resty/v2"

	"github.com/ordersync/ordersync/connectors"
)

// DefaultSource is the default name of the connector and source of its orders.
const DefaultSource = "ym"

// Defaults and limits.
const (
	DefaultBaseURL = "https://api.partner.market.yandex.ru"
	// MaxPageSize is the largest limit Yandex serves of an order listing.
	MaxPageSize     = 50
	DefaultPageSize = MaxPageSize
	// DefaultRatePerSecond keeps under the lowest hourly limit of the methods the
	// connector calls (the cabinet listing and the status change).
	DefaultRatePerSecond = 2.0
	// MaxWindow is the longest period one listing call covers.
	MaxWindow = 30 * 24 * time.Hour
	// Currency is the currency of the orders, as internal/order names it.
	Currency = "RUB"
)

// Orders APIs (Config.OrdersAPI).
const (
	OrdersAPICampaign = "campaign"
	OrdersAPIBusiness = "business"
)

// Order statuses and the substatuses the connector acts on.
const (
	StatusProcessing = "PROCESSING"
	StatusDelivery   = "DELIVERY"
	StatusPickup     = "PICKUP"
	StatusDelivered  = "DELIVERED"
	StatusCancelled  = "CANCELLED"
	SubStarted       = "STARTED"
	SubReadyToShip   = "READY_TO_SHIP"
)

// ImportStatuses are the statuses of an order imported for creation: accepted by
// the Market and not yet delivered. An order waiting for payment or confirmation
// comes again once it changes.
var ImportStatuses = []string{StatusProcessing, StatusDelivery, StatusPickup}

// Configuration keys named in errors.
const (
	keyAPIKey     = "connectors.yandex_market.api_key"
	keyBaseURL    = "connectors.yandex_market.base_url"
	keyBusinessID = "connectors.yandex_market.business_id"
	keyCampaignID = "connectors.yandex_market.campaign_id"
	keyOrdersAPI  = "connectors.yandex_market.orders_api"
	keyPageSize   = "connectors.yandex_market.page_size"
	keySource     = "connectors.yandex_market.source"
)

// Config configures a Connector.
type Config struct {
	// Source is the connector's name and its orders' source, default DefaultSource.
	Source  string
	BaseURL string // default DefaultBaseURL
	// APIKey is the Api-Key token of the seller cabinet.
	APIKey string
	// BusinessID is the cabinet's id; required with OrdersAPI "business", and
	// checked against the shop's cabinet by Check when set.
	BusinessID string
	// CampaignID is the shop's id in the API (not the shop id the cabinet shows):
	// its orders are listed, acknowledged and sent stock.
	CampaignID string
	// OrdersAPI is which listing is used: "campaign" (default, GET
	// /v2/campaigns/{campaignId}/orders) or "business" (POST
	// /v1/businesses/{businessId}/orders, filtered to the campaign).
	OrdersAPI string
	Warehouse string        // the 1C warehouse of these orders
	PageSize  int           // at most MaxPageSize, default MaxPageSize
	Timeout   time.Duration // per request, default 30s
	// RatePerSecond bounds requests to Yandex; 0 is DefaultRatePerSecond, negative
	// is no bound.
	RatePerSecond float64
	// Acknowledge makes the Publisher write the 1C number back and mark orders
	// READY_TO_SHIP; false acknowledges events without calling Yandex.
	Acknowledge bool
	// Location is the zone of creationDate, default Europe/Moscow.
	Location  *time.Location
	Transport http.RoundTripper
	Logger    *slog.Logger
	// Now is the clock the 420 waits are read against, default time.Now.
	Now func() time.Time
}

// Connector lists Yandex Market orders and acknowledges them.
type Connector struct {
	cfg  Config
	http *resty.Client
	log  *slog.Logger

	// locks serialise the acknowledgement of one order within this process; reading
	// the order first does the rest.
	locks connectors.OrderLocks
}

var _ connectors.Marketplace = (*Connector)(nil)

// New validates cfg and returns a connector. Errors name the configuration key.
func New(cfg Config) (*Connector, error) {
	cfg.Source = cmp.Or(cfg.Source, DefaultSource)
	if !validSource(cfg.Source) {
		return nil, fmt.Errorf("yandexmarket: %s: %q must be lower-case letters, digits, - or _", keySource, cfg.Source)
	}
	cfg.BaseURL = cmp.Or(cfg.BaseURL, DefaultBaseURL)
	if u, err := url.Parse(cfg.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("yandexmarket: %s: %q is not an http(s) URL", keyBaseURL, cfg.BaseURL)
	}
	if cfg.APIKey == "" {
		return nil, fmt.Errorf("yandexmarket: %s is required (an Api-Key token of the seller cabinet, Settings → API access)", keyAPIKey)
	}
	if !positive(cfg.CampaignID) {
		return nil, fmt.Errorf("yandexmarket: %s: %q is not a campaign id (a whole number greater than 0, from GET v2/campaigns; not the shop id the cabinet shows)",
			keyCampaignID, cfg.CampaignID)
	}
	cfg.OrdersAPI = cmp.Or(cfg.OrdersAPI, OrdersAPICampaign)
	switch cfg.OrdersAPI {
	case OrdersAPICampaign:
	case OrdersAPIBusiness:
		if cfg.BusinessID == "" {
			return nil, fmt.Errorf("yandexmarket: %s is required with %s %q", keyBusinessID, keyOrdersAPI, OrdersAPIBusiness)
		}
	default:
		return nil, fmt.Errorf("yandexmarket: %s: %q is not %q or %q", keyOrdersAPI, cfg.OrdersAPI, OrdersAPICampaign, OrdersAPIBusiness)
	}
	if cfg.BusinessID != "" && !positive(cfg.BusinessID) {
		return nil, fmt.Errorf("yandexmarket: %s: %q is not a business id (a whole number greater than 0)", keyBusinessID, cfg.BusinessID)
	}
	if cfg.BusinessID != "" && cfg.BusinessID == cfg.CampaignID {
		return nil, fmt.Errorf("yandexmarket: %s and %s are both %s: the cabinet and the shop have different ids", keyBusinessID, keyCampaignID, cfg.CampaignID)
	}
	switch {
	case cfg.PageSize == 0:
		cfg.PageSize = DefaultPageSize
	case cfg.PageSize < 0 || cfg.PageSize > MaxPageSize:
		return nil, fmt.Errorf("yandexmarket: %s: %d is not from 1 to %d", keyPageSize, cfg.PageSize, MaxPageSize)
	}
	if cfg.Location == nil {
		loc, err := time.LoadLocation("Europe/Moscow")
		if err != nil {
			loc = time.FixedZone("Europe/Moscow", 3*60*60)
		}
		cfg.Location = loc
	}
	if cfg.RatePerSecond == 0 {
		cfg.RatePerSecond = DefaultRatePerSecond
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	cfg.Timeout = cmp.Or(cfg.Timeout, 30*time.Second)
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("connector", cfg.Source)
	base := cfg.Transport
	if base == nil {
		base = http.DefaultTransport.(*http.Transport).Clone()
	}
	c := &Connector{cfg: cfg, log: log}
	c.http = connectors.NewClient(connectors.ClientConfig{
		Connector:      cfg.Source,
		BaseURL:        cfg.BaseURL,
		Timeout:        cfg.Timeout,
		RatePerSecond:  max(cfg.RatePerSecond, 0),
		Burst:          1,
		Header:         http.Header{"Api-Key": {cfg.APIKey}, "Accept": {"application/json"}},
		MaxResponseKey: "connectors.yandex_market.max_response",
		Logger:         log,
		Transport:      calmTransport{base: base, now: cfg.Now},
	})
	return c, nil
}

// Name is the configured source, "ym" by default.
func (c *Connector) Name() string { return c.cfg.Source }

// List calls fn with every page of the orders changed in [from, to), at most
// MaxWindow a call, following the page tokens. Cancelled orders are Items with
// Cancelled; a bad order is an Item with Err. A page that cannot be read, an HTTP
// failure that outlived the retries, or refused credentials
// (*connectors.AuthError) end the listing.
func (c *Connector) List(ctx context.Context, from, to time.Time, fn func(page []connectors.Item) error) error {
	for start := from; start.Before(to); start = start.Add(MaxWindow) {
		end := start.Add(MaxWindow)
		if end.After(to) {
			end = to
		}
		if err := c.listWindow(ctx, start, end, fn); err != nil {
			return err
		}
	}
	return nil
}

// window is [from, to) in whole seconds, the end rounded up so that no order of
// its last second is left out.
func window(from, to time.Time) (string, string) {
	end := to.Truncate(time.Second)
	if to.After(end) {
		end = end.Add(time.Second)
	}
	return from.Truncate(time.Second).Format(time.RFC3339), end.Format(time.RFC3339)
}

func (c *Connector) listWindow(ctx context.Context, from, to time.Time, fn func([]connectors.Item) error) error {
	token := ""
	for n := 0; ; n++ {
		where := fmt.Sprintf("list orders (%s) from %s page %d", c.cfg.OrdersAPI, from.In(c.cfg.Location).Format(time.DateTime), n)
		body, err := c.listPage(ctx, from, to, token, where)
		if err != nil {
			return err
		}
		orders, next, err := decodeList(body)
		if err != nil {
			return fmt.Errorf("%s: %s: %w", c.cfg.Source, where, err)
		}
		items := make([]connectors.Item, 0, len(orders))
		for _, raw := range orders {
			it := c.mapOrderSafe(raw)
			if !it.Cancelled && it.Err == nil && !importable(statusOf(raw)) {
				continue // listed, but not a status to import
			}
			items = append(items, it)
		}
		if len(items) > 0 {
			if err := fn(items); err != nil {
				return err
			}
		}
		if next == "" || next == token || len(orders) == 0 {
			return nil
		}
		token = next
	}
}

// listPage reads one page of the configured listing.
func (c *Connector) listPage(ctx context.Context, from, to time.Time, token, where string) ([]byte, error) {
	f, t := window(from, to)
	q := url.Values{"limit": {strconv.Itoa(c.cfg.PageSize)}}
	if token != "" {
		q.Set("page_token", token)
	}
	r := connectors.Read(c.http.R().SetContext(ctx))
	var resp *resty.Response
	var err error
	if c.cfg.OrdersAPI == OrdersAPIBusiness {
		cid, _ := strconv.ParseInt(c.cfg.CampaignID, 10, 64)
		body, _ := json.Marshal(map[string]any{
			"dates":       map[string]string{"updateFrom": f, "updateTo": t},
			"campaignIds": []int64{cid},
		})
		resp, err = r.SetQueryParamsFromValues(q).SetHeader("Content-Type", "application/json").SetBody(body).
			Post("/v1/businesses/" + c.cfg.BusinessID + "/orders")
	} else {
		q.Set("updatedAtFrom", f)
		q.Set("updatedAtTo", t)
		resp, err = r.SetQueryParamsFromValues(q).Get(c.campaignPath("/orders"))
	}
	if err := connectors.Check(c.cfg.Source, keyAPIKey, where, resp, err); err != nil {
		return nil, err
	}
	return resp.Body(), nil
}

func (c *Connector) campaignPath(tail string) string {
	return "/v2/campaigns/" + c.cfg.CampaignID + tail
}

// Get fetches one order of the campaign fresh by its id, whatever its status. An
// unknown id is connectors.ErrNotFound.
func (c *Connector) Get(ctx context.Context, id string) (connectors.Item, error) {
	raw, err := c.getOrder(ctx, id, true)
	if err != nil {
		return connectors.Item{}, err
	}
	return c.mapOrderSafe(raw), nil
}

// getOrder reads GET /v2/campaigns/{campaignId}/orders/{id}'s order; retried on
// 420/429/5xx when retry.
func (c *Connector) getOrder(ctx context.Context, id string, retry bool) (json.RawMessage, error) {
	if !positive(id) {
		return nil, fmt.Errorf("%s: order %q: not a Yandex Market order id: %w", c.cfg.Source, id, connectors.ErrNotFound)
	}
	what := "get order " + id
	r := c.http.R().SetContext(ctx)
	if retry {
		r = connectors.Read(r)
	}
	resp, err := r.Get(c.campaignPath("/orders/" + id))
	if err == nil && resp.StatusCode() == http.StatusNotFound {
		return nil, fmt.Errorf("%s: order %s: %w", c.cfg.Source, id, connectors.ErrNotFound)
	}
	if err := connectors.Check(c.cfg.Source, keyAPIKey, what, resp, err); err != nil {
		return nil, err
	}
	raw, err := decodeOne(resp.Body())
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %w", c.cfg.Source, what, err)
	}
	return raw, nil
}

func positive(s string) bool {
	n, err := strconv.ParseInt(s, 10, 64)
	return err == nil && n > 0
}

func validSource(s string) bool {
	if len(s) == 0 || len(s) > 32 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}
