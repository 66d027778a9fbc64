package ozon_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ordersync/ordersync/connectors"
	"github.com/ordersync/ordersync/connectors/ozon"
	"github.com/ordersync/ordersync/internal/outbox"
	"github.com/ordersync/ordersync/internal/sim"
	"github.com/ordersync/ordersync/internal/sim/ozonsim"
	"github.com/ordersync/ordersync/internal/stock"
)

const ozonWH int64 = 22142605386000

// fakeClock is the rate limiter's and the simulator's clock: sleeping moves it to
// the time slept until, at once, so a test covers minutes of rate limit in no time.
type fakeClock struct {
	mu     sync.Mutex
	t      time.Time
	sleeps []time.Time // every SleepUntil's target, in call order
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) SleepUntil(ctx context.Context, t time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sleeps = append(c.sleeps, t)
	if t.After(c.t) {
		c.t = t
	}
	return nil
}

func (c *fakeClock) targets() []time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.sleeps)
}

// newStockTest serves a simulator on a fake clock and returns a sender on the same
// clock, for warehouse WH1 → ozonWH.
func newStockTest(t *testing.T, cfg ozon.StockConfig) (*ozonsim.Ozon, *ozon.StockSender, *fakeClock) {
	t.Helper()
	clock := &fakeClock{t: now}
	s, c := newTest(t, ozonsim.Options{Now: clock.Now}, ozon.Config{})
	if cfg.Warehouses == nil {
		cfg.Warehouses = map[string]int64{"WH1": ozonWH}
	}
	if cfg.Clock == nil {
		cfg.Clock = clock
	}
	sender, err := c.StockSender(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s, sender, clock
}

func updates(offers ...string) []stock.Update {
	out := make([]stock.Update, len(offers))
	for i, o := range offers {
		out[i] = stock.Update{SKU: "1C-" + o, MarketSKU: o, Amount: int64(i + 1)}
	}
	return out
}

func bySKU(rs []stock.Result) map[string]stock.Result {
	m := map[string]stock.Result{}
	for _, r := range rs {
		m[r.SKU] = r
	}
	return m
}

func TestStockSenderContract(t *testing.T) {
	t.Parallel()
	s, sender, _ := newStockTest(t, ozon.StockConfig{Warehouses: map[string]int64{"WH1": ozonWH, "WH2": 7}})
	var _ stock.Sender = sender
	if sender.Marketplace() != "ozon" || sender.BatchSize() != 100 || sender.MinResend() != 30*time.Second || sender.MaxAmount() != 0 {
		t.Fatalf("sender: %s %d %s %d", sender.Marketplace(), sender.BatchSize(), sender.MinResend(), sender.MaxAmount())
	}
	// The connector's 30 s plus one turn of 80 a minute (750 ms and its margin).
	if got := sender.Timeout(); got < 30*time.Second+750*time.Millisecond || got > 32*time.Second {
		t.Fatalf("Timeout = %s", got)
	}
	if id, ok := sender.Warehouse("WH1"); !ok || id != "22142605386000" {
		t.Fatalf("Warehouse(WH1) = %q, %v", id, ok)
	}
	if _, ok := sender.Warehouse("WH9"); ok {
		t.Fatalf("an unconfigured warehouse has an Ozon id")
	}

	s.AddOffers("OF-1", "OF-2")
	rs, err := sender.Send(context.Background(), "WH1", updates("OF-1", "OF-2"))
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 || rs[0].SKU != "1C-OF-1" || rs[0].Outcome != stock.Published || rs[1].Outcome != stock.Published {
		t.Fatalf("results = %+v", rs)
	}
	if v, ok := s.Stock("OF-2", ozonWH); !ok || v != 2 {
		t.Fatalf("simulator holds %d, %v", v, ok)
	}
	reqs := s.RequestsTo(ozonsim.PathStocks)
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	var body map[string][]map[string]any
	if err := json.Unmarshal(reqs[0].Body, &body); err != nil {
		t.Fatal(err)
	}
	item := body["stocks"][0]
	if len(body) != 1 || len(item) != 3 || item["offer_id"] != "OF-1" || item["stock"] != 1.0 || item["warehouse_id"] != float64(ozonWH) {
		t.Fatalf("request body %s", reqs[0].Body)
	}

	if _, err := sender.Send(context.Background(), "WH9", updates("OF-1")); err == nil || !strings.Contains(err.Error(), "connectors.ozon.stock_warehouses") {
		t.Fatalf("unconfigured warehouse: %v", err)
	}
	if _, err := sender.Send(context.Background(), "WH1", make([]stock.Update, 101)); err == nil {
		t.Fatalf("101 updates sent")
	}
	if rs, err := sender.Send(context.Background(), "WH1", nil); rs != nil || err != nil {
		t.Fatalf("empty batch: %v, %v", rs, err)
	}
	if n := s.StockRequests(); n != 1 {
		t.Fatalf("%d requests, want 1", n)
	}
}

func TestStockSenderConfig(t *testing.T) {
	t.Parallel()
	_, c := newTest(t, ozonsim.Options{}, ozon.Config{})
	for _, tc := range []struct {
		cfg  ozon.StockConfig
		want string
	}{
		{ozon.StockConfig{Warehouses: map[string]int64{"WH1": 0}}, "connectors.ozon.stock_warehouses.WH1"},
		{ozon.StockConfig{Warehouses: map[string]int64{" ": 5}}, "connectors.ozon.stock_warehouses"},
		{ozon.StockConfig{Requests: 81}, "at most 80"},
		{ozon.StockConfig{Requests: 200, Window: 2 * time.Minute}, "at most 80"},
		{ozon.StockConfig{Requests: -1}, "positive"},
	} {
		if _, err := c.StockSender(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error with %q", tc.cfg, err, tc.want)
		}
	}
	if _, err := c.StockSender(ozon.StockConfig{Requests: 40}); err != nil {
		t.Errorf("40 a minute: %v", err)
	}
}

func TestStockSenderItemResults(t *testing.T) {
	t.Parallel()
	s, sender, clock := newStockTest(t, ozon.StockConfig{})
	s.AddOffers("OK", "BIG", "BUSY", "DUP", "ODD")
	s.FailStockItem("BIG", ozonsim.StockTooBig, 0)
	s.FailStockItem("BUSY", ozonsim.StockTooManyRequests, 1)
	s.FailStockItem("ODD", "PRODUCT_IS_NOT_CREATED", 1)
	batch := updates("OK", "BIG", "BUSY", "GONE", "DUP", "ODD")
	batch = append(batch,
		stock.Update{SKU: "1C-DUP-2", MarketSKU: "DUP", Amount: 4},
		stock.Update{SKU: "1C-NONE", MarketSKU: "", Amount: 4},
		stock.Update{SKU: "1C-NEG", MarketSKU: "NEG", Amount: -1},
	)
	rs, err := sender.Send(context.Background(), "WH1", batch)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != len(batch) {
		t.Fatalf("%d results for %d updates", len(rs), len(batch))
	}
	for i, r := range rs {
		if r.SKU != batch[i].SKU {
			t.Fatalf("result %d is for %s, want %s", i, r.SKU, batch[i].SKU)
		}
	}
	got := bySKU(rs)
	want := map[string]struct {
		outcome stock.Outcome
		reason  string
	}{
		"1C-OK":    {stock.Published, ""},
		"1C-BIG":   {stock.Refused, "STOCK_TOO_BIG: "},
		"1C-BUSY":  {stock.Deferred, "TOO_MANY_REQUESTS: "},
		"1C-GONE":  {stock.Refused, "offer_id_not_found: "},
		"1C-DUP":   {stock.Published, ""},
		"1C-ODD":   {stock.Refused, "PRODUCT_IS_NOT_CREATED: injected item error"},
		"1C-DUP-2": {stock.Refused, `offer_id "DUP" is sent for 1C SKU "1C-DUP"`},
		"1C-NONE":  {stock.Refused, "no Ozon offer_id"},
		"1C-NEG":   {stock.Refused, "negative stock -1"},
	}
	for sku, w := range want {
		r := got[sku]
		if r.Outcome != w.outcome || !strings.HasPrefix(r.Reason, w.reason) || (w.reason == "") != (r.Reason == "") {
			t.Errorf("%s: %s %q, want %s %q…", sku, r.Outcome, r.Reason, w.outcome, w.reason)
		}
		wantRetry := time.Duration(0)
		if w.outcome == stock.Deferred {
			wantRetry = 30 * time.Second
		}
		if r.RetryAfter != wantRetry {
			t.Errorf("%s: RetryAfter %s, want %s", sku, r.RetryAfter, wantRetry)
		}
	}
	if v, _ := s.Stock("DUP", ozonWH); v != 5 {
		t.Errorf("DUP holds %d: the first update of the offer must be the one sent", v)
	}

	// The deferred item, sent again after RetryAfter, is published; the simulator
	// saw no pair twice within 30 s.
	clock.SleepUntil(context.Background(), clock.Now().Add(got["1C-BUSY"].RetryAfter))
	rs, err = sender.Send(context.Background(), "WH1", updates("BUSY"))
	if err != nil || rs[0].Outcome != stock.Published {
		t.Fatalf("BUSY again: %+v, %v", rs, err)
	}
	if vs := s.StockViolations(); len(vs) != 0 {
		t.Fatalf("violations: %+v", vs)
	}
	// A batch with nothing to send sends nothing.
	before := s.StockRequests()
	rs, err = sender.Send(context.Background(), "WH1", []stock.Update{{SKU: "X", MarketSKU: ""}})
	if err != nil || len(rs) != 1 || rs[0].Outcome != stock.Refused || s.StockRequests() != before {
		t.Fatalf("nothing to send: %+v, %v, %d requests", rs, err, s.StockRequests()-before)
	}
}

// answering serves one canned answer to every request.
func answering(t *testing.T, status int, header http.Header, body string) *ozon.StockSender {
	t.Helper()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for k, v := range header {
			w.Header()[k] = v
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		w.Write([]byte(body))
	}))
	t.Cleanup(ts.Close)
	c, err := ozon.New(ozon.Config{BaseURL: ts.URL, ClientID: clientID, APIKey: apiKey, RatePerSecond: -1})
	if err != nil {
		t.Fatal(err)
	}
	sender, err := c.StockSender(ozon.StockConfig{Warehouses: map[string]int64{"WH1": ozonWH}, Clock: &fakeClock{t: now}})
	if err != nil {
		t.Fatal(err)
	}
	return sender
}

func TestStockSenderAnswers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	// Left out, or not updated without a reason: deferred; another warehouse's
	// result does not count; "Stock is updated too frequently" is the 30-s rule.
	sender := answering(t, 200, nil, `{"result":[
		{"offer_id":"A","product_id":1,"updated":true,"warehouse_id":22142605386000,"errors":[]},
		{"offer_id":"B","product_id":2,"updated":false,"warehouse_id":22142605386000,"errors":[]},
		{"offer_id":"C","product_id":3,"updated":true,"warehouse_id":99,"errors":[]},
		{"offer_id":"E","product_id":5,"updated":false,"warehouse_id":22142605386000,"errors":[{"code":"Stock is updated too frequently","message":""}]},
		{"offer_id":"F","updated":false,"warehouse_id":22142605386000,"errors":[{"code":"WAREHOUSE_NOT_FOUND","message":"no such warehouse"},{"code":"NON_KGT_ON_KGT_WAREHOUSE","message":"not here"}]},
		{"offer_id":"Z","updated":true}]}`)
	rs, err := sender.Send(ctx, "WH1", updates("A", "B", "C", "D", "E", "F"))
	if err != nil {
		t.Fatal(err)
	}
	got := bySKU(rs)
	for sku, w := range map[string]stock.Outcome{"1C-A": stock.Published, "1C-B": stock.Deferred, "1C-C": stock.Deferred,
		"1C-D": stock.Deferred, "1C-E": stock.Deferred, "1C-F": stock.Refused} {
		if got[sku].Outcome != w {
			t.Errorf("%s: %+v, want %s", sku, got[sku], w)
		}
	}
	if r := got["1C-D"]; r.Reason != "missing from Ozon's answer" || r.RetryAfter != 30*time.Second {
		t.Errorf("missing item: %+v", r)
	}
	if r := got["1C-F"]; r.Reason != "WAREHOUSE_NOT_FOUND: no such warehouse; NON_KGT_ON_KGT_WAREHOUSE: not here" {
		t.Errorf("two errors: %q", r.Reason)
	}

	// 400: every item refused with Ozon's reason, the publish goes on.
	sender = answering(t, 400, nil, `{"code":3,"message":"Request validation error: invalid ProductsStocksRequest.Stocks[0]","details":[]}`)
	rs, err = sender.Send(ctx, "WH1", updates("A", "B"))
	if err != nil || len(rs) != 2 || rs[0].Outcome != stock.Refused || !strings.Contains(rs[1].Reason, "(HTTP 400): Request validation error") {
		t.Errorf("400: %+v, %v", rs, err)
	}

	// 429 without Retry-After: the rate window.
	sender = answering(t, 429, nil, `{"code":8,"message":"You have reached request rate limit per minute","details":[]}`)
	_, err = sender.Send(ctx, "WH1", updates("A"))
	var de *outbox.DeliveryError
	if !errors.As(err, &de) || de.RetryAfter != time.Minute || de.Dead {
		t.Errorf("429: %#v", err)
	}

	// 5xx, an unreadable answer, another status: plain errors for the caller to retry.
	for _, a := range []struct {
		status int
		body   string
	}{{500, `{"code":13,"message":"Internal error","details":[]}`}, {200, `{"result":[`}, {409, `{"code":10,"message":"conflict"}`}} {
		sender = answering(t, a.status, nil, a.body)
		rs, err := sender.Send(ctx, "WH1", updates("A"))
		if err == nil || errors.As(err, &de) || rs != nil {
			t.Errorf("HTTP %d %s: %+v, %v", a.status, a.body, rs, err)
		}
	}

	// A key without the role: 403 names the key to check.
	sender = answering(t, 403, nil, `{"code":7,"message":"Api-key access denied for this method","details":[]}`)
	_, err = sender.Send(ctx, "WH1", updates("A"))
	var ae *connectors.AuthError
	if !errors.As(err, &ae) || !strings.Contains(err.Error(), "connectors.ozon.api_key") || !strings.Contains(err.Error(), "connectors.ozon.client_id") {
		t.Errorf("403: %v", err)
	}
}

func TestStockSenderTooManyRequests(t *testing.T) {
	t.Parallel()
	s, sender, _ := newStockTest(t, ozon.StockConfig{})
	s.AddOffers("A", "B")
	s.Faults.Add(1, sim.Fault{Op: ozonsim.PathStocks, Status: 429, RetryAfter: 7 * time.Second})
	_, err := sender.Send(context.Background(), "WH1", updates("A"))
	var de *outbox.DeliveryError
	if !errors.As(err, &de) || de.RetryAfter != 7*time.Second {
		t.Fatalf("429 with Retry-After 7: %#v", err)
	}
	if _, ok := s.Stock("A", ozonWH); ok {
		t.Fatalf("a 429 took stock")
	}

	// Another tool of the seller used up the minute: the simulator answers 429
	// without Retry-After, the sender asks for the window.
	s.SetStockLimits(ozonsim.StockLimits{Requests: 1})
	rs, err := sender.Send(context.Background(), "WH1", updates("A"))
	if err != nil || rs[0].Outcome != stock.Published {
		t.Fatalf("second request: %+v, %v", rs, err)
	}
	_, err = sender.Send(context.Background(), "WH1", updates("B"))
	if !errors.As(err, &de) || de.RetryAfter != time.Minute {
		t.Fatalf("429 from the rate: %#v", err)
	}
	if s.StockRateLimited() != 1 {
		t.Fatalf("the simulator rate-limited %d requests", s.StockRateLimited())
	}
}

func TestStockSenderAuth(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{t: now}
	s, c := newTest(t, ozonsim.Options{Now: clock.Now}, ozon.Config{APIKey: "99999999-0000-0000-0000-000000000000"})
	s.AddOffers("A")
	sender, err := c.StockSender(ozon.StockConfig{Warehouses: map[string]int64{"WH1": ozonWH}, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	_, err = sender.Send(context.Background(), "WH1", updates("A"))
	var ae *connectors.AuthError
	if !errors.As(err, &ae) {
		t.Fatalf("wrong key: %v", err)
	}
	for _, key := range []string{"connectors.ozon.api_key", "connectors.ozon.client_id"} {
		if !strings.Contains(err.Error(), key) {
			t.Errorf("the error does not name %s: %v", key, err)
		}
	}
	if s.StockRequests() != 0 || s.AuthFailures() != 1 {
		t.Fatalf("stock requests %d, auth failures %d", s.StockRequests(), s.AuthFailures())
	}
}

// TestStockSenderRate sends request after request, each as soon as the sender lets
// it: the simulator, on the same clock, never sees 81 within a minute, and the
// first one waits a turn (the limiter starts empty).
func TestStockSenderRate(t *testing.T) {
	t.Parallel()
	s, sender, clock := newStockTest(t, ozon.StockConfig{})
	start := clock.Now()
	const n = 250
	offers := make([]string, n)
	for i := range offers {
		offers[i] = fmt.Sprintf("OF-%d", i)
	}
	s.AddOffers(offers...)
	for i := range n {
		rs, err := sender.Send(context.Background(), "WH1", updates(offers[i]))
		if err != nil || rs[0].Outcome != stock.Published {
			t.Fatalf("send %d: %+v, %v", i, rs, err)
		}
	}
	if vs := s.StockViolations(); len(vs) != 0 {
		t.Fatalf("violations: %d, first %+v", len(vs), vs[0])
	}
	reqs := s.RequestsTo(ozonsim.PathStocks)
	if len(reqs) != n || s.StockRateLimited() != 0 {
		t.Fatalf("%d requests, %d rate-limited", len(reqs), s.StockRateLimited())
	}
	if first := reqs[0].At.Sub(start); first < 750*time.Millisecond {
		t.Fatalf("the first request went %s after the start: the limiter must start empty", first)
	}
	for i := 80; i < n; i++ {
		if span := reqs[i].At.Sub(reqs[i-80].At); span <= time.Minute {
			t.Fatalf("requests %d..%d within %s", i-80, i, span)
		}
	}
	// The limit is used, not wasted: 250 requests within 250 turns of the limiter.
	if span := reqs[n-1].At.Sub(start); span > time.Duration(n)*760*time.Millisecond {
		t.Fatalf("%d requests took %s of the clock", n, span)
	}
}

// TestStockSenderConcurrentTurns: Sends from several goroutines queue on the
// limiter; their turns are never closer than the limit allows. (The simulator is
// not on the fake clock here: concurrent sleepers move that clock past each other's
// turns, so it would stamp requests closer together than they were let go.)
func TestStockSenderConcurrentTurns(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{t: now}
	s, c := newTest(t, ozonsim.Options{}, ozon.Config{})
	s.SetStockLimits(ozonsim.StockLimits{Requests: 1 << 20})
	sender, err := c.StockSender(ozon.StockConfig{Warehouses: map[string]int64{"WH1": ozonWH}, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	const workers, each = 8, 25
	var offers []string
	for i := range workers * each {
		offers = append(offers, fmt.Sprintf("OF-%d", i))
	}
	s.AddOffers(offers...)
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				if _, err := sender.Send(context.Background(), "WH1", updates(offers[w*each+i])); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	turns := clock.targets()
	slices.SortFunc(turns, func(a, b time.Time) int { return a.Compare(b) })
	if len(turns) != workers*each {
		t.Fatalf("%d waits for %d sends", len(turns), workers*each)
	}
	for i := 1; i < len(turns); i++ {
		if d := turns[i].Sub(turns[i-1]); d < 750*time.Millisecond {
			t.Fatalf("turns %d and %d are %s apart", i-1, i, d)
		}
	}
}

func TestStockSenderWaitWithinContext(t *testing.T) {
	t.Parallel()
	// On the wall clock a fresh sender's first turn is 750 ms away: a context
	// that ends sooner fails at once, sending nothing.
	s, c := newTest(t, ozonsim.Options{}, ozon.Config{})
	s.AddOffers("A")
	sender, err := c.StockSender(ozon.StockConfig{Warehouses: map[string]int64{"WH1": ozonWH}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err = sender.Send(ctx, "WH1", updates("A"))
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "rate limit") {
		t.Fatalf("short deadline: %v", err)
	}
	if s.StockRequests() != 0 {
		t.Fatalf("a request went out")
	}

	// A wait cut short by the context's end sends nothing either.
	blocked := blockingClock{fakeClock: &fakeClock{t: now}}
	s2, c2 := newTest(t, ozonsim.Options{}, ozon.Config{})
	sender2, err := c2.StockSender(ozon.StockConfig{Warehouses: map[string]int64{"WH1": ozonWH}, Clock: blocked})
	if err != nil {
		t.Fatal(err)
	}
	ctx2, cancel2 := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := sender2.Send(ctx2, "WH1", updates("A"))
		done <- err
	}()
	cancel2()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled wait: %v", err)
	}
	if s2.StockRequests() != 0 {
		t.Fatalf("a request went out")
	}
}

// blockingClock never wakes a sleeper before its context ends.
type blockingClock struct{ *fakeClock }

func (blockingClock) SleepUntil(ctx context.Context, _ time.Time) error {
	<-ctx.Done()
	return ctx.Err()
}
