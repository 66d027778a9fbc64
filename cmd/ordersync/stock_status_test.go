package main

import (
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
