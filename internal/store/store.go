// Package store opens the database database.url names: PostgreSQL
// (internal/store/postgres) for a postgres:// URL, otherwise the embedded SQLite file
// (internal/store/sqlite), the configured one or, with no database.url, the one
// found (or created) where a command looks for it. Both backends are a DB.
package store

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ordersync/ordersync/connectors"
	"github.com/ordersync/ordersync/internal/backoff"
	"github.com/ordersync/ordersync/internal/config"
	"github.com/ordersync/ordersync/internal/inbox"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/outbox"
	"github.com/ordersync/ordersync/internal/payouts"
	"github.com/ordersync/ordersync/internal/stock"
	"github.com/ordersync/ordersync/internal/store/postgres"
	"github.com/ordersync/ordersync/internal/store/sqlite"
	"github.com/ordersync/ordersync/internal/ui/session"
)

// DB is an open database, whichever backend holds it: *postgres.DB and *sqlite.DB
// implement it as they are.
type DB interface {
	Journal() journal.Store
	Outbox() outbox.Store
	Inbox() inbox.Store
	Cursors() connectors.CursorStore
	Listener() outbox.Listener
	Stock() stock.Store
	// Sessions are the journal pages' sign-ins, shared by every replica.
	Sessions() session.Store
	// Payouts are the marketplaces' financial lines and the record of their readings.
	Payouts() payouts.Store
	// EmbeddedFile is the SQLite file the database is, "" for PostgreSQL: one
	// process works an embedded file.
	EmbeddedFile() string
	// Migrate applies the pending migrations and returns the versions applied.
	Migrate(ctx context.Context) ([]int, error)
	SchemaStatus(ctx context.Context) (current, latest int, err error)
	// CheckSchema refuses a schema that is behind (or ahead of) the binary.
	CheckSchema(ctx context.Context) error
	Close()
	// String names the database for messages: host:port/database, or the file.
	String() string
	// Now is the store's clock, the database's (PostgreSQL: the process's corrected
	// by the measured difference; SQLite: the machine's): the engine reckons its
	// settle, verification and retry times on it, so that replicas whose clocks
	// disagree judge alike.
	Now() time.Time
	// ClockOffset is the database's clock minus the process's, as last measured (0
	// on SQLite); WatchClock hears it now and at each later measurement.
	ClockOffset() time.Duration
	WatchClock(f func(offset time.Duration))
}

var (
	_ DB = (*postgres.DB)(nil)
	_ DB = (*sqlite.DB)(nil)
)

// Config configures Open.
type Config struct {
	// Database is the configuration's database section: url picks the backend,
	// max_connections bounds PostgreSQL's connections, connect_timeout is how long
	// Wait waits.
	Database config.Database
	// Create lets Open create the embedded database file (run, migrate, demo). With
	// no database.url and no file found, it is created at sqlite.DefaultPath;
	// otherwise Open fails naming the places it looked, and a configured file must
	// exist (an error that errors.Is fs.ErrNotExist).
	Create bool
	// Wait: a PostgreSQL server that does not answer yet is waited for, up to
	// database.connect_timeout, logging each try (run, migrate). Otherwise it is
	// tried once.
	Wait bool
	// ReadOnly opens the embedded file read-only; it is never created.
	ReadOnly bool
	// Getenv is the environment the embedded file is looked for in
	// ($STATE_DIRECTORY), and ServiceDir the service's state directory
	// (sqlite.ServiceDir but in tests): see sqlite.Find.
	Getenv     func(string) string
	ServiceDir string
	// Found, when set, hears of the embedded file found by looking (no
	// database.url), for the caller to name it.
	Found func(sqlite.Place)

	// ClaimIdleTimeout (PostgreSQL), ClaimLockTimeout, TakeoverAfter and
	// CloseTimeout (PostgreSQL) are the backends' (postgres.Config, sqlite.Config).
	ClaimIdleTimeout time.Duration
	ClaimLockTimeout time.Duration
	TakeoverAfter    time.Duration
	CloseTimeout     time.Duration
	// ProcessClock, when set (tests), is the process's clock PostgreSQL's is
	// measured against (postgres.Config.ProcessClock).
	ProcessClock func() time.Time
	Logger       *slog.Logger
}

// Open opens the database cfg.Database.URL names: PostgreSQL for a postgres URL,
// otherwise the embedded SQLite file (the default), as Create, Wait and ReadOnly
// allow. It does not migrate. A server that does not answer is an error naming it
// by host, port and database.
func Open(ctx context.Context, cfg Config) (DB, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Getenv == nil {
		cfg.Getenv = func(string) string { return "" }
	}
	if d := cfg.Database; d.URL == "" || d.SQLitePath() != "" {
		db, err := openSQLite(ctx, cfg)
		if err != nil {
			return nil, err // not a DB holding a nil *sqlite.DB
		}
		return db, nil
	}
	pc := postgres.Config{
		URL:              cfg.Database.URL,
		MaxConnections:   int32(cfg.Database.MaxConnections), // the total, split by postgres.Split
		ClaimIdleTimeout: cfg.ClaimIdleTimeout,
		ClaimLockTimeout: cfg.ClaimLockTimeout,
		TakeoverAfter:    cfg.TakeoverAfter,
		CloseTimeout:     cfg.CloseTimeout,
		ProcessClock:     cfg.ProcessClock,
		Logger:           cfg.Logger,
	}
	wait := time.Duration(0)
	if cfg.Wait {
		wait = cfg.Database.ConnectTimeout
	}
	db, err := connectPostgres(ctx, pc, wait, cfg.Logger)
	if err != nil {
		return nil, fmt.Errorf("database.url: %w", err)
	}
	return db, nil
}

// openSQLite opens the embedded file: database.url's, or with none the first of
// sqlite.Places that exists, or a new one at sqlite.DefaultPath when cfg.Create.
func openSQLite(ctx context.Context, cfg Config) (*sqlite.DB, error) {
	path, err := sqlitePath(cfg)
	if err != nil {
		return nil, err
	}
	db, err := sqlite.Open(ctx, sqlite.Config{Path: path, Logger: cfg.Logger,
		MustExist: !cfg.Create, ReadOnly: cfg.ReadOnly,
		ClaimLockTimeout: cfg.ClaimLockTimeout,
		TakeoverAfter:    cfg.TakeoverAfter})
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("database.url: %w; `ordersync migrate` (or `ordersync run`) creates it", err)
	}
	if err != nil {
		return nil, fmt.Errorf("database.url: %w", err)
	}
	return db, nil
}

// sqlitePath is the embedded database's file: database.url sqlite:…, or with no
// database.url the first of $STATE_DIRECTORY/ordersync.db,
// /var/lib/ordersync/ordersync.db and ./ordersync.db that exists (told to
// cfg.Found). When none does, cfg.Create makes it $STATE_DIRECTORY/ordersync.db or
// ./ordersync.db (logged); otherwise the error names the places.
func sqlitePath(cfg Config) (string, error) {
	if cfg.Database.URL != "" {
		return cfg.Database.SQLitePath(), nil
	}
	found, err := sqlite.Find(cfg.Getenv, cfg.ServiceDir)
	var nf *sqlite.NotFoundError
	switch {
	case err == nil:
		if cfg.Found != nil {
			cfg.Found(found)
		}
		return found.Path, nil
	case errors.As(err, &nf) && cfg.Create:
		path, err := filepath.Abs(sqlite.DefaultPath(cfg.Getenv))
		if err != nil {
			return "", err
		}
		looked := make([]string, len(nf.Places))
		for i, p := range nf.Places {
			looked[i] = p.Path
		}
		cfg.Logger.Info("creating the embedded SQLite journal (no database.url, none found)", "file", path,
			"looked_at", strings.Join(looked, ", "))
		return path, nil
	}
	return "", err
}

// connectBackoff paces the tries of a first connection; connectTryTimeout bounds
// one (a server whose host is down answers nothing).
var (
	connectBackoff    = backoff.Policy{Min: 500 * time.Millisecond, Max: 10 * time.Second}
	connectTryTimeout = 15 * time.Second
)

// connectPostgres opens the store, trying again for up to wait while the server
// does not answer (refused, unreachable, a name that does not resolve yet, starting
// up, too many connections), and logs each failed try with the server (host:port/db
// as user, never the password) and what went wrong. A refusal no wait can mend (a
// wrong password, no such database, a URL pgx refuses) fails at once, and so does
// everything with wait 0. A stop requested while it waits ends it with ctx's error.
func connectPostgres(ctx context.Context, pc postgres.Config, wait time.Duration, log *slog.Logger) (*postgres.DB, error) {
	start := time.Now()
	deadline := start.Add(wait)
	for try := 1; ; try++ {
		tryCtx, cancel := ctx, context.CancelFunc(func() {})
		if wait > 0 {
			tryCtx, cancel = context.WithTimeout(ctx, min(max(time.Until(deadline), time.Second), connectTryTimeout))
		}
		db, err := postgres.Open(tryCtx, pc)
		cancel()
		if err == nil {
			if try > 1 {
				log.Info("the database answers", "database", db.String(), "tries", try,
					"waited", time.Since(start).Round(time.Millisecond).String())
			}
			return db, nil
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%w (stopped while waiting for the database: %w)", err, ctx.Err())
		}
		var ce *postgres.ConnectError
		left := time.Until(deadline)
		if wait <= 0 || !errors.As(err, &ce) || !worthWaiting(err) {
			return nil, err
		}
		if left <= 0 {
			return nil, fmt.Errorf("%w (gave up after %d tries in %s: database.connect_timeout)", err, try,
				time.Since(start).Round(time.Second))
		}
		delay := min(connectBackoff.After(try), left)
		log.Warn("the database does not answer yet; trying again", "database", ce.Target, "try", try,
			"retry_in", delay.Round(time.Millisecond).String(), "gives_up_in", left.Round(time.Second).String(),
			"err", err.Error())
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w (stopped while waiting for the database: %w)", err, ctx.Err())
		case <-time.After(delay):
		}
	}
}

// worthWaiting reports whether a failed connection may succeed later: the network's
// failures and a server starting up, shutting down or full do; a refusal of the
// credentials, of the database name or of the server's certificate does not.
func worthWaiting(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "57P03", "57P01", "57P02", "53300": // cannot connect now (starting up), shutting down, too many connections
			return true
		}
		return strings.HasPrefix(pe.Code, "08") // connection exception
	}
	var (
		unknownCA x509.UnknownAuthorityError
		hostname  x509.HostnameError
		invalid   x509.CertificateInvalidError
		verify    *tls.CertificateVerificationError
	)
	return !errors.As(err, &unknownCA) && !errors.As(err, &hostname) && !errors.As(err, &invalid) && !errors.As(err, &verify)
}
