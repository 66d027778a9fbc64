package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ordersync/ordersync/migrations"
)

// migrateLockKey is the pg_advisory_lock key under which migrations run, so that
// replicas starting together apply them once: the second waits, then finds nothing
// to do. Its bytes spell "ordersyn".
const migrateLockKey int64 = 0x6f7264657273796e

// Schema errors. CheckSchema returns a *SchemaError that matches one of them.
var (
	ErrSchemaBehind = errors.New("postgres: database schema is behind this ordersync")
	ErrSchemaAhead  = errors.New("postgres: database schema is ahead of this ordersync")
)

// SchemaError says how the database's schema version differs from the binary's.
type SchemaError struct {
	Current int // applied in the database
	Latest  int // the newest this binary knows
}

func (e *SchemaError) Error() string {
	if e.Current > e.Latest {
		return fmt.Sprintf("database schema is at version %d, newer than this ordersync knows (%d): this ordersync is older than the database; run the newer release", e.Current, e.Latest)
	}
	return fmt.Sprintf("database schema is at version %d, this ordersync needs %d: run `ordersync migrate`", e.Current, e.Latest)
}

// Is matches ErrSchemaBehind or ErrSchemaAhead.
func (e *SchemaError) Is(target error) bool {
	switch target {
	case ErrSchemaBehind:
		return e.Current < e.Latest
	case ErrSchemaAhead:
		return e.Current > e.Latest
	}
	return false
}

func loadMigrations() ([]migrations.Migration, error) {
	ms, err := migrations.Load(migrations.Postgres)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	return ms, nil
}

// Migrate applies every pending migration, each in its own transaction, while holding
// a session-level advisory lock on a dedicated connection. It returns the versions it
// applied (none when the schema was up to date). On a schema newer than the binary it
// applies nothing and returns a *SchemaError (ErrSchemaAhead).
func (db *DB) Migrate(ctx context.Context) (applied []int, err error) {
	ms, err := loadMigrations()
	if err != nil {
		return nil, err
	}
	conn, err := db.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("postgres: migrate: %w", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", migrateLockKey); err != nil {
		return nil, fmt.Errorf("postgres: migrate: take the migration lock: %w", err)
	}
	defer func() {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if _, uerr := conn.Exec(uctx, "SELECT pg_advisory_unlock($1)", migrateLockKey); uerr != nil {
			// Never hand a connection that may still hold the lock back to the pool.
			_ = conn.Conn().Close(uctx)
			err = errors.Join(err, fmt.Errorf("postgres: migrate: release the migration lock: %w", uerr))
		}
	}()

	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    int         PRIMARY KEY,
		name       text        NOT NULL,
		applied_at timestamptz NOT NULL
	)`); err != nil {
		return nil, fmt.Errorf("postgres: migrate: create schema_migrations: %w", err)
	}
	var current int
	if err := conn.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM schema_migrations").Scan(&current); err != nil {
		return nil, fmt.Errorf("postgres: migrate: read schema version: %w", err)
	}
	latest := ms[len(ms)-1].Version
	if current > latest {
		return nil, &SchemaError{Current: current, Latest: latest}
	}
	for _, m := range ms[current:] {
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, m.SQL); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)",
				m.Version, m.Name, db.nowUTC())
			return err
		})
		if err != nil {
			return applied, fmt.Errorf("postgres: migrate: apply %s: %w", m.File, err)
		}
		db.log.InfoContext(ctx, "applied migration", "version", m.Version, "name", m.Name)
		applied = append(applied, m.Version)
	}
	return applied, nil
}

// SchemaStatus returns the version applied in the database (0 when no migration has
// run) and the newest version this binary knows.
func (db *DB) SchemaStatus(ctx context.Context) (current, latest int, err error) {
	ms, err := loadMigrations()
	if err != nil {
		return 0, 0, err
	}
	latest = ms[len(ms)-1].Version
	var exists bool
	if err := db.pool.QueryRow(ctx, "SELECT to_regclass('schema_migrations') IS NOT NULL").Scan(&exists); err != nil {
		return 0, latest, fmt.Errorf("postgres: read schema version: %w", err)
	}
	if !exists {
		return 0, latest, nil
	}
	if err := db.pool.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM schema_migrations").Scan(&current); err != nil {
		return 0, latest, fmt.Errorf("postgres: read schema version: %w", err)
	}
	return current, latest, nil
}

// CheckSchema returns nil when the database is at the binary's version, otherwise a
// *SchemaError: ErrSchemaBehind ("… run `ordersync migrate`") or ErrSchemaAhead (the
// binary is older than the database).
func (db *DB) CheckSchema(ctx context.Context) error {
	current, latest, err := db.SchemaStatus(ctx)
	if err != nil {
		return err
	}
	if current != latest {
		return &SchemaError{Current: current, Latest: latest}
	}
	return nil
}
