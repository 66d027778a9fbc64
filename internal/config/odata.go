package config

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/google/uuid"
)

// The 1C interfaces (onec.interface).
const (
	InterfaceHTTPService = "httpservice" // ordersync's HTTP service in the base (contract v1)
	InterfaceOData       = "odata"       // the base's standard OData interface
)

// OData is how orders are written over 1C's standard OData interface
// (onec.interface odata): the configuration's profile and the base's references.
type OData struct {
	// Profile is the typical configuration: ut11 (УТ 11, КА 2, ERP 2) or unf (УНФ).
	Profile string `koanf:"profile"`
	// Marker overrides the profile's header field the order's external id is kept in.
	Marker string `koanf:"marker"`
	// ItemsBy is the field of Catalog_Номенклатура an order's SKU is matched to.
	ItemsBy string `koanf:"items_by"`
	// The base's references, GUIDs.
	Organization string `koanf:"organization"`
	Warehouse    string `koanf:"warehouse"`
	Currency     string `koanf:"currency"`
	PriceType    string `koanf:"price_type"`
	// CancelReason (УТ, optional) is a ПричиныОтменыЗаказовКлиентов GUID written on
	// a cancelled order's rows; CancelledState (УНФ) the СостоянияЗаказовПокупателей
	// GUID a cancelled order is set to.
	CancelReason   string `koanf:"cancel_reason"`
	CancelledState string `koanf:"cancelled_state"`
	// Sources are the references each source's orders are written with, by source
	// (kaspi, ozon, wb for Wildberries, bitrix24, or a webhook source's name).
	Sources map[string]ODataSource `koanf:"sources" name:"[a-z0-9_-]{1,64}"`
}

// ODataSource is the partner, counterparty and agreement (GUIDs) of one source's
// orders.
type ODataSource struct {
	Partner      string `koanf:"partner"`
	Counterparty string `koanf:"counterparty"`
	Agreement    string `koanf:"agreement"`
}

// odataProfiles are the profiles onec.odata.profile takes, and which header
// references each requires.
var odataProfiles = map[string]struct{ partner, warehouse bool }{
	"ut11": {partner: true, warehouse: true},
	"unf":  {},
}

func (o OneC) validateInterface(p *problems) {
	switch o.Interface {
	case InterfaceHTTPService:
		return
	case InterfaceOData:
	default:
		p.add("onec.interface", fmt.Sprintf("must be %s (ordersync's HTTP service in the base) or %s (the base's standard OData interface), got %q",
			InterfaceHTTPService, InterfaceOData, o.Interface))
		return
	}
	d := o.OData
	prof, ok := odataProfiles[d.Profile]
	if !ok {
		p.add("onec.odata.profile", fmt.Sprintf("must be ut11 (УТ 11, КА 2, ERP 2) or unf (УНФ), got %q", d.Profile))
	}
	if o.BaseURL != "" && !strings.Contains(o.BaseURL, "/odata/standard.odata") {
		p.add("onec.base_url", fmt.Sprintf("with onec.interface odata it is the publication's standard OData root, e.g. http://1c.local/trade/odata/standard.odata, got %q", o.BaseURL))
	}
	// Formats only: which references are required is ODataNeeds', asked by the
	// commands that write orders, so that `ordersync onec refs` can be run to find
	// the GUIDs before they are filled in.
	guid := func(key, v string) {
		if v == "" {
			return
		}
		if _, err := uuid.Parse(v); err != nil || len(v) != 36 {
			p.add(key, fmt.Sprintf("must be a GUID such as 8d04ce3c-1bd6-11e9-80c8-00155d000a04, got %q", v))
		}
	}
	guid("onec.odata.organization", d.Organization)
	guid("onec.odata.warehouse", d.Warehouse)
	guid("onec.odata.currency", d.Currency)
	guid("onec.odata.price_type", d.PriceType)
	guid("onec.odata.cancel_reason", d.CancelReason)
	guid("onec.odata.cancelled_state", d.CancelledState)
	if strings.ContainsAny(d.ItemsBy, " '()") {
		p.add("onec.odata.items_by", fmt.Sprintf("must be a field name of Catalog_Номенклатура, or Штрихкод, got %q", d.ItemsBy))
	}
	if strings.ContainsAny(d.Marker, " '()") {
		p.add("onec.odata.marker", fmt.Sprintf("must be a field name of the order document, got %q", d.Marker))
	}
	for _, name := range slices.Sorted(maps.Keys(d.Sources)) {
		s := d.Sources[name]
		key := "onec.odata.sources." + name
		guid(key+".partner", s.Partner)
		guid(key+".counterparty", s.Counterparty)
		guid(key+".agreement", s.Agreement)
		if s.Partner != "" && ok && !prof.partner {
			p.add(key+".partner", fmt.Sprintf("the %s profile's orders have no partner: remove it", d.Profile))
		}
	}
}

// ODataNeeds says which references the OData interface needs to write orders
// that the configuration does not set (nil with another interface): the
// organization, the currency, the warehouse (ut11), the cancelled state (unf), and
// each source's counterparty (and partner, for ut11). The commands that write
// orders ask it; `ordersync onec refs` and `onec check` do not, so that they help
// fill these in.
func (c *Config) ODataNeeds() error {
	o := c.OneC
	if o.Interface != InterfaceOData {
		return nil
	}
	var p problems
	prof := odataProfiles[o.OData.Profile]
	need := func(key, v string, required bool) {
		if v == "" && required {
			p.add(key, "is required with onec.interface odata: the GUID of the 1C object (`ordersync onec refs` lists them)")
		}
	}
	need("onec.odata.organization", o.OData.Organization, true)
	need("onec.odata.warehouse", o.OData.Warehouse, prof.warehouse)
	need("onec.odata.currency", o.OData.Currency, true)
	need("onec.odata.cancelled_state", o.OData.CancelledState, o.OData.Profile == "unf")
	if len(o.OData.Sources) == 0 {
		p.add("onec.odata.sources", "needs an entry for each source whose orders go to 1C (onec.odata.sources.kaspi.counterparty, …)")
	}
	for _, name := range slices.Sorted(maps.Keys(o.OData.Sources)) {
		s := o.OData.Sources[name]
		key := "onec.odata.sources." + name
		need(key+".partner", s.Partner, prof.partner)
		need(key+".counterparty", s.Counterparty, true)
	}
	c.checkODataSources(&p)
	return p.err()
}

// checkODataSources: over the OData interface every source that registers orders
// by itself (an enabled connector, a webhook source) has the references its orders
// are written with, so that none of its orders waits for them at run time.
func (c *Config) checkODataSources(p *problems) {
	if c.OneC.Interface != InterfaceOData || len(c.OneC.OData.Sources) == 0 {
		return // reported under onec.odata.sources
	}
	var need []string
	for _, s := range c.mappedSources() {
		if s.m.Counterparty == "" { // a sender's own mapping names it
			need = append(need, s.source)
		}
	}
	slices.Sort(need)
	for _, name := range need {
		if _, ok := c.OneC.OData.Sources[name]; !ok {
			p.add("onec.odata.sources."+name, fmt.Sprintf("is not set, and %s's orders go to 1C: give its counterparty (and partner, for ut11)", name))
		}
	}
}
