// Package uzum is the Uzum Market connector (Uzbekistan). It lists a seller's FBS
// orders through the Uzum seller API (header Authorization with the bare API key,
// never "Bearer"), maps them to the canonical order of internal/order, and, once 1C
// holds an order, confirms it at Uzum through the outbox. It owns the Uzum wire
// format and nothing else: the poller, the journal and the relay live elsewhere.
//
// Facts it relies on, from Uzum's published seller OpenAPI: GET /v2/fbs/orders takes
// shopIds (required, repeated), status (one a call, CREATED when absent), dateFrom
// and dateTo in epoch seconds (milliseconds are read as a date far ahead and answer
// an empty list, not an error), page from 0 and size; the answer is
// {"payload":{"orders":[…]}}, whose dates are epoch milliseconds. GET
// /v1/fbs/order/{orderId} reads one order, POST /v1/fbs/order/{orderId}/confirm
// moves it from CREATED to PACKING, one order a call. Uzum publishes no rate limit
// and answers 429 when it is pressed. Its prices are whole sums (UZS has no minor
// unit); dates without a zone are Tashkent's.
package uzum

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"time"

	"github.com/go-resty/resty/v2"

	"github.com/ordersync/ordersync/connectors"
)

// Name is the connector's name and the default source of its orders.
const Name = "uzum"

// Defaults and limits.
const (
	DefaultBaseURL = "https://api-seller.uzum.uz/api/seller-openapi"
	// MaxPageSize is the largest page Uzum serves of GET /v2/fbs/orders.
	MaxPageSize     = 50
	DefaultPageSize = MaxPageSize
	// DefaultRatePerSecond is used because Uzum publishes no limit: the pace its
	// sellers' clients keep without being refused.
	DefaultRatePerSecond = 3.0
	// Currency is the currency of every Uzum order.
	Currency = "UZS"
)

// Order statuses of the FBS listing.
const (
	StatusCreated             = "CREATED"
	StatusPacking             = "PACKING"
	StatusPendingDelivery     = "PENDING_DELIVERY"
	StatusDelivering          = "DELIVERING"
	StatusDelivered           = "DELIVERED"
	StatusAcceptedAtDP        = "ACCEPTED_AT_DP"
	StatusDeliveredToDP       = "DELIVERED_TO_CUSTOMER_DELIVERY_POINT"
	StatusCompleted           = "COMPLETED"
	StatusCanceled            = "CANCELED"
	StatusPendingCancellation = "PENDING_CANCELLATION"
	StatusReturned            = "RETURNED"
)

var (
	// KnownStatuses are the statuses an FBS order can have.
	KnownStatuses = []string{StatusCreated, StatusPacking, StatusPendingDelivery, StatusDelivering, StatusDelivered,
		StatusAcceptedAtDP, StatusDeliveredToDP, StatusCompleted, StatusCanceled, StatusPendingCancellation, StatusReturned}
	// DefaultStatuses are the statuses imported when Config.Statuses is empty: a new
	// order (CREATED) and the statuses it moves through once confirmed, so that an
	// order confirmed in the seller cabinet still reaches 1C.
	DefaultStatuses = []string{StatusCreated, StatusPacking, StatusPendingDelivery, StatusDelivering,
		StatusAcceptedAtDP, StatusDeliveredToDP}
	// confirmedOrLater are the statuses in which an order needs no confirmation.
	confirmedOrLater = []string{StatusPacking, StatusPendingDelivery, StatusDelivering, StatusDelivered,
		StatusAcceptedAtDP, StatusDeliveredToDP, StatusCompleted, StatusReturned}
)

// Configuration keys named in errors.
const (
	keySource   = "connectors.uzum.source"
	keyToken    = "connectors.uzum.token"
	keyBaseURL  = "connectors.uzum.base_url"
	keyShopIDs  = "connectors.uzum.shop_ids"
	keyStatuses = "connectors.uzum.statuses"
	keyPageSize = "connectors.uzum.page_size"
)

// sourceRe is the rule internal/order holds an order's source to.
var sourceRe = regexp.MustCompile(`^[a-z0-9_-]{1,32}$`)

const (
	pathOrders = "/v2/fbs/orders"
	pathOrder  = "/v1/fbs/order/"
)

// Config configures a Connector.
type Config struct {
	BaseURL string // default DefaultBaseURL
	// Token is the seller's API key, sent as the Authorization header as it is.
	Token string
	// Source is the source of the orders (the first part of their journal keys,
	// <source>:order:<id>:create), default Name. A second Uzum account gets a
	// source of its own ("uzum-2") so that its orders' keys never meet the first's.
	Source string
	// ShopIDs are the seller's shops listed (shopIds): at least one, each a whole
	// number.
	ShopIDs   []string
	Warehouse string // the 1C warehouse of these orders
	// Statuses are the statuses imported as orders to create, default
	// DefaultStatuses. CANCELED is listed too, for the cancellations.
	Statuses []string
	PageSize int           // at most MaxPageSize, default MaxPageSize
	Timeout  time.Duration // per request, default 30s
	// RatePerSecond bounds requests to Uzum; 0 is DefaultRatePerSecond, negative
	// is no bound.
	RatePerSecond float64
	// Location is the zone of Uzum's dates that carry none, default Asia/Tashkent.
	Location  *time.Location
	Transport http.RoundTripper
	Logger    *slog.Logger
}

// Connector lists Uzum FBS orders and confirms them.
type Connector struct {
	cfg      Config
	http     *resty.Client
	log      *slog.Logger
	statuses map[string]bool
	listings []string // one GET /v2/fbs/orders per status

	// locks serialise the confirmation of one order within this process (a relay
	// delivering twice at once); reading the status first does the rest.
	locks connectors.OrderLocks
}

var _ connectors.Marketplace = (*Connector)(nil)

// New validates cfg and returns a connector. Errors name the configuration key.
func New(cfg Config) (*Connector, error) {
	cfg.BaseURL = cmp.Or(cfg.BaseURL, DefaultBaseURL)
	cfg.Source = cmp.Or(cfg.Source, Name)
	if !sourceRe.MatchString(cfg.Source) {
		return nil, fmt.Errorf("uzum: %s: %q is not a source (1 to 32 of a-z, 0-9, _ and -)", keySource, cfg.Source)
	}
	if u, err := url.Parse(cfg.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("uzum: %s: %q is not an http(s) URL", keyBaseURL, cfg.BaseURL)
	}
	if cfg.Token == "" {
		return nil, fmt.Errorf("uzum: %s is required (the API key of the Uzum seller cabinet, Profile → API keys)", keyToken)
	}
	if len(cfg.ShopIDs) == 0 {
		return nil, fmt.Errorf("uzum: %s: at least one shop id is required", keyShopIDs)
	}
	for i, id := range cfg.ShopIDs {
		if n, err := strconv.ParseInt(id, 10, 64); err != nil || n <= 0 {
			return nil, fmt.Errorf("uzum: %s[%d]: %q is not a shop id (a whole number greater than 0)", keyShopIDs, i, id)
		}
	}
	switch {
	case cfg.PageSize == 0:
		cfg.PageSize = DefaultPageSize
	case cfg.PageSize < 0 || cfg.PageSize > MaxPageSize:
		return nil, fmt.Errorf("uzum: %s: %d is not from 1 to %d", keyPageSize, cfg.PageSize, MaxPageSize)
	}
	if len(cfg.Statuses) == 0 {
		cfg.Statuses = DefaultStatuses
	}
	statuses := map[string]bool{}
	var listings []string
	for _, s := range cfg.Statuses {
		switch {
		case !slices.Contains(KnownStatuses, s):
			return nil, fmt.Errorf("uzum: %s: %q is not an Uzum FBS order status (%v)", keyStatuses, s, KnownStatuses)
		case s == StatusCanceled:
			return nil, fmt.Errorf("uzum: %s: %s orders are cancellations, never created: leave it out", keyStatuses, s)
		}
		if !statuses[s] {
			listings = append(listings, s)
		}
		statuses[s] = true
	}
	listings = append(listings, StatusCanceled)
	if cfg.Location == nil {
		loc, err := time.LoadLocation("Asia/Tashkent")
		if err != nil {
			loc = time.FixedZone("Asia/Tashkent", 5*60*60)
		}
		cfg.Location = loc
	}
	if cfg.RatePerSecond == 0 {
		cfg.RatePerSecond = DefaultRatePerSecond
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("connector", Name, "source", cfg.Source)
	c := &Connector{cfg: cfg, log: log, statuses: statuses, listings: listings}
	c.http = connectors.NewClient(connectors.ClientConfig{
		Connector:     Name,
		BaseURL:       cfg.BaseURL,
		Timeout:       cfg.Timeout,
		RatePerSecond: max(cfg.RatePerSecond, 0),
		Burst:         1,
		// The bare key: Uzum refuses "Bearer <key>".
		Header:    http.Header{"Authorization": {cfg.Token}, "Accept": {"application/json"}},
		Logger:    log,
		Transport: cfg.Transport,
	})
	return c, nil
}

// Name is the source of the connector's orders: Config.Source, "uzum" by default.
func (c *Connector) Name() string { return c.cfg.Source }

// Listings are the statuses listed, one GET /v2/fbs/orders each: the imported
// ones, then CANCELED.
func (c *Connector) Listings() []string { return slices.Clone(c.listings) }

// List calls fn with every page of the orders created in [from, to), status by
// status. Cancelled ones are Items with Cancelled; a bad order is an Item with Err.
// A page that cannot be read, an HTTP failure that outlived the retries, or refused
// credentials (*connectors.AuthError) end the listing.
func (c *Connector) List(ctx context.Context, from, to time.Time, fn func(page []connectors.Item) error) error {
	for _, status := range c.listings {
		if err := c.listStatus(ctx, status, from, to, fn); err != nil {
			return err
		}
	}
	return nil
}

// Query is the query of one page of GET /v2/fbs/orders: dateFrom and dateTo in
// whole epoch seconds (the end rounded up, so no order of the last second is left
// out), page from 0.
func (c *Connector) Query(status string, from, to time.Time, page int) url.Values {
	end := to.Unix()
	if to.After(time.Unix(end, 0)) {
		end++
	}
	return url.Values{
		"shopIds":  slices.Clone(c.cfg.ShopIDs),
		"status":   {status},
		"dateFrom": {strconv.FormatInt(from.Unix(), 10)},
		"dateTo":   {strconv.FormatInt(end, 10)},
		"page":     {strconv.Itoa(page)},
		"size":     {strconv.Itoa(c.cfg.PageSize)},
	}
}

func (c *Connector) listStatus(ctx context.Context, status string, from, to time.Time, fn func([]connectors.Item) error) error {
	for n := 0; ; n++ {
		where := fmt.Sprintf("list orders status %s from %s page %d", status, from.In(c.cfg.Location).Format(time.DateTime), n)
		body, err := c.read(ctx, pathOrders, c.Query(status, from, to, n), where)
		if err != nil {
			return err
		}
		orders, err := decodeList(body)
		if err != nil {
			return fmt.Errorf("uzum: %s: %w", where, err)
		}
		items := make([]connectors.Item, 0, len(orders))
		for _, raw := range orders {
			it := c.mapOrderSafe(raw)
			if !it.Cancelled && it.Err == nil && !c.statuses[statusOf(raw)] {
				continue // listed, but not a status to import
			}
			items = append(items, it)
		}
		if len(items) > 0 {
			if err := fn(items); err != nil {
				return err
			}
		}
		if len(orders) < c.cfg.PageSize {
			return nil
		}
	}
}

// Get fetches one order fresh by its id, whatever its status: the operator asked
// for it. An unknown id is connectors.ErrNotFound.
func (c *Connector) Get(ctx context.Context, id string) (connectors.Item, error) {
	raw, err := c.getOrder(ctx, id, true)
	if err != nil {
		return connectors.Item{}, err
	}
	return c.mapOrderSafe(raw), nil
}

// getOrder reads GET /v1/fbs/order/{id}'s payload; retried on 429/5xx when retry.
func (c *Connector) getOrder(ctx context.Context, id string, retry bool) ([]byte, error) {
	if _, err := strconv.ParseInt(id, 10, 64); err != nil {
		return nil, fmt.Errorf("uzum: order %q: not an Uzum order id: %w", id, connectors.ErrNotFound)
	}
	what := "get order " + id
	r := c.http.R().SetContext(ctx)
	if retry {
		r = connectors.Read(r)
	}
	resp, err := r.Get(pathOrder + id)
	if err == nil && resp.StatusCode() == http.StatusNotFound {
		return nil, fmt.Errorf("uzum: order %s: %w", id, connectors.ErrNotFound)
	}
	if err := connectors.Check(Name, keyToken, what, resp, err); err != nil {
		return nil, err
	}
	raw, err := decodeOne(resp.Body())
	if err != nil {
		return nil, fmt.Errorf("uzum: %s: %w", what, err)
	}
	return raw, nil
}

// read GETs a path, retried by the client on 429/5xx as Retry-After says, and
// returns the body of a 2xx answer.
func (c *Connector) read(ctx context.Context, path string, q url.Values, what string) ([]byte, error) {
	resp, err := connectors.Read(c.http.R().SetContext(ctx)).SetQueryParamsFromValues(q).Get(path)
	if err := connectors.Check(Name, keyToken, what, resp, err); err != nil {
		return nil, err
	}
	return resp.Body(), nil
}
