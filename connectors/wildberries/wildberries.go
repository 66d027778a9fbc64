// Package wildberries is the Wildberries connector: it lists the seller's FBS
// assembly orders (GET /api/v3/orders/new, and GET /api/v3/orders by period for
// catch-up), learns their statuses (POST /api/v3/orders/status), maps each to the
// canonical order, and acknowledges an order once 1C holds it by adding it to a supply,
// which moves it to "confirm" (on assembly).
//
// Its name, the orders' source and the prefix of their keys, is "wb":
// wb:order:<id>:create. Its configuration section is connectors.wildberries.
//
// Wildberries FBS orders are single-item: one assembly order is one unit of one
// article, so each becomes a canonical order of one line, quantity 1. Prices arrive
// as integers in hundredths with ISO 4217 numeric currency codes; they are converted
// exactly, never through a float.
package wildberries

import (
	"cmp"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/go-resty/resty/v2"

	"github.com/ordersync/ordersync/connectors"
)

// Name is the connector's name: the orders' source and the prefix of their keys.
const Name = "wb"

// Configuration keys named in errors.
const (
	configKey = "connectors.wildberries"
	tokenKey  = configKey + ".token"
)

// Documented limits and defaults.
const (
	DefaultBaseURL = "https://marketplace-api.wildberries.ru"
	// MaxPageSize is the largest limit GET /api/v3/orders accepts.
	MaxPageSize = 1000
	// MaxWindow is the longest period one GET /api/v3/orders may ask for.
	MaxWindow = 30 * 24 * time.Hour
	// DefaultRatePerSecond and DefaultBurst are the published limit of the FBS
	// methods: 300 requests a minute (one per 200 ms), bursts of 20.
	DefaultRatePerSecond = 5.0
	DefaultBurst         = 20
	// DefaultSupplyName names the supply acknowledged orders are added to.
	DefaultSupplyName = "ordersync"
	// retention is how far back GET /api/v3/orders reaches: orders created no more
	// than 3 months ago. Get searches that far.
	retention = 90 * 24 * time.Hour
	// statusBatch is the most ids POST /api/v3/orders/status takes at once.
	statusBatch = 1000
)

// Config configures a Connector (connectors.wildberries).
type Config struct {
	// Source is the account's name: its orders' source and the first part of
	// their keys; default Name, the first account's.
	Source string
	// BaseURL is the marketplace API; default DefaultBaseURL.
	BaseURL string
	// Token is the API token (category Marketplace), sent as the Authorization
	// header. Required; a refusal names connectors.wildberries.token.
	Token string
	// Warehouse is the 1C warehouse of these orders.
	Warehouse string
	// Acknowledge makes the Publisher add each order 1C holds to a supply, which
	// moves it from "new" to "confirm" (on assembly) at Wildberries. Leave it off
	// when the shop adds orders to supplies itself (from its WMS or the seller
	// portal): a supply is a physical shipment to one WB warehouse, and once an
	// order is in "confirm" the buyer can no longer cancel it in the first hour.
	Acknowledge bool
	// SupplyName names the open supply acknowledged orders are added to; default
	// DefaultSupplyName, 1 to 128 characters. Supplies of this name are found by
	// listing and reused; one is created when none accepts the order.
	SupplyName string
	// PageSize is the limit of each GET /api/v3/orders, 1 to MaxPageSize; default
	// MaxPageSize.
	PageSize int
	// Timeout bounds one request; default 30s.
	Timeout time.Duration
	// RatePerSecond and Burst are the request rate; default DefaultRatePerSecond and
	// DefaultBurst. A negative RatePerSecond sets no limit (tests).
	RatePerSecond float64
	Burst         int
	// Location is the zone of a createdAt that carries none, and the zone orders'
	// times are expressed in; default UTC (Wildberries sends RFC 3339 in UTC).
	Location *time.Location
	// AnalyticsURL is the seller analytics API, which lists the goods returned to
	// the seller (Returns); default DefaultAnalyticsURL.
	AnalyticsURL string
	// ReturnsLimiter paces the returns' report; default one request a minute, the
	// published limit (tests inject their clock's).
	ReturnsLimiter Limiter
	// Now is the clock; default time.Now.
	Now       func() time.Time
	Transport http.RoundTripper // tests
	Logger    *slog.Logger
}

// Connector talks to the Wildberries marketplace API. It implements
// connectors.Marketplace, and Publisher acknowledges orders.
type Connector struct {
	cfg  Config
	http *resty.Client
	log  *slog.Logger

	// ackMu serialises adding orders to supplies, so concurrent publishes do not
	// each create a supply; supplies are the open supplies named SupplyName known
	// to this process, the one that last accepted an order first.
	ackMu    sync.Mutex
	supplies []string

	returns returnsClient // Returns' client, made on first use
}

var _ connectors.Marketplace = (*Connector)(nil)

// New validates cfg and returns a connector.
func New(cfg Config) (*Connector, error) {
	cfg.Source = cmp.Or(cfg.Source, Name)
	cfg.BaseURL = strings.TrimRight(cmp.Or(cfg.BaseURL, DefaultBaseURL), "/")
	cfg.SupplyName = cmp.Or(cfg.SupplyName, DefaultSupplyName)
	cfg.AnalyticsURL = cmp.Or(cfg.AnalyticsURL, DefaultAnalyticsURL)
	cfg.PageSize = cmp.Or(cfg.PageSize, MaxPageSize)
	cfg.Timeout = cmp.Or(cfg.Timeout, 30*time.Second)
	cfg.RatePerSecond = cmp.Or(cfg.RatePerSecond, DefaultRatePerSecond)
	cfg.Burst = cmp.Or(cfg.Burst, DefaultBurst)
	if cfg.Location == nil {
		cfg.Location = time.UTC
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	switch {
	case strings.TrimSpace(cfg.Token) == "":
		return nil, fmt.Errorf("%s is required: the Wildberries API token of category Marketplace", tokenKey)
	case cfg.PageSize < 1 || cfg.PageSize > MaxPageSize:
		return nil, fmt.Errorf("%s.page_size: %d is out of range 1–%d", configKey, cfg.PageSize, MaxPageSize)
	case utf8.RuneCountInString(cfg.SupplyName) > 128:
		return nil, fmt.Errorf("%s.supply_name: at most 128 characters, got %d", configKey, utf8.RuneCountInString(cfg.SupplyName))
	case cfg.Timeout < 0:
		return nil, fmt.Errorf("%s.timeout: %s is negative", configKey, cfg.Timeout)
	case cfg.Burst < 0:
		return nil, fmt.Errorf("%s.burst: %d is negative", configKey, cfg.Burst)
	}
	if !strings.HasPrefix(cfg.BaseURL, "http://") && !strings.HasPrefix(cfg.BaseURL, "https://") {
		return nil, fmt.Errorf("%s.base_url: %q is not an http(s) URL", configKey, cfg.BaseURL)
	}

	base := cfg.Transport
	if base == nil {
		base = http.DefaultTransport.(*http.Transport).Clone()
	}
	rate := cfg.RatePerSecond
	if rate < 0 {
		rate = 0 // no limit
	}
	c := &Connector{cfg: cfg, log: cfg.Logger.With("connector", cfg.Source)}
	c.http = connectors.NewClient(connectors.ClientConfig{
		Connector:     "wildberries",
		BaseURL:       cfg.BaseURL,
		Timeout:       cfg.Timeout,
		RatePerSecond: rate,
		Burst:         cfg.Burst,
		Header:        http.Header{"Authorization": {cfg.Token}},
		Logger:        c.log,
		Transport:     retryHeader{base: base},
	})
	return c, nil
}

// Name is the account's source, the prefix of its orders' keys: "wb" for the
// first account.
func (c *Connector) Name() string { return c.cfg.Source }

// retryHeader copies Wildberries' X-Ratelimit-Retry of a 429 into Retry-After, which
// the shared client honours when it retries a read. Wildberries documents
// X-Ratelimit-Retry (seconds until a retry is allowed), X-Ratelimit-Reset and
// X-Ratelimit-Limit on a 429, and no Retry-After.
type retryHeader struct{ base http.RoundTripper }

func (t retryHeader) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(r)
	if err != nil || resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "" {
		return resp, err
	}
	if d, ok := rateLimitRetry(resp.Header); ok {
		resp.Header.Set("Retry-After", strconv.FormatInt(int64(math.Ceil(d.Seconds())), 10))
	}
	return resp, nil
}

// rateLimitRetry reads X-Ratelimit-Retry: seconds, possibly fractional.
func rateLimitRetry(h http.Header) (time.Duration, bool) {
	v := strings.TrimSpace(h.Get("X-Ratelimit-Retry"))
	if v == "" {
		return 0, false
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f < 0 || math.IsInf(f, 0) || math.IsNaN(f) || f > 24*3600 {
		return 0, false
	}
	return time.Duration(f * float64(time.Second)), true
}

// retryAfter is how long a 429 asks to wait: X-Ratelimit-Retry, else Retry-After.
func retryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	if d, ok := rateLimitRetry(h); ok {
		return d, true
	}
	return connectors.RetryAfter(h.Get("Retry-After"), now)
}
