package wbsim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"time"
)

// The stock and content operations the simulator serves, as Request.Op and
// sim.Fault.Op name them.
const (
	OpStocksUpdate = "stocks_update" // PUT /api/v3/stocks/{warehouseId}
	OpStocksGet    = "stocks_get"    // POST /api/v3/stocks/{warehouseId}
	OpCardsList    = "cards_list"    // POST /content/v2/get/cards/list
)

// Documented rules of the stock methods.
const (
	// StockMaxItems is the most items one PUT carries (and, here, one read asks for).
	StockMaxItems = 1000
	// StockMaxAmount is the largest amount a PUT takes: above it, 409 UploadDataLimit.
	StockMaxAmount = 100000
	// StockPerMinute and StockBurst are the limit of the stock methods per
	// seller account: 300 requests a minute (one per 200 ms), bursts of 20.
	StockPerMinute = 300
	StockBurst     = 20
	// ConflictCost is how many requests an answer 409 counts as against the limit.
	ConflictCost = 10
)

// Rules a Violation names.
const (
	RuleRate  = "rate_limit" // a request beyond the limit (answered 429)
	RuleBatch = "batch_size" // more than StockMaxItems items in one request
)

// Violation is a request that broke a documented rule of the stock or content
// methods: a well-behaved client has none.
type Violation struct {
	At     time.Time // the simulator's clock
	Op     string
	Rule   string // RuleRate, RuleBatch
	Detail string
}

// StockStats counts the stock requests that reached the API (past the token and
// the injected faults; Limited counts those the rate limit stopped) and what became
// of them.
type StockStats struct {
	Updates int // PUT requests
	Reads   int // POST requests
	// Written is how many items PUTs wrote; Dropped how many a DropStockWrites
	// fault lost while answering 204.
	Written, Dropped int
	// Ignored is how many PUTs were answered 204 without changing anything: a field
	// name the API does not know.
	Ignored   int
	Conflicts int // answered 409
	Limited   int // answered 429 by the rate limit
	Invalid   int // answered 400
}

type wbStockKey struct{ warehouse, chrtID int64 }

type wbRefusal struct{ code, message string }

// wbStock is the simulator's stock and content state, guarded by Wildberries.mu;
// the zero value is ready once stockLocked has run.
type wbStock struct {
	ready      bool
	cards      map[int64]*Card // by nmID
	chrt       map[int64]int64 // chrtID → nmID
	warehouses map[int64]bool
	amounts    map[wbStockKey]int64
	refusals   map[wbStockKey]wbRefusal
	drops      map[int64]bool
	limit      wbBucket // the stock methods
	content    wbBucket // the content methods
	stats      StockStats
	violations []Violation
}

// stockLocked returns the stock state, made ready; s.mu is held.
func (s *Wildberries) stockLocked() *wbStock {
	st := &s.stock
	if !st.ready {
		st.ready = true
		st.cards = map[int64]*Card{}
		st.chrt = map[int64]int64{}
		st.warehouses = map[int64]bool{}
		st.amounts = map[wbStockKey]int64{}
		st.refusals = map[wbStockKey]wbRefusal{}
		st.drops = map[int64]bool{}
		st.limit.configure(StockPerMinute, StockBurst)
		st.content.configure(ContentPerMinute, ContentBurst)
	}
	return st
}

// wbBucket is a token bucket on the simulator's clock: it starts full (burst
// tokens), refills at perSecond, and goes below zero when an answer costs more
// than the request did (a 409).
type wbBucket struct {
	perSecond float64 // 0: no limit
	burst     float64
	tokens    float64
	last      time.Time
	started   bool
}

func (b *wbBucket) configure(perMinute float64, burst int) {
	*b = wbBucket{}
	if perMinute > 0 {
		b.perSecond = perMinute / 60
		b.burst = float64(max(burst, 1))
	}
}

func (b *wbBucket) refill(now time.Time) {
	if !b.started {
		b.started, b.tokens, b.last = true, b.burst, now
		return
	}
	if d := now.Sub(b.last); d > 0 {
		b.tokens = min(b.burst, b.tokens+d.Seconds()*b.perSecond)
		b.last = now
	}
}

// take spends one token, or says how long until one is there.
func (b *wbBucket) take(now time.Time) (ok bool, wait time.Duration) {
	if b.perSecond == 0 {
		return true, 0
	}
	b.refill(now)
	if b.tokens < 1 {
		return false, time.Duration((1 - b.tokens) / b.perSecond * float64(time.Second))
	}
	b.tokens--
	return true, 0
}

// charge spends n more tokens, below zero if need be.
func (b *wbBucket) charge(now time.Time, n float64) {
	if b.perSecond == 0 {
		return
	}
	b.refill(now)
	b.tokens -= n
}

func (b *wbBucket) remaining() int {
	if b.perSecond == 0 {
		return 0
	}
	return max(int(math.Floor(b.tokens)), 0)
}

// AddStockWarehouse registers the seller's warehouses: stock requests for any other
// warehouse id are answered 404.
func (s *Wildberries) AddStockWarehouse(ids ...int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stockLocked()
	for _, id := range ids {
		st.warehouses[id] = true
	}
}

// SetStock sets the amount held for a chrtID at a warehouse, as if a PUT had.
func (s *Wildberries) SetStock(warehouse, chrtID, amount int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stockLocked().amounts[wbStockKey{warehouse, chrtID}] = amount
}

// StockAmount is the amount held for a chrtID at a warehouse; false when none was
// ever set.
func (s *Wildberries) StockAmount(warehouse, chrtID int64) (int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.stockLocked().amounts[wbStockKey{warehouse, chrtID}]
	return a, ok
}

// StockAmounts returns every amount held at a warehouse, by chrtID.
func (s *Wildberries) StockAmounts(warehouse int64) map[int64]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[int64]int64{}
	for k, a := range s.stockLocked().amounts {
		if k.warehouse == warehouse {
			out[k.chrtID] = a
		}
	}
	return out
}

// RefuseStock makes a PUT that names chrtID at warehouse answer 409 with code and
// message (CargoWarehouseRestrictionMGT, SubjectDBSRestriction, …), changing
// nothing; an empty code lifts the refusal.
func (s *Wildberries) RefuseStock(warehouse, chrtID int64, code, message string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stockLocked()
	if code == "" {
		delete(st.refusals, wbStockKey{warehouse, chrtID})
		return
	}
	st.refusals[wbStockKey{warehouse, chrtID}] = wbRefusal{code, message}
}

// DropStockWrites makes PUTs lose the writes of these chrtIDs, at every warehouse,
// while answering 204 as usual: the old amount stays, which only a read-back shows.
// It holds until ClearStockDrops.
func (s *Wildberries) DropStockWrites(chrtIDs ...int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stockLocked()
	for _, id := range chrtIDs {
		st.drops[id] = true
	}
}

// ClearStockDrops ends every DropStockWrites.
func (s *Wildberries) ClearStockDrops() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.stockLocked().drops)
}

// SetStockLimit sets the stock methods' rate: perMinute requests a minute with
// bursts of burst; perMinute 0 or less sets no limit. The default is the documented
// StockPerMinute and StockBurst. The bucket starts full.
func (s *Wildberries) SetStockLimit(perMinute float64, burst int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stockLocked().limit.configure(perMinute, burst)
}

// StockStats returns the stock requests' counts so far.
func (s *Wildberries) StockStats() StockStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stockLocked().stats
}

// Violations returns the requests that broke a documented rule of the stock or
// content methods, in arrival order.
func (s *Wildberries) Violations() []Violation {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.stockLocked().violations)
}

// wbStockRoute names the stock and content operations; parts is the path split.
func wbStockRoute(method string, parts []string) (string, []string, bool) {
	switch {
	case len(parts) == 4 && parts[0] == "api" && parts[1] == "v3" && parts[2] == "stocks":
		switch method {
		case http.MethodPut:
			return OpStocksUpdate, []string{parts[3]}, true
		case http.MethodPost:
			return OpStocksGet, []string{parts[3]}, true
		}
	case method == http.MethodPost && slices.Equal(parts, []string{"content", "v2", "get", "cards", "list"}):
		return OpCardsList, nil, true
	}
	return "", nil, false
}

// serveStockOp serves a stock or content operation: the rate limit first, then
// the API.
func (s *Wildberries) serveStockOp(w http.ResponseWriter, op string, vars []string, body []byte) {
	now := s.now()
	s.mu.Lock()
	st := s.stockLocked()
	bucket := &st.limit
	if op == OpCardsList {
		bucket = &st.content
	}
	ok, wait := bucket.take(now)
	if !ok {
		if op != OpCardsList {
			st.stats.Limited++
		}
		st.violations = append(st.violations, Violation{At: now, Op: op, Rule: RuleRate,
			Detail: fmt.Sprintf("a request %s before the limit allowed one", wait.Round(time.Millisecond))})
		limit := int(bucket.burst)
		s.mu.Unlock()
		s.writeRateLimited(w, op, wait, limit)
		return
	}
	s.mu.Unlock()
	switch op {
	case OpCardsList:
		s.serveCardsList(w, body)
	case OpStocksUpdate:
		s.serveStocksUpdate(w, vars[0], body)
	case OpStocksGet:
		s.serveStocksGet(w, vars[0], body)
	}
}

// writeRateLimited answers 429 as the gateway does: X-Ratelimit-Retry is the
// seconds until a request is allowed (rounded up), X-Ratelimit-Reset until the
// bucket is full again, at least that, X-Ratelimit-Limit the burst and
// X-Ratelimit-Remaining 0.
func (s *Wildberries) writeRateLimited(w http.ResponseWriter, op string, wait time.Duration, limit int) {
	methods := "stock"
	if op == OpCardsList {
		methods = "content"
	}
	secs := int64(math.Ceil(wait.Seconds()))
	w.Header().Set("X-Ratelimit-Retry", strconv.FormatInt(secs, 10))
	w.Header().Set("X-Ratelimit-Reset", strconv.FormatInt(max(secs, 1), 10))
	w.Header().Set("X-Ratelimit-Limit", strconv.Itoa(limit))
	w.Header().Set("X-Ratelimit-Remaining", "0")
	s.writeJSON(w, http.StatusTooManyRequests, map[string]any{
		"title":      "too many requests",
		"detail":     "limited by the simulator's limit of the " + methods + " methods",
		"code":       "sim-429",
		"requestId":  fmt.Sprintf("sim%029d", s.now().UnixNano()),
		"origin":     "ordersync-sim",
		"status":     http.StatusTooManyRequests,
		"statusText": http.StatusText(http.StatusTooManyRequests),
		"timestamp":  s.now().UTC().Format(time.RFC3339),
	})
}

// wbStockConflict is one element of a 409 body: {code, message, data}.
type wbStockConflict struct {
	Code    string             `json:"code"`
	Message string             `json:"message"`
	Data    []wbStockConflicts `json:"data"`
}

// wbStockConflicts names one refused item. The specification's data items carry the
// barcode (sku) and amount; the simulator adds the chrtId the request named, since
// requests name items by chrtId (sku is "" for a size without a barcode).
type wbStockConflicts struct {
	Sku    string `json:"sku"`
	ChrtID int64  `json:"chrtId"`
	Amount int64  `json:"amount"`
}

// stockWarehouse parses the path's warehouse id and checks it is the seller's;
// false when it answered.
func (s *Wildberries) stockWarehouse(w http.ResponseWriter, v string) (int64, bool) {
	id, err := strconv.ParseInt(v, 10, 64)
	if err != nil || id <= 0 {
		s.countStock(func(st *StockStats) { st.Invalid++ })
		s.writeError(w, http.StatusBadRequest, "IncorrectParameter", "IncorrectParameter: warehouseId")
		return 0, false
	}
	s.mu.Lock()
	known := s.stockLocked().warehouses[id]
	s.mu.Unlock()
	if !known {
		s.writeError(w, http.StatusNotFound, "NotFound", "")
		return 0, false
	}
	return id, true
}

func (s *Wildberries) countStock(f func(*StockStats)) {
	s.mu.Lock()
	f(&s.stockLocked().stats)
	s.mu.Unlock()
}

// serveStocksUpdate answers PUT /api/v3/stocks/{warehouseId}. Field names are not
// validated, as Wildberries documents: a body with a key other than stocks, or an
// item with a key other than chrtId, sku and amount, is answered 204 and changes
// nothing. Otherwise: 1 to 1000 items of a positive chrtId and an amount of 0 or
// more, or 400; an amount above 100000 (UploadDataLimit), a chrtId no card holds
// (NotFound) or one RefuseStock names answers 409 with every refused item and
// changes nothing; else every item is written (but those DropStockWrites loses)
// and the answer is 204.
func (s *Wildberries) serveStocksUpdate(w http.ResponseWriter, wh string, body []byte) {
	s.countStock(func(st *StockStats) { st.Updates++ })
	warehouse, ok := s.stockWarehouse(w, wh)
	if !ok {
		return
	}
	invalid := func(code, message string) {
		s.countStock(func(st *StockStats) { st.Invalid++ })
		s.writeError(w, http.StatusBadRequest, code, message)
	}
	var top map[string]json.RawMessage
	if err := wbStrictDecode(body, &top); err != nil || top == nil {
		invalid("IncorrectRequestBody", "Incorrect required body")
		return
	}
	var raws []map[string]json.RawMessage
	unknown := false
	for k := range top {
		unknown = unknown || k != "stocks"
	}
	if raw, ok := top["stocks"]; ok {
		if err := wbStrictDecode(raw, &raws); err != nil {
			invalid("IncorrectRequestBody", "Incorrect required body: stocks is an array of {chrtId, amount}")
			return
		}
	}
	for _, it := range raws {
		for k := range it {
			unknown = unknown || (k != "chrtId" && k != "sku" && k != "amount")
		}
	}
	if unknown {
		s.countStock(func(st *StockStats) { st.Ignored++ })
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if len(raws) > StockMaxItems {
		s.mu.Lock()
		st := s.stockLocked()
		st.violations = append(st.violations, Violation{At: s.now(), Op: OpStocksUpdate, Rule: RuleBatch,
			Detail: fmt.Sprintf("%d items, at most %d", len(raws), StockMaxItems)})
		s.mu.Unlock()
	}
	if len(raws) < 1 || len(raws) > StockMaxItems {
		invalid("IncorrectRequestBody", fmt.Sprintf("Incorrect required body: stocks — from 1 to %d items", StockMaxItems))
		return
	}
	type item struct{ chrtID, amount int64 }
	items := make([]item, len(raws))
	for i, it := range raws {
		var chrt, amount int64
		errC := wbStrictDecode(it["chrtId"], &chrt)
		errA := wbStrictDecode(it["amount"], &amount)
		if it["chrtId"] == nil || it["amount"] == nil || errC != nil || errA != nil || chrt <= 0 || amount < 0 {
			invalid("IncorrectRequest", fmt.Sprintf("Переданы некорректные данные: stocks[%d] — chrtId a positive integer, amount an integer of 0 or more", i))
			return
		}
		items[i] = item{chrt, amount}
	}

	s.mu.Lock()
	st := s.stockLocked()
	var conflicts []wbStockConflict
	add := func(code, message string, it item) {
		i := slices.IndexFunc(conflicts, func(c wbStockConflict) bool { return c.Code == code })
		if i < 0 {
			conflicts = append(conflicts, wbStockConflict{Code: code, Message: message})
			i = len(conflicts) - 1
		}
		conflicts[i].Data = append(conflicts[i].Data, wbStockConflicts{Sku: st.barcodeLocked(it.chrtID), ChrtID: it.chrtID, Amount: it.amount})
	}
	for _, it := range items {
		switch r, refused := st.refusals[wbStockKey{warehouse, it.chrtID}]; {
		case it.amount > StockMaxAmount:
			add("UploadDataLimit", "Upload limit exceeded.", it)
		case st.chrt[it.chrtID] == 0:
			add("NotFound", "Not found", it)
		case refused:
			add(r.code, r.message, it)
		}
	}
	if len(conflicts) > 0 {
		st.stats.Conflicts++
		st.limit.charge(s.now(), ConflictCost-1)
		s.mu.Unlock()
		s.writeJSON(w, http.StatusConflict, conflicts)
		return
	}
	for _, it := range items {
		if st.drops[it.chrtID] {
			st.stats.Dropped++
			continue
		}
		st.amounts[wbStockKey{warehouse, it.chrtID}] = it.amount
		st.stats.Written++
	}
	s.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// barcodeLocked is a chrtID's first barcode, "" when it has none.
func (st *wbStock) barcodeLocked(chrtID int64) string {
	c := st.cards[st.chrt[chrtID]]
	if c == nil {
		return ""
	}
	for _, sz := range c.Sizes {
		if sz.ChrtID == chrtID && len(sz.Skus) > 0 {
			return sz.Skus[0]
		}
	}
	return ""
}

// serveStocksGet answers POST /api/v3/stocks/{warehouseId} {"chrtIds": […]}: the
// amounts held at the warehouse for the chrtIds asked (at most 1000), those never
// set left out.
func (s *Wildberries) serveStocksGet(w http.ResponseWriter, wh string, body []byte) {
	s.countStock(func(st *StockStats) { st.Reads++ })
	warehouse, ok := s.stockWarehouse(w, wh)
	if !ok {
		return
	}
	var top map[string]json.RawMessage
	var ids []int64
	if err := wbStrictDecode(body, &top); err != nil || top["chrtIds"] == nil || wbStrictDecode(top["chrtIds"], &ids) != nil {
		s.countStock(func(st *StockStats) { st.Invalid++ })
		s.writeError(w, http.StatusBadRequest, "IncorrectRequestBody", "Incorrect required body: chrtIds is required")
		return
	}
	if len(ids) > StockMaxItems {
		s.mu.Lock()
		st := s.stockLocked()
		st.stats.Invalid++
		st.violations = append(st.violations, Violation{At: s.now(), Op: OpStocksGet, Rule: RuleBatch,
			Detail: fmt.Sprintf("%d chrtIds, at most %d", len(ids), StockMaxItems)})
		s.mu.Unlock()
		s.writeError(w, http.StatusBadRequest, "IncorrectRequestBody", fmt.Sprintf("Incorrect required body: chrtIds — at most %d", StockMaxItems))
		return
	}
	type stockWire struct {
		ChrtID int64  `json:"chrtId"`
		Sku    string `json:"sku"`
		Amount int64  `json:"amount"`
	}
	out := []stockWire{}
	s.mu.Lock()
	st := s.stockLocked()
	for _, id := range ids {
		if a, ok := st.amounts[wbStockKey{warehouse, id}]; ok {
			out = append(out, stockWire{ChrtID: id, Sku: st.barcodeLocked(id), Amount: a})
		}
	}
	s.mu.Unlock()
	s.writeJSON(w, http.StatusOK, map[string]any{"stocks": out})
}

// wbStrictDecode decodes one JSON value into v; unlike json.Unmarshal into a
// struct, the caller checks key names itself (encoding/json matches them without
// regard to case, and Wildberries does not).
func wbStrictDecode(b []byte, v any) error {
	if len(b) == 0 {
		return fmt.Errorf("empty")
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(v); err != nil {
		return err
	}
	if _, err := d.Token(); err != io.EOF {
		return fmt.Errorf("data after the value")
	}
	return nil
}
