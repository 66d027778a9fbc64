package service

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/stock"
	"github.com/ordersync/ordersync/internal/stock/scheduler"
	"github.com/ordersync/ordersync/internal/store/sqlite"
)

func almaty(t *testing.T) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation("Asia/Almaty")
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func item(sku, q, p string) stock.Item {
	return stock.Item{SKU: sku, Quantity: decimal.RequireFromString(q), Price: decimal.RequireFromString(p)}
}

// TestDiffItems: a SKU only in A is removed, only in B added, in both with another
// quantity or price changed; equal decimals of another scale are no change; nothing
// changed is an empty list, not nil.
func TestDiffItems(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		a, b []stock.Item
		want []Change
	}{
		{"both empty", nil, nil, []Change{}},
		{"the same", []stock.Item{item("A", "1", "10")}, []stock.Item{item("A", "1.00", "10.0")}, []Change{}},
		{"all added", nil, []stock.Item{item("A", "1", "10"), item("B", "2", "20")}, []Change{
			{SKU: "A", Change: "added", QuantityB: "1", PriceB: "10"}, {SKU: "B", Change: "added", QuantityB: "2", PriceB: "20"}}},
		{"all removed", []stock.Item{item("A", "1", "10")}, nil, []Change{{SKU: "A", Change: "removed", QuantityA: "1", PriceA: "10"}}},
		{"interleaved",
			[]stock.Item{item("A", "1", "10"), item("C", "3", "30"), item("D", "4", "40"), item("F", "-1", "1")},
			[]stock.Item{item("B", "2", "20"), item("C", "3", "31"), item("D", "5", "40"), item("E", "0", "0"), item("F", "-1", "1")},
			[]Change{
				{SKU: "A", Change: "removed", QuantityA: "1", PriceA: "10"},
				{SKU: "B", Change: "added", QuantityB: "2", PriceB: "20"},
				{SKU: "C", Change: "changed", QuantityA: "3", QuantityB: "3", PriceA: "30", PriceB: "31"},
				{SKU: "D", Change: "changed", QuantityA: "4", QuantityB: "5", PriceA: "40", PriceB: "40"},
				{SKU: "E", Change: "added", QuantityB: "0", PriceB: "0"},
			}},
	} {
		got := DiffItems(tc.a, tc.b)
		if got == nil || !slices.Equal(got, tc.want) {
			t.Errorf("%s: got %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// fakeStock is the stock store of the unit tests: snapshots by key, publishes.
type fakeStock struct {
	Store
	mu        sync.Mutex
	snaps     map[string]stock.Snapshot
	publishes []stock.Publish // newest last
	latestAt  []time.Time     // the times Latest was asked for
}

func (f *fakeStock) Snapshot(_ context.Context, key string) (stock.Snapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.snaps[key]
	if !ok {
		return stock.Snapshot{}, stock.ErrNoSnapshot
	}
	return s, nil
}

func (f *fakeStock) Latest(_ context.Context, warehouse string, at time.Time) (stock.Snapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.latestAt = append(f.latestAt, at)
	for _, s := range f.snaps {
		if s.Warehouse == warehouse {
			return s, nil
		}
	}
	return stock.Snapshot{}, stock.ErrNoSnapshot
}

func (f *fakeStock) Publishes(_ context.Context, pf stock.PublishFilter) ([]stock.Publish, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []stock.Publish
	for i := len(f.publishes) - 1; i >= 0; i-- {
		if p := f.publishes[i]; p.Marketplace == pf.Marketplace && p.Warehouse == pf.Warehouse {
			out = append(out, p)
		}
	}
	return out, nil
}

func (f *fakeStock) publish(p stock.Publish) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.publishes = append(f.publishes, p)
}

// fakeJournal registers operations in memory; taken names keys Get finds.
type fakeJournal struct {
	mu    sync.Mutex
	ops   map[string]journal.Operation
	taken func(key string) bool
}

func (j *fakeJournal) Register(_ context.Context, op journal.NewOperation) (journal.Registration, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.ops == nil {
		j.ops = map[string]journal.Operation{}
	}
	saved := journal.Operation{Key: op.Key, Kind: op.Kind, Source: op.Source, ExternalID: op.ExternalID, Payload: op.Payload,
		Status: journal.StatusPending}
	j.ops[op.Key] = saved
	return journal.Registration{Outcome: journal.Registered, Operation: saved}, nil
}

func (j *fakeJournal) Get(_ context.Context, key string) (journal.Operation, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if op, ok := j.ops[key]; ok {
		return op, nil
	}
	if j.taken != nil && j.taken(key) {
		return journal.Operation{Key: key}, nil
	}
	return journal.Operation{}, journal.ErrNotFound
}

// relayFunc is a Relay.
type relayFunc func(ctx context.Context) (int, error)

func (f relayFunc) RunOnce(ctx context.Context) (int, error) { return f(ctx) }

// takeWorld is a service over the fakes whose Run stores each snapshot done, with
// one item.
func takeWorld(t *testing.T, cfg Config) (*Service, *fakeStock, *fakeJournal) {
	st := &fakeStock{snaps: map[string]stock.Snapshot{}}
	j := &fakeJournal{}
	cfg.Journal, cfg.Stock, cfg.Location = j, st, almaty(t)
	cfg.Run = func(_ context.Context, keys []string) ([]journal.Operation, error) {
		var ops []journal.Operation
		for _, k := range keys {
			op, _ := j.Get(context.Background(), k)
			op.Status = journal.StatusDone
			st.mu.Lock()
			st.snaps[k] = stock.Snapshot{Key: k, ItemCount: 1, Warnings: []string{}}
			st.mu.Unlock()
			ops = append(ops, op)
		}
		return ops, nil
	}
	return New(cfg), st, j
}

// TestTakeDeliversThePublishesItself: with no service running (Config.Relay gives
// a relay), Take runs relay rounds until each marketplace that is sent stock has
// finished its publish, and says it delivered them; Kaspi is served from the feed.
func TestTakeDeliversThePublishesItself(t *testing.T) {
	t.Parallel()
	var st *fakeStock
	var key atomic.Value
	rounds := 0
	svc, st, _ := takeWorld(t, Config{
		PublishTo: func(string) []string { return []string{stock.Kaspi, stock.Ozon, stock.Wildberries} },
		Relay: func() (Relay, error) {
			return relayFunc(func(context.Context) (int, error) {
				rounds++
				now := time.Now()
				k, _ := key.Load().(string)
				switch rounds {
				case 1:
					st.publish(stock.Publish{SnapshotKey: k, Marketplace: stock.Ozon, Warehouse: "WH1", FinishedAt: &now, Sent: 1})
					return 1, nil
				case 2:
					st.publish(stock.Publish{SnapshotKey: k, Marketplace: stock.Wildberries, Warehouse: "WH1"}) // started only
					return 1, nil
				default:
					st.publish(stock.Publish{SnapshotKey: k, Marketplace: stock.Wildberries, Warehouse: "WH1", FinishedAt: &now, Sent: 1})
					return 1, nil
				}
			}), nil
		},
	})
	// Run stores the snapshot; the relay reads its key from the journal's registration.
	run := svc.cfg.Run
	svc.cfg.Run = func(ctx context.Context, keys []string) ([]journal.Operation, error) {
		key.Store(keys[0])
		return run(ctx, keys)
	}
	res, err := svc.Take(context.Background(), TakeRequest{Warehouses: []string{"WH1"}, Wait: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Foreground || len(res.Snapshots) != 1 {
		t.Fatalf("got %+v, want one snapshot published in the foreground", res)
	}
	o := res.Snapshots[0]
	if !o.Done() || o.Items != 1 || len(o.Pending) != 0 || len(o.Published) != 2 || o.Feed == "" || o.Note != "" {
		t.Fatalf("snapshot %+v, want done, published to ozon and wildberries, served by the Kaspi feed", o)
	}
	if got := []string{o.Published[0].Marketplace, o.Published[1].Marketplace}; !slices.Equal(got, []string{stock.Ozon, stock.Wildberries}) {
		t.Errorf("published to %v", got)
	}
	if rounds != 3 {
		t.Errorf("%d relay rounds, want 3", rounds)
	}
}

// TestTakeLeavesThePublishesToARunningService: Config.Relay gives no relay (a
// service runs): Take waits, delivering nothing, and reports the publishes still
// pending as the service's.
func TestTakeLeavesThePublishesToARunningService(t *testing.T) {
	t.Parallel()
	svc, _, _ := takeWorld(t, Config{
		PublishTo: func(string) []string { return []string{stock.Ozon} },
		Relay:     func() (Relay, error) { return nil, nil },
	})
	res, err := svc.Take(context.Background(), TakeRequest{Warehouses: []string{"WH1"}, Wait: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if res.Foreground || len(res.Snapshots) != 1 || !slices.Equal(res.Snapshots[0].Pending, []string{stock.Ozon}) {
		t.Fatalf("got %+v, want ozon pending, left to the service", res)
	}
}

// TestTakeWithASchedulePublishesToItsMarketplaces: a schedule's marketplaces, not
// the warehouse's, and the note names the schedule when it has none.
func TestTakeWithASchedulePublishesToItsMarketplaces(t *testing.T) {
	t.Parallel()
	relays := 0
	svc, _, j := takeWorld(t, Config{
		PublishTo: func(string) []string { return []string{stock.Ozon} },
		Relay:     func() (Relay, error) { relays++; return nil, nil },
	})
	res, err := svc.Take(context.Background(), TakeRequest{Warehouses: []string{"WH1", "WH2"},
		Schedule: &scheduler.Schedule{Name: "night", Warehouses: []string{"WH1", "WH2"}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Snapshots) != 2 || relays != 0 {
		t.Fatalf("got %+v after %d relays, want two snapshots and no relay (nothing to publish)", res, relays)
	}
	for _, o := range res.Snapshots {
		if o.Note != "stored, published nowhere: schedule night publishes to no marketplace" {
			t.Errorf("%s: note %q", o.Key, o.Note)
		}
		if len(j.ops[o.Key].Payload) == 0 || !slices.Contains([]string{"WH1", "WH2"}, o.Warehouse) {
			t.Errorf("%s: %+v", o.Key, j.ops[o.Key])
		}
	}
}

// TestTakeWaitsForAFreeSecond: a manual snapshot's key is to the second; when one
// of the warehouses' key of this second is taken, Take waits for the next second.
func TestTakeWaitsForAFreeSecond(t *testing.T) {
	t.Parallel()
	loc := almaty(t)
	first := time.Now().Truncate(time.Second)
	svc, _, j := takeWorld(t, Config{})
	j.taken = func(key string) bool {
		return key == stock.Key(stock.Manual, "WH2", stock.ManualLabel(first, loc))
	}
	res, err := svc.Take(context.Background(), TakeRequest{Warehouses: []string{"WH1", "WH2"}})
	if err != nil {
		t.Fatal(err)
	}
	for i, wh := range []string{"WH1", "WH2"} {
		if k := res.Snapshots[i].Key; k == stock.Key(stock.Manual, wh, stock.ManualLabel(first, loc)) {
			t.Errorf("%s: key %s is of the taken second", wh, k)
		}
	}
	if res.Snapshots[0].Key[len("stock:manual:WH1:"):] != res.Snapshots[1].Key[len("stock:manual:WH2:"):] {
		t.Errorf("keys %s and %s are of two times", res.Snapshots[0].Key, res.Snapshots[1].Key)
	}
}

// TestTakeRefusesABadWarehouse: no warehouse, or one that is empty or has a ':',
// registers nothing.
func TestTakeRefusesABadWarehouse(t *testing.T) {
	t.Parallel()
	svc, _, j := takeWorld(t, Config{})
	for _, whs := range [][]string{nil, {""}, {"WH1", "WH:2"}} {
		if _, err := svc.Take(context.Background(), TakeRequest{Warehouses: whs}); err == nil {
			t.Errorf("%q: no error", whs)
		}
	}
	if len(j.ops) != 0 {
		t.Errorf("registered %d operations", len(j.ops))
	}
}

// TestFind: a key, a time in a warehouse (read in stock.timezone; a date is its
// end), and the errors of each lookup that cannot be made or finds nothing.
func TestFind(t *testing.T) {
	t.Parallel()
	loc := almaty(t)
	st := &fakeStock{snaps: map[string]stock.Snapshot{"stock:main:WH1:2026-09-16T10:00": {Key: "stock:main:WH1:2026-09-16T10:00", Warehouse: "WH1"}}}
	svc := New(Config{Stock: st, Location: loc, Warehouses: []string{"WH1", "WH2"}})
	ctx := context.Background()
	if s, err := svc.Find(ctx, "stock:main:WH1:2026-09-16T10:00", ""); err != nil || s.Warehouse != "WH1" {
		t.Errorf("by key: %+v %v", s, err)
	}
	var nf *NotFoundError
	if _, err := svc.Find(ctx, "stock:main:WH1:2001-01-01T00:00", ""); !errors.As(err, &nf) || nf.Warehouse != "" ||
		!errors.Is(err, stock.ErrNoSnapshot) || err.Error() != "no snapshot stock:main:WH1:2001-01-01T00:00 is stored" {
		t.Errorf("an unknown key: %v", err)
	}
	var we *WarehouseError
	if _, err := svc.Find(ctx, "2026-09-16T10:00", ""); !errors.As(err, &we) || !slices.Equal(we.Warehouses, []string{"WH1", "WH2"}) {
		t.Errorf("a time without a warehouse: %v", err)
	}
	var te *TimeError
	if _, err := svc.Find(ctx, "yesterday", "WH1"); !errors.As(err, &te) ||
		err.Error() != `"yesterday" is not a time: give 2026-09-16T10:00 (in Asia/Almaty), 2026-09-16, or an RFC 3339 time` {
		t.Errorf("not a time: %v", err)
	}
	if s, err := svc.Find(ctx, "2026-09-16", "WH1"); err != nil || s.Warehouse != "WH1" {
		t.Errorf("by date: %+v %v", s, err)
	}
	if got, want := st.latestAt[len(st.latestAt)-1], time.Date(2026, 9, 17, 0, 0, 0, 0, loc).Add(-time.Nanosecond); !got.Equal(want) {
		t.Errorf("a date is read as %s, want its end %s", got, want)
	}
	if _, err := svc.Find(ctx, "2026-09-16T10:00", "WH2"); !errors.As(err, &nf) || nf.Warehouse != "WH2" ||
		err.Error() != "no snapshot of WH2 at or before 2026-09-16T10:00" {
		t.Errorf("nothing in force: %v", err)
	}
	for text, want := range map[string]time.Time{
		"2026-09-16T10:00":          time.Date(2026, 9, 16, 10, 0, 0, 0, loc),
		"2026-09-16 10:00:05":       time.Date(2026, 9, 16, 10, 0, 5, 0, loc),
		"2026-09-16T10:00:00+03:00": time.Date(2026, 9, 16, 7, 0, 0, 0, time.UTC),
	} {
		if got, err := svc.ParseTime(text); err != nil || !got.Equal(want) {
			t.Errorf("ParseTime(%q) = %s %v, want %s", text, got, err, want)
		}
	}
}

// statusWorld is a service over a real SQLite store with one schedule, main, of
// WH1, and a clock that moves a millisecond at each reading.
func statusWorld(t *testing.T) (*Service, *sqlite.DB) {
	t.Helper()
	var tick atomic.Int64
	start := time.Date(2026, 9, 16, 5, 0, 0, 0, time.UTC)
	now := func() time.Time { return start.Add(time.Duration(tick.Add(1)) * time.Millisecond) }
	db, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(t.TempDir(), "ordersync.db"), Now: now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	spec, err := stock.ParseSpec("@every 1h", almaty(t))
	if err != nil {
		t.Fatal(err)
	}
	return New(Config{Journal: db.Journal(), Stock: db.Stock(), Location: almaty(t), Now: now,
		Schedules: []scheduler.Schedule{{Name: "main", Spec: spec, Warehouses: []string{"WH1"}, Publish: []string{stock.Ozon}}}}), db
}

// snapshotOp is the operation of schedule's snapshot of warehouse labelled label.
func snapshotOp(t *testing.T, schedule, warehouse, label string) journal.NewOperation {
	t.Helper()
	return journal.NewOperation{Key: stock.Key(schedule, warehouse, label), Kind: stock.KindSnapshot, Source: stock.Source,
		ExternalID: schedule + ":" + warehouse, Payload: []byte(fmt.Sprintf(`{"schedule":%q,"warehouse":%q,"label":%q}`, schedule, warehouse, label))}
}

// TestStatusCountsPastTheListLimits: stock status used to list the newest 1,000
// pending and 100 failed stock operations and filter them in memory. With 1,001
// snapshots of main pending it said 1,000; with main's last failure older than
// 100 failed manual snapshots it said main had none. It counts and finds them in
// the store now.
func TestStatusCountsPastTheListLimits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, db := statusWorld(t)
	js := db.Journal()
	const pending = 1001
	for i := range pending {
		if _, err := js.Register(ctx, snapshotOp(t, "main", "WH1", fmt.Sprintf("slot-%04d", i))); err != nil {
			t.Fatal(err)
		}
	}
	failed := snapshotOp(t, "main", "WH1", "slot-failed")
	if _, err := js.RegisterFailed(ctx, failed, "1C is down"); err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		if _, err := js.RegisterFailed(ctx, snapshotOp(t, stock.Manual, "WH1", fmt.Sprintf("manual-%03d", i)), "unknown warehouse"); err != nil {
			t.Fatal(err)
		}
	}
	st, err := svc.Status(ctx, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Schedules) != 1 {
		t.Fatalf("schedules %+v, want main's WH1", st.Schedules)
	}
	row := st.Schedules[0]
	if row.Pending != pending {
		t.Errorf("pending %d, want %d", row.Pending, pending)
	}
	if want := failed.Key + ": 1C is down"; row.Failed != want {
		t.Errorf("last failure %q, want %q", row.Failed, want)
	}
	if row.Name != "main" || row.Warehouse != "WH1" || row.Cron != "@every 1h" || row.Last != "" || row.Next.IsZero() {
		t.Errorf("row %+v", row)
	}
	if st.Publishes == nil || st.Problems == nil || st.Kaspi != nil {
		t.Errorf("status %+v: want no publish, no problem and no Kaspi", st)
	}
}
