package wbsim

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/ordersync/ordersync/internal/sim"
)

// The Wildberries FBS operations the simulator serves, as Request.Op and
// sim.Fault.Op name them.
const (
	OpNew          = "orders_new"     // GET /api/v3/orders/new
	OpOrders       = "orders"         // GET /api/v3/orders
	OpStatus       = "orders_status"  // POST /api/v3/orders/status
	OpSupplyCreate = "supply_create"  // POST /api/v3/supplies
	OpSupplies     = "supplies"       // GET /api/v3/supplies
	OpSupply       = "supply"         // GET /api/v3/supplies/{supplyId}
	OpSupplyAdd    = "supply_add"     // PATCH /api/marketplace/v3/supplies/{supplyId}/orders, or the deprecated PATCH /api/v3/supplies/{supplyId}/orders/{orderId}
	OpDeliver      = "supply_deliver" // PATCH /api/v3/supplies/{supplyId}/deliver
	OpOther        = "other"          // anything else: 404
)

// MaxWindow is the longest period GET /api/v3/orders accepts in one request.
const MaxWindow = 30 * 24 * time.Hour

// wbRetention is how far back GET /api/v3/orders reaches ("no more than 3 months").
const wbRetention = 90 * 24 * time.Hour

// Options configure a simulated Wildberries marketplace API.
type Options struct {
	// Token, when set, is the API token every request must carry in the
	// Authorization header (bare, or after "Bearer "); otherwise 401.
	Token string
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Logger receives a line per request at debug level; default discards.
	Logger *slog.Logger
}

// Order is an FBS assembly order held by the simulator. Prices are integers in
// hundredths of the currency, as Wildberries sends them; currency codes are ISO 4217
// numeric codes (643 = RUB).
type Order struct {
	ID                    int64
	Article               string // the seller's article: the merchant SKU
	Price                 int64  // in the currency of sale (CurrencyCode), × 100
	ConvertedPrice        int64  // in the seller's currency (ConvertedCurrencyCode), × 100
	CurrencyCode          int
	ConvertedCurrencyCode int
	CreatedAt             time.Time
	RID                   string // default derived from ID
	OrderUID              string
	WarehouseID           int64 // default 1
	CargoType             int   // 1, 2 or 3; default 1
	NmID, ChrtID          int64
	Skus                  []string
	Comment               string
	// SupplierStatus and WBStatus are what POST /api/v3/orders/status answers;
	// default "new" and "waiting". SetStatus changes them later.
	SupplierStatus string
	WBStatus       string
	// SupplyID is the supply the order is attached to, set when it is added to one.
	SupplyID string
	// Omit names JSON fields left out of the order in every listing: a missing
	// required field on demand.
	Omit []string
	// Raw, when set, is served verbatim in listings instead of the generated object:
	// a malformed order (an unreadable id, a price given as a string, …).
	Raw json.RawMessage
}

// Supply is a supply held by the simulator.
type Supply struct {
	ID          string
	Name        string
	Done        bool
	CreatedAt   time.Time
	ClosedAt    *time.Time
	CargoType   int   // 0 until the first order is added
	WarehouseID int64 // 0 until the first order is added
	Orders      []int64
}

// Request is one request the simulator received.
type Request struct {
	Op     string
	Method string
	Path   string
	Query  url.Values
	Body   []byte
	Status int       // the status answered
	At     time.Time // wall-clock arrival, whatever the simulator's clock says
}

// Wildberries simulates the Wildberries marketplace API for FBS orders: new orders,
// orders by period with next-pagination and the 30-day limit, statuses, supplies and
// adding orders to a supply (which moves them to "confirm"). It records every request
// and how many times each order was added to a supply (its acknowledgements). It is an
// http.Handler and safe for concurrent use.
//
// A request is handled in this order: route; token (401); an injected fault; the API.
type Wildberries struct {
	// Faults answer matching requests instead of the API, after the token is
	// checked. Op is one of the Op… names, or "" for any request. Status is answered
	// with Wildberries' error body (429: "too many requests"); RetryAfter, on a 429,
	// is sent as X-Ratelimit-Retry in whole seconds (rounded up), with
	// X-Ratelimit-Reset and X-Ratelimit-Limit, as Wildberries documents. Kind
	// sim.Malformed answers 200 with a truncated JSON body instead.
	Faults *sim.Faults

	token  string
	now    func() time.Time
	log    *slog.Logger
	server sim.Server

	mu        sync.Mutex
	orders    map[int64]*Order
	supplies  []*Supply
	supplySeq int
	requests  []Request
	acks      map[int64]int
	returns   wbReturns // goods returned and claims: returns.go
	stock     wbStock   // stocks and cards: wildberries_stock.go, wildberries_content.go
	report    wbReport  // the realization report: report.go
}

// New returns a simulator; it serves nothing until Start, or until it is
// mounted as an http.Handler.
func New(opts Options) *Wildberries {
	s := &Wildberries{
		Faults: sim.NewFaults(checkFault),
		token:  opts.Token,
		now:    opts.Now,
		log:    opts.Logger,
		orders: map[int64]*Order{},
		acks:   map[int64]int{},
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	return s
}

// Start listens on addr (":0" picks a port) and serves in the background.
func (s *Wildberries) Start(addr string) error {
	return s.server.Start("wildberries", addr, s, s.log)
}

// URL is the base URL after Start (what connectors.wildberries.base_url would be),
// "" before.
func (s *Wildberries) URL() string {
	return s.server.URL("")
}

// Close stops the server started by Start. It is safe to call twice and before Start.
func (s *Wildberries) Close() {
	s.server.Close()
}

// AddOrder adds an order, or replaces the order with the same ID. It panics on an
// ID that is not positive (a mistake in a test).
func (s *Wildberries) AddOrder(o Order) {
	if o.ID <= 0 {
		panic(fmt.Sprintf("sim: wildberries: order id %d must be positive", o.ID))
	}
	o.Skus = slices.Clone(o.Skus)
	o.Omit = slices.Clone(o.Omit)
	o.Raw = bytes.Clone(o.Raw)
	if o.SupplierStatus == "" {
		o.SupplierStatus = "new"
	}
	if o.WBStatus == "" {
		o.WBStatus = "waiting"
	}
	if o.WarehouseID == 0 {
		o.WarehouseID = 1
	}
	if o.CargoType == 0 {
		o.CargoType = 1
	}
	if o.RID == "" {
		o.RID = fmt.Sprintf("wb%030d", o.ID)
	}
	s.mu.Lock()
	s.orders[o.ID] = &o
	s.mu.Unlock()
}

// SetStatus changes an order's statuses. Any string is accepted, so a test can send
// a status the specification does not list. It panics on an unknown order.
func (s *Wildberries) SetStatus(id int64, supplierStatus, wbStatus string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.orders[id]
	if !ok {
		panic(fmt.Sprintf("sim: wildberries: no order %d", id))
	}
	o.SupplierStatus, o.WBStatus = supplierStatus, wbStatus
}

// Order returns a copy of an order.
func (s *Wildberries) Order(id int64) (Order, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.orders[id]
	if !ok {
		return Order{}, false
	}
	c := *o
	c.Skus, c.Omit, c.Raw = slices.Clone(o.Skus), slices.Clone(o.Omit), bytes.Clone(o.Raw)
	return c, true
}

// Acks is how many times the order was added to a supply (moved to "confirm" or
// between supplies): its acknowledgements. Exactly-once acknowledgement keeps it at 1.
func (s *Wildberries) Acks(id int64) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.acks[id]
}

// Acknowledged returns every order's acknowledgement count.
func (s *Wildberries) Acknowledged() map[int64]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[int64]int, len(s.acks))
	for k, v := range s.acks {
		out[k] = v
	}
	return out
}

// Supplies returns a snapshot of every supply, in creation order.
func (s *Wildberries) Supplies() []Supply {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Supply, len(s.supplies))
	for i, sp := range s.supplies {
		out[i] = *sp
		out[i].Orders = slices.Clone(sp.Orders)
	}
	return out
}

// Requests returns every request received so far, in arrival order.
func (s *Wildberries) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// RequestsOf returns the requests of one operation.
func (s *Wildberries) RequestsOf(op string) []Request {
	var out []Request
	for _, r := range s.Requests() {
		if r.Op == op {
			out = append(out, r)
		}
	}
	return out
}

// checkFault refuses what a Wildberries fault cannot be.
func checkFault(f sim.Fault) error {
	switch f.Op {
	case "", OpNew, OpOrders, OpStatus, OpSupplyCreate, OpSupplies, OpSupply, OpSupplyAdd, OpDeliver:
	case OpStocksUpdate, OpStocksGet, OpCardsList, OpReport:
	default:
		return fmt.Errorf("sim: wildberries: fault op %q is unknown", f.Op)
	}
	switch f.Kind {
	case "":
		if f.Status < 400 || f.Status > 599 {
			return fmt.Errorf("sim: wildberries: fault status %d is not an error status", f.Status)
		}
	case sim.Malformed:
		if f.Status != 0 {
			return fmt.Errorf("sim: wildberries: a malformed answer is 200, not %d", f.Status)
		}
	default:
		return fmt.Errorf("sim: wildberries: fault kind %q is unknown", f.Kind)
	}
	if f.ExternalID != "" || f.Delay != 0 || f.Hold != 0 {
		return fmt.Errorf("sim: wildberries: a fault has no ExternalID, Delay or Hold")
	}
	return nil
}

// ServeHTTP serves the API.
func (s *Wildberries) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 4<<20))
	if err != nil {
		return
	}
	op, vars := wbRoute(r.Method, r.URL.Path)
	s.mu.Lock()
	s.requests = append(s.requests, Request{
		Op: op, Method: r.Method, Path: r.URL.Path, Query: r.URL.Query(), Body: body, At: time.Now(),
	})
	rec := &wbRecorder{ResponseWriter: w, s: s, i: len(s.requests) - 1}
	s.mu.Unlock()
	s.log.DebugContext(r.Context(), "wildberries sim: request", "op", op, "method", r.Method, "path", r.URL.Path)

	if !s.authorized(r) {
		s.writeGatewayError(rec, http.StatusUnauthorized, "unauthorized",
			"token problem; token is malformed or does not match the seller", 0)
		return
	}
	if op == OpOther {
		s.writeError(rec, http.StatusNotFound, "NotFound", "Не найдено")
		return
	}
	if f, ok := s.Faults.Take(func(f sim.Fault) bool { return f.Matches(op, "") }); ok {
		switch {
		case f.Kind == sim.Malformed:
			rec.Header().Set("Content-Type", "application/json")
			rec.WriteHeader(http.StatusOK)
			io.WriteString(rec, cmp.Or(f.Body, `{"orders":[{"id":1,"article":"trunc`))
		case f.Body != "":
			rec.Header().Set("Content-Type", "application/json")
			rec.WriteHeader(f.Status)
			io.WriteString(rec, f.Body)
		default:
			title := strings.ToLower(http.StatusText(f.Status))
			s.writeGatewayError(rec, f.Status, title, "injected by the simulator", max(f.RetryAfter, 0))
		}
		return
	}
	switch op {
	case OpNew:
		s.serveNew(rec)
	case OpOrders:
		s.serveOrders(rec, r.URL.Query())
	case OpStatus:
		s.serveStatus(rec, body)
	case OpSupplyCreate:
		s.serveSupplyCreate(rec, body)
	case OpSupplies:
		s.serveSupplies(rec, r.URL.Query())
	case OpSupply:
		s.serveSupply(rec, vars[0])
	case OpSupplyAdd:
		if len(vars) == 2 { // the deprecated one-order method
			id, err := strconv.ParseInt(vars[1], 10, 64)
			if err != nil || id <= 0 {
				s.writeError(rec, http.StatusBadRequest, "IncorrectParameter", "Передан некорректный параметр: orderId")
				return
			}
			s.addToSupply(rec, vars[0], []int64{id})
			return
		}
		var req struct {
			Orders []int64 `json:"orders"`
		}
		if err := json.Unmarshal(body, &req); err != nil || len(req.Orders) < 1 || len(req.Orders) > 100 {
			s.writeError(rec, http.StatusBadRequest, "IncorrectRequestBody", "Некорректное тело запроса: orders — от 1 до 100 ID")
			return
		}
		s.addToSupply(rec, vars[0], req.Orders)
	case OpDeliver:
		s.serveDeliver(rec, vars[0])
	case OpStocksUpdate, OpStocksGet, OpCardsList:
		s.serveStockOp(rec, op, vars, body)
	case OpGoodsReturn, OpClaims:
		s.serveReturnsOp(rec, op, r.URL.Query())
	case OpReport:
		s.serveReport(rec, r.URL.Query())
	}
}

// wbRoute names the operation of a request and returns its path variables.
func wbRoute(method, path string) (string, []string) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	is := func(want ...string) bool {
		if len(parts) != len(want) {
			return false
		}
		for i, w := range want {
			if w != "*" && parts[i] != w {
				return false
			}
		}
		return true
	}
	switch {
	case method == http.MethodGet && is("api", "v3", "orders", "new"):
		return OpNew, nil
	case method == http.MethodGet && is("api", "v3", "orders"):
		return OpOrders, nil
	case method == http.MethodPost && is("api", "v3", "orders", "status"):
		return OpStatus, nil
	case method == http.MethodPost && is("api", "v3", "supplies"):
		return OpSupplyCreate, nil
	case method == http.MethodGet && is("api", "v3", "supplies"):
		return OpSupplies, nil
	case method == http.MethodGet && is("api", "v3", "supplies", "*"):
		return OpSupply, []string{parts[3]}
	case method == http.MethodPatch && is("api", "marketplace", "v3", "supplies", "*", "orders"):
		return OpSupplyAdd, []string{parts[4]}
	case method == http.MethodPatch && is("api", "v3", "supplies", "*", "orders", "*"):
		return OpSupplyAdd, []string{parts[3], parts[5]}
	case method == http.MethodPatch && is("api", "v3", "supplies", "*", "deliver"):
		return OpDeliver, []string{parts[3]}
	}
	if op, ok := wbReturnsRoute(method, parts); ok {
		return op, nil
	}
	if op, vars, ok := wbStockRoute(method, parts); ok {
		return op, vars
	}
	if op, ok := wbReportRoute(method, parts); ok {
		return op, nil
	}
	return OpOther, nil
}

func (s *Wildberries) authorized(r *http.Request) bool {
	if s.token == "" {
		return true
	}
	h := r.Header.Get("Authorization")
	return h == s.token || h == "Bearer "+s.token
}

// wbCancelledWB are the wbStatus values that mean the order is cancelled.
var wbCancelledWB = map[string]bool{
	"canceled": true, "canceled_by_client": true, "declined_by_client": true,
	"defect": true, "canceled_by_carrier": true,
}

func wbIsCancelled(o *Order) bool {
	return o.SupplierStatus == "cancel" || o.SupplierStatus == "cancel_carrier" || wbCancelledWB[o.WBStatus]
}

// serveNew answers GET /api/v3/orders/new: every order still new, by id.
func (s *Wildberries) serveNew(w http.ResponseWriter) {
	s.mu.Lock()
	var out []json.RawMessage
	for _, o := range s.sortedOrdersLocked() {
		if o.SupplierStatus == "new" && !wbIsCancelled(o) {
			out = append(out, wbOrderJSON(o, true))
		}
	}
	s.mu.Unlock()
	if out == nil {
		out = []json.RawMessage{}
	}
	s.writeJSON(w, http.StatusOK, map[string]any{"orders": out})
}

// serveOrders answers GET /api/v3/orders: orders created in [dateFrom, dateTo]
// (both inclusive, unix seconds, at most 30 days apart, no more than 3 months ago),
// ordered by id, limit at a time after the id given as next.
func (s *Wildberries) serveOrders(w http.ResponseWriter, q url.Values) {
	limit, err := strconv.Atoi(q.Get("limit"))
	if err != nil || limit < 1 || limit > 1000 {
		s.writeError(w, http.StatusBadRequest, "IncorrectParameter", "Передан некорректный параметр: limit — от 1 до 1000")
		return
	}
	next, err := strconv.ParseInt(q.Get("next"), 10, 64)
	if err != nil || next < 0 {
		s.writeError(w, http.StatusBadRequest, "IncorrectParameter", "Передан некорректный параметр: next")
		return
	}
	now := s.now()
	from, to := now.Add(-MaxWindow).Unix(), now.Unix()
	if v := q.Get("dateFrom"); v != "" {
		if from, err = strconv.ParseInt(v, 10, 64); err != nil {
			s.writeError(w, http.StatusBadRequest, "IncorrectParameter", "Передан некорректный параметр: dateFrom")
			return
		}
	}
	if v := q.Get("dateTo"); v != "" {
		if to, err = strconv.ParseInt(v, 10, 64); err != nil {
			s.writeError(w, http.StatusBadRequest, "IncorrectParameter", "Передан некорректный параметр: dateTo")
			return
		}
	}
	if to < from || to-from > int64(MaxWindow/time.Second) {
		s.writeError(w, http.StatusBadRequest, "IncorrectParameter", "Передан некорректный параметр: период — не более 30 дней")
		return
	}
	oldest := now.Add(-wbRetention).Unix()
	s.mu.Lock()
	out := []json.RawMessage{}
	last := next
	for _, o := range s.sortedOrdersLocked() {
		c := o.CreatedAt.Unix()
		if o.ID <= next || c < from || c > to || c < oldest {
			continue
		}
		if len(out) == limit {
			break
		}
		out = append(out, wbOrderJSON(o, false))
		last = o.ID
	}
	s.mu.Unlock()
	s.writeJSON(w, http.StatusOK, map[string]any{"next": last, "orders": out})
}

// serveStatus answers POST /api/v3/orders/status for the known ids among those asked.
func (s *Wildberries) serveStatus(w http.ResponseWriter, body []byte) {
	var req struct {
		Orders []int64 `json:"orders"`
	}
	if err := json.Unmarshal(body, &req); err != nil || len(req.Orders) < 1 || len(req.Orders) > 1000 {
		s.writeError(w, http.StatusBadRequest, "IncorrectRequestBody", "Некорректное тело запроса: orders — от 1 до 1000 ID")
		return
	}
	type status struct {
		ID             int64  `json:"id"`
		SupplierStatus string `json:"supplierStatus"`
		WBStatus       string `json:"wbStatus"`
	}
	out := []status{}
	s.mu.Lock()
	for _, id := range req.Orders {
		if o, ok := s.orders[id]; ok {
			out = append(out, status{ID: id, SupplierStatus: o.SupplierStatus, WBStatus: o.WBStatus})
		}
	}
	s.mu.Unlock()
	s.writeJSON(w, http.StatusOK, map[string]any{"orders": out})
}

func (s *Wildberries) serveSupplyCreate(w http.ResponseWriter, body []byte) {
	var req struct {
		Name *string `json:"name"`
	}
	if err := json.Unmarshal(body, &req); err != nil || req.Name == nil ||
		utf8.RuneCountInString(*req.Name) < 1 || utf8.RuneCountInString(*req.Name) > 128 {
		s.writeError(w, http.StatusBadRequest, "IncorrectRequestBody", "Некорректное тело запроса: name — от 1 до 128 символов")
		return
	}
	s.mu.Lock()
	s.supplySeq++
	sp := &Supply{ID: fmt.Sprintf("WB-GI-%d", 1000000+s.supplySeq), Name: *req.Name, CreatedAt: s.now().UTC()}
	s.supplies = append(s.supplies, sp)
	s.mu.Unlock()
	s.writeJSON(w, http.StatusCreated, map[string]string{"id": sp.ID})
}

type wbSupplyWire struct {
	ID                  string     `json:"id"`
	Done                bool       `json:"done"`
	CreatedAt           time.Time  `json:"createdAt"`
	ClosedAt            *time.Time `json:"closedAt"`
	ScanDt              *time.Time `json:"scanDt"`
	Name                string     `json:"name"`
	CargoType           int        `json:"cargoType"`
	DestinationOfficeID *int64     `json:"destinationOfficeId"`
}

func wbSupplyJSON(sp *Supply) wbSupplyWire {
	return wbSupplyWire{ID: sp.ID, Done: sp.Done, CreatedAt: sp.CreatedAt, ClosedAt: sp.ClosedAt, Name: sp.Name, CargoType: sp.CargoType}
}

// serveSupplies answers GET /api/v3/supplies: supplies in creation order, limit at a
// time after the position given as next.
func (s *Wildberries) serveSupplies(w http.ResponseWriter, q url.Values) {
	limit, err := strconv.Atoi(q.Get("limit"))
	if err != nil || limit < 1 || limit > 1000 {
		s.writeError(w, http.StatusBadRequest, "IncorrectParameter", "Передан некорректный параметр: limit — от 1 до 1000")
		return
	}
	next, err := strconv.ParseInt(q.Get("next"), 10, 64)
	if err != nil || next < 0 {
		s.writeError(w, http.StatusBadRequest, "IncorrectParameter", "Передан некорректный параметр: next")
		return
	}
	s.mu.Lock()
	out := []wbSupplyWire{}
	last := next
	for i := next; i < int64(len(s.supplies)) && len(out) < limit; i++ {
		out = append(out, wbSupplyJSON(s.supplies[i]))
		last = i + 1
	}
	s.mu.Unlock()
	s.writeJSON(w, http.StatusOK, map[string]any{"next": last, "supplies": out})
}

func (s *Wildberries) serveSupply(w http.ResponseWriter, id string) {
	s.mu.Lock()
	sp := s.supplyLocked(id)
	var out wbSupplyWire
	if sp != nil {
		out = wbSupplyJSON(sp)
	}
	s.mu.Unlock()
	if sp == nil {
		s.writeError(w, http.StatusNotFound, "NotFound", "Не найдено")
		return
	}
	s.writeJSON(w, http.StatusOK, out)
}

// addToSupply attaches orders to an open supply and moves new ones to "confirm"; an
// order in another open supply moves over. Either every order is added or none: 409
// when the supply is closed, an order is unknown, cancelled or already in delivery,
// or its cargo type or warehouse differs from the supply's.
func (s *Wildberries) addToSupply(w http.ResponseWriter, supplyID string, ids []int64) {
	s.mu.Lock()
	sp := s.supplyLocked(supplyID)
	if sp == nil {
		s.mu.Unlock()
		s.writeError(w, http.StatusNotFound, "NotFound", "Не найдено")
		return
	}
	refuse := func(why string) {
		s.mu.Unlock()
		s.writeError(w, http.StatusConflict, "FailedToAddSupplyOrder",
			"Не удалось закрепить сборочное задание за поставкой: "+why)
	}
	if sp.Done {
		refuse("поставка закрыта")
		return
	}
	cargo, wh := sp.CargoType, sp.WarehouseID
	for _, id := range ids {
		o, ok := s.orders[id]
		switch {
		case !ok:
			refuse(fmt.Sprintf("сборочное задание %d не найдено", id))
			return
		case wbIsCancelled(o):
			refuse(fmt.Sprintf("сборочное задание %d отменено", id))
			return
		case o.SupplierStatus != "new" && o.SupplierStatus != "confirm":
			refuse(fmt.Sprintf("сборочное задание %d в статусе %s", id, o.SupplierStatus))
			return
		case cargo != 0 && o.CargoType != cargo:
			refuse(fmt.Sprintf("габаритный тип сборочного задания %d (%d) отличается от типа поставки (%d)", id, o.CargoType, cargo))
			return
		case wh != 0 && o.WarehouseID != wh:
			refuse(fmt.Sprintf("сборочное задание %d поступило на другой склад", id))
			return
		}
		cargo, wh = o.CargoType, o.WarehouseID
	}
	sp.CargoType, sp.WarehouseID = cargo, wh
	for _, id := range ids {
		o := s.orders[id]
		if o.SupplyID != "" && o.SupplyID != sp.ID {
			if prev := s.supplyLocked(o.SupplyID); prev != nil {
				prev.Orders = slices.DeleteFunc(prev.Orders, func(x int64) bool { return x == id })
			}
		}
		if !slices.Contains(sp.Orders, id) {
			sp.Orders = append(sp.Orders, id)
		}
		o.SupplyID = sp.ID
		o.SupplierStatus = "confirm"
		s.acks[id]++
	}
	s.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// serveDeliver closes a supply and moves its orders to "complete".
func (s *Wildberries) serveDeliver(w http.ResponseWriter, id string) {
	s.mu.Lock()
	sp := s.supplyLocked(id)
	switch {
	case sp == nil:
		s.mu.Unlock()
		s.writeError(w, http.StatusNotFound, "NotFound", "Не найдено")
		return
	case sp.Done:
		s.mu.Unlock()
		s.writeError(w, http.StatusConflict, "SupplyNotOpen", "Поставка уже передана в доставку")
		return
	case len(sp.Orders) == 0:
		s.mu.Unlock()
		s.writeError(w, http.StatusConflict, "SupplyHasZeroOrders", "За поставкой не закреплено ни одного сборочного задания")
		return
	}
	now := s.now().UTC()
	sp.Done, sp.ClosedAt = true, &now
	for _, oid := range sp.Orders {
		if o := s.orders[oid]; o != nil && o.SupplierStatus == "confirm" {
			o.SupplierStatus = "complete"
		}
	}
	s.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (s *Wildberries) supplyLocked(id string) *Supply {
	for _, sp := range s.supplies {
		if sp.ID == id {
			return sp
		}
	}
	return nil
}

func (s *Wildberries) sortedOrdersLocked() []*Order {
	out := make([]*Order, 0, len(s.orders))
	for _, o := range s.orders {
		out = append(out, o)
	}
	slices.SortFunc(out, func(a, b *Order) int {
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	return out
}

// wbOrderJSON is an order as the listings send it: the OrderNew shape for
// /api/v3/orders/new (with the final and sale prices and the metadata lists), the
// Order shape for /api/v3/orders (with the supply id once attached).
func wbOrderJSON(o *Order, isNew bool) json.RawMessage {
	if o.Raw != nil {
		return bytes.Clone(o.Raw)
	}
	skus := o.Skus
	if skus == nil {
		skus = []string{}
	}
	m := map[string]any{
		"id":                    o.ID,
		"rid":                   o.RID,
		"orderUid":              o.OrderUID,
		"article":               o.Article,
		"colorCode":             "",
		"createdAt":             o.CreatedAt.UTC().Format(time.RFC3339),
		"warehouseId":           o.WarehouseID,
		"officeId":              o.WarehouseID,
		"offices":               []string{},
		"nmId":                  o.NmID,
		"chrtId":                o.ChrtID,
		"price":                 o.Price,
		"convertedPrice":        o.ConvertedPrice,
		"currencyCode":          o.CurrencyCode,
		"convertedCurrencyCode": o.ConvertedCurrencyCode,
		"cargoType":             o.CargoType,
		"deliveryType":          "fbs",
		"skus":                  skus,
		"comment":               o.Comment,
		"isZeroOrder":           false,
		"options":               map[string]bool{"isB2b": false},
		"address":               nil,
		"scanPrice":             nil,
	}
	if isNew {
		m["finalPrice"] = o.Price
		m["convertedFinalPrice"] = o.ConvertedPrice
		m["salePrice"] = o.Price
		m["requiredMeta"] = []string{}
		m["optionalMeta"] = []string{}
	} else if o.SupplyID != "" {
		m["supplyId"] = o.SupplyID
	}
	for _, f := range o.Omit {
		delete(m, f)
	}
	b, err := json.Marshal(m)
	if err != nil {
		panic("sim: wildberries: encode order: " + err.Error())
	}
	return b
}

func (s *Wildberries) writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic("sim: wildberries: encode answer: " + err.Error())
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
}

// writeError answers with the API's error body, {"code","message"}.
func (s *Wildberries) writeError(w http.ResponseWriter, status int, code, message string) {
	s.writeJSON(w, status, map[string]string{"code": code, "message": message})
}

// writeGatewayError answers as Wildberries' gateway does for 401 and 429: a
// {title, detail, code, requestId, origin, status, statusText, timestamp} body; a
// 429 carries the X-Ratelimit-* headers.
func (s *Wildberries) writeGatewayError(w http.ResponseWriter, status int, title, detail string, retryAfter time.Duration) {
	if status == http.StatusTooManyRequests {
		secs := int64(math.Ceil(retryAfter.Seconds()))
		w.Header().Set("X-Ratelimit-Retry", strconv.FormatInt(secs, 10))
		w.Header().Set("X-Ratelimit-Reset", strconv.FormatInt(max(secs, 1), 10))
		w.Header().Set("X-Ratelimit-Limit", "20")
	}
	s.writeJSON(w, status, map[string]any{
		"title":      title,
		"detail":     detail,
		"code":       "sim-" + strconv.Itoa(status),
		"requestId":  fmt.Sprintf("sim%029d", s.now().UnixNano()),
		"origin":     "ordersync-sim",
		"status":     status,
		"statusText": http.StatusText(status),
		"timestamp":  s.now().UTC().Format(time.RFC3339),
	})
}

// wbRecorder writes the status answered into the request's record before it is sent.
type wbRecorder struct {
	http.ResponseWriter
	s *Wildberries
	i int
}

func (r *wbRecorder) WriteHeader(status int) {
	r.s.mu.Lock()
	r.s.requests[r.i].Status = status
	r.s.mu.Unlock()
	r.ResponseWriter.WriteHeader(status)
}
