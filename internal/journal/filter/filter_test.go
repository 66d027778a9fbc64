package filter

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ordersync/ordersync/internal/journal"
)

func TestParse(t *testing.T) {
	almaty, err := time.LoadLocation("Asia/Almaty")
	if err != nil {
		t.Fatal(err)
	}
	at := func(s string) time.Time {
		t.Helper()
		tm, err := time.ParseInLocation(time.DateTime, s, almaty)
		if err != nil {
			t.Fatal(err)
		}
		return tm
	}
	pages := Options{Names: true, MaxQuery: 200}
	for _, c := range []struct {
		name string
		v    Values
		o    Options
		want journal.Filter // in Asia/Almaty
		bad  []Field
	}{
		{name: "nothing", v: Values{}, want: journal.Filter{}},
		{name: "everything", o: pages,
			v: Values{Query: "+7 701 234-56-78", Status: "failed", Source: "kaspi", Kind: "order.create", From: "2026-09-01", To: "2026-09-30", Warnings: true},
			want: journal.Filter{Query: "+7 701 234-56-78", Status: journal.StatusFailed, Source: "kaspi", Kind: "order.create",
				CreatedFrom: at("2026-09-01 00:00:00"), CreatedBefore: at("2026-10-01 00:00:00"), WarningsOnly: true}},
		{name: "statuses", v: Values{Status: "pending"}, want: journal.Filter{Status: journal.StatusPending}},
		{name: "done", v: Values{Status: "done"}, want: journal.Filter{Status: journal.StatusDone}},
		{name: "unknown status", v: Values{Status: "stuck"}, bad: []Field{FieldStatus}},
		{name: "status is case-sensitive", v: Values{Status: "Done"}, bad: []Field{FieldStatus}},
		{name: "one day", v: Values{From: "2026-09-16", To: "2026-09-16"},
			want: journal.Filter{CreatedFrom: at("2026-09-16 00:00:00"), CreatedBefore: at("2026-09-17 00:00:00")}},
		{name: "from only", v: Values{From: "2026-09-16"}, want: journal.Filter{CreatedFrom: at("2026-09-16 00:00:00")}},
		{name: "to only, inclusive", v: Values{To: "2026-12-31"}, want: journal.Filter{CreatedBefore: at("2027-01-01 00:00:00")}},
		{name: "not a date", v: Values{From: "16.09.2026"}, bad: []Field{FieldFrom}},
		{name: "no such day", v: Values{To: "2026-02-30"}, bad: []Field{FieldTo}},
		{name: "both not dates", v: Values{From: "2026-13-01", To: "yesterday"}, bad: []Field{FieldFrom, FieldTo}},
		{name: "to before from", v: Values{From: "2026-11-07", To: "2026-11-01"}, bad: []Field{FieldPeriod}},
		{name: "a bad date is no period", v: Values{From: "2026-11-07", To: "2026-11-0"}, bad: []Field{FieldTo}},
		{name: "dates are not trimmed", v: Values{From: " 2026-11-07"}, bad: []Field{FieldFrom}},
		{name: "everything wrong, in order", o: pages,
			v:   Values{Query: strings.Repeat("я", 201), Status: "x", Source: "Kaspi!", Kind: "order create", From: "2026-11-07", To: "2026-11-01"},
			bad: []Field{FieldQuery, FieldStatus, FieldSource, FieldKind, FieldPeriod}},
		{name: "the CLI takes any source and kind", v: Values{Source: "Kaspi!", Kind: "order create"},
			want: journal.Filter{Source: "Kaspi!", Kind: "order create"}},
		{name: "the pages check names", o: pages, v: Values{Source: "Kaspi!"}, bad: []Field{FieldSource}},
		{name: "a source of 32", o: pages, v: Values{Source: strings.Repeat("a", 32)}, want: journal.Filter{Source: strings.Repeat("a", 32)}},
		{name: "a source of 33", o: pages, v: Values{Source: strings.Repeat("a", 33)}, bad: []Field{FieldSource}},
		{name: "kinds have dots", o: pages, v: Values{Kind: "stock.snapshot"}, want: journal.Filter{Kind: "stock.snapshot"}},
		{name: "a query of 200 characters", o: pages, v: Values{Query: strings.Repeat("я", 200)}, want: journal.Filter{Query: strings.Repeat("я", 200)}},
		{name: "no limit on the query", v: Values{Query: strings.Repeat("я", 201)}, want: journal.Filter{Query: strings.Repeat("я", 201)}},
	} {
		p, err := Parse(c.v, c.o)
		if len(c.bad) > 0 {
			var fe *Error
			if !errors.As(err, &fe) || !slices.Equal(fe.Fields, c.bad) || fe.Values != c.v {
				t.Errorf("%s: %v, want the fields %v wrong", c.name, err, c.bad)
			}
			for _, f := range c.bad {
				if !fe.Has(f) || !strings.Contains(err.Error(), string(f)+":") {
					t.Errorf("%s: %q does not name %s", c.name, err, f)
				}
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		got := p.Filter(almaty)
		if got.Status != c.want.Status || got.Source != c.want.Source || got.Kind != c.want.Kind || got.Query != c.want.Query ||
			got.WarningsOnly != c.want.WarningsOnly || !got.CreatedFrom.Equal(c.want.CreatedFrom) || !got.CreatedBefore.Equal(c.want.CreatedBefore) {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}

// TestPeriodAsTheSurfacesHadIt: a period's bounds are what time.ParseInLocation made
// of its dates in the CLI and the pages, the last day's next midnight excluded, in
// zones with and without daylight saving time.
func TestPeriodAsTheSurfacesHadIt(t *testing.T) {
	for _, zone := range []string{"UTC", "Asia/Almaty", "Europe/Berlin", "America/Havana"} {
		loc, err := time.LoadLocation(zone)
		if err != nil {
			t.Fatal(err)
		}
		// America/Havana moves its clocks at midnight: 2026-03-08 has no 00:00.
		for _, c := range [][2]string{{"2026-03-07", "2026-03-08"}, {"2026-03-29", "2026-10-25"}, {"2026-01-01", "2026-01-01"}} {
			p, err := ParsePeriod(c[0], c[1])
			if err != nil {
				t.Fatal(err)
			}
			from, before := p.Bounds(loc)
			wantFrom, _ := time.ParseInLocation(time.DateOnly, c[0], loc)
			wantTo, _ := time.ParseInLocation(time.DateOnly, c[1], loc)
			if !from.Equal(wantFrom) || !before.Equal(wantTo.AddDate(0, 0, 1)) {
				t.Errorf("%s %v: [%s, %s), want [%s, %s)", zone, c, from, before, wantFrom, wantTo.AddDate(0, 0, 1))
			}
			if p.From.String() != c[0] || p.To.String() != c[1] {
				t.Errorf("%v: the days are %s and %s", c, p.From, p.To)
			}
		}
	}
	if p, err := ParsePeriod("", ""); err != nil || !p.From.IsZero() || !p.To.IsZero() {
		t.Errorf("an open period: %+v %v", p, err)
	} else if from, before := p.Bounds(time.UTC); !from.IsZero() || !before.IsZero() {
		t.Errorf("an open period's bounds: %s %s", from, before)
	}
	var fe *Error
	if _, err := ParsePeriod("2026-09-30", "2026-09-01"); !errors.As(err, &fe) || !slices.Equal(fe.Fields, []Field{FieldPeriod}) ||
		fe.Values.From != "2026-09-30" || fe.Values.To != "2026-09-01" {
		t.Errorf("to before from: %v", err)
	}
}

func TestIsSource(t *testing.T) {
	for s, want := range map[string]bool{"kaspi": true, "site_2": true, "my-shop": true, "": false, "Kaspi": false, "a b": false, "ozon.ru": false} {
		if IsSource(s) != want {
			t.Errorf("IsSource(%q) = %v", s, !want)
		}
	}
}
