package postgres

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ordersync/ordersync/internal/testdb"
)

// A role, a password or a database the server refuses is the configuration's fault:
// the ConnectError says so (Refused), and names the driver's reason once, although
// the driver tried twice (sslmode=prefer).
func TestOpenRefusedIsTheConfiguration(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, user, database, why string
	}{
		{"no such role", "ordersync_no_such_role", "", `role "ordersync_no_such_role" does not exist`},
		{"no such database", "", "ordersync_no_such_database", `database "ordersync_no_such_database" does not exist`},
	} {
		_, err := Open(context.Background(), Config{URL: testdb.ServerURL(t, c.user, c.database)})
		var ce *ConnectError
		if !errors.As(err, &ce) {
			t.Fatalf("%s: %v, want a ConnectError", c.name, err)
		}
		if !ce.Refused() {
			t.Errorf("%s: Refused() is false for %v", c.name, err)
		}
		if n := strings.Count(err.Error(), c.why); n != 1 {
			t.Errorf("%s: %q says %q %d times, want once", c.name, err, c.why, n)
		}
	}

	// A server that does not answer may answer later: not refused; its reason once.
	_, err := Open(context.Background(), Config{URL: "postgres://someone@127.0.0.1:1/nowhere?connect_timeout=2"})
	var ce *ConnectError
	if !errors.As(err, &ce) || ce.Refused() {
		t.Fatalf("a closed port: %v (refused: %v), want a ConnectError not refused", err, ce != nil && ce.Refused())
	}
	if n := strings.Count(err.Error(), "connection refused"); n != 1 {
		t.Errorf("a closed port: %q says connection refused %d times, want once", err, n)
	}

	// A wrong password (the test server trusts everyone, so made by hand).
	for code, want := range map[string]bool{"28P01": true, "28000": true, "3D000": true, "57P03": false, "53300": false} {
		ce := &ConnectError{Target: "h:5432/db as u", Err: &pgconn.PgError{Code: code, Severity: "FATAL", Message: "x"}}
		if ce.Refused() != want {
			t.Errorf("SQLSTATE %s: Refused() = %v, want %v", code, ce.Refused(), want)
		}
	}
}
