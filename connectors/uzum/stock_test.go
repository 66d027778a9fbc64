package uzum_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ordersync/ordersync/connectors"
	"github.com/ordersync/ordersync/connectors/uzum"
	"github.com/ordersync/ordersync/internal/outbox"
	"github.com/ordersync/ordersync/internal/sim/uzumsim"
	"github.com/ordersync/ordersync/internal/stock"
)

const (
	zeroBarcode = "0460123456789" // Uzum's barcode, leading zero and all
	cardBarcode = "460123456789"  // the same read as a number: the zero lost
	plainCode   = "4607777000011"
)

var seed = []uzumsim.SKU{
	{SkuID: 7001, Barcode: zeroBarcode, SkuTitle: "CHOYNAK-1", ProductTitle: "Choynak", Amount: 3},
	{SkuID: 7002, Barcode: plainCode, SkuTitle: "PIYOLA-6", ProductTitle: "Piyola", Amount: 0},
}

// stockClock is the sender's clock of the SKU list's age, moved by the test.
type stockClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *stockClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *stockClock) Add(d time.Duration) { c.mu.Lock(); defer c.mu.Unlock(); c.t = c.t.Add(d) }

func newStockSender(t *testing.T, s *uzumsim.Uzum, mod func(*uzum.Config), cfg uzum.StockConfig) *uzum.StockSender {
	t.Helper()
	snd, err := newConn(t, s, mod).StockSender(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return snd
}

func outcomes(rs []stock.Result) map[string]stock.Result {
	m := map[string]stock.Result{}
	for _, r := range rs {
		m[r.SKU] = r
	}
	return m
}

// TestStockLeadingZeroBarcode: the 1C SKU mapped to the barcode with its leading
// zero sets that SKU's amount at Uzum; the number-typed barcode of the product
// card is refused before it is sent, saying which barcode was meant.
func TestStockLeadingZeroBarcode(t *testing.T) {
	t.Parallel()
	s := startSim(t, uzumsim.Options{SKUs: seed})
	snd := newStockSender(t, s, nil, uzum.StockConfig{})
	if snd.Marketplace() != uzum.StockMarketplace || snd.Marketplace() != "uzum" {
		t.Fatalf("marketplace %q", snd.Marketplace())
	}
	if _, ok := snd.Warehouse("WH-UZ"); !ok {
		t.Fatal("WH-UZ, the connector's warehouse, is not the stock's")
	}
	if _, ok := snd.Warehouse("WH-OTHER"); ok {
		t.Fatal("WH-OTHER has an Uzum warehouse")
	}
	rs, err := snd.Send(context.Background(), "WH-UZ", []stock.Update{
		{SKU: "1C-CHOYNAK", MarketSKU: zeroBarcode, Amount: 12},
		{SKU: "1C-PIYOLA", MarketSKU: plainCode, Amount: 5},
		{SKU: "1C-CARD", MarketSKU: cardBarcode, Amount: 9},
	})
	if err != nil {
		t.Fatal(err)
	}
	got := outcomes(rs)
	if got["1C-CHOYNAK"].Outcome != stock.Published || got["1C-PIYOLA"].Outcome != stock.Published {
		t.Fatalf("results %+v, want the listed barcodes published", rs)
	}
	if r := got["1C-CARD"]; r.Outcome != stock.Refused || !strings.Contains(r.Reason, zeroBarcode) {
		t.Fatalf("the card's barcode: %+v, want refused naming %s", r, zeroBarcode)
	}
	held := s.Stocks()
	if held[zeroBarcode] != 12 || held[plainCode] != 5 || len(held) != 2 {
		t.Fatalf("Uzum holds %v, want %s: 12, %s: 5", held, zeroBarcode, plainCode)
	}
	if s.Violations() != 0 || len(s.UnknownBarcodes()) != 0 || s.StockSets() != 2 {
		t.Fatalf("violations %d, unknown barcodes %v, sets %d: want 0, none, 2", s.Violations(), s.UnknownBarcodes(), s.StockSets())
	}
}

// TestStockListReadOncePerRun: batches of one run read the SKU list once; a barcode
// not on it reads it again only after Relist, and an old list is read again.
func TestStockListReadOncePerRun(t *testing.T) {
	t.Parallel()
	s := startSim(t, uzumsim.Options{SKUs: seed, RatePerSecond: 50})
	clk := &stockClock{t: time.Date(2026, 9, 16, 10, 0, 0, 0, time.UTC)}
	snd := newStockSender(t, s, func(c *uzum.Config) { c.RatePerSecond = 40 },
		uzum.StockConfig{Now: clk.Now, Relist: time.Minute, ListMaxAge: 10 * time.Minute})
	ctx := context.Background()
	send := func(barcode string, amount int64) stock.Result {
		t.Helper()
		rs, err := snd.Send(ctx, "WH-UZ", []stock.Update{{SKU: "1C", MarketSKU: barcode, Amount: amount}})
		if err != nil || len(rs) != 1 {
			t.Fatalf("send %s: %v %v", barcode, rs, err)
		}
		return rs[0]
	}
	for i := range 5 {
		if r := send(zeroBarcode, int64(i)); r.Outcome != stock.Published {
			t.Fatalf("batch %d: %+v", i, r)
		}
	}
	if n := s.Requests()[uzumsim.OpStocks]; n != 1 {
		t.Fatalf("the list was read %d times in one run, want 1", n)
	}
	send("9999", 1)
	if n := s.Requests()[uzumsim.OpStocks]; n != 1 {
		t.Fatalf("an unknown barcode read the list again before Relist: %d reads", n)
	}
	clk.Add(time.Minute)
	send("9999", 1)
	send("9999", 1)
	if n := s.Requests()[uzumsim.OpStocks]; n != 2 {
		t.Fatalf("after Relist: %d reads, want 2", n)
	}
	clk.Add(10 * time.Minute)
	send(zeroBarcode, 7)
	if n := s.Requests()[uzumsim.OpStocks]; n != 3 {
		t.Fatalf("an old list: %d reads, want 3", n)
	}
	if s.Stocks()[zeroBarcode] != 7 || s.Violations() != 0 || s.StockSets() != 6 {
		t.Fatalf("held %v, violations %d, sets %d", s.Stocks(), s.Violations(), s.StockSets())
	}
}

// TestStockErrors: a 429 asks for the batch again after Retry-After; refused
// credentials name the token's key; bad updates are refused unsent.
func TestStockErrors(t *testing.T) {
	t.Parallel()
	s := startSim(t, uzumsim.Options{SKUs: seed})
	snd := newStockSender(t, s, nil, uzum.StockConfig{})
	ctx := context.Background()
	up := []stock.Update{{SKU: "A", MarketSKU: zeroBarcode, Amount: 4}}
	if _, err := snd.Send(ctx, "WH-UZ", up); err != nil { // reads the list
		t.Fatal(err)
	}
	rs, err := snd.Send(ctx, "WH-UZ", []stock.Update{
		{SKU: "neg", MarketSKU: zeroBarcode, Amount: -1},
		{SKU: "none", MarketSKU: "", Amount: 1},
		{SKU: "first", MarketSKU: plainCode, Amount: 2},
		{SKU: "again", MarketSKU: plainCode, Amount: 3},
	})
	if err != nil {
		t.Fatal(err)
	}
	got := outcomes(rs)
	for _, sku := range []string{"neg", "none", "again"} {
		if got[sku].Outcome != stock.Refused {
			t.Errorf("%s: %+v, want refused", sku, got[sku])
		}
	}
	if got["first"].Outcome != stock.Published || s.Stocks()[plainCode] != 2 {
		t.Fatalf("first: %+v, Uzum holds %v", got["first"], s.Stocks())
	}
	if _, err := snd.Send(ctx, "WH-OTHER", up); err == nil {
		t.Fatal("a warehouse not configured was sent")
	}
	bad := newStockSender(t, s, func(c *uzum.Config) { c.Token = "wrong" }, uzum.StockConfig{})
	var ae *connectors.AuthError
	if _, err := bad.Send(ctx, "WH-UZ", up); !errors.As(err, &ae) || ae.Key != "connectors.uzum.token" {
		t.Fatalf("refused credentials: %v, want an AuthError naming connectors.uzum.token", err)
	}
	if s.Violations() != 0 {
		t.Fatalf("%d violations", s.Violations())
	}
	// Last: the sender's caller waits out the RetryAfter, this test does not.
	s.Throttle(1)
	var de *outbox.DeliveryError
	if _, err := snd.Send(ctx, "WH-UZ", up); !errors.As(err, &de) || de.RetryAfter <= 0 {
		t.Fatalf("429: %v, want a DeliveryError with RetryAfter", err)
	}
	if _, err := newConn(t, s, func(c *uzum.Config) { c.Warehouse = "" }).StockSender(uzum.StockConfig{}); err == nil ||
		!strings.Contains(err.Error(), "connectors.uzum.stock_warehouse") {
		t.Fatalf("no warehouse: %v", err)
	}
}

// TestStockSecondAccount: a second account publishes under its own source.
func TestStockSecondAccount(t *testing.T) {
	t.Parallel()
	s := startSim(t, uzumsim.Options{SKUs: seed})
	snd := newStockSender(t, s, func(c *uzum.Config) { c.Source = "uzum-2" }, uzum.StockConfig{})
	if snd.Marketplace() != "uzum-2" || stock.Destination(snd.Marketplace()) != "uzum-2-stock" {
		t.Fatalf("marketplace %q", snd.Marketplace())
	}
}

// TestStockAnswers: how each answer of POST /v2/fbs/sku/stocks is read.
func TestStockAnswers(t *testing.T) {
	t.Parallel()
	list := `{"payload":{"skuAmountList":[{"skuId":7001,"barcode":"0460123456789","amount":3}]}}`
	for _, tc := range []struct {
		name   string
		status int
		body   string
		want   stock.Outcome
		reason string
	}{
		{"no list", 200, `{"payload":null}`, stock.Published, ""},
		{"listed", 200, `{"payload":{"skuAmountList":[{"skuId":7001,"barcode":"0460123456789","amount":4}]}}`, stock.Published, ""},
		{"other amount", 200, `{"payload":{"skuAmountList":[{"skuId":7001,"barcode":"0460123456789","amount":1}]}}`, stock.Mismatch, "shows 1"},
		{"left out", 200, `{"payload":{"skuAmountList":[]},"errors":[{"code":"SKU_BLOCKED","message":"blocked"}]}`, stock.Refused, "SKU_BLOCKED: blocked"},
		{"400", 400, `{"errors":[{"code":400,"message":"amount is too big"}]}`, stock.Refused, "400: amount is too big"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				if r.Method == http.MethodGet {
					_, _ = w.Write([]byte(list))
					return
				}
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.body))
			}))
			t.Cleanup(ts.Close)
			c, err := uzum.New(uzum.Config{BaseURL: ts.URL, Token: token, ShopIDs: []string{"1"}, Warehouse: "WH-UZ", RatePerSecond: -1})
			if err != nil {
				t.Fatal(err)
			}
			snd, err := c.StockSender(uzum.StockConfig{})
			if err != nil {
				t.Fatal(err)
			}
			rs, err := snd.Send(context.Background(), "WH-UZ", []stock.Update{{SKU: "A", MarketSKU: zeroBarcode, Amount: 4}})
			if err != nil || len(rs) != 1 {
				t.Fatalf("%v %v", rs, err)
			}
			if rs[0].Outcome != tc.want || !strings.Contains(rs[0].Reason, tc.reason) {
				t.Fatalf("%+v, want %s with %q", rs[0], tc.want, tc.reason)
			}
		})
	}
}
