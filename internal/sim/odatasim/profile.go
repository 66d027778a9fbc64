package odatasim

import (
	"encoding/json"
	"slices"
)

// The OData types of the fields the simulator holds (1C manual §17.4.3).
const (
	edmString   = "Edm.String"
	edmGuid     = "Edm.Guid"
	edmDateTime = "Edm.DateTime"
	edmDouble   = "Edm.Double"
	edmBoolean  = "Edm.Boolean"
	edmInt64    = "Edm.Int64"
)

// The entity sets and fields of УТ 11 (profile "ut11", the default).
const (
	Orders  = "Document_ЗаказКлиента"
	Items   = "Catalog_Номенклатура"
	Rows    = "Товары"
	Marker  = "НомерПоДаннымКлиента"
	Article = "Артикул"
	// Barcodes is the register of the items' barcodes, Barcode its dimension.
	Barcodes = "InformationRegister_ШтрихкодыНоменклатуры"
	Barcode  = "Штрихкод"

	Partners      = "Catalog_Партнеры"
	Agreements    = "Catalog_СоглашенияСКлиентами"
	Warehouses    = "Catalog_Склады"
	CancelReasons = "Catalog_ПричиныОтменыЗаказовКлиентов"

	// Stock is УТ's register of goods in warehouses, read through its Balance.
	Stock = "AccumulationRegister_ТоварыНаСкладах"
	// StockBalance is the Balance's field of the register's resource ВНаличии: a
	// virtual table names a resource's total by its name and "Balance".
	StockBalance = "ВНаличииBalance"

	// Returns is УТ's customer return document, with the tabular part Rows;
	// ReturnMarker its field CountReturns counts by (the client's incoming
	// document number); ReturnBasis its composite reference to the document it is
	// based on (ReturnBasis and ReturnBasis_Type).
	Returns      = "Document_ВозвратТоваровОтКлиента"
	ReturnMarker = "НомерВходящегоДокумента"
	ReturnBasis  = "ДокументРеализации"
)

// The entity sets and fields of УНФ (profile "unf").
const (
	UNFOrders       = "Document_ЗаказПокупателя"
	UNFRows         = "Запасы"
	UNFMarker       = "Комментарий"
	Contracts       = "Catalog_ДоговорыКонтрагентов"
	StructuralUnits = "Catalog_СтруктурныеЕдиницы"
	OrderStates     = "Catalog_СостоянияЗаказовПокупателей"
)

// The catalogs both profiles have.
const (
	Organizations  = "Catalog_Организации"
	Counterparties = "Catalog_Контрагенты"
	Currencies     = "Catalog_Валюты"
	PriceTypes     = "Catalog_ВидыЦен"
)

// zeroRef is 1C's empty reference.
const zeroRef = "00000000-0000-0000-0000-000000000000"

type field struct{ name, edm string }

// profile is what one configuration publishes for orders.
type profile struct {
	document, rows, marker, numberPrefix string
	header, row                          []field // the header's fields with Date, the rows' without LineNumber
	catalogs                             []string
	register                             string // "" when the profile serves no stock
	barcodes                             bool   // the items' barcodes register is served
	// returns is the customer return document, nil when the profile serves none.
	returns *docSpec
}

// docSpec is a document the profile serves besides the order.
type docSpec struct {
	document, rows, marker, numberPrefix string
	header, row                          []field
}

var profiles = map[string]profile{
	"ut11": {
		document: Orders, rows: Rows, marker: Marker, numberPrefix: "КА-",
		header: []field{{"Date", edmDateTime}, {Marker, edmString}, {"Комментарий", edmString},
			{"СуммаДокумента", edmDouble}, {"Организация_Key", edmGuid}, {"Партнер_Key", edmGuid},
			{"Контрагент_Key", edmGuid}, {"Соглашение_Key", edmGuid}, {"Валюта_Key", edmGuid},
			{"Склад_Key", edmGuid}, {"ХозяйственнаяОперация", edmString}, {"Статус", edmString}},
		row: []field{{"Номенклатура_Key", edmGuid}, {"Количество", edmDouble}, {"Цена", edmDouble},
			{"Сумма", edmDouble}, {"Склад_Key", edmGuid}, {"Отменено", edmBoolean}, {"ПричинаОтмены_Key", edmGuid}},
		catalogs: []string{Organizations, Partners, Counterparties, Agreements, Currencies, Warehouses,
			PriceTypes, CancelReasons},
		register: Stock,
		barcodes: true,
		returns: &docSpec{document: Returns, rows: Rows, marker: ReturnMarker, numberPrefix: "ВК-",
			header: []field{{"Date", edmDateTime}, {ReturnMarker, edmString}, {"ДатаВходящегоДокумента", edmDateTime},
				{"Комментарий", edmString}, {"СуммаДокумента", edmDouble}, {"Организация_Key", edmGuid},
				{"Партнер_Key", edmGuid}, {"Контрагент_Key", edmGuid}, {"Соглашение_Key", edmGuid},
				{"Валюта_Key", edmGuid}, {"Склад_Key", edmGuid}, {"ХозяйственнаяОперация", edmString},
				// A composite reference: the GUID and the type of what it refers to.
				{ReturnBasis, edmString}, {ReturnBasis + "_Type", edmString}},
			row: []field{{"Номенклатура_Key", edmGuid}, {"Количество", edmDouble}, {"Цена", edmDouble},
				{"Сумма", edmDouble}}},
	},
	"unf": {
		document: UNFOrders, rows: UNFRows, marker: UNFMarker, numberPrefix: "ЗП-",
		header: []field{{"Date", edmDateTime}, {"Комментарий", edmString}, {"СуммаДокумента", edmDouble},
			{"Организация_Key", edmGuid}, {"Контрагент_Key", edmGuid}, {"Договор_Key", edmGuid},
			{"ВалютаДокумента_Key", edmGuid}, {"СтруктурнаяЕдиницаРезерв_Key", edmGuid},
			{"ВидОперации", edmString}, {"СостояниеЗаказа_Key", edmGuid}},
		row: []field{{"Номенклатура_Key", edmGuid}, {"Количество", edmDouble}, {"Цена", edmDouble},
			{"Сумма", edmDouble}},
		catalogs: []string{Organizations, Counterparties, Contracts, Currencies, StructuralUnits,
			PriceTypes, OrderStates},
	},
}

// The register's Balance: its dimensions (what a Condition names) and the
// resource's total.
var stockFields = []field{{"Номенклатура_Key", edmGuid}, {"Склад_Key", edmGuid}, {StockBalance, edmDouble}}

// stockRecord is the register's record type, the Balance's binding in $metadata.
var stockRecord = []field{{"Recorder_Key", edmGuid}, {"Period", edmDateTime}, {"LineNumber", edmInt64},
	{"Active", edmBoolean}, {"RecordType", edmString}, {"Номенклатура_Key", edmGuid}, {"Склад_Key", edmGuid},
	{"ВНаличии", edmDouble}}

// entitySet is a set the base holds, published or not, with its objects.
type entitySet struct {
	name      string
	document  bool
	marker    string  // a document's marker field: a fault's ExternalID names it
	prefix    string  // a document's number prefix
	fields    []field // in $metadata order, the tabular part left out
	rows      string  // the tabular part, "" for none
	rowFields []field
	published bool

	docs  []Doc // in creation order
	codes int   // the last catalog code given
}

// typeIn is the OData type of the field name, "" when fields have none.
func typeIn(fields []field, name string) string {
	if i := slices.IndexFunc(fields, func(f field) bool { return f.name == name }); i >= 0 {
		return fields[i].edm
	}
	return ""
}

func (e *entitySet) find(ref string) (int, Doc) {
	for i, d := range e.docs {
		if d["Ref_Key"] == ref {
			return i, d
		}
	}
	return -1, nil
}

// barcodeFields are the barcodes register's record: the barcode (its dimension)
// and the item it is of.
var barcodeFields = []field{{Barcode, edmString}, {"Номенклатура_Key", edmGuid}}

var catalogFields = []field{{"Ref_Key", edmGuid}, {"DataVersion", edmString}, {"DeletionMark", edmBoolean},
	{"Code", edmString}, {"Description", edmString}}

var documentFields = []field{{"Ref_Key", edmGuid}, {"DataVersion", edmString}, {"Number", edmString},
	{"Date", edmDateTime}, {"Posted", edmBoolean}, {"DeletionMark", edmBoolean}}

// buildSets lays out the sets of p, less what opts leaves unpublished.
func buildSets(p profile, opts Options) map[string]*entitySet {
	dropped := func(set string, fields []field) []field {
		return slices.DeleteFunc(slices.Clone(fields), func(f field) bool {
			return f.name != "Ref_Key" && slices.Contains(opts.UnpublishedFields[set], f.name)
		})
	}
	sets := map[string]*entitySet{}
	add := func(e *entitySet) {
		e.published = !slices.Contains(opts.Unpublished, e.name)
		e.fields = dropped(e.name, e.fields)
		if e.rows != "" && slices.Contains(opts.UnpublishedFields[e.name], e.rows) {
			e.rows, e.rowFields = "", nil
		}
		e.rowFields = dropped(e.name+"_"+e.rows, e.rowFields)
		sets[e.name] = e
	}
	header := slices.DeleteFunc(slices.Clone(p.header), func(f field) bool { return f.name == "Date" })
	add(&entitySet{name: p.document, document: true, marker: opts.Marker, prefix: p.numberPrefix,
		fields: append(slices.Clone(documentFields), header...), rows: p.rows, rowFields: p.row})
	if r := p.returns; r != nil {
		header := slices.DeleteFunc(slices.Clone(r.header), func(f field) bool { return f.name == "Date" })
		add(&entitySet{name: r.document, document: true, marker: r.marker, prefix: r.numberPrefix,
			fields: append(slices.Clone(documentFields), header...), rows: r.rows, rowFields: r.row})
	}
	add(&entitySet{name: Items, fields: append(slices.Clone(catalogFields), field{Article, edmString})})
	for _, c := range p.catalogs {
		add(&entitySet{name: c, fields: catalogFields})
	}
	if p.barcodes {
		add(&entitySet{name: Barcodes, fields: barcodeFields})
	}
	return sets
}

// writable says whether a create or a patch of the order writes the field:
// standard fields but the date and the deletion mark are 1C's own.
func writable(name string) bool {
	return name != "Ref_Key" && name != "DataVersion" && name != "Number" && name != "Posted"
}

// empty is the value a field holds when nothing was written to it.
func empty(edm string) any {
	switch edm {
	case edmGuid:
		return zeroRef
	case edmDateTime:
		return "0001-01-01T00:00:00"
	case edmDouble, edmInt64:
		return json.Number("0")
	case edmBoolean:
		return false
	}
	return ""
}
