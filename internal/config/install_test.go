package config

import (
	"os"
	"strings"
	"testing"
	"time"
)

// The example configuration on a host where the credentials exist only inside the
// unit (/run/credentials/ordersync.service/…): a command that reads database.url
// alone loads it without opening any of those files, and says which it left.
func TestSecretFilesLeftUnreadWhenNotNeeded(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../configs/ordersync.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	const path = "/etc/ordersync/ordersync.yaml"
	var opened []string
	readFile := func(name string) ([]byte, error) {
		opened = append(opened, name)
		return files{path: string(b)}.ReadFile(name)
	}
	load := func(readSecret func(string) bool, env ...string) (*Config, error) {
		opened = nil
		return Load(LoadOptions{Path: path, PathExplicit: true, Environ: append([]string{}, env...),
			ReadFile: readFile, ReadSecret: readSecret})
	}

	// Everything read: the credentials are missing, each one named.
	_, err = load(nil)
	wantProblem(t, err, "onec.password_file", "/run/credentials/ordersync.service/onec-password", "no such file")
	wantProblem(t, err, "relay.destinations.crm.secrets_file", "/run/credentials/ordersync.service/crm-webhook-secrets")

	dbOnly := func(key string) bool { return key == "database.url" }
	cfg, err := load(dbOnly)
	if err != nil {
		t.Fatalf("database.url alone: %v", err)
	}
	for _, name := range opened {
		if strings.HasPrefix(name, "/run/credentials/") {
			t.Errorf("opened %s, a secret the command does not need", name)
		}
	}
	if f, ok := cfg.Unread("onec.password"); !ok || f != "/run/credentials/ordersync.service/onec-password" {
		t.Errorf("Unread(onec.password) = %q %v", f, ok)
	}
	if _, ok := cfg.Unread("relay.destinations.crm.secrets"); !ok {
		t.Error("relay.destinations.crm.secrets is not reported unread")
	}
	if cfg.OneC.Password != "" || cfg.Relay.Destinations["crm"].Secrets != nil {
		t.Errorf("unread secrets hold values: %q %q", cfg.OneC.Password, cfg.Relay.Destinations["crm"].Secrets)
	}
	if cfg.Database.URL != "postgres://ordersync@127.0.0.1:5432/ordersync" {
		t.Errorf("database.url = %q", cfg.Database.URL)
	}

	// database.url_file is read when the command reads database.url.
	cfg, err = Load(LoadOptions{Path: path, PathExplicit: true,
		Environ:  []string{"ORDERSYNC_DATABASE__URL_FILE=/etc/ordersync/database-url"},
		ReadFile: files{path: string(b), "/etc/ordersync/database-url": "postgres://u:pw@db/x\n"}.ReadFile, ReadSecret: dbOnly})
	if err != nil || cfg.Database.URL != "postgres://u:pw@db/x" {
		t.Fatalf("database.url_file: %v %+v", err, cfg)
	}

	// Secrets an enabled part requires are not asked for when they are not read;
	// every other problem still is, and a secret given twice too.
	_, err = load(dbOnly,
		"ORDERSYNC_CONNECTORS__KASPI__ENABLED=true", "ORDERSYNC_CONNECTORS__KASPI__WAREHOUSE=WH1",
		"ORDERSYNC_CONNECTORS__KASPI__TOKEN_FILE=/run/credentials/ordersync.service/kaspi-token",
		"ORDERSYNC_WEBHOOKS__OZON__ENABLED=true", "ORDERSYNC_CONNECTORS__OZON__CLIENT_ID=42",
		"ORDERSYNC_CONNECTORS__OZON__API_KEY_FILE=/run/credentials/ordersync.service/ozon-api-key",
		"ORDERSYNC_WORKER__MAX_ATTEMPTS=0")
	ps := problemsOf(t, err)
	if len(ps) != 1 || ps[0].Key != "worker.max_attempts" {
		t.Fatalf("problems %v, want worker.max_attempts alone", ps)
	}
	_, err = load(dbOnly, "ORDERSYNC_ONEC__PASSWORD=x", "ORDERSYNC_ONEC__PASSWORD_FILE=/run/credentials/ordersync.service/onec-password")
	wantProblem(t, err, "onec.password", "both onec.password and onec.password_file")
}

func TestConnectTimeout(t *testing.T) {
	t.Parallel()
	if got := defaults().Database.ConnectTimeout; got != 5*time.Minute {
		t.Fatalf("default database.connect_timeout %s, want 5m", got)
	}
	cfg := mustLoadYAML(t, "database:\n  connect_timeout: 0s\n")
	if cfg.Database.ConnectTimeout != 0 {
		t.Fatalf("connect_timeout 0s: %s", cfg.Database.ConnectTimeout)
	}
	cfg = mustLoadYAML(t, "", "ORDERSYNC_DATABASE__CONNECT_TIMEOUT=90s")
	if cfg.Database.ConnectTimeout != 90*time.Second {
		t.Fatalf("from the environment: %s", cfg.Database.ConnectTimeout)
	}
	_, err := loadYAML(t, "database:\n  connect_timeout: -1s\n")
	wantProblem(t, err, "database.connect_timeout", "at least 0")
	_, err = loadYAML(t, "database:\n  connect_timeout: 300\n")
	wantProblem(t, err, "database.connect_timeout", "duration")
}

// Every problem of a file is reported at once: the values YAML cannot take (a key
// given twice), the values of the wrong type, and the rest of the checks.
func TestEveryDecodeProblemOfAFileAtOnce(t *testing.T) {
	t.Parallel()
	_, err := loadYAML(t, `onec:
  timeout: 30s
  timeout: 40s
  max_concurrency: four
worker:
  max_attempts: 1
  max_attempts: 2
  backoff_min: soon
log:
  level: loud
http:
  listen: 8080
`)
	for _, want := range []struct{ key, fragment string }{
		{"", `line 3: mapping key "timeout" already defined at line 2`},
		{"", `line 7: mapping key "max_attempts" already defined at line 6`},
		{"onec.max_concurrency", "whole number"},
		{"worker.backoff_min", "duration"},
		{"http.listen", "string"},
		{"log.level", "loud"},
	} {
		if want.key == "log.level" { // a check of the merged value: it names no file
			wantProblem(t, err, want.key, want.fragment)
			continue
		}
		wantProblem(t, err, want.key, want.fragment, testPath)
	}
}

// The SKU map's content is checked at load (config check): each line naming a
// marketplace ordersync does not know is a problem with its line number.
func TestSKUMapLinesChecked(t *testing.T) {
	t.Parallel()
	const mapPath = "/etc/ordersync/sku-map.csv"
	load := func(content string) error {
		_, err := Load(LoadOptions{Path: testPath, PathExplicit: true, Environ: []string{},
			ReadFile: files{testPath: "connectors:\n  sku_map: " + mapPath + "\n", mapPath: content}.ReadFile})
		return err
	}
	if err := load("marketplace,marketplace_sku,onec_sku\nwb,1,A\nwildberries,2,B\nkaspi,3,C\nozon,4,D\n"); err != nil {
		t.Fatalf("wb and wildberries: %v", err)
	}
	err := load("wb,1,A\nwalmart,2,B\nozon,3,C\nWB-Market,4,D\n")
	wantProblem(t, err, "connectors.sku_map", mapPath, `line 2: unknown marketplace "walmart"`)
	wantProblem(t, err, "connectors.sku_map", mapPath, `line 4: unknown marketplace "WB-Market"`)
}
