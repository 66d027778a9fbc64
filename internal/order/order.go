// Package order owns the canonical order, its validation and
// the keys that name business operations. It does no I/O and depends on nothing else
// in the project.
//
// Money and quantities are shopspring decimals end to end. The package switches the
// decimal library to marshal JSON numbers without quotes, so every JSON this project
// writes carries numbers the way the contracts show them; parsing accepts both forms.
package order

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/shopspring/decimal"
)

func init() {
	// Exact numbers on the wire: 1500.5 stays the JSON number 1500.5, never a float.
	decimal.MarshalJSONWithoutQuotes = true
}

// Customer is who bought the order. Every field is optional.
type Customer struct {
	Name  string `json:"name"`
	Phone string `json:"phone"`
	Email string `json:"email"`
}

// Line is one position of an order.
type Line struct {
	SKU      string          `json:"sku"`
	Name     string          `json:"name"`
	Quantity decimal.Decimal `json:"quantity"`
	Price    decimal.Decimal `json:"price"`
}

// Amount is quantity × price, exact.
func (l Line) Amount() decimal.Decimal { return l.Quantity.Mul(l.Price) }

// Order is the canonical order every source is mapped to.
type Order struct {
	Source     string           `json:"source"`
	ExternalID string           `json:"external_id"`
	Number     string           `json:"number"`
	CreatedAt  time.Time        `json:"created_at"`
	Customer   Customer         `json:"customer"`
	Warehouse  string           `json:"warehouse"`
	Currency   string           `json:"currency"`
	Lines      []Line           `json:"lines"`
	Total      *decimal.Decimal `json:"total,omitempty"`
	Comment    string           `json:"comment"`
	// MarketplaceID is the marketplace's own id of the order when it is not the
	// external id (Kaspi: the order id, where external_id is its code); connectors
	// need it to acknowledge the order. Optional.
	MarketplaceID string `json:"marketplace_id,omitempty"`
}

// Operation kinds recorded in the journal.
const (
	KindCreate = "order.create"
	KindCancel = "order.cancel"
)

var sourceRe = regexp.MustCompile(`^[a-z0-9_-]{1,32}$`)

// Key names a business operation: <source>:<entity>:<id>:<action>, for example
// kaspi:order:512344101:create. It is built from business data only.
func Key(source, entity, id, action string) string {
	return source + ":" + entity + ":" + id + ":" + action
}

// CreateKey is the journal key of creating this order.
func (o Order) CreateKey() string { return Key(o.Source, "order", o.ExternalID, "create") }

// CancelKey is the journal key of cancelling this order.
func (o Order) CancelKey() string { return Key(o.Source, "order", o.ExternalID, "cancel") }

// AggregateOfKey is the aggregate an operation key belongs to: the key without its
// action (kaspi:order:512344101:create → kaspi:order:512344101).
func AggregateOfKey(key string) string {
	if i := strings.LastIndexByte(key, ':'); i > 0 {
		return key[:i]
	}
	return key
}

// OneCExternalID is the value stored in 1C's external-ID attribute: <source>:<external_id>.
func (o Order) OneCExternalID() string { return OneCExternalID(o.Source, o.ExternalID) }

// OneCExternalID joins a source and its external id the way 1C stores them.
func OneCExternalID(source, externalID string) string { return source + ":" + externalID }

// LinesTotal is the exact sum of the lines' amounts.
func (o Order) LinesTotal() decimal.Decimal {
	sum := decimal.Zero
	for _, l := range o.Lines {
		sum = sum.Add(l.Amount())
	}
	return sum
}

// EffectiveNumber is the number shown in 1C: Number, or the external id when empty.
func (o Order) EffectiveNumber() string {
	if o.Number != "" {
		return o.Number
	}
	return o.ExternalID
}

// Cancel is the payload of a cancel operation: the marketplace (or a sender)
// cancelled the order whose create operation is CreateKey.
type Cancel struct {
	Source     string `json:"source"`
	ExternalID string `json:"external_id"`
	Reason     string `json:"reason"`
	CreateKey  string `json:"create_key"`
}

// NewCancel checks SOURCE and EXTERNAL_ID by the canonical order's rules (they make
// the keys of its create and its cancel) and builds the cancel of `order cancel`.
func NewCancel(source, externalID, reason string) (Cancel, error) {
	err := Order{Source: source, ExternalID: externalID}.Validate()
	var ve *ValidationError
	if errors.As(err, &ve) {
		for _, p := range ve.Problems {
			switch p.Field {
			case "source":
				return Cancel{}, fmt.Errorf("SOURCE %s", p.Message)
			case "external_id":
				return Cancel{}, fmt.Errorf("EXTERNAL_ID %s", p.Message)
			}
		}
	}
	// The reason trimmed as a webhook's is, so that the same cancel either way is a
	// duplicate.
	return Cancel{Source: source, ExternalID: externalID, Reason: strings.TrimSpace(reason),
		CreateKey: Key(source, "order", externalID, "create")}, nil
}

// CancelKeyOf is the cancel operation's key for a create key
// (kaspi:order:1:create → kaspi:order:1:cancel); "" for a key that is not a create.
func CancelKeyOf(createKey string) string {
	if base, ok := strings.CutSuffix(createKey, ":create"); ok {
		return base + ":cancel"
	}
	return ""
}

// Fetch is the payload of a create whose order is not known yet: a push that only
// names it (an Ozon posting number, a Bitrix24 deal id). The engine fetches the order
// from Connector before it calls 1C, and the operation keeps what was fetched.
type Fetch struct {
	Connector string `json:"connector"`
	ID        string `json:"id"`
}

// ErrNotReady is what a fetcher answers (wrapped, with the reason) when the source
// says the order must not be created yet: a Bitrix24 deal not in a create stage. The
// operation waits for the next push about it.
var ErrNotReady = errors.New("the order is not ready to be created")

// ErrNoSuchOrder is what a fetcher answers (wrapped) for an order its source does
// not know: the create fails, retrying would not change it.
var ErrNoSuchOrder = errors.New("the source knows no such order")

// FetchPayload is the payload of such a create.
func FetchPayload(connector, id string) []byte {
	b, _ := json.Marshal(struct {
		Fetch Fetch `json:"fetch"`
	}{Fetch{Connector: connector, ID: id}})
	return b
}

// ParseFetch reports whether payload is a fetch payload, and what it names.
func ParseFetch(payload []byte) (Fetch, bool) {
	var p struct {
		Fetch *Fetch `json:"fetch"`
	}
	if json.Unmarshal(payload, &p) != nil || p.Fetch == nil || p.Fetch.Connector == "" || p.Fetch.ID == "" {
		return Fetch{}, false
	}
	return *p.Fetch, true
}

// FieldError says which field of an order is wrong and why.
type FieldError struct {
	Field   string
	Message string
}

func (e FieldError) Error() string { return e.Field + ": " + e.Message }

// ValidationError lists every problem found in one order.
type ValidationError struct {
	Problems []FieldError
}

func (e *ValidationError) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		parts[i] = p.Error()
	}
	return "invalid order: " + strings.Join(parts, "; ")
}

// Validate checks the canonical order's rules (docs/order.md) and those of text.go (text,
// times and numbers from outside) and returns a *ValidationError naming every
// offending field, or nil. An order it accepts always has a Canonical form.
func (o Order) Validate() error {
	var ps []FieldError
	add := func(field, format string, args ...any) {
		ps = append(ps, FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
	}
	text := func(field, value string, free bool) {
		msg := CheckLine(value)
		if free {
			msg = CheckFreeText(value)
		}
		if msg != "" {
			add(field, "%s", msg)
		}
	}
	switch {
	case o.Source == "":
		add("source", "is required")
	case !sourceRe.MatchString(o.Source):
		add("source", "must match [a-z0-9_-]{1,32}, got %s", quote(o.Source))
	}
	if msg := CheckID(o.ExternalID, 64); msg != "" {
		add("external_id", "%s", msg)
	}
	if o.Number != "" {
		if msg := CheckID(o.Number, 64); msg != "" {
			add("number", "%s", msg)
		}
	}
	if o.CreatedAt.IsZero() {
		add("created_at", "is required (RFC 3339 with a zone offset, e.g. 2026-09-16T10:00:00+05:00)")
	} else if msg := CheckTime(o.CreatedAt); msg != "" {
		add("created_at", "%s", msg)
	}
	text("customer.name", o.Customer.Name, false)
	text("customer.phone", o.Customer.Phone, false)
	text("customer.email", o.Customer.Email, false)
	text("warehouse", o.Warehouse, false)
	switch {
	case o.Currency == "":
		add("currency", "is required (ISO 4217, e.g. KZT)")
	case !ValidCurrency(o.Currency):
		add("currency", "%s is not an ISO 4217 currency code", quote(o.Currency))
	}
	if len(o.Lines) == 0 {
		add("lines", "at least one line is required")
	}
	numbersOK := true
	for i, l := range o.Lines {
		f := fmt.Sprintf("lines[%d]", i)
		if strings.TrimSpace(l.SKU) == "" {
			add(f+".sku", "is required")
		} else {
			text(f+".sku", l.SKU, false)
		}
		text(f+".name", l.Name, false)
		switch msg := CheckDecimal(l.Quantity); {
		case msg != "":
			numbersOK = false
			add(f+".quantity", "%s", msg)
		case !l.Quantity.IsPositive():
			add(f+".quantity", "must be greater than 0, got %s", l.Quantity)
		}
		switch msg := CheckDecimal(l.Price); {
		case msg != "":
			numbersOK = false
			add(f+".price", "%s", msg)
		case l.Price.IsNegative():
			add(f+".price", "must not be negative, got %s", l.Price)
		}
	}
	if o.Total != nil {
		if msg := CheckDecimal(*o.Total); msg != "" {
			add("total", "%s", msg)
		} else if numbersOK && len(o.Lines) > 0 {
			if sum := o.LinesTotal(); !o.Total.Equal(sum) {
				add("total", "%s does not equal the sum of the lines %s", o.Total, sum)
			}
		}
	}
	text("comment", o.Comment, true)
	if o.MarketplaceID != "" {
		if msg := CheckID(o.MarketplaceID, 128); msg != "" {
			add("marketplace_id", "%s", msg)
		}
	}
	if len(ps) == 0 {
		return nil
	}
	return &ValidationError{Problems: ps}
}

// Parse decodes one canonical order from JSON strictly (CheckJSON: keys exactly as
// the fields are named and each once, valid UTF-8 on the raw bytes, a strict RFC 3339
// created_at), refusing unknown fields and trailing data, and validates it. Errors are *ValidationError naming the field; when only
// validation failed, the decoded order is returned with the error.
func Parse(data []byte) (Order, error) {
	// The raw bytes first: encoding/json would replace bad UTF-8, match keys in any
	// letter case and let the last of two equal keys win.
	if err := checkJSON(data, orderJSONOptions); err != nil {
		var fe *FieldError
		if errors.As(err, &fe) {
			return Order{}, &ValidationError{Problems: []FieldError{*fe}}
		}
		// Malformed JSON: the decoder below says where.
	}
	var o Order
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&o); err != nil {
		if field, msg := findBadNumber(data); field != "" {
			return Order{}, &ValidationError{Problems: []FieldError{{Field: field, Message: msg}}}
		}
		return Order{}, decodeError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Order{}, &ValidationError{Problems: []FieldError{{Field: "(document)", Message: "unexpected data after the order object"}}}
	}
	if err := o.Validate(); err != nil {
		return o, err // the decoded order too, so the caller can say which one it was
	}
	return o, nil
}

var orderJSONOptions = JSONOptions{Into: Order{}, Closed: true, What: "the canonical order"}

func decodeError(err error) error {
	var (
		syn *json.SyntaxError
		typ *json.UnmarshalTypeError
		tim *time.ParseError
	)
	fe := FieldError{Field: "(document)", Message: err.Error()}
	switch {
	case errors.As(err, &syn):
		fe.Message = fmt.Sprintf("malformed JSON at byte %d: %v", syn.Offset, syn)
	case errors.As(err, &typ):
		fe.Field = typ.Field
		fe.Message = fmt.Sprintf("must be a JSON %s, got %s", jsonKind(typ.Type.Kind().String()), typ.Value)
	case errors.As(err, &tim):
		fe.Field = "created_at"
		fe.Message = fmt.Sprintf("%q is not an RFC 3339 time with a zone offset", tim.Value)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		fe.Field = strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		fe.Message = "is not a field of the canonical order"
	case errors.Is(err, io.EOF):
		fe.Message = "empty document"
	case errors.Is(err, io.ErrUnexpectedEOF):
		fe.Message = "truncated JSON"
	case strings.Contains(err.Error(), "decimal"):
		fe.Message = "a number is malformed: " + err.Error()
	}
	return &ValidationError{Problems: []FieldError{fe}}
}

// findBadNumber locates a number field whose value is not a decimal. The decimal
// library's own error does not say which field it was decoding.
func findBadNumber(data []byte) (field, msg string) {
	var doc struct {
		Lines []map[string]json.RawMessage `json:"lines"`
		Total json.RawMessage              `json:"total"`
	}
	if json.Unmarshal(data, &doc) != nil {
		return "", ""
	}
	check := func(name string, raw json.RawMessage) bool {
		if len(raw) == 0 || string(raw) == "null" {
			return false
		}
		var d decimal.Decimal
		if err := d.UnmarshalJSON(raw); err != nil {
			field, msg = name, fmt.Sprintf("must be a decimal number, got %s", raw)
			return true
		}
		return false
	}
	for i, l := range doc.Lines {
		for _, k := range []string{"quantity", "price"} {
			if check(fmt.Sprintf("lines[%d].%s", i, k), l[k]) {
				return field, msg
			}
		}
	}
	check("total", doc.Total)
	return field, msg
}

func jsonKind(goKind string) string {
	switch goKind {
	case "string":
		return "string"
	case "slice", "array":
		return "array"
	case "struct", "map":
		return "object"
	default:
		return goKind
	}
}

// Canonical returns the order's canonical JSON: field order fixed by the struct,
// decimals normalised (1500.00 and 1500 encode alike), times in UTC. Two deliveries of
// the same business data give the same bytes, so their SHA-256 compares them.
//
// It never panics and never takes unbounded time. Only an order Validate refuses can
// fail to encode: a year past 9999 (RFC 3339 cannot write it) or a decimal whose
// digits could not be written out in reasonable time (1e2000000000). Such an order is
// written with the time as Go prints it and the decimals as coefficient and exponent,
// so a caller that skipped Validate gets bytes no decoder takes for a valid order
// instead of a crash or a hang.
func (o Order) Canonical() []byte {
	if !canonicalSafe(o) {
		return unsafeCanonical(o)
	}
	c := o
	c.CreatedAt = o.CreatedAt.UTC()
	c.Lines = make([]Line, len(o.Lines))
	for i, l := range o.Lines {
		c.Lines[i] = Line{SKU: l.SKU, Name: l.Name, Quantity: norm(l.Quantity), Price: norm(l.Price)}
	}
	if o.Total != nil {
		t := norm(*o.Total)
		c.Total = &t
	}
	b, err := json.Marshal(c)
	if err != nil {
		return unsafeCanonical(o)
	}
	return b
}

// canonicalSafe reports whether encoding/json can write o's time and decimals.
func canonicalSafe(o Order) bool {
	if y := o.CreatedAt.UTC().Year(); y < 0 || y > 9999 {
		return false
	}
	for _, l := range o.Lines {
		if CheckDecimal(l.Quantity) != "" || CheckDecimal(l.Price) != "" {
			return false
		}
	}
	return o.Total == nil || CheckDecimal(*o.Total) == ""
}

// unsafeCanonical writes an order Validate refuses, cheaply and without failing.
func unsafeCanonical(o Order) []byte {
	num := func(d decimal.Decimal) json.Number {
		return json.Number(d.Coefficient().String() + "e" + strconv.FormatInt(int64(d.Exponent()), 10))
	}
	type line struct {
		SKU      string      `json:"sku"`
		Name     string      `json:"name"`
		Quantity json.Number `json:"quantity"`
		Price    json.Number `json:"price"`
	}
	lines := make([]line, len(o.Lines))
	for i, l := range o.Lines {
		lines[i] = line{l.SKU, l.Name, num(l.Quantity), num(l.Price)}
	}
	var total *json.Number
	if o.Total != nil {
		t := num(*o.Total)
		total = &t
	}
	b, err := json.Marshal(struct {
		Source        string       `json:"source"`
		ExternalID    string       `json:"external_id"`
		Number        string       `json:"number"`
		CreatedAt     string       `json:"created_at"`
		Customer      Customer     `json:"customer"`
		Warehouse     string       `json:"warehouse"`
		Currency      string       `json:"currency"`
		Lines         []line       `json:"lines"`
		Total         *json.Number `json:"total,omitempty"`
		Comment       string       `json:"comment"`
		MarketplaceID string       `json:"marketplace_id,omitempty"`
	}{o.Source, o.ExternalID, o.Number, o.CreatedAt.UTC().Format(time.RFC3339Nano), o.Customer, o.Warehouse,
		o.Currency, lines, total, o.Comment, o.MarketplaceID})
	if err != nil {
		return []byte(`{"error":"the order cannot be encoded"}`)
	}
	return b
}

func norm(d decimal.Decimal) decimal.Decimal {
	s := d.String() // trims trailing zeros
	n, _ := decimal.NewFromString(s)
	return n
}

// SHA256Hex is the hex SHA-256 of b.
func SHA256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
