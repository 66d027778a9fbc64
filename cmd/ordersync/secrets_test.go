package main

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ordersync/ordersync/internal/config"
	"github.com/ordersync/ordersync/internal/logging"
	"github.com/ordersync/ordersync/internal/sim/onecsim"
)

// Issue 24, item 18: a command reads the secrets it uses and no others, and a
// configuration that fails says each problem once, one a line.

// unreadableSecrets is an environment whose every secret is a file that does not
// exist: the 1C password, Kaspi's token, a webhook source's and a relay
// destination's secrets. It returns the files by key.
func unreadableSecrets(t *testing.T, e *env) ([]string, map[string]string) {
	dir := t.TempDir()
	files := map[string]string{}
	for _, k := range []string{"onec.password", "connectors.kaspi.token", "webhooks.sources.site.secrets", "relay.destinations.crm.secrets"} {
		files[k] = filepath.Join(dir, "missing-"+strings.ReplaceAll(k, ".", "-"))
	}
	var environ []string
	for _, kv := range e.environ {
		if !strings.HasPrefix(kv, "ORDERSYNC_ONEC__PASSWORD=") {
			environ = append(environ, kv)
		}
	}
	environ = append(environ,
		"ORDERSYNC_ONEC__PASSWORD_FILE="+files["onec.password"],
		"ORDERSYNC_CONNECTORS__KASPI__ENABLED=true",
		"ORDERSYNC_CONNECTORS__KASPI__WAREHOUSE=WH1",
		"ORDERSYNC_CONNECTORS__KASPI__BASE_URL=http://127.0.0.1:1/",
		"ORDERSYNC_CONNECTORS__KASPI__TOKEN_FILE="+files["connectors.kaspi.token"],
		"ORDERSYNC_WEBHOOKS__SOURCES__SITE__SECRETS_FILE="+files["webhooks.sources.site.secrets"],
		"ORDERSYNC_RELAY__DESTINATIONS__CRM__TYPE=webhook",
		"ORDERSYNC_RELAY__DESTINATIONS__CRM__URL=http://127.0.0.1:1/hook",
		"ORDERSYNC_RELAY__DESTINATIONS__CRM__EVENTS=order.created",
		"ORDERSYNC_RELAY__DESTINATIONS__CRM__SECRETS_FILE="+files["relay.destinations.crm.secrets"],
	)
	return environ, files
}

func TestADryRunReadsNoSecret(t *testing.T) {
	t.Parallel()
	e := newEnvOn(t, "sqlite", onecsim.Options{}, true)
	e.environ, _ = unreadableSecrets(t, e)
	for _, args := range [][]string{
		{"resync", "--status", "failed", "--dry-run"},
		{"journal", "list"},
		{"outbox", "status"},
	} {
		if out, stderr, code := e.cli("", args...); code != 0 {
			t.Errorf("%s with every secret file missing: exit %d\n%s%s", strings.Join(args, " "), code, out, stderr)
		}
	}
}

func TestACommandReadsOnlyTheSecretsItUses(t *testing.T) {
	t.Parallel()
	e := newEnvOn(t, "sqlite", onecsim.Options{}, true)
	environ, files := unreadableSecrets(t, e)
	e.environ = environ
	for _, c := range []struct {
		args  []string
		reads []string // the secrets it must name, each once
	}{
		{[]string{"resync", "--status", "failed"}, []string{"onec.password"}},
		{[]string{"resync", "site:order:A-1:create"}, []string{"onec.password"}},
		{[]string{"stock", "snapshot", "--warehouse", "WH1"}, []string{"onec.password"}},
		{[]string{"order", "cancel", "site", "A-1"}, []string{"onec.password"}},
		{[]string{"reconcile", "--source", "kaspi", "--from", "2026-09-01", "--to", "2026-09-02"}, []string{"onec.password", "connectors.kaspi.token"}},
		{[]string{"reconcile", "--source", "site", "--from", "2026-09-01", "--to", "2026-09-02"}, []string{"onec.password"}},
		{[]string{"resync", "kaspi", "512344101"}, []string{"onec.password", "connectors.kaspi.token"}},
	} {
		name := strings.Join(c.args, " ")
		_, stderr, code := e.cli("", c.args...)
		if code != exitUsage {
			t.Errorf("%s: exit %d, want 2:\n%s", name, code, stderr)
			continue
		}
		if len(stderr) > 600 {
			t.Errorf("%s: %d characters on stderr:\n%s", name, len(stderr), stderr)
		}
		lines := strings.Split(strings.TrimSpace(stderr), "\n")
		for key, file := range files {
			want := 0
			for _, k := range c.reads {
				if k == key {
					want = 1
				}
			}
			if n := strings.Count(stderr, file); n != want {
				t.Errorf("%s: names %s %d times, want %d:\n%s", name, file, n, want, stderr)
			}
			for _, l := range lines {
				if strings.Count(l, "cannot read") > 1 {
					t.Errorf("%s: two problems on one line: %q", name, l)
				}
			}
		}
		// A file that cannot be read is its problem, not also its secret's.
		for _, k := range []string{"onec.password:", "connectors.kaspi.token:", "webhooks.sources.site.secrets:", "relay.destinations.crm.secrets:"} {
			if strings.Contains(stderr, k) {
				t.Errorf("%s: says %s besides its file:\n%s", name, k, stderr)
			}
		}
		if len(c.reads) > 1 && len(lines) < len(c.reads) {
			t.Errorf("%s: %d problems on %d lines, want one a line:\n%s", name, len(c.reads), len(lines), stderr)
		}
	}
}

// The routes a CLI command's engine writes events by, built without a credential,
// are the service's.
func TestDeliveryRoutesAreTheServices(t *testing.T) {
	t.Parallel()
	cfg, err := config.Load(config.LoadOptions{Path: filepath.Join(t.TempDir(), "none.yaml"), Environ: []string{
		"ORDERSYNC_CONNECTORS__KASPI__ENABLED=true", "ORDERSYNC_CONNECTORS__KASPI__WAREHOUSE=WH1",
		"ORDERSYNC_CONNECTORS__KASPI__TOKEN=t", "ORDERSYNC_CONNECTORS__KASPI__ACCEPT_ORDERS=true",
		"ORDERSYNC_CONNECTORS__OZON__ENABLED=true", "ORDERSYNC_CONNECTORS__OZON__WAREHOUSE=WH1",
		"ORDERSYNC_CONNECTORS__OZON__CLIENT_ID=1", "ORDERSYNC_CONNECTORS__OZON__API_KEY=k",
		"ORDERSYNC_CONNECTORS__OZON__ACKNOWLEDGE=true",
		"ORDERSYNC_CONNECTORS__WILDBERRIES__ENABLED=true", "ORDERSYNC_CONNECTORS__WILDBERRIES__WAREHOUSE=WH1",
		"ORDERSYNC_CONNECTORS__WILDBERRIES__TOKEN=w",
		"ORDERSYNC_RELAY__DESTINATIONS__CRM__TYPE=webhook", "ORDERSYNC_RELAY__DESTINATIONS__CRM__URL=http://127.0.0.1:1/",
		"ORDERSYNC_RELAY__DESTINATIONS__CRM__EVENTS=order.created,order.cancelled",
		"ORDERSYNC_RELAY__DESTINATIONS__CRM__SECRETS=whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
		"ORDERSYNC_RELAY__DESTINATIONS__OZONACK__TYPE=connector", "ORDERSYNC_RELAY__DESTINATIONS__OZONACK__CONNECTOR=ozon",
		"ORDERSYNC_RELAY__DESTINATIONS__OZONACK__EVENTS=order.created",
	}})
	if err != nil {
		t.Fatal(err)
	}
	ms, err := enabledConnectors(cfg, logging.Discard())
	if err != nil {
		t.Fatal(err)
	}
	d, err := newDelivery(cfg, publishers(ms))
	if err != nil {
		t.Fatal(err)
	}
	routes, err := deliveryRoutes(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(routes, d.routes) || len(routes) == 0 {
		t.Errorf("deliveryRoutes = %v, the service's %v", routes, d.routes)
	}
}
