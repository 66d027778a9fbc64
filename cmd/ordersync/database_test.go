package main

import (
	"strings"
	"testing"

	"github.com/ordersync/ordersync/internal/sim/onecsim"
	"github.com/ordersync/ordersync/internal/testdb"
)

// A PostgreSQL role, password or database the server refuses is a configuration
// error: exit 2 naming database.url (systemd's RestartPreventExitStatus=2 then does
// not restart the service five times), the driver's reason said once on one line.
// A server that does not answer is an operational failure (exit 1), also said once.
func TestRefusedDatabaseExits2(t *testing.T) {
	t.Parallel()
	e := newEnvOn(t, "sqlite", onecsim.Options{}, false)
	with := func(user, database string) string { return testdb.ServerURL(t, user, database) }
	for _, c := range []struct {
		name, url, why string
		code           int
	}{
		{"no such role", with("ordersync_no_such_role", ""), `role "ordersync_no_such_role" does not exist`, exitUsage},
		{"no such database", with("", "ordersync_no_such_database"), `database "ordersync_no_such_database" does not exist`, exitUsage},
		{"no server", "postgres://ordersync@127.0.0.1:1/ordersync?connect_timeout=2", "connection refused", exitFailed},
	} {
		env := append(append([]string(nil), e.environ...), "ORDERSYNC_DATABASE__URL="+c.url,
			"ORDERSYNC_DATABASE__CONNECT_TIMEOUT=0s")
		for _, args := range [][]string{{"run"}, {"migrate"}, {"journal", "list"}} {
			e2 := *e
			e2.environ = env
			_, stderr, code := e2.cli("", args...)
			what := c.name + ": " + strings.Join(args, " ")
			msg := wantOneLine(t, what, stderr)
			if code != c.code {
				t.Errorf("%s: exit %d, want %d: %s", what, code, c.code, msg)
			}
			if !strings.Contains(msg, "database.url") {
				t.Errorf("%s: %q does not name database.url", what, msg)
			}
			if n := strings.Count(msg, c.why); n != 1 {
				t.Errorf("%s: %q says %q %d times, want once", what, msg, c.why, n)
			}
		}
	}
}
