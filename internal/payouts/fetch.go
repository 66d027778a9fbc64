package payouts

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/shopspring/decimal"
)

// Page is one page of lines a Reader read, as it arrives.
type Page struct {
	// Number counts the pages of the reading from 1; Of is how many the
	// marketplace said there are in the current request (0: it does not say).
	Number, Of int
	Lines      []Line
	// Skipped are the marketplace's records of the page that make no line, each
	// with the reason naming its id and field; the rest of the page is kept.
	Skipped []string
}

// Reader reads a marketplace's financial lines of a period, page by page, calling
// page for each (outside any database transaction: a page is read, then handed on).
// It returns the marketplace's own total of the period when it states one.
type Reader interface {
	Source() string
	Read(ctx context.Context, from, to time.Time, page func(Page) error) (total *decimal.Decimal, err error)
}

// Progress hears of each page saved, with what the reading did so far.
type Progress func(p Page, saved Saved)

// Run reads the lines of [from, to) from r, saves each page into s as it arrives
// (SaveLines: idempotent by line id) and records the reading, failed or not. The
// returned Fetch is the record kept. A failed page stops the reading; the pages
// saved before it stay, and a later reading of the same period repeats them.
func Run(ctx context.Context, s Store, r Reader, from, to time.Time, progress Progress, now func() time.Time) (Fetch, error) {
	if now == nil {
		now = time.Now
	}
	f := Fetch{Source: r.Source(), From: from, To: to, Origin: "api", StartedAt: now()}
	var skipped []string
	total, err := r.Read(ctx, from, to, func(p Page) error {
		saved, err := s.SaveLines(ctx, p.Lines)
		if err != nil {
			return fmt.Errorf("page %d: %w", p.Number, err)
		}
		f.Saved.Inserted += saved.Inserted
		f.Saved.Repeated += saved.Repeated
		skipped = append(skipped, p.Skipped...)
		if progress != nil {
			progress(p, f.Saved)
		}
		return nil
	})
	f.FinishedAt = now()
	f.Total = total
	f.Error = describe(err, skipped)
	// The record is written even when the reading was stopped: on a context of its own.
	if rerr := s.RecordFetch(context.WithoutCancel(ctx), f); rerr != nil {
		err = errors.Join(err, rerr)
	}
	return f, err
}

// describe is the Fetch.Error text of a failed reading, or of readings that kept all but some records.
func describe(err error, skipped []string) string {
	var parts []string
	if err != nil {
		parts = append(parts, err.Error())
	}
	if n := len(skipped); n > 0 {
		s := fmt.Sprintf("%d records skipped: %s", n, skipped[0])
		if n > 1 {
			s += fmt.Sprintf(" (and %d more)", n-1)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

// Import saves the lines of a file read whole (Kaspi's export) in one batch and
// records the reading under origin (the file's name): nothing is written when a
// line is refused. from and to are the period the lines' dates cover.
func Import(ctx context.Context, s Store, source, origin string, lines []Line, total *decimal.Decimal, now func() time.Time) (Fetch, error) {
	if now == nil {
		now = time.Now
	}
	f := Fetch{Source: source, Origin: origin, StartedAt: now(), Total: total}
	for i, l := range lines {
		d := l.Date
		if i == 0 || d.Before(f.From) {
			f.From = d
		}
		if i == 0 || !d.Before(f.To) {
			f.To = d.Add(time.Microsecond)
		}
	}
	saved, err := s.SaveLines(ctx, lines)
	f.Saved, f.FinishedAt = saved, now()
	if err != nil {
		f.Error = err.Error()
	}
	if rerr := s.RecordFetch(context.WithoutCancel(ctx), f); rerr != nil {
		err = errors.Join(err, rerr)
	}
	return f, err
}

// PreviousMonth is the calendar month before the one t falls in, in t's zone: the default
// period of `payouts fetch`.
func PreviousMonth(t time.Time) (from, to time.Time) {
	y, m, _ := t.Date()
	to = time.Date(y, m, 1, 0, 0, 0, 0, t.Location())
	return to.AddDate(0, -1, 0), to
}

// SplitMonths cuts [from, to) at the first of each month in loc, for marketplaces
// that answer at most one month a request.
func SplitMonths(from, to time.Time, loc *time.Location) [][2]time.Time {
	var out [][2]time.Time
	for cur := from; cur.Before(to); {
		l := cur.In(loc)
		next := time.Date(l.Year(), l.Month()+1, 1, 0, 0, 0, 0, loc)
		if next.After(to) {
			next = to
		}
		out = append(out, [2]time.Time{cur, next})
		cur = next
	}
	return out
}
