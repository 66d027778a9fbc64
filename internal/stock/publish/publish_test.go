package publish_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/outbox"
	"github.com/ordersync/ordersync/internal/stock"
	"github.com/ordersync/ordersync/internal/stock/publish"
	"github.com/ordersync/ordersync/internal/stock/scheduler"
	"github.com/ordersync/ordersync/internal/store/sqlite"
)

// fakeSender is a marketplace that records every item it is sent, with the time.
type fakeSender struct {
	minResend time.Duration
	batch     int
	timeout   time.Duration

	mu      sync.Mutex
	sends   map[string][]time.Time // market SKU → when sent
	holds   map[string]int64
	refuse  map[string]string // market SKU → reason
	defer_  map[string]int    // market SKU → times to answer Deferred
	delay   time.Duration
	batches int
}

func newFake() *fakeSender {
	return &fakeSender{batch: 2, timeout: time.Second, sends: map[string][]time.Time{}, holds: map[string]int64{},
		refuse: map[string]string{}, defer_: map[string]int{}}
}

func (f *fakeSender) Marketplace() string                { return "ozon" }
func (f *fakeSender) BatchSize() int                     { return f.batch }
func (f *fakeSender) MinResend() time.Duration           { return f.minResend }
func (f *fakeSender) MaxAmount() int64                   { return 0 }
func (f *fakeSender) Timeout() time.Duration             { return f.timeout }
func (f *fakeSender) Warehouse(wh string) (string, bool) { return "9" + wh, wh != "WH9" }

func (f *fakeSender) Send(ctx context.Context, _ string, batch []stock.Update) ([]stock.Result, error) {
	if f.delay > 0 {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(f.delay):
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.batches++
	var rs []stock.Result
	for _, u := range batch {
		f.sends[u.MarketSKU] = append(f.sends[u.MarketSKU], time.Now())
		switch {
		case f.refuse[u.MarketSKU] != "":
			rs = append(rs, stock.Result{SKU: u.SKU, Outcome: stock.Refused, Reason: f.refuse[u.MarketSKU]})
		case f.defer_[u.MarketSKU] > 0:
			f.defer_[u.MarketSKU]--
			rs = append(rs, stock.Result{SKU: u.SKU, Outcome: stock.Deferred, Reason: "TOO_MANY_REQUESTS"})
		default:
			f.holds[u.MarketSKU] = u.Amount
			rs = append(rs, stock.Result{SKU: u.SKU, Outcome: stock.Published})
		}
	}
	return rs, nil
}

func (f *fakeSender) sent(sku string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.sends[sku])
}

type world struct {
	t    *testing.T
	js   journal.Store
	st   stock.Store
	n    int
	slot time.Time
}

func newWorld(t *testing.T) *world {
	t.Helper()
	db, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(t.TempDir(), "s.db"), TakeoverAfter: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return &world{t: t, js: db.Journal(), st: db.Stock(), slot: time.Date(2026, 9, 16, 10, 0, 0, 0, time.UTC)}
}

// snapshot stores a done snapshot of WH1 with items "SKU=quantity" and returns
// the outbox record the engine would have enqueued for it.
func (w *world) snapshot(items ...string) outbox.Record {
	w.t.Helper()
	ctx := context.Background()
	w.n++
	w.slot = w.slot.Add(time.Minute)
	p := stock.Payload{Schedule: "main", Warehouse: "WH1", Slot: w.slot, Label: w.slot.Format("2006-01-02T15:04"), Publish: []string{"ozon"}}
	reg, err := scheduler.Register(ctx, w.js, p)
	if err != nil {
		w.t.Fatal(err)
	}
	c, err := w.js.ClaimKey(ctx, reg.Operation.Key, "test")
	if err != nil {
		w.t.Fatal(err)
	}
	snap := &stock.Snapshot{Key: reg.Operation.Key, Schedule: "main", Warehouse: "WH1", Slot: w.slot, Label: p.Label, TakenAt: "x", Warnings: []string{}}
	for _, it := range items {
		sku, q, _ := strings.Cut(it, "=")
		snap.Items = append(snap.Items, stock.Item{SKU: sku, Quantity: decimal.RequireFromString(q), Price: decimal.NewFromInt(100)})
	}
	snap.ItemCount = len(snap.Items)
	if err := c.Finish(ctx, journal.Finish{Status: journal.StatusDone, Result: &journal.Result{}, Attachments: []any{snap}}); err != nil {
		w.t.Fatal(err)
	}
	data, _ := json.Marshal(stock.EventData{Snapshot: snap.Key, Warehouse: "WH1"})
	return outbox.Record{EventID: fmt.Sprint(w.n), Destination: "ozon-stock", Data: data}
}

func (w *world) publisher(s stock.Sender, full time.Duration, now func() time.Time) *publish.Publisher {
	return publish.New(publish.Config{Sender: s, Store: w.st, FullRefresh: full, Now: now})
}

func (w *world) lastPublish() stock.Publish {
	w.t.Helper()
	ps, err := w.st.Publishes(context.Background(), stock.PublishFilter{Marketplace: "ozon", Limit: 1})
	if err != nil || len(ps) == 0 {
		w.t.Fatalf("publishes: %v %v", ps, err)
	}
	return ps[0]
}

func TestFirstPublishIsFullThenOnlyChangesUntilTheFullRefresh(t *testing.T) {
	w := newWorld(t)
	f := newFake()
	now := time.Date(2026, 9, 16, 10, 0, 0, 0, time.UTC)
	p := w.publisher(f, 24*time.Hour, func() time.Time { return now })
	ctx := context.Background()
	if err := p.Publish(ctx, w.snapshot("A=1", "B=2.7", "C=-4")); err != nil {
		t.Fatal(err)
	}
	if got := w.lastPublish(); !got.Full || got.Sent != 3 || got.Published != 3 || len(got.Warnings) != 2 {
		t.Fatalf("first publish = %+v, want full, 3 sent and published, 2 warnings (fractional, negative)", got)
	}
	if f.holds["B"] != 2 || f.holds["C"] != 0 {
		t.Fatalf("marketplace holds B=%d C=%d, want 2 (floored) and 0 (negative)", f.holds["B"], f.holds["C"])
	}
	now = now.Add(time.Hour)
	if err := p.Publish(ctx, w.snapshot("A=1", "B=2.9", "C=5")); err != nil {
		t.Fatal(err)
	}
	if got := w.lastPublish(); got.Full || got.Sent != 1 || got.Unchanged != 2 {
		t.Fatalf("second publish = %+v, want a delta sending only C (B floors to the same 2)", got)
	}
	if f.sent("A") != 1 || f.sent("B") != 1 || f.sent("C") != 2 {
		t.Fatalf("sends A=%d B=%d C=%d, want 1 1 2", f.sent("A"), f.sent("B"), f.sent("C"))
	}
	now = now.Add(24 * time.Hour)
	if err := p.Publish(ctx, w.snapshot("A=1", "B=2.9", "C=5")); err != nil {
		t.Fatal(err)
	}
	if got := w.lastPublish(); !got.Full || got.Sent != 3 {
		t.Fatalf("publish after full_refresh = %+v, want full with 3 sent", got)
	}
}

func TestRefusedItemsWaitForAChangeAndDeferredOnesComeBackWithinThePublish(t *testing.T) {
	w := newWorld(t)
	f := newFake()
	f.minResend = 100 * time.Millisecond
	f.refuse["B"] = "STOCK_TOO_BIG: too big"
	f.defer_["C"] = 2
	p := w.publisher(f, 24*time.Hour, time.Now)
	ctx := context.Background()
	if err := p.Publish(ctx, w.snapshot("A=1", "B=2", "C=3")); err != nil {
		t.Fatal(err)
	}
	got := w.lastPublish()
	if got.Published != 2 || got.Refused != 1 {
		t.Fatalf("publish = %+v, want A and C published, B refused", got)
	}
	if f.sent("C") != 3 {
		t.Fatalf("C was sent %d times, want 3 (deferred twice, then taken)", f.sent("C"))
	}
	f.mu.Lock()
	for sku, ts := range f.sends {
		for i := 1; i < len(ts); i++ {
			if d := ts[i].Sub(ts[i-1]); d < f.minResend {
				t.Errorf("%s was sent again after %s, sooner than the marketplace's %s", sku, d, f.minResend)
			}
		}
	}
	f.mu.Unlock()
	probs, err := w.st.Problems(ctx, "ozon", 0)
	if err != nil || len(probs) != 1 || probs[0].SKU != "B" || probs[0].Outcome != stock.Refused || !strings.Contains(probs[0].Reason, "STOCK_TOO_BIG") {
		t.Fatalf("problems = %+v, %v; want B refused with its reason", probs, err)
	}
	// The same value is not sent again; a changed one is.
	if err := p.Publish(ctx, w.snapshot("A=1", "B=2", "C=3")); err != nil {
		t.Fatal(err)
	}
	if f.sent("B") != 1 {
		t.Fatalf("refused B with an unchanged value was sent again")
	}
	delete(f.refuse, "B")
	if err := p.Publish(ctx, w.snapshot("A=1", "B=7", "C=3")); err != nil {
		t.Fatal(err)
	}
	if f.sent("B") != 2 || f.holds["B"] != 7 {
		t.Fatalf("B with a changed value: sent %d times, holds %d; want 2 and 7", f.sent("B"), f.holds["B"])
	}
}

func TestALongPublishGoesOnAtTheNextDeliveryWithoutResending(t *testing.T) {
	w := newWorld(t)
	f := newFake()
	f.delay = 20 * time.Millisecond
	f.timeout = 30 * time.Millisecond
	p := w.publisher(f, 24*time.Hour, time.Now)
	var items []string
	for i := range 40 {
		items = append(items, fmt.Sprintf("S%02d=%d", i, i))
	}
	rec := w.snapshot(items...)
	deliveries := 0
	for {
		deliveries++
		ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
		err := p.Publish(ctx, rec)
		cancel()
		if err == nil {
			break
		}
		var de *outbox.DeliveryError
		if !errors.As(err, &de) || !de.Continue {
			t.Fatalf("delivery %d: %v, want a delivery that goes on (Continue)", deliveries, err)
		}
		if deliveries > 200 {
			t.Fatal("the publish never finished")
		}
	}
	if deliveries < 2 {
		t.Fatalf("40 items in batches of 2 at 20ms each finished in one 150ms delivery")
	}
	for i := range 40 {
		if n := f.sent(fmt.Sprintf("S%02d", i)); n != 1 {
			t.Fatalf("S%02d was sent %d times over %d deliveries, want once", i, n, deliveries)
		}
	}
	if got := w.lastPublish(); got.Sent != 40 || got.Published != 40 || got.FinishedAt == nil {
		t.Fatalf("publish = %+v, want 40 sent and published, finished", got)
	}
}

func TestAnOlderSnapshotIsSupersededAndAnUnmappedWarehouseIsDead(t *testing.T) {
	w := newWorld(t)
	f := newFake()
	p := w.publisher(f, 24*time.Hour, time.Now)
	old := w.snapshot("A=1")
	if err := p.Publish(context.Background(), w.snapshot("A=2")); err != nil {
		t.Fatal(err)
	}
	if err := p.Publish(context.Background(), old); err != nil {
		t.Fatal(err)
	}
	if f.sent("A") != 1 || f.holds["A"] != 2 {
		t.Fatalf("an older snapshot published after a newer one: A sent %d times, holds %d", f.sent("A"), f.holds["A"])
	}
	ps, _ := w.st.Publishes(context.Background(), stock.PublishFilter{Marketplace: "ozon"})
	superseded := false
	for _, pub := range ps {
		superseded = superseded || strings.Contains(pub.Note, "superseded")
	}
	if !superseded {
		t.Fatalf("publishes %+v, want the older one noted superseded", ps)
	}
}
