package kaspi

import (
	"strings"
	"testing"
	"time"
)

// fuzzHeader is a header of the cabinet's export, every column the importer reads.
var fuzzHeader = []string{"Номер заказа", "Дата операции", "Тип операции", "Артикул", "Количество", "Сумма", "Комиссия",
	"Доставка", "Штраф", "К выплате"}

// Whatever the rows under the header hold, the export is refused with a reason, or
// every line it gives validates (its amount the exact sum of its parts), ids unique.
func FuzzPayoutRows(f *testing.F) {
	f.Add("512344101\t16.09.2026\tПродажа\tSKU-8812\t2\t3000\t360\t0\t0\t2640\n" +
		"512344101\t20.09.2026\tВозврат\tSKU-8812\t2\t3000\t360\t0\t0\t-2640\n" +
		"\t30.09.2026\tПодписка\t\t\t0\t0\t0\t0\t-0,01\nИтого\t\t\t\t\t\t\t\t\t-0,01")
	f.Add("512344102\t21.09.2026 14:30\tПродажа\tSKU-1\t1\t12 345 678,90\t0,01\t0\t0\t12345678.89")
	f.Add("1\t31.02.2026\tПродажа\t\t\tсто\t10")
	f.Fuzz(func(t *testing.T, body string) {
		rows := [][]string{fuzzHeader}
		for _, line := range strings.Split(body, "\n") {
			rows = append(rows, strings.Split(line, "\t"))
		}
		hdr, cols, _ := findHeader(rows)
		if hdr != 0 {
			t.Fatalf("the header was not found at row 0 (%d)", hdr)
		}
		p := &payoutReader{file: "fuzz.xlsx", sheet: "Выплаты", cols: cols,
			opt: PayoutOptions{Source: Name, Currency: "KZT", Location: time.UTC}}
		out, err := p.read(rows, hdr)
		if err != nil {
			if !strings.Contains(err.Error(), "fuzz.xlsx") {
				t.Fatalf("a refusal that does not name the file: %v", err)
			}
			return
		}
		ids := map[string]bool{}
		for _, l := range out.Lines {
			if err := l.Validate(); err != nil {
				t.Fatalf("an imported line does not validate: %v", err)
			}
			if ids[l.LineID] {
				t.Fatalf("line id %q twice in one file", l.LineID)
			}
			ids[l.LineID] = true
		}
	})
}
