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

// Webhook signing secrets in the Standard Webhooks form. testSecret is the
// specification's test vector.
const (
	testSecret  = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	testSecret2 = "whsec_c2Vjb25kLXNlY3JldC1rZXk="
	testSecret3 = "whsec_dGhpcmQgc2VjcmV0LCByb3RhdGVkIGlu"
)

// crmYAML is a valid webhook destination named crm, for tests to add to.
const crmYAML = `
relay:
  destinations:
    crm:
      type: webhook
      url: https://crm.example.kz/hooks/ordersync
      secrets: [` + testSecret + `]
      events: [order.created]
`

func TestRelayFile(t *testing.T) {
	t.Parallel()
	cfg := mustLoadYAML(t, `
connectors:
  kaspi: {enabled: true, token: kaspi-token, warehouse: WH1}
relay:
  concurrency: 4
  batch_size: 500
  poll_interval: 250ms
  listen: false
  max_attempts: 3
  backoff_min: 2s
  backoff_max: 5m
  lease: 2m
  retention: 168h
  prune_interval: 10m
  destinations:
    crm:
      type: webhook
      url: https://crm.example.kz/hooks/ordersync
      secrets: [`+testSecret+`, `+testSecret2+`]
      events: [order.created, order.cancelled]
      timeout: 5s
      on_dead: skip
    kaspi:
      type: connector
      connector: kaspi
      events: [order.created]
`)
	want := Relay{
		Concurrency:   4,
		BatchSize:     500,
		Claimers:      2,
		PollInterval:  250 * time.Millisecond,
		Listen:        false,
		MaxAttempts:   3,
		BackoffMin:    2 * time.Second,
		BackoffMax:    5 * time.Minute,
		Lease:         2 * time.Minute,
		Retention:     168 * time.Hour,
		PruneInterval: 10 * time.Minute,
		Destinations: map[string]Destination{
			"crm": {
				Type:    DestinationWebhook,
				URL:     "https://crm.example.kz/hooks/ordersync",
				Secrets: []string{testSecret, testSecret2},
				Events:  []string{"order.created", "order.cancelled"},
				Timeout: 5 * time.Second,
				OnDead:  OnDeadSkip,
			},
			"kaspi": {
				Type:      DestinationConnector,
				Events:    []string{"order.created"},
				Timeout:   10 * time.Second, // default
				OnDead:    OnDeadBlock,      // default
				Connector: "kaspi",
			},
		},
	}
	if !reflect.DeepEqual(cfg.Relay, want) {
		t.Errorf("relay:\n got %+v\nwant %+v", cfg.Relay, want)
	}
}

func TestRelayDestinationDefaults(t *testing.T) {
	t.Parallel()
	cfg := mustLoadYAML(t, crmYAML)
	d, ok := cfg.Relay.Destinations["crm"]
	if !ok {
		t.Fatalf("no destination crm in %+v", cfg.Relay.Destinations)
	}
	if got, want := d.Timeout, 10*time.Second; got != want {
		t.Errorf("timeout = %v, want %v", got, want)
	}
	if got, want := d.OnDead, OnDeadBlock; got != want {
		t.Errorf("on_dead = %q, want %q", got, want)
	}
	if got, want := d.Connector, ""; got != want {
		t.Errorf("connector = %q, want %q", got, want)
	}
	// The relay's own keys keep their defaults when only destinations are set.
	if got, want := cfg.Relay.Concurrency, 16; got != want {
		t.Errorf("relay.concurrency = %d, want %d", got, want)
	}

	// A name YAML reads as a number is a name like any other.
	cfg = mustLoadYAML(t, "relay:\n  destinations:\n    2024:\n      type: connector\n      connector: ozon\n      events: [order.created]\n",
		enabledEnv("ozon")...)
	if got, want := cfg.Relay.Destinations["2024"].Connector, "ozon"; got != want {
		t.Errorf("destination 2024: connector = %q, want %q (destinations %+v)", got, want, cfg.Relay.Destinations)
	}

	// An empty section is no destination, written either way.
	for _, src := range []string{"relay:\n  destinations: {}\n", "relay:\n  destinations:\n", "relay: {}\n"} {
		cfg := mustLoadYAML(t, src)
		if cfg.Relay.Destinations != nil {
			t.Errorf("Load(%q): destinations = %+v, want none", src, cfg.Relay.Destinations)
		}
	}
}

func TestRelayEnvOnlyDestination(t *testing.T) {
	t.Parallel()
	cfg := mustLoadYAML(t, "",
		"ORDERSYNC_RELAY__CONCURRENCY=32",
		"ORDERSYNC_RELAY__LISTEN=false",
		"ORDERSYNC_RELAY__DESTINATIONS__NOTIFY_BOT__TYPE=webhook",
		"ORDERSYNC_RELAY__DESTINATIONS__NOTIFY_BOT__URL=http://127.0.0.1:8081/hook",
		"ORDERSYNC_RELAY__DESTINATIONS__NOTIFY_BOT__SECRETS="+testSecret+","+testSecret2,
		"ORDERSYNC_RELAY__DESTINATIONS__NOTIFY_BOT__EVENTS=stock.snapshot",
		"ORDERSYNC_RELAY__DESTINATIONS__NOTIFY_BOT__TIMEOUT=3s",
		"ORDERSYNC_RELAY__DESTINATIONS__NOTIFY_BOT__ON_DEAD=skip",
		"ORDERSYNC_RELAY__DESTINATIONS__OZON__TYPE=connector",
		"ORDERSYNC_RELAY__DESTINATIONS__OZON__CONNECTOR=ozon",
		"ORDERSYNC_RELAY__DESTINATIONS__OZON__EVENTS=order.created",
		"ORDERSYNC_CONNECTORS__OZON__ENABLED=true",
		"ORDERSYNC_CONNECTORS__OZON__CLIENT_ID=123456",
		"ORDERSYNC_CONNECTORS__OZON__API_KEY=ozon-key",
		"ORDERSYNC_CONNECTORS__OZON__WAREHOUSE=WH1",
	)
	if got, want := cfg.Relay.Concurrency, 32; got != want {
		t.Errorf("relay.concurrency = %d, want %d", got, want)
	}
	if cfg.Relay.Listen {
		t.Error("relay.listen = true, want false")
	}
	want := map[string]Destination{
		"notify_bot": {
			Type:    DestinationWebhook,
			URL:     "http://127.0.0.1:8081/hook",
			Secrets: []string{testSecret, testSecret2},
			Events:  []string{"stock.snapshot"},
			Timeout: 3 * time.Second,
			OnDead:  OnDeadSkip,
		},
		"ozon": {
			Type:      DestinationConnector,
			Events:    []string{"order.created"},
			Timeout:   10 * time.Second,
			OnDead:    OnDeadBlock,
			Connector: "ozon",
		},
	}
	if !reflect.DeepEqual(cfg.Relay.Destinations, want) {
		t.Errorf("destinations from the environment:\n got %+v\nwant %+v", cfg.Relay.Destinations, want)
	}
}

func TestRelayEnvOverridesFileEntry(t *testing.T) {
	t.Parallel()
	cfg := mustLoadYAML(t, crmYAML+"      on_dead: skip\n",
		"ORDERSYNC_RELAY__DESTINATIONS__CRM__URL=https://crm2.example.kz/hooks",
		"ORDERSYNC_RELAY__DESTINATIONS__CRM__SECRETS="+testSecret2,
	)
	d := cfg.Relay.Destinations["crm"]
	if got, want := d.URL, "https://crm2.example.kz/hooks"; got != want {
		t.Errorf("url = %q, want %q (environment wins)", got, want)
	}
	if got, want := d.Secrets, []string{testSecret2}; !slices.Equal(got, want) {
		t.Errorf("secrets = %q, want %q (the environment's list replaces the file's)", got, want)
	}
	if got, want := d.OnDead, OnDeadSkip; got != want {
		t.Errorf("on_dead = %q, want %q (file, not overridden)", got, want)
	}
	if got, want := d.Events, []string{"order.created"}; !slices.Equal(got, want) {
		t.Errorf("events = %q, want %q (file, not overridden)", got, want)
	}
}

func TestRelayEnvList(t *testing.T) {
	t.Parallel()
	cfg := mustLoadYAML(t, crmYAML,
		"ORDERSYNC_RELAY__DESTINATIONS__CRM__EVENTS= order.created, ,order.cancelled,,stock.snapshot ,",
	)
	if got, want := cfg.Relay.Destinations["crm"].Events, []string{"order.created", "order.cancelled", "stock.snapshot"}; !slices.Equal(got, want) {
		t.Errorf("events = %q, want %q (trimmed, empty items dropped)", got, want)
	}

	// An empty variable is an empty list, which a destination may not have.
	_, err := loadYAML(t, crmYAML, "ORDERSYNC_RELAY__DESTINATIONS__CRM__EVENTS=")
	wantProblem(t, err, "relay.destinations.crm.events", "at least one event type")
	_, err = loadYAML(t, crmYAML, "ORDERSYNC_RELAY__DESTINATIONS__CRM__EVENTS= , ")
	wantProblem(t, err, "relay.destinations.crm.events", "at least one event type")
}

func TestRelaySecretsFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	secrets := filepath.Join(dir, "crm-webhook-secrets")
	content := "# rotated 2026-09-01; the first signs\r\n" + testSecret3 + "\r\n\r\n  " + testSecret + "  \n# old, remove after the CRM switched\n" + testSecret2
	if err := os.WriteFile(secrets, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	want := []string{testSecret3, testSecret, testSecret2}

	cfgFile := filepath.Join(dir, "ordersync.yaml")
	src := strings.Replace(crmYAML, "secrets: ["+testSecret+"]", "secrets_file: "+secrets, 1)
	if err := os.WriteFile(cfgFile, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(LoadOptions{Path: cfgFile, PathExplicit: true, Environ: []string{}})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if got := cfg.Relay.Destinations["crm"].Secrets; !slices.Equal(got, want) {
		t.Errorf("secrets from %s = %q, want %q", secrets, got, want)
	}

	// From the environment, overriding the file's inline list.
	cfg, err = Load(LoadOptions{
		Path:         testPath,
		PathExplicit: true,
		Environ:      []string{"ORDERSYNC_RELAY__DESTINATIONS__CRM__SECRETS_FILE=/run/credentials/crm"},
		ReadFile:     files{testPath: crmYAML, "/run/credentials/crm": content}.ReadFile,
	})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if got := cfg.Relay.Destinations["crm"].Secrets; !slices.Equal(got, want) {
		t.Errorf("secrets from ORDERSYNC_RELAY__DESTINATIONS__CRM__SECRETS_FILE = %q, want %q", got, want)
	}
}

func TestRelaySecretsFileProblems(t *testing.T) {
	t.Parallel()
	src := strings.Replace(crmYAML, "secrets: ["+testSecret+"]", "secrets_file: /run/credentials/crm", 1)
	for _, tc := range []struct {
		name      string
		fsys      files
		key       string
		fragments []string
	}{
		{"only comments", files{testPath: src, "/run/credentials/crm": "# none yet\n\n"}, "relay.destinations.crm.secrets_file", []string{"/run/credentials/crm", "no secrets"}},
		{"missing", files{testPath: src}, "relay.destinations.crm.secrets_file", []string{"/run/credentials/crm", "no such file"}},
	} {
		_, err := Load(LoadOptions{Path: testPath, PathExplicit: true, Environ: []string{}, ReadFile: tc.fsys.ReadFile})
		wantProblem(t, err, tc.key, tc.fragments...)
	}
}

func TestRelaySecretsBothSet(t *testing.T) {
	t.Parallel()
	_, err := loadYAML(t, crmYAML+"      secrets_file: /run/credentials/crm\n")
	wantProblem(t, err, "relay.destinations.crm.secrets",
		"both", "relay.destinations.crm.secrets and relay.destinations.crm.secrets_file", testPath)

	_, err = loadYAML(t, "",
		"ORDERSYNC_RELAY__DESTINATIONS__CRM__SECRETS="+testSecret,
		"ORDERSYNC_RELAY__DESTINATIONS__CRM__SECRETS_FILE=/run/credentials/crm",
	)
	wantProblem(t, err, "relay.destinations.crm.secrets",
		"both", "relay.destinations.crm.secrets and relay.destinations.crm.secrets_file",
		"ORDERSYNC_RELAY__DESTINATIONS__CRM__SECRETS_FILE")
	if strings.Contains(err.Error(), testSecret) {
		t.Errorf("error shows a secret:\n%v", err)
	}
}

func TestRelayBadSecret(t *testing.T) {
	t.Parallel()
	const (
		noPrefix  = "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
		notBase64 = "whsec_not*base64!"
		urlSafe   = "whsec_-_-_AAAA"
	)
	src := strings.Replace(crmYAML, "secrets: ["+testSecret+"]",
		"secrets: ["+testSecret+", "+noPrefix+", '"+notBase64+"', "+urlSafe+", whsec_]", 1)
	_, err := loadYAML(t, src)
	wantProblem(t, err, "relay.destinations.crm.secrets[1]", "must start with whsec_")
	wantProblem(t, err, "relay.destinations.crm.secrets[2]", "standard base64")
	wantProblem(t, err, "relay.destinations.crm.secrets[3]", "standard base64")
	wantProblem(t, err, "relay.destinations.crm.secrets[4]", "standard base64")
	for _, p := range problemsOf(t, err) {
		if p.Key == "relay.destinations.crm.secrets[0]" {
			t.Errorf("a valid secret is reported: %v", p)
		}
	}
	for _, s := range []string{noPrefix, "not*base64", "-_-_AAAA"} {
		if strings.Contains(err.Error(), s) {
			t.Errorf("error shows secret %q:\n%v", s, err)
		}
	}

	// A secret of the wrong type is not shown either.
	_, err = loadYAML(t, strings.Replace(crmYAML, "secrets: ["+testSecret+"]", "secrets: [987654321]", 1))
	wantProblem(t, err, "relay.destinations.crm.secrets[0]", "must be a string", "a number")
	if strings.Contains(err.Error(), "987654321") {
		t.Errorf("error shows a secret:\n%v", err)
	}
}

func TestRelayUnknownDestinationKey(t *testing.T) {
	t.Parallel()
	_, err := loadYAML(t, crmYAML+"      ulr: https://crm.example.kz/x\n      retries: 3\n")
	wantProblem(t, err, "relay.destinations.crm.ulr", "unknown key", testPath, "did you mean relay.destinations.crm.url?")
	wantProblem(t, err, "relay.destinations.crm.retries", "unknown key", testPath)
	if got, want := len(problemsOf(t, err)), 2; got != want {
		t.Errorf("got %d problems, want %d:\n%v", got, want, err)
	}

	_, err = loadYAML(t, crmYAML,
		"ORDERSYNC_RELAY__DESTINATIONS__CRM__ULR=https://crm.example.kz/x",
		"ORDERSYNC_RELAY__DESTINATIONS__CRM=webhook",
		"ORDERSYNC_RELAY__DESTINATION__CRM__URL=https://crm.example.kz/x",
	)
	wantProblem(t, err, "relay.destinations.crm.ulr", "unknown key", "ORDERSYNC_RELAY__DESTINATIONS__CRM__ULR",
		"did you mean ORDERSYNC_RELAY__DESTINATIONS__CRM__URL?")
	wantProblem(t, err, "relay.destinations.crm", "is a section", "ORDERSYNC_RELAY__DESTINATIONS__CRM")
	wantProblem(t, err, "relay.destination.crm.url", "unknown key", "ORDERSYNC_RELAY__DESTINATION__CRM__URL")
	if got, want := len(problemsOf(t, err)), 3; got != want {
		t.Errorf("got %d problems, want %d:\n%v", got, want, err)
	}
}

func TestRelayBadName(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a", 65)
	_, err := loadYAML(t, `
relay:
  destinations:
    CRM:
      type: webhook
      url: https://crm.example.kz/hooks
    "my.crm":
      type: webhook
    `+long+`:
      type: webhook
    crm bot: {}
    `+strings.Repeat("b", 64)+`:
      type: connector
      connector: kaspi
      events: [order.created]
`, enabledEnv("kaspi")...)
	wantProblem(t, err, "relay.destinations.CRM", `invalid name "CRM"`, "[a-z0-9_-]{1,64}", testPath)
	wantProblem(t, err, "relay.destinations.my.crm", `invalid name "my.crm"`)
	wantProblem(t, err, "relay.destinations."+long, "invalid name")
	wantProblem(t, err, "relay.destinations.crm bot", `invalid name "crm bot"`)
	// One problem per bad name, however many keys it has, and none for the
	// 64-character name, which is allowed.
	if got, want := len(problemsOf(t, err)), 4; got != want {
		t.Errorf("got %d problems, want %d:\n%v", got, want, err)
	}

	_, err = loadYAML(t, "",
		"ORDERSYNC_RELAY__DESTINATIONS____URL=https://crm.example.kz/hooks",
		"ORDERSYNC_RELAY__DESTINATIONS__CRM.BOT__URL=https://crm.example.kz/hooks",
	)
	wantProblem(t, err, "relay.destinations.", `invalid name ""`, "ORDERSYNC_RELAY__DESTINATIONS____URL")
	wantProblem(t, err, "relay.destinations.crm.bot", `invalid name "crm.bot"`, "ORDERSYNC_RELAY__DESTINATIONS__CRM.BOT__URL")
}

func TestRelayWrongTypes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		src, key  string
		fragments []string
	}{
		{"relay:\n  destinations: [crm]\n", "relay.destinations", []string{"section", "a list"}},
		{"relay:\n  destinations:\n    crm: webhook\n", "relay.destinations.crm", []string{"section", `"webhook"`}},
		{strings.Replace(crmYAML, "events: [order.created]", "events: order.created", 1),
			"relay.destinations.crm.events", []string{"must be a list", `"order.created"`}},
		{strings.Replace(crmYAML, "events: [order.created]", "events: [order.created, 5]", 1),
			"relay.destinations.crm.events[1]", []string{"must be a string", "5", "quotes", testPath}},
		{strings.Replace(crmYAML, "secrets: ["+testSecret+"]", "secrets: "+testSecret, 1),
			"relay.destinations.crm.secrets", []string{"must be a list", "a string"}},
		{crmYAML + "      timeout: 10\n", "relay.destinations.crm.timeout", []string{"30s", "got 10"}},
		{"relay:\n  listen: no\n", "relay.listen", []string{"true or false", `"no"`}},
	} {
		_, err := loadYAML(t, tc.src)
		wantProblem(t, err, tc.key, tc.fragments...)
		if err != nil && strings.Contains(err.Error(), testSecret) {
			t.Errorf("error shows a secret:\n%v", err)
		}
	}
	_, err := loadYAML(t, crmYAML, "ORDERSYNC_RELAY__DESTINATIONS__CRM__TIMEOUT=10")
	wantProblem(t, err, "relay.destinations.crm.timeout", "30s", `"10"`, "ORDERSYNC_RELAY__DESTINATIONS__CRM__TIMEOUT")
}

func TestRelayValidation(t *testing.T) {
	t.Parallel()
	webhook := func(lines ...string) string {
		return "relay:\n  destinations:\n    crm:\n      " + strings.Join(lines, "\n      ") + "\n"
	}
	const (
		typ    = "type: webhook"
		url    = "url: https://crm.example.kz/hooks/ordersync"
		secret = "secrets: [" + testSecret + "]"
		events = "events: [order.created]"
	)
	for _, tc := range []struct {
		src, key, msg string
	}{
		{"relay:\n  concurrency: 0\n", "relay.concurrency", "must be between 1 and 1024, got 0"},
		{"relay:\n  concurrency: 1025\n", "relay.concurrency", "must be between 1 and 1024, got 1025"},
		{"relay:\n  batch_size: 0\n", "relay.batch_size", "must be between 1 and 10000, got 0"},
		{"relay:\n  claimers: 0\n", "relay.claimers", "must be between 1 and 16, got 0"},
		{"relay:\n  claimers: 17\n", "relay.claimers", "must be between 1 and 16, got 17"},
		{"relay:\n  batch_size: 10001\n", "relay.batch_size", "must be between 1 and 10000, got 10001"},
		{"relay:\n  poll_interval: 0s\n", "relay.poll_interval", "must be greater than 0, got 0s"},
		{"relay:\n  max_attempts: 0\n", "relay.max_attempts", "must be at least 1, got 0"},
		{"relay:\n  backoff_min: 0s\n", "relay.backoff_min", "must be greater than 0, got 0s"},
		{"relay:\n  backoff_max: 500ms\n", "relay.backoff_max", "must be at least relay.backoff_min (1s), got 500ms"},
		{"relay:\n  lease: -1s\n", "relay.lease", "must be greater than 0, got -1s"},
		{"relay:\n  retention: 0s\n", "relay.retention", "must be greater than 0, got 0s"},
		{"relay:\n  prune_interval: 0s\n", "relay.prune_interval", "must be greater than 0, got 0s"},

		{webhook(url, secret, events), "relay.destinations.crm.type", `must be one of webhook, connector, got ""`},
		{webhook("type: http", url, secret, events), "relay.destinations.crm.type", `must be one of webhook, connector, got "http"`},
		{webhook(typ, secret, events), "relay.destinations.crm.url", "is required for a webhook destination"},
		{webhook(typ, "url: crm.example.kz/hooks", secret, events), "relay.destinations.crm.url", "absolute http:// or https:// URL"},
		{webhook(typ, "url: ftp://crm.example.kz/hooks", secret, events), "relay.destinations.crm.url", "absolute http:// or https:// URL"},
		{webhook(typ, "url: https://u:hunter2@crm.example.kz/hooks", secret, events), "relay.destinations.crm.url", "must not contain a user name or password"},
		{webhook(typ, url, events), "relay.destinations.crm.secrets", "at least one signing secret"},
		{webhook(typ, url, "secrets: []", events), "relay.destinations.crm.secrets", "at least one signing secret"},
		{webhook(typ, url, secret, events, "connector: kaspi"), "relay.destinations.crm.connector", `must be empty for a webhook destination, got "kaspi"`},
		{webhook(typ, url, secret), "relay.destinations.crm.events", "must list at least one event type: order.created, order.cancelled, order.duplicate_in_1c, stock.snapshot"},
		{webhook(typ, url, secret, events, "timeout: 60s"), "relay.destinations.crm.timeout", "must be well below relay.lease (1m)"},
		{webhook(typ, url, secret, "events: [order.created, order.create]"), "relay.destinations.crm.events[1]",
			`unknown event type "order.create", known: order.created, order.cancelled, order.duplicate_in_1c, stock.snapshot`},
		{webhook(typ, url, secret, "events: [order.created, order.cancelled, order.created]"), "relay.destinations.crm.events[2]", `"order.created" is listed twice`},
		{webhook(typ, url, secret, events, "timeout: 0s"), "relay.destinations.crm.timeout", "must be greater than 0, got 0s"},
		{webhook(typ, url, secret, events, "on_dead: drop"), "relay.destinations.crm.on_dead", `must be one of block, skip, got "drop"`},

		{webhook("type: connector", events), "relay.destinations.crm.connector", "is required for a connector destination: the name of an account"},
		{webhook("type: connector", "connector: halyk", events), "relay.destinations.crm.connector", `unknown connector "halyk", known: kaspi, ozon, wildberries, yandex_market, uzum`},
		{webhook("type: connector", "connector: kaspi", url, events), "relay.destinations.crm.url", "only for webhook destinations"},
		{webhook("type: connector", "connector: kaspi", secret, events), "relay.destinations.crm.secrets", "only for webhook destinations"},

		{"relay:\n  destinations:\n    crm: {}\n", "relay.destinations.crm.type", `must be one of webhook, connector, got ""`},
		{"relay:\n  destinations:\n    crm:\n", "relay.destinations.crm.events", "at least one event type"},
	} {
		_, err := loadYAML(t, tc.src)
		wantProblem(t, err, tc.key, tc.msg)
		if err != nil && (strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), testSecret)) {
			t.Errorf("error shows a secret:\n%v", err)
		}
	}

	// Each destination is checked, by name, in order of name.
	_, err := loadYAML(t, `
relay:
  destinations:
    zeta: {type: webhook, events: [order.created], secrets: [`+testSecret+`]}
    alpha: {type: connector, events: [order.created]}
`)
	ps := problemsOf(t, err)
	var got []string
	for _, p := range ps {
		got = append(got, p.Key)
	}
	if want := []string{"relay.destinations.alpha.connector", "relay.destinations.zeta.url"}; !slices.Equal(got, want) {
		t.Errorf("problem keys = %q, want %q\n%v", got, want, err)
	}
}

func TestRelayEffective(t *testing.T) {
	t.Parallel()
	const token = "kaspi-token-0123"
	src := `
connectors:
  kaspi:
    enabled: true
    token: ` + token + `
    warehouse: WH1
relay:
  concurrency: 8
  destinations:
    crm:
      type: webhook
      url: https://crm.example.kz/hooks/ordersync
      secrets: [` + testSecret + `, ` + testSecret2 + `]
      events: [order.created, order.cancelled]
      on_dead: skip
    kaspi:
      type: connector
      connector: kaspi
      events: [order.created]
`
	cfg := mustLoadYAML(t, src, "ORDERSYNC_RELAY__DESTINATIONS__BOT__TYPE=webhook",
		"ORDERSYNC_RELAY__DESTINATIONS__BOT__URL=https://bot.example.kz/",
		"ORDERSYNC_RELAY__DESTINATIONS__BOT__SECRETS="+testSecret3,
		"ORDERSYNC_RELAY__DESTINATIONS__BOT__EVENTS=stock.snapshot",
	)
	out, err := cfg.Effective()
	if err != nil {
		t.Fatalf("Effective: %v", err)
	}
	text := string(out)
	const wantRelay = `relay:
  concurrency: 8
  batch_size: 100
  claimers: 2
  poll_interval: 1s
  listen: true
  max_attempts: 12
  backoff_min: 1s
  backoff_max: 1h
  lease: 1m
  retention: 720h
  prune_interval: 1h
  destinations:
    bot:
      type: webhook
      url: https://bot.example.kz/
      secrets: ['***']
      events: [stock.snapshot]
      timeout: 10s
      on_dead: block
      connector: ""
    crm:
      type: webhook
      url: https://crm.example.kz/hooks/ordersync
      secrets: ['***', '***']
      events: [order.created, order.cancelled]
      timeout: 10s
      on_dead: skip
      connector: ""
    kaspi:
      type: connector
      url: ""
      secrets: []
      events: [order.created]
      timeout: 10s
      on_dead: block
      connector: kaspi
`
	if !strings.Contains(text, "\n"+wantRelay+"stock:\n") {
		t.Errorf("effective configuration ends:\n%s\nwant it to end:\n%s", text[strings.Index(text, "relay:"):], wantRelay)
	}
	for _, s := range []string{testSecret, testSecret2, testSecret3, "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", token} {
		if strings.Contains(text, s) {
			t.Errorf("effective configuration shows secret %q:\n%s", s, text)
		}
	}

	// Round trip: the output, secrets restored in order, loads to the same
	// configuration.
	restored := strings.Replace(text, "['***']", "['"+testSecret3+"']", 1)
	restored = strings.Replace(restored, "['***', '***']", "['"+testSecret+"', '"+testSecret2+"']", 1)
	restored = strings.Replace(restored, "    token: '***'\n", "    token: "+token+"\n", 1)
	again := mustLoadYAML(t, restored)
	if !reflect.DeepEqual(again, cfg) {
		t.Errorf("round trip:\n got %+v\nwant %+v\nfrom:\n%s", again.Relay, cfg.Relay, restored)
	}
}
