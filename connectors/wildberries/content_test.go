package wildberries

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ordersync/ordersync/connectors"
	"github.com/ordersync/ordersync/internal/sim"
	"github.com/ordersync/ordersync/internal/sim/wbsim"
	"github.com/ordersync/ordersync/internal/stock"
)

// stockClock is a clock the test moves by hand.
type stockClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *stockClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *stockClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

const stockWH = 7001

// newStockTest serves a simulator (no rate limits, on the clock returned) with
// warehouse 7001 and returns a sender for WH1 → 7001 without a rate limit; edit
// adjusts the sender's configuration.
func newStockTest(t testing.TB, edit ...func(*StockConfig)) (*wbsim.Wildberries, *StockSender, *stockClock) {
	t.Helper()
	clk := &stockClock{t: testNow}
	s, snd := newStockTestOn(t, clk.Now, edit...)
	return s, snd, clk
}

// newStockTestOn is newStockTest with the simulator and the connector on clock now.
func newStockTestOn(t testing.TB, now func() time.Time, edit ...func(*StockConfig)) (*wbsim.Wildberries, *StockSender) {
	t.Helper()
	s := wbsim.New(wbsim.Options{Token: testToken, Now: now})
	s.SetStockLimit(0, 0)
	s.SetContentLimit(0, 0)
	s.AddStockWarehouse(stockWH)
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	c, err := New(Config{BaseURL: ts.URL, Token: testToken, Warehouse: "WH1", RatePerSecond: -1, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	cfg := StockConfig{ContentURL: ts.URL, Warehouses: map[string]string{"WH1": fmt.Sprint(stockWH)}, RateScale: -1}
	for _, e := range edit {
		e(&cfg)
	}
	snd, err := c.StockSender(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s, snd
}

// card is a one-size card: vendor code vc, chrtID chrt, barcode "BC<chrt>".
func card(nm int64, vc string, chrt int64) wbsim.Card {
	return wbsim.Card{NmID: nm, VendorCode: vc, Sizes: []wbsim.Size{{ChrtID: chrt, Skus: []string{fmt.Sprint("BC", chrt)}}}}
}

func send(t *testing.T, snd *StockSender, batch ...stock.Update) []stock.Result {
	t.Helper()
	res, err := snd.Send(context.Background(), "WH1", batch)
	if err != nil {
		t.Fatalf("Send: %v", err)
	}
	if len(res) != len(batch) {
		t.Fatalf("%d results for %d updates", len(res), len(batch))
	}
	for i, r := range res {
		if r.SKU != batch[i].SKU {
			t.Fatalf("result %d is of SKU %s, want %s", i, r.SKU, batch[i].SKU)
		}
	}
	return res
}

func upd(sku string, amount int64) stock.Update {
	return stock.Update{SKU: "1C-" + sku, MarketSKU: sku, Amount: amount}
}

func TestCardsListingPagesThroughEveryCard(t *testing.T) {
	s, snd, _ := newStockTest(t)
	snd.cards.pageSize = 3
	for i := range 20 {
		c := card(int64(500+i), fmt.Sprintf("V%d", i), int64(9000+i))
		c.Photos = i % 2 // half without photos: withPhoto must be -1
		c.UpdatedAt = testNow.Add(-time.Duration(i/5) * time.Minute)
		s.AddCard(c)
	}
	ix, err := snd.cards.cards(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if ix.cards != 20 || len(ix.byVendor) != 20 || len(ix.byBarcode) != 20 {
		t.Fatalf("%d cards, %d vendor codes, %d barcodes; want 20 of each", ix.cards, len(ix.byVendor), len(ix.byBarcode))
	}
	for i := range 20 {
		if id, ok, _ := ix.resolve(fmt.Sprintf("V%d", i)); !ok || id != int64(9000+i) {
			t.Errorf("V%d: %d %t", i, id, ok)
		}
	}
	reqs := s.RequestsOf(wbsim.OpCardsList)
	if len(reqs) != 7 { // 20 cards by 3: six full pages and one of 2
		t.Errorf("%d pages, want 7", len(reqs))
	}
	var body struct {
		Settings struct {
			Filter struct {
				WithPhoto *int `json:"withPhoto"`
			} `json:"filter"`
		} `json:"settings"`
	}
	if err := json.Unmarshal(reqs[0].Body, &body); err != nil || body.Settings.Filter.WithPhoto == nil || *body.Settings.Filter.WithPhoto != -1 {
		t.Errorf("first page asked %s: want withPhoto -1", reqs[0].Body)
	}
}

func TestCardsBarcodesAndAmbiguousVendorCodes(t *testing.T) {
	s, snd, _ := newStockTest(t)
	s.AddCard(card(1, "ONE", 11))
	s.AddCard(wbsim.Card{NmID: 2, VendorCode: "SHIRT", Sizes: []wbsim.Size{
		{ChrtID: 21, TechSize: "S", Skus: []string{"2000000000021"}},
		{ChrtID: 22, TechSize: "M", Skus: []string{"2000000000022", "2000000000023"}},
	}})
	res := send(t, snd, upd("ONE", 5), upd("SHIRT", 3), upd("2000000000023", 4), upd("BC11", 6))
	if res[0].Outcome != stock.Published {
		t.Errorf("one-size vendor code: %+v", res[0])
	}
	if res[1].Outcome != stock.Refused || !strings.Contains(res[1].Reason, "barcode") || !strings.Contains(res[1].Reason, "21") {
		t.Errorf("vendor code of two sizes: %+v, want refused asking to map the barcodes", res[1])
	}
	if res[2].Outcome != stock.Published {
		t.Errorf("barcode: %+v", res[2])
	}
	// BC11 is ONE's barcode: the same chrtID twice in a batch.
	if res[3].Outcome != stock.Refused || !strings.Contains(res[3].Reason, "same batch") {
		t.Errorf("second update of chrtID 11: %+v", res[3])
	}
	if got := s.StockAmounts(stockWH); len(got) != 2 || got[11] != 5 || got[22] != 4 {
		t.Errorf("amounts %v", got)
	}
}

func TestCardsRelistedForUnknownVendorCodeAtMostOncePerInterval(t *testing.T) {
	s, snd, clk := newStockTest(t)
	s.AddCard(card(1, "A", 11))
	lists := func() int { return len(s.RequestsOf(wbsim.OpCardsList)) }

	res := send(t, snd, upd("A", 1), upd("NEW", 2))
	if res[1].Outcome != stock.Skipped || res[1].Reason != "no Wildberries card with vendor code NEW (nor a size with that barcode)" {
		t.Errorf("unknown vendor code: %+v", res[1])
	}
	if lists() != 1 {
		t.Errorf("%d listings, want 1: the first one has just run", lists())
	}

	s.AddCard(card(2, "NEW", 12))
	clk.Advance(DefaultCardsRelist - time.Second)
	if res := send(t, snd, upd("NEW", 2)); res[0].Outcome != stock.Skipped || lists() != 1 {
		t.Errorf("within the interval: %+v after %d listings, want skipped without listing", res[0], lists())
	}
	clk.Advance(time.Second)
	if res := send(t, snd, upd("NEW", 2)); res[0].Outcome != stock.Published || lists() != 2 {
		t.Errorf("after the interval: %+v after %d listings, want published after listing again", res[0], lists())
	}
	if res := send(t, snd, upd("A", 3)); res[0].Outcome != stock.Published || lists() != 2 {
		t.Errorf("known vendor code: %d listings", lists())
	}

	// Older than a day: listed again before use.
	s.RemoveCard(1)
	clk.Advance(DefaultCardsMaxAge)
	if res := send(t, snd, upd("A", 3)); res[0].Outcome != stock.Skipped || lists() != 3 {
		t.Errorf("a day later: %+v after %d listings, want A gone after listing again", res[0], lists())
	}
}

func TestCardsHeldWhenListingFails(t *testing.T) {
	s, snd, clk := newStockTest(t)
	s.AddCard(card(1, "A", 11))
	send(t, snd, upd("A", 1))
	clk.Advance(DefaultCardsMaxAge)
	s.Faults.Add(sim.Forever, sim.Fault{Op: wbsim.OpCardsList, Status: 400}) // 400: not retried
	if res := send(t, snd, upd("A", 2)); res[0].Outcome != stock.Published {
		t.Errorf("with the listing failing: %+v, want the held cards used", res[0])
	}
	n := len(s.RequestsOf(wbsim.OpCardsList))
	send(t, snd, upd("A", 3))
	if m := len(s.RequestsOf(wbsim.OpCardsList)); m != n {
		t.Errorf("listed again %d times right after a failure", m-n)
	}
}

func TestCardsListedOnceForConcurrentSends(t *testing.T) {
	s, snd, _ := newStockTest(t)
	snd.cards.pageSize = 2
	for i := range 9 {
		s.AddCard(card(int64(100+i), fmt.Sprint("V", i), int64(200+i)))
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Go(func() {
			res, err := snd.Send(context.Background(), "WH1", []stock.Update{upd(fmt.Sprint("V", i), 1)})
			if err == nil && res[0].Outcome != stock.Published {
				err = fmt.Errorf("%+v", res[0])
			}
			if err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := len(s.RequestsOf(wbsim.OpCardsList)); n != 5 {
		t.Errorf("%d pages requested, want one listing of 5", n)
	}
}

func TestCardsRefusedToken(t *testing.T) {
	s, snd, _ := newStockTest(t)
	s.Faults.Add(1, sim.Fault{Op: wbsim.OpCardsList, Status: 401})
	_, err := snd.Send(context.Background(), "WH1", []stock.Update{upd("A", 1)})
	var ae *connectors.AuthError
	if !errors.As(err, &ae) || ae.Key != "connectors.wildberries.token" || !strings.Contains(err.Error(), "Content") {
		t.Fatalf("err %v, want an AuthError naming the token and the Content category", err)
	}
}
