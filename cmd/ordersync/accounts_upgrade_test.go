package main

import (
	"context"
	"testing"
	"time"

	"github.com/ordersync/ordersync/internal/eventually"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/sim/onecsim"
	"github.com/ordersync/ordersync/internal/sim/wbsim"
)

// TestAddingAnAccountKeepsTheFirstAccountsKeys is the upgrade of a shop that ran
// one Wildberries account under today's configuration (connectors.wildberries, no
// type) and adds a second one: the first account's journal, keys (wb:order:…) and
// cursor keep their meaning, its orders are not registered or created again, and
// the second account's orders of the same ids are its own.
func TestAddingAnAccountKeepsTheFirstAccountsKeys(t *testing.T) {
	t.Parallel()
	e := newEnv(t, onecsim.Options{}, true)
	first := started(t, wbsim.New(wbsim.Options{Token: "wb-token"}))
	second := started(t, wbsim.New(wbsim.Options{Token: "wb-token-kz"}))
	now := time.Now().Add(-time.Hour)
	for i := range 2 {
		for _, s := range []*wbsim.Wildberries{first, second} {
			s.AddOrder(wbsim.Order{ID: int64(4400 + i), Article: "SKU-3", ConvertedPrice: 153099, ConvertedCurrencyCode: 643,
				Price: 153099, CurrencyCode: 643, CreatedAt: now})
		}
	}
	e.environ = append(e.environ,
		"ORDERSYNC_CONNECTORS__WILDBERRIES__ENABLED=true",
		"ORDERSYNC_CONNECTORS__WILDBERRIES__BASE_URL="+first.URL(),
		"ORDERSYNC_CONNECTORS__WILDBERRIES__RETURNS__ENABLED=false",
		"ORDERSYNC_CONNECTORS__WILDBERRIES__TOKEN=wb-token",
		"ORDERSYNC_CONNECTORS__WILDBERRIES__WAREHOUSE=WH3",
		"ORDERSYNC_CONNECTORS__WILDBERRIES__POLL_INTERVAL=200ms",
		"ORDERSYNC_CONNECTORS__WILDBERRIES__RATE_PER_SECOND=100",
	)
	stop := e.runInProcess()
	eventually.True(t, "the first account's two orders in 1C", func() bool { return e.onec.Count() == 2 })
	if code := stop(); code != 0 {
		t.Fatalf("run exited %d", code)
	}
	store := e.store()
	before, err := store.List(context.Background(), journal.Filter{Source: "wb", Limit: 100})
	if err != nil || len(before) != 2 {
		t.Fatalf("the first account's journal: %d operations, %v; want 2", len(before), err)
	}

	// The second account, named as the operator chose, with its own credentials.
	lists := len(first.RequestsOf(wbsim.OpNew))
	e.environ = append(e.environ,
		"ORDERSYNC_CONNECTORS__WB-KZ__TYPE=wildberries",
		"ORDERSYNC_CONNECTORS__WB-KZ__ENABLED=true",
		"ORDERSYNC_CONNECTORS__WB-KZ__BASE_URL="+second.URL(),
		"ORDERSYNC_CONNECTORS__WB-KZ__RETURNS__ENABLED=false",
		"ORDERSYNC_CONNECTORS__WB-KZ__TOKEN=wb-token-kz",
		"ORDERSYNC_CONNECTORS__WB-KZ__WAREHOUSE=WH4",
		"ORDERSYNC_CONNECTORS__WB-KZ__POLL_INTERVAL=200ms",
		"ORDERSYNC_CONNECTORS__WB-KZ__RATE_PER_SECOND=100",
	)
	stop = e.runInProcess()
	eventually.True(t, "the second account's two orders in 1C and the first account listed again", func() bool {
		return e.onec.Count() == 4 && len(first.RequestsOf(wbsim.OpNew)) >= lists+2
	})
	if code := stop(); code != 0 {
		t.Fatalf("second run exited %d", code)
	}
	for _, id := range []string{"wb:4400", "wb:4401", "wb-kz:4400", "wb-kz:4401"} {
		if n := e.onec.CountExternal(id); n != 1 {
			t.Errorf("1C holds %d orders %s, want 1 (it holds %v)", n, id, externalIDs(e.onec.Orders()))
		}
	}
	after, err := store.List(context.Background(), journal.Filter{Source: "wb", Limit: 100})
	if err != nil || len(after) != 2 {
		t.Fatalf("the first account's journal after the upgrade: %d operations, %v; want the same 2", len(after), err)
	}
	for i, op := range after {
		if op.Key != before[i].Key || op.Attempts != before[i].Attempts || op.Status != journal.StatusDone {
			t.Errorf("%s: %s after %d attempts, was %s %s after %d", op.Key, op.Status, op.Attempts,
				before[i].Key, before[i].Status, before[i].Attempts)
		}
	}
	if kz, _ := store.List(context.Background(), journal.Filter{Source: "wb-kz", Limit: 100}); len(kz) != 2 ||
		kz[0].Key[:len("wb-kz:order:")] != "wb-kz:order:" {
		t.Errorf("the second account's journal: %+v, want two wb-kz:order:… operations", kz)
	}
}
