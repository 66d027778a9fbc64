package ozonsim

import (
	"fmt"
	"net/http"
	"slices"
	"time"
)

// PathStocks is the Ozon Seller API method that sets the stock of products in
// warehouses.
const PathStocks = "/v2/products/stocks"

// Item error codes of PathStocks, as Ozon documents them.
const (
	StockTooManyRequests  = "TOO_MANY_REQUESTS"   // the pair was updated less than 30 s ago
	StockOfferNotFound    = "offer_id_not_found"  // no product with that offer_id
	StockProductNotFound  = "NOT_FOUND_ERROR"     // no product with that product_id
	StockTooBig           = "STOCK_TOO_BIG"       // a stock of a million or more
	StockWarehouseUnknown = "WAREHOUSE_NOT_FOUND" // not one of the seller's warehouses
)

// Kinds of StockViolation.
const (
	// ViolationBatch: a request carried more items than a request may.
	ViolationBatch = "batch_size"
	// ViolationRate: more requests than allowed within one window.
	ViolationRate = "rate"
	// ViolationResend: a product and warehouse sent again sooner than the
	// resend interval, whatever the simulator answered either time.
	ViolationResend = "resend"
)

// StockLimits are the rules of PathStocks. Zero fields take Ozon's documented
// values; a benchmark shortens them to run at a scaled rate.
type StockLimits struct {
	Batch    int           // items per request; default 100
	Requests int           // requests per Window; default 80
	Window   time.Duration // default 1 minute
	Resend   time.Duration // the least time between two updates of a pair; default 30s
	MaxStock int64         // the largest stock taken; default 999999 (less than a million)
}

func (l StockLimits) withDefaults() StockLimits {
	if l.Batch <= 0 {
		l.Batch = 100
	}
	if l.Requests <= 0 {
		l.Requests = 80
	}
	if l.Window <= 0 {
		l.Window = time.Minute
	}
	if l.Resend <= 0 {
		l.Resend = 30 * time.Second
	}
	if l.MaxStock <= 0 {
		l.MaxStock = 999999
	}
	return l
}

// StockUpdate is one stock the simulator took.
type StockUpdate struct {
	OfferID     string
	ProductID   int64
	WarehouseID int64
	Stock       int64
	At          time.Time
}

// StockViolation is a rule of PathStocks that a client broke. The simulator
// answers as Ozon would (400, 429, an item error) and records the breach, so a test
// can assert that a client never commits one.
type StockViolation struct {
	Kind string // ViolationBatch, ViolationRate, ViolationResend
	At   time.Time
	// OfferID and WarehouseID name the pair of a resend.
	OfferID     string
	WarehouseID int64
	Detail      string
}

type ozonStockKey struct {
	offer     string
	warehouse int64
}

type ozonStockFault struct {
	code string
	left int // < 0: until cleared
}

// ozonStocks is the state of PathStocks, guarded by Ozon.mu. The zero value is
// ready.
type ozonStocks struct {
	limits      StockLimits
	limitsSet   bool
	offers      map[string]int64 // offer_id → product_id, added by AddOffers
	warehouses  map[int64]bool   // nil: every warehouse id is the seller's
	held        map[ozonStockKey]int64
	lastUpdate  map[ozonStockKey]time.Time
	lastSent    map[ozonStockKey]time.Time
	updates     []StockUpdate
	counted     []time.Time // every request within the last window
	admitted    []time.Time // requests not answered 429, within the last window
	requests    int
	rateLimited int
	violations  []StockViolation
	faults      map[string]*ozonStockFault
}

func (st *ozonStocks) init() {
	if !st.limitsSet {
		st.limits, st.limitsSet = StockLimits{}.withDefaults(), true
	}
	if st.held == nil {
		st.held = map[ozonStockKey]int64{}
		st.lastUpdate = map[ozonStockKey]time.Time{}
		st.lastSent = map[ozonStockKey]time.Time{}
		st.offers = map[string]int64{}
		st.faults = map[string]*ozonStockFault{}
	}
}

// SetStockLimits replaces the rules of PathStocks; zero fields take Ozon's.
func (s *Ozon) SetStockLimits(l StockLimits) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stocks.init()
	s.stocks.limits = l.withDefaults()
}

// StockLimits returns the rules PathStocks applies.
func (s *Ozon) StockLimits() StockLimits {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stocks.init()
	return s.stocks.limits
}

// AddOffers makes products with these offer_ids exist for PathStocks, each with a
// product_id of its own. The offers of the postings' products exist too, with their
// SKU as product_id; any other offer_id is answered offer_id_not_found.
func (s *Ozon) AddOffers(offerIDs ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stocks.init()
	for _, o := range offerIDs {
		if _, ok := s.stocks.offers[o]; !ok && o != "" {
			s.stocks.offers[o] = s.nextSKU
			s.nextSKU++
		}
	}
}

// SetWarehouses makes only these warehouse ids the seller's: an item for another
// one is answered WAREHOUSE_NOT_FOUND. Until it is called, every id is.
func (s *Ozon) SetWarehouses(ids ...int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stocks.init()
	s.stocks.warehouses = map[int64]bool{}
	for _, id := range ids {
		s.stocks.warehouses[id] = true
	}
}

// FailStockItem answers the next times sends of offerID to PathStocks with the item
// error code (TOO_MANY_REQUESTS, STOCK_TOO_BIG, …) inside a 200; times <= 0: every
// send until ClearStockFaults. The stock held is left as it was.
func (s *Ozon) FailStockItem(offerID, code string, times int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stocks.init()
	left := times
	if left <= 0 {
		left = -1
	}
	s.stocks.faults[offerID] = &ozonStockFault{code: code, left: left}
}

// ClearStockFaults drops the item errors FailStockItem queued.
func (s *Ozon) ClearStockFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stocks.init()
	clear(s.stocks.faults)
}

// Stock is the stock held for an offer in a warehouse, false when none was taken.
func (s *Ozon) Stock(offerID string, warehouseID int64) (int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.stocks.held[ozonStockKey{offerID, warehouseID}]
	return v, ok
}

// StockUpdates returns every stock taken, in the order taken.
func (s *Ozon) StockUpdates() []StockUpdate {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.stocks.updates)
}

// StockRequests counts the requests to PathStocks that passed the credentials,
// whatever they were answered (an injected failure, 429 and 400 included). Their
// bodies and statuses are in RequestsTo(PathStocks).
func (s *Ozon) StockRequests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stocks.requests
}

// StockRateLimited counts the requests to PathStocks answered 429 for the rate.
func (s *Ozon) StockRateLimited() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stocks.rateLimited
}

// StockViolations returns the rules of PathStocks clients broke, in order.
func (s *Ozon) StockViolations() []StockViolation {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.stocks.violations)
}

// countStockRequest records a request to PathStocks that passed the credentials,
// before any injected failure is answered: the rate is the client's, whatever the
// answer. More requests within one window than allowed is a violation.
func (s *Ozon) countStockRequest() {
	at := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	st := &s.stocks
	st.init()
	st.requests++
	st.counted = append(ozonWithin(st.counted, at, st.limits.Window), at)
	if n := len(st.counted); n > st.limits.Requests {
		st.violations = append(st.violations, StockViolation{Kind: ViolationRate, At: at,
			Detail: fmt.Sprintf("%d requests within %s, at most %d allowed", n, st.limits.Window, st.limits.Requests)})
	}
}

// ozonWithin drops the times a window before at or earlier, keeping the order.
func ozonWithin(ts []time.Time, at time.Time, window time.Duration) []time.Time {
	keep := ts[:0]
	for _, t := range ts {
		if at.Sub(t) < window {
			keep = append(keep, t)
		}
	}
	return keep
}

type ozonStocksRequest struct {
	Stocks *[]struct {
		OfferID     string `json:"offer_id"`
		ProductID   int64  `json:"product_id"`
		Stock       *int64 `json:"stock"`
		WarehouseID int64  `json:"warehouse_id"`
	} `json:"stocks"`
}

type ozonStockItemError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

type ozonStockResult struct {
	OfferID     string               `json:"offer_id"`
	ProductID   int64                `json:"product_id"`
	Updated     bool                 `json:"updated"`
	WarehouseID int64                `json:"warehouse_id"`
	Errors      []ozonStockItemError `json:"errors"`
}

// ozonStockMessages are the simulator's words for the item errors.
var ozonStockMessages = map[string]string{
	StockOfferNotFound:    "there is no product with this offer_id in the seller's account",
	StockProductNotFound:  "there is no product with this product_id in the seller's account",
	StockWarehouseUnknown: "the warehouse is not found or not active",
}

// serveStocks answers PathStocks: the rate first (429), then the body (400: not the
// documented JSON, no items, more than a request may carry, an item without a
// warehouse, a product or a stock), then each item within a 200.
func (s *Ozon) serveStocks(w http.ResponseWriter, body []byte) {
	at := s.now()
	s.mu.Lock()
	st := &s.stocks
	st.init()
	lim := st.limits
	st.admitted = ozonWithin(st.admitted, at, lim.Window)
	if len(st.admitted) >= lim.Requests {
		st.rateLimited++
		s.mu.Unlock()
		ozonWriteError(w, http.StatusTooManyRequests, 8, fmt.Sprintf("You have reached request rate limit per minute (%d)", lim.Requests))
		return
	}
	st.admitted = append(st.admitted, at)
	s.mu.Unlock()

	var req ozonStocksRequest
	if err := ozonDecode(body, &req); err != nil {
		ozonWriteError(w, http.StatusBadRequest, 3, err.Error())
		return
	}
	if req.Stocks == nil || len(*req.Stocks) == 0 {
		ozonWriteError(w, http.StatusBadRequest, 3, "Request validation error: invalid ProductsStocksRequest.Stocks: value must contain at least 1 item(s)")
		return
	}
	items := *req.Stocks
	if len(items) > lim.Batch {
		s.mu.Lock()
		st.violations = append(st.violations, StockViolation{Kind: ViolationBatch, At: at,
			Detail: fmt.Sprintf("%d items in one request, at most %d allowed", len(items), lim.Batch)})
		s.mu.Unlock()
		ozonWriteError(w, http.StatusBadRequest, 3, fmt.Sprintf(
			"Request validation error: invalid ProductsStocksRequest.Stocks: value must contain no more than %d item(s)", lim.Batch))
		return
	}
	for i, it := range items {
		if it.WarehouseID <= 0 || it.Stock == nil || *it.Stock < 0 || (it.OfferID == "" && it.ProductID <= 0) {
			ozonWriteError(w, http.StatusBadRequest, 3, fmt.Sprintf(
				"Request validation error: invalid ProductsStocksRequest.Stocks[%d]: embedded message failed validation", i))
			return
		}
	}

	s.mu.Lock()
	results := make([]ozonStockResult, len(items))
	for i, it := range items {
		res := ozonStockResult{OfferID: it.OfferID, ProductID: it.ProductID, WarehouseID: it.WarehouseID, Errors: []ozonStockItemError{}}
		offer, pid, known := s.stockProductLocked(it.OfferID, it.ProductID)
		if known {
			res.OfferID, res.ProductID = offer, pid
		}
		k := ozonStockKey{offer, it.WarehouseID}
		if last, ok := st.lastSent[k]; ok && at.Sub(last) < lim.Resend {
			st.violations = append(st.violations, StockViolation{Kind: ViolationResend, At: at,
				OfferID: offer, WarehouseID: it.WarehouseID,
				Detail: fmt.Sprintf("sent again %s after the last send, at least %s required", at.Sub(last), lim.Resend)})
		}
		st.lastSent[k] = at
		code := ""
		if f, ok := st.faults[offer]; ok {
			code = f.code
			if f.left > 0 {
				if f.left--; f.left == 0 {
					delete(st.faults, offer)
				}
			}
		}
		switch {
		case code != "":
		case !known && it.OfferID != "":
			code = StockOfferNotFound
		case !known:
			code = StockProductNotFound
		case st.warehouses != nil && !st.warehouses[it.WarehouseID]:
			code = StockWarehouseUnknown
		case at.Sub(st.lastUpdate[k]) < lim.Resend && !st.lastUpdate[k].IsZero():
			code = StockTooManyRequests
		case *it.Stock > lim.MaxStock:
			code = StockTooBig
		}
		if code != "" {
			msg, ok := ozonStockMessages[code]
			switch {
			case code == StockTooManyRequests:
				msg = fmt.Sprintf("the stock of this product in this warehouse may be updated once in %s", lim.Resend)
			case code == StockTooBig:
				msg = fmt.Sprintf("the stock is too big: at most %d", lim.MaxStock)
			case !ok:
				msg = "injected item error"
			}
			res.Errors = append(res.Errors, ozonStockItemError{Code: code, Message: msg})
		} else {
			res.Updated = true
			st.held[k] = *it.Stock
			st.lastUpdate[k] = at
			st.updates = append(st.updates, StockUpdate{OfferID: offer, ProductID: pid,
				WarehouseID: it.WarehouseID, Stock: *it.Stock, At: at})
		}
		results[i] = res
	}
	s.mu.Unlock()
	ozonWriteJSON(w, http.StatusOK, map[string]any{"result": results})
}

// stockProductLocked finds a product by offer_id (which wins when both are given,
// as Ozon documents) or by product_id, among the offers added and the postings'
// products. The offer is the key of the stock held; for a product_id not found it
// is "#<product_id>".
func (s *Ozon) stockProductLocked(offerID string, productID int64) (string, int64, bool) {
	if offerID != "" {
		if pid, ok := s.stocks.offers[offerID]; ok {
			return offerID, pid, true
		}
		for _, p := range s.postings {
			for _, pr := range p.Products {
				if pr.OfferID == offerID {
					return offerID, pr.SKU, true
				}
			}
		}
		return offerID, 0, false
	}
	for o, pid := range s.stocks.offers {
		if pid == productID {
			return o, pid, true
		}
	}
	for _, p := range s.postings {
		for _, pr := range p.Products {
			if pr.SKU == productID && pr.OfferID != "" {
				return pr.OfferID, pr.SKU, true
			}
		}
	}
	return fmt.Sprintf("#%d", productID), 0, false
}
