package export

import (
	"encoding/csv"
	"io"
	"strconv"
	"strings"
	"time"
)

// TimeLayout is how the CSV writes times: with their offset, so a time read in
// another zone still names one instant.
const TimeLayout = "2006-01-02 15:04:05 -07:00"

type csvWriter struct {
	raw  io.Writer
	w    *csv.Writer
	lang string
	loc  *time.Location
	head bool
}

// NewCSV writes rows as CSV to w: UTF-8 with a byte-order mark (Excel otherwise
// reads it as the locale's code page); for ru, ';' between cells and a decimal comma.
// A cell that begins with = + - @ (or a tab or carriage return) is prefixed with
// an apostrophe, so a spreadsheet never runs it as a formula.
func NewCSV(w io.Writer, lang string, loc *time.Location) Writer {
	c := csv.NewWriter(w)
	if lang == "ru" {
		c.Comma = ';'
	}
	c.UseCRLF = true
	return &csvWriter{raw: w, w: c, lang: lang, loc: loc}
}

func (c *csvWriter) header() error {
	if c.head {
		return nil
	}
	c.head = true
	if _, err := io.WriteString(c.raw, "\uFEFF"); err != nil {
		return err
	}
	return c.w.Write(Header(c.lang, c.loc))
}

func (c *csvWriter) Write(r Row) error {
	if err := c.header(); err != nil {
		return err
	}
	total := ""
	if r.Total != nil {
		total = r.Total.StringFixed(2)
		if c.lang == "ru" {
			total = strings.Replace(total, ".", ",", 1)
		}
	}
	done := ""
	if r.Done != nil {
		done = r.Done.Format(TimeLayout)
	}
	cells := []string{r.Source, r.MarketplaceNumber, r.ExternalID, r.Key, r.Kind, r.Status, r.Customer, r.Phone,
		r.OneCNumber, r.OneCDate, r.OneCRef, total, r.Currency, r.Created.Format(TimeLayout), done,
		strconv.Itoa(r.Attempts), r.LastError, r.Warnings}
	for i, v := range cells {
		cells[i] = Neutralise(v)
	}
	if err := c.w.Write(cells); err != nil {
		return err
	}
	c.w.Flush()
	return c.w.Error()
}

func (c *csvWriter) Close() error {
	if err := c.header(); err != nil { // an empty export still has its header
		return err
	}
	c.w.Flush()
	return c.w.Error()
}

// Neutralise prefixes a cell that a spreadsheet would read as a formula with an
// apostrophe: one that begins with = + - @, a tab or a carriage return.
func Neutralise(v string) string {
	if v != "" && strings.ContainsRune("=+-@\t\r", rune(v[0])) {
		return "'" + v
	}
	return v
}
