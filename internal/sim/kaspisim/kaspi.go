package kaspisim

import (
	"cmp"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/shopspring/decimal"

	"github.com/ordersync/ordersync/internal/sim"
)

// Prefix is where the Kaspi Shop API is published on its host
// (https://kaspi.kz/shop/api/v2).
const Prefix = "/shop/api/v2"

// MaxWindow is the longest creationDate window a listing may ask for: Kaspi
// refuses a period over 14 days.
const MaxWindow = 14 * 24 * time.Hour

// The kinds of request the Kaspi simulator counts (Requests) and fails on demand (Faults).
const (
	OpList    = "list"    // GET /orders with a state filter
	OpByCode  = "by_code" // GET /orders?filter[orders][code]=…
	OpOrder   = "order"   // GET /orders/{id}
	OpEntries = "entries" // GET /orders/{id}/entries
	OpStatus  = "status"  // POST /orders: a change of status (the acceptance)
	OpOther   = "other"   // anything else
)

// Kaspi order states (filter[orders][state] and the state attribute).
const (
	StateNew           = "NEW"
	StateSignRequired  = "SIGN_REQUIRED"
	StatePickup        = "PICKUP"
	StateDelivery      = "DELIVERY"
	StateKaspiDelivery = "KASPI_DELIVERY"
	StateArchive       = "ARCHIVE"
)

// Kaspi order statuses.
const (
	StatusApprovedByBank     = "APPROVED_BY_BANK"
	StatusAcceptedByMerchant = "ACCEPTED_BY_MERCHANT"
	StatusCompleted          = "COMPLETED"
	StatusCancelled          = "CANCELLED"
	StatusCancelling         = "CANCELLING"
	StatusReturned           = "RETURNED"
	StatusReturnRequested    = "KASPI_DELIVERY_RETURN_REQUESTED"
	StatusArrived            = "ARRIVED"
)

const (
	kaspiDefaultAcceptedState      = StatePickup
	kaspiDefaultMaxPageSize        = 100
	kaspiContentType               = "application/vnd.api+json"
	kaspiParamPageNumber           = "page[number]"
	kaspiParamPageSize             = "page[size]"
	kaspiParamState                = "filter[orders][state]"
	kaspiParamStatus               = "filter[orders][status]"
	kaspiParamCode                 = "filter[orders][code]"
	kaspiParamCreatedFrom          = "filter[orders][creationDate][$ge]"
	kaspiParamCreatedTo            = "filter[orders][creationDate][$le]"
	kaspiParamInclude              = "include[orders]"
	kaspiIncludeEntries            = "entries"
	kaspiTypeOrders                = "orders"
	kaspiTypeEntries               = "orderentries"
	kaspiMaxCancellationCommentLen = 1000
)

var (
	kaspiStates = []string{StateNew, StateSignRequired, StatePickup,
		StateDelivery, StateKaspiDelivery, StateArchive}
	kaspiStatuses = []string{StatusApprovedByBank, StatusAcceptedByMerchant,
		StatusCompleted, StatusCancelled, StatusCancelling, StatusReturned,
		StatusReturnRequested, StatusReturnAcceptedByMerchant, StatusArrived}
)

// Options configure a simulated Kaspi Shop API.
type Options struct {
	// Token is the X-Auth-Token every request must carry; empty accepts any.
	Token string
	// MaxPageSize is the largest page[size] accepted (default 100, as documented).
	MaxPageSize int
	// IgnoreInclude answers listings without the included order entries, so a
	// client must fetch GET /orders/{id}/entries.
	IgnoreInclude bool
	// Location is the zone of Kaspi's dates, used in messages; default Asia/Almaty.
	Location *time.Location
	// Now is the clock (the default end of a creationDate window); default time.Now.
	Now func() time.Time
	// Logger receives a line per request at debug level; default discards.
	Logger *slog.Logger
}

// Customer is the buyer of a simulated order.
type Customer struct {
	ID        string
	Name      string // Kaspi often sends null here and the parts below
	FirstName string
	LastName  string
	CellPhone string // ten digits, without the country code: 7011234567
}

// Entry is one position of a simulated order.
type Entry struct {
	ID        string // default: derived from the order's id and the position
	OfferCode string // the merchant's SKU
	Name      string
	Quantity  decimal.Decimal
	BasePrice decimal.Decimal
	// TotalPrice is the entry's total; nil means BasePrice × Quantity.
	TotalPrice   *decimal.Decimal
	UnitType     string // default PIECES
	Weight       decimal.Decimal
	DeliveryCost decimal.Decimal
}

// Order is a simulated Kaspi order.
type Order struct {
	ID           string // default: derived from the code
	Code         string
	State        string // default NEW
	Status       string // default APPROVED_BY_BANK
	CreationDate time.Time
	Customer     Customer
	DeliveryMode string // default DELIVERY_PICKUP
	PaymentMode  string // default PAY_WITH_CREDIT
	// IsKaspiDelivery marks a Kaspi Delivery order.
	IsKaspiDelivery bool
	DeliveryCost    decimal.Decimal
	// TotalPrice is the order's total; nil means the entries' totals plus DeliveryCost.
	TotalPrice         *decimal.Decimal
	CancellationReason string
	// AcceptedState is the state the order moves to from NEW when the merchant
	// accepts it; default PICKUP.
	AcceptedState string
	Entries       []Entry
}

// Request is one request the simulator answered.
type Request struct {
	Op     string
	Method string
	Path   string
	Query  url.Values
	Status int
	At     time.Time // when it arrived
}

type kaspiRaw struct {
	state   string
	created time.Time
	body    string
	seq     int
}

type kaspiInjection struct {
	page int // -1: any
	body string
}

// Kaspi is a simulated Kaspi Shop API (orders): JSON:API listings with the documented
// pagination and filters, the entries of an order, and the change of status to
// ACCEPTED_BY_MERCHANT, with 429/5xx, malformed pages and bad orders on demand. It is
// an http.Handler and safe for concurrent use.
type Kaspi struct {
	// Faults answer requests instead of the API, before authentication as a
	// gateway's would. Op is the kind of request (OpList, …, OpStatus) or "" for
	// any; Status is answered with the JSON:API error body, RetryAfter as a
	// Retry-After header in seconds. No kinds: a malformed listing is InjectRaw's.
	Faults *sim.Faults

	token         string
	maxPageSize   int
	ignoreInclude bool
	loc           *time.Location
	now           func() time.Time
	log           *slog.Logger
	server        sim.Server

	mu       sync.Mutex
	orders   map[string]*Order // by code
	byID     map[string]string // id → code
	raws     []kaspiRaw
	rawSeq   int
	injected []kaspiInjection
	accepted map[string]int
	requests map[string]int
	reqLog   []Request
}

// New returns a simulated Kaspi Shop API; it serves nothing until Start, or
// until it is mounted as an http.Handler.
func New(opts Options) *Kaspi {
	loc := opts.Location
	if loc == nil {
		var err error
		if loc, err = time.LoadLocation("Asia/Almaty"); err != nil {
			loc = time.FixedZone("Asia/Almaty", 5*60*60)
		}
	}
	s := &Kaspi{
		Faults:        sim.NewFaults(checkFault),
		token:         opts.Token,
		maxPageSize:   cmp.Or(opts.MaxPageSize, kaspiDefaultMaxPageSize),
		ignoreInclude: opts.IgnoreInclude,
		loc:           loc,
		now:           opts.Now,
		log:           opts.Logger,
		orders:        map[string]*Order{},
		byID:          map[string]string{},
		accepted:      map[string]int{},
		requests:      map[string]int{},
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
func (s *Kaspi) Start(addr string) error {
	return s.server.Start("kaspi", addr, s, s.log)
}

// URL is the API's base URL after Start (what connectors.kaspi.base_url would be),
// "" before.
func (s *Kaspi) URL() string {
	return s.server.URL(Prefix)
}

// Close stops the server started by Start. It is safe to call twice and before Start.
func (s *Kaspi) Close() {
	s.server.Close()
}

// AddOrder adds an order, filling the defaults. A second order with the same code
// or id is an error.
func (s *Kaspi) AddOrder(o Order) error {
	if o.Code == "" {
		return errors.New("sim: kaspi: an order needs a code")
	}
	o.ID = cmp.Or(o.ID, base64.RawURLEncoding.EncodeToString([]byte("order:"+o.Code)))
	o.State = cmp.Or(o.State, StateNew)
	o.Status = cmp.Or(o.Status, StatusApprovedByBank)
	o.DeliveryMode = cmp.Or(o.DeliveryMode, "DELIVERY_PICKUP")
	o.PaymentMode = cmp.Or(o.PaymentMode, "PAY_WITH_CREDIT")
	o.AcceptedState = cmp.Or(o.AcceptedState, kaspiDefaultAcceptedState)
	if !slices.Contains(kaspiStates, o.State) {
		return fmt.Errorf("sim: kaspi: order %s: unknown state %q", o.Code, o.State)
	}
	if !slices.Contains(kaspiStatuses, o.Status) {
		return fmt.Errorf("sim: kaspi: order %s: unknown status %q", o.Code, o.Status)
	}
	if o.CreationDate.IsZero() {
		o.CreationDate = s.now()
	}
	o.Entries = slices.Clone(o.Entries)
	for i := range o.Entries {
		e := &o.Entries[i]
		e.ID = cmp.Or(e.ID, base64.RawURLEncoding.EncodeToString([]byte(fmt.Sprintf("%s##%d", o.Code, i))))
		e.UnitType = cmp.Or(e.UnitType, "PIECES")
		if e.TotalPrice != nil {
			t := *e.TotalPrice
			e.TotalPrice = &t
		}
	}
	if o.TotalPrice != nil {
		t := *o.TotalPrice
		o.TotalPrice = &t
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.orders[o.Code]; dup {
		return fmt.Errorf("sim: kaspi: order code %s exists", o.Code)
	}
	if _, dup := s.byID[o.ID]; dup {
		return fmt.Errorf("sim: kaspi: order id %s exists", o.ID)
	}
	s.orders[o.Code] = &o
	s.byID[o.ID] = o.Code
	return nil
}

// AddRawOrder lists body verbatim as an element of data[] in the listings of state
// whose creationDate window holds created. The body need not be valid JSON: a bad
// one makes the page malformed.
func (s *Kaspi) AddRawOrder(state string, created time.Time, body string) {
	s.mu.Lock()
	s.rawSeq++
	s.raws = append(s.raws, kaspiRaw{state: state, created: created, body: body, seq: s.rawSeq})
	s.mu.Unlock()
}

// InjectRaw answers the next n listings (GET /orders with a state filter) with 200
// and body verbatim, e.g. a malformed page.
func (s *Kaspi) InjectRaw(n int, body string) {
	s.mu.Lock()
	for range n {
		s.injected = append(s.injected, kaspiInjection{page: -1, body: body})
	}
	s.mu.Unlock()
}

// InjectRawPage answers the next listing that asks for page[number] = page with 200
// and body verbatim: a listing that breaks after its first pages.
func (s *Kaspi) InjectRawPage(page int, body string) {
	s.mu.Lock()
	s.injected = append(s.injected, kaspiInjection{page: page, body: body})
	s.mu.Unlock()
}

// SetStatus changes an order's status (e.g. to CANCELLED), as the buyer or Kaspi would.
func (s *Kaspi) SetStatus(code, status string) error {
	if !slices.Contains(kaspiStatuses, status) {
		return fmt.Errorf("sim: kaspi: unknown status %q", status)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.orders[code]
	if !ok {
		return fmt.Errorf("sim: kaspi: no order %s", code)
	}
	o.Status = status
	return nil
}

// SetState changes an order's state (e.g. to ARCHIVE).
func (s *Kaspi) SetState(code, state string) error {
	if !slices.Contains(kaspiStates, state) {
		return fmt.Errorf("sim: kaspi: unknown state %q", state)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.orders[code]
	if !ok {
		return fmt.Errorf("sim: kaspi: no order %s", code)
	}
	o.State = state
	return nil
}

// Order returns a copy of the order with this code.
func (s *Kaspi) Order(code string) (Order, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.orders[code]
	if !ok {
		return Order{}, false
	}
	c := *o
	c.Entries = slices.Clone(o.Entries)
	return c, true
}

// Accepted counts, per order code, the POST /orders calls that asked for
// ACCEPTED_BY_MERCHANT and reached the order (refused ones included; injected
// faults and authentication failures excluded).
func (s *Kaspi) Accepted() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.accepted)
}

// Requests counts the requests received, by kind (OpList, …).
func (s *Kaspi) Requests() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.requests)
}

// RequestLog returns every request answered, in arrival order.
func (s *Kaspi) RequestLog() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.Clone(s.reqLog)
	for i := range out {
		out[i].Query = maps.Clone(out[i].Query)
	}
	return out
}

// ServeHTTP serves the orders API under Prefix.
func (s *Kaspi) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	at := s.now()
	op, id := OpOther, ""
	rest, ok := strings.CutPrefix(r.URL.Path, Prefix)
	if ok {
		op, id = kaspiClassify(r.Method, rest, r.URL.Query())
	}
	rec := &kaspiRecorder{ResponseWriter: w, status: http.StatusOK}
	defer func() {
		s.mu.Lock()
		s.requests[op]++
		s.reqLog = append(s.reqLog, Request{Op: op, Method: r.Method, Path: r.URL.Path,
			Query: r.URL.Query(), Status: rec.status, At: at})
		s.mu.Unlock()
		s.log.Debug("kaspi sim", "method", r.Method, "path", r.URL.Path, "op", op, "status", rec.status)
	}()
	if !ok {
		kaspiError(rec, http.StatusNotFound, "no such resource")
		return
	}
	if f, ok := s.Faults.Take(func(f sim.Fault) bool { return f.Matches(op, "") }); ok {
		if v, ok := f.RetryAfterSeconds(); ok {
			rec.Header().Set("Retry-After", v)
		}
		if f.Body != "" {
			rec.Header().Set("Content-Type", kaspiContentType)
			rec.WriteHeader(f.Status)
			io.WriteString(rec, f.Body)
			return
		}
		kaspiError(rec, f.Status, "injected failure")
		return
	}
	if s.token != "" && r.Header.Get("X-Auth-Token") != s.token {
		kaspiError(rec, http.StatusUnauthorized, "Unauthorized: the X-Auth-Token is missing or not valid")
		return
	}
	base := "http://" + r.Host + Prefix
	switch op {
	case OpList:
		s.serveList(rec, r, base)
	case OpByCode:
		s.serveByCode(rec, r, base)
	case OpOrder:
		s.serveOrder(rec, id, base)
	case OpEntries:
		s.serveEntries(rec, id, base)
	case OpStatus:
		s.serveStatus(rec, r, base)
	default:
		kaspiError(rec, http.StatusNotFound, "no such resource")
	}
}

func kaspiClassify(method, rest string, q url.Values) (op, id string) {
	parts := strings.Split(strings.Trim(rest, "/"), "/")
	switch {
	case method == http.MethodGet && len(parts) == 1 && parts[0] == "orders":
		if q.Has(kaspiParamCode) {
			return OpByCode, ""
		}
		return OpList, ""
	case method == http.MethodPost && len(parts) == 1 && parts[0] == "orders":
		return OpStatus, ""
	case method == http.MethodGet && len(parts) == 2 && parts[0] == "orders":
		return OpOrder, parts[1]
	case method == http.MethodGet && len(parts) == 3 && parts[0] == "orders" && parts[2] == "entries":
		return OpEntries, parts[1]
	}
	return OpOther, ""
}

// checkFault refuses what a Kaspi fault cannot be.
func checkFault(f sim.Fault) error {
	switch {
	case f.Status < 400:
		return fmt.Errorf("sim: kaspi: fault status %d is not an error status", f.Status)
	case f.Kind != "" || f.ExternalID != "" || f.Delay != 0 || f.Hold != 0:
		return fmt.Errorf("sim: kaspi: a fault is a status (and Op, After, RetryAfter, Body) only")
	}
	return nil
}

func (s *Kaspi) serveList(w http.ResponseWriter, r *http.Request, base string) {
	q := r.URL.Query()
	number, size, msg := s.pageParams(q, true)
	if msg != "" {
		kaspiError(w, http.StatusBadRequest, msg)
		return
	}
	state := q.Get(kaspiParamState)
	switch {
	case state == "":
		kaspiError(w, http.StatusBadRequest, kaspiParamState+" is required")
		return
	case !slices.Contains(kaspiStates, state):
		kaspiError(w, http.StatusBadRequest, fmt.Sprintf("%s: unknown state %q", kaspiParamState, state))
		return
	}
	status := q.Get(kaspiParamStatus)
	if status != "" && !slices.Contains(kaspiStatuses, status) {
		kaspiError(w, http.StatusBadRequest, fmt.Sprintf("%s: unknown status %q", kaspiParamStatus, status))
		return
	}
	if !q.Has(kaspiParamCreatedFrom) {
		kaspiError(w, http.StatusBadRequest, kaspiParamCreatedFrom+" is required")
		return
	}
	ge, err := strconv.ParseInt(q.Get(kaspiParamCreatedFrom), 10, 64)
	if err != nil {
		kaspiError(w, http.StatusBadRequest, kaspiParamCreatedFrom+" must be epoch milliseconds")
		return
	}
	le := s.now().UnixMilli()
	if q.Has(kaspiParamCreatedTo) {
		if le, err = strconv.ParseInt(q.Get(kaspiParamCreatedTo), 10, 64); err != nil {
			kaspiError(w, http.StatusBadRequest, kaspiParamCreatedTo+" must be epoch milliseconds")
			return
		}
	}
	if le < ge {
		kaspiError(w, http.StatusBadRequest, "the end of the creationDate period is before its start")
		return
	}
	if time.Duration(le-ge)*time.Millisecond > MaxWindow {
		kaspiError(w, http.StatusBadRequest, fmt.Sprintf(
			"the creationDate period from %s to %s exceeds the maximum of 14 days",
			time.UnixMilli(ge).In(s.loc).Format(time.DateTime), time.UnixMilli(le).In(s.loc).Format(time.DateTime)))
		return
	}
	include := q.Get(kaspiParamInclude) == kaspiIncludeEntries && !s.ignoreInclude

	s.mu.Lock()
	for i, inj := range s.injected {
		if inj.page == -1 || inj.page == number {
			s.injected = slices.Delete(s.injected, i, i+1)
			s.mu.Unlock()
			w.Header().Set("Content-Type", kaspiContentType)
			io.WriteString(w, inj.body)
			return
		}
	}
	type listed struct {
		created int64
		code    string
		seq     int
		raw     string
		order   *Order
	}
	var all []listed
	for _, o := range s.orders {
		ms := o.CreationDate.UnixMilli()
		if o.State == state && ms >= ge && ms <= le && (status == "" || o.Status == status) {
			c := *o
			all = append(all, listed{created: ms, code: o.Code, order: &c})
		}
	}
	for _, raw := range s.raws {
		ms := raw.created.UnixMilli()
		if raw.state == state && ms >= ge && ms <= le {
			all = append(all, listed{created: ms, seq: raw.seq, raw: raw.body})
		}
	}
	s.mu.Unlock()
	slices.SortFunc(all, func(a, b listed) int {
		return cmp.Or(cmp.Compare(a.created, b.created), cmp.Compare(a.code, b.code), cmp.Compare(a.seq, b.seq))
	})

	total := len(all)
	pageCount := (total + size - 1) / size
	lo := min(number*size, total)
	hi := min(lo+size, total)
	data := make([]json.RawMessage, 0, hi-lo)
	included := []json.RawMessage{}
	for _, l := range all[lo:hi] {
		if l.order == nil {
			data = append(data, json.RawMessage(l.raw))
			continue
		}
		data = append(data, mustJSON(kaspiOrderResource(l.order, base)))
		if include {
			for _, e := range l.order.Entries {
				included = append(included, mustJSON(kaspiEntryResource(e, base)))
			}
		}
	}
	// The data elements are written verbatim (a raw one may be malformed), so the
	// page is assembled by hand rather than marshalled.
	var b strings.Builder
	b.WriteString(`{"data":[`)
	for i, d := range data {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(d)
	}
	b.WriteString(`],"included":[`)
	for i, d := range included {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(d)
	}
	fmt.Fprintf(&b, `],"meta":{"pageCount":%d,"totalCount":%d}}`, pageCount, total)
	w.Header().Set("Content-Type", kaspiContentType)
	io.WriteString(w, b.String())
}

// pageParams reads page[number] and page[size]; required says whether they must be
// present. It returns a message when they are wrong.
func (s *Kaspi) pageParams(q url.Values, required bool) (number, size int, msg string) {
	number, size = 0, s.maxPageSize
	if !q.Has(kaspiParamPageNumber) || !q.Has(kaspiParamPageSize) {
		if required {
			return 0, 0, kaspiParamPageNumber + " and " + kaspiParamPageSize + " are required"
		}
		return number, size, ""
	}
	var err error
	if number, err = strconv.Atoi(q.Get(kaspiParamPageNumber)); err != nil || number < 0 {
		return 0, 0, kaspiParamPageNumber + " must be a number from 0"
	}
	if size, err = strconv.Atoi(q.Get(kaspiParamPageSize)); err != nil || size < 1 || size > s.maxPageSize {
		return 0, 0, fmt.Sprintf("%s must be from 1 to %d", kaspiParamPageSize, s.maxPageSize)
	}
	return number, size, ""
}

func (s *Kaspi) serveByCode(w http.ResponseWriter, r *http.Request, base string) {
	q := r.URL.Query()
	if _, _, msg := s.pageParams(q, false); msg != "" {
		kaspiError(w, http.StatusBadRequest, msg)
		return
	}
	include := q.Get(kaspiParamInclude) == kaspiIncludeEntries && !s.ignoreInclude
	s.mu.Lock()
	var o *Order
	if found, ok := s.orders[q.Get(kaspiParamCode)]; ok {
		c := *found
		o = &c
	}
	s.mu.Unlock()
	page := struct {
		Data     []any          `json:"data"`
		Included []any          `json:"included"`
		Meta     map[string]int `json:"meta"`
	}{Data: []any{}, Included: []any{}, Meta: map[string]int{"pageCount": 0, "totalCount": 0}}
	if o != nil {
		page.Data = append(page.Data, kaspiOrderResource(o, base))
		if include {
			for _, e := range o.Entries {
				page.Included = append(page.Included, kaspiEntryResource(e, base))
			}
		}
		page.Meta = map[string]int{"pageCount": 1, "totalCount": 1}
	}
	kaspiJSON(w, http.StatusOK, page)
}

func (s *Kaspi) lookup(id string) *Order {
	s.mu.Lock()
	defer s.mu.Unlock()
	code, ok := s.byID[id]
	if !ok {
		return nil
	}
	c := *s.orders[code]
	c.Entries = slices.Clone(c.Entries)
	return &c
}

func (s *Kaspi) serveOrder(w http.ResponseWriter, id, base string) {
	o := s.lookup(id)
	if o == nil {
		kaspiError(w, http.StatusNotFound, "order not found")
		return
	}
	kaspiJSON(w, http.StatusOK, map[string]any{"data": kaspiOrderResource(o, base), "included": []any{}})
}

func (s *Kaspi) serveEntries(w http.ResponseWriter, id, base string) {
	o := s.lookup(id)
	if o == nil {
		kaspiError(w, http.StatusNotFound, "order not found")
		return
	}
	data := make([]any, 0, len(o.Entries))
	for _, e := range o.Entries {
		data = append(data, kaspiEntryResource(e, base))
	}
	kaspiJSON(w, http.StatusOK, map[string]any{"data": data, "included": []any{}})
}

// serveStatus changes an order's status: POST /orders with
// {"data":{"type":"orders","id":…,"attributes":{"code":…,"status":…}}}. The simulator
// implements ACCEPTED_BY_MERCHANT, allowed only from APPROVED_BY_BANK.
func (s *Kaspi) serveStatus(w http.ResponseWriter, r *http.Request, base string) {
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != kaspiContentType {
		kaspiError(w, http.StatusUnsupportedMediaType, "Content-Type must be "+kaspiContentType)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		return
	}
	var req struct {
		Data struct {
			Type       string `json:"type"`
			ID         string `json:"id"`
			Attributes struct {
				Code                string `json:"code"`
				Status              string `json:"status"`
				CancellationReason  string `json:"cancellationReason"`
				CancellationComment string `json:"cancellationComment"`
			} `json:"attributes"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		kaspiError(w, http.StatusBadRequest, "malformed JSON: "+err.Error())
		return
	}
	d := req.Data
	switch {
	case d.Type != kaspiTypeOrders:
		kaspiError(w, http.StatusBadRequest, fmt.Sprintf("data.type must be %q", kaspiTypeOrders))
		return
	case d.ID == "":
		kaspiError(w, http.StatusBadRequest, "data.id is required")
		return
	case d.Attributes.Status == "":
		kaspiError(w, http.StatusBadRequest, "data.attributes.status is required")
		return
	case len(d.Attributes.CancellationComment) > kaspiMaxCancellationCommentLen:
		kaspiError(w, http.StatusBadRequest, "cancellationComment is longer than 1000 characters")
		return
	}

	s.mu.Lock()
	code, ok := s.byID[d.ID]
	if !ok {
		s.mu.Unlock()
		kaspiError(w, http.StatusNotFound, "order not found")
		return
	}
	o := s.orders[code]
	if d.Attributes.Code != "" && d.Attributes.Code != o.Code {
		s.mu.Unlock()
		kaspiError(w, http.StatusBadRequest, "data.attributes.code does not belong to the order data.id")
		return
	}
	if d.Attributes.Status != StatusAcceptedByMerchant {
		s.mu.Unlock()
		kaspiError(w, http.StatusBadRequest, fmt.Sprintf("the simulator changes status only to %s, not %q",
			StatusAcceptedByMerchant, d.Attributes.Status))
		return
	}
	s.accepted[o.Code]++
	if o.Status != StatusApprovedByBank {
		current := o.Status
		s.mu.Unlock()
		kaspiError(w, http.StatusBadRequest, fmt.Sprintf("Order status is %s: it can be accepted only in status %s",
			current, StatusApprovedByBank))
		return
	}
	o.Status = StatusAcceptedByMerchant
	if o.State == StateNew {
		o.State = o.AcceptedState
	}
	id, c := o.ID, o.Code
	s.mu.Unlock()

	self := base + "/orders/" + url.PathEscape(id)
	kaspiJSON(w, http.StatusOK, map[string]any{
		"data": map[string]any{
			"type":       kaspiTypeOrders,
			"id":         id,
			"attributes": map[string]any{"code": c, "status": StatusAcceptedByMerchant},
			"relationships": map[string]any{
				"entries": map[string]any{"links": kaspiLinks(self, "entries")},
				"user":    map[string]any{"links": kaspiLinks(self, "user"), "data": nil},
			},
			"links": map[string]string{"self": self},
		},
		"included": []any{},
	})
}

// Wire shapes, after the published examples.

type kaspiRef struct {
	Type string `json:"type"`
	ID   string `json:"id"`
}

type kaspiWireCustomer struct {
	ID        string  `json:"id"`
	Name      *string `json:"name"`
	CellPhone string  `json:"cellPhone"`
	FirstName string  `json:"firstName"`
	LastName  string  `json:"lastName"`
}

type kaspiWireOrderAttrs struct {
	Code                  string            `json:"code"`
	TotalPrice            json.RawMessage   `json:"totalPrice"`
	PaymentMode           string            `json:"paymentMode"`
	CreationDate          int64             `json:"creationDate"`
	DeliveryCostForSeller json.RawMessage   `json:"deliveryCostForSeller"`
	IsKaspiDelivery       bool              `json:"isKaspiDelivery"`
	DeliveryMode          string            `json:"deliveryMode"`
	SignatureRequired     bool              `json:"signatureRequired"`
	PreOrder              bool              `json:"preOrder"`
	State                 string            `json:"state"`
	ApprovedByBankDate    int64             `json:"approvedByBankDate"`
	Status                string            `json:"status"`
	CancellationReason    string            `json:"cancellationReason,omitempty"`
	Customer              kaspiWireCustomer `json:"customer"`
	DeliveryCost          json.RawMessage   `json:"deliveryCost"`
}

type kaspiWireOrder struct {
	Type          string              `json:"type"`
	ID            string              `json:"id"`
	Attributes    kaspiWireOrderAttrs `json:"attributes"`
	Relationships map[string]any      `json:"relationships"`
	Links         map[string]string   `json:"links"`
}

type kaspiWireEntryAttrs struct {
	UnitType       string            `json:"unitType"`
	Offer          map[string]string `json:"offer"`
	Quantity       json.RawMessage   `json:"quantity"`
	TotalPrice     json.RawMessage   `json:"totalPrice"`
	Weight         json.RawMessage   `json:"weight"`
	EntryNumber    int               `json:"entryNumber"`
	Category       map[string]string `json:"category"`
	DeliveryCost   json.RawMessage   `json:"deliveryCost"`
	BasePrice      json.RawMessage   `json:"basePrice"`
	IsImeiRequired bool              `json:"isImeiRequired"`
}

type kaspiWireEntry struct {
	Type          string              `json:"type"`
	ID            string              `json:"id"`
	Attributes    kaspiWireEntryAttrs `json:"attributes"`
	Relationships map[string]any      `json:"relationships"`
	Links         map[string]string   `json:"links"`
}

func kaspiLinks(self, rel string) map[string]string {
	return map[string]string{"self": self + "/relationships/" + rel, "related": self + "/" + rel}
}

func kaspiEntryTotal(e Entry) decimal.Decimal {
	if e.TotalPrice != nil {
		return *e.TotalPrice
	}
	return e.BasePrice.Mul(e.Quantity)
}

func kaspiOrderResource(o *Order, base string) kaspiWireOrder {
	self := base + "/orders/" + url.PathEscape(o.ID)
	total := o.DeliveryCost
	if o.TotalPrice != nil {
		total = *o.TotalPrice
	} else {
		for _, e := range o.Entries {
			total = total.Add(kaspiEntryTotal(e))
		}
	}
	refs := make([]kaspiRef, len(o.Entries))
	for i, e := range o.Entries {
		refs[i] = kaspiRef{Type: kaspiTypeEntries, ID: e.ID}
	}
	cust := kaspiWireCustomer{ID: o.Customer.ID, CellPhone: o.Customer.CellPhone,
		FirstName: o.Customer.FirstName, LastName: o.Customer.LastName}
	if o.Customer.Name != "" {
		n := o.Customer.Name
		cust.Name = &n
	}
	var user any
	if o.Customer.ID != "" {
		user = kaspiRef{Type: "customers", ID: o.Customer.ID}
	}
	return kaspiWireOrder{
		Type: kaspiTypeOrders,
		ID:   o.ID,
		Attributes: kaspiWireOrderAttrs{
			Code:                  o.Code,
			TotalPrice:            kaspiMoney(total),
			PaymentMode:           o.PaymentMode,
			CreationDate:          o.CreationDate.UnixMilli(),
			DeliveryCostForSeller: kaspiMoney(decimal.Zero),
			IsKaspiDelivery:       o.IsKaspiDelivery,
			DeliveryMode:          o.DeliveryMode,
			State:                 o.State,
			ApprovedByBankDate:    o.CreationDate.Add(5 * time.Second).UnixMilli(),
			Status:                o.Status,
			CancellationReason:    o.CancellationReason,
			Customer:              cust,
			DeliveryCost:          kaspiMoney(o.DeliveryCost),
		},
		Relationships: map[string]any{
			"entries": map[string]any{"links": kaspiLinks(self, "entries"), "data": refs},
			"user":    map[string]any{"links": kaspiLinks(self, "user"), "data": user},
		},
		Links: map[string]string{"self": self},
	}
}

func kaspiEntryResource(e Entry, base string) kaspiWireEntry {
	self := base + "/orderentries/" + url.PathEscape(e.ID)
	return kaspiWireEntry{
		Type: kaspiTypeEntries,
		ID:   e.ID,
		Attributes: kaspiWireEntryAttrs{
			UnitType:     e.UnitType,
			Offer:        map[string]string{"code": e.OfferCode, "name": e.Name},
			Quantity:     json.RawMessage(e.Quantity.String()),
			TotalPrice:   kaspiMoney(kaspiEntryTotal(e)),
			Weight:       kaspiMoney(e.Weight),
			Category:     map[string]string{"code": "Master - Simulated", "title": "Simulated"},
			DeliveryCost: kaspiMoney(e.DeliveryCost),
			BasePrice:    kaspiMoney(e.BasePrice),
		},
		Relationships: map[string]any{
			"product":                map[string]any{"links": kaspiLinks(self, "product")},
			"deliveryPointOfService": map[string]any{"links": kaspiLinks(self, "deliveryPointOfService")},
		},
		Links: map[string]string{"self": self},
	}
}

// kaspiMoney writes an amount as Kaspi does: a JSON number with a fraction, 2000.0.
func kaspiMoney(d decimal.Decimal) json.RawMessage {
	s := d.String()
	if !strings.ContainsAny(s, ".eE") {
		s += ".0"
	}
	return json.RawMessage(s)
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic("sim: kaspi: encode: " + err.Error())
	}
	return b
}

func kaspiJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", kaspiContentType)
	w.WriteHeader(status)
	w.Write(mustJSON(v))
}

// kaspiError answers with a JSON:API error document.
func kaspiError(w http.ResponseWriter, status int, title string) {
	kaspiJSON(w, status, map[string]any{"errors": []map[string]string{{"status": strconv.Itoa(status), "title": title}}})
}

type kaspiRecorder struct {
	http.ResponseWriter
	status int
}

func (r *kaspiRecorder) WriteHeader(status int) {
	r.status = status
	r.ResponseWriter.WriteHeader(status)
}
