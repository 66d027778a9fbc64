package config

import (
	"fmt"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"github.com/ordersync/ordersync/internal/stock"
)

// Stock is the stock snapshots: on each schedule's slots, a snapshot of
// each of its 1C warehouses, published to its marketplaces.
type Stock struct {
	// Timezone is the IANA zone the slots of five-field specs are computed in, and
	// the slots written in journal keys.
	Timezone string `koanf:"timezone"`
	// CatchUp is what a slot missed while the service was down becomes:
	// CatchUpLatest registers the most recent one at start, CatchUpNone none.
	CatchUp string `koanf:"catch_up"`
	// FullRefresh: every item is published at least this often; deltas between.
	FullRefresh time.Duration `koanf:"full_refresh"`
	// Retention: snapshots stored longer ago are deleted, with their items (never
	// a warehouse's newest, nor one still being published).
	Retention time.Duration `koanf:"retention"`
	// Schedules in the order written. Nil when none is configured: no snapshots
	// are taken but by hand (ordersync stock snapshot).
	Schedules []Schedule `koanf:"schedules"`
	// Reserve are quantities held back from what the marketplaces are told, in the
	// order written; nil for none. Before an account is sent a SKU, the largest
	// entry matching both is subtracted from 1C's quantity (never below 0).
	Reserve []StockReserve `koanf:"reserve"`
	// RefreshAfterOrder: when an order is registered, its warehouse's stock is
	// read from 1C again and published within this time, the orders of one such
	// window together (one snapshot per warehouse). 0 disables it.
	RefreshAfterOrder time.Duration `koanf:"refresh_after_order"`
}

// MinRefreshAfterOrder is the shortest stock.refresh_after_order but 0: the
// journal is looked at twice in that time, each look at least a second apart.
const MinRefreshAfterOrder = 2 * time.Second

// StockReserve is one entry of stock.reserve.
type StockReserve struct {
	// Account is the marketplace the entry holds for (stock.Kaspi, stock.Ozon,
	// stock.Wildberries), or "*" for all.
	Account string `koanf:"account"`
	// SKU is a pattern of 1C SKUs (path.Match: SHOE-*, SHOE-4[0-5], *).
	SKU string `koanf:"sku"`
	// Quantity held back: an exact decimal of at least 0, written as text ("1",
	// "0.5") so that it is never read as a binary fraction.
	Quantity string `koanf:"quantity"`
}

// Schedule is one schedule of snapshots.
type Schedule struct {
	// Name is in the snapshots' journal keys, stock:<name>:<warehouse>:<slot>:
	// [a-z0-9_-]{1,64}, unique, not stock.Manual.
	Name string `koanf:"name"`
	// Cron is the spec: five fields, a descriptor (@hourly) or @every D.
	Cron string `koanf:"cron"`
	// Warehouses are the 1C warehouse codes snapshotted, at least one.
	Warehouses []string `koanf:"warehouses"`
	// Publish are the marketplaces each snapshot is published to (stock.Kaspi,
	// stock.Ozon, stock.Wildberries); nil for snapshots only.
	Publish []string `koanf:"publish"`
}

// stock.catch_up values.
const (
	CatchUpLatest = "latest" // the most recent missed slot, once, at start
	CatchUpNone   = "none"   // missed slots are not taken
)

// scheduleNames are the names a schedule may have.
const scheduleNamePattern = "[a-z0-9_-]{1,64}"

var scheduleName = regexp.MustCompile(`^(?:` + scheduleNamePattern + `)$`)

// Location returns the zone of the stock slots. Call it on a validated
// configuration (from Load): it panics if stock.timezone does not load, which
// validation rules out.
func (s Stock) Location() *time.Location {
	loc, err := time.LoadLocation(s.Timezone)
	if err != nil {
		panic(fmt.Sprintf("config: stock.timezone %q used without validation: %v", s.Timezone, err))
	}
	return loc
}

// Specs returns the spec of each schedule, in the order of Schedules, its slots in
// Location. Call it on a validated configuration: it panics on a spec that does
// not parse, which validation rules out.
func (s Stock) Specs() []stock.Spec {
	loc := s.Location()
	out := make([]stock.Spec, len(s.Schedules))
	for i, sc := range s.Schedules {
		spec, err := sc.Spec(loc)
		if err != nil {
			panic(fmt.Sprintf("config: stock.schedules[%d].cron %q used without validation: %v", i, sc.Cron, err))
		}
		out[i] = spec
	}
	return out
}

// Spec parses the schedule's cron spec for slots in loc (Stock.Location).
func (s Schedule) Spec(loc *time.Location) (stock.Spec, error) {
	return stock.ParseSpec(s.Cron, loc)
}

// Publishes reports whether the schedule publishes to the marketplace m
// (stock.Kaspi, stock.Ozon or stock.Wildberries).
func (s Schedule) Publishes(m string) bool { return slices.Contains(s.Publish, m) }

// Publishes reports whether some schedule publishes to the marketplace m.
func (s Stock) Publishes(m string) bool {
	return slices.ContainsFunc(s.Schedules, func(sc Schedule) bool { return sc.Publishes(m) })
}

// Reserves returns stock.reserve with the quantities as exact decimals. Call it on
// a validated configuration: it panics on a quantity that does not parse, which
// validation rules out.
func (s Stock) Reserves() stock.Reserves {
	var out stock.Reserves
	for i, r := range s.Reserve {
		q, err := decimal.NewFromString(strings.TrimSpace(r.Quantity))
		if err != nil {
			panic(fmt.Sprintf("config: stock.reserve[%d].quantity %q used without validation: %v", i, r.Quantity, err))
		}
		out = append(out, stock.Reserve{Account: r.Account, SKU: r.SKU, Quantity: q})
	}
	return out
}

// derive normalises spelling and empty lists: an empty list is no list, however it
// was written ([], or an empty variable).
func (s *Stock) derive() {
	s.CatchUp = strings.ToLower(s.CatchUp)
	if len(s.Schedules) == 0 {
		s.Schedules = nil
	}
	if len(s.Reserve) == 0 {
		s.Reserve = nil
	}
	for i := range s.Reserve {
		s.Reserve[i].Account = strings.ToLower(strings.TrimSpace(s.Reserve[i].Account))
	}
	for i := range s.Schedules {
		sc := &s.Schedules[i]
		if len(sc.Warehouses) == 0 {
			sc.Warehouses = nil
		}
		if len(sc.Publish) == 0 {
			sc.Publish = nil
		}
	}
}

// validate checks the stock section; accounts are the connectors' account names
// (connectors.<name>), which schedules publish to and reserves hold for.
func (s Stock) validate(p *problems, accounts []string) {
	loc := time.UTC // for parsing the specs when the zone does not load
	switch {
	case s.Timezone == "":
		p.add("stock.timezone", "must be a time zone name such as Asia/Almaty, got an empty value")
	default:
		l, err := time.LoadLocation(s.Timezone)
		if err != nil {
			p.add("stock.timezone", fmt.Sprintf("unknown time zone %q", s.Timezone))
		} else {
			loc = l
		}
	}
	switch s.CatchUp {
	case CatchUpLatest, CatchUpNone:
	default:
		p.add("stock.catch_up", fmt.Sprintf("must be one of %s, %s, got %q", CatchUpLatest, CatchUpNone, s.CatchUp))
	}
	if s.Retention < time.Hour {
		p.add("stock.retention", fmt.Sprintf("must be at least 1h, got %s", formatDuration(s.Retention)))
	}
	if s.FullRefresh <= 0 {
		p.add("stock.full_refresh", fmt.Sprintf("must be greater than 0, got %s", formatDuration(s.FullRefresh)))
	}
	s.validateReserve(p, accounts)
	if d := s.RefreshAfterOrder; d < 0 || d > 0 && d < MinRefreshAfterOrder {
		p.add("stock.refresh_after_order", fmt.Sprintf("must be 0 (never) or at least %s, got %s", formatDuration(MinRefreshAfterOrder), formatDuration(d)))
	}
	for i, sc := range s.Schedules {
		key := fmt.Sprintf("stock.schedules[%d]", i)
		switch {
		case sc.Name == "":
			p.add(key+".name", "is required: the schedule's name, "+scheduleNamePattern+", such as main (it is part of the snapshots' journal keys)")
		case !scheduleName.MatchString(sc.Name):
			p.add(key+".name", fmt.Sprintf("must match %s (it is part of the snapshots' journal keys), got %q", scheduleNamePattern, sc.Name))
		case sc.Name == stock.Manual:
			p.add(key+".name", fmt.Sprintf("%q is reserved for the snapshots taken with `ordersync stock snapshot`; choose another name", stock.Manual))
		case sc.Name == stock.Refresh:
			p.add(key+".name", fmt.Sprintf("%q is reserved for the snapshots taken after orders (stock.refresh_after_order); choose another name", stock.Refresh))
		default:
			if j := slices.IndexFunc(s.Schedules, func(o Schedule) bool { return o.Name == sc.Name }); j < i {
				p.add(key+".name", fmt.Sprintf("%q is the name of stock.schedules[%d] already; names must be unique", sc.Name, j))
			}
		}
		const want = `five fields (minute hour day-of-month month day-of-week) such as "*/30 * * * *", a descriptor such as @hourly or @daily, or @every 15m`
		if strings.TrimSpace(sc.Cron) == "" {
			p.add(key+".cron", "is required: "+want)
		} else if _, err := sc.Spec(loc); err != nil {
			p.add(key+".cron", fmt.Sprintf("must be %s, got %q: %v", want, sc.Cron, err))
		}
		if len(sc.Warehouses) == 0 {
			p.add(key+".warehouses", "must list at least one 1C warehouse code, such as [WH1]")
		}
		for j, w := range sc.Warehouses {
			wk := fmt.Sprintf("%s.warehouses[%d]", key, j)
			switch msg := checkWarehouseCode(w); {
			case msg != "":
				p.add(wk, msg)
			case slices.Index(sc.Warehouses, w) < j:
				p.add(wk, fmt.Sprintf("%q is listed twice", w))
			}
		}
		for j, m := range sc.Publish {
			mk := fmt.Sprintf("%s.publish[%d]", key, j)
			switch {
			case !slices.Contains(accounts, m):
				p.add(mk, fmt.Sprintf("unknown account %q, known: %s", m, strings.Join(accounts, ", ")))
			case slices.Index(sc.Publish, m) < j:
				p.add(mk, fmt.Sprintf("%q is listed twice", m))
			}
		}
	}
}

// validateReserve checks stock.reserve, each problem naming its entry's key.
func (s Stock) validateReserve(p *problems, accounts []string) {
	any := append([]string{stock.AnyAccount}, accounts...)
	for i, r := range s.Reserve {
		key := fmt.Sprintf("stock.reserve[%d]", i)
		switch {
		case r.Account == "":
			p.add(key+".account", fmt.Sprintf("is required: the account the reserve holds for (%s), or \"*\" for all", strings.Join(accounts, ", ")))
		case !slices.Contains(any, r.Account):
			p.add(key+".account", fmt.Sprintf("must be one of %s, got %q", strings.Join(any, ", "), r.Account))
		}
		switch _, err := path.Match(r.SKU, ""); {
		case strings.TrimSpace(r.SKU) == "":
			p.add(key+".sku", `is required: a 1C SKU or a pattern of them, such as SHOE-42, SHOE-* or "*"`)
		case err != nil:
			p.add(key+".sku", fmt.Sprintf("is not a valid pattern (path.Match: *, ?, [a-z], \\ to escape), got %q: %v", r.SKU, err))
		case hasControl(r.SKU):
			p.add(key+".sku", fmt.Sprintf("must not contain line breaks or other control characters, got %q", r.SKU))
		}
		q, err := decimal.NewFromString(strings.TrimSpace(r.Quantity))
		switch {
		case strings.TrimSpace(r.Quantity) == "":
			p.add(key+".quantity", "is required: the quantity held back, a number of at least 0, such as 1 or \"0.5\"")
		case err != nil:
			p.add(key+".quantity", fmt.Sprintf("must be a number of at least 0, such as 1 or \"0.5\", got %q", r.Quantity))
		case q.IsNegative():
			p.add(key+".quantity", fmt.Sprintf("must be at least 0, got %s", r.Quantity))
		}
	}
}

// checkWarehouseCode says what is wrong with a 1C warehouse code, or returns "".
// It goes into journal keys (stock:<schedule>:<warehouse>:<slot>), which ':'
// separates.
func checkWarehouseCode(w string) string {
	switch {
	case strings.TrimSpace(w) == "":
		return "must be a 1C warehouse code, got an empty value"
	case strings.Contains(w, ":"):
		return fmt.Sprintf("must not contain ':' (a 1C warehouse code is part of the snapshots' journal keys, stock:<schedule>:<warehouse>:<slot>), got %q", w)
	case hasControl(w):
		return fmt.Sprintf("must not contain line breaks or other control characters, got %q", w)
	}
	return ""
}

// checkStockMap checks a connector's map of 1C warehouse codes to its own ids
// (key: connectors.ozon.stock_warehouses); checkValue says what is wrong with an id.
func checkStockMap(key string, m map[string]string, checkValue func(string) string, p *problems) {
	names := make([]string, 0, len(m))
	for name := range m {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if msg := checkWarehouseCode(name); msg != "" {
			if name == "" {
				p.add(key, "has an empty name: each name must be a 1C warehouse code")
			} else {
				p.add(key+"."+name, "is no warehouse: the name "+msg)
			}
			continue
		}
		if msg := checkValue(m[name]); msg != "" {
			p.add(key+"."+name, msg)
		}
	}
}

// checkWarehouseID returns a check of a marketplace's warehouse id, a whole number
// greater than 0; what names the id, "the Ozon warehouse id".
func checkWarehouseID(what string) func(string) string {
	return func(s string) string {
		if _, ok := parseWarehouseID(s); !ok {
			return fmt.Sprintf("must be %s, a whole number greater than 0, got %q", what, s)
		}
		return ""
	}
}

// parseWarehouseID reads a marketplace warehouse id: decimal digits, greater than 0.
func parseWarehouseID(s string) (int64, bool) {
	if s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil && n > 0
}

// checkKaspiStore checks a Kaspi store id, storeId in the feed (PP1).
func checkKaspiStore(s string) string {
	switch {
	case strings.TrimSpace(s) == "":
		return "must be the Kaspi store id (storeId in the feed, such as PP1), got an empty value"
	case hasControl(s):
		return "must not contain line breaks or other control characters"
	}
	return ""
}

// minFeedToken is the shortest connectors.kaspi.feed_token: the token is all that
// keeps the feed's URL from being guessed.
const minFeedToken = 16

// checkFeedToken says what is wrong with a Kaspi feed token, without showing it, or
// returns "".
func checkFeedToken(s string) string {
	ok := len(s) >= minFeedToken && !strings.ContainsFunc(s, func(r rune) bool {
		return !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '_' || r == '-')
	})
	if ok {
		return ""
	}
	return fmt.Sprintf("must be at least %d characters of A-Z, a-z, 0-9, _ and - (it is part of the feed's URL, /feeds/kaspi/<feed_token>.xml); make one with: head -c 24 /dev/urandom | base64 | tr '+/' '-_'", minFeedToken)
}

// StockWarehouseIDs returns StockWarehouses with the Ozon ids as numbers. Call it on
// a configuration from Load with the connector enabled, which validated the map;
// it panics on an id that is not valid. Nil when the map is empty.
func (o Ozon) StockWarehouseIDs() map[string]int64 {
	return mustWarehouseIDs("connectors.ozon.stock_warehouses", o.StockWarehouses)
}

// StockWarehouseIDs returns StockWarehouses with the Wildberries ids as numbers, as
// Ozon.StockWarehouseIDs does.
func (w Wildberries) StockWarehouseIDs() map[string]int64 {
	return mustWarehouseIDs("connectors.wildberries.stock_warehouses", w.StockWarehouses)
}

func mustWarehouseIDs(key string, m map[string]string) map[string]int64 {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]int64, len(m))
	for name, s := range m {
		n, ok := parseWarehouseID(s)
		if !ok {
			panic(fmt.Sprintf("config: %s.%s %q used without validation", key, name, s))
		}
		out[name] = n
	}
	return out
}

// checkStockNeeds reports what the schedules need from other sections to publish:
// the connector enabled, each warehouse mapped to the marketplace's own, Kaspi's
// feed header and token, and the HTTP server that serves the feed. Each problem
// names the key to set, once, with every schedule that needs it.
func (c *Config) checkStockNeeds(p *problems) {
	var order []string
	needs := map[string][]string{} // key → schedules
	msgs := map[string]func(by string) string{}
	need := func(key, by string, msg func(by string) string) {
		if _, ok := needs[key]; !ok {
			order = append(order, key)
			msgs[key] = msg
		}
		if !slices.Contains(needs[key], by) {
			needs[key] = append(needs[key], by)
		}
	}
	k := c.Connectors.Kaspi
	for i, sc := range c.Stock.Schedules {
		ref := fmt.Sprintf("stock.schedules[%d]", i)
		if scheduleName.MatchString(sc.Name) {
			ref += " (" + sc.Name + ")"
		}
		for j, m := range sc.Publish {
			acc, ok := c.Connectors.Account(m)
			if !ok || slices.Index(sc.Publish, m) < j {
				continue // said in validate
			}
			conn := acc.Key()
			if !acc.Enabled() {
				need(conn+".enabled", ref, func(by string) string {
					return "must be true: " + by + " stock to " + m
				})
			}
			if acc.Kaspi != nil && m != TypeKaspi {
				need(conn+".type", ref, func(by string) string {
					return "is kaspi, but " + by + " stock to it, and only connectors.kaspi has the Kaspi feed: publish to kaspi"
				})
				continue
			}
			mapped, mk, what := acc.StockMap()
			for jw, w := range sc.Warehouses {
				if checkWarehouseCode(w) != "" || slices.Index(sc.Warehouses, w) < jw {
					continue
				}
				if _, ok := mapped[w]; ok {
					continue
				}
				if acc.StockWarehouseKey() {
					need(mk, ref, func(by string) string {
						return "is not " + w + ", but " + by + " warehouse " + w + " to " + m + " (one warehouse per account): set it to " + w + ", or publish another warehouse to " + m
					})
					continue
				}
				need(mk+"."+w, ref, func(by string) string {
					return "is missing: " + by + " warehouse " + w + " to " + m + "; set it to " + what
				})
			}
			if acc.Kaspi == nil {
				continue
			}
			if k.FeedToken == "" {
				need(conn+".feed_token", ref, func(by string) string {
					return "is required: " + by + " stock to kaspi, whose feed is served at /feeds/kaspi/<feed_token>.xml (or set " + conn + ".feed_token_file)"
				})
			}
			if strings.TrimSpace(k.Company) == "" {
				need(conn+".company", ref, func(by string) string {
					return "is required: " + by + " stock to kaspi: the <company> of its feed, the shop's name"
				})
			}
			if strings.TrimSpace(k.MerchantID) == "" {
				need(conn+".merchant_id", ref, func(by string) string {
					return "is required: " + by + " stock to kaspi: the <merchantid> of its feed, the shop's id in the Kaspi cabinet"
				})
			}
			if c.HTTP.Listen == "" {
				need("http.listen", ref, func(by string) string {
					return "is empty, which disables the HTTP server, but " + by + " stock to kaspi, whose feed it serves (GET /feeds/kaspi/<feed_token>.xml); set http.listen, such as 127.0.0.1:8080"
				})
			}
		}
	}
	for _, key := range order {
		by := needs[key]
		verb := " publishes"
		if len(by) > 1 {
			verb = " publish"
		}
		p.add(key, msgs[key](joinAnd(by)+verb))
	}
}

// joinAnd joins a, b and c.
func joinAnd(list []string) string {
	if len(list) <= 1 {
		return strings.Join(list, "")
	}
	return strings.Join(list[:len(list)-1], ", ") + " and " + list[len(list)-1]
}
