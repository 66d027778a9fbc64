package main

import (
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/ordersync/ordersync/internal/eventually"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/sim/onecsim"
)

// freeAddr is a loopback address no one listens on now, for a listener whose
// address a command must read from the configuration.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

type serviceStatusJSON struct {
	Service struct {
		Admin          string
		Running, Ready bool
	}
	OneC       string `json:"onec"`
	Operations *struct {
		Pending, Failed, Done int64
		WithWarnings          int `json:"with_warnings"`
		Oldest                *struct {
			Key string
		} `json:"oldest_pending"`
	}
	Outbox    *struct{ Pending, Dead int }
	Stock     *struct{ Key string } `json:"last_stock_snapshot"`
	Attention []string
}

// ordersync status: the service's state in one screen, exit 0 when all is well and
// 3 when something needs attention, naming each thing.
func TestStatus(t *testing.T) {
	t.Parallel()
	e := newEnvOn(t, "sqlite", onecsim.Options{}, true)
	adminAddr := freeAddr(t)
	stockSetEnv(e, "ORDERSYNC_ADMIN__LISTEN="+adminAddr, "ORDERSYNC_ONEC__PING_INTERVAL=100ms")
	status := func() (serviceStatusJSON, int) {
		t.Helper()
		out, stderr, code := e.cli("", "status", "--format", "json")
		var s serviceStatusJSON
		if err := json.Unmarshal([]byte(out), &s); err != nil {
			t.Fatalf("status --format json: exit %d, %v:\n%s%s", code, err, out, stderr)
		}
		return s, code
	}
	// table is the table, which exits as --format json did (want).
	table := func(want int) string {
		t.Helper()
		out, stderr, code := e.cli("", "status")
		if code != want {
			t.Errorf("status exits %d (stderr %q), with --format json %d", code, stderr, want)
		}
		return out
	}

	// 1. The service is not running.
	s, code := status()
	if code != exitAttention || s.Service.Running || s.OneC != "unknown" || len(s.Attention) != 1 ||
		!strings.Contains(s.Attention[0], "does not answer") || s.Operations == nil || s.Operations.Pending != 0 {
		t.Errorf("status with no service: exit %d %+v", code, s)
	}
	wantLine(t, "status with no service", table(code), `service\s+not running \(http://`+adminAddr+` does not answer\)`)

	// 2. Running and ready, 1C up, nothing pending: exit 0.
	svc := e.startService()
	eventually.True(t, "status says the service is ready", func() bool {
		s, code = status()
		return code == 0
	})
	if !s.Service.Running || !s.Service.Ready || s.OneC != "up" || len(s.Attention) != 0 || s.Stock != nil {
		t.Errorf("status of a ready service: %+v", s)
	}
	out := table(0)
	for _, l := range []string{`service\s+running, ready \(http://` + adminAddr + `\)`, `1C\s+up`, `operations\s+0 pending, 0 failed, 0 done, 0 with warnings`,
		`outbox\s+0 pending, 0 dead`, `last stock snapshot\s+none yet`, `Everything is fine\.`} {
		wantLine(t, "status of a ready service", out, l)
	}

	// 3. An order 1C refuses fails: exit 3 naming the failed operations.
	e.onec.SetKnownSKUs([]string{"SKU-1"})
	if _, stderr, code := e.cli(orderJSON("S-1", "SKU-1", "1", "100")+"\n"+orderJSON("S-2", "NOPE", "1", "100")+"\n", "order", "import"); code != 0 && code != 1 {
		t.Fatalf("order import: exit %d: %s", code, stderr)
	}
	store := e.store()
	eventually.True(t, "one done, one failed", func() bool {
		return countStatus(t, store, journal.StatusDone) == 1 && countStatus(t, store, journal.StatusFailed) == 1
	})
	s, code = status()
	if code != exitAttention || s.Operations.Failed != 1 || s.Operations.Done != 1 || len(s.Attention) != 1 || !strings.Contains(s.Attention[0], "1 operations failed") {
		t.Errorf("status with a failed operation: exit %d %+v", code, s)
	}
	wantLine(t, "status with a failed operation", table(exitAttention), `  - 1 operations failed: ordersync journal list --status failed`)

	// 4. 1C goes down; orders wait: 1C down, the oldest pending named.
	if err := e.onec.Down(); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, stderr, code := e.cli(orderJSON(fmt.Sprintf("P-%d", i), "SKU-1", "1", "100")+"\n", "order", "import"); code > 1 {
			t.Fatalf("order import: exit %d: %s", code, stderr)
		}
	}
	eventually.True(t, "status says 1C is down and three operations pend", func() bool {
		s, code = status()
		return s.OneC == "down" && s.Operations.Pending == 3
	})
	if code != exitAttention || s.Operations.Oldest == nil || s.Operations.Oldest.Key != "site:order:P-0:create" ||
		!strings.Contains(strings.Join(s.Attention, "\n"), "1C does not answer") {
		t.Errorf("status with 1C down: exit %d %+v", code, s)
	}
	out = table(exitAttention)
	wantLine(t, "status with 1C down", out, `1C\s+down: .*`)
	wantLine(t, "status with 1C down", out, `oldest pending\s+site:order:P-0:create, registered .*`)
	if err := e.onec.Up(); err != nil {
		t.Fatal(err)
	}
	_ = svc
}
