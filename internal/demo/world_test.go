package demo

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestDemoServiceEnvKeepsTheCallersConfigurationOut: nothing of the caller's
// ORDERSYNC_ variables or STATE_DIRECTORY reaches the service, so the demo never
// touches a real database or 1C base; the rest of the environment does. On either
// interface the service is pointed at the simulated 1C, and its stock schedule at
// the warehouse the simulator holds the stock in.
func TestDemoServiceEnvKeepsTheCallersConfigurationOut(t *testing.T) {
	for _, iface := range Interfaces {
		t.Run(iface, func(t *testing.T) {
			one, err := newOneC(iface, demoSKUs, demoSources)
			if err != nil {
				t.Fatal(err)
			}
			s, err := startSims(one)
			if err != nil {
				t.Fatal(err)
			}
			defer s.close()
			dir := t.TempDir()
			parent := []string{"PATH=/usr/bin", "ORDERSYNC_DATABASE__URL=postgres://prod/ordersync",
				"ORDERSYNC_ONEC__BASE_URL=https://1c.example/trade", "ORDERSYNC_ONEC__INTERFACE=httpservice",
				"STATE_DIRECTORY=/var/lib/ordersync"}
			env := s.serviceEnv(parent, dir)
			if !slices.Contains(env, "PATH=/usr/bin") {
				t.Errorf("PATH did not reach the service: %v", env)
			}
			for _, kv := range env {
				if strings.Contains(kv, "prod") || strings.Contains(kv, "1c.example") || kv == "STATE_DIRECTORY=/var/lib/ordersync" {
					t.Errorf("the caller's %s reached the service", kv)
				}
				if strings.HasPrefix(kv, "ORDERSYNC_DATABASE__") {
					t.Errorf("the service is given a database (%s), not the embedded file", kv)
				}
			}
			want := []string{"STATE_DIRECTORY=" + dir, "ORDERSYNC_ONEC__USERNAME=" + oneCUser}
			switch o := one.(type) {
			case *serviceOneC:
				want = append(want, "ORDERSYNC_ONEC__BASE_URL="+o.sim.URL())
			case *odataOneC:
				want = append(want, "ORDERSYNC_ONEC__INTERFACE=odata", "ORDERSYNC_ONEC__BASE_URL="+o.sim.URL(),
					"ORDERSYNC_ONEC__ODATA__WAREHOUSE="+o.base.Warehouse, "ORDERSYNC_ONEC__ODATA__SOURCES__SITE__COUNTERPARTY="+o.base.Sources["site"].Counterparty)
			}
			for _, w := range want {
				if !slices.Contains(env, w) {
					t.Errorf("the service's environment lacks %s", w)
				}
			}
			schedule := `"warehouses":["` + one.warehouse() + `"]`
			if !slices.ContainsFunc(env, func(kv string) bool {
				return strings.HasPrefix(kv, "ORDERSYNC_STOCK__SCHEDULES=") && strings.Contains(kv, schedule)
			}) {
				t.Errorf("the stock schedule does not take %s: %v", schedule, env)
			}
		})
	}
}

// TestDemoLastLogErrorNamesTheLastError: the service's last ERROR record, or a line
// that is not JSON, is what the demo reports when the service exits.
func TestDemoLastLogErrorNamesTheLastError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ordersync.log")
	if got := lastLogError(path, 0); got != "see "+path {
		t.Errorf("no log: %q", got)
	}
	log := `{"level":"INFO","msg":"starting"}
{"level":"ERROR","msg":"1c: create","err":"connection refused"}
{"level":"INFO","msg":"stopping"}
`
	if err := os.WriteFile(path, []byte(log), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, want := lastLogError(path, 0), "1c: create: connection refused"; got != want {
		t.Errorf("lastLogError = %q, want %q", got, want)
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	from := logSize(path)
	f.WriteString("ordersync: config: onec.base_url is required\n")
	f.Close()
	if got, want := lastLogError(path, from), "ordersync: config: onec.base_url is required"; got != want {
		t.Errorf("lastLogError from %d = %q, want %q", from, got, want)
	}
}
