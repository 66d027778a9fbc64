package sqlite

import (
	"context"
	"strings"
	"testing"
)

// A search is answered from the indexes of 0008_accountant_journal.sql: no step of
// its plan reads the whole journal (SCAN operations), and the deliveries of an
// operation are found by their index.
func TestSearchUsesIndexes(t *testing.T) {
	t.Parallel()
	db := journalTestDB(t, Config{})
	ctx := context.Background()
	cond, args := querySQL("+7 701 234-56-78")
	plans := map[string][]any{
		`SELECT key FROM operations WHERE 1` + cond + ` ORDER BY updated_at DESC, key LIMIT 100`: args,
		`SELECT e.source FROM inbox_event_operations x JOIN inbox_events e ON e.source = x.source AND e.event_id = x.event_id
			WHERE x.operation_key = ? ORDER BY e.received_at DESC, e.source, e.event_id`: {"k"},
	}
	for q, args := range plans {
		rows, err := db.sql.QueryContext(ctx, `EXPLAIN QUERY PLAN `+q, args...)
		if err != nil {
			t.Fatal(err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, notused int
			var detail string
			if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
		t.Logf("plan:\n%s", strings.Join(plan, "\n"))
		for _, step := range plan {
			if strings.HasPrefix(step, "SCAN operations") || strings.HasPrefix(step, "SCAN x") || strings.HasPrefix(step, "SCAN e") {
				t.Errorf("the plan reads a whole table (%s):\n%s", step, strings.Join(plan, "\n"))
			}
		}
	}
}
