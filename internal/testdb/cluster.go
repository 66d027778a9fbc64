package testdb

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Cluster is a throwaway PostgreSQL cluster of one test, made with initdb and run
// with pg_ctl on a free port of 127.0.0.1, for the fault tests that restart or stop
// their server: the machine's shared server is never touched. It is stopped and
// removed when the test ends.
type Cluster struct {
	t      testing.TB
	bindir string
	dir    string
	port   int
	runAs  []string // runuser -u postgres -- when running as root
}

// StartCluster makes and starts a cluster with a database named test. Without the
// PostgreSQL server binaries the test fails (it never skips): install them
// (Debian: apt-get install postgresql).
func StartCluster(t testing.TB) *Cluster {
	t.Helper()
	bindir, err := serverBinaries()
	if err != nil {
		t.Fatal(err)
	}
	c := &Cluster{t: t, bindir: bindir, dir: t.TempDir()}
	if os.Geteuid() == 0 {
		name := "postgres"
		u, err := user.Lookup(name)
		if err != nil {
			name = "nobody"
			if u, err = user.Lookup(name); err != nil {
				t.Fatalf("testdb: initdb refuses root and neither postgres nor nobody exists: %v", err)
			}
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		// The temporary directory's parents must let that user in.
		for d := c.dir; d != "/" && d != "."; d = filepath.Dir(d) {
			if fi, err := os.Stat(d); err == nil && fi.Mode().Perm()&0o011 == 0 {
				if err := os.Chmod(d, fi.Mode().Perm()|0o711); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := os.Chown(c.dir, uid, gid); err != nil {
			t.Fatal(err)
		}
		c.runAs = []string{"runuser", "-u", name, "--"}
	}
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	c.port = port
	c.run("initdb", "-D", c.data(), "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-locale")
	c.start()
	t.Cleanup(func() { c.pgctl("-m", "immediate", "stop") })
	conn, err := pgx.Connect(context.Background(), c.url("postgres"))
	if err != nil {
		t.Fatalf("testdb: connect to the throwaway cluster: %v", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), "CREATE DATABASE test"); err != nil {
		t.Fatal(err)
	}
	return c
}

// URL is the test database's URL.
func (c *Cluster) URL() string { return c.url("test") }

// Port is the port the cluster listens on.
func (c *Cluster) Port() int { return c.port }

// Restart restarts the server the way a crash and a failover do: immediate shutdown
// (no checkpoint, every session cut), then start, waiting until it accepts
// connections again.
func (c *Cluster) Restart() {
	c.t.Helper()
	// Stop, then start with the log file: a server started without one would keep
	// pg_ctl's output pipe open for as long as it runs.
	c.pgctl("-m", "immediate", "-w", "stop")
	c.start()
}

// Stop stops the server at once; Start brings it back.
func (c *Cluster) Stop() {
	c.t.Helper()
	c.pgctl("-m", "immediate", "-w", "stop")
}

// Start starts the stopped server and waits until it accepts connections.
func (c *Cluster) Start() { c.t.Helper(); c.start() }

func (c *Cluster) start() {
	c.t.Helper()
	c.pgctl("-l", filepath.Join(c.dir, "server.log"), "-w", "-o", c.options(), "start")
}

func (c *Cluster) options() string {
	return fmt.Sprintf("-c listen_addresses=127.0.0.1 -p %d -k %s -c max_connections=200 -c fsync=off", c.port, c.dir)
}

func (c *Cluster) data() string { return filepath.Join(c.dir, "data") }

func (c *Cluster) url(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", c.port, db)
}

func (c *Cluster) pgctl(args ...string) {
	c.t.Helper()
	c.run("pg_ctl", append([]string{"-D", c.data()}, args...)...)
}

func (c *Cluster) run(tool string, args ...string) {
	c.t.Helper()
	argv := append(append([]string{}, c.runAs...), append([]string{filepath.Join(c.bindir, tool)}, args...)...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = c.dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		log, _ := os.ReadFile(filepath.Join(c.dir, "server.log"))
		c.t.Fatalf("testdb: %s %v: %v\n%s\nserver log:\n%s", tool, args, err, out, log)
	}
}

// serverBinaries finds initdb and pg_ctl: on PATH, or in Debian's versioned directory.
func serverBinaries() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		if _, err := exec.LookPath("pg_ctl"); err == nil {
			return filepath.Dir(p), nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Sort(sort.Reverse(sort.StringSlice(dirs)))
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	return "", fmt.Errorf("testdb: the fault tests need the PostgreSQL server binaries (initdb, pg_ctl) to start a throwaway cluster: " +
		"install them (Debian/Ubuntu: apt-get install postgresql)")
}

// freePort asks the kernel for a free port of 127.0.0.1.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// WaitAnswers waits until the cluster accepts connections (within a minute).
func (c *Cluster) WaitAnswers() {
	c.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		conn, err := pgx.Connect(ctx, c.URL())
		cancel()
		if err == nil {
			conn.Close(context.Background())
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("testdb: the throwaway cluster does not answer: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
