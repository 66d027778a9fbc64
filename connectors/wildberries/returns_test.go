package wildberries

import (
	"context"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/ordersync/ordersync/connectors"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/order"
	"github.com/ordersync/ordersync/internal/sim/wbsim"
)

// fakeClock is the one clock of a test's simulator and limiter.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// minuteLimiter is the published one request a minute on the fake clock: each wait
// after the first moves the clock to a minute after the last request.
type minuteLimiter struct {
	clock *fakeClock
	last  time.Time
}

func (l *minuteLimiter) Wait(context.Context) error {
	if !l.last.IsZero() {
		if next := l.last.Add(wbsim.GoodsReturnInterval); l.clock.Now().Before(next) {
			l.clock.Add(next.Sub(l.clock.Now()))
		}
	}
	l.last = l.clock.Now()
	return nil
}

type noLimit struct{}

func (noLimit) Wait(context.Context) error { return nil }

func newReturnsTest(t *testing.T, lim func(*fakeClock) Limiter) (*wbsim.Wildberries, *Connector, *fakeClock) {
	t.Helper()
	clock := &fakeClock{t: testNow}
	s := wbsim.New(wbsim.Options{Token: testToken, Now: clock.Now})
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	c, err := New(Config{BaseURL: ts.URL, AnalyticsURL: ts.URL, Token: testToken, Warehouse: "WH1",
		RatePerSecond: -1, Now: clock.Now, ReturnsLimiter: lim(clock)})
	if err != nil {
		t.Fatal(err)
	}
	return s, c, clock
}

func TestReturnsHandedBackRegisterWithTheOrdersLines(t *testing.T) {
	t.Parallel()
	s, c, clock := newReturnsTest(t, func(c *fakeClock) Limiter { return &minuteLimiter{clock: c} })
	db := openDB(t)
	ctx := context.Background()
	for i := range 3 {
		s.AddOrder(wbOrder(int64(700+i), testNow.Add(-time.Duration(i+2)*time.Hour)))
	}
	woke := 0
	p := connectors.NewPoller(c, connectors.PollerConfig{Lookback: 72 * time.Hour, Journal: db.Journal(), Cursors: db.Cursors(),
		Returns: true, Now: clock.Now, Registered: func() { woke++ }})
	if st, err := p.PollOnce(ctx); err != nil || st.Registered != 3 {
		t.Fatalf("orders: %+v, %v", st, err)
	}
	back := testNow.Add(-time.Hour)
	s.AddGoodsReturn(wbsim.GoodsReturn{Srid: "sr700", OrderID: 700, OrderDate: testNow.Add(-20 * 24 * time.Hour), CompletedAt: back, Reason: "Брак", ReturnType: "Возврат брака"})
	s.AddGoodsReturn(wbsim.GoodsReturn{Srid: "sr701", OrderID: 701, OrderDate: testNow.Add(-24 * time.Hour)}) // on its way
	s.AddGoodsReturn(wbsim.GoodsReturn{Srid: "sr999", OrderID: 999, OrderDate: testNow.Add(-24 * time.Hour), CompletedAt: back})
	s.AddGoodsReturn(wbsim.GoodsReturn{Srid: "sr000", OrderID: 0, OrderDate: testNow.Add(-24 * time.Hour), CompletedAt: back})

	st, err := p.PollReturnsOnce(ctx)
	if err != nil || st.ReturnsRegistered != 1 || st.ReturnsFailed != 2 {
		t.Fatalf("returns: %+v, %v: want 1 registered, 2 failed", st, err)
	}
	ops := wbOperations(t, db)
	op := ops["wb:return:sr700:register"]
	r, err := order.ParseReturn(op.Payload)
	if err != nil {
		t.Fatalf("wb:return:sr700:register: %v (%+v)", err, op)
	}
	if r.Type != order.ReturnFull || r.OrderKey != "wb:order:700:create" || len(r.Lines) != 1 || r.Lines[0].SKU != "ART-700" ||
		!r.Lines[0].Price.Equal(decimal.NewFromInt(1500)) || r.Currency != "RUB" || !r.CreatedAt.Equal(back) || op.ExternalID != "return:sr700" {
		t.Errorf("return %+v", r)
	}
	for key, field := range map[string]string{"wb:return:sr999:register": "order_key", "wb:return:sr000:register": "orderId"} {
		if op := ops[key]; op.Status != journal.StatusFailed || !strings.Contains(op.LastError, field) {
			t.Errorf("%s: %s %q, want failed naming %s", key, op.Status, op.LastError, field)
		}
	}
	if _, ok := ops["wb:return:sr701:register"]; ok {
		t.Error("a return not handed back yet was registered")
	}
	// Handed back later: registered on the next poll; the first is a duplicate.
	s.AddGoodsReturn(wbsim.GoodsReturn{Srid: "sr701", OrderID: 701, OrderDate: testNow.Add(-24 * time.Hour), CompletedAt: testNow})
	st, err = p.PollReturnsOnce(ctx)
	if err != nil || st.ReturnsRegistered != 1 || st.ReturnsDuplicates != 3 {
		t.Fatalf("second poll: %+v, %v: want 1 registered, 3 duplicates", st, err)
	}
	for range 12 {
		if _, err := p.PollReturnsOnce(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if v := s.RateViolations(wbsim.OpGoodsReturn); v != 0 {
		t.Errorf("%d requests above the published limit", v)
	}
	if n := len(s.RequestsOf(wbsim.OpGoodsReturn)); n != 14 {
		t.Errorf("%d report requests, want 14", n)
	}
	for _, rq := range s.RequestsOf(wbsim.OpGoodsReturn) {
		from, _ := time.Parse(time.DateOnly, rq.Query.Get("dateFrom"))
		to, _ := time.Parse(time.DateOnly, rq.Query.Get("dateTo"))
		if to.Sub(from) >= wbsim.GoodsReturnMaxPeriod {
			t.Errorf("asked for %s…%s, longer than the report allows", rq.Query.Get("dateFrom"), rq.Query.Get("dateTo"))
		}
	}
}

// The simulator counts what the limiter prevents: without it, the published burst
// is soon spent.
func TestGoodsReturnWithoutLimiterViolates(t *testing.T) {
	t.Parallel()
	s, c, _ := newReturnsTest(t, func(*fakeClock) Limiter { return noLimit{} })
	var failed int
	for range wbsim.GoodsReturnBurst + 2 {
		if err := c.Returns(context.Background(), testNow.Add(-time.Hour), testNow, func([]connectors.ReturnItem) error { return nil }); err != nil {
			failed++
		}
	}
	if v := s.RateViolations(wbsim.OpGoodsReturn); v != 2 || failed != 2 {
		t.Errorf("violations %d, failed listings %d: want 2 and 2", v, failed)
	}
}
