// Package ozon is the Ozon connector: it lists the seller's FBS postings through the
// Ozon Seller API (https://api-seller.ozon.ru, headers Client-Id and Api-Key), maps
// each posting to the canonical order under the key ozon:posting:<posting_number>:create,
// reports cancelled postings so their cancel operation is registered, fetches one
// posting fresh for resync and the Ozon push webhook, and — only when configured —
// ships a posting at Ozon once 1C holds its order.
//
// Ozon reads are POSTs. Every request goes through the shared client of package
// connectors: a rate limit, and retries of reads on 429/5xx that honour Retry-After;
// writes are never retried by the client.
//
// Two API generations are supported, since accounts differ while Ozon moves its FBS
// lists from v3 (limit/offset, price a string such as "1530.0000", the envelope
// {"result": …}) to v4 (cursor paging, price an object {"amount", "currency"}, no
// envelope). /v3/posting/fbs/get and /v4/posting/fbs/ship exist in one version only and
// are used with both.
package ozon

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/go-resty/resty/v2"

	"github.com/ordersync/ordersync/connectors"
	"github.com/ordersync/ordersync/internal/order"
)

// Name is the connector's name, the orders' source and the first part of their keys.
const Name = "ozon"

// Entity names a posting in keys: ozon:posting:<posting_number>:create.
const Entity = "posting"

// DefaultBaseURL is Ozon's production Seller API.
const DefaultBaseURL = "https://api-seller.ozon.ru"

// Configuration keys named in errors.
const (
	keyAPIKey   = "connectors.ozon.api_key"
	keyClientID = "connectors.ozon.client_id"
)

// API versions of the FBS lists.
const (
	V3 = "v3"
	V4 = "v4"
)

// Ozon publishes one limit for a Client-Id: 50 requests a second over all methods.
// The connector takes half of it by default, leaving the rest to whatever else uses
// the same Client-Id (stock publishing, the seller's other tools).
const (
	publishedRatePerSecond = 50
	defaultRatePerSecond   = 25
)

// Config configures the connector.
type Config struct {
	// Source is the account's name: its orders' source and the first part of
	// their keys; default Name, the first account's.
	Source   string
	BaseURL  string // default DefaultBaseURL
	ClientID string // the Client-Id header (connectors.ozon.client_id)
	APIKey   string // the Api-Key header (connectors.ozon.api_key)
	// APIVersion selects the FBS list methods: "v4" (the default; cursor paging) or
	// "v3" (limit/offset), for accounts that still answer only v3.
	APIVersion string
	// Warehouse is the 1C warehouse the orders are created for.
	Warehouse string
	// Acknowledge makes Publisher() ship each posting at Ozon once 1C holds its order
	// (/v4/posting/fbs/ship: awaiting_packaging → awaiting_deliver, one package with
	// every product). That tells Ozon the parcel is assembled and ready to hand over —
	// a step in the warehouse, not a receipt — so it is off by default; turn it on
	// only where 1C holding the order means the parcel gets packed. Off, the publisher
	// accepts every record and calls nothing.
	Acknowledge bool
	// PageSize is the postings asked for per page: default 100; at most 100 in v4 and
	// 1000 in v3.
	PageSize int
	// ReturnsPageSize is the returns asked for per page of /v1/returns/list: default
	// and at most 500, Ozon's limit.
	ReturnsPageSize int
	// CutoffHorizon is how far past the listing window the unfulfilled list looks for
	// the postings' cutoff (the time by which Ozon wants them assembled), the only
	// time that list filters on. A posting created in the window has its cutoff within
	// this horizon of the window's end. Default 30 days.
	CutoffHorizon time.Duration
	// Timeout bounds one request; default 30s.
	Timeout time.Duration
	// RatePerSecond limits requests; default 25, half of Ozon's published 50 per
	// Client-Id; negative: no limit (tests).
	RatePerSecond float64
	// Location is the zone of a time Ozon sends without an offset (it documents UTC
	// with "Z"); default UTC.
	Location  *time.Location
	Transport http.RoundTripper // tests
	Logger    *slog.Logger
}

// Connector is the Ozon connector. It is safe for concurrent use.
type Connector struct {
	cfg  Config
	http *resty.Client
	log  *slog.Logger
}

var _ connectors.Marketplace = (*Connector)(nil)

// New checks cfg and returns a connector. Errors name the configuration key.
func New(cfg Config) (*Connector, error) {
	cfg.Source = cmp.Or(cfg.Source, Name)
	cfg.BaseURL = cmp.Or(strings.TrimSpace(cfg.BaseURL), DefaultBaseURL)
	cfg.APIVersion = cmp.Or(strings.ToLower(strings.TrimSpace(cfg.APIVersion)), V4)
	cfg.CutoffHorizon = cmp.Or(cfg.CutoffHorizon, 30*24*time.Hour)
	cfg.Timeout = cmp.Or(cfg.Timeout, 30*time.Second)
	cfg.RatePerSecond = cmp.Or(cfg.RatePerSecond, defaultRatePerSecond)
	if cfg.Location == nil {
		cfg.Location = time.UTC
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	maxPage := 100
	if cfg.APIVersion == V3 {
		maxPage = 1000
	}
	cfg.PageSize = cmp.Or(cfg.PageSize, 100)
	switch {
	case strings.TrimSpace(cfg.ClientID) == "":
		return nil, errors.New(keyClientID + ": is required (the Client-Id of the seller's API key)")
	case strings.TrimSpace(cfg.APIKey) == "":
		return nil, errors.New(keyAPIKey + ": is required (or connectors.ozon.api_key_file)")
	case cfg.APIVersion != V3 && cfg.APIVersion != V4:
		return nil, fmt.Errorf("connectors.ozon.api_version: must be v4 or v3, got %q", cfg.APIVersion)
	case cfg.PageSize < 1 || cfg.PageSize > maxPage:
		return nil, fmt.Errorf("connectors.ozon.page_size: must be between 1 and %d for %s, got %d", maxPage, cfg.APIVersion, cfg.PageSize)
	case cfg.ReturnsPageSize < 0 || cfg.ReturnsPageSize > maxReturnsPage:
		return nil, fmt.Errorf("ozon: the returns' page size must be between 1 and %d, got %d", maxReturnsPage, cfg.ReturnsPageSize)
	case cfg.CutoffHorizon < 0:
		return nil, fmt.Errorf("connectors.ozon.cutoff_horizon: must not be negative, got %s", cfg.CutoffHorizon)
	case cfg.RatePerSecond > publishedRatePerSecond:
		return nil, fmt.Errorf("connectors.ozon.rate_per_second: Ozon allows at most %d requests a second per Client-Id, got %g",
			publishedRatePerSecond, cfg.RatePerSecond)
	}
	rps := cfg.RatePerSecond
	if rps < 0 {
		rps = 0
	}
	h := http.Header{}
	h.Set("Client-Id", strings.TrimSpace(cfg.ClientID))
	h.Set("Api-Key", strings.TrimSpace(cfg.APIKey))
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "application/json")
	c := &Connector{
		cfg: cfg,
		http: connectors.NewClient(connectors.ClientConfig{
			Connector:     cfg.Source,
			BaseURL:       cfg.BaseURL,
			Timeout:       cfg.Timeout,
			RatePerSecond: rps,
			Burst:         max(int(rps/5), 1),
			Header:        h,
			Logger:        cfg.Logger,
			Transport:     cfg.Transport,
		}),
		log: cfg.Logger.With("connector", cfg.Source),
	}
	return c, nil
}

// Name is the account's source: "ozon" for the first account.
func (c *Connector) Name() string { return c.cfg.Source }

// APIVersion is the FBS list version in use, v4 or v3.
func (c *Connector) APIVersion() string { return c.cfg.APIVersion }

// Acknowledges reports whether Publisher ships postings (Config.Acknowledge); the
// wiring may leave the Ozon destination out of the routes when it does not.
func (c *Connector) Acknowledges() bool { return c.cfg.Acknowledge }

// apiError is an answer other than 2xx that is not about the credentials. Ozon's
// error body is {"code": <gRPC code>, "message": "…", "details": […]}.
type apiError struct {
	What       string
	Status     int
	Code       int
	Message    string
	RetryAfter time.Duration // from a Retry-After header, 0 when absent
}

func (e *apiError) Error() string {
	msg := fmt.Sprintf("ozon: %s: HTTP %d", e.What, e.Status)
	if e.Message != "" {
		msg += ": " + e.Message
	}
	if e.Code != 0 {
		msg += fmt.Sprintf(" (code %d)", e.Code)
	}
	return msg
}

// ozonError is Ozon's error body.
type ozonError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// post sends one request. A read is marked so that the shared client retries it
// after 429/5xx; a write is sent once. The error is a transport error, an
// *connectors.AuthError, or an *apiError.
func (c *Connector) post(ctx context.Context, path string, body any, read bool, what string) (*resty.Response, error) {
	req := c.http.R().SetContext(ctx).SetBody(body)
	if read {
		req = connectors.Read(req)
	}
	resp, err := req.Post(path)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("ozon: %s: %w", what, ctx.Err())
		}
		return nil, fmt.Errorf("ozon: %s: %w", what, err)
	}
	st := resp.StatusCode()
	if st >= 200 && st < 300 {
		return resp, nil
	}
	var oe ozonError
	_ = json.Unmarshal(resp.Body(), &oe)
	msg := order.SafeText(strings.TrimSpace(oe.Message))
	if msg == "" {
		msg = snippet(resp.Body())
	}
	if key, ok := authFailure(st, msg); ok {
		detail := fmt.Errorf("%s: %s", what, msg)
		if key == keyAPIKey {
			detail = fmt.Errorf("%s: %s (and that %s is the key's Client-Id)", what, msg, keyClientID)
		}
		return nil, &connectors.AuthError{Connector: Name, Key: key, Status: st, Err: detail}
	}
	e := &apiError{What: what, Status: st, Code: oe.Code, Message: msg}
	if d, ok := connectors.RetryAfter(resp.Header().Get("Retry-After"), time.Now()); ok {
		e.RetryAfter = d
	}
	return nil, e
}

// authFailure says whether an answer refuses the credentials, and which key to
// check. Ozon answers a missing header with 401, a wrong or expired Api-Key with 404
// (code 5, "Invalid Api-Key, please check the key and try again" — not the 401/403 one
// would expect), a key without the method's role with 403, and a Client-Id that is not
// a number with 400; a 404 about anything else is a missing posting.
func authFailure(status int, msg string) (key string, ok bool) {
	lower := strings.ToLower(msg)
	aboutKey := strings.Contains(lower, "api-key") || strings.Contains(lower, "api key")
	aboutClient := strings.Contains(lower, "client-id") || strings.Contains(lower, "client id")
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		if aboutClient && !aboutKey {
			return keyClientID, true
		}
		return keyAPIKey, true
	case (status == http.StatusNotFound || status == http.StatusBadRequest) && aboutKey:
		return keyAPIKey, true
	case status == http.StatusBadRequest && aboutClient:
		return keyClientID, true
	}
	return "", false
}

// snippet is a short, single-line excerpt of a body, safe to store and log.
func snippet(b []byte) string {
	s := strings.Join(strings.Fields(string(b)), " ")
	if r := []rune(s); len(r) > 200 {
		s = string(r[:200]) + "…"
	}
	return order.SafeText(s)
}

// timeParam formats a time the way Ozon's filters show it: UTC with milliseconds.
func timeParam(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }
