// Package ymsim is a simulated Yandex Market Partner API, built from Yandex's
// published reference and the traps its sellers report. Every request carries the
// key in the Api-Key header. Orders are listed per shop (GET
// /v2/campaigns/{campaignId}/orders, updatedAtFrom/updatedAtTo, page_token and
// limit) and per cabinet (POST /v1/businesses/{businessId}/orders, a dates filter
// in the body), both answering {orders, paging:{nextPageToken}}; a campaign or
// business id the simulator does not know (the two swapped, or the shop id of the
// cabinet given instead) answers 200 with no orders, as Yandex does. PUT
// …/orders/{orderId}/status moves PROCESSING/STARTED to READY_TO_SHIP once; POST
// …/orders/{orderId}/external-id is taken once and only before READY_TO_SHIP; PUT
// …/offers/stocks takes at most MaxStockSKUs unique SKUs with one item each, and
// POST …/offers/stocks reads them back in pages. POST
// /v3/businesses/{businessId}/offers/stocks/update takes at most MaxStockSKUs
// unique (sku, partnerWarehouseId) pairs of the cabinet's partner warehouses,
// MaxStockV3PerMinute times a minute. Beyond the configured rate a request is
// answered 420 with the X-RateLimit headers.
package ymsim

import (
	"cmp"
	"encoding/base64"
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

	"github.com/ordersync/ordersync/internal/sim"
)

// Statuses and substatuses the simulator uses.
const (
	StatusProcessing  = "PROCESSING"
	StatusCancelled   = "CANCELLED"
	StatusDelivered   = "DELIVERED"
	SubStarted        = "STARTED"
	SubReadyToShip    = "READY_TO_SHIP"
	SubShopFailed     = "SHOP_FAILED"
	StatusRateLimited = 420 // Yandex's answer to a request beyond its limit
)

// Limits of the API.
const (
	MaxPageSize  = 50
	MaxStockSKUs = 2000
	maxCount     = 2_000_000_000
)

// Kinds of request, for Requests.
const (
	OpListCampaign = "list_campaign"
	OpListBusiness = "list_business"
	OpGet          = "get"
	OpStatus       = "status"
	OpExternalID   = "external_id"
	OpStocks       = "stocks"
	OpStocksV3     = "stocks_v3"
	OpStocksRead   = "stocks_read"
	OpCampaign     = "campaign"
)

// moscow is the zone of creationDate in the shop listing.
var moscow = time.FixedZone("MSK", 3*60*60)

// Options configure the simulator.
type Options struct {
	APIKey string // the key every request must carry; empty accepts any non-empty key
	// BusinessID is the cabinet; Campaigns are its shops. Orders of other campaign
	// ids cannot be added.
	BusinessID int64
	Campaigns  []int64
	// RateLimit, when above 0, is how many requests are answered in each RateWindow
	// (default a minute); the others are answered 420 until the window ends.
	RateLimit  int
	RateWindow time.Duration
	Logger     *slog.Logger
	// PartnerWarehouses are the ids of the cabinet's own warehouses that the
	// business stock update takes; the first is the warehouseId the stock read
	// answers (1 without one).
	PartnerWarehouses []string
}

// Item is one position of an order.
type Item struct {
	OfferID    string // the seller's SKU
	OfferName  string
	Count      int
	Price      decimal.Decimal // what the seller is paid for one unit
	BuyerPrice decimal.Decimal // what the buyer paid for one unit, default Price
}

// Order is a simulated order.
type Order struct {
	ID              int64
	CampaignID      int64
	Status          string // default PROCESSING
	Substatus       string // default STARTED
	CreationDate    time.Time
	UpdatedAt       time.Time // default CreationDate
	ExternalOrderID string
	Items           []Item
}

// StockValue is the last value sent for one SKU.
type StockValue struct {
	Count     int64
	UpdatedAt time.Time
}

type rawOrder struct {
	id, campaign int64
	updated      time.Time
	body         string
}

// YM is the simulator: an http.Handler, safe for concurrent use.
type YM struct {
	key      string
	business int64
	log      *slog.Logger
	server   sim.Server
	limit    int
	window   time.Duration

	mu            sync.Mutex
	campaigns     map[int64]bool
	orders        map[int64]*Order
	raws          []rawOrder
	transitions   map[int64]int
	refusedTrans  map[int64]int
	externalIDs   map[int64]string
	refusedExtIDs map[int64]int
	stocks        map[string]StockValue
	badStocks     int
	stockCalls    int

	partnerWarehouses map[string]bool
	readWarehouse     int64
	stocksV3          map[string]StockValue
	stockV3Times      []time.Time // of the business updates of the last minute
	stockV3Calls      int
	badStocksV3       int
	stockReads        int
	badStockReads     int

	requests    map[string]int
	unauth      int
	windowStart time.Time
	used        int
	throttle    int
	throttled   int
	violations  int
	until       time.Time // the end of the last 420's wait
}

// New returns a simulator; it serves nothing until Start.
func New(opts Options) *YM {
	s := &YM{
		key:           opts.APIKey,
		business:      opts.BusinessID,
		log:           opts.Logger,
		limit:         opts.RateLimit,
		window:        cmp.Or(opts.RateWindow, time.Minute),
		campaigns:     map[int64]bool{},
		orders:        map[int64]*Order{},
		transitions:   map[int64]int{},
		refusedTrans:  map[int64]int{},
		externalIDs:   map[int64]string{},
		refusedExtIDs: map[int64]int{},
		stocks:        map[string]StockValue{},
		requests:      map[string]int{},

		partnerWarehouses: map[string]bool{},
		readWarehouse:     1,
		stocksV3:          map[string]StockValue{},
	}
	for i, id := range opts.PartnerWarehouses {
		n, err := strconv.ParseInt(strings.TrimSpace(id), 10, 64)
		if err != nil || n <= 0 {
			panic(fmt.Sprintf("ymsim: partner warehouse %q is not a whole number greater than 0", id))
		}
		s.partnerWarehouses[strconv.FormatInt(n, 10)] = true
		if i == 0 {
			s.readWarehouse = n
		}
	}
	for _, c := range opts.Campaigns {
		s.campaigns[c] = true
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	return s
}

// Start listens on addr and serves in the background.
func (s *YM) Start(addr string) error { return s.server.Start("yandexmarket", addr, s, s.log) }

// URL is what connectors.yandex_market.base_url would be, "" before Start.
func (s *YM) URL() string { return s.server.URL("") }

// Close stops the server; safe twice and before Start.
func (s *YM) Close() { s.server.Close() }

// AddOrder adds an order (PROCESSING/STARTED when its status is empty). It panics
// on a campaign the simulator was not given: a test mistake.
func (s *YM) AddOrder(o Order) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.campaigns[o.CampaignID] {
		panic(fmt.Sprintf("ymsim: order %d: campaign %d is not one of Options.Campaigns", o.ID, o.CampaignID))
	}
	if o.Status == "" {
		o.Status, o.Substatus = StatusProcessing, cmp.Or(o.Substatus, SubStarted)
	}
	if o.UpdatedAt.IsZero() {
		o.UpdatedAt = o.CreationDate
	}
	o.Items = slices.Clone(o.Items)
	s.orders[o.ID] = &o
}

// AddRawOrder adds an order listed with this body as it is (a bad order).
func (s *YM) AddRawOrder(id, campaignID int64, updated time.Time, body string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.raws = append(s.raws, rawOrder{id: id, campaign: campaignID, updated: updated, body: body})
}

// SetStatus changes an order's status as the marketplace does (a cancel:
// CANCELLED with a substatus as its reason), and its updatedAt to now.
func (s *YM) SetStatus(id int64, status, substatus string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if o := s.orders[id]; o != nil {
		o.Status, o.Substatus, o.UpdatedAt = status, substatus, time.Now()
	}
}

// Order returns an order as the simulator holds it.
func (s *YM) Order(id int64) (Order, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.orders[id]
	if o == nil {
		return Order{}, false
	}
	return *o, true
}

// Orders is how many orders the simulator holds (raw ones left out).
func (s *YM) Orders() int { s.mu.Lock(); defer s.mu.Unlock(); return len(s.orders) }

// Transitions counts the status changes carried out on the order.
func (s *YM) Transitions(orderID int64) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.transitions[orderID]
}

// RefusedTransitions counts the status changes refused, by order id.
func (s *YM) RefusedTransitions() map[int64]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return clone(s.refusedTrans)
}

// ExternalIDs are the external order ids taken, by order id.
func (s *YM) ExternalIDs() map[int64]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[int64]string, len(s.externalIDs))
	for k, v := range s.externalIDs {
		out[k] = v
	}
	return out
}

// RefusedExternalIDs counts the external ids refused (a second one, or too late).
func (s *YM) RefusedExternalIDs() map[int64]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return clone(s.refusedExtIDs)
}

// Stocks are the last counts taken, by SKU.
func (s *YM) Stocks() map[string]StockValue {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]StockValue, len(s.stocks))
	for k, v := range s.stocks {
		out[k] = v
	}
	return out
}

// StockCalls counts the stock updates taken; BadStockRequests the ones refused.
func (s *YM) StockCalls() int       { s.mu.Lock(); defer s.mu.Unlock(); return s.stockCalls }
func (s *YM) BadStockRequests() int { s.mu.Lock(); defer s.mu.Unlock(); return s.badStocks }

// Requests counts the requests answered (authenticated, not limited), by kind.
func (s *YM) Requests() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for k, v := range s.requests {
		out[k] = v
	}
	return out
}

// Unauthorized counts the requests refused for their Api-Key.
func (s *YM) Unauthorized() int { s.mu.Lock(); defer s.mu.Unlock(); return s.unauth }

// Throttle answers the next n requests 420 with a wait of a second.
func (s *YM) Throttle(n int) { s.mu.Lock(); defer s.mu.Unlock(); s.throttle += n }

// Throttled counts the 420 answers given.
func (s *YM) Throttled() int { s.mu.Lock(); defer s.mu.Unlock(); return s.throttled }

// Violations counts the requests beyond the limit: above the configured rate, or
// sent before the wait of the last 420 was over.
func (s *YM) Violations() int { s.mu.Lock(); defer s.mu.Unlock(); return s.violations }

func clone(m map[int64]int) map[int64]int {
	out := make(map[int64]int, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func (s *YM) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get("Api-Key")
	if key == "" || (s.key != "" && key != s.key) {
		s.mu.Lock()
		s.unauth++
		s.mu.Unlock()
		writeError(w, http.StatusUnauthorized, "UNAUTHORIZED", "the Api-Key header is missing or wrong")
		return
	}
	if !s.admit(w) {
		return
	}
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	switch {
	case len(parts) == 4 && parts[0] == "v1" && parts[1] == "businesses" && parts[3] == "orders" && r.Method == http.MethodPost:
		s.serveBusinessOrders(w, r, parts[2])
	case len(parts) == 6 && parts[0] == "v3" && parts[1] == "businesses" && parts[3] == "offers" && parts[4] == "stocks" &&
		parts[5] == "update" && r.Method == http.MethodPost:
		s.serveStocksV3(w, r, parts[2])
	case len(parts) >= 3 && parts[0] == "v2" && parts[1] == "campaigns":
		campaign, err := strconv.ParseInt(parts[2], 10, 64)
		if err != nil {
			writeError(w, http.StatusBadRequest, "BAD_REQUEST", "campaignId must be a number")
			return
		}
		s.serveCampaign(w, r, campaign, parts[3:])
	default:
		writeError(w, http.StatusNotFound, "NOT_FOUND", "no such method")
	}
}

func (s *YM) serveCampaign(w http.ResponseWriter, r *http.Request, campaign int64, rest []string) {
	switch {
	case len(rest) == 0 && r.Method == http.MethodGet:
		s.serveCampaignInfo(w, campaign)
	case len(rest) == 1 && rest[0] == "orders" && r.Method == http.MethodGet:
		s.serveCampaignOrders(w, r, campaign)
	case len(rest) == 2 && rest[0] == "offers" && rest[1] == "stocks" && r.Method == http.MethodPut:
		s.serveStocks(w, r, campaign)
	case len(rest) == 2 && rest[0] == "offers" && rest[1] == "stocks" && r.Method == http.MethodPost:
		s.serveStockRead(w, r, campaign)
	case len(rest) >= 2 && rest[0] == "orders":
		id, err := strconv.ParseInt(rest[1], 10, 64)
		switch {
		case err != nil:
			writeError(w, http.StatusBadRequest, "BAD_REQUEST", "orderId must be a number")
		case len(rest) == 2 && r.Method == http.MethodGet:
			s.serveGet(w, campaign, id)
		case len(rest) == 3 && rest[2] == "status" && r.Method == http.MethodPut:
			s.serveStatus(w, r, campaign, id)
		case len(rest) == 3 && rest[2] == "external-id" && r.Method == http.MethodPost:
			s.serveExternalID(w, r, campaign, id)
		default:
			writeError(w, http.StatusNotFound, "NOT_FOUND", "no such method")
		}
	default:
		writeError(w, http.StatusNotFound, "NOT_FOUND", "no such method")
	}
}

// admit applies the forced throttle and the rate window, recording violations.
func (s *YM) admit(w http.ResponseWriter) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if now.Before(s.until) {
		s.violations++
	}
	if s.limit > 0 && now.Sub(s.windowStart) >= s.window {
		s.windowStart, s.used = now, 0
	}
	over := s.limit > 0 && s.used >= s.limit
	if over {
		s.violations++
	} else {
		s.used++
	}
	if s.throttle <= 0 && !over {
		return true
	}
	until := s.windowStart.Add(s.window)
	limit := s.limit
	if !over {
		s.throttle--
		until, limit = now.Add(time.Second), max(s.limit, 1)
	}
	s.throttled++
	s.until = until
	w.Header().Set("X-RateLimit-Resource-Limit", strconv.Itoa(limit))
	w.Header().Set("X-RateLimit-Resource-Remaining", "0")
	w.Header().Set("X-RateLimit-Resource-Until", until.UTC().Format(time.RFC3339Nano))
	writeError(w, StatusRateLimited, "LIMIT_EXCEEDED", "too many requests")
	return false
}

// pageToken encodes the offset of a page; opaque to the client.
func pageToken(offset int) string {
	return base64.RawURLEncoding.EncodeToString([]byte("offset:" + strconv.Itoa(offset)))
}

func readPageToken(tok string) (int, bool) {
	if tok == "" {
		return 0, true
	}
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return 0, false
	}
	n, err := strconv.Atoi(strings.TrimPrefix(string(b), "offset:"))
	return n, err == nil && n >= 0 && strings.HasPrefix(string(b), "offset:")
}

// paging reads limit and page_token (pageToken also taken).
func paging(r *http.Request) (limit, offset int, err error) {
	q := r.URL.Query()
	limit = MaxPageSize
	if v := q.Get("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit < 1 || limit > MaxPageSize {
			return 0, 0, fmt.Errorf("limit must be from 1 to %d", MaxPageSize)
		}
	}
	offset, ok := readPageToken(cmp.Or(q.Get("page_token"), q.Get("pageToken")))
	if !ok {
		return 0, 0, fmt.Errorf("page_token is not one this API gave")
	}
	return limit, offset, nil
}

func (s *YM) serveCampaignOrders(w http.ResponseWriter, r *http.Request, campaign int64) {
	limit, offset, err := paging(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, "BAD_REQUEST", err.Error())
		return
	}
	q := r.URL.Query()
	from, err1 := optTime(q.Get("updatedAtFrom"))
	to, err2 := optTime(q.Get("updatedAtTo"))
	if err1 != nil || err2 != nil {
		writeError(w, http.StatusBadRequest, "BAD_REQUEST", "updatedAtFrom and updatedAtTo are ISO 8601 with an offset")
		return
	}
	s.mu.Lock()
	s.requests[OpListCampaign]++
	all := s.pick(func(c int64) bool { return c == campaign }, from, to, false)
	s.mu.Unlock()
	s.writePage(w, all, offset, limit)
}

func (s *YM) serveBusinessOrders(w http.ResponseWriter, r *http.Request, idText string) {
	business, err := strconv.ParseInt(idText, 10, 64)
	if err != nil {
		writeError(w, http.StatusBadRequest, "BAD_REQUEST", "businessId must be a number")
		return
	}
	limit, offset, err := paging(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, "BAD_REQUEST", err.Error())
		return
	}
	var body struct {
		Dates *struct {
			UpdateFrom string `json:"updateFrom"`
			UpdateTo   string `json:"updateTo"`
		} `json:"dates"`
		CampaignIDs []int64 `json:"campaignIds"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		writeError(w, http.StatusBadRequest, "BAD_REQUEST", "the body is not JSON: "+err.Error())
		return
	}
	var from, to time.Time
	if body.Dates != nil {
		var err1, err2 error
		from, err1 = optTime(body.Dates.UpdateFrom)
		to, err2 = optTime(body.Dates.UpdateTo)
		if err1 != nil || err2 != nil {
			writeError(w, http.StatusBadRequest, "BAD_REQUEST", "dates.updateFrom and dates.updateTo are ISO 8601 with an offset")
			return
		}
	}
	s.mu.Lock()
	s.requests[OpListBusiness]++
	var all []json.RawMessage
	if business == s.business {
		all = s.pick(func(c int64) bool {
			return s.campaigns[c] && (len(body.CampaignIDs) == 0 || slices.Contains(body.CampaignIDs, c))
		}, from, to, true)
	}
	s.mu.Unlock()
	s.writePage(w, all, offset, limit)
}

// pick returns the orders of the campaigns kept whose updatedAt is in [from,
// to), by id. Called under mu.
func (s *YM) pick(keep func(int64) bool, from, to time.Time, business bool) []json.RawMessage {
	type entry struct {
		id   int64
		body json.RawMessage
	}
	in := func(c int64, t time.Time) bool {
		return keep(c) && (from.IsZero() || !t.Before(from)) && (to.IsZero() || t.Before(to))
	}
	var all []entry
	for _, o := range s.orders {
		if in(o.CampaignID, o.UpdatedAt) {
			all = append(all, entry{o.ID, wire(o, business)})
		}
	}
	for _, ro := range s.raws {
		if in(ro.campaign, ro.updated) {
			all = append(all, entry{ro.id, json.RawMessage(ro.body)})
		}
	}
	slices.SortFunc(all, func(a, b entry) int { return cmp.Compare(a.id, b.id) })
	out := make([]json.RawMessage, len(all))
	for i, e := range all {
		out[i] = e.body
	}
	return out
}

func (s *YM) writePage(w http.ResponseWriter, all []json.RawMessage, offset, limit int) {
	start := min(offset, len(all))
	end := min(start+limit, len(all))
	paging := map[string]any{}
	if end < len(all) {
		paging["nextPageToken"] = pageToken(end)
	}
	orders := all[start:end]
	if orders == nil {
		orders = []json.RawMessage{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"orders": orders, "paging": paging})
}

func (s *YM) serveCampaignInfo(w http.ResponseWriter, campaign int64) {
	s.mu.Lock()
	s.requests[OpCampaign]++
	known := s.campaigns[campaign]
	s.mu.Unlock()
	if !known {
		writeError(w, http.StatusForbidden, "FORBIDDEN", "access to this campaign is denied")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"campaign": map[string]any{
		"id": campaign, "domain": "shop-" + strconv.FormatInt(campaign, 10), "placementType": "FBS",
		"business": map[string]any{"id": s.business, "name": "business"},
	}})
}

// order returns the campaign's order, nil when the campaign does not hold it.
// Called under mu.
func (s *YM) order(campaign, id int64) *Order {
	o := s.orders[id]
	if o == nil || o.CampaignID != campaign {
		return nil
	}
	return o
}

func (s *YM) serveGet(w http.ResponseWriter, campaign, id int64) {
	s.mu.Lock()
	s.requests[OpGet]++
	o := s.order(campaign, id)
	var body json.RawMessage
	if o != nil {
		body = wire(o, false)
	}
	s.mu.Unlock()
	if o == nil {
		writeError(w, http.StatusNotFound, "ORDER_NOT_FOUND", "order not found")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"order": body})
}

func (s *YM) serveStatus(w http.ResponseWriter, r *http.Request, campaign, id int64) {
	var body struct {
		Order *struct {
			Status    string `json:"status"`
			Substatus string `json:"substatus"`
		} `json:"order"`
	}
	err := json.NewDecoder(r.Body).Decode(&body)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests[OpStatus]++
	o := s.order(campaign, id)
	switch {
	case o == nil:
		writeError(w, http.StatusNotFound, "ORDER_NOT_FOUND", "order not found")
	case err != nil || body.Order == nil:
		s.refusedTrans[id]++
		writeError(w, http.StatusBadRequest, "BAD_REQUEST", "the body is not {\"order\":{\"status\",\"substatus\"}}")
	case body.Order.Status != StatusProcessing || body.Order.Substatus != SubReadyToShip:
		s.refusedTrans[id]++
		writeError(w, http.StatusBadRequest, "STATUS_NOT_ALLOWED", "only PROCESSING/READY_TO_SHIP is simulated")
	case o.Status != StatusProcessing || o.Substatus != SubStarted:
		s.refusedTrans[id]++
		writeError(w, http.StatusBadRequest, "STATUS_NOT_ALLOWED",
			fmt.Sprintf("the order is %s/%s: it cannot become %s/%s", o.Status, o.Substatus, body.Order.Status, body.Order.Substatus))
	default:
		o.Substatus, o.UpdatedAt = SubReadyToShip, time.Now()
		s.transitions[id]++
		writeJSON(w, http.StatusOK, map[string]any{"order": wire(o, false)})
	}
}

func (s *YM) serveExternalID(w http.ResponseWriter, r *http.Request, campaign, id int64) {
	var body struct {
		ExternalOrderID string `json:"externalOrderId"`
	}
	err := json.NewDecoder(r.Body).Decode(&body)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests[OpExternalID]++
	o := s.order(campaign, id)
	switch {
	case o == nil:
		writeError(w, http.StatusNotFound, "ORDER_NOT_FOUND", "order not found")
	case err != nil || strings.TrimSpace(body.ExternalOrderID) == "":
		s.refusedExtIDs[id]++
		writeError(w, http.StatusBadRequest, "BAD_REQUEST", "externalOrderId is required")
	case o.ExternalOrderID != "":
		s.refusedExtIDs[id]++
		writeError(w, http.StatusBadRequest, "EXTERNAL_ID_ALREADY_SET", "the order has an external id already")
	case o.Status != StatusProcessing || o.Substatus != SubStarted:
		s.refusedExtIDs[id]++
		writeError(w, http.StatusBadRequest, "STATUS_NOT_ALLOWED",
			fmt.Sprintf("the order is %s/%s: its external id can no longer be set", o.Status, o.Substatus))
	default:
		o.ExternalOrderID = body.ExternalOrderID
		s.externalIDs[id] = body.ExternalOrderID
		writeJSON(w, http.StatusOK, map[string]any{"status": "OK"})
	}
}

func (s *YM) serveStocks(w http.ResponseWriter, r *http.Request, campaign int64) {
	var body struct {
		SKUs []struct {
			SKU   string `json:"sku"`
			Items []struct {
				Count     json.Number `json:"count"`
				UpdatedAt string      `json:"updatedAt"`
			} `json:"items"`
		} `json:"skus"`
	}
	d := json.NewDecoder(r.Body)
	d.UseNumber()
	err := d.Decode(&body)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests[OpStocks]++
	bad := func(msg string) {
		s.badStocks++
		writeError(w, http.StatusBadRequest, "BAD_REQUEST", msg)
	}
	if !s.campaigns[campaign] {
		writeError(w, http.StatusForbidden, "FORBIDDEN", "access to this campaign is denied")
		return
	}
	if err != nil {
		bad("the body is not JSON: " + err.Error())
		return
	}
	if len(body.SKUs) == 0 || len(body.SKUs) > MaxStockSKUs {
		bad(fmt.Sprintf("skus must hold from 1 to %d entries", MaxStockSKUs))
		return
	}
	seen := map[string]bool{}
	values := make(map[string]StockValue, len(body.SKUs))
	now := time.Now()
	for i, e := range body.SKUs {
		if e.SKU == "" || seen[e.SKU] {
			bad(fmt.Sprintf("skus[%d].sku is empty or repeated", i))
			return
		}
		seen[e.SKU] = true
		if len(e.Items) != 1 {
			bad(fmt.Sprintf("skus[%d].items must hold exactly one item", i))
			return
		}
		n, err := strconv.ParseInt(string(e.Items[0].Count), 10, 64)
		if err != nil || n < 0 || n > maxCount {
			bad(fmt.Sprintf("skus[%d].items[0].count must be a whole number from 0 to %d", i, maxCount))
			return
		}
		at := now
		if e.Items[0].UpdatedAt != "" {
			if at, err = time.Parse(time.RFC3339Nano, e.Items[0].UpdatedAt); err != nil {
				bad(fmt.Sprintf("skus[%d].items[0].updatedAt is not ISO 8601 with an offset", i))
				return
			}
		}
		values[e.SKU] = StockValue{Count: n, UpdatedAt: at}
	}
	for k, v := range values {
		s.stocks[k] = v
	}
	s.stockCalls++
	writeJSON(w, http.StatusOK, map[string]any{"status": "OK"})
}

func optTime(v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	return time.Parse(time.RFC3339Nano, v)
}

// money is a price as Yandex sends it: a JSON number.
func money(d decimal.Decimal) json.RawMessage { return json.RawMessage(d.String()) }

// wire is an order as Yandex sends it: creationDate as DD-MM-YYYY HH:MM:SS in
// Moscow time, updatedAt ISO 8601 with an offset, prices as numbers, currency RUR.
// The cabinet listing adds campaignId. Called under mu.
func wire(o *Order, business bool) json.RawMessage {
	items := make([]map[string]any, len(o.Items))
	total := decimal.Zero
	for i, it := range o.Items {
		buyer := it.BuyerPrice
		if buyer.IsZero() {
			buyer = it.Price
		}
		items[i] = map[string]any{
			"id": o.ID*100 + int64(i), "offerId": it.OfferID, "offerName": it.OfferName, "count": it.Count,
			"price": money(it.Price), "buyerPrice": money(buyer),
		}
		total = total.Add(it.Price.Mul(decimal.NewFromInt(int64(it.Count))))
	}
	m := map[string]any{
		"id": o.ID, "status": o.Status, "substatus": o.Substatus, "currency": "RUR",
		"creationDate": o.CreationDate.In(moscow).Format("02-01-2006 15:04:05"),
		"updatedAt":    o.UpdatedAt.In(moscow).Format(time.RFC3339Nano),
		"itemsTotal":   money(total), "items": items, "fake": false,
	}
	if o.ExternalOrderID != "" {
		m["externalOrderId"] = o.ExternalOrderID
	}
	if business {
		m["campaignId"] = o.CampaignID
	}
	b, _ := json.Marshal(m)
	return b
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, map[string]any{"status": "ERROR", "errors": []map[string]string{{"code": code, "message": msg}}})
}
