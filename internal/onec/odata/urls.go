package odata

import (
	"fmt"
	"net/url"
	"strings"
)

// MaxQuery is the budget of a request's query string. A web server in front of
// 1C (IIS's maxQueryString is 2,048 bytes) answers a longer one with its own HTML
// 404 page, which says nothing of the cause; ordersync refuses to send one.
const MaxQuery = 1500

// QueryError is a query string over MaxQuery bytes, refused before it is sent.
type QueryError struct {
	Set   string
	Bytes int
}

func (e *QueryError) Error() string {
	return fmt.Sprintf("a query of %s would be %d bytes, over the %d a web server in front of 1C passes", e.Set, e.Bytes, MaxQuery)
}

// Literal is s as an OData string literal: in single quotes, each quote doubled.
func Literal(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// GUID is ref as an OData guid literal.
func GUID(ref string) string { return "guid'" + ref + "'" }

// queryEscape escapes a query value with spaces as %20: 1C reads a '+' as a plus.
func queryEscape(s string) string { return strings.ReplaceAll(url.QueryEscape(s), "+", "%20") }

// URLs builds the requests of one publication's root (onec.base_url, the
// …/odata/standard.odata address).
type URLs struct {
	Root string // without a trailing slash
}

// NewURLs is URLs of base, trimmed of a trailing slash.
func NewURLs(base string) URLs { return URLs{Root: strings.TrimRight(base, "/")} }

// Set is the entity set's URL.
func (u URLs) Set(set string) string { return u.Root + "/" + url.PathEscape(set) }

// Entity is one object's canonical URL: Set(guid'…').
func (u URLs) Entity(set, ref string) string { return u.Set(set) + "(" + GUID(ref) + ")" }

// Create is the URL a new object is POSTed to.
func (u URLs) Create(set string) string { return u.Set(set) + "?$format=json" }

// Read is the URL an object is read back from.
func (u URLs) Read(set, ref string) string { return u.Entity(set, ref) + "?$format=json" }

// Post is the URL that posts a document, not in the operational mode (an order is
// dated by the marketplace, not now). It is POSTed with an empty body.
func (u URLs) Post(set, ref string) string {
	return u.Entity(set, ref) + "/Post?PostingModeOperational=false"
}

// Query is a listing of set: filter ($filter, "" for none), the fields to select
// (nil for all), and a page in a stable order. It refuses a query over MaxQuery.
type Query struct {
	Filter  string
	Select  []string
	OrderBy string
	Top     int
	Skip    int
}

// List is the URL of q over set, with JSON and no metadata.
func (u URLs) List(set string, q Query) (string, error) {
	parts := []string{"$format=json"}
	if q.Filter != "" {
		parts = append(parts, "$filter="+queryEscape(q.Filter))
	}
	if len(q.Select) > 0 {
		parts = append(parts, "$select="+queryEscape(strings.Join(q.Select, ",")))
	}
	if q.OrderBy != "" {
		parts = append(parts, "$orderby="+queryEscape(q.OrderBy))
	}
	if q.Top > 0 {
		parts = append(parts, fmt.Sprintf("$top=%d", q.Top))
	}
	if q.Skip > 0 {
		parts = append(parts, fmt.Sprintf("$skip=%d", q.Skip))
	}
	query := strings.Join(parts, "&")
	if len(query) > MaxQuery {
		return "", &QueryError{Set: set, Bytes: len(query)}
	}
	return u.Set(set) + "?" + query, nil
}

// FindByMarker is the listing of the profile's documents whose marker is
// externalID: the find before every create.
func (u URLs) FindByMarker(p Profile, externalID string) (string, error) {
	return u.List(p.Document, Query{Filter: p.Marker + " eq " + Literal(externalID), OrderBy: "Date"})
}
