package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/ordersync/ordersync/internal/journal"
)

// A search reads the operations its term names through their indexes, never the
// whole journal, on a table with production statistics: inline in the listing's
// WHERE, the planner walked the updated_at index and filtered every row when the
// term named nothing (465 ms and 9,765 buffers on 200k operations).
func TestSearchReadsOnlyWhatItFinds(t *testing.T) {
	t.Parallel()
	db := newDB(t, Config{})
	ctx := context.Background()
	const n = 30000
	if _, err := db.pool.Exec(ctx, `
		INSERT INTO operations (key, kind, source, external_id, status, payload, payload_sha256, result,
			next_attempt_at, created_at, updated_at)
		SELECT 'kaspi:order:' || (500000000 + g) || ':create', 'order.create', 'kaspi', (500000000 + g)::text, 'done',
			jsonb_build_object('number', (500000000 + g)::text,
				'customer', jsonb_build_object('name', 'N', 'phone', '+7 701 ' || lpad((g % 10000000)::text, 7, '0'))),
			md5(g::text), jsonb_build_object('number', 'ОС-' || lpad(g::text, 6, '0'), 'ref', md5(g::text)),
			now(), now() - g * interval '1 second', now() - g * interval '1 second'
		FROM generate_series(1, $1) g`, n); err != nil {
		t.Fatal(err)
	}
	if _, err := db.pool.Exec(ctx, `ANALYZE operations`); err != nil {
		t.Fatal(err)
	}
	for _, f := range []journal.Filter{
		{Query: "512344101"},               // names nothing
		{Query: "500012345"},               // a marketplace number
		{Query: "kaspi:500012345"},         // 1C's external id
		{Query: "ос-012345"},               // a 1C number, another case
		{Query: "+7 701 001 23 45"},        // a phone
		{Query: "nothing", Status: "done"}, // with another filter
		{Query: "500012345", Limit: 1, After: &journal.Operation{Key: "k", UpdatedAt: time.Now()}},
	} {
		q, args, err := listSQL(f)
		if err != nil {
			t.Fatal(err)
		}
		var plan []struct {
			Plan json.RawMessage `json:"Plan"`
		}
		var raw []byte
		if err := db.pool.QueryRow(ctx, `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) `+q, args...).Scan(&raw); err != nil {
			t.Fatalf("%+v: %v", f, err)
		}
		if err := json.Unmarshal(raw, &plan); err != nil || len(plan) != 1 {
			t.Fatalf("plan %s: %v", raw, err)
		}
		var node struct {
			Hit  int `json:"Shared Hit Blocks"`
			Read int `json:"Shared Read Blocks"`
		}
		_ = json.Unmarshal(plan[0].Plan, &node)
		// The term's index pages and a few heap pages: a scan of 30k operations
		// reads over a thousand.
		if blocks := node.Hit + node.Read; blocks > 200 {
			t.Errorf("searching %+v read %d buffers of a %d-operation journal; plan:\n%s", f, blocks, n, raw)
		}
		if seq := searchSeqScan(plan[0].Plan); seq != "" {
			t.Errorf("searching %+v scans %s; plan:\n%s", f, seq, raw)
		}
	}
}

// searchSeqScan names the relation of a Seq Scan in a plan node's tree, "" when none.
func searchSeqScan(node json.RawMessage) string {
	var n struct {
		Type     string            `json:"Node Type"`
		Relation string            `json:"Relation Name"`
		Plans    []json.RawMessage `json:"Plans"`
	}
	if json.Unmarshal(node, &n) != nil {
		return ""
	}
	if n.Type == "Seq Scan" {
		return fmt.Sprint(n.Relation)
	}
	for _, p := range n.Plans {
		if s := searchSeqScan(p); s != "" {
			return s
		}
	}
	return ""
}
