package config

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// A marketplace account is a connector section: connectors.ozon is the account
// named ozon, of type ozon, as it always was; connectors.ozon-ip with type: ozon is
// a second Ozon cabinet, with credentials, cursors, rate limiter, SKU map lines and
// stock target of its own. The source in its keys and journal is its name
// (ozon-ip:order:…); the first accounts keep the sources they always had (wb for
// connectors.wildberries), so that the keys already in a journal keep their
// meaning.
//
// Inside the key table an account of a type lives in a map section of its own,
// connectors.~ozon.<name>, whose entries have that type's keys and defaults: the
// loader routes connectors.<name>.<key> there by the account's type, and every key
// the user reads (a problem, the effective configuration, an environment variable)
// is put back as connectors.<name>.<key>.

// Account types (connectors.<name>.type).
const (
	TypeKaspi        = "kaspi"
	TypeOzon         = "ozon"
	TypeWildberries  = "wildberries"
	TypeYandexMarket = "yandex_market"
	TypeUzum         = "uzum"
	// TypeBitrix24 is a further Bitrix24 portal; the first is webhooks.bitrix24.
	TypeBitrix24 = "bitrix24"
)

// portalTypes are the types whose first account is not under connectors: a
// further account of them is connectors.<name>, the first another section.
var portalTypes = []string{TypeBitrix24}

// allTypeNames are every type an account may have, for routing and messages.
func allTypeNames() []string { return append(typeNames(), portalTypes...) }

// accountTypes are the types, each with the source its first account (the section
// named as the type) has always written.
var accountTypes = []struct{ name, source string }{
	{TypeKaspi, "kaspi"},
	{TypeOzon, "ozon"},
	{TypeWildberries, "wb"},
	{TypeYandexMarket, "ym"},
	{TypeUzum, "uzum"},
}

// typeNames are the account types, for messages.
func typeNames() []string {
	names := make([]string, len(accountTypes))
	for i, t := range accountTypes {
		names[i] = t.name
	}
	return names
}

// internalSection is the map section of the accounts of type typ.
func internalSection(typ string) string { return "~" + typ }

// fixedConnectorKeys are the keys of the connectors section that are not accounts
// of their own: the first accounts (named as their types) and sku_map.
func fixedConnectorKeys() []string { return append(typeNames(), "sku_map") }

// routeLevels puts a key's levels in the key table's terms: connectors.<name>.… of
// an account that is not a first one goes to connectors.~<type>.<name>.…. The key
// stays as it is when the name is a fixed key, or when the account's type is not
// known (types has no entry): its problem is said once by checkAccountTypes.
func routeLevels(levels []string, types map[string]string) []string {
	if len(levels) < 2 || levels[0] != "connectors" || slices.Contains(fixedConnectorKeys(), levels[1]) {
		return levels
	}
	typ, ok := types[levels[1]]
	if !ok || !slices.Contains(allTypeNames(), typ) {
		return levels
	}
	out := make([]string, 0, len(levels)+1)
	return append(append(append(out, "connectors"), internalSection(typ)), levels[1:]...)
}

// userKey turns a key, or a message, in the key table's terms back into the
// user's: connectors.~ozon.ozon-ip.api_key → connectors.ozon-ip.api_key.
func userKey(s string) string {
	if !strings.Contains(s, "~") {
		return s
	}
	for _, t := range allTypeNames() {
		s = strings.ReplaceAll(s, "connectors."+internalSection(t)+".", "connectors.")
		s = strings.ReplaceAll(s, "CONNECTORS__"+strings.ToUpper(internalSection(t))+"__", "CONNECTORS__")
	}
	return s
}

// UserKey is a configuration key as the user writes it: a further account's
// internal key (a secret's, say) as connectors.<name>.<key>.
func UserKey(key string) string { return userKey(key) }

// accountTypesOf reads the types of the accounts a layer names, from its flat keys
// (connectors.ozon-ip.type → ozon); names that are fixed keys are left out.
func accountTypesOf(flat map[string]any, into map[string]string) {
	for key, v := range flat {
		rest, ok := strings.CutPrefix(key, "connectors.")
		if !ok {
			continue
		}
		name, k, ok := strings.Cut(rest, ".")
		if !ok || k != "type" || slices.Contains(fixedConnectorKeys(), name) {
			continue
		}
		if s, ok := v.(string); ok {
			into[name] = s
		} else {
			into[name] = fmt.Sprint(v)
		}
	}
}

// envAccountTypes reads the types the environment gives
// (ORDERSYNC_CONNECTORS__OZON-IP__TYPE=ozon).
func envAccountTypes(environ []string) map[string]string {
	flat := map[string]any{}
	for _, kv := range environ {
		name, v, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(name, envPrefix) {
			continue
		}
		flat[strings.Join(strings.Split(strings.ToLower(strings.TrimPrefix(name, envPrefix)), "__"), ".")] = v
	}
	types := map[string]string{}
	accountTypesOf(flat, types)
	return types
}

// checkAccountTypes says, once per account, what is wrong with the type of an
// account that a layer names under connectors.<name> and that routeLevels could
// not place: its keys are not read.
func checkAccountTypes(flat map[string]any, types map[string]string, where string, said map[string]bool, p *problems) {
	for _, key := range sortedKeys(flat) {
		rest, ok := strings.CutPrefix(key, "connectors.")
		if !ok {
			continue
		}
		name, _, _ := strings.Cut(rest, ".")
		if slices.Contains(fixedConnectorKeys(), name) || said[accountOf([]string{"connectors", name})] {
			continue
		}
		typ, ok := types[name]
		switch {
		case !ok:
			p.add("connectors."+name+".type", fmt.Sprintf("is required for the account connectors.%s: one of %s%s",
				name, strings.Join(allTypeNames(), ", "), where))
		case !slices.Contains(allTypeNames(), typ):
			p.add("connectors."+name+".type", fmt.Sprintf("unknown account type %q, known: %s%s",
				typ, strings.Join(allTypeNames(), ", "), where))
		default:
			continue
		}
		said[accountOf([]string{"connectors", name})] = true
	}
}

// accountOf is what a layer records as said for the account a key's levels are
// in, "" outside connectors.<name>.
func accountOf(levels []string) string {
	if len(levels) < 2 || levels[0] != "connectors" {
		return ""
	}
	return "account " + levels[1]
}

// accountTypesOfFile reads, from a parsed file, the types of the accounts it
// names, where the environment gives none.
func accountTypesOfFile(m map[string]any, types map[string]string) {
	conn, _ := m["connectors"].(map[string]any)
	for name, v := range conn {
		sec, ok := v.(map[string]any)
		if !ok || slices.Contains(fixedConnectorKeys(), name) {
			continue
		}
		if _, set := types[name]; set {
			continue
		}
		if t, ok := sec["type"]; ok {
			types[name] = fmt.Sprint(t)
		}
	}
}

// Account is one enabled marketplace account: its section, as the type's struct.
type Account struct {
	Name   string // connectors.<name>
	Type   string // TypeKaspi, …
	Source string // in keys and the journal: the name, or the first accounts' own
	// One of these is set, by Type.
	Kaspi        *Kaspi
	Ozon         *Ozon
	Wildberries  *Wildberries
	YandexMarket *YandexMarket
	Uzum         *Uzum
	// Bitrix24 is a further portal: pushed to, not polled, and sent no stock.
	Bitrix24 *Bitrix24Webhook

	sec section // what every type's section has, read once by All
}

// section is what the section of every account type has.
type section struct {
	Type      string // the type key as written
	Enabled   bool
	Warehouse string
	OneC      OneCMapping
}

func (k Kaspi) section() section        { return section{k.Type, k.Enabled, k.Warehouse, k.OneC} }
func (o Ozon) section() section         { return section{o.Type, o.Enabled, o.Warehouse, o.OneC} }
func (w Wildberries) section() section  { return section{w.Type, w.Enabled, w.Warehouse, w.OneC} }
func (y YandexMarket) section() section { return section{y.Type, y.Enabled, y.Warehouse, y.OneC} }
func (u Uzum) section() section         { return section{u.Type, u.Enabled, u.Warehouse, u.OneC} }
func (b Bitrix24Webhook) section() section {
	return section{b.Type, b.Enabled, b.Warehouse, b.OneC}
}

// further are the accounts of one type's map section, unsorted.
func further[T interface{ section() section }](m map[string]T, typ string, set func(*Account, *T)) []Account {
	var out []Account
	for name, v := range m {
		a := Account{Name: name, Type: typ, Source: name, sec: v.section()}
		set(&a, &v)
		out = append(out, a)
	}
	return out
}

// Polled reports whether the account is a marketplace that ordersync polls
// (every type but a Bitrix24 portal, which pushes its deals).
func (a Account) Polled() bool { return a.Bitrix24 == nil }

// Key is the account's configuration section, connectors.<name>.
func (a Account) Key() string { return "connectors." + a.Name }

// Mapping is the account's 1C mapping.
func (a Account) Mapping() OneCMapping { return a.sec.OneC }

// Warehouse is the 1C warehouse of the account's orders.
func (a Account) Warehouse() string { return a.sec.Warehouse }

// sourceOf is the source of the account name of type typ.
func sourceOf(name, typ string) string {
	for _, t := range accountTypes {
		if name == t.name && typ == t.name {
			return t.source
		}
	}
	return name
}

// All returns every account, enabled or not, the first ones first, then the others
// by name.
func (c Connectors) All() []Account {
	first := func(typ string, sec section, set func(*Account)) Account {
		a := Account{Name: typ, Type: typ, Source: sourceOf(typ, typ), sec: sec}
		set(&a)
		return a
	}
	out := []Account{
		first(TypeKaspi, c.Kaspi.section(), func(a *Account) { k := c.Kaspi; a.Kaspi = &k }),
		first(TypeOzon, c.Ozon.section(), func(a *Account) { o := c.Ozon; a.Ozon = &o }),
		first(TypeWildberries, c.Wildberries.section(), func(a *Account) { w := c.Wildberries; a.Wildberries = &w }),
		first(TypeYandexMarket, c.YandexMarket.section(), func(a *Account) { y := c.YandexMarket; a.YandexMarket = &y }),
		first(TypeUzum, c.Uzum.section(), func(a *Account) { u := c.Uzum; a.Uzum = &u }),
	}
	more := slices.Concat(
		further(c.KaspiAccounts, TypeKaspi, func(a *Account, k *Kaspi) { a.Kaspi = k }),
		further(c.OzonAccounts, TypeOzon, func(a *Account, o *Ozon) { a.Ozon = o }),
		further(c.WildberriesAccounts, TypeWildberries, func(a *Account, w *Wildberries) { a.Wildberries = w }),
		further(c.YandexMarketAccounts, TypeYandexMarket, func(a *Account, y *YandexMarket) { a.YandexMarket = y }),
		further(c.UzumAccounts, TypeUzum, func(a *Account, u *Uzum) { a.Uzum = u }),
		further(c.Bitrix24Accounts, TypeBitrix24, func(a *Account, b *Bitrix24Webhook) { a.Bitrix24 = b }),
	)
	slices.SortFunc(more, func(a, b Account) int { return strings.Compare(a.Name, b.Name) })
	return append(out, more...)
}

// Enabled returns the enabled accounts, in the order of All.
func (c Connectors) Enabled() []Account {
	var out []Account
	for _, a := range c.All() {
		if a.enabled() {
			out = append(out, a)
		}
	}
	return out
}

// Account returns the account named name (connectors.<name>), enabled or not.
func (c Connectors) Account(name string) (Account, bool) {
	for _, a := range c.All() {
		if a.Name == name {
			return a, true
		}
	}
	return Account{}, false
}

// BySource returns the enabled account whose orders carry source.
func (c Connectors) BySource(source string) (Account, bool) {
	for _, a := range c.Enabled() {
		if a.Source == source {
			return a, true
		}
	}
	return Account{}, false
}

// SKUAliases maps each further account's source to its marketplace's name in
// the SKU map (ozon-ip → ozon, wb-kz → wb), for connectors.NewSKUMapFor.
func (c Connectors) SKUAliases() map[string]string {
	aliases := map[string]string{}
	for _, a := range c.All() {
		if base := sourceOf(a.Type, a.Type); a.Source != base {
			aliases[a.Source] = base
		}
	}
	return aliases
}

// StockMap is the account's map of 1C warehouses to the marketplace's own (Kaspi
// stores, Ozon and Wildberries warehouse ids; the one warehouse of a Yandex Market
// campaign or of the Uzum shops), with its key (connectors.<name>.stock_warehouses)
// and what a value is, for messages.
func (a Account) StockMap() (m map[string]string, key, what string) {
	one := func(wh, id string) map[string]string {
		if wh == "" {
			return map[string]string{}
		}
		return map[string]string{wh: id}
	}
	switch {
	case a.Kaspi != nil:
		return a.Kaspi.Stores, a.Key() + ".stores", "the Kaspi store id (storeId in the feed, such as PP1)"
	case a.Ozon != nil:
		return a.Ozon.StockWarehouses, a.Key() + ".stock_warehouses", "the Ozon warehouse id (a whole number greater than 0)"
	case a.Wildberries != nil:
		return a.Wildberries.StockWarehouses, a.Key() + ".stock_warehouses", "the Wildberries seller warehouse id (a whole number greater than 0)"
	case a.YandexMarket != nil:
		return one(a.YandexMarket.StockWarehouse, a.YandexMarket.CampaignID), a.Key() + ".stock_warehouse", "the 1C warehouse whose stock the campaign is told"
	case a.Uzum != nil:
		return one(a.Uzum.StockWarehouse, strings.Join(a.Uzum.ShopIDs, ",")), a.Key() + ".stock_warehouse", "the 1C warehouse whose stock the shops are told"
	}
	return nil, a.Key(), "its id"
}

// StockWarehouseKey reports whether the account's stock map is one warehouse
// (connectors.<name>.stock_warehouse) rather than a map of them.
func (a Account) StockWarehouseKey() bool { return a.YandexMarket != nil || a.Uzum != nil }

// Names are every polled account's name (a marketplace's, not a Bitrix24
// portal's), in the order of All.
func (c Connectors) Names() []string {
	var names []string
	for _, a := range c.All() {
		if a.Polled() {
			names = append(names, a.Name)
		}
	}
	return names
}

// Enabled reports whether the account is enabled (connectors.<name>.enabled).
func (a Account) Enabled() bool { return a.enabled() }

// Returns reports whether the account lists returns (connectors.<name>.returns),
// and ok whether its type has returns at all.
func (a Account) Returns() (enabled, ok bool) {
	switch {
	case a.Kaspi != nil:
		return a.Kaspi.Returns.Enabled, true
	case a.Ozon != nil:
		return a.Ozon.Returns.Enabled, true
	case a.Wildberries != nil:
		return a.Wildberries.Returns.Enabled, true
	}
	return false, false
}

func (a Account) enabled() bool { return a.sec.Enabled }

// typeKey is the type key an account's section holds.
func (a Account) typeKey() string { return a.sec.Type }

// validateAccounts checks what concerns accounts together: a first account's type
// is its name; no two enabled accounts write the same source; the 1C mapping is
// well formed where given (whether it is required is MappingNeeds').
func (c Connectors) validateAccounts(p *problems) {
	bySource := map[string]string{}
	for _, a := range c.All() {
		if t := a.typeKey(); t != "" && t != a.Type {
			p.add(a.Key()+".type", fmt.Sprintf("connectors.%s is the %s account; an account of type %s needs a name of its own, such as %s-2",
				a.Name, a.Name, t, strings.ReplaceAll(t, "_", "-")))
		}
		if !a.enabled() {
			continue
		}
		if other, ok := bySource[a.Source]; ok {
			p.add(a.Key(), fmt.Sprintf("writes the source %q, as connectors.%s does: give one of them another name", a.Source, other))
		}
		bySource[a.Source] = a.Name
		a.Mapping().validate(a.Key()+".onec", p)
	}
}

// typeDefaults are the defaults of an account of each type: the first account's.
func typeDefaults() map[string]any {
	d := defaults().Connectors
	return map[string]any{
		"connectors." + internalSection(TypeKaspi):        d.Kaspi,
		"connectors." + internalSection(TypeOzon):         d.Ozon,
		"connectors." + internalSection(TypeWildberries):  d.Wildberries,
		"connectors." + internalSection(TypeYandexMarket): d.YandexMarket,
		"connectors." + internalSection(TypeUzum):         d.Uzum,
		"connectors." + internalSection(TypeBitrix24):     defaults().Webhooks.Bitrix24,
	}
}

// accountSections lists the map sections of accounts, for maps.Copy into
// entryDefaults.
func addTypeDefaults(into map[string]any) map[string]any {
	maps.Copy(into, typeDefaults())
	return into
}

func (m OneCMapping) validate(key string, p *problems) {
	for k, v := range map[string]string{"organization": m.Organization, "partner": m.Partner,
		"counterparty": m.Counterparty, "agreement": m.Agreement, "warehouse": m.Warehouse} {
		if hasControl(v) || strings.TrimSpace(v) != v {
			p.add(key+"."+k, "must be a code or GUID as 1C knows it, without spaces around it or control characters")
		}
	}
}

// checkWebhookSourceNames reports a webhook source named as an account's source
// (ozon-ip): the two would write the same keys.
func (c *Config) checkWebhookSourceNames(p *problems) {
	for _, name := range slices.Sorted(maps.Keys(c.Webhooks.Sources)) {
		if slices.Contains(connectorSources, name) {
			continue // said by the source's own check
		}
		for _, a := range c.Connectors.All() {
			if a.Source == name || a.Name == name {
				p.add("webhooks.sources."+name, fmt.Sprintf("the name %q is the source of the account connectors.%s: its orders' keys would mix with the account's; choose another name", name, a.Name))
				break
			}
		}
	}
}

// checkPortals reports a further Bitrix24 portal named bitrix24, which is the
// source of webhooks.bitrix24, and a type other than bitrix24 there.
func (c *Config) checkPortals(p *problems) {
	if a, ok := c.Connectors.Account(TypeBitrix24); ok && a.Bitrix24 != nil {
		p.add(a.Key(), "the first Bitrix24 portal is webhooks.bitrix24; a further one needs a name of its own, such as bitrix24-2")
	}
	if t := c.Webhooks.Bitrix24.Type; t != "" && t != TypeBitrix24 {
		p.add("webhooks.bitrix24.type", fmt.Sprintf("must be bitrix24 (or left out), got %q", t))
	}
}

// mappedSource is one sender of orders and its 1C mapping: an enabled account,
// a webhook source, the Bitrix24 portal.
type mappedSource struct {
	source, key string // the orders' source; the mapping's section (connectors.ozon-ip.onec)
	m           OneCMapping
}

// mappedSources are every enabled sender of orders with its mapping.
func (c *Config) mappedSources() []mappedSource {
	var out []mappedSource
	for _, a := range c.Connectors.Enabled() {
		out = append(out, mappedSource{a.Source, a.Key() + ".onec", a.Mapping()})
	}
	for _, name := range slices.Sorted(maps.Keys(c.Webhooks.Sources)) {
		out = append(out, mappedSource{name, "webhooks.sources." + name + ".onec", c.Webhooks.Sources[name].OneC})
	}
	if b := c.Webhooks.Bitrix24; b.Enabled {
		out = append(out, mappedSource{"bitrix24", "webhooks.bitrix24.onec", b.OneC})
	}
	return out
}

// Mapped reports whether some enabled sender of orders (an account, a webhook
// source, Bitrix24) names the 1C organisation its orders are written under: then
// every one must (OneCMappingOf refuses the others' orders), never falling back
// on the base's default organisation.
func (c *Config) Mapped() bool {
	return slices.ContainsFunc(c.mappedSources(), func(s mappedSource) bool { return s.m.Organization != "" })
}

// OneCMappingOf is the 1C mapping of source's orders, and the key of its
// organisation (connectors.ozon-ip.onec.organization). ok is false when the
// organisation is required (Mapped) and the sender of source names none, or no
// configured sender writes source (an order imported under another name).
func (c *Config) OneCMappingOf(source string) (m OneCMapping, key string, ok bool) {
	for _, s := range c.mappedSources() {
		if s.source == source {
			return s.m, s.key + ".organization", s.m.Organization != "" || !c.Mapped()
		}
	}
	return OneCMapping{}, "webhooks.sources." + source + ".onec.organization", !c.Mapped()
}
