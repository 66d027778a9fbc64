package sdnotify

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/ordersync/ordersync/internal/logging"
	"github.com/ordersync/ordersync/internal/outbox"
)

// The systemd side of `run` and `migrate`, on top of the protocol (Notifier):
//
//   - READY=1 once the schema is checked and the listeners are up (MarkReady);
//   - STATUS= kept current: what the journal and the outbox hold, 1C's state, and
//     why the watchdog is withheld when it is (Supervise);
//   - WATCHDOG=1 every half of WATCHDOG_USEC, sent only while every liveness check
//     passes (the engine's claim loops and the relays' loops go round) and the
//     database answers a ping: a service hung in a call that never returns is
//     restarted by systemd (WatchdogSec= of the unit);
//   - STOPPING=1 as soon as SIGTERM or SIGINT arrives (MarkStopping);
//   - EXTEND_TIMEOUT_USEC while start-up waits on the database: the connection, a
//     migration, the schema check (ExtendWhile).
//
// Without NOTIFY_SOCKET nothing of this runs: no message, no extra query.

const (
	// statusEvery is how often STATUS= is refreshed (one outbox status query).
	statusEvery = 5 * time.Second
	// ExtendBy and extendEvery: while a start-up step runs, every extendEvery the
	// service asks for ExtendBy more of its start timeout.
	ExtendBy    = 30 * time.Second
	extendEvery = 10 * time.Second
	// checkTimeout bounds the queries of the status line.
	checkTimeout = 5 * time.Second
)

// Manager is the service manager (systemd) as `run` and `migrate` see it. One
// without NOTIFY_SOCKET does nothing. It is safe for concurrent use.
type Manager struct {
	n   *Notifier
	log *slog.Logger
	// watchdog is WATCHDOG_USEC: WATCHDOG=1 is due within it. 0: none asked for.
	watchdog time.Duration

	mu       sync.Mutex
	stopping bool  // STOPPING=1 sent: nothing else is sent after it
	ready    bool  // READY=1 sent
	sendErr  error // the last send's error, logged when it changes
}

// NewManager reads NOTIFY_SOCKET, WATCHDOG_USEC and WATCHDOG_PID of getenv; pid is
// this process's (os.Getpid()). A NOTIFY_SOCKET that cannot be used is logged, once;
// the command runs on without telling systemd anything.
func NewManager(getenv func(string) string, pid int, log *slog.Logger) *Manager {
	sm := &Manager{log: log}
	n, err := FromEnv(getenv)
	if err != nil {
		log.Warn("NOTIFY_SOCKET cannot be used: systemd is not told how the service is doing", "err", err)
		return sm
	}
	if n == nil {
		return sm
	}
	sm.n = n
	wd, err := WatchdogInterval(getenv, pid)
	switch {
	case err == nil:
		sm.watchdog = wd
	case !errors.Is(err, ErrNoWatchdog):
		log.Warn("WATCHDOG_USEC cannot be used: no watchdog pings are sent", "err", err)
	}
	return sm
}

// Enabled reports whether messages go anywhere.
func (sm *Manager) Enabled() bool { return sm.n != nil }

// send sends one message unless STOPPING=1 went before it. A failure is logged
// when it is new (a service manager gone away is not logged every few seconds).
func (sm *Manager) send(assignments ...string) {
	if !sm.Enabled() {
		return
	}
	sm.mu.Lock()
	defer sm.mu.Unlock()
	if sm.stopping {
		return
	}
	sm.sendLocked(assignments...)
}

func (sm *Manager) sendLocked(assignments ...string) {
	err := sm.n.Send(assignments...)
	switch {
	case err != nil && (sm.sendErr == nil || sm.sendErr.Error() != err.Error()):
		sm.log.Warn("could not notify systemd", "socket", sm.n.Socket(), "err", err)
	case err == nil && sm.sendErr != nil:
		sm.log.Info("notifying systemd again", "socket", sm.n.Socket())
	}
	sm.sendErr = err
}

// Status sets the line `systemctl status` shows (STATUS=…).
func (sm *Manager) Status(line string) { sm.send("STATUS=" + line) }

// MarkReady sends READY=1 with a first status line, once.
func (sm *Manager) MarkReady(line string) {
	if !sm.Enabled() {
		return
	}
	sm.mu.Lock()
	defer sm.mu.Unlock()
	if sm.stopping || sm.ready {
		return
	}
	sm.ready = true
	sm.sendLocked("READY=1", "STATUS="+line)
}

// MarkStopping sends STOPPING=1, once; nothing is sent after it.
func (sm *Manager) MarkStopping(line string) {
	if !sm.Enabled() {
		return
	}
	sm.mu.Lock()
	defer sm.mu.Unlock()
	if sm.stopping {
		return
	}
	sm.sendLocked("STOPPING=1", "STATUS="+line)
	sm.stopping = true
}

// ExtendWhile runs step, saying what it does in STATUS= and extending the start
// timeout while it runs (EXTEND_TIMEOUT_USEC), so that a long migration or a
// database still booting is not cut off by TimeoutStartSec=; the step's own bounds
// (database.url's connect timeout, the migration's statements) end it.
func (sm *Manager) ExtendWhile(what string, step func() error) error {
	if !sm.Enabled() {
		return step()
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		started := time.Now()
		t := time.NewTicker(extendEvery)
		defer t.Stop()
		for {
			line := what
			if d := time.Since(started); d >= time.Second {
				line += " (" + d.Round(time.Second).String() + ")"
			}
			sm.send("EXTEND_TIMEOUT_USEC="+fmt.Sprint(ExtendBy.Microseconds()), "STATUS="+line)
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	err := step()
	close(done)
	wg.Wait()
	return err
}

// Database is what the watchdog pings: SchemaStatus is a cheap query of both
// backends.
type Database interface {
	SchemaStatus(ctx context.Context) (current, latest int, err error)
}

// Outbox is what the status line reads of the outbox.
type Outbox interface {
	Status(ctx context.Context, struggling int) ([]outbox.DestinationStatus, error)
}

// Supervised is what the running service reports on.
type Supervised struct {
	DB     Database
	Outbox Outbox
	// Struggling is the attempts from which the outbox calls an event struggling
	// (its Status query's argument, as `outbox status` asks it).
	Struggling int
	// Alive are the loops' liveness checks (Engine.Alive, Relay.Alive of each
	// relay): nil while the part is alive.
	Alive []func() error
	// Counts is the first part of the status line: what the engine did since the
	// start and 1C's state.
	Counts func() string
}

// Supervise keeps STATUS= current and, when a watchdog is asked for, sends
// WATCHDOG=1 every half of it while every check passes. It returns at once; the
// returned function stops it and waits for its goroutines.
func (sm *Manager) Supervise(ctx context.Context, s Supervised) (stop func()) {
	if !sm.Enabled() {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	st := &statusLine{sm: sm}

	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(statusEvery)
		defer t.Stop()
		for {
			st.setCounts(outboxLine(ctx, s))
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	if sm.watchdog > 0 {
		interval := sm.watchdog / 2
		ping := newDBPinger(s.DB, interval)
		wg.Add(2)
		go func() { defer wg.Done(); ping.run(ctx) }()
		go func() {
			defer wg.Done()
			sm.watch(ctx, interval, append(s.Alive, ping.alive), st)
		}()
	}
	return func() { cancel(); wg.Wait() }
}

// watch sends WATCHDOG=1 every interval while every check passes. While one fails
// it sends none, says why in STATUS= at every interval, and logs it when the set of
// failing checks changes.
func (sm *Manager) watch(ctx context.Context, interval time.Duration, checks []func() error, st *statusLine) {
	t := time.NewTicker(interval)
	defer t.Stop()
	var withheldSince time.Time
	lastFailing := ""
	for {
		var reasons []string
		failing := ""
		for i, c := range checks {
			if err := c(); err != nil {
				reasons = append(reasons, err.Error())
				failing += fmt.Sprint(i, " ")
			}
		}
		reason := strings.Join(reasons, "; ")
		switch {
		case reason == "":
			sm.send("WATCHDOG=1")
			if !withheldSince.IsZero() {
				sm.log.Info("the service is alive again: systemd watchdog pings resumed",
					"withheld_for", time.Since(withheldSince).Round(time.Millisecond).String())
				withheldSince, lastFailing = time.Time{}, ""
				st.setUnhealthy("")
			}
		default:
			if withheldSince.IsZero() {
				withheldSince = time.Now()
			}
			if failing != lastFailing {
				sm.log.Error("the service is not alive: systemd watchdog pings withheld; systemd restarts the service "+
					"if this lasts WatchdogSec", "reason", reason, "watchdog_usec", sm.watchdog.String())
				lastFailing = failing
			}
			st.setUnhealthy(fmt.Sprintf("watchdog withheld for %s: %s",
				time.Since(withheldSince).Round(100*time.Millisecond), reason))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// statusLine is the STATUS= line: the counts, refreshed every statusEvery, behind
// the reason the watchdog is withheld, when it is. Each change is sent.
type statusLine struct {
	sm        *Manager
	mu        sync.Mutex
	counts    string
	unhealthy string
}

func (l *statusLine) setCounts(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.counts = s
	l.sendLocked()
}

func (l *statusLine) setUnhealthy(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s == "" && l.unhealthy == "" {
		return
	}
	l.unhealthy = s
	l.sendLocked()
}

func (l *statusLine) sendLocked() {
	line := l.counts
	if l.unhealthy != "" {
		line = "UNHEALTHY, " + l.unhealthy + " | " + line
	}
	l.sm.Status(line)
}

// outboxLine is the status line: the engine's counts and 1C's state, then the
// outbox's pending and dead events and its lag (the age of the oldest unsent one)
// from one outbox status query.
func outboxLine(ctx context.Context, s Supervised) string {
	line := s.Counts()
	qctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	dests, err := s.Outbox.Status(qctx, s.Struggling)
	if err != nil {
		if ctx.Err() != nil {
			return line
		}
		return line + "; outbox: unknown (" + logging.OneLine(err) + ")"
	}
	var pending, dead, disabled int
	var lag time.Duration
	for _, d := range dests {
		pending += d.Pending + d.InFlight
		dead += d.Dead
		lag = max(lag, d.Lag)
		if d.Disabled != "" {
			disabled++
		}
	}
	line += fmt.Sprintf("; outbox: %d pending, %d dead, lag %s", pending, dead, lagText(lag))
	if disabled > 0 {
		line += fmt.Sprintf(", %d destination(s) disabled", disabled)
	}
	return line
}

// lagText is 0.4s under a minute, 2m3s above.
func lagText(d time.Duration) string {
	if d < time.Minute {
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
	return d.Round(time.Second).String()
}

// dbPinger pings the database every interval, each ping bounded by a short
// timeout, and remembers the outcome: the watchdog's database check reads it
// without waiting on the database.
type dbPinger struct {
	db       Database
	interval time.Duration
	timeout  time.Duration

	mu     sync.Mutex
	okAt   time.Time // the last successful ping's end
	err    error     // the last ping's error
	failed time.Time // when the pings began to fail
}

func newDBPinger(db Database, interval time.Duration) *dbPinger {
	// Short, but not so short that a busy database misses the watchdog.
	return &dbPinger{db: db, interval: interval, timeout: min(max(interval, time.Second), 5*time.Second), okAt: time.Now()}
}

func (p *dbPinger) run(ctx context.Context) {
	t := time.NewTicker(p.interval)
	defer t.Stop()
	for {
		pctx, cancel := context.WithTimeout(ctx, p.timeout)
		_, _, err := p.db.SchemaStatus(pctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		p.mu.Lock()
		switch {
		case err == nil:
			p.okAt, p.err, p.failed = time.Now(), nil, time.Time{}
		case p.err == nil:
			p.err, p.failed = err, time.Now()
		default:
			p.err = err
		}
		p.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// alive fails when the last ping failed, or when none has succeeded for longer
// than a ping takes at most (a pinger that stopped going round).
func (p *dbPinger) alive() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		return fmt.Errorf("the database does not answer a ping within %s (for %s now): %s",
			p.timeout, time.Since(p.failed).Round(100*time.Millisecond), logging.OneLine(p.err))
	}
	if d := time.Since(p.okAt); d > 2*p.interval+p.timeout {
		return fmt.Errorf("the database has answered no ping for %s", d.Round(100*time.Millisecond))
	}
	return nil
}
