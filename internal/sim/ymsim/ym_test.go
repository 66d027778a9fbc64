package ymsim_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/ordersync/ordersync/internal/sim/ymsim"
)

const (
	key      = "ym-key"
	business = 777
	campaign = 21000
)

func start(t *testing.T, opts ymsim.Options) *ymsim.YM {
	t.Helper()
	opts.APIKey, opts.BusinessID, opts.Campaigns = key, business, []int64{campaign}
	s := ymsim.New(opts)
	if err := s.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func call(t *testing.T, s *ymsim.YM, method, path, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, s.URL()+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Api-Key", key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

func TestSwappedIDsAnswerEmpty(t *testing.T) {
	t.Parallel()
	s := start(t, ymsim.Options{})
	s.AddOrder(ymsim.Order{ID: 1, CampaignID: campaign, CreationDate: time.Now(),
		Items: []ymsim.Item{{OfferID: "A", Count: 1, Price: decimal.NewFromInt(10)}}})
	for _, tc := range []struct {
		method, path string
		want         int
	}{
		{"GET", "/v2/campaigns/21000/orders", 1},
		{"GET", "/v2/campaigns/777/orders", 0},
		{"POST", "/v1/businesses/777/orders", 1},
		{"POST", "/v1/businesses/21000/orders", 0},
	} {
		st, out := call(t, s, tc.method, tc.path, `{}`)
		if orders, _ := out["orders"].([]any); st != 200 || len(orders) != tc.want {
			t.Errorf("%s %s: HTTP %d, %d orders; want 200 and %d", tc.method, tc.path, st, len(orders), tc.want)
		}
	}
	if st, _ := call(t, s, "GET", "/v2/campaigns/777", ""); st != http.StatusForbidden {
		t.Errorf("an unknown campaign: HTTP %d, want 403", st)
	}
}

func TestExternalIDThenStatusOnce(t *testing.T) {
	t.Parallel()
	s := start(t, ymsim.Options{})
	s.AddOrder(ymsim.Order{ID: 5, CampaignID: campaign, CreationDate: time.Now()})
	ready := `{"order":{"status":"PROCESSING","substatus":"READY_TO_SHIP"}}`
	if st, _ := call(t, s, "POST", "/v2/campaigns/21000/orders/5/external-id", `{"externalOrderId":"N-1"}`); st != 200 {
		t.Fatalf("external id: HTTP %d", st)
	}
	if st, _ := call(t, s, "POST", "/v2/campaigns/21000/orders/5/external-id", `{"externalOrderId":"N-2"}`); st != 400 {
		t.Fatalf("a second external id: HTTP %d, want 400", st)
	}
	if st, _ := call(t, s, "PUT", "/v2/campaigns/21000/orders/5/status", ready); st != 200 {
		t.Fatalf("status: HTTP %d", st)
	}
	if st, _ := call(t, s, "PUT", "/v2/campaigns/21000/orders/5/status", ready); st != 400 {
		t.Fatalf("a second status: HTTP %d, want 400", st)
	}
	if s.Transitions(5) != 1 || s.RefusedTransitions()[5] != 1 || s.ExternalIDs()[5] != "N-1" || s.RefusedExternalIDs()[5] != 1 {
		t.Fatalf("transitions %d refused %v external ids %v refused %v", s.Transitions(5), s.RefusedTransitions(),
			s.ExternalIDs(), s.RefusedExternalIDs())
	}
}

func TestStocksValidated(t *testing.T) {
	t.Parallel()
	s := start(t, ymsim.Options{})
	for _, body := range []string{
		`{"skus":[]}`,
		`{"skus":[{"sku":"A","items":[{"count":1},{"count":2}]}]}`,
		`{"skus":[{"sku":"A","items":[{"count":1}]},{"sku":"A","items":[{"count":2}]}]}`,
		`{"skus":[{"sku":"A","items":[{"count":1.5}]}]}`,
	} {
		if st, _ := call(t, s, "PUT", "/v2/campaigns/21000/offers/stocks", body); st != 400 {
			t.Errorf("%s: HTTP %d, want 400", body, st)
		}
	}
	if st, _ := call(t, s, "PUT", "/v2/campaigns/21000/offers/stocks",
		`{"skus":[{"sku":"A","items":[{"count":7,"updatedAt":"2026-09-16T10:00:00+03:00"}]}]}`); st != 200 {
		t.Fatalf("a good update: HTTP %d", st)
	}
	if s.BadStockRequests() != 4 || s.Stocks()["A"].Count != 7 {
		t.Fatalf("bad %d stocks %v", s.BadStockRequests(), s.Stocks())
	}
}

func TestRateLimitAnswers420(t *testing.T) {
	t.Parallel()
	s := start(t, ymsim.Options{RateLimit: 2, RateWindow: time.Hour})
	for range 2 {
		if st, _ := call(t, s, "GET", "/v2/campaigns/21000/orders", ""); st != 200 {
			t.Fatalf("within the limit: HTTP %d", st)
		}
	}
	if st, _ := call(t, s, "GET", "/v2/campaigns/21000/orders", ""); st != ymsim.StatusRateLimited {
		t.Fatalf("beyond the limit: HTTP %d, want 420", st)
	}
	if s.Violations() != 1 || s.Throttled() != 1 {
		t.Fatalf("violations %d throttled %d", s.Violations(), s.Throttled())
	}
}
