package kaspi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/ordersync/ordersync/connectors"
	"github.com/ordersync/ordersync/connectors/kaspi"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/order"
	"github.com/ordersync/ordersync/internal/sim/kaspisim"
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

func newPoller(c *kaspi.Connector, db *postgres.DB, now *time.Time, skus *connectors.SKUMap) *connectors.Poller {
	return connectors.NewPoller(c, connectors.PollerConfig{
		Lookback: 72 * time.Hour,
		Journal:  db.Journal(),
		Cursors:  db.Cursors(),
		SKUs:     skus,
		Now:      func() time.Time { return *now },
	})
}

func operations(t *testing.T, db *postgres.DB) map[string]journal.Operation {
	t.Helper()
	ops, err := db.Journal().List(context.Background(), journal.Filter{Source: "kaspi", Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]journal.Operation{}
	for _, op := range ops {
		m[op.Key] = op
	}
	return m
}

// An order seen by two overlapping polls is registered once, and so is an order the
// connector accepted between them: acceptance moves it from NEW to PICKUP, and its
// mapped payload must not change with it.
func TestPollerOverlapRegistersOnce(t *testing.T) {
	t.Parallel()
	s, c := newEnv(t, kaspisim.Options{}, kaspi.Config{})
	db := openDB(t)
	now := time.Now().Truncate(time.Millisecond)
	for i := range 5 {
		mustAdd(t, s, simOrder(fmt.Sprintf("710%d", i), now.Add(-time.Duration(i+1)*time.Hour)))
	}
	p := newPoller(c, db, &now, nil)
	ctx := context.Background()
	st, err := p.PollOnce(ctx)
	if err != nil || st.Registered != 5 {
		t.Fatalf("first poll: %+v, %v; want 5 registered", st, err)
	}

	// 1C took two orders and the relay accepted them at Kaspi.
	for _, code := range []string{"7100", "7101"} {
		var o order.Order
		if err := json.Unmarshal(operations(t, db)["kaspi:order:"+code+":create"].Payload, &o); err != nil {
			t.Fatal(err)
		}
		if err := c.Publisher().Publish(ctx, created(t, o)); err != nil {
			t.Fatal(err)
		}
	}
	// An order that appears late, created before the first poll's end.
	mustAdd(t, s, simOrder("7150", now.Add(-30*time.Minute)))
	now = now.Add(time.Hour)
	st, err = p.PollOnce(ctx)
	if err != nil || st.Registered != 1 || st.Duplicates != 5 || st.Conflicts != 0 {
		t.Fatalf("second poll: %+v, %v; want 1 registered, 5 duplicates, no conflict", st, err)
	}
	ops := operations(t, db)
	if got, want := len(ops), 6; got != want {
		t.Fatalf("%d operations, want %d", got, want)
	}
	op := ops["kaspi:order:7150:create"]
	if op.Status != journal.StatusPending || op.ExternalID != "7150" {
		t.Errorf("late order: %+v", op)
	}
	cur, err := db.Cursors().Cursor(ctx, "kaspi")
	if err != nil || !cur.Position.Equal(now.UTC()) || cur.LastError != "" {
		t.Errorf("cursor %+v, %v; want position %s", cur, err, now.UTC())
	}
}

func TestPollerRestartMidListingLosesNothing(t *testing.T) {
	t.Parallel()
	s, c := newEnv(t, kaspisim.Options{}, kaspi.Config{})
	db := openDB(t)
	now := time.Now().Truncate(time.Millisecond)
	for i := range 250 {
		mustAdd(t, s, simOrder(fmt.Sprintf("72%03d", i), now.Add(-time.Duration(i+1)*time.Minute)))
	}
	s.InjectRawPage(1, `{"data":[{"type":"orders",`) // the listing breaks on its second page
	ctx := context.Background()

	st, err := newPoller(c, db, &now, nil).PollOnce(ctx)
	if err == nil || st.Registered != 100 {
		t.Fatalf("interrupted poll: %+v, %v; want 100 registered and an error", st, err)
	}
	cur, _ := db.Cursors().Cursor(ctx, "kaspi")
	if !cur.Position.IsZero() || !strings.Contains(cur.LastError, "page 1") {
		t.Fatalf("cursor after the failure: %+v; want no position and the error", cur)
	}

	// The process restarts: a new connector and poller on the same database.
	_, c2 := newEnvSameSim(t, s, testToken)
	now = now.Add(time.Minute)
	st, err = newPoller(c2, db, &now, nil).PollOnce(ctx)
	if err != nil || st.Registered != 150 || st.Duplicates != 100 {
		t.Fatalf("poll after restart: %+v, %v; want 150 registered, 100 duplicates", st, err)
	}
	if got, want := len(operations(t, db)), 250; got != want {
		t.Errorf("%d operations, want %d", got, want)
	}
	cur, _ = db.Cursors().Cursor(ctx, "kaspi")
	if !cur.Position.Equal(now.UTC()) {
		t.Errorf("cursor %v, want %v", cur.Position, now.UTC())
	}
}

func TestPollerRegistersCancellations(t *testing.T) {
	t.Parallel()
	s, c := newEnv(t, kaspisim.Options{}, kaspi.Config{})
	db := openDB(t)
	now := time.Now().Truncate(time.Millisecond)
	mustAdd(t, s, simOrder("7301", now.Add(-2*time.Hour)))
	never := simOrder("7302", now.Add(-2*time.Hour))
	never.State, never.Status, never.CancellationReason = kaspisim.StateArchive, kaspisim.StatusCancelled, "BUYER_CANCELLATION_BY_MERCHANT"
	mustAdd(t, s, never)
	p := newPoller(c, db, &now, nil)
	ctx := context.Background()
	if _, err := p.PollOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.SetStatus("7301", kaspisim.StatusCancelled); err != nil {
		t.Fatal(err)
	}
	if err := s.SetState("7301", kaspisim.StateArchive); err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Minute)
	st, err := p.PollOnce(ctx)
	if err != nil || st.Cancels != 1 {
		t.Fatalf("second poll: %+v, %v; want 1 cancel registered", st, err)
	}
	ops := operations(t, db)
	for key, want := range map[string]bool{
		"kaspi:order:7301:create": true, "kaspi:order:7301:cancel": true,
		"kaspi:order:7302:create": false, "kaspi:order:7302:cancel": true,
	} {
		if _, ok := ops[key]; ok != want {
			t.Errorf("%s registered: %v, want %v", key, ok, want)
		}
	}
	var cp connectors.CancelPayload
	if err := json.Unmarshal(ops["kaspi:order:7301:cancel"].Payload, &cp); err != nil {
		t.Fatal(err)
	}
	if cp.CreateKey != "kaspi:order:7301:create" || cp.ExternalID != "7301" || cp.Source != "kaspi" {
		t.Errorf("cancel payload %+v", cp)
	}
}

func TestPollerUnmappedSKUFailsOnlyThatOrder(t *testing.T) {
	t.Parallel()
	s, c := newEnv(t, kaspisim.Options{}, kaspi.Config{})
	db := openDB(t)
	path := filepath.Join(t.TempDir(), "sku-map.csv")
	if err := os.WriteFile(path, []byte("marketplace,marketplace_sku,onec_sku\nkaspi,SKU-7401,1C-0001\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	skus, err := connectors.NewSKUMap(path)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().Truncate(time.Millisecond)
	mustAdd(t, s, simOrder("7401", now.Add(-time.Hour)))
	mustAdd(t, s, simOrder("7402", now.Add(-time.Hour)))
	s.AddRawOrder(kaspisim.StateNew, now.Add(-time.Hour),
		`{"type":"orders","id":"raw","attributes":{"code":"7403","state":"NEW","status":"APPROVED_BY_BANK"}}`)
	s.AddRawOrder(kaspisim.StateNew, now.Add(-time.Hour), `{"type":"orders","attributes":{"code":{}}}`)

	st, err := newPoller(c, db, &now, skus).PollOnce(context.Background())
	if err != nil || st.Registered != 1 || st.Failed != 2 || st.Unreadable != 1 {
		t.Fatalf("poll: %+v, %v; want 1 registered, 2 failed, 1 unreadable", st, err)
	}
	ops := operations(t, db)
	good := ops["kaspi:order:7401:create"]
	var o order.Order
	if err := json.Unmarshal(good.Payload, &o); err != nil || good.Status != journal.StatusPending || o.Lines[0].SKU != "1C-0001" {
		t.Errorf("mapped order: %+v (%s)", good, good.Payload)
	}
	if !o.Lines[0].Price.Equal(decimal.NewFromInt(1000)) || o.MarketplaceID == "" {
		t.Errorf("mapped order payload: %s", good.Payload)
	}
	for key, field := range map[string]string{"kaspi:order:7402:create": "lines[0].sku", "kaspi:order:7403:create": "attributes.creationDate"} {
		op := ops[key]
		if op.Status != journal.StatusFailed || !strings.Contains(op.LastError, field) {
			t.Errorf("%s: status %s, reason %q; want failed naming %s", key, op.Status, op.LastError, field)
		}
	}
	cur, _ := db.Cursors().Cursor(context.Background(), "kaspi")
	if cur.Unreadable != 1 || !cur.Position.Equal(now.UTC()) {
		t.Errorf("cursor %+v: want 1 unreadable and the position moved (every order was registered or recorded)", cur)
	}
}
