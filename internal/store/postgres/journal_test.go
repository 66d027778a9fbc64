package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ordersync/ordersync/internal/testdb"
)

// newDB opens a store on a fresh schema (cfg.URL, or a new one) and migrates it.
func newDB(t *testing.T, cfg Config) *DB {
	t.Helper()
	if cfg.URL == "" {
		cfg.URL = testdb.URL(t)
	}
	if cfg.TakeoverAfter == 0 {
		// The suites take over released and failed claims at once; the takeover
		// wait has tests of its own (storetest's Doubt topic).
		cfg.TakeoverAfter = time.Nanosecond
	}
	db, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	if _, err := db.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return db
}

// newCountedDB is newDB with every round trip to the server counted in rt. pgxpool
// pings a connection idle for over a second before handing it out; that is the
// pool's health check, not the path measured, and would make counts depend on
// timing, so it is off; so is the store's measurement of the database's clock after
// Open (once a minute).
func newCountedDB(t *testing.T, rt *testdb.RoundTrips) *DB {
	t.Helper()
	return newDB(t, Config{ClockCheckInterval: -1, ConfigurePool: func(c *pgxpool.Config) {
		rt.Install(c)
		c.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return false }
	}})
}
