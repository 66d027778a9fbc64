package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/onec"
	"github.com/ordersync/ordersync/internal/outbox"
	"github.com/ordersync/ordersync/internal/stock"
)

// takeSnapshot reads a warehouse's stock from 1C. The snapshot is stored, and one
// publishing event per marketplace that is sent stock is enqueued, in the
// transaction that marks the operation done. A bad answer (a SKU twice, a quantity
// that is not a number, an unknown warehouse) fails it with the reason; 1C down or
// slow is retried as any other operation, within the slot's life.
func (e *Engine) takeSnapshot(ctx context.Context, log *slog.Logger, op journal.Operation) verdict {
	var p stock.Payload
	if err := json.Unmarshal(op.Payload, &p); err != nil || p.Warehouse == "" {
		return verdict{class: onec.Permanent, err: fmt.Errorf("stock snapshot payload is not readable: %v", err)}
	}
	if now := e.cfg.Now(); !p.Until.IsZero() && now.After(p.Until) {
		return verdict{class: onec.Permanent, err: fmt.Errorf("too late: slot %s of schedule %s ended at %s, when its next slot began, before 1C answered",
			p.Label, p.Schedule, p.Until.In(e.cfg.Location).Format("2006-01-02T15:04:05"))}
	}
	answer, err := e.client.Stock(ctx, p.Warehouse)
	if err != nil {
		return verdict{class: onec.ClassOf(err), err: err}
	}
	items, warnings, err := stock.FromOneC(answer)
	if err != nil {
		return verdict{class: onec.Permanent, err: err}
	}
	snap := &stock.Snapshot{Key: op.Key, Schedule: p.Schedule, Warehouse: p.Warehouse, Slot: p.Slot, Label: p.Label,
		TakenAt: answer.TakenAt, ItemCount: len(items), Warnings: warnings, Items: items}
	if snap.Warnings == nil {
		snap.Warnings = []string{}
	}
	note := fmt.Sprintf("%d items of warehouse %s", len(items), p.Warehouse)
	log.Info("stock snapshot taken", "warehouse", p.Warehouse, "items", len(items), "warnings", len(warnings))
	return verdict{result: &journal.Result{Note: note, Warnings: warnings}, snapshot: snap, publish: p.Publish}
}

// snapshotMessages are the publishing events of a snapshot: one per marketplace in
// its payload that is sent stock, each in its marketplace's lane.
func snapshotMessages(snap *stock.Snapshot, publish []string, now time.Time) []outbox.Message {
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
