package ozon

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"github.com/ordersync/ordersync/connectors"
	"github.com/ordersync/ordersync/internal/order"
)

// Posting statuses, as /v3/posting/fbs/list and the posting schema document them.
// Every one but the cancelled ones is an order to create; a status outside this list
// fails the posting, naming the field, rather than guessing.
var (
	// Before Ozon hands the posting to the seller for assembly.
	statusesBeforeAssembly = []string{"awaiting_verification", "awaiting_registration", "acceptance_in_progress", "awaiting_approve"}
	// The posting waits for the seller to pack it: the step Publisher takes.
	statusAwaitingPackaging = "awaiting_packaging"
	// Packed or further on.
	statusesAfterAssembly = []string{"awaiting_deliver", "arbitration", "client_arbitration", "delivering",
		"driver_pickup", "delivered", "not_accepted", "sent_by_seller"}
	// Cancelled; cancelled_from_split_pending is a posting Ozon replaced by the new
	// postings it was split into.
	statusCancelled        = "cancelled"
	statusCancelledBySplit = "cancelled_from_split_pending"
)

func knownStatus(s string) bool {
	return s == statusAwaitingPackaging || s == statusCancelled || s == statusCancelledBySplit ||
		slices.Contains(statusesBeforeAssembly, s) || slices.Contains(statusesAfterAssembly, s)
}

func isCancelled(s string) bool { return s == statusCancelled || s == statusCancelledBySplit }

// wirePosting is what the connector reads of a posting; the lists (v3 and v4) and
// /v3/posting/fbs/get share these fields. Numbers and prices stay raw until they are
// parsed exactly.
type wirePosting struct {
	PostingNumber string          `json:"posting_number"`
	OrderID       json.RawMessage `json:"order_id"`
	OrderNumber   string          `json:"order_number"`
	Status        string          `json:"status"`
	InProcessAt   *string         `json:"in_process_at"`
	Customer      *wirePerson     `json:"customer"`
	Addressee     *wirePerson     `json:"addressee"`
	Cancellation  *wireCancel     `json:"cancellation"`
	Products      []wireProduct   `json:"products"`
	// Read by the publisher only, so that their shape never fails an order.
	Actions      json.RawMessage `json:"available_actions"`
	Requirements json.RawMessage `json:"requirements"`
}

type wirePerson struct {
	Name  string `json:"name"`
	Phone string `json:"phone"`
}

type wireCancel struct {
	Reason    string `json:"cancel_reason"`
	Initiator string `json:"cancellation_initiator"`
	Type      string `json:"cancellation_type"`
}

type wireProduct struct {
	OfferID      *string         `json:"offer_id"`
	Name         string          `json:"name"`
	SKU          json.RawMessage `json:"sku"`
	Quantity     json.RawMessage `json:"quantity"`
	Price        json.RawMessage `json:"price"`         // v3: "1530.0000"; v4: {"amount", "currency"}
	CurrencyCode string          `json:"currency_code"` // v3 only
}

// decodePosting reads one posting. The posting number is read first and on its own:
// the item is then at least identifiable even when the rest is broken. ID is empty
// only when the posting number itself is missing or unusable.
func decodePosting(raw json.RawMessage) (connectors.Item, *wirePosting) {
	it := connectors.Item{Entity: Entity, Raw: raw}
	var head map[string]json.RawMessage
	if err := json.Unmarshal(raw, &head); err != nil || head == nil {
		it.Err = fieldError("(posting)", "is not a JSON object")
		return it, nil
	}
	var pn string
	if err := json.Unmarshal(head["posting_number"], &pn); err != nil || !usableID(pn) {
		it.Err = fieldError("posting_number", fmt.Sprintf("is missing or not a usable posting number: %s", short(head["posting_number"])))
		return it, nil
	}
	it.ID = pn
	// The raw bytes before decoding: invalid UTF-8, a key twice or in another letter
	// case than the field's ("Status" beside "status").
	if err := order.CheckJSON(raw, order.JSONOptions{Into: wirePosting{}}); err != nil {
		it.Err = err
		var ve *order.ValidationError
		if !errors.As(err, &ve) || strings.HasPrefix(ve.Problems[0].Field, "posting_number") || ve.Problems[0].Field == "(document)" {
			it.ID = "" // which posting number it was cannot be told
		}
		return it, nil
	}
	var p wirePosting
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&p); err != nil {
		it.Err = decodeError(err)
		return it, nil
	}
	return it, &p
}

// usableID reports whether a posting number can stand in a key (order.CheckKeyID):
// printable, no spaces or colons (the key's separator), no U+FFFD, at most 64
// characters. Ozon's look like 05708065-0029-1.
func usableID(s string) bool { return order.CheckKeyID(s) == "" }

// mapPosting maps a decoded posting to an item: the canonical order, or Err naming
// every Ozon field that is missing or wrong; Cancelled with the reason for a
// cancelled posting (even one that does not map: its cancel still counts).
func (c *Connector) mapPosting(it connectors.Item, p *wirePosting) connectors.Item {
	var ps []order.FieldError
	add := func(field, format string, args ...any) {
		ps = append(ps, order.FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
	}

	switch {
	case p.Status == "":
		add("status", "is required")
	case !knownStatus(p.Status):
		add("status", "%q is not an Ozon posting status this connector knows", p.Status)
	case isCancelled(p.Status):
		it.Cancelled = true
		it.CancelReason = cancelReason(p)
	}

	o := &order.Order{
		Source:     c.cfg.Source,
		ExternalID: it.ID,
		Number:     it.ID,
		Warehouse:  c.cfg.Warehouse,
	}
	line := func(field, s string) string {
		if msg := order.CheckLine(s); msg != "" {
			add(field, "%s", msg)
			return ""
		}
		return s
	}
	switch id, err := orderID(p.OrderID); {
	case err != nil:
		add("order_id", "%v", err)
	case id != "" && id != "0":
		o.MarketplaceID = id
	}
	if n := strings.TrimSpace(line("order_number", p.OrderNumber)); n != "" {
		o.Comment = "Ozon order " + n
	}
	switch {
	case p.InProcessAt == nil || strings.TrimSpace(*p.InProcessAt) == "":
		add("in_process_at", "is required (when Ozon began processing the posting)")
	default:
		t, err := c.parseTime(*p.InProcessAt)
		switch {
		case err != nil:
			add("in_process_at", "%v", err)
		case order.CheckTime(t) != "":
			add("in_process_at", "%s", order.CheckTime(t))
		default:
			o.CreatedAt = t
		}
	}
	for _, who := range []struct {
		field string
		p     *wirePerson
	}{{"customer", p.Customer}, {"addressee", p.Addressee}} {
		if who.p == nil {
			continue
		}
		o.Customer.Name = cmpOr(o.Customer.Name, strings.TrimSpace(line(who.field+".name", who.p.Name)))
		o.Customer.Phone = cmpOr(o.Customer.Phone, strings.TrimSpace(line(who.field+".phone", who.p.Phone)))
	}

	if len(p.Products) == 0 {
		add("products", "at least one product is required")
	}
	currency, currencyFrom := "", ""
	for i, pr := range p.Products {
		f := fmt.Sprintf("products[%d]", i)
		l := order.Line{Name: strings.TrimSpace(line(f+".name", pr.Name))}
		switch {
		case pr.OfferID == nil || strings.TrimSpace(*pr.OfferID) == "":
			add(f+".offer_id", "is required (the seller's article, the SKU looked up in 1C)")
		case order.CheckLine(*pr.OfferID) != "":
			add(f+".offer_id", "%s", order.CheckLine(*pr.OfferID))
		default:
			l.SKU = strings.TrimSpace(*pr.OfferID)
		}
		q, err := parseNumber(pr.Quantity)
		if err != nil {
			add(f+".quantity", "%v", err)
		}
		l.Quantity = q
		price, priceCurrency, err := parsePrice(pr.Price)
		if err != nil {
			add(f+".price", "%v", err)
		}
		l.Price = price
		cur := strings.ToUpper(strings.TrimSpace(pr.CurrencyCode))
		switch {
		case cur != "" && !order.ValidCurrency(cur):
			add(f+".currency_code", "%s is not an ISO 4217 currency code", strconv.Quote(cur))
		case priceCurrency != "" && !order.ValidCurrency(priceCurrency):
			add(f+".price.currency", "%s is not an ISO 4217 currency code", strconv.Quote(priceCurrency))
		case cur != "" && priceCurrency != "" && cur != priceCurrency:
			add(f+".currency_code", "%s differs from the price's currency %s", cur, priceCurrency)
		case cur == "":
			cur = priceCurrency
		}
		switch {
		case cur == "":
			add(f+".currency_code", "is required (the product's price currency)")
		case currency == "":
			currency, currencyFrom = cur, f
		case cur != currency:
			add(f+".currency_code", "%s differs from %s of %s: one order is in one currency", cur, currency, currencyFrom)
		}
		o.Lines = append(o.Lines, l)
	}
	o.Currency = currency

	if len(ps) == 0 {
		// The canonical order's own rules, so what is mapped is what is registered.
		if err := o.Validate(); err != nil {
			var ve *order.ValidationError
			if errors.As(err, &ve) {
				ps = ve.Problems
			}
		}
	}
	if len(ps) > 0 {
		it.Err = &order.ValidationError{Problems: ps}
		return it
	}
	it.Order = o
	return it
}

// orderID reads a posting's order_id, a JSON number or a string, as text ("" when
// absent or null).
func orderID(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) == 0 || string(raw) == "null":
		return "", nil
	case raw[0] == '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", fmt.Errorf("is not a string: %s", short(raw))
		}
		if s = strings.TrimSpace(s); s != "" {
			if msg := order.CheckKeyID(s); msg != "" {
				return "", fmt.Errorf("%s %s", strconv.Quote(s), msg)
			}
		}
		return s, nil
	case integerText.Match(raw):
		return string(raw), nil
	}
	return "", fmt.Errorf("must be a number, got %s", short(raw))
}

var integerText = regexp.MustCompile(`^-?[0-9]{1,30}$`)

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func cancelReason(p *wirePosting) string {
	if p.Status == statusCancelledBySplit {
		return "Ozon split the posting into new postings (cancelled_from_split_pending)"
	}
	reason := "cancelled at Ozon"
	if p.Cancellation != nil {
		if r := strings.TrimSpace(p.Cancellation.Reason); r != "" {
			reason = r
		}
		if who := cmpOr(strings.TrimSpace(p.Cancellation.Initiator), strings.TrimSpace(p.Cancellation.Type)); who != "" {
			reason += " (initiator: " + who + ")"
		}
	}
	return reason
}

// parseTime reads Ozon's date-times: strict RFC 3339 in UTC ("2021-08-25T10:48:38Z",
// with or without fractions); a time without an offset is taken in Config.Location.
// Every field has its full width (order.ParseTime).
func (c *Connector) parseTime(s string) (time.Time, error) {
	return order.ParseTimeOrLocal(strings.TrimSpace(s), c.cfg.Location)
}

// parseNumber reads a JSON number, or a string holding one, as an exact decimal.
func parseNumber(raw json.RawMessage) (decimal.Decimal, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return decimal.Zero, errors.New("is required")
	}
	text := string(raw)
	if raw[0] == '"' {
		if err := json.Unmarshal(raw, &text); err != nil {
			return decimal.Zero, fmt.Errorf("is not a number: %s", short(raw))
		}
		text = strings.TrimSpace(text)
	} else if raw[0] != '-' && (raw[0] < '0' || raw[0] > '9') {
		return decimal.Zero, fmt.Errorf("is not a number: %s", short(raw))
	}
	if text == "" {
		return decimal.Zero, fmt.Errorf("is not a number: %s", short(raw))
	}
	d, err := order.ParseDecimal(text)
	if err != nil {
		return decimal.Zero, fmt.Errorf("%v: %s", err, short(raw))
	}
	return d, nil
}

// parsePrice reads a product's price exactly, in any of Ozon's shapes: a string
// ("1530.0000", v3), a number, or an object {"amount": "1530" or 1530, "currency":
// "RUB"} (v4). It returns the currency when the price names one.
func parsePrice(raw json.RawMessage) (decimal.Decimal, string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '{' {
		var m struct {
			Amount   json.RawMessage `json:"amount"`
			Currency string          `json:"currency"`
		}
		if err := json.Unmarshal(raw, &m); err != nil {
			return decimal.Zero, "", fmt.Errorf("is not a price object: %s", short(raw))
		}
		d, err := parseNumber(m.Amount)
		if err != nil {
			return decimal.Zero, "", fmt.Errorf("amount %v", err)
		}
		return d, strings.ToUpper(strings.TrimSpace(m.Currency)), nil
	}
	d, err := parseNumber(raw)
	return d, "", err
}

func fieldError(field, msg string) error {
	return &order.ValidationError{Problems: []order.FieldError{{Field: field, Message: msg}}}
}

// decodeError names the field a posting failed to decode at.
func decodeError(err error) error {
	var typ *json.UnmarshalTypeError
	var syn *json.SyntaxError
	switch {
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			field = "(posting)"
		}
		return fieldError(field, fmt.Sprintf("must not be a JSON %s", typ.Value))
	case errors.As(err, &syn):
		return fieldError("(posting)", fmt.Sprintf("malformed JSON at byte %d", syn.Offset))
	default:
		return fieldError("(posting)", err.Error())
	}
}

func short(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "missing"
	}
	return order.SafeText(snippet(raw))
}
