package wildberries

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-resty/resty/v2"

	"github.com/ordersync/ordersync/connectors"
	"github.com/ordersync/ordersync/internal/outbox"
)

// Publisher acknowledges orders at Wildberries once 1C holds them. For an
// order.created record of a wb order it adds the order to an open supply named
// SupplyName (PATCH /api/marketplace/v3/supplies/{supplyId}/orders), which moves it
// from "new" to "confirm". Other event types, and every record when Acknowledge is
// off, are accepted and ignored.
//
// The acknowledgement happens once at Wildberries even when the relay delivers a
// record twice: the order's status is read first, and an order already in "confirm"
// or later (or cancelled) is left alone. Adding an order to a supply is not
// idempotent at Wildberries (an order in "confirm" would move to the other supply),
// so the guard is what keeps a redelivery harmless, including one after a lost
// answer.
//
// A supply takes orders of one warehouse and one cargo type only, and a closed supply
// takes none: when Wildberries refuses (409) the order for one supply, the next open
// supply of that name is tried, and a new supply is created when none accepts it.
//
// Errors: a 429 is a *outbox.DeliveryError with RetryAfter from X-Ratelimit-Retry;
// another 4xx (a record that names no wb order, an order Wildberries does not know or
// refuses even for an empty supply) is Dead; transport errors, 5xx and refused
// credentials are plain errors the relay retries with backoff.
func (c *Connector) Publisher() outbox.Publisher { return outbox.PublisherFunc(c.publish) }

func (c *Connector) publish(ctx context.Context, r outbox.Record) error {
	if r.Type != outbox.OrderCreated {
		return nil
	}
	id, err := recordOrderID(r, c.cfg.Source)
	if err != nil {
		return &outbox.DeliveryError{Err: err, Dead: true}
	}
	if !c.cfg.Acknowledge {
		return nil
	}
	log := c.log.With("order_id", id, "event_id", r.EventID)
	if done, err := c.guard(ctx, id, log); done || err != nil {
		return err
	}
	return c.addToSupply(ctx, id, log)
}

// recordOrderID reads the Wildberries order id of an order.created record: its
// data is {"order": <canonical order>, "onec": {…}}.
func recordOrderID(r outbox.Record, source string) (int64, error) {
	var data struct {
		Order *struct {
			Source     string `json:"source"`
			ExternalID string `json:"external_id"`
		} `json:"order"`
	}
	if err := json.Unmarshal(r.Data, &data); err != nil {
		return 0, fmt.Errorf("wildberries: event %s: data is not an order.created payload: %w", r.EventID, err)
	}
	if data.Order == nil {
		return 0, fmt.Errorf("wildberries: event %s: data has no order", r.EventID)
	}
	if data.Order.Source != source {
		return 0, fmt.Errorf("wildberries: event %s: order of source %q routed to the Wildberries connector, which acknowledges source %q only",
			r.EventID, data.Order.Source, source)
	}
	id, err := strconv.ParseInt(data.Order.ExternalID, 10, 64)
	if err != nil || id <= 0 {
		return 0, fmt.Errorf("wildberries: event %s: external_id %q is not a Wildberries order id", r.EventID, data.Order.ExternalID)
	}
	return id, nil
}

// guard reads the order's status and reports whether nothing is left to do: the
// order is already in "confirm" or later, or cancelled.
func (c *Connector) guard(ctx context.Context, id int64, log *slog.Logger) (bool, error) {
	const what = "POST /api/v3/orders/status"
	resp, err := connectors.Read(c.http.R().SetContext(ctx)).
		SetBody(map[string][]int64{"orders": {id}}).Post("/api/v3/orders/status")
	if err := c.deliveryError(what, resp, err); err != nil {
		return false, err
	}
	var answer struct {
		Orders []status `json:"orders"`
	}
	if err := json.Unmarshal(resp.Body(), &answer); err != nil {
		return false, fmt.Errorf("wildberries: %s: malformed answer: %w", what, err)
	}
	i := slices.IndexFunc(answer.Orders, func(s status) bool { return s.ID == id })
	if i < 0 {
		return false, &outbox.DeliveryError{Dead: true, Err: fmt.Errorf("wildberries: order %d: Wildberries knows no such order", id)}
	}
	st := answer.Orders[i]
	if cancelled, why := st.cancelled(); cancelled {
		log.InfoContext(ctx, "order cancelled at Wildberries: not added to a supply", "reason", why)
		return true, nil
	}
	switch st.SupplierStatus {
	case "new":
		return false, nil
	case "confirm", "complete":
		log.DebugContext(ctx, "order already acknowledged at Wildberries", "supplier_status", st.SupplierStatus)
		return true, nil
	default:
		return false, &outbox.DeliveryError{Dead: true, Err: fmt.Errorf(
			"wildberries: order %d: supplierStatus %q, wbStatus %q: the connector does not know whether it can be added to a supply",
			id, st.SupplierStatus, st.WBStatus)}
	}
}

// addToSupply adds the order to the first open supply named SupplyName that takes
// it, creating one when none does.
func (c *Connector) addToSupply(ctx context.Context, id int64, log *slog.Logger) error {
	c.ackMu.Lock()
	defer c.ackMu.Unlock()

	tried := map[string]bool{}
	var refusal string
	try := func(supply string) (bool, error) {
		tried[supply] = true
		what := "PATCH /api/marketplace/v3/supplies/" + supply + "/orders"
		resp, err := c.http.R().SetContext(ctx).SetBody(map[string][]int64{"orders": {id}}).
			Patch("/api/marketplace/v3/supplies/" + url.PathEscape(supply) + "/orders")
		if err == nil {
			switch resp.StatusCode() {
			case http.StatusConflict: // not this supply: closed, another cargo type or warehouse
				refusal = fmt.Sprintf("%s: %s", supply, errorMessage(resp.Body()))
				log.DebugContext(ctx, "supply refused the order", "supply", supply, "reason", refusal)
				return false, nil
			case http.StatusNotFound: // the supply is gone
				c.forgetSupply(supply)
				return false, nil
			}
		}
		if err := c.deliveryError(what, resp, err); err != nil {
			return false, err
		}
		c.rememberSupply(supply)
		log.InfoContext(ctx, "order added to a supply: confirmed at Wildberries", "supply", supply)
		return true, nil
	}

	for _, refresh := range []bool{false, true} {
		candidates := slices.Clone(c.supplies)
		if refresh {
			listed, err := c.openSupplies(ctx)
			if err != nil {
				return err
			}
			c.supplies, candidates = listed, listed
		}
		for _, sp := range candidates {
			if tried[sp] {
				continue
			}
			if ok, err := try(sp); ok || err != nil {
				return err
			}
		}
	}

	// No open supply takes it. The order may have moved on meanwhile (assembled by
	// hand, cancelled): look again before creating a supply for it.
	if done, err := c.guard(ctx, id, log); done || err != nil {
		return err
	}
	sp, err := c.createSupply(ctx)
	if err != nil {
		return err
	}
	log.InfoContext(ctx, "supply created", "supply", sp, "name", c.cfg.SupplyName)
	if ok, err := try(sp); ok || err != nil {
		return err
	}
	return &outbox.DeliveryError{Dead: true, Err: fmt.Errorf(
		"wildberries: order %d: Wildberries refused to add it even to a new, empty supply (%s)", id, refusal)}
}

func (c *Connector) rememberSupply(id string) {
	c.supplies = append([]string{id}, slices.DeleteFunc(c.supplies, func(s string) bool { return s == id })...)
}

func (c *Connector) forgetSupply(id string) {
	c.supplies = slices.DeleteFunc(c.supplies, func(s string) bool { return s == id })
}

// openSupplies lists the open supplies named SupplyName, newest first.
func (c *Connector) openSupplies(ctx context.Context) ([]string, error) {
	type supply struct {
		ID        string    `json:"id"`
		Name      string    `json:"name"`
		Done      bool      `json:"done"`
		CreatedAt time.Time `json:"createdAt"`
	}
	var open []supply
	var next int64
	for page := 1; ; page++ {
		what := fmt.Sprintf("GET /api/v3/supplies page %d", page)
		resp, err := connectors.Read(c.http.R().SetContext(ctx)).SetQueryParams(map[string]string{
			"limit": strconv.Itoa(MaxPageSize),
			"next":  strconv.FormatInt(next, 10),
		}).Get("/api/v3/supplies")
		if err := c.deliveryError(what, resp, err); err != nil {
			return nil, err
		}
		var p struct {
			Next     *int64   `json:"next"`
			Supplies []supply `json:"supplies"`
		}
		if err := json.Unmarshal(resp.Body(), &p); err != nil {
			return nil, fmt.Errorf("wildberries: %s: malformed answer: %w", what, err)
		}
		if len(p.Supplies) == 0 {
			break
		}
		if p.Next == nil || *p.Next == next {
			return nil, fmt.Errorf("wildberries: %s: next did not advance", what)
		}
		next = *p.Next
		for _, s := range p.Supplies {
			if !s.Done && s.Name == c.cfg.SupplyName {
				open = append(open, s)
			}
		}
	}
	slices.SortStableFunc(open, func(a, b supply) int { return b.CreatedAt.Compare(a.CreatedAt) })
	ids := make([]string, len(open))
	for i, s := range open {
		ids[i] = s.ID
	}
	return ids, nil
}

// createSupply creates a supply named SupplyName. It is a write, never retried
// inside the call; a lost answer leaves at most an empty supply of that name, which
// the next listing finds and uses.
func (c *Connector) createSupply(ctx context.Context) (string, error) {
	const what = "POST /api/v3/supplies"
	resp, err := c.http.R().SetContext(ctx).SetBody(map[string]string{"name": c.cfg.SupplyName}).Post("/api/v3/supplies")
	if err := c.deliveryError(what, resp, err); err != nil {
		return "", err
	}
	var created struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(resp.Body(), &created); err != nil || created.ID == "" {
		return "", fmt.Errorf("wildberries: %s: answer without a supply id: %s", what, snippet(resp.Body()))
	}
	c.supplies = append([]string{created.ID}, c.supplies...)
	return created.ID, nil
}

// deliveryError classifies a publisher's call: nil for 2xx; a DeliveryError with
// RetryAfter for 429; a plain error (retried with backoff) for transport errors, 5xx,
// 408 and refused credentials; a dead DeliveryError for any other 4xx.
func (c *Connector) deliveryError(what string, resp *resty.Response, err error) error {
	if err != nil {
		return fmt.Errorf("wildberries: %s: %w", what, err)
	}
	st := resp.StatusCode()
	switch {
	case st >= 200 && st < 300:
		return nil
	case st == http.StatusTooManyRequests:
		d, _ := retryAfter(resp.Header(), c.cfg.Now())
		return &outbox.DeliveryError{RetryAfter: d, Err: fmt.Errorf("wildberries: %s: HTTP 429, retry in %s: %s", what, d, snippet(resp.Body()))}
	case st == http.StatusUnauthorized || st == http.StatusForbidden:
		return connectors.Check("wildberries", tokenKey, what, resp, nil)
	case st == http.StatusRequestTimeout || st >= 500:
		return fmt.Errorf("wildberries: %s: HTTP %d: %s", what, st, snippet(resp.Body()))
	default:
		return &outbox.DeliveryError{Dead: true, Err: fmt.Errorf("wildberries: %s: HTTP %d: %s", what, st, errorMessage(resp.Body()))}
	}
}

// errorMessage is Wildberries' {"code","message"} (or gateway {"title","detail"})
// error as one line, or a snippet of the body.
func errorMessage(body []byte) string {
	var e struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Title   string `json:"title"`
		Detail  string `json:"detail"`
	}
	if json.Unmarshal(body, &e) == nil {
		parts := slices.DeleteFunc([]string{e.Code, e.Message, e.Title, e.Detail}, func(s string) bool { return s == "" })
		if len(parts) > 0 {
			return strings.Join(parts, ": ")
		}
	}
	return snippet(body)
}

func snippet(b []byte) string {
	s := strings.Join(strings.Fields(string(b)), " ")
	if r := []rune(s); len(r) > 200 {
		s = string(r[:200]) + "…"
	}
	return s
}
