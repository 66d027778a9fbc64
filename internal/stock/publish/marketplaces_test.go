package publish_test

// Publishing through the real senders to the marketplaces' simulators: what is
// proved is what the simulator holds and received (its stock, its updates, its
// requests and its record of broken rules) and what the store records per item,
// never the HTTP answers.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/ordersync/ordersync/connectors/ozon"
	"github.com/ordersync/ordersync/connectors/wildberries"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/outbox"
	"github.com/ordersync/ordersync/internal/sim/ozonsim"
	"github.com/ordersync/ordersync/internal/sim/wbsim"
	"github.com/ordersync/ordersync/internal/stock"
	"github.com/ordersync/ordersync/internal/stock/publish"
	"github.com/ordersync/ordersync/internal/stock/scheduler"
	"github.com/ordersync/ordersync/internal/store/sqlite"
)

const (
	mpOzonWH     int64 = 22142605386000
	mpOzonClient       = "1234567"
	mpOzonKey          = "11111111-2222-3333-4444-555555555555"
	mpWBWH       int64 = 7001
	mpWBToken          = "wb-token-for-tests"
)

// shelf is a SQLite store holding snapshots of WH1 as the engine leaves them.
type shelf struct {
	tb   testing.TB
	js   journal.Store
	st   stock.Store
	n    int
	slot time.Time
}

func newShelf(tb testing.TB) *shelf {
	tb.Helper()
	db, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(tb.TempDir(), "s.db"), TakeoverAfter: time.Nanosecond})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	if _, err := db.Migrate(context.Background()); err != nil {
		tb.Fatal(err)
	}
	return &shelf{tb: tb, js: db.Journal(), st: db.Stock(), slot: time.Date(2026, 9, 16, 10, 0, 0, 0, time.UTC)}
}

// take stores a done snapshot of WH1 with items and returns the outbox record the
// engine enqueues for marketplace.
func (s *shelf) take(marketplace string, items []stock.Item) outbox.Record {
	s.tb.Helper()
	ctx := context.Background()
	s.n++
	s.slot = s.slot.Add(time.Minute)
	p := stock.Payload{Schedule: "main", Warehouse: "WH1", Slot: s.slot, Label: s.slot.Format("2006-01-02T15:04"), Publish: []string{marketplace}}
	reg, err := scheduler.Register(ctx, s.js, p)
	if err != nil {
		s.tb.Fatal(err)
	}
	c, err := s.js.ClaimKey(ctx, reg.Operation.Key, "test")
	if err != nil {
		s.tb.Fatal(err)
	}
	snap := &stock.Snapshot{Key: reg.Operation.Key, Schedule: "main", Warehouse: "WH1", Slot: s.slot, Label: p.Label,
		TakenAt: s.slot.Format("2006-01-02T15:04:05"), Warnings: []string{}, Items: items, ItemCount: len(items)}
	if err := c.Finish(ctx, journal.Finish{Status: journal.StatusDone, Result: &journal.Result{}, Attachments: []any{snap}}); err != nil {
		s.tb.Fatal(err)
	}
	data, _ := json.Marshal(stock.EventData{Snapshot: snap.Key, Warehouse: "WH1"})
	return outbox.Record{EventID: fmt.Sprint(s.n), Destination: stock.Destination(marketplace), Data: data}
}

// states is what the store says marketplace was last told of WH1's items.
func (s *shelf) states(marketplace string) map[string]stock.ItemState {
	s.tb.Helper()
	st, err := s.st.States(context.Background(), marketplace, "WH1")
	if err != nil {
		s.tb.Fatal(err)
	}
	return st
}

// problems is stock.Store.Problems of marketplace, by SKU.
func (s *shelf) problems(marketplace string) map[string]stock.ItemState {
	s.tb.Helper()
	ps, err := s.st.Problems(context.Background(), marketplace, 100000)
	if err != nil {
		s.tb.Fatal(err)
	}
	out := map[string]stock.ItemState{}
	for _, p := range ps {
		if _, dup := out[p.SKU]; dup {
			s.tb.Fatalf("Problems lists %s twice", p.SKU)
		}
		out[p.SKU] = p
	}
	return out
}

func (s *shelf) lastPublish(marketplace string) stock.Publish {
	s.tb.Helper()
	ps, err := s.st.Publishes(context.Background(), stock.PublishFilter{Marketplace: marketplace, Limit: 1})
	if err != nil || len(ps) == 0 {
		s.tb.Fatalf("publishes: %v %v", ps, err)
	}
	return ps[0]
}

func item(sku, quantity string) stock.Item {
	return stock.Item{SKU: sku, Quantity: decimal.RequireFromString(quantity), Price: decimal.NewFromInt(100)}
}

// publishAll delivers rec until the publish is done, each delivery under a
// context of lease (0: none), as the relay does when a delivery asks to go on
// (outbox.DeliveryError Continue). It returns the number of deliveries.
func publishAll(tb testing.TB, p *publish.Publisher, rec outbox.Record, lease time.Duration) int {
	tb.Helper()
	for n := 1; ; n++ {
		ctx, cancel := context.Background(), context.CancelFunc(func() {})
		if lease > 0 {
			ctx, cancel = context.WithTimeout(ctx, lease)
		}
		err := p.Publish(ctx, rec)
		cancel()
		if err == nil {
			return n
		}
		var de *outbox.DeliveryError
		if !errors.As(err, &de) || !de.Continue {
			tb.Fatalf("delivery %d: %v, want nil or a delivery that goes on", n, err)
		}
		if n > 10000 {
			tb.Fatalf("the publish did not finish in %d deliveries: %v", n, err)
		}
		if de.RetryAfter > 0 {
			// The relay would not hand the event out before then.
			t := time.NewTimer(de.RetryAfter)
			<-t.C
		}
	}
}

// --- Ozon ---

type ozonMarket struct {
	sim    *ozonsim.Ozon
	sender *ozon.StockSender
}

// newOzonMarket serves an Ozon simulator with limits (zero: Ozon's) and returns it
// with a real stock sender for WH1 → mpOzonWH. timeout is the connector's
// per-request timeout (0: its default). The simulator keeps the time of
// cfg.Clock, the wall clock when it is nil.
func newOzonMarket(tb testing.TB, limits ozonsim.StockLimits, timeout time.Duration, cfg ozon.StockConfig) ozonMarket {
	tb.Helper()
	opts := ozonsim.Options{ClientID: mpOzonClient, APIKey: mpOzonKey}
	if cfg.Clock != nil {
		opts.Now = cfg.Clock.Now
	}
	s := ozonsim.New(opts)
	s.SetStockLimits(limits)
	ts := httptest.NewServer(s)
	tb.Cleanup(ts.Close)
	c, err := ozon.New(ozon.Config{BaseURL: ts.URL, ClientID: mpOzonClient, APIKey: mpOzonKey, Warehouse: "WH1",
		RatePerSecond: -1, Timeout: timeout})
	if err != nil {
		tb.Fatal(err)
	}
	cfg.Warehouses = map[string]int64{"WH1": mpOzonWH}
	sender, err := c.StockSender(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return ozonMarket{sim: s, sender: sender}
}

// sentOffers lists the offer_ids of each stock request the simulator received from
// the from-th on, and fails on an item of another warehouse.
func (m ozonMarket) sentOffers(tb testing.TB, from int) [][]string {
	tb.Helper()
	var out [][]string
	for _, r := range m.sim.RequestsTo(ozonsim.PathStocks)[from:] {
		var body struct {
			Stocks []struct {
				OfferID     string `json:"offer_id"`
				WarehouseID int64  `json:"warehouse_id"`
			} `json:"stocks"`
		}
		if err := json.Unmarshal(r.Body, &body); err != nil {
			tb.Fatalf("request body %s: %v", r.Body, err)
		}
		var offers []string
		for _, it := range body.Stocks {
			if it.WarehouseID != mpOzonWH {
				tb.Fatalf("an item of warehouse %d was sent", it.WarehouseID)
			}
			offers = append(offers, it.OfferID)
		}
		out = append(out, offers)
	}
	return out
}

func (m ozonMarket) noViolations(tb testing.TB) {
	tb.Helper()
	if vs := m.sim.StockViolations(); len(vs) != 0 {
		for _, v := range vs[:min(len(vs), 5)] {
			tb.Errorf("Ozon violation: %+v", v)
		}
		tb.Fatalf("%d violations of Ozon's rules", len(vs))
	}
	if n := m.sim.StockRateLimited(); n != 0 {
		tb.Fatalf("the simulator answered %d requests 429", n)
	}
}

// jumpClock is the wall clock plus an offset that a test moves forward while
// nothing is in flight: the simulator, the sender's rate limiter and the
// Publisher all keep it, so a jump is time that passed for all of them at once,
// and every wait after it is a real one.
type jumpClock struct {
	mu     sync.Mutex
	offset time.Duration
}

func (c *jumpClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.offset)
}

func (c *jumpClock) Jump(d time.Duration) {
	c.mu.Lock()
	c.offset += d
	c.mu.Unlock()
}

func (c *jumpClock) SleepUntil(ctx context.Context, t time.Time) error {
	timer := time.NewTimer(t.Sub(c.Now()))
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func ozonOffer(i int) string { return fmt.Sprintf("OF-%03d", i) }

// TestOzonPublishOutcomesWithinOzonsRules publishes 250 items (3 requests) to the
// Ozon simulator, which refuses some (STOCK_TOO_BIG injected and for a stock of a
// million, offer_id_not_found for offers it does not know) and answers
// TOO_MANY_REQUESTS once for a few. Afterwards every item is either held by the
// simulator with its stock, taken exactly once, or recorded refused with Ozon's
// code in Problems; the deferred items were sent again (and taken), and the
// simulator saw no rule broken: no pair twice within 30 s (the retry waits Ozon's
// real 30 s), no more than 80 requests a minute nor 100 items a request.
func TestOzonPublishOutcomesWithinOzonsRules(t *testing.T) {
	t.Parallel()
	m := newOzonMarket(t, ozonsim.StockLimits{}, 0, ozon.StockConfig{})
	sh := newShelf(t)

	const n = 250
	unknown := []int{7, 99, 200}      // offer_id_not_found
	tooBig := []int{10, 150}          // STOCK_TOO_BIG injected for every send
	const bigStock = 60               // a stock of 1,500,000: STOCK_TOO_BIG from the simulator's rule
	busy := []int{5, 105, 205, 249}   // TOO_MANY_REQUESTS once, one in each request and the last
	want := map[string]int64{}        // offer → the stock it must hold
	refused := map[string]string{}    // offer → the code it must be refused with
	items := make([]stock.Item, 0, n) // offer_id is the 1C SKU (no SKU map)
	for i := range n {
		o := ozonOffer(i)
		q := fmt.Sprint(i + 1)
		switch i {
		case bigStock:
			q = "1500000"
		case 61:
			q = "7.9" // floored
		case 62:
			q = "-3" // published as 0
		}
		items = append(items, item(o, q))
		want[o], _ = stock.Amount(decimal.RequireFromString(q), 0)
		if !slices.Contains(unknown, i) {
			m.sim.AddOffers(o)
		}
	}
	for _, i := range unknown {
		refused[ozonOffer(i)] = ozonsim.StockOfferNotFound
	}
	for _, i := range append(tooBig, bigStock) {
		refused[ozonOffer(i)] = ozonsim.StockTooBig
	}
	for _, i := range tooBig {
		m.sim.FailStockItem(ozonOffer(i), ozonsim.StockTooBig, 0)
	}
	for _, i := range busy {
		m.sim.FailStockItem(ozonOffer(i), ozonsim.StockTooManyRequests, 1)
	}
	for o := range refused {
		delete(want, o)
	}

	p := publish.New(publish.Config{Sender: m.sender, Store: sh.st})
	if d := publishAll(t, p, sh.take(stock.Ozon, items), 0); d != 1 {
		t.Fatalf("%d deliveries without a deadline, want 1", d)
	}

	// The simulator's record.
	m.noViolations(t)
	taken := map[string]int{}
	for _, u := range m.sim.StockUpdates() {
		taken[u.OfferID]++
		if u.WarehouseID != mpOzonWH || u.Stock != want[u.OfferID] {
			t.Errorf("Ozon took %+v, want stock %d in %d", u, want[u.OfferID], mpOzonWH)
		}
	}
	for o, v := range want {
		if held, ok := m.sim.Stock(o, mpOzonWH); !ok || held != v || taken[o] != 1 {
			t.Errorf("%s: Ozon holds %d (%t), taken %d times; want %d, taken once", o, held, ok, taken[o], v)
		}
	}
	for o := range refused {
		if _, ok := m.sim.Stock(o, mpOzonWH); ok {
			t.Errorf("%s: refused, yet Ozon holds a stock", o)
		}
	}
	sends := map[string]int{}
	for k, offers := range m.sentOffers(t, 0) {
		if len(offers) > ozon.StockBatchSize {
			t.Errorf("request %d carries %d items", k, len(offers))
		}
		for _, o := range offers {
			sends[o]++
		}
	}
	for i := range n {
		o, wantSends := ozonOffer(i), 1
		if slices.Contains(busy, i) {
			wantSends = 2 // TOO_MANY_REQUESTS, then taken
		}
		if sends[o] != wantSends {
			t.Errorf("%s was sent %d times, want %d", o, sends[o], wantSends)
		}
	}

	// The store's record.
	probs := sh.problems(stock.Ozon)
	if len(probs) != len(refused) {
		t.Errorf("Problems lists %d items (%v), want the %d refused", len(probs), slices.Sorted(maps.Keys(probs)), len(refused))
	}
	for o, code := range refused {
		pr, ok := probs[o]
		if !ok || pr.Outcome != stock.Refused || !strings.HasPrefix(pr.Reason, code+": ") {
			t.Errorf("%s: problem %+v (%t), want refused with %s", o, pr, ok, code)
		}
	}
	for o, s := range sh.states(stock.Ozon) {
		if _, ok := want[o]; ok && (s.Outcome != stock.Published || s.Value != want[o] || s.PublishedAt == nil) {
			t.Errorf("%s: state %+v, want published with %d", o, s, want[o])
		}
	}
	if pub := sh.lastPublish(stock.Ozon); pub.FinishedAt == nil || !pub.Full || pub.Sent != n ||
		pub.Published != len(want) || pub.Refused != len(refused) || pub.Mismatched != 0 || pub.Skipped != 0 {
		t.Errorf("publish %+v, want full, %d sent, %d published, %d refused", pub, n, len(want), len(refused))
	}
}

// TestOzonSecondSnapshotSendsOnlyWhatChanged publishes 150 items, then a snapshot
// with four values changed: only those are sent again (Ozon takes the three it
// knows; the changed one it refused is sent again and refused again), a refused
// item whose value did not change is not sent, and the items sent again less
// than 30 s after the first publish sent them wait for Ozon's rule: the
// simulator records no violation. The clock jumps 27 s between the publishes
// (nothing is in flight then), so the second one waits out the last 3 s of the
// rule for real, which covers the rate limiter's turn (750 ms) that the first
// publish's sends waited for.
func TestOzonSecondSnapshotSendsOnlyWhatChanged(t *testing.T) {
	t.Parallel()
	clk := &jumpClock{}
	m := newOzonMarket(t, ozonsim.StockLimits{}, 0, ozon.StockConfig{Clock: clk})
	sh := newShelf(t)
	const n = 150
	values := map[string]string{}
	var items []stock.Item
	for i := range n {
		o := ozonOffer(i)
		values[o] = fmt.Sprint(i + 1)
		items = append(items, item(o, values[o]))
		if i != 120 {
			m.sim.AddOffers(o) // OF-120: offer_id_not_found
		}
	}
	m.sim.FailStockItem(ozonOffer(3), ozonsim.StockTooBig, 0)
	p := publish.New(publish.Config{Sender: m.sender, Store: sh.st, Now: clk.Now})
	publishAll(t, p, sh.take(stock.Ozon, items), 0)
	if pub := sh.lastPublish(stock.Ozon); pub.Published != n-2 || pub.Refused != 2 {
		t.Fatalf("first publish %+v, want %d published and 2 refused", pub, n-2)
	}
	requests, updates := len(m.sim.RequestsTo(ozonsim.PathStocks)), len(m.sim.StockUpdates())
	clk.Jump(27 * time.Second)

	// OF-000 went in the first request, OF-140 and OF-149 in the last; OF-120 is
	// refused and changes; OF-003 is refused and does not.
	changed := map[string]string{ozonOffer(0): "500", ozonOffer(140): "0", ozonOffer(149): "9.5", ozonOffer(120): "42"}
	items = items[:0]
	for i := range n {
		o := ozonOffer(i)
		items = append(items, item(o, cmpOr(changed[o], values[o])))
	}
	publishAll(t, p, sh.take(stock.Ozon, items), 0)

	m.noViolations(t)
	var sent []string
	for _, offers := range m.sentOffers(t, requests) {
		sent = append(sent, offers...)
	}
	slices.Sort(sent)
	if want := slices.Sorted(maps.Keys(changed)); !slices.Equal(sent, want) {
		t.Fatalf("the second publish sent %v, want only the changed %v", sent, want)
	}
	got := map[string]int64{}
	for _, u := range m.sim.StockUpdates()[updates:] {
		got[u.OfferID] = u.Stock
	}
	if fmt.Sprint(got) != fmt.Sprint(map[string]int64{ozonOffer(0): 500, ozonOffer(140): 0, ozonOffer(149): 9}) {
		t.Fatalf("Ozon took %v in the second publish", got)
	}
	pub := sh.lastPublish(stock.Ozon)
	if pub.Full || pub.Sent != 4 || pub.Published != 3 || pub.Refused != 1 || pub.Unchanged != n-4 {
		t.Errorf("second publish %+v, want a delta: 4 sent, 3 published, 1 refused, %d unchanged", pub, n-4)
	}
	if probs := sh.problems(stock.Ozon); len(probs) != 2 || probs[ozonOffer(3)].Outcome != stock.Refused ||
		probs[ozonOffer(120)].Value != 42 {
		t.Errorf("problems %+v, want OF-003 still refused and OF-120 refused with 42", probs)
	}
}

// TestOzonResendRuleHoldsAfterALostAnswer: Ozon takes a batch but its answer never
// comes (the request times out, as after a crash of the replica that sent it).
// The next delivery sends the batch again, no sooner than Ozon's 30 s counted
// from when the lost request may have reached Ozon (one Send's Timeout after it
// was recorded as sent): the simulator records no violation. The clock jumps 27 s
// before the next delivery; the rest of the wait is real.
func TestOzonResendRuleHoldsAfterALostAnswer(t *testing.T) {
	t.Parallel()
	clk := &jumpClock{}
	s := ozonsim.New(ozonsim.Options{ClientID: mpOzonClient, APIKey: mpOzonKey, Now: clk.Now})
	s.AddOffers("A", "B", "C")
	var lose atomic.Bool
	lose.Store(true)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == ozonsim.PathStocks && lose.Load() {
			s.ServeHTTP(httptest.NewRecorder(), r) // taken, the answer lost
			<-r.Context().Done()
			return
		}
		s.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	c, err := ozon.New(ozon.Config{BaseURL: ts.URL, ClientID: mpOzonClient, APIKey: mpOzonKey, Warehouse: "WH1",
		RatePerSecond: -1, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	sender, err := c.StockSender(ozon.StockConfig{Warehouses: map[string]int64{"WH1": mpOzonWH}, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	m := ozonMarket{sim: s, sender: sender}
	sh := newShelf(t)
	p := publish.New(publish.Config{Sender: sender, Store: sh.st, Now: clk.Now})
	rec := sh.take(stock.Ozon, []stock.Item{item("A", "1"), item("B", "2"), item("C", "3")})
	if err := p.Publish(context.Background(), rec); err == nil {
		t.Fatal("a publish whose answer was lost succeeded")
	}
	if len(s.StockUpdates()) != 3 {
		t.Fatalf("Ozon took %d items of the lost request, want 3", len(s.StockUpdates()))
	}
	lose.Store(false)
	clk.Jump(27 * time.Second)
	publishAll(t, p, rec, 0)
	m.noViolations(t)
	if n := len(m.sim.RequestsTo(ozonsim.PathStocks)); n != 2 {
		t.Errorf("%d requests, want the lost one and one again", n)
	}
	if pub := sh.lastPublish(stock.Ozon); pub.FinishedAt == nil || pub.Published != 3 {
		t.Errorf("publish %+v, want 3 published", pub)
	}
}

// --- Wildberries ---

type wbMarket struct {
	sim    *wbsim.Wildberries
	sender *wildberries.StockSender
}

// newWBMarket serves a Wildberries simulator on the wall clock, its stock and
// content limits Wildberries' times scale, and returns it with a real stock
// sender for WH1 → mpWBWH scaled alike, each Send within timeout (0: the
// sender's default).
func newWBMarket(tb testing.TB, scale float64, timeout time.Duration) wbMarket {
	tb.Helper()
	s := wbsim.New(wbsim.Options{Token: mpWBToken})
	s.SetStockLimit(wbsim.StockPerMinute*scale, wbsim.StockBurst)
	s.SetContentLimit(wbsim.ContentPerMinute*scale, wbsim.ContentBurst)
	s.AddStockWarehouse(mpWBWH)
	ts := httptest.NewServer(s)
	tb.Cleanup(ts.Close)
	c, err := wildberries.New(wildberries.Config{BaseURL: ts.URL, Token: mpWBToken, Warehouse: "WH1", RatePerSecond: -1})
	if err != nil {
		tb.Fatal(err)
	}
	snd, err := c.StockSender(wildberries.StockConfig{ContentURL: ts.URL, Warehouses: map[string]string{"WH1": fmt.Sprint(mpWBWH)},
		RateScale: scale, Timeout: timeout})
	if err != nil {
		tb.Fatal(err)
	}
	return wbMarket{sim: s, sender: snd}
}

// putItems lists the chrtIDs of every PUT the simulator received from the from-th
// on, with the status it answered.
func (m wbMarket) putItems(tb testing.TB, from int) (puts [][]int64, statuses []int) {
	tb.Helper()
	for _, r := range m.sim.RequestsOf(wbsim.OpStocksUpdate)[from:] {
		var body struct {
			Stocks []struct {
				ChrtID int64 `json:"chrtId"`
			} `json:"stocks"`
		}
		if err := json.Unmarshal(r.Body, &body); err != nil {
			tb.Fatalf("PUT body %s: %v", r.Body, err)
		}
		var ids []int64
		for _, it := range body.Stocks {
			ids = append(ids, it.ChrtID)
		}
		puts, statuses = append(puts, ids), append(statuses, r.Status)
	}
	return puts, statuses
}

func (m wbMarket) noViolations(tb testing.TB) {
	tb.Helper()
	if vs := m.sim.Violations(); len(vs) != 0 {
		tb.Fatalf("%d violations of Wildberries' rules, first %+v", len(vs), vs[0])
	}
	if st := m.sim.StockStats(); st.Limited != 0 || st.Invalid != 0 || st.Ignored != 0 {
		tb.Fatalf("stock stats %+v: requests limited, invalid or ignored", st)
	}
}

// wbScene is 40 items of WH1 at Wildberries: V00…V37 have one-size cards (chrtID
// 1000+i), NOCARD-1 and NOCARD-2 none; the simulator drops the writes of V03 and
// V04 (which held 77 before) and refuses V10 and V11 with a 409.
type wbScene struct {
	m      wbMarket
	sh     *shelf
	p      *publish.Publisher
	values map[string]string
}

const wbCards = 38

func wbChrt(i int) int64 { return int64(1000 + i) }

func wbVendor(i int) string { return fmt.Sprintf("V%02d", i) }

func newWBScene(t *testing.T) *wbScene {
	t.Helper()
	// Wildberries' own rate (300 requests a minute): a publish of one batch is a
	// 409, a PUT of the rest and a read-back, about 2 s at that rate (a 409 costs 10).
	m := newWBMarket(t, 1, 0)
	sc := &wbScene{m: m, sh: newShelf(t), values: map[string]string{}}
	for i := range wbCards {
		m.sim.AddCard(wbsim.Card{NmID: int64(500 + i), VendorCode: wbVendor(i),
			Sizes: []wbsim.Size{{ChrtID: wbChrt(i), Skus: []string{fmt.Sprint("BC", wbChrt(i))}}}})
		sc.values[wbVendor(i)] = fmt.Sprint(i + 1)
	}
	sc.values[wbVendor(20)] = "250000" // above Wildberries' 100000: sent as that, with a warning
	sc.values["NOCARD-1"], sc.values["NOCARD-2"] = "5", "6"
	for _, i := range []int{3, 4} {
		m.sim.SetStock(mpWBWH, wbChrt(i), 77)
	}
	m.sim.DropStockWrites(wbChrt(3), wbChrt(4))
	m.sim.RefuseStock(mpWBWH, wbChrt(10), "CargoWarehouseRestrictionMGT", "Not for LCL")
	m.sim.RefuseStock(mpWBWH, wbChrt(11), "SubjectDBSRestriction", "not for FBS")
	sc.p = publish.New(publish.Config{Sender: m.sender, Store: sc.sh.st})
	return sc
}

func (sc *wbScene) snapshot() outbox.Record {
	var items []stock.Item
	for _, sku := range slices.Sorted(maps.Keys(sc.values)) {
		items = append(items, item(sku, sc.values[sku]))
	}
	return sc.sh.take(stock.Wildberries, items)
}

// TestWildberriesPublishReadBackConflictsAndMissingCards: the items whose writes
// the simulator drops while answering 204 end recorded as mismatches naming the
// amounts sent and read back; the items a 409 names are recorded refused with
// Wildberries' code, and the rest of the batch goes on and is held; the vendor
// codes without a card are recorded skipped and never sent.
func TestWildberriesPublishReadBackConflictsAndMissingCards(t *testing.T) {
	t.Parallel()
	sc := newWBScene(t)
	m, sh := sc.m, sc.sh
	publishAll(t, sc.p, sc.snapshot(), 0)

	m.noViolations(t)
	held := m.sim.StockAmounts(mpWBWH)
	for i := range wbCards {
		want, _ := stock.Amount(decimal.RequireFromString(sc.values[wbVendor(i)]), wildberries.StockMaxAmount)
		switch got, ok := held[wbChrt(i)]; i {
		case 3, 4:
			if got != 77 {
				t.Errorf("%s: holds %d, want the 77 it held (the write was dropped)", wbVendor(i), got)
			}
		case 10, 11:
			if ok {
				t.Errorf("%s: refused, yet holds %d", wbVendor(i), got)
			}
		default:
			if !ok || got != want {
				t.Errorf("%s: holds %d (%t), want %d", wbVendor(i), got, ok, want)
			}
		}
	}
	if len(held) != wbCards-2 {
		t.Errorf("Wildberries holds %d chrtIDs, want %d", len(held), wbCards-2)
	}
	puts, statuses := m.putItems(t, 0)
	if len(puts) != 2 || statuses[0] != 409 || statuses[1] != 204 || len(puts[0]) != wbCards || len(puts[1]) != wbCards-2 ||
		slices.Contains(puts[1], wbChrt(10)) || slices.Contains(puts[1], wbChrt(11)) {
		t.Errorf("PUTs %v answered %v: want all %d cards, 409, then all but the refused two, 204", puts, statuses, wbCards)
	}
	if st := m.sim.StockStats(); st.Reads != 1 || st.Dropped != 2 {
		t.Errorf("stats %+v, want one read-back and two writes dropped", st)
	}

	probs := sh.problems(stock.Wildberries)
	want := map[string]struct {
		outcome stock.Outcome
		reason  []string
	}{
		wbVendor(3):  {stock.Mismatch, []string{"sent 4 for chrtID 1003", "reads back 77"}},
		wbVendor(4):  {stock.Mismatch, []string{"sent 5 for chrtID 1004", "reads back 77"}},
		wbVendor(10): {stock.Refused, []string{"HTTP 409", "CargoWarehouseRestrictionMGT: Not for LCL"}},
		wbVendor(11): {stock.Refused, []string{"HTTP 409", "SubjectDBSRestriction: not for FBS"}},
		"NOCARD-1":   {stock.Skipped, []string{"no Wildberries card with vendor code NOCARD-1"}},
		"NOCARD-2":   {stock.Skipped, []string{"no Wildberries card with vendor code NOCARD-2"}},
	}
	if len(probs) != len(want) {
		t.Errorf("problems %v, want %v", slices.Sorted(maps.Keys(probs)), slices.Sorted(maps.Keys(want)))
	}
	for sku, w := range want {
		pr := probs[sku]
		if pr.Outcome != w.outcome {
			t.Errorf("%s: %+v, want %s", sku, pr, w.outcome)
		}
		for _, r := range w.reason {
			if !strings.Contains(pr.Reason, r) {
				t.Errorf("%s: reason %q, want it to say %q", sku, pr.Reason, r)
			}
		}
	}
	if s := sh.states(stock.Wildberries)[wbVendor(20)]; s.Outcome != stock.Published || s.Value != wildberries.StockMaxAmount || s.Warning == "" {
		t.Errorf("V20 (250000): %+v, want published as %d with a warning", s, wildberries.StockMaxAmount)
	}
	if pub := sh.lastPublish(stock.Wildberries); pub.Published != wbCards-4 || pub.Mismatched != 2 || pub.Refused != 2 ||
		pub.Skipped != 2 || pub.Sent != wbCards+2 || len(pub.Warnings) != 1 {
		t.Errorf("publish %+v, want %d published, 2 mismatched, refused and skipped, %d sent, 1 warning", pub, wbCards-4, wbCards+2)
	}
}

// TestWildberriesSecondSnapshotSendsOnlyWhatChanged: after the publish above, a
// snapshot with three values changed (one of them refused before) sends those
// three only: the refused, mismatched and skipped items whose values did not
// change are not sent again.
func TestWildberriesSecondSnapshotSendsOnlyWhatChanged(t *testing.T) {
	t.Parallel()
	sc := newWBScene(t)
	m, sh := sc.m, sc.sh
	publishAll(t, sc.p, sc.snapshot(), 0)
	from := len(m.sim.RequestsOf(wbsim.OpStocksUpdate))
	written := m.sim.StockStats().Written

	sc.values[wbVendor(0)] = "900"
	sc.values[wbVendor(30)] = "0"
	sc.values[wbVendor(10)] = "12" // refused, changed: sent again (and refused again)
	publishAll(t, sc.p, sc.snapshot(), 0)

	m.noViolations(t)
	puts, statuses := m.putItems(t, from)
	if fmt.Sprint(puts, statuses) != fmt.Sprint([][]int64{{wbChrt(0), wbChrt(10), wbChrt(30)}, {wbChrt(0), wbChrt(30)}}, []int{409, 204}) {
		t.Fatalf("second publish PUTs %v answered %v: want V00, V10 and V30 only, V10 refused again", puts, statuses)
	}
	if w := m.sim.StockStats().Written - written; w != 2 {
		t.Errorf("%d items written by the second publish, want 2", w)
	}
	if held := m.sim.StockAmounts(mpWBWH); held[wbChrt(0)] != 900 || held[wbChrt(30)] != 0 {
		t.Errorf("V00 holds %d, V30 %d; want 900 and 0", held[wbChrt(0)], held[wbChrt(30)])
	}
	pub := sh.lastPublish(stock.Wildberries)
	if pub.Full || pub.Sent != 3 || pub.Published != 2 || pub.Refused != 1 || pub.Unchanged != len(sc.values)-3 {
		t.Errorf("second publish %+v, want a delta: 3 sent, 2 published, 1 refused", pub)
	}
	if probs := sh.problems(stock.Wildberries); len(probs) != 6 || probs[wbVendor(10)].Value != 12 {
		t.Errorf("problems %+v, want the six of the first publish, V10 with 12", probs)
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
