package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// FuzzLoad loads any YAML body as the configuration file. Load must not panic;
// it returns either a configuration whose effective form prints and (when it
// masks no secret) loads back to the same configuration, or an *Error whose
// every problem says something.
func FuzzLoad(f *testing.F) {
	if b, err := os.ReadFile("../../configs/ordersync.example.yaml"); err == nil {
		f.Add(b)
	}
	for _, s := range []string{
		"", "# nothing\n", "onec:\nworker: {}\n", connectorsYAML, webhooksYAML,
		"onec:\n  max_response: 1MiB\n  timeout: 45s\n",
		"onec:\n  max_response: 0\n",
		"webhooks:\n  max_body: 1.5MiB\n",
		"connectors:\n  kaspi:\n    enabled: true\n    max_response: 18446744073709551615\n",
		"relay:\n  destinations:\n    crm:\n      type: webhook\n      url: https://crm.example.kz/h\n      secrets: [" + testSecret + "]\n      events: [order.created]\n",
		"onec: [1, 2]\n", "onec:\n  timeout: 30\n", "database:\n  url: sqlite:ordersync.db\n",
		"a: &a [*a]\n", "onec:\n  base_url: http://1c.local/trade/hs/ordersync/v1\n  username: \"a:b\"\n",
		stockYAML,
		"stock:\n  schedules:\n    - {name: a, cron: '@every 2s', warehouses: [WH1], publish: []}\n    -\n    - [x]\n",
		"stock:\n  schedules:\n    main: {cron: '@hourly'}\n",
		"connectors:\n  ozon:\n    stock_warehouses: {0001: 0123, \"WH.1\": 5, WH2: x, WH3: 1.5, \"<<\": 1}\n",
		"connectors:\n  kaspi:\n    stores: &s {WH1: PP1}\n  ozon:\n    stock_warehouses: *s\n    merchant_id: 0x1F\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		path := filepath.Join(t.TempDir(), "ordersync.yaml")
		if err := os.WriteFile(path, body, 0o600); err != nil {
			t.Fatal(err)
		}
		// Only the file itself can be read: a key naming another file (a secret's
		// _file, the SKU map) finds none, and never reads a device.
		readFile := func(name string) ([]byte, error) {
			if name != path {
				return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
			}
			return os.ReadFile(name)
		}
		cfg, err := Load(LoadOptions{Path: path, PathExplicit: true, Environ: []string{}, ReadFile: readFile})
		if err != nil {
			var cerr *Error
			if !errors.As(err, &cerr) || len(cerr.Problems) == 0 {
				t.Fatalf("Load error %v (%T) is not a *config.Error with problems", err, err)
			}
			for _, p := range cerr.Problems {
				if strings.TrimSpace(p.Message) == "" {
					t.Fatalf("problem of %q says nothing: %v", p.Key, err)
				}
			}
			return
		}
		out, err := cfg.Effective()
		if err != nil {
			t.Fatalf("Effective of a loaded configuration: %v", err)
		}
		if strings.Contains(string(out), "'***'") {
			return // secrets are masked: the output is not meant to load back as it is
		}
		if err := os.WriteFile(path, out, 0o600); err != nil {
			t.Fatal(err)
		}
		again, err := Load(LoadOptions{Path: path, PathExplicit: true, Environ: []string{}, ReadFile: readFile})
		if err != nil {
			t.Fatalf("the effective configuration does not load back: %v\n%s", err, out)
		}
		if !reflect.DeepEqual(again, cfg) {
			t.Fatalf("the effective configuration loads back to another one:\n got %+v\nwant %+v\nfrom:\n%s", *again, *cfg, out)
		}
	})
}
