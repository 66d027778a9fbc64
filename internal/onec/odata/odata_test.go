package odata

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/shopspring/decimal"

	"github.com/ordersync/ordersync/internal/onec"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// order is a two-line Kaspi order with the base's and the source's references.
func order(t *testing.T) Document {
	t.Helper()
	d := func(s string) decimal.Decimal { return decimal.RequireFromString(s) }
	return Document{
		Ref:    RefKey("kaspi:order:512344101:create"),
		Date:   "2026-12-01T10:00:00",
		Marker: "kaspi:512344101",
		Refs: Refs{Organization: "6f1c2a10-0000-4000-8000-000000000001", Partner: "6f1c2a10-0000-4000-8000-000000000002",
			Counterparty: "6f1c2a10-0000-4000-8000-000000000003", Agreement: "6f1c2a10-0000-4000-8000-000000000004",
			Currency: "6f1c2a10-0000-4000-8000-000000000005", Warehouse: "6f1c2a10-0000-4000-8000-000000000006"},
		Rows: []Row{
			{Item: "6f1c2a10-0000-4000-8000-0000000000a1", Quantity: d("2"), Price: d("4990.50"), Amount: d("9981.00")},
			{Item: "6f1c2a10-0000-4000-8000-0000000000a2", Quantity: d("1.250"), Price: d("100"), Amount: d("125")},
		},
		Total:   d("10106.00"),
		Comment: "Kaspi order 512344101 'Иванов'",
	}
}

// golden compares got with testdata/name, indented, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	var b bytes.Buffer
	if err := json.Indent(&b, got, "", "  "); err != nil {
		t.Fatalf("%s: not JSON: %v: %s", name, err, got)
	}
	b.WriteByte('\n')
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b.Bytes(), want) {
		t.Fatalf("%s differs:\n%s\nwant\n%s", name, b.Bytes(), want)
	}
}

// The create body of each profile: header references as <name>_Key, the marker,
// exact decimals as JSON numbers, and the rows inline numbered from 1 as strings.
func TestCreateBodyOfEachProfile(t *testing.T) {
	for _, name := range []string{"ut11", "unf"} {
		t.Run(name, func(t *testing.T) {
			p, err := ProfileNamed(name, "")
			if err != nil {
				t.Fatal(err)
			}
			b, err := p.Body(order(t))
			if err != nil {
				t.Fatal(err)
			}
			golden(t, "create-"+name+".json", b)
			// Numbers stay exact: 4990.50 is not 4990.5000000001, 1.250 not 1.25.
			if !bytes.Contains(b, []byte(`4990.5`)) || bytes.Contains(b, []byte(`"4990.5"`)) {
				t.Fatalf("price not written as an exact JSON number: %s", b)
			}
			var m map[string]any
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatal(err)
			}
			rows, _ := m[p.Rows].([]any)
			if len(rows) != 2 || rows[0].(map[string]any)["LineNumber"] != "1" || rows[1].(map[string]any)["LineNumber"] != "2" {
				t.Fatalf("rows %v: want two numbered 1 and 2", m[p.Rows])
			}
		})
	}
}

func TestURLs(t *testing.T) {
	u := NewURLs("http://1c.local/trade/odata/standard.odata/")
	p := Profiles["ut11"]
	find, err := u.FindByMarker(p, "site:O'Brien 7")
	if err != nil {
		t.Fatal(err)
	}
	// The Cyrillic names percent-encoded, the quote doubled, spaces as %20, never '+'.
	want := "http://1c.local/trade/odata/standard.odata/Document_%D0%97%D0%B0%D0%BA%D0%B0%D0%B7%D0%9A%D0%BB%D0%B8%D0%B5%D0%BD%D1%82%D0%B0" +
		"?$format=json&$filter=%D0%9D%D0%BE%D0%BC%D0%B5%D1%80%D0%9F%D0%BE%D0%94%D0%B0%D0%BD%D0%BD%D1%8B%D0%BC%D0%9A%D0%BB%D0%B8%D0%B5%D0%BD%D1%82%D0%B0" +
		"%20eq%20%27site%3AO%27%27Brien%207%27&$orderby=Date"
	if find != want {
		t.Fatalf("find URL\n%s\nwant\n%s", find, want)
	}
	ref := "1b4e28ba-2fa1-11d2-883f-0016d3cca427"
	post := u.Post(p.Document, ref)
	if !strings.HasSuffix(post, "(guid'"+ref+"')/Post?PostingModeOperational=false") {
		t.Fatalf("post URL %s", post)
	}
	// A filter that would pass IIS's limit is refused here, naming the set.
	_, err = u.List(p.Document, Query{Filter: p.Marker + " eq " + Literal(strings.Repeat("x", MaxQuery))})
	if qe, ok := err.(*QueryError); !ok || qe.Bytes <= MaxQuery || !strings.Contains(err.Error(), p.Document) {
		t.Fatalf("a long filter: %v, want a QueryError", err)
	}
}

func TestRefKeyIsStablePerKey(t *testing.T) {
	a, b := RefKey("kaspi:order:1:create"), RefKey("kaspi:order:2:create")
	if a != RefKey("kaspi:order:1:create") || a == b || len(a) != 36 || a[14] != '5' {
		t.Fatalf("RefKey: %s, %s", a, b)
	}
}

// 1C's JSON and XML errors, and a web server's page, as the engine classes them.
func TestParseError(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		body   string
		write  bool
		class  onec.Class
		code   string
		msg    string
		exists bool
	}{
		{"key exists", 400, `{"odata.error":{"code":"15","message":{"lang":"ru","value":"Сущность с таким ключом уже существует"}}}`,
			true, onec.Permanent, "15", "Сущность с таким ключом уже существует", true},
		{"rights", 400, `{"odata.error":{"code":20,"message":{"lang":"ru","value":"Ошибка прав доступа"}}}`,
			false, onec.Auth, "20", "Ошибка прав доступа", false},
		{"not published", 400, `{"odata.error":{"code":"8","message":{"lang":"ru","value":"Тип сущности не найден"}}}`,
			false, onec.Configuration, "8", "Тип сущности не найден", false},
		{"not found, XML", 404, `<m:error xmlns:m="http://schemas.microsoft.com/ado/2007/08/dataservices/metadata"><m:code>9</m:code><m:message>Экземпляр сущности не найден</m:message></m:error>`,
			false, onec.Permanent, "9", "Экземпляр сущности не найден", false},
		{"posting handler", 500, `{"odata.error":{"code":"-1","message":{"lang":"ru","value":"Не удалось провести"}}}`,
			true, onec.Unknown, "-1", "Не удалось провести", false},
		{"long query", 404, "<!DOCTYPE html>\n<html><head><title>404 - File or directory not found.</title></head><body>…</body></html>",
			false, onec.Configuration, "", "a web page, not 1C's answer: 404 - File or directory not found.", false},
		{"gateway on a read", 502, "Bad Gateway", false, onec.Transient, "", "Bad Gateway", false},
		{"unauthorized", 401, "", false, onec.Auth, "", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := ParseError("create", "/Document_ЗаказКлиента", tc.status, []byte(tc.body), tc.write)
			if e.Class != tc.class || e.Code != tc.code || e.Message != tc.msg || KeyExists(e) != tc.exists || onec.ClassOf(e) != tc.class {
				t.Fatalf("got class %s code %q message %q exists %v; want %s %q %q %v",
					e.Class, e.Code, e.Message, KeyExists(e), tc.class, tc.code, tc.msg, tc.exists)
			}
		})
	}
}

// A web server's answer with a NUL and invalid UTF-8 is quoted safe to store: the
// journal's write of the error must not fail on it.
func TestParseErrorQuotesSafely(t *testing.T) {
	e := ParseError("create", "/Document_ЗаказКлиента", 502, []byte("Bad\x00 gate\xffway"), true)
	if !utf8.ValidString(e.Message) || strings.ContainsRune(e.Message, 0) || !strings.Contains(e.Message, "Bad") {
		t.Fatalf("message %q: want valid UTF-8 without NUL", e.Message)
	}
}

// A document read back as 1C answered it: the same order, with a truncated
// comment, an ignored counterparty and a row's quantity stored otherwise.
func TestReadBackComparison(t *testing.T) {
	p := Profiles["ut11"]
	want := order(t)
	b, err := os.ReadFile(filepath.Join("testdata", "readback-ut11.json"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := p.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	if got.Ref != want.Ref || got.Number != "КА-000123" || !got.Posted || got.Deleted {
		t.Fatalf("parsed %+v", got)
	}
	var fields []string
	for _, d := range p.Compare(want, got) {
		fields = append(fields, d.Field)
	}
	if strings.Join(fields, " ") != "Контрагент_Key Комментарий Товары[2].Количество" {
		t.Fatalf("differences %q, want the counterparty, the comment and row 2's quantity", fields)
	}
	// What ordersync wrote, read back unchanged, differs in nothing.
	body, err := p.Body(want)
	if err != nil {
		t.Fatal(err)
	}
	same, err := p.Parse(body)
	if err != nil {
		t.Fatal(err)
	}
	if d := p.Compare(want, same); len(d) != 0 {
		t.Fatalf("a document equal to what was written differs: %v", d)
	}
}

// A publication's $metadata, read as a stream, against what each profile needs:
// the УТ sample lacks the rows' Сумма and the catalog's Артикул and publishes the
// return document whole; УНФ's document is not published at all.
func TestNeedsOfTheMetadata(t *testing.T) {
	f, err := os.Open(filepath.Join("testdata", "metadata-ut11.xml"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := ReadMetadata(f)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, miss := range Profiles["ut11"].Needs(m, "Артикул") {
		got = append(got, miss.String())
	}
	want := []string{
		"Document_ЗаказКлиента_Товары_RowType.Сумма is not published (a line's item, quantity, price or amount)",
		"Catalog_Номенклатура.Артикул is not published (onec.odata.items_by: the field SKUs are matched by)",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("ut11 needs\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if n := Profiles["ut11"].Needs(m, "Code"); len(n) != 1 {
		t.Fatalf("items by Code: %v, want only the rows' Сумма", n)
	}
	if r := Profiles["ut11"].ReturnNeeds(m); len(r) != 0 {
		t.Fatalf("ut11's returns need %v of a sample that publishes the return document whole", r)
	}
	if Profiles["unf"].ReturnNeeds(m) != nil {
		t.Fatal("unf has no return document to need")
	}
	delete(m.Posts, "Document_ВозвратТоваровОтКлиента")
	delete(m.Properties["Document_ВозвратТоваровОтКлиента"], "ДокументРеализации")
	r := Profiles["ut11"].ReturnNeeds(m)
	if len(r) != 2 || !r[0].Returns || r[0].Field != "ДокументРеализации" || r[1].Field != "Post" {
		t.Fatalf("returns need %v, want the base document's field and Post", r)
	}
	delete(m.Sets, "Document_ВозвратТоваровОтКлиента")
	if r := Profiles["ut11"].ReturnNeeds(m); len(r) != 1 || r[0].Field != "" || !strings.Contains(r[0].String(), "customer returns") {
		t.Fatalf("returns need %v, want the return document", r)
	}
	unf := Profiles["unf"].Needs(m, "Code")
	if len(unf) != 1 || unf[0].Set != "Document_ЗаказПокупателя" || unf[0].Field != "" {
		t.Fatalf("unf needs %v, want its order document", unf)
	}
	for _, page := range []string{"<html><title>Login</title></html>", "<!DOCTYPE html><html><body><br></body></html>"} {
		if _, err := ReadMetadata(strings.NewReader(page)); err == nil || !strings.Contains(err.Error(), "onec.base_url") {
			t.Fatalf("a web page read as metadata: %v", err)
		}
	}
}
