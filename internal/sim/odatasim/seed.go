package odatasim

import (
	"slices"
	"strings"
)

// Base is what Seed filled a simulated base with: the references a client is
// configured with, and the items by SKU.
type Base struct {
	Profile                                      string
	Organization, Warehouse, Currency, PriceType string
	CancelReason, CancelledState                 string
	Sources                                      map[string]SourceRefs
	Items                                        map[string]string // SKU (Артикул) → Ref_Key
}

// SourceRefs are one source's partner (ut11), counterparty and agreement.
type SourceRefs struct{ Partner, Counterparty, Agreement string }

// Seed adds what a typical base has before its first order: an organization, a
// warehouse, the currency, a price type, a cancel reason (ut11) or a cancelled
// state (unf), and for each source a partner, a counterparty and an agreement;
// and an item for each SKU, its article the SKU.
func (s *Server) Seed(sources, skus []string) Base {
	ut := s.opts.Profile == "ut11"
	b := Base{Profile: s.opts.Profile, Sources: map[string]SourceRefs{}, Items: map[string]string{}}
	b.Organization = s.AddRef(Organizations, "ТОО «Пример»")
	b.Currency = s.AddRef(Currencies, "KZT")
	b.PriceType = s.AddRef(PriceTypes, "Розничная")
	if ut {
		b.Warehouse = s.AddRef(Warehouses, "Основной склад")
		b.CancelReason = s.AddRef(CancelReasons, "Отменён покупателем на маркетплейсе")
	} else {
		b.Warehouse = s.AddRef(StructuralUnits, "Основной склад")
		b.CancelledState = s.AddRef(OrderStates, "Отменен")
	}
	for _, src := range sources {
		r := SourceRefs{Counterparty: s.AddRef(Counterparties, "Покупатели "+src)}
		if ut {
			r.Partner = s.AddRef(Partners, "Покупатели "+src)
			r.Agreement = s.AddRef(Agreements, "Продажи через "+src)
		} else {
			r.Agreement = s.AddRef(Contracts, "Продажи через "+src)
		}
		b.Sources[src] = r
	}
	for _, sku := range skus {
		b.Items[sku] = s.AddItem(sku, "Товар "+sku)
	}
	return b
}

// Environ is the base as ordersync's environment configures it: onec.interface,
// onec.base_url and onec.odata's keys (ORDERSYNC_ONEC__…), for url.
func (b Base) Environ(url string) []string {
	env := []string{
		"ORDERSYNC_ONEC__INTERFACE=odata",
		"ORDERSYNC_ONEC__BASE_URL=" + url,
		"ORDERSYNC_ONEC__ODATA__PROFILE=" + b.Profile,
		"ORDERSYNC_ONEC__ODATA__ORGANIZATION=" + b.Organization,
		"ORDERSYNC_ONEC__ODATA__WAREHOUSE=" + b.Warehouse,
		"ORDERSYNC_ONEC__ODATA__CURRENCY=" + b.Currency,
	}
	if b.CancelReason != "" {
		env = append(env, "ORDERSYNC_ONEC__ODATA__CANCEL_REASON="+b.CancelReason)
	}
	if b.CancelledState != "" {
		env = append(env, "ORDERSYNC_ONEC__ODATA__CANCELLED_STATE="+b.CancelledState)
	}
	names := make([]string, 0, len(b.Sources))
	for name := range b.Sources {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		r := b.Sources[name]
		key := "ORDERSYNC_ONEC__ODATA__SOURCES__" + strings.ToUpper(name) + "__"
		if r.Partner != "" {
			env = append(env, key+"PARTNER="+r.Partner)
		}
		env = append(env, key+"COUNTERPARTY="+r.Counterparty)
		if r.Agreement != "" {
			env = append(env, key+"AGREEMENT="+r.Agreement)
		}
	}
	return env
}

// AddBarcode records barcode as the item's (ut11's barcodes register).
func (s *Server) AddBarcode(barcode, itemRef string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	es := s.sets[Barcodes]
	if es == nil {
		panic("odatasim: profile " + s.opts.Profile + " has no barcodes register")
	}
	es.docs = append(es.docs, Doc{Barcode: barcode, "Номенклатура_Key": itemRef})
}
