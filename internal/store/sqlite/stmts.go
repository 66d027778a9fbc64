package sqlite

import (
	"context"
	"database/sql"
	"sync"
)

// stmtCache keeps the statements that every order runs (a registration, a claim, a
// verdict, an inbox delivery) prepared: a query text passed to database/sql as it
// is is parsed and planned by SQLite on every call, which the profile of the
// journal path showed as the costliest part of its write transactions. A statement
// is prepared once on the database; database/sql then keeps it prepared on each
// connection it runs on.
//
// Only statements whose rows are read to the end (or closed) before the same
// statement runs again on the transaction go through it: SQLite has one cursor per
// prepared statement.
type stmtCache struct {
	mu sync.Mutex
	m  map[string]*sql.Stmt
}

// prepared is query prepared on the database, from the cache; nil when it could
// not be prepared, and then the caller runs the text itself and meets the error
// there.
func (db *DB) prepared(ctx context.Context, query string) *sql.Stmt {
	db.stmts.mu.Lock()
	defer db.stmts.mu.Unlock()
	if s, ok := db.stmts.m[query]; ok {
		return s
	}
	s, err := db.sql.PrepareContext(ctx, query)
	if err != nil {
		return nil
	}
	if db.stmts.m == nil {
		db.stmts.m = map[string]*sql.Stmt{}
	}
	db.stmts.m[query] = s
	return s
}

// stmt is query prepared for tx, or nil (prepared).
func (db *DB) stmt(ctx context.Context, tx *sql.Tx, query string) *sql.Stmt {
	s := db.prepared(ctx, query)
	if s == nil {
		return nil
	}
	return tx.StmtContext(ctx, s)
}

// queryRow is db.sql.QueryRowContext through the statement cache: a read outside
// any transaction that every delivery makes (the inbox's lookup).
func (db *DB) queryRow(ctx context.Context, query string, args ...any) *sql.Row {
	if s := db.prepared(ctx, query); s != nil {
		return s.QueryRowContext(ctx, args...)
	}
	return db.sql.QueryRowContext(ctx, query, args...)
}

// execTx is tx.ExecContext through the statement cache.
func (db *DB) execTx(ctx context.Context, tx *sql.Tx, query string, args ...any) (sql.Result, error) {
	if s := db.stmt(ctx, tx, query); s != nil {
		return s.ExecContext(ctx, args...)
	}
	return tx.ExecContext(ctx, query, args...)
}

// queryTx is tx.QueryContext through the statement cache.
func (db *DB) queryTx(ctx context.Context, tx *sql.Tx, query string, args ...any) (*sql.Rows, error) {
	if s := db.stmt(ctx, tx, query); s != nil {
		return s.QueryContext(ctx, args...)
	}
	return tx.QueryContext(ctx, query, args...)
}

// queryRowTx is tx.QueryRowContext through the statement cache.
func (db *DB) queryRowTx(ctx context.Context, tx *sql.Tx, query string, args ...any) *sql.Row {
	if s := db.stmt(ctx, tx, query); s != nil {
		return s.QueryRowContext(ctx, args...)
	}
	return tx.QueryRowContext(ctx, query, args...)
}
