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
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ordersync/ordersync/internal/stdwebhook"
	"github.com/ordersync/ordersync/internal/store/postgres"
	"github.com/ordersync/ordersync/internal/testdb"
)

// BenchmarkIngest loads POST /webhooks/site over loopback with signed canonical
// orders, first all new (each one an inbox row and a journal operation), then the
// same deliveries again (duplicates), and reports requests/s with p50/p99 latency.
// In the same run it measures the machine's ceiling for one committed single-row
// INSERT with pgbench (same clients, same server), and reports new-event ingest as
// a share of it. The WAL written by the duplicate pass is reported too.
//
//	go test -run '^$' -bench Ingest -benchtime 1x ./internal/server/
func BenchmarkIngest(b *testing.B) {
	const (
		clients = 16
		events  = 6000
	)
	ctx := context.Background()
	dbURL := testdb.URL(b)
	db, err := postgres.Open(ctx, postgres.Config{URL: dbURL, MaxConns: 24})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
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
	target := "http://" + srv.Addr() + "/webhooks/site"

	type delivery struct {
		body   []byte
		header http.Header
	}
	secret := []stdwebhook.Secret{stdwebhook.MustParseSecret(siteSecret)}
	deliveries := make([]delivery, events)
	for i := range deliveries {
		body := []byte(fmt.Sprintf(`{"source":"site","external_id":"B-%d","number":"B-%d","created_at":"2026-09-16T10:00:00+05:00",`+
			`"customer":{"name":"Иван","phone":"+77011234567","email":""},"warehouse":"WH1","currency":"KZT",`+
			`"lines":[{"sku":"SKU-8812","name":"Чайник","quantity":2,"price":1500.10}],"comment":""}`, i, i))
		deliveries[i] = delivery{body, stdwebhook.Headers(secret, fmt.Sprintf("msg_%d", i), time.Now(), body)}
	}
	transport := &http.Transport{MaxIdleConnsPerHost: clients, MaxConnsPerHost: clients}
	client := &http.Client{Transport: transport, Timeout: 30 * time.Second}

	pass := func(name string, wantStatus int) (rps float64, p50, p99 time.Duration) {
		var next atomic.Int64
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
					req, _ := http.NewRequest(http.MethodPost, target, bytes.NewReader(d.body))
					req.Header = d.header.Clone()
					req.Header.Set("Content-Type", "application/json")
					t0 := time.Now()
					resp, err := client.Do(req)
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
		slices.Sort(lat)
		return float64(events) / elapsed.Seconds(), lat[events/2], lat[events*99/100]
	}

	b.ResetTimer()
	for range b.N {
		newRPS, newP50, newP99 := pass("new", http.StatusOK)
		var lsnBefore, lsnAfter string
		db.Pool().QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&lsnBefore)
		dupRPS, dupP50, dupP99 := pass("duplicate", http.StatusOK)
		db.Pool().QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&lsnAfter)
		var walBytes int64
		db.Pool().QueryRow(ctx, `SELECT pg_wal_lsn_diff($1::pg_lsn, $2::pg_lsn)::bigint`, lsnAfter, lsnBefore).Scan(&walBytes)
		b.StopTimer()
		var rows, ops int
		db.Pool().QueryRow(ctx, `SELECT (SELECT count(*) FROM inbox_events), (SELECT count(*) FROM operations)`).Scan(&rows, &ops)
		if rows != events || ops != events {
			b.Fatalf("%d inbox rows and %d operations after %d new and %d duplicate deliveries, want %d each", rows, ops, events, events, events)
		}
		b.ReportMetric(newRPS, "new-req/s")
		b.ReportMetric(float64(newP50.Microseconds())/1000, "new-p50-ms")
		b.ReportMetric(float64(newP99.Microseconds())/1000, "new-p99-ms")
		b.ReportMetric(dupRPS, "dup-req/s")
		b.ReportMetric(float64(dupP50.Microseconds())/1000, "dup-p50-ms")
		b.ReportMetric(float64(dupP99.Microseconds())/1000, "dup-p99-ms")
		b.ReportMetric(float64(walBytes)/events, "dup-WAL-B/req")
		if tps, err := insertCeiling(b, dbURL, clients); err != nil {
			b.Logf("pgbench ceiling not measured: %v", err)
		} else {
			b.ReportMetric(tps, "pgbench-insert-tps")
			b.ReportMetric(100*newRPS/tps, "new-%-of-ceiling")
		}
		b.StartTimer()
	}
}

// insertCeiling runs pgbench for 10 s with a custom script of one committed
// single-row INSERT into a table shaped like a small inbox row.
func insertCeiling(b *testing.B, dbURL string, clients int) (float64, error) {
	pgbench, err := exec.LookPath("pgbench")
	if err != nil {
		matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pgbench")
		if len(matches) == 0 {
			return 0, fmt.Errorf("pgbench is not installed")
		}
		pgbench = matches[len(matches)-1]
	}
	u, err := url.Parse(dbURL)
	if err != nil {
		return 0, err
	}
	schema := u.Query().Get("search_path")
	ctx := context.Background()
	db, err := postgres.Open(ctx, postgres.Config{URL: dbURL})
	if err != nil {
		return 0, err
	}
	defer db.Close()
	if _, err := db.Pool().Exec(ctx, `CREATE TABLE ceiling (id bigserial PRIMARY KEY, source text, event_id text, body text, at timestamptz)`); err != nil {
		return 0, err
	}
	script := filepath.Join(b.TempDir(), "insert.sql")
	os.WriteFile(script, []byte(fmt.Sprintf(
		"INSERT INTO %s.ceiling (source, event_id, body, at) VALUES ('site', md5(random()::text), repeat('x', 300), now());\n", schema)), 0o600)
	q := u.Query()
	q.Del("search_path")
	q.Del("application_name")
	u.RawQuery = q.Encode()
	out, err := exec.Command(pgbench, "-n", "-f", script, "-c", strconv.Itoa(clients), "-j", "2", "-T", "10", u.String()).CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("pgbench: %v: %s", err, out)
	}
	m := regexp.MustCompile(`tps = ([0-9.]+)`).FindSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("pgbench printed no tps: %s", out)
	}
	return strconv.ParseFloat(string(m[1]), 64)
}
