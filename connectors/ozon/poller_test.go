package ozon_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/ordersync/ordersync/connectors"
	"github.com/ordersync/ordersync/connectors/ozon"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/order"
	"github.com/ordersync/ordersync/internal/sim"
	"github.com/ordersync/ordersync/internal/sim/ozonsim"
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

func newPoller(c *ozon.Connector, db *postgres.DB, clock *time.Time, skus *connectors.SKUMap) *connectors.Poller {
	return connectors.NewPoller(c, connectors.PollerConfig{
		Lookback: 72 * time.Hour,
		Journal:  db.Journal(),
		Cursors:  db.Cursors(),
		SKUs:     skus,
		Now:      func() time.Time { return *clock },
	})
}

func operations(t *testing.T, db *postgres.DB) map[string]journal.Operation {
	t.Helper()
	ops, err := db.Journal().List(context.Background(), journal.Filter{Source: "ozon", Limit: 1000})
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
	s, c := newTest(t, ozonsim.Options{}, ozon.Config{})
	db := openDB(t)
	ctx := context.Background()
	clock := now
	numbers := seed(s, 5)
	p := newPoller(c, db, &clock, nil)

	st, err := p.PollOnce(ctx)
	if err != nil || st.Registered != 5 || st.Duplicates != 0 {
		t.Fatalf("first poll: %+v, %v: want 5 registered", st, err)
	}
	late := posting(50, now.Add(-30*time.Minute)) // appears after the first poll, created before it
	s.AddPosting(late)
	clock = clock.Add(time.Hour) // the next window overlaps the first by the look-back
	st, err = p.PollOnce(ctx)
	if err != nil || st.Registered != 1 || st.Duplicates != 5 || st.Conflicts != 0 {
		t.Fatalf("second poll: %+v, %v: want 1 registered, 5 duplicates", st, err)
	}
	ops := operations(t, db)
	if len(ops) != 6 {
		t.Fatalf("%d operations, want 6", len(ops))
	}
	for _, pn := range append(numbers, late.PostingNumber) {
		op, ok := ops["ozon:posting:"+pn+":create"]
		if !ok || op.Status != journal.StatusPending || op.ExternalID != pn || op.Kind != order.KindCreate {
			t.Errorf("%s: %+v", pn, op)
		}
	}
	var o order.Order
	if err := json.Unmarshal(ops["ozon:posting:"+late.PostingNumber+":create"].Payload, &o); err != nil ||
		o.Source != "ozon" || o.Warehouse != "WH1" || !o.Lines[0].Price.Equal(decimal.NewFromInt(1530)) {
		t.Errorf("payload: %+v, %v", o, err)
	}
	cur, err := db.Cursors().Cursor(ctx, "ozon")
	if err != nil || !cur.Position.Equal(clock) || cur.LastError != "" {
		t.Errorf("cursor %+v, %v", cur, err)
	}
}

func TestPollerRestartMidListingLosesNothing(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"v4", "v3"} {
		s, c, cfg := newTestConfig(t, ozonsim.Options{}, ozon.Config{APIVersion: v, PageSize: 2})
		db := openDB(t)
		ctx := context.Background()
		clock := now
		numbers := seed(s, 7)
		s.Faults.Add(1, sim.Fault{Kind: sim.Malformed, After: 1}) // the second page of the first listing

		st, err := newPoller(c, db, &clock, nil).PollOnce(ctx)
		if err == nil || st.Registered != 2 {
			t.Fatalf("%s: interrupted poll: %+v, %v: want 2 registered and an error", v, st, err)
		}
		cur, _ := db.Cursors().Cursor(ctx, "ozon")
		if !cur.Position.IsZero() || !strings.Contains(cur.LastError, "malformed") {
			t.Fatalf("%s: cursor after the failure %+v: want no position and the error", v, cur)
		}

		// The process restarts: a new connector and poller on the same database.
		c2, err := ozon.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		clock = clock.Add(time.Minute)
		st, err = newPoller(c2, db, &clock, nil).PollOnce(ctx)
		if err != nil || st.Registered != 5 || st.Duplicates != 2 {
			t.Fatalf("%s: poll after restart: %+v, %v: want 5 registered, 2 duplicates", v, st, err)
		}
		ops := operations(t, db)
		for _, pn := range numbers {
			if _, ok := ops["ozon:posting:"+pn+":create"]; !ok {
				t.Errorf("%s: %s lost", v, pn)
			}
		}
		if len(ops) != 7 {
			t.Errorf("%s: %d operations, want 7", v, len(ops))
		}
		if cur, _ := db.Cursors().Cursor(ctx, "ozon"); !cur.Position.Equal(clock) {
			t.Errorf("%s: cursor %v, want %v", v, cur.Position, clock)
		}
	}
}

func TestPollerUnmappedSKUFailsOnlyThatPosting(t *testing.T) {
	t.Parallel()
	s, c := newTest(t, ozonsim.Options{}, ozon.Config{})
	db := openDB(t)
	path := filepath.Join(t.TempDir(), "sku-map.csv")
	if err := os.WriteFile(path, []byte("marketplace,marketplace_sku,onec_sku\nozon,SKU-1,УТ-0001\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	skus, err := connectors.NewSKUMap(path)
	if err != nil {
		t.Fatal(err)
	}
	mapped := posting(1, now.Add(-time.Hour))
	unmapped := posting(2, now.Add(-time.Hour), ozonsim.Product{OfferID: "SKU-404", Quantity: 1, Price: decimal.NewFromInt(10)})
	s.AddPosting(mapped)
	s.AddPosting(unmapped)
	clock := now
	st, err := newPoller(c, db, &clock, skus).PollOnce(context.Background())
	if err != nil || st.Registered != 1 || st.Failed != 1 {
		t.Fatalf("poll: %+v, %v: want 1 registered, 1 failed, and no error", st, err)
	}
	ops := operations(t, db)
	good := ops["ozon:posting:"+mapped.PostingNumber+":create"]
	var o order.Order
	if err := json.Unmarshal(good.Payload, &o); good.Status != journal.StatusPending || err != nil || o.Lines[0].SKU != "УТ-0001" {
		t.Errorf("mapped posting: %+v (%s)", good, good.Payload)
	}
	bad := ops["ozon:posting:"+unmapped.PostingNumber+":create"]
	if bad.Status != journal.StatusFailed || !strings.Contains(bad.LastError, "SKU-404") || !strings.Contains(bad.LastError, "lines[0].sku") {
		t.Errorf("unmapped posting: %+v, want failed naming lines[0].sku and SKU-404", bad)
	}
}

func TestPollerRegistersCancel(t *testing.T) {
	t.Parallel()
	s, c := newTest(t, ozonsim.Options{}, ozon.Config{})
	db := openDB(t)
	old := posting(1, now.Add(-10*24*time.Hour))
	s.AddPosting(old)
	if err := s.Cancel(old.PostingNumber, "Покупатель отменил заказ", "Клиент"); err != nil {
		t.Fatal(err)
	}
	clock := now.Add(time.Minute)
	st, err := newPoller(c, db, &clock, nil).PollOnce(context.Background())
	if err != nil || st.Cancels != 1 {
		t.Fatalf("poll: %+v, %v: want 1 cancel", st, err)
	}
	op, ok := operations(t, db)["ozon:posting:"+old.PostingNumber+":cancel"]
	var cp connectors.CancelPayload
	if !ok || op.Kind != order.KindCancel || json.Unmarshal(op.Payload, &cp) != nil ||
		cp.CreateKey != "ozon:posting:"+old.PostingNumber+":create" || !strings.Contains(cp.Reason, "Покупатель отменил заказ") {
		t.Errorf("cancel operation %+v (%s)", op, op.Payload)
	}
}
