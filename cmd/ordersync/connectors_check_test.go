package main

import (
	"strconv"
	"strings"
	"testing"

	"github.com/ordersync/ordersync/internal/sim/onecsim"
	"github.com/ordersync/ordersync/internal/sim/uzumsim"
	"github.com/ordersync/ordersync/internal/sim/ymsim"
)

// TestConnectorsCheckTellsSwappedIDsApart: Yandex Market answers a swapped
// campaign id with an empty list, so only `connectors check` shows it; an account
// that works says ok.
func TestConnectorsCheckTellsSwappedIDsApart(t *testing.T) {
	t.Parallel()
	e := newEnv(t, onecsim.Options{}, false)
	const business, campaign = 3000001, 21000001
	ym := started(t, ymsim.New(ymsim.Options{APIKey: "ym-key", BusinessID: business, Campaigns: []int64{campaign}}))
	uz := started(t, uzumsim.New(uzumsim.Options{Token: "uzum-key"}))
	e.environ = append(e.environ,
		"ORDERSYNC_CONNECTORS__YANDEX_MARKET__ENABLED=true",
		"ORDERSYNC_CONNECTORS__YANDEX_MARKET__BASE_URL="+ym.URL(),
		"ORDERSYNC_CONNECTORS__YANDEX_MARKET__API_KEY=ym-key",
		"ORDERSYNC_CONNECTORS__YANDEX_MARKET__WAREHOUSE=WH1",
		"ORDERSYNC_CONNECTORS__UZUM__ENABLED=true",
		"ORDERSYNC_CONNECTORS__UZUM__BASE_URL="+uz.URL(),
		"ORDERSYNC_CONNECTORS__UZUM__TOKEN=uzum-key",
		"ORDERSYNC_CONNECTORS__UZUM__SHOP_IDS=7001",
		"ORDERSYNC_CONNECTORS__UZUM__WAREHOUSE=WH2",
	)
	ids := func(b, c int) []string {
		return []string{"ORDERSYNC_CONNECTORS__YANDEX_MARKET__BUSINESS_ID=" + strconv.Itoa(b),
			"ORDERSYNC_CONNECTORS__YANDEX_MARKET__CAMPAIGN_ID=" + strconv.Itoa(c)}
	}
	base := e.environ

	e.environ = append(append([]string{}, base...), ids(business, campaign)...)
	out, errOut, code := e.cli("", "connectors", "check")
	if code != 0 || strings.Count(out, " ok") != 2 {
		t.Fatalf("check with the right ids: exit %d\n%s%s", code, out, errOut)
	}

	e.environ = append(append([]string{}, base...), ids(campaign, business)...)
	out, errOut, code = e.cli("", "connectors", "check", "yandex_market")
	if code != 1 || !strings.Contains(out, "swapped") || !strings.Contains(out, "connectors.yandex_market.campaign_id") {
		t.Fatalf("check with the ids swapped: exit %d, want 1 naming campaign_id as swapped\n%s%s", code, out, errOut)
	}
	if strings.Contains(out, "uzum") {
		t.Errorf("check of yandex_market alone called uzum too:\n%s", out)
	}
}
