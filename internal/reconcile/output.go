package reconcile

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

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

// WriteTable writes the totals of every category, then the items that are not ok,
// for people.
func WriteTable(w io.Writer, r Report) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "%s, %s – %s\n\n", r.Source, r.From, r.To)
	fmt.Fprintln(tw, "CATEGORY\tORDERS")
	for _, c := range Categories {
		fmt.Fprintf(tw, "%s\t%d\n", c, r.Totals[c])
	}
	bad := 0
	for _, it := range r.Items {
		if it.Category == OK {
			continue
		}
		if bad == 0 {
			fmt.Fprintln(tw, "\nCATEGORY\tEXTERNAL ID\tNUMBER\tSTATUS\tMARKETPLACE TOTAL\t1C\tNOTE")
		}
		bad++
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", it.Category, it.ExternalID, dash(it.MarketplaceNumber),
			dash(it.Status), dash(money(it.MarketplaceTotal)), dash(oneCSummary(it.OneC)), oneLine(it.Note))
	}
	if bad == 0 {
		fmt.Fprintln(tw, "\nevery order is ok")
	}
	return tw.Flush()
}

// csvHeader is the CSV's first row; a 1C order per row's 1C columns would repeat
// the order, so the 1C side is one summary column.
var csvHeader = []string{"category", "external_id", "marketplace_number", "key", "status", "marketplace_total",
	"onec_numbers", "onec_refs", "onec_totals", "onec_cancelled", "note"}

// WriteCSV writes every item, ok ones too, as UTF-8 CSV with a header row.
func WriteCSV(w io.Writer, r Report) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(csvHeader); err != nil {
		return err
	}
	for _, it := range r.Items {
		nums, refs, totals, cancelled := oneCColumns(it.OneC)
		if err := cw.Write([]string{string(it.Category), it.ExternalID, it.MarketplaceNumber, it.Key, it.Status,
			money(it.MarketplaceTotal), nums, refs, totals, cancelled, it.Note}); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// Sheet names of the XLSX workbook.
const (
	SheetItems  = "orders"
	SheetTotals = "totals"
)

// WriteXLSX writes the report as an XLSX workbook: a sheet of every item (money as
// numbers with two decimals) and a sheet of the totals, streamed with excelize's
// stream writer.
func WriteXLSX(w io.Writer, r Report) (err error) {
	f := excelize.NewFile()
	defer f.Close() // removes the streams' temporary files
	if err := f.SetSheetName("Sheet1", SheetItems); err != nil {
		return err
	}
	if _, err := f.NewSheet(SheetTotals); err != nil {
		return err
	}
	moneyFmt := "0.00"
	moneyStyle, err := f.NewStyle(&excelize.Style{CustomNumFmt: &moneyFmt})
	if err != nil {
		return err
	}
	bold, err := f.NewStyle(&excelize.Style{Font: &excelize.Font{Bold: true}})
	if err != nil {
		return err
	}
	header := func(names []string) []any {
		cells := make([]any, len(names))
		for i, n := range names {
			cells[i] = excelize.Cell{StyleID: bold, Value: n}
		}
		return cells
	}
	moneyCell := func(d *decimal.Decimal) any { return export.MoneyCell(d, moneyStyle) }

	sw, err := f.NewStreamWriter(SheetItems)
	if err != nil {
		return err
	}
	if err := sw.SetPanes(&excelize.Panes{Freeze: true, YSplit: 1, TopLeftCell: "A2", ActivePane: "bottomLeft"}); err != nil {
		return err
	}
	row := 1
	next := func(sw *excelize.StreamWriter, cells []any) error {
		cell, err := excelize.CoordinatesToCellName(1, row)
		if err != nil {
			return err
		}
		row++
		return sw.SetRow(cell, cells)
	}
	if err := next(sw, header([]string{"category", "external_id", "marketplace_number", "key", "status",
		"marketplace_total", "onec_number", "onec_ref", "onec_total", "onec_cancelled", "note"})); err != nil {
		return err
	}
	for _, it := range r.Items {
		// One row per 1C order, so each 1C total is a number of its own; an item
		// 1C holds nothing for is one row with those cells empty.
		ones := it.OneC
		if len(ones) == 0 {
			ones = []OneCOrder{{}}
		}
		for _, o := range ones {
			var cancelled any
			if o.Ref != "" {
				cancelled = o.Cancelled
			}
			if err := next(sw, []any{string(it.Category), it.ExternalID, it.MarketplaceNumber, it.Key, it.Status,
				moneyCell(it.MarketplaceTotal), o.Number, o.Ref, moneyCell(o.Total), cancelled, it.Note}); err != nil {
				return err
			}
		}
	}
	if err := sw.Flush(); err != nil {
		return err
	}

	tsw, err := f.NewStreamWriter(SheetTotals)
	if err != nil {
		return err
	}
	row = 1
	if err := next(tsw, header([]string{"category", "orders"})); err != nil {
		return err
	}
	for _, c := range Categories {
		if err := next(tsw, []any{string(c), r.Totals[c]}); err != nil {
			return err
		}
	}
	if err := next(tsw, []any{"source", r.Source}); err != nil {
		return err
	}
	if err := next(tsw, []any{"from", r.From}); err != nil {
		return err
	}
	if err := next(tsw, []any{"to", r.To}); err != nil {
		return err
	}
	if err := tsw.Flush(); err != nil {
		return err
	}
	_, err = f.WriteTo(w)
	return err
}

func money(d *decimal.Decimal) string {
	if d == nil {
		return ""
	}
	return d.StringFixed(max(2, -d.Exponent()))
}

func oneCSummary(os []OneCOrder) string {
	parts := make([]string, len(os))
	for i, o := range os {
		s := o.Number
		if o.Total != nil {
			s += " " + money(o.Total)
		}
		if o.Cancelled {
			s += " (cancelled)"
		}
		parts[i] = s
	}
	return strings.Join(parts, "; ")
}

func oneCColumns(os []OneCOrder) (nums, refs, totals, cancelled string) {
	n, r, t, c := make([]string, len(os)), make([]string, len(os)), make([]string, len(os)), make([]string, len(os))
	for i, o := range os {
		n[i], r[i], t[i], c[i] = o.Number, o.Ref, money(o.Total), fmt.Sprint(o.Cancelled)
	}
	return strings.Join(n, ";"), strings.Join(r, ";"), strings.Join(t, ";"), strings.Join(c, ";")
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
