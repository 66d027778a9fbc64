package wildberries

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ordersync/ordersync/connectors"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/order"
	"github.com/ordersync/ordersync/internal/sim"
	"github.com/ordersync/ordersync/internal/sim/wbsim"
	"github.com/ordersync/ordersync/internal/store/postgres"
	"github.com/ordersync/ordersync/internal/testdb"
)

func openDB(t *testing.T) *postgres.DB {
	t.Helper()
	db, err := postgres.Open(context.Background(), postgres.Config{URL: testdb.URL(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	if _, err := db.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return db
}

func newPoller(c *Connector, db *postgres.DB, now *time.Time, skus *connectors.SKUMap) *connectors.Poller {
	return connectors.NewPoller(c, connectors.PollerConfig{
		Lookback: 72 * time.Hour,
		Journal:  db.Journal(),
		Cursors:  db.Cursors(),
		SKUs:     skus,
		Now:      func() time.Time { return *now },
	})
}

func wbOperations(t *testing.T, db *postgres.DB) map[string]journal.Operation {
	t.Helper()
	ops, err := db.Journal().List(context.Background(), journal.Filter{Source: "wb", Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]journal.Operation{}
	for _, op := range ops {
		m[op.Key] = op
	}
	return m
}

func TestPollerOverlapRegistersOnce(t *testing.T) {
	t.Parallel()
	s, c := newTest(t)
	db := openDB(t)
	now := testNow
	for i := range 5 {
		s.AddOrder(wbOrder(int64(900+i), now.Add(-time.Duration(i+1)*time.Hour)))
	}
	p := newPoller(c, db, &now, nil)
	ctx := context.Background()

	st, err := p.PollOnce(ctx)
	if err != nil || st.Registered != 5 {
		t.Fatalf("first poll: %+v, %v", st, err)
	}
	// An order that appears late, created before the first poll's end.
	s.AddOrder(wbOrder(950, now.Add(-30*time.Minute)))
	now = now.Add(time.Hour) // the next window overlaps the first by the look-back
	st, err = p.PollOnce(ctx)
	if err != nil || st.Registered != 1 || st.Duplicates != 5 || st.Conflicts != 0 {
		t.Fatalf("second poll: %+v, %v: want 1 registered and 5 duplicates", st, err)
	}
	ops := wbOperations(t, db)
	if len(ops) != 6 {
		t.Fatalf("%d operations, want 6", len(ops))
	}
	op, ok := ops["wb:order:950:create"]
	if !ok || op.Status != journal.StatusPending || op.ExternalID != "950" {
		t.Fatalf("late order: %+v", op)
	}
	var o order.Order
	if err := json.Unmarshal(op.Payload, &o); err != nil || o.Source != "wb" || o.Lines[0].SKU != "ART-950" {
		t.Fatalf("payload %s: %v", op.Payload, err)
	}
	cur, err := db.Cursors().Cursor(ctx, "wb")
	if err != nil || !cur.Position.Equal(now) || cur.LastError != "" {
		t.Fatalf("cursor %+v, %v", cur, err)
	}
}

func TestPollerRestartMidListingLosesNothing(t *testing.T) {
	t.Parallel()
	s, c := newTest(t, func(cfg *Config) { cfg.PageSize = 10 })
	db := openDB(t)
	now := testNow
	for i := range 25 {
		o := wbOrder(int64(4000+i), now.Add(-time.Duration(i+1)*time.Minute))
		o.SupplierStatus = "confirm"
		s.AddOrder(o)
	}
	s.Faults.Add(1, sim.Fault{Op: wbsim.OpOrders, After: 1, Kind: sim.Malformed}) // the second page
	ctx := context.Background()

	st, err := newPoller(c, db, &now, nil).PollOnce(ctx)
	if err == nil || st.Registered != 10 {
		t.Fatalf("interrupted poll: %+v, %v: want 10 registered and an error", st, err)
	}
	cur, _ := db.Cursors().Cursor(ctx, "wb")
	if !cur.Position.IsZero() || !strings.Contains(cur.LastError, "malformed") {
		t.Fatalf("cursor after the failure: %+v: want no position and the error", cur)
	}

	// The process restarts: a new connector and poller on the same database.
	c2, err := New(c.cfg)
	if err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Minute)
	st, err = newPoller(c2, db, &now, nil).PollOnce(ctx)
	if err != nil || st.Registered != 15 || st.Duplicates != 10 {
		t.Fatalf("poll after restart: %+v, %v: want 15 registered, 10 duplicates", st, err)
	}
	ops := wbOperations(t, db)
	for i := range 25 {
		key := order.Key("wb", "order", strconv.Itoa(4000+i), "create")
		if _, ok := ops[key]; !ok {
			t.Errorf("%s lost", key)
		}
	}
	if len(ops) != 25 {
		t.Fatalf("%d operations, want 25", len(ops))
	}
	cur, _ = db.Cursors().Cursor(ctx, "wb")
	if !cur.Position.Equal(now) {
		t.Fatalf("cursor %v, want %v", cur.Position, now)
	}
}

func TestPollerUnmappedSKUFailsOnlyThatOrder(t *testing.T) {
	t.Parallel()
	s, c := newTest(t)
	db := openDB(t)
	path := filepath.Join(t.TempDir(), "sku-map.csv")
	csv := "marketplace,marketplace_sku,onec_sku\nwb,ART-1,1C-0001\nwb,ART-3,1C-0003\n"
	if err := os.WriteFile(path, []byte(csv), 0o600); err != nil {
		t.Fatal(err)
	}
	skus, err := connectors.NewSKUMap(path)
	if err != nil {
		t.Fatal(err)
	}
	now := testNow
	for id := int64(1); id <= 3; id++ {
		s.AddOrder(wbOrder(id, now.Add(-time.Hour)))
	}
	cancelled := wbOrder(4, now.Add(-time.Hour))
	cancelled.Article = "ART-1"
	cancelled.SupplierStatus, cancelled.WBStatus = "new", "declined_by_client"
	s.AddOrder(cancelled)

	st, err := newPoller(c, db, &now, skus).PollOnce(context.Background())
	if err != nil || st.Registered != 3 || st.Failed != 1 || st.Cancels != 1 {
		t.Fatalf("poll: %+v, %v: want 3 registered, 1 failed, 1 cancel", st, err)
	}
	ops := wbOperations(t, db)
	failed := ops["wb:order:2:create"]
	if failed.Status != journal.StatusFailed || !strings.Contains(failed.LastError, "lines[0].sku") || !strings.Contains(failed.LastError, "ART-2") {
		t.Fatalf("order 2: %s %q: want failed naming lines[0].sku and ART-2", failed.Status, failed.LastError)
	}
	for _, key := range []string{"wb:order:1:create", "wb:order:3:create", "wb:order:4:create"} {
		op := ops[key]
		var o order.Order
		if err := json.Unmarshal(op.Payload, &o); err != nil || op.Status != journal.StatusPending || !strings.HasPrefix(o.Lines[0].SKU, "1C-") {
			t.Errorf("%s: %s %s", key, op.Status, op.Payload)
		}
	}
	cancel, ok := ops["wb:order:4:cancel"]
	var cp connectors.CancelPayload
	if !ok || json.Unmarshal(cancel.Payload, &cp) != nil || cp.CreateKey != "wb:order:4:create" || !strings.Contains(cp.Reason, "declined_by_client") {
		t.Fatalf("cancel of order 4: %+v", cancel)
	}
	keys := make([]string, 0, len(ops))
	for k := range ops {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if len(keys) != 5 {
		t.Fatalf("operations %v, want 4 creates and 1 cancel", keys)
	}
}

func TestPollerRegistersCancel(t *testing.T) {
	t.Parallel()
	s, c := newTest(t)
	db := openDB(t)
	now := testNow
	s.AddOrder(wbOrder(700, now.Add(-time.Hour)))
	p := newPoller(c, db, &now, nil)
	ctx := context.Background()
	if st, err := p.PollOnce(ctx); err != nil || st.Registered != 1 || st.Cancels != 0 {
		t.Fatalf("first poll: %+v, %v", st, err)
	}
	s.SetStatus(700, "cancel", "canceled_by_client")
	now = now.Add(time.Minute)
	if st, err := p.PollOnce(ctx); err != nil || st.Cancels != 1 {
		t.Fatalf("poll after the cancellation: %+v, %v; want its cancel registered", st, err)
	}
	ops := wbOperations(t, db)
	cancel, ok := ops["wb:order:700:cancel"]
	if !ok || cancel.Kind != order.KindCancel || cancel.Status != journal.StatusPending {
		t.Fatalf("cancel operation %+v (present %v), want a pending order.cancel", cancel, ok)
	}
	var payload order.Cancel
	if err := json.Unmarshal(cancel.Payload, &payload); err != nil || payload.CreateKey != "wb:order:700:create" {
		t.Fatalf("cancel payload %s (%v), want it to name the create", cancel.Payload, err)
	}
	// Polling again registers nothing more.
	if st, err := p.PollOnce(ctx); err != nil || st.Cancels != 0 || st.Registered != 0 {
		t.Fatalf("third poll: %+v, %v; want nothing new", st, err)
	}
}
