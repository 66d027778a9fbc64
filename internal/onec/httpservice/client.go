// Package httpservice implements onec.Client over the ordersync HTTP service that a
// 1C:Enterprise base publishes (contract v1, deploy/1c/openapi.yaml).
//
// It owns the calls of the contract, exact decimals, and the classification of
// every failure into onec.Error classes. The transport is internal/onec/wire's:
// Basic authentication, the bound on concurrent requests, session reuse,
// onec.max_response, the retries of idempotent GETs (a POST is sent once and never
// again), and the classification of what has no answer to judge (the first four
// rows below, and the expired session).
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
//	404, 405 on /returns (not the {"error"} object)   Configuration: the module predates the returns, update it
//	409 on create with the order                      success: onec.Created{Existing: true}
//	409 or 2xx on create without the order's ref      Unknown
package httpservice

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"github.com/ordersync/ordersync/internal/onec"
	"github.com/ordersync/ordersync/internal/onec/wire"
)

var _ onec.Client = (*Client)(nil)

// Defaults of Config (wire's).
const (
	DefaultTimeout        = wire.DefaultTimeout
	DefaultMaxConcurrency = wire.DefaultMaxConcurrency
	DefaultGetRetries     = wire.DefaultGetRetries
	DefaultRetryBackoff   = wire.DefaultRetryBackoff
	DefaultMaxResponse    = wire.DefaultMaxResponse
)

// Config configures a Client: the transport's configuration. New sets its
// FinishPath and Example to the HTTP service's own.
type Config = wire.Config

// Client talks to one 1C base over contract v1. It is safe for concurrent use.
type Client struct {
	conn *wire.Conn
	cfg  Config // the connection's, defaults applied
	base string // BaseURL without a trailing slash
}

// contract is the Client's judgement of answers, as the connection asks for it.
type contract struct{ c *Client }

func (j contract) Judge(k wire.Call, ans wire.Answer) (wire.Answer, error) { return j.c.judge(k, ans) }

// SessionRefused: a 400 that is not the service's own error object is 1C
// refusing the session, not the request.
func (contract) SessionRefused(ans wire.Answer) bool { return !isAPIError(ans.Body) }

// New checks cfg and returns a client. Errors name the configuration key at fault.
func New(cfg Config) (*Client, error) {
	cfg.FinishPath = "/ping"
	cfg.Example = "http://1c.local/trade/hs/ordersync/v1"
	c := &Client{}
	conn, err := wire.New(cfg, contract{c})
	if err != nil {
		return nil, err
	}
	c.conn, c.cfg, c.base = conn, conn.Config(), conn.Base()
	return c, nil
}

// Close ends the 1C sessions the client keeps, so they free their licences now
// rather than when 1C times them out. It waits for requests in flight, within ctx.
// The client must not be used afterwards.
func (c *Client) Close(ctx context.Context) error { return c.conn.Close(ctx) }

// Each operation of the contract is a call (what is sent) and a result function
// (what an accepted answer means); judge sits between them. Splitting them lets
// the whole judgement of an answer be tested, and fuzzed, without a server.

func pingCall() wire.Call { return wire.Call{Op: "ping", Method: http.MethodGet, Path: "/ping"} }

func findCall(externalID string) wire.Call {
	return wire.Call{Op: "find", Method: http.MethodGet, Path: "/orders", Query: url.Values{"external_id": {externalID}}}
}

func createCall(body []byte) wire.Call {
	return wire.Call{Op: "create", Method: http.MethodPost, Path: "/orders", Body: body,
		Accept: func(st int) bool { return st == http.StatusOK || st == http.StatusCreated || st == http.StatusConflict }}
}

func cancelCall(body []byte) wire.Call {
	return wire.Call{Op: "cancel", Method: http.MethodPost, Path: "/orders/cancel", Body: body}
}

func listCall(q onec.ListQuery) wire.Call {
	return wire.Call{Op: "list", Method: http.MethodGet, Path: "/orders",
		Query: url.Values{"source": {q.Source}, "date_from": {q.DateFrom}, "date_to": {q.DateTo}}}
}

func findReturnsCall(externalID string) wire.Call {
	return wire.Call{Op: "find_returns", Method: http.MethodGet, Path: "/returns", Query: url.Values{"external_id": {externalID}}}
}

func createReturnCall(body []byte) wire.Call {
	return wire.Call{Op: "create_return", Method: http.MethodPost, Path: "/returns", Body: body,
		Accept: func(st int) bool { return st == http.StatusOK || st == http.StatusCreated || st == http.StatusConflict }}
}

func stockCall(warehouse string) wire.Call {
	return wire.Call{Op: "stock", Method: http.MethodGet, Path: "/stock", Query: url.Values{"warehouse": {warehouse}}}
}

// Ping checks that the service answers and the credentials are accepted.
func (c *Client) Ping(ctx context.Context) (onec.Info, error) {
	k := pingCall()
	ans, err := c.conn.Do(ctx, k)
	if err != nil {
		return onec.Info{}, err
	}
	return c.pingResult(k, ans)
}

func (c *Client) pingResult(k wire.Call, ans wire.Answer) (onec.Info, error) {
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
	ans, err := c.conn.Do(ctx, k)
	if err != nil {
		return nil, err
	}
	return c.findResult(k, ans)
}

func (c *Client) findResult(k wire.Call, ans wire.Answer) ([]onec.Order, error) {
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
	ans, err := c.conn.Do(ctx, k)
	if err != nil {
		return onec.Created{}, err
	}
	return c.createResult(k, ans)
}

func (c *Client) createResult(_ wire.Call, ans wire.Answer) (onec.Created, error) {
	if ans.Status == http.StatusConflict {
		var v struct {
			Error *apiError   `json:"error"`
			Order *onec.Order `json:"order"`
		}
		if err := json.Unmarshal(ans.Body, &v); err != nil || v.Order == nil || v.Order.Ref == "" {
			// 1C says the order exists but does not say which: find it next time.
			e := &onec.Error{Class: onec.Unknown, Op: "create", Status: ans.Status,
				Message: "1C answered 409 (already exists) without the existing order"}
			fillAPIError(e, ans.Body)
			return onec.Created{}, e
		}
		return onec.Created{Ref: v.Order.Ref, Number: v.Order.Number, Date: v.Order.Date, Existing: true,
			ExternalID: v.Order.ExternalID}, nil
	}
	var created onec.Created
	if err := json.Unmarshal(ans.Body, &created); err != nil || created.Ref == "" {
		// 1C said it created something; without its ref only a find can tell.
		return onec.Created{}, &onec.Error{Class: onec.Unknown, Op: "create", Status: ans.Status,
			Message: "1C answered " + fmt.Sprint(ans.Status) + " without the ref of the created order: " + onec.Snippet(ans.Body), Err: err}
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
	ans, err := c.conn.Do(ctx, k)
	if err != nil {
		return onec.Cancelled{}, err
	}
	return c.cancelResult(k, ans)
}

func (c *Client) cancelResult(k wire.Call, ans wire.Answer) (onec.Cancelled, error) {
	var v onec.Cancelled
	if err := c.decode(k, ans, &v); err != nil {
		return onec.Cancelled{}, err
	}
	if v.Status != "cancelled" {
		// Not the contract's answer: nothing proves the order was cancelled. The
		// cancel is idempotent, so asking again is safe.
		return onec.Cancelled{}, &onec.Error{Class: onec.Unknown, Op: "cancel", Path: k.Path, Status: ans.Status,
			Message: `1C answered the cancel without "status":"cancelled": ` + onec.Snippet(ans.Body)}
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
	ans, err := c.conn.Do(ctx, k)
	if err != nil {
		return nil, olderModule(err)
	}
	return c.listResult(k, ans)
}

// SettleOrder has nothing to do: the module writes an order whole, in one
// transaction, and posts it as its configuration says, or refuses it.
func (c *Client) SettleOrder(context.Context, onec.Order, onec.CreateOrder) error { return nil }

// SettleReturn has nothing to do, as SettleOrder: the module writes a return whole.
func (c *Client) SettleReturn(context.Context, onec.Return, onec.CreateReturn) error { return nil }

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

func (c *Client) listResult(k wire.Call, ans wire.Answer) ([]onec.Order, error) {
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
			return nil, &onec.Error{Class: onec.Permanent, Op: k.Op, Path: k.Path, Status: ans.Status,
				Message: fmt.Sprintf("1C answered an order list that does not follow contract v1: orders[%d] (external id %q): total %s", i, o.ExternalID, err)}
		}
		out[i].Total = &d
	}
	return out, nil
}

// FindReturns returns the customer returns whose external id is externalID (GET
// /returns?external_id=…), an empty slice when there is none.
func (c *Client) FindReturns(ctx context.Context, externalID string) ([]onec.Return, error) {
	k := findReturnsCall(externalID)
	ans, err := c.conn.Do(ctx, k)
	if err != nil {
		return nil, err
	}
	return c.findReturnsResult(k, ans)
}

func (c *Client) findReturnsResult(k wire.Call, ans wire.Answer) ([]onec.Return, error) {
	var raw struct {
		Returns []struct {
			onec.Return
			Total json.RawMessage `json:"total"`
		} `json:"returns"`
	}
	if err := c.decode(k, ans, &raw); err != nil {
		return nil, err
	}
	out := make([]onec.Return, len(raw.Returns))
	for i, r := range raw.Returns {
		out[i] = r.Return
		if t := strings.TrimSpace(string(r.Total)); t == "" || t == "null" {
			continue // 1C did not say: Total stays nil
		}
		d, err := exactNumber(r.Total)
		if err != nil {
			return nil, &onec.Error{Class: onec.Permanent, Op: k.Op, Path: k.Path, Status: ans.Status,
				Message: fmt.Sprintf("1C answered a return list that does not follow contract v1: returns[%d] (external id %q): total %s", i, r.ExternalID, err)}
		}
		out[i].Total = &d
	}
	return out, nil
}

// CreateReturn sends the return once (POST /returns). 409 (already exists) is not
// an error: it returns the existing return with Existing set.
func (c *Client) CreateReturn(ctx context.Context, req onec.CreateReturn) (onec.Created, error) {
	body, err := json.Marshal(toWireReturn(req))
	if err != nil {
		return onec.Created{}, &onec.Error{Class: onec.Permanent, Op: "create_return", Path: "/returns", Message: "cannot encode the return", Err: err}
	}
	k := createReturnCall(body)
	ans, err := c.conn.Do(ctx, k)
	if err != nil {
		return onec.Created{}, err
	}
	return c.createReturnResult(k, ans)
}

func (c *Client) createReturnResult(k wire.Call, ans wire.Answer) (onec.Created, error) {
	if ans.Status == http.StatusConflict {
		var v struct {
			Return *onec.Return `json:"return"`
		}
		if err := json.Unmarshal(ans.Body, &v); err != nil || v.Return == nil || v.Return.Ref == "" {
			e := &onec.Error{Class: onec.Unknown, Op: k.Op, Path: k.Path, Status: ans.Status,
				Message: "1C answered 409 (already exists) without the existing return"}
			fillAPIError(e, ans.Body)
			return onec.Created{}, e
		}
		return onec.Created{Ref: v.Return.Ref, Number: v.Return.Number, Date: v.Return.Date, Existing: true,
			ExternalID: v.Return.ExternalID}, nil
	}
	var created onec.Created
	if err := json.Unmarshal(ans.Body, &created); err != nil || created.Ref == "" {
		return onec.Created{}, &onec.Error{Class: onec.Unknown, Op: k.Op, Path: k.Path, Status: ans.Status,
			Message: "1C answered " + fmt.Sprint(ans.Status) + " without the ref of the created return: " + onec.Snippet(ans.Body), Err: err}
	}
	return created, nil
}

// Stock reads the stock of warehouse.
func (c *Client) Stock(ctx context.Context, warehouse string) (onec.Stock, error) {
	k := stockCall(warehouse)
	ans, err := c.conn.Do(ctx, k)
	if err != nil {
		return onec.Stock{}, err
	}
	return c.stockResult(k, ans)
}

func (c *Client) stockResult(k wire.Call, ans wire.Answer) (onec.Stock, error) {
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
		return &onec.Error{Class: onec.Permanent, Op: k.Op, Path: k.Path, Status: ans.Status,
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

// judge turns an answer into the operation's success or a classified error.
func (c *Client) judge(k wire.Call, ans wire.Answer) (wire.Answer, error) {
	st := ans.Status
	if st >= 200 && st < 300 && !isJSON(ans.Body) {
		if !k.Idempotent() {
			return wire.Answer{}, c.unreadablePost(k, st, ans.Body)
		}
		return wire.Answer{}, c.authError(k, st, ans.Body)
	}
	if k.Accepts(st) {
		return ans, nil
	}
	return wire.Answer{}, c.classify(k, ans)
}

// classify maps a status that the operation does not accept to a class.
func (c *Client) classify(k wire.Call, ans wire.Answer) *onec.Error {
	st := ans.Status
	if st == http.StatusUnauthorized || st == http.StatusForbidden {
		return c.authError(k, st, ans.Body)
	}
	e := &onec.Error{Op: k.Op, Path: k.Path, Status: st, API: isAPIError(ans.Body)}
	fillAPIError(e, ans.Body)
	switch {
	case (st == http.StatusNotFound || st == http.StatusMethodNotAllowed) && !e.API && strings.HasPrefix(k.Path, "/returns"):
		// The orders' paths may well work: a module older than the returns of
		// contract v1 has no URL template for /returns, and 1C answers that with
		// its own page. Nothing ran, and nothing is the return's fault.
		e.Class = onec.Configuration
		e.Message = fmt.Sprintf("the 1C module has no %s %s: update the ordersync HTTP service in the 1C base to the current module (deploy/1c/ordersync/Module.bsl, URL template /returns); "+
			"if the orders' calls fail the same way, the publication or onec.base_url %s is wrong instead (1C's web server answered %d: %s)",
			k.Method, k.Path, c.base, st, onec.Snippet(ans.Body))
	case (st == http.StatusNotFound || st == http.StatusMethodNotAllowed) && !e.API:
		// The web server's page, not the service's answer: the publication, its URL
		// template, or onec.base_url is wrong. The handler never ran.
		e.Class = onec.Configuration
		e.Message = fmt.Sprintf("1C's web server answered %d for %s %s%s with a page that is not the ordersync service's answer: "+
			"the publication or its URL template is missing, or onec.base_url is wrong (%s)",
			st, k.Method, c.base, k.Path, onec.Snippet(ans.Body))
	case st >= 500 && e.API && e.Code == codeLockConflict:
		// The module's transaction rolled back on a lock conflict: nothing was written.
		e.Class = onec.Transient
	case st == http.StatusNotAcceptable, st == http.StatusTooManyRequests:
		// No free session or licence, or not our turn: the handler never ran.
		e.Class = onec.Transient
	case st >= 500 && k.Idempotent():
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
			k.Method, k.Path, st, mayHaveActed(k), onec.Snippet(ans.Body))
	case st >= 300 && st < 400:
		e.Class = onec.Permanent
		e.Message = fmt.Sprintf("1C redirected to %q: check onec.base_url %s", ans.Header.Get("Location"), c.base)
	default:
		e.Class = onec.Permanent
	}
	return e
}

// codeLockConflict is the code of the contract's error object with which the module
// answers a lock conflict (HTTP 500): its transaction rolled back.
const codeLockConflict = "lock_conflict"

// mayHaveActed says what follows from a POST whose outcome is unknown.
func mayHaveActed(k wire.Call) string {
	switch k.Op {
	case "create":
		return "1C may have created the order, so it is looked up before it is created again"
	case "create_return":
		return "1C may have created the return, so it is looked up before it is created again"
	}
	return "1C may have carried it out"
}

// unreadablePost classifies a 2xx that is not JSON on a POST: 1C's answer mangled
// on the way, or the page a publication answers refused credentials with. Only a
// find can tell which, and it is what comes next.
func (c *Client) unreadablePost(k wire.Call, status int, body []byte) *onec.Error {
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
		k.Method, k.Path, status, what, mayHaveActed(k), who, c.base)
	return &onec.Error{Class: onec.Unknown, Op: k.Op, Path: k.Path, Status: status, Message: msg,
		Err: errors.New("1C answered: " + onec.Snippet(body))}
}

// authError says which configuration keys to check. It never includes the password.
func (c *Client) authError(k wire.Call, status int, body []byte) *onec.Error {
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
	return &onec.Error{Class: onec.Auth, Op: k.Op, Path: k.Path, Status: status, Message: msg,
		Err: errors.New("1C answered: " + onec.Snippet(body))}
}

// decode reads an accepted answer into v; a JSON answer of the wrong shape is a
// Permanent error, retrying will not change it.
func (c *Client) decode(k wire.Call, ans wire.Answer, v any) error {
	if err := json.Unmarshal(ans.Body, v); err != nil {
		return &onec.Error{Class: onec.Permanent, Op: k.Op, Status: ans.Status,
			Message: "1C answered JSON that does not follow contract v1: " + onec.Snippet(ans.Body), Err: err}
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
	// The account's mapping (contract v1, an addition): codes or GUIDs, each sent
	// only when set, so that an order without a mapping is the same request as
	// before the mapping existed and an older module, which ignores fields it does
	// not know, reads it as it always has.
	Organization string `json:"organization,omitempty"`
	Partner      string `json:"partner,omitempty"`
	Counterparty string `json:"counterparty,omitempty"`
	Agreement    string `json:"agreement,omitempty"`
}

// toWire encodes a create. The contract has one warehouse field: the order's own
// warehouse, when it names one, wins over the account's (Mapping.Warehouse is where
// the account's orders ship from unless the marketplace said otherwise).
func toWire(o onec.CreateOrder) wireOrder {
	w := wireOrder{
		ExternalID: o.ExternalID, Source: o.Source, Number: o.Number, Date: o.Date,
		Customer: o.Customer, Warehouse: cmp.Or(o.Warehouse, o.Mapping.Warehouse), Currency: o.Currency,
		Lines: make([]wireLine, len(o.Lines)), Total: number(o.Total), Comment: o.Comment,
		Organization: o.Mapping.Organization, Partner: o.Mapping.Partner,
		Counterparty: o.Mapping.Counterparty, Agreement: o.Mapping.Agreement,
	}
	for i, l := range o.Lines {
		w.Lines[i] = wireLine{SKU: l.SKU, Name: l.Name, Quantity: number(l.Quantity), Price: number(l.Price), Amount: number(l.Amount)}
	}
	return w
}

type wireReturn struct {
	ExternalID      string     `json:"external_id"`
	Source          string     `json:"source"`
	Number          string     `json:"number"`
	Date            string     `json:"date"`
	Type            string     `json:"type"`
	OrderExternalID string     `json:"order_external_id"`
	OrderRef        string     `json:"order_ref"`
	Currency        string     `json:"currency"`
	Lines           []wireLine `json:"lines"`
	Total           number     `json:"total"`
	Reason          string     `json:"reason"`
	Comment         string     `json:"comment"`
}

func toWireReturn(r onec.CreateReturn) wireReturn {
	w := wireReturn{
		ExternalID: r.ExternalID, Source: r.Source, Number: r.Number, Date: r.Date, Type: r.Type,
		OrderExternalID: r.OrderExternalID, OrderRef: r.OrderRef, Currency: r.Currency,
		Lines: make([]wireLine, len(r.Lines)), Total: number(r.Total), Reason: r.Reason, Comment: r.Comment,
	}
	for i, l := range r.Lines {
		w.Lines[i] = wireLine{SKU: l.SKU, Name: l.Name, Quantity: number(l.Quantity), Price: number(l.Price), Amount: number(l.Amount)}
	}
	return w
}
