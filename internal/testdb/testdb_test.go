package testdb

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

func TestURLGivesOwnSchemaAndDropsIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var schema string
	t.Run("inner", func(t *testing.T) {
		conn, err := pgx.Connect(ctx, URL(t))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		if err := conn.QueryRow(ctx, "SELECT current_schema()").Scan(&schema); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(schema, "t_") {
			t.Fatalf("current_schema: got %q, want t_<hex>", schema)
		}
		if _, err := conn.Exec(ctx, "CREATE TABLE x (id int)"); err != nil {
			t.Fatal(err)
		}
		var where string
		if err := conn.QueryRow(ctx, "SELECT table_schema FROM information_schema.tables WHERE table_name = 'x' AND table_schema = $1", schema).Scan(&where); err != nil {
			t.Fatalf("table x is not in %s: %v", schema, err)
		}
	})

	conn, err := pgx.Connect(ctx, BaseURL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_namespace WHERE nspname = $1", schema).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("schema %s still exists after the test ended", schema)
	}
}

// fakeTB records Fatalf instead of stopping the real test.
type fakeTB struct {
	testing.TB
	msg string
}

type fatal struct{}

func (f *fakeTB) Helper()               {}
func (f *fakeTB) Cleanup(func())        {}
func (f *fakeTB) Errorf(string, ...any) {}
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	panic(fatal{})
}

func TestConnectFailureSaysWhatWasTriedAndHowToGetAServer(t *testing.T) {
	t.Parallel()
	tb := &fakeTB{TB: t}
	func() {
		defer func() {
			if r := recover(); r != nil {
				if _, ok := r.(fatal); !ok {
					panic(r)
				}
			}
		}()
		conn := connect(context.Background(), tb, "postgres://someone:s3cret@127.0.0.1:1/nowhere?sslmode=disable&connect_timeout=2")
		conn.Close(context.Background())
	}()
	for _, want := range []string{"127.0.0.1:1/nowhere", "make test", "TEST_DATABASE_URL", "initdb"} {
		if !strings.Contains(tb.msg, want) {
			t.Fatalf("message %q does not contain %q", tb.msg, want)
		}
	}
	if strings.Contains(tb.msg, "s3cret") {
		t.Fatalf("message shows the password: %q", tb.msg)
	}
}

func TestRoundTripsCountsBatchesOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var rt RoundTrips
	cfg, err := pgxpool.ParseConfig(URL(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1
	rt.Install(cfg)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if err := pool.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	if rt.Count() == 0 {
		t.Fatal("connecting counted no round trip")
	}

	got := rt.Measure(func() {
		for range 3 {
			if _, err := pool.Exec(ctx, "SELECT 1"); err != nil {
				t.Fatal(err)
			}
		}
	})
	if want := int64(3); got != want {
		t.Fatalf("three simple queries: got %d round trips, want %d", got, want)
	}

	// Warm the statement cache, then a batch of three is one round trip.
	send := func() {
		b := &pgx.Batch{}
		b.Queue("SELECT $1::int", 1)
		b.Queue("SELECT $1::int + 1", 1)
		b.Queue("SELECT $1::int + 2", 1)
		if err := pool.SendBatch(ctx, b).Close(); err != nil {
			t.Fatal(err)
		}
	}
	send()
	if got, want := rt.Measure(send), int64(1); got != want {
		t.Fatalf("batch of three: got %d round trips, want %d", got, want)
	}
}
