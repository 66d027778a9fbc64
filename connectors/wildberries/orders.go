package wildberries

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"github.com/ordersync/ordersync/connectors"
	"github.com/ordersync/ordersync/internal/order"
)

// Statuses of POST /api/v3/orders/status. supplierStatus is what the seller did;
// wbStatus is where Wildberries has the order. The cross-border values cancel_carrier
// and canceled_by_carrier are listed by the current specification.
var (
	supplierStatuses = map[string]bool{"new": true, "confirm": true, "complete": true, "cancel": true, "cancel_carrier": true}
	wbStatuses       = map[string]bool{
		"waiting": true, "sorted": true, "sold": true, "canceled": true, "canceled_by_client": true,
		"declined_by_client": true, "defect": true, "ready_for_pickup": true, "postponed_delivery": true,
		"accepted_by_carrier": true, "sent_to_carrier": true, "canceled_by_carrier": true,
	}
	cancelledSupplier = map[string]string{
		"cancel":         "cancelled by the seller",
		"cancel_carrier": "cancelled by the carrier",
	}
	cancelledWB = map[string]string{
		"canceled":            "cancelled",
		"canceled_by_client":  "cancelled by the buyer on receipt",
		"declined_by_client":  "cancelled by the buyer in the first hour",
		"defect":              "cancelled for a defect",
		"canceled_by_carrier": "cancelled by the carrier",
	}
)

// status is one answer of POST /api/v3/orders/status.
type status struct {
	ID             int64  `json:"id"`
	SupplierStatus string `json:"supplierStatus"`
	WBStatus       string `json:"wbStatus"`
	err            error  // the status could not be read: its order fails with it
}

// cancelled says whether the statuses mean the order is cancelled, and why.
func (s status) cancelled() (bool, string) {
	var why []string
	if w, ok := cancelledSupplier[s.SupplierStatus]; ok {
		why = append(why, w)
	}
	if w, ok := cancelledWB[s.WBStatus]; ok {
		why = append(why, w)
	}
	if len(why) == 0 {
		return false, ""
	}
	return true, fmt.Sprintf("Wildberries: %s (supplierStatus %s, wbStatus %s)",
		strings.Join(why, "; "), s.SupplierStatus, s.WBStatus)
}

// List calls fn with the orders Wildberries holds as new now (GET /api/v3/orders/new)
// and then with every page of the orders created in [from, to) (GET /api/v3/orders,
// split into periods of at most 30 days, each followed by next until an empty page),
// each page with its statuses. An order is passed once per listing, whichever
// endpoint saw it first.
func (c *Connector) List(ctx context.Context, from, to time.Time, fn func(page []connectors.Item) error) error {
	seen := map[string]bool{}
	deliver := func(raws []json.RawMessage) error {
		items := make([]connectors.Item, 0, len(raws))
		for _, raw := range raws {
			it := c.mapOrderSafe(raw)
			if it.ID != "" {
				if seen[it.ID] {
					continue
				}
				seen[it.ID] = true
			}
			items = append(items, it)
		}
		if len(items) == 0 {
			return nil
		}
		if err := c.applyStatuses(ctx, items); err != nil {
			return err
		}
		return fn(items)
	}

	raws, err := c.newOrders(ctx)
	if err != nil {
		return err
	}
	if err := deliver(raws); err != nil {
		return err
	}
	return c.scan(ctx, from, to, func(raws []json.RawMessage) (bool, error) {
		return false, deliver(raws)
	})
}

// Get fetches one order by id: among the new orders, else among the orders of the
// last three months (as far back as GET /api/v3/orders reaches), newest period first.
// Wildberries has no method that reads one FBS order by id.
func (c *Connector) Get(ctx context.Context, id string) (connectors.Item, error) {
	n, err := strconv.ParseInt(id, 10, 64)
	if err != nil || n <= 0 {
		return connectors.Item{}, fmt.Errorf("wildberries: order id %q is not a positive integer: %w", id, connectors.ErrNotFound)
	}
	id = strconv.FormatInt(n, 10)
	var found json.RawMessage
	pick := func(raws []json.RawMessage) bool {
		for _, raw := range raws {
			if rawID, ok := readID(raw); ok && rawID == id {
				found = raw
				return true
			}
		}
		return false
	}
	raws, err := c.newOrders(ctx)
	if err != nil {
		return connectors.Item{}, err
	}
	if !pick(raws) {
		now := c.cfg.Now()
		for end := now; found == nil && now.Sub(end) < retention; end = end.Add(-MaxWindow) {
			start := end.Add(-MaxWindow)
			if err := c.scan(ctx, start, end, func(raws []json.RawMessage) (bool, error) {
				return pick(raws), nil
			}); err != nil {
				return connectors.Item{}, err
			}
		}
	}
	if found == nil {
		return connectors.Item{}, fmt.Errorf("wildberries: order %s: %w", id, connectors.ErrNotFound)
	}
	items := []connectors.Item{c.mapOrderSafe(found)}
	if err := c.applyStatuses(ctx, items); err != nil {
		return connectors.Item{}, err
	}
	return items[0], nil
}

// ordersPage is a page of GET /api/v3/orders/new or /api/v3/orders.
type ordersPage struct {
	Next   *int64            `json:"next"`
	Orders []json.RawMessage `json:"orders"`
}

// newOrders reads GET /api/v3/orders/new.
func (c *Connector) newOrders(ctx context.Context) ([]json.RawMessage, error) {
	const what = "GET /api/v3/orders/new"
	resp, err := connectors.Read(c.http.R().SetContext(ctx)).Get("/api/v3/orders/new")
	if err := connectors.Check("wildberries", tokenKey, what, resp, err); err != nil {
		return nil, err
	}
	var p ordersPage
	if err := decodePage(resp.Body(), &p); err != nil {
		return nil, fmt.Errorf("wildberries: %s: %w", what, err)
	}
	return p.Orders, nil
}

// scan lists the orders created in [from, to), in periods of at most MaxWindow (the
// bounds in unix seconds, both inclusive at Wildberries, so neighbouring periods share
// a second and the caller dedupes), following next until an empty page. fn returns
// true to stop.
func (c *Connector) scan(ctx context.Context, from, to time.Time, fn func([]json.RawMessage) (bool, error)) error {
	start, end := from.Unix(), ceilUnix(to)
	step := int64(MaxWindow / time.Second)
	for lo := start; lo < end; lo += step {
		hi := min(lo+step, end)
		var next int64
		for page := 1; ; page++ {
			what := fmt.Sprintf("GET /api/v3/orders %s–%s page %d",
				time.Unix(lo, 0).UTC().Format(time.RFC3339), time.Unix(hi, 0).UTC().Format(time.RFC3339), page)
			resp, err := connectors.Read(c.http.R().SetContext(ctx)).SetQueryParams(map[string]string{
				"limit":    strconv.Itoa(c.cfg.PageSize),
				"next":     strconv.FormatInt(next, 10),
				"dateFrom": strconv.FormatInt(lo, 10),
				"dateTo":   strconv.FormatInt(hi, 10),
			}).Get("/api/v3/orders")
			if err := connectors.Check("wildberries", tokenKey, what, resp, err); err != nil {
				return err
			}
			var p ordersPage
			if err := decodePage(resp.Body(), &p); err != nil {
				return fmt.Errorf("wildberries: %s: %w", what, err)
			}
			if len(p.Orders) == 0 {
				break
			}
			if p.Next == nil {
				return fmt.Errorf("wildberries: %s: malformed answer: orders without next", what)
			}
			if *p.Next == next {
				return fmt.Errorf("wildberries: %s: next stayed %d: the listing would not advance", what, next)
			}
			next = *p.Next
			stop, err := fn(p.Orders)
			if err != nil || stop {
				return err
			}
		}
	}
	return nil
}

func ceilUnix(t time.Time) int64 {
	s := t.Unix()
	if t.Nanosecond() > 0 {
		s++
	}
	return s
}

// decodePage reads a listing's page; a page that does not parse fails the listing.
// The page's own keys are matched exactly and each once (order.CheckJSON); its orders
// are checked one by one.
func decodePage(body []byte, p *ordersPage) error {
	if json.Valid(body) {
		if err := order.CheckJSON(body, order.JSONOptions{Into: p, Shallow: true}); err != nil {
			return fmt.Errorf("malformed answer: %w", err)
		}
	}
	if err := json.Unmarshal(body, p); err != nil {
		return fmt.Errorf("malformed answer: %w", err)
	}
	return nil
}

// statuses asks POST /api/v3/orders/status for the ids, at most 1000 at a time.
func (c *Connector) statuses(ctx context.Context, ids []int64) (map[int64]status, error) {
	out := make(map[int64]status, len(ids))
	for i := 0; i < len(ids); i += statusBatch {
		batch := ids[i:min(i+statusBatch, len(ids))]
		const what = "POST /api/v3/orders/status"
		resp, err := connectors.Read(c.http.R().SetContext(ctx)).
			SetBody(map[string][]int64{"orders": batch}).Post("/api/v3/orders/status")
		if err := connectors.Check("wildberries", tokenKey, what, resp, err); err != nil {
			return nil, err
		}
		if err := decodeStatuses(resp.Body(), out); err != nil {
			return nil, fmt.Errorf("wildberries: %s: malformed answer: %w", what, err)
		}
	}
	return out, nil
}

// decodeStatuses reads an answer of POST /api/v3/orders/status into out. Each status
// is read on its own: a bad one fails its order only (with the reason), and one
// whose id cannot be read, none (its order gets "answered nothing").
func decodeStatuses(body []byte, out map[int64]status) error {
	var answer struct {
		Orders []json.RawMessage `json:"orders"`
	}
	if json.Valid(body) {
		if err := order.CheckJSON(body, order.JSONOptions{Into: &answer, Shallow: true}); err != nil {
			return err
		}
	}
	if err := json.Unmarshal(body, &answer); err != nil {
		return err
	}
	for _, raw := range answer.Orders {
		s, err := decodeStatus(raw)
		if err != nil {
			var ve *order.ValidationError
			if errors.As(err, &ve) && ve.Problems[0].Field == "id" {
				continue // whose status it is cannot be told
			}
			if id, ok := readID(raw); ok {
				n, _ := strconv.ParseInt(id, 10, 64)
				out[n] = status{ID: n, err: err}
			}
			continue
		}
		out[s.ID] = s
	}
	return nil
}

// decodeStatus reads one status strictly: keys exactly as named and each once, text
// valid UTF-8 without control characters.
func decodeStatus(raw json.RawMessage) (status, error) {
	var s status
	if err := order.CheckJSON(raw, order.JSONOptions{Into: &s}); err != nil {
		return status{}, err
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return status{}, &order.ValidationError{Problems: []order.FieldError{{Field: "status", Message: "malformed: " + err.Error()}}}
	}
	for _, f := range []struct{ name, v string }{{"supplierStatus", s.SupplierStatus}, {"wbStatus", s.WBStatus}} {
		if msg := order.CheckLine(f.v); msg != "" {
			return status{}, &order.ValidationError{Problems: []order.FieldError{{Field: f.name, Message: msg}}}
		}
	}
	return s, nil
}

// applyStatuses sets each item's cancellation from its statuses, or an error naming
// the status field when Wildberries gave none or one the connector does not know.
func (c *Connector) applyStatuses(ctx context.Context, items []connectors.Item) error {
	var ids []int64
	for _, it := range items {
		if it.ID != "" {
			n, _ := strconv.ParseInt(it.ID, 10, 64)
			ids = append(ids, n)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	sts, err := c.statuses(ctx, ids)
	if err != nil {
		return err
	}
	applyStatusMap(items, sts)
	return nil
}

// applyStatusMap sets each item's cancellation from sts, or an error naming the
// status field.
func applyStatusMap(items []connectors.Item, sts map[int64]status) {
	for i := range items {
		it := &items[i]
		if it.ID == "" {
			continue
		}
		n, _ := strconv.ParseInt(it.ID, 10, 64)
		st, ok := sts[n]
		if !ok {
			if it.Err == nil {
				it.Err, it.Order = &order.ValidationError{Problems: []order.FieldError{{
					Field: "status", Message: "POST /api/v3/orders/status answered nothing for this order",
				}}}, nil
			}
			continue
		}
		if st.err != nil {
			if it.Err == nil {
				it.Err, it.Order = st.err, nil
			}
			continue
		}
		if cancelled, why := st.cancelled(); cancelled {
			it.Cancelled, it.CancelReason = true, why
			continue
		}
		var ps []order.FieldError
		if !supplierStatuses[st.SupplierStatus] {
			ps = append(ps, order.FieldError{Field: "supplierStatus", Message: fmt.Sprintf("%q is not a status the connector knows", st.SupplierStatus)})
		}
		if !wbStatuses[st.WBStatus] {
			ps = append(ps, order.FieldError{Field: "wbStatus", Message: fmt.Sprintf("%q is not a status the connector knows", st.WBStatus)})
		}
		if len(ps) > 0 && it.Err == nil {
			it.Err, it.Order = &order.ValidationError{Problems: ps}, nil
		}
	}
}

var integerRe = regexp.MustCompile(`^-?[0-9]+$`)

// mapOrderSafe is mapOrder with a panic recovered: the order becomes an Item with
// Err (named by its id when that can be read), and the rest go on.
func (c *Connector) mapOrderSafe(raw json.RawMessage) connectors.Item {
	return connectors.MapSafely(c.log, raw, func(raw json.RawMessage) string { id, _ := readID(raw); return id }, c.mapOrder)
}

// readID reads an order's id: a JSON integer (or a string of digits), positive.
func readID(raw json.RawMessage) (string, bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return "", false
	}
	v := bytes.TrimSpace(m["id"])
	if len(v) > 1 && v[0] == '"' {
		var s string
		if json.Unmarshal(v, &s) != nil {
			return "", false
		}
		v = []byte(s)
	}
	if !integerRe.Match(v) {
		return "", false
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil || n <= 0 {
		return "", false
	}
	return strconv.FormatInt(n, 10), true
}

// mapOrder turns one order of a listing into an Item: the canonical order, or an
// error naming every field that is missing or wrong. An id that cannot be read
// leaves the Item's ID empty.
func (c *Connector) mapOrder(raw json.RawMessage) connectors.Item {
	it := connectors.Item{Raw: raw}
	id, ok := readID(raw)
	if !ok {
		it.Err = errors.New("wildberries: an order without a readable id (a positive integer)")
		return it
	}
	it.ID = id
	// The raw bytes before decoding: invalid UTF-8, a key twice.
	if err := order.CheckJSON(raw, order.JSONOptions{}); err != nil {
		it.Err = err
		var ve *order.ValidationError
		if !errors.As(err, &ve) || ve.Problems[0].Field == "id" || ve.Problems[0].Field == "(document)" {
			it.ID = "" // which order it was cannot be told
		}
		return it
	}
	var m map[string]json.RawMessage
	_ = json.Unmarshal(raw, &m) // readID proved it parses

	var ps []order.FieldError
	bad := func(field, format string, args ...any) {
		ps = append(ps, order.FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
	}
	str := func(field string, required, free bool) string {
		v, present := m[field]
		if !present || string(v) == "null" {
			if required {
				bad(field, "is missing")
			}
			return ""
		}
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			bad(field, "must be a string, got %s", clip(v))
			return ""
		}
		msg := order.CheckLine(s)
		if free {
			msg = order.CheckFreeText(s)
		}
		if msg != "" {
			bad(field, "%s", msg)
			return ""
		}
		return s
	}
	integer := func(field string) (int64, bool) {
		v, present := m[field]
		if !present || string(v) == "null" {
			bad(field, "is missing")
			return 0, false
		}
		if !integerRe.Match(v) {
			bad(field, "must be an integer, got %s", clip(v))
			return 0, false
		}
		n, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil {
			bad(field, "%s is out of range", clip(v))
			return 0, false
		}
		return n, true
	}

	article := str("article", true, false)
	if article == "" && m["article"] != nil && string(m["article"]) != "null" && len(ps) == 0 {
		bad("article", "is empty")
	}
	var created time.Time
	if s := str("createdAt", true, false); s != "" {
		t, err := parseTime(s, c.cfg.Location)
		switch {
		case err != nil:
			bad("createdAt", "%v", err)
		case order.CheckTime(t) != "":
			bad("createdAt", "%s", order.CheckTime(t))
		default:
			created = t.In(c.cfg.Location)
		}
	}
	// The price in the seller's currency, the one the seller's books and 1C keep;
	// price/currencyCode is the buyer's currency of sale.
	var price decimal.Decimal
	if hundredths, ok := integer("convertedPrice"); ok {
		if hundredths < 0 {
			bad("convertedPrice", "must not be negative, got %d", hundredths)
		}
		price = decimal.New(hundredths, -2)
	}
	var currency string
	if code, ok := integer("convertedCurrencyCode"); ok {
		cur, known := currencyOf(int(code))
		if !known || code > 999 {
			bad("convertedCurrencyCode", "%d is not an ISO 4217 numeric code the connector knows", code)
		}
		currency = cur
	}
	rid := str("rid", false, false)
	comment := str("comment", false, true)
	if len(ps) > 0 {
		it.Err = &order.ValidationError{Problems: ps}
		return it
	}

	var notes []string
	if rid != "" {
		notes = append(notes, "Wildberries rid "+rid)
	}
	if strings.TrimSpace(comment) != "" {
		notes = append(notes, comment)
	}
	total := price
	it.Order = &order.Order{
		Source:     c.cfg.Source,
		ExternalID: id,
		Number:     id,
		CreatedAt:  created,
		Warehouse:  c.cfg.Warehouse,
		Currency:   currency,
		Lines:      []order.Line{{SKU: article, Quantity: decimal.NewFromInt(1), Price: price}},
		Total:      &total,
		Comment:    strings.Join(notes, "\n"),
	}
	// The canonical order's own rules, so what is mapped is what is registered.
	if err := it.Order.Validate(); err != nil {
		it.Err, it.Order = err, nil
	}
	return it
}

// parseTime reads strict RFC 3339, or a time without a zone in loc (order.ParseTime:
// every field at its full width).
func parseTime(s string, loc *time.Location) (time.Time, error) {
	return order.ParseTimeOrLocal(s, loc)
}

// clip is the start of raw JSON, safe to store and log.
func clip(raw json.RawMessage) string {
	s := string(bytes.TrimSpace(raw))
	if r := []rune(s); len(r) > 40 {
		s = string(r[:40]) + "…"
	}
	return order.SafeText(s)
}
