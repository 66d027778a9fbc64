package odata

import (
	"encoding/json"
	"encoding/xml"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/ordersync/ordersync/internal/onec"
)

// 1C's internal error codes of the standard OData interface that ordersync acts on.
const (
	CodeNotFound   = 9  // no entity with this key
	CodeRowsDirect = 13 // tabular rows cannot be created directly
	CodeBadOptions = 14 // the query options do not parse (an `in`, say)
	CodeKeyExists  = 15 // an entity with this key exists
	CodeRights     = 20 // the user lacks the right
)

// KeyExists reports whether err is 1C refusing a create because an object with
// its Ref_Key exists: with a deterministic Ref_Key, the order is there.
func KeyExists(err error) bool {
	var e *onec.Error
	return errors.As(err, &e) && e.API && e.Code == strconv.Itoa(CodeKeyExists)
}

type jsonError struct {
	Err *struct {
		Code    json.RawMessage `json:"code"`
		Message struct {
			Value string `json:"value"`
		} `json:"message"`
	} `json:"odata.error"`
}

type xmlError struct {
	XMLName xml.Name `xml:"error"`
	Code    string   `xml:"code"`
	Message string   `xml:"message"`
}

// ParseError reads a failed answer as the engine's onec.Error: 1C's JSON error
// ({"odata.error":{"code","message":{"lang","value"}}}) or its XML one (m:error),
// API true and Code its number; or else a page of the web server (an HTML 404 for
// a query too long or a wrong publication). write tells whether the request
// changed data (a POST or PATCH): a server error or a gateway's then leaves the
// outcome unknown.
func ParseError(op, path string, status int, body []byte, write bool) *onec.Error {
	e := &onec.Error{Op: op, Path: path, Status: status}
	code := -2
	var je jsonError
	var xe xmlError
	switch {
	case json.Unmarshal(body, &je) == nil && je.Err != nil:
		code, e.Message, e.API = parseCode(je.Err.Code), je.Err.Message.Value, true
	case xml.Unmarshal(body, &xe) == nil && xe.Code != "":
		if n, err := strconv.Atoi(strings.TrimSpace(xe.Code)); err == nil {
			code = n
		}
		e.Message, e.API = strings.TrimSpace(xe.Message), true
	default:
		e.Message = describeBody(body)
	}
	if e.API {
		e.Code = strconv.Itoa(code)
	}
	e.Class = classify(status, code, e.API, write)
	return e
}

// parseCode reads 1C's code, a number or a string of one.
func parseCode(raw json.RawMessage) int {
	var n int
	if json.Unmarshal(raw, &n) == nil {
		return n
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(s)); err == nil {
			return n
		}
	}
	return -2
}

// describeBody is a body that is not 1C's error, for a message: an HTML page by
// its title, anything else as onec.Snippet quotes it; "" for none.
func describeBody(body []byte) string {
	s := strings.TrimSpace(string(body))
	if s == "" {
		return ""
	}
	if i := strings.Index(strings.ToLower(s), "<title>"); i >= 0 {
		rest := s[i+len("<title>"):]
		if j := strings.Index(strings.ToLower(rest), "</title>"); j >= 0 {
			return "a web page, not 1C's answer: " + onec.Snippet([]byte(rest[:j]))
		}
	}
	return onec.Snippet(body)
}

// classify decides the class of a failed answer.
func classify(status, code int, api, write bool) onec.Class {
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden || code == CodeRights:
		return onec.Auth
	case !api && (status == http.StatusNotFound || status == http.StatusMethodNotAllowed):
		// The web server's page, not 1C's: the publication, the entity set's
		// composition or the URL is wrong (or the query too long). Nothing ran.
		return onec.Configuration
	case code == 8 || code == 10 || code == 11 || code == 18:
		// An entity set, property or method the publication does not have.
		return onec.Configuration
	case status >= 500 && write:
		// 1C may have written before it failed (a handler after the write, a
		// gateway that gave up): find before the next create.
		return onec.Unknown
	case status >= 500 || status == http.StatusTooManyRequests:
		return onec.Transient
	}
	return onec.Permanent
}
