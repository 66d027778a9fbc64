package postgres

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ordersync/ordersync/internal/journal"
)

// BenchmarkClaimDue measures ClaimDue (BEGIN, the claim statement and the attempt
// row: two round trips) on a journal of 10,000, 30,000 and 1,000,000 operations,
// analysed as a production server's autovacuum leaves them: 90% done, each with an
// attempt, every 50th a cancel; a backlog of 10% pending and due (after an outage of
// 1C). Each claim is finished off the clock as a retry due now, so the backlog
// stays. It reports ms/claim; the plan of the claim statement, executed, is in the
// log.
//
//	go test -run '^$' -bench ClaimDue -benchtime 2000x ./internal/store/postgres/
func BenchmarkClaimDue(b *testing.B) {
	for _, n := range []int{10_000, 30_000, 1_000_000} {
		b.Run(fmt.Sprintf("rows=%d", n), func(b *testing.B) {
			ctx := context.Background()
			db := openBenchDB(b, Config{})
			start := time.Now()
			fillJournal(b, db, n)
			b.Logf("set-up: %d operations, %d due, analysed, in %v", n, n/10, time.Since(start).Round(time.Millisecond))
			b.Logf("plan of the claim statement (EXPLAIN (ANALYZE, BUFFERS), rolled back):\n%s", explainJournalClaim(b, db))
			j := db.journalStore()
			var elapsed time.Duration
			b.ResetTimer()
			for range b.N {
				t0 := time.Now()
				c, err := j.ClaimDue(ctx, "bench")
				if err != nil {
					b.Fatal(err)
				}
				elapsed += time.Since(t0)
				b.StopTimer()
				if err := c.Finish(ctx, journal.Finish{Status: journal.StatusPending, Error: "bench", NextAttemptAt: time.Now()}); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.StopTimer()
			b.ReportMetric(float64(elapsed.Microseconds())/1000/float64(b.N), "ms/claim")
		})
	}
}

// fillJournal fills operations with n rows (90% done, 10% pending and due, every
// 50th a cancel of the order before it) and one finished attempt each, and
// analyses them.
func fillJournal(tb testing.TB, db *DB, n int) {
	tb.Helper()
	ctx := context.Background()
	for _, q := range []string{`
		INSERT INTO operations (key, kind, source, external_id, status, payload, payload_sha256, result, attempts,
			next_attempt_at, created_at, updated_at, first_attempt_at)
		SELECT CASE WHEN g % 50 = 0 THEN 'site:order:' || (g - 1) || ':cancel' ELSE 'site:order:' || g || ':create' END,
			CASE WHEN g % 50 = 0 THEN 'order.cancel' ELSE 'order.create' END, 'site', g::text,
			CASE WHEN g % 10 = 1 THEN 'pending' ELSE 'done' END,
			jsonb_build_object('source', 'site', 'number', g::text, 'total', 1500.10), md5(g::text),
			CASE WHEN g % 10 <> 1 THEN jsonb_build_object('ref', md5(g::text), 'number', 'ЗК-' || g) END,
			1, t, t, t + interval '1 second', t
		FROM generate_series(1, $1::int) AS g,
			LATERAL (SELECT now() - interval '365 days' + g * (interval '364 days' / $1::int)) AS x (t)`, `
		INSERT INTO operation_attempts (operation_key, attempt, worker, started_at, finished_at, outcome)
		SELECT key, 1, 'w', created_at, created_at + interval '1 second', CASE status WHEN 'done' THEN 'done' ELSE 'retry' END
		FROM operations`,
		`VACUUM ANALYZE operations, operation_attempts`,
	} {
		var args []any
		if strings.Contains(q, "$1") {
			args = []any{n}
		}
		if _, err := db.Pool().Exec(ctx, q, args...); err != nil {
			tb.Fatalf("fill journal: %v", err)
		}
	}
}

// explainJournalClaim runs the claim statement under EXPLAIN (ANALYZE, BUFFERS) in a
// transaction that it rolls back.
func explainJournalClaim(b *testing.B, db *DB) string {
	ctx := context.Background()
	tx, err := db.Pool().Begin(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer tx.Rollback(ctx)
	rows, err := tx.Query(ctx, `EXPLAIN (ANALYZE, BUFFERS) `+claimDueSQL, db.nowUTC())
	if err != nil {
		b.Fatal(err)
	}
	defer rows.Close()
	var plan string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			b.Fatal(err)
		}
		plan += line + "\n"
	}
	if err := rows.Err(); err != nil {
		b.Fatal(err)
	}
	return plan
}
