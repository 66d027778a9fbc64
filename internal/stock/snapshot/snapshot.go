// Package snapshot carries out the stock.snapshot operations: it is the engine's
// handler of their kind, registered by the service's wiring (engine.Config.Handlers).
// It reads a warehouse's stock from 1C (GET /stock) and returns, on the verdict, the
// snapshot as an attachment and one publishing event per marketplace that is sent
// stock as its messages: the stores write both in the transaction that marks the
// operation done. It reads 1C through the engine's client (engine.Call.OneC), so a
// 1C that fails here counts toward the engine's view of 1C as any other call.
package snapshot

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/ordersync/ordersync/internal/engine"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/onec"
	"github.com/ordersync/ordersync/internal/outbox"
	"github.com/ordersync/ordersync/internal/stock"
)

// Handler carries out stock.snapshot operations (stock.KindSnapshot). Its zero
// value is ready.
type Handler struct{}

var _ engine.Handler = Handler{}

// CarryOut reads a warehouse's stock from 1C. The snapshot is stored, and one
// publishing event per marketplace that is sent stock is enqueued, in the
// transaction that marks the operation done. A bad answer (a SKU twice, a quantity
// that is not a number, an unknown warehouse) fails it with the reason; 1C down or
// slow is retried as any other operation, within the slot's life.
func (Handler) CarryOut(ctx context.Context, c engine.Call) engine.Verdict {
	op := c.Op
	var p stock.Payload
	if err := json.Unmarshal(op.Payload, &p); err != nil || p.Warehouse == "" {
		return engine.Verdict{Class: onec.Permanent, Err: fmt.Errorf("stock snapshot payload is not readable: %v", err)}
	}
	if now := c.Now(); !p.Until.IsZero() && now.After(p.Until) {
		return engine.Verdict{Class: onec.Permanent, Err: fmt.Errorf("too late: slot %s of schedule %s ended at %s, when its next slot began, before 1C answered",
			p.Label, p.Schedule, p.Until.In(c.Location).Format("2006-01-02T15:04:05"))}
	}
	answer, err := c.OneC.Stock(ctx, p.Warehouse)
	if err != nil {
		return engine.Verdict{Class: onec.ClassOf(err), Err: err}
	}
	items, warnings, err := FromOneC(answer)
	if err != nil {
		return engine.Verdict{Class: onec.Permanent, Err: err}
	}
	snap := &stock.Snapshot{Key: op.Key, Schedule: p.Schedule, Warehouse: p.Warehouse, Slot: p.Slot, Label: p.Label,
		TakenAt: answer.TakenAt, ItemCount: len(items), Warnings: warnings, Items: items}
	if snap.Warnings == nil {
		snap.Warnings = []string{}
	}
	note := fmt.Sprintf("%d items of warehouse %s", len(items), p.Warehouse)
	c.Log.Info("stock snapshot taken", "warehouse", p.Warehouse, "items", len(items), "warnings", len(warnings))
	return engine.Verdict{Result: &journal.Result{Note: note, Warnings: warnings},
		Attachments: []any{snap}, Messages: Messages(snap, p.Publish, c.Now())}
}

// Messages are the publishing events of a snapshot: one per marketplace in
// publish that is sent stock, each in its marketplace's lane.
func Messages(snap *stock.Snapshot, publish []string, now time.Time) []outbox.Message {
	data, _ := json.Marshal(stock.EventData{Snapshot: snap.Key, Warehouse: snap.Warehouse})
	var ms []outbox.Message
	for _, mp := range publish {
		if !stock.Pushed(mp) {
			continue
		}
		ms = append(ms, outbox.Message{Destination: stock.Destination(mp), Event: outbox.Event{
			Type: outbox.StockSnapshot, AggregateType: "stock", AggregateID: stock.Lane(mp), Data: data, OccurredAt: now,
		}})
	}
	return ms
}

// FromOneC checks 1C's answer for a warehouse and returns its items sorted by SKU,
// with a warning per item whose quantity is negative (published as 0), the first
// few listed and the rest counted in a last line. A SKU listed twice is an error
// that names it: the snapshot fails, nothing is stored.
func FromOneC(answer onec.Stock) ([]stock.Item, []string, error) {
	items := make([]stock.Item, len(answer.Items))
	for i, it := range answer.Items {
		items[i] = stock.Item{SKU: it.SKU, Quantity: it.Quantity, Price: it.Price}
	}
	slices.SortStableFunc(items, func(a, b stock.Item) int { return cmp.Compare(a.SKU, b.SKU) })
	var warnings []string
	left := 0
	for i, it := range items {
		if i > 0 && items[i-1].SKU == it.SKU {
			return nil, nil, fmt.Errorf("1C listed SKU %q twice in the stock of warehouse %s (quantities %s and %s): "+
				"the snapshot is not stored; fix the stock query of the 1C module", it.SKU, answer.Warehouse,
				items[i-1].Quantity.String(), it.Quantity.String())
		}
		if it.Quantity.IsNegative() {
			warnings, left = stock.AddWarning(warnings, left,
				fmt.Sprintf("%s: negative quantity %s, published as 0", it.SKU, it.Quantity.String()))
		}
	}
	if left > 0 {
		warnings = append(warnings, fmt.Sprintf("and %d more items with a negative quantity", left))
	}
	return items, warnings, nil
}
