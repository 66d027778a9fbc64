// Package testdb gives each test its own PostgreSQL schema on the server named by
// TEST_DATABASE_URL (default postgres://postgres@127.0.0.1:5432/test?sslmode=disable),
// and counts database round trips for tests and benchmarks. Tests never skip for want
// of a database: they fail and say how to get one (README: "Development").
package testdb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// DefaultURL is the server tried when TEST_DATABASE_URL is not set.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// BaseURL is TEST_DATABASE_URL, or DefaultURL when it is empty.
func BaseURL() string {
	if u := os.Getenv("TEST_DATABASE_URL"); u != "" {
		return u
	}
	return DefaultURL
}

// ServerURL is the test server's URL (BaseURL) with another user or database where
// they are not empty, and sslmode left to the driver's default (prefer, which tries
// with TLS, then without): for tests of how a refused connection is reported.
func ServerURL(tb testing.TB, user, database string) string {
	tb.Helper()
	u, err := url.Parse(BaseURL())
	if err != nil {
		tb.Fatal(err)
	}
	if user != "" {
		u.User = url.User(user)
	}
	if database != "" {
		u.Path = "/" + database
	}
	q := u.Query()
	q.Del("sslmode")
	u.RawQuery = q.Encode()
	return u.String()
}

// URL creates a fresh schema t_<random hex> on the test server and returns a URL whose
// search_path runtime parameter selects it (and whose application_name is the schema's
// name). The schema is dropped with everything in it when the test ends; sessions still
// connected with that application_name are terminated first. Safe for parallel tests
// and packages.
func URL(tb testing.TB) string {
	tb.Helper()
	base := BaseURL()
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		tb.Fatalf("testdb: TEST_DATABASE_URL must be a postgres:// URL, got %q", redact(base))
	}

	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		tb.Fatalf("testdb: %v", err)
	}
	schema := "t_" + hex.EncodeToString(b[:])

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn := connect(ctx, tb, base)
	_, err = conn.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize())
	conn.Close(ctx)
	if err != nil {
		tb.Fatalf("testdb: create schema %s on %s: %v", schema, redact(base), err)
	}

	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			tb.Errorf("testdb: drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		// Sessions a test left behind (an unreleased claim, a pool never closed) hold
		// locks that DROP SCHEMA would wait for.
		if _, err := conn.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
			WHERE application_name = $1 AND pid <> pg_backend_pid()`, schema); err != nil {
			tb.Errorf("testdb: terminate sessions of %s: %v", schema, err)
		}
		if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			tb.Errorf("testdb: drop schema %s: %v", schema, err)
		}
	})

	q := u.Query()
	q.Set("search_path", schema)
	q.Set("application_name", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

func connect(ctx context.Context, tb testing.TB, base string) *pgx.Conn {
	tb.Helper()
	cfg, err := pgx.ParseConfig(base)
	if err != nil {
		tb.Fatalf("testdb: TEST_DATABASE_URL %q: %v", redact(base), err)
	}
	if cfg.ConnectTimeout == 0 || cfg.ConnectTimeout > 10*time.Second {
		cfg.ConnectTimeout = 10 * time.Second
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		tb.Fatalf("testdb: no PostgreSQL answers at %s: %v\n"+
			"\tThe tests need a real server. `make test` finds one or starts a throwaway cluster "+
			"when initdb/pg_ctl are installed (Debian: apt-get install postgresql); "+
			"or set TEST_DATABASE_URL=postgres://USER@HOST:PORT/DB?sslmode=disable", redact(base), err)
	}
	return conn
}

// redact hides the password of a URL for messages.
func redact(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}
