package config

import (
	"testing"
	"time"
)

func TestAdminListener(t *testing.T) {
	t.Parallel()
	cfg := mustLoadYAML(t, "")
	if cfg.Admin.Listen != "127.0.0.1:9090" || cfg.Admin.PProf || cfg.OneC.PingInterval != 15*time.Second {
		t.Fatalf("defaults: admin %+v, onec.ping_interval %s; want 127.0.0.1:9090, pprof off, 15s", cfg.Admin, cfg.OneC.PingInterval)
	}
	cfg = mustLoadYAML(t, "admin:\n  listen: \"\"\n  pprof: true\nonec:\n  ping_interval: 2s\n")
	if cfg.Admin.Listen != "" || !cfg.Admin.PProf || cfg.OneC.PingInterval != 2*time.Second {
		t.Fatalf("from the file: admin %+v, onec.ping_interval %s", cfg.Admin, cfg.OneC.PingInterval)
	}
	cfg = mustLoadYAML(t, "", "ORDERSYNC_ADMIN__LISTEN=[::1]:9191", "ORDERSYNC_ADMIN__PPROF=true", "ORDERSYNC_ONEC__PING_INTERVAL=500ms")
	if cfg.Admin.Listen != "[::1]:9191" || !cfg.Admin.PProf || cfg.OneC.PingInterval != 500*time.Millisecond {
		t.Fatalf("from the environment: admin %+v, onec.ping_interval %s", cfg.Admin, cfg.OneC.PingInterval)
	}
	// Two servers on one port would not both start; port 0 picks a free one each.
	for _, ok := range []string{
		"http:\n  listen: 127.0.0.1:8080\nadmin:\n  listen: 127.0.0.1:0\n",
		"http:\n  listen: 127.0.0.1:0\nadmin:\n  listen: 127.0.0.1:0\n",
		"http:\n  listen: 127.0.0.1:9090\nadmin:\n  listen: 10.0.0.5:9090\n",
		"http:\n  listen: \"\"\nadmin:\n  listen: 127.0.0.1:8080\n",
	} {
		if _, err := loadYAML(t, ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, tc := range []struct{ src, key, msg string }{
		{"admin:\n  listen: \"9090\"\n", "admin.listen", "must be host:port"},
		{"admin:\n  listen: 127.0.0.1:99999\n", "admin.listen", "port from 0 to 65535"},
		{"admin:\n  listen: 127.0.0.1:8080\n", "admin.listen", "must differ from http.listen (127.0.0.1:8080)"},
		{"http:\n  listen: :8080\nadmin:\n  listen: 127.0.0.1:8080\n", "admin.listen", "must differ from http.listen"},
		{"admin:\n  pprof: yes please\n", "admin.pprof", ""},
		{"onec:\n  ping_interval: 0s\n", "onec.ping_interval", "must be greater than 0, got 0s"},
		{"onec:\n  ping_interval: -1s\n", "onec.ping_interval", "must be greater than 0"},
	} {
		_, err := loadYAML(t, tc.src)
		wantProblem(t, err, tc.key, tc.msg)
	}
}
