package server

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ordersync/ordersync/internal/stdwebhook"
	"github.com/ordersync/ordersync/internal/store/postgres"
	"github.com/ordersync/ordersync/internal/testdb"
)

// BenchmarkIngest loads POST /webhooks/site over loopback with signed canonical
// orders, first all new (each one an inbox row and a journal operation), then the
// same deliveries again (duplicates), and reports requests/s with p50/p99 latency.
// In the same run it measures the machine's ceiling for one committed single-row
// INSERT with pgbench (same server, as many clients as senders up to the store's
// database.max_connections), and reports new-event ingest as a share of it. The
// WAL written by the duplicate pass is reported too, and the CPU of the store's own
// server processes per request (pg-cpu, when the server runs on this machine). It runs at 16, 32 and 64
// senders at once. The store is opened with database.max_connections' default (20)
// and the benchmark counts its sessions in pg_stat_activity every few milliseconds
// while the senders run: peak-conns, which must stay within it. pgbench runs before
// the store opens, so the run never holds more than 20 connections at once.
//
//	go test -run '^$' -bench Ingest -benchtime 1x ./internal/server/   (make bench-ingest)
func BenchmarkIngest(b *testing.B) {
	for _, clients := range []int{16, 32, 64} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) { benchIngest(b, clients) })
	}
}

func benchIngest(b *testing.B, clients int) {
	const (
		events         = 20000
		maxConnections = postgres.DefaultMaxConnections
	)
	ctx := context.Background()
	dbURL := testdb.URL(b)
	// The ceiling first, while the store holds no connection.
	ceil, ceilErr := insertCeiling(b, dbURL, min(clients, maxConnections))
	db, err := postgres.Open(ctx, postgres.Config{URL: dbURL, MaxConnections: maxConnections})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	peak := sampleConnections(b, dbURL)
	if _, err := db.Migrate(ctx); err != nil {
		b.Fatal(err)
	}
	srv, err := New(Config{Listen: "127.0.0.1:0", Inbox: db.Inbox(), Logger: slog.New(slog.DiscardHandler),
		Sources: map[string]SourceConfig{"site": {Secrets: []stdwebhook.Secret{stdwebhook.MustParseSecret(siteSecret)}}}})
	if err != nil {
		b.Fatal(err)
	}
	if err := srv.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer srv.Stop(ctx)
	target := &url.URL{Scheme: "http", Host: srv.Addr(), Path: "/webhooks/site"}

	type delivery struct {
		body   []byte
		header http.Header
	}
	secret := []stdwebhook.Secret{stdwebhook.MustParseSecret(siteSecret)}
	deliveries := make([]delivery, 2*events) // the first half warms up, the second is measured
	for i := range deliveries {
		body := []byte(fmt.Sprintf(`{"source":"site","external_id":"B-%d","number":"B-%d","created_at":"2026-09-16T10:00:00+05:00",`+
			`"customer":{"name":"Иван","phone":"+77011234567","email":""},"warehouse":"WH1","currency":"KZT",`+
			`"lines":[{"sku":"SKU-8812","name":"Чайник","quantity":2,"price":1500.10}],"comment":""}`, i, i))
		header := stdwebhook.Headers(secret, fmt.Sprintf("msg_%d", i), time.Now(), body)
		header.Set("Content-Type", "application/json")
		deliveries[i] = delivery{body, header}
	}
	// The load generator shares the two cores with the server and PostgreSQL, so it
	// is kept lean, as pgbench is: requests are built by hand on prepared headers
	// (read only, never cloned) and sent straight through the transport.
	transport := &http.Transport{MaxIdleConnsPerHost: clients, MaxConnsPerHost: clients, ResponseHeaderTimeout: 30 * time.Second}

	pass := func(name string, deliveries []delivery, wantStatus int) (rps float64, p50, p99 time.Duration, cpu cpuUse) {
		var next atomic.Int64
		pg0 := backendCPU(db.Pool(), dbURL)
		cpu0 := readCPU()
		lat := make([]time.Duration, events)
		var wg sync.WaitGroup
		start := time.Now()
		for range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					i := int(next.Add(1)) - 1
					if i >= events {
						return
					}
					d := deliveries[i]
					req := &http.Request{Method: http.MethodPost, URL: target, Host: target.Host, Header: d.header,
						Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
						Body: io.NopCloser(bytes.NewReader(d.body)), ContentLength: int64(len(d.body))}
					t0 := time.Now()
					resp, err := transport.RoundTrip(req)
					if err != nil {
						b.Error(err)
						return
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					lat[i] = time.Since(t0)
					if resp.StatusCode != wantStatus {
						b.Errorf("%s: delivery %d answered %d", name, i, resp.StatusCode)
						return
					}
				}
			}()
		}
		wg.Wait()
		elapsed := time.Since(start)
		cpu = readCPU().since(cpu0)
		cpu.server = backendCPU(db.Pool(), dbURL) - pg0
		slices.Sort(lat)
		return float64(events) / elapsed.Seconds(), lat[events/2], lat[events*99/100], cpu
	}

	b.ResetTimer()
	for range b.N {
		pass("warm-up", deliveries[:events], http.StatusOK)
		b.StopTimer()
		if _, err := db.Pool().Exec(ctx, `ANALYZE`); err != nil { // the statistics a production server would have
			b.Fatal(err)
		}
		b.StartTimer()
		newRPS, newP50, newP99, newCPU := pass("new", deliveries[events:], http.StatusOK)
		var lsnBefore, lsnAfter string
		db.Pool().QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&lsnBefore)
		dupRPS, dupP50, dupP99, dupCPU := pass("duplicate", deliveries[events:], http.StatusOK)
		db.Pool().QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&lsnAfter)
		var walBytes int64
		db.Pool().QueryRow(ctx, `SELECT pg_wal_lsn_diff($1::pg_lsn, $2::pg_lsn)::bigint`, lsnAfter, lsnBefore).Scan(&walBytes)
		b.StopTimer()
		var rows, ops int
		db.Pool().QueryRow(ctx, `SELECT (SELECT count(*) FROM inbox_events), (SELECT count(*) FROM operations)`).Scan(&rows, &ops)
		if rows != 2*events || ops != 2*events {
			b.Fatalf("%d inbox rows and %d operations after %d new and %d duplicate deliveries, want %d each", rows, ops, 2*events, events, 2*events)
		}
		b.ReportMetric(newRPS, "new-req/s")
		b.ReportMetric(float64(newP50.Microseconds())/1000, "new-p50-ms")
		b.ReportMetric(float64(newP99.Microseconds())/1000, "new-p99-ms")
		b.ReportMetric(dupRPS, "dup-req/s")
		b.ReportMetric(float64(dupP50.Microseconds())/1000, "dup-p50-ms")
		b.ReportMetric(float64(dupP99.Microseconds())/1000, "dup-p99-ms")
		b.ReportMetric(float64(walBytes)/events, "dup-WAL-B/req")
		b.ReportMetric(newCPU.total.Seconds()*1e6/events, "new-cpu-µs/req")
		b.ReportMetric(newCPU.self.Seconds()*1e6/events, "new-go-cpu-µs/req")
		b.ReportMetric(dupCPU.total.Seconds()*1e6/events, "dup-cpu-µs/req")
		b.ReportMetric(dupCPU.self.Seconds()*1e6/events, "dup-go-cpu-µs/req")
		if newCPU.server > 0 {
			b.ReportMetric(newCPU.server.Seconds()*1e6/events, "new-pg-cpu-µs/req")
			b.ReportMetric(dupCPU.server.Seconds()*1e6/events, "dup-pg-cpu-µs/req")
		}
		n := peak()
		b.ReportMetric(float64(n), "peak-conns")
		if n > maxConnections {
			b.Errorf("the store held %d connections at once, more than its max_connections %d", n, maxConnections)
		}
		if c, err := ceil, ceilErr; err != nil {
			b.Logf("pgbench ceiling not measured: %v", err)
		} else {
			b.ReportMetric(float64(min(clients, maxConnections)), "pgbench-clients")
			b.ReportMetric(c.tps, "pgbench-insert-tps")
			b.ReportMetric(c.cpu.total.Seconds()*1e6/c.txns, "pgbench-cpu-µs/txn")
			b.ReportMetric(c.client.Seconds()*1e6/c.txns, "pgbench-client-cpu-µs/txn")
			b.ReportMetric(100*newRPS/c.tps, "new-%-of-ceiling")
		}
		b.StartTimer()
	}
}

// ceiling is what insertCeiling measured: committed transactions per second, how
// many, the machine's CPU over the run, and the part pgbench itself used.
type ceiling struct {
	tps, txns float64
	cpu       cpuUse
	client    time.Duration
}

// insertCeiling runs pgbench for 10 s with a custom script of one committed
// single-row INSERT into a table shaped like a small inbox row.
func insertCeiling(b *testing.B, dbURL string, clients int) (ceiling, error) {
	pgbench, err := exec.LookPath("pgbench")
	if err != nil {
		matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pgbench")
		if len(matches) == 0 {
			return ceiling{}, fmt.Errorf("pgbench is not installed")
		}
		pgbench = matches[len(matches)-1]
	}
	u, err := url.Parse(dbURL)
	if err != nil {
		return ceiling{}, err
	}
	schema := u.Query().Get("search_path")
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return ceiling{}, err
	}
	_, err = conn.Exec(ctx, `CREATE TABLE ceiling (id bigserial PRIMARY KEY, source text, event_id text, body text, at timestamptz)`)
	conn.Close(ctx)
	if err != nil {
		return ceiling{}, err
	}
	script := filepath.Join(b.TempDir(), "insert.sql")
	os.WriteFile(script, []byte(fmt.Sprintf(
		"INSERT INTO %s.ceiling (source, event_id, body, at) VALUES ('site', md5(random()::text), repeat('x', 300), now());\n", schema)), 0o600)
	q := u.Query()
	q.Del("search_path")
	q.Del("application_name")
	u.RawQuery = q.Encode()
	cmd := exec.Command(pgbench, "-n", "-f", script, "-c", strconv.Itoa(clients), "-j", "2", "-T", "10", u.String())
	cpu0 := readCPU()
	out, err := cmd.CombinedOutput()
	cpu := readCPU().since(cpu0)
	if err != nil {
		return ceiling{}, fmt.Errorf("pgbench: %v: %s", err, out)
	}
	m := regexp.MustCompile(`tps = ([0-9.]+)`).FindSubmatch(out)
	if m == nil {
		return ceiling{}, fmt.Errorf("pgbench printed no tps: %s", out)
	}
	tps, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		return ceiling{}, err
	}
	n := regexp.MustCompile(`number of transactions actually processed: ([0-9]+)`).FindSubmatch(out)
	if n == nil {
		return ceiling{}, fmt.Errorf("pgbench printed no transaction count: %s", out)
	}
	txns, err := strconv.ParseFloat(string(n[1]), 64)
	if err != nil {
		return ceiling{}, err
	}
	return ceiling{tps: tps, txns: txns, cpu: cpu, client: cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()}, nil
}

// sampleConnections counts, every 2 ms until the benchmark ends, the sessions named
// like the test database URL's (testdb names them after the schema) in
// pg_stat_activity, on a connection of its own that is not named so; peak is the
// most seen so far.
func sampleConnections(b *testing.B, dbURL string) (peak func() int64) {
	u, err := url.Parse(dbURL)
	if err != nil {
		b.Fatal(err)
	}
	name := u.Query().Get("application_name")
	conn, err := pgx.Connect(context.Background(), testdb.BaseURL())
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var most atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			var n int64
			if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
				WHERE datname = current_database() AND application_name = $1`, name).Scan(&n); err != nil {
				return
			}
			if n > most.Load() {
				most.Store(n)
			}
			select {
			case <-ctx.Done():
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	b.Cleanup(func() {
		cancel()
		<-done
		conn.Close(context.Background())
	})
	return most.Load
}

// cpuUse is CPU time: the whole machine's busy time (every process, from
// /proc/stat) and this process's own (getrusage). Where /proc/stat cannot be read,
// total is zero. server is the store's own server processes' (backendCPU), set by
// the pass.
type cpuUse struct{ total, self, server time.Duration }

// backendCPU is the CPU time used so far by the server processes of the store's
// sessions (those named like dbURL's application_name in pg_stat_activity), read
// from /proc/<pid>/stat: a figure that other load on the machine (other benchmarks,
// other sessions of a shared server) does not inflate. Zero where the server is not
// on this machine or the processes cannot be read; sessions that closed meanwhile
// are missed.
func backendCPU(pool interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, dbURL string) time.Duration {
	u, err := url.Parse(dbURL)
	if err != nil {
		return 0
	}
	rows, err := pool.Query(context.Background(), `SELECT pid FROM pg_stat_activity
		WHERE datname = current_database() AND application_name = $1`, u.Query().Get("application_name"))
	if err != nil {
		return 0
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return 0
	}
	var ticks int64
	for _, pid := range pids {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		// pid (comm) state ppid … utime stime: fields 14 and 15, counted after the
		// command's closing parenthesis (the command may hold spaces).
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) < 13 {
			continue
		}
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		ticks += ut + st
	}
	return time.Duration(ticks) * time.Second / 100 // USER_HZ
}

func readCPU() cpuUse {
	var c cpuUse
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		c.self = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	stat, err := os.ReadFile("/proc/stat")
	if err != nil {
		return c
	}
	line, _, _ := bytes.Cut(stat, []byte("\n"))
	f := strings.Fields(string(line)) // cpu user nice system idle iowait irq softirq steal ...
	if len(f) < 9 || f[0] != "cpu" {
		return c
	}
	var busy int64
	for i, v := range f[1:9] {
		n, _ := strconv.ParseInt(v, 10, 64)
		if i != 3 && i != 4 { // idle, iowait
			busy += n
		}
	}
	c.total = time.Duration(busy) * time.Second / 100 // USER_HZ
	return c
}

func (c cpuUse) since(before cpuUse) cpuUse {
	return cpuUse{total: c.total - before.total, self: c.self - before.self}
}
