package odata

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Metadata is what `ordersync onec check` needs of a publication's $metadata (a
// CSDL document, XML only, many megabytes on a real base): the entity sets
// published, the properties of each entity and row type, and the types whose Post
// action is published. ReadMetadata reads it as a stream, keeping only these.
type Metadata struct {
	Sets       map[string]bool            // entity sets: "Document_ЗаказКлиента"
	Properties map[string]map[string]bool // entity or row type → its properties
	Posts      map[string]bool            // the types Post binds to
	// MaxLength is a string property's length, by "Type.Property"; absent for an
	// unlimited string or another type.
	MaxLength map[string]int
}

// ReadMetadata reads a $metadata document from r, token by token.
func ReadMetadata(r io.Reader) (Metadata, error) {
	m := Metadata{Sets: map[string]bool{}, Properties: map[string]map[string]bool{}, Posts: map[string]bool{}, MaxLength: map[string]int{}}
	dec := xml.NewDecoder(r)
	var (
		typ      string // the EntityType or ComplexType being read
		function string // the FunctionImport being read
		seen     bool   // an Edmx root
	)
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil && !seen {
			return m, fmt.Errorf("$metadata: not a CSDL document (%w): is onec.base_url the …/odata/standard.odata address?", err)
		}
		if err != nil {
			return m, fmt.Errorf("$metadata: %w", err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			attr := func(name string) string {
				for _, a := range t.Attr {
					if a.Name.Local == name {
						return a.Value
					}
				}
				return ""
			}
			switch t.Name.Local {
			case "Edmx":
				seen = true
			case "EntityType", "ComplexType":
				typ = attr("Name")
				if m.Properties[typ] == nil {
					m.Properties[typ] = map[string]bool{}
				}
			case "Property", "NavigationProperty":
				if typ != "" {
					m.Properties[typ][attr("Name")] = true
					if n, err := strconv.Atoi(attr("MaxLength")); err == nil && n > 0 {
						m.MaxLength[typ+"."+attr("Name")] = n
					}
				}
			case "EntitySet":
				m.Sets[attr("Name")] = true
			case "FunctionImport":
				function = attr("Name")
			case "Parameter":
				if function == "Post" && attr("Name") == "bindingParameter" {
					m.Posts[typeName(attr("Type"))] = true
				}
			}
		case xml.EndElement:
			switch t.Name.Local {
			case "EntityType", "ComplexType":
				typ = ""
			case "FunctionImport":
				function = ""
			}
		}
	}
	if !seen {
		return m, errors.New("$metadata: not a CSDL document (no Edmx element): is onec.base_url the …/odata/standard.odata address?")
	}
	return m, nil
}

// typeName is a type without its namespace: StandardODATA.Document_X is
// Document_X.
func typeName(t string) string {
	if i := strings.LastIndexByte(t, '.'); i >= 0 {
		return t[i+1:]
	}
	return t
}

// Missing is one thing the profile needs that the publication does not have.
type Missing struct {
	Set   string // the entity set (or row type) it belongs to
	Field string // "" when the whole set is missing
	Why   string // what ordersync needs it for
	// Returns: only the customer returns need it; the orders are written without
	// it (Report.Problems does not count it).
	Returns bool
}

func (m Missing) String() string {
	if m.Field == "" {
		return fmt.Sprintf("%s is not published (%s)", m.Set, m.Why)
	}
	return fmt.Sprintf("%s.%s is not published (%s)", m.Set, m.Field, m.Why)
}

// Needs lists what the profile needs of the publication that m lacks: the order
// document with its marker, references, total and tabular part (with the rows'
// item, quantity, price and amount), its Post action, and the item catalog with
// the field items are matched by (itemsBy: Артикул, Code, …).
func (p Profile) Needs(m Metadata, itemsBy string) []Missing {
	out := p.documentNeeds(m, "order", "the orders are created in it")
	const items = "Catalog_Номенклатура"
	switch {
	case itemsBy == ByBarcode && !m.Sets[p.Barcodes.Register]:
		out = append(out, Missing{Set: p.Barcodes.Register, Why: "onec.odata.items_by Штрихкод: the SKUs are matched to items by the barcodes in it"})
	case itemsBy == ByBarcode:
	case !m.Sets[items]:
		out = append(out, Missing{Set: items, Why: "the order's SKUs are matched to items in it"})
	case itemsBy != "" && !m.Properties[items][itemsBy]:
		out = append(out, Missing{Set: items, Field: itemsBy, Why: "onec.odata.items_by: the field SKUs are matched by"})
	}
	return out
}

// ReturnNeeds lists what the profile's customer returns need of the publication
// that m lacks: the return document as Needs reads the order's, with the field of
// its base document. Each is marked Returns: the orders do not need it. None when
// the profile carries no returns.
func (p Profile) ReturnNeeds(m Metadata) []Missing {
	if p.Return == nil {
		return nil
	}
	out := p.Return.documentNeeds(m, "return", "customer returns are created in it; the orders do not need it")
	for i := range out {
		out[i].Returns = true
	}
	return out
}

// documentNeeds lists what the profile's document (what: "order", "return")
// needs that m lacks; created says what the set is for.
func (p Profile) documentNeeds(m Metadata, what, created string) []Missing {
	var out []Missing
	if !m.Sets[p.Document] {
		return append(out, Missing{Set: p.Document, Why: created})
	}
	props := m.Properties[p.Document]
	need := func(field, why string) {
		if field != "" && !props[field] {
			out = append(out, Missing{Set: p.Document, Field: field, Why: why})
		}
	}
	need(p.Marker, "the marker "+article(what)+" "+what+" is found by before every create")
	need("Date", "the "+what+"'s date")
	for _, f := range []string{p.Organization, p.Partner, p.Counterparty, p.Agreement, p.Currency, p.Warehouse} {
		if f != "" {
			need(f+"_Key", "a reference the "+what+" is written with")
		}
	}
	need(p.Total, "the total compared on read-back")
	if p.Basis != "" {
		need(p.Basis, "the document the "+what+" is based on")
		need(p.Basis+"_Type", "the type of the document the "+what+" is based on")
	}
	need(p.Rows, "the "+what+"'s lines")
	if props[p.Rows] {
		rowType := p.Document + "_" + p.Rows + "_RowType"
		rows := m.Properties[rowType]
		for _, f := range []string{p.Item + "_Key", p.Quantity, p.Price, p.Amount} {
			if !rows[f] {
				out = append(out, Missing{Set: rowType, Field: f, Why: "a line's item, quantity, price or amount"})
			}
		}
	}
	if !m.Posts[p.Document] {
		out = append(out, Missing{Set: p.Document, Field: "Post", Why: "the " + what + " is posted after it is created"})
	}
	return out
}

// article is "an" or "a" for what.
func article(what string) string {
	if what == "order" {
		return "an"
	}
	return "a"
}
