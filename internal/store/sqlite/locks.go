package sqlite

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ordersync/ordersync/internal/outbox"
)

// KeyLocks are in-process locks by key: the stand-in for SELECT … FOR UPDATE in the
// one process that works a SQLite file.
type KeyLocks struct {
	mu      sync.Mutex
	held    map[string]chan struct{} // closed when the key is unlocked
	waiting map[string]int           // Lock calls waiting for the key now
}

// NewKeyLocks returns an empty set.
func NewKeyLocks() *KeyLocks {
	return &KeyLocks{held: map[string]chan struct{}{}, waiting: map[string]int{}}
}

// TryLock takes key if it is free.
func (k *KeyLocks) TryLock(key string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, busy := k.held[key]; busy {
		return false
	}
	k.held[key] = make(chan struct{})
	return true
}

// Lock takes key, waiting while another holds it, until ctx ends.
func (k *KeyLocks) Lock(ctx context.Context, key string) error {
	for {
		k.mu.Lock()
		ch, busy := k.held[key]
		if !busy {
			k.held[key] = make(chan struct{})
			k.mu.Unlock()
			return nil
		}
		k.waiting[key]++
		k.mu.Unlock()
		var err error
		select {
		case <-ch:
		case <-ctx.Done():
			err = ctx.Err()
		}
		k.mu.Lock()
		if k.waiting[key]--; k.waiting[key] == 0 {
			delete(k.waiting, key)
		}
		k.mu.Unlock()
		if err != nil {
			return err
		}
	}
}

// Waiting is how many Lock calls wait for key now (tests wait on it).
func (k *KeyLocks) Waiting(key string) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.waiting[key]
}

// Unlock frees key. Unlocking a free key is a no-op.
func (k *KeyLocks) Unlock(key string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if ch, ok := k.held[key]; ok {
		close(ch)
		delete(k.held, key)
	}
}

// Held reports whether key is locked.
func (k *KeyLocks) Held(key string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	_, ok := k.held[key]
	return ok
}

// notifier is the in-process LISTEN/NOTIFY: Enqueue notifies, the relay listens.
type notifier struct {
	mu   sync.Mutex
	subs map[chan struct{}]struct{}
}

func newNotifier() *notifier { return &notifier{subs: map[chan struct{}]struct{}{}} }

// Notify wakes every listener (without blocking).
func (n *notifier) Notify() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for ch := range n.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

func (n *notifier) subscribe() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	n.mu.Lock()
	n.subs[ch] = struct{}{}
	n.mu.Unlock()
	return ch, func() {
		n.mu.Lock()
		delete(n.subs, ch)
		n.mu.Unlock()
	}
}

// Listener wakes a relay when this process commits an outbox event. (Events
// committed by another process — a CLI command — wake it through the run lock's
// signal instead; see cmd/ordersync.)
type Listener struct{ n *notifier }

// Listener returns the in-process listener.
func (db *DB) Listener() outbox.Listener { return &Listener{n: db.notify} }

// Notify wakes the listeners, as a NOTIFY would.
func (db *DB) Notify() { db.notify.Notify() }

// Listen calls wake for every notification until ctx ends. It calls wake once at
// the start, as the PostgreSQL listener does once LISTEN is in place.
func (l *Listener) Listen(ctx context.Context, wake func()) error {
	ch, stop := l.n.subscribe()
	defer stop()
	wake()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ch:
			wake()
		}
	}
}

// RunLock makes one process the only one doing 1C and relay work on a database file:
// an exclusive flock on <file>.lock. The kernel releases it when the process dies,
// kill -9 included. While it holds the lock, the holder keeps its record in the
// file, "<pid> <role> <checksum>": the role is RoleRun for `ordersync run`, the
// command's name ("order import", "resync") for a CLI command doing its own work, so
// that a CLI command hands work only to a service and waits for another CLI command.
type RunLock struct {
	f    *os.File
	path string
}

// RoleRun is the role of `ordersync run`, the service.
const RoleRun = "run"

// Holder is who holds a run lock.
type Holder struct {
	// PID is the holder's process id; 0 when it could not be told (no record, or a
	// record of a process that is gone: the new holder has not written its own yet).
	PID int
	// Role is RoleRun, a CLI command's name, or "" when unknown (a lock taken by an
	// older ordersync, which wrote its pid alone).
	Role string
}

// IsService reports whether the holder is `ordersync run`.
func (h Holder) IsService() bool { return h.Role == RoleRun && h.PID > 0 }

// String names the holder: "`ordersync run` (pid 123)", "pid 123", "an unknown process".
func (h Holder) String() string {
	switch {
	case h.PID <= 0:
		return "an unknown process"
	case h.Role == "":
		return "pid " + strconv.Itoa(h.PID)
	default:
		return fmt.Sprintf("`ordersync %s` (pid %d)", h.Role, h.PID)
	}
}

// ErrLocked is returned (as a *LockedError, naming the holder) when another process
// holds the lock.
var ErrLocked = errors.New("the database's run lock is held")

// LockedError is AcquireRunLock's error when the lock is held.
type LockedError struct {
	Path   string // the lock file
	Holder Holder
}

func (e *LockedError) Error() string {
	if e.Holder.Role == "" || e.Holder.IsService() {
		pid := "unknown"
		if e.Holder.PID > 0 {
			pid = strconv.Itoa(e.Holder.PID)
		}
		return fmt.Sprintf("another ordersync run works on this database: pid %s holds %s (stop it first; CLI commands beside it are fine)", pid, e.Path)
	}
	return fmt.Sprintf("%s works on this database (it holds %s)", e.Holder, e.Path)
}

// Is makes errors.Is(err, ErrLocked) hold.
func (e *LockedError) Is(target error) bool { return target == ErrLocked }

// LockPath is the lock file of a database file.
func LockPath(dbPath string) string { return dbPath + ".lock" }

// recordSize is the fixed size of the holder's record: it is written in one write at
// offset 0 over whatever an earlier holder left, so the file never holds a record
// shorter than a previous one with the previous one's tail.
const recordSize = 128

// holderSettle is how long RunLockHolder waits for a new holder to write its record.
const holderSettle = time.Second

// AcquireRunLock takes the run lock of dbPath for `ordersync run`, without waiting.
func AcquireRunLock(dbPath string) (*RunLock, error) { return AcquireRunLockAs(dbPath, RoleRun) }

// WaitRunLock takes the embedded database's run lock for `ordersync run`.
// Another service holding it — or a holder that cannot be told, an older ordersync —
// is an error naming its pid (exit 1). A CLI command holding it is doing its own
// work, bounded by its calls: the service waits for it, saying so once per holder,
// and starts once it is done. It returns nil, nil when a stop was requested while it
// waited.
func WaitRunLock(ctx context.Context, path string, log *slog.Logger) (*RunLock, error) {
	var waitingFor Holder
	for delay := 10 * time.Millisecond; ; delay = min(2*delay, 200*time.Millisecond) {
		lock, err := AcquireRunLock(path)
		var locked *LockedError
		if !errors.As(err, &locked) {
			return lock, err
		}
		h := locked.Holder
		if h.IsService() || h.Role == "" {
			return nil, err
		}
		if h != waitingFor {
			log.InfoContext(ctx, fmt.Sprintf("waiting for %s to finish with the database; starting once it has", h),
				"pid", h.PID, "command", h.Role, "lock", LockPath(path))
			waitingFor = h
		}
		select {
		case <-ctx.Done():
			return nil, nil
		case <-time.After(delay):
		}
	}
}

// AcquireRunLockAs takes the run lock of dbPath without waiting and records this
// process and role (RoleRun, or the CLI command's name) in it. A held lock is a
// *LockedError naming its holder.
func AcquireRunLockAs(dbPath, role string) (*RunLock, error) {
	role = strings.Join(strings.Fields(role), " ")
	if role == "" {
		return nil, errors.New("sqlite: run lock: no role given")
	}
	path := LockPath(dbPath)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("sqlite: run lock %s: %w", path, err)
	}
	adoptOwner(dbPath) // created by a command run as root: the service must still open it
	for attempt := 1; ; attempt++ {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("sqlite: run lock %s: %w", path, err)
		}
		// Released meanwhile, or only a reader's brief shared lock (RunLockHolder's
		// probe) was in the way: try again.
		if h, isHeld := RunLockHolder(dbPath); isHeld || attempt == 5 {
			f.Close()
			return nil, &LockedError{Path: path, Holder: h}
		}
	}
	rec := encodeRecord(os.Getpid(), role)
	if n, err := f.WriteAt(rec, 0); err != nil || n != len(rec) {
		if err == nil {
			err = io.ErrShortWrite
		}
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
		return nil, fmt.Errorf("sqlite: run lock %s: record the holder: %w", path, err)
	}
	return &RunLock{f: f, path: path}, nil
}

// Release lets the lock go. Safe twice.
func (l *RunLock) Release() {
	if l == nil || l.f == nil {
		return
	}
	l.f.Truncate(0) // while still held: a reader sees the record, or none
	syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	l.f.Close()
	l.f = nil
}

// RunLockHolder reports whether dbPath's run lock is held and by whom. A record is
// believed only when it is whole (its checksum matches), its process exists, and
// the lock is still held after it was read; a record of a process that is gone —
// left by a holder killed with kill -9, the new holder not having written its own
// yet — is not. Until a believable record appears (within holderSettle) the holder
// is unknown: Holder{}.
func RunLockHolder(dbPath string) (Holder, bool) { return runLockHolder(dbPath, holderSettle, nil) }

// runLockHolder is RunLockHolder waiting up to settle. waiting, when not nil (only
// tests pass one), is called each time it has read no believable record and waits
// to read again.
func runLockHolder(dbPath string, settle time.Duration, waiting func()) (Holder, bool) {
	path := LockPath(dbPath)
	f, err := os.Open(path)
	if err != nil {
		return Holder{}, false
	}
	defer f.Close()
	deadline := time.Now().Add(settle)
	var legacy Holder
	for delay := time.Millisecond; ; delay = min(2*delay, 50*time.Millisecond) {
		if !held(f) {
			return Holder{}, false
		}
		b := make([]byte, recordSize)
		n, _ := f.ReadAt(b, 0)
		if h, ok := decodeRecord(b[:n]); ok && alive(h.PID) && held(f) {
			if h.Role != "" {
				return h, true
			}
			legacy = h // an older ordersync's record; a new holder may still write its own
		}
		if time.Now().After(deadline) {
			return legacy, true
		}
		if waiting != nil {
			waiting()
		}
		time.Sleep(delay)
	}
}

// held reports whether an exclusive lock is held on f's file: a shared lock fails
// while it is.
func held(f *os.File) bool {
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err == nil {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		return false
	}
	return true
}

// alive reports whether a process with this id exists (EPERM: it does, another user's).
func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// encodeRecord is "<pid> <role> <crc32>\n", padded with spaces to recordSize.
func encodeRecord(pid int, role string) []byte {
	line := strconv.Itoa(pid) + " " + role
	line = fmt.Sprintf("%s %08x\n", line, crc32.ChecksumIEEE([]byte(line)))
	b := []byte(line)
	if len(b) > recordSize {
		b = b[:recordSize] // a role that long is not ours; decodeRecord refuses it
	}
	for len(b) < recordSize {
		b = append(b, ' ')
	}
	return b
}

// decodeRecord reads a record: encodeRecord's, or an older ordersync's bare pid
// (role ""). A torn or partial record is refused.
func decodeRecord(b []byte) (Holder, bool) {
	line, _, _ := strings.Cut(string(b), "\n")
	fields := strings.Fields(line)
	switch len(fields) {
	case 0:
		return Holder{}, false
	case 1: // an older ordersync's record
		if len(strings.TrimSpace(string(b))) != len(fields[0]) {
			return Holder{}, false
		}
		pid, err := strconv.Atoi(fields[0])
		return Holder{PID: pid}, err == nil && pid > 0
	case 2:
		return Holder{}, false
	}
	pid, err := strconv.Atoi(fields[0])
	if err != nil || pid <= 0 {
		return Holder{}, false
	}
	role := strings.Join(fields[1:len(fields)-1], " ")
	body := fields[0] + " " + role
	if fields[len(fields)-1] != fmt.Sprintf("%08x", crc32.ChecksumIEEE([]byte(body))) {
		return Holder{}, false
	}
	return Holder{PID: pid, Role: role}, true
}

// LockHolder returns the pid of the `ordersync run` holding dbPath's run lock, if one
// does. A CLI command holding it (doing its own work) is not a service: it is not
// reported (see RunLockHolder).
func LockHolder(dbPath string) (int, bool) {
	h, held := RunLockHolder(dbPath)
	if !held || !h.IsService() {
		return 0, false
	}
	return h.PID, true
}

// DefaultPath is where `ordersync run` (or migrate) creates the embedded database
// when none is configured and Find finds none: $STATE_DIRECTORY (systemd's
// StateDirectory=) or the working directory.
func DefaultPath(getenv func(string) string) string {
	if dir := getenv("STATE_DIRECTORY"); dir != "" {
		// StateDirectory= may list several, separated by colons: the first is ours.
		return filepath.Join(strings.Split(dir, ":")[0], "ordersync.db")
	}
	return "ordersync.db"
}
