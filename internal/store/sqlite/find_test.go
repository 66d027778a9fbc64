package sqlite

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/order"
)

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestPlacesInOrderAndOnce(t *testing.T) {
	t.Parallel()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	got := Places(envOf(map[string]string{"STATE_DIRECTORY": "/run/state/ordersync:/var/lib/other"}), ServiceDir)
	want := []string{"/run/state/ordersync/ordersync.db", "/var/lib/ordersync/ordersync.db", filepath.Join(wd, "ordersync.db")}
	if len(got) != len(want) {
		t.Fatalf("Places = %v, want %v", got, want)
	}
	for i := range want {
		if got[i].Path != want[i] {
			t.Fatalf("place %d is %s, want %s", i, got[i].Path, want[i])
		}
	}
	// Inside the unit $STATE_DIRECTORY is the service's directory: one place.
	got = Places(envOf(map[string]string{"STATE_DIRECTORY": ServiceDir}), ServiceDir)
	if len(got) != 2 || got[0].What != "$STATE_DIRECTORY" {
		t.Fatalf("Places with STATE_DIRECTORY=%s: %v", ServiceDir, got)
	}
	if got := Places(envOf(nil), ""); len(got) != 1 || got[0].Path != filepath.Join(wd, "ordersync.db") {
		t.Fatalf("Places without a service directory: %v", got)
	}
}

func TestFindTakesTheFirstThatExists(t *testing.T) {
	t.Parallel()
	state, service := t.TempDir(), t.TempDir()
	env := envOf(map[string]string{"STATE_DIRECTORY": state})
	_, err := Find(env, service)
	var nf *NotFoundError
	if !errors.As(err, &nf) || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Find with no file: %v, want a *NotFoundError", err)
	}
	for _, want := range []string{filepath.Join(state, FileName), filepath.Join(service, FileName), "working directory", "ordersync migrate"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not name %q: %s", want, err)
		}
	}
	if err := os.WriteFile(filepath.Join(service, FileName), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := Find(env, service); err != nil || got.Path != filepath.Join(service, FileName) || got.What != "the service's state directory" {
		t.Fatalf("Find = %q, %v; want the service's file", got, err)
	}
	if err := os.WriteFile(filepath.Join(state, FileName), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := Find(env, service); err != nil || got.Path != filepath.Join(state, FileName) || got.What != "$STATE_DIRECTORY" {
		t.Fatalf("Find = %q, %v; want $STATE_DIRECTORY's file", got, err)
	}
}

func TestFindDoesNotPassOverAPlaceItCannotSee(t *testing.T) {
	t.Parallel()
	if os.Geteuid() == 0 {
		// Root sees every directory (CI runs as root): the test runs again as
		// nobody, a copy of this test binary in a directory nobody may enter.
		asNobody(t, "^TestFindDoesNotPassOverAPlaceItCannotSee$")
		return
	}
	service := filepath.Join(t.TempDir(), "private")
	if err := os.Mkdir(service, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(service, 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(service, 0o700) })
	_, err := Find(envOf(nil), service)
	if err == nil || !strings.Contains(err.Error(), "permission denied") || !strings.Contains(err.Error(), "sudo") {
		t.Fatalf("Find past a directory it may not enter: %v, want permission denied and sudo", err)
	}
}

func TestOpenMustExistAndReadOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), FileName)
	for _, cfg := range []Config{{Path: path, MustExist: true}, {Path: path, ReadOnly: true}} {
		if db, err := Open(ctx, cfg); !errors.Is(err, fs.ErrNotExist) {
			if db != nil {
				db.Close()
			}
			t.Fatalf("Open %+v of a missing file: %v, want fs.ErrNotExist", cfg, err)
		}
		if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("Open %+v created the file", cfg)
		}
	}
	db, err := Open(ctx, Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := db.journalStore().Register(ctx, journal.NewOperation{Key: "site:order:1:create", Kind: order.KindCreate,
		Source: "site", ExternalID: "1", Payload: []byte(`{"n":1}`)}); err != nil {
		t.Fatal(err)
	}
	db.Close()

	ro, err := Open(ctx, Config{Path: path, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if err := ro.CheckSchema(ctx); err != nil {
		t.Fatal(err)
	}
	ops, err := ro.journalStore().List(ctx, journal.Filter{})
	if err != nil || len(ops) != 1 {
		t.Fatalf("read-only list: %v %v", ops, err)
	}
	if _, err := ro.journalStore().Show(ctx, "site:order:1:create"); err != nil {
		t.Fatalf("read-only show: %v", err)
	}
	if _, err := ro.journalStore().Register(ctx, journal.NewOperation{Key: "site:order:2:create", Kind: order.KindCreate,
		Source: "site", ExternalID: "2", Payload: []byte(`{"n":2}`)}); err == nil {
		t.Fatal("a read-only database took a write")
	}
	rw, err := Open(ctx, Config{Path: path, MustExist: true})
	if err != nil {
		t.Fatal(err)
	}
	defer rw.Close()
	if _, err := rw.Migrate(ctx); err != nil {
		t.Fatalf("MustExist opens for writing: %v", err)
	}
}

// A command run as root beside the service (sudo ordersync order import) leaves
// nothing the service's user cannot open: the run lock and a database root created
// in the service's directory are handed to the directory's owner, and SQLite hands
// over its -wal and -shm.
func TestRootLeavesTheServiceItsFiles(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root: it checks what a command run with sudo leaves beside the service")
	}
	const service = 65534 // nobody: stands for the unit's dynamic user
	ctx := context.Background()
	dir := t.TempDir()
	if err := os.Chown(dir, service, service); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, FileName)
	owner := func(p string) int {
		t.Helper()
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		return int(fi.Sys().(*syscall.Stat_t).Uid)
	}
	// `ordersync migrate` run with sudo creates the file in the service's directory.
	db, err := Open(ctx, Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{path, path + "-wal", path + "-shm"} {
		if u := owner(f); u != service {
			t.Errorf("%s is owned by %d, want the directory's owner %d", filepath.Base(f), u, service)
		}
	}
	// `ordersync order import` run with sudo takes the run lock.
	lock, err := AcquireRunLockAs(path, "order import")
	if err != nil {
		t.Fatal(err)
	}
	lock.Release()
	if u := owner(LockPath(path)); u != service {
		t.Errorf("the run lock is owned by %d, want %d", u, service)
	}
	db.Close()
	// A read-only command run with sudo, the service stopped: the -wal and -shm
	// it makes are the service's too.
	os.Remove(path + "-wal")
	os.Remove(path + "-shm")
	ro, err := Open(ctx, Config{Path: path, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ro.journalStore().List(ctx, journal.Filter{}); err != nil {
		t.Fatal(err)
	}
	ro.Close()
	for _, f := range []string{path, path + "-wal", path + "-shm"} {
		if _, err := os.Stat(f); err == nil && owner(f) != service {
			t.Errorf("after a read-only command %s is owned by %d, want %d", filepath.Base(f), owner(f), service)
		}
	}
	// A file root keeps in its own directory stays root's.
	own := filepath.Join(t.TempDir(), FileName)
	db2, err := Open(ctx, Config{Path: own})
	if err != nil {
		t.Fatal(err)
	}
	db2.Close()
	if u := owner(own); u != 0 {
		t.Errorf("root's own file was given to %d", u)
	}
}

// asNobody runs the test named by pattern again in a copy of this test binary as
// the user nobody, and fails t unless it passed there (not skipped).
func asNobody(t *testing.T, pattern string) {
	t.Helper()
	const nobody = 65534
	dir := t.TempDir()
	tmp := filepath.Join(dir, "tmp")
	if err := os.Mkdir(tmp, 0o777); err != nil {
		t.Fatal(err)
	}
	// t.TempDir's parent, the copy's directory and the child's temporary one are
	// open to nobody (the umask would narrow what Mkdir asked for).
	for d, mode := range map[string]os.FileMode{filepath.Dir(dir): 0o755, dir: 0o755, tmp: 0o777} {
		if err := os.Chmod(d, mode); err != nil {
			t.Fatal(err)
		}
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "sqlite.test")
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run", pattern, "-test.count", "1", "-test.v")
	cmd.Env = []string{"TMPDIR=" + tmp, "HOME=" + tmp, "PATH=/usr/bin:/bin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS") || strings.Contains(string(out), "--- SKIP") {
		t.Fatalf("as nobody: %v\n%s", err, out)
	}
}
