package export

import (
	"encoding/csv"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/shopspring/decimal"
)

// TimeLayout is how the English CSV writes times: with their offset, so a time read
// in another zone still names one instant.
const TimeLayout = "2006-01-02 15:04:05 -07:00"

// TimeLayoutRU is how the Russian CSV writes times: as a Russian Excel reads a date
// with its time (the header names the zone).
const TimeLayoutRU = "02.01.2006 15:04:05"

// OneCDateLayout is how 1C writes its zone-less dates.
const OneCDateLayout = "2006-01-02T15:04:05"

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
// an apostrophe, so a spreadsheet never runs it as a formula — except a phone (see
// Neutralise).
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
	layout := TimeLayout
	if c.lang == "ru" {
		layout = TimeLayoutRU
	}
	when := func(t *time.Time) string {
		if t == nil {
			return ""
		}
		return t.Format(layout)
	}
	created := r.Created
	oneCDate := r.OneCDate
	if t, err := time.Parse(OneCDateLayout, r.OneCDate); err == nil && c.lang == "ru" {
		oneCDate = t.Format(TimeLayoutRU)
	}
	money := func(d *decimal.Decimal) string {
		if d == nil {
			return ""
		}
		s := d.StringFixed(2)
		if c.lang == "ru" {
			s = strings.Replace(s, ".", ",", 1)
		}
		return s
	}
	cells := []string{r.Source, r.MarketplaceNumber, r.ExternalID, r.Key, Word(c.lang, "kind", r.Kind),
		Word(c.lang, "status", r.Status), r.Customer, r.Phone,
		r.OneCNumber, oneCDate, r.OneCRef, total, r.Currency, when(&created), when(r.Done),
		strconv.Itoa(r.Attempts), r.LastError, r.Warnings,
		Word(c.lang, "state", r.State), when(r.Ordered), money(r.OneCTotal)}
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
// apostrophe: one that begins with = + - @, a tab or a carriage return. A phone
// (+7 701 234-56-78: digits, spaces and + - ( ) . only) is left as it is, so it stays
// readable: with no letter, no quote and no other sign it cannot name a function,
// a cell of another sheet or an external program, so a spreadsheet that reads it as
// a formula can at worst compute a number from it, never run anything.
func Neutralise(v string) string {
	if v != "" && strings.ContainsRune("=+-@\t\r", rune(v[0])) && !isPhone(v) {
		return "'" + v
	}
	return v
}

// isPhone reports whether v is made of digits, spaces and + - ( ) . only, with a
// digit.
func isPhone(v string) bool {
	digit := false
	for _, r := range v {
		switch {
		case r >= '0' && r <= '9':
			digit = true
		case r == ' ', r == '+', r == '-', r == '(', r == ')', r == '.':
		default:
			return false
		}
	}
	return digit
}
