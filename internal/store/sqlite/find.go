package sqlite

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// ServiceDir is the state directory of the systemd unit (StateDirectory=ordersync):
// where the service keeps its embedded database, and where a command run beside the
// service, outside the unit, looks for it.
const ServiceDir = "/var/lib/ordersync"

// FileName is the embedded database's file in a state directory.
const FileName = "ordersync.db"

// Place is one place where a command looks for the embedded database.
type Place struct {
	Path string // absolute
	What string // "$STATE_DIRECTORY", "the service's state directory", "the working directory"
}

func (p Place) String() string { return p.Path + " (" + p.What + ")" }

// Places are where a command looks for the embedded database when none is
// configured, in order: $STATE_DIRECTORY/ordersync.db (inside the unit: systemd's
// StateDirectory=), serviceDir/ordersync.db (the unit's file seen from outside it;
// serviceDir is ServiceDir but in tests), ./ordersync.db. A place named twice is
// listed once.
func Places(getenv func(string) string, serviceDir string) []Place {
	var out []Place
	add := func(path, what string) {
		if abs, err := filepath.Abs(path); err == nil {
			path = abs
		}
		for _, p := range out {
			if p.Path == path {
				return
			}
		}
		out = append(out, Place{Path: path, What: what})
	}
	if dir := getenv("STATE_DIRECTORY"); dir != "" {
		// StateDirectory= may list several, separated by colons: the first is ours.
		add(filepath.Join(strings.Split(dir, ":")[0], FileName), "$STATE_DIRECTORY")
	}
	if serviceDir != "" {
		add(filepath.Join(serviceDir, FileName), "the service's state directory")
	}
	add(FileName, "the working directory")
	return out
}

// NotFoundError is Find's error when no place holds the database.
type NotFoundError struct{ Places []Place }

func (e *NotFoundError) Error() string {
	looked := make([]string, len(e.Places))
	for i, p := range e.Places {
		looked[i] = p.String()
	}
	return "no journal found: with no database.url the embedded SQLite file is looked for at " +
		strings.Join(looked, ", ") + ", and none exists; `ordersync migrate` (or `ordersync run`) creates it, " +
		"or set database.url (--config FILE) to the database the service uses"
}

// Is makes errors.Is(err, fs.ErrNotExist) hold.
func (e *NotFoundError) Is(target error) bool { return target == fs.ErrNotExist }

// Find returns the first of Places that holds the database file; none is a
// *NotFoundError naming them. A place that cannot be looked at (the service's state
// directory is root's alone under DynamicUser=) is an error naming it, never passed
// over for the next: that would open another journal than the service's.
func Find(getenv func(string) string, serviceDir string) (Place, error) {
	places := Places(getenv, serviceDir)
	for _, p := range places {
		fi, err := os.Stat(p.Path)
		switch {
		case err == nil && fi.IsDir():
			return Place{}, fmt.Errorf("%s is a directory, not the embedded database", p)
		case err == nil:
			return p, nil
		case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
			continue
		case errors.Is(err, fs.ErrPermission):
			return Place{}, fmt.Errorf("cannot look for the embedded database at %s: permission denied "+
				"(the service's state directory is root's: run the command with sudo)", p)
		default:
			return Place{}, fmt.Errorf("cannot look for the embedded database at %s: %w", p, err)
		}
	}
	return Place{}, &NotFoundError{Places: places}
}

// companions are the files SQLite and the run lock keep beside a database file.
func companions(dbPath string) []string {
	return []string{dbPath, dbPath + "-wal", dbPath + "-shm", LockPath(dbPath)}
}

// adoptOwner hands the files beside dbPath that root created (the database file
// itself, its -wal and -shm, its run lock) to the owner of the database — or, for a
// database root has just created, of its directory — when this process runs as
// root and that owner is another user. A command run with sudo beside the service
// (whose DynamicUser= owns the state directory) must leave nothing the service
// cannot open. SQLite hands its -wal and -shm over itself; the run lock and a new
// database file are this package's. Failures are ignored: the service then says
// which file it cannot open.
func adoptOwner(dbPath string) {
	if os.Geteuid() != 0 {
		return
	}
	uid, gid, ok := ownerOf(dbPath)
	if !ok || uid == 0 {
		if uid, gid, ok = ownerOf(filepath.Dir(dbPath)); !ok || uid == 0 {
			return
		}
	}
	for _, f := range companions(dbPath) {
		if u, _, ok := ownerOf(f); ok && u == 0 {
			os.Chown(f, uid, gid)
		}
	}
}

// ownerOf is the owner of path.
func ownerOf(path string) (uid, gid int, ok bool) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, 0, false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, false
	}
	return int(st.Uid), int(st.Gid), true
}
