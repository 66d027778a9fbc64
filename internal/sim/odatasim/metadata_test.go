package odatasim

import (
	"encoding/xml"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
)

// csdl is what a test reads of $metadata, by the elements' local names.
type csdl struct {
	XMLName      xml.Name `xml:"Edmx"`
	DataServices struct {
		Schema struct {
			Namespace   string `xml:"Namespace,attr"`
			EntityTypes []struct {
				Name  string `xml:"Name,attr"`
				Props []prop `xml:"Property"`
			} `xml:"EntityType"`
			ComplexTypes []struct {
				Name  string `xml:"Name,attr"`
				Props []prop `xml:"Property"`
			} `xml:"ComplexType"`
			Container struct {
				Sets []struct {
					Name       string `xml:"Name,attr"`
					EntityType string `xml:"EntityType,attr"`
				} `xml:"EntitySet"`
				Functions []struct {
					Name   string `xml:"Name,attr"`
					Params []prop `xml:"Parameter"`
				} `xml:"FunctionImport"`
			} `xml:"EntityContainer"`
		} `xml:"Schema"`
	} `xml:"DataServices"`
}

type prop struct {
	Name string `xml:"Name,attr"`
	Type string `xml:"Type,attr"`
}

// described reads $metadata: entity types and complex types as name → property
// → type, sets, and the functions as name → binding types.
func described(t *testing.T, s *Server) (types map[string]map[string]string, sets []string, functions map[string][]string) {
	t.Helper()
	r := call(t, s, http.MethodGet, "$metadata?$format=json", "")
	if r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), "application/xml") {
		t.Fatalf("$metadata: %d %s", r.status, r.header.Get("Content-Type"))
	}
	var doc csdl
	if err := xml.Unmarshal([]byte(r.raw), &doc); err != nil {
		t.Fatal(err)
	}
	sc := doc.DataServices.Schema
	if sc.Namespace != "StandardODATA" {
		t.Fatalf("namespace %q", sc.Namespace)
	}
	types = map[string]map[string]string{}
	add := func(name string, props []prop) {
		types[name] = map[string]string{}
		for _, p := range props {
			types[name][p.Name] = p.Type
		}
	}
	for _, e := range sc.EntityTypes {
		add(e.Name, e.Props)
	}
	for _, c := range sc.ComplexTypes {
		add(c.Name, c.Props)
	}
	for _, e := range sc.Container.Sets {
		if e.EntityType != "StandardODATA."+e.Name || types[e.Name] == nil {
			t.Fatalf("set %s of type %s", e.Name, e.EntityType)
		}
		sets = append(sets, e.Name)
	}
	functions = map[string][]string{}
	for _, f := range sc.Container.Functions {
		for _, p := range f.Params {
			if p.Name == "bindingParameter" {
				functions[f.Name] = append(functions[f.Name], p.Type)
			}
		}
	}
	return types, sets, functions
}

func TestMetadataDescribesWhatIsServed(t *testing.T) {
	types, sets, functions := described(t, start(t, Options{}))
	order := types[Orders]
	for f, edm := range map[string]string{"Ref_Key": "Edm.Guid", "DataVersion": "Edm.String", "Number": "Edm.String",
		"Date": "Edm.DateTime", "Posted": "Edm.Boolean", "DeletionMark": "Edm.Boolean", Marker: "Edm.String",
		"СуммаДокумента": "Edm.Double", "Соглашение_Key": "Edm.Guid",
		Rows: "Collection(StandardODATA.Document_ЗаказКлиента_Товары_RowType)"} {
		if order[f] != edm {
			t.Errorf("%s.%s: %q, want %q", Orders, f, order[f], edm)
		}
	}
	row := types[Orders+"_"+Rows+"_RowType"]
	if row["LineNumber"] != "Edm.Int64" || row["ПричинаОтмены_Key"] != "Edm.Guid" || row["Отменено"] != "Edm.Boolean" {
		t.Errorf("row type %v", row)
	}
	if types[Items][Article] != "Edm.String" || types[Warehouses]["Description"] != "Edm.String" || types[CancelReasons]["Code"] == "" {
		t.Errorf("catalogs: %v %v", types[Items], types[Warehouses])
	}
	if len(sets) != 11 || !slices.Contains(sets, Partners) || !slices.Contains(sets, Returns) || slices.Contains(sets, Contracts) {
		t.Errorf("sets %v: want the order, the return, the items and the eight catalogs of УТ", sets)
	}
	docs := []string{"StandardODATA." + Orders, "StandardODATA." + Returns}
	if !slices.Equal(functions["Post"], docs) || !slices.Equal(functions["Unpost"], docs) {
		t.Errorf("functions %v", functions)
	}
	ret := types[Returns]
	if ret[ReturnMarker] != "Edm.String" || ret[ReturnBasis] != "Edm.String" || ret[ReturnBasis+"_Type"] != "Edm.String" ||
		ret["Партнер_Key"] != "Edm.Guid" || types[Returns+"_"+Rows+"_RowType"]["Сумма"] != "Edm.Double" {
		t.Errorf("return document %v", ret)
	}
	if types[Stock+"_Balance"][StockBalance] != "Edm.Double" || len(functions["Balance"]) != 1 {
		t.Errorf("stock: %v %v", types[Stock+"_Balance"], functions["Balance"])
	}

	types, sets, functions = described(t, start(t, Options{Profile: "unf"}))
	if types[UNFOrders]["СостояниеЗаказа_Key"] != "Edm.Guid" || types[UNFOrders+"_"+UNFRows+"_RowType"]["Цена"] != "Edm.Double" ||
		!slices.Contains(sets, OrderStates) || functions["Post"][0] != "StandardODATA."+UNFOrders || functions["Balance"] != nil {
		t.Errorf("unf: %v %v %v", types[UNFOrders], sets, functions)
	}
}

func TestUnpublished(t *testing.T) {
	s := start(t, Options{Unpublished: []string{Orders, Returns, Partners, Stock},
		UnpublishedFields: map[string][]string{Items: {Article}, Agreements: {"Code"}}})
	types, sets, functions := described(t, s)
	if slices.Contains(sets, Orders) || slices.Contains(sets, Returns) || slices.Contains(sets, Partners) || types[Orders] != nil || len(functions) != 0 {
		t.Fatalf("unpublished sets described: %v %v", sets, functions)
	}
	if _, ok := types[Items][Article]; ok || types[Items]["Description"] == "" || types[Agreements]["Code"] != "" {
		t.Fatalf("unpublished fields described: %v %v", types[Items], types[Agreements])
	}
	for _, p := range []string{orders, url.PathEscape(Partners), url.PathEscape(Stock) + "/Balance()"} {
		if r := call(t, s, http.MethodGet, p, ""); r.status != 400 || odataCode(r) != "8" {
			t.Fatalf("%s: %d %s, want 400 code 8 as for an unknown set", p, r.status, r.raw)
		}
	}
	s.AddItem("ART-1", "Чайник")
	r := call(t, s, http.MethodGet, url.PathEscape(Items), "")
	if v := values(t, r); len(v) != 1 || v[0][Article] != nil {
		t.Fatalf("items with the article unpublished: %v", v)
	}
	if r := call(t, s, http.MethodGet, url.PathEscape(Items)+"?$filter="+esc(Article+" eq 'ART-1'"), ""); r.status != 400 || odataCode(r) != "14" {
		t.Fatalf("a filter on an unpublished field: %d %s", r.status, r.raw)
	}

	// Writes to an unpublished field are ignored, as an unknown field's.
	s = start(t, Options{UnpublishedFields: map[string][]string{Orders: {"Комментарий"}, Orders + "_" + Rows: {"Цена"}}})
	r = call(t, s, http.MethodPost, orders, order1)
	row := r.body[Rows].([]any)[0].(map[string]any)
	if _, ok := r.body["Комментарий"]; r.status != 201 || ok || row["Цена"] != nil || row["Сумма"] != 20.0 {
		t.Fatalf("create with unpublished fields: %d %v", r.status, r.body)
	}
	if d := s.Orders()[0]; d["Комментарий"] != nil {
		t.Fatalf("1C holds the unpublished comment: %v", d)
	}
	types, _, _ = described(t, s)
	if _, ok := types[Orders+"_"+Rows+"_RowType"]["Цена"]; ok || types[Orders]["Комментарий"] != "" {
		t.Fatal("unpublished fields of the order described")
	}
}
