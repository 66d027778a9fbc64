package main

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/ordersync/ordersync/internal/eventually"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/logging"
	"github.com/ordersync/ordersync/internal/sim/kaspisim"
	"github.com/ordersync/ordersync/internal/sim/onecsim"
	"github.com/ordersync/ordersync/internal/stock"
	stocksvc "github.com/ordersync/ordersync/internal/stock/service"
	"github.com/ordersync/ordersync/internal/store"
)

// The stock commands as an operator runs them (in-process, through e.cli), checked
// by what they print and by what 1C, the marketplaces and the store hold after.

// stockSetEnv sets environment variables of e, replacing any value set before, so
// that a test can change what newStockWorld configured.
func stockSetEnv(e *env, kvs ...string) {
	for _, kv := range kvs {
		name, _, _ := strings.Cut(kv, "=")
		e.environ = slices.DeleteFunc(e.environ, func(s string) bool { return strings.HasPrefix(s, name+"=") })
		e.environ = append(e.environ, kv)
	}
}

// openStockDB opens e's database as the CLI does, whichever the backend.
func openStockDB(t *testing.T, e *env) store.DB {
	t.Helper()
	a := &app{environ: e.environ, stdout: io.Discard, stderr: io.Discard}
	cfg, err := a.loadConfig()
	if err != nil {
		t.Fatal(err)
	}
	db, err := a.openReadyDB(context.Background(), cfg, logging.Discard())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	return db
}

func item(sku, qty, price string) onecsim.StockItem {
	return onecsim.StockItem{SKU: sku, Quantity: decimal.RequireFromString(qty), Price: decimal.RequireFromString(price)}
}

// cliOK runs a command that must exit 0 and returns its stdout.
func cliOK(t *testing.T, e *env, args ...string) string {
	t.Helper()
	out, stderr, code := e.cli("", args...)
	if code != 0 {
		t.Fatalf("%s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, out, stderr)
	}
	return out
}

// hasLine reports whether out has a line matching the regular expression re.
func hasLine(out, re string) bool {
	return regexp.MustCompile(`(?m)^` + re + `$`).MatchString(out)
}

func wantLine(t *testing.T, what, out, re string) {
	t.Helper()
	if !hasLine(out, re) {
		t.Errorf("%s: no line matches %q in:\n%s", what, re, out)
	}
}

var manualKeyRE = regexp.MustCompile(`^stock:manual:([^:]+):(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)$`)

// manualKey checks a manual snapshot's key: its warehouse and a time, to the second
// in stock.timezone, within [from, to].
func manualKey(t *testing.T, key, warehouse string, from, to time.Time) {
	t.Helper()
	m := manualKeyRE.FindStringSubmatch(key)
	if m == nil || m[1] != warehouse {
		t.Fatalf("key %q is not stock:manual:%s:<time>", key, warehouse)
	}
	at, err := time.ParseInLocation("2006-01-02T15:04:05", m[2], mustAlmaty(t))
	if err != nil {
		t.Fatal(err)
	}
	if at.Before(from.Truncate(time.Second)) || at.After(to) {
		t.Fatalf("key %s: time %s (Asia/Almaty) is not when the command ran, %s … %s", key, at, from, to)
	}
}

// snapshotJSON is `stock snapshot --format json`, as a script reads it.
type snapshotJSON struct {
	Key       string   `json:"key"`
	Warehouse string   `json:"warehouse"`
	Status    string   `json:"status"`
	Items     int      `json:"items"`
	Warnings  []string `json:"warnings"`
	LastError string   `json:"last_error"`
	Published []struct {
		Snapshot    string     `json:"snapshot"`
		Marketplace string     `json:"marketplace"`
		Warehouse   string     `json:"warehouse"`
		Full        bool       `json:"full"`
		FinishedAt  *time.Time `json:"finished_at"`
		Sent        int        `json:"sent"`
		Published   int        `json:"published"`
		Refused     int        `json:"refused"`
		Mismatched  int        `json:"mismatched"`
		Skipped     int        `json:"skipped"`
		Unchanged   int        `json:"unchanged"`
	} `json:"published"`
	Pending []string `json:"pending"`
	Note    string   `json:"note"`
}

// TestStockSnapshotCommandTakesStoresAndPublishes: `stock snapshot --warehouse WH1`
// with Ozon and Wildberries mapping WH1 and no service running takes the snapshot,
// stores it as 1C sent it, publishes it to both (a negative quantity as 0, a
// fractional one floored, each said), and prints the key, the counts and a line per
// marketplace; --format json says the same to a script; a warehouse no marketplace
// maps is stored and published nowhere, and the command says so.
func TestStockSnapshotCommandTakesStoresAndPublishes(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			w := newStockWorld(t, backend, `[]`)
			w.onec.SetStock("WH1", item("SKU-001", "3", "100"), item("SKU-002", "0", "200"),
				item("SKU-003", "-4", "50.25"), item("SKU-004", "10.5", "99.90"))
			w.onec.SetStock("WH3", item("SKU-100", "7", "1"))
			db := openStockDB(t, w.env)
			st := db.Stock()

			from := time.Now()
			out := cliOK(t, w.env, "stock", "snapshot", "--warehouse", "WH1")
			to := time.Now()
			first, _, _ := strings.Cut(out, "\n")
			key, rest, ok := strings.Cut(first, ": ")
			if !ok || rest != "4 items, 1 warning" {
				t.Fatalf("first line %q, want <key>: 4 items, 1 warning; output:\n%s", first, out)
			}
			manualKey(t, key, "WH1", from, to)
			// The snapshot taken by hand names who took it, in its timeline.
			shown, _, code := w.env.cli("", "journal", "show", key, "--format", "json")
			var d struct {
				Events []struct{ Action, Actor string }
			}
			if err := json.Unmarshal([]byte(shown), &d); err != nil || code != 0 || len(d.Events) == 0 ||
				d.Events[0].Action != "registered" || d.Events[0].Actor != "cli:"+cliUser() {
				t.Errorf("the manual snapshot's events %+v (exit %d, %v), want registered by cli:%s", d.Events, code, err, cliUser())
			}
			wantLine(t, "snapshot", out, `  warning: SKU-003: negative quantity -4, published as 0`)
			wantLine(t, "snapshot", out, `  ozon: full publish: 4 sent, 4 published, 0 refused, 0 mismatched, 0 skipped, 0 unchanged`)
			wantLine(t, "snapshot", out, `  wildberries: full publish: 4 sent, 4 published, 0 refused, 0 mismatched, 0 skipped, 0 unchanged`)
			wantLine(t, "snapshot", out, `  ozon: warning: SKU-004: fractional quantity 10\.5 floored to 10`)
			wantLine(t, "snapshot", out, `  wildberries: warning: SKU-004: fractional quantity 10\.5 floored to 10`)
			if strings.Count(out, "negative quantity") != 1 {
				t.Errorf("the negative quantity is said %d times, want once:\n%s", strings.Count(out, "negative quantity"), out)
			}

			// 1C was asked once; the marketplaces hold the items, the negative one as 0.
			if n := w.onec.Stats().Requests["stock"]; n != 1 {
				t.Errorf("1C was asked for stock %d times, want 1", n)
			}
			wantOzon := map[string]int64{"SKU-001": 3, "SKU-002": 0, "SKU-003": 0, "SKU-004": 10}
			for sku, want := range wantOzon {
				if got, ok := w.ozon.Stock(sku, stockOzonWarehouse); !ok || got != want {
					t.Errorf("Ozon holds %s = %d (%v), want %d", sku, got, ok, want)
				}
			}
			if n := len(w.ozon.StockUpdates()); n != 4 {
				t.Errorf("Ozon took %d updates, want 4", n)
			}
			if got, want := w.wb.StockAmounts(stockWBWarehouse), map[int64]int64{9001: 3, 9002: 0, 9003: 0, 9004: 10}; !mapsEqual(got, want) {
				t.Errorf("Wildberries holds %v, want %v", got, want)
			}

			// The store holds the snapshot as 1C sent it, and the two publishes.
			snap, err := st.Snapshot(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			if snap.Schedule != stock.Manual || snap.Warehouse != "WH1" || snap.ItemCount != 4 ||
				!slices.Equal(snap.Warnings, []string{"SKU-003: negative quantity -4, published as 0"}) {
				t.Errorf("stored snapshot %+v", snap)
			}
			items, err := st.Items(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			if len(items) != 4 || items[2].SKU != "SKU-003" || !items[2].Quantity.Equal(decimal.NewFromInt(-4)) ||
				!items[2].Price.Equal(decimal.RequireFromString("50.25")) || !items[3].Quantity.Equal(decimal.RequireFromString("10.5")) {
				t.Errorf("stored items %+v", items)
			}
			if op, err := db.Journal().Get(ctx, key); err != nil || op.Status != journal.StatusDone || op.Kind != stock.KindSnapshot {
				t.Errorf("journal: %+v %v, want a done %s", op, err, stock.KindSnapshot)
			}
			pubs, err := st.Publishes(ctx, stock.PublishFilter{Warehouse: "WH1"})
			if err != nil {
				t.Fatal(err)
			}
			if len(pubs) != 2 {
				t.Fatalf("%d publishes of WH1 stored, want 2: %+v", len(pubs), pubs)
			}
			for _, p := range pubs {
				if p.SnapshotKey != key || p.FinishedAt == nil || !p.Full || p.Sent != 4 || p.Published != 4 {
					t.Errorf("stored publish %+v", p)
				}
			}

			// --format json: the same facts, for a script. A new SKU is the only change.
			w.onec.SetStock("WH1", item("SKU-001", "3", "100"), item("SKU-002", "0", "200"),
				item("SKU-003", "-4", "50.25"), item("SKU-004", "10.5", "99.90"), item("SKU-005", "2", "10"))
			from = time.Now()
			out = cliOK(t, w.env, "stock", "snapshot", "--warehouse", "WH1", "--format", "json")
			to = time.Now()
			var js []snapshotJSON
			if err := json.Unmarshal([]byte(out), &js); err != nil {
				t.Fatalf("--format json: %v:\n%s", err, out)
			}
			if len(js) != 1 {
				t.Fatalf("--format json: %d snapshots, want 1:\n%s", len(js), out)
			}
			j := js[0]
			manualKey(t, j.Key, "WH1", from, to)
			if j.Key == key || j.Warehouse != "WH1" || j.Status != "done" || j.Items != 5 || len(j.Warnings) != 1 || j.LastError != "" || len(j.Pending) != 0 {
				t.Errorf("--format json: %+v", j)
			}
			var mps []string
			for _, p := range j.Published {
				mps = append(mps, p.Marketplace)
				if p.Snapshot != j.Key || p.Warehouse != "WH1" || p.Full || p.FinishedAt == nil ||
					p.Sent != 1 || p.Published != 1 || p.Unchanged != 4 || p.Refused+p.Mismatched+p.Skipped != 0 {
					t.Errorf("--format json: publish %+v, want 1 sent and published, 4 unchanged", p)
				}
			}
			slices.Sort(mps)
			if !slices.Equal(mps, []string{"ozon", "wildberries"}) {
				t.Errorf("--format json: published to %v", mps)
			}
			if got, _ := w.ozon.Stock("SKU-005", stockOzonWarehouse); got != 2 || len(w.ozon.StockUpdates()) != 5 {
				t.Errorf("Ozon holds SKU-005 = %d after %d updates, want 2 after 5", got, len(w.ozon.StockUpdates()))
			}
			if got, _ := w.wb.StockAmount(stockWBWarehouse, 9005); got != 2 {
				t.Errorf("Wildberries holds SKU-005 = %d, want 2", got)
			}

			// A warehouse no marketplace maps: stored, published nowhere, and said so.
			ozonBefore, wbBefore := len(w.ozon.StockUpdates()), w.wb.StockStats().Updates
			out = cliOK(t, w.env, "stock", "snapshot", "--warehouse", "WH3")
			first, _, _ = strings.Cut(out, "\n")
			key3, rest, _ := strings.Cut(first, ": ")
			if rest != "1 item" {
				t.Errorf("first line %q, want <key>: 1 item", first)
			}
			wantLine(t, "snapshot of WH3", out, `  stored, published nowhere: no marketplace maps warehouse WH3 .*`)
			if hasLine(out, `  (ozon|wildberries|kaspi): .*`) {
				t.Errorf("snapshot of WH3 names a marketplace:\n%s", out)
			}
			if s, err := st.Snapshot(ctx, key3); err != nil || s.ItemCount != 1 {
				t.Errorf("snapshot %s: %+v %v", key3, s, err)
			}
			if ps, err := st.Publishes(ctx, stock.PublishFilter{Warehouse: "WH3"}); err != nil || len(ps) != 0 {
				t.Errorf("publishes of WH3: %+v %v, want none", ps, err)
			}
			if len(w.ozon.StockUpdates()) != ozonBefore || w.wb.StockStats().Updates != wbBefore {
				t.Errorf("the marketplaces were sent WH3's stock")
			}
			out = cliOK(t, w.env, "stock", "snapshot", "--warehouse", "WH3", "--format", "json")
			js = nil
			if err := json.Unmarshal([]byte(out), &js); err != nil || len(js) != 1 || len(js[0].Published) != 0 ||
				!strings.Contains(js[0].Note, "no marketplace maps warehouse WH3") {
				t.Errorf("--format json of WH3: %v %+v", err, js)
			}
		})
	}
}

func mapsEqual[K comparable, V comparable](a, b map[K]V) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestStockSnapshotCommandRefusesBadAnswersFromOneC: a 1C answer with a SKU twice, a
// quantity that is not a number, or a warehouse 1C does not know fails the snapshot:
// exit 1, the reason printed names the cause, the journal operation is failed with
// it, nothing is stored and nothing is published.
func TestStockSnapshotCommandRefusesBadAnswersFromOneC(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			w := newStockWorld(t, backend, `[]`)
			// Every warehouse is mapped: a snapshot stored would be published.
			w.wb.AddStockWarehouse(508, 509)
			stockSetEnv(w.env,
				fmt.Sprintf("ORDERSYNC_CONNECTORS__OZON__STOCK_WAREHOUSES=WH1=%d,WH2=%d,WH9=%d", stockOzonWarehouse, stockOzonWarehouse, stockOzonWarehouse),
				fmt.Sprintf("ORDERSYNC_CONNECTORS__WILDBERRIES__STOCK_WAREHOUSES=WH1=%d,WH2=508,WH9=509", stockWBWarehouse))
			w.onec.SetStockBody("WH1", []byte(`{"warehouse":"WH1","taken_at":"2026-09-16T10:00:00","items":[`+
				`{"sku":"SKU-001","quantity":1,"price":100},{"sku":"SKU-002","quantity":2,"price":100},{"sku":"SKU-001","quantity":5,"price":100}]}`))
			w.onec.SetStockBody("WH2", []byte(`{"warehouse":"WH2","taken_at":"2026-09-16T10:00:00","items":[`+
				`{"sku":"SKU-001","quantity":1,"price":100},{"sku":"SKU-002","quantity":"много","price":100}]}`))
			// WH9 is never set: 1C answers 422 unknown_warehouse.
			db := openStockDB(t, w.env)
			for _, tc := range []struct {
				warehouse string
				want      []string // in the reason, printed and in the journal
			}{
				{"WH1", []string{`SKU "SKU-001" twice`, "warehouse WH1", "quantities 1 and 5"}},
				{"WH2", []string{`items[1] (sku "SKU-002")`, "quantity", `"много" is not a number`}},
				{"WH9", []string{`"WH9"`, "unknown_warehouse", "422"}},
			} {
				out, stderr, code := w.cli("", "stock", "snapshot", "--warehouse", tc.warehouse)
				if code != 1 {
					t.Errorf("%s: exit %d, want 1\nstdout:\n%s\nstderr:\n%s", tc.warehouse, code, out, stderr)
					continue
				}
				key, reason, _ := strings.Cut(strings.TrimSpace(out), ": failed: ")
				manualKey(t, key, tc.warehouse, time.Now().Add(-time.Minute), time.Now())
				for _, want := range tc.want {
					if !strings.Contains(reason, want) {
						t.Errorf("%s: printed reason %q lacks %q", tc.warehouse, reason, want)
					}
				}
				op, err := db.Journal().Get(ctx, key)
				if err != nil {
					t.Fatal(err)
				}
				if op.Status != journal.StatusFailed || op.LastError != reason {
					t.Errorf("%s: journal %s %q, want failed with %q", tc.warehouse, op.Status, op.LastError, reason)
				}
				if _, err := db.Stock().Snapshot(ctx, key); !errors.Is(err, stock.ErrNoSnapshot) {
					t.Errorf("%s: Snapshot(%s) = %v, want stock.ErrNoSnapshot", tc.warehouse, key, err)
				}
				if _, err := db.Stock().Latest(ctx, tc.warehouse, time.Time{}); !errors.Is(err, stock.ErrNoSnapshot) {
					t.Errorf("%s: a snapshot of the warehouse is stored: %v", tc.warehouse, err)
				}
				if ps, err := db.Stock().Publishes(ctx, stock.PublishFilter{Warehouse: tc.warehouse}); err != nil || len(ps) != 0 {
					t.Errorf("%s: publishes %+v %v, want none", tc.warehouse, ps, err)
				}
				// Failed is final: a second try is the same answer, and no retry.
				if op.Attempts != 1 {
					t.Errorf("%s: %d attempts, want 1 (a bad answer is not retried)", tc.warehouse, op.Attempts)
				}
				_, stderr, code = w.cli("", "stock", "show", "--warehouse", tc.warehouse)
				if code != 1 || !strings.Contains(stderr, "no snapshot of "+tc.warehouse) {
					t.Errorf("%s: stock show: exit %d %q, want 1 and no snapshot", tc.warehouse, code, stderr)
				}
			}
			if n := w.onec.Stats().Requests["stock"]; n != 3 {
				t.Errorf("1C was asked for stock %d times, want 3", n)
			}
			if n := w.ozon.StockRequests(); n != 0 {
				t.Errorf("Ozon got %d stock requests, want none", n)
			}
			if s := w.wb.StockStats(); s.Updates != 0 || s.Written != 0 {
				t.Errorf("Wildberries got stock: %+v", s)
			}
		})
	}
}

// statusJSON is `stock status --format json`.
type statusJSON struct {
	Schedules []struct {
		Name      string    `json:"name"`
		Cron      string    `json:"cron"`
		Warehouse string    `json:"warehouse"`
		Last      string    `json:"last_slot"`
		Next      time.Time `json:"next_slot"`
		Pending   int       `json:"pending"`
		Failed    string    `json:"last_failure"`
	} `json:"schedules"`
	Publishes []struct {
		Snapshot    string     `json:"snapshot"`
		Marketplace string     `json:"marketplace"`
		Warehouse   string     `json:"warehouse"`
		FinishedAt  *time.Time `json:"finished_at"`
		Sent        int        `json:"sent"`
		Published   int        `json:"published"`
		Refused     int        `json:"refused"`
		Skipped     int        `json:"skipped"`
	} `json:"publishes"`
	Kaspi []struct {
		Warehouse string `json:"warehouse"`
		Store     string `json:"store"`
		Snapshot  string `json:"snapshot"`
	} `json:"kaspi"`
	Problems []struct {
		Marketplace string `json:"marketplace"`
		Warehouse   string `json:"warehouse"`
		SKU         string `json:"sku"`
		MarketSKU   string `json:"market_sku"`
		Value       int64  `json:"value"`
		Outcome     string `json:"outcome"`
		Reason      string `json:"reason"`
	} `json:"problems"`
}

// TestStockShowDiffAndStatusCommands: a service takes one scheduled snapshot of each
// schedule (catch_up: latest) and is stopped; 1C's stock of WH2 changes and a manual
// snapshot is taken. Then `stock show` prints the latest of each warehouse (table,
// json, csv), --at a time before the second snapshot picks the first, a key picks
// its snapshot; `stock diff` lists what was added, removed and changed, by key and
// by time; `stock status` gives each schedule's last and next slot, each
// marketplace's last publish, the Kaspi feed's snapshot, and the items Ozon refused
// and Wildberries skipped with their reasons. No output holds a secret.
func TestStockShowDiffAndStatusCommands(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newStockWorld(t, "sqlite", `[{"name":"main","cron":"@every 24h","warehouses":["WH1"],"publish":["kaspi","ozon","wildberries"]},`+
		`{"name":"wb","cron":"@every 24h","warehouses":["WH2"],"publish":["wildberries"]}]`)
	k := kaspisim.New(kaspisim.Options{Token: "kaspi-api-secret"})
	if err := k.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Close)
	const feedToken = "feedT0ken-s3cret-0123456789abcdef"
	tokenFile := filepath.Join(t.TempDir(), "kaspi-feed-token")
	if err := os.WriteFile(tokenFile, []byte(feedToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	w.wb.AddStockWarehouse(508)
	stockSetEnv(w.env,
		"ORDERSYNC_STOCK__CATCH_UP=latest",
		fmt.Sprintf("ORDERSYNC_CONNECTORS__WILDBERRIES__STOCK_WAREHOUSES=WH1=%d,WH2=508", stockWBWarehouse),
		"ORDERSYNC_CONNECTORS__KASPI__ENABLED=true",
		"ORDERSYNC_CONNECTORS__KASPI__BASE_URL="+k.URL(),
		"ORDERSYNC_CONNECTORS__KASPI__TOKEN=kaspi-api-secret",
		"ORDERSYNC_CONNECTORS__KASPI__WAREHOUSE=WH1",
		"ORDERSYNC_CONNECTORS__KASPI__POLL_INTERVAL=1h",
		"ORDERSYNC_CONNECTORS__KASPI__STORES=WH1=PP1",
		"ORDERSYNC_CONNECTORS__KASPI__FEED_TOKEN_FILE="+tokenFile,
		"ORDERSYNC_CONNECTORS__KASPI__COMPANY=Магазин",
		"ORDERSYNC_CONNECTORS__KASPI__MERCHANT_ID=30000001",
	)
	// NOPE-1 is no Ozon offer (refused: offer_id_not_found) and no Wildberries card
	// (skipped).
	w.onec.SetStock("WH1", item("SKU-001", "5", "100"), item("SKU-002", "3", "200"), item("NOPE-1", "2", "10"))
	w.onec.SetStock("WH2", item("SKU-010", "1", "100"), item("SKU-011", "2", "100"), item("SKU-012", "3", "100"))
	db := openStockDB(t, w.env)
	st := db.Stock()
	var printed strings.Builder // every output, checked for secrets at the end
	run := func(args ...string) string {
		t.Helper()
		out, stderr, code := w.cli("", args...)
		printed.WriteString(out + stderr)
		if code != 0 {
			t.Fatalf("%s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, out, stderr)
		}
		return out
	}

	// The service catches up each schedule's latest slot and publishes it.
	svc := w.startService()
	latest := func(schedule string) (stock.Snapshot, bool) {
		ss, err := st.Snapshots(ctx, stock.Filter{Schedule: schedule, Limit: 1})
		return firstOf(ss), err == nil && len(ss) == 1
	}
	finished := func(mp, wh, key string) bool {
		ps, err := st.Publishes(ctx, stock.PublishFilter{Marketplace: mp, Warehouse: wh})
		return err == nil && slices.ContainsFunc(ps, func(p stock.Publish) bool { return p.SnapshotKey == key && p.FinishedAt != nil })
	}
	var a1, a2 stock.Snapshot
	eventually.True(t, "the scheduled snapshots and their publishes", func() bool {
		var ok1, ok2 bool
		a1, ok1 = latest("main")
		a2, ok2 = latest("wb")
		return ok1 && ok2 && finished(stock.Ozon, "WH1", a1.Key) && finished(stock.Wildberries, "WH1", a1.Key) &&
			finished(stock.Wildberries, "WH2", a2.Key)
	})
	svc.signal(syscall.SIGTERM)
	if code := svc.wait(time.Minute); code != 0 {
		t.Fatalf("ordersync run exited %d:\n%s", code, svc.stderr.String())
	}
	printed.WriteString(svc.stderr.String() + svc.stdout.String())
	spec, err := stock.ParseSpec("@every 24h", mustAlmaty(t))
	if err != nil {
		t.Fatal(err)
	}
	if a2.Key != stock.Key("wb", "WH2", a2.Label) || a2.Label != spec.Label(a2.Slot) {
		t.Fatalf("scheduled snapshot %+v", a2)
	}

	// The second snapshot of WH2: SKU-010's quantity and SKU-012's price change,
	// SKU-011 goes, SKU-013 comes.
	w.onec.SetStock("WH2", item("SKU-010", "5", "100"), item("SKU-012", "3", "120"), item("SKU-013", "4", "100"))
	out := run("stock", "snapshot", "--warehouse", "WH2")
	bKey, rest, _ := strings.Cut(strings.SplitN(out, "\n", 2)[0], ": ")
	if rest != "3 items" {
		t.Fatalf("snapshot of WH2:\n%s", out)
	}
	wantLine(t, "snapshot of WH2", out, `  wildberries: changes publish: \d+ sent, \d+ published, 0 refused, 0 mismatched, 0 skipped, \d+ unchanged`)
	if hasLine(out, `  (ozon|kaspi): .*`) {
		t.Errorf("WH2 is published to Wildberries only:\n%s", out)
	}
	if got, want := w.wb.StockAmounts(508), map[int64]int64{9010: 5, 9012: 3, 9013: 4}; got[9010] != want[9010] || got[9012] != want[9012] || got[9013] != want[9013] {
		t.Errorf("Wildberries holds %v for WH2, want %v", got, want)
	}

	// stock show: the latest of each warehouse.
	out = run("stock", "show")
	wantLine(t, "show", out, regexp.QuoteMeta(a1.Key)+`: warehouse WH1, slot `+regexp.QuoteMeta(a1.Label)+`, taken by 1C at \S+, 3 items`)
	wantLine(t, "show", out, regexp.QuoteMeta(bKey)+`: warehouse WH2, slot \S+, taken by 1C at \S+, 3 items`)
	for _, row := range []string{`NOPE-1\s+2\s+10`, `SKU-001\s+5\s+100`, `SKU-010\s+5\s+100`, `SKU-012\s+3\s+120`, `SKU-013\s+4\s+100`} {
		wantLine(t, "show", out, `\s*`+row+`\s*`)
	}
	if strings.Contains(out, "SKU-011") {
		t.Errorf("show prints SKU-011, which the latest snapshot of WH2 has not:\n%s", out)
	}
	var shown []struct {
		Key       string `json:"key"`
		Schedule  string `json:"schedule"`
		Warehouse string `json:"warehouse"`
		Label     string `json:"label"`
		ItemCount int    `json:"item_count"`
		Items     []struct {
			SKU      string          `json:"sku"`
			Quantity decimal.Decimal `json:"quantity"`
			Price    decimal.Decimal `json:"price"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(run("stock", "show", "--format", "json")), &shown); err != nil {
		t.Fatal(err)
	}
	if len(shown) != 2 || shown[0].Key != a1.Key || shown[0].Schedule != "main" || shown[1].Key != bKey || shown[1].ItemCount != 3 ||
		len(shown[1].Items) != 3 || shown[1].Items[2].SKU != "SKU-013" || !shown[1].Items[2].Quantity.Equal(decimal.NewFromInt(4)) {
		t.Errorf("show --format json: %+v", shown)
	}
	rows, err := csv.NewReader(strings.NewReader(run("stock", "show", "--format", "csv"))).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 7 || !slices.Equal(rows[0], []string{"snapshot", "warehouse", "slot", "sku", "quantity", "price"}) ||
		!slices.ContainsFunc(rows, func(r []string) bool {
			return slices.Equal(r[2:], []string{a1.Label, "NOPE-1", "2", "10"}) && r[0] == a1.Key
		}) ||
		!slices.ContainsFunc(rows, func(r []string) bool { return r[0] == bKey && r[1] == "WH2" && r[3] == "SKU-012" && r[5] == "120" }) {
		t.Errorf("show --format csv: %q", rows)
	}

	// --at a time before the second snapshot picks the first; a key picks its own.
	for _, at := range []string{a2.Label, a2.Slot.Add(time.Second).Format(time.RFC3339)} {
		out = run("stock", "show", "--warehouse", "WH2", "--at", at)
		if !strings.HasPrefix(out, a2.Key+": ") || !hasLine(out, `\s*SKU-011\s+2\s+100\s*`) || !hasLine(out, `\s*SKU-010\s+1\s+100\s*`) {
			t.Errorf("show --at %s: want %s:\n%s", at, a2.Key, out)
		}
	}
	if out = run("stock", "show", a2.Key); !strings.HasPrefix(out, a2.Key+": ") || strings.Contains(out, bKey) {
		t.Errorf("show %s:\n%s", a2.Key, out)
	}
	if _, stderr, code := w.cli("", "stock", "show", "stock:wb:WH2:2001-01-01T00:00"); code != 1 || !strings.Contains(stderr, "stock:wb:WH2:2001-01-01T00:00") {
		t.Errorf("show of an unknown key: exit %d %q, want 1 naming the key", code, stderr)
	}

	// stock diff: by key, and by time with --warehouse (json).
	out = run("stock", "diff", a2.Key, bKey)
	for _, re := range []string{
		`A ` + regexp.QuoteMeta(a2.Key) + ` \(3 items\)`, `B ` + regexp.QuoteMeta(bKey) + ` \(3 items\)`, `4 SKUs differ`,
		`SKU\s+CHANGE\s+QUANTITY A\s+QUANTITY B\s+PRICE A\s+PRICE B`,
		`SKU-010\s+changed\s+1\s+5\s+100\s+100`, `SKU-011\s+removed\s+2\s+100\s*`,
		`SKU-012\s+changed\s+3\s+3\s+100\s+120`, `SKU-013\s+added\s+4\s+100`,
	} {
		wantLine(t, "diff", out, re)
	}
	var diff struct {
		A, B    string
		Changes []stocksvc.Change
	}
	bLabel := bKey[strings.LastIndex(bKey, "WH2:")+4:]
	if err := json.Unmarshal([]byte(run("stock", "diff", a2.Label, bLabel, "--warehouse", "WH2", "--format", "json")), &diff); err != nil {
		t.Fatal(err)
	}
	want := []stocksvc.Change{
		{SKU: "SKU-010", Change: "changed", QuantityA: "1", QuantityB: "5", PriceA: "100", PriceB: "100"},
		{SKU: "SKU-011", Change: "removed", QuantityA: "2", PriceA: "100"},
		{SKU: "SKU-012", Change: "changed", QuantityA: "3", QuantityB: "3", PriceA: "100", PriceB: "120"},
		{SKU: "SKU-013", Change: "added", QuantityB: "4", PriceB: "100"},
	}
	if diff.A != a2.Key || diff.B != bKey || !slices.Equal(diff.Changes, want) {
		t.Errorf("diff by time --format json: %+v\nwant A %s B %s %+v", diff, a2.Key, bKey, want)
	}
	if err := json.Unmarshal([]byte(run("stock", "diff", bKey, bKey, "--format", "json")), &diff); err != nil || diff.Changes == nil || len(diff.Changes) != 0 {
		t.Errorf("diff of a snapshot with itself: %+v %v, want changes: []", diff, err)
	}

	// stock status.
	before := time.Now()
	out = run("stock", "status")
	after := time.Now()
	wantLine(t, "status", out, `Times are in Asia/Almaty \(stock\.timezone\)\.`)
	nexts := `(` + regexp.QuoteMeta(spec.Next(before).Format("2006-01-02T15:04:05")) + `|` + regexp.QuoteMeta(spec.Next(after).Format("2006-01-02T15:04:05")) + `)`
	wantLine(t, "status", out, `SCHEDULE\s+CRON\s+WAREHOUSE\s+LAST SLOT\s+NEXT SLOT\s+PENDING\s+LAST FAILURE`)
	wantLine(t, "status", out, `main\s+@every 24h\s+WH1\s+`+regexp.QuoteMeta(a1.Label)+`\s+`+nexts+`\s+0\s*`)
	wantLine(t, "status", out, `wb\s+@every 24h\s+WH2\s+`+regexp.QuoteMeta(a2.Label)+`\s+`+nexts+`\s+0\s*`)
	stamp := `\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d`
	wantLine(t, "status", out, `ozon\s+WH1\s+`+regexp.QuoteMeta(a1.Key)+`\s+`+stamp+`\s+`+stamp+`\s+full publish: 3 sent, 2 published, 1 refused, 0 mismatched, 0 skipped, 0 unchanged`)
	wantLine(t, "status", out, `wildberries\s+WH1\s+`+regexp.QuoteMeta(a1.Key)+`\s+`+stamp+`\s+`+stamp+`\s+full publish: 3 sent, 2 published, 0 refused, 0 mismatched, 1 skipped, 0 unchanged`)
	wantLine(t, "status", out, `wildberries\s+WH2\s+`+regexp.QuoteMeta(bKey)+`\s+`+stamp+`\s+`+stamp+`\s+changes publish: .*`)
	wantLine(t, "status", out, `kaspi\s+WH1\s+`+regexp.QuoteMeta(a1.Key)+`\s+feed serves store PP1`)
	wantLine(t, "status", out, `MARKETPLACE\s+WAREHOUSE\s+SKU\s+MARKETPLACE SKU\s+VALUE\s+OUTCOME\s+REASON`)
	wantLine(t, "status", out, `ozon\s+WH1\s+NOPE-1\s+NOPE-1\s+2\s+refused\s+offer_id_not_found: .*`)
	wantLine(t, "status", out, `wildberries\s+WH1\s+NOPE-1\s+NOPE-1\s+2\s+skipped\s+no Wildberries card with vendor code NOPE-1.*`)
	// The publishes' times are in stock.timezone, as the slots are.
	p1, err := st.Publishes(ctx, stock.PublishFilter{Marketplace: stock.Ozon, Warehouse: "WH1", Limit: 1})
	if err != nil || len(p1) != 1 {
		t.Fatal(p1, err)
	}
	wantLine(t, "status", out, `ozon\s+WH1\s+\S+\s+`+regexp.QuoteMeta(p1[0].StartedAt.In(mustAlmaty(t)).Format("2006-01-02T15:04:05"))+`\s.*`)

	var sj statusJSON
	before = time.Now()
	if err := json.Unmarshal([]byte(run("stock", "status", "--format", "json")), &sj); err != nil {
		t.Fatal(err)
	}
	after = time.Now()
	if len(sj.Schedules) != 2 || sj.Schedules[0].Name != "main" || sj.Schedules[0].Last != a1.Label || sj.Schedules[1].Name != "wb" ||
		sj.Schedules[1].Warehouse != "WH2" || sj.Schedules[1].Last != a2.Label || sj.Schedules[1].Cron != "@every 24h" {
		t.Errorf("status --format json: schedules %+v", sj.Schedules)
	}
	for _, s := range sj.Schedules {
		if n := s.Next; !n.Equal(spec.Next(before)) && !n.Equal(spec.Next(after)) {
			t.Errorf("status --format json: %s's next slot %s, want %s", s.Name, n, spec.Next(after))
		}
	}
	if len(sj.Publishes) != 3 {
		t.Errorf("status --format json: %d publishes, want the last of ozon WH1, wildberries WH1 and WH2: %+v", len(sj.Publishes), sj.Publishes)
	}
	for _, p := range sj.Publishes {
		if p.Marketplace == stock.Ozon && (p.Snapshot != a1.Key || p.Sent != 3 || p.Published != 2 || p.Refused != 1 || p.FinishedAt == nil) {
			t.Errorf("status --format json: Ozon's publish %+v", p)
		}
		if p.Warehouse == "WH2" && p.Snapshot != bKey {
			t.Errorf("status --format json: WH2's last publish is of %s, want %s", p.Snapshot, bKey)
		}
	}
	if len(sj.Kaspi) != 1 || sj.Kaspi[0].Store != "PP1" || sj.Kaspi[0].Snapshot != a1.Key {
		t.Errorf("status --format json: kaspi %+v", sj.Kaspi)
	}
	problems, err := st.Problems(ctx, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(sj.Problems) != len(problems) || len(problems) < 2 {
		t.Errorf("status --format json lists %d problems, the store %d: %+v", len(sj.Problems), len(problems), sj.Problems)
	}
	refused := slices.IndexFunc(sj.Problems, func(p struct {
		Marketplace string `json:"marketplace"`
		Warehouse   string `json:"warehouse"`
		SKU         string `json:"sku"`
		MarketSKU   string `json:"market_sku"`
		Value       int64  `json:"value"`
		Outcome     string `json:"outcome"`
		Reason      string `json:"reason"`
	}) bool {
		return p.Marketplace == stock.Ozon && p.SKU == "NOPE-1" && p.Outcome == "refused" && strings.HasPrefix(p.Reason, "offer_id_not_found")
	})
	if refused < 0 {
		t.Errorf("status --format json lacks Ozon's refusal of NOPE-1: %+v", sj.Problems)
	}

	// No output holds a secret: the feed token (the feed URL's only secret), the
	// marketplaces' API keys, the 1C password.
	all := printed.String()
	for _, secret := range []string{feedToken, "kaspi-api-secret", "ozon-key", "wb-token", simPassword} {
		if strings.Contains(all, secret) {
			t.Errorf("a secret, %.4s…, was printed", secret)
		}
	}
	cfgOut := run("config", "check")
	if strings.Contains(cfgOut, feedToken) || strings.Contains(cfgOut, "kaspi-api-secret") {
		t.Errorf("config check printed a Kaspi secret")
	}
}

func firstOf(ss []stock.Snapshot) stock.Snapshot {
	if len(ss) == 0 {
		return stock.Snapshot{}
	}
	return ss[0]
}

// TestStockCommandsUsageErrors: a flag that does not parse or names nothing exits 2
// with one line naming the flag, before anything is asked of 1C or registered; a
// configuration whose cron spec or time zone does not parse exits 2 naming the key.
func TestStockCommandsUsageErrors(t *testing.T) {
	t.Parallel()
	w := newStockWorld(t, "sqlite", `[{"name":"main","cron":"*/30 * * * *","warehouses":["WH1","WH2"],"publish":["ozon"]}]`)
	stockSetEnv(w.env, fmt.Sprintf("ORDERSYNC_CONNECTORS__OZON__STOCK_WAREHOUSES=WH1=%d,WH2=%d", stockOzonWarehouse, stockOzonWarehouse))
	w.setSKUs(2)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"stock", "snapshot", "--schedule", "nightly"}, `--schedule: no schedule "nightly"`},
		{[]string{"stock", "snapshot", "--schedule", "main", "--warehouse", "WH7"}, `--warehouse: schedule "main" does not take warehouse "WH7"`},
		{[]string{"stock", "snapshot", "--warehouse", "WH:1"}, `--warehouse: "WH:1"`},
		{[]string{"stock", "snapshot", "--format", "csv"}, "--format"},
		{[]string{"stock", "snapshot", "--wait", "soon"}, "--wait"},
		{[]string{"stock", "show", "--at", "yesterday"}, `--at: "yesterday" is not a time`},
		{[]string{"stock", "show", "--at", "2026-13-01T10:00"}, "--at"},
		{[]string{"stock", "show", "--format", "xml"}, `--format: must be one of [table json csv], got "xml"`},
		{[]string{"stock", "diff", "--format", "csv", "a", "b"}, "--format"},
		{[]string{"stock", "status", "--format", "yaml"}, "--format"},
		{[]string{"stock", "diff", "2026-09-16T10:00", "2026-09-16T11:00"}, "give --warehouse (one of WH1, WH2)"},
		{[]string{"stock", "diff", "2026-09-16T10:00", "2026-09-16T11:00", "--warehouse", "WH1", "--format", "json"}, "no snapshot of WH1"},
		{[]string{"stock", "diff", "a-day", "2026-09-16", "--warehouse", "WH1"}, `"a-day" is not a time`},
		{[]string{"stock", "diff", "stock:main:WH1:2026-09-16T10:00"}, "accepts 2 arg(s)"},
	} {
		out, stderr, code := w.cli("", tc.args...)
		msg := strings.TrimSpace(stderr)
		wantCode := 2
		if strings.HasPrefix(tc.want, "no snapshot") {
			wantCode = 1 // well formed, nothing found
		}
		if code != wantCode || !strings.Contains(msg, tc.want) || strings.Contains(msg, "\n") || out != "" {
			t.Errorf("%s: exit %d stdout %q stderr %q; want %d and one line with %q", strings.Join(tc.args, " "), code, out, msg, wantCode, tc.want)
		}
	}
	if n := w.onec.Stats().Requests["stock"]; n != 0 {
		t.Errorf("1C was asked for stock %d times by commands that were refused", n)
	}
	if ops, err := w.store().List(context.Background(), journal.Filter{Source: stock.Source}); err != nil || len(ops) != 0 {
		t.Errorf("refused commands registered %d operations (%v)", len(ops), err)
	}

	// Configurations that do not parse: config check and the stock commands say the key.
	for _, tc := range []struct {
		env  string
		want string
	}{
		{`ORDERSYNC_STOCK__SCHEDULES=[{"name":"main","cron":"61 * * * *","warehouses":["WH1"],"publish":["ozon"]}]`, "stock.schedules[0].cron"},
		{`ORDERSYNC_STOCK__SCHEDULES=[{"name":"main","cron":"@every 1500ms","warehouses":["WH1"]}]`, "stock.schedules[0].cron"},
		{`ORDERSYNC_STOCK__SCHEDULES=[{"name":"main","cron":"0 10 * * MON","warehouses":["WH1"]},{"name":"b","cron":"half past ten","warehouses":["WH1"]}]`, "stock.schedules[1].cron"},
		{"ORDERSYNC_STOCK__TIMEZONE=Asia/Atlantis", "stock.timezone"},
	} {
		e := &env{t: t, environ: slices.Clone(w.environ)}
		stockSetEnv(e, tc.env)
		for _, args := range [][]string{{"config", "check"}, {"stock", "status"}, {"stock", "snapshot", "--warehouse", "WH1"}} {
			_, stderr, code := e.cli("", args...)
			msg := strings.TrimSpace(stderr)
			if code != 2 || !strings.Contains(msg, tc.want) {
				t.Errorf("%s with %s: exit %d %q; want 2 naming %s", strings.Join(args, " "), tc.env, code, msg, tc.want)
			}
		}
	}
	if n := w.onec.Stats().Requests["stock"]; n != 0 {
		t.Errorf("1C was asked for stock %d times under a configuration that does not parse", n)
	}
}

// TestStockSnapshotsInOneSecondAreTwoSnapshots: the key of a manual snapshot is to
// the second. Two taken within one second are two snapshots, each of what 1C held
// when it was taken; the second is not answered with the first (nor recorded as a
// conflict of its key).
func TestStockSnapshotsInOneSecondAreTwoSnapshots(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newStockWorld(t, "sqlite", `[]`)
	db := openStockDB(t, w.env)
	var keys []string
	for i := 1; i <= 3; i++ {
		w.onec.SetStock("WH3", item("SKU-100", fmt.Sprint(i), "1"))
		out := cliOK(t, w.env, "stock", "snapshot", "--warehouse", "WH3", "--format", "json")
		var js []snapshotJSON
		if err := json.Unmarshal([]byte(out), &js); err != nil || len(js) != 1 || js[0].Status != "done" {
			t.Fatalf("snapshot %d: %v %s", i, err, out)
		}
		keys = append(keys, js[0].Key)
		items, err := db.Stock().Items(ctx, js[0].Key)
		if err != nil || len(items) != 1 || !items[0].Quantity.Equal(decimal.NewFromInt(int64(i))) {
			t.Fatalf("snapshot %d (%s) holds %+v %v, want SKU-100 = %d", i, js[0].Key, items, err, i)
		}
	}
	distinct := slices.Clone(keys)
	slices.Sort(distinct)
	if len(slices.Compact(distinct)) != 3 {
		t.Fatalf("keys %v, want three", keys)
	}
	if n := w.onec.Stats().Requests["stock"]; n != 3 {
		t.Errorf("1C was asked %d times for three snapshots", n)
	}
	for _, k := range keys {
		d, err := db.Journal().Show(ctx, k)
		if err != nil || len(d.Conflicts) != 0 {
			t.Errorf("%s: %d conflicts (%v)", k, len(d.Conflicts), err)
		}
	}
	// --at the printed time of the first finds the first.
	at := keys[0][strings.LastIndex(keys[0], "WH3:")+4:]
	if out := cliOK(t, w.env, "stock", "show", "--warehouse", "WH3", "--at", at); !strings.HasPrefix(out, keys[0]+": ") {
		t.Errorf("show --at %s:\n%s", at, out)
	}
}

// TestStockSnapshotWithoutWaitingLeavesThePublishInTheOutbox: --wait 0s with no
// service running takes and stores the snapshot but publishes nothing; the command
// says the event stays in the outbox (not that a relay goes on with it, as none
// runs). The next `stock snapshot` delivers it: superseded by the newer snapshot,
// which is published in full, each item sent once.
func TestStockSnapshotWithoutWaitingLeavesThePublishInTheOutbox(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newStockWorld(t, "sqlite", `[]`)
	w.setSKUs(3)
	db := openStockDB(t, w.env)
	out := cliOK(t, w.env, "stock", "snapshot", "--warehouse", "WH1", "--wait", "0s")
	key1, _, _ := strings.Cut(out, ": ")
	for _, mp := range []string{"ozon", "wildberries"} {
		wantLine(t, "--wait 0s", out, `  `+mp+`: not finished within --wait: its event stays in the outbox, for `+"`ordersync run`"+` .*`)
	}
	if w.ozon.StockRequests() != 0 || w.wb.StockStats().Updates != 0 {
		t.Fatalf("--wait 0s published: Ozon %d requests, Wildberries %+v", w.ozon.StockRequests(), w.wb.StockStats())
	}
	if s, err := db.Stock().Snapshot(ctx, key1); err != nil || s.ItemCount != 3 {
		t.Fatalf("snapshot %s: %+v %v", key1, s, err)
	}
	var js []snapshotJSON
	if err := json.Unmarshal([]byte(cliOK(t, w.env, "stock", "snapshot", "--warehouse", "WH1", "--format", "json")), &js); err != nil || len(js) != 1 {
		t.Fatal(err, js)
	}
	key2 := js[0].Key
	if len(js[0].Pending) != 0 || len(js[0].Published) != 2 {
		t.Fatalf("second snapshot: %+v", js[0])
	}
	for _, p := range js[0].Published {
		if !p.Full || p.Sent != 3 || p.Published != 3 {
			t.Errorf("second snapshot's publish %+v, want a full one of 3", p)
		}
	}
	for _, mp := range []string{stock.Ozon, stock.Wildberries} {
		ps, err := db.Stock().Publishes(ctx, stock.PublishFilter{Marketplace: mp, Warehouse: "WH1"})
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(ps, func(p stock.Publish) bool { return p.SnapshotKey == key1 })
		if i < 0 || ps[i].FinishedAt == nil || ps[i].Sent != 0 || !strings.Contains(ps[i].Note, key2) {
			t.Errorf("%s: the first snapshot's publish %+v, want finished, superseded by %s", mp, ps, key2)
		}
	}
	if n := len(w.ozon.StockUpdates()); n != 3 {
		t.Errorf("Ozon took %d updates, want 3 (each item once)", n)
	}
}
