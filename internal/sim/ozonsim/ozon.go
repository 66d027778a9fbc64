package ozonsim

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/shopspring/decimal"

	"github.com/ordersync/ordersync/internal/sim"
)

// The Ozon Seller API paths the simulator serves.
const (
	PathUnfulfilledV3 = "/v3/posting/fbs/unfulfilled/list"
	PathUnfulfilledV4 = "/v4/posting/fbs/unfulfilled/list"
	PathListV3        = "/v3/posting/fbs/list"
	PathListV4        = "/v4/posting/fbs/list"
	PathGet           = "/v3/posting/fbs/get"
	PathShip          = "/v4/posting/fbs/ship"
)

// MaxPeriod is the longest period a list accepts: Ozon documents one year.
const MaxPeriod = 365 * 24 * time.Hour

// Options configure a simulated Ozon Seller API.
type Options struct {
	// ClientID and APIKey are the Client-Id and Api-Key every request must carry;
	// an empty APIKey accepts any pair.
	ClientID, APIKey string
	// BadKeyStatus is the status a wrong Client-Id/Api-Key pair is answered with,
	// body {"code": 5, "message": "Invalid Api-Key, please check the key and try
	// again"}. Default 404: that is what Ozon answers, by public reports of live
	// calls. A request without the headers is answered 401 (code 16), a Client-Id
	// that is not a number 400 (code 3).
	BadKeyStatus int
	// AmountAsNumber writes v4 price amounts as JSON numbers instead of the strings
	// the published v4 types show ({"amount": "1530", …}).
	AmountAsNumber bool
	// Now is the clock (status change times); default time.Now.
	Now func() time.Time
	// Logger receives a line per request at debug level; default discards.
	Logger *slog.Logger
}

// Product is one product of a posting.
type Product struct {
	SKU      int64 // Ozon's SKU; AddPosting numbers products without one
	OfferID  string
	Name     string
	Quantity int
	Price    decimal.Decimal
	Currency string // currency_code; default RUB
}

// Customer is the buyer, when Ozon shares it (rFBS); FBS postings carry none.
type Customer struct {
	Name, Phone, Email string
}

// Posting is one FBS posting held by the simulator.
type Posting struct {
	PostingNumber string
	OrderID       int64  // default: derived from the posting number
	OrderNumber   string // default: the posting number less its last part
	Status        string // default awaiting_packaging
	InProcessAt   time.Time
	// ShipmentDate is the cutoff, the time by which Ozon wants the posting
	// assembled; default InProcessAt + 24h. NoCutoff serves it as null, as for a
	// posting whose seller still has to set it.
	ShipmentDate time.Time
	NoCutoff     bool
	Customer     *Customer
	// CancelReason and CancelInitiator fill "cancellation" of a cancelled posting.
	CancelReason, CancelInitiator string
	Products                      []Product
	// StatusChangedAt is when the status last changed (the lists'
	// last_changed_status_date filter); AddPosting and SetStatus set it to Now
	// when zero.
	StatusChangedAt time.Time
	// Patch replaces top-level fields of the posting in every answer, to serve what
	// the documentation does not promise: a nil value removes the field, so
	// {"in_process_at": nil} serves a posting without it and {"posting_number":
	// json.RawMessage(`12`)} one whose number is not a string.
	Patch map[string]json.RawMessage
}

// Request is one request the simulator answered.
type Request struct {
	Path   string
	Status int
	Body   []byte // as received
	At     time.Time
}

// Ozon is a simulated Ozon Seller API serving the FBS posting lists in v3
// (limit/offset, prices as strings) and v4 (cursor, prices as objects),
// /v3/posting/fbs/get, /v4/posting/fbs/ship and /v2/products/stocks (PathStocks,
// with its limits), with Ozon's headers and error body
// {"code", "message", "details"}. Requests are decoded strictly, refusing fields a
// version does not have, so a client mixing up v3 and v4 is caught. It records
// every request and every posting shipped. It is an http.Handler and safe for
// concurrent use.
//
// A request is handled in this order: method (405), credentials, an injected failure
// (Faults), a malformed page (Faults of kind sim.Malformed, lists only), then the
// method.
type Ozon struct {
	// Faults answer authorised requests instead of the API. Op is a path (PathShip,
	// …) or "" for any. Status is answered with Ozon's error body (code 8 for 429,
	// 13 for 5xx), RetryAfter as a Retry-After header in whole seconds. Kind
	// sim.Malformed answers a list (PathListV3, …) 200 with half a page: After list
	// requests are answered properly first.
	Faults *sim.Faults

	clientID, apiKey string
	badKeyStatus     int
	amountAsNumber   bool
	now              func() time.Time
	log              *slog.Logger
	server           sim.Server

	mu           sync.Mutex
	postings     map[string]*Posting
	nextSKU      int64
	shipped      map[string]int
	shipsRefused int
	requests     []Request
	authFailures int
	// PathReturns (returns.go)
	returns       ozonReturns
	returnsServed int
	stocks        ozonStocks  // PathStocks (ozon_stock.go)
	finance       ozonFinance // PathTransactionList, PathTransactionTotals (finance.go)
}

// New returns a simulator; it serves nothing until Start, or until it is
// mounted as an http.Handler.
func New(opts Options) *Ozon {
	s := &Ozon{
		Faults:         sim.NewFaults(checkFault),
		clientID:       opts.ClientID,
		apiKey:         opts.APIKey,
		badKeyStatus:   opts.BadKeyStatus,
		amountAsNumber: opts.AmountAsNumber,
		now:            opts.Now,
		log:            opts.Logger,
		postings:       map[string]*Posting{},
		nextSKU:        100000001,
		shipped:        map[string]int{},
	}
	if s.badKeyStatus == 0 {
		s.badKeyStatus = http.StatusNotFound
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
func (s *Ozon) Start(addr string) error {
	return s.server.Start("ozon", addr, s, s.log)
}

// URL is the API's base URL after Start (what connectors.ozon.base_url would be),
// "" before.
func (s *Ozon) URL() string {
	return s.server.URL("")
}

// Close stops the server started by Start. It is safe to call twice and before Start.
func (s *Ozon) Close() {
	s.server.Close()
}

// AddPosting adds a posting, filling the defaults documented on Posting. It
// panics on a posting without a number or one already held (a mistake in a test).
func (s *Ozon) AddPosting(p Posting) {
	if p.PostingNumber == "" {
		panic("sim: ozon: AddPosting without a posting number")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.postings[p.PostingNumber]; dup {
		panic("sim: ozon: posting " + p.PostingNumber + " added twice")
	}
	if p.Status == "" {
		p.Status = "awaiting_packaging"
	}
	if p.OrderNumber == "" {
		p.OrderNumber = p.PostingNumber
		if i := strings.LastIndexByte(p.PostingNumber, '-'); i > 0 {
			p.OrderNumber = p.PostingNumber[:i]
		}
	}
	if p.OrderID == 0 {
		digits := strings.Map(func(r rune) rune {
			if r >= '0' && r <= '9' {
				return r
			}
			return -1
		}, p.OrderNumber)
		if n, err := strconv.ParseInt(strings.TrimLeft(digits, "0"), 10, 64); err == nil && len(digits) <= 18 {
			p.OrderID = n
		}
	}
	if p.InProcessAt.IsZero() {
		p.InProcessAt = s.now()
	}
	if p.ShipmentDate.IsZero() {
		p.ShipmentDate = p.InProcessAt.Add(24 * time.Hour)
	}
	if p.StatusChangedAt.IsZero() {
		p.StatusChangedAt = s.now()
	}
	p.Products = slices.Clone(p.Products)
	for i := range p.Products {
		if p.Products[i].SKU == 0 {
			p.Products[i].SKU = s.nextSKU
			s.nextSKU++
		}
		if p.Products[i].Currency == "" {
			p.Products[i].Currency = "RUB"
		}
	}
	p.Patch = maps.Clone(p.Patch)
	s.postings[p.PostingNumber] = &p
}

// SetStatus changes a posting's status, as Ozon does when the posting moves on or
// is cancelled, and records the change time.
func (s *Ozon) SetStatus(postingNumber, status string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.postings[postingNumber]
	if !ok {
		return fmt.Errorf("sim: ozon: no posting %s", postingNumber)
	}
	p.Status, p.StatusChangedAt = status, s.now()
	return nil
}

// Cancel cancels a posting with a reason and its initiator.
func (s *Ozon) Cancel(postingNumber, reason, initiator string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.postings[postingNumber]
	if !ok {
		return fmt.Errorf("sim: ozon: no posting %s", postingNumber)
	}
	p.Status, p.StatusChangedAt = "cancelled", s.now()
	p.CancelReason, p.CancelInitiator = reason, initiator
	return nil
}

// Posting returns a copy of a posting.
func (s *Ozon) Posting(postingNumber string) (Posting, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.postings[postingNumber]
	if !ok {
		return Posting{}, false
	}
	c := *p
	c.Products = slices.Clone(p.Products)
	c.Patch = maps.Clone(p.Patch)
	return c, true
}

// Shipped is how many times a posting was shipped (/v4/posting/fbs/ship accepted):
// the record of acknowledgements.
func (s *Ozon) Shipped(postingNumber string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.shipped[postingNumber]
}

// Shipments returns the acknowledgements per posting.
func (s *Ozon) Shipments() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.shipped)
}

// ShipsRefused counts ship requests refused for the posting's state or products.
func (s *Ozon) ShipsRefused() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.shipsRefused
}

// AuthFailures counts requests refused for their credentials.
func (s *Ozon) AuthFailures() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.authFailures
}

// Requests returns every request answered, in arrival order.
func (s *Ozon) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.Clone(s.requests)
	for i := range out {
		out[i].Body = slices.Clone(out[i].Body)
	}
	return out
}

// RequestsTo returns the requests to one path, in arrival order.
func (s *Ozon) RequestsTo(path string) []Request {
	var out []Request
	for _, r := range s.Requests() {
		if r.Path == path {
			out = append(out, r)
		}
	}
	return out
}

// ozonRecorder records the status a handler answered.
type ozonRecorder struct {
	http.ResponseWriter
	status int
}

func (r *ozonRecorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
	r.ResponseWriter.WriteHeader(status)
}

func (r *ozonRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

func (s *Ozon) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 4<<20))
	if err != nil {
		return // the client went away
	}
	at := s.now()
	rec := &ozonRecorder{ResponseWriter: w}
	defer func() {
		s.mu.Lock()
		s.requests = append(s.requests, Request{Path: r.URL.Path, Status: rec.status, Body: body, At: at})
		s.mu.Unlock()
		s.log.DebugContext(r.Context(), "ozon sim: request", "path", r.URL.Path, "status", rec.status)
	}()
	s.serve(rec, r, body)
}

func (s *Ozon) serve(w http.ResponseWriter, r *http.Request, body []byte) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		ozonWriteError(w, http.StatusMethodNotAllowed, 12, "Method Not Allowed")
		return
	}
	if !s.authorize(w, r) {
		return
	}
	path := r.URL.Path
	if path == PathStocks {
		s.countStockRequest()
	}
	if f, ok := s.Faults.Take(func(f sim.Fault) bool { return f.Kind == "" && f.Matches(path, "") }); ok {
		if v, ok := f.RetryAfterSeconds(); ok {
			w.Header().Set("Retry-After", v)
		}
		if f.Body != "" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(f.Status)
			io.WriteString(w, f.Body)
			return
		}
		code, msg := 3, "injected failure"
		switch {
		case f.Status == http.StatusTooManyRequests:
			code, msg = 8, "You have reached request rate limit per second"
		case f.Status >= 500:
			code, msg = 13, "Internal error"
		}
		ozonWriteError(w, f.Status, code, msg)
		return
	}
	if ozonList(path) {
		if f, ok := s.Faults.Take(func(f sim.Fault) bool { return f.Kind == sim.Malformed && f.Matches(path, "") }); ok {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			switch {
			case f.Body != "":
				io.WriteString(w, f.Body)
			case path == PathListV3 || path == PathUnfulfilledV3:
				io.WriteString(w, `{"result":{"postings":[{"posting_number":"`)
			default:
				io.WriteString(w, `{"postings":[{"posting_number":"`)
			}
			return
		}
	}
	switch path {
	case PathUnfulfilledV3:
		s.serveListV3(w, body, true)
	case PathListV3:
		s.serveListV3(w, body, false)
	case PathUnfulfilledV4:
		s.serveListV4(w, body, true)
	case PathListV4:
		s.serveListV4(w, body, false)
	case PathGet:
		s.serveGet(w, body)
	case PathShip:
		s.serveShip(w, body)
	case PathStocks:
		s.serveStocks(w, body)
	case PathReturns:
		s.serveReturns(w, body)
	case PathTransactionList, PathTransactionTotals:
		s.serveFinance(w, path, body)
	default:
		ozonWriteError(w, http.StatusNotFound, 5, "Not Found")
	}
}

// authorize checks Client-Id and Api-Key as Ozon does and answers a refusal.
func (s *Ozon) authorize(w http.ResponseWriter, r *http.Request) bool {
	if s.apiKey == "" {
		return true
	}
	id, key := r.Header.Get("Client-Id"), r.Header.Get("Api-Key")
	status, code, msg := 0, 0, ""
	switch {
	case id == "" || key == "":
		status, code, msg = http.StatusUnauthorized, 16, "Client-Id and Api-Key headers are required"
	case !ozonDigits(id):
		status, code, msg = http.StatusBadRequest, 3, "Client-Id header value should be positive integer"
	case id != s.clientID || key != s.apiKey:
		status, code, msg = s.badKeyStatus, 5, "Invalid Api-Key, please check the key and try again"
	default:
		return true
	}
	s.mu.Lock()
	s.authFailures++
	s.mu.Unlock()
	ozonWriteError(w, status, code, msg)
	return false
}

func ozonDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// ozonList says whether path is one of the posting lists.
func ozonList(path string) bool {
	switch path {
	case PathUnfulfilledV3, PathUnfulfilledV4, PathListV3, PathListV4:
		return true
	}
	return false
}

// checkFault refuses what an Ozon fault cannot be.
func checkFault(f sim.Fault) error {
	switch {
	case f.Kind == sim.Malformed:
		if f.Op != "" && !ozonList(f.Op) {
			return fmt.Errorf("sim: ozon: a malformed page is for a list, not %s", f.Op)
		}
		if f.Status != 0 || f.RetryAfter != 0 {
			return fmt.Errorf("sim: ozon: a malformed page is answered 200, without Retry-After")
		}
	case f.Kind != "":
		return fmt.Errorf("sim: ozon: fault kind %q is unknown", f.Kind)
	case f.Status < 400:
		return fmt.Errorf("sim: ozon: fault status %d is not an error status", f.Status)
	}
	if f.ExternalID != "" || f.Delay != 0 || f.Hold != 0 {
		return fmt.Errorf("sim: ozon: a fault has no ExternalID, Delay or Hold")
	}
	return nil
}

// Request bodies, field for field as documented; decoding refuses anything else.

type ozonWith struct {
	AnalyticsData    bool `json:"analytics_data"`
	Barcodes         bool `json:"barcodes"`
	FinancialData    bool `json:"financial_data"`
	LegalInfo        bool `json:"legal_info"`
	Translit         bool `json:"translit"`
	ProductExemplars bool `json:"product_exemplars"`
	RelatedPostings  bool `json:"related_postings"`
}

type ozonPeriod struct {
	From string `json:"from"`
	To   string `json:"to"`
}

type ozonFilterV3 struct {
	// unfulfilled
	CutoffFrom         string `json:"cutoff_from"`
	CutoffTo           string `json:"cutoff_to"`
	DeliveringDateFrom string `json:"delivering_date_from"`
	DeliveringDateTo   string `json:"delivering_date_to"`
	// list
	Since         string      `json:"since"`
	To            string      `json:"to"`
	OrderID       int64       `json:"order_id"`
	LastChanged   *ozonPeriod `json:"last_changed_status_date"`
	FBPFilter     string      `json:"fbpFilter"`
	Status        string      `json:"status"`
	IsQuantum     bool        `json:"is_quantum"`
	DeliveryMeths []any       `json:"delivery_method_id"`
	ProviderIDs   []any       `json:"provider_id"`
	WarehouseIDs  []any       `json:"warehouse_id"`
}

type ozonListV3Request struct {
	Dir    string        `json:"dir"`
	Filter *ozonFilterV3 `json:"filter"`
	Limit  *int          `json:"limit"`
	Offset *int          `json:"offset"`
	With   *ozonWith     `json:"with"`
}

type ozonFilterV4 struct {
	CutoffFrom          string      `json:"cutoff_from"`
	CutoffTo            string      `json:"cutoff_to"`
	DeliveringDateFrom  string      `json:"delivering_date_from"`
	DeliveringDateTo    string      `json:"delivering_date_to"`
	Since               string      `json:"since"`
	To                  string      `json:"to"`
	OrderID             int64       `json:"order_id"`
	OrderNumbers        []string    `json:"order_numbers"`
	LastChanged         *ozonPeriod `json:"last_changed_status_date"`
	Statuses            []string    `json:"statuses"`
	DeliveryMethodIDs   []string    `json:"delivery_method_ids"`
	ProviderIDs         []string    `json:"provider_ids"`
	WarehouseIDs        []string    `json:"warehouse_ids"`
	IntegrationTypeFlow []string    `json:"integration_type_flow"`
	IsBlrTraceable      bool        `json:"is_blr_traceable"`
}

type ozonListV4Request struct {
	Cursor   string        `json:"cursor"`
	Filter   *ozonFilterV4 `json:"filter"`
	Limit    *int          `json:"limit"`
	SortDir  string        `json:"sort_dir"`
	Translit bool          `json:"translit"`
	With     *ozonWith     `json:"with"`
}

// ozonQuery is a list request as both versions mean it.
type ozonQuery struct {
	unfulfilled          bool
	cutoffFrom, cutoffTo time.Time
	hasCutoff            bool
	hasDelivering        bool
	since, to            time.Time
	statuses             []string
	orderID              int64
	changedFrom          time.Time
	changedTo            time.Time
	hasChanged           bool
	desc                 bool
}

func (s *Ozon) serveListV3(w http.ResponseWriter, body []byte, unfulfilled bool) {
	var req ozonListV3Request
	if err := ozonDecode(body, &req); err != nil {
		ozonWriteError(w, http.StatusBadRequest, 3, err.Error())
		return
	}
	switch {
	case req.Filter == nil:
		ozonWriteError(w, http.StatusBadRequest, 3, "filter is required")
		return
	case req.Limit == nil || *req.Limit < 1 || *req.Limit > 1000:
		ozonWriteError(w, http.StatusBadRequest, 3, "limit must be between 1 and 1000")
		return
	case req.Offset == nil || *req.Offset < 0:
		ozonWriteError(w, http.StatusBadRequest, 3, "offset is required and must not be negative")
		return
	}
	f := req.Filter
	var statuses []string
	if f.Status != "" {
		statuses = []string{f.Status}
	}
	q, msg := ozonMakeQuery(unfulfilled, f.CutoffFrom, f.CutoffTo, f.DeliveringDateFrom, f.DeliveringDateTo,
		f.Since, f.To, f.LastChanged, statuses, f.OrderID, req.Dir)
	if msg != "" {
		ozonWriteError(w, http.StatusBadRequest, 3, msg)
		return
	}
	s.mu.Lock()
	all := s.selectLocked(q)
	offset, limit := *req.Offset, *req.Limit
	page := []json.RawMessage{}
	for i := offset; i < len(all) && i < offset+limit; i++ {
		page = append(page, s.postingJSON(all[i], false))
	}
	total := len(all)
	s.mu.Unlock()
	result := map[string]any{"postings": page}
	if unfulfilled {
		result["count"] = total
	} else {
		result["has_next"] = offset+limit < total
	}
	ozonWriteJSON(w, http.StatusOK, map[string]any{"result": result})
}

func (s *Ozon) serveListV4(w http.ResponseWriter, body []byte, unfulfilled bool) {
	var req ozonListV4Request
	if err := ozonDecode(body, &req); err != nil {
		ozonWriteError(w, http.StatusBadRequest, 3, err.Error())
		return
	}
	if req.Filter == nil {
		ozonWriteError(w, http.StatusBadRequest, 3, "filter is required")
		return
	}
	if req.Limit == nil || *req.Limit < 1 || *req.Limit > 100 {
		ozonWriteError(w, http.StatusBadRequest, 3, "limit must be between 1 and 100")
		return
	}
	f := req.Filter
	q, msg := ozonMakeQuery(unfulfilled, f.CutoffFrom, f.CutoffTo, f.DeliveringDateFrom, f.DeliveringDateTo,
		f.Since, f.To, f.LastChanged, f.Statuses, f.OrderID, req.SortDir)
	if msg != "" {
		ozonWriteError(w, http.StatusBadRequest, 3, msg)
		return
	}
	var after *ozonCursor
	if req.Cursor != "" {
		c, err := ozonDecodeCursor(req.Cursor)
		if err != nil {
			ozonWriteError(w, http.StatusBadRequest, 3, "invalid cursor")
			return
		}
		after = &c
	}
	s.mu.Lock()
	all := s.selectLocked(q)
	start := 0
	if after != nil {
		start = len(all)
		for i, p := range all {
			if ozonAfter(p, *after, q.desc) {
				start = i
				break
			}
		}
	}
	end := min(start+*req.Limit, len(all))
	page := []json.RawMessage{}
	for _, p := range all[start:end] {
		page = append(page, s.postingJSON(p, true))
	}
	resp := map[string]any{"postings": page, "has_next": end < len(all), "cursor": ""}
	if unfulfilled {
		resp["count"] = len(all)
	}
	if end < len(all) && end > start {
		last := all[end-1]
		resp["cursor"] = ozonEncodeCursor(ozonCursor{At: last.InProcessAt.UnixNano(), Number: last.PostingNumber})
	}
	s.mu.Unlock()
	ozonWriteJSON(w, http.StatusOK, resp)
}

func ozonMakeQuery(unfulfilled bool, cutoffFrom, cutoffTo, delivFrom, delivTo, since, to string,
	changed *ozonPeriod, statuses []string, orderID int64, dir string) (ozonQuery, string) {
	q := ozonQuery{unfulfilled: unfulfilled, statuses: statuses, orderID: orderID}
	switch strings.ToUpper(dir) {
	case "", "ASC":
	case "DESC":
		q.desc = true
	default:
		return q, fmt.Sprintf("unknown sort direction %q", dir)
	}
	var err error
	period := func(name string, a, b string) (time.Time, time.Time, string) {
		if a == "" || b == "" {
			return time.Time{}, time.Time{}, name + "_from and " + name + "_to are both required"
		}
		ta, err1 := time.Parse(time.RFC3339Nano, a)
		tb, err2 := time.Parse(time.RFC3339Nano, b)
		switch {
		case err1 != nil || err2 != nil:
			return ta, tb, name + ": not a date-time"
		case tb.Before(ta):
			return ta, tb, name + ": the period ends before it starts"
		case tb.Sub(ta) > MaxPeriod:
			return ta, tb, name + ": the period must not be longer than one year"
		}
		return ta, tb, ""
	}
	if unfulfilled {
		cut := cutoffFrom != "" || cutoffTo != ""
		deliv := delivFrom != "" || delivTo != ""
		if since != "" || to != "" {
			return q, "since and to are not filters of the unfulfilled list"
		}
		switch {
		case cut && deliv:
			return q, "use either the cutoff or the delivering_date filter, not both"
		case !cut && !deliv:
			return q, "the cutoff or the delivering_date filter is required"
		case cut:
			var msg string
			if q.cutoffFrom, q.cutoffTo, msg = period("cutoff", cutoffFrom, cutoffTo); msg != "" {
				return q, msg
			}
			q.hasCutoff = true
		default:
			var msg string
			if _, _, msg = period("delivering_date", delivFrom, delivTo); msg != "" {
				return q, msg
			}
			q.hasDelivering = true
		}
	} else {
		if cutoffFrom != "" || cutoffTo != "" || delivFrom != "" || delivTo != "" {
			return q, "cutoff and delivering_date are not filters of this list"
		}
		if since == "" || to == "" {
			return q, "filter.since and filter.to are required"
		}
		var msg string
		if q.since, q.to, msg = period("since/to", since, to); msg != "" {
			return q, msg
		}
	}
	if changed != nil && (changed.From != "" || changed.To != "") {
		q.hasChanged = true
		if changed.From != "" {
			if q.changedFrom, err = time.Parse(time.RFC3339Nano, changed.From); err != nil {
				return q, "last_changed_status_date.from: not a date-time"
			}
		}
		if changed.To != "" {
			if q.changedTo, err = time.Parse(time.RFC3339Nano, changed.To); err != nil {
				return q, "last_changed_status_date.to: not a date-time"
			}
		}
	}
	return q, ""
}

// selectLocked returns the postings a query matches, sorted by in_process_at and
// posting number.
func (s *Ozon) selectLocked(q ozonQuery) []*Posting {
	var out []*Posting
	for _, p := range s.postings {
		switch {
		case q.unfulfilled && p.Status == "delivered":
			continue
		case q.hasCutoff && (p.NoCutoff || p.ShipmentDate.Before(q.cutoffFrom) || p.ShipmentDate.After(q.cutoffTo)):
			continue
		case q.hasDelivering:
			continue // the simulator keeps no delivering dates
		case !q.unfulfilled && (p.InProcessAt.Before(q.since) || p.InProcessAt.After(q.to)):
			continue
		case len(q.statuses) > 0 && !slices.Contains(q.statuses, p.Status):
			continue
		case q.orderID != 0 && p.OrderID != q.orderID:
			continue
		case q.hasChanged && !q.changedFrom.IsZero() && p.StatusChangedAt.Before(q.changedFrom):
			continue
		case q.hasChanged && !q.changedTo.IsZero() && p.StatusChangedAt.After(q.changedTo):
			continue
		}
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b *Posting) int {
		c := a.InProcessAt.Compare(b.InProcessAt)
		if c == 0 {
			c = strings.Compare(a.PostingNumber, b.PostingNumber)
		}
		if q.desc {
			c = -c
		}
		return c
	})
	return out
}

type ozonCursor struct {
	At     int64  `json:"t"`
	Number string `json:"n"`
}

func ozonEncodeCursor(c ozonCursor) string {
	b, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(b)
}

func ozonDecodeCursor(s string) (ozonCursor, error) {
	var c ozonCursor
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return c, err
	}
	if err := json.Unmarshal(b, &c); err != nil || c.Number == "" {
		return c, errors.New("invalid cursor")
	}
	return c, nil
}

// ozonAfter reports whether p sorts after the cursor's posting.
func ozonAfter(p *Posting, c ozonCursor, desc bool) bool {
	at := p.InProcessAt.UnixNano()
	cmp := 0
	switch {
	case at < c.At:
		cmp = -1
	case at > c.At:
		cmp = 1
	default:
		cmp = strings.Compare(p.PostingNumber, c.Number)
	}
	if desc {
		cmp = -cmp
	}
	return cmp > 0
}

func (s *Ozon) serveGet(w http.ResponseWriter, body []byte) {
	var req struct {
		PostingNumber string    `json:"posting_number"`
		With          *ozonWith `json:"with"`
	}
	if err := ozonDecode(body, &req); err != nil {
		ozonWriteError(w, http.StatusBadRequest, 3, err.Error())
		return
	}
	if req.PostingNumber == "" {
		ozonWriteError(w, http.StatusBadRequest, 3, "posting_number is required")
		return
	}
	s.mu.Lock()
	p, ok := s.postings[req.PostingNumber]
	var raw json.RawMessage
	if ok {
		raw = s.postingJSON(p, false)
	}
	s.mu.Unlock()
	if !ok {
		ozonWriteError(w, http.StatusNotFound, 5, "posting not found")
		return
	}
	ozonWriteJSON(w, http.StatusOK, map[string]any{"result": raw})
}

func (s *Ozon) serveShip(w http.ResponseWriter, body []byte) {
	var req struct {
		PostingNumber string `json:"posting_number"`
		Packages      []struct {
			Products []struct {
				ProductID int64 `json:"product_id"`
				Quantity  int   `json:"quantity"`
			} `json:"products"`
		} `json:"packages"`
		With *struct {
			AdditionalData bool `json:"additional_data"`
		} `json:"with"`
	}
	if err := ozonDecode(body, &req); err != nil {
		ozonWriteError(w, http.StatusBadRequest, 3, err.Error())
		return
	}
	if req.PostingNumber == "" || len(req.Packages) == 0 {
		ozonWriteError(w, http.StatusBadRequest, 3, "posting_number and packages are required")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.postings[req.PostingNumber]
	if !ok {
		ozonWriteError(w, http.StatusNotFound, 5, "posting not found")
		return
	}
	refuse := func(msg string) {
		s.shipsRefused++
		ozonWriteError(w, http.StatusBadRequest, 3, msg)
	}
	if p.Status != "awaiting_packaging" {
		refuse(fmt.Sprintf("the posting is %s, not awaiting_packaging", p.Status))
		return
	}
	if len(req.Packages) > 1 {
		refuse("the simulator does not split postings: send one package")
		return
	}
	want := map[int64]int{}
	for _, pr := range p.Products {
		want[pr.SKU] += pr.Quantity
	}
	got := map[int64]int{}
	for _, pr := range req.Packages[0].Products {
		got[pr.ProductID] += pr.Quantity
	}
	if !maps.Equal(want, got) {
		refuse("the package does not hold the posting's products")
		return
	}
	p.Status, p.StatusChangedAt = "awaiting_deliver", s.now()
	s.shipped[p.PostingNumber]++
	ozonWriteJSON(w, http.StatusOK, map[string]any{"result": []string{p.PostingNumber}, "additional_data": []any{}})
}

// postingJSON is a posting as the API serves it: prices as strings ("1530.0000")
// with a currency_code in v3 and get, as {"amount", "currency"} objects in v4.
func (s *Ozon) postingJSON(p *Posting, v4 bool) json.RawMessage {
	products := make([]map[string]any, len(p.Products))
	for i, pr := range p.Products {
		m := map[string]any{
			"offer_id": pr.OfferID, "name": pr.Name, "sku": pr.SKU, "quantity": pr.Quantity,
			"is_blr_traceable": false, "is_marketplace_buyout": false,
		}
		if v4 {
			var amount any = pr.Price.String()
			if s.amountAsNumber {
				amount = json.Number(pr.Price.String())
			}
			m["price"] = map[string]any{"amount": amount, "currency": pr.Currency}
			m["imei"] = []string{}
		} else {
			price := pr.Price.String()
			if pr.Price.Exponent() >= -4 {
				price = pr.Price.StringFixed(4)
			}
			m["price"], m["currency_code"] = price, pr.Currency
		}
		products[i] = m
	}
	var customer any
	if p.Customer != nil {
		c := map[string]any{"customer_id": 0, "name": p.Customer.Name, "phone": p.Customer.Phone, "address": nil}
		if v4 {
			c["customer_email"] = p.Customer.Email
		}
		customer = c
	}
	var cutoff any = p.ShipmentDate.UTC().Format(time.RFC3339)
	if p.NoCutoff {
		cutoff = nil
	}
	cancellation := map[string]any{
		"cancel_reason_id": 0, "cancel_reason": "", "cancellation_type": "", "cancelled_after_ship": false,
		"affect_cancellation_rating": false, "cancellation_initiator": "",
	}
	if p.Status == "cancelled" {
		cancellation["cancel_reason_id"] = 352
		cancellation["cancel_reason"] = p.CancelReason
		cancellation["cancellation_initiator"] = p.CancelInitiator
	}
	actions := []string{}
	switch p.Status {
	case "awaiting_packaging":
		actions = []string{"cancel", "product_cancel", "ship"}
	case "awaiting_deliver":
		actions = []string{"cancel", "label_download"}
	}
	m := map[string]any{
		"posting_number": p.PostingNumber,
		"order_id":       p.OrderID,
		"order_number":   p.OrderNumber,
		"status":         p.Status,
		"substatus":      "",
		"delivery_method": map[string]any{
			"id": 1, "name": "Ozon Логистика", "warehouse_id": 1, "warehouse": "Склад", "tpl_provider_id": 24, "tpl_provider": "Ozon Логистика",
		},
		"tracking_number":      "",
		"tpl_integration_type": "ozon",
		"in_process_at":        p.InProcessAt.UTC().Format(time.RFC3339Nano),
		"shipment_date":        cutoff,
		"delivering_date":      nil,
		"cancellation":         cancellation,
		"customer":             customer,
		"addressee":            nil,
		"products":             products,
		"barcodes":             nil,
		"analytics_data":       nil,
		"financial_data":       nil,
		"is_express":           false,
		"available_actions":    actions,
		"requirements": map[string]any{
			"products_requiring_gtd": []string{}, "products_requiring_country": []string{},
			"products_requiring_mandatory_mark": []string{}, "products_requiring_jw_uin": []string{},
		},
	}
	if v4 {
		m["delivery_schema"] = "fbs"
	}
	for k, v := range p.Patch {
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
	}
	b, err := json.Marshal(m)
	if err != nil {
		panic("sim: ozon: posting " + p.PostingNumber + ": " + err.Error()) // a bad Patch in a test
	}
	return b
}

// ozonDecode decodes a request body strictly, as Ozon's gateway does: unknown fields
// and trailing data are refused.
func ozonDecode(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("invalid request body: %v", err)
	}
	if dec.More() {
		return errors.New("invalid request body: data after the JSON object")
	}
	return nil
}

func ozonWriteJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"code":13,"message":"Internal error","details":[]}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
}

// ozonWriteError answers with Ozon's error body.
func ozonWriteError(w http.ResponseWriter, status, code int, message string) {
	ozonWriteJSON(w, status, map[string]any{"code": code, "message": message, "details": []any{}})
}
