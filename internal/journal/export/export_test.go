package export

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"
	"github.com/xuri/excelize/v2"

	"github.com/ordersync/ordersync/internal/journal"
)

var almaty = mustZone("Asia/Almaty")

func mustZone(name string) *time.Location {
	loc, err := time.LoadLocation(name)
	if err != nil {
		panic(err)
	}
	return loc
}

func orderOp(i int) journal.Operation {
	payload, _ := json.Marshal(map[string]any{
		"source": "kaspi", "external_id": fmt.Sprint(512344100 + i), "number": fmt.Sprint(512344100 + i),
		"customer": map[string]any{"name": "Айгерим " + fmt.Sprint(i), "phone": "+7 701 234 56 78"},
		"currency": "KZT",
		"lines": []map[string]any{
			{"sku": "A", "quantity": json.Number("2"), "price": json.Number("1500.10")},
			{"sku": "B", "quantity": json.Number("1"), "price": json.Number(fmt.Sprintf("%d.05", i))},
		},
	})
	created := time.Date(2026, 11, 3, 9, 5, 9, 0, time.UTC).Add(time.Duration(i) * time.Minute)
	op := journal.Operation{Key: fmt.Sprintf("kaspi:order:%d:create", 512344100+i), Kind: "order.create", Source: "kaspi",
		ExternalID: fmt.Sprint(512344100 + i), Status: journal.StatusDone, Payload: payload, Attempts: 1,
		CreatedAt: created, UpdatedAt: created.Add(3 * time.Second),
		Result: &journal.Result{Ref: "9f1c2d3e-0000-4000-8000-00000000000a", Number: fmt.Sprintf("ОС-%06d", i), Date: "2026-11-03T14:05:09"}}
	if i%2 == 1 {
		op.Status, op.Result, op.LastError = journal.StatusFailed, nil, "=HYPERLINK(\"http://evil\")"
		op.Warnings = []journal.Warning{{Code: journal.WarningDuplicateIn1C}}
	}
	return op
}

func TestRowOf(t *testing.T) {
	r := RowOf(orderOp(0), almaty)
	if r.MarketplaceNumber != "512344100" || r.Customer != "Айгерим 0" || r.Phone != "+7 701 234 56 78" ||
		r.OneCNumber != "ОС-000000" || r.OneCDate != "2026-11-03T14:05:09" || r.Currency != "KZT" || r.Done == nil {
		t.Fatalf("row %+v", r)
	}
	if want := decimal.RequireFromString("3000.25"); r.Total == nil || !r.Total.Equal(want) {
		t.Fatalf("total %v, want 2×1500.10 + 0.05 = 3000.25 exactly", r.Total)
	}
	if got := r.Created.Format(TimeLayout); got != "2026-11-03 14:05:09 +05:00" {
		t.Fatalf("created %s, want it in Asia/Almaty", got)
	}
	fetch := journal.Operation{Key: "ozon:posting:1-2-3:create", Payload: json.RawMessage(`{"fetch":{"connector":"ozon","id":"1-2-3"}}`)}
	if r := RowOf(fetch, almaty); r.MarketplaceNumber != "1-2-3" || r.Total != nil {
		t.Fatalf("fetch payload row %+v", r)
	}
}

func TestCSVOpensInARussianExcel(t *testing.T) {
	var b bytes.Buffer
	w := NewCSV(&b, "ru", almaty)
	for i := range 3 {
		if err := w.Write(RowOf(orderOp(i), almaty)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b.Bytes(), []byte("\xEF\xBB\xBF")) {
		t.Fatalf("no byte-order mark: %q", b.String()[:20])
	}
	r := csv.NewReader(strings.NewReader(strings.TrimPrefix(b.String(), "\uFEFF")))
	r.Comma = ';'
	recs, err := r.ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 4 || len(recs[0]) != len(Columns) {
		t.Fatalf("%d records of %d cells, want 4 of %d", len(recs), len(recs[0]), len(Columns))
	}
	if recs[0][0] != "Источник" || recs[0][13] != "Зарегистрирована (Asia/Almaty)" {
		t.Fatalf("header %q", recs[0])
	}
	col := func(name string) int {
		for i, c := range Columns {
			if c == name {
				return i
			}
		}
		t.Fatalf("no column %s", name)
		return -1
	}
	if got := recs[1][col("total")]; got != "3000,25" {
		t.Fatalf("total %q, want the decimal comma 3000,25", got)
	}
	if got := recs[2][col("last_error")]; got != `'=HYPERLINK("http://evil")` {
		t.Fatalf("a formula is not neutralised: %q", got)
	}
	if got := recs[1][col("phone")]; got != "+7 701 234 56 78" {
		t.Fatalf("a phone is written %q, want it as it is: no apostrophe", got)
	}
	// Dates as a Russian Excel reads them; statuses and kinds in Russian.
	if got := recs[1][col("created")]; got != "03.11.2026 14:05:09" {
		t.Fatalf("created %q, want 03.11.2026 14:05:09", got)
	}
	for i, rec := range recs[1:] {
		for _, c := range []string{"status", "kind", "state"} {
			if v := rec[col(c)]; v != "" && !strings.ContainsFunc(v, func(r rune) bool { return r >= 'а' && r <= 'я' }) {
				t.Errorf("row %d: %s %q is not in Russian", i+1, c, v)
			}
		}
	}
	var en bytes.Buffer
	w = NewCSV(&en, "en", almaty)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if want := "\uFEFFSource,Order number,"; !strings.HasPrefix(en.String(), want) {
		t.Fatalf("empty English export %q, want it to begin %q", en.String(), want)
	}
}

func TestNeutralise(t *testing.T) {
	for in, want := range map[string]string{"=1+2": "'=1+2", "+7": "+7", "-5": "-5", "@SUM(A1)": "'@SUM(A1)",
		"+7 (701) 234-56-78": "+7 (701) 234-56-78", "+7-HYPERLINK(1)": "'+7-HYPERLINK(1)", "-1+cmd|' /C calc'!A0": "'-1+cmd|' /C calc'!A0",
		"+": "'+", "- ": "'- ",
		"\tx": "'\tx", "\rx": "'\rx", "ОС-1": "ОС-1", "": "", "a=b": "a=b"} {
		if got := Neutralise(in); got != want {
			t.Errorf("Neutralise(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestXLSXReadsBack(t *testing.T) {
	var b bytes.Buffer
	w, err := NewXLSX(&b, "ru", almaty)
	if err != nil {
		t.Fatal(err)
	}
	const n = 250
	for i := range n {
		if err := w.Write(RowOf(orderOp(i), almaty)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := excelize.OpenReader(&b)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := f.GetRows(Sheet)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != n+1 {
		t.Fatalf("%d rows, want a header and %d", len(rows), n)
	}
	seen := map[string]bool{}
	for _, r := range rows[1:] {
		seen[r[3]] = true
	}
	if len(seen) != n {
		t.Fatalf("%d distinct keys, want %d", len(seen), n)
	}
	// The total is a number cell with two decimals, not text.
	typ, err := f.GetCellType(Sheet, "L2")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := f.GetCellValue(Sheet, "L2", excelize.Options{RawCellValue: true})
	if err != nil {
		t.Fatal(err)
	}
	shown, _ := f.GetCellValue(Sheet, "L2")
	if typ == excelize.CellTypeSharedString || typ == excelize.CellTypeInlineString || raw != "3000.25" || shown != "3000.25" {
		t.Fatalf("total cell: type %v, raw %q, shown %q; want the number 3000.25 shown as 3000.25", typ, raw, shown)
	}
	if got, _ := f.GetCellValue(Sheet, "L3"); got != "3001.25" {
		t.Fatalf("second total shown %q, want 3001.25", got)
	}
	if got, _ := f.GetCellValue(Sheet, "N2"); got != "03.11.2026 14:05:09" {
		t.Fatalf("created shown %q, want the Almaty wall clock, as a Russian date", got)
	}
	if got, _ := f.GetCellValue(Sheet, "N1"); got != "Зарегистрирована (Asia/Almaty)" {
		t.Fatalf("created header %q", got)
	}
	// Dates are date cells (numbers with a date format), not text; so is 1C's.
	for _, cell := range []string{"N2", "J2"} {
		raw, _ := f.GetCellValue(Sheet, cell, excelize.Options{RawCellValue: true})
		if typ, _ := f.GetCellType(Sheet, cell); typ == excelize.CellTypeSharedString || typ == excelize.CellTypeInlineString {
			t.Errorf("%s: type %v raw %q, want a date cell", cell, typ, raw)
		}
		if _, err := strconv.ParseFloat(raw, 64); err != nil {
			t.Errorf("%s: raw %q is no serial date", cell, raw)
		}
	}
	if w, err := f.GetColWidth(Sheet, "D"); err != nil || w < 30 {
		t.Errorf("the key column is %v wide (%v), want it set", w, err)
	}
	if got, _ := f.GetCellValue(Sheet, "F2"); got != "выполнена" {
		t.Errorf("the status is %q, want it in Russian", got)
	}
}

// BenchmarkExport50k writes 50,000 rows, as an export of a busy month would.
func BenchmarkExport50k(b *testing.B) {
	rows := make([]Row, 50000)
	for i := range rows {
		rows[i] = RowOf(orderOp(i), almaty)
	}
	for _, format := range []string{"csv", "xlsx"} {
		b.Run(format, func(b *testing.B) {
			var size int
			for b.Loop() {
				var buf bytes.Buffer
				var w Writer
				if format == "csv" {
					w = NewCSV(&buf, "ru", almaty)
				} else {
					var err error
					if w, err = NewXLSX(&buf, "ru", almaty); err != nil {
						b.Fatal(err)
					}
				}
				for _, r := range rows {
					if err := w.Write(r); err != nil {
						b.Fatal(err)
					}
				}
				if err := w.Close(); err != nil {
					b.Fatal(err)
				}
				size = buf.Len()
			}
			b.ReportMetric(float64(len(rows))*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
			b.ReportMetric(float64(size)/1e6, "MB")
		})
	}
}
