package config

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// Credentials of the tests; an error or the effective configuration that shows one
// of them leaks a secret.
const (
	kaspiToken = "kaspi-token-Zq81"
	ozonKey    = "ozon-key-5b1f0c2e"
	wbToken    = "wb-token-eyJhbGciOi"
)

// enabledEnv enables the connector name from the environment with the keys it
// requires and nothing else.
func enabledEnv(name string) []string {
	prefix := "ORDERSYNC_CONNECTORS__" + strings.ToUpper(name) + "__"
	env := []string{prefix + "ENABLED=true", prefix + "WAREHOUSE=WH1"}
	switch name {
	case "kaspi":
		env = append(env, prefix+"TOKEN="+kaspiToken)
	case "ozon":
		env = append(env, prefix+"CLIENT_ID=123456", prefix+"API_KEY="+ozonKey)
	case "wildberries":
		env = append(env, prefix+"TOKEN="+wbToken)
	case "yandex_market":
		env = append(env, prefix+"API_KEY=ym-key-7c2d", prefix+"CAMPAIGN_ID=21000001")
	case "uzum":
		env = append(env, prefix+"TOKEN=uzum-key-4e8a", prefix+"SHOP_IDS=7001")
	default:
		panic("enabledEnv: no connector " + name)
	}
	return env
}

// noSecrets fails if err shows one of the tests' credentials.
func noSecrets(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		return
	}
	for _, s := range []string{kaspiToken, ozonKey, wbToken} {
		if strings.Contains(err.Error(), s) {
			t.Errorf("error shows secret %q:\n%v", s, err)
		}
	}
}

// connectorsYAML enables the three connectors with every key set away from its
// default.
const connectorsYAML = `
connectors:
  sku_map: /etc/ordersync/sku-map.csv
  kaspi:
    enabled: true
    base_url: http://127.0.0.1:8091/shop/api/v2
    token: ` + kaspiToken + `
    poll_interval: 30s
    lookback: 24h
    accept_orders: false
    warehouse: Алматы-1
    states: [NEW, PICKUP]
    statuses: [APPROVED_BY_BANK, ACCEPTED_BY_MERCHANT]
    page_size: 50
    timeout: 10s
    rate_per_second: 2
    max_response: 8MiB
  ozon:
    enabled: true
    base_url: http://127.0.0.1:8092
    client_id: "123456"
    api_key: ` + ozonKey + `
    api_version: v3
    poll_interval: 2m
    lookback: 48h
    warehouse: WH2
    acknowledge: true
    page_size: 1000
    timeout: 15s
    rate_per_second: 20
    max_response: 32MiB
  wildberries:
    enabled: true
    base_url: http://127.0.0.1:8093
    token: ` + wbToken + `
    poll_interval: 5m
    lookback: 120h
    warehouse: WH3
    acknowledge: true
    supply_name: Поставка ordersync
    page_size: 1
    timeout: 1m
    rate_per_second: 1
    max_response: 2MB
    returns:
      poll_interval: 1h
      base_url: http://127.0.0.1:8094
`

// connectorsWant is what connectorsYAML loads to.
func connectorsWant() Connectors {
	return Connectors{
		SKUMap: "/etc/ordersync/sku-map.csv",
		Kaspi: Kaspi{
			Type:          TypeKaspi,
			Enabled:       true,
			BaseURL:       "http://127.0.0.1:8091/shop/api/v2",
			Token:         kaspiToken,
			PollInterval:  30 * time.Second,
			Lookback:      24 * time.Hour,
			AcceptOrders:  false,
			Warehouse:     "Алматы-1",
			States:        []string{"NEW", "PICKUP"},
			Statuses:      []string{"APPROVED_BY_BANK", "ACCEPTED_BY_MERCHANT"},
			PageSize:      50,
			Timeout:       10 * time.Second,
			RatePerSecond: 2,
			MaxResponse:   8 << 20,
			Returns:       Returns{Enabled: true, PollInterval: 10 * time.Minute},
		},
		Ozon: Ozon{
			Type:          TypeOzon,
			Enabled:       true,
			BaseURL:       "http://127.0.0.1:8092",
			ClientID:      "123456",
			APIKey:        ozonKey,
			APIVersion:    OzonV3,
			PollInterval:  2 * time.Minute,
			Lookback:      48 * time.Hour,
			Warehouse:     "WH2",
			Acknowledge:   true,
			PageSize:      1000,
			Timeout:       15 * time.Second,
			RatePerSecond: 20,
			MaxResponse:   32 << 20,
			Returns:       Returns{Enabled: true, PollInterval: 10 * time.Minute},
		},
		Wildberries: Wildberries{
			Type:          TypeWildberries,
			Enabled:       true,
			BaseURL:       "http://127.0.0.1:8093",
			Token:         wbToken,
			PollInterval:  5 * time.Minute,
			Lookback:      120 * time.Hour,
			Warehouse:     "WH3",
			Acknowledge:   true,
			SupplyName:    "Поставка ordersync",
			PageSize:      1,
			Timeout:       time.Minute,
			RatePerSecond: 1,
			MaxResponse:   2_000_000,
			ContentURL:    "https://content-api.wildberries.ru",
			Returns:       WildberriesReturns{Enabled: true, PollInterval: time.Hour, BaseURL: "http://127.0.0.1:8094"},
		},
		YandexMarket: defaultYandexMarket(),
		Uzum:         defaultUzum(),
	}
}

// loadWithFiles loads src as the config file with fsys as the other files.
func loadWithFiles(t *testing.T, src string, fsys files, env ...string) (*Config, error) {
	t.Helper()
	all := files{testPath: src}
	for name, content := range fsys {
		all[name] = content
	}
	return Load(LoadOptions{Path: testPath, PathExplicit: true, Environ: append([]string{}, env...), ReadFile: all.ReadFile})
}

const skuMapCSV = "marketplace,marketplace_sku,onec_sku\nkaspi,K-1,SKU-8812\n"

func TestConnectorsFile(t *testing.T) {
	t.Parallel()
	cfg, err := loadWithFiles(t, connectorsYAML, files{"/etc/ordersync/sku-map.csv": skuMapCSV})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if got, want := cfg.Connectors, connectorsWant(); !reflect.DeepEqual(got, want) {
		t.Errorf("connectors:\n got %+v\nwant %+v", got, want)
	}
}

func TestConnectorsPartialSectionKeepsDefaults(t *testing.T) {
	t.Parallel()
	cfg := mustLoadYAML(t, "connectors:\n  kaspi:\n    page_size: 20\n    states: [NEW]\n  ozon: {}\n")
	want := defaults().Connectors
	want.Kaspi.PageSize = 20
	want.Kaspi.States = []string{"NEW"}
	if got := cfg.Connectors; !reflect.DeepEqual(got, want) {
		t.Errorf("connectors:\n got %+v\nwant %+v", got, want)
	}
	// The shorter list replaces the default, it does not overwrite its head.
	if got, want := defaults().Connectors.Kaspi.States, []string{"NEW", "PICKUP", "DELIVERY", "KASPI_DELIVERY"}; !slices.Equal(got, want) {
		t.Errorf("defaults changed by loading: states = %q, want %q", got, want)
	}
}

func TestConnectorsEnv(t *testing.T) {
	t.Parallel()
	cfg, err := loadWithFiles(t, "", files{
		"/etc/ordersync/sku-map.csv":                           skuMapCSV,
		"/run/credentials/ordersync.service/kaspi-token":       kaspiToken + "\n",
		"/run/credentials/ordersync.service/ozon-api-key":      ozonKey + "\r\n",
		"/run/credentials/ordersync.service/wildberries-token": wbToken,
	},
		"ORDERSYNC_CONNECTORS__SKU_MAP=/etc/ordersync/sku-map.csv",
		"ORDERSYNC_CONNECTORS__KASPI__ENABLED=true",
		"ORDERSYNC_CONNECTORS__KASPI__BASE_URL=http://127.0.0.1:8091/shop/api/v2",
		"ORDERSYNC_CONNECTORS__KASPI__TOKEN_FILE=/run/credentials/ordersync.service/kaspi-token",
		"ORDERSYNC_CONNECTORS__KASPI__POLL_INTERVAL=30s",
		"ORDERSYNC_CONNECTORS__KASPI__LOOKBACK=24h",
		"ORDERSYNC_CONNECTORS__KASPI__ACCEPT_ORDERS=false",
		"ORDERSYNC_CONNECTORS__KASPI__WAREHOUSE=Алматы-1",
		"ORDERSYNC_CONNECTORS__KASPI__STATES=NEW, PICKUP",
		"ORDERSYNC_CONNECTORS__KASPI__STATUSES=APPROVED_BY_BANK,ACCEPTED_BY_MERCHANT",
		"ORDERSYNC_CONNECTORS__KASPI__PAGE_SIZE=50",
		"ORDERSYNC_CONNECTORS__KASPI__TIMEOUT=10s",
		"ORDERSYNC_CONNECTORS__KASPI__RATE_PER_SECOND=2",
		"ORDERSYNC_CONNECTORS__KASPI__MAX_RESPONSE=8MiB",
		"ORDERSYNC_CONNECTORS__OZON__ENABLED=true",
		"ORDERSYNC_CONNECTORS__OZON__BASE_URL=http://127.0.0.1:8092",
		"ORDERSYNC_CONNECTORS__OZON__CLIENT_ID=123456",
		"ORDERSYNC_CONNECTORS__OZON__API_KEY_FILE=/run/credentials/ordersync.service/ozon-api-key",
		"ORDERSYNC_CONNECTORS__OZON__API_VERSION=V3",
		"ORDERSYNC_CONNECTORS__OZON__POLL_INTERVAL=2m",
		"ORDERSYNC_CONNECTORS__OZON__LOOKBACK=48h",
		"ORDERSYNC_CONNECTORS__OZON__WAREHOUSE=WH2",
		"ORDERSYNC_CONNECTORS__OZON__ACKNOWLEDGE=true",
		"ORDERSYNC_CONNECTORS__OZON__PAGE_SIZE=1000",
		"ORDERSYNC_CONNECTORS__OZON__TIMEOUT=15s",
		"ORDERSYNC_CONNECTORS__OZON__RATE_PER_SECOND=20",
		"ORDERSYNC_CONNECTORS__OZON__MAX_RESPONSE=33554432",
		"ORDERSYNC_CONNECTORS__WILDBERRIES__ENABLED=true",
		"ORDERSYNC_CONNECTORS__WILDBERRIES__BASE_URL=http://127.0.0.1:8093",
		"ORDERSYNC_CONNECTORS__WILDBERRIES__TOKEN_FILE=/run/credentials/ordersync.service/wildberries-token",
		"ORDERSYNC_CONNECTORS__WILDBERRIES__POLL_INTERVAL=5m",
		"ORDERSYNC_CONNECTORS__WILDBERRIES__LOOKBACK=120h",
		"ORDERSYNC_CONNECTORS__WILDBERRIES__WAREHOUSE=WH3",
		"ORDERSYNC_CONNECTORS__WILDBERRIES__ACKNOWLEDGE=true",
		"ORDERSYNC_CONNECTORS__WILDBERRIES__SUPPLY_NAME=Поставка ordersync",
		"ORDERSYNC_CONNECTORS__WILDBERRIES__PAGE_SIZE=1",
		"ORDERSYNC_CONNECTORS__WILDBERRIES__TIMEOUT=1m",
		"ORDERSYNC_CONNECTORS__WILDBERRIES__RATE_PER_SECOND=1",
		"ORDERSYNC_CONNECTORS__WILDBERRIES__MAX_RESPONSE=2 mb",
		"ORDERSYNC_CONNECTORS__WILDBERRIES__RETURNS__POLL_INTERVAL=1h",
		"ORDERSYNC_CONNECTORS__WILDBERRIES__RETURNS__BASE_URL=http://127.0.0.1:8094",
	)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if got, want := cfg.Connectors, connectorsWant(); !reflect.DeepEqual(got, want) {
		t.Errorf("connectors from the environment:\n got %+v\nwant %+v", got, want)
	}
}

func TestConnectorsEnvOverridesFile(t *testing.T) {
	t.Parallel()
	cfg, err := loadWithFiles(t, connectorsYAML, files{
		"/etc/ordersync/sku-map.csv": skuMapCSV,
		"/run/credentials/kaspi":     "kaspi-from-credential\n",
	},
		"ORDERSYNC_CONNECTORS__KASPI__TOKEN_FILE=/run/credentials/kaspi",
		"ORDERSYNC_CONNECTORS__KASPI__STATES=KASPI_DELIVERY",
		"ORDERSYNC_CONNECTORS__OZON__API_VERSION=v4",
		"ORDERSYNC_CONNECTORS__WILDBERRIES__ENABLED=false",
	)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	c := cfg.Connectors
	if got, want := c.Kaspi.Token, "kaspi-from-credential"; got != want {
		t.Errorf("kaspi.token = %q, want %q (the variable's _file wins over the file's token)", got, want)
	}
	if got, want := c.Kaspi.States, []string{"KASPI_DELIVERY"}; !slices.Equal(got, want) {
		t.Errorf("kaspi.states = %q, want %q", got, want)
	}
	if got, want := c.Kaspi.Statuses, []string{"APPROVED_BY_BANK", "ACCEPTED_BY_MERCHANT"}; !slices.Equal(got, want) {
		t.Errorf("kaspi.statuses = %q, want %q (file, not overridden)", got, want)
	}
	if got, want := c.Ozon.APIVersion, OzonV4; got != want {
		t.Errorf("ozon.api_version = %q, want %q", got, want)
	}
	if c.Wildberries.Enabled {
		t.Error("wildberries.enabled = true, want false (environment wins)")
	}
}

func TestConnectorsSecretFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, content string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	kaspi := write("kaspi-token", kaspiToken+"\n")
	ozon := write("ozon-api-key", ozonKey+"\n")
	wb := write("wildberries-token", wbToken+"\n")
	cfgFile := write("ordersync.yaml", `
connectors:
  kaspi:
    enabled: true
    token_file: `+kaspi+`
    warehouse: WH1
  ozon:
    enabled: true
    client_id: "123456"
    api_key_file: `+ozon+`
    warehouse: WH1
  wildberries:
    enabled: true
    token_file: `+wb+`
    warehouse: WH1
`)
	cfg, err := Load(LoadOptions{Path: cfgFile, PathExplicit: true, Environ: []string{}})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	for _, tc := range []struct{ key, got, want string }{
		{"connectors.kaspi.token", cfg.Connectors.Kaspi.Token, kaspiToken},
		{"connectors.ozon.api_key", cfg.Connectors.Ozon.APIKey, ozonKey},
		{"connectors.wildberries.token", cfg.Connectors.Wildberries.Token, wbToken},
	} {
		if tc.got != tc.want {
			t.Errorf("%s = %q, want %q (from its _file, newline trimmed)", tc.key, tc.got, tc.want)
		}
	}

	// A missing or empty credential file names its key and path.
	_, err = loadWithFiles(t, "", files{"/run/credentials/empty": "\n"},
		"ORDERSYNC_CONNECTORS__KASPI__TOKEN_FILE=/run/credentials/missing",
		"ORDERSYNC_CONNECTORS__OZON__API_KEY_FILE=/run/credentials/empty",
	)
	wantProblem(t, err, "connectors.kaspi.token_file", "/run/credentials/missing", "no such file")
	wantProblem(t, err, "connectors.ozon.api_key_file", "/run/credentials/empty", "empty")

	// Both forms in one layer.
	_, err = loadYAML(t, "connectors:\n  wildberries:\n    token: "+wbToken+"\n    token_file: /run/credentials/wb\n")
	wantProblem(t, err, "connectors.wildberries.token", "both", "connectors.wildberries.token_file")
	noSecrets(t, err)
}

func TestConnectorsEffective(t *testing.T) {
	t.Parallel()
	cfg, err := loadWithFiles(t, connectorsYAML, files{"/etc/ordersync/sku-map.csv": skuMapCSV})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	out, err := cfg.Effective()
	if err != nil {
		t.Fatalf("Effective: %v", err)
	}
	text := string(out)
	const want = `connectors:
  sku_map: /etc/ordersync/sku-map.csv
  kaspi:
    type: kaspi
    enabled: true
    base_url: http://127.0.0.1:8091/shop/api/v2
    token: '***'
    poll_interval: 30s
    lookback: 24h
    accept_orders: false
    warehouse: Алматы-1
    states: [NEW, PICKUP]
    statuses: [APPROVED_BY_BANK, ACCEPTED_BY_MERCHANT]
    page_size: 50
    timeout: 10s
    rate_per_second: 2
    returns:
      enabled: true
      poll_interval: 10m
    max_response: 8MiB
    stores: {}
    feed_token: ""
    company: ""
    merchant_id: ""
    onec:
      organization: ""
      partner: ""
      counterparty: ""
      agreement: ""
      warehouse: ""
  ozon:
    type: ozon
    enabled: true
    base_url: http://127.0.0.1:8092
    client_id: "123456"
    api_key: '***'
    api_version: v3
    poll_interval: 2m
    lookback: 48h
    warehouse: WH2
    acknowledge: true
    page_size: 1000
    timeout: 15s
    rate_per_second: 20
    returns:
      enabled: true
      poll_interval: 10m
    max_response: 32MiB
    stock_warehouses: {}
    onec:
      organization: ""
      partner: ""
      counterparty: ""
      agreement: ""
      warehouse: ""
  wildberries:
    type: wildberries
    enabled: true
    base_url: http://127.0.0.1:8093
    token: '***'
    poll_interval: 5m
    lookback: 120h
    warehouse: WH3
    acknowledge: true
    supply_name: Поставка ordersync
    page_size: 1
    timeout: 1m
    rate_per_second: 1
    returns:
      enabled: true
      poll_interval: 1h
      base_url: http://127.0.0.1:8094
    max_response: 2MB
    stock_warehouses: {}
    content_url: https://content-api.wildberries.ru
    onec:
      organization: ""
      partner: ""
      counterparty: ""
      agreement: ""
      warehouse: ""
  yandex_market:
    type: yandex_market
    enabled: false
    base_url: https://api.partner.market.yandex.ru
    api_key: ""
    business_id: ""
    campaign_id: ""
    orders_api: campaign
    poll_interval: 1m
    lookback: 72h
    warehouse: ""
    acknowledge: false
    page_size: 50
    timeout: 30s
    rate_per_second: 2
    max_response: 16MiB
    stock_api: campaign
    stock_warehouse: ""
    partner_warehouse_id: ""
    onec:
      organization: ""
      partner: ""
      counterparty: ""
      agreement: ""
      warehouse: ""
  uzum:
    type: uzum
    enabled: false
    base_url: https://api-seller.uzum.uz/api/seller-openapi
    token: ""
    shop_ids: []
    poll_interval: 1m
    lookback: 72h
    warehouse: ""
    acknowledge: false
    page_size: 50
    timeout: 30s
    rate_per_second: 3
    max_response: 16MiB
    stock_warehouse: ""
    onec:
      organization: ""
      partner: ""
      counterparty: ""
      agreement: ""
      warehouse: ""
webhooks:
`
	if !strings.Contains(text, want) {
		t.Errorf("effective configuration:\n%s\nwant it to contain:\n%s", text, want)
	}
	for _, s := range []string{kaspiToken, ozonKey, wbToken} {
		if strings.Contains(text, s) {
			t.Errorf("effective configuration shows secret %q:\n%s", s, text)
		}
	}

	// Round trip: the output, secrets restored in order, loads to the same
	// configuration.
	restored := text
	for _, s := range []string{kaspiToken, ozonKey, wbToken} {
		restored = strings.Replace(restored, ": '***'\n", ": "+s+"\n", 1)
	}
	again, err := loadWithFiles(t, restored, files{"/etc/ordersync/sku-map.csv": skuMapCSV})
	if err != nil {
		t.Fatalf("Load(effective): %v\n%s", err, restored)
	}
	if !reflect.DeepEqual(again, cfg) {
		t.Errorf("round trip:\n got %+v\nwant %+v\nfrom:\n%s", again.Connectors, cfg.Connectors, restored)
	}

	// Unset credentials print empty, not masked; an empty list prints as [].
	cfg = mustLoadYAML(t, "connectors:\n  kaspi:\n    statuses: []\n")
	out, err = cfg.Effective()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"    token: \"\"\n", "    api_key: \"\"\n", "    statuses: []\n"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("effective configuration lacks %q:\n%s", want, out)
		}
	}
	if again := mustLoadYAML(t, string(out)); !reflect.DeepEqual(again, cfg) {
		t.Errorf("round trip of defaults:\n got %+v\nwant %+v", again.Connectors, cfg.Connectors)
	}
}

func TestConnectorsRequiredWhenEnabled(t *testing.T) {
	t.Parallel()
	_, err := loadYAML(t, `
connectors:
  kaspi: {enabled: true}
  ozon: {enabled: true}
  wildberries: {enabled: true}
`)
	var got []string
	for _, p := range problemsOf(t, err) {
		got = append(got, p.Key)
	}
	want := []string{
		"connectors.kaspi.warehouse", "connectors.kaspi.token",
		"connectors.ozon.warehouse", "connectors.ozon.client_id", "connectors.ozon.api_key",
		"connectors.wildberries.warehouse", "connectors.wildberries.token",
	}
	if !slices.Equal(got, want) {
		t.Errorf("problem keys = %q, want %q\n%v", got, want, err)
	}
	wantProblem(t, err, "connectors.kaspi.token", "required when connectors.kaspi.enabled is true", "connectors.kaspi.token_file")
	wantProblem(t, err, "connectors.ozon.api_key", "required when connectors.ozon.enabled is true", "connectors.ozon.api_key_file")
	wantProblem(t, err, "connectors.ozon.client_id", "required when connectors.ozon.enabled is true")
	wantProblem(t, err, "connectors.wildberries.token", "required when connectors.wildberries.enabled is true", "connectors.wildberries.token_file")
	wantProblem(t, err, "connectors.kaspi.warehouse", "required when connectors.kaspi.enabled is true", "1C warehouse")

	// Enabled from the environment, the same.
	_, err = loadYAML(t, "", "ORDERSYNC_CONNECTORS__KASPI__ENABLED=true", "ORDERSYNC_CONNECTORS__KASPI__WAREHOUSE=WH1")
	wantProblem(t, err, "connectors.kaspi.token", "required when connectors.kaspi.enabled is true")
	if n := len(problemsOf(t, err)); n != 1 {
		t.Errorf("got %d problems, want 1:\n%v", n, err)
	}

	// With its required keys, each loads on defaults for the rest.
	for _, name := range typeNames() {
		if _, err := loadYAML(t, "", enabledEnv(name)...); err != nil {
			t.Errorf("%s enabled with its required keys: %v", name, err)
		}
	}
}

func TestConnectorsValidation(t *testing.T) {
	t.Parallel()
	enabled := map[string][]string{
		"kaspi":       {"enabled: true", "token: " + kaspiToken, "warehouse: WH1"},
		"ozon":        {"enabled: true", "client_id: '123456'", "api_key: " + ozonKey, "warehouse: WH1"},
		"wildberries": {"enabled: true", "token: " + wbToken, "warehouse: WH1"},
	}
	// section returns connector name enabled, with lines added or replacing its
	// required keys.
	section := func(name string, lines ...string) string {
		s := "connectors:\n  " + name + ":\n"
		for _, l := range append(slices.Clone(enabled[name]), lines...) {
			key, _, _ := strings.Cut(l, ":")
			if !slices.ContainsFunc(lines, func(o string) bool { return o != l && strings.HasPrefix(o, key+":") }) {
				s += "    " + l + "\n"
			}
		}
		return s
	}
	for _, tc := range []struct {
		src, key, msg string
	}{
		{section("kaspi", "base_url: ''"), "connectors.kaspi.base_url", "is required when connectors.kaspi.enabled is true"},
		{section("kaspi", "base_url: kaspi.kz/shop/api/v2"), "connectors.kaspi.base_url", "absolute http:// or https:// URL"},
		{section("kaspi", "base_url: ftp://kaspi.kz/shop"), "connectors.kaspi.base_url", "absolute http:// or https:// URL"},
		{section("kaspi", "base_url: https://u:hunter2@kaspi.kz/shop"), "connectors.kaspi.base_url", "must not contain a user name or password"},
		{section("ozon", "base_url: 'https://api-seller.ozon.ru/?x=1'"), "connectors.ozon.base_url", "must not have a query or fragment"},
		{section("kaspi", "poll_interval: 0s"), "connectors.kaspi.poll_interval", "must be greater than 0, got 0s"},
		{section("ozon", "lookback: -1h"), "connectors.ozon.lookback", "must be greater than 0, got -1h"},
		{section("wildberries", "poll_interval: 10m", "lookback: 5m"), "connectors.wildberries.lookback",
			"must be at least connectors.wildberries.poll_interval (10m), got 5m"},
		{section("kaspi", "timeout: 0s"), "connectors.kaspi.timeout", "must be greater than 0, got 0s"},
		{section("kaspi", "page_size: 0"), "connectors.kaspi.page_size", "must be between 1 and 100, got 0"},
		{section("kaspi", "page_size: 101"), "connectors.kaspi.page_size", "must be between 1 and 100, got 101"},
		{section("ozon", "page_size: 1001"), "connectors.ozon.page_size", "must be between 1 and 1000, got 1001"},
		{section("wildberries", "page_size: 0"), "connectors.wildberries.page_size", "must be between 1 and 1000, got 0"},
		{section("wildberries", "page_size: 1001"), "connectors.wildberries.page_size", "must be between 1 and 1000, got 1001"},
		{section("kaspi", "rate_per_second: 0"), "connectors.kaspi.rate_per_second", "must be greater than 0, got 0"},
		{section("ozon", "rate_per_second: -1"), "connectors.ozon.rate_per_second", "must be greater than 0, got -1"},
		{section("wildberries", "rate_per_second: 0"), "connectors.wildberries.rate_per_second", "must be greater than 0, got 0"},
		{section("ozon", "api_version: v5"), "connectors.ozon.api_version", `must be one of v4, v3, got "v5"`},
		{section("ozon", "api_version: ''"), "connectors.ozon.api_version", `must be one of v4, v3, got ""`},
		{section("kaspi", "warehouse: '  '"), "connectors.kaspi.warehouse", "is required when connectors.kaspi.enabled is true"},
		{section("kaspi", "states: []"), "connectors.kaspi.states", "must list at least one order state, such as NEW"},
		{section("kaspi", "statuses: []"), "connectors.kaspi.statuses", "must list at least one order status, such as APPROVED_BY_BANK"},
		{section("kaspi", "states: [NEW, '']"), "connectors.kaspi.states[1]", "must not be empty"},
		{section("kaspi", "statuses: [APPROVED_BY_BANK, ' ']"), "connectors.kaspi.statuses[1]", "must not be empty"},
		{section("kaspi", "states: [NEW, PICKUP, NEW]"), "connectors.kaspi.states[2]", `"NEW" is listed twice`},
		{section("wildberries", "acknowledge: true", "supply_name: ''"), "connectors.wildberries.supply_name",
			"is required when connectors.wildberries.acknowledge is true"},
		{section("wildberries", "acknowledge: true", "supply_name: "+strings.Repeat("я", 129)), "connectors.wildberries.supply_name",
			"must be at most 128 characters, got 129"},
		{section("ozon", "client_id: \"12\\n34\""), "connectors.ozon.client_id", "control characters"},
		{section("kaspi", "token: \""+kaspiToken+"\\n"+kaspiToken+"\""), "connectors.kaspi.token", "control characters"},
	} {
		_, err := loadYAML(t, tc.src)
		wantProblem(t, err, tc.key, tc.msg)
		noSecrets(t, err)
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("error shows a password:\n%v", err)
		}
	}

	// Good values at the edges of the ranges.
	for _, src := range []string{
		section("kaspi", "page_size: 1", "lookback: 1m", "poll_interval: 1m"),
		section("kaspi", "page_size: 100"),
		section("ozon", "page_size: 1", "api_version: V3"),
		section("wildberries", "page_size: 1000", "supply_name: "+strings.Repeat("я", 128), "acknowledge: true"),
		section("wildberries", "supply_name: ''"), // not used without acknowledge
	} {
		if _, err := loadYAML(t, src); err != nil {
			t.Errorf("Load(%q): %v", src, err)
		}
	}
}

func TestConnectorsTypes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		src, key  string
		fragments []string
	}{
		{"connectors:\n  kaspi:\n    enabled: yes\n", "connectors.kaspi.enabled", []string{"true or false", `"yes"`}},
		{"connectors:\n  kaspi:\n    page_size: many\n", "connectors.kaspi.page_size", []string{"whole number", `"many"`}},
		{"connectors:\n  kaspi:\n    states: NEW\n", "connectors.kaspi.states", []string{"must be a list", `"NEW"`}},
		{"connectors:\n  ozon:\n    client_id: 123456\n", "connectors.ozon.client_id", []string{"must be a string", "123456", "quotes"}},
		{"connectors:\n  ozon:\n    api_key: 987654321\n", "connectors.ozon.api_key", []string{"must be a string", "a number"}},
		{"connectors:\n  wildberries:\n    poll_interval: 60\n", "connectors.wildberries.poll_interval", []string{"30s", "got 60"}},
		{"connectors:\n  wildberries: true\n", "connectors.wildberries", []string{"section", "true"}},
		{"connectors:\n  kaspi:\n    tokne: x\n", "connectors.kaspi.tokne", []string{"unknown key", "did you mean connectors.kaspi.token?"}},
	} {
		_, err := loadYAML(t, tc.src)
		wantProblem(t, err, tc.key, tc.fragments...)
		if err != nil && strings.Contains(err.Error(), "987654321") {
			t.Errorf("error shows a secret:\n%v", err)
		}
	}
	for _, tc := range []struct {
		env, key  string
		fragments []string
	}{
		{"ORDERSYNC_CONNECTORS__KASPI__RATE_PER_SECOND=2.5", "connectors.kaspi.rate_per_second",
			[]string{"whole number", `"2.5"`, "ORDERSYNC_CONNECTORS__KASPI__RATE_PER_SECOND"}},
		{"ORDERSYNC_CONNECTORS__OZON__LOOKBACK=3d", "connectors.ozon.lookback", []string{"30s", `"3d"`, "ORDERSYNC_CONNECTORS__OZON__LOOKBACK"}},
		{"ORDERSYNC_CONNECTORS__KASPI__TOKNE=x", "connectors.kaspi.tokne", []string{"unknown key", "did you mean ORDERSYNC_CONNECTORS__KASPI__TOKEN?"}},
	} {
		_, err := loadYAML(t, "", tc.env)
		wantProblem(t, err, tc.key, tc.fragments...)
	}
}

func TestConnectorsDisabledNotValidated(t *testing.T) {
	t.Parallel()
	// Values that would each be a problem in an enabled connector.
	cfg := mustLoadYAML(t, `
connectors:
  kaspi:
    enabled: false
    base_url: not a url
    poll_interval: 0s
    lookback: 1s
    states: []
    statuses: ['']
    page_size: 1000
    timeout: -1s
    rate_per_second: 0
  ozon:
    api_version: v9
    page_size: 0
  wildberries:
    acknowledge: true
    supply_name: ""
`)
	if cfg.Connectors.Kaspi.Enabled || cfg.Connectors.Ozon.Enabled || cfg.Connectors.Wildberries.Enabled {
		t.Errorf("connectors enabled: %+v", cfg.Connectors)
	}
	// The same from the environment.
	if _, err := loadYAML(t, "", "ORDERSYNC_CONNECTORS__OZON__PAGE_SIZE=0", "ORDERSYNC_CONNECTORS__KASPI__STATES="); err != nil {
		t.Errorf("Load: %v", err)
	}
	// Enabling one is what brings its checks in, and only its.
	_, err := loadYAML(t, "connectors:\n  ozon:\n    page_size: 0\n  kaspi:\n    page_size: 0\n", enabledEnv("ozon")...)
	wantProblem(t, err, "connectors.ozon.page_size", "must be between 1 and 1000, got 0")
	if n := len(problemsOf(t, err)); n != 1 {
		t.Errorf("got %d problems, want 1 (kaspi is not enabled):\n%v", n, err)
	}
}

func TestConnectorsSKUMap(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "sku-map.csv")
	if err := os.WriteFile(path, []byte(skuMapCSV), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(LoadOptions{Path: testPath, PathExplicit: true, Environ: []string{"ORDERSYNC_CONNECTORS__SKU_MAP=" + path},
		ReadFile: func(name string) ([]byte, error) {
			if name == testPath {
				return nil, nil
			}
			return os.ReadFile(name)
		}})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if got, want := cfg.Connectors.SKUMap, path; got != want {
		t.Errorf("connectors.sku_map = %q, want %q", got, want)
	}

	// Checked whether or not a connector is enabled.
	missing := filepath.Join(dir, "no-such-map.csv")
	_, err = loadYAML(t, "connectors:\n  sku_map: "+missing+"\n")
	wantProblem(t, err, "connectors.sku_map", "cannot read "+missing, "no such file")

	// A directory is not a file it can read.
	_, err = Load(LoadOptions{Path: testPath, PathExplicit: true, Environ: []string{"ORDERSYNC_CONNECTORS__SKU_MAP=" + dir},
		ReadFile: func(name string) ([]byte, error) {
			if name == testPath {
				return nil, nil
			}
			return os.ReadFile(name)
		}})
	wantProblem(t, err, "connectors.sku_map", "cannot read "+dir)

	// Empty is the identity map, and nothing is read.
	var read []string
	_, err = Load(LoadOptions{Path: testPath, PathExplicit: true, Environ: []string{},
		ReadFile: func(name string) ([]byte, error) {
			read = append(read, name)
			return []byte("connectors:\n  sku_map: ''\n"), nil
		}})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if !slices.Equal(read, []string{testPath}) {
		t.Errorf("files read = %q, want only the config file", read)
	}
}

func TestRelayConnectorNotEnabled(t *testing.T) {
	t.Parallel()
	const src = `
relay:
  destinations:
    kaspi:
      type: connector
      connector: kaspi
      events: [order.created]
    wb_ack:
      type: connector
      connector: wildberries
      events: [order.created]
    halyk:
      type: connector
      connector: halyk
      events: [order.created]
    crm:
      type: webhook
      url: https://crm.example.kz/hooks
      secrets: [` + testSecret + `]
      events: [order.created]
`
	_, err := loadYAML(t, src)
	wantProblem(t, err, "relay.destinations.kaspi.connector", "connector kaspi is not enabled (connectors.kaspi.enabled)")
	wantProblem(t, err, "relay.destinations.wb_ack.connector", "connector wildberries is not enabled (connectors.wildberries.enabled)")
	// An unknown connector is said to be unknown, once.
	var got []string
	for _, p := range problemsOf(t, err) {
		got = append(got, p.Key)
	}
	slices.Sort(got)
	if want := []string{"relay.destinations.halyk.connector", "relay.destinations.kaspi.connector", "relay.destinations.wb_ack.connector"}; !slices.Equal(got, want) {
		t.Errorf("problem keys = %q, want %q\n%v", got, want, err)
	}
	wantProblem(t, err, "relay.destinations.halyk.connector", `unknown connector "halyk"`)

	// Enabled, from the file or the environment, the destinations are fine.
	src2 := strings.Replace(src, "    halyk:\n      type: connector\n      connector: halyk\n      events: [order.created]\n", "", 1)
	env := append(enabledEnv("kaspi"), enabledEnv("wildberries")...)
	if _, err := loadYAML(t, src2, env...); err != nil {
		t.Errorf("Load with the connectors enabled: %v", err)
	}
	_, err = loadYAML(t, src2, enabledEnv("kaspi")...)
	wantProblem(t, err, "relay.destinations.wb_ack.connector", "connector wildberries is not enabled")
	if n := len(problemsOf(t, err)); n != 1 {
		t.Errorf("got %d problems, want 1:\n%v", n, err)
	}
	// Disabled explicitly in the environment over an enabled file.
	_, err = loadYAML(t, src2+"connectors:\n  kaspi: {enabled: true, token: t, warehouse: WH1}\n",
		append(enabledEnv("wildberries"), "ORDERSYNC_CONNECTORS__KASPI__ENABLED=false")...)
	wantProblem(t, err, "relay.destinations.kaspi.connector", "connector kaspi is not enabled")
}

// TestAccountTypes keeps the account types in step with the sections of Connectors:
// each type's first account is the section named as the type.
func TestAccountTypes(t *testing.T) {
	t.Parallel()
	var sections []string
	typ := reflect.TypeFor[Connectors]()
	for i := range typ.NumField() {
		if f := typ.Field(i); f.Type.Kind() == reflect.Struct {
			sections = append(sections, f.Tag.Get("koanf"))
		}
	}
	if !slices.Equal(sections, typeNames()) {
		t.Errorf("connector sections %q, account types %q", sections, typeNames())
	}
	var c Connectors
	for _, name := range typeNames() {
		if c.enabled(name) {
			t.Errorf("enabled(%q) on zero Connectors = true", name)
		}
		v := reflect.ValueOf(&c).Elem().FieldByIndex(fieldIndex(t, typ, name))
		v.FieldByName("Enabled").SetBool(true)
		if !c.enabled(name) {
			t.Errorf("enabled(%q) = false with its enabled key set", name)
		}
	}
	if c.enabled("halyk") {
		t.Error(`enabled("halyk") = true`)
	}
}

func fieldIndex(t *testing.T, typ reflect.Type, tag string) []int {
	t.Helper()
	for i := range typ.NumField() {
		if typ.Field(i).Tag.Get("koanf") == tag {
			return []int{i}
		}
	}
	t.Fatalf("%s has no field tagged %q", typ, tag)
	return nil
}
