package order

import (
	"strings"
	"testing"

	"github.com/shopspring/decimal"
)

const sample = `{"source": "site", "external_id": "A-1001", "number": "A-1001",
 "created_at": "2026-09-16T10:00:00+05:00",
 "customer": {"name": "Иван Петров", "phone": "+77011234567", "email": "ivan@example.kz"},
 "warehouse": "WH1", "currency": "KZT",
 "lines": [{"sku": "SKU-8812", "name": "Чайник", "quantity": 2, "price": 1500.00}],
 "total": 3000.00, "comment": ""}`

func mustParse(t *testing.T, s string) Order {
	t.Helper()
	o, err := Parse([]byte(s))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return o
}

func TestParseSampleAndKeys(t *testing.T) {
	t.Parallel()
	o := mustParse(t, sample)
	if got, want := o.CreateKey(), "site:order:A-1001:create"; got != want {
		t.Fatalf("CreateKey = %q, want %q", got, want)
	}
	if got, want := o.OneCExternalID(), "site:A-1001"; got != want {
		t.Fatalf("OneCExternalID = %q, want %q", got, want)
	}
	if got, want := o.LinesTotal().String(), "3000"; got != want {
		t.Fatalf("LinesTotal = %s, want %s", got, want)
	}
	if got, want := Key("kaspi", "order", "512344101", "create"), "kaspi:order:512344101:create"; got != want {
		t.Fatalf("Key = %q, want %q", got, want)
	}
}

func TestParseKeepsDecimalsExact(t *testing.T) {
	t.Parallel()
	o := mustParse(t, strings.Replace(strings.Replace(sample, `"quantity": 2, "price": 1500.00`,
		`"quantity": 0.1, "price": 12345678901234567890.123456789`, 1), `"total": 3000.00,`, `"total": 1234567890123456789.0123456789,`, 1))
	want := decimal.RequireFromString("1234567890123456789.0123456789")
	if !o.LinesTotal().Equal(want) {
		t.Fatalf("LinesTotal = %s, want %s", o.LinesTotal(), want)
	}
	// 0.1 + 0.2 must be exactly 0.3: a float would make the total check fail.
	o2 := mustParse(t, `{"source":"site","external_id":"x","created_at":"2026-09-16T10:00:00Z","currency":"KZT",
		"lines":[{"sku":"a","quantity":1,"price":0.1},{"sku":"b","quantity":1,"price":0.2}],"total":0.3}`)
	if !o2.LinesTotal().Equal(decimal.RequireFromString("0.3")) {
		t.Fatalf("0.1+0.2 = %s", o2.LinesTotal())
	}
}

func TestValidateNamesTheField(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, from, to, field string
	}{
		{"negative quantity", `"quantity": 2`, `"quantity": -2`, "lines[0].quantity"},
		{"zero quantity", `"quantity": 2`, `"quantity": 0`, "lines[0].quantity"},
		{"negative price", `"price": 1500.00`, `"price": -1`, "lines[0].price"},
		{"unknown currency", `"KZT"`, `"KZZ"`, "currency"},
		{"missing currency", `"currency": "KZT",`, ``, "currency"},
		{"bad total", `"total": 3000.00`, `"total": 3000.01`, "total"},
		{"bad source", `"source": "site"`, `"source": "Site!"`, "source"},
		{"missing external id", `"external_id": "A-1001",`, ``, "external_id"},
		{"long external id", `"external_id": "A-1001"`, `"external_id": "` + strings.Repeat("x", 65) + `"`, "external_id"},
		{"control char in id", `"external_id": "A-1001"`, `"external_id": "A\u00071"`, "external_id"},
		{"no lines", `[{"sku": "SKU-8812", "name": "Чайник", "quantity": 2, "price": 1500.00}]`, `[]`, "lines"},
		{"missing sku", `"sku": "SKU-8812", `, ``, "lines[0].sku"},
		{"missing created_at", `"created_at": "2026-09-16T10:00:00+05:00",`, ``, "created_at"},
		{"bad created_at", `"2026-09-16T10:00:00+05:00"`, `"16.09.2026"`, "created_at"},
		{"quantity as text", `"quantity": 2`, `"quantity": "two"`, "lines[0].quantity"},
		{"total as text", `"total": 3000.00`, `"total": "lots"`, "total"},
		{"unknown field", `"comment": ""`, `"coment": ""`, "coment"},
		{"wrong type", `"warehouse": "WH1"`, `"warehouse": 1`, "warehouse"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := strings.Replace(sample, tc.from, tc.to, 1)
			if in == sample {
				t.Fatalf("test case did not change the sample")
			}
			_, err := Parse([]byte(in))
			if err == nil {
				t.Fatalf("Parse accepted %s", in)
			}
			ve, ok := err.(*ValidationError)
			if !ok {
				t.Fatalf("error %T %v, want *ValidationError", err, err)
			}
			if tc.field != "" && ve.Problems[0].Field != tc.field {
				t.Fatalf("field = %q (%v), want %q", ve.Problems[0].Field, err, tc.field)
			}
		})
	}
}

func TestParseRejectsMalformedJSON(t *testing.T) {
	t.Parallel()
	for _, in := range []string{``, `{`, `{"source":`, `not json`, sample + `{}`} {
		if _, err := Parse([]byte(in)); err == nil {
			t.Errorf("Parse(%q) accepted malformed input", in)
		}
	}
}

func TestCanonicalIgnoresFormatting(t *testing.T) {
	t.Parallel()
	a := mustParse(t, sample)
	b := mustParse(t, strings.NewReplacer(`"price": 1500.00`, `"price": 1500`, `"total": 3000.00`, `"total": 3e3`,
		`2026-09-16T10:00:00+05:00`, `2026-09-16T05:00:00Z`, "\n", " ").Replace(sample))
	if string(a.Canonical()) != string(b.Canonical()) {
		t.Fatalf("canonical forms differ:\n%s\n%s", a.Canonical(), b.Canonical())
	}
	c := mustParse(t, strings.Replace(sample, `"quantity": 2, "price": 1500.00`, `"quantity": 3, "price": 1000`, 1))
	if SHA256Hex(a.Canonical()) == SHA256Hex(c.Canonical()) {
		t.Fatalf("different orders share a canonical digest")
	}
	if !strings.Contains(string(a.Canonical()), `"price":1500`) {
		t.Fatalf("canonical JSON does not carry numbers as JSON numbers: %s", a.Canonical())
	}
}

func TestReadBatchForms(t *testing.T) {
	t.Parallel()
	one := strings.ReplaceAll(sample, "\n", " ")
	bad := strings.Replace(one, `"quantity": 2`, `"quantity": -1`, 1)
	other := strings.Replace(one, `A-1001`, `A-1002`, 2)
	for _, tc := range []struct {
		name   string
		in     string
		good   int
		badAt  []int
		fields []string
	}{
		{"pretty single object", sample, 1, nil, nil},
		{"json lines with a bad line", one + "\n\n# comment\n" + bad + "\n{broken\n" + other + "\n", 2, []int{4, 5}, []string{"lines[0].quantity", "(document)"}},
		{"array", "[" + one + "," + other + "]", 2, nil, nil},
		{"bom", "\xef\xbb\xbf" + one, 1, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			items, err := ReadBatch(strings.NewReader(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			good := 0
			var badAt []int
			var fields []string
			for _, it := range items {
				if it.Err == nil {
					good++
					continue
				}
				badAt = append(badAt, it.Line)
				fields = append(fields, it.Err.(*ValidationError).Problems[0].Field)
			}
			if good != tc.good {
				t.Fatalf("good = %d, want %d", good, tc.good)
			}
			if strings.Join(fields, ",") != strings.Join(tc.fields, ",") || len(badAt) != len(tc.badAt) {
				t.Fatalf("bad lines %v fields %v, want %v %v", badAt, fields, tc.badAt, tc.fields)
			}
			for i := range badAt {
				if badAt[i] != tc.badAt[i] {
					t.Fatalf("bad lines %v, want %v", badAt, tc.badAt)
				}
			}
		})
	}
}
