package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/stock"
)

// runStock runs the stock.Store topic: snapshots written by a done claim's Finish as
// its attachment (whole or not at all; an attachment of another type refused), their
// reads, the item states, the publishes, and the journal's snapshot operations of a
// schedule (ScheduleRuns). Each case has a journal and a stock store on the same
// database.
//
// What the suite fixes beyond the interface's comments: decimals come back with
// the scale they were stored with (2.500 as 2.500); SKUs sort in byte order;
// RecordStates sets UpdatedAt from the store's clock; empty warnings read back as an
// empty, non-nil slice.
func runStock(t *testing.T, h Harness) {
	t.Helper()
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, e *stockEnv)
	}{
		{"SnapshotStoredByFinish", testStockSnapshotStoredByFinish},
		{"SnapshotWithoutItems", testStockSnapshotWithoutItems},
		{"SnapshotOnlyWhenDone", testStockSnapshotOnlyWhenDone},
		{"KeyMismatchStoresNothing", testStockKeyMismatchStoresNothing},
		{"DuplicateSKUStoresNothing", testStockDuplicateSKUStoresNothing},
		{"UnknownAttachmentRefused", testStockUnknownAttachmentRefused},
		{"SecondSnapshotRefused", testStockSecondSnapshotRefused},
		{"LargeSnapshot", testStockLargeSnapshot},
		{"Latest", testStockLatest},
		{"Snapshots", testStockSnapshots},
		{"States", testStockStates},
		{"LastSent", testStockLastSent},
		{"StartPublishKeepsTheFirst", testStockStartPublishKeepsTheFirst},
		{"StartPublishConcurrent", testStockStartPublishConcurrent},
		{"FinishPublish", testStockFinishPublish},
		{"LastFull", testStockLastFull},
		{"Publishes", testStockPublishes},
		{"Problems", testStockProblems},
		{"Prune", testStockPrune},
		{"ScheduleRuns", testStockScheduleRuns},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := h.open(t, Options{}, "Journal", "Stock")
			tc.fn(t, &stockEnv{t: t, j: s.Journal, s: s.Stock})
		})
	}
}

// ---- helpers ----

type stockEnv struct {
	t *testing.T
	j journal.Store
	s stock.Store
}

// slotAt is 2026-09-16 at h:m in Almaty (stock.timezone in the suite: slots are
// written in it, compared in UTC).
func slotAt(h, m int) time.Time { return time.Date(2026, 9, 16, h, m, 0, 0, almaty) }

func dec(s string) decimal.Decimal { return decimal.RequireFromString(s) }

func item(sku, q, p string) stock.Item {
	return stock.Item{SKU: sku, Quantity: dec(q), Price: dec(p)}
}

// newSnapshot is a snapshot of schedule and warehouse at slot, keyed as the
// scheduler keys it.
func newSnapshot(schedule, warehouse string, slot time.Time, items ...stock.Item) stock.Snapshot {
	label := slot.In(almaty).Format("2006-01-02T15:04")
	return stock.Snapshot{
		Key:       fmt.Sprintf("stock:%s:%s:%s", schedule, warehouse, label),
		Schedule:  schedule,
		Warehouse: warehouse,
		Slot:      slot,
		Label:     label,
		TakenAt:   slot.In(almaty).Add(3 * time.Second).Format("2006-01-02T15:04:05"),
		Items:     items,
	}
}

// register registers the snapshot's operation, pending.
func (e *stockEnv) register(snap stock.Snapshot) {
	e.t.Helper()
	p, err := json.Marshal(stock.Payload{Schedule: snap.Schedule, Warehouse: snap.Warehouse, Slot: snap.Slot, Label: snap.Label,
		Publish: []string{stock.Kaspi, stock.Ozon, stock.Wildberries}})
	if err != nil {
		e.t.Fatal(err)
	}
	r := register(e.t, e.j, journal.NewOperation{Key: snap.Key, Kind: stock.KindSnapshot, Source: stock.Source,
		ExternalID: snap.Key, Payload: p})
	if r.Outcome != journal.Registered {
		e.t.Fatalf("register %s: got %s, want %s", snap.Key, r.Outcome, journal.Registered)
	}
}

// take registers the snapshot's operation and finishes it done with the snapshot,
// as the engine does, and returns the snapshot as stored.
func (e *stockEnv) take(snap stock.Snapshot) stock.Snapshot {
	e.t.Helper()
	e.register(snap)
	finish(e.t, claimKey(e.t, e.j, snap.Key), journal.Finish{Status: journal.StatusDone,
		Result: &journal.Result{Note: fmt.Sprintf("%d items", len(snap.Items))}, Attachments: []any{&snap}})
	return e.snapshot(snap.Key)
}

func (e *stockEnv) snapshot(key string) stock.Snapshot {
	e.t.Helper()
	got, err := e.s.Snapshot(e.t.Context(), key)
	if err != nil {
		e.t.Fatalf("snapshot %s: %v", key, err)
	}
	return got
}

func (e *stockEnv) items(key string) []stock.Item {
	e.t.Helper()
	got, err := e.s.Items(e.t.Context(), key)
	if err != nil {
		e.t.Fatalf("items %s: %v", key, err)
	}
	return got
}

// wantNoSnapshot checks that nothing is stored under key: no snapshot, no items.
func (e *stockEnv) wantNoSnapshot(key string) {
	e.t.Helper()
	if got, err := e.s.Snapshot(e.t.Context(), key); !errors.Is(err, stock.ErrNoSnapshot) {
		e.t.Fatalf("snapshot %s: got %+v, %v; want %v", key, got, err, stock.ErrNoSnapshot)
	}
	if got, err := e.s.Items(e.t.Context(), key); !errors.Is(err, stock.ErrNoSnapshot) {
		e.t.Fatalf("items %s: got %d items, %v; want %v", key, len(got), err, stock.ErrNoSnapshot)
	}
}

// sameDecimal: the same value, written with the same scale.
func sameDecimal(got, want decimal.Decimal) bool {
	return got.Equal(want) && got.String() == want.String() && got.Exponent() == want.Exponent()
}

func showItems(items []stock.Item) string {
	var b strings.Builder
	for i, it := range items {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %s@%s (exp %d/%d)", it.SKU, it.Quantity.String(), it.Price.String(), it.Quantity.Exponent(), it.Price.Exponent())
	}
	return "[" + b.String() + "]"
}

// wantItems checks items against want, in want's order, exactly.
func wantItems(t *testing.T, what string, got, want []stock.Item) {
	t.Helper()
	if len(want) <= 20 {
		ok := len(got) == len(want)
		for i := 0; ok && i < len(got); i++ {
			ok = got[i].SKU == want[i].SKU && sameDecimal(got[i].Quantity, want[i].Quantity) && sameDecimal(got[i].Price, want[i].Price)
		}
		if !ok {
			t.Fatalf("%s: got %s, want %s", what, showItems(got), showItems(want))
		}
		return
	}
	if len(got) != len(want) {
		t.Fatalf("%s: got %d items, want %d", what, len(got), len(want))
	}
	for i := range got {
		if got[i].SKU != want[i].SKU || !sameDecimal(got[i].Quantity, want[i].Quantity) || !sameDecimal(got[i].Price, want[i].Price) {
			t.Fatalf("%s: item %d: got %s, want %s", what, i, showItems(got[i:i+1]), showItems(want[i:i+1]))
		}
	}
}

// sortedItems is items sorted by SKU in byte order.
func sortedItems(items []stock.Item) []stock.Item {
	out := slices.Clone(items)
	slices.SortFunc(out, func(a, b stock.Item) int { return strings.Compare(a.SKU, b.SKU) })
	return out
}

// wantSnapshot checks a stored snapshot's fields against what was written; its
// CreatedAt must be within [after, now].
func wantSnapshot(t *testing.T, what string, got, want stock.Snapshot, after time.Time) {
	t.Helper()
	warnings := want.Warnings
	if warnings == nil {
		warnings = []string{}
	}
	if got.Key != want.Key || got.Schedule != want.Schedule || got.Warehouse != want.Warehouse || !got.Slot.Equal(want.Slot) ||
		got.Label != want.Label || got.TakenAt != want.TakenAt || got.ItemCount != len(want.Items) ||
		!reflect.DeepEqual(got.Warnings, warnings) || got.Items != nil {
		t.Fatalf("%s: got %+v, want %+v with %d items, warnings %q and no items read", what, got, want, len(want.Items), warnings)
	}
	wantUTC(t, what+": slot", got.Slot)
	wantUTC(t, what+": created_at", got.CreatedAt)
	if got.CreatedAt.Before(after.Truncate(time.Microsecond)) || got.CreatedAt.After(time.Now()) {
		t.Fatalf("%s: created_at %v, want the time of the Finish (after %v, not in the future)", what, got.CreatedAt, after)
	}
}

func snapshotKeys(snaps []stock.Snapshot) []string {
	keys := make([]string, len(snaps))
	for i, s := range snaps {
		keys[i] = s.Key
	}
	return keys
}

// ---- snapshots ----

func testStockSnapshotStoredByFinish(t *testing.T, e *stockEnv) {
	snap := newSnapshot("main", "WH1", slotAt(10, 0),
		item("b-1", "12345678901234567890.123456789", "0.1"),
		item("B-2", "-3", "2.500"),
		item("a-1", "0", "1500.10"),
		item("Z-9", "2.500", "-0.000001"),
		item("ä-1", "7", "99999999999999999999999999.99"),
		item("a-10", "1", "3"),
		item("A", "0.000000000000000000000000001", "100"),
	)
	snap.Warnings = []string{"negative quantity -3 published as 0"}
	snap.ItemCount = 99 // not trusted: the count is the items'
	before := time.Now()
	got := e.take(snap)
	wantSnapshot(t, "stored", got, snap, before)

	op := get(t, e.j, snap.Key)
	if op.Status != journal.StatusDone || op.Result == nil || op.Result.Note != "7 items" {
		t.Fatalf("operation: got status %s result %+v, want done with its result", op.Status, op.Result)
	}
	if !got.CreatedAt.Equal(op.UpdatedAt) {
		t.Fatalf("created_at %v, want the verdict's time %v (one transaction, one clock reading)", got.CreatedAt, op.UpdatedAt)
	}

	items := e.items(snap.Key)
	want := sortedItems(snap.Items)
	if want[0].SKU != "A" || want[1].SKU != "B-2" || want[2].SKU != "Z-9" || want[3].SKU != "a-1" || want[6].SKU != "ä-1" {
		t.Fatalf("byte order of the fixture: %s", showItems(want))
	}
	wantItems(t, "items, sorted by SKU", items, want)
}

func testStockSnapshotWithoutItems(t *testing.T, e *stockEnv) {
	snap := newSnapshot("main", "WH1", slotAt(10, 0))
	before := time.Now()
	got := e.take(snap)
	wantSnapshot(t, "stored", got, snap, before)
	items := e.items(snap.Key)
	if items == nil || len(items) != 0 {
		t.Fatalf("items of an empty snapshot: got %v, want an empty, non-nil slice", items)
	}
	if _, err := e.s.Items(t.Context(), "stock:main:WH1:2026-09-16T10:30"); !errors.Is(err, stock.ErrNoSnapshot) {
		t.Fatalf("items of an unknown snapshot: got %v, want %v", err, stock.ErrNoSnapshot)
	}
}

// Only a done verdict stores a snapshot: one attached to a retry or a failure
// stores nothing.
func testStockSnapshotOnlyWhenDone(t *testing.T, e *stockEnv) {
	snap := newSnapshot("main", "WH1", slotAt(10, 0), item("A", "1", "1"))
	e.register(snap)
	finish(t, claimKey(t, e.j, snap.Key), journal.Finish{Status: journal.StatusPending, Error: "1C answered 503",
		NextAttemptAt: time.Now().Add(time.Minute), Attachments: []any{&snap}})
	e.wantNoSnapshot(snap.Key)
	finish(t, claimKey(t, e.j, snap.Key), journal.Finish{Status: journal.StatusFailed, Error: "too late", Attachments: []any{&snap}})
	e.wantNoSnapshot(snap.Key)
	if got := get(t, e.j, snap.Key).Status; got != journal.StatusFailed {
		t.Fatalf("status: got %s, want failed", got)
	}
}

// A snapshot under another key is refused before anything is written: the verdict
// is not written either, and the operation stays pending.
func testStockKeyMismatchStoresNothing(t *testing.T, e *stockEnv) {
	snap := newSnapshot("main", "WH1", slotAt(10, 0), item("A", "1", "1"))
	e.register(snap)
	other := newSnapshot("main", "WH1", slotAt(10, 30), item("A", "1", "1"))
	c := claimKey(t, e.j, snap.Key)
	if err := c.Finish(t.Context(), journal.Finish{Status: journal.StatusDone, Result: &journal.Result{}, Attachments: []any{&other}}); err == nil {
		t.Fatal("finish with the snapshot of another key: got nil, want an error")
	}
	if err := c.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	e.wantNoSnapshot(snap.Key)
	e.wantNoSnapshot(other.Key)
	if op := get(t, e.j, snap.Key); op.Status != journal.StatusPending || op.Result != nil {
		t.Fatalf("operation after the refused finish: got status %s result %+v, want pending without a result", op.Status, op.Result)
	}
	// It is still claimable, and the right snapshot is stored.
	finish(t, claimKey(t, e.j, snap.Key), journal.Finish{Status: journal.StatusDone, Attachments: []any{&snap}})
	wantItems(t, "items", e.items(snap.Key), snap.Items)
}

// A duplicate SKU violates the items' primary key once the verdict, the snapshot's
// row and some items are written: the transaction rolls back whole.
func testStockDuplicateSKUStoresNothing(t *testing.T, e *stockEnv) {
	snap := newSnapshot("main", "WH1", slotAt(10, 0),
		item("A", "1", "10"), item("B", "2", "20"), item("A", "3", "30"), item("C", "4", "40"))
	e.register(snap)
	c := claimKey(t, e.j, snap.Key)
	if err := c.Finish(t.Context(), journal.Finish{Status: journal.StatusDone, Result: &journal.Result{Note: "dup"}, Attachments: []any{&snap}}); err == nil {
		t.Fatal("finish with a duplicate SKU: got nil, want an error")
	}
	e.wantNoSnapshot(snap.Key)
	if op := get(t, e.j, snap.Key); op.Status != journal.StatusPending || op.Result != nil {
		t.Fatalf("operation after the failed finish: got status %s result %+v, want pending without a result", op.Status, op.Result)
	}

	// The next attempt stores the snapshot without the items of the failed one: none
	// of them was left behind (D, E are new; B and C would be there twice).
	fixed := snap
	fixed.Items = []stock.Item{item("B", "2", "20"), item("D", "5", "50"), item("E", "6", "60")}
	before := time.Now()
	finish(t, claimKey(t, e.j, snap.Key), journal.Finish{Status: journal.StatusDone, Attachments: []any{&fixed}})
	wantSnapshot(t, "stored by the next attempt", e.snapshot(snap.Key), fixed, before)
	wantItems(t, "items", e.items(snap.Key), fixed.Items)
}

// unknownAttachment is an attachment of a type no store knows.
type unknownAttachment struct{ Key string }

// An attachment of a type the store does not know is refused, with an error that
// names the type, before anything is written and whatever the verdict: the
// operation stays pending, without a result, and is still claimable.
func testStockUnknownAttachmentRefused(t *testing.T, e *stockEnv) {
	snap := newSnapshot("main", "WH1", slotAt(10, 0), item("A", "1", "1"))
	e.register(snap)
	for _, f := range []journal.Finish{
		{Status: journal.StatusDone, Result: &journal.Result{}, Attachments: []any{&snap, unknownAttachment{snap.Key}}},
		{Status: journal.StatusPending, Error: "1C answered 503", NextAttemptAt: time.Now().Add(time.Minute),
			Attachments: []any{unknownAttachment{snap.Key}}},
	} {
		c := claimKey(t, e.j, snap.Key)
		err := c.Finish(t.Context(), f)
		if err == nil || !strings.Contains(err.Error(), "storetest.unknownAttachment") {
			t.Fatalf("finish %s with an attachment of an unknown type: got %v, want an error naming the type", f.Status, err)
		}
		if err := c.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
		e.wantNoSnapshot(snap.Key)
		if op := get(t, e.j, snap.Key); op.Status != journal.StatusPending || op.Result != nil || op.LastError != "" {
			t.Fatalf("operation after the refused finish: got status %s result %+v error %q, want pending as registered",
				op.Status, op.Result, op.LastError)
		}
	}
	// Nil attachments are skipped; the snapshot is stored.
	finish(t, claimKey(t, e.j, snap.Key), journal.Finish{Status: journal.StatusDone, Result: &journal.Result{},
		Attachments: []any{nil, &snap, (*stock.Snapshot)(nil)}})
	wantItems(t, "items", e.items(snap.Key), snap.Items)
}

// An operation stores one snapshot: a second one in the same Finish is refused
// before anything is written.
func testStockSecondSnapshotRefused(t *testing.T, e *stockEnv) {
	snap := newSnapshot("main", "WH1", slotAt(10, 0), item("A", "1", "1"))
	e.register(snap)
	again := snap
	again.Items = []stock.Item{item("B", "2", "2")}
	c := claimKey(t, e.j, snap.Key)
	if err := c.Finish(t.Context(), journal.Finish{Status: journal.StatusDone, Result: &journal.Result{},
		Attachments: []any{&snap, &again}}); err == nil {
		t.Fatal("finish with two snapshots: got nil, want an error")
	}
	if err := c.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	e.wantNoSnapshot(snap.Key)
	if op := get(t, e.j, snap.Key); op.Status != journal.StatusPending || op.Result != nil {
		t.Fatalf("operation after the refused finish: got status %s result %+v, want pending without a result", op.Status, op.Result)
	}
}

// 50,000 items in one Finish.
func testStockLargeSnapshot(t *testing.T, e *stockEnv) {
	const n = 50_000
	items := make([]stock.Item, n)
	for i := range items {
		items[i] = item(fmt.Sprintf("SKU-%06d", (i*7919)%n), fmt.Sprintf("%d.%03d", i%1000, i%7), fmt.Sprintf("%d.10", 1000+i))
	}
	snap := newSnapshot("main", "WH1", slotAt(10, 0), items...)
	before := time.Now()
	got := e.take(snap)
	wantSnapshot(t, "stored", got, snap, before)
	wantItems(t, "items", e.items(snap.Key), sortedItems(items))
}

// latestFixture stores, in this order (so that the stored order differs from the
// keys' order):
//
//	WH1 main   11:00
//	WH1 main   10:00
//	WH1 manual 10:30
//	WH2 main   10:45
//	WH1 main   10:30  (the same slot as the manual one, stored after it)
func latestFixture(e *stockEnv) map[string]stock.Snapshot {
	e.t.Helper()
	m := map[string]stock.Snapshot{}
	for _, s := range []struct {
		name, schedule, warehouse string
		slot                      time.Time
	}{
		{"wh1-1100", "main", "WH1", slotAt(11, 0)},
		{"wh1-1000", "main", "WH1", slotAt(10, 0)},
		{"wh1-1030-manual", stock.Manual, "WH1", slotAt(10, 30)},
		{"wh2-1045", "main", "WH2", slotAt(10, 45)},
		{"wh1-1030", "main", "WH1", slotAt(10, 30)},
	} {
		m[s.name] = e.take(newSnapshot(s.schedule, s.warehouse, s.slot, item("A", "1", "1")))
	}
	if !m["wh1-1030"].CreatedAt.After(m["wh1-1030-manual"].CreatedAt) {
		e.t.Fatalf("fixture: created_at of the later snapshot %v is not after %v", m["wh1-1030"].CreatedAt, m["wh1-1030-manual"].CreatedAt)
	}
	return m
}

func testStockLatest(t *testing.T, e *stockEnv) {
	m := latestFixture(e)
	for _, tc := range []struct {
		warehouse string
		at        time.Time
		want      string // "" for none
	}{
		{"WH1", time.Time{}, "wh1-1100"},
		{"WH1", slotAt(12, 0), "wh1-1100"},
		{"WH1", slotAt(11, 0), "wh1-1100"}, // at or before: the slot itself
		{"WH1", slotAt(10, 59), "wh1-1030"},
		{"WH1", slotAt(10, 30), "wh1-1030"}, // two at 10:30: the one stored last, whatever its schedule
		{"WH1", slotAt(10, 30).Add(-time.Microsecond), "wh1-1000"},
		{"WH1", slotAt(10, 0).UTC(), "wh1-1000"}, // the same instant in UTC
		{"WH1", slotAt(9, 59), ""},
		{"WH2", time.Time{}, "wh2-1045"},
		{"WH2", slotAt(10, 44), ""},
		{"WH3", time.Time{}, ""},
	} {
		what := fmt.Sprintf("latest %s at %v", tc.warehouse, tc.at)
		got, err := e.s.Latest(t.Context(), tc.warehouse, tc.at)
		if tc.want == "" {
			if !errors.Is(err, stock.ErrNoSnapshot) {
				t.Fatalf("%s: got %s, %v; want %v", what, got.Key, err, stock.ErrNoSnapshot)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if want := m[tc.want]; !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: got %+v, want %+v", what, got, want)
		}
	}

	// Two of one slot, the later stored with the lower key: the later stored, with no
	// time too.
	e.take(newSnapshot(stock.Manual, "WH4", slotAt(10, 0), item("A", "1", "1")))
	wh4 := e.take(newSnapshot("main", "WH4", slotAt(10, 0), item("A", "1", "1")))
	if got, err := e.s.Latest(t.Context(), "WH4", time.Time{}); err != nil || got.Key != wh4.Key {
		t.Fatalf("latest WH4: got %s, %v; want %s (stored last)", got.Key, err, wh4.Key)
	}

	// A manual snapshot taken later than the schedule's slot is the latest.
	manual := e.take(newSnapshot(stock.Manual, "WH1", slotAt(11, 7), item("A", "2", "1")))
	if got, err := e.s.Latest(t.Context(), "WH1", time.Time{}); err != nil || got.Key != manual.Key {
		t.Fatalf("latest WH1 after a manual snapshot: got %s, %v; want %s", got.Key, err, manual.Key)
	}
}

func testStockSnapshots(t *testing.T, e *stockEnv) {
	m := latestFixture(e)
	keys := func(names ...string) []string {
		out := make([]string, len(names))
		for i, n := range names {
			out[i] = m[n].Key
		}
		return out
	}
	for _, tc := range []struct {
		f    stock.Filter
		want []string
	}{
		{stock.Filter{}, keys("wh1-1100", "wh2-1045", "wh1-1030", "wh1-1030-manual", "wh1-1000")},
		{stock.Filter{Warehouse: "WH1"}, keys("wh1-1100", "wh1-1030", "wh1-1030-manual", "wh1-1000")},
		{stock.Filter{Schedule: stock.Manual}, keys("wh1-1030-manual")},
		{stock.Filter{Warehouse: "WH1", Schedule: "main"}, keys("wh1-1100", "wh1-1030", "wh1-1000")},
		{stock.Filter{Warehouse: "WH2", Schedule: stock.Manual}, keys()},
		{stock.Filter{Warehouse: "WH3"}, keys()},
		{stock.Filter{Limit: 2}, keys("wh1-1100", "wh2-1045")},
		{stock.Filter{Warehouse: "WH1", Limit: 3}, keys("wh1-1100", "wh1-1030", "wh1-1030-manual")},
	} {
		got, err := e.s.Snapshots(t.Context(), tc.f)
		if err != nil {
			t.Fatalf("snapshots %+v: %v", tc.f, err)
		}
		if !slices.Equal(snapshotKeys(got), tc.want) {
			t.Fatalf("snapshots %+v: got %v, want %v", tc.f, snapshotKeys(got), tc.want)
		}
		for _, s := range got {
			if s.Items != nil {
				t.Fatalf("snapshots %+v: %s has items %v, want none read", tc.f, s.Key, s.Items)
			}
		}
	}
	all, err := e.s.Snapshots(t.Context(), stock.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := all[0], m["wh1-1100"]; !reflect.DeepEqual(got, want) {
		t.Fatalf("listed snapshot: got %+v, want %+v", got, want)
	}

	// The default limit is 100.
	for i := range 101 {
		e.take(newSnapshot("fast", "WH9", slotAt(0, 0).Add(time.Duration(i)*time.Minute)))
	}
	got, err := e.s.Snapshots(t.Context(), stock.Filter{Warehouse: "WH9"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 100 || !got[0].Slot.Equal(slotAt(1, 40)) {
		t.Fatalf("snapshots with no limit: got %d, the first at %v; want 100, the first at %v", len(got), got[0].Slot, slotAt(1, 40))
	}
}

// ---- item states ----

// at3 is 2026-09-16 at h:m:s.123456 in Almaty (the stores keep microseconds).
func at3(h, m, s int) *time.Time {
	t := time.Date(2026, 9, 16, h, m, s, 123456000, almaty)
	return &t
}

func (e *stockEnv) record(states ...stock.ItemState) {
	e.t.Helper()
	if err := e.s.RecordStates(e.t.Context(), states); err != nil {
		e.t.Fatalf("record states: %v", err)
	}
}

func (e *stockEnv) states(marketplace, warehouse string) map[string]stock.ItemState {
	e.t.Helper()
	m, err := e.s.States(e.t.Context(), marketplace, warehouse)
	if err != nil {
		e.t.Fatalf("states %s %s: %v", marketplace, warehouse, err)
	}
	if m == nil {
		e.t.Fatalf("states %s %s: got a nil map", marketplace, warehouse)
	}
	return m
}

// sameState compares the stored fields (UpdatedAt apart); times by instant.
func sameState(got, want stock.ItemState) bool {
	sameTime := func(a, b *time.Time) bool { return (a == nil) == (b == nil) && (a == nil || a.Equal(*b)) }
	return got.Marketplace == want.Marketplace && got.Warehouse == want.Warehouse && got.SKU == want.SKU &&
		got.MarketSKU == want.MarketSKU && got.Value == want.Value && got.Outcome == want.Outcome &&
		got.Reason == want.Reason && got.Warning == want.Warning && got.SnapshotKey == want.SnapshotKey &&
		sameTime(got.SentAt, want.SentAt) && sameTime(got.PublishedAt, want.PublishedAt)
}

func wantStates(t *testing.T, what string, got map[string]stock.ItemState, want ...stock.ItemState) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: got %d states %+v, want %d %+v", what, len(got), got, len(want), want)
	}
	for _, w := range want {
		g, ok := got[w.SKU]
		if !ok || !sameState(g, w) {
			t.Fatalf("%s: %s: got %+v (present %v), want %+v", what, w.SKU, g, ok, w)
		}
		for _, tm := range []*time.Time{g.SentAt, g.PublishedAt, &g.UpdatedAt} {
			if tm != nil {
				wantUTC(t, what+": "+w.SKU, *tm)
			}
		}
	}
}

func state(marketplace, warehouse, sku string, value int64, outcome stock.Outcome) stock.ItemState {
	return stock.ItemState{Marketplace: marketplace, Warehouse: warehouse, SKU: sku, MarketSKU: "m-" + sku, Value: value,
		Outcome: outcome, SnapshotKey: "stock:main:" + warehouse + ":2026-09-16T10:00"}
}

func testStockStates(t *testing.T, e *stockEnv) {
	if got := e.states(stock.Ozon, "WH1"); len(got) != 0 {
		t.Fatalf("states before any: got %v, want none", got)
	}
	a := state(stock.Ozon, "WH1", "A", 5, stock.Published)
	a.SentAt, a.PublishedAt = at3(10, 0, 1), at3(10, 0, 2)
	a.Warning = "fractional quantity 5.5 floored to 5"
	b := state(stock.Ozon, "WH1", "B", 0, stock.Refused)
	b.SentAt, b.Reason = at3(10, 0, 1), "offer_id_not_found"
	c := state(stock.Ozon, "WH1", "C", 3, stock.Skipped)
	c.Reason = "no line in the SKU map"
	other := state(stock.Ozon, "WH2", "A", 9, stock.Published)
	wb := state(stock.Wildberries, "WH1", "A", 7, stock.Deferred)
	a.UpdatedAt = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC) // not written: the store's clock is
	before := time.Now().Truncate(time.Microsecond)
	e.record(a, b, c, other, wb)
	after := time.Now()
	got := e.states(stock.Ozon, "WH1")
	wantStates(t, "ozon WH1", got, a, b, c)
	if u := got["A"].UpdatedAt; u.Before(before) || u.After(after) {
		t.Fatalf("updated_at: got %v, want the time of the write (%v … %v)", u, before, after)
	}
	wantStates(t, "ozon WH2", e.states(stock.Ozon, "WH2"), other)
	wantStates(t, "wildberries WH1", e.states(stock.Wildberries, "WH1"), wb)
	wantStates(t, "kaspi WH1", e.states(stock.Kaspi, "WH1"))

	// Replaced whole (B's reason goes), inserted (D), untouched (A, C); a state given
	// twice in one call: the later one.
	b2 := state(stock.Ozon, "WH1", "B", 4, stock.Published)
	b2.SentAt, b2.PublishedAt, b2.SnapshotKey = at3(10, 30, 1), at3(10, 30, 1), "stock:main:WH1:2026-09-16T10:30"
	d1 := state(stock.Ozon, "WH1", "D", 1, stock.Deferred)
	d2 := state(stock.Ozon, "WH1", "D", 2, stock.Refused)
	d2.Reason = "STOCK_TOO_BIG"
	e.record(b2, d1, d2)
	got2 := e.states(stock.Ozon, "WH1")
	wantStates(t, "ozon WH1 after the second write", got2, a, b2, c, d2)
	if !got2["A"].UpdatedAt.Equal(got["A"].UpdatedAt) {
		t.Fatalf("updated_at of an untouched state: got %v, want %v", got2["A"].UpdatedAt, got["A"].UpdatedAt)
	}
	if !got2["B"].UpdatedAt.After(got["B"].UpdatedAt) {
		t.Fatalf("updated_at of a replaced state: got %v, want after %v", got2["B"].UpdatedAt, got["B"].UpdatedAt)
	}

	// Nothing to write is fine; an invalid state fails the call and writes none of it.
	e.record()
	bad := state(stock.Ozon, "WH1", "E", 1, stock.Outcome("lost"))
	fine := state(stock.Ozon, "WH1", "F", 1, stock.Published)
	if err := e.s.RecordStates(t.Context(), []stock.ItemState{fine, bad}); err == nil {
		t.Fatal("record states with an unknown outcome: got nil, want an error")
	}
	if err := e.s.RecordStates(t.Context(), []stock.ItemState{fine, state(stock.Ozon, "WH1", "", 1, stock.Published)}); err == nil {
		t.Fatal("record states with an empty SKU: got nil, want an error")
	}
	wantStates(t, "ozon WH1 after refused writes", e.states(stock.Ozon, "WH1"), a, b2, c, d2)
}

func testStockLastSent(t *testing.T, e *stockEnv) {
	last := func(marketplace string) time.Time {
		t.Helper()
		got, err := e.s.LastSent(t.Context(), marketplace)
		if err != nil {
			t.Fatalf("last sent %s: %v", marketplace, err)
		}
		return got
	}
	if got := last(stock.Ozon); !got.IsZero() {
		t.Fatalf("last sent before any: got %v, want zero", got)
	}
	s1 := state(stock.Ozon, "WH1", "A", 1, stock.Published)
	s1.SentAt = at3(10, 0, 1)
	s2 := state(stock.Ozon, "WH2", "B", 1, stock.Refused)
	s2.SentAt = at3(10, 0, 30)
	s3 := state(stock.Ozon, "WH1", "C", 1, stock.Deferred)
	s3.SentAt = at3(10, 0, 10)
	never := state(stock.Ozon, "WH1", "D", 1, stock.Skipped)
	wb := state(stock.Wildberries, "WH1", "A", 1, stock.Published)
	wb.SentAt = at3(11, 0, 0)
	e.record(s1, s2, s3, never, wb)
	if got := last(stock.Ozon); !got.Equal(*s2.SentAt) || got.Location() != time.UTC {
		t.Fatalf("last sent ozon: got %v, want %v in UTC", got, s2.SentAt.UTC())
	}
	if got := last(stock.Wildberries); !got.Equal(*wb.SentAt) {
		t.Fatalf("last sent wildberries: got %v, want %v", got, wb.SentAt.UTC())
	}
	if got := last(stock.Kaspi); !got.IsZero() {
		t.Fatalf("last sent kaspi: got %v, want zero", got)
	}
	// Computed from the states as they are now.
	s2.SentAt = nil
	e.record(s2)
	if got := last(stock.Ozon); !got.Equal(*s3.SentAt) {
		t.Fatalf("last sent ozon after the latest was replaced: got %v, want %v", got, s3.SentAt.UTC())
	}
}

func testStockProblems(t *testing.T, e *stockEnv) {
	problems := func(marketplace string, limit int) []string {
		t.Helper()
		got, err := e.s.Problems(t.Context(), marketplace, limit)
		if err != nil {
			t.Fatalf("problems %q: %v", marketplace, err)
		}
		if got == nil {
			t.Fatalf("problems %q: got nil, want a slice", marketplace)
		}
		out := make([]string, len(got))
		for i, s := range got {
			out[i] = s.Marketplace + "/" + s.Warehouse + "/" + s.SKU + "/" + string(s.Outcome)
		}
		return out
	}
	if got := problems("", 0); len(got) != 0 {
		t.Fatalf("problems before any: got %v", got)
	}
	refused := state(stock.Ozon, "WH1", "A", 1, stock.Refused)
	refused.Reason = "offer_id_not_found"
	// One write per step, so each step is newer than the one before.
	e.record(refused, state(stock.Ozon, "WH1", "P1", 1, stock.Published))
	e.record(state(stock.Wildberries, "WH1", "C", 1, stock.Skipped))
	e.record(state(stock.Ozon, "WH2", "B", 1, stock.Mismatch), state(stock.Ozon, "WH1", "P2", 1, stock.Deferred))
	e.record(state(stock.Ozon, "WH1", "D", 1, stock.Skipped), state(stock.Ozon, "WH1", "P3", 1, stock.Published))

	if got, want := problems(stock.Ozon, 0), []string{"ozon/WH1/D/skipped", "ozon/WH2/B/mismatch", "ozon/WH1/A/refused"}; !slices.Equal(got, want) {
		t.Fatalf("problems ozon: got %v, want %v", got, want)
	}
	if got, want := problems("", 0), []string{"ozon/WH1/D/skipped", "ozon/WH2/B/mismatch", "wildberries/WH1/C/skipped", "ozon/WH1/A/refused"}; !slices.Equal(got, want) {
		t.Fatalf("problems of every marketplace: got %v, want %v", got, want)
	}
	if got, want := problems(stock.Ozon, 2), []string{"ozon/WH1/D/skipped", "ozon/WH2/B/mismatch"}; !slices.Equal(got, want) {
		t.Fatalf("problems ozon, limit 2: got %v, want %v", got, want)
	}
	if got := problems(stock.Kaspi, 0); len(got) != 0 {
		t.Fatalf("problems kaspi: got %v, want none", got)
	}
	all, err := e.s.Problems(t.Context(), stock.Ozon, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := all[2]; !sameState(got, refused) {
		t.Fatalf("problem read: got %+v, want %+v", got, refused)
	}

	// Published now: no longer a problem. Refused again: the newest.
	e.record(state(stock.Ozon, "WH1", "D", 1, stock.Published))
	e.record(refused)
	if got, want := problems(stock.Ozon, 0), []string{"ozon/WH1/A/refused", "ozon/WH2/B/mismatch"}; !slices.Equal(got, want) {
		t.Fatalf("problems ozon after D was published and A refused again: got %v, want %v", got, want)
	}

	// The default limit is 100.
	many := make([]stock.ItemState, 120)
	for i := range many {
		many[i] = state(stock.Wildberries, "WH2", fmt.Sprintf("X%03d", i), 1, stock.Refused)
	}
	e.record(many...)
	if got := problems(stock.Wildberries, 0); len(got) != 100 {
		t.Fatalf("problems with no limit: got %d, want 100", len(got))
	}
}

// ---- publishes ----

func (e *stockEnv) start(p stock.Publish) stock.Publish {
	e.t.Helper()
	got, err := e.s.StartPublish(e.t.Context(), p)
	if err != nil {
		e.t.Fatalf("start publish %s to %s: %v", p.SnapshotKey, p.Marketplace, err)
	}
	return got
}

func (e *stockEnv) finishPublish(p stock.Publish) {
	e.t.Helper()
	if err := e.s.FinishPublish(e.t.Context(), p); err != nil {
		e.t.Fatalf("finish publish %s to %s: %v", p.SnapshotKey, p.Marketplace, err)
	}
}

func (e *stockEnv) publishes(f stock.PublishFilter) []stock.Publish {
	e.t.Helper()
	ps, err := e.s.Publishes(e.t.Context(), f)
	if err != nil {
		e.t.Fatalf("publishes %+v: %v", f, err)
	}
	if ps == nil {
		e.t.Fatalf("publishes %+v: got nil, want a slice", f)
	}
	return ps
}

// samePublish compares publishes, times by instant.
func samePublish(got, want stock.Publish) bool {
	if (got.FinishedAt == nil) != (want.FinishedAt == nil) || (got.FinishedAt != nil && !got.FinishedAt.Equal(*want.FinishedAt)) {
		return false
	}
	if !got.StartedAt.Equal(want.StartedAt) {
		return false
	}
	warnings := want.Warnings
	if warnings == nil {
		warnings = []string{}
	}
	got.FinishedAt, want.FinishedAt = nil, nil
	got.StartedAt, want.StartedAt = time.Time{}, time.Time{}
	want.Warnings = warnings
	return reflect.DeepEqual(got, want)
}

func wantPublish(t *testing.T, what string, got, want stock.Publish) {
	t.Helper()
	if !samePublish(got, want) {
		t.Fatalf("%s: got %+v, want %+v", what, got, want)
	}
	wantUTC(t, what+": started_at", got.StartedAt)
	if got.FinishedAt != nil {
		wantUTC(t, what+": finished_at", *got.FinishedAt)
	}
}

func publishIDs(ps []stock.Publish) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.SnapshotKey + ">" + p.Marketplace
	}
	return out
}

func testStockStartPublishKeepsTheFirst(t *testing.T, e *stockEnv) {
	snap := e.take(newSnapshot("main", "WH1", slotAt(10, 0), item("A", "1", "1")))
	first := stock.Publish{SnapshotKey: snap.Key, Marketplace: stock.Ozon, Warehouse: "WH1", Full: true, StartedAt: *at3(10, 0, 5)}
	want := first
	wantPublish(t, "first start", e.start(first), want)

	// A resumed publish (the relay cut it at its lease's end) asks again with what it
	// would do now: the recorded one stands.
	again := stock.Publish{SnapshotKey: snap.Key, Marketplace: stock.Ozon, Warehouse: "WH1", Full: false, StartedAt: *at3(10, 5, 0)}
	wantPublish(t, "second start", e.start(again), want)
	if ps := e.publishes(stock.PublishFilter{}); len(ps) != 1 {
		t.Fatalf("publishes after two starts: got %v, want one", publishIDs(ps))
	}

	// Another marketplace is a publish of its own; no warehouse given: the snapshot's;
	// no start: the store's clock.
	before := time.Now().Truncate(time.Microsecond)
	wb := e.start(stock.Publish{SnapshotKey: snap.Key, Marketplace: stock.Wildberries})
	if wb.Warehouse != "WH1" || wb.Full || wb.FinishedAt != nil || wb.StartedAt.Before(before) || wb.StartedAt.After(time.Now()) {
		t.Fatalf("start without warehouse and time: got %+v, want WH1, started now", wb)
	}

	if _, err := e.s.StartPublish(t.Context(), stock.Publish{SnapshotKey: "stock:main:WH1:2026-09-16T11:00", Marketplace: stock.Ozon,
		Warehouse: "WH1", StartedAt: *at3(11, 0, 5)}); !errors.Is(err, stock.ErrNoSnapshot) {
		t.Fatalf("start publish of an unknown snapshot: got %v, want %v", err, stock.ErrNoSnapshot)
	}
	if _, err := e.s.StartPublish(t.Context(), stock.Publish{SnapshotKey: snap.Key, Marketplace: "kaspi", Warehouse: "WH2"}); err == nil {
		t.Fatal("start publish with another warehouse than the snapshot's: got nil, want an error")
	}
	if ps := e.publishes(stock.PublishFilter{}); len(ps) != 2 {
		t.Fatalf("publishes after refused starts: got %v, want two", publishIDs(ps))
	}
}

// Replicas resuming one publish at once all get the one recorded.
func testStockStartPublishConcurrent(t *testing.T, e *stockEnv) {
	snap := e.take(newSnapshot("main", "WH1", slotAt(10, 0), item("A", "1", "1")))
	const n = 8
	var (
		wg   sync.WaitGroup
		got  = make([]stock.Publish, n)
		errs = make([]error, n)
	)
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			got[i], errs[i] = e.s.StartPublish(t.Context(), stock.Publish{SnapshotKey: snap.Key, Marketplace: stock.Ozon,
				Full: i%2 == 0, StartedAt: at3(10, 0, 0).Add(time.Duration(i) * time.Second)})
		})
	}
	close(start)
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("start %d: %v", i, errs[i])
		}
		if !samePublish(got[i], got[0]) || got[i].Warehouse != "WH1" {
			t.Fatalf("start %d: got %+v, start 0 got %+v: want the one recorded", i, got[i], got[0])
		}
	}
	ps := e.publishes(stock.PublishFilter{})
	if len(ps) != 1 || !samePublish(ps[0], got[0]) {
		t.Fatalf("recorded: got %+v, want only %+v", ps, got[0])
	}
}

func testStockFinishPublish(t *testing.T, e *stockEnv) {
	snap := e.take(newSnapshot("main", "WH1", slotAt(10, 0), item("A", "1", "1")))
	started := e.start(stock.Publish{SnapshotKey: snap.Key, Marketplace: stock.Ozon, Warehouse: "WH1", Full: true, StartedAt: *at3(10, 0, 5)})
	if started.Warnings == nil || len(started.Warnings) != 0 {
		t.Fatalf("warnings of a started publish: got %#v, want an empty, non-nil slice", started.Warnings)
	}

	done := started
	done.Full, done.StartedAt = false, *at3(10, 1, 0) // not written: they stay as started
	done.FinishedAt = at3(10, 2, 30)
	done.Sent, done.Published, done.Refused, done.Mismatched, done.Skipped, done.Unchanged = 120, 110, 5, 2, 3, 40
	done.Note = "cut at the lease's end once"
	done.Warnings = []string{"negative quantity -3 published as 0", "fractional quantity 2.5 floored to 2"}
	e.finishPublish(done)
	want := done
	want.Full, want.StartedAt = true, started.StartedAt
	ps := e.publishes(stock.PublishFilter{})
	if len(ps) != 1 {
		t.Fatalf("publishes: got %v, want one", publishIDs(ps))
	}
	wantPublish(t, "finished", ps[0], want)
	// StartPublish now answers the finished one.
	wantPublish(t, "start after finish", e.start(stock.Publish{SnapshotKey: snap.Key, Marketplace: stock.Ozon, Full: false}), want)

	// Written again (a publish that is finished twice): the last write stands; no
	// FinishedAt: the store's clock; no warnings: none.
	again := want
	again.FinishedAt, again.Warnings, again.Note, again.Sent = nil, nil, "", 121
	before := time.Now().Truncate(time.Microsecond)
	e.finishPublish(again)
	got := e.publishes(stock.PublishFilter{})[0]
	if got.FinishedAt == nil || got.FinishedAt.Before(before) || got.FinishedAt.After(time.Now()) {
		t.Fatalf("finished_at without a time: got %v, want the time of the write", got.FinishedAt)
	}
	again.FinishedAt = got.FinishedAt
	wantPublish(t, "finished again", got, again)

	if err := e.s.FinishPublish(t.Context(), stock.Publish{SnapshotKey: snap.Key, Marketplace: stock.Wildberries, FinishedAt: at3(10, 3, 0)}); err == nil {
		t.Fatal("finish publish of a publish never started: got nil, want an error")
	}
	if err := e.s.FinishPublish(t.Context(), stock.Publish{SnapshotKey: snap.Key, Marketplace: stock.Ozon, Sent: -1}); err == nil {
		t.Fatal("finish publish with a negative count: got nil, want an error")
	}
	wantPublish(t, "after refused finishes", e.publishes(stock.PublishFilter{})[0], again)
}

func testStockLastFull(t *testing.T, e *stockEnv) {
	lastFull := func(marketplace, warehouse string) time.Time {
		t.Helper()
		got, err := e.s.LastFull(t.Context(), marketplace, warehouse)
		if err != nil {
			t.Fatalf("last full %s %s: %v", marketplace, warehouse, err)
		}
		return got
	}
	s1 := e.take(newSnapshot("main", "WH1", slotAt(10, 0), item("A", "1", "1")))
	s2 := e.take(newSnapshot("main", "WH1", slotAt(10, 30), item("A", "1", "1")))
	s3 := e.take(newSnapshot("main", "WH1", slotAt(11, 0), item("A", "1", "1")))
	s4 := e.take(newSnapshot("main", "WH1", slotAt(11, 30), item("A", "1", "1")))
	w2 := e.take(newSnapshot("main", "WH2", slotAt(11, 30), item("A", "1", "1")))
	if got := lastFull(stock.Ozon, "WH1"); !got.IsZero() {
		t.Fatalf("before any publish: got %v, want zero", got)
	}

	// A full publish started, not finished: none yet.
	e.start(stock.Publish{SnapshotKey: s1.Key, Marketplace: stock.Ozon, Full: true, StartedAt: *at3(10, 0, 5)})
	if got := lastFull(stock.Ozon, "WH1"); !got.IsZero() {
		t.Fatalf("full publish running: got %v, want zero", got)
	}
	// A finished delta does not count.
	e.start(stock.Publish{SnapshotKey: s2.Key, Marketplace: stock.Ozon, StartedAt: *at3(10, 30, 5)})
	e.finishPublish(stock.Publish{SnapshotKey: s2.Key, Marketplace: stock.Ozon, FinishedAt: at3(10, 31, 0)})
	if got := lastFull(stock.Ozon, "WH1"); !got.IsZero() {
		t.Fatalf("only a delta finished: got %v, want zero", got)
	}
	// The full one finishes.
	e.finishPublish(stock.Publish{SnapshotKey: s1.Key, Marketplace: stock.Ozon, FinishedAt: at3(10, 40, 0)})
	if got := lastFull(stock.Ozon, "WH1"); !got.Equal(*at3(10, 40, 0)) || got.Location() != time.UTC {
		t.Fatalf("full finished: got %v, want %v in UTC", got, at3(10, 40, 0).UTC())
	}
	// A later full one, finished; one that finished earlier though started later; a
	// full one of another warehouse and of another marketplace: the latest finish of
	// this pair stands.
	e.start(stock.Publish{SnapshotKey: s3.Key, Marketplace: stock.Ozon, Full: true, StartedAt: *at3(11, 0, 5)})
	e.finishPublish(stock.Publish{SnapshotKey: s3.Key, Marketplace: stock.Ozon, FinishedAt: at3(11, 20, 0)})
	e.start(stock.Publish{SnapshotKey: s4.Key, Marketplace: stock.Ozon, Full: true, StartedAt: *at3(11, 30, 5)})
	e.finishPublish(stock.Publish{SnapshotKey: s4.Key, Marketplace: stock.Ozon, FinishedAt: at3(11, 10, 0)})
	e.start(stock.Publish{SnapshotKey: w2.Key, Marketplace: stock.Ozon, Full: true, StartedAt: *at3(11, 30, 5)})
	e.finishPublish(stock.Publish{SnapshotKey: w2.Key, Marketplace: stock.Ozon, FinishedAt: at3(12, 0, 0)})
	e.start(stock.Publish{SnapshotKey: s4.Key, Marketplace: stock.Wildberries, Full: true, StartedAt: *at3(11, 30, 5)})
	e.finishPublish(stock.Publish{SnapshotKey: s4.Key, Marketplace: stock.Wildberries, FinishedAt: at3(12, 30, 0)})
	if got := lastFull(stock.Ozon, "WH1"); !got.Equal(*at3(11, 20, 0)) {
		t.Fatalf("last full ozon WH1: got %v, want %v", got, at3(11, 20, 0).UTC())
	}
	if got := lastFull(stock.Ozon, "WH2"); !got.Equal(*at3(12, 0, 0)) {
		t.Fatalf("last full ozon WH2: got %v, want %v", got, at3(12, 0, 0).UTC())
	}
	if got := lastFull(stock.Wildberries, "WH1"); !got.Equal(*at3(12, 30, 0)) {
		t.Fatalf("last full wildberries WH1: got %v, want %v", got, at3(12, 30, 0).UTC())
	}
}

func testStockPublishes(t *testing.T, e *stockEnv) {
	if ps := e.publishes(stock.PublishFilter{}); len(ps) != 0 {
		t.Fatalf("publishes before any: got %v", publishIDs(ps))
	}
	s1 := e.take(newSnapshot("main", "WH1", slotAt(10, 0), item("A", "1", "1")))
	s2 := e.take(newSnapshot("main", "WH1", slotAt(10, 30), item("A", "1", "1")))
	s3 := e.take(newSnapshot("main", "WH2", slotAt(10, 0), item("A", "1", "1")))
	id := func(s stock.Snapshot, marketplace string) string { return s.Key + ">" + marketplace }
	for _, p := range []stock.Publish{
		{SnapshotKey: s1.Key, Marketplace: stock.Ozon, Full: true, StartedAt: *at3(10, 0, 1)},
		{SnapshotKey: s1.Key, Marketplace: stock.Wildberries, Full: true, StartedAt: *at3(10, 0, 2)},
		{SnapshotKey: s2.Key, Marketplace: stock.Ozon, StartedAt: *at3(10, 30, 1)},
		{SnapshotKey: s3.Key, Marketplace: stock.Ozon, StartedAt: *at3(10, 30, 4)},
		{SnapshotKey: s2.Key, Marketplace: stock.Wildberries, StartedAt: *at3(10, 30, 5)},
	} {
		e.start(p)
	}
	e.finishPublish(stock.Publish{SnapshotKey: s1.Key, Marketplace: stock.Ozon, Sent: 3, Published: 3, FinishedAt: at3(10, 1, 0)})

	for _, tc := range []struct {
		f    stock.PublishFilter
		want []string
	}{
		{stock.PublishFilter{}, []string{id(s2, stock.Wildberries), id(s3, stock.Ozon), id(s2, stock.Ozon), id(s1, stock.Wildberries), id(s1, stock.Ozon)}},
		{stock.PublishFilter{Marketplace: stock.Ozon}, []string{id(s3, stock.Ozon), id(s2, stock.Ozon), id(s1, stock.Ozon)}},
		{stock.PublishFilter{Warehouse: "WH1"}, []string{id(s2, stock.Wildberries), id(s2, stock.Ozon), id(s1, stock.Wildberries), id(s1, stock.Ozon)}},
		{stock.PublishFilter{Marketplace: stock.Wildberries, Warehouse: "WH2"}, []string{}},
		{stock.PublishFilter{Limit: 2}, []string{id(s2, stock.Wildberries), id(s3, stock.Ozon)}},
		{stock.PublishFilter{Latest: true}, []string{id(s2, stock.Wildberries), id(s3, stock.Ozon), id(s2, stock.Ozon)}},
		{stock.PublishFilter{Latest: true, Marketplace: stock.Ozon}, []string{id(s3, stock.Ozon), id(s2, stock.Ozon)}},
		{stock.PublishFilter{Latest: true, Warehouse: "WH1"}, []string{id(s2, stock.Wildberries), id(s2, stock.Ozon)}},
		{stock.PublishFilter{Latest: true, Limit: 1}, []string{id(s2, stock.Wildberries)}},
	} {
		if got := publishIDs(e.publishes(tc.f)); !slices.Equal(got, tc.want) {
			t.Fatalf("publishes %+v: got %v, want %v", tc.f, got, tc.want)
		}
	}
	ps := e.publishes(stock.PublishFilter{Marketplace: stock.Ozon, Warehouse: "WH1"})
	wantPublish(t, "listed", ps[1], stock.Publish{SnapshotKey: s1.Key, Marketplace: stock.Ozon, Warehouse: "WH1", Full: true,
		StartedAt: *at3(10, 0, 1), FinishedAt: at3(10, 1, 0), Sent: 3, Published: 3})
}

func testStockPrune(t *testing.T, e *stockEnv) {
	ctx := t.Context()
	s1 := e.take(newSnapshot("main", "WH1", slotAt(10, 0), item("A", "1", "1"), item("B", "2", "1")))
	s2 := e.take(newSnapshot("main", "WH1", slotAt(10, 30), item("A", "1", "1")))
	s3 := e.take(newSnapshot("main", "WH1", slotAt(11, 0), item("A", "1", "1")))
	t1 := e.take(newSnapshot("main", "WH2", slotAt(9, 0), item("A", "1", "1")))
	pub := e.start(stock.Publish{SnapshotKey: s2.Key, Marketplace: stock.Ozon, Warehouse: "WH1"})
	done := e.start(stock.Publish{SnapshotKey: s1.Key, Marketplace: stock.Ozon, Warehouse: "WH1"})
	if err := e.s.FinishPublish(ctx, done); err != nil {
		t.Fatal(err)
	}
	if n, err := e.s.Prune(ctx, time.Now().Add(-time.Hour), 100); err != nil || n != 0 {
		t.Fatalf("prune of snapshots stored over an hour ago: %d, %v; want 0", n, err)
	}
	n, err := e.s.Prune(ctx, time.Now().Add(time.Hour), 100)
	if err != nil || n != 1 {
		t.Fatalf("prune: %d, %v; want 1 (s2's publish is unfinished, s3 and t1 are their warehouses' newest)", n, err)
	}
	e.wantNoSnapshot(s1.Key)
	if items, err := e.s.Items(ctx, s1.Key); err == nil && len(items) > 0 {
		t.Fatalf("the pruned snapshot's items are left: %v", items)
	}
	ps, err := e.s.Publishes(ctx, stock.PublishFilter{Marketplace: stock.Ozon, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		if p.SnapshotKey == s1.Key {
			t.Fatalf("the pruned snapshot's publish is left: %+v", p)
		}
	}
	for _, k := range []string{s2.Key, s3.Key, t1.Key} {
		e.snapshot(k)
	}
	if err := e.s.FinishPublish(ctx, pub); err != nil {
		t.Fatal(err)
	}
	if n, err := e.s.Prune(ctx, time.Now().Add(time.Hour), 100); err != nil || n != 1 {
		t.Fatalf("prune after the publish finished: %d, %v; want 1", n, err)
	}
	e.wantNoSnapshot(s2.Key)
	e.snapshot(s3.Key)
	e.snapshot(t1.Key)

	// The limit holds.
	for m := 1; m <= 3; m++ {
		e.take(newSnapshot("main", "WH3", slotAt(12, m), item("A", "1", "1")))
	}
	if n, err := e.s.Prune(ctx, time.Now().Add(time.Hour), 1); err != nil || n != 1 {
		t.Fatalf("prune with limit 1: %d, %v", n, err)
	}
	if n, err := e.s.Prune(ctx, time.Now().Add(time.Hour), 100); err != nil || n != 1 {
		t.Fatalf("prune of the rest of WH3: %d, %v; want 1 (the newest stays)", n, err)
	}
}

// ---- the journal's snapshot operations of a schedule ----

// testStockScheduleRuns: ScheduleRuns counts the pending operations of one schedule
// and warehouse, and reads the newest failed one, as the first of journal List's
// order among its failed ones. Another warehouse's, another schedule's, a manual
// snapshot's, a done one and another source's with the same external id are not
// its.
func testStockScheduleRuns(t *testing.T, e *stockEnv) {
	runs := func(schedule, warehouse string) stock.ScheduleRuns {
		t.Helper()
		r, err := e.s.ScheduleRuns(t.Context(), schedule, warehouse)
		if err != nil {
			t.Fatalf("schedule runs %s:%s: %v", schedule, warehouse, err)
		}
		return r
	}
	if got := runs("main", "WH1"); got != (stock.ScheduleRuns{}) {
		t.Fatalf("schedule runs before any operation: got %+v, want none", got)
	}
	reg := func(source, schedule, warehouse, label string) string {
		t.Helper()
		key := stock.Key(schedule, warehouse, label)
		kind := stock.KindSnapshot
		if source != stock.Source {
			key, kind = source+":"+key, "order.create"
		}
		register(t, e.j, journal.NewOperation{Key: key, Kind: kind, Source: source, ExternalID: schedule + ":" + warehouse,
			Payload: payload(key, 1)})
		return key
	}
	fail := func(key, reason string) {
		t.Helper()
		time.Sleep(2 * time.Millisecond) // each failure newer than the one before
		setState(t, e.j, key, journal.Finish{Status: journal.StatusFailed, Error: reason})
	}
	for _, l := range []string{"2026-09-16T10:00", "2026-09-16T10:30", "2026-09-16T11:00"} {
		reg(stock.Source, "main", "WH1", l)
	}
	done := reg(stock.Source, "main", "WH1", "2026-09-16T07:00")
	setState(t, e.j, done, journal.Finish{Status: journal.StatusDone, Result: &journal.Result{Ref: "r"}})
	older := reg(stock.Source, "main", "WH1", "2026-09-16T08:00")
	newer := reg(stock.Source, "main", "WH1", "2026-09-16T09:00")
	fail(older, "1C timed out")
	fail(newer, "too late: the slot ended")
	// Not main's WH1: each newer, failed or pending.
	reg(stock.Source, "main", "WH2", "2026-09-16T10:00")
	wh2 := reg(stock.Source, "main", "WH2", "2026-09-16T09:00")
	fail(wh2, "unknown warehouse WH2")
	reg(stock.Source, "other", "WH1", "2026-09-16T10:00")
	manual := reg(stock.Source, stock.Manual, "WH1", "2026-09-16T12:00:00")
	fail(manual, "1C is down")
	reg("kaspi", "main", "WH1", "2026-09-16T10:00")
	fail(reg("kaspi", "main", "WH1", "2026-09-16T11:00"), "another source")

	// What journal List says of each, filtered by external id: the oracle.
	list := func(status journal.Status) []journal.Operation {
		t.Helper()
		ops, err := e.j.List(t.Context(), journal.Filter{Source: stock.Source, Status: status, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		return ops
	}
	pending, failed := list(journal.StatusPending), list(journal.StatusFailed)
	listed := func(schedule, warehouse string) stock.ScheduleRuns {
		var r stock.ScheduleRuns
		for _, op := range pending {
			if op.ExternalID == schedule+":"+warehouse {
				r.Pending++
			}
		}
		for _, op := range failed {
			if op.ExternalID == schedule+":"+warehouse {
				r.LastFailed, r.LastError = op.Key, op.LastError
				break
			}
		}
		return r
	}
	for _, tc := range []struct {
		schedule, warehouse string
		want                stock.ScheduleRuns
	}{
		{"main", "WH1", stock.ScheduleRuns{Pending: 3, LastFailed: newer, LastError: "too late: the slot ended"}},
		{"main", "WH2", stock.ScheduleRuns{Pending: 1, LastFailed: wh2, LastError: "unknown warehouse WH2"}},
		{"other", "WH1", stock.ScheduleRuns{Pending: 1}},
		{stock.Manual, "WH1", stock.ScheduleRuns{LastFailed: manual, LastError: "1C is down"}},
		{"main", "WH3", stock.ScheduleRuns{}},
	} {
		got := runs(tc.schedule, tc.warehouse)
		if got != tc.want {
			t.Errorf("schedule runs %s:%s: got %+v, want %+v", tc.schedule, tc.warehouse, got, tc.want)
		}
		if l := listed(tc.schedule, tc.warehouse); got != l {
			t.Errorf("schedule runs %s:%s: got %+v, journal List says %+v", tc.schedule, tc.warehouse, got, l)
		}
	}

	// Requeued, the newest failure is pending again: the one before it is the last.
	if _, err := e.j.Requeue(t.Context(), newer); err != nil {
		t.Fatal(err)
	}
	if got, want := runs("main", "WH1"), (stock.ScheduleRuns{Pending: 4, LastFailed: older, LastError: "1C timed out"}); got != want {
		t.Errorf("schedule runs main:WH1 after a requeue: got %+v, want %+v", got, want)
	}
}
