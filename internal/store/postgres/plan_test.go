package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ordersync/ordersync/internal/inbox"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/order"
	"github.com/ordersync/ordersync/internal/outbox"
	"github.com/ordersync/ordersync/internal/stock"
	"github.com/ordersync/ordersync/internal/testdb"
)

// The plan test. Every claim-shaped statement — one that picks a few rows out of a
// table that grows (the journal's claims, lock, verification lease and wakes, the
// outbox claim, the inbox's wakes, the stock lookups) — must read a few rows whatever
// the size of the table, once the table has statistics as a production server's
// has. Small tables without statistics hide the plans that scan: the planner then
// guesses, and a seeded table looks nothing like a journal of a year.
//
// The tables are filled with generate_series to n rows, VACUUM ANALYZE'd, and then
// the store's own methods run (not copies of their SQL: the test follows every
// change of a statement, its parameters and its session settings) on connections
// where auto_explain logs the plan of every statement, executed (ANALYZE, BUFFERS),
// to the client. Each method runs twice: on custom plans and on generic ones (pgx
// prepares its statements, and after five runs the server may keep a generic plan,
// which knows no parameter values). A plan fails when
//
//   - it has a Seq Scan on one of the growing tables (planBigTables), or
//   - its scans of those tables read more rows (returned or filtered out, times
//     loops) than the case allows, which catches a hash or a bitmap scan over the
//     whole table too.
//
// The failure shows the plan. n is 1,000 and 30,000 in `go test`; 1,000,000 too with
// ORDERSYNC_PLAN_1M=1 (a few minutes of filling):
//
//	ORDERSYNC_PLAN_1M=1 go test -run TestClaimPlans -v -timeout 30m ./internal/store/postgres/
//
// auto_explain ships with PostgreSQL (contrib); loading it takes a superuser, as the
// test server's postgres is.
func TestClaimPlans(t *testing.T) {
	t.Parallel()
	sizes := []int{1_000, 30_000}
	if os.Getenv("ORDERSYNC_PLAN_1M") != "" {
		sizes = append(sizes, 1_000_000)
	}
	for _, n := range sizes {
		t.Run(fmt.Sprintf("rows=%d", n), func(t *testing.T) { testClaimPlans(t, n) })
	}
}

// planBigTables are the tables that grow with the shop's history (operation_wakes
// does not: it holds the wakes of operations claimed right now). A table that holds
// fewer than planMinRows rows is a few pages, which the planner rightly reads whole:
// the rules apply to the big tables from planMinRows rows.
var planBigTables = map[string]bool{
	"operations": true, "operation_attempts": true, "operation_events": true,
	"outbox": true, "stock_snapshots": true, "stock_snapshot_items": true, "stock_publishes": true,
	"stock_item_states": true,
}

// planCase is one store call and how many rows of the big tables its statements may
// read in all.
type planCase struct {
	name    string
	maxRows int
	run     func(ctx context.Context, db *DB) error
}

// planPrepare is SQL run before a case, off the capture: it puts back what the
// case's other run used up.
var planPrepare = map[string]string{"journal WakeWaiting": planWaitingSQL, "journal ApplyWakes": planWakesSQL,
	"outbox Claim with a write-back": planUnsentSQL, "outbox Complete": planUnsentSQL}

// Sizes of the fill, as functions of n (see planFill).
func planWaiting(n int) int { return n / 100 } // pending on a transient failure: WakeWaiting wakes them all
const (
	planMinRows = 1000 // see planBigTables
	planWakes   = 20   // operation_wakes rows
	planUnsent  = 2000 // unsent outbox events at most (n/5 below 10,000 rows)
)

func testClaimPlans(t *testing.T, n int) {
	ctx := context.Background()
	url := testdb.URL(t)
	setup := open(t, Config{URL: url})
	if _, err := setup.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	planFill(t, setup, n)
	t.Logf("filled and analysed %d rows a table in %v", n, time.Since(start).Round(time.Millisecond))

	sizes := planTableSizes(t, setup)

	// Keys the calls use: a pending create whose order has a cancel (49 % 10 == 9:
	// pending, due later; 50 is its cancel), one for each run, since a released claim
	// leaves its attempt open; and the newest snapshot of a warehouse.
	pendingKeys := map[string]string{"custom": "site:order:49:create", "generic": "site:order:149:create"}
	var pendingKey string
	var latestSnapshot string
	if err := setup.Pool().QueryRow(ctx, `SELECT key FROM stock_snapshots WHERE warehouse = 'WH3'
		ORDER BY slot DESC LIMIT 1`).Scan(&latestSnapshot); err != nil {
		t.Fatal(err)
	}
	lockSlack := 50 // a claim's extras and its attempt row read a few rows each
	waiting := planWaiting(n)
	cases := []planCase{
		{"journal ClaimDue", lockSlack, func(ctx context.Context, db *DB) error {
			c, err := db.journalStore().ClaimDue(ctx, "plan")
			if err != nil {
				return err
			}
			return c.Release(ctx)
		}},
		{"journal ClaimKey", lockSlack, func(ctx context.Context, db *DB) error {
			c, err := db.journalStore().ClaimKey(ctx, pendingKey, "plan")
			if err != nil {
				return err
			}
			if !c.Operation().CancelRequested {
				return fmt.Errorf("%s: CancelRequested false, want true (its cancel is registered)", pendingKey)
			}
			return c.Release(ctx)
		}},
		{"journal Lock", lockSlack, func(ctx context.Context, db *DB) error {
			l, err := db.journalStore().Lock(ctx, pendingKey)
			if err != nil {
				return err
			}
			return l.Release(ctx)
		}},
		{"journal ClaimVerification", lockSlack, func(ctx context.Context, db *DB) error {
			_, err := db.journalStore().ClaimVerification(ctx, time.Minute)
			return err
		}},
		// Every waiting operation is read and woken.
		{"journal WakeWaiting", waiting + lockSlack, func(ctx context.Context, db *DB) error {
			_, err := db.journalStore().WakeWaiting(ctx)
			return err
		}},
		{"journal ApplyWakes", 4*planWakes + lockSlack, func(ctx context.Context, db *DB) error {
			_, err := db.journalStore().ApplyWakes(ctx)
			return err
		}},
		// 100 lane heads, each probed for an earlier unsent and a later leased event;
		// the bound admits a plan that reads the unsent backlog (planUnsent) once or
		// twice, not one that reads the sent history.
		{"outbox Claim", 1000, func(ctx context.Context, db *DB) error {
			c, err := db.Outbox().Claim(ctx, outbox.ClaimRequest{Limit: 100, Lease: time.Minute})
			if err != nil {
				return err
			}
			if len(c.Records) == 0 {
				return errors.New("outbox claim: nothing claimed, want 100 events")
			}
			return nil
		}},
		// The relay's round trip: the last round's results written back by id, then
		// the next claim; and a write-back on its own (a relay about to wait or stop).
		// Each result is found by its id: 100 rows read and 100 written, and the
		// arrays of results read once, not once a row.
		{"outbox Claim with a write-back", 1000 + 200, func(ctx context.Context, db *DB) error {
			done, err := planClaimed(ctx, setup)
			if err != nil {
				return err
			}
			c, err := db.Outbox().Claim(ctx, outbox.ClaimRequest{Limit: 100, Lease: time.Minute, Complete: done})
			if err != nil {
				return err
			}
			if c.Completed.Rows != len(done.Results) {
				return fmt.Errorf("outbox claim: wrote back %d results, want %d", c.Completed.Rows, len(done.Results))
			}
			return nil
		}},
		{"outbox Complete", 200, func(ctx context.Context, db *DB) error {
			done, err := planClaimed(ctx, setup)
			if err != nil {
				return err
			}
			n, err := db.Outbox().Complete(ctx, done.Token, done.Results)
			if err == nil && n != len(done.Results) {
				err = fmt.Errorf("outbox complete: wrote back %d results, want %d", n, len(done.Results))
			}
			return err
		}},
		{"inbox Receive with a wake", lockSlack, func(ctx context.Context, db *DB) error {
			body := []byte(`{"id":"deal-49"}`)
			id := fmt.Sprintf("plan-%d", time.Now().UnixNano())
			_, err := db.inboxStore().Receive(ctx, inbox.Event{Source: "bitrix24", ID: id, Body: body, ContentType: "application/json"},
				[]inbox.Registration{{Op: journal.NewOperation{Key: pendingKey, Kind: order.KindCreate, Source: "site",
					ExternalID: "49", Payload: []byte(`{"source":"site","number":"49"}`)}, IfAbsent: true, Wake: true}},
				inbox.Answer{Status: 200, ContentType: "application/json", Body: json.RawMessage(`{}`)})
			return err
		}},
		{"stock Latest", lockSlack, func(ctx context.Context, db *DB) error {
			_, err := db.Stock().Latest(ctx, "WH3", time.Now().Add(-time.Hour))
			return err
		}},
		{"stock LastFull", lockSlack, func(ctx context.Context, db *DB) error {
			_, err := db.Stock().LastFull(ctx, stock.Ozon, "WH3")
			return err
		}},
		{"stock LastSent", lockSlack, func(ctx context.Context, db *DB) error {
			_, err := db.Stock().LastSent(ctx, stock.Ozon)
			return err
		}},
		{"stock StartPublish", lockSlack, func(ctx context.Context, db *DB) error {
			_, err := db.Stock().StartPublish(ctx, stock.Publish{SnapshotKey: latestSnapshot, Marketplace: "plan-" + fmt.Sprint(time.Now().UnixNano())})
			return err
		}},
		{"stock Items", lockSlack, func(ctx context.Context, db *DB) error {
			_, err := db.Stock().Items(ctx, latestSnapshot)
			return err
		}},
		{"stock Problems", 200 + lockSlack, func(ctx context.Context, db *DB) error {
			_, err := db.Stock().Problems(ctx, stock.Ozon, 100)
			return err
		}},
	}

	for _, mode := range []string{"custom", "generic"} {
		pendingKey = pendingKeys[mode]
		t.Run("plans="+mode, func(t *testing.T) {
			pc := &planCapture{}
			db := open(t, Config{URL: url, ConfigurePool: pc.configure(mode)})
			for _, c := range cases {
				if q := planPrepare[c.name]; q != "" {
					if _, err := setup.Pool().Exec(ctx, q); err != nil {
						t.Fatalf("%s: prepare: %v", c.name, err)
					}
				}
				pc.start()
				err := c.run(ctx, db)
				plans := pc.stop()
				if err != nil {
					t.Errorf("%s: %v", c.name, err)
					continue
				}
				if len(plans) == 0 {
					t.Errorf("%s: no plan captured (is auto_explain loaded?)", c.name)
					continue
				}
				checkPlans(t, c, n, mode, sizes, plans)
			}
		})
	}
}

// checkPlans applies the rules of TestClaimPlans to the plans of one call.
func checkPlans(t *testing.T, c planCase, n int, mode string, sizes map[string]float64, plans []capturedPlan) {
	t.Helper()
	read := 0
	for _, p := range plans {
		if planTablesTouched(p.Plan) == 0 {
			continue // set_config and the like
		}
		r, seq := planRowsRead(p.Plan, sizes)
		read += r
		for _, s := range seq {
			t.Errorf("%s (%d rows, %s plans): Seq Scan on %s:\n%s", c.name, n, mode, s, p.text())
		}
		if f := planRescannedFunctions(p.Plan); f > 0 {
			t.Errorf("%s (%d rows, %s plans): a function scan (the statement's arrays, unnested) is read again for every row of another scan, %d times: the statement is quadratic in its batch:\n%s",
				c.name, n, mode, f, p.text())
		}
	}
	if read > c.maxRows {
		var b strings.Builder
		for _, p := range plans {
			if planTablesTouched(p.Plan) > 0 {
				r, _ := planRowsRead(p.Plan, sizes)
				fmt.Fprintf(&b, "-- reads %d rows:\n%s\n", r, p.text())
			}
		}
		t.Errorf("%s (%d rows, %s plans): its statements read %d rows of the growing tables, want at most %d:\n%s",
			c.name, n, mode, read, c.maxRows, b.String())
	}
	if testing.Verbose() {
		t.Logf("%s (%d rows, %s plans): %d statements, %d rows read", c.name, n, mode, len(plans), read)
	}
}

// planNode is a node of auto_explain's JSON plan (EXPLAIN (FORMAT JSON)).
type planNode struct {
	NodeType           string     `json:"Node Type"`
	RelationName       string     `json:"Relation Name"`
	IndexName          string     `json:"Index Name"`
	ActualRows         float64    `json:"Actual Rows"`
	ActualLoops        float64    `json:"Actual Loops"`
	RemovedByFilter    float64    `json:"Rows Removed by Filter"`
	RemovedByRecheck   float64    `json:"Rows Removed by Index Recheck"`
	SharedHitBlocks    float64    `json:"Shared Hit Blocks"`
	SharedReadBlocks   float64    `json:"Shared Read Blocks"`
	ParentRelationship string     `json:"Parent Relationship"`
	Plans              []planNode `json:"Plans"`
}

// planRowsRead is how many rows p's scans of the big tables read (returned and
// filtered out, times loops), and the big tables it scans sequentially; sizes are
// the tables' rows, those under planMinRows are left out.
func planRowsRead(p planNode, sizes map[string]float64) (rows int, seqScans []string) {
	if planBigTables[p.RelationName] && sizes[p.RelationName] >= planMinRows {
		rows += int((p.ActualRows + p.RemovedByFilter + p.RemovedByRecheck) * max(p.ActualLoops, 1))
		if p.NodeType == "Seq Scan" {
			seqScans = append(seqScans, p.RelationName)
		}
	}
	for _, c := range p.Plans {
		r, s := planRowsRead(c, sizes)
		rows += r
		seqScans = append(seqScans, s...)
	}
	return rows, seqScans
}

// planRescannedFunctions is the most loops of any function scan in p with more than
// one: unnest over a statement's own arrays must be read once (a nested loop that
// reads it again for each outer row does n×m work for a batch of n).
func planRescannedFunctions(p planNode) int {
	loops := 0
	if p.NodeType == "Function Scan" && p.ActualLoops > 1 {
		loops = int(p.ActualLoops)
	}
	for _, c := range p.Plans {
		loops = max(loops, planRescannedFunctions(c))
	}
	return loops
}

// planTableSizes is the number of rows of every table, as ANALYZE estimated it.
func planTableSizes(t *testing.T, db *DB) map[string]float64 {
	t.Helper()
	rows, err := db.Pool().Query(context.Background(), `SELECT relname::text, reltuples::float8 FROM pg_class
		WHERE relnamespace = current_schema()::regnamespace AND relkind = 'r'`)
	if err != nil {
		t.Fatal(err)
	}
	sizes := map[string]float64{}
	for rows.Next() {
		var (
			name string
			n    float64
		)
		if err := rows.Scan(&name, &n); err != nil {
			t.Fatal(err)
		}
		sizes[name] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return sizes
}

// planTablesTouched counts the nodes of p that name a table.
func planTablesTouched(p planNode) int {
	n := 0
	if p.RelationName != "" {
		n++
	}
	for _, c := range p.Plans {
		n += planTablesTouched(c)
	}
	return n
}

// capturedPlan is one statement's plan as auto_explain logged it.
type capturedPlan struct {
	Query string   `json:"Query Text"`
	Plan  planNode `json:"Plan"`
	raw   string
}

// text is the plan in a readable form: the statement, then one line per node with
// its rows and buffers.
func (p capturedPlan) text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "  statement: %s\n", strings.Join(strings.Fields(p.Query), " "))
	var walk func(n planNode, depth int)
	walk = func(n planNode, depth int) {
		fmt.Fprintf(&b, "  %s-> %s", strings.Repeat("   ", depth), n.NodeType)
		if n.RelationName != "" {
			fmt.Fprintf(&b, " on %s", n.RelationName)
		}
		if n.IndexName != "" {
			fmt.Fprintf(&b, " using %s", n.IndexName)
		}
		if n.ParentRelationship == "SubPlan" || n.ParentRelationship == "InitPlan" {
			fmt.Fprintf(&b, " (%s)", n.ParentRelationship)
		}
		fmt.Fprintf(&b, "  actual rows=%.0f loops=%.0f", n.ActualRows, n.ActualLoops)
		if n.RemovedByFilter > 0 {
			fmt.Fprintf(&b, " removed by filter=%.0f", n.RemovedByFilter)
		}
		fmt.Fprintf(&b, " buffers hit=%.0f read=%.0f\n", n.SharedHitBlocks, n.SharedReadBlocks)
		for _, c := range n.Plans {
			walk(c, depth+1)
		}
	}
	walk(p.Plan, 0)
	return b.String()
}

// planCapture collects the plans auto_explain sends its connections' clients while
// capturing.
type planCapture struct {
	mu    sync.Mutex
	on    bool
	plans []capturedPlan
	err   error
}

// configure loads auto_explain on every connection of the pool, logging every
// statement's executed plan (JSON, with buffers, without timing) to the client, on
// custom or generic plans (mode).
func (pc *planCapture) configure(mode string) func(*pgxpool.Config) {
	return func(c *pgxpool.Config) {
		after := c.AfterConnect
		c.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
			if after != nil {
				if err := after(ctx, conn); err != nil {
					return err
				}
			}
			_, err := conn.Exec(ctx, `LOAD 'auto_explain';
				SET auto_explain.log_min_duration = 0; SET auto_explain.log_analyze = on;
				SET auto_explain.log_buffers = on; SET auto_explain.log_timing = off;
				SET auto_explain.log_format = json; SET auto_explain.log_nested_statements = on;
				SET client_min_messages = log; SET plan_cache_mode = force_`+mode+`_plan`)
			if err != nil {
				return fmt.Errorf("plan test: load auto_explain (needs a superuser and PostgreSQL's contrib): %w", err)
			}
			return nil
		}
		c.ConnConfig.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) { pc.notice(n) }
	}
}

func (pc *planCapture) notice(n *pgconn.Notice) {
	_, js, ok := strings.Cut(n.Message, "plan:\n")
	if n.Severity != "LOG" || !ok {
		return
	}
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if !pc.on {
		return
	}
	var p capturedPlan
	if err := json.Unmarshal([]byte(js), &p); err != nil {
		pc.err = fmt.Errorf("plan test: auto_explain's plan: %w\n%s", err, js)
		return
	}
	p.raw = js
	pc.plans = append(pc.plans, p)
}

func (pc *planCapture) start() {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	pc.on, pc.plans, pc.err = true, nil, nil
}

// stop ends the capture and returns what it caught. Notices travel with a
// statement's results, so every statement a call waited for has been seen.
func (pc *planCapture) stop() []capturedPlan {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	pc.on = false
	if pc.err != nil {
		panic(pc.err)
	}
	return pc.plans
}

// planUnsentSQL adds 100 due events, each in a lane of its own, for a case that
// claims them (off the capture) to write their results back.
const planUnsentSQL = `
	INSERT INTO outbox (event_id, destination, aggregate_type, aggregate_id, sequence, event_type, data,
		occurred_at, created_at, next_attempt_at)
	SELECT gen_random_uuid(), 'crm', 'order', 'site:order:plan-' || gen_random_uuid(), 1, 'order.created',
		'{"ref":"r","number":"1"}', now() - interval '1 minute', now() - interval '1 minute', now() - interval '1 minute'
	FROM generate_series(1, 100)`

// planClaimed claims 100 events through db (a pool without the capture) and returns
// the results a relay would write back for them: one failed (due again later), one
// dead, one released, the rest sent.
func planClaimed(ctx context.Context, db *DB) (outbox.Completion, error) {
	c, err := db.Outbox().Claim(ctx, outbox.ClaimRequest{Limit: 100, Lease: time.Minute})
	if err != nil {
		return outbox.Completion{}, err
	}
	if len(c.Records) < 4 {
		return outbox.Completion{}, fmt.Errorf("outbox claim: %d events claimed, want 100", len(c.Records))
	}
	done := outbox.Completion{Token: c.Token}
	for i, r := range c.Records {
		res := outbox.Result{ID: r.ID, Sent: true}
		switch i {
		case 0:
			res = outbox.Result{ID: r.ID, Error: "HTTP 503", NextAttemptAt: time.Now().Add(time.Minute)}
		case 1:
			res = outbox.Result{ID: r.ID, Error: "HTTP 400", Dead: true}
		case 2:
			res = outbox.Result{ID: r.ID, Released: true}
		}
		done.Results = append(done.Results, res)
	}
	return done, nil
}

// planWakesSQL records planWakes wakes of pending operations spread over the keys;
// planWaitingSQL makes the operations that wait on a transient failure due later
// again (WakeWaiting made them due).
const (
	planWakesSQL = `INSERT INTO operation_wakes (operation_key, at)
		SELECT key, now() FROM operations WHERE status = 'pending' ORDER BY md5(key) LIMIT 20 -- planWakes
		ON CONFLICT (operation_key) DO NOTHING`
	planWaitingSQL = `UPDATE operations SET next_attempt_at = now() + interval '1 hour'
		WHERE status = 'pending' AND retry_class = 'transient'`
)

// planFill fills the growing tables to about n rows each, as a shop's year leaves
// them, and analyses them:
//
//   - operations: n order operations, every 50th a cancel of the order before it;
//     80% done, 10% pending and due (a backlog after an outage), 10% pending and due
//     later, of which planWaiting(n) wait on a transient failure; 1 in 20 done ones
//     has a verification scheduled, 1 in 200 a due one; plus the stock snapshots'
//     operations (n/10);
//   - operation_attempts: one finished attempt per operation; operation_wakes:
//     planWakes rows;
//   - outbox: n sent events, one lane each, then an unsent second event of the
//     newest min(n/5, planUnsent) lanes, every 10th leased;
//   - stock: n/10 snapshots over 10 warehouses, a minute apart, two publishes each
//     (every 7th full), n items over the newest snapshots, n item states.
func planFill(t *testing.T, db *DB, n int) {
	t.Helper()
	ctx := context.Background()
	snapshots := max(n/10, 100)
	unsent := min(n/5, planUnsent)
	for _, q := range []struct {
		what string
		sql  string
		args []any
	}{
		{"operations", `
			INSERT INTO operations (key, kind, source, external_id, status, payload, payload_sha256, result, attempts,
				next_attempt_at, created_at, updated_at, retry_class, verify_at, first_attempt_at)
			SELECT CASE WHEN g % 50 = 0 THEN 'site:order:' || (g - 1) || ':cancel' ELSE 'site:order:' || g || ':create' END,
				CASE WHEN g % 50 = 0 THEN 'order.cancel' ELSE 'order.create' END,
				'site', g::text,
				CASE WHEN g % 10 IN (1, 9) THEN 'pending' ELSE 'done' END,
				jsonb_build_object('source', 'site', 'number', g::text, 'total', 1500.10), md5(g::text),
				CASE WHEN g % 10 NOT IN (1, 9) THEN jsonb_build_object('ref', md5(g::text), 'number', 'ЗК-' || g) END,
				1,
				CASE WHEN g % 10 = 9 THEN now() + interval '1 hour' + g * interval '1 ms' ELSE t END,
				t, t + interval '1 second',
				CASE WHEN g % 10 = 9 AND g % 100 = 9 THEN 'transient' ELSE '' END,
				CASE WHEN g % 200 = 2 THEN now() - interval '1 minute' WHEN g % 20 = 2 THEN now() + interval '1 hour' END,
				t
			FROM generate_series(1, $1::int) AS g,
				LATERAL (SELECT now() - interval '365 days' + g * (interval '364 days' / $1::int)) AS x (t)`, []any{n}},
		{"stock operations", `
			INSERT INTO operations (key, kind, source, external_id, status, payload, payload_sha256, attempts,
				next_attempt_at, created_at, updated_at)
			SELECT 'stock:main:WH' || (s % 10) || ':' || s, 'stock.snapshot', 'stock', s::text, 'done', '{}', md5(s::text), 1,
				now(), now(), now()
			FROM generate_series(1, $1::int) AS s`, []any{snapshots}},
		{"operation_attempts", `
			INSERT INTO operation_attempts (operation_key, attempt, worker, started_at, finished_at, outcome, class)
			SELECT key, 1, 'w', created_at, created_at + interval '1 second',
				CASE status WHEN 'done' THEN 'done' ELSE 'retry' END,
				CASE WHEN retry_class <> '' THEN retry_class WHEN verify_at IS NOT NULL THEN 'unknown' ELSE '' END
			FROM operations`, nil},
		{"operation_wakes", planWakesSQL, nil},
		{"outbox sent", `
			INSERT INTO outbox (event_id, destination, aggregate_type, aggregate_id, sequence, event_type, data,
				occurred_at, created_at, next_attempt_at, attempts, sent_at)
			SELECT gen_random_uuid(), 'crm', 'order', 'site:order:' || g, 1, 'order.created', '{"ref":"r","number":"1"}',
				t, t, t, 1, t + interval '1 second'
			FROM generate_series(1, $1::int) AS g, LATERAL (SELECT now() - interval '1 day' + g * (interval '1 day' / $1::int)) AS x (t)`, []any{n}},
		{"outbox unsent", `
			INSERT INTO outbox (event_id, destination, aggregate_type, aggregate_id, sequence, event_type, data,
				occurred_at, created_at, next_attempt_at, lease_until, claim_token)
			SELECT gen_random_uuid(), 'crm', 'order', 'site:order:' || g, 2, 'order.cancelled', '{"ref":"r","number":"1"}',
				now() - interval '1 minute', now() - interval '1 minute', now() - interval '1 minute',
				CASE WHEN g % 10 = 0 THEN now() + interval '1 hour' END, CASE WHEN g % 10 = 0 THEN gen_random_uuid() END
			FROM generate_series($1::int - $2::int + 1, $1::int) AS g`, []any{n, unsent}},
		{"outbox_lanes", `
			INSERT INTO outbox_lanes (destination, aggregate_id, last_sequence)
			SELECT destination, aggregate_id, max(sequence) FROM outbox GROUP BY 1, 2`, nil},
		{"stock_snapshots", `
			INSERT INTO stock_snapshots (key, schedule, warehouse, slot, label, item_count, created_at)
			SELECT 'stock:main:WH' || (s % 10) || ':' || s, 'main', 'WH' || (s % 10),
				date_trunc('minute', now()) - ($1::int - s) * interval '1 minute', s::text, 10, now()
			FROM generate_series(1, $1::int) AS s`, []any{snapshots}},
		{"stock_publishes", `
			INSERT INTO stock_publishes (snapshot_key, marketplace, warehouse, full_refresh, started_at, finished_at)
			SELECT key, mp, warehouse, s % 7 = 0, slot, CASE WHEN s < $1::int - 5 THEN slot + interval '10 seconds' END
			FROM (SELECT key, warehouse, slot, label::int AS s FROM stock_snapshots) AS x, unnest(ARRAY['ozon', 'wildberries']) AS mp`,
			[]any{snapshots}},
		{"stock_snapshot_items", `
			INSERT INTO stock_snapshot_items (snapshot_key, sku, quantity, price)
			SELECT 'stock:main:WH' || (s % 10) || ':' || s, 'SKU-' || lpad(i::text, 6, '0'), i % 50, 1000.90
			FROM generate_series(greatest($1::int - $2::int / 10 + 1, 1), $1::int) AS s, generate_series(1, 10) AS i`,
			[]any{snapshots, n}},
		{"stock_item_states", `
			INSERT INTO stock_item_states (marketplace, warehouse, sku, value, outcome, snapshot_key, sent_at, updated_at)
			SELECT CASE WHEN g % 2 = 0 THEN 'ozon' ELSE 'wildberries' END, 'WH' || (g % 10), 'SKU-' || lpad(g::text, 7, '0'),
				g % 50, CASE WHEN g % 100 = 0 THEN 'refused' ELSE 'published' END, '',
				now() - g * interval '1 second', now() - g * interval '1 second'
			FROM generate_series(1, $1::int) AS g`, []any{n}},
		{"analyse", `VACUUM ANALYZE operations, operation_attempts, operation_wakes, outbox, outbox_lanes,
			stock_snapshots, stock_publishes, stock_snapshot_items, stock_item_states`, nil},
	} {
		if _, err := db.Pool().Exec(ctx, q.sql, q.args...); err != nil {
			t.Fatalf("plan test: fill %s: %v", q.what, err)
		}
	}
}
