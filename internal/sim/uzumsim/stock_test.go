package uzumsim_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/ordersync/ordersync/internal/sim/uzumsim"
)

// TestStockBarcodeMustMatchExactly: a barcode sent with its leading zero sets the
// amount; the same number without it (the product card's) sets nothing and is a
// violation.
func TestStockBarcodeMustMatchExactly(t *testing.T) {
	t.Parallel()
	s := uzumsim.New(uzumsim.Options{Token: "k", SKUs: []uzumsim.SKU{{SkuID: 7, Barcode: "0460123456789", Amount: 3}}})
	if err := s.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	post := func(body string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, s.URL()+"/v2/fbs/sku/stocks", strings.NewReader(body))
		req.Header.Set("Authorization", "k")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	post(`{"skuAmountList":[{"skuId":7,"barcode":460123456789,"amount":9}]}`)
	post(`{"skuAmountList":[{"skuId":7,"barcode":"460123456789","amount":9}]}`)
	if got := s.Stocks()["0460123456789"]; got != 3 || s.Violations() != 2 || s.StockSets() != 0 {
		t.Fatalf("amount %d, violations %d, sets %d: want 3, 2, 0", got, s.Violations(), s.StockSets())
	}
	post(`{"skuAmountList":[{"skuId":7,"barcode":"0460123456789","amount":9}]}`)
	if got := s.Stocks()["0460123456789"]; got != 9 || s.Violations() != 2 || s.StockSets() != 1 {
		t.Fatalf("amount %d, violations %d, sets %d: want 9, 2, 1", got, s.Violations(), s.StockSets())
	}
	req, _ := http.NewRequest(http.MethodGet, s.URL()+"/v2/fbs/sku/stocks", nil)
	req.Header.Set("Authorization", "k")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got struct {
		Payload struct {
			SkuAmountList []struct {
				SkuID   int64  `json:"skuId"`
				Barcode string `json:"barcode"`
				Amount  int64  `json:"amount"`
			} `json:"skuAmountList"`
		} `json:"payload"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	if l := got.Payload.SkuAmountList; len(l) != 1 || l[0].Barcode != "0460123456789" || l[0].Amount != 9 || l[0].SkuID != 7 {
		t.Fatalf("listed %+v", l)
	}
}
