package sqlite

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// KeyLocks are in-process locks by key: the stand-in for SELECT … FOR UPDATE in the
// one process that works a SQLite file.
type KeyLocks struct {
	mu   sync.Mutex
	held map[string]chan struct{} // closed when the key is unlocked
}

// NewKeyLocks returns an empty set.
func NewKeyLocks() *KeyLocks { return &KeyLocks{held: map[string]chan struct{}{}} }

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
		k.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
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
func (db *DB) Listener() *Listener { return &Listener{n: db.notify} }

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
// an exclusive flock on <file>.lock holding the process id. The kernel releases it
// when the process dies, kill -9 included.
type RunLock struct {
	f    *os.File
	path string
}

// ErrLocked is returned (wrapped, with the holder) when another process holds the lock.
var ErrLocked = errors.New("another ordersync run works on this database")

// LockPath is the lock file of a database file.
func LockPath(dbPath string) string { return dbPath + ".lock" }

// AcquireRunLock takes the run lock of dbPath without waiting.
func AcquireRunLock(dbPath string) (*RunLock, error) {
	path := LockPath(dbPath)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("sqlite: run lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			holder := "unknown"
			if pid, ok := LockHolder(dbPath); ok {
				holder = strconv.Itoa(pid)
			}
			return nil, fmt.Errorf("%w: pid %s holds %s (stop it first; CLI commands beside it are fine)", ErrLocked, holder, path)
		}
		return nil, fmt.Errorf("sqlite: run lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
		f.Sync()
	}
	return &RunLock{f: f, path: path}, nil
}

// Release lets the lock go. Safe twice.
func (l *RunLock) Release() {
	if l == nil || l.f == nil {
		return
	}
	l.f.Truncate(0)
	syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	l.f.Close()
	l.f = nil
}

// LockHolder returns the pid of the process holding dbPath's run lock, if one does.
func LockHolder(dbPath string) (int, bool) {
	path := LockPath(dbPath)
	f, err := os.Open(path)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	// Held? Try a shared lock: it fails while the exclusive one is held.
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err == nil {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		return 0, false
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0, false
	}
	return pid, true
}

// DefaultPath is where the embedded database lives when none is configured:
// $STATE_DIRECTORY (systemd's StateDirectory=) or the working directory.
func DefaultPath(getenv func(string) string) string {
	if dir := getenv("STATE_DIRECTORY"); dir != "" {
		// StateDirectory= may list several, separated by colons: the first is ours.
		return filepath.Join(strings.Split(dir, ":")[0], "ordersync.db")
	}
	return "ordersync.db"
}
