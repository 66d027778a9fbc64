package odatasim

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// descriptions lists a listing's Description fields in order.
func descriptions(t *testing.T, r reply) string {
	t.Helper()
	var out []string
	for _, v := range values(t, r) {
		out = append(out, v["Description"].(string))
	}
	return strings.Join(out, ",")
}

func TestReferenceCatalogs(t *testing.T) {
	for _, profile := range []string{"ut11", "unf"} {
		s := start(t, Options{Profile: profile})
		for _, set := range append(s.Catalogs(), Items) {
			ref := s.AddRef(set, "Основной")
			r := call(t, s, http.MethodGet, url.PathEscape(set)+"(guid'"+ref+"')?$format=json", "")
			if r.status != 200 || r.body["Ref_Key"] != ref || r.body["Description"] != "Основной" ||
				r.body["Code"] != "000000001" || r.body["DeletionMark"] != false ||
				r.body["odata.metadata"] != s.URL()+"/$metadata#"+set+"/@Element" {
				t.Fatalf("%s %s: %d %v", profile, set, r.status, r.body)
			}
			if r := call(t, s, http.MethodGet, url.PathEscape(set)+"(guid'"+zeroRef+"')", ""); r.status != 404 || odataCode(r) != "9" {
				t.Fatalf("%s %s missing: %d %s, want 404 code 9", profile, set, r.status, r.raw)
			}
			if r := call(t, s, http.MethodGet, url.PathEscape(set)+"(guid'nope')", ""); r.status != 400 {
				t.Fatalf("%s %s with a key not a GUID: %d %s, want 400", profile, set, r.status, r.raw)
			}
		}
	}
	if r := call(t, start(t, Options{Profile: "unf"}), http.MethodGet, url.PathEscape(Agreements), ""); r.status != 400 || odataCode(r) != "8" {
		t.Fatalf("УТ's agreements in УНФ: %d %s, want 400 code 8", r.status, r.raw)
	}
}

// Strings order as text, byte by byte (a base orders by its collation): Latin
// before Cyrillic.
func TestListingFilterSelectOrderAndPages(t *testing.T) {
	s := start(t, Options{})
	refs := map[string]string{}
	for _, name := range []string{"ООО Бета", "ООО Альфа", "ИП Гамма", "ООО O'Brien"} {
		refs[name] = s.AddRef(Counterparties, name)
	}
	set := url.PathEscape(Counterparties) + "?$format=json"
	list := func(opts string) reply { return call(t, s, http.MethodGet, set+opts, "") }
	for opts, want := range map[string]string{
		"":                                     "ООО Бета,ООО Альфа,ИП Гамма,ООО O'Brien",
		"&$orderby=Description":                "ИП Гамма,ООО O'Brien,ООО Альфа,ООО Бета",
		"&$orderby=" + esc("Description desc"): "ООО Бета,ООО Альфа,ООО O'Brien,ИП Гамма",
		"&$orderby=Description&$top=2&$skip=1": "ООО O'Brien,ООО Альфа",
		"&$top=1&$skip=10":                     "",
		"&$filter=" + esc("substringof('ооо', Description)"):                        "ООО Бета,ООО Альфа,ООО O'Brien",
		"&$filter=" + esc("substringof('альф', Description) eq false"):              "ООО Бета,ИП Гамма,ООО O'Brien",
		"&$filter=" + esc("Description eq 'ООО O''Brien'"):                          "ООО O'Brien",
		"&$filter=" + esc("Description ne 'ООО Бета' and Description ge 'ООО'"):     "ООО Альфа,ООО O'Brien",
		"&$filter=" + esc("Description lt 'ООО' and DeletionMark eq false"):         "ИП Гамма",
		"&$filter=" + esc("Ref_Key eq guid'"+strings.ToUpper(refs["ИП Гамма"])+"'"): "ИП Гамма",
		"&$filter=" + esc("Code gt '000000002' and Code le '000000003'"):            "ИП Гамма",
	} {
		if got := descriptions(t, list(opts)); got != want {
			t.Errorf("%s: %q, want %q", opts, got, want)
		}
	}
	r := list("&$select=" + esc("Ref_Key, Description") + "&$orderby=Ref_Key&$top=1")
	if v := values(t, r); len(v) != 1 || len(v[0]) != 2 || v[0]["Code"] != nil {
		t.Fatalf("$select: %v, want Ref_Key and Description only", v)
	}
	r = list("&$inlinecount=allpages&$top=1&$filter=" + esc("substringof('ООО', Description)"))
	if r.body["odata.count"] != "3" || len(values(t, r)) != 3 {
		t.Fatalf("$inlinecount: %s; want a count of 3 as a string, $top ignored", r.raw)
	}
	for opts, code := range map[string]string{
		"&$filter=" + esc("Description eq 'a' or Description eq 'b'"): "14",
		"&$filter=" + esc("not (Description eq 'a')"):                 "14",
		"&$filter=" + esc("tolower(Description) eq 'a'"):              "14",
		"&$filter=" + esc("Ref_Key in (guid'"+zeroRef+"')"):           "14",
		"&$filter=" + esc("Description eq 1"):                         "14",
		"&$filter=" + esc("Ref_Key eq '"+zeroRef+"'"):                 "14",
		"&$filter=" + esc("Нет eq 'a'"):                               "14",
		"&$filter=" + esc("Description eq 'a"):                        "14",
		"&$orderby=" + esc("Description sideways"):                    "14",
		"&$orderby=Нет":                                               "14",
		"&$top=-1":                                                    "14",
		"&$select=НетТакого":                                          "6",
		"&$expand=Контрагент":                                         "0",
	} {
		if r := list(opts); r.status != 400 || odataCode(r) != code {
			t.Errorf("%s: %d %s, want 400 code %s", opts, r.status, r.raw, code)
		}
	}
}

func TestOrdersByDateAndSelectOfRows(t *testing.T) {
	s := start(t, Options{})
	for i, date := range []string{"2026-12-02T09:00:00", "2026-11-30T23:59:59", "2026-12-01T00:00:00"} {
		body := strings.Replace(order1, "2026-12-01T10:00:00", date, 1)
		body = strings.Replace(body, "kaspi:1", "kaspi:"+string(rune('a'+i)), 1)
		if r := call(t, s, http.MethodPost, orders, body); r.status != 201 {
			t.Fatal(r.raw)
		}
	}
	marks := func(r reply) string {
		var out []string
		for _, v := range values(t, r) {
			out = append(out, v[Marker].(string))
		}
		return strings.Join(out, ",")
	}
	filter := "Date ge datetime'2026-12-01T00:00:00' and Date lt datetime'2026-12-03T00:00:00'"
	r := call(t, s, http.MethodGet, orders+"?$format=json&$filter="+esc(filter)+"&$orderby="+esc("Date desc"), "")
	if got := marks(r); got != "kaspi:a,kaspi:c" {
		t.Fatalf("orders of December, latest first: %s", got)
	}
	if r := call(t, s, http.MethodGet, orders+"?$filter="+esc("Date ge datetime'2026-12-01'"), ""); r.status != 400 || odataCode(r) != "14" {
		t.Fatalf("a date without its time: %d %s, want 400 code 14", r.status, r.raw)
	}
	r = call(t, s, http.MethodGet, orders+"?$select="+esc(Marker+",Товары/Цена")+"&$top=1", "")
	v := values(t, r)
	row := v[0][Rows].([]any)[0].(map[string]any)
	if len(v[0]) != 2 || len(row) != 2 || row["Цена"] != 10.0 || row["LineNumber"] != "1" {
		t.Fatalf("$select of a row field: %v", v[0])
	}
	r = call(t, s, http.MethodGet, orders+"?$select="+esc("**")+"&$top=1", "")
	if v := values(t, r); v[0][Rows] != nil || v[0]["Number"] == nil {
		t.Fatalf("$select=**: %v, want every field but the tabular part", v[0])
	}
}

func TestJSONFormats(t *testing.T) {
	s := start(t, Options{})
	ref := s.AddRef(Currencies, "KZT")
	one := url.PathEscape(Currencies) + "(guid'" + ref + "')"
	for _, f := range []string{"json", url.QueryEscape("application/json;odata=nometadata"),
		"application/json;odata=nometadata", url.QueryEscape("application/json;odata=minimalmetadata")} {
		bare := strings.Contains(f, "nometadata")
		r := call(t, s, http.MethodGet, one+"?$format="+f, "")
		if r.status != 200 || r.body["Description"] != "KZT" || (r.body["odata.metadata"] == nil) != bare {
			t.Fatalf("$format=%s: %d %s", f, r.status, r.raw)
		}
		r = call(t, s, http.MethodGet, url.PathEscape(Currencies)+"?$format="+f, "")
		if len(values(t, r)) != 1 || (r.body["odata.metadata"] == nil) != bare {
			t.Fatalf("listing with $format=%s: %s", f, r.raw)
		}
	}
	if r := call(t, s, http.MethodGet, one+"?$format=atom", ""); r.status != 400 || odataCode(r) != "3" {
		t.Fatalf("$format=atom: %d %s, want 400 code 3: the simulator serves JSON only", r.status, r.raw)
	}
	if r := call(t, s, http.MethodGet, one, ""); r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), "application/json") {
		t.Fatalf("no $format: %d %s, want JSON all the same", r.status, r.header.Get("Content-Type"))
	}
}
