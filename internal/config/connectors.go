package config

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/ordersync/ordersync/connectors"
	"github.com/ordersync/ordersync/internal/bytesize"
)

// Connectors are the marketplace connectors (connectors/kaspi, connectors/ozon,
// connectors/wildberries). A connector that is not enabled is not checked beyond
// the types of its keys.
type Connectors struct {
	// SKUMap is a CSV file of marketplace,marketplace_sku,onec_sku that maps the
	// marketplaces' SKUs to 1C's. Empty means the identity. When set, the file must
	// be readable; its content is the connectors' to read.
	SKUMap       string       `koanf:"sku_map"`
	Kaspi        Kaspi        `koanf:"kaspi"`
	Ozon         Ozon         `koanf:"ozon"`
	Wildberries  Wildberries  `koanf:"wildberries"`
	YandexMarket YandexMarket `koanf:"yandex_market"`
	Uzum         Uzum         `koanf:"uzum"`

	// The further accounts of each type (connectors.<name> with type:), kept by
	// name in a section the loader routes them to (accounts.go).
	KaspiAccounts        map[string]Kaspi        `koanf:"~kaspi" name:"[a-z0-9_-]{1,32}"`
	OzonAccounts         map[string]Ozon         `koanf:"~ozon" name:"[a-z0-9_-]{1,32}"`
	WildberriesAccounts  map[string]Wildberries  `koanf:"~wildberries" name:"[a-z0-9_-]{1,32}"`
	YandexMarketAccounts map[string]YandexMarket `koanf:"~yandex_market" name:"[a-z0-9_-]{1,32}"`
	UzumAccounts         map[string]Uzum         `koanf:"~uzum" name:"[a-z0-9_-]{1,32}"`
	// Bitrix24Accounts are further Bitrix24 portals (the first is webhooks.bitrix24).
	Bitrix24Accounts map[string]Bitrix24Webhook `koanf:"~bitrix24" name:"[a-z0-9_-]{1,32}"`
}

// OneCMapping is what an account's orders are written with in 1C
// (connectors.<name>.onec): codes or GUIDs as the base knows them. Empty keys are
// left to the base (the HTTP service's module) or to onec.odata.
type OneCMapping struct {
	Organization string `koanf:"organization"`
	Partner      string `koanf:"partner"` // OData ut11: the partner of the counterparty
	Counterparty string `koanf:"counterparty"`
	Agreement    string `koanf:"agreement"`
	// Warehouse, for the OData interface, is the GUID of the account's warehouse
	// (the account's warehouse key is the HTTP service's code or name).
	Warehouse string `koanf:"warehouse"`
}

// Kaspi is the Kaspi.kz merchant API connector (JSON:API, X-Auth-Token).
type Kaspi struct {
	// Type is the account's type; a first account's is its name.
	Type         string        `koanf:"type"`
	Enabled      bool          `koanf:"enabled"`
	BaseURL      string        `koanf:"base_url"` // absolute http(s) URL
	Token        string        `koanf:"token" secret:"true"`
	PollInterval time.Duration `koanf:"poll_interval"`
	Lookback     time.Duration `koanf:"lookback"` // overlap of each listing; at least PollInterval
	// AcceptOrders acknowledges each order with ACCEPTED_BY_MERCHANT once 1C holds it.
	AcceptOrders bool   `koanf:"accept_orders"`
	Warehouse    string `koanf:"warehouse"` // the 1C warehouse of these orders
	// States are the order states listed (filter[orders][state]), Statuses the
	// order statuses imported.
	States        []string      `koanf:"states"`
	Statuses      []string      `koanf:"statuses"`
	PageSize      int           `koanf:"page_size"` // page[size], 1..100
	Timeout       time.Duration `koanf:"timeout"`   // of one HTTP call
	RatePerSecond int           `koanf:"rate_per_second"`
	Returns       Returns       `koanf:"returns"`
	MaxResponse   int64         `koanf:"max_response"` // bytes of one answer at most
	// Stores maps a 1C warehouse code to the Kaspi store (storeId in the price
	// list feed, PP1) whose availability its stock is. Nil when empty.
	Stores map[string]string `koanf:"stores"`
	// FeedToken is the secret part of the price list feed's URL,
	// /feeds/kaspi/<feed token>.xml: at least minFeedToken of A-Za-z0-9_-.
	FeedToken string `koanf:"feed_token" secret:"true"`
	// Company and MerchantID are the feed's <company> and <merchantid>.
	Company    string `koanf:"company"`
	MerchantID string `koanf:"merchant_id" number:"text"`
	// OneC is what the account's orders are written with in 1C.
	OneC OneCMapping `koanf:"onec"`
}

// Ozon is the Ozon Seller API connector (FBS postings; Client-Id and Api-Key).
type Ozon struct {
	// Type is the account's type; a first account's is its name.
	Type         string        `koanf:"type"`
	Enabled      bool          `koanf:"enabled"`
	BaseURL      string        `koanf:"base_url"`
	ClientID     string        `koanf:"client_id"`
	APIKey       string        `koanf:"api_key" secret:"true"`
	APIVersion   string        `koanf:"api_version"` // OzonV4 (cursor paging) or OzonV3 (limit/offset)
	PollInterval time.Duration `koanf:"poll_interval"`
	Lookback     time.Duration `koanf:"lookback"`
	Warehouse    string        `koanf:"warehouse"`
	// Acknowledge moves postings on once 1C holds them (see the connector for how).
	Acknowledge   bool          `koanf:"acknowledge"`
	PageSize      int           `koanf:"page_size"` // 1..1000
	Timeout       time.Duration `koanf:"timeout"`
	RatePerSecond int           `koanf:"rate_per_second"`
	Returns       Returns       `koanf:"returns"`
	MaxResponse   int64         `koanf:"max_response"`
	// StockWarehouses maps a 1C warehouse code to the Ozon warehouse id (decimal
	// text of a whole number greater than 0; StockWarehouseIDs reads them) its
	// stock is sent to. Nil when empty.
	StockWarehouses map[string]string `koanf:"stock_warehouses"`
	// OneC is what the account's orders are written with in 1C.
	OneC OneCMapping `koanf:"onec"`
}

// Ozon API versions of the FBS listing.
const (
	OzonV4 = "v4"
	OzonV3 = "v3"
)

// Wildberries is the Wildberries marketplace API connector (FBS orders;
// Authorization header).
type Wildberries struct {
	// Type is the account's type; a first account's is its name.
	Type         string        `koanf:"type"`
	Enabled      bool          `koanf:"enabled"`
	BaseURL      string        `koanf:"base_url"`
	Token        string        `koanf:"token" secret:"true"`
	PollInterval time.Duration `koanf:"poll_interval"`
	Lookback     time.Duration `koanf:"lookback"`
	Warehouse    string        `koanf:"warehouse"`
	// Acknowledge adds each order to a supply (which confirms it) once 1C holds it.
	Acknowledge   bool               `koanf:"acknowledge"`
	SupplyName    string             `koanf:"supply_name"` // the supply's name, 1..128 characters
	PageSize      int                `koanf:"page_size"`   // 1..1000
	Timeout       time.Duration      `koanf:"timeout"`
	RatePerSecond int                `koanf:"rate_per_second"`
	Returns       WildberriesReturns `koanf:"returns"`
	MaxResponse   int64              `koanf:"max_response"`
	// StockWarehouses maps a 1C warehouse code to the seller warehouse id
	// (decimal text of a whole number greater than 0; StockWarehouseIDs reads them)
	// its stock is sent to. Nil when empty.
	StockWarehouses map[string]string `koanf:"stock_warehouses"`
	// ContentURL is the root of the content API (the cards, for each vendor
	// code's chrtId): an absolute http(s) URL.
	ContentURL string `koanf:"content_url"`
	// OneC is what the account's orders are written with in 1C.
	OneC OneCMapping `koanf:"onec"`
}

// Returns is a connector's reading of the marketplace's returns, each registered as
// a return.register operation (connectors.<name>.returns).
type Returns struct {
	Enabled bool `koanf:"enabled"`
	// PollInterval is how often returns are listed, on a cursor of their own with
	// the connector's lookback.
	PollInterval time.Duration `koanf:"poll_interval"`
}

// WildberriesReturns is Returns with the root of the API that lists them, which is
// not the orders' (the seller analytics API).
type WildberriesReturns struct {
	Enabled      bool          `koanf:"enabled"`
	PollInterval time.Duration `koanf:"poll_interval"`
	BaseURL      string        `koanf:"base_url"`
}

func (r Returns) validate(key string, p *problems) {
	if r.Enabled && r.PollInterval <= 0 {
		p.add(key+".poll_interval", fmt.Sprintf("must be greater than 0, got %s", formatDuration(r.PollInterval)))
	}
}

func (r WildberriesReturns) validate(key string, p *problems) {
	Returns{Enabled: r.Enabled, PollInterval: r.PollInterval}.validate(key, p)
	if r.Enabled {
		checkBaseURL(key+".base_url", r.BaseURL, key+".enabled", p)
	}
}

// defaultConnectorMaxResponse is the default max_response of the marketplace and
// Bitrix24 clients: a page of a listing is far smaller.
const defaultConnectorMaxResponse = 16 << 20

// enabled reports whether the connector named name (kaspi, ozon, wildberries) is
// enabled; false for a name that is no connector.
func (c Connectors) enabled(name string) bool {
	a, ok := c.Account(name)
	return ok && a.enabled()
}

// derive normalises spelling and empty lists and maps, in every account.
func (c *Connectors) derive() {
	c.Kaspi.derive()
	c.Ozon.derive()
	c.Wildberries.derive()
	c.Uzum.derive()
	deriveEach(c.KaspiAccounts, (*Kaspi).derive)
	deriveEach(c.OzonAccounts, (*Ozon).derive)
	deriveEach(c.WildberriesAccounts, (*Wildberries).derive)
	deriveEach(c.UzumAccounts, (*Uzum).derive)
	c.YandexMarket.derive()
	deriveEach(c.YandexMarketAccounts, (*YandexMarket).derive)
}

func deriveEach[T any](m map[string]T, derive func(*T)) {
	for name, v := range m {
		derive(&v)
		m[name] = v
	}
}

// An empty list is no list, however it was written ([], or an empty variable);
// so is an empty map.

func (k *Kaspi) derive() {
	if len(k.States) == 0 {
		k.States = nil
	}
	if len(k.Statuses) == 0 {
		k.Statuses = nil
	}
	if len(k.Stores) == 0 {
		k.Stores = nil
	}
}

func (o *Ozon) derive() {
	o.APIVersion = strings.ToLower(o.APIVersion)
	if len(o.StockWarehouses) == 0 {
		o.StockWarehouses = nil
	}
}

func (w *Wildberries) derive() {
	if len(w.StockWarehouses) == 0 {
		w.StockWarehouses = nil
	}
}

func (y *YandexMarket) derive() {
	y.OrdersAPI = strings.ToLower(y.OrdersAPI)
	y.StockAPI = strings.ToLower(y.StockAPI)
}

func (u *Uzum) derive() {
	if len(u.ShopIDs) == 0 {
		u.ShopIDs = nil
	}
}

// validate checks the connectors that are enabled. The SKU map file is checked in
// checkFiles, which reads it.
func (c Connectors) validate(p *problems) {
	c.Kaspi.validate("connectors.kaspi", p)
	c.Ozon.validate("connectors.ozon", p)
	c.Wildberries.validate("connectors.wildberries", p)
	c.YandexMarket.validate("connectors.yandex_market", p)
	c.Uzum.validate("connectors.uzum", p)
	for _, a := range c.All()[len(accountTypes):] {
		switch {
		case a.Kaspi != nil:
			a.Kaspi.validate(a.Key(), p)
		case a.Ozon != nil:
			a.Ozon.validate(a.Key(), p)
		case a.Wildberries != nil:
			a.Wildberries.validate(a.Key(), p)
		case a.YandexMarket != nil:
			a.YandexMarket.validate(a.Key(), p)
		case a.Uzum != nil:
			a.Uzum.validate(a.Key(), p)
		case a.Bitrix24 != nil:
			a.Bitrix24.validate(a.Key(), p)
		}
	}
	c.validateAccounts(p)
}

// checkFiles checks that the files named by keys can be read, and what they hold:
// each bad line of the SKU map is a problem naming it.
func (c Connectors) checkFiles(readFile func(string) ([]byte, error), p *problems) {
	if c.SKUMap == "" {
		return
	}
	b, err := readFile(c.SKUMap)
	if err != nil {
		p.add("connectors.sku_map", fmt.Sprintf("cannot read %s: %s", c.SKUMap, reason(err)))
		return
	}
	for _, msg := range connectors.SKUMapProblems(b, c.SKUAliases()) {
		p.add("connectors.sku_map", c.SKUMap+": "+msg)
	}
}

func (k Kaspi) validate(key string, p *problems) {
	if !k.Enabled {
		return
	}
	connectorCommon{
		key:          key,
		baseURL:      k.BaseURL,
		pollInterval: k.PollInterval,
		lookback:     k.Lookback,
		warehouse:    k.Warehouse,
		pageSize:     k.PageSize,
		maxPageSize:  100,
		timeout:      k.Timeout,
		rate:         k.RatePerSecond,
		maxResponse:  k.MaxResponse,
	}.validate(p)
	requireSecret(key, "token", k.Token, p)
	k.Returns.validate(key+".returns", p)
	checkNames(key+".states", "order state", "NEW", k.States, p)
	checkNames(key+".statuses", "order status", "APPROVED_BY_BANK", k.Statuses, p)
	// Stock: what a schedule that publishes to kaspi requires is checked with the
	// schedules (checkStockNeeds); here, what is set.
	checkStockMap(key+".stores", k.Stores, checkKaspiStore, p)
	if k.FeedToken != "" {
		// Never echo the value, not even in part.
		if msg := checkFeedToken(k.FeedToken); msg != "" {
			p.add(key+".feed_token", msg)
		}
	}
	if hasControl(k.Company) {
		p.add(key+".company", "must not contain line breaks or other control characters")
	}
	if hasControl(k.MerchantID) {
		p.add(key+".merchant_id", "must not contain line breaks or other control characters")
	}
}

func (o Ozon) validate(key string, p *problems) {
	if !o.Enabled {
		return
	}
	connectorCommon{
		key:          key,
		baseURL:      o.BaseURL,
		pollInterval: o.PollInterval,
		lookback:     o.Lookback,
		warehouse:    o.Warehouse,
		pageSize:     o.PageSize,
		maxPageSize:  1000,
		timeout:      o.Timeout,
		rate:         o.RatePerSecond,
		maxResponse:  o.MaxResponse,
	}.validate(p)
	switch {
	case o.ClientID == "":
		p.add(key+".client_id", "is required when "+key+".enabled is true: the Client-Id from the seller account's API keys page")
	case hasControl(o.ClientID):
		p.add(key+".client_id", "must not contain line breaks or other control characters")
	}
	requireSecret(key, "api_key", o.APIKey, p)
	o.Returns.validate(key+".returns", p)
	switch o.APIVersion {
	case OzonV4, OzonV3:
	default:
		p.add(key+".api_version", fmt.Sprintf("must be one of %s, %s, got %q", OzonV4, OzonV3, o.APIVersion))
	}
	checkStockMap(key+".stock_warehouses", o.StockWarehouses, checkWarehouseID("the Ozon warehouse id"), p)
}

func (w Wildberries) validate(key string, p *problems) {
	if !w.Enabled {
		return
	}
	connectorCommon{
		key:          key,
		baseURL:      w.BaseURL,
		pollInterval: w.PollInterval,
		lookback:     w.Lookback,
		warehouse:    w.Warehouse,
		pageSize:     w.PageSize,
		maxPageSize:  1000,
		timeout:      w.Timeout,
		rate:         w.RatePerSecond,
		maxResponse:  w.MaxResponse,
	}.validate(p)
	requireSecret(key, "token", w.Token, p)
	w.Returns.validate(key+".returns", p)
	// Wildberries accepts supply names of 1 to 128 characters.
	if w.Acknowledge {
		switch n := utf8.RuneCountInString(strings.TrimSpace(w.SupplyName)); {
		case n == 0:
			p.add(key+".supply_name", "is required when "+key+".acknowledge is true: the name of the supplies ordersync creates")
		case utf8.RuneCountInString(w.SupplyName) > 128:
			p.add(key+".supply_name", fmt.Sprintf("must be at most 128 characters, got %d", utf8.RuneCountInString(w.SupplyName)))
		}
	}
	checkStockMap(key+".stock_warehouses", w.StockWarehouses, checkWarehouseID("the Wildberries seller warehouse id"), p)
	checkBaseURL(key+".content_url", w.ContentURL, key+".enabled", p)
}

// connectorCommon is what every enabled connector has, for the checks they share.
type connectorCommon struct {
	key                             string // connectors.kaspi
	baseURL                         string
	pollInterval, lookback, timeout time.Duration
	warehouse                       string
	pageSize, maxPageSize           int
	rate                            int
	maxResponse                     int64
}

func (c connectorCommon) validate(p *problems) {
	checkBaseURL(c.key+".base_url", c.baseURL, c.key+".enabled", p)
	if c.pollInterval <= 0 {
		p.add(c.key+".poll_interval", fmt.Sprintf("must be greater than 0, got %s", formatDuration(c.pollInterval)))
	}
	switch {
	case c.lookback <= 0:
		p.add(c.key+".lookback", fmt.Sprintf("must be greater than 0, got %s", formatDuration(c.lookback)))
	case c.pollInterval > 0 && c.lookback < c.pollInterval:
		p.add(c.key+".lookback", fmt.Sprintf("must be at least %s.poll_interval (%s), got %s",
			c.key, formatDuration(c.pollInterval), formatDuration(c.lookback)))
	}
	if strings.TrimSpace(c.warehouse) == "" {
		p.add(c.key+".warehouse", "is required when "+c.key+".enabled is true: the 1C warehouse of these orders")
	}
	if c.pageSize < 1 || c.pageSize > c.maxPageSize {
		p.add(c.key+".page_size", fmt.Sprintf("must be between 1 and %d, got %d", c.maxPageSize, c.pageSize))
	}
	if c.timeout <= 0 {
		p.add(c.key+".timeout", fmt.Sprintf("must be greater than 0, got %s", formatDuration(c.timeout)))
	}
	if c.rate <= 0 {
		p.add(c.key+".rate_per_second", fmt.Sprintf("must be greater than 0, got %d", c.rate))
	}
	checkMaxResponse(c.key+".max_response", c.maxResponse, defaultConnectorMaxResponse, "", p)
}

// checkMaxResponse checks key, the largest answer a client reads; example is its
// default, why says what else uses it.
func checkMaxResponse(key string, n, example int64, why string, p *problems) {
	if n <= 0 {
		p.add(key, fmt.Sprintf("must be a size greater than 0, such as %s%s, got %s", bytesize.Text(example), why, bytesize.Text(n)))
	}
}

// checkBaseURL checks key, the root URL of a marketplace API, which is required
// while the boolean key enabledKey is true.
func checkBaseURL(key, baseURL, enabledKey string, p *problems) {
	switch u, err := url.Parse(baseURL); {
	case baseURL == "":
		p.add(key, "is required when "+enabledKey+" is true: an absolute http:// or https:// URL")
	case err != nil:
		p.add(key, "must be an absolute http:// or https:// URL, got an unparsable value")
	case u.User != nil:
		// Not echoed: the userinfo may hold a password.
		p.add(key, "must not contain a user name or password")
	case (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		p.add(key, fmt.Sprintf("must be an absolute http:// or https:// URL, got %q", baseURL))
	case u.RawQuery != "" || u.Fragment != "":
		p.add(key, fmt.Sprintf("must not have a query or fragment, got %q", baseURL))
	}
}

// requireSecret checks the credential name of the enabled connector key, never
// showing it.
func requireSecret(key, name, value string, p *problems) {
	k := key + "." + name
	switch {
	case value == "":
		p.add(k, "is required when "+key+".enabled is true (or set "+k+"_file)")
	case hasControl(value):
		p.add(k, "must not contain line breaks or other control characters (a file with more than one line?)")
	}
}

// checkNames checks a list of marketplace names (states, statuses): at least one,
// none empty, none twice.
func checkNames(key, what, example string, list []string, p *problems) {
	if len(list) == 0 {
		p.add(key, fmt.Sprintf("must list at least one %s, such as %s", what, example))
	}
	for i, s := range list {
		switch {
		case strings.TrimSpace(s) == "":
			p.add(fmt.Sprintf("%s[%d]", key, i), "must not be empty")
		case slices.Index(list, s) < i:
			p.add(fmt.Sprintf("%s[%d]", key, i), fmt.Sprintf("%q is listed twice", s))
		}
	}
}

func hasControl(s string) bool {
	return strings.ContainsFunc(s, unicode.IsControl)
}

// checkConnectorDestinations reports relay destinations of type connector whose
// connector is not enabled: the relay would have no one to deliver their events.
func (c *Config) checkConnectorDestinations(p *problems) {
	names := make([]string, 0, len(c.Relay.Destinations))
	for name := range c.Relay.Destinations {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		d := c.Relay.Destinations[name]
		if d.Type != DestinationConnector || d.Connector == "" {
			continue
		}
		key := "relay.destinations." + name + ".connector"
		switch _, ok := c.Connectors.Account(d.Connector); {
		case !ok:
			var known []string
			for _, a := range c.Connectors.All() {
				known = append(known, a.Name)
			}
			p.add(key, fmt.Sprintf("unknown connector %q, known: %s", d.Connector, strings.Join(known, ", ")))
		case !c.Connectors.enabled(d.Connector):
			p.add(key, fmt.Sprintf("connector %s is not enabled (connectors.%s.enabled)", d.Connector, d.Connector))
		}
	}
}
