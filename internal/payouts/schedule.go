package payouts

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/robfig/cron/v3"
)

// cronParser reads payouts.schedule: five fields or a descriptor (@daily).
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Off reports whether a payouts.schedule value turns the schedule off: "" or "off".
func Off(spec string) bool {
	s := strings.ToLower(strings.TrimSpace(spec))
	return s == "" || s == "off"
}

// ParseSchedule reads a cron spec (five fields, or a descriptor such as @daily) whose
// times are in loc.
func ParseSchedule(spec string, loc *time.Location) (Schedule, error) {
	spec = strings.TrimSpace(spec)
	if strings.HasPrefix(spec, "TZ=") || strings.HasPrefix(spec, "CRON_TZ=") {
		return Schedule{}, errors.New("set the zone with ui.timezone, not in the spec")
	}
	if strings.HasPrefix(spec, "@every") {
		return Schedule{}, errors.New("@every is not a time of day: give five fields such as \"30 3 * * *\"")
	}
	s, err := cronParser.Parse(spec)
	if err != nil {
		return Schedule{}, err
	}
	if loc == nil {
		loc = time.UTC
	}
	return Schedule{text: spec, cron: s, loc: loc}, nil
}

// Schedule is a parsed payouts.schedule.
type Schedule struct {
	text string
	cron cron.Schedule
	loc  *time.Location
}

// String is the spec as written.
func (s Schedule) String() string { return s.text }

// Next is the first firing strictly after t.
func (s Schedule) Next(t time.Time) time.Time { return s.cron.Next(t.In(s.loc)) }

// Window is the period a scheduled reading asks for at t: from the start of the
// day window before t (in loc) up to t, so that lines the marketplace books late
// are caught by the next nights' readings.
func Window(t time.Time, window time.Duration, loc *time.Location) (from, to time.Time) {
	s := t.Add(-window).In(loc)
	return time.Date(s.Year(), s.Month(), s.Day(), 0, 0, 0, 0, loc), t
}

// SchedulerConfig configures a Scheduler.
type SchedulerConfig struct {
	Schedule Schedule
	// Window is how far back each reading looks (payouts.window).
	Window time.Duration
	// Readers are read one after another at each firing.
	Readers []Reader
	Store   Store
	Logger  *slog.Logger
	Now     func() time.Time
	// After waits (tests); default time.After.
	After func(d time.Duration) <-chan time.Time
}

// Scheduler reads every source's recent lines at each firing of payouts.schedule.
// Every reading is idempotent (lines are kept by their id), so two replicas firing
// the same night only repeat each other's lines.
type Scheduler struct {
	cfg SchedulerConfig

	mu    sync.Mutex
	fired int
}

// NewScheduler returns a scheduler; Run starts it.
func NewScheduler(cfg SchedulerConfig) *Scheduler {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.After == nil {
		cfg.After = time.After
	}
	return &Scheduler{cfg: cfg}
}

// Fired counts the firings done.
func (s *Scheduler) Fired() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fired
}

// Run fires at each time of the schedule until ctx ends.
func (s *Scheduler) Run(ctx context.Context) {
	for {
		now := s.cfg.Now()
		next := s.cfg.Schedule.Next(now)
		if next.IsZero() {
			s.cfg.Logger.Warn("payouts: the schedule has no further time", "schedule", s.cfg.Schedule.String())
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-s.cfg.After(next.Sub(now)):
		}
		s.Fire(ctx, next)
	}
}

// Fire reads each source's lines of the window before at, one source after
// another, and logs what each reading did.
func (s *Scheduler) Fire(ctx context.Context, at time.Time) {
	for _, r := range s.cfg.Readers {
		if ctx.Err() != nil {
			return
		}
		from, to := Window(at, s.cfg.Window, s.cfg.Schedule.loc)
		f, err := Run(ctx, s.cfg.Store, r, from, to, nil, s.cfg.Now)
		log := s.cfg.Logger.With("source", r.Source(), "from", from.Format(time.DateOnly), "to", to.Format(time.DateTime),
			"new", f.Saved.Inserted, "repeated", f.Saved.Repeated)
		switch {
		case err != nil && ctx.Err() == nil:
			log.Error("payouts: reading the marketplace's lines failed; the next firing reads the window again", "err", err)
		case err == nil && f.Error != "":
			log.Warn("payouts: lines read, some records skipped", "problem", f.Error)
		case err == nil:
			log.Info("payouts: lines read")
		}
	}
	s.mu.Lock()
	s.fired++
	s.mu.Unlock()
}

// String names a schedule for messages.
func (s *Scheduler) String() string {
	return fmt.Sprintf("payouts schedule %q", s.cfg.Schedule.String())
}
