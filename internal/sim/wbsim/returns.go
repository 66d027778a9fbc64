package wbsim

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The returns' operations (Request.Op, Fault.Op): the report of goods returned to
// the seller (seller analytics API) and the buyers' claims (returns API). Both are
// served on the one simulator, each on its own path.
const (
	OpGoodsReturn = "goods-return" // GET /api/v1/analytics/goods-return
	OpClaims      = "claims"       // GET /api/v1/claims
)

// The published limits of the two methods, per seller account.
const (
	// GoodsReturnMaxPeriod is the longest dateFrom…dateTo of one report.
	GoodsReturnMaxPeriod = 31 * 24 * time.Hour
	// GoodsReturnInterval and GoodsReturnBurst: one request a minute, bursts of 10.
	GoodsReturnInterval = time.Minute
	GoodsReturnBurst    = 10
	// ClaimsInterval and ClaimsBurst: 20 requests a minute (one per 3 seconds),
	// bursts of 10.
	ClaimsInterval = 3 * time.Second
	ClaimsBurst    = 10
	// ClaimsPeriod is how far back the claims reach.
	ClaimsPeriod = 14 * 24 * time.Hour
)

// GoodsReturn is one row of the goods-return report: an item of an order on its way
// back to the seller, or handed back (CompletedAt set).
type GoodsReturn struct {
	Srid        string
	OrderID     int64 // the assembly task's number: the FBS order's id
	NmID        int64
	Barcode     string
	Reason      string
	ReturnType  string
	Status      string
	OrderDate   time.Time // orderDt, what the period filters on
	CompletedAt time.Time // completedDt; zero: not handed back yet
}

// Claim is one buyer claim of the returns API.
type Claim struct {
	ID        string
	NmID      int64
	OrderSrid string // srid of the order the claim is about
	CreatedAt time.Time
	Archived  bool
	Status    int
}

// wbReturns is the simulator's state of both methods.
type wbReturns struct {
	goods  []*GoodsReturn
	claims []*Claim
	// buckets: the token buckets of the two limits, on the simulator's clock.
	buckets    map[string]*wbReturnsBucket
	violations map[string]int
}

type wbReturnsBucket struct {
	tokens float64
	at     time.Time
}

// AddGoodsReturn adds a row to the goods-return report (or replaces the one with
// its srid: a return handed back later).
func (s *Wildberries) AddGoodsReturn(g GoodsReturn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i := slices.IndexFunc(s.returns.goods, func(o *GoodsReturn) bool { return o.Srid == g.Srid }); i >= 0 {
		s.returns.goods[i] = &g
		return
	}
	s.returns.goods = append(s.returns.goods, &g)
}

// AddClaim adds a buyer claim.
func (s *Wildberries) AddClaim(c Claim) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.returns.claims = append(s.returns.claims, &c)
}

// RateViolations is how many requests to op (OpGoodsReturn, OpClaims) came faster
// than its published limit allows; each was answered 429.
func (s *Wildberries) RateViolations(op string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.returns.violations[op]
}

// takeLocked spends a token of op's bucket at the simulator's clock, false when
// none is left (a violation).
func (s *Wildberries) takeLocked(op string, interval time.Duration, burst int) bool {
	rs := &s.returns
	if rs.buckets == nil {
		rs.buckets, rs.violations = map[string]*wbReturnsBucket{}, map[string]int{}
	}
	now := s.now()
	b := rs.buckets[op]
	if b == nil {
		b = &wbReturnsBucket{tokens: float64(burst), at: now}
		rs.buckets[op] = b
	}
	if d := now.Sub(b.at); d > 0 {
		b.tokens = min(float64(burst), b.tokens+float64(d)/float64(interval))
		b.at = now
	}
	if b.tokens < 1 {
		rs.violations[op]++
		return false
	}
	b.tokens--
	return true
}

func wbReturnsRoute(method string, parts []string) (string, bool) {
	if method != http.MethodGet {
		return "", false
	}
	switch strings.Join(parts, "/") {
	case "api/v1/analytics/goods-return":
		return OpGoodsReturn, true
	case "api/v1/claims":
		return OpClaims, true
	}
	return "", false
}

func (s *Wildberries) serveReturnsOp(w http.ResponseWriter, op string, q url.Values) {
	s.mu.Lock()
	var ok bool
	if op == OpGoodsReturn {
		ok = s.takeLocked(op, GoodsReturnInterval, GoodsReturnBurst)
	} else {
		ok = s.takeLocked(op, ClaimsInterval, ClaimsBurst)
	}
	s.mu.Unlock()
	if !ok {
		s.writeGatewayError(w, http.StatusTooManyRequests, "too many requests", "limited by the simulator's published limit", time.Minute)
		return
	}
	if op == OpGoodsReturn {
		s.serveGoodsReturn(w, q)
		return
	}
	s.serveClaims(w, q)
}

func (s *Wildberries) serveGoodsReturn(w http.ResponseWriter, q url.Values) {
	from, err1 := time.Parse(time.DateOnly, q.Get("dateFrom"))
	to, err2 := time.Parse(time.DateOnly, q.Get("dateTo"))
	switch {
	case err1 != nil || err2 != nil:
		s.writeError(w, http.StatusBadRequest, "IncorrectParameter", "dateFrom and dateTo are required dates (YYYY-MM-DD)")
		return
	case to.Before(from):
		s.writeError(w, http.StatusBadRequest, "IncorrectParameter", "dateTo is before dateFrom")
		return
	case to.Sub(from) >= GoodsReturnMaxPeriod:
		s.writeError(w, http.StatusBadRequest, "IncorrectParameter", "the period is longer than 31 days")
		return
	}
	s.mu.Lock()
	rows := []map[string]any{}
	for _, g := range s.returns.goods {
		d, _ := time.Parse(time.DateOnly, g.OrderDate.In(moscow).Format(time.DateOnly))
		if d.Before(from) || d.After(to) {
			continue
		}
		var completed any
		if !g.CompletedAt.IsZero() {
			completed = g.CompletedAt.In(moscow).Format("2006-01-02T15:04:05")
		}
		rows = append(rows, map[string]any{
			"srid": g.Srid, "orderId": g.OrderID, "nmId": g.NmID, "barcode": g.Barcode, "reason": g.Reason,
			"returnType": g.ReturnType, "status": g.Status, "orderDt": g.OrderDate.In(moscow).Format(time.DateOnly),
			"completedDt": completed, "isStatusActive": map[bool]int{true: 0, false: 1}[completed != nil],
			"shkId": g.OrderID*10 + 7, "stickerId": strconv.FormatInt(g.OrderID+1, 10),
		})
	}
	s.mu.Unlock() // the recorder of the answer takes the lock
	s.writeJSON(w, http.StatusOK, map[string]any{"report": rows})
}

func (s *Wildberries) serveClaims(w http.ResponseWriter, q url.Values) {
	archive, err := strconv.ParseBool(q.Get("is_archive"))
	if err != nil {
		s.writeError(w, http.StatusBadRequest, "IncorrectParameter", "is_archive is required")
		return
	}
	limit, offset := 50, 0
	if v := q.Get("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit < 1 || limit > 200 {
			s.writeError(w, http.StatusBadRequest, "IncorrectParameter", "limit must be 1 to 200")
			return
		}
	}
	if v := q.Get("offset"); v != "" {
		if offset, err = strconv.Atoi(v); err != nil || offset < 0 {
			s.writeError(w, http.StatusBadRequest, "IncorrectParameter", "offset must not be negative")
			return
		}
	}
	s.mu.Lock()
	since := s.now().Add(-ClaimsPeriod)
	var all []map[string]any
	for _, c := range s.returns.claims {
		if c.Archived != archive || c.CreatedAt.Before(since) {
			continue
		}
		all = append(all, map[string]any{"id": c.ID, "nm_id": c.NmID, "srid": c.OrderSrid,
			"dt": c.CreatedAt.UTC().Format(time.RFC3339), "status": c.Status})
	}
	s.mu.Unlock()
	total := len(all)
	page := []map[string]any{}
	if offset < total {
		page = all[offset:min(total, offset+limit)]
	}
	s.writeJSON(w, http.StatusOK, map[string]any{"claims": page, "total": total})
}
