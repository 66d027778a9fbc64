package yandexmarket

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"github.com/ordersync/ordersync/connectors"
	"github.com/ordersync/ordersync/internal/order"
)

// decodeList reads {"orders":[…],"paging":{"nextPageToken":…}}; orders stay raw
// until each is mapped on its own, so one bad order cannot spoil its page-mates.
func decodeList(body []byte) ([]json.RawMessage, string, error) {
	var pg struct {
		Orders *[]json.RawMessage `json:"orders"`
		Paging struct {
			NextPageToken string `json:"nextPageToken"`
		} `json:"paging"`
	}
	if err := json.Unmarshal(body, &pg); err != nil {
		return nil, "", fmt.Errorf("the page is not Yandex Market's JSON: %w", err)
	}
	if pg.Orders == nil {
		return nil, "", errors.New(`the page has no "orders"`)
	}
	return *pg.Orders, pg.Paging.NextPageToken, nil
}

// decodeOne reads {"order":{…}}.
func decodeOne(body []byte) (json.RawMessage, error) {
	var one struct {
		Order json.RawMessage `json:"order"`
	}
	if err := json.Unmarshal(body, &one); err != nil {
		return nil, fmt.Errorf("the answer is not Yandex Market's JSON: %w", err)
	}
	if len(one.Order) == 0 || string(one.Order) == "null" {
		return nil, errors.New(`the answer has no "order"`)
	}
	return one.Order, nil
}

// wireOrder is the part of an order the connector reads. Numbers stay raw so that
// prices are read exactly.
type wireOrder struct {
	ID              json.RawMessage `json:"id"`
	OrderID         json.RawMessage `json:"orderId"` // the cabinet listing's name of it
	Status          string          `json:"status"`
	Substatus       string          `json:"substatus"`
	Currency        string          `json:"currency"`
	CreationDate    json.RawMessage `json:"creationDate"`
	UpdatedAt       json.RawMessage `json:"updatedAt"`
	ExternalOrderID string          `json:"externalOrderId"`
	Items           []wireItem      `json:"items"`
}

type wireItem struct {
	OfferID    string          `json:"offerId"` // the seller's SKU
	OfferName  string          `json:"offerName"`
	Count      json.RawMessage `json:"count"`
	Price      json.RawMessage `json:"price"`
	BuyerPrice json.RawMessage `json:"buyerPrice"`
}

func decodeOrder(raw json.RawMessage) (wireOrder, error) {
	var w wireOrder
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	err := d.Decode(&w)
	return w, err
}

// idOf is the order's id as text (id, or orderId), "" when it cannot be read.
func idOf(raw json.RawMessage) string {
	var w struct {
		ID      json.RawMessage `json:"id"`
		OrderID json.RawMessage `json:"orderId"`
	}
	if json.Unmarshal(raw, &w) != nil {
		return ""
	}
	id := w.ID
	if len(id) == 0 || string(id) == "null" {
		id = w.OrderID
	}
	s := strings.Trim(string(id), `"`)
	if !positive(s) {
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

func importable(status string) bool { return slices.Contains(ImportStatuses, status) }

// mapOrderSafe maps an order, a panic becoming the order's Err.
func (c *Connector) mapOrderSafe(raw json.RawMessage) connectors.Item {
	return connectors.MapSafely(c.log, raw, idOf, c.mapOrder)
}

// mapOrder maps one order: an Item with Err naming the field when it cannot be
// created, Cancelled (the substatus its reason) for CANCELLED.
func (c *Connector) mapOrder(raw json.RawMessage) connectors.Item {
	it := connectors.Item{ID: idOf(raw), Raw: raw}
	w, err := decodeOrder(raw)
	if err != nil {
		it.Err = fmt.Errorf("the order is not Yandex Market's JSON: %w", err)
		return it
	}
	if it.ID == "" {
		it.Err = errors.New("id: missing or not a whole number")
		return it
	}
	if w.Status == StatusCancelled {
		it.Cancelled, it.CancelReason = true, w.Substatus
	}
	var ps []order.FieldError
	bad := func(field, format string, args ...any) {
		ps = append(ps, order.FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
	}
	created, err := c.date(w.CreationDate)
	if err != nil {
		bad("creationDate", "%s", err)
	}
	if len(w.UpdatedAt) > 0 && string(w.UpdatedAt) != "null" {
		if u, err := c.date(w.UpdatedAt); err == nil {
			it.UpdatedAt = u
		} else {
			bad("updatedAt", "%s", err)
		}
	}
	currency := w.Currency
	switch currency {
	case "RUR", "":
		currency = Currency // Yandex names the rouble by its old code
	default:
		bad("currency", "%s is not the rouble (RUR)", order.SafeText(currency))
	}
	o := &order.Order{
		Source: c.cfg.Source, ExternalID: it.ID, Number: it.ID, CreatedAt: created,
		Warehouse: c.cfg.Warehouse, Currency: currency, MarketplaceID: it.ID,
	}
	if len(w.Items) == 0 {
		bad("items", "the order has no items")
	}
	for i, item := range w.Items {
		f := fmt.Sprintf("items[%d]", i)
		l := order.Line{SKU: strings.TrimSpace(item.OfferID), Name: item.OfferName}
		if l.SKU == "" {
			bad(f+".offerId", "is missing: the seller's SKU")
		}
		q, err := number(item.Count)
		switch {
		case err != nil:
			bad(f+".count", "%s", err)
		case !q.IsPositive() || !q.IsInteger():
			bad(f+".count", "must be a whole number greater than 0, got %s", q)
		}
		field, priceRaw := f+".price", item.Price
		if isMissing(priceRaw) {
			field, priceRaw = f+".buyerPrice", item.BuyerPrice
		}
		p, err := number(priceRaw)
		switch {
		case err != nil:
			bad(field, "%s", err)
		case p.IsNegative():
			bad(field, "must not be negative, got %s", p)
		}
		l.Quantity, l.Price = q, p
		o.Lines = append(o.Lines, l)
	}
	if len(ps) > 0 {
		it.Err = &order.ValidationError{Problems: ps}
		return it
	}
	it.Order = o
	if it.UpdatedAt.IsZero() {
		it.UpdatedAt = created
	}
	return it
}

func isMissing(raw json.RawMessage) bool {
	s := strings.TrimSpace(string(raw))
	return s == "" || s == "null"
}

// number reads a JSON number exactly (a number in quotes too).
func number(raw json.RawMessage) (decimal.Decimal, error) {
	if isMissing(raw) {
		return decimal.Decimal{}, errors.New("is missing")
	}
	s := strings.TrimSpace(string(raw))
	d, err := decimal.NewFromString(strings.Trim(s, `"`))
	if err != nil {
		return decimal.Decimal{}, fmt.Errorf("%s is not a number", order.SafeText(s))
	}
	return d, nil
}

// date reads a Yandex date: DD-MM-YYYY HH:MM:SS (or DD-MM-YYYY) in Moscow time, or
// ISO 8601 (with an offset, or without: then Moscow's), in the connector's zone.
func (c *Connector) date(raw json.RawMessage) (time.Time, error) {
	if isMissing(raw) {
		return time.Time{}, errors.New("is missing")
	}
	var text string
	if err := json.Unmarshal(raw, &text); err != nil {
		return time.Time{}, fmt.Errorf("%s is not a date", order.SafeText(string(raw)))
	}
	if t, err := time.Parse(time.RFC3339Nano, text); err == nil {
		return t.In(c.cfg.Location), nil
	}
	for _, layout := range []string{"02-01-2006 15:04:05", "02-01-2006", "2006-01-02T15:04:05.999999999", "2006-01-02 15:04:05"} {
		if t, err := time.ParseInLocation(layout, text, c.cfg.Location); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is not a date", order.SafeText(text))
}

// externalIDOf is the order's externalOrderId, "" when it has none.
func externalIDOf(raw json.RawMessage) string {
	var w struct {
		ExternalOrderID string `json:"externalOrderId"`
	}
	_ = json.Unmarshal(raw, &w)
	return w.ExternalOrderID
}

func substatusOf(raw json.RawMessage) string {
	var w struct {
		Substatus string `json:"substatus"`
	}
	_ = json.Unmarshal(raw, &w)
	return w.Substatus
}
