package kaspi

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/shopspring/decimal"
	"github.com/xuri/excelize/v2"

	"github.com/ordersync/ordersync/internal/order"
	"github.com/ordersync/ordersync/internal/payouts"
)

// Kaspi has no API for payouts: the seller exports them from the cabinet as an
// xlsx file, and `ordersync payouts import` reads it. A column is found by its
// header, whatever its place, case, spacing or ё/е; the first of the sheet's first
// rows that holds every required header is the header row.

// PayoutColumn is one column the importer reads.
type PayoutColumn struct {
	Field    string   // the field it fills, for messages
	Headers  []string // the headers it is known by, the first as named in messages
	Required bool
}

// PayoutColumns are the columns of Kaspi's payout export the importer reads.
var PayoutColumns = []PayoutColumn{
	{Field: "order_id", Headers: []string{"Номер заказа", "№ заказа", "Заказ"}, Required: true},
	{Field: "date", Headers: []string{"Дата операции", "Дата"}, Required: true},
	{Field: "type", Headers: []string{"Тип операции", "Операция"}, Required: true},
	{Field: "amount", Headers: []string{"Сумма", "Сумма заказа", "Сумма операции"}, Required: true},
	{Field: "commission", Headers: []string{"Комиссия", "Комиссия Kaspi"}},
	{Field: "delivery", Headers: []string{"Доставка", "Стоимость доставки", "Kaspi Доставка"}},
	{Field: "penalty", Headers: []string{"Штраф", "Штрафы"}},
	{Field: "other", Headers: []string{"Прочие удержания", "Прочее"}},
	{Field: "payout", Headers: []string{"К выплате", "Сумма к выплате", "Итого к выплате"}},
	{Field: "line_id", Headers: []string{"ID операции", "Номер операции"}},
	{Field: "sku", Headers: []string{"Артикул", "SKU"}},
	{Field: "quantity", Headers: []string{"Количество", "Кол-во"}},
	{Field: "currency", Headers: []string{"Валюта"}},
}

// headerRows is how far down a sheet the header row is looked for.
const headerRows = 20

// PayoutFile is what a payout export holds.
type PayoutFile struct {
	Sheet string
	Lines []payouts.Line
	// Total is the file's total row («Итого», «Всего») as a line's amount, nil when
	// the file has none.
	Total *decimal.Decimal
}

// PayoutOptions configure the reading of an export.
type PayoutOptions struct {
	// Source of the lines; default Name.
	Source string
	// Location is the zone of the file's dates, which carry none; default
	// Asia/Almaty.
	Location *time.Location
	// Currency when the file has no «Валюта» column; default KZT.
	Currency string
}

// ReadPayouts reads a payout export. Nothing is returned but an error when a
// required column is missing or a cell does not read: the error names the file,
// the sheet, and the row and column.
func ReadPayouts(name string, r io.Reader, opt PayoutOptions) (*PayoutFile, error) {
	if opt.Source == "" {
		opt.Source = Name
	}
	if opt.Currency == "" {
		opt.Currency = "KZT"
	}
	if opt.Location == nil {
		loc, err := time.LoadLocation("Asia/Almaty")
		if err != nil {
			loc = time.FixedZone("ALMT", 5*60*60)
		}
		opt.Location = loc
	}
	base := filepath.Base(name)
	f, err := excelize.OpenReader(r)
	if err != nil {
		return nil, fmt.Errorf("%s: not an xlsx file: %w", base, err)
	}
	defer f.Close()
	var missing []string
	for _, sheet := range f.GetSheetList() {
		rows, err := f.GetRows(sheet, excelize.Options{RawCellValue: true})
		if err != nil {
			return nil, fmt.Errorf("%s, sheet «%s»: %w", base, sheet, err)
		}
		hdr, cols, miss := findHeader(rows)
		if hdr < 0 {
			if len(rows) > 0 {
				missing = append(missing, fmt.Sprintf("sheet «%s» has no column %s", sheet, strings.Join(miss, ", ")))
			}
			continue
		}
		p := &payoutReader{file: base, sheet: sheet, cols: cols, opt: opt}
		return p.read(rows, hdr)
	}
	if len(missing) == 0 {
		return nil, fmt.Errorf("%s: no sheet holds rows", base)
	}
	return nil, fmt.Errorf("%s: no payout table found: %s (looked in the first %d rows of each sheet)", base,
		strings.Join(missing, "; "), headerRows)
}

// normHeader is a header as compared: lower case, ё as е, spaces collapsed.
func normHeader(s string) string {
	s = strings.ToLower(strings.ReplaceAll(strings.ReplaceAll(s, "ё", "е"), "Ё", "е"))
	return strings.Join(strings.Fields(s), " ")
}

// findHeader finds the header row: the first of the first rows that holds every
// required column. It returns the row, each field's column index, and otherwise the
// required columns missing from the closest candidate.
func findHeader(rows [][]string) (int, map[string]int, []string) {
	var best []string
	for i := 0; i < len(rows) && i < headerRows; i++ {
		cols := map[string]int{}
		for j, cell := range rows[i] {
			h := normHeader(cell)
			if h == "" {
				continue
			}
			for _, c := range PayoutColumns {
				if _, ok := cols[c.Field]; ok {
					continue
				}
				for _, name := range c.Headers {
					if normHeader(name) == h {
						cols[c.Field] = j
						break
					}
				}
			}
		}
		var miss []string
		for _, c := range PayoutColumns {
			if _, ok := cols[c.Field]; c.Required && !ok {
				miss = append(miss, "«"+c.Headers[0]+"»")
			}
		}
		if len(miss) == 0 {
			return i, cols, nil
		}
		if best == nil || len(miss) < len(best) {
			best = miss
		}
	}
	return -1, nil, best
}

type payoutReader struct {
	file, sheet string
	cols        map[string]int
	opt         PayoutOptions
}

// cellError names the cell: file, sheet, row (1-based, as the spreadsheet shows it)
// and column (its header and letter).
func (p *payoutReader) cellError(row int, field string, err error) error {
	col := p.cols[field]
	letter, _ := excelize.ColumnNumberToName(col + 1)
	return fmt.Errorf("%s, sheet «%s», row %d, column «%s» (%s): %w", p.file, p.sheet, row+1, p.header(field), letter, err)
}

func (p *payoutReader) header(field string) string {
	for _, c := range PayoutColumns {
		if c.Field == field {
			return c.Headers[0]
		}
	}
	return field
}

func (p *payoutReader) cell(r []string, field string) string {
	j, ok := p.cols[field]
	if !ok || j >= len(r) {
		return ""
	}
	return strings.TrimSpace(r[j])
}

// totalRow says whether a row is the table's total: «Итого» or «Всего» in its first
// cells, with no order number.
func totalRow(r []string) bool {
	for j := 0; j < len(r) && j < 3; j++ {
		h := normHeader(r[j])
		if strings.HasPrefix(h, "итого") || strings.HasPrefix(h, "всего") {
			return true
		}
	}
	return false
}

func (p *payoutReader) read(rows [][]string, hdr int) (*PayoutFile, error) {
	out := &PayoutFile{Sheet: p.sheet}
	seen := map[string]int{}
	var errs []error
	for i := hdr + 1; i < len(rows); i++ {
		r := rows[i]
		if blank(r) {
			continue
		}
		if totalRow(r) {
			parts, err := p.parts(r, i, false)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			t := parts.Amount
			out.Total = &t
			continue
		}
		l, err := p.line(r, i, seen)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out.Lines = append(out.Lines, l)
	}
	if len(errs) > 0 {
		if len(errs) > 10 {
			errs = append(errs[:10], fmt.Errorf("and %d more", len(errs)-10))
		}
		return nil, fmt.Errorf("%s: %d rows do not read, nothing imported: %w", p.file, len(errs), errors.Join(errs...))
	}
	if len(out.Lines) == 0 {
		return nil, fmt.Errorf("%s, sheet «%s»: the table has no rows under its header (row %d)", p.file, p.sheet, hdr+1)
	}
	return out, nil
}

func blank(r []string) bool {
	for _, c := range r {
		if strings.TrimSpace(c) != "" {
			return false
		}
	}
	return true
}

// number reads an amount as the cabinet writes it: "1500.5", "1 500,50", "-75".
func number(s string) (decimal.Decimal, error) {
	s = strings.NewReplacer(" ", "", "\u00a0", "", "\u202f", "", "₸", "").Replace(s)
	if strings.Count(s, ",") == 1 && !strings.Contains(s, ".") {
		s = strings.Replace(s, ",", ".", 1)
	}
	if s == "" {
		return decimal.Zero, nil
	}
	d, err := order.ParseDecimal(s)
	if err != nil {
		return d, fmt.Errorf("%q is not a number", s)
	}
	return d, nil
}

// date reads a date cell: an Excel serial date, or "16.09.2026", "16.09.2026 10:00",
// "2026-09-16", … in the file's zone.
func (p *payoutReader) date(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, errors.New("is empty")
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil && f > 0 && f < 2958466 {
		t, err := excelize.ExcelDateToTime(f, false)
		if err == nil {
			return time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), 0, p.opt.Location), nil
		}
	}
	for _, layout := range []string{"02.01.2006 15:04:05", "02.01.2006 15:04", "02.01.2006", time.DateTime,
		"2006-01-02 15:04", time.DateOnly, "2006-01-02T15:04:05"} {
		if t, err := time.ParseInLocation(layout, s, p.opt.Location); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is not a date (DD.MM.YYYY)", s)
}

// parts reads a row's amounts. The cabinet writes what it withholds (commission,
// delivery, penalties, other) as positive or negative numbers; the line takes them
// as withheld (negative), and given back for a return. «Сумма» is the sale's
// amount, reversed for a return. When «К выплате» is given it is the line's amount,
// and whatever the other columns do not explain is Other.
func (p *payoutReader) parts(r []string, i int, isReturn bool) (payouts.Line, error) {
	var l payouts.Line
	get := func(field string) (decimal.Decimal, error) {
		d, err := number(p.cell(r, field))
		if err != nil {
			return d, p.cellError(i, field, err)
		}
		return d, nil
	}
	sign := decimal.NewFromInt(1)
	if isReturn {
		sign = sign.Neg()
	}
	amount, err := get("amount")
	if err != nil {
		return l, err
	}
	l.AccruedForSale = amount.Abs().Mul(sign)
	if amount.IsNegative() && !isReturn {
		l.AccruedForSale = amount // a correction the cabinet wrote negative
	}
	for _, f := range []struct {
		field string
		dst   *decimal.Decimal
		back  bool // given back on a return
	}{{"commission", &l.Commission, true}, {"delivery", &l.Logistics, false}, {"penalty", &l.Penalty, false},
		{"other", &l.Other, false}} {
		d, err := get(f.field)
		if err != nil {
			return l, err
		}
		*f.dst = d.Abs().Neg()
		if f.back && isReturn {
			*f.dst = d.Abs()
		}
	}
	l.Amount = l.Parts()
	if _, ok := p.cols["payout"]; ok && p.cell(r, "payout") != "" {
		pay, err := get("payout")
		if err != nil {
			return l, err
		}
		l.Other = l.Other.Add(pay.Sub(l.Amount))
		l.Amount = pay
	}
	return l, nil
}

func (p *payoutReader) line(r []string, i int, seen map[string]int) (payouts.Line, error) {
	typ := p.cell(r, "type")
	lt := normHeader(typ)
	isReturn := strings.Contains(lt, "возврат")
	l, err := p.parts(r, i, isReturn)
	if err != nil {
		return l, err
	}
	l.Source, l.Type, l.OrderID = p.opt.Source, typ, p.cell(r, "order_id")
	if l.Date, err = p.date(p.cell(r, "date")); err != nil {
		return l, p.cellError(i, "date", err)
	}
	if typ == "" {
		return l, p.cellError(i, "type", errors.New("is empty"))
	}
	switch {
	case l.OrderID == "":
		l.Kind = payouts.KindCabinet
	case isReturn:
		l.Kind = payouts.KindReturn
	case strings.Contains(lt, "продаж") || strings.Contains(lt, "оплат") || strings.Contains(lt, "заказ"):
		l.Kind = payouts.KindSale
	default:
		l.Kind = payouts.KindOrderService
	}
	l.SKU = p.cell(r, "sku")
	if q := p.cell(r, "quantity"); q != "" {
		d, err := number(q)
		if err != nil {
			return l, p.cellError(i, "quantity", err)
		}
		l.Quantity = &d
	}
	l.Currency = strings.ToUpper(p.cell(r, "currency"))
	if l.Currency == "" || l.Currency == "₸" || l.Currency == "ТГ" || l.Currency == "ТЕНГЕ" {
		l.Currency = p.opt.Currency
	}
	raw := map[string]string{"file": p.file, "sheet": p.sheet, "row": strconv.Itoa(i + 1)}
	for _, c := range PayoutColumns {
		if v := p.cell(r, c.Field); v != "" {
			raw[c.Headers[0]] = v
		}
	}
	l.Raw, _ = json.Marshal(raw)
	l.LineID = p.cell(r, "line_id")
	if l.LineID == "" {
		l.LineID = contentID(l, seen)
	}
	if err := l.Validate(); err != nil {
		return l, fmt.Errorf("%s, sheet «%s», row %d: %w", p.file, p.sheet, i+1, err)
	}
	return l, nil
}

// contentID is the id of a row that has none: its order, and a digest of what it
// says (date, type, amounts, SKU), so that the same row exported again in another
// file is the same line; identical rows of one file are told apart by their count.
func contentID(l payouts.Line, seen map[string]int) string {
	h := sha256.New()
	for _, s := range []string{l.OrderID, l.Date.UTC().Format(time.RFC3339), l.Type, l.SKU, l.Amount.String(),
		l.AccruedForSale.String(), l.Commission.String(), l.Logistics.String(), l.Penalty.String(), l.Other.String()} {
		io.WriteString(h, s)
		h.Write([]byte{0})
	}
	id := cmpOr(l.OrderID, "cabinet") + ":" + hex.EncodeToString(h.Sum(nil))[:16]
	seen[id]++
	if n := seen[id]; n > 1 {
		id += ":" + strconv.Itoa(n)
	}
	return id
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
