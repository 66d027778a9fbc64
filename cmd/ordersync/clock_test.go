package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/ordersync/ordersync/internal/eventually"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/logging"
	"github.com/ordersync/ordersync/internal/order"
	"github.com/ordersync/ordersync/internal/sim"
	"github.com/ordersync/ordersync/internal/sim/onecsim"
	"github.com/ordersync/ordersync/internal/store"
	"github.com/ordersync/ordersync/internal/store/sqlite"
)

// jsonRecords are the JSON records written to b.
func jsonRecords(t *testing.T, b string) []map[string]any {
	t.Helper()
	var recs []map[string]any
	for _, line := range strings.Split(b, "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) == nil {
			recs = append(recs, rec)
		}
	}
	return recs
}

// `ordersync run` on a machine whose clock runs 5 minutes ahead of the database's
// (the PostgreSQL store's process clock, the one clock a test can skew): it warns,
// /metrics says by how much, and it works on the database's clock — a create 1C
// refused with a 503 is retried within seconds, not 5 minutes later, and what is
// written is stamped with the database's time.
func TestRunOnAClockAheadOfTheDatabase(t *testing.T) {
	t.Parallel()
	const skew = 5 * time.Minute
	e := newEnv(t, onecsim.Options{}, true)
	e.onec.Faults.Add(1, sim.Fault{Op: "create", Status: 503})
	stderr := &lockedBuffer{}
	a := &app{environ: e.environ, stdin: strings.NewReader(""), stdout: io.Discard, stderr: stderr, command: "run",
		processClock: func() time.Time { return time.Now().Add(skew) }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("run: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("run did not stop within 30s")
		}
	})
	var admin string
	eventually.True(t, "the admin's listening address in the log", func() bool {
		for _, r := range jsonRecords(t, stderr.String()) {
			if r["msg"] == "admin listening" {
				admin, _ = r["address"].(string)
			}
		}
		return admin != "" && strings.Contains(stderr.String(), "engine started")
	})
	var warned bool
	for _, r := range jsonRecords(t, stderr.String()) {
		if msg, _ := r["msg"].(string); r["level"] == "WARN" && strings.Contains(msg, "the process's clock and the database's differ by 5m0s") {
			warned = true
			off, err := time.ParseDuration(r["clock_offset"].(string))
			if err != nil || (off+skew).Abs() > time.Second {
				t.Errorf("clock_offset %v (%v), want about %s", r["clock_offset"], err, -skew)
			}
		}
	}
	if !warned {
		t.Fatalf("no WARN about the clocks; the log:\n%s", stderr.String())
	}

	resp, err := http.Get(admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	f, ok := fams["ordersync_clock_offset_seconds"]
	if !ok || len(f.GetMetric()) != 1 {
		t.Fatalf("/metrics has no ordersync_clock_offset_seconds")
	}
	if v := f.GetMetric()[0].GetGauge().GetValue(); v > -skew.Seconds()+1 || v < -skew.Seconds()-1 {
		t.Fatalf("ordersync_clock_offset_seconds %g, want about %g", v, -skew.Seconds())
	}

	if _, errOut, code := e.cli(orderJSON("CLK-1", "SKU-1", "1", "100.00"), "order", "import"); code != 0 {
		t.Fatalf("order import: exit %d: %s", code, errOut)
	}
	store := e.store()
	key := "site:order:CLK-1:create"
	// Within eventually's bound: a retry reckoned on the process's clock would wait
	// 5 minutes.
	op := eventually.Value(t, key+" done", func() (journal.Operation, bool) {
		op, err := store.Get(context.Background(), key)
		return op, err == nil && op.Status == journal.StatusDone
	})
	if op.Attempts != 2 {
		t.Fatalf("attempts: %d, want 2 (a 503, then the create)", op.Attempts)
	}
	if d := time.Since(op.UpdatedAt); d.Abs() > time.Minute {
		t.Fatalf("updated_at %s is %s off the database's clock", op.UpdatedAt, d)
	}
	if got := e.onec.CountExternal("site:CLK-1"); got != 1 {
		t.Fatalf("1C holds %d orders of site:CLK-1, want 1", got)
	}
}

// newEngine gives the engine the database's clock (database.Now), on which it reckons
// its retry and settle times: a create 1C refused is due again after the store's time,
// not the process's. The store here runs on a clock 5 minutes ahead (an injected one;
// SQLite's is the machine's, which the process shares), so that the two differ.
func TestNewEngineReckonsOnTheDatabaseClock(t *testing.T) {
	t.Parallel()
	const skew = 5 * time.Minute
	ctx := context.Background()
	e := newEnvOn(t, "sqlite", onecsim.Options{}, false)
	e.onec.Faults.Add(sim.Forever, sim.Fault{Op: "create", Status: 503})
	a := &app{environ: e.environ, stdout: io.Discard, stderr: io.Discard}
	cfg, err := a.loadConfig()
	if err != nil {
		t.Fatal(err)
	}
	log := logging.Discard()
	sdb, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(t.TempDir(), "clock.db"),
		Now: func() time.Time { return time.Now().Add(skew) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sdb.Close() })
	if _, err := sdb.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	client, err := a.newClient(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close(context.Background()) })
	out, err := newDelivery(cfg, connectorPublishers{})
	if err != nil {
		t.Fatal(err)
	}
	db := store.DB(sdb)
	eng := newEngine(db, client, cfg, out.routes, nil, log)

	key := "site:order:CLK-2:create"
	if _, err := db.Journal().Register(ctx, journal.NewOperation{Key: key, Kind: order.KindCreate, Source: "site",
		ExternalID: "site:CLK-2", Payload: json.RawMessage(orderJSON("CLK-2", "SKU-1", "1", "10"))}); err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	op, err := eng.RunKey(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if op.Status != journal.StatusPending || op.Attempts != 1 {
		t.Fatalf("after a 503: %s, %d attempts; want pending after 1", op.Status, op.Attempts)
	}
	if op.NextAttemptAt.Before(before.Add(skew)) || op.NextAttemptAt.After(time.Now().Add(skew+cfg.OneC.SettleTime+time.Minute)) {
		t.Fatalf("next attempt at %s: not reckoned on the store's clock (%s ahead of the process's, now %s)",
			op.NextAttemptAt, skew, db.Now())
	}
}
