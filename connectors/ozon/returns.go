package ozon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/ordersync/ordersync/connectors"
	"github.com/ordersync/ordersync/internal/order"
)

// PathReturns is Ozon's list of FBO and FBS returns.
const PathReturns = "/v1/returns/list"

// maxReturnsPage is the most returns Ozon answers in one page of /v1/returns/list.
const maxReturnsPage = 500

var _ connectors.ReturnLister = (*Connector)(nil)

// wireReturn is one return of /v1/returns/list: one product of one posting.
type wireReturn struct {
	ID            json.Number `json:"id"`
	Type          string      `json:"type"`
	Schema        string      `json:"schema"`
	PostingNumber string      `json:"posting_number"`
	Reason        string      `json:"return_reason_name"`
	Product       *struct {
		OfferID  string          `json:"offer_id"`
		Name     string          `json:"name"`
		Quantity json.RawMessage `json:"quantity"`
		Price    *struct {
			Currency string          `json:"currency_code"`
			Price    json.RawMessage `json:"price"`
		} `json:"price"`
	} `json:"product"`
	Logistic struct {
		ReturnDate string `json:"return_date"`
	} `json:"logistic"`
	Visual struct {
		ChangeMoment string `json:"change_moment"`
	} `json:"visual"`
}

// returnTypes maps Ozon's return types to the canonical ones. Ozon's Cancellation is a
// cancel after the posting left the seller (before it reached the buyer): the goods
// come back, so it is a return, not an order.cancel. A ClientReturn (the buyer's
// return after delivery) names one product, like a partial refusal. Unknown (Ozon's
// technical return) is not carried into 1C: it is recorded failed, for a person.
var returnTypes = map[string]string{
	"Cancellation":  order.ReturnCancellation,
	"FullReturn":    order.ReturnFull,
	"PartialReturn": order.ReturnPartial,
	"ClientReturn":  order.ReturnPartial,
}

// Returns calls fn with the FBS returns Ozon created in [from, to)
// (/v1/returns/list, filter logistic_return_date, paged by last_id). Each Ozon
// return is one product of one posting: one canonical return with one line, based on
// the posting's order (ozon:posting:<posting_number>:create).
func (c *Connector) Returns(ctx context.Context, from, to time.Time, fn func(page []connectors.ReturnItem) error) error {
	from, to = from.UTC(), to.UTC()
	if !from.Before(to) {
		return nil
	}
	var lastID json.Number = "0"
	for n := 1; n <= maxPages; n++ {
		label := fmt.Sprintf("list returns page %d", n)
		body := map[string]any{
			"filter": map[string]any{
				"logistic_return_date": map[string]string{"time_from": timeParam(from), "time_to": timeParam(to)},
				"return_schema":        "FBS",
			},
			"limit":   c.returnsPage(),
			"last_id": lastID,
		}
		resp, err := c.post(ctx, PathReturns, body, true, label)
		if err != nil {
			return err
		}
		var pg struct {
			Returns *[]json.RawMessage `json:"returns"`
			HasNext bool               `json:"has_next"`
		}
		if err := decodePage(resp.Body(), &pg); err != nil {
			return fmt.Errorf("ozon: %s: malformed page: %w", label, err)
		}
		if pg.Returns == nil {
			return fmt.Errorf("ozon: %s: malformed page: no returns array", label)
		}
		items := make([]connectors.ReturnItem, 0, len(*pg.Returns))
		next := json.Number("")
		for _, raw := range *pg.Returns {
			it := c.returnItem(raw)
			items = append(items, it)
			if id, ok := returnID(raw); ok {
				next = id
			}
		}
		if len(items) > 0 {
			if err := fn(items); err != nil {
				return err
			}
		}
		if !pg.HasNext {
			return nil
		}
		if next == "" || next == lastID {
			return fmt.Errorf("ozon: %s: malformed page: has_next without a new last id", label)
		}
		lastID = next
	}
	return fmt.Errorf("ozon: list returns: more than %d pages", maxPages)
}

// returnsPage is the page size of the returns' list.
func (c *Connector) returnsPage() int {
	if c.cfg.ReturnsPageSize > 0 {
		return min(c.cfg.ReturnsPageSize, maxReturnsPage)
	}
	return maxReturnsPage
}

// returnID reads a return's id alone, for the next page's last_id.
func returnID(raw json.RawMessage) (json.Number, bool) {
	var head struct {
		ID json.Number `json:"id"`
	}
	if json.Unmarshal(raw, &head) != nil || !digits(head.ID.String()) {
		return "", false
	}
	return head.ID, true
}

func digits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// returnItem decodes and maps one return; a panic becomes an item with Err.
func (c *Connector) returnItem(raw json.RawMessage) (it connectors.ReturnItem) {
	it.Raw = raw
	defer func() {
		if v := recover(); v != nil {
			c.log.Error("mapping a return panicked", "return_id", it.ID, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			it = connectors.ReturnItem{ID: it.ID, Raw: raw,
				Err: fieldError("(return)", order.SafeText(fmt.Sprintf("internal error: mapping the return panicked: %v", v)))}
		}
	}()
	id, ok := returnID(raw)
	if !ok {
		it.Err = fieldError("id", "is missing or not a number")
		return it
	}
	it.ID = id.String()
	if err := order.CheckJSON(raw, order.JSONOptions{Into: wireReturn{}}); err != nil {
		it.Err = err
		return it
	}
	var w wireReturn
	if err := json.Unmarshal(raw, &w); err != nil {
		it.Err = decodeError(err)
		return it
	}
	r, err := c.mapReturn(it.ID, &w)
	if err != nil {
		it.Err = err
		return it
	}
	it.Return = r
	return it
}

// mapReturn maps a decoded return, naming every Ozon field that is missing or wrong.
func (c *Connector) mapReturn(id string, w *wireReturn) (*order.Return, error) {
	var ps []order.FieldError
	add := func(field, format string, args ...any) {
		ps = append(ps, order.FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
	}
	r := &order.Return{Source: c.cfg.Source, ID: id, Reason: order.SafeText(strings.TrimSpace(w.Reason))}
	if t, ok := returnTypes[w.Type]; ok {
		r.Type = t
	} else {
		add("type", "%s is not a return carried into 1C (Cancellation, FullReturn, PartialReturn or ClientReturn)", strconv.Quote(w.Type))
	}
	if s := strings.ToUpper(strings.TrimSpace(w.Schema)); s != "" && s != "FBS" {
		add("schema", "%s: only FBS postings are created by this connector", strconv.Quote(w.Schema))
	}
	if !usableID(w.PostingNumber) {
		add("posting_number", "is missing or not a usable posting number: %s", strconv.Quote(w.PostingNumber))
	} else {
		r.OrderID = w.PostingNumber
		r.OrderKey = connectors.Item{Entity: Entity, ID: w.PostingNumber}.CreateKey(c.cfg.Source)
	}
	at := cmpOr(w.Logistic.ReturnDate, w.Visual.ChangeMoment)
	if at == "" {
		add("logistic.return_date", "is required (when the buyer returned the goods)")
	} else if t, err := c.parseTime(at); err != nil {
		add("logistic.return_date", "%v", err)
	} else {
		r.CreatedAt = t
	}
	if w.Product == nil {
		add("product", "is required")
	} else {
		p := w.Product
		l := order.Line{SKU: strings.TrimSpace(p.OfferID), Name: strings.TrimSpace(p.Name)}
		if l.SKU == "" {
			add("product.offer_id", "is required (the seller's article, the SKU looked up in 1C)")
		}
		q, err := parseNumber(p.Quantity)
		switch {
		case err != nil:
			add("product.quantity", "%v", err)
		case !q.IsPositive():
			add("product.quantity", "must be positive, got %s", q)
		}
		l.Quantity = q
		if p.Price == nil {
			add("product.price", "is required")
		} else {
			price, err := parseNumber(p.Price.Price)
			if err != nil {
				add("product.price.price", "%v", err)
			}
			l.Price = price
			cur := strings.ToUpper(strings.TrimSpace(p.Price.Currency))
			if !order.ValidCurrency(cur) {
				add("product.price.currency_code", "%s is not an ISO 4217 currency code", strconv.Quote(cur))
			}
			r.Currency = cur
		}
		r.Lines = []order.Line{l}
	}
	if len(ps) > 0 {
		return nil, &order.ValidationError{Problems: ps}
	}
	if err := r.Validate(); err != nil {
		var ve *order.ValidationError
		if errors.As(err, &ve) {
			return nil, err
		}
		return nil, fieldError("(return)", err.Error())
	}
	return r, nil
}
