package monitor

import (
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// clockWarnAfter is how far the process's clock and the database's may differ before
// run warns; clockWarnAgain is how often the warning is repeated while they do.
const (
	clockWarnAfter = time.Second
	clockWarnAgain = time.Hour
)

// clockWatch hears each measurement of the database's clock against the process's
// (store.DB.WatchClock): it sets the gauge, and logs a WARN when they differ by more
// than clockWarnAfter — at the first such measurement, when the difference moves by
// more than that again, and every clockWarnAgain while it lasts — and an INFO when
// they agree again.
type clockWatch struct {
	log      *slog.Logger
	database string
	set      func(time.Duration) // the gauge; nil without the admin listener
	now      func() time.Time

	mu       sync.Mutex
	warned   bool
	warnedAt time.Time
	last     time.Duration // the difference last warned about
}

func newClockWatch(log *slog.Logger, database string, set func(time.Duration)) *clockWatch {
	return &clockWatch{log: log, database: database, set: set, now: time.Now}
}

func (w *clockWatch) measured(offset time.Duration) {
	if w.set != nil {
		w.set(offset)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.now()
	switch {
	case offset.Abs() > clockWarnAfter:
		if w.warned && (offset-w.last).Abs() <= clockWarnAfter && now.Sub(w.warnedAt) < clockWarnAgain {
			return
		}
		w.warned, w.warnedAt, w.last = true, now, offset
		side := "ahead of"
		if offset > 0 {
			side = "behind"
		}
		w.log.Warn(fmt.Sprintf("the process's clock and the database's differ by %s (this machine's is %s the database's); "+
			"ordersync judges settle and takeover times on the database's clock, but check NTP on this machine and on the database server",
			offset.Abs().Round(100*time.Millisecond), side),
			"clock_offset", offset.String(), "database", w.database)
	case w.warned:
		w.warned = false
		w.log.Info("the process's clock and the database's agree again", "clock_offset", offset.String(), "database", w.database)
	}
}

// WatchClock watches the database's clock against the process's from now on: the
// gauge ordersync_clock_offset_seconds (with the admin listener), a WARN past a
// second, an INFO once they agree again.
func (a *Monitor) WatchClock() {
	var set func(time.Duration)
	if a.metrics != nil {
		set = a.metrics.SetClockOffset
	}
	a.db.WatchClock(newClockWatch(a.log, a.db.String(), set).measured)
}
