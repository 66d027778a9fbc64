package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ordersync/ordersync/internal/eventually"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/sim/onecsim"
	"github.com/ordersync/ordersync/internal/sim/ozonsim"
	"github.com/ordersync/ordersync/internal/sim/uzumsim"
	"github.com/ordersync/ordersync/internal/sim/ymsim"
)

// started starts a simulator on loopback and closes it with the test.
func started[S interface {
	Start(string) error
	Close()
}](t *testing.T, s S) S {
	t.Helper()
	if err := s.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// TestSeveralAccountsEachUnderItsOrganisation is the shop that outgrew one account
// per marketplace: two Ozon cabinets of two legal entities, a Yandex Market
// campaign and an Uzum shop, each mapped to its 1C organisation, and a third Ozon
// cabinet that nobody mapped. Every mapped order reaches 1C once, under its
// account's organisation, and is acknowledged once at its marketplace within the
// marketplaces' limits; the unmapped cabinet's orders never reach 1C and say why.
func TestSeveralAccountsEachUnderItsOrganisation(t *testing.T) {
	t.Parallel()
	e := newEnv(t, onecsim.Options{Organizations: []string{"ORG-OOO", "ORG-IP", "ORG-UZ"}}, true)
	ozonOOO := started(t, ozonsim.New(ozonsim.Options{ClientID: "111111", APIKey: "ozon-key-ooo"}))
	ozonIP := started(t, ozonsim.New(ozonsim.Options{ClientID: "222222", APIKey: "ozon-key-ip"}))
	ozonNew := started(t, ozonsim.New(ozonsim.Options{ClientID: "333333", APIKey: "ozon-key-new"}))
	const business, campaign = 3000001, 21000001
	ym := started(t, ymsim.New(ymsim.Options{APIKey: "ym-key", BusinessID: business, Campaigns: []int64{campaign},
		RateLimit: 600, RateWindow: time.Minute}))
	uz := started(t, uzumsim.New(uzumsim.Options{Token: "uzum-key", RatePerSecond: 20}))

	ozonEnv := func(name, url, client, key, wh, org string) []string {
		p := "ORDERSYNC_CONNECTORS__" + strings.ToUpper(name) + "__"
		env := []string{p + "ENABLED=true", p + "BASE_URL=" + url, p + "CLIENT_ID=" + client, p + "API_KEY=" + key,
			p + "WAREHOUSE=" + wh, p + "ACKNOWLEDGE=true", p + "POLL_INTERVAL=200ms", p + "RATE_PER_SECOND=40",
			p + "RETURNS__ENABLED=false"}
		if name != "ozon" {
			env = append(env, p+"TYPE=ozon")
		}
		if org != "" {
			env = append(env, p+"ONEC__ORGANIZATION="+org)
		}
		return env
	}
	e.environ = append(e.environ, ozonEnv("ozon", ozonOOO.URL(), "111111", "ozon-key-ooo", "WH-OOO", "ORG-OOO")...)
	e.environ = append(e.environ, ozonEnv("ozon-ip", ozonIP.URL(), "222222", "ozon-key-ip", "WH-IP", "ORG-IP")...)
	e.environ = append(e.environ, ozonEnv("ozon-new", ozonNew.URL(), "333333", "ozon-key-new", "WH-NEW", "")...)
	e.environ = append(e.environ,
		"ORDERSYNC_CONNECTORS__YANDEX_MARKET__ENABLED=true",
		"ORDERSYNC_CONNECTORS__YANDEX_MARKET__BASE_URL="+ym.URL(),
		"ORDERSYNC_CONNECTORS__YANDEX_MARKET__API_KEY=ym-key",
		"ORDERSYNC_CONNECTORS__YANDEX_MARKET__BUSINESS_ID="+strconv.Itoa(business),
		"ORDERSYNC_CONNECTORS__YANDEX_MARKET__CAMPAIGN_ID="+strconv.Itoa(campaign),
		"ORDERSYNC_CONNECTORS__YANDEX_MARKET__WAREHOUSE=WH-OOO",
		"ORDERSYNC_CONNECTORS__YANDEX_MARKET__ACKNOWLEDGE=true",
		"ORDERSYNC_CONNECTORS__YANDEX_MARKET__POLL_INTERVAL=200ms",
		"ORDERSYNC_CONNECTORS__YANDEX_MARKET__RATE_PER_SECOND=5",
		"ORDERSYNC_CONNECTORS__YANDEX_MARKET__ONEC__ORGANIZATION=ORG-OOO",
		"ORDERSYNC_CONNECTORS__UZUM__ENABLED=true",
		"ORDERSYNC_CONNECTORS__UZUM__BASE_URL="+uz.URL(),
		"ORDERSYNC_CONNECTORS__UZUM__TOKEN=uzum-key",
		"ORDERSYNC_CONNECTORS__UZUM__SHOP_IDS=7001",
		"ORDERSYNC_CONNECTORS__UZUM__WAREHOUSE=WH-UZ",
		"ORDERSYNC_CONNECTORS__UZUM__ACKNOWLEDGE=true",
		"ORDERSYNC_CONNECTORS__UZUM__POLL_INTERVAL=200ms",
		"ORDERSYNC_CONNECTORS__UZUM__RATE_PER_SECOND=5",
		"ORDERSYNC_CONNECTORS__UZUM__ONEC__ORGANIZATION=ORG-UZ",
		"ORDERSYNC_RELAY__POLL_INTERVAL=20ms",
		"ORDERSYNC_RELAY__BACKOFF_MIN=10ms",
		"ORDERSYNC_RELAY__BACKOFF_MAX=50ms",
	)

	now := time.Now().Add(-time.Hour)
	for i := range 3 {
		for _, s := range []*ozonsim.Ozon{ozonOOO, ozonIP, ozonNew} {
			// The same posting numbers at each cabinet: their keys differ by account.
			s.AddPosting(ozonsim.Posting{PostingNumber: fmt.Sprintf("05708065-00%d-1", i), InProcessAt: now,
				Products: []ozonsim.Product{{OfferID: "SKU-2", Name: "Кофе", Quantity: 1, Price: dec("1530.0000")}}})
		}
		ym.AddOrder(ymsim.Order{ID: int64(5100 + i), CampaignID: campaign, CreationDate: now,
			Items: []ymsim.Item{{OfferID: "SKU-4", OfferName: "Чай", Count: 2, Price: dec("499.90")}}})
		uz.AddOrder(uzumsim.Order{ID: int64(9100 + i), ShopID: 7001, Status: "CREATED", DateCreated: now,
			Customer: "Alisher Navoiy", Phone: "998901234567",
			Items: []uzumsim.Item{{SkuTitle: "SKU-5", ProductTitle: "Choynak", Amount: 1, SellerPrice: dec("125000")}}})
	}

	stop := e.runInProcess()
	shipped := func(s *ozonsim.Ozon) (n int) {
		for _, c := range s.Shipments() {
			n += c
		}
		return n
	}
	acknowledged := func() bool {
		for i := range 3 {
			if ym.Transitions(int64(5100+i)) != 1 || uz.Confirms()[int64(9100+i)] != 1 {
				return false
			}
		}
		return shipped(ozonOOO) == 3 && shipped(ozonIP) == 3 && len(ym.ExternalIDs()) == 3
	}
	eventually.True(t, "twelve orders in 1C, each acknowledged once at its marketplace", func() bool {
		return e.onec.Count() == 12 && acknowledged()
	})
	store := e.store()
	refused := func() []journal.Operation {
		ops, err := store.List(context.Background(), journal.Filter{Source: "ozon-new", Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		var out []journal.Operation
		for _, op := range ops {
			if strings.Contains(op.LastError, `"ozon-new"`) && strings.Contains(op.LastError, "connectors.ozon-new.onec.organization") {
				out = append(out, op)
			}
		}
		return out
	}
	eventually.True(t, "the unmapped cabinet's three orders refused, naming the account", func() bool {
		return len(refused()) == 3
	})
	if code := stop(); code != 0 {
		t.Fatalf("run exited %d", code)
	}

	if got, want := e.onec.OrdersByOrganization(), map[string]int{"ORG-OOO": 6, "ORG-IP": 3, "ORG-UZ": 3}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("1C's orders by organisation %v, want %v", got, want)
	}
	for _, o := range e.onec.Orders() {
		if n := e.onec.CountExternal(o.ExternalID); n != 1 {
			t.Errorf("1C holds %d orders for %s, want 1", n, o.ExternalID)
		}
		if strings.HasPrefix(o.ExternalID, "ozon-new:") {
			t.Errorf("1C holds %s of the unmapped cabinet", o.ExternalID)
		}
	}
	for _, want := range []string{"ozon:05708065-001-1", "ozon-ip:05708065-001-1", "ym:5101", "uzum:9101"} {
		if e.onec.CountExternal(want) != 1 {
			t.Errorf("1C lacks %s; it holds %v", want, externalIDs(e.onec.Orders()))
		}
	}
	if n := shipped(ozonNew); n != 0 {
		t.Errorf("the unmapped cabinet's postings were shipped %d times, want none", n)
	}
	if !acknowledged() {
		t.Errorf("acknowledgements: ozon %d, ozon-ip %d, ym external ids %v, uzum %v",
			shipped(ozonOOO), shipped(ozonIP), ym.ExternalIDs(), uz.Confirms())
	}
	if ym.Violations() != 0 || len(ym.RefusedTransitions()) != 0 || len(ym.RefusedExternalIDs()) != 0 {
		t.Errorf("Yandex Market: %d limit violations, refused transitions %v, refused external ids %v",
			ym.Violations(), ym.RefusedTransitions(), ym.RefusedExternalIDs())
	}
	if uz.Violations() != 0 || len(uz.RefusedConfirms()) != 0 || uz.MillisecondQueries() != 0 {
		t.Errorf("Uzum: %d limit violations, refused confirms %v, %d queries in milliseconds",
			uz.Violations(), uz.RefusedConfirms(), uz.MillisecondQueries())
	}
	// A resync names the account: its order is found in 1C, not made twice.
	if out, errOut, code := e.cli("", "resync", "ozon-ip", "05708065-001-1"); code != 0 {
		t.Errorf("resync ozon-ip 05708065-001-1: exit %d\n%s%s", code, out, errOut)
	}
	if n := e.onec.CountExternal("ozon-ip:05708065-001-1"); n != 1 || e.onec.Count() != 12 {
		t.Errorf("after the resync 1C holds %d of ozon-ip:05708065-001-1 and %d in all, want 1 and 12", n, e.onec.Count())
	}
	for _, op := range refused() {
		if op.Status == journal.StatusDone {
			t.Errorf("%s: %s, want it not done", op.Key, op.Status)
		}
	}
}
