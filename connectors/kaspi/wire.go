package kaspi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/shopspring/decimal"

	"github.com/ordersync/ordersync/connectors"
	"github.com/ordersync/ordersync/internal/order"
)

// page is one JSON:API answer of GET /orders. Orders and included resources stay raw
// until each is read on its own, so one bad order cannot spoil its page-mates.
type page struct {
	Data     []json.RawMessage `json:"data"`
	Included []json.RawMessage `json:"included"`
	Meta     struct {
		PageCount  *int `json:"pageCount"`
		TotalCount *int `json:"totalCount"`
	} `json:"meta"`
}

// decodePage reads a page; an error means the page as a whole is unreadable. The
// page's own keys are matched exactly and each once (order.CheckJSON); its orders
// and included resources are checked one by one when they are mapped.
func decodePage(body []byte) (page, error) {
	var pg page
	if err := order.CheckJSON(body, order.JSONOptions{Into: &pg, Shallow: true}); err != nil {
		if !json.Valid(body) {
			err = json.Unmarshal(body, &pg) // the decoder's words for malformed JSON
		}
		return page{}, fmt.Errorf("the page is not valid JSON:API: %w", err)
	}
	if err := json.Unmarshal(body, &pg); err != nil {
		return page{}, fmt.Errorf("the page is not valid JSON:API: %w", err)
	}
	if pg.Data == nil {
		return page{}, errors.New(`the page has no "data" array`)
	}
	return pg, nil
}

// last reports whether page n is the last one: meta.pageCount says so, or, without
// it, a short or empty page.
func (pg page) last(n, size int) bool {
	if len(pg.Data) == 0 {
		return true
	}
	if pg.Meta.PageCount != nil {
		return n+1 >= *pg.Meta.PageCount
	}
	return len(pg.Data) < size
}

// obj is a JSON object whose members are read one by one, each failure naming its field.
type obj map[string]json.RawMessage

func asObj(raw json.RawMessage) (obj, bool) {
	var o obj
	if err := json.Unmarshal(raw, &o); err != nil || o == nil {
		return nil, false
	}
	return o, true
}

func null(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}

// str reads a string member; absent or null is "" and no error.
func (o obj) str(key string) (string, error) {
	raw := o[key]
	if null(raw) {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", fmt.Errorf("must be a string, got %s", clip(raw))
	}
	return s, nil
}

// object reads an object member; absent or null is nil and no error.
func (o obj) object(key string) (obj, error) {
	raw := o[key]
	if null(raw) {
		return nil, nil
	}
	v, ok := asObj(raw)
	if !ok {
		return nil, fmt.Errorf("must be an object, got %s", clip(raw))
	}
	return v, nil
}

// dec reads a number exactly, never through float64; a string holding a decimal is
// accepted too. ok is false when the member is absent or null.
func (o obj) dec(key string) (d decimal.Decimal, ok bool, err error) {
	raw := bytes.TrimSpace(o[key])
	if null(raw) {
		return decimal.Decimal{}, false, nil
	}
	text := string(raw)
	if raw[0] == '"' {
		if err := json.Unmarshal(raw, &text); err != nil {
			return decimal.Decimal{}, true, fmt.Errorf("must be a number, got %s", clip(raw))
		}
	} else {
		var n json.Number
		if err := json.Unmarshal(raw, &n); err != nil {
			return decimal.Decimal{}, true, fmt.Errorf("must be a number, got %s", clip(raw))
		}
		text = n.String()
	}
	d, err = order.ParseDecimal(text)
	if err != nil {
		return decimal.Decimal{}, true, fmt.Errorf("must be a number of at most %d digits, got %s", order.MaxDecimalDigits, clip(raw))
	}
	return d, true, nil
}

// text reads a string member that is a person's text and checks it (order.CheckLine);
// absent or null is "".
func (o obj) text(key string) (string, error) {
	s, err := o.str(key)
	if err != nil {
		return "", err
	}
	if msg := order.CheckLine(s); msg != "" {
		return "", errors.New(msg)
	}
	return s, nil
}

// clip is the start of raw, made safe to store and log.
func clip(raw json.RawMessage) string {
	s := string(bytes.TrimSpace(raw))
	if r := []rune(s); len(r) > 40 {
		s = string(r[:40]) + "…"
	}
	return order.SafeText(s)
}

// problems gathers what is wrong with one order, each naming its field.
type problems []order.FieldError

func (p *problems) add(field, format string, args ...any) {
	*p = append(*p, order.FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
}

func (p problems) err() error {
	if len(p) == 0 {
		return nil
	}
	return &order.ValidationError{Problems: p}
}

func invalid(field, format string, args ...any) error {
	var p problems
	p.add(field, format, args...)
	return p.err()
}

// aboutField reports whether a validation error concerns field or an object that
// holds it (a key twice at "attributes" makes attributes.code ambiguous too).
func aboutField(err error, field string) bool {
	var ve *order.ValidationError
	if !errors.As(err, &ve) {
		return true
	}
	for _, p := range ve.Problems {
		if p.Field == "(document)" || p.Field == field || strings.HasPrefix(field, p.Field+".") || strings.HasPrefix(p.Field, field) {
			return true
		}
	}
	return false
}

// codeOf reads data[].attributes.code, "" when it cannot or when the code cannot
// stand in a key (order.CheckKeyID).
func codeOf(raw json.RawMessage) string {
	o, ok := asObj(raw)
	if !ok {
		return ""
	}
	attrs, err := o.object("attributes")
	if err != nil || attrs == nil {
		return ""
	}
	code, _ := attrs.str("code")
	if order.CheckKeyID(code) != "" {
		return ""
	}
	return code
}

// mapPage maps every order of a page. listing leaves out the orders whose status is
// not imported (Get keeps them). Only a failure to fetch entries that is not about
// one order alone is an error.
func (c *Connector) mapPage(ctx context.Context, pg page, listing bool) ([]connectors.Item, error) {
	included := map[string]json.RawMessage{}
	for _, raw := range pg.Included {
		if ref, ok := asObj(raw); ok {
			typ, _ := ref.str("type")
			id, _ := ref.str("id")
			if typ == typeEntries && id != "" {
				included[id] = raw
			}
		}
	}
	items := make([]connectors.Item, 0, len(pg.Data))
	for _, raw := range pg.Data {
		it, err := c.mapOrderSafe(ctx, raw, included, listing)
		if err != nil {
			return nil, err
		}
		if it != nil {
			items = append(items, *it)
		}
	}
	return items, nil
}

// mapOrderSafe is mapOrder with a panic recovered: the order becomes an Item with
// Err (and its code when it can be read), logged, and its page-mates go on.
func (c *Connector) mapOrderSafe(ctx context.Context, raw json.RawMessage, included map[string]json.RawMessage, listing bool) (it *connectors.Item, err error) {
	defer func() {
		if v := recover(); v != nil {
			code := codeOf(raw)
			c.log.ErrorContext(ctx, "mapping an order panicked", "code", code, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			it, err = &connectors.Item{Entity: "order", ID: code, Raw: slices.Clone(raw),
				Err: invalid("(order)", "internal error: mapping the order panicked: %v", v)}, nil
		}
	}()
	return c.mapOrder(ctx, raw, included, listing)
}

// mapOrder reads one data[] element. It returns nil for an order that is not
// imported, an Item with Err for a bad one, and an error only when fetching its
// entries failed in a way that must end the listing.
func (c *Connector) mapOrder(ctx context.Context, raw json.RawMessage, included map[string]json.RawMessage, listing bool) (*connectors.Item, error) {
	it := &connectors.Item{Entity: "order", Raw: slices.Clone(raw)}
	// The raw bytes first: invalid UTF-8, a key twice. The code still names the
	// order when it can be read safely.
	if err := order.CheckJSON(raw, order.JSONOptions{}); err != nil && json.Valid(raw) {
		it.Err = err
		if !aboutField(err, "attributes.code") {
			it.ID = codeOf(raw)
		}
		return it, nil
	}
	o, ok := asObj(raw)
	if !ok {
		it.Err = invalid("data[]", "the order is not a JSON object: %s", clip(raw))
		return it, nil
	}
	attrs, err := o.object("attributes")
	switch {
	case err != nil:
		it.Err = invalid("attributes", "%v", err)
		return it, nil
	case attrs == nil:
		it.Err = invalid("attributes", "is required")
		return it, nil
	}
	code, err := attrs.str("code")
	switch {
	case err != nil:
		it.Err = invalid("attributes.code", "%v", err)
		return it, nil
	case strings.TrimSpace(code) == "":
		it.Err = invalid("attributes.code", "is required")
		return it, nil
	case order.CheckKeyID(code) != "":
		it.Err = invalid("attributes.code", "%s %s", strconv.Quote(code), order.CheckKeyID(code))
		return it, nil
	}
	it.ID = code

	var ps problems
	state, err := attrs.str("state")
	switch {
	case err != nil:
		ps.add("attributes.state", "%v", err)
	case state == "":
		ps.add("attributes.state", "is required")
	case !slices.Contains(knownStates, state):
		ps.add("attributes.state", "%q is not a Kaspi order state", state)
	}
	status, err := attrs.str("status")
	switch {
	case err != nil:
		ps.add("attributes.status", "%v", err)
	case status == "":
		ps.add("attributes.status", "is required")
	case !slices.Contains(knownStatuses, status):
		ps.add("attributes.status", "%q is not a Kaspi order status", status)
	}
	if len(ps) > 0 {
		it.Err = ps.err()
		return it, nil
	}

	if cancelled(status) {
		// Nothing to create: the poller registers the cancel, which ends with a
		// note if the order never reached 1C. The reason is Kaspi's code alone, so
		// CANCELLING → CANCELLED does not change the cancel's payload.
		reason, _ := attrs.str("cancellationReason")
		it.Cancelled = true
		it.CancelReason = "cancelled at Kaspi"
		if reason != "" {
			it.CancelReason += ": " + reason
		}
		return it, nil
	}
	if listing && !c.statuses[status] {
		c.log.DebugContext(ctx, "order not imported in this status", "code", code, "state", state, "status", status)
		return nil, nil
	}

	id, err := o.str("id")
	switch {
	case err != nil:
		ps.add("id", "%v", err)
	case id == "":
		ps.add("id", "is required (the order id is needed to accept the order)")
	case order.CheckKeyID(id) != "":
		ps.add("id", "%s %s", strconv.Quote(id), order.CheckKeyID(id))
	}
	var created time.Time
	switch ms, ok, err := attrs.dec("creationDate"); {
	case err != nil:
		ps.add("attributes.creationDate", "%v", err)
	case !ok:
		ps.add("attributes.creationDate", "is required")
	case !ms.IsInteger() || ms.Sign() <= 0:
		ps.add("attributes.creationDate", "must be epoch milliseconds, got %s", ms)
	case ms.GreaterThanOrEqual(maxEpochMilli):
		ps.add("attributes.creationDate", "%s epoch milliseconds is past the year 9999", ms)
	default:
		created = time.UnixMilli(ms.IntPart()).In(c.cfg.Location)
		if msg := order.CheckTime(created); msg != "" {
			ps.add("attributes.creationDate", "%s (epoch milliseconds %s)", msg, ms)
		}
	}
	cust := customer(attrs, &ps)
	if len(ps) > 0 {
		it.Err = ps.err()
		return it, nil
	}

	entries, bad, err := c.entries(ctx, o, id, included)
	if err != nil {
		return nil, err
	}
	if bad != nil {
		it.Err = invalid("entries", "%v", bad)
		return it, nil
	}
	lines := make([]order.Line, 0, len(entries))
	for i, raw := range entries {
		if l, ok := mapEntry(raw, fmt.Sprintf("entries[%d]", i), &ps); ok {
			lines = append(lines, l)
		}
	}
	if len(entries) == 0 {
		ps.add("entries", "the order has no entries")
	}
	if len(ps) > 0 {
		it.Err = ps.err()
		return it, nil
	}

	out := &order.Order{
		Source:        c.cfg.Source,
		ExternalID:    code,
		Number:        code,
		CreatedAt:     created,
		Customer:      cust,
		Warehouse:     c.cfg.Warehouse,
		Currency:      "KZT",
		Lines:         lines,
		MarketplaceID: id,
	}
	// The total is the exact sum of the lines, as the canonical order requires.
	// Kaspi's attributes.totalPrice is what the buyer pays for the order and may hold
	// more than the goods (delivery charged to the buyer, deliveryCost): it is not
	// the 1C order's total, and a difference is only noted in the comment.
	total := out.LinesTotal()
	out.Total = &total
	if tp, ok, err := attrs.dec("totalPrice"); err == nil && ok && !tp.Equal(total) {
		out.Comment = fmt.Sprintf("Kaspi totalPrice %s, the lines %s", tp, total)
		if dc, ok, err := attrs.dec("deliveryCost"); err == nil && ok && !dc.IsZero() {
			out.Comment += fmt.Sprintf(", delivery %s", dc)
		}
	}
	if err := out.Validate(); err != nil {
		it.Err = err
		return it, nil
	}
	it.Order = out
	return it, nil
}

// maxEpochMilli is 10000-01-01T00:00:00Z in epoch milliseconds.
var maxEpochMilli = decimal.NewFromInt(253402300800000)

// customer reads attributes.customer. It is optional: a malformed one is left out,
// but text that is not a person's text (a control character, invalid UTF-8) refuses
// the order, naming the field.
func customer(attrs obj, ps *problems) order.Customer {
	cu, err := attrs.object("customer")
	if err != nil || cu == nil {
		return order.Customer{}
	}
	read := func(key string) string {
		s, err := cu.str(key)
		if err != nil {
			return ""
		}
		if msg := order.CheckLine(s); msg != "" {
			ps.add("attributes.customer."+key, "%s", msg)
			return ""
		}
		return s
	}
	first, last := read("firstName"), read("lastName")
	name := strings.TrimSpace(strings.TrimSpace(first) + " " + strings.TrimSpace(last))
	if n := strings.TrimSpace(read("name")); name == "" {
		name = n
	}
	return order.Customer{Name: name, Phone: phone7(read("cellPhone"))}
}

// phone7 writes a Kazakh mobile number in international form: Kaspi gives ten
// digits without the country code (7011234567 → +77011234567). Anything else is
// kept as it came.
func phone7(p string) string {
	p = strings.TrimSpace(p)
	digits := strings.Map(func(r rune) rune {
		if unicode.IsDigit(r) {
			return r
		}
		return -1
	}, p)
	switch {
	case len(digits) == 10 && len(digits) == len(p):
		return "+7" + digits
	case len(digits) == 11 && (digits[0] == '7' || digits[0] == '8'):
		return "+7" + digits[1:]
	}
	return p
}

// entries returns the order's entries: from "included" when the order's
// relationships.entries lists them all there, else from GET /orders/{id}/entries.
// bad is a problem of this order alone (the entries cannot be read).
func (c *Connector) entries(ctx context.Context, o obj, id string, included map[string]json.RawMessage) (entries []json.RawMessage, bad, err error) {
	if refs, ok := entryRefs(o); ok {
		for _, ref := range refs {
			raw, found := included[ref]
			if !found {
				entries = nil
				break
			}
			entries = append(entries, raw)
		}
		if len(entries) == len(refs) && len(refs) > 0 {
			return entries, nil, nil
		}
	}
	body, bad, err := c.readEntries(ctx, id)
	if err != nil || bad != nil {
		return nil, bad, err
	}
	var doc struct {
		Data []json.RawMessage `json:"data"`
	}
	if err := order.CheckJSON(body, order.JSONOptions{Into: &doc, Shallow: true}); err != nil {
		return nil, fmt.Errorf("GET /orders/%s/entries is not valid JSON:API: %v", id, err), nil
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, fmt.Errorf("GET /orders/%s/entries is not valid JSON:API: %v", id, err), nil
	}
	return doc.Data, nil, nil
}

// entryRefs reads relationships.entries.data[].id; ok is false when it is absent.
// Keys are matched exactly (obj), never in another letter case.
func entryRefs(o obj) (ids []string, ok bool) {
	rel, err := o.object("relationships")
	if err != nil || rel == nil {
		return nil, false
	}
	entries, err := rel.object("entries")
	if err != nil || entries == nil || null(entries["data"]) {
		return nil, false
	}
	var data []json.RawMessage
	if json.Unmarshal(entries["data"], &data) != nil || data == nil {
		return nil, false
	}
	for _, raw := range data {
		d, ok := asObj(raw)
		if !ok {
			return nil, false
		}
		id, err := d.str("id")
		if err != nil || id == "" {
			return nil, false
		}
		ids = append(ids, id)
	}
	return ids, true
}

// mapEntry maps one order entry to a line, adding what is wrong to ps.
//
// The line's price is basePrice, the unit price. Where Kaspi's totalPrice of the
// entry is not basePrice × quantity (goods sold by weight, whose price is per
// kilogram, or a price changed after a partial cancellation), the line keeps what
// the buyer pays: totalPrice ÷ quantity when that division is exact, otherwise the
// entry is refused with the reason rather than rounded.
func mapEntry(raw json.RawMessage, field string, ps *problems) (order.Line, bool) {
	n := len(*ps)
	if err := order.CheckJSON(raw, order.JSONOptions{}); err != nil && json.Valid(raw) {
		var ve *order.ValidationError
		if errors.As(err, &ve) {
			for _, p := range ve.Problems {
				ps.add(field+"."+p.Field, "%s", p.Message)
			}
		}
		return order.Line{}, false
	}
	e, ok := asObj(raw)
	if !ok {
		ps.add(field, "is not a JSON object")
		return order.Line{}, false
	}
	attrs, err := e.object("attributes")
	if err != nil || attrs == nil {
		ps.add(field+".attributes", "is required")
		return order.Line{}, false
	}
	var sku, name string
	switch offer, err := attrs.object("offer"); {
	case err != nil:
		ps.add(field+".offer", "%v", err)
	case offer == nil:
		ps.add(field+".offer.code", "is required (the merchant's SKU)")
	default:
		if sku, err = offer.text("code"); err != nil {
			ps.add(field+".offer.code", "%v", err)
		} else if strings.TrimSpace(sku) == "" {
			ps.add(field+".offer.code", "is required (the merchant's SKU)")
		}
		// The name is informational: one that is not a string is left out, one that
		// is not a person's text refuses the order.
		if name, err = offer.str("name"); err == nil {
			if msg := order.CheckLine(name); msg != "" {
				ps.add(field+".offer.name", "%s", msg)
			}
		}
	}
	qty, hasQty, err := attrs.dec("quantity")
	switch {
	case err != nil:
		ps.add(field+".quantity", "%v", err)
	case !hasQty:
		ps.add(field+".quantity", "is required")
	case !qty.IsPositive():
		ps.add(field+".quantity", "must be greater than 0, got %s", qty)
	}
	base, hasBase, err := attrs.dec("basePrice")
	if err != nil {
		ps.add(field+".basePrice", "%v", err)
	}
	total, hasTotal, err := attrs.dec("totalPrice")
	if err != nil {
		ps.add(field+".totalPrice", "%v", err)
	}
	if len(*ps) > n {
		return order.Line{}, false
	}
	var price decimal.Decimal
	switch {
	case hasBase && (!hasTotal || base.Mul(qty).Equal(total)):
		price = base
	case hasTotal:
		per := total.DivRound(qty, 8)
		if !per.Mul(qty).Equal(total) {
			ps.add(field+".totalPrice", "%s for %s units is not basePrice × quantity (%s) and has no exact unit price",
				total, qty, priceText(base, hasBase))
			return order.Line{}, false
		}
		price = per
	default:
		ps.add(field+".basePrice", "is required")
		return order.Line{}, false
	}
	if price.IsNegative() {
		ps.add(field+".basePrice", "must not be negative, got %s", price)
		return order.Line{}, false
	}
	return order.Line{SKU: strings.TrimSpace(sku), Name: strings.TrimSpace(name), Quantity: qty, Price: price}, true
}

func priceText(base decimal.Decimal, ok bool) string {
	if !ok {
		return "basePrice absent"
	}
	return "basePrice " + base.String()
}
