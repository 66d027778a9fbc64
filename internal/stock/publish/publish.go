// Package publish sends stock snapshots to the marketplaces that are pushed stock
// (Ozon, Wildberries). A Publisher is the outbox destination of one marketplace: the
// relay hands it a stock.snapshot event, and it sends the items whose published
// value changed since the last successful publish (everything once per
// stock.full_refresh), in the marketplace's batches and at its rate, recording each
// item's outcome. A publish longer than one relay lease goes on at the next
// delivery where it stopped: what was sent is in the item states.
package publish

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"github.com/ordersync/ordersync/internal/outbox"
	"github.com/ordersync/ordersync/internal/stock"
)

// Config of a Publisher.
type Config struct {
	Sender stock.Sender
	Store  stock.Store
	// MarketSKUs maps a 1C SKU to the marketplace's (the SKU map in reverse): none
	// when the map has no line for it. Nil passes SKUs unchanged.
	MarketSKUs func(sku string) []string
	// SKUMapPath names the SKU map in reasons; "" with no map.
	SKUMapPath string
	// MapName is the marketplace's name in the SKU map's first column (wb for
	// Wildberries); default the marketplace's name.
	MapName string
	// FullRefresh is stock.full_refresh: every item is sent at least this often;
	// default 24h.
	FullRefresh time.Duration
	// Reserves are stock.reserve: the largest entry matching this marketplace and
	// an item is held back from what the marketplace is told of it.
	Reserves stock.Reserves
	// Pending, when set, reads the quantity of each 1C SKU of a warehouse that
	// orders registered in the journal and not yet created in 1C hold (1C's
	// quantity does not count them yet): it is held back too. Nil: none.
	Pending func(ctx context.Context, warehouse string) (map[string]decimal.Decimal, error)
	Logger  *slog.Logger
	Now     func() time.Time
}

func (c Config) mapName() string { return cmp.Or(c.MapName, c.Sender.Marketplace()) }

// Publisher publishes stock.snapshot events to one marketplace.
type Publisher struct {
	cfg Config
	mp  string
	log *slog.Logger
}

// New returns the publisher of cfg.Sender's marketplace.
func New(cfg Config) *Publisher {
	cfg.FullRefresh = cmp.Or(cfg.FullRefresh, 24*time.Hour)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	mp := cfg.Sender.Marketplace()
	return &Publisher{cfg: cfg, mp: mp, log: cfg.Logger.With("marketplace", mp)}
}

// Timeout is how much of a relay lease one step of a publish needs: one request.
func (p *Publisher) Timeout() time.Duration { return p.cfg.Sender.Timeout() }

// noAnswer is the reason of an item recorded as sent before its answer.
const noAnswer = "sent, no answer recorded"

// pending is an item still to be sent in this publish.
type pending struct {
	update   stock.Update
	warning  string
	earliest time.Time // not sent before (the marketplace's resend rule, a 429)
}

// Publish carries out (or goes on with) the publish of one snapshot.
func (p *Publisher) Publish(ctx context.Context, rec outbox.Record) error {
	err := p.publish(ctx, rec)
	var de *outbox.DeliveryError
	if err != nil && leaseOver(ctx) && !errors.As(err, &de) {
		// The lease ran out in a read or a write of the store (a loaded database):
		// what is recorded stands, and the next delivery goes on from it.
		return &outbox.DeliveryError{Continue: true,
			Err: fmt.Errorf("stock: the lease ran out (%v); the publish goes on at the next delivery", err)}
	}
	return err
}

func (p *Publisher) publish(ctx context.Context, rec outbox.Record) error {
	var d stock.EventData
	if err := json.Unmarshal(rec.Data, &d); err != nil || d.Snapshot == "" {
		return &outbox.DeliveryError{Dead: true, Err: fmt.Errorf("stock: event %s does not name a snapshot: %v", rec.EventID, err)}
	}
	st := p.cfg.Store
	snap, err := st.Snapshot(ctx, d.Snapshot)
	if errors.Is(err, stock.ErrNoSnapshot) {
		return &outbox.DeliveryError{Dead: true, Err: fmt.Errorf("stock: snapshot %s is not stored", d.Snapshot)}
	}
	if err != nil {
		return err
	}
	log := p.log.With("snapshot", snap.Key, "warehouse", snap.Warehouse)
	if _, ok := p.cfg.Sender.Warehouse(snap.Warehouse); !ok {
		return &outbox.DeliveryError{Dead: true, Err: fmt.Errorf("stock: warehouse %s has no %s warehouse: add it to connectors.%s.stock_warehouses",
			snap.Warehouse, p.mp, p.mp)}
	}
	now := p.cfg.Now()
	// A newer snapshot of the warehouse is behind this one in the lane: it sends
	// whatever changed, so this one has nothing left to do.
	if latest, err := st.Latest(ctx, snap.Warehouse, time.Time{}); err == nil && latest.Key != snap.Key && latest.Slot.After(snap.Slot) {
		pub, err := st.StartPublish(ctx, stock.Publish{SnapshotKey: snap.Key, Marketplace: p.mp, Warehouse: snap.Warehouse, StartedAt: now})
		if err != nil {
			return err
		}
		if pub.FinishedAt == nil {
			pub.FinishedAt, pub.Note, pub.Warnings = &now, "superseded by the newer snapshot "+latest.Key, []string{}
			if err := st.FinishPublish(ctx, pub); err != nil {
				return err
			}
		}
		log.Info("stock publish superseded", "by", latest.Key)
		return nil
	}
	lastFull, err := st.LastFull(ctx, p.mp, snap.Warehouse)
	if err != nil {
		return err
	}
	pub, err := st.StartPublish(ctx, stock.Publish{SnapshotKey: snap.Key, Marketplace: p.mp, Warehouse: snap.Warehouse,
		Full: lastFull.IsZero() || now.Sub(lastFull) >= p.cfg.FullRefresh, StartedAt: now})
	if err != nil {
		return err
	}
	if pub.FinishedAt != nil {
		return nil // a redelivery of a finished publish
	}
	items, err := st.Items(ctx, snap.Key)
	if err != nil {
		return err
	}
	states, err := st.States(ctx, p.mp, snap.Warehouse)
	if err != nil {
		return err
	}

	var held map[string]decimal.Decimal
	if p.cfg.Pending != nil {
		if held, err = p.cfg.Pending(ctx, snap.Warehouse); err != nil {
			return fmt.Errorf("stock: reading the orders not yet in 1C: %w", err)
		}
	}

	var todo []*pending
	var skipped []stock.ItemState
	for _, it := range items {
		q := stock.Available(it.Quantity, p.cfg.Reserves.For(p.mp, it.SKU), held[it.SKU])
		amount, warning := stock.Amount(q, p.cfg.Sender.MaxAmount())
		old, had := states[it.SKU]
		mkt, reason := it.SKU, ""
		if p.cfg.MarketSKUs != nil {
			switch skus := p.cfg.MarketSKUs(it.SKU); len(skus) {
			case 0:
				reason = fmt.Sprintf("no line for %s in connectors.sku_map (%s): add %s,<%s SKU>,%s", p.mp, p.cfg.SKUMapPath, p.cfg.mapName(), p.mp, it.SKU)
			case 1:
				mkt = skus[0]
			default:
				reason = fmt.Sprintf("connectors.sku_map (%s) maps %d %s listings (%s) to this one 1C SKU: one stock cannot be published to several listings; keep one line",
					p.cfg.SKUMapPath, len(skus), p.mp, strings.Join(skus, ", "))
			}
		}
		if reason != "" {
			if !had || old.Outcome != stock.Skipped || old.Reason != reason || old.SnapshotKey != snap.Key {
				skipped = append(skipped, stock.ItemState{Marketplace: p.mp, Warehouse: snap.Warehouse, SKU: it.SKU, Value: amount,
					Outcome: stock.Skipped, Reason: reason, Warning: warning, SnapshotKey: snap.Key, SentAt: old.SentAt,
					PublishedAt: old.PublishedAt, UpdatedAt: now})
			}
			continue
		}
		switch {
		case had && old.SnapshotKey == snap.Key && old.Outcome != stock.Deferred:
			continue // handled by an earlier delivery of this publish
		case !pub.Full && had && old.Value == amount && old.MarketSKU == mkt && old.Outcome != stock.Deferred:
			continue // unchanged since it was last sent (taken, refused or mismatched)
		}
		pd := &pending{update: stock.Update{SKU: it.SKU, MarketSKU: mkt, Amount: amount}, warning: warning}
		if had && old.SentAt != nil {
			// SentAt is when the answer came (the request reached the marketplace
			// before); a send whose answer was never recorded may have reached it
			// as late as one Send's Timeout after it was recorded.
			last := *old.SentAt
			if old.Outcome == stock.Deferred && old.Reason == noAnswer {
				last = last.Add(p.cfg.Sender.Timeout())
			}
			pd.earliest = last.Add(p.cfg.Sender.MinResend())
		}
		todo = append(todo, pd)
	}
	if len(skipped) > 0 {
		if err := st.RecordStates(ctx, skipped); err != nil {
			return err
		}
	}
	if err := p.send(ctx, log, snap, states, todo); err != nil {
		return err
	}
	return p.finish(ctx, log, pub, items)
}

// send sends the pending items in batches, each no sooner than its earliest time,
// until all have an outcome or the delivery's time is up.
func (p *Publisher) send(ctx context.Context, log *slog.Logger, snap stock.Snapshot, states map[string]stock.ItemState, todo []*pending) error {
	sender := p.cfg.Sender
	size := max(sender.BatchSize(), 1)
	for len(todo) > 0 {
		now := p.cfg.Now()
		var batch []*pending
		var rest []*pending
		next := time.Time{}
		for _, pd := range todo {
			if len(batch) < size && !pd.earliest.After(now) {
				batch = append(batch, pd)
				continue
			}
			rest = append(rest, pd)
			if pd.earliest.After(now) && (next.IsZero() || pd.earliest.Before(next)) {
				next = pd.earliest
			}
		}
		left := time.Duration(1<<62 - 1)
		if dl, ok := ctx.Deadline(); ok {
			left = time.Until(dl)
		}
		if len(batch) == 0 {
			wait := next.Sub(now)
			if wait+sender.Timeout() > left {
				return &outbox.DeliveryError{Continue: true, RetryAfter: wait,
					Err: fmt.Errorf("stock: %d items of %s wait for %s's resend rule; the publish goes on at %s", len(todo), snap.Key, p.mp, next.UTC().Format(time.RFC3339))}
			}
			if err := sleep(ctx, wait); err != nil {
				return err
			}
			continue
		}
		if sender.Timeout() > left {
			return &outbox.DeliveryError{Continue: true,
				Err: fmt.Errorf("stock: %d items of %s still to send to %s; the publish goes on at the next delivery", len(todo), snap.Key, p.mp)}
		}
		// The items are recorded as sent before they are: a replica that takes
		// over after a crash still keeps the marketplace's resend rule (counted
		// from a Timeout later, see Publish). Once answered, SentAt is when the
		// answer came: the request reached the marketplace no later, whatever the
		// sender's rate limiter made it wait, so the resend rule counted from it
		// holds at the marketplace.
		updates := make([]stock.Update, len(batch))
		before := make([]stock.ItemState, len(batch))
		for i, pd := range batch {
			updates[i] = pd.update
			old := states[pd.update.SKU]
			before[i] = stock.ItemState{Marketplace: p.mp, Warehouse: snap.Warehouse, SKU: pd.update.SKU, MarketSKU: pd.update.MarketSKU,
				Value: pd.update.Amount, Outcome: stock.Deferred, Reason: noAnswer, Warning: pd.warning,
				SnapshotKey: snap.Key, SentAt: &now, PublishedAt: old.PublishedAt, UpdatedAt: now}
		}
		if err := p.cfg.Store.RecordStates(ctx, before); err != nil {
			if leaseOver(ctx) { // nothing of this batch was sent
				return goesOn(len(todo), snap.Key, p.mp, err)
			}
			return err
		}
		results, err := sender.Send(ctx, snap.Warehouse, updates)
		done := p.cfg.Now()
		if err != nil && leaseOver(ctx) {
			// The lease ran out in mid-send: the batch is recorded as sent with no
			// answer, so the next delivery keeps the resend rule and sends it again.
			return goesOn(len(todo), snap.Key, p.mp, err)
		}
		if err != nil {
			var de *outbox.DeliveryError
			if errors.As(err, &de) && de.RetryAfter > 0 && !de.Dead && !de.Disable {
				// The marketplace asked to wait: the batch goes back, no sooner.
				for _, pd := range batch {
					pd.earliest = laterOf(done.Add(de.RetryAfter), done.Add(sender.MinResend()))
				}
				todo = append(rest, batch...)
				continue
			}
			return err
		}
		byKey := make(map[string]stock.Result, len(results))
		for _, r := range results {
			byKey[r.SKU] = r
		}
		after := make([]stock.ItemState, 0, len(batch))
		for i, pd := range batch {
			r, ok := byKey[pd.update.SKU]
			if !ok {
				r = stock.Result{SKU: pd.update.SKU, Outcome: stock.Deferred, Reason: "the marketplace's answer did not mention the item"}
			}
			s := before[i]
			s.Outcome, s.Reason, s.SentAt, s.UpdatedAt = r.Outcome, r.Reason, &done, done
			switch r.Outcome {
			case stock.Published:
				s.PublishedAt, s.Reason = &done, ""
			case stock.Deferred:
				pd.earliest = laterOf(done.Add(r.RetryAfter), done.Add(sender.MinResend()))
				rest = append(rest, pd)
			}
			states[pd.update.SKU] = s
			after = append(after, s)
		}
		// What the marketplace answered is recorded even when the lease ran out
		// meanwhile (a loaded database): lost, it would make the next delivery send
		// the batch again.
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
		err = p.cfg.Store.RecordStates(wctx, after)
		cancel()
		if err != nil {
			return err
		}
		todo = rest
		log.Debug("stock batch sent", "items", len(batch), "left", len(todo))
	}
	return nil
}

// recordTimeout bounds the write of a batch's answers, which outlives the lease.
const recordTimeout = 30 * time.Second

// leaseOver reports whether the delivery's lease (ctx's deadline) has run out, as
// opposed to the relay stopping.
func leaseOver(ctx context.Context) bool {
	return errors.Is(ctx.Err(), context.DeadlineExceeded)
}

// goesOn is the answer of a publish whose lease ran out: it goes on at the next
// delivery, without counting an attempt.
func goesOn(left int, key, mp string, err error) error {
	return &outbox.DeliveryError{Continue: true,
		Err: fmt.Errorf("stock: %d items of %s still to send to %s when the lease ran out (%v); the publish goes on at the next delivery", left, key, mp, err)}
}

// finish counts the publish's outcomes from the item states and records it.
func (p *Publisher) finish(ctx context.Context, log *slog.Logger, pub stock.Publish, items []stock.Item) error {
	states, err := p.cfg.Store.States(ctx, p.mp, pub.Warehouse)
	if err != nil {
		return err
	}
	var warnings []string
	left := 0
	for _, it := range items {
		s, ok := states[it.SKU]
		if !ok || s.SnapshotKey != pub.SnapshotKey {
			pub.Unchanged++
			continue
		}
		if s.SentAt != nil && !s.SentAt.Before(pub.StartedAt) {
			pub.Sent++
		}
		switch s.Outcome {
		case stock.Published:
			pub.Published++
		case stock.Refused:
			pub.Refused++
		case stock.Mismatch:
			pub.Mismatched++
		case stock.Skipped:
			pub.Skipped++
		}
		if s.Warning != "" {
			warnings, left = stock.AddWarning(warnings, left, it.SKU+": "+s.Warning)
		}
	}
	now := p.cfg.Now()
	pub.FinishedAt = &now
	pub.Warnings = stock.CloseWarnings(warnings, left)
	if pub.Warnings == nil {
		pub.Warnings = []string{}
	}
	if err := p.cfg.Store.FinishPublish(ctx, pub); err != nil {
		return err
	}
	log.Info("stock published", "full", pub.Full, "sent", pub.Sent, "published", pub.Published, "refused", pub.Refused,
		"mismatched", pub.Mismatched, "skipped", pub.Skipped, "unchanged", pub.Unchanged)
	return nil
}

func laterOf(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
