package order

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/shopspring/decimal"
)

// KindReturn is the operation that carries a marketplace's return into 1C: a
// customer return based on the order's 1C document, found first by its external id.
const KindReturn = "return.register"

// Return types: how much of the order came back.
const (
	// ReturnFull: everything the order shipped came back.
	ReturnFull = "full"
	// ReturnPartial: some lines, or part of a line's quantity, came back.
	ReturnPartial = "partial"
	// ReturnCancellation: the order was cancelled after it shipped (a refusal on
	// delivery, a cancellation in transit): the goods come back as a return. A
	// cancellation before shipment is an order.cancel, not a return.
	ReturnCancellation = "cancellation"
)

// Return is a marketplace's return of (part of) an order, the payload of a
// return.register operation.
type Return struct {
	Source string `json:"source"`
	// ID is the marketplace's id of the return as it appears in its key (Ozon: the
	// return id; Wildberries: the claim id or the return's srid; Kaspi: the order
	// code, one return per order).
	ID   string `json:"id"`
	Type string `json:"type"` // ReturnFull, ReturnPartial, ReturnCancellation
	// OrderID is the order's external id (the posting number, the order code);
	// OrderKey is the journal key of its create (ozon:posting:…:create), the
	// order whose 1C document the return is based on.
	OrderID  string `json:"order_id"`
	OrderKey string `json:"order_key"`
	// CreatedAt is when the marketplace registered the return.
	CreatedAt time.Time `json:"created_at"`
	Currency  string    `json:"currency"`
	// Lines are what came back: SKUs as the marketplace names them until the
	// poller applies the SKU map, quantities positive, prices per unit.
	Lines  []Line `json:"lines"`
	Reason string `json:"reason"`
	// Status is the marketplace's own status of the return when it read it.
	Status string `json:"status,omitempty"`
}

// ReturnKey is the journal key of registering a return: ozon:return:<id>:register.
func ReturnKey(source, id string) string { return Key(source, "return", id, "register") }

// Key is the journal key of the return.
func (r Return) Key() string { return ReturnKey(r.Source, r.ID) }

// OneCExternalID is how 1C marks the return: <source>:return:<id>, apart from the
// orders' <source>:<external id>.
func (r Return) OneCExternalID() string { return r.Source + ":return:" + r.ID }

// LinesTotal is the exact sum of the lines' amounts.
func (r Return) LinesTotal() decimal.Decimal {
	sum := decimal.Zero
	for _, l := range r.Lines {
		sum = sum.Add(l.Amount())
	}
	return sum
}

// Validate checks a return by the order's rules where they are the same (source,
// ids, currency, lines) and returns a *ValidationError naming every field.
func (r Return) Validate() error {
	var ps []FieldError
	add := func(field, format string, args ...any) {
		ps = append(ps, FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
	}
	// The order's own checks of the fields a return shares with it.
	shared := Order{Source: r.Source, ExternalID: r.OrderID, CreatedAt: r.CreatedAt, Currency: r.Currency, Lines: r.Lines}
	if err := shared.Validate(); err != nil {
		for _, p := range err.(*ValidationError).Problems {
			if p.Field == "external_id" {
				p.Field = "order_id"
			}
			ps = append(ps, p)
		}
	}
	if msg := CheckID(r.ID, 64); msg != "" {
		add("id", "%s", msg)
	}
	switch r.Type {
	case ReturnFull, ReturnPartial, ReturnCancellation:
	default:
		add("type", "must be %s, %s or %s, got %s", ReturnFull, ReturnPartial, ReturnCancellation, quote(r.Type))
	}
	if r.OrderKey == "" || !strings.HasPrefix(r.OrderKey, r.Source+":") || !strings.HasSuffix(r.OrderKey, ":create") {
		add("order_key", "must be the key of the order's create (%s:…:create), got %s", r.Source, quote(r.OrderKey))
	}
	if msg := CheckFreeText(r.Reason); msg != "" {
		add("reason", "%s", msg)
	}
	if msg := CheckLine(r.Status); msg != "" {
		add("status", "%s", msg)
	}
	if len(ps) == 0 {
		return nil
	}
	return &ValidationError{Problems: ps}
}

// Canonical is the return's payload bytes: its JSON with the decimals normalised and
// the time in UTC, so that the same return read twice is a duplicate.
func (r Return) Canonical() []byte {
	c := r
	c.CreatedAt = r.CreatedAt.UTC()
	c.Lines = make([]Line, len(r.Lines))
	for i, l := range r.Lines {
		c.Lines[i] = Line{SKU: l.SKU, Name: l.Name, Quantity: norm(l.Quantity), Price: norm(l.Price)}
	}
	b, _ := json.Marshal(c)
	return b
}

// ParseReturn decodes a return payload and validates it.
func ParseReturn(data []byte) (Return, error) {
	var r Return
	if err := json.Unmarshal(data, &r); err != nil {
		return r, &ValidationError{Problems: []FieldError{{Field: "return", Message: "is not readable JSON: " + err.Error()}}}
	}
	return r, r.Validate()
}
