package stock

import (
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// Spec is a parsed schedule: when its slots fall. A slot is the scheduled fire time:
// for a five-field spec (or @hourly, @daily, …) a minute in the schedule's zone;
// for @every D a multiple of D since the Unix epoch, so that every replica computes
// the same slot whatever its own zone or start time.
type Spec struct {
	text  string
	loc   *time.Location
	every time.Duration // @every D; 0 for a cron spec
	cron  cron.Schedule
}

// parser reads five fields and the descriptors (@hourly, @every 15m).
var parser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// ParseSpec parses a schedule's spec for slots in loc: five fields
// ("*/30 * * * *"), a descriptor (@hourly, @daily, @weekly, @monthly, @yearly) or
// @every D, with D a whole number of seconds of at least 1s.
func ParseSpec(spec string, loc *time.Location) (Spec, error) {
	spec = strings.TrimSpace(spec)
	if loc == nil {
		loc = time.UTC
	}
	if rest, ok := strings.CutPrefix(spec, "@every "); ok {
		d, err := time.ParseDuration(strings.TrimSpace(rest))
		if err != nil {
			return Spec{}, fmt.Errorf("@every: %w", err)
		}
		if d < time.Second || d%time.Second != 0 {
			return Spec{}, fmt.Errorf("@every %s: the interval must be a whole number of seconds, at least 1s", d)
		}
		return Spec{text: spec, loc: loc, every: d}, nil
	}
	if strings.HasPrefix(spec, "TZ=") || strings.HasPrefix(spec, "CRON_TZ=") {
		return Spec{}, fmt.Errorf("%q: set the zone with stock.timezone, not in the spec", spec)
	}
	if err := checkSteps(spec); err != nil {
		return Spec{}, err
	}
	s, err := parser.Parse(spec)
	if err != nil {
		return Spec{}, err
	}
	return Spec{text: spec, loc: loc, cron: s}, nil
}

// String is the spec as written.
func (s Spec) String() string { return s.text }

// Every is the interval of an @every spec, 0 for a cron spec.
func (s Spec) Every() time.Duration { return s.every }

// Next is the first slot strictly after t.
func (s Spec) Next(t time.Time) time.Time {
	if s.every > 0 {
		return s.Floor(t).Add(s.every)
	}
	return s.cron.Next(t.In(s.loc))
}

// Floor is the latest slot at or before t.
func (s Spec) Floor(t time.Time) time.Time {
	if s.every > 0 {
		n := t.UnixNano()
		d := int64(s.every)
		q := n / d
		if n%d < 0 {
			q--
		}
		return time.Unix(0, q*d).In(s.loc)
	}
	// A cron spec knows only the next slot: walk forward from a point before t,
	// trying wider windows until one holds a slot (a yearly spec needs a year).
	for _, back := range []time.Duration{time.Hour, 48 * time.Hour, 32 * 24 * time.Hour, 367 * 24 * time.Hour, 8 * 366 * 24 * time.Hour} {
		var last time.Time
		for n := s.cron.Next(t.Add(-back).In(s.loc)); !n.IsZero() && !n.After(t); n = s.cron.Next(n) {
			last = n
		}
		if !last.IsZero() {
			return last
		}
	}
	return time.Time{}
}

// Label is how a slot is written in a key: local time in the spec's zone, to the
// minute, or to the second when the schedule fires more often than once a minute.
func (s Spec) Label(slot time.Time) string {
	if s.every > 0 && s.every < time.Minute {
		return slot.In(s.loc).Format("2006-01-02T15:04:05")
	}
	return slot.In(s.loc).Format("2006-01-02T15:04")
}

// Key is the journal key of a snapshot: stock:<schedule>:<warehouse>:<label>.
func Key(schedule, warehouse, label string) string {
	return Source + ":" + schedule + ":" + warehouse + ":" + label
}

// ManualLabel is the label of a manual snapshot asked for at t: local time in loc,
// to the second.
func ManualLabel(t time.Time, loc *time.Location) string {
	return t.In(loc).Format("2006-01-02T15:04:05")
}

// fieldSpans are the number of values of each of the five fields.
var fieldSpans = [5]struct {
	name string
	span int
}{{"minute", 60}, {"hour", 24}, {"day-of-month", 31}, {"month", 12}, {"day-of-week", 7}}

// checkSteps refuses a step larger than its field (*/61 in the minute field): the
// cron parser takes it and fires once an hour, which is never what was meant.
func checkSteps(spec string) error {
	fields := strings.Fields(spec)
	if len(fields) != 5 {
		return nil // a descriptor, or the parser's own error
	}
	for i, f := range fields {
		for _, part := range strings.Split(f, ",") {
			_, step, ok := strings.Cut(part, "/")
			if !ok {
				continue
			}
			n := 0
			if _, err := fmt.Sscanf(step, "%d", &n); err == nil && n > fieldSpans[i].span {
				return fmt.Errorf("%q: the step %d is larger than the %s field's %d values", spec, n, fieldSpans[i].name, fieldSpans[i].span)
			}
		}
	}
	return nil
}
