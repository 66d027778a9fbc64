package onecsim

import (
	"bytes"
	"cmp"
	"context"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"github.com/ordersync/ordersync/internal/sim"
)

// DefaultPrefix is where a 1C base usually publishes the ordersync HTTP service.
const DefaultPrefix = "/trade/hs/ordersync/v1"

// The operations of contract v1, as Fault.Op and the keys of Stats.Requests name them.
const (
	opPing   = "ping"
	opFind   = "find"
	opCreate = "create"
	opCancel = "cancel"
	opStock  = "stock"
	// opFindReturns and opCreateReturn are GET and POST /returns.
	opFindReturns  = "find_returns"
	opCreateReturn = "create_return"
	opOther        = "other" // requests to paths the service does not publish
)

// AuthFailureMode is how the simulated publication answers bad credentials.
type AuthFailureMode int

const (
	// AuthHTML200 answers 200 with an HTML page, as many 1C publications do.
	AuthHTML200 AuthFailureMode = iota
	// AuthStatus401 answers 401 with a WWW-Authenticate challenge.
	AuthStatus401
)

// Options configure a simulated 1C base.
type Options struct {
	// Prefix is the path the service is published at; default DefaultPrefix.
	Prefix string
	// When Username is not empty, every request must carry these Basic credentials
	// (UTF-8).
	Username, Password string
	// AuthFailure selects how bad credentials are answered.
	AuthFailure AuthFailureMode
	// Dedupe emulates the reference 1C module: a create finds the external id under a
	// managed lock and answers 409 with the existing order. False (the default) is a
	// naive base that creates a duplicate every time it is asked.
	Dedupe bool
	// KnownSKUs, when not nil, is the catalogue: a create naming another SKU is
	// answered 422 unknown_sku.
	KnownSKUs []string
	// Organizations, when not nil, are the base's organisations (codes or GUIDs, as
	// a create names them): a create naming another is answered 422
	// unknown_organization, one naming none 422 missing_organization. Nil is a base
	// whose module picks the organisation itself and accepts any.
	Organizations []string
	// Latency is added to every request before it is processed.
	Latency time.Duration
	// OpLatency overrides Latency for some operations ("find", "create", …): in a
	// real base a find is an indexed query while a create writes and posts a document.
	OpLatency map[string]time.Duration
	// BOM prefixes every JSON answer with a UTF-8 byte order mark.
	BOM bool
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Location is the zone of 1C's zone-less dates; default Asia/Almaty.
	Location *time.Location
	// OrderDateFromRequest dates a created order's document by the order's date
	// in the request, as the reference module does when its ДатаЗаказа setting is
	// "ИзЗапроса"; false (the module's default, "ТекущаяДата") dates it by the
	// time of creation.
	OrderDateFromRequest bool
	// Logger receives a line per request at debug level; default discards.
	Logger *slog.Logger
	// NoReturns is a base whose module is older than the returns of contract v1: it
	// has no URL template for /returns, which 1C answers 404 with its own text, as
	// any path the service does not publish.
	NoReturns bool
}

// Customer is the buyer of a created order.
type Customer struct {
	Name  string `json:"name"`
	Phone string `json:"phone"`
	Email string `json:"email"`
}

// OrderLine is one line of a created order, as received.
type OrderLine struct {
	SKU      string          `json:"sku"`
	Name     string          `json:"name"`
	Quantity decimal.Decimal `json:"quantity"`
	Price    decimal.Decimal `json:"price"`
	Amount   decimal.Decimal `json:"amount"`
}

// OrderRequest is a CreateOrder request as the simulator understood it.
type OrderRequest struct {
	ExternalID string          `json:"external_id"`
	Source     string          `json:"source"`
	Number     string          `json:"number"`
	Date       string          `json:"date"`
	Customer   Customer        `json:"customer"`
	Warehouse  string          `json:"warehouse"`
	Currency   string          `json:"currency"`
	Lines      []OrderLine     `json:"lines"`
	Total      decimal.Decimal `json:"total"`
	Comment    string          `json:"comment"`
	// The account's mapping as the create named it, empty when it did not.
	Organization string `json:"organization,omitempty"`
	Partner      string `json:"partner,omitempty"`
	Counterparty string `json:"counterparty,omitempty"`
	Agreement    string `json:"agreement,omitempty"`
}

// Order is an order held by the simulated base.
type Order struct {
	Ref          string    `json:"ref"`
	Number       string    `json:"number"`
	Date         string    `json:"date"` // 1C's zone-less local time
	ExternalID   string    `json:"external_id"`
	Posted       bool      `json:"posted"`
	Deleted      bool      `json:"deleted"`
	Cancelled    bool      `json:"cancelled"`
	CancelReason string    `json:"cancel_reason,omitempty"`
	CreatedAt    time.Time `json:"created_at"`
	// Total and Currency are the document's amount and currency, as the listing of
	// GET /orders?source=… reports them: a create's total, until SetTotal changes it.
	Total    decimal.Decimal `json:"total"`
	Currency string          `json:"currency"`
	// Organization, Warehouse, Partner, Counterparty and Agreement are the
	// document's, as the create named them; empty when it left them to 1C.
	Organization string `json:"organization,omitempty"`
	Warehouse    string `json:"warehouse,omitempty"`
	Partner      string `json:"partner,omitempty"`
	Counterparty string `json:"counterparty,omitempty"`
	Agreement    string `json:"agreement,omitempty"`
	// Request is the CreateOrder as understood; Body is its JSON as received (less a
	// leading BOM), which is what the control endpoint sends. A planted order
	// (PlantOrder: made by hand in 1C) has neither.
	Request OrderRequest    `json:"-"`
	Body    json.RawMessage `json:"request"`
}

// StockItem is one line of a stock answer.
type StockItem struct {
	SKU      string          `json:"sku"`
	Quantity decimal.Decimal `json:"quantity"`
	Price    decimal.Decimal `json:"price"`
}

// Stats counts what the simulated base received.
type Stats struct {
	// Requests by operation: ping, find, create, cancel, stock, find_returns,
	// create_return, other.
	Requests map[string]int `json:"requests"`
	// SessionsStarted counts requests that carried "IBSession: start".
	SessionsStarted int `json:"sessions_started"`
	// SessionsRejected counts requests refused with 400 for an unknown session.
	SessionsRejected int `json:"sessions_rejected"`
	// SessionConflicts counts requests that arrived on a session already serving
	// another request; a well-behaved client keeps it 0.
	SessionConflicts int `json:"session_conflicts"`
	// AuthFailures counts requests refused for their credentials.
	AuthFailures int `json:"auth_failures"`
	// FaultsFired counts requests hit by an injected fault.
	FaultsFired int `json:"faults_fired"`
	// ConnectionsDropped counts connections closed without an answer.
	ConnectionsDropped int `json:"connections_dropped"`
	// Missing counts requests answered 404 with the web server's HTML page
	// (SetMissing, or an html_404 fault); they are counted in Requests too.
	Missing int `json:"missing"`
	// DownPeriods counts the times the server went down (Down, DownFor), refusing
	// connections until it came up again.
	DownPeriods int `json:"down_periods"`
}

type session struct {
	busy int
}

// OneC is a simulated 1C base publishing contract v1. It is an http.Handler and
// safe for concurrent use.
type OneC struct {
	// Faults fire on the matching requests, first queued first. Op is "ping",
	// "find", "create", "cancel", "stock", "find_returns", "create_return", or ""
	// for any of them; ExternalID, when set, restricts a fault to finds, creates
	// and cancels (of orders and returns) of this external id. A
	// fault is a plain status (406, 422, 502, 503, 504) or one of the kinds above
	// (LockConflict500, DropAfterCreate, …), Delay and Hold timing those that take
	// time. 1C sends no Retry-After, and answers its own bodies.
	Faults *sim.Faults

	prefix   string
	username string
	password string
	authMode AuthFailureMode
	dedupe   bool
	bom      bool
	now      func() time.Time
	loc      *time.Location
	log      *slog.Logger
	// dateFromRequest is Options.OrderDateFromRequest.
	dateFromRequest bool

	closed    chan struct{}
	closeOnce sync.Once
	server    sim.Server

	mu        sync.Mutex
	latency   time.Duration
	opLatency map[string]time.Duration
	knownSKUs map[string]bool // nil: every SKU is known
	orgs      map[string]bool // nil: every organisation, and none, is accepted
	orders    []*Order
	byExtID   map[string][]*Order // orders by lower-cased external id, in orders' order (addLocked)
	returns   []*Return
	noReturns bool
	seq       int
	sessions  map[string]*session
	stock     map[string][]StockItem
	stockRaw  map[string][]byte
	stats     Stats
	inFlight  int
	// locks are the managed locks on external ids that Dedupe creates hold until
	// they commit or roll back; a channel is closed when its lock is released.
	locks map[string]chan struct{}
	// missing are the operations answered 404 by the web server; missingAll: every
	// path.
	missing    map[string]bool
	missingAll bool

	closing bool           // Close began
	bg      sync.WaitGroup // handlers running on in the background (Gateway504After)
}

// New returns a simulated base; it serves nothing until Start, or until it is
// mounted as an http.Handler.
func New(opts Options) *OneC {
	loc := opts.Location
	if loc == nil {
		var err error
		if loc, err = time.LoadLocation("Asia/Almaty"); err != nil {
			loc = time.FixedZone("Asia/Almaty", 5*60*60)
		}
	}
	s := &OneC{
		dateFromRequest: opts.OrderDateFromRequest,

		Faults:    sim.NewFaults(checkFault),
		prefix:    "/" + strings.Trim(opts.Prefix, "/"),
		username:  opts.Username,
		password:  opts.Password,
		authMode:  opts.AuthFailure,
		dedupe:    opts.Dedupe,
		bom:       opts.BOM,
		now:       opts.Now,
		loc:       loc,
		log:       opts.Logger,
		closed:    make(chan struct{}),
		latency:   opts.Latency,
		opLatency: maps.Clone(opts.OpLatency),
		sessions:  map[string]*session{},
		stock:     map[string][]StockItem{},
		stockRaw:  map[string][]byte{},
		stats:     Stats{Requests: map[string]int{}},
		locks:     map[string]chan struct{}{},
		noReturns: opts.NoReturns,
	}
	if opts.Prefix == "" {
		s.prefix = DefaultPrefix
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.setKnownSKUs(opts.KnownSKUs)
	s.SetOrganizations(opts.Organizations)
	return s
}

// Prefix is the path the service is published at.
func (s *OneC) Prefix() string { return s.prefix }

// Start listens on addr (":0" picks a port) and serves in the background.
func (s *OneC) Start(addr string) error {
	return s.server.Start("1c", addr, s, s.log)
}

// Addr is the listening address after Start, "" before.
func (s *OneC) Addr() string {
	return s.server.Addr()
}

// URL is the service's base URL after Start (what onec.base_url would be), "" before.
func (s *OneC) URL() string {
	return s.server.URL(s.prefix)
}

// Close ends stalls, rolls back creates that have not committed (SlowCreate,
// Gateway504After), stops the server started by Start, also while it is down, and
// waits for the simulator's own goroutines. It is safe to call twice and before
// Start.
func (s *OneC) Close() {
	s.closeOnce.Do(func() { close(s.closed) })
	s.mu.Lock()
	s.closing = true // no background handler starts from now: see gateway504After
	s.mu.Unlock()
	s.server.Close()
	s.bg.Wait()
}

// Orders returns a snapshot of every order, in creation order.
func (s *OneC) Orders() []Order {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Order, len(s.orders))
	for i, o := range s.orders {
		out[i] = *o
		out[i].Request.Lines = slices.Clone(o.Request.Lines)
		out[i].Body = slices.Clone(o.Body)
	}
	return out
}

// OrdersByOrganization counts the orders held by the organisation their create
// named; orders that named none (and planted ones) count under "".
func (s *OneC) OrdersByOrganization() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for _, o := range s.orders {
		out[o.Organization]++
	}
	return out
}

// Count is the number of orders held.
func (s *OneC) Count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.orders)
}

// CountExternal is the number of orders holding externalID: more than one is a
// duplicate.
func (s *OneC) CountExternal(externalID string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, o := range s.orders {
		if o.ExternalID == externalID { // exactly: what a test counts
			n++
		}
	}
	return n
}

// PlantedOrder is an order put straight into the base (PlantOrder), as an operator
// makes one by hand in 1C: no request to the service ever created it.
type PlantedOrder struct {
	ExternalID string // the external-ID attribute, e.g. kaspi:512344101; may be empty
	Number     string // default: the base's next number
	Date       string // 1C's zone-less local time; default: now in the base's zone
	Total      decimal.Decimal
	Currency   string
	Posted     bool
	Deleted    bool
	Cancelled  bool
}

// PlantOrder puts p into the base and returns it as held (its Ref is new).
func (s *OneC) PlantOrder(p PlantedOrder) Order {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	now := s.now()
	o := &Order{
		Ref:        uuid.NewString(),
		Number:     p.Number,
		Date:       p.Date,
		ExternalID: p.ExternalID,
		Posted:     p.Posted,
		Deleted:    p.Deleted,
		Cancelled:  p.Cancelled,
		CreatedAt:  now,
		Total:      p.Total,
		Currency:   p.Currency,
	}
	if o.Number == "" {
		o.Number = fmt.Sprintf("ЗК-%06d", s.seq)
	}
	if o.Date == "" {
		o.Date = now.In(s.loc).Format(dateLayout)
	}
	s.addLocked(o)
	return *o
}

// SetTotal changes the total of the order ref, as an operator editing the document
// in 1C does; false when the base holds no such order.
func (s *OneC) SetTotal(ref string, total decimal.Decimal) bool {
	return s.edit(ref, func(o *Order) { o.Total = total })
}

// SetDate changes the document date of the order ref; false when there is none.
func (s *OneC) SetDate(ref, date string) bool {
	return s.edit(ref, func(o *Order) { o.Date = date })
}

// MarkDeleted sets the order's deletion mark (ПометкаУдаления); false when the base
// holds no such order. A marked order is still found and listed, with deleted true.
func (s *OneC) MarkDeleted(ref string, deleted bool) bool {
	return s.edit(ref, func(o *Order) { o.Deleted = deleted })
}

// DeleteOrder removes the order ref from the base altogether, as deleting marked
// objects in 1C does: it is no longer found or listed. False when there is none.
func (s *OneC) DeleteOrder(ref string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, o := range s.orders {
		if o.Ref == ref {
			s.orders = slices.Delete(s.orders, i, i+1)
			k := strings.ToLower(o.ExternalID)
			s.byExtID[k] = slices.DeleteFunc(s.byExtID[k], func(x *Order) bool { return x == o })
			return true
		}
	}
	return false
}

func (s *OneC) edit(ref string, fn func(*Order)) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, o := range s.orders {
		if o.Ref == ref {
			fn(o)
			return true
		}
	}
	return false
}

// SetLatency changes the latency added to every request.
func (s *OneC) SetLatency(d time.Duration) {
	s.mu.Lock()
	s.latency = d
	s.mu.Unlock()
}

// SetKnownSKUs replaces the catalogue; nil accepts every SKU.
func (s *OneC) SetKnownSKUs(skus []string) { s.setKnownSKUs(skus) }

func (s *OneC) setKnownSKUs(skus []string) {
	var known map[string]bool
	if skus != nil {
		known = make(map[string]bool, len(skus))
		for _, k := range skus {
			known[k] = true
		}
	}
	s.mu.Lock()
	s.knownSKUs = known
	s.mu.Unlock()
}

// SetOrganizations replaces the base's organisations (Options.Organizations); nil
// accepts any organisation, and none.
func (s *OneC) SetOrganizations(orgs []string) {
	var known map[string]bool
	if orgs != nil {
		known = make(map[string]bool, len(orgs))
		for _, o := range orgs {
			known[o] = true
		}
	}
	s.mu.Lock()
	s.orgs = known
	s.mu.Unlock()
}

// SetStock sets what GET /stock answers for warehouse. A warehouse never set is
// unknown: GET /stock answers 422 unknown_warehouse, as the contract says.
func (s *OneC) SetStock(warehouse string, items ...StockItem) {
	s.mu.Lock()
	s.stock[warehouse] = append([]StockItem{}, items...)
	delete(s.stockRaw, warehouse)
	s.mu.Unlock()
}

// SetStockBody makes GET /stock answer body, as it is, for warehouse: a 1C module
// that breaks the contract (a duplicate SKU, a quantity that is not a number).
func (s *OneC) SetStockBody(warehouse string, body []byte) {
	s.mu.Lock()
	s.stockRaw[warehouse] = slices.Clone(body)
	s.mu.Unlock()
}

// ExpireSessions forgets every session, as a restarted or administered 1C server does.
func (s *OneC) ExpireSessions() {
	s.mu.Lock()
	s.sessions = map[string]*session{}
	s.mu.Unlock()
}

// Sessions is the number of live sessions.
func (s *OneC) Sessions() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sessions)
}

// Stats returns a snapshot of the counters.
func (s *OneC) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.Requests = maps.Clone(s.stats.Requests)
	return st
}

// WaitIdle waits until no request is being processed: a handler may still be
// working after its client gave up (a stalled create creates the order afterwards,
// a SlowCreate or Gateway504After commits it afterwards).
func (s *OneC) WaitIdle(ctx context.Context) error {
	t := time.NewTicker(2 * time.Millisecond)
	defer t.Stop()
	for {
		s.mu.Lock()
		n := s.inFlight
		s.mu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("sim: 1c: %d requests still in flight: %w", n, ctx.Err())
		case <-t.C:
		}
	}
}

// ServeHTTP serves contract v1 under the prefix and the control endpoints under /_sim/.
func (s *OneC) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, controlPrefix) {
		s.serveControl(w, r)
		return
	}
	op, allowed := s.route(r)
	if s.isMissing(op) {
		s.answerMissing(w, r, op, allowed)
		return
	}
	s.mu.Lock()
	s.inFlight++
	latency := s.latency
	if d, ok := s.opLatency[op]; ok {
		latency = d
	}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.inFlight--
		s.mu.Unlock()
	}()

	s.wait(r.Context(), latency, false)

	counted := op
	if !allowed {
		counted = opOther
	}
	s.mu.Lock()
	s.stats.Requests[counted]++
	s.mu.Unlock()
	s.log.DebugContext(r.Context(), "1c sim: request", "op", op, "method", r.Method, "path", r.URL.Path)

	if !s.authorized(r) {
		s.mu.Lock()
		s.stats.AuthFailures++
		s.mu.Unlock()
		s.answerAuthFailure(w)
		return
	}
	if op == opOther {
		s.writeText(w, http.StatusNotFound, "Не найден шаблон URL, соответствующий запросу: "+r.URL.Path)
		return
	}
	if !allowed {
		w.Header().Set("Allow", allowedMethod(op))
		s.writeText(w, http.StatusMethodNotAllowed, "Метод "+r.Method+" не поддерживается для "+r.URL.Path)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 16<<20))
	if err != nil {
		// The client went away while sending: 1C never sees such a request.
		return
	}

	f := s.takeFault(op, externalIDOf(op, r, body))
	if f != nil {
		s.log.InfoContext(r.Context(), "1c sim: fault fired", "op", op, "kind", FaultName(*f))
		if s.gatewayFault(w, r, f) {
			return
		}
	}

	release, ok := s.enterSession(w, r)
	if !ok {
		return
	}
	defer func() {
		if release != nil { // nil: handed to a handler running on in the background
			release()
		}
	}()

	dropAfter := false
	if f != nil {
		switch f.Kind {
		case LockConflict500:
			s.writeError(w, http.StatusInternalServerError, lockConflictError, nil)
			return
		case BusinessError500:
			// The module answers an exception of its own as the contract's error.
			s.writeError(w, http.StatusInternalServerError, apiError{Code: "exception", Message: businessErrorText}, nil)
			return
		case "": // a plain status the gateway did not answer: 422
			s.writeError(w, http.StatusUnprocessableEntity, apiError{Code: "rejected", Message: "Заказ отклонён обработчиком (внедрённая ошибка симулятора)"}, nil)
			return
		case Stall:
			s.wait(r.Context(), f.Delay, true)
		case SlowCreate:
			switch op {
			case opCreate:
				s.answerCreate(w, s.create(body, f.Delay))
				return
			case opCreateReturn:
				s.answerCreateReturn(w, s.createReturn(body, f.Delay))
				return
			}
			s.sleep(f.Delay)
		case Gateway504After:
			s.gateway504After(w, r, op, body, f, release)
			release = nil
			return
		case DropAfterCreate:
			dropAfter = true
		case Error500AfterCreate:
			// The handler does its work and commits; then the module fails and
			// answers its exception as the contract's error object.
			s.serveOp(discardWriter{h: http.Header{}}, r, op, body)
			s.writeError(w, http.StatusInternalServerError, apiError{Code: "exception", Message: afterWriteErrorText}, nil)
			return
		}
	}

	if dropAfter {
		// Do the work into a throw-away writer, then drop the connection.
		s.serveOp(discardWriter{h: http.Header{}}, r, op, body)
		s.drop(w)
		return
	}
	s.serveOp(w, r, op, body)
}

// gatewayFault answers the faults that happen before 1C runs the handler and
// reports whether the request is finished.
func (s *OneC) gatewayFault(w http.ResponseWriter, r *http.Request, f *sim.Fault) bool {
	if f.Kind == "" {
		switch f.Status {
		case http.StatusServiceUnavailable:
			s.writeText(w, http.StatusServiceUnavailable, "Сервис временно недоступен: сервер 1С:Предприятия не отвечает")
		case http.StatusBadGateway:
			s.writeText(w, http.StatusBadGateway, "Bad Gateway: ошибка при обращении к серверу 1С:Предприятия")
		case http.StatusGatewayTimeout:
			s.writeText(w, http.StatusGatewayTimeout, "Gateway Timeout: сервер 1С:Предприятия не ответил вовремя")
		case http.StatusNotAcceptable:
			s.writeText(w, http.StatusNotAcceptable, "Не удалось начать сеанс: нет свободной лицензии на сервере 1С:Предприятия или превышено число сеансов")
		default:
			return false
		}
		return true
	}
	switch f.Kind {
	case HTMLLogin200:
		s.writeHTML(w, http.StatusOK, loginPage)
	case HTML404:
		s.mu.Lock()
		s.stats.Missing++
		s.mu.Unlock()
		s.writeHTML(w, http.StatusNotFound, notFoundPage)
	case DropBeforeCreate:
		s.drop(w)
	case ExpireSessions:
		s.ExpireSessions()
		return false
	default:
		return false
	}
	return true
}

func (s *OneC) serveOp(w http.ResponseWriter, r *http.Request, op string, body []byte) {
	switch op {
	case opPing:
		s.writeJSON(w, http.StatusOK, map[string]string{"service": "ordersync", "version": "1.0"})
	case opFind:
		s.serveFind(w, r)
	case opCreate:
		s.serveCreate(w, body)
	case opCancel:
		s.serveCancel(w, body)
	case opStock:
		s.serveStock(w, r)
	case opFindReturns:
		s.serveFindReturns(w, r)
	case opCreateReturn:
		s.serveCreateReturn(w, body)
	}
}

// route names the operation of r and says whether its method is the right one.
func (s *OneC) route(r *http.Request) (op string, allowed bool) {
	rest, ok := strings.CutPrefix(r.URL.Path, s.prefix)
	if !ok {
		return opOther, false
	}
	switch strings.TrimSuffix(rest, "/") {
	case "/ping":
		return opPing, r.Method == http.MethodGet
	case "/orders":
		if r.Method == http.MethodPost {
			return opCreate, true
		}
		return opFind, r.Method == http.MethodGet
	case "/orders/cancel":
		return opCancel, r.Method == http.MethodPost
	case "/stock":
		return opStock, r.Method == http.MethodGet
	case "/returns":
		if s.noReturns {
			return opOther, false
		}
		if r.Method == http.MethodPost {
			return opCreateReturn, true
		}
		return opFindReturns, r.Method == http.MethodGet
	}
	return opOther, false
}

func allowedMethod(op string) string {
	switch op {
	case opCreate, opCancel, opCreateReturn:
		return http.MethodPost
	case opFind, opFindReturns:
		return http.MethodGet + ", " + http.MethodPost
	}
	return http.MethodGet
}

func externalIDOf(op string, r *http.Request, body []byte) string {
	switch op {
	case opFind, opFindReturns:
		return r.URL.Query().Get("external_id")
	case opCreate, opCancel, opCreateReturn:
		var v struct {
			ExternalID string `json:"external_id"`
		}
		_ = json.Unmarshal(bytes.TrimPrefix(body, bom), &v)
		return v.ExternalID
	}
	return ""
}

func (s *OneC) takeFault(op, externalID string) *sim.Fault {
	f, ok := s.Faults.Take(func(f sim.Fault) bool { return f.Matches(op, externalID) })
	if !ok {
		return nil
	}
	s.mu.Lock()
	s.stats.FaultsFired++
	s.mu.Unlock()
	return &f
}

// wait sleeps d, or until the client gives up when d is 0 and untilGiveUp is set.
// It ends early when the client gives up or the simulator closes. The handler goes
// on afterwards either way, as 1C does: it does not notice that nobody waits for
// the answer.
func (s *OneC) wait(ctx context.Context, d time.Duration, untilGiveUp bool) {
	if d <= 0 && !untilGiveUp {
		return
	}
	var timeout <-chan time.Time
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-timeout:
	case <-ctx.Done():
	case <-s.closed:
	}
}

// sleep waits d whatever the client does, as a busy 1C handler does (it runs
// detached from the request); false: the simulator closed first.
func (s *OneC) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-s.closed:
		return false
	}
}

func (s *OneC) authorized(r *http.Request) bool {
	if s.username == "" {
		return true
	}
	u, p, ok := r.BasicAuth()
	if !ok {
		return false
	}
	uOK := subtle.ConstantTimeCompare([]byte(u), []byte(s.username)) == 1
	pOK := subtle.ConstantTimeCompare([]byte(p), []byte(s.password)) == 1
	return uOK && pOK
}

func (s *OneC) answerAuthFailure(w http.ResponseWriter) {
	if s.authMode == AuthStatus401 {
		w.Header().Set("WWW-Authenticate", `Basic realm="1C:Enterprise", charset="UTF-8"`)
		s.writeText(w, http.StatusUnauthorized, "Идентификация пользователя не выполнена")
		return
	}
	s.writeHTML(w, http.StatusOK, loginPage)
}

// enterSession applies 1C's session rules to r: "IBSession: start" opens a session
// and sets its cookie, a cookie naming an unknown session is answered 400. The
// returned release ends the request's use of the session.
func (s *OneC) enterSession(w http.ResponseWriter, r *http.Request) (release func(), ok bool) {
	header := strings.ToLower(strings.TrimSpace(r.Header.Get("IBSession")))
	var id string
	if c, err := r.Cookie("ibsession"); err == nil && c.Value != "" {
		id = c.Value
	}
	s.mu.Lock()
	var sess *session
	switch {
	case id != "":
		sess = s.sessions[id]
		if sess == nil {
			s.stats.SessionsRejected++
			s.mu.Unlock()
			s.writeText(w, http.StatusBadRequest, "Сеанс отсутствует или удален")
			return nil, false
		}
	case header == "start":
		id = uuid.NewString()
		sess = &session{}
		s.sessions[id] = sess
		s.stats.SessionsStarted++
		http.SetCookie(w, &http.Cookie{Name: "ibsession", Value: id, Path: "/", HttpOnly: true})
	default:
		s.mu.Unlock()
		return func() {}, true
	}
	sess.busy++
	if sess.busy > 1 {
		s.stats.SessionConflicts++
	}
	s.mu.Unlock()
	finish := header == "finish"
	return func() {
		s.mu.Lock()
		sess.busy--
		if finish {
			delete(s.sessions, id)
		}
		s.mu.Unlock()
	}, true
}

// drop closes the connection under r without an answer.
func (s *OneC) drop(w http.ResponseWriter) {
	s.mu.Lock()
	s.stats.ConnectionsDropped++
	s.mu.Unlock()
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			conn.Close()
			return
		}
	}
	// HTTP/2 or a recorder: make the server abort the response instead.
	panic(http.ErrAbortHandler)
}

// findLocked is 1C's search by the external-ID attribute: like a query of a real
// base (and the reference module's lock key), it does not tell letter case apart,
// so site:AB12 finds site:ab12's order too.
//
// It looks in an index by the lower-cased id, as a base's index on the attribute
// would, rather than through every order: a benchmark's base holds thousands, and a
// scan of them cost the simulator more than the client it measures.
func (s *OneC) findLocked(externalID string) []*Order {
	var out []*Order
	for _, o := range s.byExtID[strings.ToLower(externalID)] {
		if strings.EqualFold(o.ExternalID, externalID) {
			out = append(out, o)
		}
	}
	return out
}

// addLocked adds an order to the base and to the index findLocked reads.
func (s *OneC) addLocked(o *Order) {
	s.orders = append(s.orders, o)
	if s.byExtID == nil {
		s.byExtID = map[string][]*Order{}
	}
	k := strings.ToLower(o.ExternalID)
	s.byExtID[k] = append(s.byExtID[k], o)
}

// serveFind answers GET /orders: the find by external_id, or the listing by source
// and period (faults and SetMissing name both "find": they are one URL to 1C).
func (s *OneC) serveFind(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if !q.Has("external_id") && q.Has("source") {
		s.serveList(w, q)
		return
	}
	if !q.Has("external_id") {
		s.writeError(w, http.StatusBadRequest, apiError{Code: "missing_parameter", Message: "Не указан параметр external_id (или source, date_from и date_to)", Field: "external_id"}, nil)
		return
	}
	s.mu.Lock()
	found := s.findLocked(q.Get("external_id"))
	list := make([]order1C, 0, len(found))
	for _, o := range found {
		list = append(list, toOrder1C(o))
	}
	s.mu.Unlock()
	s.writeJSON(w, http.StatusOK, map[string]any{"orders": list})
}

// serveList answers GET /orders?source=S&date_from=D&date_to=D: the orders whose
// external id starts with "S:", dated within [D, D] (zone-less local times compare as
// strings), earliest first, marked-for-deletion ones included.
func (s *OneC) serveList(w http.ResponseWriter, q url.Values) {
	source, from, to := q.Get("source"), q.Get("date_from"), q.Get("date_to")
	for _, p := range []struct{ name, v string }{{"source", source}, {"date_from", from}, {"date_to", to}} {
		if p.v == "" {
			s.writeError(w, http.StatusBadRequest, apiError{Code: "missing_parameter", Message: "Не указан параметр " + p.name, Field: p.name}, nil)
			return
		}
	}
	for _, p := range []struct{ name, v string }{{"date_from", from}, {"date_to", to}} {
		if _, err := time.Parse(dateLayout, p.v); err != nil {
			s.writeError(w, http.StatusBadRequest, apiError{Code: "invalid_request", Message: fmt.Sprintf("Параметр %s %q не является датой ГГГГ-ММ-ДДTЧЧ:ММ:СС", p.name, p.v), Field: p.name}, nil)
			return
		}
	}
	prefix := strings.ToLower(source + ":")
	s.mu.Lock()
	var found []*Order
	for _, o := range s.orders {
		// 1C compares strings case-insensitively.
		if strings.HasPrefix(strings.ToLower(o.ExternalID), prefix) && o.Date >= from && o.Date <= to {
			found = append(found, o)
		}
	}
	slices.SortStableFunc(found, func(a, b *Order) int {
		return cmp.Or(strings.Compare(a.Date, b.Date), strings.Compare(a.Number, b.Number))
	})
	list := make([]order1C, 0, len(found))
	for _, o := range found {
		list = append(list, toOrder1C(o))
	}
	s.mu.Unlock()
	s.writeJSON(w, http.StatusOK, map[string]any{"orders": list})
}

func (s *OneC) serveCreate(w http.ResponseWriter, body []byte) {
	s.answerCreate(w, s.create(body, 0))
}

// lockTimeout is how long a create waits for a managed lock, 1C's default.
const lockTimeout = 20 * time.Second

// createResult is what a create's handler answers: the order it created, a plain
// text (a 1C exception) with status, or an {"error"} with status and the existing
// order of a 409.
type createResult struct {
	order    *Order
	status   int
	text     string
	problem  *apiError
	existing *order1C
}

func (s *OneC) answerCreate(w http.ResponseWriter, res createResult) {
	switch {
	case res.order != nil:
		o := res.order
		s.writeJSON(w, http.StatusCreated, map[string]string{"ref": o.Ref, "number": o.Number, "date": o.Date})
	case res.problem != nil:
		s.writeError(w, res.status, *res.problem, res.existing)
	default:
		s.writeText(w, res.status, res.text)
	}
}

// create is the handler of a create. It checks the order and, with Dedupe, finds
// its external id under a managed lock, in the transaction that writes it. The
// transaction commits after hold: until then finds do not see the order and the
// lock stays taken, so a Dedupe create of the same external id waits (up to
// lockTimeout, then fails as 1C does with a lock conflict). Close rolls back a
// transaction that has not committed.
func (s *OneC) create(body []byte, hold time.Duration) createResult {
	req, status, problem := parseCreate(body)
	if problem != nil {
		return createResult{status: status, problem: problem}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.knownSKUs != nil {
		for i, l := range req.Lines {
			if !s.knownSKUs[l.SKU] {
				return createResult{status: http.StatusUnprocessableEntity, problem: &apiError{
					Code:    "unknown_sku",
					Message: fmt.Sprintf("Номенклатура с артикулом %q не найдена", l.SKU),
					Field:   fmt.Sprintf("lines[%d].sku", i),
				}}
			}
		}
	}
	if s.dedupe {
		// The reference module: find under a managed lock on the external id, in the
		// same transaction as the write.
		if err := s.lockLocked(req.ExternalID); err != nil {
			return *err
		}
		defer s.unlockLocked(req.ExternalID) // runs before the deferred s.mu.Unlock
		if found := s.findLocked(req.ExternalID); len(found) > 0 {
			existing := toOrder1C(found[0])
			return createResult{status: http.StatusConflict, problem: &apiError{
				Code:    "already_exists",
				Message: fmt.Sprintf("Заказ клиента с внешним номером %q уже существует: %s", req.ExternalID, existing.Number),
			}, existing: &existing}
		}
	}
	// The module answers an order it already holds before it looks at the
	// organisation (a retry gets 409, not 422).
	if s.orgs != nil {
		switch {
		case req.Organization == "":
			return createResult{status: http.StatusUnprocessableEntity, problem: &apiError{
				Code: "missing_organization", Message: "Не указана организация заказа", Field: "organization",
			}}
		case !s.orgs[req.Organization]:
			return createResult{status: http.StatusUnprocessableEntity, problem: &apiError{
				Code:    "unknown_organization",
				Message: fmt.Sprintf("Организация с кодом или идентификатором %q не найдена", req.Organization),
				Field:   "organization",
			}}
		}
	}
	if hold > 0 {
		// The document is written; the transaction is open for hold.
		s.mu.Unlock()
		committed := s.sleep(hold)
		s.mu.Lock()
		if !committed {
			return createResult{status: http.StatusServiceUnavailable, text: shutdownText}
		}
	}
	s.seq++
	now := s.now()
	date := now.In(s.loc).Format(dateLayout)
	if _, err := time.Parse(dateLayout, req.Date); err == nil && s.dateFromRequest {
		date = req.Date
	}
	o := &Order{
		Ref:        uuid.NewString(),
		Number:     fmt.Sprintf("ЗК-%06d", s.seq),
		Date:       date,
		ExternalID: req.ExternalID,
		Posted:     true,
		CreatedAt:  now,
		Total:      req.Total,
		Currency:   req.Currency,

		Organization: req.Organization,
		Warehouse:    req.Warehouse,
		Partner:      req.Partner,
		Counterparty: req.Counterparty,
		Agreement:    req.Agreement,

		Request: req,
		Body:    bytes.Clone(bytes.TrimPrefix(body, bom)),
	}
	s.addLocked(o)
	return createResult{order: o}
}

// lockLocked takes the managed lock on externalID, waiting while another create
// holds it; s.mu is held on entry and return. On failure it returns the answer.
func (s *OneC) lockLocked(externalID string) *createResult {
	var timeout <-chan time.Time
	for {
		held, ok := s.locks[externalID]
		if !ok {
			s.locks[externalID] = make(chan struct{})
			return nil
		}
		if timeout == nil {
			t := time.NewTimer(lockTimeout)
			defer t.Stop()
			timeout = t.C
		}
		s.mu.Unlock()
		select {
		case <-held:
			s.mu.Lock()
		case <-timeout:
			s.mu.Lock()
			conflict := lockConflictError
			return &createResult{status: http.StatusInternalServerError, problem: &conflict}
		case <-s.closed:
			s.mu.Lock()
			return &createResult{status: http.StatusServiceUnavailable, text: shutdownText}
		}
	}
}

// unlockLocked releases the managed lock on externalID; s.mu is held.
func (s *OneC) unlockLocked(externalID string) {
	close(s.locks[externalID])
	delete(s.locks, externalID)
}

func (s *OneC) serveCancel(w http.ResponseWriter, body []byte) {
	var req struct {
		ExternalID string `json:"external_id"`
		Reason     string `json:"reason"`
	}
	if err := json.Unmarshal(bytes.TrimPrefix(body, bom), &req); err != nil {
		s.writeError(w, http.StatusBadRequest, apiError{Code: "bad_request", Message: "Некорректный JSON: " + err.Error()}, nil)
		return
	}
	if req.ExternalID == "" {
		s.writeError(w, http.StatusUnprocessableEntity, apiError{Code: "invalid", Message: "Не заполнен внешний номер заказа", Field: "external_id"}, nil)
		return
	}
	s.mu.Lock()
	found := s.findLocked(req.ExternalID)
	for _, o := range found {
		if !o.Cancelled {
			o.Cancelled = true
			o.CancelReason = req.Reason
		}
	}
	s.mu.Unlock()
	if len(found) == 0 {
		s.writeError(w, http.StatusNotFound, apiError{Code: "not_found", Message: fmt.Sprintf("Заказ клиента с внешним номером %q не найден", req.ExternalID)}, nil)
		return
	}
	s.writeJSON(w, http.StatusOK, map[string]string{"ref": found[0].Ref, "status": "cancelled"})
}

func (s *OneC) serveStock(w http.ResponseWriter, r *http.Request) {
	wh := r.URL.Query().Get("warehouse")
	if wh == "" {
		s.writeError(w, http.StatusBadRequest, apiError{Code: "bad_request", Message: "Не указан параметр warehouse", Field: "warehouse"}, nil)
		return
	}
	s.mu.Lock()
	if raw, ok := s.stockRaw[wh]; ok {
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.WriteHeader(http.StatusOK)
		w.Write(raw)
		return
	}
	items, known := s.stock[wh]
	if !known {
		s.mu.Unlock()
		s.writeError(w, http.StatusUnprocessableEntity, apiError{Code: "unknown_warehouse", Message: fmt.Sprintf("Склад с кодом или наименованием %q не найден", wh), Field: "warehouse"}, nil)
		return
	}
	out := make([]stockItemWire, len(items))
	for i, it := range items {
		out[i] = stockItemWire{SKU: it.SKU, Quantity: exact(it.Quantity), Price: exact(it.Price)}
	}
	s.mu.Unlock()
	s.writeJSON(w, http.StatusOK, stockWire{Warehouse: wh, TakenAt: s.now().In(s.loc).Format(dateLayout), Items: out})
}

const dateLayout = "2006-01-02T15:04:05"

var bom = []byte{0xEF, 0xBB, 0xBF}

// order1C is Order1C of contract v1, with the listing's total, currency and
// cancelled, which the reference module sends on a find as well.
type order1C struct {
	Ref        string `json:"ref"`
	Number     string `json:"number"`
	Date       string `json:"date"`
	ExternalID string `json:"external_id"`
	Posted     bool   `json:"posted"`
	Deleted    bool   `json:"deleted"`
	Total      exact  `json:"total"`
	Currency   string `json:"currency"`
	Cancelled  bool   `json:"cancelled"`
}

func toOrder1C(o *Order) order1C {
	return order1C{Ref: o.Ref, Number: o.Number, Date: o.Date, ExternalID: o.ExternalID, Posted: o.Posted, Deleted: o.Deleted,
		Total: exact(o.Total), Currency: o.Currency, Cancelled: o.Cancelled}
}

type apiError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
}

// exact is a decimal that marshals as a bare JSON number, whatever the decimal
// package's global quoting setting is.
type exact decimal.Decimal

func (d exact) MarshalJSON() ([]byte, error) { return []byte(decimal.Decimal(d).String()), nil }

// UnmarshalJSON reads a bare JSON number exactly (the simulator's own tests read
// its answers back).
func (d *exact) UnmarshalJSON(b []byte) error {
	v, err := number(b)
	if err != nil {
		return err
	}
	*d = exact(v)
	return nil
}

type stockItemWire struct {
	SKU      string `json:"sku"`
	Quantity exact  `json:"quantity"`
	Price    exact  `json:"price"`
}

type stockWire struct {
	Warehouse string          `json:"warehouse"`
	TakenAt   string          `json:"taken_at"`
	Items     []stockItemWire `json:"items"`
}

func (s *OneC) writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic("sim: 1c: encode answer: " + err.Error())
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	if s.bom {
		w.Write(bom)
	}
	w.Write(b)
}

func (s *OneC) writeError(w http.ResponseWriter, status int, e apiError, existing *order1C) {
	body := struct {
		Error apiError `json:"error"`
		Order *order1C `json:"order,omitempty"`
	}{e, existing}
	s.writeJSON(w, status, body)
}

func (s *OneC) writeText(w http.ResponseWriter, status int, text string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	io.WriteString(w, text)
}

func (s *OneC) writeHTML(w http.ResponseWriter, status int, page string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	io.WriteString(w, page)
}

// discardWriter swallows an answer that will never be sent.
type discardWriter struct{ h http.Header }

func (d discardWriter) Header() http.Header         { return d.h }
func (d discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (d discardWriter) WriteHeader(int)             {}

// lockConflictError is how the module answers a lock conflict (HTTP 500): the
// contract's error object, code lock_conflict, with the platform's text. The module
// tells a lock conflict by the exception's own text; a client, by the code only.
var lockConflictError = apiError{Code: "lock_conflict", Message: lockConflictText}

const lockConflictText = `{ОбщийМодуль.ordersync.Модуль(118)}: Ошибка при вызове метода контекста (Записать)
	ДокументОбъект.Записать(РежимЗаписиДокумента.Проведение);
по причине:
Конфликт блокировок при выполнении транзакции:
Превышено максимальное время ожидания предоставления блокировки.
Ресурс: РегистрНакопления.ТоварыНаСкладах`

const shutdownText = "Сервер 1С:Предприятия завершает работу: транзакция отменена"

const afterWriteErrorText = `{ОбщийМодуль.ordersync.Модуль(212)}: Ошибка при вызове метода контекста (ЗаписатьJSON)
по причине:
Недостаточно памяти для формирования ответа`

const businessErrorText = `{ОбщийМодуль.ordersync.Модуль(131)}: Не удалось записать "Заказ клиента"!
по причине:
Поле "Соглашение с клиентом" не заполнено
	ВызватьИсключение ТекстОшибки;`

const loginPage = `<!DOCTYPE html>
<html lang="ru">
<head><meta charset="utf-8"><title>1С:Предприятие</title></head>
<body>
<div class="login">
<h1>1С:Предприятие</h1>
<p>Идентификация пользователя не выполнена.</p>
<form method="post"><label>Пользователь <input name="user"></label>
<label>Пароль <input name="pwd" type="password"></label>
<button type="submit">Войти</button></form>
</div>
</body>
</html>
`
