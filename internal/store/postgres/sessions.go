package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ordersync/ordersync/internal/ui/session"
)

// Sessions is the PostgreSQL session.Store: one row of ui_sessions per sign-in,
// found by its token's hash. Times come back in UTC, to the microsecond.
type Sessions struct {
	db *DB
}

var _ session.Store = (*Sessions)(nil)

// Sessions is the journal pages' session store.
func (db *DB) Sessions() session.Store { return &Sessions{db: db} }

// Create inserts the session; a hash already kept is an error (the primary key).
func (s *Sessions) Create(ctx context.Context, ss session.Session) error {
	_, err := s.db.pool.Exec(ctx, `
INSERT INTO ui_sessions (token_hash, user_name, role, credential, csrf, created_at, last_seen_at, expires_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
		ss.Hash[:], ss.User, ss.Role, ss.Credential[:], ss.CSRF, ss.CreatedAt.UTC(), ss.LastSeen.UTC(), ss.ExpiresAt.UTC())
	if err != nil {
		return fmt.Errorf("postgres: create a session of %s: %w", ss.User, interpretError(err))
	}
	return nil
}

// Get reads the session kept under h. One round trip.
func (s *Sessions) Get(ctx context.Context, h session.Hash) (session.Session, error) {
	var (
		ss               session.Session
		hash, credential []byte
	)
	err := s.db.pool.QueryRow(ctx, `
SELECT token_hash, user_name, role, credential, csrf, created_at, last_seen_at, expires_at
FROM ui_sessions WHERE token_hash = $1`, h[:]).
		Scan(&hash, &ss.User, &ss.Role, &credential, &ss.CSRF, &ss.CreatedAt, &ss.LastSeen, &ss.ExpiresAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return session.Session{}, session.ErrNotFound
	}
	if err != nil {
		return session.Session{}, fmt.Errorf("postgres: read a session: %w", interpretError(err))
	}
	if len(hash) != session.HashSize || len(credential) != session.HashSize {
		return session.Session{}, fmt.Errorf("postgres: read a session: a hash of %d bytes, a credential of %d", len(hash), len(credential))
	}
	ss.Hash, ss.Credential = session.Hash(hash), session.Hash(credential)
	ss.CreatedAt, ss.LastSeen, ss.ExpiresAt = ss.CreatedAt.UTC(), ss.LastSeen.UTC(), ss.ExpiresAt.UTC()
	return ss, nil
}

// Touch moves the session's last use and expiry; it makes no row.
func (s *Sessions) Touch(ctx context.Context, h session.Hash, lastSeen, expires time.Time) error {
	tag, err := s.db.pool.Exec(ctx, `UPDATE ui_sessions SET last_seen_at = $2, expires_at = $3 WHERE token_hash = $1`,
		h[:], lastSeen.UTC(), expires.UTC())
	if err != nil {
		return fmt.Errorf("postgres: touch a session: %w", interpretError(err))
	}
	if tag.RowsAffected() == 0 {
		return session.ErrNotFound
	}
	return nil
}

// Delete removes the session kept under h, if any.
func (s *Sessions) Delete(ctx context.Context, h session.Hash) error {
	if _, err := s.db.pool.Exec(ctx, `DELETE FROM ui_sessions WHERE token_hash = $1`, h[:]); err != nil {
		return fmt.Errorf("postgres: delete a session: %w", interpretError(err))
	}
	return nil
}

// DeleteExpired removes the sessions whose expiry is not after now (by the index on
// expires_at).
func (s *Sessions) DeleteExpired(ctx context.Context, now time.Time) (int, error) {
	tag, err := s.db.pool.Exec(ctx, `DELETE FROM ui_sessions WHERE expires_at <= $1`, now.UTC())
	if err != nil {
		return 0, fmt.Errorf("postgres: delete expired sessions: %w", interpretError(err))
	}
	return int(tag.RowsAffected()), nil
}
