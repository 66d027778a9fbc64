package logging

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Repeats keeps a loop that fails the same way again and again (the database away,
// an endpoint missing) from writing an ERROR line per try: the first failure of a run
// is logged at once, later ones at most once per Every with how many came meanwhile,
// and the end of the run once, at INFO, with how many there were. A run is named by
// its message. Safe for concurrent use; the zero value logs a repeat at most once a
// minute.
type Repeats struct {
	// Every is the least time between two lines about one run (default 1m).
	Every time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time

	mu   sync.Mutex
	runs map[string]*run
}

type run struct {
	failures int       // in the run so far
	unlogged int       // since the last line
	first    time.Time // of the run
	logged   time.Time // the last line
}

// Fail records one failure of the run msg and logs it at ERROR when it is the first
// of its run, or when Every has passed since the last line (with "repeated", the
// number of failures since that line, and "failures", the run's total).
func (r *Repeats) Fail(ctx context.Context, log *slog.Logger, msg string, err error, attrs ...any) {
	now := r.now()
	r.mu.Lock()
	if r.runs == nil {
		r.runs = map[string]*run{}
	}
	ru := r.runs[msg]
	if ru == nil {
		ru = &run{first: now}
		r.runs[msg] = ru
	}
	ru.failures++
	ru.unlogged++
	first := ru.failures == 1
	due := first || now.Sub(ru.logged) >= r.every()
	var repeated, failures int
	var since time.Time
	if due {
		repeated, failures, since = ru.unlogged, ru.failures, ru.first
		ru.unlogged, ru.logged = 0, now
	}
	r.mu.Unlock()
	if !due {
		return
	}
	args := append([]any{"err", err}, attrs...)
	if !first {
		args = append(args, "repeated", repeated, "failures", failures, "failing_since", since.UTC().Format(time.RFC3339))
	}
	log.ErrorContext(ctx, msg, args...)
}

// OK ends the run msg, if one is going on: it logs, at INFO, that the failures
// ended, how many there were and for how long, and reports true. Nothing is logged,
// and false reported, when msg was not failing.
func (r *Repeats) OK(ctx context.Context, log *slog.Logger, msg string, attrs ...any) bool {
	r.mu.Lock()
	ru := r.runs[msg]
	delete(r.runs, msg)
	r.mu.Unlock()
	if ru == nil {
		return false
	}
	d := r.now().Sub(ru.first)
	args := append([]any{"failures", ru.failures, "failing_for", d.Round(time.Millisecond).String()}, attrs...)
	log.InfoContext(ctx, "recovered: "+msg, args...)
	return true
}

// Failing reports whether the run msg is going on.
func (r *Repeats) Failing(msg string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.runs[msg] != nil
}

func (r *Repeats) every() time.Duration {
	if r.Every <= 0 {
		return time.Minute
	}
	return r.Every
}

func (r *Repeats) now() time.Time {
	if r.Now == nil {
		return time.Now()
	}
	return r.Now()
}
