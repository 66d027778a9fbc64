package main

import (
	"testing"
	"time"

	"github.com/ordersync/ordersync/internal/eventually"
	"github.com/ordersync/ordersync/internal/sim/bitrix24sim"
	"github.com/ordersync/ordersync/internal/sim/onecsim"
)

// TestASecondBitrix24PortalIsAnAccount: a further portal, connectors.b24-kz with
// type bitrix24, has its own endpoint, token, keys and 1C organisation beside
// webhooks.bitrix24; the same deal id at each is two orders, each once.
func TestASecondBitrix24PortalIsAnAccount(t *testing.T) {
	t.Parallel()
	e := newEnv(t, onecsim.Options{Organizations: []string{"ORG-RU", "ORG-KZ"}}, true)
	first := started(t, bitrix24sim.New(bitrix24sim.Options{UserID: "1", Code: "c0de-first"}))
	second := started(t, bitrix24sim.New(bitrix24sim.Options{UserID: "7", Code: "c0de-second"}))
	for _, s := range []*bitrix24sim.Bitrix24{first, second} {
		s.AddDeal(bitrix24sim.Deal{ID: "42", Title: "Заказ", StageID: "WON", CurrencyID: "KZT", DateCreate: time.Now().Add(-time.Hour),
			Rows: []bitrix24sim.Row{{ProductID: 101, ProductName: "Чайник", Price: dec("1500.10"), Quantity: dec("2")}}})
	}
	e.environ = append(e.environ,
		"ORDERSYNC_WEBHOOKS__BITRIX24__ENABLED=true",
		"ORDERSYNC_WEBHOOKS__BITRIX24__APPLICATION_TOKEN=token-first",
		"ORDERSYNC_WEBHOOKS__BITRIX24__REST_URL="+first.RESTURL(first.URL()),
		"ORDERSYNC_WEBHOOKS__BITRIX24__WAREHOUSE=WH1",
		"ORDERSYNC_WEBHOOKS__BITRIX24__SKU_FIELD=product_id",
		"ORDERSYNC_WEBHOOKS__BITRIX24__RATE_PER_SECOND=50",
		"ORDERSYNC_WEBHOOKS__BITRIX24__ONEC__ORGANIZATION=ORG-RU",
		"ORDERSYNC_CONNECTORS__B24-KZ__TYPE=bitrix24",
		"ORDERSYNC_CONNECTORS__B24-KZ__ENABLED=true",
		"ORDERSYNC_CONNECTORS__B24-KZ__APPLICATION_TOKEN=token-second",
		"ORDERSYNC_CONNECTORS__B24-KZ__REST_URL="+second.RESTURL(second.URL()),
		"ORDERSYNC_CONNECTORS__B24-KZ__WAREHOUSE=WH2",
		"ORDERSYNC_CONNECTORS__B24-KZ__SKU_FIELD=product_id",
		"ORDERSYNC_CONNECTORS__B24-KZ__RATE_PER_SECOND=50",
		"ORDERSYNC_CONNECTORS__B24-KZ__ONEC__ORGANIZATION=ORG-KZ",
	)
	_, log := e.runWithLog()
	base := webhooksURL(t, log) + "/webhooks/"
	send := func(path string, s *bitrix24sim.Bitrix24, token string) int {
		st, _ := post(t, base+path, "application/x-www-form-urlencoded", nil,
			[]byte(s.OutgoingForm("ONCRMDEALADD", "42", time.Now(), token).Encode()))
		return st
	}
	if st := send("b24-kz", second, "token-first"); st != 401 {
		t.Fatalf("the first portal's token at the second's endpoint: %d, want 401", st)
	}
	if st := send("b24-kz", second, "token-second"); st != 200 {
		t.Fatalf("the second portal's deal: %d", st)
	}
	if st := send("bitrix24", first, "token-first"); st != 200 {
		t.Fatalf("the first portal's deal: %d", st)
	}
	eventually.True(t, "bitrix24:42 and b24-kz:42 in 1C", func() bool {
		return e.onec.CountExternal("bitrix24:42") == 1 && e.onec.CountExternal("b24-kz:42") == 1
	})
	if got := e.onec.OrdersByOrganization(); got["ORG-RU"] != 1 || got["ORG-KZ"] != 1 || len(got) != 2 {
		t.Errorf("1C's orders by organisation %v, want one under each portal's", got)
	}
}
