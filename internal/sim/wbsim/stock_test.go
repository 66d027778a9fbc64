package wbsim

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ordersync/ordersync/internal/sim"
)

// wbClock is a clock the test moves by hand.
type wbClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *wbClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *wbClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newWBStock(t *testing.T) (*Wildberries, string, *wbClock) {
	t.Helper()
	clk := &wbClock{t: wbNow}
	s := New(Options{Token: wbToken, Now: clk.Now})
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	s.AddStockWarehouse(7001)
	return s, ts.URL, clk
}

type wbCardsPage struct {
	Cards []struct {
		NmID       int64  `json:"nmID"`
		VendorCode string `json:"vendorCode"`
		Sizes      []struct {
			ChrtID int64    `json:"chrtID"`
			Skus   []string `json:"skus"`
		} `json:"sizes"`
		Photos    []map[string]string `json:"photos"`
		UpdatedAt string              `json:"updatedAt"`
	} `json:"cards"`
	Cursor struct {
		UpdatedAt string `json:"updatedAt"`
		NmID      int64  `json:"nmID"`
		Total     int    `json:"total"`
	} `json:"cursor"`
}

// listCards pages through the cards list as the documentation says: copy the
// answer's cursor into the next request until total is below limit.
func listCards(t *testing.T, base, filter string, limit int, ascending bool) []int64 {
	t.Helper()
	var got []int64
	updatedAt, nmID := "", int64(0)
	for range 1000 {
		cursor := fmt.Sprintf(`"limit":%d`, limit)
		if nmID != 0 {
			cursor += fmt.Sprintf(`,"updatedAt":%q,"nmID":%d`, updatedAt, nmID)
		}
		body := fmt.Sprintf(`{"settings":{"sort":{"ascending":%t},%s"cursor":{%s}}}`, ascending, filter, cursor)
		r := wbDo(t, http.MethodPost, base+"/content/v2/get/cards/list", body)
		if r.status != http.StatusOK {
			t.Fatalf("cards list: %d %s", r.status, r.body)
		}
		var p wbCardsPage
		wbDecode(t, r.body, &p)
		if p.Cursor.Total != len(p.Cards) {
			t.Fatalf("cursor.total %d, %d cards", p.Cursor.Total, len(p.Cards))
		}
		for _, c := range p.Cards {
			got = append(got, c.NmID)
		}
		if p.Cursor.Total < limit {
			return got
		}
		updatedAt, nmID = p.Cursor.UpdatedAt, p.Cursor.NmID
	}
	t.Fatal("paging does not end")
	return nil
}

func TestWBCardsPagingListsEveryCardOnce(t *testing.T) {
	s, base, _ := newWBStock(t)
	s.SetContentLimit(0, 0)
	var all, withPhotos, without []int64
	for i := range 23 {
		nm := int64(100 + i)
		photos := i % 3 // a third without photos
		s.AddCard(Card{
			NmID: nm, VendorCode: fmt.Sprintf("V-%d", nm), Photos: photos,
			// several cards share an updatedAt: the cursor is (updatedAt, nmID)
			UpdatedAt: wbNow.Add(-time.Duration(i/4) * time.Hour).Add(123456 * time.Nanosecond),
			Sizes:     []Size{{ChrtID: nm * 10, Skus: []string{fmt.Sprint(nm * 1000)}}},
		})
		all = append(all, nm)
		if photos > 0 {
			withPhotos = append(withPhotos, nm)
		} else {
			without = append(without, nm)
		}
	}
	sorted := func(ids []int64) []int64 { ids = slices.Clone(ids); slices.Sort(ids); return ids }
	for _, tc := range []struct {
		name, filter string
		want         []int64
	}{
		{"withPhoto -1", `"filter":{"withPhoto":-1},`, all},
		{"withPhoto 1", `"filter":{"withPhoto":1},`, withPhotos},
		{"withPhoto 0", `"filter":{"withPhoto":0},`, without},
		{"no filter: without photos only", ``, without},
	} {
		for _, limit := range []int{1, 3, 4, 100} {
			for _, asc := range []bool{false, true} {
				got := listCards(t, base, tc.filter, limit, asc)
				if !slices.Equal(sorted(got), sorted(tc.want)) {
					t.Errorf("%s, limit %d, ascending %t: got %v, want each of %v once", tc.name, limit, asc, got, sorted(tc.want))
				}
			}
		}
	}
	// The order: updatedAt descending, then nmID descending.
	got := listCards(t, base, `"filter":{"withPhoto":-1},`, 5, false)
	if got[0] != 103 || got[1] != 102 || got[4] != 107 {
		t.Errorf("descending order: %v", got)
	}
}

func TestWBCardsListRejectsBadCursor(t *testing.T) {
	s, base, _ := newWBStock(t)
	s.SetContentLimit(0, 0)
	for _, body := range []string{
		`{}`,
		`{"settings":{"cursor":{"limit":0}}}`,
		`{"settings":{"cursor":{"limit":101}}}`,
		`{"settings":{"cursor":{"limit":10,"updatedAt":"yesterday","nmID":5}}}`,
		`{"settings":{"cursor":{"limit":10,"nmID":5}}}`,
		`{"settings":{"filter":{"withPhoto":2},"cursor":{"limit":10}}}`,
	} {
		r := wbDo(t, http.MethodPost, base+"/content/v2/get/cards/list", body)
		if r.status != http.StatusBadRequest || !strings.Contains(string(r.body), `"error":true`) {
			t.Errorf("%s: %d %s, want 400 with the content error body", body, r.status, r.body)
		}
	}
}

func TestWBCardsListRateLimit(t *testing.T) {
	_, base, clk := newWBStock(t)
	body := `{"settings":{"filter":{"withPhoto":-1},"cursor":{"limit":10}}}`
	for i := range ContentBurst {
		if r := wbDo(t, http.MethodPost, base+"/content/v2/get/cards/list", body); r.status != http.StatusOK {
			t.Fatalf("request %d within the burst: %d", i+1, r.status)
		}
	}
	r := wbDo(t, http.MethodPost, base+"/content/v2/get/cards/list", body)
	if r.status != http.StatusTooManyRequests || r.header.Get("X-Ratelimit-Retry") != "1" {
		t.Fatalf("beyond the burst: %d, X-Ratelimit-Retry %q", r.status, r.header.Get("X-Ratelimit-Retry"))
	}
	clk.Advance(600 * time.Millisecond)
	if r := wbDo(t, http.MethodPost, base+"/content/v2/get/cards/list", body); r.status != http.StatusOK {
		t.Fatalf("600 ms later: %d", r.status)
	}
}

func stockBody(items ...[2]int64) string {
	var parts []string
	for _, it := range items {
		parts = append(parts, fmt.Sprintf(`{"chrtId":%d,"amount":%d}`, it[0], it[1]))
	}
	return `{"stocks":[` + strings.Join(parts, ",") + `]}`
}

func addStockCards(s *Wildberries, chrtIDs ...int64) {
	for _, id := range chrtIDs {
		s.AddCard(Card{NmID: id + 1_000_000, VendorCode: fmt.Sprintf("V%d", id),
			Sizes: []Size{{ChrtID: id, Skus: []string{fmt.Sprintf("BC%d", id)}}}})
	}
}

func TestWBStocksUpdateAndRead(t *testing.T) {
	s, base, _ := newWBStock(t)
	addStockCards(s, 11, 12, 13)
	url := base + "/api/v3/stocks/7001"
	if r := wbDo(t, http.MethodPut, url, stockBody([2]int64{11, 5}, [2]int64{12, 0})); r.status != http.StatusNoContent {
		t.Fatalf("PUT: %d %s", r.status, r.body)
	}
	if a, ok := s.StockAmount(7001, 11); !ok || a != 5 {
		t.Errorf("chrtId 11: %d %t", a, ok)
	}
	r := wbDo(t, http.MethodPost, url, `{"chrtIds":[11,12,13]}`)
	if r.status != http.StatusOK {
		t.Fatalf("POST: %d %s", r.status, r.body)
	}
	var got struct {
		Stocks []struct {
			ChrtID int64  `json:"chrtId"`
			Sku    string `json:"sku"`
			Amount int64  `json:"amount"`
		} `json:"stocks"`
	}
	wbDecode(t, r.body, &got)
	if len(got.Stocks) != 2 || got.Stocks[0].ChrtID != 11 || got.Stocks[0].Amount != 5 || got.Stocks[0].Sku != "BC11" ||
		got.Stocks[1].ChrtID != 12 || got.Stocks[1].Amount != 0 {
		t.Errorf("read back: %s (13 was never set: left out)", r.body)
	}
	if r := wbDo(t, http.MethodPut, base+"/api/v3/stocks/7002", stockBody([2]int64{11, 5})); r.status != http.StatusNotFound {
		t.Errorf("unknown warehouse: %d", r.status)
	}
	if st := s.StockStats(); st.Updates != 2 || st.Reads != 1 || st.Written != 2 {
		t.Errorf("stats: %+v", st)
	}
}

func TestWBStocksSilent204OnUnknownFields(t *testing.T) {
	s, base, _ := newWBStock(t)
	addStockCards(s, 11)
	s.SetStock(7001, 11, 3)
	url := base + "/api/v3/stocks/7001"
	for _, body := range []string{
		`{"stocks":[{"chrtID":11,"amount":9}]}`, // encoding/json would match this one
		`{"stocks":[{"chrtId":11,"Amount":9}]}`,
		`{"stocks":[{"chrtId":11,"amount":9,"warehouse":1}]}`,
		`{"stock":[{"chrtId":11,"amount":9}]}`,
		`{"stocks":[{"chrtId":11,"amount":9}],"extra":true}`,
	} {
		if r := wbDo(t, http.MethodPut, url, body); r.status != http.StatusNoContent {
			t.Errorf("%s: %d %s, want 204", body, r.status, r.body)
		}
	}
	if a, _ := s.StockAmount(7001, 11); a != 3 {
		t.Errorf("amount %d after ignored writes, want 3", a)
	}
	if st := s.StockStats(); st.Ignored != 5 || st.Written != 0 {
		t.Errorf("stats: %+v", st)
	}
}

func TestWBStocksValidation(t *testing.T) {
	s, base, _ := newWBStock(t)
	s.SetStockLimit(0, 0)
	addStockCards(s, 11, 12)
	url := base + "/api/v3/stocks/7001"
	many := make([][2]int64, StockMaxItems+1)
	for i := range many {
		many[i] = [2]int64{11, 1}
	}
	for _, tc := range []struct{ name, body string }{
		{"not JSON", `{"stocks":`},
		{"no stocks", `{}`},
		{"no items", `{"stocks":[]}`},
		{"too many items", stockBody(many...)},
		{"negative amount", stockBody([2]int64{11, -1})},
		{"fractional amount", `{"stocks":[{"chrtId":11,"amount":1.5}]}`},
		{"no amount", `{"stocks":[{"chrtId":11}]}`},
		{"a barcode only", `{"stocks":[{"sku":"BC11","amount":1}]}`},
	} {
		if r := wbDo(t, http.MethodPut, url, tc.body); r.status != http.StatusBadRequest {
			t.Errorf("%s: %d %s, want 400", tc.name, r.status, r.body)
		}
	}
	if _, ok := s.StockAmount(7001, 11); ok {
		t.Error("a refused request wrote")
	}
	v := s.Violations()
	if len(v) != 1 || v[0].Rule != RuleBatch || v[0].Op != OpStocksUpdate {
		t.Errorf("violations: %+v, want the 1001-item request", v)
	}
	if r := wbDo(t, http.MethodPut, url, stockBody(many[:StockMaxItems]...)); r.status != http.StatusNoContent {
		t.Errorf("1000 items: %d", r.status)
	}
}

func TestWBStocksConflict(t *testing.T) {
	s, base, clk := newWBStock(t)
	addStockCards(s, 11, 12, 13)
	s.SetStock(7001, 11, 1)
	s.RefuseStock(7001, 13, "CargoWarehouseRestrictionMGT", "The selected warehouse is not suitable")
	url := base + "/api/v3/stocks/7001"
	r := wbDo(t, http.MethodPut, url, stockBody([2]int64{11, 7}, [2]int64{12, 100001}, [2]int64{99, 4}, [2]int64{13, 2}))
	if r.status != http.StatusConflict {
		t.Fatalf("%d %s, want 409", r.status, r.body)
	}
	var got []struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Data    []struct {
			Sku    string `json:"sku"`
			ChrtID int64  `json:"chrtId"`
			Amount int64  `json:"amount"`
		} `json:"data"`
	}
	wbDecode(t, r.body, &got)
	codes := map[string]int64{}
	for _, c := range got {
		if len(c.Data) != 1 || c.Message == "" {
			t.Errorf("conflict %+v: want one item and a message", c)
			continue
		}
		codes[c.Code] = c.Data[0].ChrtID
	}
	want := map[string]int64{"UploadDataLimit": 12, "NotFound": 99, "CargoWarehouseRestrictionMGT": 13}
	if fmt.Sprint(codes) != fmt.Sprint(want) {
		t.Errorf("conflicts %s, want %v", r.body, want)
	}
	if got[0].Data[0].Sku != "BC12" || got[0].Data[0].Amount != 100001 {
		t.Errorf("data %+v: want the barcode and the amount", got[0].Data[0])
	}
	if a, _ := s.StockAmount(7001, 11); a != 1 {
		t.Errorf("a 409 wrote chrtId 11: %d", a)
	}
	// A 409 counts as 10 requests: 1 + 9 more of the burst of 20, so 10 are left.
	for i := range 10 {
		if r := wbDo(t, http.MethodPost, url, `{"chrtIds":[11]}`); r.status != http.StatusOK {
			t.Fatalf("read %d after the 409: %d", i+1, r.status)
		}
	}
	if r := wbDo(t, http.MethodPost, url, `{"chrtIds":[11]}`); r.status != http.StatusTooManyRequests {
		t.Fatalf("read 11 after the 409: %d, want 429", r.status)
	}
	clk.Advance(time.Second)
	if r := wbDo(t, http.MethodPost, url, `{"chrtIds":[11]}`); r.status != http.StatusOK {
		t.Fatalf("a second later: %d", r.status)
	}
}

func TestWBStocksRateLimit(t *testing.T) {
	s, base, clk := newWBStock(t)
	addStockCards(s, 11)
	url := base + "/api/v3/stocks/7001"
	for i := range StockBurst {
		if r := wbDo(t, http.MethodPut, url, stockBody([2]int64{11, int64(i)})); r.status != http.StatusNoContent {
			t.Fatalf("request %d of the burst: %d", i+1, r.status)
		}
	}
	r := wbDo(t, http.MethodPut, url, stockBody([2]int64{11, 99}))
	if r.status != http.StatusTooManyRequests {
		t.Fatalf("beyond the burst: %d", r.status)
	}
	if r.header.Get("X-Ratelimit-Retry") != "1" || r.header.Get("X-Ratelimit-Limit") != "20" || r.header.Get("X-Ratelimit-Remaining") != "0" {
		t.Errorf("429 headers: %v", r.header)
	}
	if a, _ := s.StockAmount(7001, 11); a != StockBurst-1 {
		t.Errorf("a 429 wrote: %d", a)
	}
	// One every 200 ms is the rate.
	for i := range 5 {
		clk.Advance(200 * time.Millisecond)
		if r := wbDo(t, http.MethodPost, url, `{"chrtIds":[11]}`); r.status != http.StatusOK {
			t.Fatalf("paced request %d: %d", i+1, r.status)
		}
	}
	clk.Advance(100 * time.Millisecond)
	if r := wbDo(t, http.MethodPost, url, `{"chrtIds":[11]}`); r.status != http.StatusTooManyRequests {
		t.Fatalf("100 ms after the last: %d, want 429", r.status)
	}
	st, v := s.StockStats(), s.Violations()
	if st.Limited != 2 || len(v) != 2 || v[0].Rule != RuleRate || v[1].Op != OpStocksGet {
		t.Errorf("stats %+v, violations %+v", st, v)
	}
	s.SetStockLimit(0, 0)
	for range 50 {
		if r := wbDo(t, http.MethodPost, url, `{"chrtIds":[11]}`); r.status != http.StatusOK {
			t.Fatalf("without a limit: %d", r.status)
		}
	}
}

func TestWBStocksDroppedWrite(t *testing.T) {
	s, base, _ := newWBStock(t)
	addStockCards(s, 11, 12)
	s.SetStock(7001, 12, 4)
	s.DropStockWrites(12)
	url := base + "/api/v3/stocks/7001"
	if r := wbDo(t, http.MethodPut, url, stockBody([2]int64{11, 5}, [2]int64{12, 6})); r.status != http.StatusNoContent {
		t.Fatalf("PUT: %d", r.status)
	}
	if got := s.StockAmounts(7001); got[11] != 5 || got[12] != 4 {
		t.Errorf("amounts %v: want 11 written, 12 kept at 4", got)
	}
	s.ClearStockDrops()
	wbDo(t, http.MethodPut, url, stockBody([2]int64{12, 6}))
	if a, _ := s.StockAmount(7001, 12); a != 6 {
		t.Errorf("after ClearStockDrops: %d", a)
	}
	if st := s.StockStats(); st.Dropped != 1 || st.Written != 2 {
		t.Errorf("stats %+v", st)
	}
}

func TestWBStocksFaultsAndAuth(t *testing.T) {
	s, base, _ := newWBStock(t)
	url := base + "/api/v3/stocks/7001"
	s.Faults.Add(1, sim.Fault{Op: OpStocksUpdate, Status: http.StatusInternalServerError})
	if r := wbDo(t, http.MethodPut, url, stockBody([2]int64{11, 5})); r.status != http.StatusInternalServerError {
		t.Errorf("injected: %d", r.status)
	}
	if r := wbDo(t, http.MethodPut, url, stockBody([2]int64{11, 5}), "wrong"); r.status != http.StatusUnauthorized {
		t.Errorf("wrong token: %d", r.status)
	}
	if n := len(s.RequestsOf(OpStocksUpdate)); n != 2 {
		t.Errorf("%d requests recorded", n)
	}
}
