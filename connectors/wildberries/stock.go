package wildberries

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-resty/resty/v2"
	"golang.org/x/time/rate"

	"github.com/ordersync/ordersync/connectors"
	"github.com/ordersync/ordersync/internal/outbox"
	"github.com/ordersync/ordersync/internal/stock"
)

// Documented rules of the stock methods (PUT and POST /api/v3/stocks/{warehouseId}).
const (
	// StockBatchSize is the most items one PUT carries.
	StockBatchSize = 1000
	// StockMaxAmount is the largest amount Wildberries takes.
	StockMaxAmount = 100000
	// StockPerMinute is the limit of the stock methods per seller account: 300
	// requests a minute (one per 200 ms), with bursts of 20 that the sender does
	// not use: it starts without burst credit and keeps none (stockBurst 1), so no
	// window of a minute ever holds more than 300 of its requests.
	StockPerMinute = 300
	stockBurst     = 1
	// conflictCost is how many requests an answer 409 counts as against the limit.
	conflictCost = 10
	// DefaultStockTimeout is how long one Send may take by default: a PUT and a
	// read-back, a resend after a 409 and the rate limiter's waits (a 409 costs
	// 2 s of the limit) fit many times over, and the publisher, which sends a batch
	// only while a Timeout of its delivery is left, fits batches into the relay's
	// lease (1 minute by default).
	DefaultStockTimeout = 20 * time.Second
	// storeBusyRetry is how soon a warehouse "in the process of updating"
	// (409 StoreIsProcessing) is tried again: "in a few seconds".
	storeBusyRetry     = 5 * time.Second
	stockWarehousesKey = configKey + ".stock_warehouses"
)

// StockConfig configures a StockSender; the connector's Config gives the
// marketplace API's URL, the token, the per-request timeout, the clock and the
// transport.
type StockConfig struct {
	// ContentURL is the content API, which lists the cards
	// (connectors.wildberries.content_url); default DefaultContentURL.
	ContentURL string
	// Warehouses maps a 1C warehouse to the id of the seller's Wildberries
	// warehouse its stock is published to (connectors.wildberries.stock_warehouses).
	Warehouses map[string]string
	// Timeout is how long one Send may take, the rate limiter's waits included;
	// default DefaultStockTimeout.
	Timeout time.Duration
	// RateScale multiplies the documented limits of the stock and content methods
	// (tests and benchmarks against a simulator scaled alike); 0 is 1, a negative
	// one sets no limit.
	RateScale float64
	// CardsMaxAge is how long a list of cards is used; default DefaultCardsMaxAge.
	// CardsRelist is how soon a vendor code not found lists the cards again;
	// default DefaultCardsRelist.
	CardsMaxAge, CardsRelist time.Duration
}

// StockSender publishes stock to Wildberries: it implements stock.Sender. Each
// update's marketplace SKU is a vendor code or a barcode, resolved to the chrtID
// of a size through the cards (cardCache); a batch is set with PUT
// /api/v3/stocks/{warehouseId} and, since Wildberries answers 204 even to a body it
// ignores, read back with POST /api/v3/stocks/{warehouseId}: an item that reads
// back another amount is a stock.Mismatch.
//
// Outcomes: a SKU no card knows is Skipped; a vendor code of several sizes without
// a barcode mapped, an amount out of range and the items a 409 names are Refused
// with Wildberries' code and message (the rest of the batch is sent again without
// them); a 409 that names none of the items, or a 400, refuses them all. Errors fail the whole batch: a 429 is an *outbox.DeliveryError with
// RetryAfter from X-Ratelimit-Retry (after a 409 in the same Send, the items still
// unsent are Deferred instead); refused credentials an *connectors.AuthError naming
// connectors.wildberries.token; a warehouse Wildberries does not know a dead
// DeliveryError naming connectors.wildberries.stock_warehouses.
//
// Requests go at most at the documented rate (its own limiter, shared by the
// concurrent Sends of this sender; a 409 counts as 10 requests). It is safe for
// concurrent use.
type StockSender struct {
	http       *resty.Client
	lim        *rate.Limiter // nil: no limit
	cards      *cardCache
	warehouses map[string]int64
	timeout    time.Duration
	now        func() time.Time
	log        *slog.Logger
}

var _ stock.Sender = (*StockSender)(nil)

// StockSender returns the connector's stock sender.
func (c *Connector) StockSender(cfg StockConfig) (*StockSender, error) {
	cfg.ContentURL = strings.TrimRight(cmp.Or(cfg.ContentURL, DefaultContentURL), "/")
	cfg.Timeout = cmp.Or(cfg.Timeout, DefaultStockTimeout)
	cfg.RateScale = cmp.Or(cfg.RateScale, 1)
	cfg.CardsMaxAge = cmp.Or(cfg.CardsMaxAge, DefaultCardsMaxAge)
	cfg.CardsRelist = cmp.Or(cfg.CardsRelist, DefaultCardsRelist)
	switch {
	case !strings.HasPrefix(cfg.ContentURL, "http://") && !strings.HasPrefix(cfg.ContentURL, "https://"):
		return nil, fmt.Errorf("%s: %q is not an http(s) URL", contentURLKey, cfg.ContentURL)
	case cfg.Timeout < 0:
		return nil, fmt.Errorf("%s.stock_timeout: %s is negative", configKey, cfg.Timeout)
	case math.IsNaN(cfg.RateScale) || math.IsInf(cfg.RateScale, 0):
		return nil, fmt.Errorf("wildberries: stock rate scale %v is not a number", cfg.RateScale)
	case cfg.CardsMaxAge < 0 || cfg.CardsRelist < 0:
		return nil, fmt.Errorf("wildberries: cards max age %s and relist %s must not be negative", cfg.CardsMaxAge, cfg.CardsRelist)
	}
	warehouses := make(map[string]int64, len(cfg.Warehouses))
	for w, id := range cfg.Warehouses {
		n, err := strconv.ParseInt(strings.TrimSpace(id), 10, 64)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%s.%s: %q is not a Wildberries warehouse id (a positive integer)", stockWarehousesKey, w, id)
		}
		warehouses[w] = n
	}

	base := c.cfg.Transport
	if base == nil {
		base = http.DefaultTransport.(*http.Transport).Clone()
	}
	header := http.Header{"Authorization": {c.cfg.Token}}
	log := c.log.With("component", "stock")
	s := &StockSender{
		// The sender's own limiter paces every request; nothing is retried inside a
		// request: a 429 goes back to the publisher with its wait.
		http: connectors.NewClient(connectors.ClientConfig{
			Connector: "wildberries", BaseURL: c.cfg.BaseURL, Timeout: c.cfg.Timeout,
			Retries: -1, Header: header, Logger: log, Transport: base,
		}),
		warehouses: warehouses,
		timeout:    cfg.Timeout,
		now:        c.cfg.Now,
		log:        log,
	}
	contentRate := 0.0
	if cfg.RateScale > 0 {
		r := rate.Limit(StockPerMinute / 60.0 * cfg.RateScale)
		s.lim = rate.NewLimiter(r, stockBurst)
		s.lim.AllowN(time.Now(), stockBurst) // no burst credit at the start: a fresh replica does not burst
		contentRate = ContentPerMinute / 60.0 * cfg.RateScale
	}
	s.cards = &cardCache{
		// Listing the cards is a read: the shared client paces it (one at a time,
		// no burst) and retries a 429 after X-Ratelimit-Retry.
		http: connectors.NewClient(connectors.ClientConfig{
			Connector: "wildberries", BaseURL: cfg.ContentURL, Timeout: c.cfg.Timeout,
			RatePerSecond: contentRate, Burst: 1, Header: header, Logger: log,
			Transport: retryHeader{base: base},
		}),
		now:    c.cfg.Now,
		log:    log,
		maxAge: cfg.CardsMaxAge,
		relist: cfg.CardsRelist,
	}
	return s, nil
}

// Marketplace is "wildberries".
func (s *StockSender) Marketplace() string { return stock.Wildberries }

// BatchSize is 1000, the most items one PUT takes.
func (s *StockSender) BatchSize() int { return StockBatchSize }

// MinResend is 0: Wildberries has no rule against setting an item again at once.
func (s *StockSender) MinResend() time.Duration { return 0 }

// MaxAmount is 100000.
func (s *StockSender) MaxAmount() int64 { return StockMaxAmount }

// Timeout is how long one Send may take.
func (s *StockSender) Timeout() time.Duration { return s.timeout }

// Warehouse is the Wildberries warehouse id of a 1C warehouse.
func (s *StockSender) Warehouse(warehouse string) (string, bool) {
	id, ok := s.warehouses[warehouse]
	if !ok {
		return "", false
	}
	return strconv.FormatInt(id, 10), true
}

// stockItem is one update on its way: its index in the batch and its chrtID.
type stockItem struct {
	i      int
	chrtID int64
	amount int64
}

// Send publishes one batch of a 1C warehouse's stock.
func (s *StockSender) Send(ctx context.Context, warehouse string, batch []stock.Update) ([]stock.Result, error) {
	wh, ok := s.warehouses[warehouse]
	if !ok {
		return nil, &outbox.DeliveryError{Dead: true, Err: fmt.Errorf(
			"wildberries: 1C warehouse %s has no Wildberries warehouse: set %s.%s", warehouse, stockWarehousesKey, warehouse)}
	}
	if len(batch) > StockBatchSize {
		return nil, &outbox.DeliveryError{Dead: true, Err: fmt.Errorf(
			"wildberries: a batch of %d items, at most %d go in one request", len(batch), StockBatchSize)}
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	log := s.log.With("warehouse", warehouse, "wb_warehouse", wh)

	results := make([]stock.Result, len(batch))
	for i, u := range batch {
		results[i].SKU = u.SKU
	}
	decide := func(i int, o stock.Outcome, reason string) {
		results[i].Outcome, results[i].Reason = o, reason
	}
	pending, err := s.resolve(ctx, batch, decide)
	if err != nil {
		return nil, err
	}

	what := fmt.Sprintf("PUT /api/v3/stocks/%d", wh)
	conflicted := false // a 409 was answered: what is decided stands
	// deferOrFail: a rate limit after a 409 defers the items still unsent, else
	// it fails the batch.
	deferOrFail := func(err error) ([]stock.Result, error) {
		var de *outbox.DeliveryError
		if !conflicted || !errors.As(err, &de) || de.RetryAfter <= 0 {
			return nil, err
		}
		for _, it := range pending {
			decide(it.i, stock.Deferred, err.Error())
			results[it.i].RetryAfter = de.RetryAfter
		}
		return results, nil
	}
	for len(pending) > 0 {
		resp, err := s.put(ctx, wh, pending)
		if err == nil && resp.IsSuccess() { // 204, documented
			break
		}
		if err == nil && resp.StatusCode() == http.StatusConflict {
			rest, err := s.conflict(ctx, what, resp, batch, pending, decide)
			if err != nil {
				return deferOrFail(err)
			}
			conflicted = true
			pending = rest
			continue
		}
		if err == nil && resp.StatusCode() == http.StatusBadRequest {
			reason := fmt.Sprintf("Wildberries rejected the request: HTTP 400: %s", errorMessage(resp.Body()))
			for _, it := range pending {
				decide(it.i, stock.Refused, reason)
			}
			log.ErrorContext(ctx, "Wildberries rejected a stock update", "reason", reason, "items", len(pending))
			return results, nil
		}
		return deferOrFail(s.failure(what, warehouse, wh, resp, err))
	}
	if len(pending) == 0 {
		return results, nil
	}

	read, err := s.read(ctx, warehouse, wh, pending)
	if err != nil {
		return deferOrFail(err)
	}
	mismatched := 0
	for _, it := range pending {
		got, ok := read[it.chrtID]
		switch {
		case ok && got == it.amount, !ok && it.amount == 0:
			decide(it.i, stock.Published, "")
		case !ok:
			mismatched++
			decide(it.i, stock.Mismatch, fmt.Sprintf("sent %d for chrtID %d, Wildberries reads back none", it.amount, it.chrtID))
		default:
			mismatched++
			decide(it.i, stock.Mismatch, fmt.Sprintf("sent %d for chrtID %d, Wildberries reads back %d", it.amount, it.chrtID, got))
		}
	}
	if mismatched > 0 {
		log.WarnContext(ctx, "Wildberries answered 204 but reads back other amounts", "mismatched", mismatched, "sent", len(pending))
	}
	return results, nil
}

// resolve finds each update's chrtID, listing the cards again (at most once per
// relist) when one is not found, and decides those it cannot send; it returns the
// items to send.
func (s *StockSender) resolve(ctx context.Context, batch []stock.Update, decide func(int, stock.Outcome, string)) ([]stockItem, error) {
	ix, err := s.cards.cards(ctx)
	if err != nil {
		return nil, err
	}
	key := func(u stock.Update) string { return cmp.Or(u.MarketSKU, u.SKU) }
	chrt := make([]int64, len(batch))
	why := make([]string, len(batch))
	missing := 0
	for i, u := range batch {
		chrt[i], _, why[i] = ix.resolve(key(u))
		if chrt[i] == 0 && why[i] == "" {
			missing++
		}
	}
	if missing > 0 {
		again, relisted, err := s.cards.relisted(ctx)
		if err != nil {
			return nil, err
		}
		if relisted {
			for i, u := range batch {
				if chrt[i] == 0 && why[i] == "" {
					chrt[i], _, why[i] = again.resolve(key(u))
				}
			}
		}
	}
	pending := make([]stockItem, 0, len(batch))
	first := map[int64]int{} // chrtID → the index that has it
	for i, u := range batch {
		switch j, dup := first[chrt[i]]; {
		case chrt[i] == 0 && why[i] == "":
			decide(i, stock.Skipped, fmt.Sprintf("no Wildberries card with vendor code %s (nor a size with that barcode)", key(u)))
		case chrt[i] == 0:
			decide(i, stock.Refused, why[i])
		case u.Amount < 0 || u.Amount > StockMaxAmount:
			decide(i, stock.Refused, fmt.Sprintf("amount %d is out of Wildberries' range 0–%d", u.Amount, StockMaxAmount))
		case dup:
			decide(i, stock.Refused, fmt.Sprintf("%s names chrtID %d, as %s in the same batch does", key(u), chrt[i], key(batch[j])))
		default:
			first[chrt[i]] = i
			pending = append(pending, stockItem{i: i, chrtID: chrt[i], amount: u.Amount})
		}
	}
	return pending, nil
}

// wait waits for the rate limiter, within ctx.
func (s *StockSender) wait(ctx context.Context) error {
	if s.lim == nil {
		return nil
	}
	if err := s.lim.Wait(ctx); err != nil {
		return fmt.Errorf("wildberries: waiting for the stock methods' rate limit: %w", err)
	}
	return nil
}

type stockWire struct {
	ChrtID int64 `json:"chrtId"`
	Amount int64 `json:"amount"`
}

// put sends the items with PUT /api/v3/stocks/{warehouseId}. A 409 costs the
// limiter the 9 requests more Wildberries counts it as.
func (s *StockSender) put(ctx context.Context, wh int64, items []stockItem) (*resty.Response, error) {
	body := struct {
		Stocks []stockWire `json:"stocks"`
	}{Stocks: make([]stockWire, len(items))}
	for k, it := range items {
		body.Stocks[k] = stockWire{ChrtID: it.chrtID, Amount: it.amount}
	}
	if err := s.wait(ctx); err != nil {
		return nil, err
	}
	resp, err := s.http.R().SetContext(ctx).SetBody(body).Put("/api/v3/stocks/" + strconv.FormatInt(wh, 10))
	if err == nil && resp.StatusCode() == http.StatusConflict && s.lim != nil {
		now := time.Now()
		for range conflictCost - 1 {
			s.lim.ReserveN(now, 1) // never cancelled: the tokens are spent, the next waits are longer
		}
	}
	return resp, err
}

// read reads the items' amounts back with POST /api/v3/stocks/{warehouseId}.
func (s *StockSender) read(ctx context.Context, warehouse string, wh int64, items []stockItem) (map[int64]int64, error) {
	what := fmt.Sprintf("POST /api/v3/stocks/%d", wh)
	ids := make([]int64, len(items))
	for k, it := range items {
		ids[k] = it.chrtID
	}
	if err := s.wait(ctx); err != nil {
		return nil, err
	}
	resp, err := s.http.R().SetContext(ctx).SetBody(map[string][]int64{"chrtIds": ids}).
		Post("/api/v3/stocks/" + strconv.FormatInt(wh, 10))
	if err != nil || resp.StatusCode() != http.StatusOK {
		return nil, s.failure(what, warehouse, wh, resp, err)
	}
	var answer struct {
		Stocks []stockWire `json:"stocks"`
	}
	if err := json.Unmarshal(resp.Body(), &answer); err != nil {
		return nil, fmt.Errorf("wildberries: %s: malformed answer: %w", what, err)
	}
	out := make(map[int64]int64, len(answer.Stocks))
	for _, st := range answer.Stocks {
		out[st.ChrtID] = st.Amount
	}
	return out, nil
}

// failure classifies an answer that is neither a success nor a 409 or 400: a
// transport error or 5xx is a plain error (retried with backoff); a 429 a
// DeliveryError with RetryAfter; 401 and 403 an *connectors.AuthError; a 404 (the
// warehouse is not the seller's) a dead DeliveryError naming the warehouse's key.
func (s *StockSender) failure(what, warehouse string, wh int64, resp *resty.Response, err error) error {
	if err != nil {
		return fmt.Errorf("wildberries: %s: %w", what, err)
	}
	st := resp.StatusCode()
	switch {
	case st == http.StatusTooManyRequests:
		d, _ := retryAfter(resp.Header(), s.now())
		d = max(d, time.Second) // none, or 0: a second, not a hot loop
		return &outbox.DeliveryError{RetryAfter: d, Err: fmt.Errorf("wildberries: %s: HTTP 429, retry in %s: %s", what, d, errorMessage(resp.Body()))}
	case st == http.StatusUnauthorized || st == http.StatusForbidden:
		return connectors.Check("wildberries", tokenKey, what, resp, nil)
	case st == http.StatusNotFound:
		return &outbox.DeliveryError{Dead: true, Err: fmt.Errorf(
			"wildberries: %s: Wildberries knows no warehouse %d of this seller: check %s.%s", what, wh, stockWarehousesKey, warehouse)}
	default:
		return fmt.Errorf("wildberries: %s: HTTP %d: %s", what, st, errorMessage(resp.Body()))
	}
}

// stockConflict is one element of a 409 body: an array of {code, message, data},
// data naming the items refused ({sku, amount}, and chrtId where given).
type stockConflict struct {
	Code    string          `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
}

func (c stockConflict) String() string {
	return strings.Join(slices.DeleteFunc([]string{c.Code, c.Message}, func(s string) bool { return s == "" }), ": ")
}

// named returns the items a conflict's data names: by chrtId, or by barcode (sku).
func (c stockConflict) named() (chrtIDs []int64, skus []string) {
	var list []map[string]json.RawMessage
	if json.Unmarshal(c.Data, &list) == nil {
		for _, it := range list {
			var id int64
			var sku string
			if json.Unmarshal(it["chrtId"], &id) == nil && id > 0 {
				chrtIDs = append(chrtIDs, id)
			} else if json.Unmarshal(it["sku"], &sku) == nil && sku != "" {
				skus = append(skus, sku)
			}
		}
		return chrtIDs, skus
	}
	var byKey map[string]json.RawMessage // {"<barcode>": …}
	if json.Unmarshal(c.Data, &byKey) == nil {
		for k := range byKey {
			skus = append(skus, k)
		}
	}
	return chrtIDs, skus
}

// conflict reads a 409: the items its data names are Refused with its code and
// message, and the others are returned to be sent again. When it names none of
// them, every item is refused with the message, unless the warehouse is busy
// (StoreIsProcessing): then the batch is to be sent again in a few seconds.
func (s *StockSender) conflict(ctx context.Context, what string, resp *resty.Response, batch []stock.Update,
	pending []stockItem, decide func(int, stock.Outcome, string)) ([]stockItem, error) {
	body := resp.Body()
	var conflicts []stockConflict
	if err := json.Unmarshal(body, &conflicts); err != nil {
		// Not the documented array: one {code, message, data}, or the gateway's
		// {title, detail}.
		var one struct {
			stockConflict
			Title  string `json:"title"`
			Detail string `json:"detail"`
		}
		switch {
		case json.Unmarshal(body, &one) != nil:
			one.Message = snippet(body)
		case one.Message == "":
			one.Message = strings.Join(slices.DeleteFunc([]string{one.Title, one.Detail}, func(s string) bool { return s == "" }), ": ")
		}
		conflicts = []stockConflict{one.stockConflict}
	}
	ix, err := s.cards.cards(ctx)
	if err != nil {
		return nil, err
	}
	byChrt := make(map[int64]int, len(pending)) // chrtID → index in pending
	for k, it := range pending {
		byChrt[it.chrtID] = k
	}
	reasons := map[int][]string{} // index in pending → why
	for _, c := range conflicts {
		ids, skus := c.named()
		for _, sku := range skus {
			if id, ok := ix.byBarcode[sku]; ok {
				ids = append(ids, id)
				continue
			}
			for _, it := range pending {
				if batch[it.i].MarketSKU == sku || batch[it.i].SKU == sku {
					ids = append(ids, it.chrtID)
				}
			}
		}
		for _, id := range ids {
			if k, ok := byChrt[id]; ok && !slices.Contains(reasons[k], c.String()) {
				reasons[k] = append(reasons[k], c.String())
			}
		}
	}
	var all []string
	for _, c := range conflicts {
		if t := strings.TrimSpace(strings.Trim(c.String(), ": ")); t != "" {
			all = append(all, c.String())
		}
	}
	msg := strings.Join(all, "; ")
	if msg == "" {
		msg = "the answer gave no code or message"
	}
	if len(reasons) == 0 {
		if slices.ContainsFunc(conflicts, func(c stockConflict) bool { return c.Code == "StoreIsProcessing" }) {
			return nil, &outbox.DeliveryError{RetryAfter: storeBusyRetry,
				Err: fmt.Errorf("wildberries: %s: HTTP 409, the warehouse is being updated: %s", what, msg)}
		}
		for _, it := range pending {
			decide(it.i, stock.Refused, "Wildberries refused the batch (HTTP 409, naming no item): "+msg)
		}
		s.log.WarnContext(ctx, "Wildberries refused a stock update without naming its items", "reason", msg, "items", len(pending))
		return nil, nil
	}
	var rest []stockItem
	for k, it := range pending {
		if why, ok := reasons[k]; ok {
			decide(it.i, stock.Refused, "Wildberries refused it (HTTP 409): "+strings.Join(why, "; "))
			continue
		}
		rest = append(rest, it)
	}
	s.log.InfoContext(ctx, "Wildberries refused stock items", "refused", len(reasons), "resent", len(rest), "reason", msg)
	return rest, nil
}
