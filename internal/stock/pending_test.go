package stock_test

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/order"
	"github.com/ordersync/ordersync/internal/stock"
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

// anOrder is an order of source with lines "SKU", quantity, "SKU", quantity….
func anOrder(source, id, warehouse string, lines ...string) order.Order {
	o := order.Order{Source: source, ExternalID: id, Number: id, CreatedAt: time.Date(2026, 9, 16, 10, 0, 0, 0, time.UTC),
		Warehouse: warehouse, Currency: "KZT"}
	for i := 0; i+1 < len(lines); i += 2 {
		o.Lines = append(o.Lines, order.Line{SKU: lines[i], Name: lines[i], Quantity: dec(lines[i+1]), Price: dec("100")})
	}
	return o
}

func mustRegister(t *testing.T, js journal.Store, op journal.NewOperation) {
	t.Helper()
	if reg, err := js.Register(context.Background(), op); err != nil || reg.Outcome != journal.Registered {
		t.Fatalf("register %s: %v %v", op.Key, reg.Outcome, err)
	}
}

func TestReadPending(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	js := openJournal(t)
	// Two orders registered, not yet in 1C: they count.
	mustRegister(t, js, journal.CreateOrder(anOrder("kaspi", "1", "WH1", "A", "1", "B", "2")))
	mustRegister(t, js, journal.CreateOrder(anOrder("ozon", "2", "", "A", "1.5")))

	// What does not count: an order of another warehouse, one created in 1C, one
	// failed for good, one cancelled, and a fetch not made yet (counted unread).
	mustRegister(t, js, journal.CreateOrder(anOrder("kaspi", "3", "WH2", "A", "10")))
	mustRegister(t, js, journal.CreateOrder(anOrder("kaspi", "4", "WH1", "A", "20")))
	c, err := js.ClaimKey(ctx, anOrder("kaspi", "4", "", "").CreateKey(), "test")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Finish(ctx, journal.Finish{Status: journal.StatusDone, Result: &journal.Result{Ref: "r", Number: "N"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.RegisterFailed(ctx, journal.CreateOrder(anOrder("kaspi", "5", "WH1", "A", "30")), "unmapped"); err != nil {
		t.Fatal(err)
	}
	mustRegister(t, js, journal.CreateOrder(anOrder("ozon", "6", "WH1", "A", "40")))
	mustRegister(t, js, journal.CancelOrder(order.Cancel{Source: "ozon", ExternalID: "6", Reason: "buyer"}))
	mustRegister(t, js, journal.NewOperation{Key: order.Key("ozon", "order", "7", "create"), Kind: order.KindCreate,
		Source: "ozon", ExternalID: "7", Payload: order.FetchPayload("ozon", "7")})

	p, err := stock.ReadPending(ctx, js, "WH1")
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Of("A"); !got.Equal(dec("2.5")) {
		t.Errorf("A: %s pending, want 2.5", got)
	}
	if got := p.Of("B"); !got.Equal(dec("2")) {
		t.Errorf("B: %s pending, want 2", got)
	}
	if got := p.Of("C"); !got.IsZero() {
		t.Errorf("C: %s pending, want 0", got)
	}
	if got := p.BySource["ozon"]["A"]; !got.Equal(dec("1.5")) {
		t.Errorf("A from ozon: %s, want 1.5", got)
	}
	if got := p.Sources("A"); !slices.Equal(got, []string{"kaspi", "ozon"}) {
		t.Errorf("sources of A: %v", got)
	}
	if p.Unread != 1 {
		t.Errorf("unread: %d, want 1 (the fetch)", p.Unread)
	}
	// Every warehouse: the WH2 order counts too.
	all, err := stock.ReadPending(ctx, js, "")
	if err != nil {
		t.Fatal(err)
	}
	if got := all.Of("A"); !got.Equal(dec("12.5")) {
		t.Errorf("every warehouse, A: %s, want 12.5", got)
	}
}
