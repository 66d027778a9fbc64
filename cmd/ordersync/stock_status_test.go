package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ordersync/ordersync/internal/sim/onecsim"
)

// On a journal that sent nothing, stock status says nothing was sent, not that
// everything sent was published.
func TestStockStatusWhenNothingWasSent(t *testing.T) {
	t.Parallel()
	e := newEnvOn(t, "sqlite", onecsim.Options{}, true)
	out, stderr, code := e.cli("", "stock", "status")
	if code != 0 {
		t.Fatalf("stock status: exit %d: %s", code, stderr)
	}
	if strings.Contains(out, "Every item sent was published") || !strings.Contains(out, "Nothing has been sent to a marketplace yet") {
		t.Fatalf("stock status on an empty journal:\n%s", out)
	}
}

// sim onec --help lists every control endpoint and every fault kind.
func TestSimOneCHelpListsItsControls(t *testing.T) {
	t.Parallel()
	e := newEnvOn(t, "sqlite", onecsim.Options{}, false)
	out, _, code := e.cli("", "sim", "onec", "--help")
	if code != 0 {
		t.Fatalf("sim onec --help: exit %d", code)
	}
	for _, want := range append([]string{"/_sim/orders", "/_sim/stats", "/_sim/faults", "/_sim/latency", "/_sim/known_skus",
		"/_sim/stock", "/_sim/expire_sessions", "/_sim/missing", "/_sim/down", `"kind":`, `"times":`}, onecsim.FaultNames()...) {
		if !strings.Contains(out, want) {
			t.Errorf("sim onec --help does not name %s", want)
		}
	}
}

// stock status lists the items the Kaspi feed leaves out for want of a line in the
// SKU map, as it lists Ozon's and Wildberries' skipped items.
func TestStockStatusListsItemsTheKaspiFeedLeavesOut(t *testing.T) {
	t.Parallel()
	e := newEnvOn(t, "sqlite", onecsim.Options{}, true)
	dir := t.TempDir()
	skuMap := filepath.Join(dir, "sku-map.csv")
	if err := os.WriteFile(skuMap, []byte("marketplace,marketplace_sku,onec_sku\nkaspi,K-1,SKU-1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	token := filepath.Join(dir, "kaspi-feed-token")
	if err := os.WriteFile(token, []byte("feedT0ken-s3cret-0123456789abcdef"), 0o600); err != nil {
		t.Fatal(err)
	}
	stockSetEnv(e,
		"ORDERSYNC_CONNECTORS__SKU_MAP="+skuMap,
		"ORDERSYNC_CONNECTORS__KASPI__ENABLED=true",
		"ORDERSYNC_CONNECTORS__KASPI__TOKEN=kaspi-api-secret",
		"ORDERSYNC_CONNECTORS__KASPI__WAREHOUSE=WH1",
		"ORDERSYNC_CONNECTORS__KASPI__STORES=WH1=PP1",
		"ORDERSYNC_CONNECTORS__KASPI__FEED_TOKEN_FILE="+token,
		"ORDERSYNC_CONNECTORS__KASPI__COMPANY=Магазин",
		"ORDERSYNC_CONNECTORS__KASPI__MERCHANT_ID=30000001",
	)
	e.onec.SetStock("WH1", item("SKU-1", "5", "100"), item("SKU-2", "3", "200"), item("SKU-3", "1", "50"))
	if out, stderr, code := e.cli("", "stock", "snapshot", "--warehouse", "WH1"); code != 0 {
		t.Fatalf("stock snapshot: exit %d\n%s%s", code, out, stderr)
	}

	out := cliOK(t, e, "stock", "status")
	for _, sku := range []string{"SKU-2", "SKU-3"} {
		wantLine(t, "stock status", out, `kaspi\s+WH1\s+`+sku+`\s+.*skipped\s+no line for kaspi in connectors\.sku_map.*`)
	}
	if strings.Contains(out, "Every item sent was published") || hasLine(out, `kaspi\s+WH1\s+SKU-1\s+.*skipped.*`) {
		t.Errorf("stock status:\n%s", out)
	}
	var st struct {
		Problems []struct {
			Marketplace, Warehouse, SKU, Outcome, Reason, Snapshot string
			Value                                                  int64
		} `json:"problems"`
	}
	if err := json.Unmarshal([]byte(cliOK(t, e, "stock", "status", "--format", "json")), &st); err != nil {
		t.Fatal(err)
	}
	var kaspi []string
	for _, p := range st.Problems {
		if p.Marketplace == "kaspi" && p.Outcome == "skipped" && p.Snapshot != "" && strings.Contains(p.Reason, "kaspi,<kaspi SKU>,"+p.SKU) {
			kaspi = append(kaspi, fmt.Sprintf("%s %s %d", p.Warehouse, p.SKU, p.Value))
		}
	}
	if want := []string{"WH1 SKU-2 3", "WH1 SKU-3 1"}; !slices.Equal(kaspi, want) {
		t.Errorf("stock status --format json: Kaspi's skipped items %q, want %q (%+v)", kaspi, want, st.Problems)
	}
	if out := cliOK(t, e, "stock", "status", "--limit", "1"); strings.Count(out, "no line for kaspi") != 1 {
		t.Errorf("stock status --limit 1 lists more than one item:\n%s", out)
	}
}
