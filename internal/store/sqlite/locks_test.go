package sqlite

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestOpenMigrateAndCheckSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ordersync.db")
	db, err := Open(ctx, Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var se *SchemaError
	if err := db.CheckSchema(ctx); !errors.As(err, &se) || !strings.Contains(err.Error(), "ordersync migrate") {
		t.Fatalf("CheckSchema before migrate = %v, want a schema error saying to migrate", err)
	}
	applied, err := db.Migrate(ctx)
	if err != nil || len(applied) == 0 {
		t.Fatalf("Migrate = %v, %v", applied, err)
	}
	if again, err := db.Migrate(ctx); err != nil || len(again) != 0 {
		t.Fatalf("second Migrate = %v, %v; want nothing to do", again, err)
	}
	if err := db.CheckSchema(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(ctx, Config{Path: filepath.Join(t.TempDir(), "no", "such", "dir", "x.db")}); err == nil ||
		!strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("Open in a missing directory = %v", err)
	}
}

func TestKeyLocks(t *testing.T) {
	t.Parallel()
	k := NewKeyLocks()
	if !k.TryLock("a") || k.TryLock("a") {
		t.Fatal("TryLock does not exclude")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := k.Lock(ctx, "a"); err == nil {
		t.Fatal("Lock of a held key did not wait")
	}
	got := make(chan error)
	go func() { got <- k.Lock(context.Background(), "a") }()
	time.Sleep(10 * time.Millisecond)
	k.Unlock("a")
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if !k.Held("a") {
		t.Fatal("the waiter does not hold the key")
	}
}

func TestRunLockExcludesASecondHolderAndNamesThePid(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "ordersync.db")
	l, err := AcquireRunLock(path)
	if err != nil {
		t.Fatal(err)
	}
	if pid, ok := LockHolder(path); !ok || pid != os.Getpid() {
		t.Fatalf("LockHolder = %d %v, want this process", pid, ok)
	}
	// flock locks belong to the open file: a second open in this process conflicts too.
	if _, err := AcquireRunLock(path); !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), strconv.Itoa(os.Getpid())) {
		t.Fatalf("second AcquireRunLock = %v, want ErrLocked naming pid %d", err, os.Getpid())
	}
	l.Release()
	l.Release()
	if _, ok := LockHolder(path); ok {
		t.Fatal("a released lock still has a holder")
	}
	l2, err := AcquireRunLock(path)
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	l2.Release()
}

func TestDefaultPath(t *testing.T) {
	t.Parallel()
	env := map[string]string{"STATE_DIRECTORY": "/var/lib/ordersync:/var/lib/other"}
	if got := DefaultPath(func(k string) string { return env[k] }); got != "/var/lib/ordersync/ordersync.db" {
		t.Fatalf("DefaultPath = %q", got)
	}
	if got := DefaultPath(func(string) string { return "" }); got != "ordersync.db" {
		t.Fatalf("DefaultPath without STATE_DIRECTORY = %q", got)
	}
}
