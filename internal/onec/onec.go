// Package onec declares what ordersync needs from a 1C:Enterprise base: the contract
// v1 types (deploy/1c/openapi.yaml), the Client interface, and the classification of
// failures that the engine's retry policy is built on. internal/onec/httpservice
// implements the client over the base's HTTP service.
package onec

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/shopspring/decimal"

	"github.com/ordersync/ordersync/internal/order"
)

// Order is an order as 1C reports it (Order1C of contract v1).
type Order struct {
	Ref        string `json:"ref"`
	Number     string `json:"number"`
	Date       string `json:"date"`
	ExternalID string `json:"external_id"`
	Posted     bool   `json:"posted"`
	Deleted    bool   `json:"deleted"`
	// Total, Currency and Cancelled are what GET /orders?source=… lists (contract
	// v1, an addition); a find by external id may leave them out. Total is nil when
	// 1C did not say.
	Total     *decimal.Decimal `json:"total,omitempty"`
	Currency  string           `json:"currency,omitempty"`
	Cancelled bool             `json:"cancelled,omitempty"`
}

// ListQuery is GET /orders?source=S&date_from=…&date_to=…: 1C's orders whose
// external id belongs to Source, dated within [DateFrom, DateTo] (1C's zone-less
// local times, YYYY-MM-DDTHH:MM:SS in onec.timezone, both inclusive).
type ListQuery struct {
	Source   string
	DateFrom string
	DateTo   string
}

// Customer of CreateOrder.
type Customer struct {
	Name  string `json:"name"`
	Phone string `json:"phone"`
	Email string `json:"email"`
}

// Line of CreateOrder. Decimals marshal as exact JSON numbers.
type Line struct {
	SKU      string          `json:"sku"`
	Name     string          `json:"name"`
	Quantity decimal.Decimal `json:"quantity"`
	Price    decimal.Decimal `json:"price"`
	Amount   decimal.Decimal `json:"amount"`
}

// CreateOrder is the body of POST /orders. Date is 1C's zone-less local time,
// YYYY-MM-DDTHH:MM:SS in onec.timezone.
type CreateOrder struct {
	ExternalID string          `json:"external_id"`
	Source     string          `json:"source"`
	Number     string          `json:"number"`
	Date       string          `json:"date"`
	Customer   Customer        `json:"customer"`
	Warehouse  string          `json:"warehouse"`
	Currency   string          `json:"currency"`
	Lines      []Line          `json:"lines"`
	Total      decimal.Decimal `json:"total"`
	Comment    string          `json:"comment"`
	// Mapping is where the marketplace account's orders go in 1C. It is not part
	// of the order: the client reads it when it writes the order, and it stays out
	// of every payload that is hashed or stored (json:"-"), so an order keeps its
	// identity when an account's mapping changes.
	Mapping Mapping `json:"-"`
}

// Mapping is the 1C side of one marketplace account: the organisation that sells,
// the warehouse that ships, the partner and counterparty that buy and the
// agreement with them, each a code or a GUID as 1C knows it. An empty field leaves
// the choice to 1C (the module's settings, or onec.odata's single organisation).
type Mapping struct {
	Organization string
	Warehouse    string
	Partner      string
	Counterparty string
	Agreement    string
	// Section is the configuration section the mapping comes from
	// (connectors.ozon-ip.onec), for the keys errors name; not a reference.
	Section string
}

// IsZero reports whether m maps nothing.
func (m Mapping) IsZero() bool { m.Section = ""; return m == Mapping{} }

// MappingError is a marketplace account without the 1C mapping an order needs:
// nothing is sent to 1C until the administrator sets Key.
type MappingError struct {
	// Source is the marketplace account ("ozon-ooo").
	Source string
	// Key is the configuration key to set ("connectors.ozon-ooo.onec.organization").
	Key string
	// Reason, when not empty, says more (what 1C answered, what is ambiguous).
	Reason string
}

func (e *MappingError) Error() string {
	s := fmt.Sprintf("no 1C mapping for account %q: set %s", e.Source, e.Key)
	if e.Reason != "" {
		s += ": " + e.Reason
	}
	return s
}

// Created is the answer to a create. Existing is true when 1C answered 409: the
// order was already there, nothing new was created, and the fields describe it;
// ExternalID is then the existing order's, when 1C said it (its lock, like its
// search, may not tell letter case apart).
type Created struct {
	Ref        string `json:"ref"`
	Number     string `json:"number"`
	Date       string `json:"date"`
	Existing   bool   `json:"-"`
	ExternalID string `json:"-"`
}

// CreateReturn is the body of POST /returns (contract v1, an addition): a customer
// return based on the order's 1C document. Number is the marketplace's id of the
// return; Date is 1C's zone-less local time, YYYY-MM-DDTHH:MM:SS in onec.timezone.
// Lines are what came back, part of a line's quantity allowed.
type CreateReturn struct {
	ExternalID      string          `json:"external_id"` // <source>:return:<id>
	Source          string          `json:"source"`
	Number          string          `json:"number"`
	Date            string          `json:"date"`
	Type            string          `json:"type"`              // full, partial, cancellation
	OrderExternalID string          `json:"order_external_id"` // the order's <source>:<external id>
	OrderRef        string          `json:"order_ref"`         // the order's 1C ref: the return's base document
	Currency        string          `json:"currency"`
	Lines           []Line          `json:"lines"`
	Total           decimal.Decimal `json:"total"`
	Reason          string          `json:"reason"`
	Comment         string          `json:"comment"`
}

// Return is a customer return as 1C reports it (Return1C of contract v1). Total is
// nil when 1C did not say.
type Return struct {
	Ref        string           `json:"ref"`
	Number     string           `json:"number"`
	Date       string           `json:"date"`
	ExternalID string           `json:"external_id"`
	OrderRef   string           `json:"order_ref"`
	Posted     bool             `json:"posted"`
	Deleted    bool             `json:"deleted"`
	Total      *decimal.Decimal `json:"total,omitempty"`
}

// Cancelled is the answer to POST /orders/cancel.
type Cancelled struct {
	Ref    string `json:"ref"`
	Status string `json:"status"`
}

// StockItem is one line of a stock snapshot.
type StockItem struct {
	SKU      string          `json:"sku"`
	Quantity decimal.Decimal `json:"quantity"`
	Price    decimal.Decimal `json:"price"`
}

// Stock is GET /stock.
type Stock struct {
	Warehouse string      `json:"warehouse"`
	TakenAt   string      `json:"taken_at"`
	Items     []StockItem `json:"items"`
}

// Info is GET /ping.
type Info struct {
	Service string `json:"service"`
	Version string `json:"version"`
}

// Client talks to one 1C base. Implementations bound their own concurrency by
// onec.max_concurrency, retry idempotent GETs inside the call, and never retry a POST.
type Client interface {
	Ping(ctx context.Context) (Info, error)
	// FindOrders returns every order whose external-ID attribute equals externalID,
	// an empty slice when there is none.
	FindOrders(ctx context.Context, externalID string) ([]Order, error)
	CreateOrder(ctx context.Context, req CreateOrder) (Created, error)
	CancelOrder(ctx context.Context, externalID, reason string) (Cancelled, error)
	Stock(ctx context.Context, warehouse string) (Stock, error)
	// ListOrders returns 1C's orders of q.Source dated within the period, earliest
	// first, with Total, Currency and Cancelled (reconciliation); an empty slice
	// when there is none.
	ListOrders(ctx context.Context, q ListQuery) ([]Order, error)
	// SettleOrder makes sure that the order o, which 1C holds for req (found or just
	// created), is what req asks and is posted, before the order is reported done.
	// Over the HTTP service there is nothing to do: its module writes an order whole,
	// in one transaction, or refuses it. Over the standard OData interface, which
	// keeps a write in part and answers 200, the client reads the order back and
	// compares it (a difference is a *Mismatch inside the *Error), and posts it.
	SettleOrder(ctx context.Context, o Order, req CreateOrder) error
	// FindReturns returns every customer return whose external-ID attribute equals
	// externalID (GET /returns?external_id=…), an empty slice when there is none.
	FindReturns(ctx context.Context, externalID string) ([]Return, error)
	// CreateReturn sends the return once (POST /returns). 409 (already exists) is
	// not an error: it returns the existing return with Existing set. A module that
	// has no /returns yet is a Configuration failure naming the endpoint.
	CreateReturn(ctx context.Context, req CreateReturn) (Created, error)
	// SettleReturn is SettleOrder for a return r that 1C holds for req, found or
	// just created: nothing to do over the HTTP service; over the standard OData
	// interface a read-back compared with req (a *Mismatch) and the posting.
	SettleReturn(ctx context.Context, r Return, req CreateReturn) error
}

// Closer is a Client that keeps 1C sessions, which Close ends (both interfaces'
// clients are).
type Closer interface {
	Client
	Close(ctx context.Context) error
}

// Difference is one field that 1C holds otherwise than ordersync wrote it.
type Difference struct {
	Field string `json:"field"` // "Контрагент_Key", "Товары[2].Количество", …
	Want  string `json:"wrote"`
	Got   string `json:"holds"`
}

func (d Difference) String() string {
	return fmt.Sprintf("%s: wrote %q, 1C holds %q", d.Field, d.Want, d.Got)
}

// Mismatch is an order that 1C holds otherwise than it was written: a read-back
// found Differences. It is the cause (Err) of the *Error SettleOrder returns, whose
// class says what is to be done: Configuration (an administrator publishes or maps
// what Hint names; the order is looked at again) or Permanent.
type Mismatch struct {
	Ref, Number string
	Differences []Difference
	// Hint says what to publish, map or widen so that the order matches.
	Hint string
}

func (m *Mismatch) Error() string {
	parts := make([]string, len(m.Differences))
	for i, d := range m.Differences {
		parts[i] = d.String()
	}
	s := fmt.Sprintf("1C holds the order %s (№ %s) otherwise than it was written: %s", m.Ref, m.Number, strings.Join(parts, "; "))
	if m.Hint != "" {
		s += "; " + m.Hint
	}
	return s
}

// UnmatchedSKUs are an order's SKUs that match no item of 1C's catalog, or several:
// the cause (Err) of a create's *Error over the standard OData interface, refused
// before anything was written. Nothing is written with a broken or a guessed item.
type UnmatchedSKUs struct {
	// Field is onec.odata.items_by, Set the catalog.
	Field, Set string
	Missing    []string // SKUs no item has
	Several    []string // SKUs more than one item has
}

func (u *UnmatchedSKUs) Error() string {
	var parts []string
	if len(u.Missing) > 0 {
		parts = append(parts, fmt.Sprintf("no item of %s has %s %s: add the items in 1C, map the SKUs (connectors.sku_map), or set onec.odata.items_by",
			u.Set, u.Field, quoteAll(u.Missing)))
	}
	if len(u.Several) > 0 {
		parts = append(parts, fmt.Sprintf("several items of %s have %s %s: make it unique in 1C, or match by another field (onec.odata.items_by)",
			u.Set, u.Field, quoteAll(u.Several)))
	}
	return strings.Join(parts, "; ")
}

func quoteAll(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}

// UnmatchedOf returns the *UnmatchedSKUs err wraps, or nil.
func UnmatchedOf(err error) *UnmatchedSKUs {
	var u *UnmatchedSKUs
	if errors.As(err, &u) {
		return u
	}
	return nil
}

// MappingErrorOf returns the *MappingError err wraps, or nil.
func MappingErrorOf(err error) *MappingError {
	var m *MappingError
	if errors.As(err, &m) {
		return m
	}
	return nil
}

// MismatchOf returns the *Mismatch err wraps, or nil.
func MismatchOf(err error) *Mismatch {
	var m *Mismatch
	if errors.As(err, &m) {
		return m
	}
	return nil
}

// Class is how a failure must be treated.
type Class int

const (
	// Transient: nothing happened in 1C; retrying is safe.
	Transient Class = iota + 1
	// Unknown: a POST was sent and no answer came (timeout, dropped connection, 5xx):
	// the order may exist. The next attempt must find before it creates.
	Unknown
	// Permanent: 1C refused the request for a reason retrying will not change.
	Permanent
	// Auth: credentials or the publication are wrong; an operator must act.
	Auth
	// Configuration: the web server answered 404 or 405 with a page that is not the
	// service's JSON error: the publication, its URL template or onec.base_url is
	// wrong. Nothing ran in 1C and nothing is the order's fault.
	Configuration
)

func (c Class) String() string {
	switch c {
	case Transient:
		return "transient"
	case Unknown:
		return "unknown outcome"
	case Permanent:
		return "permanent"
	case Auth:
		return "authentication"
	case Configuration:
		return "configuration"
	default:
		return fmt.Sprintf("class(%d)", int(c))
	}
}

// Error is a classified failure of one 1C call.
type Error struct {
	Class  Class
	Op     string // "ping", "find", "create", "cancel", "stock", "list", "find_returns", "create_return"
	Path   string // the request's path below onec.base_url ("/orders"), when known
	Status int    // HTTP status, 0 when no answer came
	// API is true when the body was the contract's {"error":…} object: the
	// service's own handler answered (a 404 on cancel then means "no such order").
	API bool
	// Code, Message and Field come from 1C's {"error":{…}} body when it sent one.
	Code    string
	Message string
	Field   string
	// PerOrder: the failure is this order's alone (a SKU 1C has no item for, a
	// field 1C kept otherwise than written). 1C itself answered, so it says nothing
	// of 1C's health or of an endpoint, and other orders go on.
	PerOrder bool
	Err      error // the underlying cause, if any
}

func (e *Error) Error() string {
	s := "1c " + e.Op + ": " + e.Class.String()
	if e.Status != 0 {
		s += fmt.Sprintf(" (HTTP %d)", e.Status)
	}
	if e.Message != "" {
		s += ": " + e.Message
		if e.Field != "" {
			s += " [field " + e.Field + "]"
		}
		if e.Code != "" {
			s += " [code " + e.Code + "]"
		}
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }

// Path is the request path (below onec.base_url) of the failed call, when known.
func PathOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Path
	}
	return ""
}

// ClassOf classifies any error from a Client. Errors that are not *Error (a
// cancelled context, say) are Transient: nothing proves 1C acted on them.
func ClassOf(err error) Class {
	var e *Error
	if errors.As(err, &e) {
		return e.Class
	}
	return Transient
}

// Exchange digests one HTTP exchange with 1C for the attempt journal: enough for an
// accountant to prove what was sent and answered without storing personal data twice.
type Exchange struct {
	Method         string `json:"method"`
	Path           string `json:"path"`
	Status         int    `json:"status"` // 0: no answer
	RequestSHA256  string `json:"request_sha256,omitempty"`
	ResponseSHA256 string `json:"response_sha256,omitempty"`
	Error          string `json:"error,omitempty"`
}

// Recorder collects the exchanges of one attempt. Safe for concurrent use.
type Recorder struct {
	// Now is the clock MarkSent stamps with: the engine's, which is the database's
	// (default time.Now).
	Now func() time.Time

	mu        sync.Mutex
	exchanges []Exchange
	sent      time.Time
}

// MarkSent records that a request that may change 1C (a POST) has just been
// written whole onto the wire: 1C may act on it from now on. Clients call it when
// the request is written, not when the call began, so that a wait for a free
// onec.max_concurrency slot or for a connection is not counted in onec.settle_time.
// A nil recorder ignores it.
func (r *Recorder) MarkSent() {
	if r == nil {
		return
	}
	clock := r.Now
	if clock == nil {
		clock = time.Now
	}
	now := clock()
	r.mu.Lock()
	if now.After(r.sent) {
		r.sent = now
	}
	r.mu.Unlock()
}

// LastSent is when the last request MarkSent recorded was written, zero when none.
func (r *Recorder) LastSent() time.Time {
	if r == nil {
		return time.Time{}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sent
}

// Add appends one exchange.
func (r *Recorder) Add(x Exchange) {
	if r == nil {
		return
	}
	r.mu.Lock()
	r.exchanges = append(r.exchanges, x)
	r.mu.Unlock()
}

// Exchanges returns a copy of what was recorded.
func (r *Recorder) Exchanges() []Exchange {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Exchange(nil), r.exchanges...)
}

type recorderKey struct{}

// WithRecorder returns a context whose 1C calls are recorded into r.
func WithRecorder(ctx context.Context, r *Recorder) context.Context {
	return context.WithValue(ctx, recorderKey{}, r)
}

// RecorderFrom returns the recorder in ctx, or nil (Add on nil is a no-op).
func RecorderFrom(ctx context.Context) *Recorder {
	r, _ := ctx.Value(recorderKey{}).(*Recorder)
	return r
}

// Digest is the hex SHA-256 of a body, empty for an empty body.
func Digest(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// Snippet is the start of a body 1C (or a web server in front of it) answered, on
// one line, for an error message. It is made safe to store: a NUL or invalid UTF-8
// in the answer must not fail the journal's write of the error that quotes it.
func Snippet(body []byte) string {
	const max = 300
	s := order.SafeText(strings.Join(strings.Fields(string(bytes.TrimSpace(body))), " "))
	if s == "" {
		return "(empty body)"
	}
	if utf8.RuneCountInString(s) > max {
		s = string([]rune(s)[:max]) + "…"
	}
	return s
}
