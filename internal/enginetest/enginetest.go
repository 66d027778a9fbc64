// Package enginetest is the engine's test world, for the tests of the engine and of
// the packages whose handlers it runs: one journal schema in PostgreSQL (testdb), one
// simulated 1C, a client to it that logs into a buffer, and engines with short
// times. Only tests import it (like internal/testdb); it lives outside
// internal/engine because the core imports no simulator and no store outside its
// tests.
package enginetest

import (
	"bytes"
	"cmp"
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/ordersync/ordersync/internal/engine"
	"github.com/ordersync/ordersync/internal/eventually"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/onec/httpservice"
	"github.com/ordersync/ordersync/internal/sim/onecsim"
	"github.com/ordersync/ordersync/internal/store/postgres"
	"github.com/ordersync/ordersync/internal/testdb"
)

// Password is the simulated 1C's password when the options name no user.
const Password = "s3cret-Пароль"

// World is one migrated journal schema, a running simulated 1C and a client to it.
type World struct {
	t      testing.TB
	URL    string // the schema's database URL
	DB     *postgres.DB
	OneC   *onecsim.OneC
	Client *httpservice.Client // 4 slots, session reuse
	Logs   *SyncBuffer         // what the client and Logger's loggers wrote
}

// New makes the world; its pools and 1C close when t ends. Options without a user
// get ordersync and Password.
func New(t testing.TB, opts onecsim.Options) *World {
	t.Helper()
	w := &World{t: t, URL: testdb.URL(t), Logs: &SyncBuffer{}}
	w.DB = w.OpenDB(postgres.Config{})
	if _, err := w.DB.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	if opts.Username == "" {
		opts.Username, opts.Password = "ordersync", Password
	}
	w.OneC = onecsim.New(opts)
	if err := w.OneC.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.OneC.Close)
	w.Client = w.NewClient(opts.Username, opts.Password, 4)
	return w
}

// OpenDB opens another pool on the world's schema: a replica. A zero TakeoverAfter
// takes attempts left open over at once (the tests of the takeover wait set their
// own); a zero MaxConns is 12.
func (w *World) OpenDB(cfg postgres.Config) *postgres.DB {
	w.t.Helper()
	cfg.URL = cmp.Or(cfg.URL, w.URL)
	cfg.MaxConns = cmp.Or(cfg.MaxConns, 12)
	cfg.TakeoverAfter = cmp.Or(cfg.TakeoverAfter, time.Nanosecond)
	db, err := postgres.Open(context.Background(), cfg)
	if err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(db.Close)
	return db
}

// Logger logs everything, as JSON, into Logs.
func (w *World) Logger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(w.Logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// NewClient is a client to the world's 1C with concurrency slots.
func (w *World) NewClient(user, password string, concurrency int) *httpservice.Client {
	w.t.Helper()
	c, err := httpservice.New(httpservice.Config{
		BaseURL: w.OneC.URL(), Username: user, Password: password,
		Timeout: 5 * time.Second, MaxConcurrency: concurrency, SessionReuse: true,
		RetryBackoff: time.Millisecond, Logger: w.Logger(),
	})
	if err != nil {
		w.t.Fatal(err)
	}
	return c
}

// Short fills the times cfg leaves zero with the tests' short ones, a jitter that
// adds nothing and the world's Logger.
func (w *World) Short(cfg engine.Config) engine.Config {
	or := func(d, def time.Duration) time.Duration { return cmp.Or(d, def) }
	cfg.BackoffMin = or(cfg.BackoffMin, time.Millisecond)
	cfg.BackoffMax = or(cfg.BackoffMax, 5*time.Millisecond)
	cfg.OneCTimeout = or(cfg.OneCTimeout, 5*time.Second)
	cfg.PollInterval = or(cfg.PollInterval, 5*time.Millisecond)
	cfg.SettleTime = or(cfg.SettleTime, 20*time.Millisecond)
	cfg.PingInterval = or(cfg.PingInterval, 50*time.Millisecond)
	if cfg.Jitter == nil {
		cfg.Jitter = func(d time.Duration) time.Duration { return d }
	}
	cfg.Logger = w.Logger()
	return cfg
}

// Drain runs e's due operations in the foreground until none of store's is pending.
func Drain(t testing.TB, store journal.Store, e *engine.Engine) {
	t.Helper()
	ctx := context.Background()
	eventually.True(t, "no operation pending", func() bool {
		ran, err := e.RunDue(ctx)
		if err != nil {
			t.Logf("RunDue: %v", err)
		}
		if ran {
			return false
		}
		pending, err := store.List(ctx, journal.Filter{Status: journal.StatusPending, Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		return len(pending) == 0
	})
}

// SyncBuffer is a bytes.Buffer safe for concurrent writers.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
