package connectors

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/order"
)

// ReturnItem is one marketplace return as a connector read it.
type ReturnItem struct {
	// ID is the marketplace's id of the return as it appears in its key
	// (<source>:return:<id>:register). Empty when not even the id could be read: the
	// item is then logged and counted only.
	ID string
	// Return is the mapped return, SKUs still the marketplace's (the poller applies
	// the SKU map). Nil when Err is set. A return without lines (a marketplace that
	// names only the order, as Wildberries does) is the whole order coming back: the
	// poller takes the lines, and the currency, from the order's create operation in
	// the journal, already mapped to 1C's SKUs.
	Return *order.Return
	// Err says why the return cannot be carried into 1C, naming the field: it is
	// recorded as a failed operation with this reason.
	Err error
	// Raw is the marketplace's JSON of the return, kept with a failure.
	Raw json.RawMessage
}

// ReturnLister is what a Marketplace also implements when it reads returns.
type ReturnLister interface {
	// Returns calls fn with every page of returns the marketplace registered (or
	// moved to the state that counts) in [from, to), following pagination and
	// splitting the window where the marketplace limits it. A bad return is a
	// ReturnItem with Err; a listing error ends it.
	Returns(ctx context.Context, from, to time.Time, fn func(page []ReturnItem) error) error
}

// ReturnsCursor is the name the returns' cursor of a connector is kept under:
// <source>.returns, apart from the orders' cursor.
func ReturnsCursor(source string) string { return source + ".returns" }

// ReturnExternalID is the external id a return operation is registered with:
// return:<id>. With the source it is the return's own 1C external id
// (<source>:return:<id>, order.Return.OneCExternalID), never the order's, so that a
// return is not taken for its order (a second create, a cancel) by anything that
// groups operations by their external id; the order is named by the payload's
// order_key.
func ReturnExternalID(id string) string { return "return:" + id }

// ReadsReturns reports whether the poller lists returns: the marketplace implements
// ReturnLister and PollerConfig.Returns is on.
func (p *Poller) ReadsReturns() bool {
	_, ok := p.mp.(ReturnLister)
	return ok && p.cfg.Returns
}

// PollReturnsOnce lists the returns of the window from the returns' cursor (less the
// lookback) to now, registers each, and moves that cursor to the window's end only
// when all of it was registered or recorded. It does nothing when the poller does
// not read returns.
func (p *Poller) PollReturnsOnce(ctx context.Context) (PollStats, error) {
	rl, ok := p.mp.(ReturnLister)
	if !ok || !p.cfg.Returns {
		return PollStats{}, nil
	}
	var st PollStats
	from, now, err := p.window(ctx, ReturnsCursor(p.mp.Name()), func(from, to time.Time) (seen, unreadable, registered int, err error) {
		err = p.listReturns(ctx, rl, from, to, &st)
		return st.ReturnsSeen, st.ReturnsUnreadable, st.ReturnsRegistered + st.ReturnsRevised, err
	})
	p.log.InfoContext(ctx, "poll returns", "from", from, "to", now, "seen", st.ReturnsSeen,
		"registered", st.ReturnsRegistered, "duplicates", st.ReturnsDuplicates, "conflicts", st.ReturnsConflicts,
		"failed", st.ReturnsFailed, "unreadable", st.ReturnsUnreadable, "panics", st.Panics, "ok", err == nil)
	return st, err
}

// listReturns runs the marketplace's listing of returns, a panic outside one return
// ending it with an error (the cursor stays).
func (p *Poller) listReturns(ctx context.Context, rl ReturnLister, from, to time.Time, st *PollStats) (err error) {
	defer func() {
		if v := recover(); v != nil {
			st.Panics++
			p.panics.Add(1)
			p.log.ErrorContext(ctx, "the listing of returns panicked; the cursor stays", "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			err = fmt.Errorf("%s: the listing of returns panicked: %v", p.mp.Name(), v)
		}
	}()
	return rl.Returns(ctx, from, to, func(page []ReturnItem) error {
		for _, it := range page {
			if err := p.handleReturnSafe(ctx, it, st); err != nil {
				return err
			}
		}
		return nil
	})
}

// HandleReturn registers one return as the poller does.
func (p *Poller) HandleReturn(ctx context.Context, it ReturnItem) (PollStats, error) {
	var st PollStats
	err := p.handleReturnSafe(ctx, it, &st)
	return st, err
}

// handleReturnSafe is handleReturn with a panic recovered: logged with the key,
// counted, and the return recorded failed.
func (p *Poller) handleReturnSafe(ctx context.Context, it ReturnItem, st *PollStats) (err error) {
	defer func() {
		v := recover()
		if v == nil {
			return
		}
		st.Panics++
		p.panics.Add(1)
		key := ""
		if order.CheckKeyID(it.ID) == "" && it.ID != "" {
			key = order.ReturnKey(p.mp.Name(), it.ID)
		}
		p.log.ErrorContext(ctx, "handling a return panicked; it is recorded failed and the page goes on",
			"key", key, "id", strconv.Quote(it.ID), "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
		if key == "" {
			return
		}
		op := journal.NewOperation{Key: key, Kind: order.KindReturn, Source: p.mp.Name(), ExternalID: ReturnExternalID(it.ID), Payload: storable(it.Raw)}
		if _, rerr := p.cfg.Journal.RegisterFailed(p.actor(ctx), op, order.SafeText(fmt.Sprintf("internal error: handling the return panicked: %v", v))); rerr != nil {
			err = fmt.Errorf("record failed return %s: %w", key, rerr)
		}
	}()
	return p.handleReturn(ctx, it, st)
}

// handleReturn registers one return. Only a database error stops the listing: a bad
// return is recorded as a failed operation and the page goes on.
func (p *Poller) handleReturn(ctx context.Context, it ReturnItem, st *PollStats) error {
	ctx = p.actor(ctx)
	st.ReturnsSeen++
	name := p.mp.Name()
	if it.ID == "" || order.CheckKeyID(it.ID) != "" {
		st.ReturnsUnreadable++
		p.log.ErrorContext(ctx, "a return without a readable id was skipped", "id", strconv.Quote(it.ID),
			"err", it.Err, "raw", strconv.Quote(snippet(it.Raw)))
		return nil
	}
	key := order.ReturnKey(name, it.ID)
	log := p.log.With("key", key)

	mapErr := it.Err
	var r order.Return
	if mapErr == nil && it.Return == nil {
		mapErr = errors.New("the connector mapped no return")
	}
	if mapErr == nil {
		r = *it.Return
		r.Source, r.ID = name, it.ID
		if len(r.Lines) == 0 {
			mapErr = p.linesOfOrder(ctx, &r)
		} else {
			o := order.Order{Source: name, Lines: append([]order.Line(nil), it.Return.Lines...)}
			if err := p.cfg.SKUs.Apply(name, &o); err != nil {
				mapErr = err
			} else {
				r.Lines = o.Lines
			}
		}
		if mapErr == nil {
			mapErr = r.Validate()
		}
	}
	op := journal.NewOperation{Key: key, Kind: order.KindReturn, Source: name, ExternalID: ReturnExternalID(it.ID)}
	if mapErr == nil {
		op.Payload = r.Canonical()
	}
	out, err := p.record(ctx, log.With("order_key", r.OrderKey, "type", r.Type), "return", op, it.Raw, mapErr)
	if err != nil {
		return err
	}
	st.count(out, &st.ReturnsRegistered, &st.ReturnsDuplicates, &st.ReturnsFailed, &st.ReturnsRevised, &st.ReturnsConflicts)
	return nil
}

// orderReader is the part of the journal that reads one operation (a journal.Store
// has it).
type orderReader interface {
	Get(ctx context.Context, key string) (journal.Operation, error)
}

// errNoOrder is a return whose order the journal does not hold (yet).
var errNoOrder = errors.New("the journal holds no such order")

// linesOfOrder fills a return without lines with its order's, read off the order's
// create operation. An order the journal does not hold fails the return naming
// order_key; when the order arrives, the next listing revises the failed return.
func (p *Poller) linesOfOrder(ctx context.Context, r *order.Return) error {
	jr, ok := p.cfg.Journal.(orderReader)
	if !ok {
		return &order.ValidationError{Problems: []order.FieldError{{Field: "lines", Message: "are required (the marketplace named none)"}}}
	}
	op, err := jr.Get(ctx, r.OrderKey)
	if errors.Is(err, journal.ErrNotFound) {
		err = errNoOrder
	}
	if err == nil && op.Kind != order.KindCreate {
		err = fmt.Errorf("it is a %s, not an order's create", op.Kind)
	}
	var o order.Order
	if err == nil {
		if jerr := json.Unmarshal(op.Payload, &o); jerr != nil || len(o.Lines) == 0 {
			err = errors.New("its create names no lines yet")
		}
	}
	if err != nil {
		return &order.ValidationError{Problems: []order.FieldError{{Field: "order_key",
			Message: fmt.Sprintf("the return names no lines, and its order %s cannot give them: %v", r.OrderKey, err)}}}
	}
	r.Lines = append([]order.Line(nil), o.Lines...)
	if r.Currency == "" {
		r.Currency = o.Currency
	}
	return nil
}
