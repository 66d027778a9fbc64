package config

import (
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// Credentials of the webhook tests; an error or the effective configuration that
// shows one of them leaks a secret.
const (
	b24Token   = "b24-app-token-4q9zk"
	b24Code    = "k3y7c0de9x"
	b24RESTURL = "https://portal.bitrix24.kz/rest/1/" + b24Code + "/"
)

// noWebhookSecrets fails if text (an error, an output) shows one of the webhook tests' secrets.
func noWebhookSecrets(t *testing.T, text string) {
	t.Helper()
	for _, s := range []string{testSecret, testSecret2, testSecret3, "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", b24Token, b24Code, ozonKey} {
		if strings.Contains(text, s) {
			t.Errorf("shows secret %q:\n%s", s, text)
		}
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// problemKeys returns the keys of err's problems, in order.
func problemKeys(t *testing.T, err error) []string {
	t.Helper()
	var keys []string
	for _, p := range problemsOf(t, err) {
		keys = append(keys, p.Key)
	}
	return keys
}

// webhooksYAML sets every key of http and webhooks away from its default.
const webhooksYAML = `
http:
  listen: "[::1]:0"
  read_timeout: 5s
  write_timeout: 7s
  idle_timeout: 2m
  shutdown_timeout: 3s
connectors:
  ozon:
    client_id: "123456"
    api_key: ` + ozonKey + `
webhooks:
  max_body: 512KiB
  tolerance: 2m
  sources:
    site:
      secrets: [` + testSecret + `, ` + testSecret2 + `]
    crm-2:
      secrets: [` + testSecret3 + `]
  ozon:
    enabled: true
    allow_networks: [195.34.21.0/24, 10.1.2.3, 2001:db8::/32]
    trusted_proxies: [127.0.0.1, "::1"]
  bitrix24:
    enabled: true
    application_token: ` + b24Token + `
    rest_url: ` + b24RESTURL + `
    create_stages: [WON, "C1:WON"]
    warehouse: Алматы-1
    sku_field: PROPERTY_105
    rate_per_second: 1
    timeout: 15s
    max_response: 4MiB
`

func webhooksWant() (HTTP, Webhooks) {
	return HTTP{
			Listen:          "[::1]:0",
			ReadTimeout:     5 * time.Second,
			WriteTimeout:    7 * time.Second,
			IdleTimeout:     2 * time.Minute,
			ShutdownTimeout: 3 * time.Second,
		}, Webhooks{
			MaxBody:   512 << 10,
			Tolerance: 2 * time.Minute,
			Sources: map[string]WebhookSource{
				"site":  {Secrets: []string{testSecret, testSecret2}},
				"crm-2": {Secrets: []string{testSecret3}},
			},
			Ozon: OzonWebhook{
				Enabled:        true,
				AllowNetworks:  []string{"195.34.21.0/24", "10.1.2.3", "2001:db8::/32"},
				TrustedProxies: []string{"127.0.0.1", "::1"},
			},
			Bitrix24: Bitrix24Webhook{
				Enabled:          true,
				ApplicationToken: b24Token,
				RESTURL:          b24RESTURL,
				CreateStages:     []string{"WON", "C1:WON"},
				Warehouse:        "Алматы-1",
				SKUField:         "PROPERTY_105",
				RatePerSecond:    1,
				Timeout:          15 * time.Second,
				MaxResponse:      4 << 20,
			},
		}
}

func TestWebhooksFile(t *testing.T) {
	t.Parallel()
	cfg := mustLoadYAML(t, webhooksYAML)
	wantHTTP, wantWebhooks := webhooksWant()
	if !reflect.DeepEqual(cfg.HTTP, wantHTTP) {
		t.Errorf("http:\n got %+v\nwant %+v", cfg.HTTP, wantHTTP)
	}
	if !reflect.DeepEqual(cfg.Webhooks, wantWebhooks) {
		t.Errorf("webhooks:\n got %+v\nwant %+v", cfg.Webhooks, wantWebhooks)
	}
	// The connector is not enabled: it is not polled, only its credentials used.
	if cfg.Connectors.Ozon.Enabled {
		t.Error("connectors.ozon.enabled = true, want false")
	}

	// A partial section keeps the defaults of the keys it leaves out.
	cfg = mustLoadYAML(t, "http:\n  read_timeout: 1s\nwebhooks:\n  bitrix24:\n    timeout: 1s\n")
	if got, want := cfg.HTTP.Listen, "127.0.0.1:8080"; got != want {
		t.Errorf("http.listen = %q, want %q", got, want)
	}
	if got, want := cfg.Webhooks.Bitrix24.CreateStages, []string{"WON"}; !slices.Equal(got, want) {
		t.Errorf("webhooks.bitrix24.create_stages = %q, want %q", got, want)
	}
	if got, want := cfg.Webhooks.MaxBody, int64(1<<20); got != want {
		t.Errorf("webhooks.max_body = %d, want %d", got, want)
	}
}

func TestWebhooksEnv(t *testing.T) {
	t.Parallel()
	fsys := files{
		testPath:                             "",
		"/run/credentials/site":              "# rotated 2026-09-01\n" + testSecret3 + "\n" + testSecret + "\n",
		"/run/credentials/b24-token":         b24Token + "\n",
		"/run/credentials/b24-rest-url":      b24RESTURL + "\n",
		"/run/credentials/crm-2-webhook-key": testSecret2 + "\n",
	}
	cfg, err := Load(LoadOptions{Path: testPath, PathExplicit: true, ReadFile: fsys.ReadFile, Environ: []string{
		"ORDERSYNC_HTTP__LISTEN=:9000",
		"ORDERSYNC_HTTP__READ_TIMEOUT=5s",
		"ORDERSYNC_HTTP__WRITE_TIMEOUT=7s",
		"ORDERSYNC_HTTP__IDLE_TIMEOUT=2m",
		"ORDERSYNC_HTTP__SHUTDOWN_TIMEOUT=3s",
		"ORDERSYNC_WEBHOOKS__MAX_BODY=2MB",
		"ORDERSYNC_WEBHOOKS__TOLERANCE=1m",
		"ORDERSYNC_WEBHOOKS__SOURCES__SITE__SECRETS_FILE=/run/credentials/site",
		"ORDERSYNC_WEBHOOKS__SOURCES__CRM_2__SECRETS_FILE=/run/credentials/crm-2-webhook-key",
		"ORDERSYNC_WEBHOOKS__SOURCES__SHOP__SECRETS=" + testSecret + ", " + testSecret2,
		"ORDERSYNC_WEBHOOKS__OZON__ENABLED=true",
		"ORDERSYNC_WEBHOOKS__OZON__ALLOW_NETWORKS=195.34.21.0/24, 10.0.0.0/8,",
		"ORDERSYNC_WEBHOOKS__OZON__TRUSTED_PROXIES=127.0.0.1",
		"ORDERSYNC_CONNECTORS__OZON__CLIENT_ID=123456",
		"ORDERSYNC_CONNECTORS__OZON__API_KEY=" + ozonKey,
		"ORDERSYNC_WEBHOOKS__BITRIX24__ENABLED=true",
		"ORDERSYNC_WEBHOOKS__BITRIX24__APPLICATION_TOKEN_FILE=/run/credentials/b24-token",
		"ORDERSYNC_WEBHOOKS__BITRIX24__REST_URL_FILE=/run/credentials/b24-rest-url",
		"ORDERSYNC_WEBHOOKS__BITRIX24__CREATE_STAGES=WON,C1:WON",
		"ORDERSYNC_WEBHOOKS__BITRIX24__WAREHOUSE=WH1",
		"ORDERSYNC_WEBHOOKS__BITRIX24__SKU_FIELD=PROPERTY_105",
		"ORDERSYNC_WEBHOOKS__BITRIX24__RATE_PER_SECOND=1",
		"ORDERSYNC_WEBHOOKS__BITRIX24__TIMEOUT=15s",
		"ORDERSYNC_WEBHOOKS__BITRIX24__MAX_RESPONSE=4194304",
	}})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	wantHTTP := HTTP{Listen: ":9000", ReadTimeout: 5 * time.Second, WriteTimeout: 7 * time.Second,
		IdleTimeout: 2 * time.Minute, ShutdownTimeout: 3 * time.Second}
	if !reflect.DeepEqual(cfg.HTTP, wantHTTP) {
		t.Errorf("http:\n got %+v\nwant %+v", cfg.HTTP, wantHTTP)
	}
	want := Webhooks{
		MaxBody:   2_000_000,
		Tolerance: time.Minute,
		Sources: map[string]WebhookSource{
			"site":  {Secrets: []string{testSecret3, testSecret}},
			"crm_2": {Secrets: []string{testSecret2}},
			"shop":  {Secrets: []string{testSecret, testSecret2}},
		},
		Ozon: OzonWebhook{
			Enabled:        true,
			AllowNetworks:  []string{"195.34.21.0/24", "10.0.0.0/8"},
			TrustedProxies: []string{"127.0.0.1"},
		},
		Bitrix24: Bitrix24Webhook{
			Enabled:          true,
			ApplicationToken: b24Token,
			RESTURL:          b24RESTURL,
			CreateStages:     []string{"WON", "C1:WON"},
			Warehouse:        "WH1",
			SKUField:         "PROPERTY_105",
			RatePerSecond:    1,
			Timeout:          15 * time.Second,
			MaxResponse:      4 << 20,
		},
	}
	if !reflect.DeepEqual(cfg.Webhooks, want) {
		t.Errorf("webhooks from the environment:\n got %+v\nwant %+v", cfg.Webhooks, want)
	}

	// The environment wins over the file, a list replacing the file's list.
	cfg = mustLoadYAML(t, webhooksYAML,
		"ORDERSYNC_HTTP__LISTEN=127.0.0.1:8181",
		"ORDERSYNC_WEBHOOKS__OZON__ALLOW_NETWORKS=91.223.93.0/24",
		"ORDERSYNC_WEBHOOKS__OZON__TRUSTED_PROXIES=",
		"ORDERSYNC_WEBHOOKS__SOURCES__SITE__SECRETS="+testSecret3,
	)
	if got, want := cfg.HTTP.Listen, "127.0.0.1:8181"; got != want {
		t.Errorf("http.listen = %q, want %q", got, want)
	}
	if got, want := cfg.Webhooks.Ozon.AllowNetworks, []string{"91.223.93.0/24"}; !slices.Equal(got, want) {
		t.Errorf("webhooks.ozon.allow_networks = %q, want %q", got, want)
	}
	if got := cfg.Webhooks.Ozon.TrustedProxies; got != nil {
		t.Errorf("webhooks.ozon.trusted_proxies = %q, want none (an empty variable is an empty list)", got)
	}
	if got, want := cfg.Webhooks.Sources["site"].Secrets, []string{testSecret3}; !slices.Equal(got, want) {
		t.Errorf("webhooks.sources.site.secrets = %q, want %q", got, want)
	}
	if got, want := cfg.Webhooks.Sources["crm-2"].Secrets, []string{testSecret3}; !slices.Equal(got, want) {
		t.Errorf("webhooks.sources.crm-2.secrets = %q, want %q (file, not overridden)", got, want)
	}
}

func TestWebhooksMaxBody(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		yaml string
		want int64
	}{
		{"1MiB", 1 << 20},
		{"512KiB", 512 << 10},
		{"2MB", 2_000_000},
		{"1048576", 1 << 20},
		{"'1048576'", 1 << 20},
		{"1024B", 1024},
		{"1KiB", 1024},
		{"64MiB", 64 << 20},
		{"1 mib", 1 << 20},
	} {
		cfg, err := loadYAML(t, "webhooks:\n  max_body: "+tc.yaml+"\n")
		if err != nil {
			t.Errorf("max_body: %s: %v", tc.yaml, err)
			continue
		}
		if got := cfg.Webhooks.MaxBody; got != tc.want {
			t.Errorf("max_body: %s = %d, want %d", tc.yaml, got, tc.want)
		}
		env := strings.Trim(tc.yaml, "'")
		cfg, err = loadYAML(t, "", "ORDERSYNC_WEBHOOKS__MAX_BODY="+env)
		if err != nil {
			t.Errorf("ORDERSYNC_WEBHOOKS__MAX_BODY=%s: %v", env, err)
			continue
		}
		if got := cfg.Webhooks.MaxBody; got != tc.want {
			t.Errorf("ORDERSYNC_WEBHOOKS__MAX_BODY=%s = %d, want %d", env, got, tc.want)
		}
	}

	const forms = "1MiB, 512KiB, 2MB or 1048576"
	for _, tc := range []struct {
		yaml      string
		fragments []string
	}{
		{"1.5MiB", []string{forms, `got "1.5MiB"`, testPath}},
		{"1.5", []string{forms, "got 1.5"}},
		{"1M", []string{forms, `got "1M"`}},
		{"lots", []string{forms, `got "lots"`}},
		{"[1MiB]", []string{forms, "a list"}},
		{"true", []string{forms, "got true"}},
		{"1023", []string{"must be between 1KiB and 64MiB, got 1023"}},
		{"65MiB", []string{"must be between 1KiB and 64MiB, got 65MiB"}},
		{"0", []string{"must be between 1KiB and 64MiB, got 0"}},
		{"-1", []string{"must be between 1KiB and 64MiB, got -1"}},
		{"18446744073709551615", []string{forms, "18446744073709551615"}},
	} {
		_, err := loadYAML(t, "webhooks:\n  max_body: "+tc.yaml+"\n")
		wantProblem(t, err, "webhooks.max_body", tc.fragments...)
	}
	_, err := loadYAML(t, "", "ORDERSYNC_WEBHOOKS__MAX_BODY=1.5MiB")
	wantProblem(t, err, "webhooks.max_body", forms, "KiB, MiB, GiB count 1024", `"1.5MiB"`, "ORDERSYNC_WEBHOOKS__MAX_BODY")
	_, err = loadYAML(t, "", "ORDERSYNC_WEBHOOKS__MAX_BODY=100MiB")
	wantProblem(t, err, "webhooks.max_body", "must be between 1KiB and 64MiB, got 100MiB")
}

func TestHTTPValidation(t *testing.T) {
	t.Parallel()
	for _, listen := range []string{"127.0.0.1:8080", ":8080", ":0", "0.0.0.0:65535", "[::1]:8080", "[::]:80",
		"localhost:8080", "ordersync.internal:8080", "[fe80::1%eth0]:8080", ""} {
		cfg, err := loadYAML(t, "http:\n  listen: '"+listen+"'\n")
		if err != nil {
			t.Errorf("http.listen %q: %v", listen, err)
			continue
		}
		if cfg.HTTP.Listen != listen {
			t.Errorf("http.listen = %q, want %q", cfg.HTTP.Listen, listen)
		}
	}
	for _, tc := range []struct {
		listen, msg string
	}{
		{"8080", `must be host:port such as 127.0.0.1:8080 or :8080 (every interface), or empty to disable the server, got "8080"`},
		{"127.0.0.1", `must be host:port`},
		{"::1:8080", `must be host:port`},
		{"127.0.0.1:65536", `must have a port from 0 to 65535 (0: any free port), got "127.0.0.1:65536"`},
		{"127.0.0.1:-1", `must have a port from 0 to 65535`},
		{"127.0.0.1:+80", `must have a port from 0 to 65535`},
		{"127.0.0.1:http", `must have a port from 0 to 65535`},
		{"127.0.0.1:", `must have a port from 0 to 65535`},
		{"bad host:8080", `must have an IP address or a host name before the port, got "bad host:8080"`},
		{"-x.example:8080", `must have an IP address or a host name`},
	} {
		_, err := loadYAML(t, "http:\n  listen: '"+tc.listen+"'\n")
		wantProblem(t, err, "http.listen", tc.msg)
	}
	_, err := loadYAML(t, "", "ORDERSYNC_HTTP__LISTEN=8080")
	wantProblem(t, err, "http.listen", `got "8080"`)

	_, err = loadYAML(t, "http:\n  read_timeout: 0s\n  write_timeout: -1s\n  idle_timeout: 0s\n  shutdown_timeout: 0s\n")
	wantProblem(t, err, "http.read_timeout", "must be greater than 0, got 0s")
	wantProblem(t, err, "http.write_timeout", "must be greater than 0, got -1s")
	wantProblem(t, err, "http.idle_timeout", "must be greater than 0, got 0s")
	wantProblem(t, err, "http.shutdown_timeout", "must be greater than 0, got 0s")
	_, err = loadYAML(t, "", "ORDERSYNC_HTTP__READ_TIMEOUT=10")
	wantProblem(t, err, "http.read_timeout", "30s", `"10"`, "ORDERSYNC_HTTP__READ_TIMEOUT")
	_, err = loadYAML(t, "webhooks:\n  tolerance: 0s\n")
	wantProblem(t, err, "webhooks.tolerance", "must be greater than 0, got 0s")
}

func TestWebhooksNeedTheServer(t *testing.T) {
	t.Parallel()
	// Nothing to receive: the server may be off.
	if _, err := loadYAML(t, "http:\n  listen: ''\n"); err != nil {
		t.Errorf("http.listen empty without senders: %v", err)
	}
	_, err := loadYAML(t, "http:\n  listen: ''\nwebhooks:\n  sources:\n    site:\n      secrets: ["+testSecret+"]\n",
		append(enabledEnv("ozon"), "ORDERSYNC_WEBHOOKS__OZON__ENABLED=true")...)
	wantProblem(t, err, "http.listen", "disables the HTTP server", "webhooks.sources.site, webhooks.ozon must receive webhooks")
	if got, want := problemKeys(t, err), []string{"http.listen"}; !slices.Equal(got, want) {
		t.Errorf("problem keys = %q, want %q\n%v", got, want, err)
	}
}

func TestWebhookSources(t *testing.T) {
	t.Parallel()
	// A source with every secret in the file, rotation included.
	dir := t.TempDir()
	secrets := filepath.Join(dir, "site-webhook-secrets")
	if err := os.WriteFile(secrets, []byte("# new, then old\n"+testSecret3+"\n\n  "+testSecret+"\r\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfgFile := filepath.Join(dir, "ordersync.yaml")
	if err := os.WriteFile(cfgFile, []byte("webhooks:\n  sources:\n    site:\n      secrets_file: "+secrets+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(LoadOptions{Path: cfgFile, PathExplicit: true, Environ: []string{}})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if got, want := cfg.Webhooks.Sources["site"].Secrets, []string{testSecret3, testSecret}; !slices.Equal(got, want) {
		t.Errorf("secrets from %s = %q, want %q", secrets, got, want)
	}

	// A 32-character name is allowed, from the file or the environment.
	long := strings.Repeat("s", 32)
	cfg = mustLoadYAML(t, "webhooks:\n  sources:\n    "+long+":\n      secrets: ["+testSecret+"]\n",
		"ORDERSYNC_WEBHOOKS__SOURCES__MY_SHOP__SECRETS="+testSecret2)
	if len(cfg.Webhooks.Sources) != 2 || cfg.Webhooks.Sources[long].Secrets == nil || cfg.Webhooks.Sources["my_shop"].Secrets == nil {
		t.Errorf("sources = %+v, want %s and my_shop", cfg.Webhooks.Sources, long)
	}
	// None is none, written either way.
	for _, src := range []string{"webhooks:\n  sources: {}\n", "webhooks:\n  sources:\n"} {
		if cfg := mustLoadYAML(t, src); cfg.Webhooks.Sources != nil {
			t.Errorf("Load(%q): sources = %+v, want none", src, cfg.Webhooks.Sources)
		}
	}

	for _, tc := range []struct {
		name      string
		src       string
		env       []string
		key       string
		fragments []string
	}{
		{"no secrets", "webhooks:\n  sources:\n    site: {}\n", nil,
			"webhooks.sources.site.secrets", []string{"at least one secret (whsec_…)", "webhooks.sources.site.secrets_file"}},
		{"empty list", "webhooks:\n  sources:\n    site:\n      secrets: []\n", nil,
			"webhooks.sources.site.secrets", []string{"at least one secret"}},
		{"empty variable", "", []string{"ORDERSYNC_WEBHOOKS__SOURCES__SITE__SECRETS="},
			"webhooks.sources.site.secrets", []string{"at least one secret"}},
		{"no prefix", "webhooks:\n  sources:\n    site:\n      secrets: [" + testSecret + ", MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw]\n", nil,
			"webhooks.sources.site.secrets[1]", []string{"must start with whsec_"}},
		{"not base64", "", []string{"ORDERSYNC_WEBHOOKS__SOURCES__SITE__SECRETS=" + testSecret2 + ",whsec_" + b24Token},
			"webhooks.sources.site.secrets[1]", []string{"standard base64"}},
		{"both forms", "webhooks:\n  sources:\n    site:\n      secrets: [" + testSecret + "]\n      secrets_file: /run/credentials/site\n", nil,
			"webhooks.sources.site.secrets", []string{"both", "webhooks.sources.site.secrets and webhooks.sources.site.secrets_file"}},
		{"file missing", "", []string{"ORDERSYNC_WEBHOOKS__SOURCES__SITE__SECRETS_FILE=/run/credentials/none"},
			"webhooks.sources.site.secrets_file", []string{"/run/credentials/none", "no such file"}},
		{"wrong type", "webhooks:\n  sources:\n    site:\n      secrets: " + testSecret + "\n", nil,
			"webhooks.sources.site.secrets", []string{"must be a list", "a string"}},
		{"ozon reserved", "webhooks:\n  sources:\n    ozon:\n      secrets: [" + testSecret + "]\n", nil,
			"webhooks.sources.ozon", []string{`the name "ozon" is taken`, "POST /webhooks/ozon", "webhooks.ozon"}},
		{"bitrix24 reserved", "", []string{"ORDERSYNC_WEBHOOKS__SOURCES__BITRIX24__SECRETS=" + testSecret},
			"webhooks.sources.bitrix24", []string{`the name "bitrix24" is taken`, "webhooks.bitrix24"}},
		{"upper case", "webhooks:\n  sources:\n    Site:\n      secrets: [" + testSecret + "]\n", nil,
			"webhooks.sources.Site", []string{`invalid name "Site"`, "[a-z0-9_-]{1,32}", testPath}},
		{"too long", "webhooks:\n  sources:\n    " + long + "x:\n      secrets: [" + testSecret + "]\n", nil,
			"webhooks.sources." + long + "x", []string{"invalid name", "[a-z0-9_-]{1,32}"}},
		{"dot in env name", "", []string{"ORDERSYNC_WEBHOOKS__SOURCES__MY.SHOP__SECRETS=" + testSecret},
			"webhooks.sources.my.shop", []string{`invalid name "my.shop"`, "ORDERSYNC_WEBHOOKS__SOURCES__MY.SHOP__SECRETS"}},
		{"unknown key", "webhooks:\n  sources:\n    site:\n      secret: [" + testSecret + "]\n", nil,
			"webhooks.sources.site.secret", []string{"unknown key", "did you mean webhooks.sources.site.secrets?"}},
		{"unknown variable", "", []string{"ORDERSYNC_WEBHOOKS__SOURCES__SITE__SECRET=" + testSecret},
			"webhooks.sources.site.secret", []string{"unknown key", "did you mean ORDERSYNC_WEBHOOKS__SOURCES__SITE__SECRETS?"}},
	} {
		_, err := loadYAML(t, tc.src, tc.env...)
		wantProblem(t, err, tc.key, tc.fragments...)
		noWebhookSecrets(t, errText(err))
	}
}

func TestOzonWebhookNetworks(t *testing.T) {
	t.Parallel()
	cfg := mustLoadYAML(t, "webhooks:\n  ozon:\n    allow_networks: [195.34.21.0/24, 10.1.2.3, '2001:db8::/32', '2001:db8::7', 0.0.0.0/0]\n    trusted_proxies: [127.0.0.1]\n")
	pf := netip.MustParsePrefix
	if got, want := cfg.Webhooks.Ozon.AllowedPrefixes(), []netip.Prefix{
		pf("195.34.21.0/24"), pf("10.1.2.3/32"), pf("2001:db8::/32"), pf("2001:db8::7/128"), pf("0.0.0.0/0"),
	}; !slices.Equal(got, want) {
		t.Errorf("AllowedPrefixes() = %v, want %v", got, want)
	}
	if got, want := cfg.Webhooks.Ozon.TrustedProxyPrefixes(), []netip.Prefix{pf("127.0.0.1/32")}; !slices.Equal(got, want) {
		t.Errorf("TrustedProxyPrefixes() = %v, want %v", got, want)
	}
	def := mustLoadYAML(t, "")
	if got, want := def.Webhooks.Ozon.AllowedPrefixes(), []netip.Prefix{
		pf("195.34.21.0/24"), pf("185.73.192.0/22"), pf("91.223.93.0/24"),
	}; !slices.Equal(got, want) {
		t.Errorf("default AllowedPrefixes() = %v, want %v", got, want)
	}
	if got := def.Webhooks.Ozon.TrustedProxyPrefixes(); got != nil {
		t.Errorf("default TrustedProxyPrefixes() = %v, want nil", got)
	}
	// An Ozon address inside the defaults, one outside.
	allowed := func(addr string) bool {
		a := netip.MustParseAddr(addr).Unmap()
		return slices.ContainsFunc(def.Webhooks.Ozon.AllowedPrefixes(), func(p netip.Prefix) bool { return p.Contains(a) })
	}
	if !allowed("185.73.195.10") || !allowed("::ffff:91.223.93.1") || allowed("185.73.196.1") {
		t.Error("the default networks do not hold Ozon's addresses only")
	}

	for _, tc := range []struct {
		name      string
		src       string
		env       []string
		key       string
		fragments []string
	}{
		{"not a network", "webhooks:\n  ozon:\n    allow_networks: [195.34.21.0/24, 185.73.192.0/22, 91.223.93/24]\n", nil,
			"webhooks.ozon.allow_networks[2]", []string{"must be a network such as 195.34.21.0/24", `got "91.223.93/24"`}},
		{"host bits", "webhooks:\n  ozon:\n    allow_networks: [195.34.21.7/24]\n", nil,
			"webhooks.ozon.allow_networks[0]", []string{"195.34.21.7/24 has bits set after the first 24", "write 195.34.21.0/24 for the network, or 195.34.21.7/32 for the one address"}},
		{"prefix too long", "webhooks:\n  ozon:\n    allow_networks: [10.0.0.0/33]\n", nil,
			"webhooks.ozon.allow_networks[0]", []string{"must be a network"}},
		{"zone", "webhooks:\n  ozon:\n    trusted_proxies: ['fe80::1%eth0']\n", nil,
			"webhooks.ozon.trusted_proxies[0]", []string{"must be a network"}},
		{"IPv4 as IPv6", "webhooks:\n  ozon:\n    trusted_proxies: ['::ffff:127.0.0.1']\n", nil,
			"webhooks.ozon.trusted_proxies[0]", []string{"IPv4 network written as IPv6"}},
		{"twice", "webhooks:\n  ozon:\n    allow_networks: [10.0.0.1, 10.0.0.0/8, 10.0.0.1/32]\n", nil,
			"webhooks.ozon.allow_networks[2]", []string{"10.0.0.1/32 is listed twice"}},
		{"from the environment", "", []string{"ORDERSYNC_WEBHOOKS__OZON__ALLOW_NETWORKS=195.34.21.0/24,ozon.ru"},
			"webhooks.ozon.allow_networks[1]", []string{`got "ozon.ru"`}},
		{"not a list", "webhooks:\n  ozon:\n    allow_networks: 195.34.21.0/24\n", nil,
			"webhooks.ozon.allow_networks", []string{"must be a list", `"195.34.21.0/24"`}},
		{"enabled with none", "webhooks:\n  ozon:\n    enabled: true\n    allow_networks: []\n", enabledEnv("ozon"),
			"webhooks.ozon.allow_networks", []string{"at least one network when webhooks.ozon.enabled is true"}},
		{"enabled with an empty variable", "webhooks:\n  ozon:\n    enabled: true\n",
			append(enabledEnv("ozon"), "ORDERSYNC_WEBHOOKS__OZON__ALLOW_NETWORKS="),
			"webhooks.ozon.allow_networks", []string{"at least one network"}},
		{"enabled, not a bool", "webhooks:\n  ozon:\n    enabled: yes\n", nil,
			"webhooks.ozon.enabled", []string{"true or false", `"yes"`}},
	} {
		_, err := loadYAML(t, tc.src, tc.env...)
		wantProblem(t, err, tc.key, tc.fragments...)
	}

	// Checked whether or not the push is enabled: the methods never see a bad list.
	_, err := loadYAML(t, "webhooks:\n  ozon:\n    enabled: false\n    trusted_proxies: [proxy.local]\n")
	wantProblem(t, err, "webhooks.ozon.trusted_proxies[0]", "must be a network")
	// Disabled, no network is fine.
	if _, err := loadYAML(t, "webhooks:\n  ozon:\n    allow_networks: []\n"); err != nil {
		t.Errorf("disabled push without networks: %v", err)
	}
	// On a configuration that did not come from Load, a bad list panics.
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "webhooks.ozon.allow_networks[0]") {
			t.Errorf("AllowedPrefixes on a bad list: recovered %v, want a panic naming the key", r)
		}
	}()
	OzonWebhook{AllowNetworks: []string{"nowhere"}}.AllowedPrefixes()
}

func TestOzonWebhookNeedsConnectorCredentials(t *testing.T) {
	t.Parallel()
	const msg = "needs connectors.ozon.client_id and connectors.ozon.api_key to fetch the postings Ozon announces"
	for _, env := range [][]string{
		nil,
		{"ORDERSYNC_CONNECTORS__OZON__CLIENT_ID=123456"},
		{"ORDERSYNC_CONNECTORS__OZON__API_KEY=" + ozonKey},
	} {
		_, err := loadYAML(t, "webhooks:\n  ozon:\n    enabled: true\n", env...)
		wantProblem(t, err, "webhooks.ozon.enabled", msg)
		if got, want := problemKeys(t, err), []string{"webhooks.ozon.enabled"}; !slices.Equal(got, want) {
			t.Errorf("with %q: problem keys = %q, want %q\n%v", env, got, want, err)
		}
		noSecrets(t, err)
	}

	// The credentials, from the file or a credential file, are enough: polling
	// stays off, and neither its warehouse nor its other keys are required.
	cfg, err := loadWithFiles(t, "webhooks:\n  ozon:\n    enabled: true\nconnectors:\n  ozon:\n    client_id: '123456'\n    api_key_file: /run/credentials/ozon\n    page_size: 0\n",
		files{"/run/credentials/ozon": ozonKey + "\n"})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if cfg.Connectors.Ozon.Enabled || cfg.Connectors.Ozon.APIKey != ozonKey {
		t.Errorf("connectors.ozon = %+v, want disabled with the key", cfg.Connectors.Ozon)
	}

	// What the push uses of the connector is checked.
	_, err = loadYAML(t, "webhooks:\n  ozon:\n    enabled: true\nconnectors:\n  ozon:\n    base_url: ftp://api-seller.ozon.ru\n    timeout: 0s\n    rate_per_second: 0\n",
		"ORDERSYNC_CONNECTORS__OZON__CLIENT_ID=123456", "ORDERSYNC_CONNECTORS__OZON__API_KEY="+ozonKey+"\nx")
	wantProblem(t, err, "connectors.ozon.base_url", "absolute http:// or https:// URL")
	wantProblem(t, err, "connectors.ozon.timeout", "webhooks.ozon fetches postings with it", "got 0s")
	wantProblem(t, err, "connectors.ozon.rate_per_second", "webhooks.ozon fetches postings with it", "got 0")
	wantProblem(t, err, "connectors.ozon.api_key", "control characters")
	noSecrets(t, err)
	_, err = loadYAML(t, "webhooks:\n  ozon:\n    enabled: true\nconnectors:\n  ozon:\n    base_url: ''\n", enabledEnv("ozon")[2:]...)
	wantProblem(t, err, "connectors.ozon.base_url", "is required when webhooks.ozon.enabled is true")

	// An enabled connector reports its own missing credentials, once.
	_, err = loadYAML(t, "webhooks:\n  ozon:\n    enabled: true\nconnectors:\n  ozon:\n    enabled: true\n    warehouse: WH1\n")
	if got, want := problemKeys(t, err), []string{"connectors.ozon.client_id", "connectors.ozon.api_key"}; !slices.Equal(got, want) {
		t.Errorf("problem keys = %q, want %q\n%v", got, want, err)
	}
	// And the push alone, disabled, needs nothing.
	if _, err := loadYAML(t, "webhooks:\n  ozon:\n    enabled: false\n"); err != nil {
		t.Errorf("disabled push: %v", err)
	}
}

func TestBitrix24Webhook(t *testing.T) {
	t.Parallel()
	_, err := loadYAML(t, "webhooks:\n  bitrix24:\n    enabled: true\n    create_stages: []\n")
	if got, want := problemKeys(t, err), []string{
		"webhooks.bitrix24.application_token", "webhooks.bitrix24.rest_url",
		"webhooks.bitrix24.create_stages", "webhooks.bitrix24.warehouse",
	}; !slices.Equal(got, want) {
		t.Errorf("problem keys = %q, want %q\n%v", got, want, err)
	}
	wantProblem(t, err, "webhooks.bitrix24.application_token", "required when webhooks.bitrix24.enabled is true", "webhooks.bitrix24.application_token_file")
	wantProblem(t, err, "webhooks.bitrix24.rest_url", "required when webhooks.bitrix24.enabled is true", "webhooks.bitrix24.rest_url_file")
	wantProblem(t, err, "webhooks.bitrix24.create_stages", "at least one deal stage, such as WON")
	wantProblem(t, err, "webhooks.bitrix24.warehouse", "required when webhooks.bitrix24.enabled is true", "1C warehouse")

	enabled := func(extra string) string {
		return "webhooks:\n  bitrix24:\n    enabled: true\n    application_token: " + b24Token + "\n    warehouse: WH1\n" + extra
	}
	// A loopback simulator may be plain http.
	for _, u := range []string{b24RESTURL, "https://crm.example.kz:8443/rest/7/" + b24Code + "/", "http://127.0.0.1:8094/rest/1/" + b24Code + "/",
		"http://localhost/rest/1/" + b24Code + "/", "http://[::1]:8094/rest/1/" + b24Code + "/"} {
		if _, err := loadYAML(t, enabled("    rest_url: "+u+"\n")); err != nil {
			t.Errorf("rest_url %s: %v", u, err)
		}
	}
	for _, tc := range []struct {
		src, key, msg string
	}{
		{enabled("    rest_url: http://portal.bitrix24.kz/rest/1/" + b24Code + "/\n"), "webhooks.bitrix24.rest_url", "absolute https:// URL such as https://portal.bitrix24.kz/rest/1/<code>/ (http:// only for a loopback host"},
		{enabled("    rest_url: portal.bitrix24.kz/rest/1/" + b24Code + "/\n"), "webhooks.bitrix24.rest_url", "absolute https:// URL"},
		{enabled("    rest_url: https://portal.bitrix24.kz/rest/1/" + b24Code + "\n"), "webhooks.bitrix24.rest_url", "must end with /"},
		{enabled("    rest_url: https://portal.bitrix24.kz/rest/1/" + b24Code + "/crm.deal.get\n"), "webhooks.bitrix24.rest_url", "must end with /"},
		{enabled("    rest_url: https://portal.bitrix24.kz/rest/1/" + b24Code + "/?auth=1\n"), "webhooks.bitrix24.rest_url", "must not have a query or fragment"},
		{enabled("    rest_url: https://u:" + b24Code + "@portal.bitrix24.kz/rest/\n"), "webhooks.bitrix24.rest_url", "must not contain a user name or password"},
		{enabled("    rest_url: " + b24RESTURL + "\n    create_stages: [WON, '', WON]\n"), "webhooks.bitrix24.create_stages[1]", "must not be empty"},
		{enabled("    rest_url: " + b24RESTURL + "\n    create_stages: [WON, '', WON]\n"), "webhooks.bitrix24.create_stages[2]", `"WON" is listed twice`},
		{enabled("    rest_url: " + b24RESTURL + "\n    rate_per_second: 0\n"), "webhooks.bitrix24.rate_per_second", "must be greater than 0, got 0"},
		{enabled("    rest_url: " + b24RESTURL + "\n    timeout: 0s\n"), "webhooks.bitrix24.timeout", "must be greater than 0, got 0s"},
		{enabled("    rest_url: " + b24RESTURL + "\n    sku_field: \"A\\nB\"\n"), "webhooks.bitrix24.sku_field", "control characters"},
		{enabled("    rest_url: " + b24RESTURL + "\n    application_token_file: /run/credentials/b24\n"), "webhooks.bitrix24.application_token", "both"},
		{"webhooks:\n  bitrix24:\n    application_token: 12345\n", "webhooks.bitrix24.application_token", "must be a string"},
	} {
		_, err := loadYAML(t, tc.src)
		wantProblem(t, err, tc.key, tc.msg)
		noWebhookSecrets(t, errText(err))
	}
	_, err = loadYAML(t, "", "ORDERSYNC_WEBHOOKS__BITRIX24__ENABLED=true", "ORDERSYNC_WEBHOOKS__BITRIX24__APPLICATION_TOKEN="+b24Token+"\n",
		"ORDERSYNC_WEBHOOKS__BITRIX24__WAREHOUSE=WH1", "ORDERSYNC_WEBHOOKS__BITRIX24__REST_URL="+b24RESTURL)
	wantProblem(t, err, "webhooks.bitrix24.application_token", "control characters")
	noWebhookSecrets(t, errText(err))

	// Not enabled: not checked beyond the types of its keys.
	if _, err := loadYAML(t, "webhooks:\n  bitrix24:\n    rest_url: http://x\n    create_stages: []\n    timeout: 0s\n    rate_per_second: 0\n"); err != nil {
		t.Errorf("disabled bitrix24: %v", err)
	}
}

func TestWebhooksEffective(t *testing.T) {
	t.Parallel()
	cfg := mustLoadYAML(t, webhooksYAML)
	out, err := cfg.Effective()
	if err != nil {
		t.Fatalf("Effective: %v", err)
	}
	text := string(out)
	const wantHTTP = `http:
  listen: '[::1]:0'
  read_timeout: 5s
  write_timeout: 7s
  idle_timeout: 2m
  shutdown_timeout: 3s
admin:
  listen: 127.0.0.1:9090
  pprof: false
log:
`
	const wantWebhooks = `webhooks:
  max_body: 512KiB
  tolerance: 2m
  sources:
    crm-2:
      secrets: ['***']
      onec:
        organization: ""
        partner: ""
        counterparty: ""
        agreement: ""
        warehouse: ""
    site:
      secrets: ['***', '***']
      onec:
        organization: ""
        partner: ""
        counterparty: ""
        agreement: ""
        warehouse: ""
  ozon:
    enabled: true
    allow_networks: [195.34.21.0/24, 10.1.2.3, '2001:db8::/32']
    trusted_proxies: [127.0.0.1, '::1']
  bitrix24:
    type: ""
    enabled: true
    application_token: '***'
    rest_url: '***'
    create_stages: [WON, 'C1:WON']
    warehouse: Алматы-1
    sku_field: PROPERTY_105
    rate_per_second: 1
    timeout: 15s
    max_response: 4MiB
    onec:
      organization: ""
      partner: ""
      counterparty: ""
      agreement: ""
      warehouse: ""
relay:
`
	for _, want := range []string{wantHTTP, wantWebhooks} {
		if !strings.Contains(text, want) {
			t.Errorf("effective configuration:\n%s\nwant it to contain:\n%s", text, want)
		}
	}
	noWebhookSecrets(t, text)

	// Round trip: the output, secrets restored in order, loads to the same
	// configuration.
	restored := strings.Replace(text, "['***']", "['"+testSecret3+"']", 1)
	restored = strings.Replace(restored, "['***', '***']", "['"+testSecret+"', '"+testSecret2+"']", 1)
	for _, s := range []string{ozonKey, b24Token, b24RESTURL} {
		restored = strings.Replace(restored, ": '***'\n", ": "+s+"\n", 1)
	}
	again := mustLoadYAML(t, restored)
	if !reflect.DeepEqual(again, cfg) {
		t.Errorf("round trip:\n got %+v\nwant %+v\nfrom:\n%s", again.Webhooks, cfg.Webhooks, restored)
	}

	// The defaults: sizes print with their unit, unset secrets empty.
	def := mustLoadYAML(t, "")
	out, err = def.Effective()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"  max_body: 1MiB\n", "  sources: {}\n", "    trusted_proxies: []\n",
		"    application_token: \"\"\n", "    rest_url: \"\"\n", "  listen: 127.0.0.1:8080\n"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("effective configuration lacks %q:\n%s", want, out)
		}
	}
	// A size no unit divides prints as a number of bytes, and loads back.
	odd := mustLoadYAML(t, "webhooks:\n  max_body: 1500\n")
	out, err = odd.Effective()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "  max_body: 1500\n") {
		t.Errorf("effective configuration lacks max_body: 1500:\n%s", out)
	}
	if again := mustLoadYAML(t, string(out)); !reflect.DeepEqual(again, odd) {
		t.Errorf("round trip of max_body 1500:\n got %+v\nwant %+v", again.Webhooks, odd.Webhooks)
	}
}

func TestWebhookSourceMayNotTakeAConnectorsName(t *testing.T) {
	t.Parallel()
	_, err := Load(LoadOptions{Environ: []string{
		"ORDERSYNC_WEBHOOKS__SOURCES__KASPI__SECRETS=whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
	}})
	if err == nil || !strings.Contains(err.Error(), "webhooks.sources.kaspi") || !strings.Contains(err.Error(), "connector") {
		t.Fatalf("Load = %v, want an error naming webhooks.sources.kaspi as a connector's source", err)
	}
}
