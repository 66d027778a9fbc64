package reconcile

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/shopspring/decimal"
	"github.com/xuri/excelize/v2"

	"github.com/ordersync/ordersync/internal/journal/export"
)

// WriteJSON writes the report as one JSON object (the public shape of Report).
func WriteJSON(w io.Writer, r Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// Columns are the items' columns, in the CSV and on each category's sheet.
var Columns = []string{"category", "order_id", "onec_number", "onec_ref", "ordered", "first_paid", "last_paid",
	"onec_total", "accrued_for_sale", "commission", "logistics", "penalty", "other", "paid", "difference",
	"return_status", "key", "note"}

var headers = map[string]map[string]string{
	"en": {"category": "Category", "order_id": "Order", "onec_number": "1C number", "onec_ref": "1C ref",
		"ordered": "Ordered", "first_paid": "First line", "last_paid": "Last line", "onec_total": "Amount in 1C",
		"accrued_for_sale": "Accrued for sale", "commission": "Commission", "logistics": "Logistics", "penalty": "Penalties",
		"other": "Other services", "paid": "Paid", "difference": "Accrued − 1C", "return_status": "Return",
		"key": "Journal key", "note": "Note",
		"s_category": "Category", "s_orders": "Orders", "s_accrued": "Accrued", "s_paid": "Paid", "s_onec": "Amount in 1C",
		"s_cabinet": "Cabinet lines", "s_type": "Type", "s_lines": "Lines", "s_amount": "Amount",
		"s_check": "Totals check", "s_lines_sum": "Sum of every line", "s_orders_sum": "Orders' lines",
		"s_cabinet_sum": "Cabinet lines", "s_balanced": "Orders + cabinet = every line", "s_stated": "Marketplace's own total",
		"s_stated_diff": "Every line − marketplace's total", "s_verdict": "Verdict", "s_source": "Source",
		"s_period": "Period", "s_zone": "Time zone", "s_currency": "Currency", "yes": "yes", "no": "no",
		"summary": "summary"},
	"ru": {"category": "Категория", "order_id": "Заказ", "onec_number": "Номер в 1С", "onec_ref": "Ссылка 1С",
		"ordered": "Дата заказа", "first_paid": "Первая строка", "last_paid": "Последняя строка", "onec_total": "Сумма в 1С",
		"accrued_for_sale": "Начислено за продажу", "commission": "Комиссия", "logistics": "Логистика", "penalty": "Штрафы",
		"other": "Прочие услуги", "paid": "Выплачено", "difference": "Начислено − 1С", "return_status": "Возврат",
		"key": "Ключ журнала", "note": "Примечание",
		"s_category": "Категория", "s_orders": "Заказов", "s_accrued": "Начислено", "s_paid": "Выплачено", "s_onec": "Сумма в 1С",
		"s_cabinet": "Строки кабинета", "s_type": "Тип", "s_lines": "Строк", "s_amount": "Сумма",
		"s_check": "Проверка итогов", "s_lines_sum": "Сумма всех строк", "s_orders_sum": "Строки заказов",
		"s_cabinet_sum": "Строки кабинета", "s_balanced": "Заказы + кабинет = все строки", "s_stated": "Итог маркетплейса",
		"s_stated_diff": "Все строки − итог маркетплейса", "s_verdict": "Вывод", "s_source": "Источник",
		"s_period": "Период", "s_zone": "Часовой пояс", "s_currency": "Валюта", "yes": "да", "no": "нет",
		"summary": "итоги"},
}

// Word is a header or a summary's label in lang (ru, else en).
func Word(lang, key string) string {
	if h, ok := headers[lang][key]; ok {
		return h
	}
	return headers["en"][key]
}

// Verdict is the check against the marketplace's own total, in lang: "equal to
// the kopeck", "differs by X", or that it stated none.
func Verdict(lang string, t Totals, money Money) string {
	ru := lang == "ru"
	switch t.StatedVerdict {
	case StatedEqual:
		if ru {
			return "совпадает с итогом маркетплейса до копейки"
		}
		return "equal to the marketplace's total to the kopeck"
	case StatedDiffers:
		if ru {
			return "расходится с итогом маркетплейса на " + money(*t.StatedDifference)
		}
		return "differs from the marketplace's total by " + money(*t.StatedDifference)
	}
	if ru {
		return "маркетплейс не сообщил итог за этот период"
	}
	return "the marketplace stated no total for the period"
}

// Balance says whether the categories and the cabinet add up to every line.
func Balance(lang string, t Totals, money Money) string {
	if t.Balanced {
		if lang == "ru" {
			return "заказы и кабинет в сумме равны всем строкам до копейки"
		}
		return "the orders and the cabinet add up to every line to the kopeck"
	}
	d := t.LinesSum.Sub(t.Orders).Sub(t.Cabinet)
	if lang == "ru" {
		return "заказы и кабинет не сходятся со всеми строками на " + money(d)
	}
	return "the orders and the cabinet differ from every line by " + money(d)
}

// WriteTable writes the summary, then every order that needs something done, for
// people.
func WriteTable(w io.Writer, r Report, loc *time.Location) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "%s payouts, %s – %s (%s)\n\n", r.Source, r.From, r.To, r.Zone)
	fmt.Fprintln(tw, "CATEGORY\tORDERS\tACCRUED\tPAID\t1C")
	for _, c := range r.Categories {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", c.Category, c.Orders, PlainMoney(c.Accrued), PlainMoney(c.Paid), PlainMoney(c.OneC))
	}
	if len(r.Cabinet) > 0 {
		fmt.Fprintln(tw, "\nCABINET TYPE\tLINES\tAMOUNT")
		for _, c := range r.Cabinet {
			fmt.Fprintf(tw, "%s\t%d\t%s\n", c.Type, c.Lines, PlainMoney(c.Amount))
		}
	}
	t := r.Totals
	fmt.Fprintf(tw, "\nlines\t%d\t%s\n", t.Lines, PlainMoney(t.LinesSum))
	fmt.Fprintf(tw, "orders + cabinet\t\t%s\n", PlainMoney(t.Orders.Add(t.Cabinet)))
	fmt.Fprintf(tw, "%s\n%s\n", Balance("en", t, PlainMoney), Verdict("en", t, PlainMoney))
	bad := 0
	for _, it := range r.Items {
		if it.Category.Fine() {
			continue
		}
		if bad == 0 {
			fmt.Fprintln(tw, "\nCATEGORY\tORDER\t1C\tORDERED\t1C TOTAL\tACCRUED\tPAID\tDIFFERENCE\tRETURN\tNOTE")
		}
		bad++
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", it.Category, it.OrderID, dash(it.OneCNumber),
			dash(day(it.Ordered, loc)), dash(moneyText(it.OneCTotal)), PlainMoney(it.Accrued), PlainMoney(it.Paid),
			dash(moneyText(it.Difference)), dash(it.Return), oneLine(it.Note))
	}
	if bad == 0 {
		fmt.Fprintln(tw, "\nevery order is paid as sold or returned in 1C")
	}
	return tw.Flush()
}

// WriteCSV writes every item, then a row per cabinet type (category "cabinet",
// the type in order_id's place), as UTF-8 CSV with a header row of the columns'
// names; dates are YYYY-MM-DD in loc.
func WriteCSV(w io.Writer, r Report, loc *time.Location) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(Columns); err != nil {
		return err
	}
	for _, it := range r.Items {
		if err := cw.Write([]string{string(it.Category), export.Neutralise(it.OrderID), it.OneCNumber, it.OneCRef,
			day(it.Ordered, loc), day(it.FirstPaid, loc), day(it.LastPaid, loc), moneyText(it.OneCTotal),
			PlainMoney(it.Accrued), PlainMoney(it.Commission), PlainMoney(it.Logistics), PlainMoney(it.Penalty),
			PlainMoney(it.Other), PlainMoney(it.Paid), moneyText(it.Difference), it.Return, it.Key,
			export.Neutralise(it.Note)}); err != nil {
			return err
		}
	}
	for _, c := range r.Cabinet {
		row := make([]string, len(Columns))
		row[0], row[1], row[13] = "cabinet", export.Neutralise(c.Type), PlainMoney(c.Amount)
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// SheetName is the category's sheet: its name in lang, cut to a sheet name's 31
// characters.
func SheetName(lang string, c Category) string {
	n := []rune(c.Name(lang))
	if len(n) > 31 {
		n = n[:31]
	}
	return string(n)
}

// WriteXLSX writes the report as a workbook: a summary sheet (the categories with
// their counts and money, the cabinet's lines by type, the totals' check) and a
// sheet per category with its orders. Money is numbers with two decimals, dates are
// date cells in loc, headers and notes are in lang (ru or en).
func WriteXLSX(w io.Writer, r Report, lang string, loc *time.Location) error {
	f := excelize.NewFile()
	defer f.Close()
	summary := Word(lang, "summary")
	if err := f.SetSheetName("Sheet1", summary); err != nil {
		return err
	}
	moneyFmt, dayFmt := "0.00", "yyyy-mm-dd"
	if lang == "ru" {
		dayFmt = "dd.mm.yyyy"
	}
	moneyStyle, err := f.NewStyle(&excelize.Style{CustomNumFmt: &moneyFmt})
	if err != nil {
		return err
	}
	dayStyle, err := f.NewStyle(&excelize.Style{CustomNumFmt: &dayFmt})
	if err != nil {
		return err
	}
	bold, err := f.NewStyle(&excelize.Style{Font: &excelize.Font{Bold: true}})
	if err != nil {
		return err
	}
	money := func(d decimal.Decimal) any { return export.MoneyCell(&d, moneyStyle) }
	moneyP := func(d *decimal.Decimal) any { return export.MoneyCell(d, moneyStyle) }
	dayCell := func(t *time.Time) any {
		if t == nil {
			return nil
		}
		l := t.In(loc)
		return excelize.Cell{StyleID: dayStyle, Value: time.Date(l.Year(), l.Month(), l.Day(), 0, 0, 0, 0, time.UTC)}
	}
	b := func(s string) any { return excelize.Cell{StyleID: bold, Value: s} }
	plain := func(d decimal.Decimal) string { return PlainMoney(d) }

	type sheet struct {
		sw  *excelize.StreamWriter
		row int
	}
	put := func(s *sheet, cells ...any) error {
		s.row++
		cell, err := excelize.CoordinatesToCellName(1, s.row)
		if err != nil {
			return err
		}
		return s.sw.SetRow(cell, cells)
	}
	open := func(name string, widths []float64) (*sheet, error) {
		if name != summary {
			if _, err := f.NewSheet(name); err != nil {
				return nil, err
			}
		}
		sw, err := f.NewStreamWriter(name)
		if err != nil {
			return nil, err
		}
		for i, wd := range widths {
			if err := sw.SetColWidth(i+1, i+1, wd); err != nil {
				return nil, err
			}
		}
		return &sheet{sw: sw}, nil
	}

	s, err := open(summary, []float64{34, 12, 16, 16, 16})
	if err != nil {
		return err
	}
	rows := [][]any{
		{b(Word(lang, "s_source")), r.Source},
		{b(Word(lang, "s_period")), r.From + " – " + r.To},
		{b(Word(lang, "s_zone")), r.Zone},
		{b(Word(lang, "s_currency")), r.Currency},
		{},
		{b(Word(lang, "s_category")), b(Word(lang, "s_orders")), b(Word(lang, "s_accrued")), b(Word(lang, "s_paid")), b(Word(lang, "s_onec"))},
	}
	for _, c := range r.Categories {
		rows = append(rows, []any{c.Category.Name(lang), c.Orders, money(c.Accrued), money(c.Paid), money(c.OneC)})
	}
	rows = append(rows, []any{}, []any{b(Word(lang, "s_cabinet")), b(Word(lang, "s_lines")), b(Word(lang, "s_amount"))})
	for _, c := range r.Cabinet {
		rows = append(rows, []any{c.Type, c.Lines, money(c.Amount)})
	}
	t := r.Totals
	yes := Word(lang, "no")
	if t.Balanced {
		yes = Word(lang, "yes")
	}
	rows = append(rows, []any{}, []any{b(Word(lang, "s_check"))},
		[]any{Word(lang, "s_lines_sum"), t.Lines, money(t.LinesSum)},
		[]any{Word(lang, "s_orders_sum"), nil, money(t.Orders)},
		[]any{Word(lang, "s_cabinet_sum"), nil, money(t.Cabinet)},
		[]any{Word(lang, "s_balanced"), yes},
		[]any{Word(lang, "s_stated"), nil, moneyP(t.Stated)},
		[]any{Word(lang, "s_stated_diff"), nil, moneyP(t.StatedDifference)},
		[]any{Word(lang, "s_verdict"), Verdict(lang, t, plain)},
	)
	for _, row := range rows {
		if err := put(s, row...); err != nil {
			return err
		}
	}
	if err := s.sw.Flush(); err != nil {
		return err
	}

	widths := []float64{24, 18, 14, 38, 12, 12, 12, 14, 14, 12, 12, 12, 12, 14, 14, 16, 34, 60}
	for _, c := range Categories {
		s, err := open(SheetName(lang, c), widths)
		if err != nil {
			return err
		}
		if err := s.sw.SetPanes(&excelize.Panes{Freeze: true, YSplit: 1, TopLeftCell: "A2", ActivePane: "bottomLeft"}); err != nil {
			return err
		}
		head := make([]any, len(Columns))
		for i, col := range Columns {
			h := Word(lang, col)
			if col == "ordered" || col == "first_paid" || col == "last_paid" {
				h += " (" + loc.String() + ")"
			}
			head[i] = b(h)
		}
		if err := put(s, head...); err != nil {
			return err
		}
		for _, it := range r.ItemsOf(c) {
			var ret any
			if it.Return != "" {
				ret = ReturnWord(lang, it.Return)
			}
			if err := put(s, it.Category.Name(lang), it.OrderID, it.OneCNumber, it.OneCRef,
				dayCell(it.Ordered), dayCell(it.FirstPaid), dayCell(it.LastPaid), moneyP(it.OneCTotal),
				money(it.Accrued), money(it.Commission), money(it.Logistics), money(it.Penalty), money(it.Other),
				money(it.Paid), moneyP(it.Difference), ret, it.Key, Note(lang, it.NoteCode, it.NoteArgs, plain)); err != nil {
				return err
			}
		}
		if err := s.sw.Flush(); err != nil {
			return err
		}
	}
	_, err = f.WriteTo(w)
	return err
}

func moneyText(d *decimal.Decimal) string {
	if d == nil {
		return ""
	}
	return PlainMoney(*d)
}

func day(t *time.Time, loc *time.Location) string {
	if t == nil {
		return ""
	}
	return t.In(loc).Format(time.DateOnly)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
