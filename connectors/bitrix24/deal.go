package bitrix24

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"

	"github.com/shopspring/decimal"

	"github.com/ordersync/ordersync/connectors"
	"github.com/ordersync/ordersync/internal/order"
)

var dealIDRe = regexp.MustCompile(`^[1-9][0-9]{0,18}$`)

// Fetch reads deal id and returns its canonical order (see the package comment for
// the mapping). A deal outside Config.CreateStages is an error wrapping
// order.ErrNotReady, and nothing but the deal is read. A deal that cannot be mapped
// (no product rows, a currency that is not ISO 4217, a product without a SKU, …) is
// an *order.ValidationError naming the canonical field, returned with what was
// mapped. An id that is not a deal wraps connectors.ErrNotFound; a refused webhook is
// a *connectors.AuthError naming webhooks.bitrix24.rest_url; anything else (the
// network, 5xx and QUERY_LIMIT_EXCEEDED after the retries) is worth retrying later.
func (c *Client) Fetch(ctx context.Context, id string) (o order.Order, err error) {
	defer func() {
		// A panic fails this deal (retrying would panic again), never the process.
		if v := recover(); v != nil {
			c.log.ErrorContext(ctx, "fetching a deal panicked", "deal", id, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			o, err = order.Order{}, &order.ValidationError{Problems: []order.FieldError{{
				Field: "(deal)", Message: order.SafeText(fmt.Sprintf("internal error: fetching deal %s panicked: %v", id, v)),
			}}}
		}
	}()
	id = strings.TrimSpace(id)
	if !dealIDRe.MatchString(id) {
		return order.Order{}, fmt.Errorf("bitrix24: deal id %q is not a positive integer: %w", id, connectors.ErrNotFound)
	}
	var d wireDeal
	if err := c.call(ctx, "crm.deal.get", map[string]any{"id": id}, &d); err != nil {
		return order.Order{}, dealError(id, err)
	}
	stage := strings.TrimSpace(string(d.StageID))
	if !slices.Contains(c.stages, strings.ToUpper(stage)) {
		if stage == "" {
			stage = "(none)"
		}
		return order.Order{}, fmt.Errorf("bitrix24: deal %s is in stage %s, not one of %v: %w", id, stage, c.stages, order.ErrNotReady)
	}
	var rows []wireRow
	if err := c.call(ctx, "crm.deal.productrows.get", map[string]any{"id": id}, &rows); err != nil {
		return order.Order{}, dealError(id, err)
	}
	cust, err := c.customer(ctx, id, d)
	if err != nil {
		return order.Order{}, dealError(id, err)
	}
	products, err := c.products(ctx, rows)
	if err != nil {
		return order.Order{}, dealError(id, err)
	}
	return c.mapDeal(id, d, rows, cust, products)
}

// dealError says which deal a call failed for. An *connectors.AuthError stays on top,
// so its message leads with the key to check.
func dealError(id string, err error) error {
	var ae *connectors.AuthError
	if errors.As(err, &ae) {
		return &connectors.AuthError{Connector: ae.Connector, Key: ae.Key, Status: ae.Status,
			Err: fmt.Errorf("deal %s: %w", id, ae.Err)}
	}
	return fmt.Errorf("bitrix24: deal %s: %w", id, err)
}

// customer reads the deal's contact, or its company when it has no contact. A contact
// or company deleted since leaves the customer empty: every field of it is optional.
func (c *Client) customer(ctx context.Context, dealID string, d wireDeal) (order.Customer, error) {
	for _, who := range []struct {
		method string
		id     text
	}{{"crm.contact.get", d.ContactID}, {"crm.company.get", d.CompanyID}} {
		if !who.id.positive() {
			continue
		}
		var p wirePerson
		err := c.call(ctx, who.method, map[string]any{"id": string(who.id)}, &p)
		if errors.Is(err, connectors.ErrNotFound) {
			c.log.WarnContext(ctx, "the deal names a contact or company the portal no longer has",
				"deal", dealID, "method", who.method, "id", string(who.id))
			continue
		}
		if err != nil {
			return order.Customer{}, err
		}
		name := joinNonEmpty(" ", string(p.Name), string(p.LastName))
		if who.method == "crm.company.get" {
			name = strings.TrimSpace(string(p.Title))
		}
		return order.Customer{Name: name, Phone: firstValue(p.Phone), Email: firstValue(p.Email)}, nil
	}
	return order.Customer{}, nil
}

// product is what crm.product.get answered for one catalog product, or nil when the
// catalog no longer has it.
type product map[string]json.RawMessage

// products reads the catalog products the rows name, once each, when the SKU comes
// from the product.
func (c *Client) products(ctx context.Context, rows []wireRow) (map[string]product, error) {
	if c.skuField == SKUFromProductID {
		return nil, nil
	}
	out := map[string]product{}
	for _, r := range rows {
		pid := string(r.ProductID)
		if _, seen := out[pid]; seen || !r.ProductID.positive() {
			continue
		}
		var p product
		err := c.call(ctx, "crm.product.get", map[string]any{"id": pid}, &p)
		switch {
		case errors.Is(err, connectors.ErrNotFound):
			out[pid] = nil
		case err != nil:
			return nil, err
		default:
			out[pid] = p
		}
	}
	return out, nil
}

// mapDeal builds the order and checks it; problems name the canonical field and say
// which Bitrix24 field they come from.
func (c *Client) mapDeal(id string, d wireDeal, rows []wireRow, cust order.Customer, products map[string]product) (order.Order, error) {
	var ps []order.FieldError
	add := func(field, format string, args ...any) {
		ps = append(ps, order.FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
	}
	o := order.Order{
		Source:     Name,
		ExternalID: id,
		Number:     id,
		Customer:   cust,
		Warehouse:  c.cfg.Warehouse,
		Currency:   strings.ToUpper(strings.TrimSpace(string(d.CurrencyID))),
		Comment:    joinNonEmpty("\n", string(d.Title), string(d.Comments)),
	}
	switch t, err := order.ParseTime(strings.TrimSpace(string(d.DateCreate))); {
	case err != nil:
		add("created_at", "the deal's DATE_CREATE %s is not an ISO 8601 time with an offset", strconv.Quote(string(d.DateCreate)))
	case order.CheckTime(t) != "":
		add("created_at", "the deal's DATE_CREATE %s", order.CheckTime(t))
	default:
		o.CreatedAt = t
	}
	switch {
	case o.Currency == "":
		add("currency", "the deal has no CURRENCY_ID")
	case !order.ValidCurrency(o.Currency):
		add("currency", "the deal's CURRENCY_ID %q is not an ISO 4217 code: use the ISO code as the currency's id in the portal", o.Currency)
	}
	if len(rows) == 0 {
		add("lines", "the deal has no product rows: add its products to the deal in Bitrix24")
	}
	for i, r := range rows {
		f := fmt.Sprintf("lines[%d]", i)
		l := order.Line{Name: strings.TrimSpace(string(r.ProductName))}
		switch {
		case r.Price.bad != "":
			add(f+".price", "the row's PRICE %s is not a number", r.Price.bad)
		case !r.Price.set:
			add(f+".price", "the row has no PRICE")
		default:
			l.Price = r.Price.d
		}
		switch {
		case r.Quantity.bad != "":
			add(f+".quantity", "the row's QUANTITY %s is not a number", r.Quantity.bad)
		case !r.Quantity.set:
			add(f+".quantity", "the row has no QUANTITY")
		default:
			l.Quantity = r.Quantity.d
		}
		sku, msg := c.sku(r, products)
		if msg != "" {
			add(f+".sku", "%s", msg)
		}
		l.SKU = sku
		o.Lines = append(o.Lines, l)
	}
	total := o.LinesTotal()
	o.Total = &total
	if err := o.Validate(); err != nil {
		var ve *order.ValidationError
		if errors.As(err, &ve) {
			for _, p := range ve.Problems {
				if !slices.ContainsFunc(ps, func(q order.FieldError) bool { return q.Field == p.Field }) {
					ps = append(ps, p)
				}
			}
		}
	}
	if len(ps) > 0 {
		return o, &order.ValidationError{Problems: ps}
	}
	return o, nil
}

// sku is a row's SKU from the configured source, or why it has none.
func (c *Client) sku(r wireRow, products map[string]product) (string, string) {
	pid := string(r.ProductID)
	if !r.ProductID.positive() {
		return "", fmt.Sprintf("the row %q is not a catalog product (PRODUCT_ID %s), so it has no SKU: pick the product from the catalog",
			string(r.ProductName), cmp.Or(pid, "empty"))
	}
	if c.skuField == SKUFromProductID {
		return pid, ""
	}
	p := products[pid]
	if p == nil {
		return "", fmt.Sprintf("product %s of the row %q is not in the portal's catalog (crm.product.get: not found)", pid, string(r.ProductName))
	}
	field := strings.ToUpper(c.skuField)
	sku := strings.TrimSpace(fieldValue(p[field]))
	if sku == "" {
		return "", fmt.Sprintf("product %s (%q) has no %s in the portal's catalog: fill it, or choose another %s",
			pid, string(r.ProductName), field, keySKUField)
	}
	return sku, ""
}

// fieldValue reads a product field as text: a string or number as it is; a property,
// which crm.product.get answers as {"valueId": …, "value": …} (a list of them when
// the property is multiple), by its value.
func fieldValue(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	switch raw[0] {
	case '"':
		var s string
		_ = json.Unmarshal(raw, &s)
		return s
	case '{':
		var o map[string]json.RawMessage
		if json.Unmarshal(raw, &o) != nil {
			return ""
		}
		for _, k := range []string{"value", "VALUE"} {
			if v, ok := o[k]; ok {
				return fieldValue(v)
			}
		}
		return ""
	case '[':
		var a []json.RawMessage
		if json.Unmarshal(raw, &a) != nil {
			return ""
		}
		for _, v := range a {
			if s := fieldValue(v); strings.TrimSpace(s) != "" {
				return s
			}
		}
		return ""
	case 't', 'f':
		return ""
	default:
		return string(raw) // a number
	}
}

// The wire types read only what the mapping uses. Bitrix24 sends ids and most deal
// fields as strings and product-row numbers as JSON numbers, but portals differ, so
// text and number take either form.
type wireDeal struct {
	ID         text `json:"ID"`
	Title      text `json:"TITLE"`
	StageID    text `json:"STAGE_ID"`
	CurrencyID text `json:"CURRENCY_ID"`
	ContactID  text `json:"CONTACT_ID"`
	CompanyID  text `json:"COMPANY_ID"`
	DateCreate text `json:"DATE_CREATE"`
	Comments   text `json:"COMMENTS"`
}

type wireRow struct {
	ProductID   text   `json:"PRODUCT_ID"`
	ProductName text   `json:"PRODUCT_NAME"`
	Price       number `json:"PRICE"`
	Quantity    number `json:"QUANTITY"`
}

// wirePerson is a contact (NAME, LAST_NAME) or a company (TITLE).
type wirePerson struct {
	Name     text        `json:"NAME"`
	LastName text        `json:"LAST_NAME"`
	Title    text        `json:"TITLE"`
	Phone    []wireMulti `json:"PHONE"`
	Email    []wireMulti `json:"EMAIL"`
}

// wireMulti is one value of a multiple field (PHONE, EMAIL).
type wireMulti struct {
	Value text `json:"VALUE"`
}

// text is a string, or a number kept as its digits; null is "".
type text string

func (t *text) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case string(b) == "null":
		*t = ""
	case len(b) > 0 && b[0] == '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*t = text(s)
	case json.Valid(b) && len(b) > 0 && (b[0] == '-' || (b[0] >= '0' && b[0] <= '9')):
		*t = text(b)
	case string(b) == "true" || string(b) == "false":
		*t = text(b)
	default:
		return fmt.Errorf("want a string or a number, got %.40s", b)
	}
	return nil
}

// positive reports whether t is an id that names something: digits, not 0.
func (t text) positive() bool {
	n, err := strconv.ParseUint(strings.TrimSpace(string(t)), 10, 64)
	return err == nil && n > 0
}

// number is an exact decimal from a JSON number (899.1) or a string ("1500.00"). A
// value that is not a number is kept in bad, so the mapping can name the field
// instead of failing the whole answer; null and "" are absent.
type number struct {
	d   decimal.Decimal
	set bool
	bad string
}

func (n *number) UnmarshalJSON(b []byte) error {
	*n = number{}
	b = bytes.TrimSpace(b)
	s := string(b)
	if s == "null" {
		return nil
	}
	if len(b) > 0 && b[0] == '"' {
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		s = strings.TrimSpace(s)
		if s == "" {
			return nil
		}
	}
	d, err := order.ParseDecimal(s)
	if err != nil {
		if r := []rune(s); len(r) > 40 {
			s = string(r[:40]) + "…"
		}
		n.bad = strconv.Quote(s)
		return nil
	}
	n.d, n.set = d, true
	return nil
}

func firstValue(ms []wireMulti) string {
	for _, m := range ms {
		if v := strings.TrimSpace(string(m.Value)); v != "" {
			return v
		}
	}
	return ""
}

func joinNonEmpty(sep string, parts ...string) string {
	var out []string
	for _, p := range parts {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, sep)
}
