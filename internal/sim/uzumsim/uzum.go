// Package uzumsim is a simulated Uzum Market seller API (FBS orders), built from
// Uzum's published seller OpenAPI and the traps its sellers report: the API key is
// sent bare in Authorization ("Bearer …" is refused), GET /v2/fbs/orders takes one
// status a call, shopIds, page from 0 and dateFrom/dateTo in epoch seconds (values
// that look like milliseconds answer an empty list with 200), dates in answers are
// epoch milliseconds, POST /v1/fbs/order/{id}/confirm moves CREATED to PACKING once
// (a second confirm is refused), and a rate above the configured one is answered
// 429 with Retry-After.
//
// It holds the shop's FBS stock too: GET /v2/fbs/sku/stocks answers
// {"payload":{"skuAmountList":[…]}}, each SKU with its skuId, its barcode as text
// (leading zeros kept) and its amount; POST /v2/fbs/sku/stocks takes
// {"skuAmountList":[{skuId, barcode, amount, …}]} and sets the amounts. An item is
// taken only when its barcode is one of the shop's exactly (the product card's
// number-typed barcode, its leading zeros lost, is not) and agrees with its skuId
// when one is given; any other item is left out, named in the answer's errors and
// counted as a violation. The answer's payload lists the items taken; how Uzum
// answers a partly refused list is not published, so that part is this
// simulator's choice.
package uzumsim

import (
	"cmp"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/shopspring/decimal"
	"golang.org/x/time/rate"

	"github.com/ordersync/ordersync/internal/sim"
)

// Prefix is the path of the API's root on the simulator.
const Prefix = "/api/seller-openapi"

// Kinds of request, for Requests.
const (
	OpList    = "list"
	OpGet     = "get"
	OpConfirm = "confirm"
	// OpStocks reads the stock (GET /v2/fbs/sku/stocks), OpSetStocks sets it
	// (POST).
	OpStocks    = "stocks"
	OpSetStocks = "set-stocks"
)

// msThreshold: a dateFrom/dateTo above it is read as milliseconds (a date in the
// year 5138 in seconds), which Uzum answers with an empty list.
const msThreshold = 100_000_000_000

// Options configure the simulator.
type Options struct {
	Token string // the API key every request must carry, bare; empty accepts any but "Bearer …"
	// MaxPageSize is the largest size accepted, default 50.
	MaxPageSize int
	// RatePerSecond, when above 0, answers requests beyond it (a bucket of that
	// rate holding as many) with 429 and Retry-After: 1.
	RatePerSecond float64
	// SKUs are the shop's SKUs whose FBS stock GET /v2/fbs/sku/stocks lists.
	SKUs   []SKU
	Logger *slog.Logger
}

// SKU is one of the shop's SKUs with its FBS stock.
type SKU struct {
	SkuID int64
	// Barcode is the SKU's barcode as Uzum keeps it: text, leading zeros and all
	// ("0460123456789").
	Barcode       string
	SkuTitle      string
	ProductTitle  string
	SellerSkuCode string
	Amount        int64
}

// Item is one position of an order.
type Item struct {
	SkuTitle     string // the seller's SKU code
	ProductTitle string
	Barcode      string
	Amount       int
	SellerPrice  decimal.Decimal
}

// Order is a simulated FBS order.
type Order struct {
	ID           int64
	ShopID       int64
	Status       string // default CREATED
	DateCreated  time.Time
	Customer     string
	Phone        string
	CancelReason string
	Items        []Item
}

type rawOrder struct {
	id      int64
	shopID  int64
	status  string
	created time.Time
	body    string
}

// Uzum is the simulator: an http.Handler, safe for concurrent use.
type Uzum struct {
	token   string
	maxSize int
	limiter *rate.Limiter
	log     *slog.Logger
	server  sim.Server

	mu         sync.Mutex
	orders     map[int64]*Order
	raws       []rawOrder
	confirms   map[int64]int
	refused    map[int64]int
	requests   map[string]int
	unauth     int
	msQueries  int
	throttle   int       // next requests to answer 429
	retryUntil time.Time // the end of the last Retry-After given
	throttled  int
	violations int

	skus      []*SKU // in the order seeded
	byBarcode map[string]*SKU
	bySkuID   map[int64]*SKU
	stockSets int      // items set by POST /v2/fbs/sku/stocks
	misses    []string // barcodes of the items left out, as sent
}

// New returns a simulator; it serves nothing until Start.
func New(opts Options) *Uzum {
	s := &Uzum{
		token:    opts.Token,
		maxSize:  cmp.Or(opts.MaxPageSize, 50),
		log:      opts.Logger,
		orders:   map[int64]*Order{},
		confirms: map[int64]int{},
		refused:  map[int64]int{},
		requests: map[string]int{},
	}
	s.byBarcode, s.bySkuID = map[string]*SKU{}, map[int64]*SKU{}
	for _, k := range opts.SKUs {
		sku := k
		s.skus = append(s.skus, &sku)
		s.byBarcode[sku.Barcode] = &sku
		s.bySkuID[sku.SkuID] = &sku
	}
	if opts.RatePerSecond > 0 {
		s.limiter = rate.NewLimiter(rate.Limit(opts.RatePerSecond), max(1, int(opts.RatePerSecond)))
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	return s
}

// Start listens on addr and serves in the background.
func (s *Uzum) Start(addr string) error { return s.server.Start("uzum", addr, s, s.log) }

// URL is what connectors.uzum.base_url would be, "" before Start.
func (s *Uzum) URL() string { return s.server.URL(Prefix) }

// Close stops the server; safe twice and before Start.
func (s *Uzum) Close() { s.server.Close() }

// AddOrder adds an order (status CREATED when empty).
func (s *Uzum) AddOrder(o Order) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o.Status = cmp.Or(o.Status, "CREATED")
	o.Items = slices.Clone(o.Items)
	s.orders[o.ID] = &o
}

// AddRawOrder adds an order listed with this body as it is (a bad order).
func (s *Uzum) AddRawOrder(id, shopID int64, status string, created time.Time, body string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.raws = append(s.raws, rawOrder{id: id, shopID: shopID, status: status, created: created, body: body})
}

// SetStatus changes an order's status (the marketplace cancels it: CANCELED).
func (s *Uzum) SetStatus(id int64, status, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if o := s.orders[id]; o != nil {
		o.Status, o.CancelReason = status, reason
	}
}

// Order returns an order as the simulator holds it.
func (s *Uzum) Order(id int64) (Order, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.orders[id]
	if o == nil {
		return Order{}, false
	}
	return *o, true
}

// Confirms counts the confirmations carried out, by order id.
func (s *Uzum) Confirms() map[int64]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return clone(s.confirms)
}

// RefusedConfirms counts the confirmations refused (the order was not CREATED).
func (s *Uzum) RefusedConfirms() map[int64]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return clone(s.refused)
}

// Requests counts the requests answered (authenticated, not throttled), by kind.
func (s *Uzum) Requests() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for k, v := range s.requests {
		out[k] = v
	}
	return out
}

// Unauthorized counts the requests refused for their Authorization.
func (s *Uzum) Unauthorized() int { s.mu.Lock(); defer s.mu.Unlock(); return s.unauth }

// MillisecondQueries counts the listings whose dates looked like milliseconds.
func (s *Uzum) MillisecondQueries() int { s.mu.Lock(); defer s.mu.Unlock(); return s.msQueries }

// Throttle answers the next n requests 429 with Retry-After: 1.
func (s *Uzum) Throttle(n int) { s.mu.Lock(); defer s.mu.Unlock(); s.throttle += n }

// Throttled counts the 429 answers given.
func (s *Uzum) Throttled() int { s.mu.Lock(); defer s.mu.Unlock(); return s.throttled }

// Stocks is the FBS amount of every SKU, by barcode.
func (s *Uzum) Stocks() map[string]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int64, len(s.skus))
	for _, k := range s.skus {
		out[k.Barcode] = k.Amount
	}
	return out
}

// StockSets counts the items POST /v2/fbs/sku/stocks took.
func (s *Uzum) StockSets() int { s.mu.Lock(); defer s.mu.Unlock(); return s.stockSets }

// UnknownBarcodes lists, as sent, the barcodes of the stock items left out: no SKU
// has that barcode exactly, or it is not the barcode of the skuId sent with it.
func (s *Uzum) UnknownBarcodes() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.misses)
}

// Violations counts the requests that came before the Retry-After of the last 429
// had passed, or above the configured rate, and the stock items whose barcode
// matched no SKU exactly.
func (s *Uzum) Violations() int { s.mu.Lock(); defer s.mu.Unlock(); return s.violations }

func clone(m map[int64]int) map[int64]int {
	out := make(map[int64]int, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func (s *Uzum) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, Prefix)
	if !ok {
		writeError(w, http.StatusNotFound, "not found")
		return
	}
	auth := r.Header.Get("Authorization")
	if strings.HasPrefix(strings.ToLower(auth), "bearer ") || auth == "" || (s.token != "" && auth != s.token) {
		s.mu.Lock()
		s.unauth++
		s.mu.Unlock()
		writeError(w, http.StatusUnauthorized, "the API key is sent without the Bearer prefix")
		return
	}
	if !s.admit(w) {
		return
	}
	switch {
	case r.Method == http.MethodGet && rest == "/v2/fbs/orders":
		s.serveList(w, r)
	case r.Method == http.MethodGet && rest == "/v2/fbs/sku/stocks":
		s.serveStocks(w)
	case r.Method == http.MethodPost && rest == "/v2/fbs/sku/stocks":
		s.serveSetStocks(w, r)
	case strings.HasPrefix(rest, "/v1/fbs/order/"):
		tail := strings.TrimPrefix(rest, "/v1/fbs/order/")
		idText, action, _ := strings.Cut(tail, "/")
		id, err := strconv.ParseInt(idText, 10, 64)
		switch {
		case err != nil:
			writeError(w, http.StatusBadRequest, "orderId must be a number")
		case r.Method == http.MethodGet && action == "":
			s.serveGet(w, id)
		case r.Method == http.MethodPost && action == "confirm":
			s.serveConfirm(w, id)
		default:
			writeError(w, http.StatusNotFound, "not found")
		}
	default:
		writeError(w, http.StatusNotFound, "not found")
	}
}

// admit applies the throttle and the rate, recording violations.
func (s *Uzum) admit(w http.ResponseWriter) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if now.Before(s.retryUntil) {
		s.violations++
	}
	over := s.limiter != nil && !s.limiter.AllowN(now, 1)
	if over {
		s.violations++
	}
	if s.throttle > 0 || over {
		if s.throttle > 0 {
			s.throttle--
		}
		s.throttled++
		s.retryUntil = now.Add(time.Second)
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusTooManyRequests, "too many requests")
		return false
	}
	return true
}

func (s *Uzum) serveList(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var shops []int64
	for _, v := range q["shopIds"] {
		for _, p := range strings.Split(v, ",") {
			n, err := strconv.ParseInt(strings.TrimSpace(p), 10, 64)
			if err != nil {
				writeError(w, http.StatusBadRequest, "shopIds must be numbers")
				return
			}
			shops = append(shops, n)
		}
	}
	if len(shops) == 0 {
		writeError(w, http.StatusBadRequest, "shopIds is required")
		return
	}
	statuses := q["status"]
	if len(statuses) > 1 || (len(statuses) == 1 && strings.Contains(statuses[0], ",")) {
		writeError(w, http.StatusBadRequest, "status takes one value")
		return
	}
	status := "CREATED"
	if len(statuses) == 1 {
		status = statuses[0]
	}
	page, err1 := intParam(q, "page", 0)
	size, err2 := intParam(q, "size", 20)
	if err1 != nil || err2 != nil || page < 0 || size < 1 || size > s.maxSize {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("page must be from 0 and size from 1 to %d", s.maxSize))
		return
	}
	from, err1 := intParam(q, "dateFrom", 0)
	to, err2 := intParam(q, "dateTo", 0)
	if err1 != nil || err2 != nil {
		writeError(w, http.StatusBadRequest, "dateFrom and dateTo must be numbers")
		return
	}
	s.mu.Lock()
	s.requests[OpList]++
	if from > msThreshold || to > msThreshold {
		s.msQueries++
		s.mu.Unlock()
		writeJSON(w, http.StatusOK, map[string]any{"payload": map[string]any{"orders": []any{}, "totalAmount": 0}})
		return
	}
	type entry struct {
		id   int64
		body json.RawMessage
	}
	var all []entry
	in := func(shop int64, st string, created time.Time) bool {
		if !slices.Contains(shops, shop) || st != status {
			return false
		}
		sec := created.Unix()
		return (from == 0 || sec >= int64(from)) && (to == 0 || sec <= int64(to))
	}
	for _, o := range s.orders {
		if in(o.ShopID, o.Status, o.DateCreated) {
			all = append(all, entry{o.ID, wire(o)})
		}
	}
	for _, ro := range s.raws {
		if in(ro.shopID, ro.status, ro.created) {
			all = append(all, entry{ro.id, json.RawMessage(ro.body)})
		}
	}
	s.mu.Unlock()
	slices.SortFunc(all, func(a, b entry) int { return cmp.Compare(a.id, b.id) })
	start := min(page*size, len(all))
	end := min(start+size, len(all))
	orders := make([]json.RawMessage, 0, end-start)
	for _, e := range all[start:end] {
		orders = append(orders, e.body)
	}
	writeJSON(w, http.StatusOK, map[string]any{"payload": map[string]any{"orders": orders, "totalAmount": len(orders)}})
}

func (s *Uzum) serveGet(w http.ResponseWriter, id int64) {
	s.mu.Lock()
	s.requests[OpGet]++
	o := s.orders[id]
	var body json.RawMessage
	if o != nil {
		body = wire(o)
	}
	s.mu.Unlock()
	if o == nil {
		writeError(w, http.StatusNotFound, "order not found")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"payload": body})
}

func (s *Uzum) serveConfirm(w http.ResponseWriter, id int64) {
	s.mu.Lock()
	s.requests[OpConfirm]++
	o := s.orders[id]
	switch {
	case o == nil:
		s.mu.Unlock()
		writeError(w, http.StatusNotFound, "order not found")
	case o.Status != "CREATED":
		s.refused[id]++
		st := o.Status
		s.mu.Unlock()
		writeError(w, http.StatusBadRequest, "the order is "+st+", not CREATED: it cannot be confirmed")
	default:
		o.Status = "PACKING"
		s.confirms[id]++
		body := wire(o)
		s.mu.Unlock()
		writeJSON(w, http.StatusOK, map[string]any{"payload": body})
	}
}

func (s *Uzum) serveStocks(w http.ResponseWriter) {
	s.mu.Lock()
	s.requests[OpStocks]++
	list := make([]map[string]any, 0, len(s.skus))
	for _, k := range s.skus {
		list = append(list, wireSKU(k))
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"payload": map[string]any{"skuAmountList": list}})
}

// stockItem is one item of POST /v2/fbs/sku/stocks; the barcode stays raw so that
// one sent as a number is seen as sent.
type stockItem struct {
	SkuID   json.Number     `json:"skuId"`
	Barcode json.RawMessage `json:"barcode"`
	Amount  json.Number     `json:"amount"`
}

func (s *Uzum) serveSetStocks(w http.ResponseWriter, r *http.Request) {
	var body struct {
		SkuAmountList []stockItem `json:"skuAmountList"`
	}
	d := json.NewDecoder(http.MaxBytesReader(w, r.Body, 8<<20))
	d.UseNumber()
	if err := d.Decode(&body); err != nil {
		writeError(w, http.StatusBadRequest, "the body is not {\"skuAmountList\":[…]}: "+err.Error())
		return
	}
	if len(body.SkuAmountList) == 0 {
		writeError(w, http.StatusBadRequest, "skuAmountList is required")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests[OpSetStocks]++
	taken := []map[string]any{}
	errs := []map[string]string{}
	for i, it := range body.SkuAmountList {
		barcode := strings.TrimSpace(string(it.Barcode))
		if text, err := strconv.Unquote(barcode); err == nil {
			barcode = text
		}
		amount, err := strconv.ParseInt(it.Amount.String(), 10, 64)
		if err != nil || amount < 0 {
			errs = append(errs, map[string]string{"code": "400",
				"message": fmt.Sprintf("skuAmountList[%d]: amount %q is not a whole number from 0", i, it.Amount)})
			continue
		}
		sku := s.byBarcode[barcode]
		if id, err := it.SkuID.Int64(); err == nil && it.SkuID != "" && sku != nil && sku.SkuID != id {
			sku = nil
		}
		if sku == nil {
			s.violations++
			s.misses = append(s.misses, barcode)
			errs = append(errs, map[string]string{"code": "404",
				"message": fmt.Sprintf("skuAmountList[%d]: no SKU of the shop has barcode %s (skuId %s)", i, barcode, it.SkuID)})
			continue
		}
		sku.Amount = amount
		s.stockSets++
		taken = append(taken, wireSKU(sku))
	}
	writeJSON(w, http.StatusOK, map[string]any{"payload": map[string]any{"skuAmountList": taken}, "errors": errs})
}

// wireSKU is a SKU's stock as Uzum lists it. Called under mu.
func wireSKU(k *SKU) map[string]any {
	return map[string]any{
		"skuId": k.SkuID, "skuTitle": k.SkuTitle, "productTitle": k.ProductTitle, "barcode": k.Barcode,
		"amount": k.Amount, "fbsAllowed": true, "dbsAllowed": false, "fbsLinked": true, "dbsLinked": false,
		"sellerSkuCode": k.SellerSkuCode,
	}
}

func intParam(q map[string][]string, name string, def int) (int, error) {
	v := q[name]
	if len(v) == 0 || v[0] == "" {
		return def, nil
	}
	return strconv.Atoi(v[0])
}

// wire is an order as Uzum sends it; dates in epoch milliseconds. Called under mu.
func wire(o *Order) json.RawMessage {
	items := make([]map[string]any, len(o.Items))
	for i, it := range o.Items {
		items[i] = map[string]any{
			"id": o.ID*100 + int64(i), "skuTitle": it.SkuTitle, "productTitle": it.ProductTitle,
			"barcode": it.Barcode, "amount": it.Amount, "sellerPrice": json.RawMessage(it.SellerPrice.String()),
		}
	}
	m := map[string]any{
		"id": o.ID, "shopId": o.ShopID, "status": o.Status, "scheme": "FBS",
		"dateCreated":  o.DateCreated.UnixMilli(),
		"deliveryInfo": map[string]any{"customerFullname": o.Customer, "customerPhone": o.Phone},
		"orderItems":   items,
	}
	if o.CancelReason != "" {
		m["cancelReason"] = o.CancelReason
	}
	b, _ := json.Marshal(m)
	return b
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]any{"errors": []map[string]string{{"code": strconv.Itoa(status), "message": msg}}})
}
