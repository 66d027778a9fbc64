// Package config owns ordersync's configuration (configs/ordersync.example.yaml): the Config
// struct, its defaults, loading from a YAML file and ORDERSYNC_ environment
// variables, secrets given as files (x_file), strict decoding, validation, and the
// effective configuration with secrets masked that `ordersync config check` prints.
//
// Adding a section is adding a field to Config (with a koanf tag), its defaults in
// defaults() and its checks in validate(); keys, environment variables, the _file
// form of secrets and the effective output follow from the struct. Secrets carry the
// struct tag `secret:"true"` (masked whole, or each item of a list) or `secret:"url"`
// (a URL whose password is masked). Fields are strings, ints, bools, durations,
// sizes (int64, a number of bytes written 1MiB, 512KiB, 2MB or 1048576; see
// internal/bytesize) and lists of strings ([]string; comma-separated in the environment). A
// string with the tag `number:"text"` (connectors.kaspi.merchant_id) also takes a
// whole number in the file, as its decimal text.
//
// A section whose keys are names the user chooses (relay.destinations.crm) is a
// map[string]SomeStruct with a `name:"regexp"` tag for the names allowed; the
// defaults of one entry go in entryDefaults(). Its keys are known as
// relay.destinations.*.url, set from the environment as
// ORDERSYNC_RELAY__DESTINATIONS__CRM__URL, and printed per entry, by name.
//
// Two kinds of field hold several values under one key, which a layer sets whole
// (the environment replaces the file's, it does not merge with it):
//
//   - A map of strings (map[string]string: connectors.ozon.stock_warehouses) is a
//     section of names and values, {WH1: 1020000000001}. The names are the user's
//     (warehouse codes, kept as written, dots included) and must be strings in the
//     file, since YAML reads an unquoted 0001 as the number 1; a value may be a
//     whole number, taken as written. In the environment it is NAME=VALUE pairs,
//     comma-separated, the names' case kept:
//     ORDERSYNC_CONNECTORS__OZON__STOCK_WAREHOUSES=WH1=1020000000001,WH2=1020000000002.
//     Its problems name an item as connectors.ozon.stock_warehouses.WH1. It prints
//     by name, {} when empty.
//   - A list of sections ([]SomeStruct: stock.schedules) is a YAML list of entries,
//     each a section of the entry struct's keys (strings, ints, bools, durations,
//     sizes, lists of strings; no sections, maps or secrets), decoded as strictly
//     as any section: an unknown key in an entry is a problem naming it,
//     stock.schedules[0].crom. In the environment it is a JSON list:
//     ORDERSYNC_STOCK__SCHEDULES='[{"name":"main","cron":"@hourly","warehouses":["WH1"]}]'.
//     Problems name an entry by its position, stock.schedules[0].cron. It prints
//     its entries in order, [] when there is none.
package config

import (
	"encoding/base64"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ordersync/ordersync/internal/outbox"

	// The 1C base's time zone must load on a minimal host without /usr/share/zoneinfo.
	_ "time/tzdata"
)

// DefaultPath is the configuration file read when no --config is given, if it exists.
const DefaultPath = "/etc/ordersync/ordersync.yaml"

// Config is the whole configuration. Load returns it merged, decoded and validated.
type Config struct {
	Database   Database   `koanf:"database"`
	OneC       OneC       `koanf:"onec"`
	Worker     Worker     `koanf:"worker"`
	HTTP       HTTP       `koanf:"http"`
	Admin      Admin      `koanf:"admin"`
	Log        Log        `koanf:"log"`
	Connectors Connectors `koanf:"connectors"`
	Webhooks   Webhooks   `koanf:"webhooks"`
	Relay      Relay      `koanf:"relay"`
	Stock      Stock      `koanf:"stock"`
	UI         UI         `koanf:"ui"`
	Payouts    Payouts    `koanf:"payouts"`

	source string // the file loaded, "" when none
	// unread are the secrets given as files that LoadOptions.ReadSecret left
	// unread: key → file.
	unread map[string]string
}

// Database is the journal's database.
type Database struct {
	// URL is postgres://user:password@host:port/db?… Empty means not configured;
	// commands that need a database say so (Load does not require it).
	URL string `koanf:"url" secret:"url"`
	// MaxConnections is the most connections the process opens to PostgreSQL at
	// once, all together (default 20): 1 for LISTEN, 2 for the inbox writers, the
	// rest for the main pool, where claims and locks may hold all but one. At least
	// 2*onec.max_concurrency+4: every 1C call in flight holds its journal row lock
	// on one connection (and a cancel a second lock on another) while its attempt
	// row is written on yet another. It replaces max_conns, the main pool's size.
	MaxConnections int `koanf:"max_connections"`
	// ConnectTimeout is how long `run` and `migrate` keep trying to reach a database
	// server that does not answer yet (a PostgreSQL on another host still booting)
	// before they give up; 0 tries once. Other commands try once.
	ConnectTimeout time.Duration `koanf:"connect_timeout"`
}

// OneC is the 1C:Enterprise base: over ordersync's HTTP service (contract v1) or
// the standard OData interface (Interface).
type OneC struct {
	// Interface is how ordersync talks to the base: httpservice or odata.
	Interface      string        `koanf:"interface"`
	BaseURL        string        `koanf:"base_url"` // required by `run`; absolute http(s) URL when set
	Username       string        `koanf:"username"`
	Password       string        `koanf:"password" secret:"true"`
	Timeout        time.Duration `koanf:"timeout"`
	MaxConcurrency int           `koanf:"max_concurrency"`
	SessionReuse   bool          `koanf:"session_reuse"`
	Timezone       string        `koanf:"timezone"` // IANA name; 1C dates carry no zone
	GetRetries     int           `koanf:"get_retries"`
	// SettleTime is how long 1C may go on writing an order after the client stopped
	// waiting (a timeout, a proxy's 504): no attempt follows an unknown outcome, and no
	// cancel concludes "never created", sooner.
	SettleTime time.Duration `koanf:"settle_time"`
	// LateVerify is how long after a doubtful POST a create that was ever in doubt
	// is looked up in 1C once more, for a 1C slower than the settle time: a stale
	// POST it commits that late is still found and reported as a duplicate.
	LateVerify time.Duration `koanf:"late_verify"`
	// MaxResponse bounds the body of one answer from 1C, in bytes: a larger one is
	// not read (the call fails naming this key).
	MaxResponse int64 `koanf:"max_response"`
	// PingInterval is how often `run` pings 1C for its readiness (/readyz) and
	// ordersync_onec_up.
	PingInterval time.Duration `koanf:"ping_interval"`
	// OData is read with Interface odata.
	OData OData `koanf:"odata"`
}

// Worker is the engine's claim, retry and shutdown policy.
type Worker struct {
	MaxAttempts     int           `koanf:"max_attempts"`
	BackoffMin      time.Duration `koanf:"backoff_min"`
	BackoffMax      time.Duration `koanf:"backoff_max"`
	PollInterval    time.Duration `koanf:"poll_interval"` // how often idle workers look for due operations
	ShutdownTimeout time.Duration `koanf:"shutdown_timeout"`
	// GiveUpAfter: failures that are not the order's (1C down, a missing
	// publication) fail an operation only once this has passed since its first attempt.
	GiveUpAfter time.Duration `koanf:"give_up_after"`
}

// Log is the program's log output.
type Log struct {
	Level  string `koanf:"level"`  // debug, info, warn or error
	Format string `koanf:"format"` // json, text, or auto (text when stderr is a terminal)
}

// Relay delivers the outbox's events to their destinations: lanes in parallel, each
// in order, at least once.
type Relay struct {
	Concurrency   int           `koanf:"concurrency"`    // lanes in flight at once
	BatchSize     int           `koanf:"batch_size"`     // lane heads claimed per round
	Claimers      int           `koanf:"claimers"`       // claim loops at once
	PollInterval  time.Duration `koanf:"poll_interval"`  // how often to look without a notification
	Listen        bool          `koanf:"listen"`         // wake on LISTEN/NOTIFY; false polls only
	MaxAttempts   int           `koanf:"max_attempts"`   // then the event is dead
	BackoffMin    time.Duration `koanf:"backoff_min"`    // wait before the first retry
	BackoffMax    time.Duration `koanf:"backoff_max"`    // longest wait between retries
	Lease         time.Duration `koanf:"lease"`          // how long a claimed event is reserved for one relay
	Retention     time.Duration `koanf:"retention"`      // sent events older than this are pruned
	PruneInterval time.Duration `koanf:"prune_interval"` // how often pruning runs
	// Destinations by name. Nil when none is configured: the relay then has
	// nowhere to send, and the engine addresses no events.
	Destinations map[string]Destination `koanf:"destinations" name:"[a-z0-9_-]{1,64}"`
}

// Destination types and what a dead event does to its lane.
const (
	DestinationWebhook   = "webhook"   // POST, signed with Standard Webhooks
	DestinationConnector = "connector" // a marketplace acknowledgement by a connector
	OnDeadBlock          = "block"     // the lane's later events wait (ordering over progress)
	OnDeadSkip           = "skip"      // the lane's later events go on
)

// Destination is where the relay sends the events of the types it subscribes to.
type Destination struct {
	Type string `koanf:"type"` // DestinationWebhook or DestinationConnector
	// URL is the webhook's endpoint: absolute http(s), for webhooks only.
	URL string `koanf:"url"`
	// Secrets sign webhooks (whsec_ and base64): the first signs; several are
	// allowed so that a secret can be rotated. Webhooks only.
	Secrets []string      `koanf:"secrets" secret:"true"`
	Events  []string      `koanf:"events"`  // event types sent here: outbox.OrderCreated, …
	Timeout time.Duration `koanf:"timeout"` // of one delivery
	OnDead  string        `koanf:"on_dead"` // OnDeadBlock or OnDeadSkip
	// Connector publishes the events of a connector destination: kaspi, ozon or
	// wildberries, enabled in Connectors. Empty for webhooks.
	Connector string `koanf:"connector"`
}

// eventTypes are the event types a destination may subscribe to.
var eventTypes = []string{outbox.OrderCreated, outbox.OrderCancelled, outbox.OrderDuplicateIn1C, outbox.StockSnapshot, outbox.ReturnCreated}

// defaults is the configuration before any file or environment variable.
func defaults() Config {
	return Config{
		Database: Database{
			MaxConnections: 20,
			ConnectTimeout: 5 * time.Minute,
		},
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
			IdleTimeout:     60 * time.Second,
			ShutdownTimeout: 10 * time.Second,
		},
		Admin: Admin{
			Listen: "127.0.0.1:9090",
		},
		UI: UI{
			Lang:         "ru",
			SessionTTL:   12 * time.Hour,
			SecureCookie: "auto",
		},
		Log: Log{
			Level:  "info",
			Format: "auto",
		},
		Connectors: Connectors{
			Kaspi: Kaspi{
				Type:          TypeKaspi,
				BaseURL:       "https://kaspi.kz/shop/api/v2",
				PollInterval:  time.Minute,
				Lookback:      72 * time.Hour,
				AcceptOrders:  true,
				States:        []string{"NEW", "PICKUP", "DELIVERY", "KASPI_DELIVERY"},
				Statuses:      []string{"APPROVED_BY_BANK", "ACCEPTED_BY_MERCHANT"},
				PageSize:      100,
				Timeout:       30 * time.Second,
				RatePerSecond: 5,
				MaxResponse:   defaultConnectorMaxResponse,
				Returns:       Returns{Enabled: true, PollInterval: 10 * time.Minute},
			},
			Ozon: Ozon{
				Type:          TypeOzon,
				BaseURL:       "https://api-seller.ozon.ru",
				APIVersion:    OzonV4,
				PollInterval:  time.Minute,
				Lookback:      72 * time.Hour,
				PageSize:      100,
				Timeout:       30 * time.Second,
				RatePerSecond: 10,
				MaxResponse:   defaultConnectorMaxResponse,
				Returns:       Returns{Enabled: true, PollInterval: 10 * time.Minute},
			},
			Wildberries: Wildberries{
				Type:          TypeWildberries,
				BaseURL:       "https://marketplace-api.wildberries.ru",
				PollInterval:  time.Minute,
				Lookback:      72 * time.Hour,
				SupplyName:    "ordersync",
				PageSize:      1000,
				Timeout:       30 * time.Second,
				RatePerSecond: 5,
				MaxResponse:   defaultConnectorMaxResponse,
				ContentURL:    "https://content-api.wildberries.ru",
				Returns: WildberriesReturns{Enabled: true, PollInterval: 10 * time.Minute,
					BaseURL: "https://seller-analytics-api.wildberries.ru"},
			},
			YandexMarket: defaultYandexMarket(),
			Uzum:         defaultUzum(),
		},
		Webhooks: Webhooks{
			MaxBody:   1 << 20,
			Tolerance: 5 * time.Minute,
			Ozon: OzonWebhook{
				// The networks Ozon publishes for its pushes.
				AllowNetworks: []string{"195.34.21.0/24", "185.73.192.0/22", "91.223.93.0/24"},
			},
			Bitrix24: Bitrix24Webhook{
				CreateStages:  []string{"WON"},
				RatePerSecond: 2,
				Timeout:       30 * time.Second,
				MaxResponse:   defaultConnectorMaxResponse,
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
			Lease:         60 * time.Second,
			Retention:     30 * 24 * time.Hour,
			PruneInterval: time.Hour,
		},
		Stock: Stock{
			Timezone:          "Asia/Almaty",
			CatchUp:           CatchUpLatest,
			FullRefresh:       24 * time.Hour,
			Retention:         7 * 24 * time.Hour,
			RefreshAfterOrder: time.Minute,
		},
		Payouts: defaultPayouts(),
	}
}

// entryDefaults are the defaults of one entry of each map section, by the
// section's key: the keys an entry leaves out.
func entryDefaults() map[string]any {
	return addTypeDefaults(map[string]any{
		"relay.destinations": Destination{
			Timeout: 10 * time.Second,
			OnDead:  OnDeadBlock,
		},
		"onec.odata.sources": ODataSource{},
	})
}

// derive fills in defaults that depend on other keys and normalises spelling. It
// runs after merging and before validation.
func (c *Config) derive() {
	c.Log.Level = strings.ToLower(c.Log.Level)
	c.Log.Format = strings.ToLower(c.Log.Format)
	c.Connectors.derive()
	c.Webhooks.derive()
	c.Stock.derive()
	c.Payouts.derive()
	if len(c.UI.Hosts) == 0 {
		c.UI.Hosts = nil
	}
	if len(c.UI.Users) == 0 {
		c.UI.Users = nil // an empty list is no list, however it was written
	}
	// An empty list is no list, however it was written ([], or an empty variable).
	for name, d := range c.Relay.Destinations {
		if len(d.Secrets) == 0 {
			d.Secrets = nil
		}
		if len(d.Events) == 0 {
			d.Events = nil
		}
		c.Relay.Destinations[name] = d
	}
}

// Unread reports whether the secret key (onec.password,
// relay.destinations.crm.secrets) was given as a file that was not read
// (LoadOptions.ReadSecret), and names the file: the secret is empty here, and the
// command must not use it.
func (c *Config) Unread(key string) (file string, ok bool) {
	file, ok = c.unread[key]
	return file, ok
}

// Source names the configuration file that was loaded, or says that none was.
func (c *Config) Source() string {
	if c.source == "" {
		return "(defaults and environment only)"
	}
	return c.source
}

// Location returns the time zone of the 1C base. Call it on a validated
// configuration (from Load), once, at wiring time: it panics if onec.timezone does
// not load, which validation rules out.
func (c OneC) Location() *time.Location {
	loc, err := time.LoadLocation(c.Timezone)
	if err != nil {
		panic(fmt.Sprintf("config: onec.timezone %q used without validation: %v", c.Timezone, err))
	}
	return loc
}

// validate checks the merged configuration and records every problem.
func (c *Config) validate(p *problems) {
	c.Database.validate(p)
	c.OneC.validate(p)
	c.checkConnections(p)
	c.Worker.validate(p)
	c.HTTP.validate(p)
	c.Admin.validate(c.HTTP, p)
	c.UI.validate(c.HTTP, c.Admin, p)
	c.Log.validate(p)
	c.Connectors.validate(p)
	c.Webhooks.validate(p)
	c.Relay.validate(p)
	c.Stock.validate(p, c.Connectors.Names())
	c.checkConnectorDestinations(p)
	c.checkWebhookSourceNames(p)
	c.checkPortals(p)
	c.checkWebhookNeeds(p)
	c.checkStockNeeds(p)
	c.validatePayouts(p)
}

// Connections ordersync opens to PostgreSQL besides its main pool, and the
// smallest database.max_connections for a given onec.max_concurrency.
const (
	listenConnections = 1 // LISTEN, shared by the relays
	inboxConnections  = 2 // the inbox writers
)

// MinConnections is the smallest database.max_connections that serves
// maxConcurrency 1C calls at once: two connections each (the journal row lock held
// during the call, and the lock a cancel takes besides), one for attempt rows and
// everything else, two for the inbox writers and one for LISTEN.
func MinConnections(maxConcurrency int) int {
	return 2*maxConcurrency + 1 + inboxConnections + listenConnections
}

// renamedKeys are keys that were replaced: setting one is a problem that names the
// key to write instead (and why), not an unknown key.
var renamedKeys = map[string]renamedKey{
	"database.max_conns": {to: "database.max_connections", note: "the total of the connections ordersync " +
		"opens to PostgreSQL (default 20; 3 of them besides the main pool that max_conns sized)"},
}

type renamedKey struct{ to, note string }

// renamedMessage is the problem of a renamed key set in the file (env false) or in
// the environment.
func renamedMessage(r renamedKey, where string, env bool) string {
	to := r.to
	if env {
		to = envVar(r.to)
	}
	return "was replaced by " + to + ", " + r.note + where
}

// checkConnections: database.max_connections fits onec.max_concurrency (the
// embedded database opens no connections, but the check does not depend on it, so a
// configuration moved to PostgreSQL keeps working).
func (c *Config) checkConnections(p *problems) {
	if c.OneC.MaxConcurrency < 1 {
		return // reported under onec.max_concurrency
	}
	if need := MinConnections(c.OneC.MaxConcurrency); c.Database.MaxConnections < need {
		p.add("database.max_connections", fmt.Sprintf("%d is too few for onec.max_concurrency %d: needs at least %d "+
			"(2 per 1C call in flight, 1 for attempt rows and queries, 2 for the inbox writers, 1 for LISTEN); "+
			"raise database.max_connections (the server's max_connections must hold it for every replica) "+
			"or lower onec.max_concurrency", c.Database.MaxConnections, c.OneC.MaxConcurrency, need))
	}
}

// SQLitePath is the file of a sqlite URL (sqlite:///abs/path.db, sqlite:rel.db), ""
// for any other URL. An empty database.url also means SQLite, at the default path
// that cmd/ordersync chooses.
func (d Database) SQLitePath() string {
	u, err := url.Parse(d.URL)
	if err != nil || u.Scheme != "sqlite" {
		return ""
	}
	if u.Opaque != "" {
		return u.Opaque
	}
	return u.Host + u.Path
}

func (d Database) validate(p *problems) {
	if d.URL != "" {
		// Never echo the value: it may carry a password.
		u, err := url.Parse(d.URL)
		switch {
		case err == nil && u.Scheme == "sqlite":
			if d.SQLitePath() == "" {
				p.add("database.url", "a sqlite URL names a file: sqlite:///var/lib/ordersync/ordersync.db or sqlite:ordersync.db")
			}
		case err != nil || !strings.Contains(d.URL, "://"):
			p.add("database.url", "must be a URL such as postgres://user@host:5432/db or sqlite:///var/lib/ordersync/ordersync.db")
		case u.Scheme != "postgres" && u.Scheme != "postgresql":
			p.add("database.url", fmt.Sprintf("must be a postgres:// or sqlite:// URL, got scheme %q", u.Scheme))
		}
	}
	if d.URL != "" && d.SQLitePath() == "" && strings.Contains(d.URL, "pool_max_conns=") {
		p.add("database.url", "pool_max_conns is not used: database.max_connections bounds all the connections "+
			"ordersync opens (the main pool's share is derived from it); remove pool_max_conns from the URL")
	}
	if d.ConnectTimeout < 0 {
		p.add("database.connect_timeout", fmt.Sprintf("must be at least 0 (0 tries once), got %s", formatDuration(d.ConnectTimeout)))
	}
}

func (o OneC) validate(p *problems) {
	if o.BaseURL != "" {
		u, err := url.Parse(o.BaseURL)
		switch {
		case err != nil:
			p.add("onec.base_url", "must be an absolute http:// or https:// URL, got an unparsable value")
		case u.User != nil:
			// Not echoed: the userinfo may hold a password.
			p.add("onec.base_url", "must not contain a user name or password; use onec.username and onec.password")
		case (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
			p.add("onec.base_url", fmt.Sprintf("must be an absolute http:// or https:// URL such as http://1c.local/trade/hs/ordersync/v1, got %q", o.BaseURL))
		case u.RawQuery != "" || u.Fragment != "":
			p.add("onec.base_url", fmt.Sprintf("must not have a query or fragment, got %q", o.BaseURL))
		}
	}
	if strings.Contains(o.Username, ":") {
		p.add("onec.username", "must not contain ':' (HTTP Basic authentication)")
	}
	if !utf8.ValidString(o.Username) {
		p.add("onec.username", "must be valid UTF-8 (1C expects UTF-8 credentials)")
	}
	if !utf8.ValidString(o.Password) {
		p.add("onec.password", "must be valid UTF-8 (1C expects UTF-8 credentials)")
	}
	if o.Timeout <= 0 {
		p.add("onec.timeout", fmt.Sprintf("must be greater than 0, got %s", formatDuration(o.Timeout)))
	}
	if o.MaxConcurrency < 1 || o.MaxConcurrency > 256 {
		p.add("onec.max_concurrency", fmt.Sprintf("must be between 1 and 256, got %d", o.MaxConcurrency))
	}
	switch {
	case o.Timezone == "":
		p.add("onec.timezone", "must be a time zone name such as Asia/Almaty, got an empty value")
	default:
		if _, err := time.LoadLocation(o.Timezone); err != nil {
			p.add("onec.timezone", fmt.Sprintf("unknown time zone %q", o.Timezone))
		}
	}
	if o.GetRetries < 0 {
		p.add("onec.get_retries", fmt.Sprintf("must be at least 0, got %d", o.GetRetries))
	}
	checkMaxResponse("onec.max_response", o.MaxResponse, defaults().OneC.MaxResponse, "", p)
	if o.PingInterval <= 0 {
		p.add("onec.ping_interval", fmt.Sprintf("must be greater than 0, got %s", formatDuration(o.PingInterval)))
	}
	if o.Timeout > 0 && o.SettleTime <= o.Timeout {
		p.add("onec.settle_time", fmt.Sprintf("must be greater than onec.timeout (%s), and than any proxy timeout in front of 1C, got %s",
			formatDuration(o.Timeout), formatDuration(o.SettleTime)))
	}
	o.validateInterface(p)
	if o.LateVerify <= o.SettleTime {
		p.add("onec.late_verify", fmt.Sprintf("must be greater than onec.settle_time (%s): it is the second look for a duplicate "+
			"that a 1C slower than the settle time committed late, got %s", formatDuration(o.SettleTime), formatDuration(o.LateVerify)))
	}
}

func (w Worker) validate(p *problems) {
	if w.MaxAttempts < 1 {
		p.add("worker.max_attempts", fmt.Sprintf("must be at least 1, got %d", w.MaxAttempts))
	}
	if w.BackoffMin <= 0 {
		p.add("worker.backoff_min", fmt.Sprintf("must be greater than 0, got %s", formatDuration(w.BackoffMin)))
	} else if w.BackoffMax < w.BackoffMin {
		p.add("worker.backoff_max", fmt.Sprintf("must be at least worker.backoff_min (%s), got %s",
			formatDuration(w.BackoffMin), formatDuration(w.BackoffMax)))
	}
	if w.PollInterval <= 0 {
		p.add("worker.poll_interval", fmt.Sprintf("must be greater than 0, got %s", formatDuration(w.PollInterval)))
	}
	if w.ShutdownTimeout <= 0 {
		p.add("worker.shutdown_timeout", fmt.Sprintf("must be greater than 0, got %s", formatDuration(w.ShutdownTimeout)))
	}
	if w.GiveUpAfter <= 0 {
		p.add("worker.give_up_after", fmt.Sprintf("must be greater than 0, got %s", formatDuration(w.GiveUpAfter)))
	}
}

func (l Log) validate(p *problems) {
	switch l.Level {
	case "debug", "info", "warn", "error":
	default:
		p.add("log.level", fmt.Sprintf("must be one of debug, info, warn, error, got %q", l.Level))
	}
	switch l.Format {
	case "json", "text", "auto":
	default:
		p.add("log.format", fmt.Sprintf("must be one of json, text, auto, got %q", l.Format))
	}
}

func (r Relay) validate(p *problems) {
	if r.Concurrency < 1 || r.Concurrency > 1024 {
		p.add("relay.concurrency", fmt.Sprintf("must be between 1 and 1024, got %d", r.Concurrency))
	}
	if r.Claimers < 1 || r.Claimers > 16 {
		p.add("relay.claimers", fmt.Sprintf("must be between 1 and 16, got %d", r.Claimers))
	}
	if r.BatchSize < 1 || r.BatchSize > 10000 {
		p.add("relay.batch_size", fmt.Sprintf("must be between 1 and 10000, got %d", r.BatchSize))
	}
	if r.MaxAttempts < 1 {
		p.add("relay.max_attempts", fmt.Sprintf("must be at least 1, got %d", r.MaxAttempts))
	}
	if r.BackoffMin <= 0 {
		p.add("relay.backoff_min", fmt.Sprintf("must be greater than 0, got %s", formatDuration(r.BackoffMin)))
	} else if r.BackoffMax < r.BackoffMin {
		p.add("relay.backoff_max", fmt.Sprintf("must be at least relay.backoff_min (%s), got %s",
			formatDuration(r.BackoffMin), formatDuration(r.BackoffMax)))
	}
	for _, d := range []struct {
		key string
		d   time.Duration
	}{
		{"relay.poll_interval", r.PollInterval},
		{"relay.lease", r.Lease},
		{"relay.retention", r.Retention},
		{"relay.prune_interval", r.PruneInterval},
	} {
		if d.d <= 0 {
			p.add(d.key, fmt.Sprintf("must be greater than 0, got %s", formatDuration(d.d)))
		}
	}
	names := make([]string, 0, len(r.Destinations))
	for name := range r.Destinations {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		d := r.Destinations[name]
		d.validate("relay.destinations."+name, p)
		// A relay starts a delivery only while at least the destination's timeout
		// (and a tenth of the lease, for the write-back) is left of its lease.
		if d.Type == DestinationWebhook && r.Lease > 0 && d.Timeout > 0 && d.Timeout >= r.Lease-r.Lease/10 {
			p.add("relay.destinations."+name+".timeout", fmt.Sprintf("must be well below relay.lease (%s): a delivery starts only while its timeout is left of the lease, got %s",
				formatDuration(r.Lease), formatDuration(d.Timeout)))
		}
	}
}

// validate checks one destination; key is its own, relay.destinations.crm.
func (d Destination) validate(key string, p *problems) {
	switch d.Type {
	case DestinationWebhook:
		switch u, err := url.Parse(d.URL); {
		case d.URL == "":
			p.add(key+".url", "is required for a webhook destination: an absolute http:// or https:// URL")
		case err != nil:
			p.add(key+".url", "must be an absolute http:// or https:// URL, got an unparsable value")
		case u.User != nil:
			// Not echoed: the userinfo may hold a password.
			p.add(key+".url", "must not contain a user name or password; webhooks are authenticated by their signature")
		case (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
			p.add(key+".url", fmt.Sprintf("must be an absolute http:// or https:// URL such as https://crm.example.kz/hooks/ordersync, got %q", d.URL))
		}
		if len(d.Secrets) == 0 {
			p.add(key+".secrets", "must list at least one signing secret (whsec_…) for a webhook destination; or set "+key+".secrets_file")
		}
		for i, s := range d.Secrets {
			// Never echo the value, not even in part.
			if msg := checkWebhookSecret(s); msg != "" {
				p.add(fmt.Sprintf("%s.secrets[%d]", key, i), msg)
			}
		}
		if d.Connector != "" {
			p.add(key+".connector", fmt.Sprintf("must be empty for a webhook destination, got %q", d.Connector))
		}
	case DestinationConnector:
		if d.Connector == "" {
			p.add(key+".connector", "is required for a connector destination: the name of an account, as in connectors.<name>")
		}
		if d.URL != "" {
			p.add(key+".url", "is only for webhook destinations; this one has type connector")
		}
		if len(d.Secrets) > 0 {
			p.add(key+".secrets", "is only for webhook destinations; this one has type connector")
		}
	default:
		p.add(key+".type", fmt.Sprintf("must be one of %s, %s, got %q", DestinationWebhook, DestinationConnector, d.Type))
	}
	if len(d.Events) == 0 {
		p.add(key+".events", "must list at least one event type: "+strings.Join(eventTypes, ", "))
	}
	for i, ev := range d.Events {
		switch {
		case !slices.Contains(eventTypes, ev):
			p.add(fmt.Sprintf("%s.events[%d]", key, i), fmt.Sprintf("unknown event type %q, known: %s", ev, strings.Join(eventTypes, ", ")))
		case slices.Index(d.Events, ev) < i:
			p.add(fmt.Sprintf("%s.events[%d]", key, i), fmt.Sprintf("%q is listed twice", ev))
		}
	}
	if d.Timeout <= 0 {
		p.add(key+".timeout", fmt.Sprintf("must be greater than 0, got %s", formatDuration(d.Timeout)))
	}
	switch d.OnDead {
	case OnDeadBlock, OnDeadSkip:
	default:
		p.add(key+".on_dead", fmt.Sprintf("must be one of %s, %s, got %q", OnDeadBlock, OnDeadSkip, d.OnDead))
	}
}

// checkWebhookSecret says what is wrong with a Standard Webhooks secret, without
// showing it, or returns "".
func checkWebhookSecret(s string) string {
	const prefix = "whsec_"
	rest, ok := strings.CutPrefix(s, prefix)
	if !ok {
		return "must start with " + prefix + " (a Standard Webhooks secret: " + prefix + " and base64)"
	}
	if b, err := base64.StdEncoding.DecodeString(rest); err != nil || len(b) == 0 {
		return "must be " + prefix + " followed by standard base64 (A-Z, a-z, 0-9, +, / and = padding)"
	}
	return ""
}

// formatDuration prints a duration as Go parses it, without the zero tails that
// time.Duration.String adds: 10m rather than 10m0s, 1h rather than 1h0m0s.
func formatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
