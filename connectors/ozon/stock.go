package ozon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/ordersync/ordersync/internal/order"
	"github.com/ordersync/ordersync/internal/outbox"
	"github.com/ordersync/ordersync/internal/stock"
)

// Ozon's rules for /v2/products/stocks.
const (
	// StockBatchSize is the most product-warehouse pairs one request carries.
	StockBatchSize = 100
	// StockRequestsPerMinute is the most requests a seller's account sends a minute.
	StockRequestsPerMinute = 80
	// StockMinResend is how soon one product in one warehouse may be updated again;
	// sooner, Ozon refuses the item with TOO_MANY_REQUESTS.
	StockMinResend = 30 * time.Second
)

const (
	stockPath          = "/v2/products/stocks"
	keyStockWarehouses = "connectors.ozon.stock_warehouses"
	// stockRateMargin widens the limiter's interval by 1/stockRateMargin: 80
	// requests then span 60.6 s instead of 60 s, so that the requests' travel time
	// varying by up to 600 ms does not bring 81 into one minute at Ozon.
	stockRateMargin = 100
	// codeTooManyRequests is the item error of a pair updated less than 30 s ago.
	codeTooManyRequests = "TOO_MANY_REQUESTS"
)

// StockConfig configures the stock sender.
type StockConfig struct {
	// Warehouses maps a 1C warehouse to the Ozon warehouse id its stock is published
	// to (connectors.ozon.stock_warehouses: {WH1: 22142605386000}).
	Warehouses map[string]int64
	// Requests per Window: default StockRequestsPerMinute a minute, Ozon's limit.
	// A lower Requests leaves room for the seller's other tools on the same
	// account. A shorter Window scales the rate for a simulator whose window is
	// shortened as much (benchmarks); against Ozon keep the minute.
	Requests int
	Window   time.Duration
	// Clock is the rate limiter's clock; nil is the wall clock (tests).
	Clock StockClock
}

// StockClock is the time the stock sender's rate limiter keeps.
type StockClock interface {
	Now() time.Time
	// SleepUntil returns at t, or with ctx's error when ctx ends first.
	SleepUntil(ctx context.Context, t time.Time) error
}

type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

func (wallClock) SleepUntil(ctx context.Context, t time.Time) error {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// StockSender publishes stock to Ozon with /v2/products/stocks: a stock.Sender.
// It holds the rate limiter of the seller's account (at most Requests per Window,
// one at a time, starting empty so a fresh process waits one interval before its
// first request: another replica may just have sent one), so make one per process
// and share it. It is safe for concurrent use; concurrent Sends queue on the
// limiter.
type StockSender struct {
	c          *Connector
	warehouses map[string]int64
	requests   int
	window     time.Duration
	interval   time.Duration // between two requests, the margin included
	clock      StockClock

	// mu makes reading the clock and reserving a turn one step, so that turns are
	// reserved at times that never go back.
	mu  sync.Mutex
	lim *rate.Limiter
}

var _ stock.Sender = (*StockSender)(nil)

// StockSender returns the connector's stock sender. Errors name the configuration
// key.
func (c *Connector) StockSender(cfg StockConfig) (*StockSender, error) {
	if cfg.Requests == 0 {
		cfg.Requests = StockRequestsPerMinute
	}
	if cfg.Window == 0 {
		cfg.Window = time.Minute
	}
	if cfg.Clock == nil {
		cfg.Clock = wallClock{}
	}
	switch {
	case cfg.Requests < 0:
		return nil, fmt.Errorf("ozon: stock requests per window must be positive, got %d", cfg.Requests)
	case cfg.Window < 0:
		return nil, fmt.Errorf("ozon: the stock rate window must be positive, got %s", cfg.Window)
	case cfg.Window >= time.Minute && float64(cfg.Requests)/cfg.Window.Minutes() > StockRequestsPerMinute:
		return nil, fmt.Errorf("ozon: Ozon takes at most %d stock requests a minute, got %d per %s",
			StockRequestsPerMinute, cfg.Requests, cfg.Window)
	}
	whs := make(map[string]int64, len(cfg.Warehouses))
	for wh, id := range cfg.Warehouses {
		key := keyStockWarehouses + "." + wh
		switch {
		case strings.TrimSpace(wh) == "":
			return nil, fmt.Errorf("%s: a 1C warehouse must not be empty", keyStockWarehouses)
		case id <= 0:
			return nil, fmt.Errorf("%s: must be the Ozon warehouse id (a positive number, see /v1/warehouse/list), got %d", key, id)
		}
		whs[wh] = id
	}
	interval := cfg.Window / time.Duration(cfg.Requests)
	interval += max(interval/stockRateMargin, 1)
	s := &StockSender{
		c: c, warehouses: whs, requests: cfg.Requests, window: cfg.Window, interval: interval,
		lim:   rate.NewLimiter(rate.Every(interval), 1),
		clock: cfg.Clock,
	}
	s.lim.ReserveN(cfg.Clock.Now(), 1) // start empty
	return s, nil
}

// Marketplace is "ozon".
func (s *StockSender) Marketplace() string { return stock.Ozon }

// BatchSize is Ozon's 100 pairs per request.
func (s *StockSender) BatchSize() int { return StockBatchSize }

// MinResend is Ozon's 30 s between two updates of one product in one warehouse.
func (s *StockSender) MinResend() time.Duration { return StockMinResend }

// MaxAmount is 0: Ozon refuses a stock it finds too big itself (STOCK_TOO_BIG), and
// that is recorded as refused.
func (s *StockSender) MaxAmount() int64 { return 0 }

// Timeout is the connector's request timeout plus the longest rate-limit wait of
// one Send made while no other is (the limiter's interval, and the shared client's
// own). A Send queued behind others whose turn would come after its context's
// deadline fails at once without sending.
func (s *StockSender) Timeout() time.Duration {
	t := s.c.cfg.Timeout + s.interval
	if rps := s.c.cfg.RatePerSecond; rps > 0 {
		t += time.Duration(float64(time.Second) / rps)
	}
	return t
}

// Warehouse is the Ozon warehouse id configured for a 1C warehouse.
func (s *StockSender) Warehouse(warehouse string) (string, bool) {
	id, ok := s.warehouses[warehouse]
	if !ok {
		return "", false
	}
	return strconv.FormatInt(id, 10), true
}

type stockItem struct {
	OfferID     string `json:"offer_id"`
	Stock       int64  `json:"stock"`
	WarehouseID int64  `json:"warehouse_id"`
}

type stockAnswer struct {
	Result []struct {
		OfferID     string      `json:"offer_id"`
		WarehouseID json.Number `json:"warehouse_id"`
		Updated     bool        `json:"updated"`
		Errors      []struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"errors"`
	} `json:"result"`
}

// Send sends one batch of a 1C warehouse's stock: offer_id is the update's
// MarketSKU, stock its Amount. It waits for the rate limiter within ctx first, and
// gives up without sending when ctx's deadline would come before its turn.
//
// Each item's result: updated → Published; TOO_MANY_REQUESTS (the pair was updated
// less than 30 s ago) → Deferred for StockMinResend; any other item error →
// Refused with "code: message"; an item the answer leaves out, or leaves not
// updated without a reason → Deferred for StockMinResend (it may have been taken).
// An update without an offer_id, with a negative amount or whose offer_id another
// update of the batch already carries is Refused without being sent. A 400 (Ozon
// finds the request invalid) refuses every item with Ozon's reason, so the
// publish goes on.
//
// Errors fail the whole batch: 429 → *outbox.DeliveryError with RetryAfter (Ozon's
// Retry-After, else the rate window); refused credentials → a
// *connectors.AuthError naming connectors.ozon.api_key and
// connectors.ozon.client_id; 5xx, another status, a transport error or an answer
// that is not the documented JSON → a plain error, for the caller to retry. After
// those Ozon may have taken some items: send them again no sooner than MinResend.
func (s *StockSender) Send(ctx context.Context, warehouse string, batch []stock.Update) ([]stock.Result, error) {
	if len(batch) == 0 {
		return nil, nil
	}
	if len(batch) > StockBatchSize {
		return nil, fmt.Errorf("ozon: update stocks: %d items in one batch, at most %d", len(batch), StockBatchSize)
	}
	wid, ok := s.warehouses[warehouse]
	if !ok {
		return nil, fmt.Errorf("ozon: update stocks: 1C warehouse %q has no Ozon warehouse in %s (configured: %s)",
			warehouse, keyStockWarehouses, strings.Join(s.sortedWarehouses(), ", "))
	}
	results := make([]stock.Result, len(batch))
	at := map[string]int{} // offer_id → the update sending it
	items := make([]stockItem, 0, len(batch))
	for i, u := range batch {
		results[i].SKU = u.SKU
		switch j, dup := at[u.MarketSKU]; {
		case u.MarketSKU == "":
			results[i].Outcome, results[i].Reason = stock.Refused, "no Ozon offer_id"
		case u.Amount < 0:
			results[i].Outcome, results[i].Reason = stock.Refused, fmt.Sprintf("negative stock %d", u.Amount)
		case dup:
			results[i].Outcome = stock.Refused
			results[i].Reason = fmt.Sprintf("offer_id %q is sent for 1C SKU %q in the same batch", u.MarketSKU, batch[j].SKU)
		default:
			at[u.MarketSKU] = i
			items = append(items, stockItem{OfferID: u.MarketSKU, Stock: u.Amount, WarehouseID: wid})
		}
	}
	if len(items) == 0 {
		return results, nil
	}
	what := fmt.Sprintf("update stocks (%d items, warehouse %d)", len(items), wid)
	if err := s.wait(ctx, what); err != nil {
		return nil, err
	}
	resp, err := s.c.post(ctx, stockPath, map[string]any{"stocks": items}, false, what)
	if err != nil {
		var ae *apiError
		switch {
		case !errors.As(err, &ae):
			return nil, err // transport, credentials
		case ae.Status == http.StatusTooManyRequests:
			wait := ae.RetryAfter
			if wait <= 0 {
				wait = s.window
			}
			return nil, &outbox.DeliveryError{Err: err, RetryAfter: wait}
		case ae.Status == http.StatusBadRequest:
			reason := fmt.Sprintf("Ozon refused the request (HTTP 400): %s", ae.Message)
			for _, i := range at {
				results[i].Outcome, results[i].Reason = stock.Refused, reason
			}
			return results, nil
		default:
			return nil, err
		}
	}
	var ans stockAnswer
	if err := json.Unmarshal(resp.Body(), &ans); err != nil {
		return nil, fmt.Errorf("ozon: %s: the answer is not the documented JSON: %v: %s", what, err, snippet(resp.Body()))
	}
	answered := map[string]bool{}
	for _, r := range ans.Result {
		i, ok := at[r.OfferID]
		if !ok || answered[r.OfferID] {
			continue // not asked for, or answered twice: the first counts
		}
		if r.WarehouseID != "" && r.WarehouseID.String() != strconv.FormatInt(wid, 10) {
			continue
		}
		answered[r.OfferID] = true
		res := &results[i]
		if r.Updated {
			res.Outcome = stock.Published
			continue
		}
		var reasons []string
		deferred := false
		for _, e := range r.Errors {
			code, msg := order.SafeText(strings.TrimSpace(e.Code)), order.SafeText(strings.TrimSpace(e.Message))
			if code == codeTooManyRequests || strings.Contains(strings.ToLower(code+" "+msg), "too frequently") {
				deferred = true
			}
			if r := shorten(strings.TrimSuffix(code+": "+msg, ": ")); r != "" {
				reasons = append(reasons, r)
			}
		}
		switch {
		case len(reasons) == 0:
			res.Outcome, res.Reason, res.RetryAfter = stock.Deferred, "Ozon did not update it and gave no reason", StockMinResend
		case deferred:
			res.Outcome, res.Reason, res.RetryAfter = stock.Deferred, strings.Join(reasons, "; "), StockMinResend
		default:
			res.Outcome, res.Reason = stock.Refused, strings.Join(reasons, "; ")
		}
	}
	missing := 0
	for offer, i := range at {
		if !answered[offer] {
			missing++
			results[i].Outcome, results[i].RetryAfter = stock.Deferred, StockMinResend
			results[i].Reason = "missing from Ozon's answer"
		}
	}
	if missing > 0 {
		s.c.log.WarnContext(ctx, "Ozon's stock answer leaves out items; they are sent again later",
			"warehouse", warehouse, "missing", missing, "sent", len(items))
	}
	return results, nil
}

// wait takes the rate limiter's next turn, within ctx: a turn that comes after
// ctx's deadline is given back and the wait fails at once.
func (s *StockSender) wait(ctx context.Context, what string) error {
	s.mu.Lock()
	now := s.clock.Now()
	r := s.lim.ReserveN(now, 1)
	s.mu.Unlock()
	d := r.DelayFrom(now)
	if d <= 0 {
		return nil
	}
	limit := fmt.Sprintf("%d requests per %s", s.requests, s.window)
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < d {
		r.CancelAt(now)
		return fmt.Errorf("ozon: %s: the rate limit (%s) allows the next request in %s, after the deadline: %w",
			what, limit, d.Round(time.Millisecond), context.DeadlineExceeded)
	}
	if err := s.clock.SleepUntil(ctx, now.Add(d)); err != nil {
		r.CancelAt(s.clock.Now())
		return fmt.Errorf("ozon: %s: waiting for the rate limit (%s): %w", what, limit, err)
	}
	return nil
}

// shorten bounds an item's reason to 200 characters.
func shorten(s string) string {
	if r := []rune(s); len(r) > 200 {
		return string(r[:200]) + "…"
	}
	return s
}

// sortedWarehouses lists the configured 1C warehouses, for messages.
func (s *StockSender) sortedWarehouses() []string {
	return slices.Sorted(maps.Keys(s.warehouses))
}
