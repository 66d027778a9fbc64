package wildberries

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/ordersync/ordersync/connectors"
	"github.com/ordersync/ordersync/internal/outbox"
	"github.com/ordersync/ordersync/internal/sim"
	"github.com/ordersync/ordersync/internal/sim/wbsim"
	"github.com/ordersync/ordersync/internal/stock"
)

func TestStockSenderTerms(t *testing.T) {
	_, snd, _ := newStockTest(t)
	var _ stock.Sender = snd
	if snd.Marketplace() != "wildberries" || snd.BatchSize() != 1000 || snd.MinResend() != 0 ||
		snd.MaxAmount() != 100000 || snd.Timeout() != DefaultStockTimeout {
		t.Errorf("terms: %s %d %s %d %s", snd.Marketplace(), snd.BatchSize(), snd.MinResend(), snd.MaxAmount(), snd.Timeout())
	}
	if id, ok := snd.Warehouse("WH1"); !ok || id != "7001" {
		t.Errorf("WH1: %q %t", id, ok)
	}
	if _, ok := snd.Warehouse("WH2"); ok {
		t.Error("WH2 is not configured")
	}
}

func TestStockSenderValidates(t *testing.T) {
	c, err := New(Config{Token: testToken})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		cfg  StockConfig
		want string
	}{
		{StockConfig{Warehouses: map[string]string{"WH1": "abc"}}, "connectors.wildberries.stock_warehouses.WH1"},
		{StockConfig{Warehouses: map[string]string{"WH1": "0"}}, "connectors.wildberries.stock_warehouses.WH1"},
		{StockConfig{ContentURL: "content-api.wildberries.ru"}, "connectors.wildberries.content_url"},
		{StockConfig{Timeout: -time.Second}, "negative"},
	} {
		if _, err := c.StockSender(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error naming %s", tc.cfg, err, tc.want)
		}
	}
	snd, err := c.StockSender(StockConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if snd.cards.http.BaseURL != DefaultContentURL {
		t.Errorf("content URL %s", snd.cards.http.BaseURL)
	}
	// A fresh sender has no burst credit.
	if tok := snd.lim.Tokens(); tok >= 1 {
		t.Errorf("a fresh limiter holds %.2f tokens, want none", tok)
	}
}

func TestStockSendPublishesAndReadsBack(t *testing.T) {
	s, snd, _ := newStockTest(t)
	s.AddCard(card(1, "A", 11))
	s.AddCard(card(2, "B", 12))
	s.AddCard(card(3, "C", 13))
	s.SetStock(stockWH, 13, 9)
	res := send(t, snd, upd("A", 5), upd("B", 0), upd("C", 0))
	for _, r := range res {
		if r.Outcome != stock.Published {
			t.Errorf("%+v", r)
		}
	}
	if got := s.StockAmounts(stockWH); fmt.Sprint(got) != "map[11:5 12:0 13:0]" {
		t.Errorf("amounts %v", got)
	}
	puts, reads := s.RequestsOf(wbsim.OpStocksUpdate), s.RequestsOf(wbsim.OpStocksGet)
	if len(puts) != 1 || len(reads) != 1 {
		t.Fatalf("%d PUTs, %d reads; want one of each", len(puts), len(reads))
	}
	if string(puts[0].Body) != `{"stocks":[{"chrtId":11,"amount":5},{"chrtId":12,"amount":0},{"chrtId":13,"amount":0}]}` {
		t.Errorf("PUT body %s", puts[0].Body)
	}
	if string(reads[0].Body) != `{"chrtIds":[11,12,13]}` {
		t.Errorf("read body %s", reads[0].Body)
	}
	if v := s.Violations(); len(v) != 0 {
		t.Errorf("violations %+v", v)
	}
}

func TestStockReadBackMismatch(t *testing.T) {
	s, snd, _ := newStockTest(t)
	s.AddCard(card(1, "A", 11))
	s.AddCard(card(2, "B", 12))
	s.AddCard(card(3, "C", 13))
	s.SetStock(stockWH, 12, 3)
	s.DropStockWrites(12, 13) // answered 204, not written
	res := send(t, snd, upd("A", 5), upd("B", 7), upd("C", 4))
	if res[0].Outcome != stock.Published {
		t.Errorf("A: %+v", res[0])
	}
	if res[1].Outcome != stock.Mismatch || res[1].Reason != "sent 7 for chrtID 12, Wildberries reads back 3" {
		t.Errorf("B: %+v, want a mismatch with both amounts", res[1])
	}
	if res[2].Outcome != stock.Mismatch || !strings.Contains(res[2].Reason, "sent 4") || !strings.Contains(res[2].Reason, "none") {
		t.Errorf("C (never set): %+v", res[2])
	}
}

func TestStockUnknownVendorCodeSkipped(t *testing.T) {
	s, snd, _ := newStockTest(t)
	s.AddCard(card(1, "A", 11))
	res := send(t, snd, upd("A", 1), upd("GHOST", 2))
	if res[1].Outcome != stock.Skipped || !strings.HasPrefix(res[1].Reason, "no Wildberries card with vendor code GHOST") {
		t.Errorf("%+v", res[1])
	}
	puts := s.RequestsOf(wbsim.OpStocksUpdate)
	if len(puts) != 1 || strings.Contains(string(puts[0].Body), "GHOST") || res[0].Outcome != stock.Published {
		t.Errorf("PUTs %v, A %+v", puts, res[0])
	}
	// Nothing to send: no request at all.
	n := len(s.Requests())
	if res := send(t, snd, upd("GHOST", 2)); res[0].Outcome != stock.Skipped || len(s.Requests()) != n {
		t.Errorf("%+v after %d requests", res[0], len(s.Requests())-n)
	}
}

func TestStockAmountOutOfRangeRefused(t *testing.T) {
	s, snd, _ := newStockTest(t)
	s.AddCard(card(1, "A", 11))
	s.AddCard(card(2, "B", 12))
	res := send(t, snd, upd("A", StockMaxAmount+1), upd("B", -1))
	for _, r := range res {
		if r.Outcome != stock.Refused || !strings.Contains(r.Reason, "range") {
			t.Errorf("%+v", r)
		}
	}
	if n := len(s.RequestsOf(wbsim.OpStocksUpdate)); n != 0 {
		t.Errorf("%d PUTs", n)
	}
}

func TestStock409RefusesTheItemsNamedAndSendsTheRest(t *testing.T) {
	s, snd, _ := newStockTest(t)
	for i := range 5 {
		s.AddCard(card(int64(i+1), fmt.Sprint("V", i), int64(11+i)))
	}
	if _, err := snd.cards.cards(context.Background()); err != nil {
		t.Fatal(err)
	}
	s.RemoveCard(2)                                                           // chrtID 12: gone since the cards were listed
	s.RefuseStock(stockWH, 14, "CargoWarehouseRestrictionMGT", "Not for LCL") // chrtID 14
	res := send(t, snd, upd("V0", 1), upd("V1", 2), upd("V2", 3), upd("V3", 4), upd("V4", 5))
	want := map[int]string{1: "NotFound: Not found", 3: "CargoWarehouseRestrictionMGT: Not for LCL"}
	for i, r := range res {
		if w, refused := want[i]; refused {
			if r.Outcome != stock.Refused || !strings.Contains(r.Reason, w) {
				t.Errorf("V%d: %+v, want refused with %q", i, r, w)
			}
		} else if r.Outcome != stock.Published {
			t.Errorf("V%d: %+v, want published", i, r)
		}
	}
	if got := s.StockAmounts(stockWH); fmt.Sprint(got) != "map[11:1 13:3 15:5]" {
		t.Errorf("amounts %v", got)
	}
	if puts := s.RequestsOf(wbsim.OpStocksUpdate); len(puts) != 2 || puts[0].Status != 409 || puts[1].Status != 204 {
		t.Errorf("PUTs %+v: want the 409 and the rest sent again", puts)
	}
}

func TestStock409NamingNoItemRefusesTheBatch(t *testing.T) {
	s, snd, _ := newStockTest(t)
	s.AddCard(card(1, "A", 11))
	s.AddCard(card(2, "B", 12))
	s.Faults.Add(1, sim.Fault{Op: wbsim.OpStocksUpdate, Status: 409})
	res := send(t, snd, upd("A", 1), upd("B", 2))
	for _, r := range res {
		if r.Outcome != stock.Refused || !strings.Contains(r.Reason, "naming no item") || !strings.Contains(r.Reason, "conflict") {
			t.Errorf("%+v", r)
		}
	}
	if n := len(s.RequestsOf(wbsim.OpStocksUpdate)); n != 1 {
		t.Errorf("%d PUTs", n)
	}
}

// conflictFirst answers the first PUT with body as a 409 and serves the rest.
func conflictFirst(t *testing.T, s *wbsim.Wildberries, snd *StockSender, body string) {
	t.Helper()
	var n atomic.Int32
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut && n.Add(1) == 1 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusConflict)
			w.Write([]byte(body))
			return
		}
		s.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	snd.http.SetBaseURL(ts.URL)
}

func TestStock409ByBarcodeAndBusyWarehouse(t *testing.T) {
	s, snd, _ := newStockTest(t)
	s.AddCard(card(1, "A", 11))
	s.AddCard(card(2, "B", 12))
	// As the specification's examples: data names the item by barcode only.
	conflictFirst(t, s, snd, `[{"code":"SubjectDBSRestriction","message":"not for FBS","data":[{"sku":"BC12","amount":2}]}]`)
	res := send(t, snd, upd("A", 1), upd("B", 2))
	if res[0].Outcome != stock.Published || res[1].Outcome != stock.Refused || !strings.Contains(res[1].Reason, "SubjectDBSRestriction") {
		t.Errorf("%+v", res)
	}

	s2, snd2, _ := newStockTest(t)
	s2.AddCard(card(1, "A", 11))
	conflictFirst(t, s2, snd2, `[{"code":"StoreIsProcessing","message":"The store is processing"}]`)
	_, err := snd2.Send(context.Background(), "WH1", []stock.Update{upd("A", 1)})
	var de *outbox.DeliveryError
	if !errors.As(err, &de) || de.RetryAfter != storeBusyRetry || de.Dead {
		t.Errorf("busy warehouse: %v, want a retry in a few seconds", err)
	}
}

func TestStock429RetryAfter(t *testing.T) {
	s, snd, _ := newStockTest(t)
	s.AddCard(card(1, "A", 11))
	s.Faults.Add(1, sim.Fault{Op: wbsim.OpStocksUpdate, Status: 429, RetryAfter: 7 * time.Second})
	_, err := snd.Send(context.Background(), "WH1", []stock.Update{upd("A", 1)})
	var de *outbox.DeliveryError
	if !errors.As(err, &de) || de.RetryAfter != 7*time.Second || de.Dead {
		t.Fatalf("%v, want a DeliveryError with RetryAfter 7s", err)
	}

	// The simulator's own limit, on its clock (which stands still): a burst of one,
	// spent by the PUT; the read waits 200 ms, sent as X-Ratelimit-Retry: 1.
	s.SetStockLimit(wbsim.StockPerMinute, 1)
	_, err = snd.Send(context.Background(), "WH1", []stock.Update{upd("A", 3)})
	if !errors.As(err, &de) || de.RetryAfter != time.Second {
		t.Fatalf("%v, want RetryAfter 1s from the simulator's limit", err)
	}
	if v := s.Violations(); len(v) == 0 || v[0].Rule != wbsim.RuleRate {
		t.Errorf("violations %+v", v)
	}
}

func TestStock429AfterA409DefersTheRest(t *testing.T) {
	s, snd, _ := newStockTest(t)
	s.AddCard(card(1, "A", 11))
	s.AddCard(card(2, "B", 12))
	s.RefuseStock(stockWH, 12, "NotFound", "Not found")
	s.Faults.Add(1, sim.Fault{Op: wbsim.OpStocksUpdate, After: 1, Status: 429, RetryAfter: 3 * time.Second})
	res := send(t, snd, upd("A", 1), upd("B", 2))
	if res[0].Outcome != stock.Deferred || res[0].RetryAfter != 3*time.Second {
		t.Errorf("A: %+v, want deferred for 3s", res[0])
	}
	if res[1].Outcome != stock.Refused {
		t.Errorf("B: %+v, want refused by the 409", res[1])
	}
}

func TestStockRefusedCredentialsAndWarehouses(t *testing.T) {
	s, snd, _ := newStockTest(t)
	s.AddCard(card(1, "A", 11))
	for _, st := range []int{401, 403} {
		s.Faults.Add(1, sim.Fault{Op: wbsim.OpStocksUpdate, Status: st})
		_, err := snd.Send(context.Background(), "WH1", []stock.Update{upd("A", 1)})
		var ae *connectors.AuthError
		if !errors.As(err, &ae) || ae.Key != "connectors.wildberries.token" {
			t.Errorf("%d: %v, want an AuthError naming connectors.wildberries.token", st, err)
		}
	}

	_, err := snd.Send(context.Background(), "WH9", []stock.Update{upd("A", 1)})
	var de *outbox.DeliveryError
	if !errors.As(err, &de) || !de.Dead || !strings.Contains(err.Error(), "connectors.wildberries.stock_warehouses.WH9") {
		t.Errorf("unmapped warehouse: %v", err)
	}

	s2, snd2, _ := newStockTest(t, func(c *StockConfig) { c.Warehouses = map[string]string{"WH1": "424242"} })
	s2.AddCard(card(1, "A", 11))
	_, err = snd2.Send(context.Background(), "WH1", []stock.Update{upd("A", 1)})
	if !errors.As(err, &de) || !de.Dead || !strings.Contains(err.Error(), "424242") ||
		!strings.Contains(err.Error(), "connectors.wildberries.stock_warehouses.WH1") {
		t.Errorf("a warehouse Wildberries does not know: %v", err)
	}
}

func TestStockLimiterCountsA409AsTen(t *testing.T) {
	s, snd, _ := newStockTest(t)
	s.AddCard(card(1, "A", 11))
	s.AddCard(card(2, "B", 12))
	s.RefuseStock(stockWH, 12, "NotFound", "Not found")
	if _, err := snd.cards.cards(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Five tokens and next to no refill: the 409 spends 1 + 9, and the PUT of the
	// rest would wait far beyond the Send's timeout, so it is not sent.
	snd.lim = rate.NewLimiter(rate.Limit(0.001), stockBurst)
	_, err := snd.Send(context.Background(), "WH1", []stock.Update{upd("A", 1), upd("B", 2)})
	if err == nil || !strings.Contains(err.Error(), "rate limit") {
		t.Fatalf("%v, want the rate limit's wait refused within the timeout", err)
	}
	if tok := snd.lim.Tokens(); tok > -4 {
		t.Errorf("%.2f tokens left, want about -5 (5 - 10)", tok)
	}
	if n := len(s.RequestsOf(wbsim.OpStocksUpdate)); n != 1 {
		t.Errorf("%d PUTs", n)
	}
}

func TestStockPacedWithinTheLimit(t *testing.T) {
	const scale = 20 // 100 requests a second
	s, snd := newStockTestOn(t, time.Now, func(c *StockConfig) { c.RateScale = scale })
	s.SetStockLimit(wbsim.StockPerMinute*scale, wbsim.StockBurst)
	for i := range 10 {
		s.AddCard(card(int64(i+1), fmt.Sprint("V", i), int64(11+i)))
	}
	s.RefuseStock(stockWH, 15, "NotFound", "Not found") // every batch costs a 409 too
	for round := range 8 {
		batch := make([]stock.Update, 10)
		for i := range batch {
			batch[i] = upd(fmt.Sprint("V", i), int64(round))
		}
		send(t, snd, batch...)
	}
	if v := s.Violations(); len(v) != 0 {
		t.Errorf("%d violations, first %+v", len(v), v[0])
	}
	if st := s.StockStats(); st.Limited != 0 || st.Conflicts != 8 || st.Updates != 16 || st.Reads != 8 {
		t.Errorf("stats %+v", st)
	}
}

func TestStockSendRejectsOversizedBatch(t *testing.T) {
	_, snd, _ := newStockTest(t)
	_, err := snd.Send(context.Background(), "WH1", make([]stock.Update, StockBatchSize+1))
	if err == nil {
		t.Fatal("a batch of 1001 was taken")
	}
}
