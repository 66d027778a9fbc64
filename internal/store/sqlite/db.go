// Package sqlite is the embedded store: one SQLite file (modernc.org/sqlite, pure Go,
// so the binary stays static), for a shop that runs one ordersync near its 1C and no
// database server. It implements the same interfaces as internal/store/postgres and
// passes the same conformance suites (internal/store/storetest).
//
// What PostgreSQL does with row locks, SQLite's single writer cannot: one file has one
// writer at a time. So:
//
//   - one `ordersync run` only works a given file (RunLock, a lock file beside it);
//   - inside that process, a per-key lock stands in for SELECT … FOR UPDATE: a claim
//     holds its operation's key lock, and no database lock, while 1C is called;
//   - writes are short transactions (BEGIN IMMEDIATE), serialised in the process and
//     waiting on busy_timeout across processes (a CLI command beside the service);
//   - an in-process notifier stands in for LISTEN/NOTIFY.
//
// Times are stored as INTEGER microseconds since the epoch, UTC; JSON as TEXT. They
// are the process's clock (Config.Now): the file lives on the machine that works it,
// the processes that open it share that machine's clock, and so there is no other
// clock to agree with (PostgreSQL replicas judge on the server's, see
// internal/store/postgres).
package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"

	_ "modernc.org/sqlite" // the database/sql driver "sqlite"

	"github.com/ordersync/ordersync/migrations"
)

// Config configures Open.
type Config struct {
	// Path is the database file; its directory must exist (Open creates the file,
	// unless MustExist or ReadOnly).
	Path string
	// MustExist refuses to create the file: a command that was not asked to make a
	// journal (all but run, migrate and demo) opens an existing one or fails naming it
	// (an error that errors.Is fs.ErrNotExist).
	MustExist bool
	// ReadOnly opens an existing file read-only, for a command that only reads:
	// writes and Migrate fail. SQLite may still create the -wal and -shm files it
	// reads through.
	ReadOnly bool
	// BusyTimeout is how long a write waits for another process's write (a CLI
	// command beside the service) before it fails; default 10s.
	BusyTimeout time.Duration
	// ClaimLockTimeout bounds the wait for an operation's key lock (ClaimKey, Lock,
	// Requeue of a claimed row) before journal.ErrBusy; default 30s.
	ClaimLockTimeout time.Duration
	// TakeoverAfter is how old an open attempt must be before a claim takes it over
	// (closes it as interrupted and starts another): the engine's call budget plus
	// onec.settle_time, since a killed worker's POST may still be at work in 1C
	// (default 3m30s: 3 × 30s + 2m).
	TakeoverAfter time.Duration
	// Now is the store's clock (default time.Now): every process that opens the file
	// runs on its machine, whose clock they share.
	Now    func() time.Time
	Logger *slog.Logger
}

// Defaults.
const (
	DefaultBusyTimeout      = 10 * time.Second
	DefaultClaimLockTimeout = 30 * time.Second
	DefaultTakeoverAfter    = 3*time.Minute + 30*time.Second
)

// Memory: the page cache of each connection (PRAGMA cache_size, in KiB, below SQLite's
// own default), how many connections the pool opens at most, and how many it keeps
// open while idle (each holds its cache and a parsed schema).
const (
	cacheKiB     = 512
	maxOpenConns = 8
	maxIdleConns = 2
)

// DB is an open SQLite store.
type DB struct {
	sql  *sql.DB
	path string
	cfg  Config
	now  func() time.Time
	log  *slog.Logger

	// wmu serialises this process's write transactions: SQLite has one writer, and
	// waiting here is cheaper and fairer than spinning on SQLITE_BUSY.
	wmu sync.Mutex

	keys   *KeyLocks
	notify *notifier

	stmts stmtCache // the write path's statements, parsed once (stmts.go)
}

// Open opens (creating if need be) the database file in WAL mode with a busy
// timeout and foreign keys on. It does not migrate.
func Open(ctx context.Context, cfg Config) (*DB, error) {
	if cfg.Path == "" {
		return nil, errors.New("sqlite: the database path is empty")
	}
	cfg.BusyTimeout = cmp.Or(cfg.BusyTimeout, DefaultBusyTimeout)
	cfg.ClaimLockTimeout = cmp.Or(cfg.ClaimLockTimeout, DefaultClaimLockTimeout)
	cfg.TakeoverAfter = cmp.Or(cfg.TakeoverAfter, DefaultTakeoverAfter)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	abs, err := filepath.Abs(cfg.Path)
	if err != nil {
		return nil, fmt.Errorf("sqlite: %s: %w", cfg.Path, err)
	}
	if fi, err := os.Stat(filepath.Dir(abs)); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("sqlite: cannot open %s: the directory %s does not exist", abs, filepath.Dir(abs))
	}
	if cfg.MustExist || cfg.ReadOnly {
		switch fi, err := os.Stat(abs); {
		case errors.Is(err, fs.ErrNotExist):
			return nil, fmt.Errorf("sqlite: the database file %s does not exist: %w", abs, fs.ErrNotExist)
		case err != nil:
			return nil, fmt.Errorf("sqlite: cannot open %s: %w", abs, err)
		case fi.IsDir():
			return nil, fmt.Errorf("sqlite: cannot open %s: it is a directory", abs)
		}
	}
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", cfg.BusyTimeout.Milliseconds()))
	switch {
	case cfg.ReadOnly:
		q.Set("mode", "ro") // and the journal mode stays the file's
	case cfg.MustExist:
		q.Set("mode", "rw")
		q.Add("_pragma", "journal_mode(WAL)")
	default:
		q.Add("_pragma", "journal_mode(WAL)")
	}
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", "synchronous(NORMAL)")
	// A statement that writes inside a transaction keeps the pages it changes in a
	// statement journal, to undo just itself; an order's row with its indexes passes
	// SQLite's in-memory threshold for one, and the journal then becomes a temporary
	// file written and deleted on every registration and verdict. In memory, as are
	// temporary tables and sorts (the store's lists read indexes in order).
	q.Add("_pragma", "temp_store(MEMORY)")
	// Each connection keeps a page cache of its own; the file's pages stay in the
	// operating system's cache besides, so a small one costs a read call, not a disk
	// read, while the pool's connections together stay small.
	q.Add("_pragma", fmt.Sprintf("cache_size(-%d)", cacheKiB))
	q.Set("_txlock", "immediate")
	dsn := "file:" + abs + "?" + q.Encode()
	sdb, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", abs, err)
	}
	sdb.SetMaxOpenConns(maxOpenConns)
	sdb.SetMaxIdleConns(maxIdleConns)
	sdb.SetConnMaxIdleTime(time.Minute)
	if err := sdb.PingContext(ctx); err != nil {
		sdb.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", abs, err)
	}
	var mode string
	if err := sdb.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&mode); err != nil || (mode != "wal" && !cfg.ReadOnly) {
		sdb.Close()
		return nil, fmt.Errorf("sqlite: %s: cannot switch to WAL (journal_mode %q): %v", abs, mode, err)
	}
	adoptOwner(abs) // run as root beside the service: what was created stays the service's
	return &DB{sql: sdb, path: abs, cfg: cfg, now: cfg.Now, log: cfg.Logger,
		keys: NewKeyLocks(), notify: newNotifier()}, nil
}

// Close closes the database. Like PostgreSQL's DB.Close it returns nothing (the
// process is done with the file: what closing it met is not for the caller to act on).
func (db *DB) Close() { db.sql.Close() }

// String names the file, for messages.
func (db *DB) String() string { return db.path }

// Path is the database file.
func (db *DB) Path() string { return db.path }

// EmbeddedFile is the database file (store.DB).
func (db *DB) EmbeddedFile() string { return db.path }

// SQL is the underlying handle, for tests.
func (db *DB) SQL() *sql.DB { return db.sql }

// Keys are the in-process key locks (the FOR UPDATE stand-in).
func (db *DB) Keys() *KeyLocks { return db.keys }

// Now is the store's clock, Config.Now: the machine's, which every process that
// opens the file shares (the engine is given it, as it is given PostgreSQL's DB.Now).
func (db *DB) Now() time.Time { return db.now() }

// ClockOffset is the difference between the database's clock and the process's:
// always 0, the file has no clock of its own.
func (db *DB) ClockOffset() time.Duration { return 0 }

// WatchClock calls f once with ClockOffset, 0 (as PostgreSQL's DB.WatchClock calls it
// after each measurement).
func (db *DB) WatchClock(f func(offset time.Duration)) { f(0) }

// nowUTC is the store's clock, truncated to the microsecond it stores.
func (db *DB) nowUTC() time.Time { return db.now().UTC().Truncate(time.Microsecond) }

// ts and fromTS convert times to and from the stored microseconds.
func ts(t time.Time) int64 { return t.UTC().UnixMicro() }

func fromTS(us int64) time.Time { return time.UnixMicro(us).UTC() }

// nullTS reads a nullable time column.
func nullTS(v sql.NullInt64) *time.Time {
	if !v.Valid {
		return nil
	}
	t := fromTS(v.Int64)
	return &t
}

// write runs fn in a write transaction (BEGIN IMMEDIATE) and commits it. A failed fn
// or commit rolls back, even when ctx is cancelled.
func (db *DB) write(ctx context.Context, fn func(tx *sql.Tx) error) error {
	db.wmu.Lock()
	defer db.wmu.Unlock()
	tx, err := db.sql.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}

// Migrate applies the pending migrations, each in its own transaction, and returns
// the versions applied. Two processes migrating at once serialise on SQLite's writer
// lock; the second finds nothing to do.
func (db *DB) Migrate(ctx context.Context) ([]int, error) {
	ms, err := migrations.Load(migrations.SQLite)
	if err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	var applied []int
	for _, m := range ms {
		done := false
		err := db.write(ctx, func(tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
				version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)`); err != nil {
				return err
			}
			var n int
			if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM schema_migrations WHERE version = ?`, m.Version).Scan(&n); err != nil {
				return err
			}
			if n > 0 {
				done = true
				return nil
			}
			if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
				return fmt.Errorf("migration %s: %w", m.File, err)
			}
			_, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
				m.Version, m.Name, ts(db.nowUTC()))
			return err
		})
		if err != nil {
			return applied, fmt.Errorf("sqlite: migrate %s: %w", db.path, err)
		}
		if !done {
			applied = append(applied, m.Version)
			db.log.InfoContext(ctx, "applied migration", "version", m.Version, "name", m.Name, "database", db.path)
		}
	}
	return applied, nil
}

// SchemaStatus reports the applied and the newest known versions.
func (db *DB) SchemaStatus(ctx context.Context) (current, latest int, err error) {
	ms, err := migrations.Load(migrations.SQLite)
	if err != nil {
		return 0, 0, fmt.Errorf("sqlite: %w", err)
	}
	latest = ms[len(ms)-1].Version
	var exists int
	if err := db.sql.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'`).Scan(&exists); err != nil {
		return 0, latest, fmt.Errorf("sqlite: schema status of %s: %w", db.path, err)
	}
	if exists == 0 {
		return 0, latest, nil
	}
	if err := db.sql.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&current); err != nil {
		return 0, latest, fmt.Errorf("sqlite: schema status of %s: %w", db.path, err)
	}
	return current, latest, nil
}

// SchemaError says how the file's schema differs from the binary's.
type SchemaError struct{ Current, Latest int }

func (e *SchemaError) Error() string {
	if e.Current > e.Latest {
		return fmt.Sprintf("database schema is at version %d, newer than this ordersync knows (%d): run the newer release", e.Current, e.Latest)
	}
	return fmt.Sprintf("database schema is at version %d, this ordersync needs %d: run `ordersync migrate`", e.Current, e.Latest)
}

// CheckSchema refuses a schema that is behind (or ahead of) the binary.
func (db *DB) CheckSchema(ctx context.Context) error {
	cur, latest, err := db.SchemaStatus(ctx)
	if err != nil {
		return err
	}
	if cur != latest {
		return &SchemaError{Current: cur, Latest: latest}
	}
	return nil
}
