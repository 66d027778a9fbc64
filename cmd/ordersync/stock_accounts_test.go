package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ordersync/ordersync/internal/sim/onecsim"
	"github.com/ordersync/ordersync/internal/sim/ozonsim"
	"github.com/ordersync/ordersync/internal/sim/uzumsim"
	"github.com/ordersync/ordersync/internal/sim/ymsim"
)

// TestStockGoesToEveryAccount: one 1C warehouse published to two Ozon cabinets,
// a Yandex Market campaign and an Uzum shop, each as its own target: the second
// cabinet's reserve holds back only its own stock, and Uzum is told by the
// barcode its stock list gives, leading zero and all.
func TestStockGoesToEveryAccount(t *testing.T) {
	t.Parallel()
	e := newEnv(t, onecsim.Options{}, true)
	e.onec.SetStock("WH1", onecsim.StockItem{SKU: "SKU-7", Quantity: dec("5"), Price: dec("1990")})
	first := started(t, ozonsim.New(ozonsim.Options{ClientID: "111111", APIKey: "ozon-key-ooo"}))
	second := started(t, ozonsim.New(ozonsim.Options{ClientID: "222222", APIKey: "ozon-key-ip"}))
	first.AddOffers("SKU-7")
	second.AddOffers("SKU-7")
	const business, campaign = 3000001, 21000001
	ym := started(t, ymsim.New(ymsim.Options{APIKey: "ym-key", BusinessID: business, Campaigns: []int64{campaign}}))
	uz := started(t, uzumsim.New(uzumsim.Options{Token: "uzum-key",
		SKUs: []uzumsim.SKU{{SkuID: 70, Barcode: "0460123456789", SkuTitle: "SKU-7", ProductTitle: "Choynak"}}}))
	skuMap := filepath.Join(t.TempDir(), "sku-map.csv")
	if err := os.WriteFile(skuMap, []byte("uzum,0460123456789,SKU-7\nozon,SKU-7,SKU-7\nym,SKU-7,SKU-7\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ozonEnv := func(name, url, client, key, wh string) []string {
		p := "ORDERSYNC_CONNECTORS__" + strings.ToUpper(name) + "__"
		env := []string{p + "ENABLED=true", p + "BASE_URL=" + url, p + "CLIENT_ID=" + client, p + "API_KEY=" + key,
			p + "WAREHOUSE=WH1", p + "POLL_INTERVAL=1h", p + "TIMEOUT=5s", p + "STOCK_WAREHOUSES=WH1=" + wh}
		if name != "ozon" {
			env = append(env, p+"TYPE=ozon")
		}
		return env
	}
	e.environ = append(e.environ, ozonEnv("ozon", first.URL(), "111111", "ozon-key-ooo", "1020000000001")...)
	e.environ = append(e.environ, ozonEnv("ozon-ip", second.URL(), "222222", "ozon-key-ip", "1020000000002")...)
	e.environ = append(e.environ,
		"ORDERSYNC_CONNECTORS__SKU_MAP="+skuMap,
		"ORDERSYNC_CONNECTORS__YANDEX_MARKET__ENABLED=true",
		"ORDERSYNC_CONNECTORS__YANDEX_MARKET__BASE_URL="+ym.URL(),
		"ORDERSYNC_CONNECTORS__YANDEX_MARKET__API_KEY=ym-key",
		"ORDERSYNC_CONNECTORS__YANDEX_MARKET__CAMPAIGN_ID="+strconv.Itoa(campaign),
		"ORDERSYNC_CONNECTORS__YANDEX_MARKET__WAREHOUSE=WH1",
		"ORDERSYNC_CONNECTORS__YANDEX_MARKET__POLL_INTERVAL=1h",
		"ORDERSYNC_CONNECTORS__YANDEX_MARKET__STOCK_WAREHOUSE=WH1",
		"ORDERSYNC_CONNECTORS__YANDEX_MARKET__TIMEOUT=5s",
		"ORDERSYNC_CONNECTORS__UZUM__ENABLED=true",
		"ORDERSYNC_CONNECTORS__UZUM__BASE_URL="+uz.URL(),
		"ORDERSYNC_CONNECTORS__UZUM__TOKEN=uzum-key",
		"ORDERSYNC_CONNECTORS__UZUM__SHOP_IDS=7001",
		"ORDERSYNC_CONNECTORS__UZUM__WAREHOUSE=WH1",
		"ORDERSYNC_CONNECTORS__UZUM__POLL_INTERVAL=1h",
		"ORDERSYNC_CONNECTORS__UZUM__STOCK_WAREHOUSE=WH1",
		"ORDERSYNC_CONNECTORS__UZUM__TIMEOUT=5s",
		`ORDERSYNC_STOCK__RESERVE=[{"account":"ozon-ip","sku":"SKU-*","quantity":"2"}]`,
		"ORDERSYNC_RELAY__POLL_INTERVAL=50ms",
		"ORDERSYNC_RELAY__LEASE=20s",
	)

	out := cliOK(t, e, "stock", "snapshot", "--warehouse", "WH1")
	for _, want := range []string{"ozon: full publish", "ozon-ip: full publish", "yandex_market: full publish", "uzum: full publish"} {
		if !strings.Contains(out, want) {
			t.Errorf("snapshot output lacks %q:\n%s", want, out)
		}
	}
	if n, ok := first.Stock("SKU-7", 1020000000001); !ok || n != 5 {
		t.Errorf("the first Ozon cabinet holds %d (%v) of SKU-7, want 5", n, ok)
	}
	if n, ok := second.Stock("SKU-7", 1020000000002); !ok || n != 3 {
		t.Errorf("the second Ozon cabinet holds %d (%v) of SKU-7, want 5 less its reserve of 2", n, ok)
	}
	if v := ym.Stocks()["SKU-7"]; v.Count != 5 {
		t.Errorf("Yandex Market holds %d of SKU-7, want 5 (stocks %v)", v.Count, ym.Stocks())
	}
	if n := uz.Stocks()["0460123456789"]; n != 5 {
		t.Errorf("Uzum holds %d of barcode 0460123456789, want 5 (stocks %v)", n, uz.Stocks())
	}
	if uz.Violations() != 0 || ym.Violations() != 0 || ym.BadStockRequests() != 0 || len(first.StockViolations())+len(second.StockViolations()) != 0 {
		t.Errorf("violations: uzum %d, ym %d (bad stock requests %d), ozon %v %v", uz.Violations(), ym.Violations(),
			ym.BadStockRequests(), first.StockViolations(), second.StockViolations())
	}

	// stock show --sku reads Yandex Market's count back.
	show := cliOK(t, e, "stock", "show", "--sku", "SKU-7", "--format", "json")
	if !strings.Contains(show, `"account": "yandex_market"`) || !strings.Contains(show, `"read_back": 5`) {
		t.Errorf("stock show --sku: want yandex_market read back as 5:\n%s", show)
	}
}
