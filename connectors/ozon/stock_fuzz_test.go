package ozon_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ordersync/ordersync/connectors/ozon"
	"github.com/ordersync/ordersync/internal/stock"
)

// fuzzStatuses are the statuses FuzzStockAnswer answers with, the first most
// often.
var fuzzStatuses = []int{200, 200, 200, 200, 400, 429, 409, 500, 403, 404}

// FuzzStockAnswer answers Send's POST /v2/products/stocks with a fuzzed status and
// body: the sender never panics, and either fails the batch (no results) or
// returns a result for exactly each update of the batch, in its order, each with
// a known outcome, a reason unless published and a wait when deferred; an item
// the answer does not name is never published.
func FuzzStockAnswer(f *testing.F) {
	var mu sync.Mutex
	var status int
	var body []byte
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		st, b := status, body
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(st)
		w.Write(b)
	}))
	f.Cleanup(ts.Close)
	c, err := ozon.New(ozon.Config{BaseURL: ts.URL, ClientID: clientID, APIKey: apiKey, Warehouse: "WH1", RatePerSecond: -1, Timeout: 5 * time.Second})
	if err != nil {
		f.Fatal(err)
	}
	// On a clock that sleeps at once: the rate limiter never slows the fuzzer.
	sender, err := c.StockSender(ozon.StockConfig{Warehouses: map[string]int64{"WH1": ozonWH}, Clock: &fakeClock{t: now}})
	if err != nil {
		f.Fatal(err)
	}
	batch := append(updates("A", "B", "C", "D"),
		stock.Update{SKU: "1C-A-2", MarketSKU: "A", Amount: 9}, // the same offer twice: refused unsent
		stock.Update{SKU: "1C-NONE", MarketSKU: "", Amount: 1}) // no offer_id: refused unsent

	f.Add(uint8(0), []byte(`{"result":[{"offer_id":"A","product_id":1,"updated":true,"warehouse_id":22142605386000,"errors":[]},`+
		`{"offer_id":"B","updated":false,"warehouse_id":22142605386000,"errors":[{"code":"TOO_MANY_REQUESTS","message":"wait"}]},`+
		`{"offer_id":"C","updated":false,"warehouse_id":22142605386000,"errors":[{"code":"STOCK_TOO_BIG","message":"too big"}]},`+
		`{"offer_id":"D","updated":false,"errors":[{"code":"offer_id_not_found","message":""}]}]}`))
	f.Add(uint8(0), []byte(`{"result":[{"offer_id":"A","updated":true,"warehouse_id":99},{"offer_id":"A","updated":true},`+
		`{"offer_id":"Z","updated":true},{"offer_id":"B","updated":false,"errors":[]},{"offer_id":"C","warehouse_id":"22142605386000","updated":true}]}`))
	f.Add(uint8(0), []byte(`{"result":[{"offer_id":"D","updated":false,"errors":[{"code":"Stock is updated too frequently","message":"\u0007\r\n"}]}]}`))
	// An item error with neither a code nor a message is no reason: the item is
	// deferred as one not updated without a reason, not refused with an empty one.
	f.Add(uint8(0), []byte(`{"result":[{"offer_id":"D","updated":false,"errors":[{}]}]}`))
	f.Add(uint8(0), []byte(`{"result":null}`))
	f.Add(uint8(0), []byte(`{"result":[`))
	f.Add(uint8(0), []byte(`[]`))
	f.Add(uint8(4), []byte(`{"code":3,"message":"Request validation error: invalid ProductsStocksRequest.Stocks[0]","details":[]}`))
	f.Add(uint8(5), []byte(`{"code":8,"message":"You have reached request rate limit per minute","details":[]}`))
	f.Add(uint8(8), []byte(`{"code":7,"message":"Api-key access denied for this method"}`))
	f.Fuzz(func(t *testing.T, st uint8, b []byte) {
		mu.Lock()
		status, body = fuzzStatuses[int(st)%len(fuzzStatuses)], b
		mu.Unlock()
		rs, err := sender.Send(context.Background(), "WH1", batch)
		if err != nil {
			if rs != nil {
				t.Fatalf("an error (%v) with results %+v", err, rs)
			}
			return
		}
		if len(rs) != len(batch) {
			t.Fatalf("%d results for %d updates", len(rs), len(batch))
		}
		for i, r := range rs {
			u := batch[i]
			if r.SKU != u.SKU {
				t.Fatalf("result %d is for %q, want %q", i, r.SKU, u.SKU)
			}
			switch r.Outcome {
			case stock.Published:
				if r.Reason != "" || r.RetryAfter != 0 {
					t.Fatalf("%s published with reason %q, wait %s", u.SKU, r.Reason, r.RetryAfter)
				}
				if !strings.ContainsRune(string(b), '\\') && !strings.Contains(string(b), `"`+u.MarketSKU+`"`) {
					t.Fatalf("%s published, yet the answer %q does not name offer %q", u.SKU, b, u.MarketSKU)
				}
			case stock.Deferred:
				if r.RetryAfter < ozon.StockMinResend || r.Reason == "" {
					t.Fatalf("%s deferred for %s with reason %q: want at least Ozon's %s and a reason", u.SKU, r.RetryAfter, r.Reason, ozon.StockMinResend)
				}
			case stock.Refused:
				if r.Reason == "" || r.RetryAfter != 0 {
					t.Fatalf("%s refused with reason %q, wait %s", u.SKU, r.Reason, r.RetryAfter)
				}
			default:
				t.Fatalf("%s: outcome %q", u.SKU, r.Outcome)
			}
			if strings.ContainsAny(r.Reason, "\r\x00\x07") {
				t.Fatalf("%s: the reason %q carries control characters", u.SKU, r.Reason)
			}
		}
		if rs[4].Outcome != stock.Refused || rs[5].Outcome != stock.Refused {
			t.Fatalf("the duplicate and the offer-less update were not refused: %+v %+v", rs[4], rs[5])
		}
	})
}
