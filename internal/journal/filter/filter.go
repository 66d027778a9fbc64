// Package filter reads the filters of a journal listing as a person gives them — the
// flags of `ordersync journal list`, the form of the journal page — into a
// journal.Filter. Both read them here, so a period, a status or a search term means
// the same operations wherever it is typed. Each says what is wrong in its own words:
// Parse names the fields (Error), not the wording.
package filter

import (
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ordersync/ordersync/internal/journal"
)

// Field names one filter.
type Field string

// The fields, in the order an Error lists them.
const (
	FieldQuery  Field = "query"  // the search term (journal.Filter.Query)
	FieldStatus Field = "status" // pending, done or failed
	FieldSource Field = "source" // kaspi, ozon, site, …
	FieldKind   Field = "kind"   // order.create, order.cancel, stock.snapshot
	FieldFrom   Field = "from"   // the period's first day
	FieldTo     Field = "to"     // the period's last day
	FieldPeriod Field = "period" // From and To both dates, To before From
)

// Values are the filters as given: text, unchecked and untrimmed (trimming, like a
// default period, is the surface's choice). Empty means no such filter.
type Values struct {
	Query, Status, Source, Kind string
	// From and To are dates YYYY-MM-DD, both inclusive, in the zone the Filter is
	// made in: the operations created on those days.
	From, To string
	Warnings bool // only the operations with warnings
}

// Options are the checks a surface asks for beyond those every one makes (status,
// dates, period).
type Options struct {
	// Names refuses a source that is no source name ([a-z0-9_-]{1,32}) and a kind
	// that is none (the same, with dots): the pages; the CLI lists nothing for them.
	Names bool
	// MaxQuery, when positive, refuses a search term of more characters.
	MaxQuery int
}

// Parsed is Values checked. The period is days; Filter places it in a zone.
type Parsed struct {
	Status              journal.Status
	Source, Kind, Query string
	Warnings            bool
	Period              Period
}

// Parse checks v. The error, an *Error, names every field that does not parse; the
// Parsed has the others.
func Parse(v Values, o Options) (Parsed, error) {
	p := Parsed{Warnings: v.Warnings}
	var bad []Field
	if o.MaxQuery > 0 && utf8.RuneCountInString(v.Query) > o.MaxQuery {
		bad = append(bad, FieldQuery)
	} else {
		p.Query = v.Query
	}
	switch s := journal.Status(v.Status); s {
	case "", journal.StatusPending, journal.StatusDone, journal.StatusFailed:
		p.Status = s
	default:
		bad = append(bad, FieldStatus)
	}
	if o.Names && v.Source != "" && !IsSource(v.Source) {
		bad = append(bad, FieldSource)
	} else {
		p.Source = v.Source
	}
	if o.Names && v.Kind != "" && !IsSource(strings.ReplaceAll(v.Kind, ".", "_")) {
		bad = append(bad, FieldKind)
	} else {
		p.Kind = v.Kind
	}
	var badPeriod []Field
	p.Period, badPeriod = parsePeriod(v.From, v.To)
	bad = append(bad, badPeriod...)
	if len(bad) > 0 {
		return p, &Error{Values: v, Fields: bad}
	}
	return p, nil
}

// Filter is the journal.Filter of p, its period's days in loc: the operations
// created from the first day's midnight to the midnight after the last.
func (p Parsed) Filter(loc *time.Location) journal.Filter {
	f := journal.Filter{Status: p.Status, Source: p.Source, Kind: p.Kind, Query: p.Query, WarningsOnly: p.Warnings}
	f.CreatedFrom, f.CreatedBefore = p.Period.Bounds(loc)
	return f
}

var sourceRe = regexp.MustCompile(`^[a-z0-9_-]{1,32}$`)

// IsSource reports whether s can be the source of an operation: [a-z0-9_-]{1,32}.
func IsSource(s string) bool { return sourceRe.MatchString(s) }

// A Date is a calendar day, in no zone.
type Date struct {
	Year  int
	Month time.Month
	Day   int
}

// ParseDate reads a date YYYY-MM-DD.
func ParseDate(s string) (Date, bool) {
	t, err := time.Parse(time.DateOnly, s)
	if err != nil {
		return Date{}, false
	}
	return Date{t.Year(), t.Month(), t.Day()}, true
}

// IsZero reports whether d is no date.
func (d Date) IsZero() bool { return d == Date{} }

// In is the midnight d starts with in loc; the zero time for the zero Date.
func (d Date) In(loc *time.Location) time.Time {
	if d.IsZero() {
		return time.Time{}
	}
	return time.Date(d.Year, d.Month, d.Day, 0, 0, 0, 0, loc)
}

// Before reports whether d is an earlier day than e.
func (d Date) Before(e Date) bool {
	return d.Year < e.Year || d.Year == e.Year && (d.Month < e.Month || d.Month == e.Month && d.Day < e.Day)
}

func (d Date) String() string {
	if d.IsZero() {
		return ""
	}
	return fmt.Sprintf("%04d-%02d-%02d", d.Year, d.Month, d.Day)
}

// A Period is the days From to To, both inclusive; a zero end is open.
type Period struct{ From, To Date }

// ParsePeriod reads the dates from and to (YYYY-MM-DD; "" leaves that end open).
// The error, an *Error, names From or To, or both, when one is not a date, and
// Period when To is before From.
func ParsePeriod(from, to string) (Period, error) {
	p, bad := parsePeriod(from, to)
	if len(bad) > 0 {
		return p, &Error{Values: Values{From: from, To: to}, Fields: bad}
	}
	return p, nil
}

func parsePeriod(from, to string) (p Period, bad []Field) {
	okFrom, okTo := true, true
	if from != "" {
		if p.From, okFrom = ParseDate(from); !okFrom {
			bad = append(bad, FieldFrom)
		}
	}
	if to != "" {
		if p.To, okTo = ParseDate(to); !okTo {
			bad = append(bad, FieldTo)
		}
	}
	if okFrom && okTo && !p.From.IsZero() && !p.To.IsZero() && p.To.Before(p.From) {
		bad = append(bad, FieldPeriod)
	}
	return p, bad
}

// Bounds is p in loc as journal.Filter has a period: [from, before), from the first
// day's midnight to the midnight after the last; the zero time for an open end.
func (p Period) Bounds(loc *time.Location) (from, before time.Time) {
	from = p.From.In(loc)
	if !p.To.IsZero() {
		before = p.To.In(loc).AddDate(0, 0, 1)
	}
	return from, before
}

// Error is what is wrong with the filters Values: the Fields that do not parse, in
// the order of the constants. Its text is plain English for a log; a person reads
// the surface's own words for each field.
type Error struct {
	Values Values
	Fields []Field
}

// Has reports whether f is among the fields wrong.
func (e *Error) Has(f Field) bool {
	for _, g := range e.Fields {
		if g == f {
			return true
		}
	}
	return false
}

func (e *Error) Error() string {
	var parts []string
	v := e.Values
	for _, f := range e.Fields {
		switch f {
		case FieldQuery:
			parts = append(parts, fmt.Sprintf("query: %d characters, too long", utf8.RuneCountInString(v.Query)))
		case FieldStatus:
			parts = append(parts, fmt.Sprintf("status: %q is not pending, done or failed", v.Status))
		case FieldSource:
			parts = append(parts, fmt.Sprintf("source: %q is not [a-z0-9_-]{1,32}", v.Source))
		case FieldKind:
			parts = append(parts, fmt.Sprintf("kind: %q is no kind of operation", v.Kind))
		case FieldFrom:
			parts = append(parts, fmt.Sprintf("from: %q is not a date YYYY-MM-DD", v.From))
		case FieldTo:
			parts = append(parts, fmt.Sprintf("to: %q is not a date YYYY-MM-DD", v.To))
		case FieldPeriod:
			parts = append(parts, fmt.Sprintf("period: to %s is before from %s", v.To, v.From))
		}
	}
	return "journal filter: " + strings.Join(parts, "; ")
}
