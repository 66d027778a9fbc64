package uzum

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"github.com/ordersync/ordersync/connectors"
	"github.com/ordersync/ordersync/internal/order"
)

// decodeList reads {"payload":{"orders":[…]}}; orders stay raw until each is mapped
// on its own, so one bad order cannot spoil its page-mates.
func decodeList(body []byte) ([]json.RawMessage, error) {
	var pg struct {
		Payload *struct {
			Orders []json.RawMessage `json:"orders"`
		} `json:"payload"`
	}
	if err := json.Unmarshal(body, &pg); err != nil {
		return nil, fmt.Errorf("the page is not Uzum's JSON: %w", err)
	}
	if pg.Payload == nil {
		return nil, errors.New(`the page has no "payload"`)
	}
	return pg.Payload.Orders, nil
}

// decodeOne reads {"payload":{<order>}}.
func decodeOne(body []byte) (json.RawMessage, error) {
	var one struct {
		Payload json.RawMessage `json:"payload"`
	}
	if err := json.Unmarshal(body, &one); err != nil {
		return nil, fmt.Errorf("the answer is not Uzum's JSON: %w", err)
	}
	if len(one.Payload) == 0 || string(one.Payload) == "null" {
		return nil, errors.New(`the answer has no "payload"`)
	}
	return one.Payload, nil
}

// wireOrder is the part of an Uzum FBS order the connector reads. Numbers stay
// json.Number so that prices are read exactly.
type wireOrder struct {
	ID           json.Number     `json:"id"`
	Status       string          `json:"status"`
	DateCreated  json.RawMessage `json:"dateCreated"`
	CancelReason string          `json:"cancelReason"`
	DeliveryInfo *struct {
		CustomerFullname string `json:"customerFullname"`
		CustomerPhone    string `json:"customerPhone"`
	} `json:"deliveryInfo"`
	OrderItems []wireItem `json:"orderItems"`
}

type wireItem struct {
	SkuTitle     string          `json:"skuTitle"` // the seller's SKU code
	ProductTitle string          `json:"productTitle"`
	Amount       json.RawMessage `json:"amount"`
	SellerPrice  json.RawMessage `json:"sellerPrice"`
}

func decodeOrder(raw json.RawMessage) (wireOrder, error) {
	var w wireOrder
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	err := d.Decode(&w)
	return w, err
}

// idOf is the order's id as text, "" when it cannot be read.
func idOf(raw json.RawMessage) string {
	var w struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(raw, &w) != nil {
		return ""
	}
	s := strings.Trim(string(w.ID), `"`)
	if _, err := strconv.ParseInt(s, 10, 64); err != nil {
		return ""
	}
	return s
}

func statusOf(raw json.RawMessage) string {
	var w struct {
		Status string `json:"status"`
	}
	_ = json.Unmarshal(raw, &w)
	return w.Status
}

// mapOrderSafe maps an order, a panic becoming the order's Err.
func (c *Connector) mapOrderSafe(raw json.RawMessage) connectors.Item {
	return connectors.MapSafely(c.log, raw, idOf, c.mapOrder)
}

// mapOrder maps one Uzum order: an Item with Err naming the field when it cannot be
// created, Cancelled for CANCELED.
func (c *Connector) mapOrder(raw json.RawMessage) connectors.Item {
	it := connectors.Item{ID: idOf(raw), Raw: raw}
	w, err := decodeOrder(raw)
	if err != nil {
		it.Err = fmt.Errorf("the order is not Uzum's JSON: %w", err)
		return it
	}
	if it.ID == "" {
		it.Err = errors.New("id: missing or not a whole number")
		return it
	}
	if w.Status == StatusCanceled {
		it.Cancelled, it.CancelReason = true, w.CancelReason
	}
	var ps []order.FieldError
	bad := func(field, format string, args ...any) {
		ps = append(ps, order.FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
	}
	created, err := c.date(w.DateCreated)
	if err != nil {
		bad("dateCreated", "%s", err)
	}
	o := &order.Order{
		Source: c.cfg.Source, ExternalID: it.ID, Number: it.ID, CreatedAt: created,
		Warehouse: c.cfg.Warehouse, Currency: Currency, MarketplaceID: it.ID,
	}
	if di := w.DeliveryInfo; di != nil {
		o.Customer = order.Customer{Name: strings.TrimSpace(di.CustomerFullname), Phone: strings.TrimSpace(di.CustomerPhone)}
	}
	if len(w.OrderItems) == 0 {
		bad("orderItems", "the order has no items")
	}
	for i, item := range w.OrderItems {
		f := fmt.Sprintf("orderItems[%d]", i)
		l := order.Line{SKU: strings.TrimSpace(item.SkuTitle), Name: item.ProductTitle}
		if l.SKU == "" {
			bad(f+".skuTitle", "is missing: the seller's SKU code")
		}
		q, err := number(item.Amount)
		switch {
		case err != nil:
			bad(f+".amount", "%s", err)
		case !q.IsPositive():
			bad(f+".amount", "must be greater than 0, got %s", q)
		}
		p, err := number(item.SellerPrice)
		switch {
		case err != nil:
			bad(f+".sellerPrice", "%s", err)
		case p.IsNegative():
			bad(f+".sellerPrice", "must not be negative, got %s", p)
		}
		l.Quantity, l.Price = q, p
		o.Lines = append(o.Lines, l)
	}
	if len(ps) > 0 {
		it.Err = &order.ValidationError{Problems: ps}
		return it
	}
	it.Order = o
	it.UpdatedAt = created
	return it
}

// number reads a JSON number exactly (a number in quotes too).
func number(raw json.RawMessage) (decimal.Decimal, error) {
	s := strings.TrimSpace(string(raw))
	if s == "" || s == "null" {
		return decimal.Decimal{}, errors.New("is missing")
	}
	text := strings.Trim(s, `"`)
	d, err := decimal.NewFromString(text)
	if err != nil {
		return decimal.Decimal{}, fmt.Errorf("%s is not a number", order.SafeText(s))
	}
	return d, nil
}

// date reads an Uzum date: epoch milliseconds, or text (RFC 3339, or without a zone:
// then Tashkent's), in the connector's zone.
func (c *Connector) date(raw json.RawMessage) (time.Time, error) {
	s := strings.TrimSpace(string(raw))
	if s == "" || s == "null" {
		return time.Time{}, errors.New("is missing")
	}
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.UnixMilli(ms).In(c.cfg.Location), nil
	}
	var text string
	if err := json.Unmarshal(raw, &text); err != nil {
		return time.Time{}, fmt.Errorf("%s is not a date", s)
	}
	if t, err := time.Parse(time.RFC3339Nano, text); err == nil {
		return t.In(c.cfg.Location), nil
	}
	for _, layout := range []string{"2006-01-02T15:04:05.999999999", "2006-01-02 15:04:05"} {
		if t, err := time.ParseInLocation(layout, text, c.cfg.Location); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is not a date", text)
}
