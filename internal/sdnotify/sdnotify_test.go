package sdnotify

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// listen opens a datagram socket at name (a path, or @abstract) as systemd does.
func listen(t *testing.T, name string) *net.UnixConn {
	t.Helper()
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func receive(t *testing.T, c *net.UnixConn) string {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 4096)
	n, err := c.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	return string(buf[:n])
}

func shortDir(t *testing.T) string {
	t.Helper()
	// A socket path must fit sun_path (108 bytes): t.TempDir() can be longer.
	dir, err := os.MkdirTemp("", "sdn")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func TestNotifySendsEachMessageAsOneDatagram(t *testing.T) {
	for _, kind := range []string{"path", "abstract"} {
		t.Run(kind, func(t *testing.T) {
			name := filepath.Join(shortDir(t), "notify")
			if kind == "abstract" {
				name = fmt.Sprintf("@ordersync-sdnotify-test-%d-%d", os.Getpid(), time.Now().UnixNano())
			}
			c := listen(t, name)
			n, err := New(name)
			if err != nil || !n.Enabled() || n.Socket() != name {
				t.Fatalf("New(%q) = %v, %v", name, n, err)
			}
			for _, tc := range []struct {
				send func() error
				want string
			}{
				{func() error { return n.Ready("") }, "READY=1\n"},
				{func() error { return n.Ready("up") }, "READY=1\nSTATUS=up\n"},
				{func() error { return n.Status("3 done,\nsecond line") }, "STATUS=3 done, second line\n"},
				{n.Watchdog, "WATCHDOG=1\n"},
				{func() error { return n.ExtendTimeout(90 * time.Second) }, "EXTEND_TIMEOUT_USEC=90000000\n"},
				{func() error { return n.Stopping("stopping") }, "STOPPING=1\nSTATUS=stopping\n"},
				{func() error { return n.Send("A=1", "B=2") }, "A=1\nB=2\n"},
			} {
				if err := tc.send(); err != nil {
					t.Fatal(err)
				}
				if got := receive(t, c); got != tc.want {
					t.Errorf("received %q, want %q", got, tc.want)
				}
			}
		})
	}
}

func TestNotifyWithoutSocketDoesNothing(t *testing.T) {
	n, err := FromEnv(func(string) string { return "" })
	if n != nil || err != nil {
		t.Fatalf("FromEnv without NOTIFY_SOCKET = %v, %v; want nil, nil", n, err)
	}
	if n.Enabled() || n.Socket() != "" {
		t.Fatal("a nil Notifier says it is enabled")
	}
	for _, f := range []func() error{func() error { return n.Ready("x") }, n.Watchdog, func() error { return n.Status("x") },
		func() error { return n.Stopping("") }, func() error { return n.ExtendTimeout(time.Second) }} {
		if err := f(); err != nil {
			t.Fatalf("nil Notifier: %v", err)
		}
	}
}

func TestNotifyRefusesOtherAddresses(t *testing.T) {
	for _, s := range []string{"relative/path", "@", "vsock:2:1234"} {
		if n, err := New(s); err == nil {
			t.Errorf("New(%q) = %v, want an error", s, n)
		}
	}
}

func TestNotifyToAbsentSocketIsAnError(t *testing.T) {
	n, err := New(filepath.Join(shortDir(t), "absent"))
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Watchdog(); err == nil {
		t.Fatal("a message to a socket nobody listens on reported no error")
	}
}

func TestWatchdogInterval(t *testing.T) {
	env := func(kv ...string) func(string) string {
		return func(k string) string {
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			return ""
		}
	}
	for _, tc := range []struct {
		name    string
		getenv  func(string) string
		want    time.Duration
		wantErr error // nil: any error when bad is set
		bad     bool
	}{
		{"unset", env(), 0, ErrNoWatchdog, false},
		{"set", env("WATCHDOG_USEC", "60000000"), time.Minute, nil, false},
		{"this pid", env("WATCHDOG_USEC", "400000", "WATCHDOG_PID", "42"), 400 * time.Millisecond, nil, false},
		{"another pid", env("WATCHDOG_USEC", "400000", "WATCHDOG_PID", "43"), 0, ErrNoWatchdog, false},
		{"bad pid", env("WATCHDOG_USEC", "400000", "WATCHDOG_PID", "x"), 0, nil, true},
		{"zero", env("WATCHDOG_USEC", "0"), 0, nil, true},
		{"not a number", env("WATCHDOG_USEC", "60s"), 0, nil, true},
		{"negative", env("WATCHDOG_USEC", "-1"), 0, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := WatchdogInterval(tc.getenv, 42)
			switch {
			case tc.bad:
				if err == nil || errors.Is(err, ErrNoWatchdog) || !strings.Contains(err.Error(), "WATCHDOG_") {
					t.Fatalf("got %v, %v; want an error naming the variable", got, err)
				}
			case tc.wantErr != nil:
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("got %v, %v; want %v", got, err, tc.wantErr)
				}
			default:
				if err != nil || got != tc.want {
					t.Fatalf("got %v, %v; want %v", got, err, tc.want)
				}
			}
		})
	}
}
