package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/ordersync/ordersync/internal/eventually"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/sim/onecsim"
	"github.com/ordersync/ordersync/internal/sim/ozonsim"
	"github.com/ordersync/ordersync/internal/sim/wbsim"
	"github.com/ordersync/ordersync/internal/stock"
	"github.com/ordersync/ordersync/internal/store/postgres"
)

const (
	stockOzonWarehouse = 1020000000001
	stockWBWarehouse   = 507
)

// stockWorld is 1C, Ozon and Wildberries for the stock tests: SKU-001 … SKU-200
// exist as Ozon offers and as Wildberries cards.
type stockWorld struct {
	*env
	ozon *ozonsim.Ozon
	wb   *wbsim.Wildberries
}

func newStockWorld(t *testing.T, backend, schedules string) *stockWorld {
	t.Helper()
	e := newEnvOn(t, backend, onecsim.Options{}, true)
	w := &stockWorld{env: e,
		ozon: ozonsim.New(ozonsim.Options{ClientID: "77", APIKey: "ozon-key"}),
		wb:   wbsim.New(wbsim.Options{Token: "wb-token"})}
	for _, s := range []interface{ Start(string) error }{w.ozon, w.wb} {
		if err := s.Start("127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(w.ozon.Close)
	t.Cleanup(w.wb.Close)
	w.wb.AddStockWarehouse(stockWBWarehouse)
	for i := 1; i <= 200; i++ {
		sku := fmt.Sprintf("SKU-%03d", i)
		w.ozon.AddOffers(sku)
		w.wb.AddCard(wbsim.Card{NmID: int64(i), VendorCode: sku, Sizes: []wbsim.Size{{ChrtID: int64(9000 + i), Skus: []string{"460" + sku}}}})
	}
	e.onec.SetStock("WH1")
	e.environ = append(e.environ,
		"ORDERSYNC_CONNECTORS__OZON__ENABLED=true",
		"ORDERSYNC_CONNECTORS__OZON__BASE_URL="+w.ozon.URL(),
		"ORDERSYNC_CONNECTORS__OZON__CLIENT_ID=77",
		"ORDERSYNC_CONNECTORS__OZON__API_KEY=ozon-key",
		"ORDERSYNC_CONNECTORS__OZON__WAREHOUSE=WH1",
		"ORDERSYNC_CONNECTORS__OZON__POLL_INTERVAL=1h",
		"ORDERSYNC_CONNECTORS__OZON__TIMEOUT=5s",
		fmt.Sprintf("ORDERSYNC_CONNECTORS__OZON__STOCK_WAREHOUSES=WH1=%d", stockOzonWarehouse),
		"ORDERSYNC_CONNECTORS__WILDBERRIES__ENABLED=true",
		"ORDERSYNC_CONNECTORS__WILDBERRIES__BASE_URL="+w.wb.URL(),
		"ORDERSYNC_CONNECTORS__WILDBERRIES__RETURNS__BASE_URL="+w.wb.URL(),
		"ORDERSYNC_CONNECTORS__WILDBERRIES__CONTENT_URL="+w.wb.URL(),
		"ORDERSYNC_CONNECTORS__WILDBERRIES__TOKEN=wb-token",
		"ORDERSYNC_CONNECTORS__WILDBERRIES__WAREHOUSE=WH1",
		"ORDERSYNC_CONNECTORS__WILDBERRIES__POLL_INTERVAL=1h",
		"ORDERSYNC_CONNECTORS__WILDBERRIES__TIMEOUT=5s",
		fmt.Sprintf("ORDERSYNC_CONNECTORS__WILDBERRIES__STOCK_WAREHOUSES=WH1=%d", stockWBWarehouse),
		"ORDERSYNC_STOCK__SCHEDULES="+schedules,
		"ORDERSYNC_STOCK__FULL_REFRESH=24h",
		"ORDERSYNC_RELAY__POLL_INTERVAL=50ms",
		"ORDERSYNC_RELAY__LEASE=20s",
	)
	return w
}

// setSKUs makes 1C hold SKU-001 … SKU-n, one each, in WH1.
func (w *stockWorld) setSKUs(n int) {
	items := make([]onecsim.StockItem, n)
	for i := range items {
		items[i] = onecsim.StockItem{SKU: fmt.Sprintf("SKU-%03d", i+1), Quantity: decimal.NewFromInt(1), Price: decimal.NewFromInt(100)}
	}
	w.onec.SetStock("WH1", items...)
}

func openPG(t *testing.T, url string) *postgres.DB {
	t.Helper()
	db, err := postgres.Open(context.Background(), postgres.Config{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	return db
}

// TestTwoReplicasMakeOneSnapshotAndOnePublishPerSlot runs two `ordersync run`
// processes on one PostgreSQL with a schedule @every 2s while 1C's stock grows by
// a SKU at a time: each slot is one snapshot (1C is asked once per slot), published
// once to Ozon and once to Wildberries, and no item is sent twice.
func TestTwoReplicasMakeOneSnapshotAndOnePublishPerSlot(t *testing.T) {
	t.Parallel()
	w := newStockWorld(t, "postgres", `[{"name":"main","cron":"@every 2s","warehouses":["WH1"],"publish":["ozon","wildberries"]}]`)
	w.environ = append(w.environ, "ORDERSYNC_STOCK__CATCH_UP=none")
	w.setSKUs(1)
	a := w.startService()
	b := w.startService()
	db := openPG(t, w.dbURL)
	st := db.Stock()

	// 1C's stock grows by one SKU every 700ms while the replicas run.
	stop := make(chan struct{})
	var grower sync.WaitGroup
	grower.Add(1)
	go func() {
		defer grower.Done()
		for n := 2; n <= 200; n++ {
			select {
			case <-stop:
				return
			case <-time.After(700 * time.Millisecond):
			}
			w.setSKUs(n)
		}
	}()
	const slots = 5
	eventually.Value(t, fmt.Sprintf("%d snapshots", slots), func() (int, bool) {
		ss, err := st.Snapshots(context.Background(), stock.Filter{Schedule: "main"})
		return len(ss), err == nil && len(ss) >= slots
	})
	close(stop)
	grower.Wait()
	a.signal(syscall.SIGTERM)
	b.signal(syscall.SIGTERM)
	if code := a.wait(time.Minute); code != 0 {
		t.Fatalf("replica a exited %d:\n%s", code, a.stderr.String())
	}
	if code := b.wait(time.Minute); code != 0 {
		t.Fatalf("replica b exited %d:\n%s", code, b.stderr.String())
	}

	ctx := context.Background()
	ops, err := db.Journal().List(ctx, journal.Filter{Source: stock.Source, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	done := 0
	for _, op := range ops {
		if op.Status == journal.StatusDone {
			done++
		}
	}
	ss, err := st.Snapshots(ctx, stock.Filter{Schedule: "main", Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(ss) != done {
		t.Fatalf("%d snapshots stored for %d done slots", len(ss), done)
	}
	if got := w.onec.Stats().Requests["stock"]; got != done {
		t.Fatalf("1C was asked for stock %d times for %d slots: two replicas took the same slot", got, done)
	}
	var sentOzon, sentWB int
	for _, s := range ss {
		for _, mp := range []string{stock.Ozon, stock.Wildberries} {
			ps, err := st.Publishes(ctx, stock.PublishFilter{Marketplace: mp, Limit: 1000})
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, p := range ps {
				if p.SnapshotKey == s.Key {
					n++
					if p.Sent > 0 && mp == stock.Ozon {
						sentOzon++
					}
					if p.Sent > 0 && mp == stock.Wildberries {
						sentWB++
					}
				}
			}
			if n != 1 && s.Key != ss[0].Key {
				t.Errorf("snapshot %s has %d publishes to %s, want 1", s.Key, n, mp)
			}
		}
	}
	t.Logf("%d slots done by two replicas; 1C asked %d times; publishes that sent items: Ozon %d (requests %d, items %d), Wildberries %d (%+v)",
		done, w.onec.Stats().Requests["stock"], sentOzon, w.ozon.StockRequests(), len(w.ozon.StockUpdates()), sentWB, w.wb.StockStats())
	if got := w.ozon.StockRequests(); got != sentOzon {
		t.Errorf("Ozon got %d stock requests for %d publishes that sent items", got, sentOzon)
	}
	if v := w.ozon.StockViolations(); len(v) > 0 {
		t.Errorf("Ozon's limits were broken: %+v", v)
	}
	if v := w.wb.Violations(); len(v) > 0 {
		t.Errorf("Wildberries' limits were broken: %+v", v)
	}
	// Every item sent to Ozon was sent once: its value never changed.
	seen := map[string]int{}
	for _, u := range w.ozon.StockUpdates() {
		seen[u.OfferID]++
	}
	for sku, n := range seen {
		if n != 1 {
			t.Errorf("Ozon was sent %s %d times", sku, n)
		}
	}
	if len(seen) == 0 || w.wb.StockStats().Updates == 0 {
		t.Logf("replica a:\n%s", a.stderr.String())
		t.Fatalf("nothing reached the marketplaces: Ozon %d items, Wildberries %+v", len(seen), w.wb.StockStats())
	}
}

// TestASlotMissedWhileStoppedIsCaughtUpOnce stops the service across several
// slots: at the next start the latest missed slot is registered once, and the ones
// before it are not.
func TestASlotMissedWhileStoppedIsCaughtUpOnce(t *testing.T) {
	t.Parallel()
	w := newStockWorld(t, "sqlite", `[{"name":"main","cron":"@every 2s","warehouses":["WH1"],"publish":["ozon"]}]`)
	w.setSKUs(3)
	almaty := mustAlmaty(t)
	spec, err := stock.ParseSpec("@every 2s", almaty)
	if err != nil {
		t.Fatal(err)
	}
	keys := func() []string {
		out, _, code := w.cli("", "journal", "list", "--source", "stock", "--format", "json", "--limit", "1000")
		if code != 0 {
			return nil
		}
		var ks []string
		for _, line := range strings.Split(out, "\n") {
			if i := strings.Index(line, `"key": "`); i >= 0 {
				ks = append(ks, strings.TrimSuffix(strings.TrimSpace(line[i+len(`"key": "`):]), `",`))
			}
		}
		return ks
	}
	s := w.startService()
	eventually.True(t, "the first snapshot", func() bool { return len(keys()) > 0 })
	s.signal(syscall.SIGTERM)
	if code := s.wait(time.Minute); code != 0 {
		t.Fatalf("exit %d:\n%s", code, s.stderr.String())
	}
	before := keys()
	last := time.Time{}
	for _, k := range before {
		t0, err := time.ParseInLocation("2006-01-02T15:04:05", k[strings.LastIndex(k, ":WH1:")+5:], almaty)
		if err != nil {
			t.Fatal(err)
		}
		if t0.After(last) {
			last = t0
		}
	}
	// Three slots go by while it is stopped.
	eventually.True(t, "three slots to pass", func() bool { return !spec.Floor(time.Now()).Before(last.Add(6 * time.Second)) })
	s = w.startService()
	caught := spec.Floor(time.Now())
	eventually.True(t, "the caught-up slot", func() bool { return slices.Contains(keys(), stock.Key("main", "WH1", spec.Label(caught))) })
	s.signal(syscall.SIGTERM)
	if code := s.wait(time.Minute); code != 0 {
		t.Fatalf("exit %d:\n%s", code, s.stderr.String())
	}
	after := keys()
	for at := last.Add(2 * time.Second); at.Before(caught); at = at.Add(2 * time.Second) {
		if k := stock.Key("main", "WH1", spec.Label(at)); slices.Contains(after, k) {
			t.Errorf("missed slot %s was registered; only the latest missed one (%s) should be", k, spec.Label(caught))
		}
	}
	n := 0
	for _, k := range after {
		if k == stock.Key("main", "WH1", spec.Label(caught)) {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("the caught-up slot is registered %d times", n)
	}
}

func mustAlmaty(t *testing.T) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation("Asia/Almaty")
	if err != nil {
		t.Fatal(err)
	}
	return loc
}
