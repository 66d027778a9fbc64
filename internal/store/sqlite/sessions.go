package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/ordersync/ordersync/internal/ui/session"
)

// Sessions is the SQLite session.Store: one row of ui_sessions per sign-in, found
// by its token's hash. Times come back in UTC, to the microsecond.
type Sessions struct {
	db *DB
}

var _ session.Store = (*Sessions)(nil)

// Sessions is the journal pages' session store.
func (db *DB) Sessions() session.Store { return &Sessions{db: db} }

// Create inserts the session; a hash already kept is an error (the primary key).
func (s *Sessions) Create(ctx context.Context, ss session.Session) error {
	err := s.db.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `
INSERT INTO ui_sessions (token_hash, user_name, role, credential, csrf, created_at, last_seen_at, expires_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
			ss.Hash[:], ss.User, ss.Role, ss.Credential[:], ss.CSRF, ts(ss.CreatedAt), ts(ss.LastSeen), ts(ss.ExpiresAt))
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlite: create a session of %s: %w", ss.User, err)
	}
	return nil
}

// Get reads the session kept under h.
func (s *Sessions) Get(ctx context.Context, h session.Hash) (session.Session, error) {
	var (
		ss                       session.Session
		hash, credential         []byte
		created, seen, expiresAt int64
	)
	err := s.db.sql.QueryRowContext(ctx, `
SELECT token_hash, user_name, role, credential, csrf, created_at, last_seen_at, expires_at
FROM ui_sessions WHERE token_hash = ?`, h[:]).
		Scan(&hash, &ss.User, &ss.Role, &credential, &ss.CSRF, &created, &seen, &expiresAt)
	if errors.Is(err, sql.ErrNoRows) {
		return session.Session{}, session.ErrNotFound
	}
	if err != nil {
		return session.Session{}, fmt.Errorf("sqlite: read a session: %w", err)
	}
	if len(hash) != session.HashSize || len(credential) != session.HashSize {
		return session.Session{}, fmt.Errorf("sqlite: read a session: a hash of %d bytes, a credential of %d", len(hash), len(credential))
	}
	ss.Hash, ss.Credential = session.Hash(hash), session.Hash(credential)
	ss.CreatedAt, ss.LastSeen, ss.ExpiresAt = fromTS(created), fromTS(seen), fromTS(expiresAt)
	return ss, nil
}

// Touch moves the session's last use and expiry; it makes no row.
func (s *Sessions) Touch(ctx context.Context, h session.Hash, lastSeen, expires time.Time) error {
	var n int64
	err := s.db.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE ui_sessions SET last_seen_at = ?, expires_at = ? WHERE token_hash = ?`,
			ts(lastSeen), ts(expires), h[:])
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlite: touch a session: %w", err)
	}
	if n == 0 {
		return session.ErrNotFound
	}
	return nil
}

// Delete removes the session kept under h, if any.
func (s *Sessions) Delete(ctx context.Context, h session.Hash) error {
	err := s.db.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM ui_sessions WHERE token_hash = ?`, h[:])
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlite: delete a session: %w", err)
	}
	return nil
}

// DeleteExpired removes the sessions whose expiry is not after now (by the index on
// expires_at).
func (s *Sessions) DeleteExpired(ctx context.Context, now time.Time) (int, error) {
	var n int64
	err := s.db.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM ui_sessions WHERE expires_at <= ?`, ts(now))
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("sqlite: delete expired sessions: %w", err)
	}
	return int(n), nil
}
