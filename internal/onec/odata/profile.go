// Package odata is the 1C client over the standard OData interface that every
// typical base can publish (…/odata/standard.odata/), with no code added to the
// configuration. It has no idempotency and no lock inside 1C to lean on: an order
// is found by a marker written on create, searched before every create (under the
// journal's row lock, as with the HTTP service), and every write is read back and
// compared, because 1C answers 200 to writes it truncated, ignored or stored with a
// broken reference.
//
// This file and its neighbours hold the pure parts — the profiles, the request
// shapes, the errors and the read-back comparison — that the client sends and
// checks.
package odata

import "fmt"

// Profile is what differs between typical configurations: the order document, its
// tabular part, the marker field and the fields of the header and the rows.
type Profile struct {
	// Name is the configuration key's value: ut11 or unf.
	Name string
	// Document is the entity set of the customer order.
	Document string
	// Rows is the order's tabular part of goods.
	Rows string
	// Marker is the header string field that holds the operation's external id:
	// written on create, searched before every create.
	Marker string

	// The header's reference fields (GUIDs, written as <name>_Key).
	Organization, Partner, Counterparty, Agreement, Currency, Warehouse string
	// Total is the document's amount; Comment its free text.
	Total, Comment string
	// Operation, when set, is the header's business operation enum and the value
	// a marketplace sale is written with.
	Operation, OperationValue string

	// The rows' fields: the item reference, quantity, price, amount.
	Item, Quantity, Price, Amount string
	// RowWarehouse, when set, is the warehouse reference each row carries too.
	RowWarehouse string
	// Cancelled, when set, is the rows' boolean that cancels a row (УТ); the
	// profile cancels by Status otherwise.
	Cancelled string
	// Status, when set, is the header's order state reference (УНФ's
	// СостояниеЗаказа).
	Status string
	// Basis, when set, is the header's composite reference to the document this
	// one is based on, written as Basis (the GUID) and Basis_Type (its type): the
	// order a customer return is based on.
	Basis string

	// Return is the configuration's customer return document, written as the
	// order is (its Stock, Prices, Catalogs and Barcodes unused); nil when
	// ordersync does not know it, and returns are refused over OData.
	Return *Profile

	// Stock is the balance register stock is read from; Prices the register of
	// prices by price type (onec.odata.price_type).
	Stock  StockRegister
	Prices PriceRegister
	// Catalogs are the catalogs the configured references are of.
	Catalogs Catalogs
	// Barcodes is the register of the items' barcodes, for onec.odata.items_by
	// Штрихкод.
	Barcodes BarcodeRegister
}

// ByBarcode is the onec.odata.items_by that matches a SKU to the item whose
// barcode it is, in the profile's barcodes register.
const ByBarcode = "Штрихкод"

// BarcodeRegister is an information register of barcodes: the barcode, the item.
type BarcodeRegister struct {
	Register, Barcode, Item string
}

// Catalogs name the catalog each configured reference is an object of.
type Catalogs struct {
	Organization, Partner, Counterparty, Agreement, Currency, Warehouse, PriceType string
	// CancelReason (УТ) and State (УНФ): what a cancel writes.
	CancelReason, State string
}

// StockRegister is an accumulation register read through its Balance function.
type StockRegister struct {
	Register  string // AccumulationRegister_ТоварыНаСкладах
	Warehouse string // the dimension the Condition names (Склад)
	Item      string // the item dimension (Номенклатура)
	Balance   string // the resource's balance property (ВНаличииBalance)
}

// PriceRegister is an information register read through its SliceLast function.
type PriceRegister struct {
	Register string // InformationRegister_ЦеныНоменклатуры
	Kind     string // the price type dimension (ВидЦены)
	Item     string // the item dimension (Номенклатура)
	Price    string // the resource (Цена)
}

// Profiles are the configurations ordersync writes to, by Name. КА 2 and ERP 2
// share УТ 11's documents and use ut11.
var Profiles = map[string]Profile{
	"ut11": {
		Name:     "ut11",
		Document: "Document_ЗаказКлиента",
		Rows:     "Товары",
		Marker:   "НомерПоДаннымКлиента",

		Organization: "Организация", Partner: "Партнер", Counterparty: "Контрагент", Agreement: "Соглашение",
		Currency: "Валюта", Warehouse: "Склад",
		Total: "СуммаДокумента", Comment: "Комментарий",
		Operation: "ХозяйственнаяОперация", OperationValue: "РеализацияКлиенту",

		Item: "Номенклатура", Quantity: "Количество", Price: "Цена", Amount: "Сумма",
		RowWarehouse: "Склад", Cancelled: "Отменено",

		Stock:  StockRegister{Register: "AccumulationRegister_ТоварыНаСкладах", Warehouse: "Склад", Item: "Номенклатура", Balance: "ВНаличииBalance"},
		Prices: PriceRegister{Register: "InformationRegister_ЦеныНоменклатуры", Kind: "ВидЦены", Item: "Номенклатура", Price: "Цена"},
		Catalogs: Catalogs{Organization: "Catalog_Организации", Partner: "Catalog_Партнеры", Counterparty: "Catalog_Контрагенты",
			Agreement: "Catalog_СоглашенияСКлиентами", Currency: "Catalog_Валюты", Warehouse: "Catalog_Склады",
			PriceType: "Catalog_ВидыЦен", CancelReason: "Catalog_ПричиныОтменыЗаказовКлиентов"},
		Barcodes: BarcodeRegister{Register: "InformationRegister_ШтрихкодыНоменклатуры", Barcode: "Штрихкод", Item: "Номенклатура"},

		// УТ 11's «Возврат товаров от клиента». Its marker is the client's incoming
		// document number, the header string a return keeps the other side's
		// number in; its base is ДокументРеализации, here the order.
		Return: &Profile{
			Name:     "ut11",
			Document: "Document_ВозвратТоваровОтКлиента",
			Rows:     "Товары",
			Marker:   "НомерВходящегоДокумента",

			Organization: "Организация", Partner: "Партнер", Counterparty: "Контрагент", Agreement: "Соглашение",
			Currency: "Валюта", Warehouse: "Склад",
			Total: "СуммаДокумента", Comment: "Комментарий",
			Operation: "ХозяйственнаяОперация", OperationValue: "ВозвратОтКлиента",

			Item: "Номенклатура", Quantity: "Количество", Price: "Цена", Amount: "Сумма",
			Basis: "ДокументРеализации",
		},
	},
	"unf": {
		Name:     "unf",
		Document: "Document_ЗаказПокупателя",
		Rows:     "Запасы",
		// УНФ's order has no field named for the client's number; the comment is
		// the one string every base publishes. onec.odata.marker overrides it.
		Marker: "Комментарий",

		Organization: "Организация", Counterparty: "Контрагент", Agreement: "Договор",
		Currency: "ВалютаДокумента", Warehouse: "СтруктурнаяЕдиницаРезерв",
		Total:     "СуммаДокумента",
		Operation: "ВидОперации", OperationValue: "ЗаказНаПродажу",

		Item: "Номенклатура", Quantity: "Количество", Price: "Цена", Amount: "Сумма",
		Status: "СостояниеЗаказа",

		Stock:  StockRegister{Register: "AccumulationRegister_ЗапасыНаСкладах", Warehouse: "СтруктурнаяЕдиница", Item: "Номенклатура", Balance: "КоличествоBalance"},
		Prices: PriceRegister{Register: "InformationRegister_ЦеныНоменклатуры", Kind: "ВидЦен", Item: "Номенклатура", Price: "Цена"},
		Catalogs: Catalogs{Organization: "Catalog_Организации", Counterparty: "Catalog_Контрагенты",
			Agreement: "Catalog_ДоговорыКонтрагентов", Currency: "Catalog_Валюты", Warehouse: "Catalog_СтруктурныеЕдиницы",
			PriceType: "Catalog_ВидыЦен", State: "Catalog_СостоянияЗаказовПокупателей"},
		Barcodes: BarcodeRegister{Register: "InformationRegister_ШтрихкодыНоменклатуры", Barcode: "Штрихкод", Item: "Номенклатура"},
	},
}

// ProfileNamed is the profile of onec.odata.profile, with marker (onec.odata.marker)
// in place of its own when set.
func ProfileNamed(name, marker string) (Profile, error) {
	p, ok := Profiles[name]
	if !ok {
		return Profile{}, fmt.Errorf("onec.odata.profile: %q is not a profile ordersync knows (ut11 for УТ 11, КА 2 and ERP 2; unf for УНФ)", name)
	}
	if p.Return != nil {
		r := *p.Return
		p.Return = &r
	}
	if marker != "" {
		p.Marker = marker
		if p.Comment == marker {
			p.Comment = "" // the comment is the marker: nothing else is written to it
		}
	}
	return p, nil
}
