package sqlite

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ordersync/ordersync/internal/eventually"
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
	eventually.True(t, "the waiter to wait for the key", func() bool { return k.Waiting("a") == 1 })
	k.Unlock("a")
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if !k.Held("a") {
		t.Fatal("the waiter does not hold the key")
	}
	if n := k.Waiting("a"); n != 0 {
		t.Fatalf("%d waiters left after the waiter took the key", n)
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

// TestRunLockRecordsWhoHoldsIt: the holder's pid and role are in the lock file; a
// CLI command holding it is not taken for the service.
func TestRunLockRecordsWhoHoldsIt(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "ordersync.db")
	l, err := AcquireRunLockAs(path, "order import")
	if err != nil {
		t.Fatal(err)
	}
	me := Holder{PID: os.Getpid(), Role: "order import"}
	if h, held := RunLockHolder(path); !held || h != me || h.IsService() {
		t.Fatalf("RunLockHolder = %+v %v, want %+v, not a service", h, held, me)
	}
	if pid, ok := LockHolder(path); ok {
		t.Fatalf("LockHolder = %d: a CLI command taken for the service", pid)
	}
	_, err = AcquireRunLock(path)
	var le *LockedError
	if !errors.As(err, &le) || !errors.Is(err, ErrLocked) || le.Holder != me ||
		!strings.Contains(err.Error(), fmt.Sprintf("`ordersync order import` (pid %d)", os.Getpid())) {
		t.Fatalf("AcquireRunLock beside a CLI command = %v, want a *LockedError naming it", err)
	}
	l.Release()
	if h, held := RunLockHolder(path); held {
		t.Fatalf("released, RunLockHolder = %+v", h)
	}
	// The service's record replaces the command's.
	l, err = AcquireRunLock(path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	if h, held := RunLockHolder(path); !held || !h.IsService() || h.PID != os.Getpid() {
		t.Fatalf("RunLockHolder = %+v %v, want the service", h, held)
	}
}

// TestRunLockHolderBelievesOnlyAWholeRecordOfALiveProcess: a record left by a dead
// process (kill -9, the new holder not having written its own yet), a torn record
// and no record at all name no holder; an older ordersync's bare pid names it
// without a role.
func TestRunLockHolderBelievesOnlyAWholeRecordOfALiveProcess(t *testing.T) {
	t.Parallel()
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatalf("run true(1) for a pid that is gone: %v", err)
	}
	path := filepath.Join(t.TempDir(), "ordersync.db")
	// A holder that has the lock and writes the file by hand.
	f, err := os.OpenFile(LockPath(path), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	write := func(b []byte) {
		t.Helper()
		if err := f.Truncate(0); err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt(b, 0); err != nil {
			t.Fatal(err)
		}
	}
	me := os.Getpid()
	torn := encodeRecord(me, "run")
	copy(torn, strconv.Itoa(dead.Process.Pid)) // a new holder's pid over an old record
	for _, c := range []struct {
		name   string
		record []byte
		want   Holder
	}{
		{"nothing written yet", nil, Holder{}},
		{"a dead process's record", encodeRecord(dead.Process.Pid, "run"), Holder{}},
		{"a torn record", torn, Holder{}},
		{"an older ordersync's pid", []byte(strconv.Itoa(me) + "\n"), Holder{PID: me}},
		{"an older ordersync's dead pid", []byte(strconv.Itoa(dead.Process.Pid) + "\n"), Holder{}},
		{"the service", encodeRecord(me, "run"), Holder{PID: me, Role: RoleRun}},
		{"a CLI command", encodeRecord(me, "resync"), Holder{PID: me, Role: "resync"}},
	} {
		write(c.record)
		h, held := runLockHolder(path, 20*time.Millisecond, nil)
		if !held || h != c.want {
			t.Errorf("%s: holder %+v held %v, want %+v held", c.name, h, held, c.want)
		}
		if c.want.Role == "" {
			continue // LockHolder would wait its full second for a record
		}
		if _, ok := LockHolder(path); ok != c.want.IsService() {
			t.Errorf("%s: LockHolder says service %v, want %v", c.name, ok, c.want.IsService())
		}
	}
	// A new holder that writes its record while a reader waits (it has read the
	// dead process's record, and not believed it) is believed.
	write(encodeRecord(dead.Process.Pid, "run"))
	waiting := make(chan struct{})
	var once sync.Once
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		<-waiting
		f.WriteAt(encodeRecord(me, "order import"), 0)
	}()
	h, held := runLockHolder(path, 10*time.Second, func() { once.Do(func() { close(waiting) }) })
	once.Do(func() { close(waiting) }) // should the reader not have waited, the writer must not hang
	<-wrote
	if !held || h != (Holder{PID: me, Role: "order import"}) {
		t.Fatalf("after the new holder wrote its record: %+v %v", h, held)
	}
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
