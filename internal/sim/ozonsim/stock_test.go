package ozonsim

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ordersync/ordersync/internal/sim"
)

// ozonClock is a clock a test moves by hand.
type ozonClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *ozonClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *ozonClock) set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

func (c *ozonClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newOzonStockTest(t *testing.T) (*Ozon, string, *ozonClock) {
	t.Helper()
	clock := &ozonClock{t: ozonTestNow}
	s, base := newOzonTest(t, Options{Now: clock.now})
	return s, base, clock
}

type ozonStockReply struct {
	Result []struct {
		OfferID     *string `json:"offer_id"`
		ProductID   *int64  `json:"product_id"`
		Updated     *bool   `json:"updated"`
		WarehouseID *int64  `json:"warehouse_id"`
		Errors      []struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"errors"`
	} `json:"result"`
}

// stocksBody is a request for offers, each with stock and warehouse.
func stocksBody(warehouse int64, stock int64, offers ...string) string {
	items := make([]map[string]any, len(offers))
	for i, o := range offers {
		items[i] = map[string]any{"offer_id": o, "stock": stock, "warehouse_id": warehouse}
	}
	b, _ := json.Marshal(map[string]any{"stocks": items})
	return string(b)
}

// postStocks sends a request that must be answered 200 and returns the item errors
// by offer ("" for an update taken).
func postStocks(t *testing.T, base, body string) map[string]string {
	t.Helper()
	r := ozonCall(t, base, PathStocks, body)
	if r.status != 200 {
		t.Fatalf("stocks: %d %s", r.status, r.body)
	}
	var rep ozonStockReply
	ozonDecodeReply(t, r, &rep)
	out := map[string]string{}
	for _, res := range rep.Result {
		if res.OfferID == nil || res.ProductID == nil || res.Updated == nil || res.WarehouseID == nil || res.Errors == nil {
			t.Fatalf("a result without a documented field: %s", r.body)
		}
		codes := []string{}
		for _, e := range res.Errors {
			if e.Message == "" {
				t.Fatalf("an item error without a message: %s", r.body)
			}
			codes = append(codes, e.Code)
		}
		if *res.Updated != (len(codes) == 0) {
			t.Fatalf("updated %v with errors %v: %s", *res.Updated, codes, r.body)
		}
		out[*res.OfferID] = strings.Join(codes, ",")
	}
	return out
}

func violationKinds(vs []StockViolation) []string {
	var out []string
	for _, v := range vs {
		out = append(out, v.Kind)
	}
	return out
}

func TestOzonStocksItems(t *testing.T) {
	t.Parallel()
	s, base, clock := newOzonStockTest(t)
	ozonSeed(s, 1) // SKU-A exists through a posting
	s.AddOffers("OF-1", "OF-2", "OF-1")
	s.SetWarehouses(22142605386000, 7)

	body := `{"stocks":[
		{"offer_id":"OF-1","stock":5,"warehouse_id":22142605386000},
		{"offer_id":"OF-2","stock":1000000,"warehouse_id":22142605386000},
		{"offer_id":"OF-9","stock":1,"warehouse_id":22142605386000},
		{"offer_id":"SKU-A","stock":0,"warehouse_id":7},
		{"offer_id":"OF-1","stock":3,"warehouse_id":8}]}`
	r := ozonCall(t, base, PathStocks, body)
	if r.status != 200 {
		t.Fatalf("stocks: %d %s", r.status, r.body)
	}
	var rep ozonStockReply
	ozonDecodeReply(t, r, &rep)
	want := []struct {
		offer string
		wh    int64
		code  string
	}{
		{"OF-1", 22142605386000, ""},
		{"OF-2", 22142605386000, StockTooBig},
		{"OF-9", 22142605386000, StockOfferNotFound},
		{"SKU-A", 7, ""},
		{"OF-1", 8, StockWarehouseUnknown},
	}
	if len(rep.Result) != len(want) {
		t.Fatalf("%d results, want %d: %s", len(rep.Result), len(want), r.body)
	}
	for i, w := range want {
		res := rep.Result[i]
		code := ""
		if len(res.Errors) > 0 {
			code = res.Errors[0].Code
		}
		if *res.OfferID != w.offer || *res.WarehouseID != w.wh || code != w.code || *res.Updated != (w.code == "") {
			t.Errorf("result %d = %s/%d updated %v %q, want %s/%d %q", i, *res.OfferID, *res.WarehouseID, *res.Updated, code, w.offer, w.wh, w.code)
		}
	}
	if *rep.Result[0].ProductID == 0 || *rep.Result[3].ProductID != 100000001 {
		t.Errorf("product ids %d, %d: want the offer's own and the posting's SKU", *rep.Result[0].ProductID, *rep.Result[3].ProductID)
	}
	if v, ok := s.Stock("OF-1", 22142605386000); !ok || v != 5 {
		t.Errorf("Stock(OF-1) = %d, %v", v, ok)
	}
	if _, ok := s.Stock("OF-2", 22142605386000); ok {
		t.Errorf("a refused stock is held")
	}
	if v, ok := s.Stock("SKU-A", 7); !ok || v != 0 {
		t.Errorf("Stock(SKU-A) = %d, %v", v, ok)
	}
	ups := s.StockUpdates()
	if len(ups) != 2 || ups[0].OfferID != "OF-1" || ups[0].Stock != 5 || !ups[0].At.Equal(ozonTestNow) || ups[1].OfferID != "SKU-A" {
		t.Errorf("updates = %+v", ups)
	}

	// A product_id alone finds the product; offer_id wins when both are given.
	clock.add(time.Minute)
	got := postStocks(t, base, `{"stocks":[{"product_id":100000001,"stock":4,"warehouse_id":7},{"offer_id":"OF-1","product_id":100000001,"stock":6,"warehouse_id":22142605386000},{"product_id":5,"stock":1,"warehouse_id":7}]}`)
	if got["SKU-A"] != "" || got["OF-1"] != "" || got[""] != StockProductNotFound || len(got) != 3 {
		t.Errorf("by product id: %v", got)
	}
	if v, _ := s.Stock("SKU-A", 7); v != 4 {
		t.Errorf("Stock(SKU-A) = %d after a product_id update", v)
	}
	if v, _ := s.Stock("OF-1", 22142605386000); v != 6 {
		t.Errorf("Stock(OF-1) = %d: offer_id must win over product_id", v)
	}
	if vs := s.StockViolations(); len(vs) != 0 {
		t.Errorf("violations: %+v", vs)
	}
	if n := s.StockRequests(); n != 2 {
		t.Errorf("StockRequests = %d, want 2", n)
	}
}

func TestOzonStocksBadRequests(t *testing.T) {
	t.Parallel()
	s, base, clock := newOzonStockTest(t)
	offers := make([]string, 101)
	for i := range offers {
		offers[i] = fmt.Sprintf("OF-%03d", i)
	}
	s.AddOffers(offers...)

	r := ozonCall(t, base, PathStocks, stocksBody(1, 5, offers...))
	if r.status != 400 {
		t.Fatalf("101 items: %d %s, want 400", r.status, r.body)
	}
	if code, msg := ozonErrorCode(t, r); code != 3 || !strings.Contains(msg, "100") {
		t.Errorf("101 items: code %d %q", code, msg)
	}
	if vs := s.StockViolations(); len(vs) != 1 || vs[0].Kind != ViolationBatch {
		t.Fatalf("violations after 101 items: %+v", vs)
	}
	if len(s.StockUpdates()) != 0 {
		t.Fatalf("a refused request updated stock")
	}

	for name, body := range map[string]string{
		"not JSON":        `{"stocks":[`,
		"no stocks":       `{}`,
		"empty stocks":    `{"stocks":[]}`,
		"unknown field":   `{"stocks":[{"offer_id":"OF-000","stock":1,"warehouse_id":1,"quant_size":1}]}`,
		"no warehouse":    `{"stocks":[{"offer_id":"OF-000","stock":1}]}`,
		"no stock":        `{"stocks":[{"offer_id":"OF-000","warehouse_id":1}]}`,
		"negative stock":  `{"stocks":[{"offer_id":"OF-000","stock":-1,"warehouse_id":1}]}`,
		"fractional":      `{"stocks":[{"offer_id":"OF-000","stock":1.5,"warehouse_id":1}]}`,
		"no product":      `{"stocks":[{"stock":1,"warehouse_id":1}]}`,
		"stock as string": `{"stocks":[{"offer_id":"OF-000","stock":"1","warehouse_id":1}]}`,
	} {
		clock.add(time.Minute) // never the rate
		r := ozonCall(t, base, PathStocks, body)
		if r.status != 400 {
			t.Errorf("%s: %d %s, want 400", name, r.status, r.body)
			continue
		}
		ozonErrorCode(t, r)
	}
	if len(s.StockUpdates()) != 0 || len(s.StockViolations()) != 1 {
		t.Errorf("bad requests changed the record: %+v, %+v", s.StockUpdates(), s.StockViolations())
	}

	// 100 items are one request's worth.
	clock.add(time.Minute)
	got := postStocks(t, base, stocksBody(1, 5, offers[:100]...))
	if len(got) != 100 || len(s.StockUpdates()) != 100 {
		t.Fatalf("100 items: %d results, %d updates", len(got), len(s.StockUpdates()))
	}

	// Without credentials nothing is counted.
	before := s.StockRequests()
	if r := ozonCall(t, base, PathStocks, stocksBody(1, 5, "OF-000"), "Api-Key", ""); r.status != 401 {
		t.Fatalf("no key: %d", r.status)
	}
	if s.StockRequests() != before {
		t.Errorf("a refused key was counted as a stock request")
	}
}

func TestOzonStocksResendRule(t *testing.T) {
	t.Parallel()
	s, base, clock := newOzonStockTest(t)
	s.AddOffers("A", "B")

	if got := postStocks(t, base, stocksBody(1, 5, "A")); got["A"] != "" {
		t.Fatalf("first update: %v", got)
	}
	clock.add(10 * time.Second)
	// A again within 30 s: refused and a violation; A in another warehouse and B
	// are other pairs.
	if got := postStocks(t, base, stocksBody(1, 6, "A", "B")); got["A"] != StockTooManyRequests || got["B"] != "" {
		t.Fatalf("10 s later: %v", got)
	}
	if got := postStocks(t, base, stocksBody(2, 6, "A")); got["A"] != "" {
		t.Fatalf("another warehouse: %v", got)
	}
	if v, _ := s.Stock("A", 1); v != 5 {
		t.Fatalf("a refused update changed the stock: %d", v)
	}
	vs := s.StockViolations()
	if len(vs) != 1 || vs[0].Kind != ViolationResend || vs[0].OfferID != "A" || vs[0].WarehouseID != 1 {
		t.Fatalf("violations = %+v", vs)
	}

	// 30 s after the update Ozon takes it, but the client sent the pair 20 s ago:
	// still a violation.
	clock.add(20 * time.Second)
	if got := postStocks(t, base, stocksBody(1, 7, "A")); got["A"] != "" {
		t.Fatalf("30 s after the update: %v", got)
	}
	if v, _ := s.Stock("A", 1); v != 7 {
		t.Fatalf("stock = %d, want 7", v)
	}
	if k := violationKinds(s.StockViolations()); len(k) != 2 {
		t.Fatalf("violations = %v, want 2 resends", k)
	}

	// The same pair twice in one request: the second is refused and a violation.
	clock.add(time.Minute)
	r := ozonCall(t, base, PathStocks, stocksBody(1, 8, "A", "A"))
	var rep ozonStockReply
	ozonDecodeReply(t, r, &rep)
	if len(rep.Result) != 2 || !*rep.Result[0].Updated || *rep.Result[1].Updated || rep.Result[1].Errors[0].Code != StockTooManyRequests {
		t.Fatalf("a pair twice in one request: %s", r.body)
	}
	if k := violationKinds(s.StockViolations()); len(k) != 3 {
		t.Fatalf("violations = %v, want 3 resends", k)
	}
	clock.add(30 * time.Second)
	if got := postStocks(t, base, stocksBody(1, 9, "A")); got["A"] != "" || len(s.StockViolations()) != 3 {
		t.Fatalf("30 s later: %v, %v", got, s.StockViolations())
	}
}

func TestOzonStocksRate(t *testing.T) {
	t.Parallel()
	s, base, clock := newOzonStockTest(t)
	s.AddOffers("A")
	start := clock.now()
	for i := range 80 {
		if r := ozonCall(t, base, PathStocks, stocksBody(int64(i+1), 1, "A")); r.status != 200 {
			t.Fatalf("request %d: %d %s", i+1, r.status, r.body)
		}
		clock.add(500 * time.Millisecond)
	}
	if vs := s.StockViolations(); len(vs) != 0 {
		t.Fatalf("80 requests: violations %+v", vs)
	}
	// The 81st within 60 s of the first: 429 and a violation.
	r := ozonCall(t, base, PathStocks, stocksBody(100, 1, "A"))
	if r.status != 429 {
		t.Fatalf("81st request: %d %s, want 429", r.status, r.body)
	}
	if code, _ := ozonErrorCode(t, r); code != 8 {
		t.Errorf("429 code %d, want 8", code)
	}
	vs := s.StockViolations()
	if len(vs) != 1 || vs[0].Kind != ViolationRate {
		t.Fatalf("violations = %+v", vs)
	}
	if _, ok := s.Stock("A", 100); ok || s.StockRateLimited() != 1 {
		t.Fatalf("a 429 took stock, or was not counted")
	}
	// 60 s after the first, one request is due again (the window slid past it).
	clock.set(start.Add(time.Minute))
	if r := ozonCall(t, base, PathStocks, stocksBody(101, 1, "A")); r.status != 200 {
		t.Fatalf("a minute after the first: %d %s", r.status, r.body)
	}
	if r := ozonCall(t, base, PathStocks, stocksBody(102, 1, "A")); r.status != 429 {
		t.Fatalf("the next one at once: %d, want 429", r.status)
	}
	if s.StockRequests() != 83 || len(s.StockViolations()) != 3 {
		t.Fatalf("requests %d, violations %v", s.StockRequests(), violationKinds(s.StockViolations()))
	}
}

func TestOzonStocksInjected(t *testing.T) {
	t.Parallel()
	s, base, clock := newOzonStockTest(t)
	s.AddOffers("A", "B", "C")
	s.FailStockItem("A", StockTooManyRequests, 2)
	s.FailStockItem("B", StockTooBig, 0)
	s.FailStockItem("C", "PRODUCT_IS_NOT_CREATED", 1)
	want := []map[string]string{
		{"A": StockTooManyRequests, "B": StockTooBig, "C": "PRODUCT_IS_NOT_CREATED"},
		{"A": StockTooManyRequests, "B": StockTooBig, "C": ""},
		{"A": "", "B": StockTooBig, "C": ""},
	}
	for i, w := range want {
		got := postStocks(t, base, stocksBody(1, int64(i), "A", "B", "C"))
		for k, v := range w {
			if got[k] != v {
				t.Errorf("round %d: %s = %q, want %q", i, k, got[k], v)
			}
		}
		clock.add(30 * time.Second)
	}
	s.ClearStockFaults()
	if got := postStocks(t, base, stocksBody(1, 9, "B")); got["B"] != "" {
		t.Fatalf("after ClearStockFaults: %v", got)
	}
	if len(s.StockViolations()) != 0 {
		t.Fatalf("violations: %+v", s.StockViolations())
	}

	// An injected failure of the whole request still counts towards the rate.
	s.Faults.Add(1, sim.Fault{Op: PathStocks, Status: 503})
	if r := ozonCall(t, base, PathStocks, stocksBody(2, 1, "A")); r.status != 503 {
		t.Fatalf("injected 503: %d", r.status)
	}
	if n := s.StockRequests(); n != 5 {
		t.Fatalf("StockRequests = %d, want 5", n)
	}
}

func TestOzonStockLimitsScaled(t *testing.T) {
	t.Parallel()
	s, base, clock := newOzonStockTest(t)
	s.AddOffers("A", "B", "C")
	s.SetStockLimits(StockLimits{Batch: 2, Requests: 2, Window: time.Second, Resend: 100 * time.Millisecond, MaxStock: 10})
	if l := s.StockLimits(); l.Batch != 2 || l.Requests != 2 || l.Window != time.Second || l.Resend != 100*time.Millisecond || l.MaxStock != 10 {
		t.Fatalf("limits = %+v", l)
	}
	if r := ozonCall(t, base, PathStocks, stocksBody(1, 1, "A", "B", "C")); r.status != 400 {
		t.Fatalf("3 items with a batch of 2: %d", r.status)
	}
	if got := postStocks(t, base, stocksBody(1, 11, "A", "B")); got["A"] != StockTooBig || got["B"] != StockTooBig {
		t.Fatalf("above MaxStock: %v", got)
	}
	if r := ozonCall(t, base, PathStocks, stocksBody(1, 1, "C")); r.status != 429 {
		t.Fatalf("third request within the window: %d", r.status)
	}
	clock.add(time.Second)
	if got := postStocks(t, base, stocksBody(1, 1, "A")); got["A"] != "" {
		t.Fatalf("after the window: %v", got)
	}
	if k := violationKinds(s.StockViolations()); strings.Join(k, ",") != "batch_size,rate" {
		t.Fatalf("violations = %v", k)
	}
}
