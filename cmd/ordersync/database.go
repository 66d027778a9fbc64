package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/ordersync/ordersync/connectors"
	"github.com/ordersync/ordersync/internal/config"
	"github.com/ordersync/ordersync/internal/engine"
	"github.com/ordersync/ordersync/internal/inbox"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/outbox"
	"github.com/ordersync/ordersync/internal/stock"
	"github.com/ordersync/ordersync/internal/store/postgres"
	"github.com/ordersync/ordersync/internal/store/sqlite"
)

// database is what the commands need of a store, whichever backend holds it.
type database interface {
	Journal() journal.Store
	Outbox() outbox.Store
	Inbox() inbox.Store
	Cursors() connectors.CursorStore
	Listener() outbox.Listener
	Stock() stock.Store
	Migrate(ctx context.Context) ([]int, error)
	SchemaStatus(ctx context.Context) (current, latest int, err error)
	CheckSchema(ctx context.Context) error
	Close()
	String() string
	// embedded is the SQLite store, nil for PostgreSQL: one process works its file.
	embedded() *sqlite.DB
}

type pgDatabase struct{ *postgres.DB }

func (d pgDatabase) Journal() journal.Store          { return d.DB.Journal() }
func (d pgDatabase) Outbox() outbox.Store            { return d.DB.Outbox() }
func (d pgDatabase) Inbox() inbox.Store              { return d.DB.Inbox() }
func (d pgDatabase) Cursors() connectors.CursorStore { return d.DB.Cursors() }
func (d pgDatabase) Listener() outbox.Listener       { return d.DB.Listener() }
func (d pgDatabase) Stock() stock.Store              { return d.DB.Stock() }
func (d pgDatabase) embedded() *sqlite.DB            { return nil }

type sqliteDatabase struct{ *sqlite.DB }

func (d sqliteDatabase) Journal() journal.Store          { return d.DB.Journal() }
func (d sqliteDatabase) Outbox() outbox.Store            { return d.DB.Outbox() }
func (d sqliteDatabase) Inbox() inbox.Store              { return d.DB.Inbox() }
func (d sqliteDatabase) Cursors() connectors.CursorStore { return d.DB.Cursors() }
func (d sqliteDatabase) Listener() outbox.Listener       { return d.DB.Listener() }
func (d sqliteDatabase) Stock() stock.Store              { return d.DB.Stock() }
func (d sqliteDatabase) Close()                          { d.DB.Close() }
func (d sqliteDatabase) embedded() *sqlite.DB            { return d.DB }

// getenv reads the command's environment (not the process's: tests inject it).
func (a *app) getenv(name string) string {
	for _, kv := range a.environ {
		if k, v, ok := strings.Cut(kv, "="); ok && k == name {
			return v
		}
	}
	return ""
}

// sqlitePath is the embedded database's file: database.url sqlite:…, or, with no
// database.url, $STATE_DIRECTORY/ordersync.db or ./ordersync.db. "" for PostgreSQL.
func (a *app) sqlitePath(cfg *config.Config) string {
	if cfg.Database.URL == "" {
		return sqlite.DefaultPath(a.getenv)
	}
	return cfg.Database.SQLitePath()
}

// openDB opens the configured database: PostgreSQL when database.url is a postgres
// URL, otherwise the embedded SQLite file (the default). A server that does not
// answer is an operational failure (exit 1) named by host, port and database.
func (a *app) openDB(ctx context.Context, cfg *config.Config, log *slog.Logger) (database, error) {
	if path := a.sqlitePath(cfg); path != "" {
		db, err := sqlite.Open(ctx, sqlite.Config{Path: path, Logger: log,
			ClaimLockTimeout: engine.CallBudget(cfg.OneC.Timeout) + 10*time.Second,
			TakeoverAfter:    engine.TakeoverAfter(cfg.OneC.Timeout, cfg.OneC.SettleTime)})
		if err != nil {
			return nil, fmt.Errorf("database.url: %w", err)
		}
		return sqliteDatabase{db}, nil
	}
	db, err := postgres.Open(ctx, postgres.Config{
		URL:              cfg.Database.URL,
		MaxConns:         int32(cfg.Database.MaxConns),
		ClaimIdleTimeout: claimIdleTimeout(cfg),
		ClaimLockTimeout: engine.CallBudget(cfg.OneC.Timeout) + 10*time.Second,
		TakeoverAfter:    engine.TakeoverAfter(cfg.OneC.Timeout, cfg.OneC.SettleTime),
		CloseTimeout:     cfg.Worker.ShutdownTimeout,
		Logger:           log,
	})
	if err != nil {
		return nil, fmt.Errorf("database.url: %w", err)
	}
	return pgDatabase{db}, nil
}

// openReadyDB opens the database and refuses a schema that is behind the binary. The
// embedded database is migrated on the spot: it is the zero-set-up path, and nobody
// else shares the file.
func (a *app) openReadyDB(ctx context.Context, cfg *config.Config, log *slog.Logger) (database, error) {
	db, err := a.openDB(ctx, cfg, log)
	if err != nil {
		return nil, err
	}
	if db.embedded() != nil {
		if _, err := db.Migrate(ctx); err != nil {
			db.Close()
			return nil, err
		}
	}
	if err := db.CheckSchema(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// serviceRunning reports the pid of an `ordersync run` working an embedded database.
func serviceRunning(db database) (int, bool) {
	if e := db.embedded(); e != nil {
		return sqlite.LockHolder(e.Path())
	}
	return 0, false
}

// wakeService tells a running service that there is work (SIGUSR1): it claims at once
// instead of at its next poll.
func wakeService(pid int) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	return p.Signal(wakeSignal)
}
