package journal

import (
	"encoding/json"
	"strings"
)

// QueryPhoneMin is the fewest digits a search term needs to be compared as a phone.
const QueryPhoneMin = 7

// PhoneDigits keeps the digits of s. Phones compare by their last ten digits when
// both have ten or more (+7 701 234-56-78 and 8 701 234 56 78 are one phone), and
// whole otherwise.
func PhoneDigits(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r >= '0' && r <= '9' {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// SamePhone reports whether the digits a and b name one phone (see PhoneDigits).
func SamePhone(a, b string) bool {
	if len(a) < QueryPhoneMin || len(b) < QueryPhoneMin {
		return false
	}
	if len(a) >= 10 && len(b) >= 10 {
		return a[len(a)-10:] == b[len(b)-10:]
	}
	return a == b
}

// Terms is what a search term is compared with, read off an operation: the stores
// index the same fields.
type Terms struct {
	Key, ExternalID, OneCExternalID string
	Number, FetchID, MarketplaceID  string
	ResultNumber, ResultRef         string
	Phone                           string // digits
}

// TermsOf reads the searchable fields of op.
func TermsOf(op Operation) Terms {
	t := Terms{Key: op.Key, ExternalID: op.ExternalID}
	if op.Source != "" && op.ExternalID != "" {
		t.OneCExternalID = op.Source + ":" + op.ExternalID
	}
	var p struct {
		Number        string `json:"number"`
		MarketplaceID string `json:"marketplace_id"`
		Customer      struct {
			Phone string `json:"phone"`
		} `json:"customer"`
		Fetch struct {
			ID string `json:"id"`
		} `json:"fetch"`
	}
	_ = json.Unmarshal(op.Payload, &p) // a payload that is not an order has no such fields
	t.Number, t.MarketplaceID, t.FetchID = p.Number, p.MarketplaceID, p.Fetch.ID
	t.Phone = PhoneDigits(p.Customer.Phone)
	if op.Result != nil {
		t.ResultNumber, t.ResultRef = op.Result.Number, op.Result.Ref
	}
	return t
}

// Matches is what Filter.Query means, for one operation: q, trimmed, equals one of
// its terms (case-insensitively for the 1C number and ref), or is the same phone.
// The stores answer the same in SQL; their conformance tests hold them to this.
func Matches(op Operation, q string) bool {
	q = strings.TrimSpace(q)
	if q == "" {
		return true
	}
	t := TermsOf(op)
	for _, v := range []string{t.Key, t.ExternalID, t.OneCExternalID, t.Number, t.FetchID, t.MarketplaceID} {
		if v != "" && v == q {
			return true
		}
	}
	for _, v := range []string{t.ResultNumber, t.ResultRef} {
		if v != "" && strings.EqualFold(v, q) {
			return true
		}
	}
	return SamePhone(t.Phone, PhoneDigits(q)) && looksLikePhone(q)
}

// looksLikePhone: a term made only of digits, spaces and + - ( ) . is compared as a
// phone; "ОС-000123" is not.
func looksLikePhone(q string) bool {
	for _, r := range q {
		switch {
		case r >= '0' && r <= '9', r == ' ', r == '+', r == '-', r == '(', r == ')', r == '.':
		default:
			return false
		}
	}
	return true
}

// QueryPhone is the phone digits a search term is compared with, "" when the term
// is not a phone (see Matches).
func QueryPhone(q string) string {
	q = strings.TrimSpace(q)
	d := PhoneDigits(q)
	if !looksLikePhone(q) || len(d) < QueryPhoneMin {
		return ""
	}
	return d
}
