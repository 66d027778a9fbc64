package wildberries

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ordersync/ordersync/internal/stock"
)

// fuzzMarket is a Wildberries that answers the stock sender with fuzzed bodies
// where a target says so and as the API would elsewhere: the cards list a page of
// four one-size cards (vendor codes A to D, chrtID 11 to 14, barcode BC<chrtID>),
// a PUT writes its items and answers 204, a read answers what was written.
type fuzzMarket struct {
	ts *httptest.Server
	c  *Connector

	mu       sync.Mutex
	cards    []byte // nil: the four cards
	conflict []byte // the first PUT's 409 body; nil: no 409
	read     []byte // the read-back's body; nil: what was written
	puts     int
	written  map[int64]int64
}

const fuzzCards = `{"cards":[` +
	`{"nmID":1,"vendorCode":"A","sizes":[{"chrtID":11,"skus":["BC11"]}]},` +
	`{"nmID":2,"vendorCode":"B","sizes":[{"chrtID":12,"skus":["BC12"]}]},` +
	`{"nmID":3,"vendorCode":"C","sizes":[{"chrtID":13,"skus":["BC13"]}]},` +
	`{"nmID":4,"vendorCode":"D","sizes":[{"chrtID":14,"skus":["BC14"]}]}],` +
	`"cursor":{"updatedAt":"2026-09-16T07:00:00Z","nmID":4,"total":4}}`

func newFuzzMarket(f *testing.F) *fuzzMarket {
	m := &fuzzMarket{}
	m.ts = httptest.NewServer(http.HandlerFunc(m.serve))
	f.Cleanup(m.ts.Close)
	// One transport for every sender the targets make, so that their connections
	// are reused rather than left open one set a sender.
	transport := http.DefaultTransport.(*http.Transport).Clone()
	f.Cleanup(transport.CloseIdleConnections)
	c, err := New(Config{BaseURL: m.ts.URL, Token: testToken, Warehouse: "WH1", RatePerSecond: -1, Timeout: 5 * time.Second,
		Transport: transport})
	if err != nil {
		f.Fatal(err)
	}
	m.c = c
	return m
}

func (m *fuzzMarket) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	m.mu.Lock()
	defer m.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.URL.Path == "/content/v2/get/cards/list":
		w.WriteHeader(http.StatusOK)
		if m.cards == nil {
			io.WriteString(w, fuzzCards)
			return
		}
		w.Write(m.cards)
	case r.URL.Path == fmt.Sprint("/api/v3/stocks/", stockWH) && r.Method == http.MethodPut:
		m.puts++
		if m.conflict != nil && m.puts == 1 {
			w.WriteHeader(http.StatusConflict)
			w.Write(m.conflict)
			return
		}
		var req struct{ Stocks []stockWire }
		if json.Unmarshal(body, &req) != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		for _, s := range req.Stocks {
			m.written[s.ChrtID] = s.Amount
		}
		w.WriteHeader(http.StatusNoContent)
	case r.URL.Path == fmt.Sprint("/api/v3/stocks/", stockWH) && r.Method == http.MethodPost:
		w.WriteHeader(http.StatusOK)
		if m.read != nil {
			w.Write(m.read)
			return
		}
		var req struct {
			ChrtIDs []int64 `json:"chrtIds"`
		}
		json.Unmarshal(body, &req)
		out := struct {
			Stocks []stockWire `json:"stocks"`
		}{Stocks: []stockWire{}}
		for _, id := range req.ChrtIDs {
			if a, ok := m.written[id]; ok {
				out.Stocks = append(out.Stocks, stockWire{ChrtID: id, Amount: a})
			}
		}
		json.NewEncoder(w).Encode(out)
	default:
		w.WriteHeader(http.StatusNotFound)
	}
}

// fuzzBatch is what each target sends: four vendor codes with cards, one by its
// barcode and one without a card.
var fuzzBatch = []stock.Update{upd("A", 1), upd("B", 2), upd("C", 0), upd("D", 5), upd("BC12", 7), upd("GHOST", 3)}

// send runs one Send with a fresh sender (and so a fresh list of cards) against
// the answers set, and checks what every answer must give: no panic; an error
// and no results, or a result for exactly each update in its order, each with a
// known outcome and a reason unless published; an item published only when
// Wildberries holds its amount. It returns the results (nil on an error) and what
// was written.
func (m *fuzzMarket) send(t *testing.T, cards, conflict, read []byte) ([]stock.Result, map[int64]int64) {
	m.mu.Lock()
	m.cards, m.conflict, m.read, m.puts, m.written = cards, conflict, read, 0, map[int64]int64{}
	m.mu.Unlock()
	snd, err := m.c.StockSender(StockConfig{ContentURL: m.ts.URL, Warehouses: map[string]string{"WH1": fmt.Sprint(stockWH)},
		RateScale: -1, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	rs, err := snd.Send(context.Background(), "WH1", fuzzBatch)
	m.mu.Lock()
	written := m.written
	m.mu.Unlock()
	if err != nil {
		if rs != nil {
			t.Fatalf("an error (%v) with results %+v", err, rs)
		}
		return nil, written
	}
	if len(rs) != len(fuzzBatch) {
		t.Fatalf("%d results for %d updates", len(rs), len(fuzzBatch))
	}
	for i, r := range rs {
		u := fuzzBatch[i]
		if r.SKU != u.SKU {
			t.Fatalf("result %d is for %q, want %q", i, r.SKU, u.SKU)
		}
		switch r.Outcome {
		case stock.Published:
			if r.Reason != "" {
				t.Fatalf("%s published with a reason %q", u.SKU, r.Reason)
			}
		case stock.Refused, stock.Mismatch, stock.Skipped, stock.Deferred:
			if r.Reason == "" {
				t.Fatalf("%s %s without a reason", u.SKU, r.Outcome)
			}
		default:
			t.Fatalf("%s: outcome %q", u.SKU, r.Outcome)
		}
	}
	return rs, written
}

// FuzzStockConflict answers the first PUT with a fuzzed 409 body (the documented
// array of {code, message, data}, or anything else): whatever it names, every
// item ends with an outcome, those refused are not written, and an item published
// is one the PUT of the rest wrote with its amount.
func FuzzStockConflict(f *testing.F) {
	m := newFuzzMarket(f)
	f.Add([]byte(`[{"code":"NotFound","message":"Not found","data":[{"sku":"BC12","amount":2,"chrtId":12}]}]`))
	f.Add([]byte(`[{"code":"SubjectDBSRestriction","message":"not for FBS","data":[{"sku":"BC13","amount":0}]},` +
		`{"code":"UploadDataLimit","message":"Upload limit exceeded.","data":[{"chrtId":14,"amount":5}]}]`))
	f.Add([]byte(`[{"code":"CargoWarehouseRestrictionMGT","message":"Not for LCL","data":{"BC11":{"amount":1}}}]`))
	f.Add([]byte(`[{"code":"StoreIsProcessing","message":"The store is processing"}]`))
	f.Add([]byte(`{"code":"conflict","message":"one, not an array","data":[{"chrtId":11}]}`))
	f.Add([]byte(`{"title":"conflict","detail":"the gateway's"}`))
	f.Add([]byte(`[{"data":[{"chrtId":-1},{"chrtId":"11"},{"sku":12},{}]},null]`))
	f.Add([]byte(`not json`))
	f.Fuzz(func(t *testing.T, body []byte) {
		rs, written := m.send(t, nil, body, nil)
		if rs == nil {
			return
		}
		for i, r := range rs {
			u := fuzzBatch[i]
			chrt := map[string]int64{"A": 11, "B": 12, "C": 13, "D": 14, "BC12": 12}[u.MarketSKU]
			switch {
			case u.MarketSKU == "GHOST" && r.Outcome != stock.Skipped:
				t.Fatalf("GHOST, which no card has: %+v", r)
			case r.Outcome == stock.Published && u.Amount > 0 && written[chrt] != u.Amount:
				t.Fatalf("%s published, yet Wildberries holds %d for chrtID %d", u.SKU, written[chrt], chrt)
			case r.Outcome == stock.Deferred || r.Outcome == stock.Mismatch:
				t.Fatalf("%s: %+v after a 409 and a PUT that wrote everything sent", u.SKU, r)
			case r.Outcome == stock.Refused && u.MarketSKU != "BC12":
				if a, ok := written[chrt]; ok {
					t.Fatalf("%s refused (%s), yet written: %d", u.SKU, r.Reason, a)
				}
			}
		}
	})
}

// FuzzStockReadBack answers the read-back after a 204 with a fuzzed body: every
// item sent is published or a mismatch, published only when the answer names its
// chrtID (or it was sent 0 and the answer leaves it out), a mismatch naming the
// amount sent.
func FuzzStockReadBack(f *testing.F) {
	m := newFuzzMarket(f)
	f.Add([]byte(`{"stocks":[{"chrtId":11,"amount":1},{"chrtId":12,"amount":7},{"chrtId":14,"amount":5}]}`))
	f.Add([]byte(`{"stocks":[{"chrtId":11,"sku":"BC11","amount":3},{"chrtId":12,"amount":2},{"chrtId":13,"amount":0}]}`))
	f.Add([]byte(`{"stocks":[{"chrtId":11,"amount":1},{"chrtId":11,"amount":2}]}`))
	f.Add([]byte(`{"stocks":null}`))
	f.Add([]byte(`{"stocks":[{"chrtId":"11","amount":1}]}`))
	f.Add([]byte(`{"stocks":[{"chrtId":11,"amount":1.5}]}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		rs, _ := m.send(t, nil, nil, body)
		if rs == nil {
			return
		}
		for i, r := range rs {
			u := fuzzBatch[i]
			chrt := map[string]int64{"A": 11, "B": 12, "C": 13, "D": 14, "BC12": 12}[u.MarketSKU]
			switch {
			case u.MarketSKU == "GHOST":
				if r.Outcome != stock.Skipped {
					t.Fatalf("GHOST, which no card has: %+v", r)
				}
			case u.MarketSKU == "BC12":
				// B and BC12 name one chrtID: the second is refused unsent.
				if r.Outcome != stock.Refused {
					t.Fatalf("BC12, the chrtID of B sent once already: %+v", r)
				}
			case r.Outcome == stock.Published:
				if u.Amount > 0 && !strings.Contains(string(body), fmt.Sprint(chrt)) {
					t.Fatalf("%s published with %d, yet the read-back %q does not name chrtID %d", u.SKU, u.Amount, body, chrt)
				}
			case r.Outcome == stock.Mismatch:
				if !strings.Contains(r.Reason, fmt.Sprintf("sent %d for chrtID %d", u.Amount, chrt)) {
					t.Fatalf("%s: mismatch reason %q does not name what was sent", u.SKU, r.Reason)
				}
			default:
				t.Fatalf("%s: %+v, want published or a mismatch", u.SKU, r)
			}
		}
	})
}

// FuzzCardsPage answers the cards list with a fuzzed page (every page the same):
// the listing fails, or the items resolve to what the cards say; an item
// published is one a card names by vendor code or barcode, and Wildberries holds
// its amount.
func FuzzCardsPage(f *testing.F) {
	m := newFuzzMarket(f)
	f.Add([]byte(fuzzCards))
	f.Add([]byte(`{"cards":[{"nmID":1,"vendorCode":"A","sizes":[{"chrtID":11,"skus":["BC11"]},{"chrtID":21,"skus":["BC21"]}]},` +
		`{"nmID":2,"vendorCode":"B","sizes":[]},{"nmID":3,"vendorCode":"C","sizes":[{"chrtID":12,"skus":["BC12"]}]},` +
		`{"nmID":3,"vendorCode":"D","sizes":[{"chrtID":14,"skus":["BC12"]}]}],"cursor":{"updatedAt":"x","nmID":3,"total":4}}`))
	f.Add([]byte(`{"cards":[{"nmID":1,"vendorCode":"A","sizes":[{"chrtID":11}]}],"cursor":{"updatedAt":"x","nmID":1,"total":100}}`))
	f.Add([]byte(`{"cards":[{"nmID":1,"vendorCode":"A","sizes":[{"chrtID":0,"skus":["BC11"]},{"chrtID":-5}]}],"cursor":{"total":1}}`))
	f.Add([]byte(`{"cards":[]}`))
	f.Add([]byte(`{"cards":null,"cursor":null}`))
	f.Add([]byte(`{"errorText":"not a page"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		rs, written := m.send(t, body, nil, nil)
		if rs == nil {
			return
		}
		for i, r := range rs {
			u := fuzzBatch[i]
			if r.Outcome != stock.Published {
				continue
			}
			if !strings.ContainsRune(string(body), '\\') && !strings.Contains(string(body), `"`+u.MarketSKU+`"`) {
				t.Fatalf("%s published, yet no card of %q names %q", u.SKU, body, u.MarketSKU)
			}
			if u.Amount > 0 {
				found := false
				for _, a := range written {
					found = found || a == u.Amount
				}
				if !found {
					t.Fatalf("%s published with %d, which Wildberries was never sent (%v)", u.SKU, u.Amount, written)
				}
			}
		}
	})
}
