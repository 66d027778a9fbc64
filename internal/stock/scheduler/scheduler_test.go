package scheduler_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ordersync/ordersync/internal/eventually"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/stock"
	"github.com/ordersync/ordersync/internal/stock/scheduler"
	"github.com/ordersync/ordersync/internal/store/sqlite"
)

func openJournal(t *testing.T) journal.Store {
	t.Helper()
	db, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(t.TempDir(), "j.db"), TakeoverAfter: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return db.Journal()
}

func every(t *testing.T, d string) stock.Spec {
	t.Helper()
	s, err := stock.ParseSpec("@every "+d, time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestTwoReplicasFiringOneSlotRegisterOneSnapshot(t *testing.T) {
	js := openJournal(t)
	sc := scheduler.Schedule{Name: "main", Spec: every(t, "2s"), Warehouses: []string{"WH1", "WH2"}, Publish: []string{"ozon"}}
	now := time.Date(2026, 9, 16, 10, 0, 3, 0, time.UTC)
	clock := func() time.Time { return now }
	a := scheduler.New(js, scheduler.Config{Schedules: []scheduler.Schedule{sc}, Now: clock})
	b := scheduler.New(js, scheduler.Config{Schedules: []scheduler.Schedule{sc}, Now: clock})
	slot := sc.Spec.Floor(now)
	if err := a.Fire(context.Background(), sc, slot); err != nil {
		t.Fatal(err)
	}
	if err := b.Fire(context.Background(), sc, slot); err != nil {
		t.Fatal(err)
	}
	if got := a.Registered() + b.Registered(); got != 2 {
		t.Fatalf("registered %d snapshot operations for one slot of two warehouses, want 2", got)
	}
	ops, err := js.List(context.Background(), journal.Filter{Source: stock.Source})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, op := range ops {
		keys = append(keys, op.Key)
		if op.Kind != stock.KindSnapshot {
			t.Errorf("%s: kind %q", op.Key, op.Kind)
		}
	}
	if len(ops) != 2 || !strings.Contains(strings.Join(keys, " "), "stock:main:WH1:2026-09-16T10:00:02") {
		t.Fatalf("journal holds %v, want one operation per warehouse for slot 10:00:02", keys)
	}
}

func TestAPendingSnapshotIsSupersededByTheNextSlot(t *testing.T) {
	js := openJournal(t)
	sc := scheduler.Schedule{Name: "main", Spec: every(t, "2s"), Warehouses: []string{"WH1"}}
	now := time.Date(2026, 9, 16, 10, 0, 3, 0, time.UTC)
	s := scheduler.New(js, scheduler.Config{Schedules: []scheduler.Schedule{sc}, Now: func() time.Time { return now }})
	first := sc.Spec.Floor(now)
	ctx := context.Background()
	if err := s.Fire(ctx, sc, first); err != nil {
		t.Fatal(err)
	}
	second := sc.Spec.Next(first)
	if err := s.Fire(ctx, sc, second); err != nil {
		t.Fatal(err)
	}
	old, err := js.Get(ctx, stock.Key("main", "WH1", sc.Spec.Label(first)))
	if err != nil {
		t.Fatal(err)
	}
	if old.Status != journal.StatusFailed || !strings.Contains(old.LastError, "superseded by slot "+sc.Spec.Label(second)) {
		t.Fatalf("older snapshot is %s (%q), want failed as superseded by %s", old.Status, old.LastError, sc.Spec.Label(second))
	}
	cur, err := js.Get(ctx, stock.Key("main", "WH1", sc.Spec.Label(second)))
	if err != nil {
		t.Fatal(err)
	}
	if cur.Status != journal.StatusPending {
		t.Fatalf("newer snapshot is %s, want pending", cur.Status)
	}
	// Firing the older slot again (a late replica) registers nothing new and
	// supersedes nothing.
	if err := s.Fire(ctx, sc, first); err != nil {
		t.Fatal(err)
	}
	if cur, _ = js.Get(ctx, cur.Key); cur.Status != journal.StatusPending {
		t.Fatalf("a late replica's firing of the older slot changed the newer one to %s", cur.Status)
	}
}

func TestCatchUpRegistersTheLatestMissedSlotOnce(t *testing.T) {
	js := openJournal(t)
	sc := scheduler.Schedule{Name: "main", Spec: every(t, "1h"), Warehouses: []string{"WH1"}}
	now := time.Date(2026, 9, 16, 10, 30, 0, 0, time.UTC)
	for range 2 { // two starts, or two replicas starting
		ctx, cancel := context.WithCancel(context.Background())
		s := scheduler.New(js, scheduler.Config{Schedules: []scheduler.Schedule{sc}, CatchUp: true, Now: func() time.Time { return now }})
		done := make(chan error)
		go func() { done <- s.Run(ctx) }()
		eventually.True(t, "the catch-up's registration", func() bool {
			ops, err := js.List(context.Background(), journal.Filter{Source: stock.Source})
			if err != nil {
				t.Fatal(err)
			}
			return len(ops) > 0
		})
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	ops, err := js.List(context.Background(), journal.Filter{Source: stock.Source})
	if err != nil {
		t.Fatal(err)
	}
	if len(ops) != 1 || ops[0].Key != "stock:main:WH1:2026-09-16T10:00" {
		t.Fatalf("catch-up registered %d operations (%v), want only the latest missed slot, stock:main:WH1:2026-09-16T10:00", len(ops), ops)
	}
}

// A pending snapshot is superseded however many other snapshots are pending: the
// older slot of WH1 sits behind 10,000 newer pending snapshots of WH2 (one
// registered, the rest copied from it in one statement).
func TestSupersedeFindsTheOlderSlotBehindManyPending(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := time.Date(2026, 9, 16, 10, 0, 0, 0, time.UTC)
	db, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(t.TempDir(), "j.db"),
		Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	if _, err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	js := db.Journal()
	first := now
	payload := func(wh string, slot time.Time) stock.Payload {
		return stock.Payload{Schedule: "main", Warehouse: wh, Slot: slot, Label: slot.Format("2006-01-02T15:04:05")}
	}
	if _, err := scheduler.Register(ctx, js, payload("WH1", first)); err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Minute) // every WH2 snapshot is listed before WH1's
	wh2 := payload("WH2", first)
	if _, err := scheduler.Register(ctx, js, wh2); err != nil {
		t.Fatal(err)
	}
	if _, err := db.SQL().ExecContext(ctx, `
		WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 9999)
		INSERT INTO operations (key, kind, source, external_id, status, payload, payload_sha256,
			attempts, last_error, next_attempt_at, created_at, updated_at, triggered_by, search_phone)
		SELECT key || ':' || i, kind, source, external_id, status, payload, payload_sha256,
			attempts, last_error, next_attempt_at, created_at, updated_at, triggered_by, search_phone
		FROM operations, n WHERE key = ?`, stock.Key("main", "WH2", wh2.Label)); err != nil {
		t.Fatal(err)
	}
	pending, err := js.List(ctx, journal.Filter{Status: journal.StatusPending, Kind: stock.KindSnapshot, Limit: 20000})
	if err != nil {
		t.Fatal(err)
	}
	if len(pending) != 10001 || pending[len(pending)-1].ExternalID != "main:WH1" {
		t.Fatalf("%d pending snapshots, WH1's listed last: %v; want 10,001 and true", len(pending),
			len(pending) > 0 && pending[len(pending)-1].ExternalID == "main:WH1")
	}
	now = now.Add(time.Minute)
	next := payload("WH1", first.Add(time.Hour))
	if _, err := scheduler.Register(ctx, js, next); err != nil {
		t.Fatal(err)
	}
	n, err := scheduler.Supersede(ctx, js, next)
	if err != nil {
		t.Fatal(err)
	}
	old, err := js.Get(ctx, stock.Key("main", "WH1", payload("WH1", first).Label))
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 || old.Status != journal.StatusFailed {
		t.Fatalf("superseded %d, the older WH1 snapshot is %s; want 1 and failed", n, old.Status)
	}
}
