package reconcile_test

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/xuri/excelize/v2"

	payrec "github.com/ordersync/ordersync/internal/payouts/reconcile"
)

func plantedReport(t *testing.T) payrec.Report {
	t.Helper()
	m := newMonth(t, backends[0].open(t))
	m.plant()
	return m.run()
}

// TestTheWorkbook: a summary sheet and one sheet per category, money as numeric
// cells, dates as date cells, Russian headers and sheet names for ru.
func TestTheWorkbook(t *testing.T) {
	t.Parallel()
	rep := plantedReport(t)
	for _, lang := range []string{"ru", "en"} {
		var buf bytes.Buffer
		if err := payrec.WriteXLSX(&buf, rep, lang, almaty); err != nil {
			t.Fatal(err)
		}
		f, err := excelize.OpenReader(&buf)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{payrec.Word(lang, "summary")}
		for _, c := range payrec.Categories {
			want = append(want, payrec.SheetName(lang, c))
		}
		if got := f.GetSheetList(); !slices.Equal(got, want) {
			t.Errorf("%s: sheets %q, want %q", lang, got, want)
		}
		diff := payrec.SheetName(lang, payrec.PaidWithDifference)
		rows, err := f.GetRows(diff)
		if err != nil {
			t.Fatal(err)
		}
		head := rows[0]
		wantHead := "Order"
		if lang == "ru" {
			wantHead = "Заказ"
			if head[8] != "Начислено за продажу" || head[9] != "Комиссия" || !strings.HasPrefix(head[4], "Дата заказа (Asia/Almaty") {
				t.Errorf("ru headers %q", head)
			}
		}
		if head[1] != wantHead {
			t.Errorf("%s: the order column is headed %q, want %q", lang, head[1], wantHead)
		}
		// P-DIFF's row: its money are numbers, its date a date.
		row := 0
		for i, r := range rows {
			if len(r) > 1 && r[1] == "P-DIFF" {
				row = i + 1
			}
		}
		if row == 0 {
			t.Fatalf("%s: P-DIFF is not on %s: %q", lang, diff, rows)
		}
		for col, want := range map[string]string{"H": "2000", "I": "1900", "J": "-190", "M": "-10.01", "N": "1599.99", "O": "-100"} {
			cell := col + strconv.Itoa(row)
			typ, err := f.GetCellType(diff, cell)
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := f.GetCellValue(diff, cell, excelize.Options{RawCellValue: true})
			if typ != excelize.CellTypeNumber && typ != excelize.CellTypeUnset || raw != want {
				t.Errorf("%s %s: type %v value %q, want the number %s", lang, cell, typ, raw, want)
			}
		}
		if raw, _ := f.GetCellValue(diff, "E"+strconv.Itoa(row), excelize.Options{RawCellValue: true}); raw != "46299" {
			t.Errorf("%s: P-DIFF's order date is %q, want the date 2026-10-04 as a serial number", lang, raw)
		}
		// The summary: the counts are numbers, the verdict is words.
		srows, _ := f.GetRows(payrec.Word(lang, "summary"))
		text := ""
		for _, r := range srows {
			text += strings.Join(r, "|") + "\n"
		}
		if lang == "ru" && (!strings.Contains(text, "Оплачен с расхождением|3|") || !strings.Contains(text, "Хранение|2|-600.45") ||
			!strings.Contains(text, "маркетплейс не сообщил итог")) {
			t.Errorf("the Russian summary:\n%s", text)
		}
	}
}

// TestTheCSVAndJSON: every order and the cabinet's types in the CSV; the JSON is
// the report.
func TestTheCSVAndJSON(t *testing.T) {
	t.Parallel()
	rep := plantedReport(t)
	var buf bytes.Buffer
	if err := payrec.WriteCSV(&buf, rep, almaty); err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(&buf).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(recs[0], payrec.Columns) {
		t.Errorf("header %q", recs[0])
	}
	if got, want := len(recs)-1, len(rep.Items)+len(rep.Cabinet); got != want {
		t.Errorf("%d rows, want %d", got, want)
	}
	buf.Reset()
	if err := payrec.WriteJSON(&buf, rep); err != nil {
		t.Fatal(err)
	}
	var back payrec.Report
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Items) != len(rep.Items) || !back.Totals.LinesSum.Equal(rep.Totals.LinesSum) {
		t.Errorf("the JSON reads back as %+v", back.Totals)
	}
	buf.Reset()
	if err := payrec.WriteTable(&buf, rep, almaty); err != nil {
		t.Fatal(err)
	}
	if s := buf.String(); !strings.Contains(s, "P-DIFF") || strings.Contains(s, "P-SOLD") {
		t.Errorf("the table lists the orders to act on, not the ones paid as sold:\n%s", s)
	}
}
