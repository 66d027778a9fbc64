// Package session is what the journal pages keep of a sign-in in the database, so
// that every replica of the service knows it: the record, the store it is kept in
// (internal/store/postgres and internal/store/sqlite implement Store) and the hash
// a record is found by. The pages (internal/ui) decide when a session starts,
// slides and ends; a store only keeps the rows.
package session

import (
	"context"
	"crypto/sha256"
	"errors"
	"time"
)

// ErrNotFound: no session has the hash (never made, signed out, or swept).
var ErrNotFound = errors.New("session: not found")

// HashSize is the length of a Hash.
const HashSize = sha256.Size

// Hash is the SHA-256 of a session's token, the token being what the browser's
// cookie holds. The database keeps only the hash: whoever reads it cannot sign in
// as anyone.
type Hash [HashSize]byte

// HashToken is the hash the session of token is kept under.
func HashToken(token string) Hash { return sha256.Sum256([]byte(token)) }

// Session is one sign-in.
type Session struct {
	Hash Hash
	// User and Role are the ui.users entry signed in as; Credential is the hash
	// of that entry's password hash (FingerprintCredential) at the time: when the
	// entry changes, the session no longer stands for it.
	User, Role string
	Credential Hash
	// CSRF is the token the forms of the session's pages carry.
	CSRF string
	// CreatedAt is the sign-in; LastSeen the latest use that was recorded;
	// ExpiresAt when the session ends unless used again. A store keeps them to
	// the microsecond, in UTC.
	CreatedAt, LastSeen, ExpiresAt time.Time
}

// FingerprintCredential is the Credential of a session signed in against a
// password hash.
func FingerprintCredential(passwordHash string) Hash { return sha256.Sum256([]byte(passwordHash)) }

// Store keeps sessions. Its times are the caller's: it neither reads a clock nor
// judges expiry, except that DeleteExpired removes the sessions whose ExpiresAt is
// not after the time it is given.
type Store interface {
	// Create keeps a new session; a hash already kept is an error.
	Create(ctx context.Context, s Session) error
	// Get is the session kept under h, or ErrNotFound.
	Get(ctx context.Context, h Hash) (Session, error)
	// Touch records a use: LastSeen and ExpiresAt become lastSeen and expires.
	// ErrNotFound when the session is gone (it is not made again).
	Touch(ctx context.Context, h Hash, lastSeen, expires time.Time) error
	// Delete removes the session kept under h; one that is gone is no error.
	Delete(ctx context.Context, h Hash) error
	// DeleteExpired removes every session whose ExpiresAt is not after now and
	// says how many it removed.
	DeleteExpired(ctx context.Context, now time.Time) (int, error)
}
