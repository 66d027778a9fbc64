package ymsim_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ordersync/ordersync/internal/sim/ymsim"
)

const v3Path = "/v3/businesses/777/offers/stocks/update"

func TestStocksV3TakesValidBatches(t *testing.T) {
	t.Parallel()
	s := start(t, ymsim.Options{PartnerWarehouses: []string{"55", "66"}})
	st, _ := call(t, s, "POST", v3Path, `{"skuItems":[
		{"sku":"A","partnerWarehouseId":55,"count":3,"updatedAt":"2026-09-16T10:00:00+03:00"},
		{"sku":"A","partnerWarehouseId":66,"count":4}]}`)
	if st != 200 {
		t.Fatalf("status %d, want 200", st)
	}
	got := s.StocksV3()
	if len(got) != 2 || got["55/A"].Count != 3 || got["66/A"].Count != 4 || got["55/A"].UpdatedAt.Hour() != 10 {
		t.Fatalf("stocks %+v", got)
	}
	for _, body := range []string{
		`{"skuItems":[]}`,
		`{"skuItems":[{"sku":"A","partnerWarehouseId":77,"count":1}]}`,   // not the cabinet's
		`{"skuItems":[{"sku":"A","partnerWarehouseId":"55","count":1}]}`, // a string
		`{"skuItems":[{"sku":"B","partnerWarehouseId":55,"count":1},{"sku":"B","partnerWarehouseId":55,"count":2}]}`,
		`{"skuItems":[{"sku":"B","partnerWarehouseId":55,"count":-1}]}`,
		`{"skuItems":[{"sku":"","partnerWarehouseId":55,"count":1}]}`,
		`not json`,
	} {
		if st, _ := call(t, s, "POST", v3Path, body); st != 400 {
			t.Errorf("%s: status %d, want 400", body, st)
		}
	}
	var items []string
	for i := range ymsim.MaxStockSKUs + 1 {
		items = append(items, fmt.Sprintf(`{"sku":"S%d","partnerWarehouseId":55,"count":1}`, i))
	}
	if st, _ := call(t, s, "POST", v3Path, `{"skuItems":[`+strings.Join(items, ",")+`]}`); st != 400 {
		t.Errorf("%d items: status %d, want 400", len(items), st)
	}
	if st, _ := call(t, s, "POST", "/v3/businesses/778/offers/stocks/update", `{"skuItems":[]}`); st != 403 {
		t.Errorf("another business: status %d, want 403", st)
	}
	if s.StockV3Calls() != 1 || s.BadStockV3Requests() != 8 || len(s.StocksV3()) != 2 || s.Violations() != 0 {
		t.Fatalf("calls %d bad %d stocks %d violations %d, want 1, 8, 2, 0",
			s.StockV3Calls(), s.BadStockV3Requests(), len(s.StocksV3()), s.Violations())
	}
}

func TestStocksV3CountsRequestsBeyondTheMinute(t *testing.T) {
	t.Parallel()
	s := start(t, ymsim.Options{PartnerWarehouses: []string{"55"}})
	body := `{"skuItems":[{"sku":"A","partnerWarehouseId":55,"count":1}]}`
	for range ymsim.MaxStockV3PerMinute {
		if st, _ := call(t, s, "POST", v3Path, body); st != 200 {
			t.Fatalf("status %d, want 200", st)
		}
	}
	if s.Violations() != 0 {
		t.Fatalf("violations %d within the limit", s.Violations())
	}
	if st, _ := call(t, s, "POST", v3Path, body); st != ymsim.StatusRateLimited {
		t.Fatalf("status %d beyond the limit, want 420", st)
	}
	if s.Violations() != 1 || s.StockV3Calls() != ymsim.MaxStockV3PerMinute {
		t.Fatalf("violations %d calls %d", s.Violations(), s.StockV3Calls())
	}
}

func TestStockReadPages(t *testing.T) {
	t.Parallel()
	s := start(t, ymsim.Options{PartnerWarehouses: []string{"55"}})
	var skus []string
	for i := range 230 {
		skus = append(skus, fmt.Sprintf(`{"sku":"S%03d","items":[{"count":%d}]}`, i, i))
	}
	if st, _ := call(t, s, "PUT", "/v2/campaigns/21000/offers/stocks", `{"skus":[`+strings.Join(skus, ",")+`]}`); st != 200 {
		t.Fatalf("update: status %d", st)
	}
	offers := func(ans map[string]any) []any {
		res, _ := ans["result"].(map[string]any)
		whs, _ := res["warehouses"].([]any)
		if len(whs) != 1 {
			return nil
		}
		wh := whs[0].(map[string]any)
		if wh["warehouseId"] != float64(55) {
			t.Errorf("warehouseId %v, want 55", wh["warehouseId"])
		}
		o, _ := wh["offers"].([]any)
		return o
	}
	next := func(ans map[string]any) string {
		res, _ := ans["result"].(map[string]any)
		p, _ := res["paging"].(map[string]any)
		tok, _ := p["nextPageToken"].(string)
		return tok
	}
	// No limit: pages of the default; a limit above the most is cut to it.
	_, ans := call(t, s, "POST", "/v2/campaigns/21000/offers/stocks", "")
	if n := len(offers(ans)); n != ymsim.DefaultStockReadLimit || next(ans) == "" {
		t.Fatalf("default page: %d offers, next %q", n, next(ans))
	}
	seen := 0
	for tok, pages := "", 0; ; pages++ {
		path := "/v2/campaigns/21000/offers/stocks?limit=500"
		if tok != "" {
			path += "&page_token=" + tok
		}
		st, ans := call(t, s, "POST", path, "{}")
		if st != 200 || len(offers(ans)) > ymsim.MaxStockReadLimit {
			t.Fatalf("page %d: status %d, %d offers", pages, st, len(offers(ans)))
		}
		seen += len(offers(ans))
		if tok = next(ans); tok == "" {
			if pages != 2 {
				t.Fatalf("%d pages, want 3", pages+1)
			}
			break
		}
	}
	if seen != 230 {
		t.Fatalf("read %d offers, want 230", seen)
	}
	_, ans = call(t, s, "POST", "/v2/campaigns/21000/offers/stocks", `{"offerIds":["S007","nope"]}`)
	o := offers(ans)
	if len(o) != 1 || o[0].(map[string]any)["offerId"] != "S007" {
		t.Fatalf("by offerIds: %v", o)
	}
	stocks := o[0].(map[string]any)["stocks"].([]any)
	if stocks[0].(map[string]any)["count"] != float64(7) {
		t.Fatalf("S007 stocks %v, want 7", stocks)
	}
	if st, _ := call(t, s, "POST", "/v2/campaigns/21000/offers/stocks?limit=10", `{"offerIds":["S007"]}`); st != 400 {
		t.Fatalf("offerIds with limit: status %d, want 400", st)
	}
	if st, _ := call(t, s, "POST", "/v2/campaigns/21000/offers/stocks?limit=0", ``); st != 400 {
		t.Fatalf("limit 0: status %d, want 400", st)
	}
	if s.StockReads() != 5 || s.BadStockReads() != 2 {
		t.Fatalf("reads %d bad %d, want 5 and 2", s.StockReads(), s.BadStockReads())
	}
}
