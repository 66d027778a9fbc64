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
// An order's body, as a rule, never spells the key: one that does not hold the word
// "cancelled", nor a \u escape (the only way to write a letter of it otherwise), is
// no cancel, and is not decoded here at all.
func isCancelDelivery(body []byte) bool {
	if !bytes.Contains(body, []byte("cancelled")) && !bytes.Contains(body, []byte(`\u`)) {
		return false
	}
	var doc map[string]json.RawMessage
	if json.Unmarshal(body, &doc) != nil {
		return false
	}
	_, ok := doc["cancelled"]
	return ok
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
