package ozon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"runtime/debug"
	"time"

	"github.com/ordersync/ordersync/connectors"
	"github.com/ordersync/ordersync/internal/order"
)

// Ozon refuses a list period longer than a year; the connector stays inside it.
const maxPeriod = 360 * 24 * time.Hour

// maxPages bounds one listing, so a server that keeps answering has_next cannot keep
// the connector in a loop.
const maxPages = 10000

// List calls fn with the postings of the window [from, to), in three listings that
// overlap on purpose (each posting reaches fn once per call):
//
//  1. the unfulfilled postings (/v4 or /v3 posting/fbs/unfulfilled/list), the live
//     set to import. It filters on the cutoff only — the time by which Ozon
//     wants a posting assembled — so the connector asks for cutoffs from `from` to
//     `to` plus CutoffHorizon: every posting created in the window has its cutoff in
//     there;
//  2. every posting created in the window whatever its status (posting/fbs/list with
//     since/to), for what the first cannot see: a posting without a cutoff yet, or one
//     already delivered when the connector was down longer than the look-back;
//  3. the postings cancelled in the window, however old (posting/fbs/list with the
//     status cancelled and the status change in the window), so each cancel is
//     registered.
//
// A malformed page or an HTTP error ends the listing with an error; a bad posting is
// an item with Err.
func (c *Connector) List(ctx context.Context, from, to time.Time, fn func(page []connectors.Item) error) error {
	from, to = from.UTC(), to.UTC()
	if !from.Before(to) {
		return nil
	}
	seen := map[string]bool{} // posting number (or raw JSON when unreadable) → reported cancelled
	emit := func(raws []json.RawMessage) error {
		var page []connectors.Item
		for _, raw := range raws {
			it := c.item(raw)
			key := it.ID
			if key == "" {
				key = "\x00" + string(raw)
			}
			if cancelled, ok := seen[key]; ok && (cancelled || !it.Cancelled) {
				continue // already reported, as it is now or as cancelled
			}
			seen[key] = it.Cancelled
			page = append(page, it)
		}
		if len(page) == 0 {
			return nil
		}
		return fn(page)
	}

	cutoffTo := to.Add(c.cfg.CutoffHorizon)
	cutoffFrom := later(from, cutoffTo.Add(-maxPeriod))
	unfulfilled := map[string]any{"cutoff_from": timeParam(cutoffFrom), "cutoff_to": timeParam(cutoffTo)}
	created := map[string]any{"since": timeParam(later(from, to.Add(-maxPeriod))), "to": timeParam(to)}
	cancelled := map[string]any{
		"since":                    timeParam(to.Add(-maxPeriod)),
		"to":                       timeParam(to),
		"last_changed_status_date": map[string]string{"from": timeParam(from), "to": timeParam(to)},
	}
	if c.cfg.APIVersion == V3 {
		cancelled["status"] = statusCancelled
		if err := c.pagesV3(ctx, "/v3/posting/fbs/unfulfilled/list", unfulfilled, "unfulfilled postings", emit); err != nil {
			return err
		}
		if err := c.pagesV3(ctx, "/v3/posting/fbs/list", created, "postings created", emit); err != nil {
			return err
		}
		return c.pagesV3(ctx, "/v3/posting/fbs/list", cancelled, "postings cancelled", emit)
	}
	cancelled["statuses"] = []string{statusCancelled}
	if err := c.pagesV4(ctx, "/v4/posting/fbs/unfulfilled/list", unfulfilled, "unfulfilled postings", emit); err != nil {
		return err
	}
	if err := c.pagesV4(ctx, "/v4/posting/fbs/list", created, "postings created", emit); err != nil {
		return err
	}
	return c.pagesV4(ctx, "/v4/posting/fbs/list", cancelled, "postings cancelled", emit)
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// pagesV4 follows a v4 list by its cursor: {"postings": […], "cursor": "…",
// "has_next": true}, until has_next is false.
func (c *Connector) pagesV4(ctx context.Context, path string, filter map[string]any, what string, page func([]json.RawMessage) error) error {
	cursor := ""
	for n := 1; n <= maxPages; n++ {
		label := fmt.Sprintf("list %s page %d", what, n)
		body := map[string]any{"filter": filter, "limit": c.cfg.PageSize, "sort_dir": "ASC", "cursor": cursor}
		resp, err := c.post(ctx, path, body, true, label)
		if err != nil {
			return err
		}
		var pg struct {
			Postings *[]json.RawMessage `json:"postings"`
			Cursor   string             `json:"cursor"`
			HasNext  bool               `json:"has_next"`
		}
		if err := decodePage(resp.Body(), &pg); err != nil {
			return fmt.Errorf("ozon: %s: malformed page: %w", label, err)
		}
		if pg.Postings == nil {
			return fmt.Errorf("ozon: %s: malformed page: no postings array", label)
		}
		if err := page(*pg.Postings); err != nil {
			return err
		}
		if !pg.HasNext {
			return nil
		}
		if pg.Cursor == "" || pg.Cursor == cursor {
			return fmt.Errorf("ozon: %s: malformed page: has_next without a new cursor", label)
		}
		cursor = pg.Cursor
	}
	return fmt.Errorf("ozon: list %s: more than %d pages", what, maxPages)
}

// pagesV3 follows a v3 list by offset: {"result": {"postings": […], "has_next": …}}
// for posting/fbs/list, {"result": {"postings": […], "count": …}} for the unfulfilled
// list (whose count the documentation leaves unclear: a short page ends it).
func (c *Connector) pagesV3(ctx context.Context, path string, filter map[string]any, what string, page func([]json.RawMessage) error) error {
	offset := 0
	for n := 1; n <= maxPages; n++ {
		label := fmt.Sprintf("list %s page %d", what, n)
		body := map[string]any{"filter": filter, "limit": c.cfg.PageSize, "offset": offset, "dir": "ASC"}
		resp, err := c.post(ctx, path, body, true, label)
		if err != nil {
			return err
		}
		var pg struct {
			Result *struct {
				Postings *[]json.RawMessage `json:"postings"`
				HasNext  *bool              `json:"has_next"`
			} `json:"result"`
		}
		if err := decodePage(resp.Body(), &pg); err != nil {
			return fmt.Errorf("ozon: %s: malformed page: %w", label, err)
		}
		if pg.Result == nil || pg.Result.Postings == nil {
			return fmt.Errorf("ozon: %s: malformed page: no result.postings array", label)
		}
		got := *pg.Result.Postings
		if err := page(got); err != nil {
			return err
		}
		more := len(got) == c.cfg.PageSize
		if pg.Result.HasNext != nil {
			more = *pg.Result.HasNext
			if more && len(got) == 0 {
				return fmt.Errorf("ozon: %s: malformed page: has_next with no postings", label)
			}
		}
		if !more {
			return nil
		}
		offset += len(got)
	}
	return fmt.Errorf("ozon: list %s: more than %d pages", what, maxPages)
}

// decodePage decodes a whole page strictly: JSON that does not parse, or trailing
// data after it, is malformed.
func decodePage(body []byte, v any) error {
	// Keys exactly as named and each once, strings valid UTF-8 (order.CheckJSON); the
	// postings themselves are checked one by one.
	if json.Valid(body) {
		if err := order.CheckJSON(body, order.JSONOptions{Into: v, Shallow: true}); err != nil {
			return err
		}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("data after the JSON document")
	}
	return nil
}

// item decodes and maps one posting. A panic is recovered: the posting becomes an
// item with Err (named by its number when that can be read), and the rest go on.
func (c *Connector) item(raw json.RawMessage) (it connectors.Item) {
	defer func() {
		if v := recover(); v != nil {
			c.log.Error("mapping a posting panicked", "posting_number", it.ID, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			it = connectors.Item{Entity: Entity, ID: it.ID, Raw: raw,
				Err: fieldError("(posting)", order.SafeText(fmt.Sprintf("internal error: mapping the posting panicked: %v", v)))}
		}
	}()
	it, p := decodePosting(raw)
	if p == nil {
		return it
	}
	return c.mapPosting(it, p)
}

// Get fetches one posting fresh by its number (/v3/posting/fbs/get, the only version
// of that method; its prices are strings). An unknown posting is
// connectors.ErrNotFound; a posting that does not map is an Item with Err.
func (c *Connector) Get(ctx context.Context, postingNumber string) (connectors.Item, error) {
	raw, err := c.fetch(ctx, postingNumber)
	if err != nil {
		return connectors.Item{}, err
	}
	it := c.item(raw)
	if it.ID != "" && it.ID != postingNumber {
		return connectors.Item{}, fmt.Errorf("ozon: get posting %s: Ozon answered with posting %s", postingNumber, it.ID)
	}
	return it, nil
}

// fetch returns the raw posting of /v3/posting/fbs/get.
func (c *Connector) fetch(ctx context.Context, postingNumber string) (json.RawMessage, error) {
	what := "get posting " + postingNumber
	if !usableID(postingNumber) {
		return nil, fmt.Errorf("ozon: %s: not a posting number", what)
	}
	resp, err := c.post(ctx, "/v3/posting/fbs/get", map[string]any{"posting_number": postingNumber}, true, what)
	var ae *apiError
	if errors.As(err, &ae) && ae.Status == http.StatusNotFound {
		return nil, fmt.Errorf("ozon: %s: %w (%s)", what, connectors.ErrNotFound, ae.Message)
	}
	if err != nil {
		return nil, err
	}
	var env struct {
		Result json.RawMessage `json:"result"`
	}
	if err := decodePage(resp.Body(), &env); err != nil {
		return nil, fmt.Errorf("ozon: %s: malformed answer: %w", what, err)
	}
	if len(env.Result) == 0 || string(env.Result) == "null" {
		return nil, fmt.Errorf("ozon: %s: malformed answer: no result", what)
	}
	return env.Result, nil
}
