package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/ordersync/ordersync/internal/journal"
)

// BenchmarkJournalOps is one operation through the SQLite journal, one at a time:
// register, claim (the attempt row committed), finish done. It is the store's share of
// the engine's journal path (internal/engine BenchmarkJournalPath, which also calls a
// simulated 1C and counts PostgreSQL round trips; an embedded file has none to count).
// It reports ops/s: each op is three write transactions and their fsyncs under WAL
// with synchronous=NORMAL.
func BenchmarkJournalOps(b *testing.B) {
	ctx := context.Background()
	db, err := Open(ctx, Config{Path: filepath.Join(b.TempDir(), "ordersync.db")})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	if _, err := db.Migrate(ctx); err != nil {
		b.Fatal(err)
	}
	j := db.journalStore()
	result := &journal.Result{Ref: "0f8fad5b-d9cb-469f-a165-70867728950e", Number: "ТД-000777", Date: "2026-09-16T10:00:00"}
	one := func(i int) {
		op := journalTestOp(fmt.Sprintf("site:order:B-%07d:create", i))
		if r, err := j.Register(ctx, op); err != nil || r.Outcome != journal.Registered {
			b.Fatal(r.Outcome, err)
		}
		c, err := j.ClaimDue(ctx, "bench")
		if err != nil {
			b.Fatal(err)
		}
		if err := c.Finish(ctx, journal.Finish{Status: journal.StatusDone, Result: result, Ref: result.Ref}); err != nil {
			b.Fatal(err)
		}
	}
	one(-1) // warm the connections
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		one(i)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "ops/s")
}
