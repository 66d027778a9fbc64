package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// twoOzon is a file with the first Ozon account and a second one, ozon-ip, each
// mapped to an organisation of its own.
const twoOzon = `
connectors:
  ozon:
    enabled: true
    client_id: "123456"
    api_key: ozon-key-5b1f0c2e
    warehouse: WH1
    onec:
      organization: ООО-1
  ozon-ip:
    type: ozon
    enabled: true
    client_id: "654321"
    api_key: ozon-key-second
    warehouse: WH2
    page_size: 500
    onec:
      organization: ИП-2
      agreement: "000000017"
`

func TestFurtherAccountFromFile(t *testing.T) {
	t.Parallel()
	cfg := mustLoadYAML(t, twoOzon)
	var names, sources []string
	for _, a := range cfg.Connectors.Enabled() {
		names = append(names, a.Name)
		sources = append(sources, a.Source)
	}
	if want := []string{"ozon", "ozon-ip"}; !slices.Equal(names, want) {
		t.Fatalf("enabled accounts %q, want %q", names, want)
	}
	if want := []string{"ozon", "ozon-ip"}; !slices.Equal(sources, want) {
		t.Errorf("sources %q, want %q", sources, want)
	}
	a, ok := cfg.Connectors.Account("ozon-ip")
	if !ok || a.Type != TypeOzon || a.Ozon == nil {
		t.Fatalf("Account(ozon-ip) = %+v, %v", a, ok)
	}
	// Its own keys, and the type's defaults for the rest.
	if a.Ozon.ClientID != "654321" || a.Ozon.PageSize != 500 || a.Ozon.RatePerSecond != defaults().Connectors.Ozon.RatePerSecond {
		t.Errorf("ozon-ip = %+v", *a.Ozon)
	}
	m, key, ok := cfg.OneCMappingOf("ozon-ip")
	if !ok || m.Organization != "ИП-2" || m.Agreement != "000000017" || key != "connectors.ozon-ip.onec.organization" {
		t.Errorf("OneCMappingOf(ozon-ip) = %+v, %q, %v", m, key, ok)
	}
	if m, _, ok := cfg.OneCMappingOf("ozon"); !ok || m.Organization != "ООО-1" {
		t.Errorf("OneCMappingOf(ozon) = %+v, %v", m, ok)
	}

	// The effective configuration shows it under its own name, and reads back the same.
	out, err := cfg.Effective()
	if err != nil {
		t.Fatal(err)
	}
	text := string(out)
	for _, want := range []string{"\n  ozon-ip:\n    type: ozon\n", "organization: ИП-2"} {
		if !strings.Contains(text, want) {
			t.Errorf("effective configuration lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "~") || strings.Contains(text, "ozon-key-second") {
		t.Errorf("effective configuration shows an internal key or a secret:\n%s", text)
	}
	again := mustLoadYAML(t, strings.ReplaceAll(text, "'***'", "restored"))
	b, ok := again.Connectors.Account("ozon-ip")
	if !ok || b.Ozon.ClientID != "654321" || b.Mapping() != a.Mapping() {
		t.Errorf("round trip: %+v, %v", b, ok)
	}
}

func TestFurtherAccountFromEnvironment(t *testing.T) {
	t.Parallel()
	cfg := mustLoadYAML(t, "",
		"ORDERSYNC_CONNECTORS__UZUM_TASHKENT__TYPE=uzum",
		"ORDERSYNC_CONNECTORS__UZUM_TASHKENT__ENABLED=true",
		"ORDERSYNC_CONNECTORS__UZUM_TASHKENT__TOKEN=uzum-key-4e8a",
		"ORDERSYNC_CONNECTORS__UZUM_TASHKENT__SHOP_IDS=7001,7002",
		"ORDERSYNC_CONNECTORS__UZUM_TASHKENT__WAREHOUSE=TAS")
	a, ok := cfg.Connectors.Account("uzum_tashkent")
	if !ok || !a.enabled() || a.Uzum == nil || a.Source != "uzum_tashkent" {
		t.Fatalf("Account(uzum_tashkent) = %+v, %v", a, ok)
	}
	if !slices.Equal(a.Uzum.ShopIDs, []string{"7001", "7002"}) || a.Uzum.Warehouse != "TAS" {
		t.Errorf("uzum_tashkent = %+v", *a.Uzum)
	}
}

func TestFurtherAccountProblems(t *testing.T) {
	t.Parallel()
	// A problem of a further account names its own key.
	_, err := loadYAML(t, "connectors:\n  ozon-ip:\n    type: ozon\n    enabled: true\n    warehouse: WH2\n")
	wantProblem(t, err, "connectors.ozon-ip.client_id", "required when connectors.ozon-ip.enabled is true")
	for _, p := range problemsOf(t, err) {
		if strings.Contains(p.Key+p.Message, "~") {
			t.Errorf("problem shows an internal key: %s: %s", p.Key, p.Message)
		}
	}

	// No type, or an unknown one, is said once, with the types known.
	_, err = loadYAML(t, "connectors:\n  ozon-ip:\n    enabled: true\n    client_id: \"1\"\n")
	wantProblem(t, err, "connectors.ozon-ip.type", "is required", "yandex_market")
	if n := len(problemsOf(t, err)); n != 1 {
		t.Errorf("got %d problems, want 1:\n%v", n, err)
	}
	_, err = loadYAML(t, "connectors:\n  halyk:\n    type: halyk\n    enabled: true\n")
	wantProblem(t, err, "connectors.halyk.type", `unknown account type "halyk"`)

	// A first account keeps its own type.
	_, err = loadYAML(t, "connectors:\n  ozon:\n    type: wildberries\n")
	wantProblem(t, err, "connectors.ozon.type", "needs a name of its own")

	// Two accounts may not write the same source: wb is the first Wildberries account's.
	_, err = loadYAML(t, "connectors:\n  wb:\n    type: wildberries\n    enabled: true\n    token: t2\n    warehouse: WH2\n",
		enabledEnv("wildberries")...)
	wantProblem(t, err, "connectors.wb", `writes the source "wb", as connectors.wildberries does`)

	// An organisation on one account requires it on every enabled one.
	cfg := mustLoadYAML(t, strings.Replace(twoOzon, "      organization: ИП-2\n", "", 1))
	if _, key, ok := cfg.OneCMappingOf("ozon-ip"); ok || key != "connectors.ozon-ip.onec.organization" {
		t.Errorf("OneCMappingOf(ozon-ip) without an organisation: key %q, ok %v; want refused naming it", key, ok)
	}
	// A source no sender writes (an order imported under another name) is refused
	// too once organisations are mapped; without any mapping it goes as before.
	if _, key, ok := cfg.OneCMappingOf("site"); ok || key != "webhooks.sources.site.onec.organization" {
		t.Errorf("OneCMappingOf(site) = %q, %v; want refused naming webhooks.sources.site.onec.organization", key, ok)
	}
	if _, _, ok := mustLoadYAML(t, "").OneCMappingOf("site"); !ok {
		t.Error("OneCMappingOf(site) with no organisation mapped anywhere: refused")
	}
	// A webhook source may not take an account's name.
	_, err = loadYAML(t, twoOzon+"webhooks:\n  sources:\n    ozon-ip:\n      secrets: ["+testSecret+"]\n")
	wantProblem(t, err, "webhooks.sources.ozon-ip", "the source of the account connectors.ozon-ip")

	// A webhook source maps its own organisation.
	site := twoOzon + "webhooks:\n  sources:\n    site:\n      secrets: [" + testSecret + "]\n      onec: {organization: ООО-1}\n"
	if m, key, ok := mustLoadYAML(t, site).OneCMappingOf("site"); !ok || m.Organization != "ООО-1" || key != "webhooks.sources.site.onec.organization" {
		t.Errorf("OneCMappingOf(site) = %+v, %q, %v", m, key, ok)
	}

	// A relay destination may name a further account.
	src := twoOzon + "relay:\n  destinations:\n    ack:\n      type: connector\n      connector: ozon-ip\n      events: [order.created]\n"
	if _, err := loadYAML(t, src); err != nil {
		t.Errorf("destination naming ozon-ip: %v", err)
	}
	_, err = loadYAML(t, strings.Replace(src, "connector: ozon-ip", "connector: ozon-ooo", 1))
	wantProblem(t, err, "relay.destinations.ack.connector", `unknown connector "ozon-ooo"`, "ozon-ip")
}

// TestFurtherBitrix24Portal: a second portal is connectors.<name> of type
// bitrix24, with the keys of webhooks.bitrix24; it is pushed to, not polled.
func TestFurtherBitrix24Portal(t *testing.T) {
	t.Parallel()
	src := "connectors:\n  b24-kz:\n    type: bitrix24\n    enabled: true\n    application_token: tok\n" +
		"    rest_url: https://kz.bitrix24.kz/rest/1/abc/\n    warehouse: WH2\n    onec: {organization: ORG-KZ}\n"
	cfg := mustLoadYAML(t, src)
	a, ok := cfg.Connectors.Account("b24-kz")
	if !ok || a.Bitrix24 == nil || a.Polled() || a.Source != "b24-kz" || a.Bitrix24.RatePerSecond != 2 {
		t.Fatalf("Account(b24-kz) = %+v, %v", a, ok)
	}
	if slices.Contains(cfg.Connectors.Names(), "b24-kz") {
		t.Error("a portal is among the polled accounts' names")
	}
	if m, key, ok := cfg.OneCMappingOf("b24-kz"); !ok || m.Organization != "ORG-KZ" || key != "connectors.b24-kz.onec.organization" {
		t.Errorf("OneCMappingOf(b24-kz) = %+v, %q, %v", m, key, ok)
	}
	_, err := loadYAML(t, strings.Replace(src, "    application_token: tok\n", "", 1))
	wantProblem(t, err, "connectors.b24-kz.application_token", "required")
	_, err = loadYAML(t, strings.ReplaceAll(src, "b24-kz", "bitrix24"))
	wantProblem(t, err, "connectors.bitrix24", "the first Bitrix24 portal is webhooks.bitrix24")
}

// TestFurtherAccountSecretFile: a further account's secret comes from a file
// like a first account's, from the file or the environment.
func TestFurtherAccountSecretFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "ozon-ip-api-key")
	if err := os.WriteFile(keyFile, []byte("ozon-key-from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	src := "connectors:\n  ozon-ip:\n    type: ozon\n    enabled: true\n    client_id: \"654321\"\n    warehouse: WH2\n    api_key_file: " + keyFile + "\n"
	cfgFile := filepath.Join(dir, "ordersync.yaml")
	if err := os.WriteFile(cfgFile, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, env := range [][]string{nil, {"ORDERSYNC_CONNECTORS__UZUM-2__TYPE=uzum", "ORDERSYNC_CONNECTORS__UZUM-2__TOKEN_FILE=" + keyFile}} {
		cfg, err := Load(LoadOptions{Path: cfgFile, PathExplicit: true, Environ: append([]string{}, env...)})
		if err != nil {
			t.Fatal(err)
		}
		if a, ok := cfg.Connectors.Account("ozon-ip"); !ok || a.Ozon.APIKey != "ozon-key-from-file" {
			t.Errorf("ozon-ip's api_key from its file: %+v", a.Ozon)
		}
		if env != nil {
			if a, ok := cfg.Connectors.Account("uzum-2"); !ok || a.Uzum.Token != "ozon-key-from-file" {
				t.Errorf("uzum-2's token from its file, given in the environment: %+v %v", a, ok)
			}
		}
	}
}
