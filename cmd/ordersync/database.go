package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ordersync/ordersync/connectors"
	"github.com/ordersync/ordersync/internal/backoff"
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
	// Now is the store's clock, the database's (PostgreSQL: the process's corrected
	// by the measured difference; SQLite: the machine's): the engine reckons its
	// settle, verification and retry times on it, so that replicas whose clocks
	// disagree judge alike.
	Now() time.Time
	// ClockOffset is the database's clock minus the process's, as last measured (0
	// on SQLite); WatchClock hears it now and at each later measurement.
	ClockOffset() time.Duration
	WatchClock(f func(offset time.Duration))
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

// dbUse is what a command may do with the database, and which secrets it reads.
type dbUse struct {
	// create: the command may create the embedded database file (run, migrate,
	// demo). Every other command opens an existing one or exits 1 naming the places
	// it looked.
	create bool
	// wait: the command waits for a database server that does not answer yet, up to
	// database.connect_timeout, logging each try (run, migrate). Others try once.
	wait bool
	// readOnly: the command only reads; the embedded file is opened read-only and
	// never migrated.
	readOnly bool
	// secrets: the command talks to 1C or to a sender and reads every secret.
	// Otherwise it reads database.url alone: a *_file that only the service can
	// read (/run/credentials/…) is never opened.
	secrets bool
}

// commandUses says, for each command (app.command), how it uses the database. Every
// command is listed (TestEveryCommandSaysHowItUsesTheDatabase).
var commandUses = map[string]dbUse{
	"run":     {create: true, wait: true, secrets: true},
	"migrate": {create: true, wait: true},
	"demo":    {create: true, secrets: true},

	"config check":   {secrets: true}, // it checks them
	"order import":   {secrets: true},
	"order cancel":   {secrets: true},
	"resync":         {secrets: true},
	"stock snapshot": {secrets: true},
	"outbox requeue": {},
	"outbox replay":  {},

	"journal list":      {readOnly: true},
	"journal show":      {readOnly: true},
	"inbox list":        {readOnly: true},
	"inbox show":        {readOnly: true},
	"outbox status":     {readOnly: true},
	"outbox list":       {readOnly: true},
	"connectors status": {readOnly: true},
	"stock show":        {readOnly: true},
	"stock diff":        {readOnly: true},
	"stock status":      {readOnly: true},
	// It reads the journal and asks 1C and the marketplace for their lists.
	"reconcile": {secrets: true},

	"ui hash-password": {},

	"sim onec": {},
	"version":  {},
}

// use is how this command uses the database. Callers inside the program (tests,
// the demo's reader) that run no command keep the old ways: create, read everything.
func (a *app) use() dbUse {
	if u, ok := commandUses[a.command]; ok {
		return u
	}
	return dbUse{create: true, secrets: true}
}

// readSecret is config.LoadOptions.ReadSecret: a command that talks neither to 1C
// nor to a sender reads database.url alone.
func (a *app) readSecret(key string) bool { return a.use().secrets || key == "database.url" }

// serviceStateDir is where the unit keeps the embedded database (StateDirectory=),
// looked at from outside the unit.
var serviceStateDir = sqlite.ServiceDir

// sqlitePath is the embedded database's file, "" for PostgreSQL: database.url
// sqlite:…, or with no database.url the first of $STATE_DIRECTORY/ordersync.db,
// /var/lib/ordersync/ordersync.db and ./ordersync.db that exists. When none does, a
// command that may create one (run, migrate, demo) creates
// $STATE_DIRECTORY/ordersync.db or ./ordersync.db; any other fails naming the places
// (exit 1). A file created is logged; a file found is named once the command is
// done (Main).
func (a *app) sqlitePath(cfg *config.Config, use dbUse, log *slog.Logger) (string, error) {
	if cfg.Database.URL != "" {
		return cfg.Database.SQLitePath(), nil
	}
	found, err := sqlite.Find(a.getenv, serviceStateDir)
	var nf *sqlite.NotFoundError
	switch {
	case err == nil:
		// Said once the command is done (Main), on stderr, or with its error: not
		// here, where it would make the one line of an error two. `run` logs it.
		a.opened = "journal " + found.String()
		return found.Path, nil
	case errors.As(err, &nf) && use.create:
		path, err := filepath.Abs(sqlite.DefaultPath(a.getenv))
		if err != nil {
			return "", err
		}
		looked := make([]string, len(nf.Places))
		for i, p := range nf.Places {
			looked[i] = p.Path
		}
		log.Info("creating the embedded SQLite journal (no database.url, none found)", "file", path,
			"looked_at", strings.Join(looked, ", "))
		return path, nil
	}
	return "", err
}

// openDB opens the configured database: PostgreSQL when database.url is a postgres
// URL, otherwise the embedded SQLite file (the default), as the command's dbUse
// allows. A server that does not answer is an operational failure (exit 1) named by
// host, port and database; run and migrate first wait for it up to
// database.connect_timeout.
func (a *app) openDB(ctx context.Context, cfg *config.Config, log *slog.Logger) (database, error) {
	use := a.use()
	if cfg.Database.URL == "" || cfg.Database.SQLitePath() != "" {
		path, err := a.sqlitePath(cfg, use, log)
		if err != nil {
			return nil, err
		}
		db, err := sqlite.Open(ctx, sqlite.Config{Path: path, Logger: log,
			MustExist: !use.create, ReadOnly: use.readOnly,
			ClaimLockTimeout: engine.CallBudget(cfg.OneC.Timeout) + 10*time.Second,
			TakeoverAfter:    engine.TakeoverAfter(cfg.OneC.Timeout, cfg.OneC.SettleTime)})
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("database.url: %w; `ordersync migrate` (or `ordersync run`) creates it", err)
		}
		if err != nil {
			return nil, fmt.Errorf("database.url: %w", err)
		}
		return sqliteDatabase{db}, nil
	}
	pc := postgres.Config{
		URL:              cfg.Database.URL,
		MaxConnections:   int32(cfg.Database.MaxConnections), // the total, split by postgres.Split
		ClaimIdleTimeout: claimIdleTimeout(cfg),
		ClaimLockTimeout: engine.CallBudget(cfg.OneC.Timeout) + 10*time.Second,
		TakeoverAfter:    engine.TakeoverAfter(cfg.OneC.Timeout, cfg.OneC.SettleTime),
		CloseTimeout:     cfg.Worker.ShutdownTimeout,
		ProcessClock:     a.processClock,
		Logger:           log,
	}
	wait := time.Duration(0)
	if use.wait {
		wait = cfg.Database.ConnectTimeout
	}
	db, err := connectPostgres(ctx, pc, wait, log)
	if err != nil {
		return nil, fmt.Errorf("database.url: %w", err)
	}
	return pgDatabase{db}, nil
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

// openReadyDB opens the database and refuses a schema that is behind the binary. The
// embedded database is migrated on the spot (but by a command that only reads): it
// is the zero-set-up path, and nobody else shares the file.
func (a *app) openReadyDB(ctx context.Context, cfg *config.Config, log *slog.Logger) (database, error) {
	db, err := a.openDB(ctx, cfg, log)
	if err != nil {
		return nil, err
	}
	if db.embedded() != nil && !a.use().readOnly {
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
