package journal

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/shopspring/decimal"
)

// What the accountant's list reads of an operation beyond its state: the order's own
// date and total, a broad search, what 1C held of it at the latest reconciliation,
// and the order's state as an accountant means it. The stores keep the values
// Derive reads off the payload in columns of their own, so a period, a search and
// the period's totals are answered in SQL.

// Derived is what the stores keep of an operation's payload and result for the list.
type Derived struct {
	// OrderCreatedAt is the marketplace's own date of the order (the payload's
	// created_at), nil when the payload names none (a fetch not made yet, a cancel,
	// a stock snapshot).
	OrderCreatedAt *time.Time
	// Total is the order's total (the payload's total, or the sum of its lines),
	// nil when it names none; Currency its currency.
	Total    *decimal.Decimal
	Currency string
	// SearchText is what Filter.Search looks in, lower-cased (see SearchMatches).
	SearchText string
}

// Derive reads Derived off an operation's key, source, external id, payload and
// result.
func Derive(key, source, externalID string, payload json.RawMessage, result *Result) Derived {
	var p struct {
		CreatedAt     json.RawMessage `json:"created_at"`
		Number        json.RawMessage `json:"number"`
		MarketplaceID json.RawMessage `json:"marketplace_id"`
		Currency      json.RawMessage `json:"currency"`
		Customer      struct {
			Name  json.RawMessage `json:"name"`
			Phone json.RawMessage `json:"phone"`
		} `json:"customer"`
		Fetch struct {
			ID json.RawMessage `json:"id"`
		} `json:"fetch"`
		// OrderID is a return's order (order.Return): its return is found by it.
		OrderID json.RawMessage `json:"order_id"`
		Total   json.RawMessage `json:"total"`
		Lines   json.RawMessage `json:"lines"`
	}
	_ = json.Unmarshal(payload, &p) // a payload that is not an order has none of these
	// The amounts apart: a line that does not decode leaves the texts readable.
	var m struct {
		Total *decimal.Decimal
		Lines []struct {
			Quantity decimal.Decimal `json:"quantity"`
			Price    decimal.Decimal `json:"price"`
		}
	}
	if len(p.Total) > 0 && json.Unmarshal(p.Total, &m.Total) != nil ||
		len(p.Lines) > 0 && json.Unmarshal(p.Lines, &m.Lines) != nil {
		m.Total, m.Lines = nil, nil
	}
	var d Derived
	if s := scalar(p.CreatedAt); s != "" {
		if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
			u := t.UTC().Truncate(time.Microsecond)
			d.OrderCreatedAt = &u
		}
	}
	switch {
	case m.Total != nil:
		t := *m.Total
		d.Total = &t
	case len(m.Lines) > 0:
		t := decimal.Zero
		for _, l := range m.Lines {
			t = t.Add(l.Quantity.Mul(l.Price))
		}
		d.Total = &t
	}
	d.Currency = scalar(p.Currency)
	parts := []string{key, source + ":" + externalID, scalar(p.Number), scalar(p.MarketplaceID), scalar(p.Fetch.ID),
		scalar(p.Customer.Name), PhoneDigits(scalar(p.Customer.Phone)), scalar(p.OrderID)}
	if result != nil {
		parts = append(parts, result.Number, result.Ref)
	}
	d.SearchText = strings.ToLower(strings.Join(parts, " "))
	return d
}

// scalar is a JSON string's text or a number's literal; "" for anything else.
func scalar(raw json.RawMessage) string {
	n := len(raw)
	if n == 0 { // absent
		return ""
	}
	// Most are plain strings: their text is their bytes between the quotes.
	if n >= 2 && raw[0] == '"' && raw[n-1] == '"' {
		if in := raw[1 : n-1]; !bytes.ContainsAny(in, "\\\"") && utf8.Valid(in) && !hasControl(in) {
			return string(in)
		}
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var num json.Number
	if json.Unmarshal(raw, &num) == nil {
		return num.String()
	}
	return ""
}

// hasControl says whether b holds a byte below 0x20, which JSON allows in a string
// only escaped.
func hasControl(b []byte) bool {
	for _, c := range b {
		if c < 0x20 {
			return true
		}
	}
	return false
}

// SearchMinDigits is the fewest digits a search term needs to be looked for among
// the customers' phones by its digits alone (+7 701 234-56-78).
const SearchMinDigits = 5

// Needles are what a search term (Filter.Search) is looked for as: Text in the
// search text, Digits (a phone-like term's digits) among them too, and Amount, when
// the term reads as an amount (1500, 1 500,50), as the order's total exactly.
type Needles struct {
	Text   string
	Digits string
	Amount *decimal.Decimal
}

// NeedlesOf reads a search term; the zero Needles for a blank one.
func NeedlesOf(term string) Needles {
	term = strings.TrimSpace(term)
	if term == "" {
		return Needles{}
	}
	n := Needles{Text: strings.ToLower(term)}
	if d := PhoneDigits(term); looksLikePhone(term) && len(d) >= SearchMinDigits && d != term {
		n.Digits = d
		if len(d) > 10 { // phones compare by their last ten digits (SamePhone)
			n.Digits = d[len(d)-10:]
		}
	}
	if a, ok := amountOf(term); ok {
		n.Amount = &a
	}
	return n
}

// amountOf reads 1500, 1500.50, 1 500,50 as an amount.
func amountOf(s string) (decimal.Decimal, bool) {
	s = strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) {
			return -1
		}
		return r
	}, s)
	s = strings.Replace(s, ",", ".", 1)
	if s == "" || strings.ContainsAny(s, "eE+-") {
		return decimal.Decimal{}, false
	}
	for _, r := range s {
		if (r < '0' || r > '9') && r != '.' {
			return decimal.Decimal{}, false
		}
	}
	d, err := decimal.NewFromString(s)
	return d, err == nil
}

// SearchMatches is what Filter.Search means, for one operation: the term, trimmed
// and lower-cased, is part of its search text (key, 1C's external id, the
// marketplace's number and ids, the customer's name and phone digits, 1C's number
// and ref); or a
// phone-like term's digits are part of it; or the term is an amount equal to the
// order's total. A blank term matches everything. The stores answer the same in
// SQL; their conformance tests hold them to it.
func SearchMatches(op Operation, term string) bool {
	n := NeedlesOf(term)
	if n.Text == "" {
		return true
	}
	d := Derive(op.Key, op.Source, op.ExternalID, op.Payload, op.Result)
	if strings.Contains(d.SearchText, n.Text) || n.Digits != "" && strings.Contains(d.SearchText, n.Digits) {
		return true
	}
	return n.Amount != nil && d.Total != nil && d.Total.Equal(*n.Amount)
}

// OneCSeen is what a reconciliation saw of an operation's order in 1C: 1C's order as
// it held it then (the earliest, when it holds several), or Held 0 when it held none.
type OneCSeen struct {
	Key string `json:"-"`
	// Held is how many orders 1C held for the operation, not marked for deletion.
	Held      int              `json:"held"`
	Ref       string           `json:"ref,omitempty"`
	Number    string           `json:"number,omitempty"`
	Date      string           `json:"date,omitempty"`
	Total     *decimal.Decimal `json:"total,omitempty"` // nil when 1C did not say
	Currency  string           `json:"currency,omitempty"`
	Posted    bool             `json:"posted"`
	Cancelled bool             `json:"cancelled"`
	Deleted   bool             `json:"deleted"`
	SeenAt    time.Time        `json:"seen_at"`
}

// OneCRecorder keeps what reconciliations saw of 1C (journal.Store has it).
type OneCRecorder interface {
	// RecordOneC replaces, for each operation named, what was last seen of it in
	// 1C; unknown keys are skipped.
	RecordOneC(ctx context.Context, seen []OneCSeen) error
}

// TotalGroup is one group of Store.Totals: the operations of one kind and status,
// whose cancel operation (for a create) has CancelStatus ("" for none), in one
// currency: how many, and the sum of the totals they name.
type TotalGroup struct {
	Kind         string
	Status       Status
	CancelStatus Status
	Currency     string
	Count        int
	Sum          decimal.Decimal
}
