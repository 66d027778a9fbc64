// Package sdnotify tells systemd how the service is doing, by the sd_notify
// protocol: one datagram of newline-separated assignments (READY=1, STATUS=…,
// WATCHDOG=1, STOPPING=1, EXTEND_TIMEOUT_USEC=…) sent to the AF_UNIX datagram
// socket that $NOTIFY_SOCKET names, a file system path or, when it starts with
// '@', a socket in the abstract namespace.
//
// It is written by hand rather than taken from a library (such as
// github.com/coreos/go-systemd/v22/daemon): the protocol is a few lines — a socket
// address, a write — stable since systemd introduced it and documented in
// sd_notify(3), so a dependency would add a module to vet and keep up to date for
// less code than its import takes to review. What it does not do, on purpose:
// pass file descriptors (FDSTORE=), or speak vsock (NOTIFY_SOCKET=vsock:…, for
// virtual machines); those are an error from New.
//
// Without $NOTIFY_SOCKET (started by hand, or by a unit without notify access)
// there is no Notifier: New returns nil, and every method of a nil *Notifier does
// nothing and reports no error.
//
// On top of the protocol, Manager is what `ordersync run` and `ordersync migrate`
// tell systemd: READY=1 and STOPPING=1 once each, a STATUS= line kept current from
// the service's counts and the outbox, EXTEND_TIMEOUT_USEC while start-up waits on
// the database, and WATCHDOG=1 only while the service's loops go round and the
// database answers a ping. It takes what it watches as Supervised: small interfaces
// and checks, nothing of the command.
package sdnotify

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// Notifier sends state changes to the service manager. A nil *Notifier is valid and
// sends nothing. It is safe for concurrent use: each message is a datagram of its
// own, sent on a socket opened for it (so a service manager that re-executed itself
// and made its socket anew is still reached).
type Notifier struct {
	addr *net.UnixAddr
}

// New returns a Notifier for the socket a service manager named in NOTIFY_SOCKET:
// nil, nil for "" (no service manager listens).
func New(socket string) (*Notifier, error) {
	switch {
	case socket == "":
		return nil, nil
	case strings.HasPrefix(socket, "/"), len(socket) > 1 && socket[0] == '@':
		// Go takes a leading '@' as the abstract namespace (a NUL first byte), as
		// systemd means it.
		return &Notifier{addr: &net.UnixAddr{Name: socket, Net: "unixgram"}}, nil
	default:
		return nil, fmt.Errorf("sdnotify: NOTIFY_SOCKET=%q: want an absolute path or an abstract socket (@name)", socket)
	}
}

// FromEnv is New of getenv("NOTIFY_SOCKET").
func FromEnv(getenv func(string) string) (*Notifier, error) {
	return New(getenv("NOTIFY_SOCKET"))
}

// Enabled reports whether messages go anywhere.
func (n *Notifier) Enabled() bool { return n != nil }

// Socket is the address messages go to, "" when disabled.
func (n *Notifier) Socket() string {
	if n == nil {
		return ""
	}
	return n.addr.Name
}

// Send sends the assignments (VAR=value) as one message. A newline inside a value
// would start another assignment: it is sent as a space.
func (n *Notifier) Send(assignments ...string) error {
	if n == nil || len(assignments) == 0 {
		return nil
	}
	lines := make([]string, len(assignments))
	for i, a := range assignments {
		lines[i] = strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ").Replace(a)
	}
	conn, err := net.DialUnix("unixgram", nil, n.addr)
	if err != nil {
		return fmt.Errorf("sdnotify: %w", err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte(strings.Join(lines, "\n") + "\n")); err != nil {
		return fmt.Errorf("sdnotify: %w", err)
	}
	return nil
}

// Ready says start-up is complete (READY=1), with an optional status line.
func (n *Notifier) Ready(status string) error {
	if status == "" {
		return n.Send("READY=1")
	}
	return n.Send("READY=1", "STATUS="+status)
}

// Status sets the line `systemctl status` shows (STATUS=…).
func (n *Notifier) Status(status string) error { return n.Send("STATUS=" + status) }

// Watchdog keeps the watchdog from firing (WATCHDOG=1).
func (n *Notifier) Watchdog() error { return n.Send("WATCHDOG=1") }

// Stopping says the service is stopping (STOPPING=1), with an optional status line.
func (n *Notifier) Stopping(status string) error {
	if status == "" {
		return n.Send("STOPPING=1")
	}
	return n.Send("STOPPING=1", "STATUS="+status)
}

// ExtendTimeout asks for d more of the start-up, run or stop timeout the service is
// under now (EXTEND_TIMEOUT_USEC=…): the next message must come within d. It never
// shortens a timeout.
func (n *Notifier) ExtendTimeout(d time.Duration) error {
	return n.Send("EXTEND_TIMEOUT_USEC=" + strconv.FormatInt(max(d.Microseconds(), 1), 10))
}

// ErrNoWatchdog is WatchdogInterval's answer when the service manager expects no
// watchdog pings from this process.
var ErrNoWatchdog = errors.New("sdnotify: no watchdog")

// WatchdogInterval is the watchdog's timeout the service manager set in
// WATCHDOG_USEC (WatchdogSec= of the unit): a WATCHDOG=1 must come within it, and
// sd_watchdog_enabled(3) advises one every half of it. WATCHDOG_PID, when set, names
// the process meant; pid is this one (os.Getpid() unless testing). ErrNoWatchdog
// when none is asked for of pid; another error for a value that does not parse.
func WatchdogInterval(getenv func(string) string, pid int) (time.Duration, error) {
	usec := getenv("WATCHDOG_USEC")
	if usec == "" {
		return 0, ErrNoWatchdog
	}
	if p := getenv("WATCHDOG_PID"); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n <= 0 {
			return 0, fmt.Errorf("sdnotify: WATCHDOG_PID=%q: not a process id", p)
		}
		if n != pid {
			return 0, ErrNoWatchdog
		}
	}
	v, err := strconv.ParseUint(usec, 10, 63)
	if err != nil || v == 0 {
		return 0, fmt.Errorf("sdnotify: WATCHDOG_USEC=%q: not a positive number of microseconds", usec)
	}
	if v > uint64(time.Duration(1<<63-1)/time.Microsecond) {
		return 0, fmt.Errorf("sdnotify: WATCHDOG_USEC=%q: too large", usec)
	}
	return time.Duration(v) * time.Microsecond, nil
}
