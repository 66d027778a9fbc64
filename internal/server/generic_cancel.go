package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/ordersync/ordersync/internal/order"
)

// A cancel delivery is the body a generic sender posts, in the same signed envelope
// as an order, when an order it sent is cancelled:
//
//	{"source": "site", "external_id": "A-1001", "cancelled": true, "reason": "…"}
//
// It registers <source>:order:<external_id>:cancel, whose payload is an order.Cancel
// naming the create's key: the same operation `ordersync order cancel` and the
// marketplace pollers register, so the engine settles the create first.

// cancelFields are the fields of a cancel delivery.
var cancelFields = map[string]bool{"source": true, "external_id": true, "cancelled": true, "reason": true}

// isCancelDelivery tells a cancel delivery from a canonical order: a JSON object with
// a "cancelled" key (which no order has). Whether that key is true, and that there
// are no lines, parseCancel checks and names. Anything else, malformed JSON included,
// is left to parseOrder.
//
// It answers what decoding the body into a map[string]json.RawMessage and looking
// the key up would answer, without building the map: the body is checked to be
// valid JSON, then only the top-level keys of an object are read, each compared as
// decoded (a key written with escapes is decoded as encoding/json decodes it).
func isCancelDelivery(body []byte) bool {
	if !json.Valid(body) {
		return false
	}
	i := skipJSONSpace(body, 0)
	if body[i] != '{' {
		return false // null, an array or a scalar: no keys
	}
	i++
	for {
		i = skipJSONSpace(body, i)
		if body[i] == '}' {
			return false
		}
		end := jsonStringEnd(body, i)
		if jsonKeyIs(body[i:end], "cancelled") {
			return true
		}
		i = skipJSONSpace(body, end) // the colon
		i = skipJSONSpace(body, skipJSONValue(body, skipJSONSpace(body, i+1)))
		if body[i] != ',' {
			return false // the closing brace
		}
		i++
	}
}

// skipJSONSpace, jsonStringEnd and skipJSONValue walk a document json.Valid accepted:
// the index of the first byte at or after i that is not white space; the index after
// the string that starts at i; the index after the value that starts at i.
func skipJSONSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

func jsonStringEnd(b []byte, i int) int {
	for j := i + 1; ; j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
}

func skipJSONValue(b []byte, i int) int {
	switch b[i] {
	case '"':
		return jsonStringEnd(b, i)
	case '{', '[':
		depth := 0
		for j := i; ; j++ {
			switch b[j] {
			case '"':
				j = jsonStringEnd(b, j) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1
				}
			}
		}
	}
	for j := i; j < len(b); j++ {
		switch b[j] {
		case ',', ' ', '\t', '\n', '\r', '}', ']':
			return j
		}
	}
	return len(b)
}

// jsonKeyIs reports whether the JSON string raw (quotes included) decodes to want.
func jsonKeyIs(raw []byte, want string) bool {
	if !bytes.ContainsRune(raw, '\\') {
		return string(raw[1:len(raw)-1]) == want
	}
	var s string
	return json.Unmarshal(raw, &s) == nil && s == want
}

// parseCancel parses a cancel delivery for the path's source. The source follows the
// rule of an order delivery (empty: the path's; another one is refused), the source
// and the external id are checked by the canonical order's rules, cancelled must be
// true, and any other field (lines above all) is refused. Errors are
// *order.ValidationError naming every offending field.
func parseCancel(body []byte, source string) (order.Cancel, error) {
	// The raw bytes first: invalid UTF-8 and a key twice are refused before a
	// decoder replaces or drops anything (unknown keys are named below).
	if err := order.CheckJSON(body, order.JSONOptions{}); err != nil && json.Valid(body) {
		return order.Cancel{}, err
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(body, &doc); err != nil {
		return order.Cancel{}, &order.ValidationError{Problems: []order.FieldError{{Field: "(document)", Message: "malformed JSON: " + err.Error()}}}
	}
	var ps []order.FieldError
	add := func(field, format string, args ...any) {
		ps = append(ps, order.FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
	}
	str := func(field string) string {
		raw, ok := doc[field]
		if !ok || bytes.Equal(raw, []byte("null")) {
			return ""
		}
		var s string
		if json.Unmarshal(raw, &s) != nil {
			add(field, "must be a JSON string, got %s", raw)
		}
		return s
	}

	var unknown []string
	for k := range doc {
		if !cancelFields[k] {
			unknown = append(unknown, k)
		}
	}
	sort.Strings(unknown)
	for _, k := range unknown {
		if k == "lines" {
			add(k, "a cancel delivery (\"cancelled\": true) carries no lines; send the order without \"cancelled\"")
			continue
		}
		add(k, "is not a field of a cancel delivery (source, external_id, cancelled, reason)")
	}

	var cancelled bool
	if json.Unmarshal(doc["cancelled"], &cancelled) != nil {
		add("cancelled", "must be the JSON boolean true, got %s", doc["cancelled"])
	} else if !cancelled {
		add("cancelled", "must be true in a cancel delivery (an order is sent without it)")
	}

	c := order.Cancel{Source: str("source"), ExternalID: str("external_id"), Reason: strings.TrimSpace(str("reason"))}
	if msg := order.CheckFreeText(c.Reason); msg != "" {
		add("reason", "%s", msg)
	}
	switch {
	case c.Source == "":
		c.Source = source
	case c.Source != source:
		add("source", "must be empty or %s (the path's source)", source)
	}
	// The canonical order's rule for the external id (the source is the path's,
	// valid by configuration, or already refused above).
	if err := (order.Order{Source: source, ExternalID: c.ExternalID}).Validate(); err != nil && !hasField(ps, "external_id") {
		for _, p := range err.(*order.ValidationError).Problems {
			if p.Field == "external_id" {
				ps = append(ps, p)
			}
		}
	}
	if len(ps) > 0 {
		return c, &order.ValidationError{Problems: ps}
	}
	c.CreateKey = order.Key(c.Source, "order", c.ExternalID, "create")
	return c, nil
}

func hasField(ps []order.FieldError, field string) bool {
	for _, p := range ps {
		if p.Field == field {
			return true
		}
	}
	return false
}
