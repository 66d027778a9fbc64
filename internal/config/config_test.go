package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/knadh/koanf/maps"
	"github.com/knadh/koanf/parsers/yaml"
)

// files is an in-memory file system for LoadOptions.ReadFile.
type files map[string]string

func (f files) ReadFile(name string) ([]byte, error) {
	s, ok := f[name]
	if !ok {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	return []byte(s), nil
}

const testPath = "/test/ordersync.yaml"

// loadYAML loads src as an explicit config file, with env as the whole environment.
func loadYAML(t *testing.T, src string, env ...string) (*Config, error) {
	t.Helper()
	return Load(LoadOptions{
		Path:         testPath,
		PathExplicit: true,
		Environ:      append([]string{}, env...),
		ReadFile:     files{testPath: src}.ReadFile,
	})
}

func mustLoadYAML(t *testing.T, src string, env ...string) *Config {
	t.Helper()
	cfg, err := loadYAML(t, src, env...)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return cfg
}

// problemsOf returns the problems of a Load error, failing unless it is an *Error.
func problemsOf(t *testing.T, err error) []Problem {
	t.Helper()
	if err == nil {
		t.Fatal("Load: got no error, want one")
	}
	var cerr *Error
	if !errors.As(err, &cerr) {
		t.Fatalf("Load error %T (%v) is not a *config.Error", err, err)
	}
	return cerr.Problems
}

// wantProblem fails unless err has a problem for key whose message contains every
// fragment.
func wantProblem(t *testing.T, err error, key string, fragments ...string) {
	t.Helper()
	for _, p := range problemsOf(t, err) {
		if p.Key != key {
			continue
		}
		ok := true
		for _, f := range fragments {
			ok = ok && strings.Contains(p.Message, f)
		}
		if ok {
			return
		}
	}
	t.Errorf("no problem for %q containing %q in:\n%v", key, fragments, err)
}

func TestDefaults(t *testing.T) {
	t.Parallel()
	var read []string
	cfg, err := Load(LoadOptions{
		Environ: []string{"HOME=/root", "PATH=/bin"},
		ReadFile: func(name string) ([]byte, error) {
			read = append(read, name)
			return files{}.ReadFile(name)
		},
	})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if got, want := read, []string{DefaultPath}; !slices.Equal(got, want) {
		t.Errorf("files read = %q, want %q", got, want)
	}
	want := Config{
		Database: Database{URL: "", MaxConnections: 20, ConnectTimeout: 5 * time.Minute},
		OneC: OneC{
			Interface:      InterfaceHTTPService,
			OData:          OData{ItemsBy: "Артикул"},
			Timeout:        30 * time.Second,
			MaxConcurrency: 4,
			SessionReuse:   true,
			Timezone:       "Asia/Almaty",
			GetRetries:     3,
			SettleTime:     2 * time.Minute,
			LateVerify:     time.Hour,
			MaxResponse:    64 << 20,
			PingInterval:   15 * time.Second,
		},
		Worker: Worker{
			MaxAttempts:     10,
			BackoffMin:      time.Second,
			BackoffMax:      10 * time.Minute,
			PollInterval:    time.Second,
			ShutdownTimeout: 30 * time.Second,
			GiveUpAfter:     72 * time.Hour,
		},
		HTTP: HTTP{
			Listen:          "127.0.0.1:8080",
			ReadTimeout:     10 * time.Second,
			WriteTimeout:    10 * time.Second,
			IdleTimeout:     time.Minute,
			ShutdownTimeout: 10 * time.Second,
		},
		Admin: Admin{Listen: "127.0.0.1:9090", PProf: false},
		Log:   Log{Level: "info", Format: "auto"},
		Connectors: Connectors{
			SKUMap: "",
			Kaspi: Kaspi{
				Type:          TypeKaspi,
				Enabled:       false,
				BaseURL:       "https://kaspi.kz/shop/api/v2",
				PollInterval:  time.Minute,
				Lookback:      72 * time.Hour,
				AcceptOrders:  true,
				States:        []string{"NEW", "PICKUP", "DELIVERY", "KASPI_DELIVERY"},
				Statuses:      []string{"APPROVED_BY_BANK", "ACCEPTED_BY_MERCHANT"},
				PageSize:      100,
				Timeout:       30 * time.Second,
				RatePerSecond: 5,
				MaxResponse:   16 << 20,
				Returns:       Returns{Enabled: true, PollInterval: 10 * time.Minute},
			},
			Ozon: Ozon{
				Type:          TypeOzon,
				Enabled:       false,
				BaseURL:       "https://api-seller.ozon.ru",
				APIVersion:    "v4",
				PollInterval:  time.Minute,
				Lookback:      72 * time.Hour,
				Acknowledge:   false,
				PageSize:      100,
				Timeout:       30 * time.Second,
				RatePerSecond: 10,
				MaxResponse:   16 << 20,
				Returns:       Returns{Enabled: true, PollInterval: 10 * time.Minute},
			},
			Wildberries: Wildberries{
				Type:          TypeWildberries,
				Enabled:       false,
				BaseURL:       "https://marketplace-api.wildberries.ru",
				PollInterval:  time.Minute,
				Lookback:      72 * time.Hour,
				Acknowledge:   false,
				SupplyName:    "ordersync",
				PageSize:      1000,
				Timeout:       30 * time.Second,
				RatePerSecond: 5,
				MaxResponse:   16 << 20,
				ContentURL:    "https://content-api.wildberries.ru",
				Returns: WildberriesReturns{Enabled: true, PollInterval: 10 * time.Minute,
					BaseURL: "https://seller-analytics-api.wildberries.ru"},
			},
			YandexMarket: YandexMarket{
				Type:          TypeYandexMarket,
				BaseURL:       "https://api.partner.market.yandex.ru",
				OrdersAPI:     YMCampaignAPI,
				StockAPI:      YMCampaignAPI,
				PollInterval:  time.Minute,
				Lookback:      72 * time.Hour,
				PageSize:      50,
				Timeout:       30 * time.Second,
				RatePerSecond: 2,
				MaxResponse:   16 << 20,
			},
			Uzum: Uzum{
				Type:          TypeUzum,
				BaseURL:       "https://api-seller.uzum.uz/api/seller-openapi",
				PollInterval:  time.Minute,
				Lookback:      72 * time.Hour,
				PageSize:      50,
				Timeout:       30 * time.Second,
				RatePerSecond: 3,
				MaxResponse:   16 << 20,
			},
		},
		Webhooks: Webhooks{
			MaxBody:   1 << 20,
			Tolerance: 5 * time.Minute,
			Sources:   nil,
			Ozon: OzonWebhook{
				Enabled:        false,
				AllowNetworks:  []string{"195.34.21.0/24", "185.73.192.0/22", "91.223.93.0/24"},
				TrustedProxies: nil,
			},
			Bitrix24: Bitrix24Webhook{
				Enabled:       false,
				CreateStages:  []string{"WON"},
				RatePerSecond: 2,
				Timeout:       30 * time.Second,
				MaxResponse:   16 << 20,
			},
		},
		Relay: Relay{
			Concurrency:   16,
			BatchSize:     100,
			Claimers:      2,
			PollInterval:  time.Second,
			Listen:        true,
			MaxAttempts:   12,
			BackoffMin:    time.Second,
			BackoffMax:    time.Hour,
			Lease:         time.Minute,
			Retention:     720 * time.Hour,
			PruneInterval: time.Hour,
			Destinations:  nil,
		},
		Stock: Stock{
			Timezone:          "Asia/Almaty",
			CatchUp:           CatchUpLatest,
			FullRefresh:       24 * time.Hour,
			Retention:         7 * 24 * time.Hour,
			RefreshAfterOrder: time.Minute,
			Schedules:         nil,
		},
		UI: UI{Lang: "ru", SessionTTL: 12 * time.Hour, SecureCookie: "auto"},
		Payouts: Payouts{Schedule: "30 3 * * *", Window: 7 * 24 * time.Hour,
			WildberriesURL: "https://statistics-api.wildberries.ru", OzonCurrency: "RUB"},
	}
	if !reflect.DeepEqual(*cfg, want) {
		t.Errorf("defaults:\n got %+v\nwant %+v", *cfg, want)
	}
	if got, want := cfg.Source(), "(defaults and environment only)"; got != want {
		t.Errorf("Source() = %q, want %q", got, want)
	}
	if got, want := cfg.OneC.Location().String(), "Asia/Almaty"; got != want {
		t.Errorf("Location() = %q, want %q", got, want)
	}
	if got, want := cfg.Stock.Location().String(), "Asia/Almaty"; got != want {
		t.Errorf("Stock.Location() = %q, want %q", got, want)
	}
	if specs := cfg.Stock.Specs(); len(specs) != 0 {
		t.Errorf("Stock.Specs() = %v, want none", specs)
	}
}

func TestDefaultPathIsRead(t *testing.T) {
	t.Parallel()
	cfg, err := Load(LoadOptions{
		Environ:  []string{},
		ReadFile: files{DefaultPath: "onec:\n  max_concurrency: 8\n"}.ReadFile,
	})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if got, want := cfg.Source(), DefaultPath; got != want {
		t.Errorf("Source() = %q, want %q", got, want)
	}
	if got, want := cfg.OneC.MaxConcurrency, 8; got != want {
		t.Errorf("onec.max_concurrency = %d, want %d", got, want)
	}
	if got, want := cfg.Database.MaxConnections, 20; got != want {
		t.Errorf("database.max_connections = %d, want the default %d", got, want)
	}
}

func TestDefaultPathUnreadable(t *testing.T) {
	t.Parallel()
	_, err := Load(LoadOptions{
		Environ: []string{},
		ReadFile: func(name string) ([]byte, error) {
			return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrPermission}
		},
	})
	wantProblem(t, err, "", DefaultPath, "permission denied")
}

func TestExplicitFileMissing(t *testing.T) {
	t.Parallel()
	_, err := Load(LoadOptions{
		Path:         "/nowhere/ordersync.yaml",
		PathExplicit: true,
		Environ:      []string{},
		ReadFile:     files{}.ReadFile,
	})
	wantProblem(t, err, "", "/nowhere/ordersync.yaml", "no such file")
}

func TestImplicitPathMissing(t *testing.T) {
	t.Parallel()
	// A path that is a default of the command line, not the user's choice.
	cfg, err := Load(LoadOptions{Path: "/nowhere/ordersync.yaml", Environ: []string{}, ReadFile: files{}.ReadFile})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if got, want := cfg.Source(), "(defaults and environment only)"; got != want {
		t.Errorf("Source() = %q, want %q", got, want)
	}
}

func TestFile(t *testing.T) {
	t.Parallel()
	cfg := mustLoadYAML(t, `
database:
  url: postgres://ordersync@db.example:5432/ordersync?sslmode=disable
  max_connections: 9
onec:
  base_url: https://1c.example/trade/hs/ordersync/v1
  username: ordersync
  password: s3cret
  timeout: 45s
  max_concurrency: 2
  session_reuse: false
  timezone: Asia/Aqtobe
  get_retries: 0
  max_response: 8MiB
worker:
  max_attempts: 3
  backoff_min: 500ms
  backoff_max: 1h30m
  poll_interval: 250ms
  shutdown_timeout: 1m
log:
  level: DEBUG
  format: text
`)
	want := Config{
		Database: Database{URL: "postgres://ordersync@db.example:5432/ordersync?sslmode=disable", MaxConnections: 9, ConnectTimeout: 5 * time.Minute},
		OneC: OneC{
			Interface:      InterfaceHTTPService,
			OData:          OData{ItemsBy: "Артикул"},
			BaseURL:        "https://1c.example/trade/hs/ordersync/v1",
			Username:       "ordersync",
			Password:       "s3cret",
			Timeout:        45 * time.Second,
			MaxConcurrency: 2,
			SessionReuse:   false,
			Timezone:       "Asia/Aqtobe",
			GetRetries:     0,
			SettleTime:     2 * time.Minute,
			LateVerify:     time.Hour,
			MaxResponse:    8 << 20,
			PingInterval:   15 * time.Second,
		},
		Worker: Worker{
			MaxAttempts:     3,
			BackoffMin:      500 * time.Millisecond,
			BackoffMax:      90 * time.Minute,
			PollInterval:    250 * time.Millisecond,
			ShutdownTimeout: time.Minute,
			GiveUpAfter:     72 * time.Hour,
		},
		HTTP:       defaults().HTTP,
		Admin:      defaults().Admin,
		Log:        Log{Level: "debug", Format: "text"},
		Connectors: defaults().Connectors,
		Webhooks:   defaults().Webhooks,
		Relay:      defaults().Relay,
		Stock:      defaults().Stock,
		Payouts:    defaults().Payouts,
		UI:         defaults().UI,
		source:     testPath,
	}
	if !reflect.DeepEqual(*cfg, want) {
		t.Errorf("loaded:\n got %+v\nwant %+v", *cfg, want)
	}
	if got, want := cfg.Source(), testPath; got != want {
		t.Errorf("Source() = %q, want %q", got, want)
	}
}

func TestEmptyFileAndEmptySections(t *testing.T) {
	t.Parallel()
	for _, src := range []string{"", "# nothing set\n", "onec:\nworker: {}\n"} {
		cfg, err := loadYAML(t, src)
		if err != nil {
			t.Errorf("Load(%q): %v", src, err)
			continue
		}
		if got, want := cfg.OneC.Timeout, 30*time.Second; got != want {
			t.Errorf("Load(%q): onec.timeout = %v, want %v", src, got, want)
		}
	}
}

func TestEnvOverridesFile(t *testing.T) {
	t.Parallel()
	cfg := mustLoadYAML(t, `
onec:
  base_url: http://file.example/hs/ordersync/v1
  timeout: 10s
  max_concurrency: 2
worker:
  max_attempts: 3
`,
		"ORDERSYNC_ONEC__BASE_URL=http://env.example/hs/ordersync/v1",
		"ORDERSYNC_WORKER__MAX_ATTEMPTS=5",
	)
	if got, want := cfg.OneC.BaseURL, "http://env.example/hs/ordersync/v1"; got != want {
		t.Errorf("onec.base_url = %q, want %q (environment wins)", got, want)
	}
	if got, want := cfg.Worker.MaxAttempts, 5; got != want {
		t.Errorf("worker.max_attempts = %d, want %d (environment wins)", got, want)
	}
	if got, want := cfg.OneC.Timeout, 10*time.Second; got != want {
		t.Errorf("onec.timeout = %v, want %v (file, not overridden)", got, want)
	}
	if got, want := cfg.OneC.MaxConcurrency, 2; got != want {
		t.Errorf("onec.max_concurrency = %d, want %d (file, not overridden)", got, want)
	}
}

func TestEnvNesting(t *testing.T) {
	t.Parallel()
	cfg := mustLoadYAML(t, "",
		"PATH=/usr/bin",
		"ORDERSYNC_DATABASE__URL=postgres://u@h/db",
		"ORDERSYNC_DATABASE__MAX_CONNECTIONS=36",
		"ORDERSYNC_ONEC__BASE_URL=http://1c.local/trade/hs/ordersync/v1",
		"ORDERSYNC_ONEC__USERNAME=svc",
		"ORDERSYNC_ONEC__PASSWORD=pw=with=equals",
		"ORDERSYNC_ONEC__TIMEOUT=1m30s",
		"ORDERSYNC_ONEC__MAX_CONCURRENCY=16",
		"ORDERSYNC_ONEC__SESSION_REUSE=false",
		"ORDERSYNC_ONEC__TIMEZONE=Europe/Moscow",
		"ORDERSYNC_ONEC__GET_RETRIES=1",
		"ORDERSYNC_ONEC__MAX_RESPONSE=1MiB",
		"ORDERSYNC_WORKER__MAX_ATTEMPTS=20",
		"ORDERSYNC_WORKER__BACKOFF_MIN=2s",
		"ORDERSYNC_WORKER__BACKOFF_MAX=1h",
		"ORDERSYNC_WORKER__POLL_INTERVAL=100ms",
		"ORDERSYNC_WORKER__SHUTDOWN_TIMEOUT=5s",
		"ORDERSYNC_LOG__LEVEL=warn",
		"ORDERSYNC_LOG__FORMAT=json",
	)
	want := Config{
		Database: Database{URL: "postgres://u@h/db", MaxConnections: 36, ConnectTimeout: 5 * time.Minute},
		OneC: OneC{
			Interface:      InterfaceHTTPService,
			OData:          OData{ItemsBy: "Артикул"},
			BaseURL:        "http://1c.local/trade/hs/ordersync/v1",
			Username:       "svc",
			Password:       "pw=with=equals",
			Timeout:        90 * time.Second,
			MaxConcurrency: 16,
			SessionReuse:   false,
			Timezone:       "Europe/Moscow",
			GetRetries:     1,
			SettleTime:     2 * time.Minute,
			LateVerify:     time.Hour,
			MaxResponse:    1 << 20,
			PingInterval:   15 * time.Second,
		},
		Worker: Worker{
			MaxAttempts:     20,
			BackoffMin:      2 * time.Second,
			BackoffMax:      time.Hour,
			PollInterval:    100 * time.Millisecond,
			ShutdownTimeout: 5 * time.Second,
			GiveUpAfter:     72 * time.Hour,
		},
		HTTP:       defaults().HTTP,
		Admin:      defaults().Admin,
		Log:        Log{Level: "warn", Format: "json"},
		Connectors: defaults().Connectors,
		Webhooks:   defaults().Webhooks,
		Relay:      defaults().Relay,
		Stock:      defaults().Stock,
		Payouts:    defaults().Payouts,
		UI:         defaults().UI,
		source:     testPath,
	}
	if !reflect.DeepEqual(*cfg, want) {
		t.Errorf("from environment:\n got %+v\nwant %+v", *cfg, want)
	}
}

func TestEnvBadValues(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		env, key  string
		fragments []string
	}{
		{"ORDERSYNC_WORKER__MAX_ATTEMPTS=five", "worker.max_attempts", []string{"whole number", `"five"`, "ORDERSYNC_WORKER__MAX_ATTEMPTS"}},
		{"ORDERSYNC_ONEC__SESSION_REUSE=maybe", "onec.session_reuse", []string{"true or false", "ORDERSYNC_ONEC__SESSION_REUSE"}},
		{"ORDERSYNC_ONEC__TIMEOUT=30", "onec.timeout", []string{"30s", `"30"`, "ORDERSYNC_ONEC__TIMEOUT"}},
	} {
		_, err := loadYAML(t, "", tc.env)
		wantProblem(t, err, tc.key, tc.fragments...)
	}
}

func TestUnknownKeyInFile(t *testing.T) {
	t.Parallel()
	_, err := loadYAML(t, `
onec:
  base_ulr: http://1c.local/trade/hs/ordersync/v1
  timeout: 10s
conectors: {}
`)
	wantProblem(t, err, "onec.base_ulr", "unknown key", testPath, "did you mean onec.base_url?")
	wantProblem(t, err, "conectors", "unknown key", testPath)
	if got, want := len(problemsOf(t, err)), 2; got != want {
		t.Errorf("got %d problems, want %d:\n%v", got, want, err)
	}
}

func TestUnknownKeyInEnv(t *testing.T) {
	t.Parallel()
	_, err := loadYAML(t, "",
		"ORDERSYNC_ONEC__BASE_ULR=http://1c.local/x",
		"ORDERSYNC_ONEC_TIMEOUT=30s",
		"ORDERSYNC_NOTHING_LIKE_IT=1",
		"ORDERSYNCX=ignored, not our prefix",
	)
	wantProblem(t, err, "onec.base_ulr", "unknown key", "ORDERSYNC_ONEC__BASE_ULR", "did you mean ORDERSYNC_ONEC__BASE_URL?")
	wantProblem(t, err, "onec_timeout", "unknown key", "ORDERSYNC_ONEC_TIMEOUT", "did you mean ORDERSYNC_ONEC__TIMEOUT?")
	wantProblem(t, err, "nothing_like_it", "unknown key", "ORDERSYNC_NOTHING_LIKE_IT")
	if got, want := len(problemsOf(t, err)), 3; got != want {
		t.Errorf("got %d problems, want %d:\n%v", got, want, err)
	}
}

func TestBadDuration(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		src, key  string
		fragments []string
	}{
		{"onec:\n  timeout: 30\n", "onec.timeout", []string{"30s", "got 30", testPath}},
		{"onec:\n  timeout: 3O s\n", "onec.timeout", []string{"30s", `got "3O s"`, testPath}},
		{"worker:\n  backoff_max: true\n", "worker.backoff_max", []string{"30s", "got true"}},
	} {
		_, err := loadYAML(t, tc.src)
		wantProblem(t, err, tc.key, tc.fragments...)
	}
}

func TestWrongTypes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		src, key  string
		fragments []string
	}{
		{"onec:\n  max_concurrency: four\n", "onec.max_concurrency", []string{"whole number", `"four"`}},
		{"onec:\n  max_concurrency: 4.5\n", "onec.max_concurrency", []string{"whole number", "4.5"}},
		{"onec:\n  session_reuse: yes\n", "onec.session_reuse", []string{"true or false", `"yes"`}},
		{"onec:\n  username: 1234\n", "onec.username", []string{"must be a string", "1234", "quotes"}},
		{"log:\n  level: [info]\n", "log.level", []string{"must be a string", "a list"}},
		{"onec: 5\n", "onec", []string{"section", "5"}},
	} {
		_, err := loadYAML(t, tc.src)
		wantProblem(t, err, tc.key, tc.fragments...)
	}
}

func TestSecretWrongTypeIsNotEchoed(t *testing.T) {
	t.Parallel()
	_, err := loadYAML(t, "onec:\n  password: 987654321\n")
	wantProblem(t, err, "onec.password", "must be a string", "a number")
	if strings.Contains(err.Error(), "987654321") {
		t.Errorf("error shows the password:\n%v", err)
	}
}

func TestSecretFiles(t *testing.T) {
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
	pwFile := write("onec-password", "Пароль с пробелом \n")
	urlFile := write("database-url", "postgres://ordersync:dbpass@db.example/ordersync\r\n")
	cfgFile := write("ordersync.yaml", "onec:\n  password_file: "+pwFile+"\n")

	cfg, err := Load(LoadOptions{
		Path:         cfgFile,
		PathExplicit: true,
		Environ:      []string{"ORDERSYNC_DATABASE__URL_FILE=" + urlFile},
	})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if got, want := cfg.OneC.Password, "Пароль с пробелом "; got != want {
		t.Errorf("onec.password = %q, want %q (trailing newline trimmed, nothing else)", got, want)
	}
	if got, want := cfg.Database.URL, "postgres://ordersync:dbpass@db.example/ordersync"; got != want {
		t.Errorf("database.url = %q, want %q", got, want)
	}
}

func TestSecretFileFromEnvOverridesFileValue(t *testing.T) {
	t.Parallel()
	fsys := files{testPath: "onec:\n  password: from-yaml\n", "/run/credentials/pw": "from-credential\n"}
	cfg, err := Load(LoadOptions{
		Path:         testPath,
		PathExplicit: true,
		Environ:      []string{"ORDERSYNC_ONEC__PASSWORD_FILE=/run/credentials/pw"},
		ReadFile:     fsys.ReadFile,
	})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if got, want := cfg.OneC.Password, "from-credential"; got != want {
		t.Errorf("onec.password = %q, want %q", got, want)
	}
}

func TestSecretBothSet(t *testing.T) {
	t.Parallel()
	_, err := loadYAML(t, "onec:\n  password: inline\n  password_file: /run/credentials/pw\n")
	wantProblem(t, err, "onec.password", "onec.password", "onec.password_file", "both")

	_, err = loadYAML(t, "", "ORDERSYNC_DATABASE__URL=postgres://h/db", "ORDERSYNC_DATABASE__URL_FILE=/run/credentials/url")
	wantProblem(t, err, "database.url", "database.url_file", "both")
	if strings.Contains(err.Error(), "inline") {
		t.Errorf("error shows the password:\n%v", err)
	}
}

func TestSecretFileUnreadable(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "no-such-credential")
	_, err := loadYAML(t, "onec:\n  password_file: "+missing+"\n")
	wantProblem(t, err, "onec.password_file", missing, "no such file")

	fsys := files{testPath: "database:\n  url_file: /run/credentials/empty\n", "/run/credentials/empty": "\n"}
	_, err = Load(LoadOptions{Path: testPath, PathExplicit: true, Environ: []string{}, ReadFile: fsys.ReadFile})
	wantProblem(t, err, "database.url_file", "/run/credentials/empty", "empty")
}

func TestValidationMessages(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		src, key, msg string
	}{
		{"onec:\n  max_concurrency: 0\n", "onec.max_concurrency", "must be between 1 and 256, got 0"},
		{"onec:\n  max_concurrency: 257\n", "onec.max_concurrency", "must be between 1 and 256, got 257"},
		{"worker:\n  backoff_max: 500ms\n", "worker.backoff_max", "must be at least worker.backoff_min (1s), got 500ms"},
		{"onec:\n  timezone: Asia/Almatty\n", "onec.timezone", `unknown time zone "Asia/Almatty"`},
		{"onec:\n  timezone: ''\n", "onec.timezone", "Asia/Almaty"},
		{"log:\n  level: verbose\n", "log.level", "must be one of debug, info, warn, error"},
		{"log:\n  format: xml\n", "log.format", "must be one of json, text, auto"},
		{"onec:\n  timeout: 0s\n", "onec.timeout", "must be greater than 0, got 0s"},
		{"onec:\n  timeout: -1s\n", "onec.timeout", "must be greater than 0, got -1s"},
		{"onec:\n  timeout: 30s\n  settle_time: 30s\n", "onec.settle_time", "must be greater than onec.timeout (30s), and than any proxy timeout in front of 1C, got 30s"},
		{"onec:\n  timeout: 3m\n", "onec.settle_time", "must be greater than onec.timeout (3m), and than any proxy timeout in front of 1C, got 2m"},
		{"onec:\n  settle_time: 2m\n  late_verify: 2m\n", "onec.late_verify", "must be greater than onec.settle_time (2m)"},
		{"worker:\n  give_up_after: 0s\n", "worker.give_up_after", "must be greater than 0, got 0s"},
		{"onec:\n  get_retries: -1\n", "onec.get_retries", "must be at least 0, got -1"},
		{"onec:\n  base_url: 1c.local/trade/hs/ordersync/v1\n", "onec.base_url", "absolute http:// or https:// URL"},
		{"onec:\n  base_url: ftp://1c.local/x\n", "onec.base_url", "absolute http:// or https:// URL"},
		{"onec:\n  base_url: http://admin:pw@1c.local/x\n", "onec.base_url", "must not contain a user name or password"},
		{"onec:\n  username: 'a:b'\n", "onec.username", "must not contain ':'"},
		{"worker:\n  max_attempts: 0\n", "worker.max_attempts", "must be at least 1, got 0"},
		{"worker:\n  backoff_min: 0s\n", "worker.backoff_min", "must be greater than 0"},
		{"worker:\n  poll_interval: 0s\n", "worker.poll_interval", "must be greater than 0"},
		{"worker:\n  shutdown_timeout: 0s\n", "worker.shutdown_timeout", "must be greater than 0"},
		{"database:\n  max_connections: 11\n", "database.max_connections", "11 is too few for onec.max_concurrency 4: needs at least 12"},
		{"database:\n  max_connections: 11\n", "database.max_connections", "raise database.max_connections"},
		{"database:\n  max_connections: 11\n", "database.max_connections", "or lower onec.max_concurrency"},
		{"database:\n  max_connections: 20\nonec:\n  max_concurrency: 9\n", "database.max_connections", "needs at least 22"},
		{"database:\n  max_conns: 12\n", "database.max_conns", "was replaced by database.max_connections"},
		{"database:\n  url: postgres://u:hunter2@h/db?pool_max_conns=5\n", "database.url", "pool_max_conns is not used: database.max_connections"},
		{"database:\n  url: mysql://u:hunter2@h/db\n", "database.url", `scheme "mysql"`},
		{"database:\n  url: host=h password=hunter2\n", "database.url", "must be a URL"},
	} {
		_, err := loadYAML(t, tc.src)
		wantProblem(t, err, tc.key, tc.msg)
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("error shows a password:\n%v", err)
		}
	}
}

func TestInvalidUTF8FromEnv(t *testing.T) {
	t.Parallel()
	// A Windows-1251 user name that was never converted.
	_, err := loadYAML(t, "", "ORDERSYNC_ONEC__USERNAME=\xc0\xe4\xec\xe8\xed")
	wantProblem(t, err, "onec.username", "UTF-8")
}

func TestAllProblemsAtOnce(t *testing.T) {
	t.Parallel()
	_, err := loadYAML(t, `
onec:
  max_concurrency: 0
  timezone: Asia/Almatty
  timeout: 30
worker:
  backoff_min: 1s
  backoff_max: 500ms
log:
  level: loud
`, "ORDERSYNC_WORKER__MAX_ATTEMPTS=0")
	ps := problemsOf(t, err)
	var keys []string
	for _, p := range ps {
		keys = append(keys, p.Key)
	}
	slices.Sort(keys)
	want := []string{"log.level", "onec.max_concurrency", "onec.timeout", "onec.timezone", "worker.backoff_max", "worker.max_attempts"}
	if !slices.Equal(keys, want) {
		t.Errorf("problem keys = %q, want %q\n%v", keys, want, err)
	}
	lines := strings.Split(err.Error(), "\n")
	if got, want := len(lines), len(ps); got != want {
		t.Errorf("Error() has %d lines for %d problems:\n%v", got, want, err)
	}
	for _, line := range lines {
		key, _, _ := strings.Cut(line, ":")
		if !slices.Contains(want, key) {
			t.Errorf("line %q does not start with its key", line)
		}
	}
}

func TestDecodeFailureReportedOnce(t *testing.T) {
	t.Parallel()
	// The environment's value is not a number, so the file's (also wrong) value
	// stays; only the error the operator must fix first is reported.
	_, err := loadYAML(t, "onec:\n  max_concurrency: 0\n", "ORDERSYNC_ONEC__MAX_CONCURRENCY=x")
	ps := problemsOf(t, err)
	if len(ps) != 1 || ps[0].Key != "onec.max_concurrency" || !strings.Contains(ps[0].Message, "ORDERSYNC_ONEC__MAX_CONCURRENCY") {
		t.Errorf("want one problem naming onec.max_concurrency and its variable, got:\n%v", err)
	}
}

func TestUTF8Username(t *testing.T) {
	t.Parallel()
	const name = "Администратор Склада"
	cfg := mustLoadYAML(t, "onec:\n  username: "+name+"\n")
	if got := cfg.OneC.Username; got != name {
		t.Errorf("onec.username from file = %q, want %q", got, name)
	}
	cfg = mustLoadYAML(t, "", "ORDERSYNC_ONEC__USERNAME="+name)
	if got := cfg.OneC.Username; got != name {
		t.Errorf("onec.username from environment = %q, want %q", got, name)
	}
	out, err := cfg.Effective()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "username: "+name+"\n") {
		t.Errorf("effective configuration does not show the user name as written:\n%s", out)
	}
}

func TestEffective(t *testing.T) {
	t.Parallel()
	const (
		pw     = "Секрет-onec-pw"
		dbPass = "db-p@ss:word"
		dbURL  = "postgres://ordersync:db-p%40ss%3Aword@db.example:5432/ordersync?sslmode=require"
	)
	src := `
database:
  url: ` + dbURL + `
onec:
  base_url: http://1c.local/trade/hs/ordersync/v1
  username: Кассир
  password: ` + pw + `
  timeout: 1m30s
worker:
  backoff_max: 1h
`
	cfg := mustLoadYAML(t, src)
	out, err := cfg.Effective()
	if err != nil {
		t.Fatalf("Effective: %v", err)
	}
	text := string(out)
	for _, want := range []string{
		"  password: '***'\n",
		"  url: postgres://ordersync:***@db.example:5432/ordersync?sslmode=require\n",
		"  timeout: 1m30s\n",
		"  backoff_max: 1h\n",
		"  backoff_min: 1s\n",
		"  shutdown_timeout: 30s\n",
		"  max_connections: 20\n",
		"  session_reuse: true\n",
		"  format: auto\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("effective configuration lacks %q:\n%s", want, text)
		}
	}
	for _, secret := range []string{pw, dbPass, "db-p%40ss"} {
		if strings.Contains(text, secret) {
			t.Errorf("effective configuration shows secret %q:\n%s", secret, text)
		}
	}

	// Every key is there, in struct order, sections first to last.
	m, err := yaml.Parser().Unmarshal(out)
	if err != nil {
		t.Fatalf("effective output is not YAML: %v\n%s", err, text)
	}
	flat, _ := maps.Flatten(m, nil, ".")
	wantKeys := 0
	for _, f := range keys().fields {
		if f.in != nil {
			continue // in the entries of a map section; this configuration has none
		}
		wantKeys++
		if _, ok := flat[f.key]; !ok {
			t.Errorf("effective configuration lacks key %s", f.key)
		}
	}
	for key := range keys().maps {
		if strings.Contains(key, "~") {
			continue // further accounts print as connectors.<name>; there are none
		}
		wantKeys++
		if v, ok := flat[key]; !ok || !reflect.DeepEqual(v, map[string]any{}) {
			t.Errorf("effective configuration shows map section %s as %v, want an empty section", key, v)
		}
	}
	if got, want := len(flat), wantKeys; got != want {
		t.Errorf("effective configuration has %d keys, want %d", got, want)
	}
	if i, j := strings.Index(text, "database:"), strings.Index(text, "log:"); i < 0 || j < i {
		t.Errorf("sections not in struct order:\n%s", text)
	}

	// Round trip: the output, secrets restored, loads to the same configuration.
	restored := strings.Replace(text, "'***'", "'"+pw+"'", 1)
	restored = strings.Replace(restored, "postgres://ordersync:***@", "postgres://ordersync:db-p%40ss%3Aword@", 1)
	again := mustLoadYAML(t, restored)
	if !reflect.DeepEqual(again, cfg) {
		t.Errorf("round trip:\n got %+v\nwant %+v\nfrom:\n%s", *again, *cfg, restored)
	}
}

func TestEffectiveEmptySecrets(t *testing.T) {
	t.Parallel()
	cfg := mustLoadYAML(t, "")
	out, err := cfg.Effective()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"  password: \"\"\n", "  url: \"\"\n"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("effective configuration lacks %q:\n%s", want, out)
		}
	}
	again := mustLoadYAML(t, string(out))
	if !reflect.DeepEqual(again, cfg) {
		t.Errorf("round trip:\n got %+v\nwant %+v", *again, *cfg)
	}
}

func TestMaskURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"postgres://ordersync@host/db", "postgres://ordersync@host/db"},
		{"postgres://ordersync:pw@host:5432/db", "postgres://ordersync:***@host:5432/db"},
		{"postgres://ordersync:pw@host/db?sslmode=disable&password=pw2", "postgres://ordersync:***@host/db?sslmode=disable&password=***"},
		{"postgres://host/db?PASSWORD=pw", "postgres://host/db?PASSWORD=***"},
		{"postgres://us%20er:pw@/db?host=/run/postgresql", "postgres://us%20er:***@/db?host=/run/postgresql"},
		{"host=h password=pw", "***"},
	} {
		if got := maskURL(tc.in); got != tc.want {
			t.Errorf("maskURL(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestFormatDuration(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   time.Duration
		want string
	}{
		{30 * time.Second, "30s"},
		{10 * time.Minute, "10m"},
		{time.Hour, "1h"},
		{90 * time.Minute, "1h30m"},
		{time.Hour + time.Second, "1h0m1s"},
		{500 * time.Millisecond, "500ms"},
		{0, "0s"},
	} {
		got := formatDuration(tc.in)
		if got != tc.want {
			t.Errorf("formatDuration(%v) = %q, want %q", tc.in, got, tc.want)
		}
		if back, err := time.ParseDuration(got); err != nil || back != tc.in {
			t.Errorf("time.ParseDuration(%q) = %v, %v; want %v", got, back, err, tc.in)
		}
	}
}

// TestExampleFile keeps configs/ordersync.example.yaml and the Config struct in
// step: the example loads, names every key (a secret in either form; every key of a
// map section in each of its entries, and at least one entry), has no unknown key,
// shows the defaults as the defaults, and names every key's variable.
func TestExampleFile(t *testing.T) {
	t.Parallel()
	const example = "../../configs/ordersync.example.yaml"
	b, err := os.ReadFile(example)
	if err != nil {
		t.Fatal(err)
	}
	var p problems
	types := map[string]string{}
	flat, levels, _, err := parseFile(b, "", types, &p)
	if err != nil || len(p) > 0 {
		t.Fatalf("%s: %v %v", example, err, p.err())
	}
	tab := keys()
	entries := map[*mapSection][]string{}
	routed := map[string]any{} // flat, keys in the table's terms
	for key := range flat {
		lv := routeLevels(levels[key], types)
		routed[strings.Join(lv, ".")] = flat[key]
		mt := tab.match(lv)
		if mt.badName {
			t.Errorf("%s has an entry with a name not allowed: %s", example, mt.entry)
			continue
		}
		if mt.entry != "" && !slices.Contains(entries[mt.in], mt.entry) {
			entries[mt.in] = append(entries[mt.in], mt.entry)
		}
		if !tab.known(mt.pattern) {
			t.Errorf("%s has unknown key %s", example, key)
		}
	}
	further := 0
	for _, ms := range tab.maps {
		if strings.Contains(ms.key, "~") {
			// A further account has the keys of its type's first account, which
			// the example shows; one further account shows how one is written.
			further += len(entries[ms])
			continue
		}
		if len(entries[ms]) == 0 {
			t.Errorf("%s shows no entry of %s, so not its keys", example, ms.key)
		}
	}
	if further == 0 {
		t.Errorf("%s shows no further account (connectors.<name> with type:)", example)
	}
	for _, f := range tab.fields {
		shown := []string{f.key}
		if f.in != nil {
			shown = nil
			for _, entry := range entries[f.in] {
				shown = append(shown, tab.concrete(f.key, entry))
			}
		}
		if f.in != nil && strings.Contains(f.in.key, "~") {
			shown = nil // a further account leaves keys to its type's defaults
		}
		for _, key := range shown {
			_, plain := routed[key]
			_, file := routed[key+"_file"]
			if !plain && !(f.secret != "" && file) {
				t.Errorf("%s does not show key %s", example, key)
			}
		}
	}

	// Load it as it is, with its credential files present.
	fsys := files{}
	fsys["/etc/ordersync/ordersync.yaml"] = string(b)
	for key, v := range flat {
		if f := tab.byFile[tab.match(levels[key]).pattern]; f != nil {
			fsys[v.(string)] = "example-secret\n"
			if f.isList() {
				fsys[v.(string)] = "# the newest first\n" + testSecret + "\n"
			}
		}
	}
	cfg, err := Load(LoadOptions{Environ: []string{}, ReadFile: fsys.ReadFile})
	if err != nil {
		t.Fatalf("loading %s: %v", example, err)
	}

	// Values that are not site-specific must be the defaults, so that the
	// comments' "Default:" and the example's values agree with the code.
	siteSpecific := map[string]bool{
		"database.url": true, "onec.base_url": true, "onec.username": true, "onec.password": true,
		"relay.destinations.*.type": true, "relay.destinations.*.url": true, "relay.destinations.*.secrets": true,
		"relay.destinations.*.events": true, "relay.destinations.*.connector": true,
		"webhooks.sources.*.secrets": true, "stock.schedules": true, "connectors.kaspi.stores": true,
		"connectors.ozon.stock_warehouses": true, "connectors.wildberries.stock_warehouses": true,
		"onec.odata.profile": true, "onec.odata.organization": true, "onec.odata.warehouse": true, "onec.odata.currency": true,
		"onec.odata.sources.*.partner": true, "onec.odata.sources.*.counterparty": true, "onec.odata.sources.*.agreement": true,
	}
	def := defaults()
	def.derive()
	got, want := reflect.ValueOf(cfg).Elem(), reflect.ValueOf(def)
	for _, f := range tab.fields {
		if siteSpecific[f.key] || strings.HasPrefix(f.key, "connectors.") && strings.HasSuffix(f.key, ".type") {
			continue // a type is its account's name, or the account's own
		}
		if f.in != nil && strings.Contains(f.in.key, "~") && !slices.Contains([]string{"enabled"}, f.key[strings.LastIndexByte(f.key, '.')+1:]) {
			continue // the further account's values are the user's
		}
		if f.in == nil {
			if g, w := got.FieldByIndex(f.index).Interface(), want.FieldByIndex(f.index).Interface(); !reflect.DeepEqual(g, w) {
				t.Errorf("%s: %s is %v, but the default is %v", example, f.key, g, w)
			}
			continue
		}
		entryMap := got.FieldByIndex(f.in.index)
		for _, name := range entryMap.MapKeys() {
			g := entryMap.MapIndex(name).FieldByIndex(f.index).Interface()
			w := f.in.defaults.FieldByIndex(f.index).Interface()
			if !reflect.DeepEqual(g, w) {
				t.Errorf("%s: %s is %v, but the default is %v", example, tab.concrete(f.key, f.in.key+"."+name.String()), g, w)
			}
		}
	}
	for _, f := range tab.fields {
		if f.in != nil && strings.Contains(f.in.key, "~") {
			continue // the example names ORDERSYNC_CONNECTORS__<NAME>__<KEY> once
		}
		if !strings.Contains(string(b), envVar(f.key)) {
			t.Errorf("%s does not mention the variable %s", example, envVar(f.key))
		}
		if f.secret != "" && !strings.Contains(string(b), envVar(f.fileKey())) {
			t.Errorf("%s does not mention the variable %s", example, envVar(f.fileKey()))
		}
	}
}

func TestErrorFormat(t *testing.T) {
	t.Parallel()
	err := &Error{Problems: []Problem{
		{Key: "onec.timeout", Message: "must be greater than 0, got 0s"},
		{Message: "config file /x.yaml: no such file"},
	}}
	if got, want := err.Error(), "onec.timeout: must be greater than 0, got 0s\nconfig file /x.yaml: no such file"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

// database.max_conns, the main pool's size, was replaced by database.max_connections,
// the total: setting it, in the file or the environment, is a problem naming the new
// key, never a silent default.
func TestMaxConnsWasReplacedByMaxConnections(t *testing.T) {
	t.Parallel()
	_, err := loadYAML(t, "database:\n  max_conns: 12\n")
	wantProblem(t, err, "database.max_conns", "was replaced by database.max_connections", "the total", testPath)
	_, err = loadYAML(t, "", "ORDERSYNC_DATABASE__MAX_CONNS=12")
	wantProblem(t, err, "database.max_conns", "was replaced by ORDERSYNC_DATABASE__MAX_CONNECTIONS", "ORDERSYNC_DATABASE__MAX_CONNS")

	cfg := mustLoadYAML(t, "database:\n  max_connections: 12\n")
	if got, want := cfg.Database.MaxConnections, 12; got != want {
		t.Errorf("database.max_connections = %d, want %d", got, want)
	}
	if got, want := MinConnections(4), 12; got != want {
		t.Errorf("MinConnections(4) = %d, want %d", got, want)
	}
}
