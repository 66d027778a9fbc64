package export

import (
	"fmt"
	"io"
	"time"

	"github.com/shopspring/decimal"
	"github.com/xuri/excelize/v2"
)

// Sheet is the name of the XLSX export's one sheet.
const Sheet = "journal"

type xlsxWriter struct {
	w      io.Writer
	f      *excelize.File
	sw     *excelize.StreamWriter
	row    int
	lang   string
	money  int // style: 0.00
	when   int // style: dd.mm.yyyy hh:mm:ss (ru), yyyy-mm-dd hh:mm:ss (en)
	closed bool
}

// widths are the columns' widths, in characters, by Columns.
var widths = map[string]float64{"source": 11, "marketplace_number": 18, "external_id": 18, "key": 34, "kind": 17,
	"status": 11, "customer": 24, "phone": 18, "onec_number": 14, "onec_date": 19, "onec_ref": 38, "total": 13,
	"currency": 8, "created": 19, "done": 19, "attempts": 8, "last_error": 48, "warnings": 16, "state": 16,
	"ordered": 19, "onec_total": 13}

// NewXLSX writes rows as an XLSX workbook of one sheet, streamed: the rows go to a
// temporary file as they come (excelize's stream writer) and the workbook is
// written to w by Close. Totals are numbers with two decimals; created, done and the
// order's date are date cells in loc, whose name the headers carry, and 1C's date a
// date cell of 1C's own clock; statuses, kinds and states are words of lang.
func NewXLSX(w io.Writer, lang string, loc *time.Location) (Writer, error) {
	f := excelize.NewFile()
	if err := f.SetSheetName("Sheet1", Sheet); err != nil {
		return nil, err
	}
	sw, err := f.NewStreamWriter(Sheet)
	if err != nil {
		return nil, err
	}
	x := &xlsxWriter{w: w, f: f, sw: sw, row: 1, lang: lang}
	fmtMoney, fmtWhen := "0.00", "yyyy-mm-dd hh:mm:ss"
	if lang == "ru" {
		fmtWhen = "dd.mm.yyyy hh:mm:ss"
	}
	if x.money, err = f.NewStyle(&excelize.Style{CustomNumFmt: &fmtMoney}); err != nil {
		return nil, err
	}
	if x.when, err = f.NewStyle(&excelize.Style{CustomNumFmt: &fmtWhen}); err != nil {
		return nil, err
	}
	bold, err := f.NewStyle(&excelize.Style{Font: &excelize.Font{Bold: true}})
	if err != nil {
		return nil, err
	}
	for i, c := range Columns { // the stream writer takes widths before the first row
		if err := sw.SetColWidth(i+1, i+1, widths[c]); err != nil {
			return nil, err
		}
	}
	if err := sw.SetPanes(&excelize.Panes{Freeze: true, YSplit: 1, TopLeftCell: "A2", ActivePane: "bottomLeft"}); err != nil {
		return nil, err
	}
	h := Header(lang, loc)
	cells := make([]any, len(h))
	for i, v := range h {
		cells[i] = excelize.Cell{StyleID: bold, Value: v}
	}
	if err := x.next(cells); err != nil {
		return nil, err
	}
	return x, nil
}

func (x *xlsxWriter) next(cells []any) error {
	cell, err := excelize.CoordinatesToCellName(1, x.row)
	if err != nil {
		return err
	}
	x.row++
	return x.sw.SetRow(cell, cells)
}

// MoneyCell is an amount as an XLSX stream writer's cell with style (a 0.00
// format), nil for none. A spreadsheet keeps numbers as binary floating point, so
// the exact decimal becomes one only here, at the edge, and only when it comes back
// exactly (15 significant digits and fewer: any real order); otherwise the cell is
// the exact text, never a rounded number.
func MoneyCell(d *decimal.Decimal, style int) any {
	if d == nil {
		return nil
	}
	r := d.Round(2)
	f, _ := r.Float64()
	if !decimal.NewFromFloat(f).Equal(r) {
		return r.StringFixed(2)
	}
	return excelize.Cell{StyleID: style, Value: f}
}

// timeCell is t as a date cell: the wall clock in its zone (a spreadsheet's dates
// have none; the header names it).
func (x *xlsxWriter) timeCell(t *time.Time) any {
	if t == nil {
		return nil
	}
	wall := time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), 0, time.UTC)
	return excelize.Cell{StyleID: x.when, Value: wall}
}

func (x *xlsxWriter) Write(r Row) error {
	if x.closed {
		return fmt.Errorf("export: write after close")
	}
	created := r.Created
	var oneCDate any = r.OneCDate
	if t, err := time.Parse(OneCDateLayout, r.OneCDate); err == nil {
		oneCDate = x.timeCell(&t)
	} else if r.OneCDate == "" {
		oneCDate = nil
	}
	return x.next([]any{r.Source, r.MarketplaceNumber, r.ExternalID, r.Key, Word(x.lang, "kind", r.Kind),
		Word(x.lang, "status", r.Status), r.Customer, r.Phone,
		r.OneCNumber, oneCDate, r.OneCRef, MoneyCell(r.Total, x.money), r.Currency, x.timeCell(&created), x.timeCell(r.Done),
		r.Attempts, r.LastError, r.Warnings, Word(x.lang, "state", r.State), x.timeCell(r.Ordered), MoneyCell(r.OneCTotal, x.money)})
}

func (x *xlsxWriter) Close() error {
	if x.closed {
		return nil
	}
	x.closed = true
	defer x.f.Close() // removes the stream's temporary file
	if err := x.sw.Flush(); err != nil {
		return err
	}
	_, err := x.f.WriteTo(x.w)
	return err
}
