package kaspi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ordersync/ordersync/connectors"
	"github.com/ordersync/ordersync/connectors/kaspi"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/order"
	"github.com/ordersync/ordersync/internal/sim/kaspisim"
	"github.com/ordersync/ordersync/internal/store/sqlite"
)

// rawOrder is a Kaspi order resource whose entries are read with GET
// /orders/{id}/entries; id is that of an order the simulator holds, so that they can
// be (its entries), and the order is mapped whole. attrs is spliced into the
// attributes object.
func rawOrder(code, id string, created time.Time, attrs string) string {
	return fmt.Sprintf(`{"type":"orders","id":%[4]q,"attributes":{"code":"%[1]s","state":"NEW","status":"APPROVED_BY_BANK",`+
		`"creationDate":%[2]d%[3]s}}`, code, created.UnixMilli(), attrs, id)
}

// badKaspiOrders are the bad orders ordersync must refuse, each with the field its
// failure must name. Each is served between good ones.
func badKaspiOrders(now time.Time, id string) []struct{ code, body, field string } {
	created := now.Add(-2 * time.Hour)
	return []struct{ code, body, field string }{
		// Year 10000: 10000-01-01T00:00:00Z in epoch milliseconds.
		{"7601", strings.Replace(rawOrder("7601", id, created, ""), fmt.Sprintf(`"creationDate":%d`, created.UnixMilli()),
			`"creationDate":253402300800000`, 1), "attributes.creationDate"},
		{"7602", rawOrder("7602", id, created, `,"customer":{"firstName":"Ив\u0000ан","lastName":"Петров"}`), "attributes.customer.firstName"},
		{"7603", rawOrder("7603", id, created, ",\"customer\":{\"firstName\":\"Ив\xffан\"}"), "attributes.customer.firstName"},
		{"7604", rawOrder("7604", id, created, `,"customer":{"lastName":"Петров","lastName":"Сидоров"}`), "attributes.customer.lastName"},
		{"7605", rawOrder("7605", id, created, `,"customer":{"firstName":"\udc00"}`), "attributes.customer.firstName"},
	}
}

type pollStore struct {
	journal journal.Store
	cursors connectors.CursorStore
}

func (s pollStore) Journal() journal.Store          { return s.journal }
func (s pollStore) Cursors() connectors.CursorStore { return s.cursors }

func openSQLite(t *testing.T) *sqlite.DB {
	t.Helper()
	db, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(t.TempDir(), "ordersync.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return db
}

// One bad order between good ones on a page, on both stores: each bad one is
// recorded failed naming its field, the good ones are registered, and the cursor
// moves. Before the fix a NUL in the buyer's name failed every poll on PostgreSQL
// (and never on SQLite), and a year-10000 order panicked the process.
func TestPollerBadOrderBetweenGoodOnesIsRecordedAndTheCursorMoves(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"postgres", "sqlite"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			var db pollStore
			if backend == "postgres" {
				pg := openDB(t)
				db = pollStore{pg.Journal(), pg.Cursors()}
			} else {
				lite := openSQLite(t)
				db = pollStore{lite.Journal(), lite.Cursors()}
			}
			s, c := newEnv(t, kaspisim.Options{}, kaspi.Config{})
			now := time.Now().Truncate(time.Millisecond)
			first := mustAdd(t, s, simOrder("7600", now.Add(-3*time.Hour)))
			bad := badKaspiOrders(now, first.ID)
			for _, b := range bad {
				s.AddRawOrder(kaspisim.StateNew, now.Add(-2*time.Hour), b.body)
			}
			// A NUL in the buyer's name the way the simulator serves it.
			nul := simOrder("7606", now.Add(-90*time.Minute))
			nul.Customer.FirstName = "Даниела\x00"
			mustAdd(t, s, nul)
			mustAdd(t, s, simOrder("7609", now.Add(-time.Hour)))

			p := connectors.NewPoller(c, connectors.PollerConfig{Lookback: 72 * time.Hour, Journal: db.Journal(),
				Cursors: db.Cursors(), Now: func() time.Time { return now }})
			ctx := context.Background()
			st, err := p.PollOnce(ctx)
			if err != nil || st.Registered != 2 || st.Failed != len(bad)+1 || st.Panics != 0 {
				t.Fatalf("poll: %+v, %v; want 2 registered and %d failed", st, err, len(bad)+1)
			}
			ops, err := db.Journal().List(ctx, journal.Filter{Source: "kaspi", Limit: 100})
			if err != nil {
				t.Fatal(err)
			}
			byKey := map[string]journal.Operation{}
			for _, op := range ops {
				byKey[op.Key] = op
			}
			for _, code := range []string{"7600", "7609"} {
				op := byKey["kaspi:order:"+code+":create"]
				var o order.Order
				if op.Status != journal.StatusPending || json.Unmarshal(op.Payload, &o) != nil || o.Validate() != nil {
					t.Errorf("good order %s: %+v", code, op)
				}
			}
			bad = append(bad, struct{ code, body, field string }{"7606", "", "attributes.customer.firstName"})
			for _, b := range bad {
				op, ok := byKey["kaspi:order:"+b.code+":create"]
				if !ok || op.Status != journal.StatusFailed || !strings.Contains(op.LastError, b.field) {
					t.Errorf("bad order %s: %v %s %q; want failed naming %s", b.code, ok, op.Status, op.LastError, b.field)
				}
				if !json.Valid(op.Payload) {
					t.Errorf("bad order %s: payload %q is not JSON", b.code, op.Payload)
				}
			}
			cur, err := db.Cursors().Cursor(ctx, "kaspi")
			if err != nil || !cur.Position.Equal(now.UTC()) || cur.LastError != "" {
				t.Fatalf("cursor %+v, %v; want the position moved to %s", cur, err, now.UTC())
			}
			// The next poll sees the same page: nothing new, nothing failing.
			now = now.Add(time.Minute)
			st, err = p.PollOnce(ctx)
			if err != nil || st.Registered != 0 || st.Failed != 0 || st.Duplicates != len(bad)+2 {
				t.Fatalf("second poll: %+v, %v; want only duplicates", st, err)
			}
		})
	}
}

// Two orders whose codes differ only in bytes that are not UTF-8 must not become
// one key: neither is registered (no key can hold them), the rest goes on.
func TestBadCodesDoNotCollapse(t *testing.T) {
	t.Parallel()
	s, c := newEnv(t, kaspisim.Options{}, kaspi.Config{})
	now := time.Now()
	good := mustAdd(t, s, simOrder("7701", now.Add(-time.Hour)))
	for _, code := range []string{"77\xff", "77\xfe", `77\u0000`, "77:1"} {
		s.AddRawOrder(kaspisim.StateNew, now.Add(-time.Hour), rawOrder(code, good.ID, now.Add(-time.Hour), ""))
	}
	items := mustCollect(t, c, now.Add(-24*time.Hour), now)
	ids := map[string]int{}
	for _, it := range items {
		ids[it.ID]++
		if it.ID != "7701" && it.Err == nil {
			t.Errorf("a bad code was accepted: %q", it.ID)
		}
	}
	if ids["7701"] != 1 || ids[""] != 4 {
		t.Fatalf("ids %v: want the good one and four unreadable", ids)
	}
}

// Each mapping refusal names the Kaspi field.
func TestListRefusesBadTextNamingTheField(t *testing.T) {
	t.Parallel()
	s, c := newEnv(t, kaspisim.Options{}, kaspi.Config{})
	now := time.Now()
	first := mustAdd(t, s, simOrder("7612", now.Add(-3*time.Hour)))
	bad := badKaspiOrders(now, first.ID)
	for _, b := range bad {
		s.AddRawOrder(kaspisim.StateNew, now.Add(-time.Hour), b.body)
	}
	o := simOrder("7610", now.Add(-time.Hour))
	o.Entries[0].OfferCode = "SKU\x00"
	mustAdd(t, s, o)
	o = simOrder("7611", now.Add(-time.Hour))
	o.Entries[0].Name = "Лин\x01ейка"
	mustAdd(t, s, o)
	bad = append(bad, struct{ code, body, field string }{"7610", "", "entries[0].offer.code"},
		struct{ code, body, field string }{"7611", "", "entries[0].offer.name"})
	m := byID(mustCollect(t, c, now.Add(-24*time.Hour), now))
	for _, b := range bad {
		it, ok := m[b.code]
		if !ok || it.Err == nil || !strings.Contains(it.Err.Error(), b.field) || it.Order != nil {
			t.Errorf("%s: listed %v err %v; want refused naming %s", b.code, ok, it.Err, b.field)
		}
	}
}
