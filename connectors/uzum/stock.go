package uzum

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/ordersync/ordersync/connectors"
	"github.com/ordersync/ordersync/internal/order"
	"github.com/ordersync/ordersync/internal/outbox"
	"github.com/ordersync/ordersync/internal/stock"
)

// StockMarketplace is the marketplace name of Uzum's stock publishing, the default
// of StockSender.Marketplace. internal/stock declares no constant for Uzum, so it
// is declared here.
const StockMarketplace = Name

// Uzum's rules for /v2/fbs/sku/stocks, and the sender's defaults.
const (
	// StockBatchSize is the most items one POST carries. Uzum publishes no limit;
	// its sellers' clients send this many a request.
	StockBatchSize = 100
	// DefaultStockListMaxAge is how long the list of the shop's SKUs read with GET
	// /v2/fbs/sku/stocks is used: one publish (a run of batches) reads it once.
	DefaultStockListMaxAge = 10 * time.Minute
	// DefaultStockRelist is how soon a barcode not on the list may read it again.
	DefaultStockRelist = time.Minute
)

const (
	pathStocks         = "/v2/fbs/sku/stocks"
	keyStockWarehouse  = "connectors.uzum.stock_warehouse"
	defaultHTTPTimeout = 30 * time.Second
)

// StockConfig configures the stock sender.
type StockConfig struct {
	// Warehouse is the 1C warehouse whose stock is the shop's FBS stock
	// (connectors.uzum.stock_warehouse); default the connector's Config.Warehouse.
	// Uzum's FBS stock has no warehouse of its own: one amount a SKU.
	Warehouse string
	// ListMaxAge is how long the list of SKUs is used, default
	// DefaultStockListMaxAge; Relist how soon a barcode not found reads it again,
	// default DefaultStockRelist.
	ListMaxAge, Relist time.Duration
	// Now is the clock of the list's age; nil is time.Now.
	Now func() time.Time
}

// StockSender publishes stock to Uzum with POST /v2/fbs/sku/stocks: a
// stock.Sender. An update's MarketSKU is the SKU's barcode as text; it is matched,
// character for character, to a barcode of the list GET /v2/fbs/sku/stocks reads,
// and the item is sent with that SKU's skuId and Uzum's own barcode. A barcode is
// never read as a number: "0460123456789" and "460123456789" are different
// barcodes, and Uzum refuses the second for the first's SKU (the product card
// types barcodes as numbers and loses the zero: never take them from there).
//
// Requests go through the connector's client, so the orders' rate limit
// (Config.RatePerSecond) holds for both. It is safe for concurrent use.
type StockSender struct {
	c         *Connector
	warehouse string
	maxAge    time.Duration
	relist    time.Duration
	now       func() time.Time

	// mu guards the list; a Send holds it while it reads the list, so concurrent
	// Sends read it once.
	mu     sync.Mutex
	skus   map[string]stockSKU // by barcode, as Uzum writes it
	listed time.Time           // when skus was read; zero: never
}

var _ stock.Sender = (*StockSender)(nil)

// stockSKU is one SKU of GET /v2/fbs/sku/stocks, as it is sent back.
type stockSKU struct {
	SkuID        json.Number `json:"skuId"`
	SkuTitle     string      `json:"skuTitle,omitempty"`
	ProductTitle string      `json:"productTitle,omitempty"`
	Barcode      string      `json:"barcode"`
	Amount       int64       `json:"amount"`
	FbsLinked    bool        `json:"fbsLinked"`
	DbsLinked    bool        `json:"dbsLinked"`
}

// StockSender returns the connector's stock sender. Errors name the configuration
// key.
func (c *Connector) StockSender(cfg StockConfig) (*StockSender, error) {
	cfg.Warehouse = strings.TrimSpace(cmp.Or(cfg.Warehouse, c.cfg.Warehouse))
	cfg.ListMaxAge = cmp.Or(cfg.ListMaxAge, DefaultStockListMaxAge)
	cfg.Relist = cmp.Or(cfg.Relist, DefaultStockRelist)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	switch {
	case cfg.Warehouse == "":
		return nil, fmt.Errorf("uzum: %s: the 1C warehouse whose stock is published to Uzum is required", keyStockWarehouse)
	case cfg.ListMaxAge < 0 || cfg.Relist < 0:
		return nil, fmt.Errorf("uzum: the SKU list's max age %s and relist %s must not be negative", cfg.ListMaxAge, cfg.Relist)
	}
	return &StockSender{c: c, warehouse: cfg.Warehouse, maxAge: cfg.ListMaxAge, relist: cfg.Relist, now: cfg.Now}, nil
}

// Marketplace is the connector's source: "uzum" (StockMarketplace), or a second
// account's own ("uzum-2"), so that each account keeps its own item states and
// outbox lane.
func (s *StockSender) Marketplace() string { return s.c.Name() }

// BatchSize is StockBatchSize.
func (s *StockSender) BatchSize() int { return StockBatchSize }

// MinResend is 0: Uzum publishes no wait between two updates of one SKU.
func (s *StockSender) MinResend() time.Duration { return 0 }

// MaxAmount is 0: Uzum publishes no largest amount.
func (s *StockSender) MaxAmount() int64 { return 0 }

// Timeout is how long one Send may take: a read of the SKU list and a POST, each
// the connector's request timeout and one turn of its rate limit.
func (s *StockSender) Timeout() time.Duration {
	t := cmp.Or(s.c.cfg.Timeout, defaultHTTPTimeout)
	if rps := s.c.cfg.RatePerSecond; rps > 0 {
		t += time.Duration(float64(time.Second) / rps)
	}
	return 2 * t
}

// Warehouse is the shop ids, comma-separated, for the configured 1C warehouse.
func (s *StockSender) Warehouse(warehouse string) (string, bool) {
	if warehouse != s.warehouse {
		return "", false
	}
	return strings.Join(s.c.cfg.ShopIDs, ","), true
}

// Send sends one batch of the 1C warehouse's stock: each update's MarketSKU is
// looked up, as text, in the SKU list (read first when it is older than
// ListMaxAge, or when a barcode is not on it and it is older than Relist), and the
// found items are sent in one POST /v2/fbs/sku/stocks.
//
// Each item's result: on the answer's list → Published (Mismatch when the amount
// it shows is another); left off a list the answer carries → Refused with Uzum's
// errors; an answer without a list takes every item → Published. An update whose
// barcode is on no SKU (the reason says so when only leading zeros differ),
// without a MarketSKU, with a negative amount or whose barcode another update of
// the batch carries is Refused without being sent. A 400 refuses every item sent
// with Uzum's reason, so the publish goes on.
//
// Errors fail the whole batch: 429 → *outbox.DeliveryError with RetryAfter (Uzum's
// Retry-After, else a second); refused credentials → a *connectors.AuthError
// naming connectors.uzum.token; 5xx, another status, a transport error or an
// answer that is not JSON → a plain error, for the caller to retry.
func (s *StockSender) Send(ctx context.Context, warehouse string, batch []stock.Update) ([]stock.Result, error) {
	if len(batch) == 0 {
		return nil, nil
	}
	if len(batch) > StockBatchSize {
		return nil, fmt.Errorf("uzum: update stocks: %d items in one batch, at most %d", len(batch), StockBatchSize)
	}
	if warehouse != s.warehouse {
		return nil, fmt.Errorf("uzum: update stocks: 1C warehouse %q is not %s (%q)", warehouse, keyStockWarehouse, s.warehouse)
	}
	skus, err := s.list(ctx, batch)
	if err != nil {
		return nil, err
	}
	results := make([]stock.Result, len(batch))
	at := map[string]int{} // Uzum's barcode → the update sending it
	var items []stockSKU
	for i, u := range batch {
		results[i].SKU = u.SKU
		sku, found := skus[u.MarketSKU]
		j, dup := at[u.MarketSKU]
		switch {
		case u.MarketSKU == "":
			results[i].Outcome, results[i].Reason = stock.Refused, "no Uzum barcode"
		case u.Amount < 0:
			results[i].Outcome, results[i].Reason = stock.Refused, fmt.Sprintf("negative stock %d", u.Amount)
		case !found:
			results[i].Outcome, results[i].Reason = stock.Refused, notListed(u.MarketSKU, skus)
		case dup:
			results[i].Outcome = stock.Refused
			results[i].Reason = fmt.Sprintf("barcode %q is sent for 1C SKU %q in the same batch", u.MarketSKU, batch[j].SKU)
		default:
			at[u.MarketSKU] = i
			sku.Amount = u.Amount
			items = append(items, sku)
		}
	}
	if len(items) == 0 {
		return results, nil
	}
	what := fmt.Sprintf("update stocks (%d items)", len(items))
	resp, err := s.c.http.R().SetContext(ctx).SetHeader("Content-Type", "application/json").
		SetBody(map[string]any{"skuAmountList": items}).Post(pathStocks)
	if err != nil {
		return nil, fmt.Errorf("uzum: %s: %w", what, err)
	}
	switch st := resp.StatusCode(); {
	case st == http.StatusTooManyRequests:
		wait, ok := connectors.RetryAfter(resp.Header().Get("Retry-After"), time.Now())
		if !ok || wait <= 0 {
			wait = time.Second
		}
		return nil, &outbox.DeliveryError{Err: connectors.Check(Name, keyToken, what, resp, nil), RetryAfter: wait}
	case st == http.StatusBadRequest:
		reason := "Uzum refused the request (HTTP 400): " + errorsOf(resp.Body())
		for _, i := range at {
			results[i].Outcome, results[i].Reason = stock.Refused, reason
		}
		return results, nil
	}
	if err := connectors.Check(Name, keyToken, what, resp, nil); err != nil {
		return nil, err
	}
	var ans struct {
		Payload *struct {
			SkuAmountList *[]json.RawMessage `json:"skuAmountList"`
		} `json:"payload"`
	}
	if err := json.Unmarshal(resp.Body(), &ans); err != nil {
		return nil, fmt.Errorf("uzum: %s: the answer is not Uzum's JSON: %v", what, err)
	}
	if ans.Payload == nil || ans.Payload.SkuAmountList == nil {
		for _, i := range at {
			results[i].Outcome = stock.Published
		}
		return results, nil
	}
	for _, raw := range *ans.Payload.SkuAmountList {
		got, err := decodeStockSKU(raw)
		if err != nil {
			continue
		}
		i, ok := at[got.Barcode]
		if !ok || results[i].Outcome != "" {
			continue // not asked for, or answered twice: the first counts
		}
		if got.Amount != batch[i].Amount {
			results[i].Outcome = stock.Mismatch
			results[i].Reason = fmt.Sprintf("Uzum shows %d, %d was sent", got.Amount, batch[i].Amount)
			continue
		}
		results[i].Outcome = stock.Published
	}
	reason := "left out of Uzum's answer: " + errorsOf(resp.Body())
	for _, i := range at {
		if results[i].Outcome == "" {
			results[i].Outcome, results[i].Reason = stock.Refused, reason
		}
	}
	return results, nil
}

// list returns the SKU list, read again when it is older than maxAge, or older than
// relist while a barcode of batch is not on it.
func (s *StockSender) list(ctx context.Context, batch []stock.Update) (map[string]stockSKU, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	age := s.now().Sub(s.listed)
	stale := s.skus == nil || age >= s.maxAge
	if !stale && age >= s.relist {
		for _, u := range batch {
			if _, ok := s.skus[u.MarketSKU]; !ok && u.MarketSKU != "" {
				stale = true
				break
			}
		}
	}
	if !stale {
		return s.skus, nil
	}
	body, err := s.c.read(ctx, pathStocks, nil, "list the SKUs' stocks")
	if err != nil {
		return nil, err
	}
	var ans struct {
		Payload *struct {
			SkuAmountList []json.RawMessage `json:"skuAmountList"`
		} `json:"payload"`
	}
	if err := json.Unmarshal(body, &ans); err != nil || ans.Payload == nil {
		return nil, fmt.Errorf("uzum: list the SKUs' stocks: the answer is not {\"payload\":{\"skuAmountList\":[…]}}: %v", err)
	}
	skus := make(map[string]stockSKU, len(ans.Payload.SkuAmountList))
	for _, raw := range ans.Payload.SkuAmountList {
		sku, err := decodeStockSKU(raw)
		if err != nil || sku.Barcode == "" || sku.SkuID == "" {
			continue // a SKU without a barcode or id cannot be sent stock
		}
		if _, dup := skus[sku.Barcode]; dup {
			s.c.log.WarnContext(ctx, "two Uzum SKUs share a barcode; the first listed is sent stock", "barcode", sku.Barcode)
			continue
		}
		skus[sku.Barcode] = sku
	}
	s.skus, s.listed = skus, s.now()
	return skus, nil
}

// decodeStockSKU reads one SKU of a stock list. The barcode is taken as Uzum wrote
// it: a string as it is, a number as its digits, never through a number type.
func decodeStockSKU(raw json.RawMessage) (stockSKU, error) {
	var w struct {
		SkuID        json.Number     `json:"skuId"`
		SkuTitle     string          `json:"skuTitle"`
		ProductTitle string          `json:"productTitle"`
		Barcode      json.RawMessage `json:"barcode"`
		Amount       json.Number     `json:"amount"`
		FbsLinked    *bool           `json:"fbsLinked"`
		DbsLinked    bool            `json:"dbsLinked"`
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if err := d.Decode(&w); err != nil {
		return stockSKU{}, err
	}
	barcode := strings.TrimSpace(string(w.Barcode))
	if barcode == "null" {
		barcode = ""
	}
	var text string
	if json.Unmarshal(w.Barcode, &text) == nil {
		barcode = strings.TrimSpace(text)
	}
	amount, _ := w.Amount.Int64()
	return stockSKU{SkuID: w.SkuID, SkuTitle: w.SkuTitle, ProductTitle: w.ProductTitle, Barcode: barcode, Amount: amount,
		FbsLinked: w.FbsLinked == nil || *w.FbsLinked, DbsLinked: w.DbsLinked}, nil
}

// notListed is the reason of a barcode no SKU has, naming the one that differs
// from it only in leading zeros, if any.
func notListed(barcode string, skus map[string]stockSKU) string {
	reason := fmt.Sprintf("no Uzum SKU has barcode %q (GET %s)", order.SafeText(barcode), pathStocks)
	bare := strings.TrimLeft(barcode, "0")
	if bare == "" {
		return reason
	}
	for b := range skus {
		if b != barcode && strings.TrimLeft(b, "0") == bare {
			return reason + fmt.Sprintf("; SKU %s has %q: barcodes are text, write it with its leading zeros in connectors.sku_map", skus[b].SkuID, b)
		}
	}
	return reason
}

// errorsOf is the messages of Uzum's {"errors":[{code, message}]}, or the start of
// the body.
func errorsOf(body []byte) string {
	var e struct {
		Errors []struct {
			Code    json.RawMessage `json:"code"` // text or a number
			Message string          `json:"message"`
		} `json:"errors"`
		Error string `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil {
		var msgs []string
		for _, x := range e.Errors {
			msgs = append(msgs, strings.TrimSuffix(strings.Trim(string(x.Code), `" `)+": "+strings.TrimSpace(x.Message), ": "))
		}
		if e.Error != "" {
			msgs = append(msgs, e.Error)
		}
		if len(msgs) > 0 {
			return shorten(order.SafeText(strings.Join(msgs, "; ")))
		}
	}
	return shorten(order.SafeText(strings.Join(strings.Fields(string(body)), " ")))
}

// shorten bounds a reason to 200 characters.
func shorten(s string) string {
	if r := []rune(s); len(r) > 200 {
		return string(r[:200]) + "…"
	}
	return s
}
