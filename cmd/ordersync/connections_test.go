package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ordersync/ordersync/internal/eventually"
	"github.com/ordersync/ordersync/internal/sim/onecsim"
	"github.com/ordersync/ordersync/internal/testdb"
)

// TestServiceWithin64SendersStaysWithinMaxConnections runs the service with
// database.max_connections = 12 and drives 64 senders of signed webhooks at it at
// once, while the engine carries the orders into 1C and the relays deliver their
// events: 12 is the least that onec.max_concurrency 4 allows. Every few milliseconds it counts the service's sessions in
// pg_stat_activity (its pools and its LISTEN connection are named after the URL's
// application_name, which testdb makes unique to this test): the count must never
// pass 12. Every delivery must be answered 200, and stored once: one inbox row and
// one journal operation each, one order in 1C each.
func TestServiceWithin64SendersStaysWithinMaxConnections(t *testing.T) {
	t.Parallel()
	const (
		budget  = 12
		senders = 64
		each    = 10
		events  = senders * each
	)
	e := newEnv(t, onecsim.Options{}, true)
	appName := applicationName(t, e.dbURL)
	e.environ = append(e.environ,
		"ORDERSYNC_WEBHOOKS__SOURCES__SITE__SECRETS="+siteSecret,
		fmt.Sprintf("ORDERSYNC_DATABASE__MAX_CONNECTIONS=%d", budget))

	ctx := context.Background()
	monitor, err := pgx.Connect(ctx, testdb.BaseURL()) // not named like the service: not counted
	if err != nil {
		t.Fatal(err)
	}
	defer monitor.Close(ctx)
	var (
		peak       atomic.Int64
		peakDetail atomic.Value
		samples    atomic.Int64
	)
	sampleCtx, stopSampling := context.WithCancel(ctx)
	sampled := make(chan struct{})
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			stopSampling()
			<-sampled
		}
	}
	defer stop() // before monitor.Close
	go func() {
		defer close(sampled)
		for sampleCtx.Err() == nil {
			var n int64
			var detail string
			err := monitor.QueryRow(sampleCtx, `SELECT count(*), coalesce(string_agg(application_name || ':' || state, ', ' ORDER BY application_name, state), '')
				FROM (SELECT application_name, coalesce(state, '') AS state FROM pg_stat_activity
					WHERE datname = current_database() AND left(application_name, length($1)) = $1) s`, appName).Scan(&n, &detail)
			if err != nil {
				if sampleCtx.Err() == nil {
					t.Errorf("sampling pg_stat_activity: %v", err)
				}
				return
			}
			samples.Add(1)
			if n > peak.Load() {
				peak.Store(n)
				peakDetail.Store(detail)
			}
			select {
			case <-sampleCtx.Done():
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()

	stopRun, log := e.runWithLog()
	target := webhooksURL(t, log) + "/webhooks/site"

	transport := &http.Transport{MaxIdleConnsPerHost: senders, MaxConnsPerHost: senders}
	defer transport.CloseIdleConnections()
	client := &http.Client{Transport: transport, Timeout: 60 * time.Second}
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		statuses = map[int]int{}
	)
	for s := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				id := fmt.Sprintf("C-%d-%d", s, i)
				body := []byte(orderJSON(id, "SKU-1", "1", "10.50"))
				req, err := http.NewRequest(http.MethodPost, target, bytes.NewReader(body))
				if err != nil {
					t.Error(err)
					return
				}
				for k, vs := range signed("msg_"+id, body) {
					req.Header[k] = vs
				}
				req.Header.Set("Content-Type", "application/json")
				resp, err := client.Do(req)
				if err != nil {
					t.Errorf("delivery %s: %v", id, err)
					return
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				mu.Lock()
				statuses[resp.StatusCode]++
				mu.Unlock()
				if resp.StatusCode != http.StatusOK {
					t.Errorf("delivery %s answered %d: %s", id, resp.StatusCode, b)
				}
			}
		}()
	}
	wg.Wait()
	// The engine goes on carrying the orders into 1C, and the relay their events:
	// still sampled.
	eventually.True(t, "e.onec.Count() >= events", func() bool { return e.onec.Count() >= events })
	if code := stopRun(); code != 0 {
		t.Fatalf("run exited %d", code)
	}
	stop()

	detail, _ := peakDetail.Load().(string)
	t.Logf("%d senders, %d deliveries (answers %v), database.max_connections %d: peak %d sessions in %d samples (%s)",
		senders, events, statuses, budget, peak.Load(), samples.Load(), detail)
	if peak.Load() > budget {
		t.Errorf("the service held %d connections at once, more than database.max_connections = %d (%s)", peak.Load(), budget, detail)
	}
	if peak.Load() == 0 {
		t.Errorf("no session of the service was ever seen in pg_stat_activity (application_name %q)", appName)
	}

	// Objects, not answers: each delivery one inbox row, one operation, one order.
	conn, err := pgx.Connect(ctx, e.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var rows, ops, distinct int
	if err := conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM inbox_events WHERE source = 'site'),
		(SELECT count(*) FROM operations WHERE source = 'site'),
		(SELECT count(DISTINCT key) FROM operations WHERE source = 'site')`).Scan(&rows, &ops, &distinct); err != nil {
		t.Fatal(err)
	}
	if rows != events || ops != events || distinct != events {
		t.Errorf("%d inbox rows, %d operations (%d keys) after %d deliveries, want %d each", rows, ops, distinct, events, events)
	}
	if n := e.onec.Count(); n != events {
		t.Errorf("1C holds %d orders, want %d", n, events)
	}
	for s := range senders {
		for i := range each {
			if id := fmt.Sprintf("site:C-%d-%d", s, i); e.onec.CountExternal(id) != 1 {
				t.Errorf("1C holds %s %d times, want once", id, e.onec.CountExternal(id))
			}
		}
	}
	if t.Failed() {
		t.Logf("run log:\n%s", tail(log.String(), 40))
	}
}

// applicationName is the application_name a test database URL gives its sessions.
func applicationName(t *testing.T, dbURL string) string {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	name := u.Query().Get("application_name")
	if name == "" {
		t.Fatalf("the test database URL names no application_name: %s", u.Redacted())
	}
	return name
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
