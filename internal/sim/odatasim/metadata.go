package odatasim

import (
	"encoding/xml"
	"net/http"
	"slices"
)

// The CSDL of OData v3 (1C manual §17.4.7 points to it), as the elements of
// $metadata: written with their prefixes, as 1C writes them.
type (
	xEdmx struct {
		XMLName      xml.Name      `xml:"edmx:Edmx"`
		Edmx         string        `xml:"xmlns:edmx,attr"`
		Version      string        `xml:"Version,attr"`
		DataServices xDataServices `xml:"edmx:DataServices"`
	}
	xDataServices struct {
		M       string  `xml:"xmlns:m,attr"`
		Version string  `xml:"m:DataServiceVersion,attr"`
		Schema  xSchema `xml:"Schema"`
	}
	xSchema struct {
		Xmlns        string         `xml:"xmlns,attr"`
		Namespace    string         `xml:"Namespace,attr"`
		EntityTypes  []xEntityType  `xml:"EntityType"`
		ComplexTypes []xComplexType `xml:"ComplexType"`
		Container    xContainer     `xml:"EntityContainer"`
	}
	xEntityType struct {
		Name  string      `xml:"Name,attr"`
		Key   []xRef      `xml:"Key>PropertyRef"`
		Props []xProperty `xml:"Property"`
	}
	xComplexType struct {
		Name  string      `xml:"Name,attr"`
		Props []xProperty `xml:"Property"`
	}
	xRef struct {
		Name string `xml:"Name,attr"`
	}
	xProperty struct {
		Name     string `xml:"Name,attr"`
		Type     string `xml:"Type,attr"`
		Nullable string `xml:"Nullable,attr,omitempty"`
	}
	xContainer struct {
		Name      string       `xml:"Name,attr"`
		Default   string       `xml:"m:IsDefaultEntityContainer,attr"`
		Sets      []xEntitySet `xml:"EntitySet"`
		Functions []xFunction  `xml:"FunctionImport"`
	}
	xEntitySet struct {
		Name       string `xml:"Name,attr"`
		EntityType string `xml:"EntityType,attr"`
	}
	xFunction struct {
		Name            string      `xml:"Name,attr"`
		ReturnType      string      `xml:"ReturnType,attr,omitempty"`
		IsBindable      string      `xml:"IsBindable,attr"`
		IsSideEffecting string      `xml:"IsSideEffecting,attr"`
		Params          []xProperty `xml:"Parameter"`
	}
)

const namespace = "StandardODATA"

func properties(fields []field) []xProperty {
	out := make([]xProperty, 0, len(fields))
	for _, f := range fields {
		p := xProperty{Name: f.name, Type: f.edm}
		if f.name == "Ref_Key" || f.name == "LineNumber" {
			p.Nullable = "false"
		}
		out = append(out, p)
	}
	return out
}

// describe is the $metadata of what the simulator publishes.
func (s *Server) describe() xEdmx {
	sc := xSchema{Xmlns: "http://schemas.microsoft.com/ado/2009/11/edm", Namespace: namespace,
		Container: xContainer{Name: namespace, Default: "true"}}
	for _, name := range s.names {
		es := s.sets[name]
		if !es.published {
			continue
		}
		t := xEntityType{Name: name, Key: []xRef{{"Ref_Key"}}, Props: properties(es.fields)}
		if es.rows != "" {
			row := name + "_" + es.rows + "_RowType"
			t.Props = append(t.Props, xProperty{Name: es.rows, Type: "Collection(" + namespace + "." + row + ")", Nullable: "false"})
			sc.ComplexTypes = append(sc.ComplexTypes, xComplexType{Name: row,
				Props: properties(append([]field{{"LineNumber", edmInt64}}, es.rowFields...))})
		}
		sc.EntityTypes = append(sc.EntityTypes, t)
		sc.Container.Sets = append(sc.Container.Sets, xEntitySet{Name: name, EntityType: namespace + "." + name})
		if es.document {
			binding := xProperty{Name: "bindingParameter", Type: namespace + "." + name}
			sc.Container.Functions = append(sc.Container.Functions,
				xFunction{Name: "Post", IsBindable: "true", IsSideEffecting: "true",
					Params: []xProperty{binding, {Name: "PostingModeOperational", Type: edmBoolean}}},
				xFunction{Name: "Unpost", IsBindable: "true", IsSideEffecting: "true", Params: []xProperty{binding}})
		}
	}
	if reg := s.prof.register; reg != "" && !slices.Contains(s.opts.Unpublished, reg) {
		// The register's records are not served, only its Balance; their type
		// is what the function binds to.
		record, balance := reg+"_RecordType", reg+"_Balance"
		sc.EntityTypes = append(sc.EntityTypes, xEntityType{Name: record,
			Key: []xRef{{"Recorder_Key"}, {"LineNumber"}}, Props: properties(stockRecord)})
		sc.ComplexTypes = append(sc.ComplexTypes, xComplexType{Name: balance, Props: properties(stockFields)})
		sc.Container.Functions = append(sc.Container.Functions, xFunction{Name: "Balance",
			ReturnType: "Collection(" + namespace + "." + balance + ")", IsBindable: "true", IsSideEffecting: "false",
			Params: []xProperty{{Name: "bindingParameter", Type: namespace + "." + record},
				{Name: "Condition", Type: edmString}, {Name: "Period", Type: edmDateTime}, {Name: "Dimensions", Type: edmString}}})
	}
	return xEdmx{Edmx: "http://schemas.microsoft.com/ado/2007/06/edmx", Version: "1.0",
		DataServices: xDataServices{M: "http://schemas.microsoft.com/ado/2007/08/dataservices/metadata",
			Version: "3.0", Schema: sc}}
}

// metadata answers GET …/$metadata: XML whatever the $format, as 1C has no JSON
// $metadata.
func (s *Server) metadata(c *request) {
	if c.r.Method != http.MethodGet {
		c.fail(&apiError{http.StatusBadRequest, 19, "Использованный HTTP-метод запрещен в данном контексте"})
		return
	}
	if s.fault(c, "metadata", "") {
		return
	}
	b, err := xml.MarshalIndent(s.describe(), "", " ")
	if err != nil {
		c.fail(&apiError{http.StatusInternalServerError, -1, err.Error()})
		return
	}
	c.w.Header().Set("Content-Type", "application/xml;charset=utf-8")
	c.w.Header().Set("DataServiceVersion", "3.0")
	_, _ = c.w.Write(append([]byte(xml.Header), b...))
}
