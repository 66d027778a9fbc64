// Package httpservice implements onec.Client over the ordersync HTTP service that a
// 1C:Enterprise base publishes (contract v1, deploy/1c/openapi.yaml).
//
// It owns what talking to a real 1C publication takes: Basic authentication in
// UTF-8, a global bound on concurrent requests (1C sessions and licences are
// scarce), optional reuse of 1C sessions, a bound on the size of an answer
// (onec.max_response: a larger one is never read into memory), exact decimals,
// tolerance of a leading BOM, and the classification of every failure into
// onec.Error classes. Idempotent GETs are retried inside the call; a POST is sent
// once and never again.
//
// Classification (Transient: safe to retry; Unknown: a POST may have been carried
// out, find before creating again; Permanent; Auth and Configuration: an operator
// must act). A lock conflict is 1C's module saying so in the contract's error
// object, {"error":{"code":"lock_conflict"}}; the words of a body never make one.
// Whatever else answers a POST with a 5xx or a 2xx that is not JSON leaves its
// outcome unknown:
//
//	no answer, request not written (dial, timeout)    Transient
//	no answer after a GET was written                 Transient (retried)
//	no answer after a POST was written                Unknown
//	an answer larger than onec.max_response           GET: Transient (not retried within the call); POST: Unknown (1C answered: it may have acted)
//	406, 429                                          Transient (no session, licence or turn: the handler never ran)
//	5xx with the {"error"} object, code lock_conflict Transient (the module's transaction rolled back; API set)
//	5xx with another {"error"} object (exception)     GET: Transient; POST: Unknown, API set (the handler answered: it has finished)
//	5xx without the {"error"} object (500, 502, 503,  GET: Transient; POST: Unknown (a web server's or proxy's answer: the
//	504, a proxy's page, 1C's text of any exception)    handler may not have run, may still be running, or may have finished)
//	400 on an expired session (no {"error"} body)     Transient; a GET renews the session and goes on
//	other 3xx and 4xx, 409 except on create           Permanent, with 1C's code, message, field
//	404, 405 whose body is not the {"error"} object   Configuration (the publication or its URL is wrong)
//	401, 403                                          Auth
//	a 2xx whose body is not JSON                      GET: Auth (a publication's login page); POST: Unknown (it may be 1C's
//	                                                    answer mangled, or the login page: the find that comes next tells)
//	409 on create with the order                      success: onec.Created{Existing: true}
//	409 or 2xx on create without the order's ref      Unknown
package httpservice

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-resty/resty/v2"
	"github.com/shopspring/decimal"

	"github.com/ordersync/ordersync/internal/backoff"
	"github.com/ordersync/ordersync/internal/bytesize"
	"github.com/ordersync/ordersync/internal/onec"
)

var _ onec.Client = (*Client)(nil)

// Defaults of Config.
const (
	DefaultTimeout        = 30 * time.Second
	DefaultMaxConcurrency = 4
	DefaultGetRetries     = 3
	DefaultRetryBackoff   = 200 * time.Millisecond
	DefaultMaxResponse    = 64 << 20 // bytes
)

// maxRetryWait caps one wait between GET retries; retryJitter is how far, in
// percent, a wait may be off its nominal length either way.
const (
	maxRetryWait = 5 * time.Second
	retryJitter  = 20
)

// Config configures a Client; the comments name the configuration keys.
type Config struct {
	// BaseURL is onec.base_url, e.g. http://1c.local/trade/hs/ordersync/v1.
	BaseURL string
	// Username and Password are onec.username and onec.password (Basic, UTF-8). An
	// empty Username sends no credentials.
	Username, Password string
	// Timeout bounds one HTTP exchange (onec.timeout); default 30s. Waiting for a
	// free slot is bounded by the caller's context only.
	Timeout time.Duration
	// MaxConcurrency bounds concurrent requests to the base (onec.max_concurrency);
	// default 4. With SessionReuse it is also the most sessions kept.
	MaxConcurrency int
	// SessionReuse keeps 1C sessions between requests (onec.session_reuse).
	SessionReuse bool
	// GetRetries is how many more times an idempotent GET is tried after a transient
	// failure; 0 means the default 3, a negative value none.
	GetRetries int
	// RetryBackoff is the first wait between GET tries, doubled each time, with
	// jitter; default 200ms.
	RetryBackoff time.Duration
	// MaxResponse bounds the body of one answer, in bytes (onec.max_response);
	// default 64 MiB. A larger answer is not read beyond the limit: the call fails
	// with an error naming the key (see the classification above).
	MaxResponse int64
	// Logger receives one debug line per exchange; default discards. Neither the
	// password nor the Authorization header ever reach it.
	Logger *slog.Logger
	// Transport replaces the HTTP transport (custom TLS, tests); default resty's.
	Transport http.RoundTripper
}

// Client talks to one 1C base over contract v1. It is safe for concurrent use.
type Client struct {
	cfg      Config
	base     string // BaseURL without a trailing slash
	basePath string // its path, for the attempt journal
	rc       *resty.Client
	slots    chan *slot
	log      *slog.Logger
	// acquiring, when not nil (only tests set it), is called as a call asks for a
	// slot, before it waits for one.
	acquiring func()
}

// slot is one permit to talk to 1C and, with session reuse, the session it holds.
// Only the goroutine holding the permit touches it.
type slot struct {
	cookie string
}

// New checks cfg and returns a client. Errors name the configuration key at fault.
func New(cfg Config) (*Client, error) {
	if strings.TrimSpace(cfg.BaseURL) == "" {
		return nil, errors.New("onec.base_url is required, e.g. http://1c.local/trade/hs/ordersync/v1")
	}
	u, err := url.Parse(cfg.BaseURL)
	switch {
	case err != nil:
		// The parser's error quotes the whole URL, password included: keep its cause only.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("onec.base_url is not a URL: %w", err)
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("onec.base_url %q must start with http:// or https://", cfg.BaseURL)
	case u.Host == "":
		return nil, fmt.Errorf("onec.base_url %q has no host", cfg.BaseURL)
	case u.User != nil:
		return nil, errors.New("onec.base_url must not carry credentials: set onec.username and onec.password instead")
	case u.RawQuery != "" || u.Fragment != "":
		return nil, fmt.Errorf("onec.base_url %q must not have a query or a fragment", cfg.BaseURL)
	}
	if cfg.Timeout < 0 {
		return nil, fmt.Errorf("onec.timeout %s must be positive", cfg.Timeout)
	}
	if cfg.MaxConcurrency < 0 {
		return nil, fmt.Errorf("onec.max_concurrency %d must be positive", cfg.MaxConcurrency)
	}
	if cfg.RetryBackoff < 0 {
		return nil, fmt.Errorf("retry backoff %s must be positive", cfg.RetryBackoff)
	}
	if cfg.MaxResponse < 0 {
		return nil, fmt.Errorf("onec.max_response %d must be positive", cfg.MaxResponse)
	}
	cfg.MaxResponse = cmp.Or(cfg.MaxResponse, DefaultMaxResponse)
	cfg.Timeout = cmp.Or(cfg.Timeout, DefaultTimeout)
	cfg.MaxConcurrency = cmp.Or(cfg.MaxConcurrency, DefaultMaxConcurrency)
	cfg.RetryBackoff = cmp.Or(cfg.RetryBackoff, DefaultRetryBackoff)
	switch {
	case cfg.GetRetries == 0:
		cfg.GetRetries = DefaultGetRetries
	case cfg.GetRetries < 0:
		cfg.GetRetries = 0
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("component", "onec")

	// No cookie jar (sessions are managed per slot), no redirects (a redirect from
	// a publication means a login page or a wrong URL, and following one would turn
	// a POST into a GET), no resty retries (a POST must never be resent).
	hc := &http.Client{
		Transport: cfg.Transport,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
	// The calls of the contract read answers themselves (readBody); the limit on
	// the client bounds any other (the session-finishing ping of Close).
	rc := resty.NewWithClient(hc).
		SetResponseBodyLimit(int(min(cfg.MaxResponse, math.MaxInt))).
		SetRetryCount(0).
		SetDisableWarn(true).
		SetLogger(restyLogger{log}).
		SetHeader("Accept", "application/json").
		SetHeader("User-Agent", "ordersync")
	if cfg.Username != "" {
		rc.SetBasicAuth(cfg.Username, cfg.Password)
	}

	c := &Client{
		cfg:      cfg,
		base:     strings.TrimRight(u.String(), "/"),
		basePath: strings.TrimRight(u.EscapedPath(), "/"),
		rc:       rc,
		slots:    make(chan *slot, cfg.MaxConcurrency),
		log:      log,
	}
	for range cfg.MaxConcurrency {
		c.slots <- &slot{}
	}
	return c, nil
}

// Each operation of the contract is a call (what is sent) and a result function
// (what an accepted answer means); judge sits between them. Splitting them lets
// the whole judgement of an answer be tested, and fuzzed, without a server.

func pingCall() call { return call{op: "ping", method: http.MethodGet, path: "/ping"} }

func findCall(externalID string) call {
	return call{op: "find", method: http.MethodGet, path: "/orders", query: url.Values{"external_id": {externalID}}}
}

func createCall(body []byte) call {
	return call{op: "create", method: http.MethodPost, path: "/orders", body: body,
		accept: func(st int) bool { return st == http.StatusOK || st == http.StatusCreated || st == http.StatusConflict }}
}

func cancelCall(body []byte) call {
	return call{op: "cancel", method: http.MethodPost, path: "/orders/cancel", body: body}
}

func listCall(q onec.ListQuery) call {
	return call{op: "list", method: http.MethodGet, path: "/orders",
		query: url.Values{"source": {q.Source}, "date_from": {q.DateFrom}, "date_to": {q.DateTo}}}
}

func stockCall(warehouse string) call {
	return call{op: "stock", method: http.MethodGet, path: "/stock", query: url.Values{"warehouse": {warehouse}}}
}

// Ping checks that the service answers and the credentials are accepted.
func (c *Client) Ping(ctx context.Context) (onec.Info, error) {
	k := pingCall()
	ans, err := c.do(ctx, k)
	if err != nil {
		return onec.Info{}, err
	}
	return c.pingResult(k, ans)
}

func (c *Client) pingResult(k call, ans answer) (onec.Info, error) {
	var info onec.Info
	if err := c.decode(k, ans, &info); err != nil {
		return onec.Info{}, err
	}
	return info, nil
}

// FindOrders returns the orders whose external id is externalID, an empty slice
// when there is none.
func (c *Client) FindOrders(ctx context.Context, externalID string) ([]onec.Order, error) {
	k := findCall(externalID)
	ans, err := c.do(ctx, k)
	if err != nil {
		return nil, err
	}
	return c.findResult(k, ans)
}

func (c *Client) findResult(k call, ans answer) ([]onec.Order, error) {
	var v struct {
		Orders []onec.Order `json:"orders"`
	}
	if err := c.decode(k, ans, &v); err != nil {
		return nil, err
	}
	if v.Orders == nil {
		v.Orders = []onec.Order{}
	}
	return v.Orders, nil
}

// CreateOrder sends the order once. 409 (already exists) is not an error: it
// returns the existing order with Existing set.
func (c *Client) CreateOrder(ctx context.Context, req onec.CreateOrder) (onec.Created, error) {
	body, err := json.Marshal(toWire(req))
	if err != nil {
		return onec.Created{}, &onec.Error{Class: onec.Permanent, Op: "create", Message: "cannot encode the order", Err: err}
	}
	k := createCall(body)
	ans, err := c.do(ctx, k)
	if err != nil {
		return onec.Created{}, err
	}
	return c.createResult(k, ans)
}

func (c *Client) createResult(_ call, ans answer) (onec.Created, error) {
	if ans.status == http.StatusConflict {
		var v struct {
			Error *apiError   `json:"error"`
			Order *onec.Order `json:"order"`
		}
		if err := json.Unmarshal(ans.body, &v); err != nil || v.Order == nil || v.Order.Ref == "" {
			// 1C says the order exists but does not say which: find it next time.
			e := &onec.Error{Class: onec.Unknown, Op: "create", Status: ans.status,
				Message: "1C answered 409 (already exists) without the existing order"}
			fillAPIError(e, ans.body)
			return onec.Created{}, e
		}
		return onec.Created{Ref: v.Order.Ref, Number: v.Order.Number, Date: v.Order.Date, Existing: true,
			ExternalID: v.Order.ExternalID}, nil
	}
	var created onec.Created
	if err := json.Unmarshal(ans.body, &created); err != nil || created.Ref == "" {
		// 1C said it created something; without its ref only a find can tell.
		return onec.Created{}, &onec.Error{Class: onec.Unknown, Op: "create", Status: ans.status,
			Message: "1C answered " + fmt.Sprint(ans.status) + " without the ref of the created order: " + onec.Snippet(ans.body), Err: err}
	}
	return created, nil
}

// CancelOrder cancels the order with externalID. 404 is a Permanent *onec.Error
// with Status 404.
func (c *Client) CancelOrder(ctx context.Context, externalID, reason string) (onec.Cancelled, error) {
	body, err := json.Marshal(map[string]string{"external_id": externalID, "reason": reason})
	if err != nil {
		return onec.Cancelled{}, &onec.Error{Class: onec.Permanent, Op: "cancel", Message: "cannot encode the request", Err: err}
	}
	k := cancelCall(body)
	ans, err := c.do(ctx, k)
	if err != nil {
		return onec.Cancelled{}, err
	}
	return c.cancelResult(k, ans)
}

func (c *Client) cancelResult(k call, ans answer) (onec.Cancelled, error) {
	var v onec.Cancelled
	if err := c.decode(k, ans, &v); err != nil {
		return onec.Cancelled{}, err
	}
	if v.Status != "cancelled" {
		// Not the contract's answer: nothing proves the order was cancelled. The
		// cancel is idempotent, so asking again is safe.
		return onec.Cancelled{}, &onec.Error{Class: onec.Unknown, Op: "cancel", Path: k.path, Status: ans.status,
			Message: `1C answered the cancel without "status":"cancelled": ` + onec.Snippet(ans.body)}
	}
	return v, nil
}

// ListOrders lists 1C's orders of q.Source dated within [q.DateFrom, q.DateTo]
// (GET /orders?source=…&date_from=…&date_to=…, an addition to contract v1), with
// their totals read as exact decimals. A base whose module predates the listing
// answers 400 asking for external_id: the error then says the module needs updating.
func (c *Client) ListOrders(ctx context.Context, q onec.ListQuery) ([]onec.Order, error) {
	if err := checkListQuery(q); err != nil {
		return nil, &onec.Error{Class: onec.Permanent, Op: "list", Path: "/orders", Message: err.Error()}
	}
	k := listCall(q)
	ans, err := c.do(ctx, k)
	if err != nil {
		return nil, olderModule(err)
	}
	return c.listResult(k, ans)
}

// checkListQuery refuses a query 1C would answer 400 for, before it is sent.
func checkListQuery(q onec.ListQuery) error {
	if q.Source == "" {
		return errors.New("list orders: the source is required")
	}
	for _, d := range []struct{ name, v string }{{"date_from", q.DateFrom}, {"date_to", q.DateTo}} {
		if _, err := time.Parse(dateLayout, d.v); err != nil {
			return fmt.Errorf("list orders: %s %q is not a 1C date YYYY-MM-DDTHH:MM:SS", d.name, d.v)
		}
	}
	if q.DateTo < q.DateFrom {
		return fmt.Errorf("list orders: date_to %s is before date_from %s", q.DateTo, q.DateFrom)
	}
	return nil
}

const dateLayout = "2006-01-02T15:04:05"

// olderModule names the cause when the base answered the listing 400 for a missing
// external_id: its ordersync module knows only the find by external id.
func olderModule(err error) error {
	var e *onec.Error
	if !errors.As(err, &e) || e.Status != http.StatusBadRequest || !e.API ||
		(e.Field != "external_id" && !strings.Contains(e.Message, "external_id")) {
		return err
	}
	e.Message = "the 1C module is older than the order listing of contract v1 (it answered GET /orders?source=… asking for external_id): " +
		"the ordersync HTTP service in the 1C base needs updating to the current Module.bsl (deploy/1c/ordersync) before reconciliation can read 1C's orders; 1C said: " + e.Message
	return e
}

func (c *Client) listResult(k call, ans answer) ([]onec.Order, error) {
	var raw struct {
		Orders []struct {
			onec.Order
			Total json.RawMessage `json:"total"`
		} `json:"orders"`
	}
	if err := c.decode(k, ans, &raw); err != nil {
		return nil, err
	}
	out := make([]onec.Order, len(raw.Orders))
	for i, o := range raw.Orders {
		out[i] = o.Order
		if t := strings.TrimSpace(string(o.Total)); t == "" || t == "null" {
			continue // 1C did not say: Total stays nil
		}
		d, err := exactNumber(o.Total)
		if err != nil {
			return nil, &onec.Error{Class: onec.Permanent, Op: k.op, Path: k.path, Status: ans.status,
				Message: fmt.Sprintf("1C answered an order list that does not follow contract v1: orders[%d] (external id %q): total %s", i, o.ExternalID, err)}
		}
		out[i].Total = &d
	}
	return out, nil
}

// Stock reads the stock of warehouse.
func (c *Client) Stock(ctx context.Context, warehouse string) (onec.Stock, error) {
	k := stockCall(warehouse)
	ans, err := c.do(ctx, k)
	if err != nil {
		return onec.Stock{}, err
	}
	return c.stockResult(k, ans)
}

func (c *Client) stockResult(k call, ans answer) (onec.Stock, error) {
	// Decoded item by item, so that a bad value deep in a large answer is named by
	// its position and SKU rather than by the start of the body.
	var raw struct {
		Warehouse string `json:"warehouse"`
		TakenAt   string `json:"taken_at"`
		Items     []struct {
			SKU      *string         `json:"sku"`
			Quantity json.RawMessage `json:"quantity"`
			Price    json.RawMessage `json:"price"`
		} `json:"items"`
	}
	if err := c.decode(k, ans, &raw); err != nil {
		return onec.Stock{}, err
	}
	bad := func(msg string) error {
		return &onec.Error{Class: onec.Permanent, Op: k.op, Path: k.path, Status: ans.status,
			Message: "1C answered a stock that does not follow contract v1: " + msg}
	}
	v := onec.Stock{Warehouse: raw.Warehouse, TakenAt: raw.TakenAt, Items: make([]onec.StockItem, len(raw.Items))}
	for i, it := range raw.Items {
		if it.SKU == nil || *it.SKU == "" {
			return onec.Stock{}, bad(fmt.Sprintf("items[%d] has no sku", i))
		}
		q, err := exactNumber(it.Quantity)
		if err != nil {
			return onec.Stock{}, bad(fmt.Sprintf("items[%d] (sku %q): quantity %s", i, *it.SKU, err))
		}
		p, err := exactNumber(it.Price)
		if err != nil {
			return onec.Stock{}, bad(fmt.Sprintf("items[%d] (sku %q): price %s", i, *it.SKU, err))
		}
		v.Items[i] = onec.StockItem{SKU: *it.SKU, Quantity: q, Price: p}
	}
	return v, nil
}

// exactNumber reads a JSON number as an exact decimal; a string, null or anything
// else is refused, named in the error.
func exactNumber(b json.RawMessage) (decimal.Decimal, error) {
	t := strings.TrimSpace(string(b))
	if t == "" || t == "null" {
		return decimal.Decimal{}, errors.New("is missing")
	}
	if t[0] != '-' && (t[0] < '0' || t[0] > '9') {
		return decimal.Decimal{}, fmt.Errorf("%s is not a number", truncate(t, 40))
	}
	d, err := decimal.NewFromString(t)
	if err != nil {
		return decimal.Decimal{}, fmt.Errorf("%s is not a number", truncate(t, 40))
	}
	return d, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// Close ends the 1C sessions the client keeps, so they free their licences now
// rather than when 1C times them out. It waits for requests in flight, within ctx.
// The client must not be used afterwards.
func (c *Client) Close(ctx context.Context) error {
	held := make([]*slot, 0, cap(c.slots))
	defer func() {
		for _, s := range held {
			c.slots <- s
		}
	}()
	for range cap(c.slots) {
		select {
		case s := <-c.slots:
			held = append(held, s)
		case <-ctx.Done():
			return fmt.Errorf("1c: close: %w", ctx.Err())
		}
	}
	for _, s := range held {
		if s.cookie == "" {
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
		_, err := c.rc.R().SetContext(rctx).
			SetCookie(&http.Cookie{Name: sessionCookie, Value: s.cookie}).
			SetHeader("IBSession", "finish").
			Get(c.base + "/ping")
		cancel()
		c.log.DebugContext(ctx, "1c session finished", "err", err)
		s.cookie = ""
	}
	return nil
}

const sessionCookie = "ibsession"

// call describes one operation of the contract.
type call struct {
	op     string
	method string
	path   string // below the base URL
	query  url.Values
	body   []byte
	// accept lists the non-default statuses the operation decodes itself; by
	// default only 200 is a success.
	accept func(status int) bool
}

func (k call) accepts(status int) bool {
	if k.accept != nil {
		return k.accept(status)
	}
	return status == http.StatusOK
}

func (k call) idempotent() bool { return k.method == http.MethodGet }

// answer is a status and body accepted by the operation, BOM removed.
type answer struct {
	status int
	body   []byte
	header http.Header
}

// answerOf is what exchange makes of a response read whole: raw is its body.
func answerOf(status int, raw []byte, header http.Header) answer {
	return answer{status: status, body: bytes.TrimPrefix(raw, utf8BOM), header: header}
}

// do runs k: a GET with retries on transient failures, a POST exactly once.
func (c *Client) do(ctx context.Context, k call) (answer, error) {
	if !k.idempotent() {
		return c.once(ctx, k)
	}
	var err, last error
	for n := 0; ; n++ {
		if err = context.Cause(ctx); err != nil {
			break
		}
		var ans answer
		if ans, err = c.once(ctx, k); err == nil {
			return ans, nil
		}
		last = err
		// A too large answer is not tried again: the same request gets the same
		// answer, and reading the limit's worth of bytes again is for nothing.
		if tooLarge(err) || onec.ClassOf(err) != onec.Transient || n == c.cfg.GetRetries {
			break
		}
		t := time.NewTimer(backoff.Retry(c.cfg.RetryBackoff, maxRetryWait, n+1, retryJitter))
		select {
		case <-ctx.Done(): // said at the top of the loop
			t.Stop()
		case <-t.C:
		}
	}
	var oe *onec.Error
	if errors.As(err, &oe) {
		return answer{}, err
	}
	// The context ended before a try or between two.
	e := &onec.Error{Class: onec.Transient, Op: k.op, Path: k.path, Err: err}
	if errors.As(last, &oe) {
		e.Status, e.Code, e.Message, e.Field = oe.Status, oe.Code, oe.Message, oe.Field
		e.Err = fmt.Errorf("%w (last failure: %w)", err, last)
	}
	return answer{}, e
}

// once makes one try of k on one slot, plus, for a GET, one more on a new session
// when 1C no longer knows the one it was sent on.
func (c *Client) once(ctx context.Context, k call) (answer, error) {
	s, err := c.acquire(ctx)
	if err != nil {
		return answer{}, &onec.Error{Class: onec.Transient, Op: k.op, Path: k.path,
			Message: fmt.Sprintf("the call ended before one of the onec.max_concurrency (%d) slots for 1C requests was free; nothing was sent", c.cfg.MaxConcurrency), Err: err}
	}
	defer func() { c.slots <- s }()
	for renewed := false; ; renewed = true {
		ans, sentCookie, err := c.exchange(ctx, k, s)
		if err != nil {
			return answer{}, err
		}
		if sentCookie && ans.status == http.StatusBadRequest && !isAPIError(ans.body) {
			// 1C refused the session, not the request: its handler never ran.
			s.cookie = ""
			if k.idempotent() && !renewed {
				c.log.DebugContext(ctx, "1c session expired, starting a new one", "op", k.op)
				continue
			}
			return answer{}, &onec.Error{Class: onec.Transient, Op: k.op, Path: k.path, Status: ans.status,
				Message: "the 1C session expired (HTTP 400 to a request on an ibsession cookie); 1C did not run the request: " + onec.Snippet(ans.body)}
		}
		return c.judge(k, ans)
	}
}

func (c *Client) acquire(ctx context.Context) (*slot, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if c.acquiring != nil {
		c.acquiring()
	}
	select {
	case s := <-c.slots:
		return s, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// exchange sends one HTTP request on slot s and records it. A transport failure
// comes back classified; an answer comes back whatever its status.
func (c *Client) exchange(ctx context.Context, k call, s *slot) (ans answer, sentCookie bool, err error) {
	rctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	var wrote, marked atomic.Bool
	// markSent stamps, once, the moment a request that may change 1C was written
	// whole: 1C may act on it from then on, not from when the call began, before the
	// wait for a slot and a connection.
	markSent := func() {
		if !k.idempotent() && marked.CompareAndSwap(false, true) {
			onec.RecorderFrom(ctx).MarkSent()
		}
	}
	rctx = httptrace.WithClientTrace(rctx, &httptrace.ClientTrace{
		WroteRequest: func(i httptrace.WroteRequestInfo) {
			if i.Err == nil {
				wrote.Store(true)
				markSent()
			}
		},
	})
	// The body is read here, within the limit, rather than whole by resty.
	req := c.rc.R().SetContext(rctx).SetDoNotParseResponse(true)
	if k.query != nil {
		req.SetQueryParamsFromValues(k.query)
	}
	if k.body != nil {
		req.SetHeader("Content-Type", "application/json; charset=utf-8").SetBody(k.body)
	}
	if c.cfg.SessionReuse {
		if s.cookie != "" {
			req.SetCookie(&http.Cookie{Name: sessionCookie, Value: s.cookie})
			sentCookie = true
		} else {
			req.SetHeader("IBSession", "start")
		}
	}

	start := time.Now()
	resp, herr := req.Execute(k.method, c.base+k.path)
	var hr *http.Response
	if resp != nil {
		hr = resp.RawResponse
	}
	if hr != nil {
		// An answer can be read before the transport has run the hook of the
		// request it answers; a later stamp only makes the settle time longer.
		markSent()
	}
	if herr == nil && hr == nil {
		herr = errors.New("no response") // not expected from resty; never read a nil response
	}
	var raw []byte
	if herr == nil {
		defer hr.Body.Close() // before reading to the end: the connection is closed, never reused half-read
		raw, herr = readBody(hr, c.cfg.MaxResponse)
	} else if hr != nil && hr.Body != nil {
		hr.Body.Close()
	}
	elapsed := time.Since(start)

	x := onec.Exchange{Method: k.method, Path: c.basePath + k.path, RequestSHA256: onec.Digest(k.body)}
	if k.query != nil {
		x.Path += "?" + k.query.Encode()
	}
	var big *tooLargeError
	switch {
	case errors.As(herr, &big):
		// 1C answered in full (it has finished with the request, and its session is
		// free again): only the body is too large to read.
		c.keepSession(s, hr)
		e := c.tooLarge(k, hr.StatusCode, big)
		x.Status = hr.StatusCode
		x.Error = e.Error()
		onec.RecorderFrom(ctx).Add(x)
		c.log.DebugContext(ctx, "1c answer larger than onec.max_response", "op", k.op, "method", k.method, "path", x.Path,
			"status", x.Status, "duration_ms", elapsed.Milliseconds(), "max_response", c.cfg.MaxResponse, "err", big)
		return answer{}, sentCookie, e
	case herr != nil:
		// The session may still be busy with this request inside 1C: never reuse it.
		s.cookie = ""
		e := c.transportError(ctx, rctx, k, wrote.Load(), herr)
		x.Error = e.Error()
		onec.RecorderFrom(ctx).Add(x)
		c.log.DebugContext(ctx, "1c exchange failed", "op", k.op, "method", k.method, "path", x.Path,
			"sent", wrote.Load(), "duration_ms", elapsed.Milliseconds(), "err", herr)
		return answer{}, sentCookie, e
	}
	x.Status = hr.StatusCode
	x.ResponseSHA256 = onec.Digest(raw)
	onec.RecorderFrom(ctx).Add(x)
	c.log.DebugContext(ctx, "1c exchange", "op", k.op, "method", k.method, "path", x.Path,
		"status", x.Status, "duration_ms", elapsed.Milliseconds(), "session_reused", sentCookie)
	c.keepSession(s, hr)
	return answerOf(hr.StatusCode, raw, hr.Header), sentCookie, nil
}

// keepSession takes the session cookie 1C set, or the end of the session it
// announced, into slot s.
func (c *Client) keepSession(s *slot, hr *http.Response) {
	if !c.cfg.SessionReuse {
		return
	}
	for _, ck := range hr.Cookies() {
		if ck.Name == sessionCookie {
			if ck.MaxAge < 0 || ck.Value == "" {
				s.cookie = ""
			} else {
				s.cookie = ck.Value
			}
		}
	}
}

// tooLargeError is the cause of an answer over onec.max_response.
type tooLargeError struct {
	announced int64 // the Content-Length over the limit, or -1
	read      int64 // when not announced: the bytes read before the limit was passed
}

func (e *tooLargeError) Error() string {
	if e.announced >= 0 {
		return fmt.Sprintf("it announced %d bytes (Content-Length)", e.announced)
	}
	return fmt.Sprintf("reading stopped after %d bytes", e.read)
}

// tooLarge reports whether err is, or wraps, an answer over onec.max_response.
func tooLarge(err error) bool {
	var e *tooLargeError
	return errors.As(err, &e)
}

// readBody reads the body of hr, at most limit bytes of it: a longer body is a
// *tooLargeError, read no further than limit+1 bytes (or not at all when its
// Content-Length says so). With a Content-Length the answer is held once, in one
// allocation of its size.
func readBody(hr *http.Response, limit int64) ([]byte, error) {
	var body io.Reader = hr.Body
	announced := hr.ContentLength
	if strings.EqualFold(hr.Header.Get("Content-Encoding"), "gzip") && !hr.Uncompressed && announced != 0 {
		// A gzip body the transport did not ask for (and so did not decode), as resty
		// would read it; the limit bounds what it inflates to.
		zr, err := gzip.NewReader(hr.Body)
		if err != nil {
			return nil, err
		}
		defer zr.Close()
		body, announced = zr, -1
	}
	return readLimited(body, announced, limit)
}

// readLimited reads r to its end if it holds at most limit bytes; announced is
// its length when known (the transport ends the body there), else -1. A known
// length is read into one buffer of that size; an unknown one as io.ReadAll does
// (growing chunks, then one buffer of the final size), no further than limit+1.
func readLimited(r io.Reader, announced, limit int64) ([]byte, error) {
	if announced > limit {
		return nil, &tooLargeError{announced: announced}
	}
	if announced >= 0 {
		buf := make([]byte, announced)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		var one [1]byte
		switch n, err := io.ReadFull(r, one[:]); {
		case n > 0:
			return nil, fmt.Errorf("the body goes on beyond its Content-Length %d", announced)
		case err != io.EOF:
			return nil, err
		}
		return buf, nil
	}
	stop := limit
	if stop < math.MaxInt64 {
		stop++ // one byte more than the limit tells a body of exactly the limit from a longer one
	}
	buf, err := io.ReadAll(io.LimitReader(r, stop))
	switch {
	case err != nil:
		return nil, err
	case int64(len(buf)) > limit:
		return nil, &tooLargeError{announced: -1, read: int64(len(buf))}
	}
	return buf, nil
}

// tooLarge classifies an answer whose body is larger than onec.max_response: not
// read, so nothing in it can be judged.
func (c *Client) tooLarge(k call, status int, cause error) *onec.Error {
	e := &onec.Error{Op: k.op, Path: k.path, Status: status, Err: cause}
	msg := fmt.Sprintf("1C's answer to %s %s is larger than onec.max_response (%s)", k.method, k.path, bytesize.Format(c.cfg.MaxResponse))
	switch {
	case k.idempotent():
		e.Class = onec.Transient
		msg += ", so it was not read; the operation is tried again later"
	case k.op == "create":
		e.Class = onec.Unknown
		msg += ", so it was not read; 1C did answer, so the order may have been created: it is looked up before it is created again"
	default:
		e.Class = onec.Unknown
		msg += ", so it was not read; 1C did answer, so it may have carried the request out"
	}
	e.Message = msg + " (raise onec.max_response if 1C's answers are rightly this large)"
	return e
}

// transportError classifies a failure with no HTTP answer. Before the request was
// written nothing can have happened in 1C; after it, a POST may have been carried out.
func (c *Client) transportError(ctx, rctx context.Context, k call, wrote bool, err error) *onec.Error {
	e := &onec.Error{Op: k.op, Path: k.path, Err: err}
	timedOut := ctx.Err() == nil && errors.Is(rctx.Err(), context.DeadlineExceeded)
	switch {
	case !wrote:
		e.Class = onec.Transient
		e.Message = "the request was not sent"
	case k.idempotent():
		e.Class = onec.Transient
		e.Message = "no answer to a request that changes nothing"
	default:
		e.Class = onec.Unknown
		e.Message = "the request was sent and no answer came: 1C may have carried it out"
	}
	if timedOut {
		e.Message += fmt.Sprintf(" (no answer within onec.timeout %s)", c.cfg.Timeout)
	}
	return e
}

// judge turns an answer into the operation's success or a classified error.
func (c *Client) judge(k call, ans answer) (answer, error) {
	st := ans.status
	if st >= 200 && st < 300 && !isJSON(ans.body) {
		if !k.idempotent() {
			return answer{}, c.unreadablePost(k, st, ans.body)
		}
		return answer{}, c.authError(k, st, ans.body)
	}
	if k.accepts(st) {
		return ans, nil
	}
	return answer{}, c.classify(k, ans)
}

// classify maps a status that the operation does not accept to a class.
func (c *Client) classify(k call, ans answer) *onec.Error {
	st := ans.status
	if st == http.StatusUnauthorized || st == http.StatusForbidden {
		return c.authError(k, st, ans.body)
	}
	e := &onec.Error{Op: k.op, Path: k.path, Status: st, API: isAPIError(ans.body)}
	fillAPIError(e, ans.body)
	switch {
	case (st == http.StatusNotFound || st == http.StatusMethodNotAllowed) && !e.API:
		// The web server's page, not the service's answer: the publication, its URL
		// template, or onec.base_url is wrong. The handler never ran.
		e.Class = onec.Configuration
		e.Message = fmt.Sprintf("1C's web server answered %d for %s %s%s with a page that is not the ordersync service's answer: "+
			"the publication or its URL template is missing, or onec.base_url is wrong (%s)",
			st, k.method, c.base, k.path, onec.Snippet(ans.body))
	case st >= 500 && e.API && e.Code == codeLockConflict:
		// The module's transaction rolled back on a lock conflict: nothing was written.
		e.Class = onec.Transient
	case st == http.StatusNotAcceptable, st == http.StatusTooManyRequests:
		// No free session or licence, or not our turn: the handler never ran.
		e.Class = onec.Transient
	case st >= 500 && k.idempotent():
		e.Class = onec.Transient
	case st >= 500 && e.API:
		// The module's handler answered its own exception: it has finished, and
		// whatever it wrote is there for a find to see.
		e.Class = onec.Unknown
	case st >= 500:
		// Not the module's answer: a web server or a proxy answered, or the platform
		// answered an exception the module did not catch. The handler may not have
		// run, may still be running behind a proxy that gave up, or may have finished.
		e.Class = onec.Unknown
		e.Message = fmt.Sprintf("%s %s was answered HTTP %d with a body that is not the ordersync service's JSON error, so nothing says whether 1C's handler ran: "+
			"it may not have, it may still be running behind a proxy, or it may have finished; %s (%s)",
			k.method, k.path, st, mayHaveActed(k), onec.Snippet(ans.body))
	case st >= 300 && st < 400:
		e.Class = onec.Permanent
		e.Message = fmt.Sprintf("1C redirected to %q: check onec.base_url %s", ans.header.Get("Location"), c.base)
	default:
		e.Class = onec.Permanent
	}
	return e
}

// codeLockConflict is the code of the contract's error object with which the module
// answers a lock conflict (HTTP 500): its transaction rolled back.
const codeLockConflict = "lock_conflict"

// mayHaveActed says what follows from a POST whose outcome is unknown.
func mayHaveActed(k call) string {
	if k.op == "create" {
		return "1C may have created the order, so it is looked up before it is created again"
	}
	return "1C may have carried it out"
}

// unreadablePost classifies a 2xx that is not JSON on a POST: 1C's answer mangled
// on the way, or the page a publication answers refused credentials with. Only a
// find can tell which, and it is what comes next.
func (c *Client) unreadablePost(k call, status int, body []byte) *onec.Error {
	what := "a body that is not JSON"
	if looksHTML(body) {
		what = "an HTML page"
	}
	who := fmt.Sprintf("onec.username %q", c.cfg.Username)
	if c.cfg.Username == "" {
		who = "no credentials (onec.username is empty)"
	}
	msg := fmt.Sprintf("1C answered %s %s with HTTP %d and %s instead of JSON: %s. "+
		"An HTML page with a 2xx status is also how a publication answers credentials it does not accept (%s at onec.base_url %s); the find that comes next will tell",
		k.method, k.path, status, what, mayHaveActed(k), who, c.base)
	return &onec.Error{Class: onec.Unknown, Op: k.op, Path: k.path, Status: status, Message: msg,
		Err: errors.New("1C answered: " + onec.Snippet(body))}
}

// authError says which configuration keys to check. It never includes the password.
func (c *Client) authError(k call, status int, body []byte) *onec.Error {
	var msg string
	if c.cfg.Username == "" {
		msg = fmt.Sprintf("1C requires credentials at onec.base_url %s but onec.username is empty: set onec.username and onec.password", c.base)
	} else {
		msg = fmt.Sprintf("1C rejected the credentials of onec.username %q at onec.base_url %s: check the user and password, and that the publication allows Basic authentication", c.cfg.Username, c.base)
	}
	if status >= 200 && status < 300 {
		what := "a body that is not JSON"
		if looksHTML(body) {
			what = "an HTML page"
		}
		msg = fmt.Sprintf("1C answered HTTP %d with %s instead of JSON, the way a publication answers credentials it does not accept. %s (or that onec.base_url points at the ordersync HTTP service)", status, what, msg)
	}
	return &onec.Error{Class: onec.Auth, Op: k.op, Path: k.path, Status: status, Message: msg,
		Err: errors.New("1C answered: " + onec.Snippet(body))}
}

// decode reads an accepted answer into v; a JSON answer of the wrong shape is a
// Permanent error, retrying will not change it.
func (c *Client) decode(k call, ans answer, v any) error {
	if err := json.Unmarshal(ans.body, v); err != nil {
		return &onec.Error{Class: onec.Permanent, Op: k.op, Status: ans.status,
			Message: "1C answered JSON that does not follow contract v1: " + onec.Snippet(ans.body), Err: err}
	}
	return nil
}

// apiError is the {"error":{…}} body of contract v1.
type apiError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field"`
}

// fillAPIError copies 1C's code, message and field into e, or, when the body is not
// an {"error":…} object, a short excerpt of the body as the message. An error
// object without a message keeps e's own message, or else quotes the body.
func fillAPIError(e *onec.Error, body []byte) {
	var v struct {
		Error *apiError `json:"error"`
	}
	if json.Unmarshal(body, &v) == nil && v.Error != nil {
		e.Code, e.Field = v.Error.Code, v.Error.Field
		if v.Error.Message != "" {
			e.Message = v.Error.Message
		}
	}
	if e.Message == "" {
		e.Message = onec.Snippet(body)
	}
}

// isAPIError reports whether body is the contract's error object,
// {"error":{"code":…,"message":…,"field":…}} with a code: the service's handler
// itself answered. Another body, JSON or not ({"error":"…"} from a gateway, say),
// is not the module's answer.
func isAPIError(body []byte) bool {
	var v struct {
		Error *apiError `json:"error"`
	}
	return json.Unmarshal(body, &v) == nil && v.Error != nil && v.Error.Code != ""
}

var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

func isJSON(body []byte) bool {
	t := bytes.TrimSpace(body)
	return len(t) > 0 && (t[0] == '{' || t[0] == '[') && json.Valid(t)
}

func looksHTML(body []byte) bool {
	t := bytes.TrimSpace(body)
	return len(t) > 0 && t[0] == '<'
}

// number is a decimal that marshals as a bare JSON number whatever the decimal
// package's global quoting setting is: 1C reads a quoted number as a string.
type number decimal.Decimal

func (n number) MarshalJSON() ([]byte, error) { return []byte(decimal.Decimal(n).String()), nil }

type wireLine struct {
	SKU      string `json:"sku"`
	Name     string `json:"name"`
	Quantity number `json:"quantity"`
	Price    number `json:"price"`
	Amount   number `json:"amount"`
}

type wireOrder struct {
	ExternalID string        `json:"external_id"`
	Source     string        `json:"source"`
	Number     string        `json:"number"`
	Date       string        `json:"date"`
	Customer   onec.Customer `json:"customer"`
	Warehouse  string        `json:"warehouse"`
	Currency   string        `json:"currency"`
	Lines      []wireLine    `json:"lines"`
	Total      number        `json:"total"`
	Comment    string        `json:"comment"`
}

func toWire(o onec.CreateOrder) wireOrder {
	w := wireOrder{
		ExternalID: o.ExternalID, Source: o.Source, Number: o.Number, Date: o.Date,
		Customer: o.Customer, Warehouse: o.Warehouse, Currency: o.Currency,
		Lines: make([]wireLine, len(o.Lines)), Total: number(o.Total), Comment: o.Comment,
	}
	for i, l := range o.Lines {
		w.Lines[i] = wireLine{SKU: l.SKU, Name: l.Name, Quantity: number(l.Quantity), Price: number(l.Price), Amount: number(l.Amount)}
	}
	return w
}

// restyLogger sends resty's own messages to the debug log.
type restyLogger struct{ log *slog.Logger }

func (l restyLogger) Errorf(format string, v ...any) {
	l.log.Debug("resty: " + fmt.Sprintf(format, v...))
}
func (l restyLogger) Warnf(format string, v ...any) {
	l.log.Debug("resty: " + fmt.Sprintf(format, v...))
}
func (l restyLogger) Debugf(format string, v ...any) {
	l.log.Debug("resty: " + fmt.Sprintf(format, v...))
}
