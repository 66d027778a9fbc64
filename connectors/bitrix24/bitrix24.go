// Package bitrix24 fetches Bitrix24 CRM deals and maps them to canonical orders. A
// portal's outgoing webhook (ONCRMDEALADD, ONCRMDEALUPDATE) names only the deal id;
// the inbox registers the deal's create (bitrix24:deal:<deal id>:create) with a
// fetch payload, and the engine calls Client.Fetch before it calls 1C. Fetch reads
// the deal through the portal's inbound REST webhook (webhooks.bitrix24.rest_url,
// https://<portal>/rest/<user id>/<code>/): crm.deal.get, then — only for a deal in
// one of the create stages — crm.deal.productrows.get, crm.contact.get (or
// crm.company.get when the deal has no contact) and crm.product.get for the SKUs.
//
// The mapping:
//   - source "bitrix24"; external_id and number are the deal id (TITLE is free text an
//     employee types and renames; it goes to the comment, with COMMENTS);
//   - created_at is DATE_CREATE (ISO 8601 with the portal's offset); currency is
//     CURRENCY_ID, which must be an ISO 4217 code;
//   - a line per product row: name PRODUCT_NAME, quantity QUANTITY, price PRICE — the
//     unit price after the row's discount, taxes included, which is what the buyer
//     pays (PRICE_NETTO/PRICE_BRUTTO are before the discount; DISCOUNT_SUM is per
//     unit and already subtracted). Numbers arrive as JSON numbers or strings and are
//     read exactly, never through float64; total is the exact sum of the lines;
//   - the SKU comes from Config.SKUField: by default the catalog product's XML_ID (the
//     external code, which a catalog exchanged with 1C fills with the 1C item's id),
//     or its CODE, a product property (PROPERTY_<n>, e.g. the article), or PRODUCT_ID
//     itself. The row's own XML_ID is not used: it names the row (sale_basket_651),
//     not the product;
//   - customer: the contact's NAME LAST_NAME, first PHONE and EMAIL; without a contact,
//     the company's TITLE, PHONE and EMAIL.
//
// The webhook code in the REST URL is a password. The HTTP client never sees it:
// requests are built with a placeholder in its place and a transport puts the code
// in on the way out, so neither error texts (a transport error quotes the URL) nor
// debug logs can carry it; a URL the portal sends back (a redirect, an error page
// quoting the path) is scrubbed. Errors name webhooks.bitrix24.rest_url instead.
package bitrix24

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/go-resty/resty/v2"

	"github.com/ordersync/ordersync/connectors"
	"github.com/ordersync/ordersync/internal/order"
)

// Name is the connector's name and the orders' source.
const Name = "bitrix24"

// Configuration keys named in errors.
const (
	KeyRESTURL      = "webhooks.bitrix24.rest_url"
	keyCreateStages = "webhooks.bitrix24.create_stages"
	keySKUField     = "webhooks.bitrix24.sku_field"
)

// Where the SKU of a line comes from (Config.SKUField). A product property is named
// PROPERTY_<id>, as crm.product.get returns it.
const (
	SKUFromXMLID     = "xml_id"     // the catalog product's XML_ID (external code); the default
	SKUFromCode      = "code"       // the catalog product's CODE (symbolic code)
	SKUFromProductID = "product_id" // the row's PRODUCT_ID, the catalog id itself
)

// DefaultCreateStage is the general pipeline's won stage.
const DefaultCreateStage = "WON"

// Bitrix24 cloud drains its request counter by 2 a second (5 on Enterprise) and
// refuses with QUERY_LIMIT_EXCEEDED once 50 (250) are pending: at 2 a second the limit
// is never hit.
const defaultRatePerSecond = 2

// retryWait is the first wait before a read is retried; it doubles, with jitter.
var retryWait = 500 * time.Millisecond

// redacted stands in for the webhook code in every URL the HTTP client sees.
const redacted = "REDACTED"

// Config configures the client.
type Config struct {
	// RESTURL is the portal's inbound webhook (webhooks.bitrix24.rest_url):
	// https://portal.bitrix24.kz/rest/1/xxxx/. It carries the webhook code: a secret.
	RESTURL string
	// CreateStages are the STAGE_IDs that mean "create the order"; default [WON].
	// A stage matches exactly (letter case aside): a pipeline's stage is listed with
	// its prefix, e.g. C1:WON for pipeline 1, so [WON] does not take pipeline deals.
	CreateStages []string
	// Warehouse is the 1C warehouse the orders are created for.
	Warehouse string
	// SKUField is where a line's SKU comes from: xml_id (default), code, product_id
	// or PROPERTY_<n>. Every choice but product_id costs one crm.product.get per
	// distinct product of the deal.
	SKUField string
	// Timeout bounds one request; default 30s.
	Timeout time.Duration
	// RatePerSecond limits requests; default 2, what the cloud drains per second;
	// negative: no limit (tests).
	RatePerSecond float64
	Transport     http.RoundTripper // tests
	Logger        *slog.Logger
}

// Client fetches deals. It is safe for concurrent use.
type Client struct {
	cfg      Config
	stages   []string
	skuField string // xml_id, code, product_id or PROPERTY_<n>
	code     string // the webhook code, for scrubbing error bodies
	http     *resty.Client
	log      *slog.Logger
}

// The engine's Fetcher (internal/engine), declared here without importing it.
var _ interface {
	Fetch(ctx context.Context, id string) (order.Order, error)
} = (*Client)(nil)

var (
	userIDRe   = regexp.MustCompile(`^[0-9]+$`)
	propertyRe = regexp.MustCompile(`^PROPERTY_[0-9]+$`)
)

// New checks cfg and returns a client. Errors name the configuration key and never
// quote the REST URL.
func New(cfg Config) (*Client, error) {
	cfg.Timeout = cmp.Or(cfg.Timeout, 30*time.Second)
	cfg.RatePerSecond = cmp.Or(cfg.RatePerSecond, defaultRatePerSecond)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	base, prefix, code, err := parseRESTURL(cfg.RESTURL)
	if err != nil {
		return nil, err
	}
	stages, err := createStages(cfg.CreateStages)
	if err != nil {
		return nil, err
	}
	skuField, err := skuSource(cfg.SKUField)
	if err != nil {
		return nil, err
	}
	rps := max(cfg.RatePerSecond, 0)
	transport := cfg.Transport
	if transport == nil {
		transport = http.DefaultTransport
	}
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "application/json")
	hc := connectors.NewClient(connectors.ClientConfig{
		Connector:     Name,
		BaseURL:       base + prefix + redacted,
		Timeout:       cfg.Timeout,
		RatePerSecond: rps,
		Burst:         max(int(2*rps), 1),
		Header:        h,
		Logger:        cfg.Logger,
		Transport: &codeTransport{
			base:        transport,
			placeholder: prefix + redacted + "/",
			real:        prefix + code + "/",
		},
	})
	// A portal that redirects is a REST URL to correct (http for https, an old
	// address); following it would also carry the code to wherever it points.
	hc.SetRedirectPolicy(resty.NoRedirectPolicy()).SetRetryWaitTime(retryWait)
	return &Client{
		cfg:      cfg,
		stages:   stages,
		skuField: skuField,
		code:     code,
		http:     hc,
		log:      cfg.Logger.With("connector", Name),
	}, nil
}

// parseRESTURL splits https://portal/rest/<user id>/<code>/ into the origin, the path
// up to the code (/rest/<user id>/) and the code.
func parseRESTURL(raw string) (base, prefix, code string, err error) {
	const want = "must be the portal's inbound webhook URL, https://<portal>/rest/<user id>/<code>/"
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return "", "", "", errors.New(KeyRESTURL + ": is required (the portal's inbound webhook URL, https://<portal>/rest/<user id>/<code>/)")
	}
	u, perr := url.Parse(raw)
	if perr != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil {
		return "", "", "", errors.New(KeyRESTURL + ": " + want)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return "", "", "", errors.New(KeyRESTURL + ": " + want + " (without a query)")
	}
	parts := strings.Split(strings.Trim(u.Path, "/"), "/")
	i := slices.Index(parts, "rest")
	switch {
	case i < 0 || len(parts) < i+3:
		return "", "", "", errors.New(KeyRESTURL + ": " + want)
	case len(parts) > i+3:
		return "", "", "", errors.New(KeyRESTURL + ": " + want + " — without a method name after the code")
	case !userIDRe.MatchString(parts[i+1]):
		return "", "", "", errors.New(KeyRESTURL + ": " + want + " (the user id is a number)")
	case parts[i+2] == redacted:
		return "", "", "", errors.New(KeyRESTURL + ": the webhook code is a placeholder")
	}
	base = u.Scheme + "://" + u.Host
	prefix = "/" + strings.Join(parts[:i+2], "/") + "/"
	return base, prefix, parts[i+2], nil
}

func createStages(in []string) ([]string, error) {
	if len(in) == 0 {
		return []string{DefaultCreateStage}, nil
	}
	out := make([]string, 0, len(in))
	for i, s := range in {
		s = strings.ToUpper(strings.TrimSpace(s))
		if s == "" {
			return nil, fmt.Errorf("%s[%d]: is empty", keyCreateStages, i)
		}
		out = append(out, s)
	}
	return out, nil
}

func skuSource(s string) (string, error) {
	s = strings.TrimSpace(s)
	switch l := strings.ToLower(s); {
	case l == "", l == SKUFromXMLID:
		return SKUFromXMLID, nil
	case l == SKUFromCode, l == SKUFromProductID:
		return l, nil
	case propertyRe.MatchString(strings.ToUpper(s)):
		return strings.ToUpper(s), nil
	}
	return "", fmt.Errorf("%s: must be xml_id, code, product_id or PROPERTY_<id>, got %q", keySKUField, s)
}

// Name is "bitrix24".
func (c *Client) Name() string { return Name }

// codeTransport puts the webhook code into the path of each request on its way out.
// The HTTP client, its errors and its logs see only the placeholder.
type codeTransport struct {
	base              http.RoundTripper
	placeholder, real string
}

func (t *codeTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if !strings.HasPrefix(r.URL.Path, t.placeholder) {
		return t.base.RoundTrip(r)
	}
	out := r.Clone(r.Context())
	u := *r.URL
	u.Path = t.real + strings.TrimPrefix(r.URL.Path, t.placeholder)
	u.RawPath = ""
	out.URL = &u
	return t.base.RoundTrip(out)
}

// envelope is every answer: {"result": …, "time": {…}} or
// {"error": "CODE", "error_description": "…"}.
type envelope struct {
	Result      json.RawMessage `json:"result"`
	Error       string          `json:"error"`
	Description string          `json:"error_description"`
}

// APIError is an answer that is neither a result, nor about the webhook, nor "not
// found": a 5xx or QUERY_LIMIT_EXCEEDED still there after the retries, a 400 about a
// parameter, an unreadable body.
type APIError struct {
	Method      string
	Status      int
	Code        string // the "error" field, often empty
	Description string // "error_description", or a snippet of a body that is not JSON
}

func (e *APIError) Error() string {
	msg := fmt.Sprintf("%s: HTTP %d", e.Method, e.Status)
	if e.Code != "" {
		msg += ": " + e.Code
	}
	if e.Description != "" {
		msg += ": " + e.Description
	}
	return msg
}

// Error codes that refuse the webhook itself (the system errors of the REST API):
// a wrong user id or code, an expired or blocked webhook, a webhook without the crm
// scope, a plan without REST.
var authCodes = map[string]string{
	"INVALID_CREDENTIALS":    "no active inbound webhook has this user id and code",
	"NO_AUTH_FOUND":          "the URL carries no webhook code",
	"EXPIRED_TOKEN":          "the webhook has expired",
	"INSUFFICIENT_SCOPE":     "the webhook lacks the crm permission",
	"ERROR_METHOD_NOT_FOUND": "the webhook lacks the crm permission (the portal hides methods outside its scope)",
	"ACCESS_DENIED":          "REST is not available on the portal's plan",
	"OVERLOAD_LIMIT":         "the portal blocked REST for overload: ask Bitrix24 support",
	"INVALID_REQUEST":        "the portal wants https",
	"USER_ACCESS_ERROR":      "the webhook's user has no access",
	"PORTAL_DELETED":         "the portal is closed or deleted",
}

// call runs one REST method and decodes its result into out. Reads are retried by
// the shared client on 429/5xx (QUERY_LIMIT_EXCEEDED is a 503). The error is a
// transport error, a *connectors.AuthError naming webhooks.bitrix24.rest_url, one
// wrapping connectors.ErrNotFound ("Not found": the id names nothing), or an *APIError.
func (c *Client) call(ctx context.Context, method string, params map[string]any, out any) error {
	resp, err := connectors.Read(c.http.R().SetContext(ctx)).SetBody(params).Post(method)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("%s: %w", method, ctx.Err())
		}
		if errors.Is(err, resty.ErrAutoRedirectDisabled) {
			// Not err itself: Go quotes the redirect's target, which may echo the code.
			return fmt.Errorf("%s: the portal answers with a redirect: check %s (https, the portal's current address): %w",
				method, KeyRESTURL, resty.ErrAutoRedirectDisabled)
		}
		return fmt.Errorf("%s: %w", method, c.scrub(err))
	}
	st := resp.StatusCode()
	c.log.DebugContext(ctx, "bitrix24 request", "method", method, "status", st)
	var env envelope
	jsonErr := json.Unmarshal(resp.Body(), &env)
	if jsonErr == nil && env.Error == "" && st >= 200 && st < 300 {
		if len(env.Result) == 0 || string(env.Result) == "null" {
			return &APIError{Method: method, Status: st, Description: "the answer has no result"}
		}
		if err := decodeResult(method, resp.Body(), env.Result, out); err != nil {
			return err
		}
		if err := json.Unmarshal(env.Result, out); err != nil {
			return &APIError{Method: method, Status: st, Description: "unreadable result: " + c.snippet([]byte(err.Error()))}
		}
		return nil
	}
	desc := c.snippet([]byte(env.Description))
	if jsonErr != nil {
		desc = c.snippet(resp.Body())
	}
	return c.interpret(method, st, strings.TrimSpace(env.Error), desc)
}

// decodeResult checks an answer strictly before it is decoded (order.CheckJSON):
// the envelope's keys and the result's as the wire types name them, each once, text
// valid UTF-8. What fails is the deal's, not the connection's: an
// *order.ValidationError naming the method and the field, so the create fails
// instead of retrying an answer that will not change.
func decodeResult(method string, body, result []byte, out any) error {
	err := order.CheckJSON(body, order.JSONOptions{Into: envelope{}, Shallow: true})
	root := method + " answer"
	if err == nil {
		err = order.CheckJSON(result, order.JSONOptions{Into: out})
		root = method + " result"
	}
	var ve *order.ValidationError
	if !errors.As(err, &ve) {
		return err
	}
	ps := make([]order.FieldError, len(ve.Problems))
	for i, p := range ve.Problems {
		field := root
		switch {
		case p.Field == "(document)":
		case strings.HasPrefix(p.Field, "["):
			field += p.Field
		default:
			field += "." + p.Field
		}
		ps[i] = order.FieldError{Field: field, Message: p.Message}
	}
	return &order.ValidationError{Problems: ps}
}

// interpret maps an error answer to the errors call documents: the one place that
// knows Bitrix24's error codes.
func (c *Client) interpret(method string, status int, code, desc string) error {
	upper := strings.ToUpper(code)
	lowerDesc := strings.ToLower(strings.TrimSuffix(desc, "."))
	if hint, ok := authCodes[upper]; ok || status == http.StatusUnauthorized || status == http.StatusForbidden ||
		lowerDesc == "access denied" {
		if !ok {
			hint = "the portal refused the webhook"
			if lowerDesc == "access denied" {
				hint = "the webhook's user may not read it (CRM access permissions)"
			}
		}
		detail := strings.TrimLeft(strings.Join([]string{code, desc}, ": "), ": ")
		return &connectors.AuthError{Connector: Name, Key: KeyRESTURL, Status: status,
			Err: fmt.Errorf("%s: %s (%s)", method, detail, hint)}
	}
	// The documented answer is HTTP 400 {"error": "", "error_description": "Not found"};
	// older portals put NOT_FOUND in "error".
	if upper == "NOT_FOUND" || upper == "ERROR_NOT_FOUND" || lowerDesc == "not found" {
		return fmt.Errorf("%s: %w", method, connectors.ErrNotFound)
	}
	return &APIError{Method: method, Status: status, Code: code, Description: desc}
}

// scrub takes the webhook code out of a transport error. Requests carry only the
// placeholder, but an error can quote a URL the portal sent back.
func (c *Client) scrub(err error) error {
	if c.code == "" || !strings.Contains(err.Error(), c.code) {
		return err
	}
	var ue *url.Error
	if errors.As(err, &ue) && !strings.Contains(ue.Err.Error(), c.code) {
		return &url.Error{Op: ue.Op, URL: strings.ReplaceAll(ue.URL, c.code, redacted), Err: ue.Err}
	}
	return errors.New(strings.ReplaceAll(err.Error(), c.code, redacted))
}

// snippet is a short, single-line excerpt of a body, the webhook code scrubbed (a
// proxy's error page may quote the path).
func (c *Client) snippet(b []byte) string {
	s := strings.Join(strings.Fields(string(b)), " ")
	if c.code != "" {
		s = strings.ReplaceAll(s, c.code, redacted)
	}
	if r := []rune(s); len(r) > 200 {
		s = string(r[:200]) + "…"
	}
	return order.SafeText(s)
}
