package order

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"
)

// one is the sample on one line.
var one = strings.ReplaceAll(sample, "\n", " ")

// problem parses in and returns the first problem, failing the test when it is
// accepted or the error is not a *ValidationError.
func problem(t *testing.T, in string) FieldError {
	t.Helper()
	_, err := Parse([]byte(in))
	if err == nil {
		t.Fatalf("Parse accepted %q", in)
	}
	ve, ok := err.(*ValidationError)
	if !ok || len(ve.Problems) == 0 {
		t.Fatalf("error %T %v, want *ValidationError", err, err)
	}
	return ve.Problems[0]
}

func TestParseRefusesBadOutsideInput(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, from, to, field, msg string
	}{
		{"year 10000", `"2026-09-16T10:00:00+05:00"`, `"10000-01-01T00:00:00Z"`, "created_at", "RFC 3339"},
		{"year 10000 in UTC", `"2026-09-16T10:00:00+05:00"`, `"9999-12-31T23:00:00-05:00"`, "created_at", "outside the accepted range"},
		{"before 2000", `"2026-09-16T10:00:00+05:00"`, `"1999-12-31T23:59:59Z"`, "created_at", "outside the accepted range"},
		{"year 0", `"2026-09-16T10:00:00+05:00"`, `"0000-01-01T00:00:00Z"`, "created_at", "outside the accepted range"},
		{"one-digit hour", `"2026-09-16T10:00:00+05:00"`, `"2026-09-16T1:00:00+05:00"`, "created_at", "RFC 3339"},
		{"offset minutes 60", `"2026-09-16T10:00:00+05:00"`, `"2026-09-16T10:00:00+05:60"`, "created_at", "RFC 3339"},
		{"offset hours 24", `"2026-09-16T10:00:00+05:00"`, `"2026-09-16T10:00:00+24:00"`, "created_at", "RFC 3339"},
		{"space for T", `"2026-09-16T10:00:00+05:00"`, `"2026-09-16 10:00:00+05:00"`, "created_at", "RFC 3339"},
		{"NUL in the buyer's name", `"Иван Петров"`, `"Иван\u0000Петров"`, "customer.name", "U+0000"},
		{"NUL in a line's name", `"Чайник"`, `"Чай\u0000ник"`, "lines[0].name", "U+0000"},
		{"NUL in a SKU", `"SKU-8812"`, `"SKU\u00008812"`, "lines[0].sku", "U+0000"},
		{"NUL in the comment", `"comment": ""`, `"comment": "a\u0000b"`, "comment", "U+0000"},
		{"NUL in the warehouse", `"WH1"`, `"WH\u00001"`, "warehouse", "U+0000"},
		{"NUL in the phone", `"+77011234567"`, `"+7701\u00001234567"`, "customer.phone", "U+0000"},
		{"NUL in the external id", `"external_id": "A-1001"`, `"external_id": "A\u00001001"`, "external_id", "U+0000"},
		{"line feed in a name", `"Иван Петров"`, `"Иван\nПетров"`, "customer.name", "U+000A"},
		{"DEL in a name", `"Иван Петров"`, "\"Иван\x7fПетров\"", "customer.name", "U+007F"},
		{"C1 control in a name", `"Иван Петров"`, `"Иван\u0085Петров"`, "customer.name", "U+0085"},
		{"invalid UTF-8 in a name", `"Иван Петров"`, "\"Иван\xffПетров\"", "customer.name", "not valid UTF-8"},
		{"invalid UTF-8 in the external id", `"external_id": "A-1001"`, "\"external_id\": \"A-\xfe1001\"", "external_id", "not valid UTF-8"},
		{"lone surrogate escape", `"Иван Петров"`, `"Иван\udc00"`, "customer.name", "surrogate"},
		{"high surrogate without its pair", `"Иван Петров"`, `"Иван\ud800x"`, "customer.name", "surrogate"},
		{"case-variant duplicate key", `"external_id": "A-1001"`, `"external_id": "A-1001", "External_ID": "B-1001"`, "External_ID", `is not "external_id"`},
		{"case-variant key alone", `"external_id": "A-1001"`, `"EXTERNAL_ID": "A-1001"`, "EXTERNAL_ID", `is not "external_id"`},
		{"exact duplicate key", `"external_id": "A-1001"`, `"external_id": "A-1001", "external_id": "B-1001"`, "external_id", "twice"},
		{"case-variant nested key", `"name": "Иван Петров"`, `"Name": "Иван Петров"`, "customer.Name", `is not "name"`},
		{"Kelvin sign key", `"sku": "SKU-8812"`, "\"s\u212au\": \"SKU-8812\"", "lines[0].s\u212au", `is not "sku"`},
		{"too many digits", `"price": 1500.00`, `"price": 1234567890123456789012345678901234567890`, "lines[0].price", "digits"},
		{"large exponent", `"price": 1500.00`, `"price": 1e100`, "lines[0].price", "digits"},
		{"small exponent", `"price": 1500.00`, `"price": 1e-50`, "lines[0].price", "digits"},
		{"huge exponent", `"price": 1500.00`, `"price": 1e1000000000`, "lines[0].price", "decimal"},
		{"tiny exponent", `"price": 1500.00`, `"price": 1e-1000000000`, "lines[0].price", "decimal"},
		{"long number text", `"price": 1500.00`, `"price": 1` + strings.Repeat("0", 120), "lines[0].price", "longer than"},
		{"leading space in the external id", `"external_id": "A-1001"`, `"external_id": " A-1001"`, "external_id", "leading or trailing space"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			in := strings.Replace(one, tc.from, tc.to, 1)
			if in == one {
				t.Fatalf("test case did not change the sample")
			}
			p := problem(t, in)
			if p.Field != tc.field || !strings.Contains(p.Message, tc.msg) {
				t.Fatalf("problem %q: %q, want %q mentioning %q", p.Field, p.Message, tc.field, tc.msg)
			}
		})
	}
}

func TestParseAcceptsWhatIsFine(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, from, to string }{
		{"tab and line breaks in the comment", `"comment": ""`, `"comment": "line 1\r\nline\t2"`},
		{"a surrogate pair escape", `"Иван Петров"`, `"Иван \ud83d\ude00"`},
		{"an escaped backslash before u", `"comment": ""`, `"comment": "C:\\udc00"`},
		{"the last accepted day", `"2026-09-16T10:00:00+05:00"`, `"3999-12-30T23:59:59.999999999Z"`},
		{"the first accepted moment", `"2026-09-16T10:00:00+05:00"`, `"2000-01-01T05:00:00+05:00"`},
		{"a fraction of a second", `"2026-09-16T10:00:00+05:00"`, `"2026-09-16T10:00:00.123+05:00"`},
		{"trailing zeros beyond 38 digits", `"price": 1500.00`, `"price": 1500.` + strings.Repeat("0", 60)},
		{"an escaped key", `"sku": "SKU-8812"`, `"s\u006bu": "SKU-8812"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			in := strings.Replace(one, tc.from, tc.to, 1)
			if in == one {
				t.Fatalf("test case did not change the sample")
			}
			if _, err := Parse([]byte(in)); err != nil {
				t.Fatalf("Parse refused %s: %v", in, err)
			}
		})
	}
}

// Two ids that differ only in their bad bytes would both decode to "A-\uFFFD": both
// must be refused, never registered as one key.
func TestTwoBadIDsDoNotCollapse(t *testing.T) {
	t.Parallel()
	var keys []string
	for _, id := range []string{"A-\xff", "A-\xfe"} {
		in := strings.Replace(one, `"external_id": "A-1001"`, `"external_id": "`+id+`"`, 1)
		o, err := Parse([]byte(in))
		if err == nil {
			keys = append(keys, o.CreateKey())
			continue
		}
		if p := err.(*ValidationError).Problems[0]; p.Field != "external_id" {
			t.Fatalf("%q: problem %v, want external_id", id, p)
		}
	}
	if len(keys) > 0 {
		t.Fatalf("bad ids registered as %v", keys)
	}
	// A U+FFFD written as such is no key id either.
	if msg := CheckKeyID("A-\uFFFD"); msg == "" {
		t.Fatal("CheckKeyID accepted U+FFFD")
	}
}

// An order built in code (a connector's mapping) with a year past 9999: Validate
// names created_at, and Canonical does not panic.
func TestYear10000NeverPanics(t *testing.T) {
	t.Parallel()
	o := mustParse(t, sample)
	o.CreatedAt = time.UnixMilli(253402300800000) // 10000-01-01T00:00:00Z
	err := o.Validate()
	if err == nil || err.(*ValidationError).Problems[0].Field != "created_at" {
		t.Fatalf("Validate = %v, want created_at refused", err)
	}
	b := o.Canonical()
	if _, err := Parse(b); err == nil {
		t.Fatalf("the canonical form of a refused order parses: %s", b)
	}
	o.CreatedAt = time.Date(-5, 1, 1, 0, 0, 0, 0, time.UTC)
	_ = o.Canonical()
	// A decimal no one can write out in reasonable time: refused, and Canonical
	// returns at once.
	o.CreatedAt = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	o.Lines[0].Price = decimal.New(1, 2_000_000_000)
	o.Total = nil
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "lines[0].price") {
		t.Fatalf("Validate = %v, want lines[0].price refused", err)
	}
	_ = o.Canonical()
}

func TestReadBatchRefusesBadLinesBetweenGoodOnes(t *testing.T) {
	t.Parallel()
	good1 := one
	good2 := strings.Replace(one, `A-1001`, `A-1002`, 2)
	bad := []struct{ line, field string }{
		{strings.Replace(one, `"2026-09-16T10:00:00+05:00"`, `"10000-01-01T00:00:00Z"`, 1), "created_at"},
		{strings.Replace(one, `"Иван Петров"`, `"Иван\u0000Петров"`, 1), "customer.name"},
		{strings.Replace(one, `"Иван Петров"`, "\"Иван\xffПетров\"", 1), "customer.name"},
		{strings.Replace(one, `"external_id": "A-1001"`, `"external_id": "A-1001", "External_ID": "B-1"`, 1), "External_ID"},
		{strings.Replace(one, `"2026-09-16T10:00:00+05:00"`, `"2026-09-16T1:00:00+05:00"`, 1), "created_at"},
	}
	lines := []string{good1}
	for _, b := range bad {
		lines = append(lines, b.line)
	}
	lines = append(lines, good2)
	for _, form := range []string{"lines", "array"} {
		in := strings.Join(lines, "\n")
		if form == "array" {
			in = "[" + strings.Join(lines, ",\n") + "]"
		}
		items, err := ReadBatch(strings.NewReader(in))
		if err != nil {
			t.Fatal(err)
		}
		if len(items) != len(lines) {
			t.Fatalf("%s: %d items, want %d", form, len(items), len(lines))
		}
		if items[0].Err != nil || items[len(items)-1].Err != nil {
			t.Fatalf("%s: good orders refused: %v, %v", form, items[0].Err, items[len(items)-1].Err)
		}
		for i, b := range bad {
			it := items[i+1]
			if it.Err == nil {
				t.Fatalf("%s: line %d accepted", form, i+2)
			}
			if f := it.Err.(*ValidationError).Problems[0].Field; f != b.field {
				t.Errorf("%s: line %d: field %q (%v), want %q", form, i+2, f, it.Err, b.field)
			}
		}
	}
}

func TestCheckJSONNamesThePath(t *testing.T) {
	t.Parallel()
	type wire struct {
		Items []struct {
			Name string `json:"name"`
		} `json:"items"`
		Raw json.RawMessage `json:"raw"`
	}
	for _, tc := range []struct {
		in, field string
		opts      JSONOptions
	}{
		{"{\"items\":[{\"name\":\"a\"},{\"name\":\"b\xff\"}]}", "items[1].name", JSONOptions{Into: wire{}}},
		{`{"items":[{"name":"a","Name":"b"}]}`, "items[0].Name", JSONOptions{Into: wire{}}},
		{"{\"raw\":{\"x\":\"\xff\"}}", "raw.x", JSONOptions{Into: wire{}}},
		{`{"a":{"b":1,"b":2}}`, "a.b", JSONOptions{}},
		{"{\"\xff\":1}", `"\xff"`, JSONOptions{}},
		{`{"x":1} {}`, "(document)", JSONOptions{}},
		{`[1,`, "(document)", JSONOptions{}},
	} {
		err := CheckJSON([]byte(tc.in), tc.opts)
		if err == nil {
			t.Errorf("%q accepted", tc.in)
			continue
		}
		if f := err.(*ValidationError).Problems[0].Field; f != tc.field {
			t.Errorf("%q: field %q (%v), want %q", tc.in, f, err, tc.field)
		}
	}
	// Shallow: what is inside a json.RawMessage is left for later.
	if err := CheckJSON([]byte("{\"raw\":{\"x\":\"\xff\",\"x\":1}}"), JSONOptions{Into: wire{}, Shallow: true}); err != nil {
		t.Errorf("shallow check looked into a raw value: %v", err)
	}
	if err := CheckJSON([]byte(`{"items":[],"other":{"Items":1}}`), JSONOptions{Into: wire{}}); err != nil {
		t.Errorf("an unknown object's keys are free: %v", err)
	}
}

func TestSafeText(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"plain":             "plain",
		"Иван\nПетров\t1":   "Иван\nПетров\t1",
		"a\x00b":            `a\x00b`,
		"a\xffb":            `a\xffb`,
		"a\rb\u0085":        `a\rb\u0085`,
		"\xe2\x82":          `\xe2\x82`,
		"ok \U0001F600 end": "ok \U0001F600 end",
	} {
		got := SafeText(in)
		if got != want {
			t.Errorf("SafeText(%q) = %q, want %q", in, got, want)
		}
		if CheckFreeText(got) != "" {
			t.Errorf("SafeText(%q) = %q is not safe", in, got)
		}
	}
}

func TestParseTimeIsStrict(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"2026-09-16T1:00:00Z", "2026-09-16t10:00:00z", "2026-09-16T10:00:00", "2026-9-16T10:00:00Z",
		"2026-09-16T10:00:00.Z", "2026-09-16T10:00:00.1234567890Z", "2026-09-16T10:00:60Z", "2026-02-30T10:00:00Z", " 2026-09-16T10:00:00Z"} {
		if _, err := ParseTime(s); err == nil {
			t.Errorf("ParseTime(%q) accepted", s)
		}
	}
	for _, s := range []string{"2026-09-16T10:00:00Z", "2026-09-16T10:00:00.5+05:00", "2026-09-16T10:00:00-00:00"} {
		if _, err := ParseTime(s); err != nil {
			t.Errorf("ParseTime(%q): %v", s, err)
		}
	}
	if _, err := ParseLocalTime("2026-09-16T1:00:00", time.UTC); err == nil {
		t.Error("ParseLocalTime accepted a one-digit hour")
	}
}

// roundTrip asserts what the fuzz targets assert of an accepted order: it
// validates, and its canonical form parses back to the same canonical form.
func roundTrip(t *testing.T, o Order) {
	t.Helper()
	if err := o.Validate(); err != nil {
		t.Fatalf("accepted order does not validate: %v", err)
	}
	c := o.Canonical()
	back, err := Parse(c)
	if err != nil {
		t.Fatalf("canonical form %s does not parse: %v", c, err)
	}
	if c2 := back.Canonical(); !bytes.Equal(c, c2) {
		t.Fatalf("canonical form changed on a round trip:\n%s\n%s", c, c2)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(sample))
	f.Add([]byte(one))
	f.Add([]byte(`{"source":"site","external_id":"x","created_at":"2026-09-16T10:00:00Z","currency":"KZT",` +
		`"lines":[{"sku":"a","quantity":1,"price":0.1},{"sku":"b","quantity":1,"price":0.2}],"total":0.3}`))
	f.Add([]byte(strings.Replace(one, `"Иван Петров"`, `"Иван\u0000Петров"`, 1)))
	f.Add([]byte(strings.Replace(one, `"2026-09-16T10:00:00+05:00"`, `"10000-01-01T00:00:00Z"`, 1)))
	f.Add([]byte(strings.Replace(one, `"external_id": "A-1001"`, `"external_id": "A", "External_ID": "B"`, 1)))
	f.Add([]byte(strings.Replace(one, `"price": 1500.00`, `"price": "1500.00"`, 1)))
	f.Fuzz(func(t *testing.T, data []byte) {
		o, err := Parse(data)
		if err != nil {
			if _, ok := err.(*ValidationError); !ok {
				t.Fatalf("error %T %v, want *ValidationError", err, err)
			}
			return
		}
		roundTrip(t, o)
	})
}

func FuzzReadBatch(f *testing.F) {
	f.Add([]byte(one + "\n# comment\n\n" + strings.Replace(one, `"quantity": 2`, `"quantity": -1`, 1) + "\n{broken\n"))
	f.Add([]byte("[" + one + "," + one + "]"))
	f.Add([]byte("\xef\xbb\xbf" + sample))
	f.Add([]byte(one + "\n" + strings.Replace(one, `"Иван Петров"`, "\"\xff\"", 1)))
	f.Fuzz(func(t *testing.T, data []byte) {
		items, err := ReadBatch(bytes.NewReader(data))
		if err != nil {
			return
		}
		for _, it := range items {
			if it.Err != nil {
				if _, ok := it.Err.(*ValidationError); !ok {
					t.Fatalf("line %d: error %T %v, want *ValidationError", it.Line, it.Err, it.Err)
				}
				continue
			}
			roundTrip(t, it.Order)
		}
	})
}

func TestCheckJSONRefusesWhatIsNotJSON(t *testing.T) {
	t.Parallel()
	for in, msg := range map[string]string{
		`{"a":1,}`:         "malformed JSON: invalid character '}' looking for beginning of object key string",
		`[1,2,]`:           "malformed JSON: invalid character ']' looking for beginning of value",
		`{"a" 1}`:          "malformed JSON: invalid character '1' after object key",
		`{"a":-01}`:        "malformed JSON: invalid character '1' after object key:value pair",
		`{"a":1.}`:         "malformed JSON: invalid character '}' after decimal point in numeric literal",
		`{"a":"\x"}`:       `malformed JSON: invalid character 'x' in string escape code`,
		`{"a":"\u12G4"}`:   `malformed JSON: invalid character 'G' in \u hexadecimal character escape`,
		"{\"a\":\"x\ty\"}": "malformed JSON: invalid character '\\t' in string literal",
		`{"a":tru}`:        "malformed JSON: invalid character '}' in literal true (expecting 'e')",
		`{"a":`:            "malformed JSON: EOF",
		`{"a":1} x`:        "malformed JSON: unexpected data after the JSON value",
	} {
		var ve *ValidationError
		if err := CheckJSON([]byte(in), JSONOptions{}); !errors.As(err, &ve) || ve.Problems[0] != (FieldError{Field: "(document)", Message: msg}) {
			t.Errorf("CheckJSON(%q) = %v, want (document): %s", in, err, msg)
		}
	}
	for _, in := range []string{`0`, `-0.5e+10`, `"\u00e9\/\b"`, ` [true, false, null, {"": []}] `, `{"a":{"b":[1,{"c":"d"}]}}`} {
		if err := CheckJSON([]byte(in), JSONOptions{}); err != nil {
			t.Errorf("CheckJSON(%q) = %v, want nil", in, err)
		}
	}
}

// FuzzCheckJSON: the strict pass accepts nothing encoding/json would not read.
func FuzzCheckJSON(f *testing.F) {
	for _, s := range []string{`{"a":[1,2.5e-3,"x\u00e9",true,null]}`, `{"a":1,"a":2}`, `[1,]`, `-01`, `"\ud800"`, "\"\xff\""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if CheckJSON(data, JSONOptions{}) == nil && !json.Valid(data) {
			t.Fatalf("CheckJSON accepted %q, which is not JSON", data)
		}
	})
}
