package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/order"
)

// TestStockShowSKU: with a reserve of 1 for every account and an order of one
// registered (not yet in 1C), a snapshot of 3 tells Ozon and Wildberries 1, and
// `stock show --sku` says why, per account: 1C's 3, the reserve, the order
// pending by its source, what was published and when, and no reading back (—).
func TestStockShowSKU(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newStockWorld(t, "sqlite", `[]`)
	stockSetEnv(w.env, `ORDERSYNC_STOCK__RESERVE=[{"account":"*","sku":"SKU-0*","quantity":"1"}]`)
	w.onec.SetStock("WH1", item("SKU-001", "3", "100"), item("SKU-002", "5", "100"))
	db := openStockDB(t, w.env)
	o := order.Order{Source: "kaspi", ExternalID: "900", Number: "900", CreatedAt: time.Date(2026, 9, 16, 10, 0, 0, 0, time.UTC),
		Warehouse: "WH1", Currency: "KZT",
		Lines: []order.Line{{SKU: "SKU-001", Name: "x", Quantity: decimal.NewFromInt(1), Price: decimal.NewFromInt(100)}}}
	if reg, err := db.Journal().Register(ctx, journal.CreateOrder(o)); err != nil || reg.Outcome != journal.Registered {
		t.Fatalf("register: %v %v", reg.Outcome, err)
	}

	cliOK(t, w.env, "stock", "snapshot", "--warehouse", "WH1")
	if got, ok := w.ozon.Stock("SKU-001", stockOzonWarehouse); !ok || got != 1 {
		t.Fatalf("Ozon holds %d of SKU-001 (%v), want 3 less the reserve less the order: 1", got, ok)
	}
	if got, ok := w.ozon.Stock("SKU-002", stockOzonWarehouse); !ok || got != 4 {
		t.Fatalf("Ozon holds %d of SKU-002 (%v), want 5 less the reserve: 4", got, ok)
	}

	out := cliOK(t, w.env, "stock", "show", "--sku", "SKU-001")
	wantLine(t, "show --sku", out, `SKU SKU-001`)
	wantLine(t, "show --sku", out, `WH1 +ozon +3 +1 +1 \(kaspi 1\) +1 +1 +\d{4}-\d\d-\d\d \d\d:\d\d:\d\d +—`)
	wantLine(t, "show --sku", out, `WH1 +wildberries +3 +1 +1 \(kaspi 1\) +1 +1 +\d{4}-\d\d-\d\d \d\d:\d\d:\d\d +—`)
	wantLine(t, "show --sku", out, `WH1: 1C's quantity from stock:manual:WH1:\S+, taken by 1C at \S+`)

	var states []struct {
		Account   string          `json:"account"`
		OneC      decimal.Decimal `json:"onec"`
		Reserve   decimal.Decimal `json:"reserve"`
		Pending   decimal.Decimal `json:"pending"`
		Available decimal.Decimal `json:"available"`
		Published *struct {
			Value int64 `json:"value"`
		} `json:"published"`
		ReadBack *int64 `json:"read_back"`
	}
	js := cliOK(t, w.env, "stock", "show", "--sku", "SKU-001", "--format", "json")
	if err := json.Unmarshal([]byte(js), &states); err != nil || len(states) != 2 {
		t.Fatalf("json %s: %v", js, err)
	}
	for _, s := range states {
		if s.OneC.String() != "3" || s.Reserve.String() != "1" || s.Pending.String() != "1" || s.Available.String() != "1" ||
			s.Published == nil || s.Published.Value != 1 || s.ReadBack != nil {
			t.Errorf("%s: %+v", s.Account, s)
		}
	}

	if _, stderr, code := w.env.cli("", "stock", "show", "--sku", "SKU-001", "--at", "2026-09-16"); code == 0 || !strings.Contains(stderr, "--sku") {
		t.Errorf("--sku with --at: exit %d, %s", code, stderr)
	}
}
