// Package kaspi is the Kaspi.kz connector. It lists a Kaspi Shop merchant's orders
// through the Kaspi Shop API v2 (JSON:API, header X-Auth-Token), maps them to the
// canonical order of internal/order, and, once 1C holds an order, accepts it at Kaspi
// (status ACCEPTED_BY_MERCHANT) through the outbox. It owns the Kaspi wire format and
// nothing else: the poller, the journal and the relay live elsewhere.
//
// Facts it relies on, from Kaspi's published API guide (guide.kaspi.kz, "API в Kaspi
// Магазине", orders): GET /orders takes page[number] (from 0), page[size] (at most
// 100), filter[orders][state] (required), filter[orders][status], and
// filter[orders][creationDate][$ge]/[$le] in epoch milliseconds over a period of at
// most 14 days; include[orders]=entries adds the positions to "included"; meta
// carries pageCount and totalCount. GET /orders?filter[orders][code]=… finds one
// order, GET /orders/{id}/entries lists its positions. POST /orders with
// {"data":{"type":"orders","id":…,"attributes":{"code":…,"status":"ACCEPTED_BY_MERCHANT"}}}
// accepts an order, which Kaspi allows only from status APPROVED_BY_BANK. Every
// request carries Content-Type application/vnd.api+json. Dates are Almaty's.
package kaspi

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/go-resty/resty/v2"

	"github.com/ordersync/ordersync/connectors"
)

// Name is the connector's name and the source of its orders.
const Name = "kaspi"

// Defaults and limits.
const (
	DefaultBaseURL  = "https://kaspi.kz/shop/api/v2"
	DefaultPageSize = 100 // also the largest page Kaspi serves
	// MaxWindow is the longest creationDate period one listing may ask for.
	MaxWindow = 14 * 24 * time.Hour
	// DefaultRatePerSecond is used because Kaspi publishes no rate limit: a
	// conservative pace for one merchant token.
	DefaultRatePerSecond = 5.0
)

// Order states (filter[orders][state]).
const (
	StateNew           = "NEW"
	StateSignRequired  = "SIGN_REQUIRED"
	StatePickup        = "PICKUP"
	StateDelivery      = "DELIVERY"
	StateKaspiDelivery = "KASPI_DELIVERY"
	StateArchive       = "ARCHIVE"
)

// Order statuses.
const (
	StatusApprovedByBank     = "APPROVED_BY_BANK"
	StatusAcceptedByMerchant = "ACCEPTED_BY_MERCHANT"
	StatusCompleted          = "COMPLETED"
	StatusCancelled          = "CANCELLED"
	StatusCancelling         = "CANCELLING"
	StatusReturned           = "RETURNED"
	StatusReturnRequested    = "KASPI_DELIVERY_RETURN_REQUESTED"
	StatusArrived            = "ARRIVED"
)

var (
	knownStates   = []string{StateNew, StateSignRequired, StatePickup, StateDelivery, StateKaspiDelivery, StateArchive}
	knownStatuses = []string{StatusApprovedByBank, StatusAcceptedByMerchant, StatusCompleted, StatusCancelled,
		StatusCancelling, StatusReturned, StatusReturnRequested, StatusReturnAcceptedByMerchant, StatusArrived}

	// DefaultStates are the states listed when Config.States is empty: a new order
	// (NEW) and the states an order moves to once the merchant accepted it.
	DefaultStates = []string{StateNew, StatePickup, StateDelivery, StateKaspiDelivery}
	// DefaultStatuses are the statuses imported when Config.Statuses is empty:
	// APPROVED_BY_BANK (new, waiting for the merchant) and ACCEPTED_BY_MERCHANT (what
	// every order in PICKUP, DELIVERY and KASPI_DELIVERY carries, Kaspi moving an
	// order there when it is accepted). Without the second, those states would bring
	// nothing, and an order accepted in the merchant cabinet, or accepted while it
	// slid between two pages of NEW, would never reach 1C.
	DefaultStatuses = []string{StatusApprovedByBank, StatusAcceptedByMerchant}
)

// Configuration keys named in errors.
const (
	keyToken    = "connectors.kaspi.token"
	keyBaseURL  = "connectors.kaspi.base_url"
	keyStates   = "connectors.kaspi.states"
	keyStatuses = "connectors.kaspi.statuses"
	keyPageSize = "connectors.kaspi.page_size"
)

const (
	contentType    = "application/vnd.api+json"
	pathOrders     = "/orders"
	paramPage      = "page[number]"
	paramSize      = "page[size]"
	paramState     = "filter[orders][state]"
	paramStatus    = "filter[orders][status]"
	paramCode      = "filter[orders][code]"
	paramFrom      = "filter[orders][creationDate][$ge]"
	paramTo        = "filter[orders][creationDate][$le]"
	paramInclude   = "include[orders]"
	includeEntries = "entries"
	typeEntries    = "orderentries"
)

// Config configures a Connector.
type Config struct {
	// Source is the account's name: its orders' source and the first part of
	// their keys; default Name, the first account's.
	Source    string
	BaseURL   string // default DefaultBaseURL
	Token     string // sent as X-Auth-Token; required
	Warehouse string // the 1C warehouse of these orders
	// States are the order states listed (one listing per state), default
	// DefaultStates. Cancelled orders are looked for in ARCHIVE as well (status
	// CANCELLED) unless ARCHIVE is listed here anyway.
	States []string
	// Statuses are the statuses imported as orders to create, default
	// DefaultStatuses. CANCELLED and CANCELLING are never created: in any listed state
	// they become cancellations.
	Statuses []string
	// ReturnsHorizon is how long after its creation an order is still looked at for a
	// return (Returns); default DefaultReturnsHorizon.
	ReturnsHorizon time.Duration
	PageSize       int           // at most 100, default 100
	Timeout        time.Duration // per request, default 30s
	// RatePerSecond bounds requests to Kaspi; 0 is DefaultRatePerSecond, negative is
	// no bound.
	RatePerSecond float64
	// Location is the zone of Kaspi's dates, default Asia/Almaty.
	Location  *time.Location
	Transport http.RoundTripper
	Logger    *slog.Logger
}

// Connector lists Kaspi orders and accepts them.
type Connector struct {
	cfg      Config
	http     *resty.Client
	log      *slog.Logger
	statuses map[string]bool
	listings []listing

	// locks serialise the acceptance of one order code within this process (a
	// relay delivering twice at once); Kaspi's own rule does the rest across
	// processes.
	locks connectors.OrderLocks
}

var _ connectors.Marketplace = (*Connector)(nil)

// listing is one kind of GET /orders: a state, and a status filter or "".
type listing struct{ state, status string }

// New validates cfg and returns a connector. Errors name the configuration key.
func New(cfg Config) (*Connector, error) {
	cfg.Source = cmp.Or(cfg.Source, Name)
	cfg.BaseURL = cmp.Or(cfg.BaseURL, DefaultBaseURL)
	if u, err := url.Parse(cfg.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("kaspi: %s: %q is not an http(s) URL", keyBaseURL, cfg.BaseURL)
	}
	if cfg.Token == "" {
		return nil, fmt.Errorf("kaspi: %s is required (the API token of the Kaspi merchant cabinet, Settings → API token)", keyToken)
	}
	switch {
	case cfg.PageSize == 0:
		cfg.PageSize = DefaultPageSize
	case cfg.PageSize < 0 || cfg.PageSize > DefaultPageSize:
		return nil, fmt.Errorf("kaspi: %s: %d is not from 1 to %d", keyPageSize, cfg.PageSize, DefaultPageSize)
	}
	if len(cfg.States) == 0 {
		cfg.States = DefaultStates
	}
	if len(cfg.Statuses) == 0 {
		cfg.Statuses = DefaultStatuses
	}
	cfg.States, cfg.Statuses = dedupe(cfg.States), dedupe(cfg.Statuses)
	for _, s := range cfg.States {
		if !slices.Contains(knownStates, s) {
			return nil, fmt.Errorf("kaspi: %s: %q is not a Kaspi order state (%v)", keyStates, s, knownStates)
		}
	}
	statuses := map[string]bool{}
	for _, s := range cfg.Statuses {
		switch {
		case !slices.Contains(knownStatuses, s):
			return nil, fmt.Errorf("kaspi: %s: %q is not a Kaspi order status (%v)", keyStatuses, s, knownStatuses)
		case cancelled(s):
			return nil, fmt.Errorf("kaspi: %s: %s orders are cancellations, never created: leave it out", keyStatuses, s)
		}
		statuses[s] = true
	}
	if cfg.Location == nil {
		loc, err := time.LoadLocation("Asia/Almaty")
		if err != nil {
			loc = time.FixedZone("Asia/Almaty", 5*60*60)
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
	log = log.With("connector", cfg.Source)

	c := &Connector{cfg: cfg, log: log, statuses: statuses}
	for _, s := range cfg.States {
		c.listings = append(c.listings, listing{state: s})
	}
	if !slices.Contains(cfg.States, StateArchive) {
		// A cancelled order leaves the active states for the archive: look for the
		// cancellations there, and only for them.
		c.listings = append(c.listings, listing{state: StateArchive, status: StatusCancelled})
	}
	c.http = connectors.NewClient(connectors.ClientConfig{
		Connector:     cfg.Source,
		BaseURL:       cfg.BaseURL,
		Timeout:       cfg.Timeout,
		RatePerSecond: max(cfg.RatePerSecond, 0),
		Burst:         1,
		Header: http.Header{
			"X-Auth-Token": {cfg.Token},
			"Content-Type": {contentType},
			"Accept":       {contentType},
		},
		Logger:    log,
		Transport: cfg.Transport,
	})
	return c, nil
}

func dedupe(ss []string) []string {
	var out []string
	for _, s := range ss {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// Name is the account's source: "kaspi" for the first account.
func (c *Connector) Name() string { return c.cfg.Source }

// Window is one creationDate period of a listing, [From, To).
type Window struct{ From, To time.Time }

// Windows splits [from, to) into consecutive periods of at most MaxWindow. Each is
// asked for as $ge = From and $le = To less one millisecond, both in whole epoch
// milliseconds, so the periods neither overlap nor leave a millisecond out.
func Windows(from, to time.Time) []Window {
	from, to = from.Truncate(time.Millisecond), to.Truncate(time.Millisecond)
	var ws []Window
	for s := from; s.Before(to); {
		e := s.Add(MaxWindow)
		if e.After(to) {
			e = to
		}
		ws = append(ws, Window{From: s, To: e})
		s = e
	}
	return ws
}

// List calls fn with every page of the orders created in [from, to), in each
// configured state, period by period of at most 14 days. Orders in a status that is
// not imported are left out; cancelled ones are Items with Cancelled; a bad order is
// an Item with Err. A page that cannot be read, an HTTP failure that outlived the
// retries, or refused credentials (*connectors.AuthError) end the listing.
func (c *Connector) List(ctx context.Context, from, to time.Time, fn func(page []connectors.Item) error) error {
	for _, w := range Windows(from, to) {
		for _, l := range c.listings {
			if err := c.listWindow(ctx, l, w, fn); err != nil {
				return err
			}
		}
	}
	return nil
}

func (c *Connector) listWindow(ctx context.Context, l listing, w Window, fn func([]connectors.Item) error) error {
	return c.listWindowOf(ctx, l, w, true, fn)
}

// listWindowAll is listWindow keeping the orders of every status (the returns'
// listing asks Kaspi for one status itself).
func (c *Connector) listWindowAll(ctx context.Context, l listing, w Window, fn func([]connectors.Item) error) error {
	return c.listWindowOf(ctx, l, w, false, fn)
}

func (c *Connector) listWindowOf(ctx context.Context, l listing, w Window, imported bool, fn func([]connectors.Item) error) error {
	what := "state " + l.state
	if l.status != "" {
		what += " status " + l.status
	}
	for n := 0; ; n++ {
		q := url.Values{
			paramPage:    {strconv.Itoa(n)},
			paramSize:    {strconv.Itoa(c.cfg.PageSize)},
			paramState:   {l.state},
			paramFrom:    {strconv.FormatInt(w.From.UnixMilli(), 10)},
			paramTo:      {strconv.FormatInt(w.To.UnixMilli()-1, 10)},
			paramInclude: {includeEntries},
		}
		if l.status != "" {
			q.Set(paramStatus, l.status)
		}
		where := fmt.Sprintf("list orders %s from %s page %d", what, w.From.In(c.cfg.Location).Format(time.DateTime), n)
		body, err := c.read(ctx, pathOrders, q, where)
		if err != nil {
			return err
		}
		pg, err := decodePage(body)
		if err != nil {
			return fmt.Errorf("kaspi: %s: %w", where, err)
		}
		items, err := c.mapPage(ctx, pg, imported)
		if err != nil {
			return err
		}
		if len(items) > 0 {
			if err := fn(items); err != nil {
				return err
			}
		}
		if pg.last(n, c.cfg.PageSize) {
			return nil
		}
	}
}

// Get fetches the order with this code fresh, whatever its status: the operator asked
// for it. An unknown code is connectors.ErrNotFound.
func (c *Connector) Get(ctx context.Context, code string) (connectors.Item, error) {
	q := url.Values{paramCode: {code}, paramInclude: {includeEntries}, paramPage: {"0"}, paramSize: {"1"}}
	where := "get order " + code
	body, err := c.read(ctx, pathOrders, q, where)
	if err != nil {
		return connectors.Item{}, err
	}
	pg, err := decodePage(body)
	if err != nil {
		return connectors.Item{}, fmt.Errorf("kaspi: %s: %w", where, err)
	}
	pg.Data = slices.DeleteFunc(pg.Data, func(raw json.RawMessage) bool { return codeOf(raw) != code })
	if len(pg.Data) == 0 {
		return connectors.Item{}, fmt.Errorf("kaspi: order %s: %w", code, connectors.ErrNotFound)
	}
	pg.Data = pg.Data[:1]
	items, err := c.mapPage(ctx, pg, false)
	if err != nil {
		return connectors.Item{}, err
	}
	return items[0], nil
}

// read GETs a path, retried by the client on 429/5xx as Retry-After says, and
// returns the body of a 2xx answer.
func (c *Connector) read(ctx context.Context, path string, q url.Values, what string) ([]byte, error) {
	resp, err := connectors.Read(c.http.R().SetContext(ctx)).SetQueryParamsFromValues(q).Get(path)
	if err := connectors.Check(c.cfg.Source, keyToken, what, resp, err); err != nil {
		return nil, err
	}
	return resp.Body(), nil
}

// readEntries GETs /orders/{id}/entries. A refusal about this order alone (4xx
// other than authentication and 429) is reported as bad, not as a failed listing.
func (c *Connector) readEntries(ctx context.Context, id string) (body []byte, bad error, err error) {
	what := "entries of order " + id
	resp, err := connectors.Read(c.http.R().SetContext(ctx)).Get(pathOrders + "/" + url.PathEscape(id) + "/entries")
	if err == nil {
		switch st := resp.StatusCode(); {
		case st == http.StatusUnauthorized || st == http.StatusForbidden || st == http.StatusTooManyRequests:
		case st >= 400 && st < 500:
			return nil, fmt.Errorf("Kaspi answered GET /orders/%s/entries with HTTP %d", id, st), nil
		}
	}
	if err := connectors.Check(c.cfg.Source, keyToken, what, resp, err); err != nil {
		return nil, nil, err
	}
	return resp.Body(), nil, nil
}

func cancelled(status string) bool { return status == StatusCancelled || status == StatusCancelling }
