package connectors

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/order"
)

// Cursor is a connector's position and health, kept in the database
// (connector_cursors) so that a restart resumes where the last complete listing ended.
type Cursor struct {
	Connector string `json:"connector"`
	// Position is the end of the last window listed completely: every order up to it
	// was registered or recorded. Zero before the first complete listing.
	Position      time.Time  `json:"position"`
	LastPollAt    *time.Time `json:"last_poll_at"`
	LastSuccessAt *time.Time `json:"last_success_at"`
	LastError     string     `json:"last_error"`
	OrdersSeen    int64      `json:"orders_seen"` // items handled, repeats included
	Unreadable    int64      `json:"unreadable"`  // items whose id could not be read
}

// CursorStore keeps cursors.
type CursorStore interface {
	// Cursor returns the connector's cursor, the zero Cursor (with Connector set)
	// when there is none yet.
	Cursor(ctx context.Context, connector string) (Cursor, error)
	// SaveCursor writes the whole cursor (an upsert on the connector's name).
	SaveCursor(ctx context.Context, c Cursor) error
	// Cursors lists every connector's cursor, by name.
	Cursors(ctx context.Context) ([]Cursor, error)
}

// Registrar is the part of the journal the poller writes to.
type Registrar interface {
	Register(ctx context.Context, op journal.NewOperation) (journal.Registration, error)
	RegisterFailed(ctx context.Context, op journal.NewOperation, reason string) (journal.Registration, error)
	Revise(ctx context.Context, op journal.NewOperation) (journal.Operation, error)
}

// PollerConfig configures a Poller.
type PollerConfig struct {
	Interval time.Duration // connectors.<name>.poll_interval, default 1m
	// Lookback is the overlap: each listing starts this long before the cursor (or
	// before now on the first run), so orders that appear late or across a clock
	// skew are still seen; repeats are absorbed by registration. Default 72h.
	Lookback time.Duration
	Journal  Registrar
	Cursors  CursorStore
	SKUs     *SKUMap // nil: identity
	// Returns lists the marketplace's returns too, when it implements ReturnLister
	// (connectors.<name>.returns.enabled), on their own cursor (ReturnsCursor) with
	// the same lookback; ReturnsInterval is their schedule, default Interval.
	Returns         bool
	ReturnsInterval time.Duration
	// Registered is called after a listing registered something new (wake the engine).
	Registered func()
	Now        func() time.Time
	Logger     *slog.Logger
}

// PollStats counts what one listing did. Panics counts the orders (or listings)
// whose handling panicked: each was recovered, logged with its key, and the rest
// went on.
type PollStats struct {
	Seen, Registered, Duplicates, Conflicts, Revised, Failed, Cancels, Unreadable, Panics int
	// The returns' listing (PollReturnsOnce): returns handled, repeats included;
	// registered new; read again unchanged; changed after registration; failed to
	// map before and pending again; recorded failed; without a readable id.
	ReturnsSeen, ReturnsRegistered, ReturnsDuplicates, ReturnsConflicts, ReturnsRevised, ReturnsFailed, ReturnsUnreadable int
}

// Poller lists a marketplace on a schedule and registers what it finds.
type Poller struct {
	mp  Marketplace
	cfg PollerConfig
	log *slog.Logger

	mu      sync.Mutex
	cancel  context.CancelFunc
	done    chan struct{}
	stopped atomic.Bool  // an authentication failure stopped the connector
	panics  atomic.Int64 // panics recovered since NewPoller
}

// Panics is the number of panics recovered since NewPoller, in the handling of one
// order or of a whole listing: each is logged with the key, and counted in PollStats.
func (p *Poller) Panics() int64 { return p.panics.Load() }

// NewPoller returns a poller for mp.
func NewPoller(mp Marketplace, cfg PollerConfig) *Poller {
	cfg.Interval = cmp.Or(cfg.Interval, time.Minute)
	cfg.Lookback = cmp.Or(cfg.Lookback, 72*time.Hour)
	cfg.ReturnsInterval = cmp.Or(cfg.ReturnsInterval, cfg.Interval)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Poller{mp: mp, cfg: cfg, log: cfg.Logger.With("connector", mp.Name())}
}

// Start polls at once and then every Interval until Stop. An authentication failure
// stops this poller only.
func (p *Poller) Start(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cancel != nil {
		return errors.New("connectors: poller already started")
	}
	ctx, p.cancel = context.WithCancel(ctx)
	p.done = make(chan struct{})
	var wg sync.WaitGroup
	if p.ReadsReturns() {
		wg.Go(func() { p.returnsLoop(ctx) })
	}
	go func() {
		defer close(p.done)
		defer wg.Wait()
		t := time.NewTimer(0)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			_, err := p.PollOnce(ctx)
			var ae *AuthError
			switch {
			case ctx.Err() != nil:
				return
			case errors.As(err, &ae):
				p.stopped.Store(true)
				p.log.Error("connector stopped: fix the credential and restart ordersync", "err", err)
				return
			case err != nil:
				p.log.Error("poll failed; the cursor stays, the next poll lists the window again", "err", err)
			}
			t.Reset(p.cfg.Interval)
		}
	}()
	return nil
}

// returnsLoop lists the returns at once and then every ReturnsInterval. An
// authentication failure stops the returns' listing only (a key may lack the
// returns' role and still read orders).
func (p *Poller) returnsLoop(ctx context.Context) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		_, err := p.PollReturnsOnce(ctx)
		var ae *AuthError
		switch {
		case ctx.Err() != nil:
			return
		case errors.As(err, &ae):
			p.log.Error("returns are no longer read: fix the credential (or its role) and restart ordersync", "err", err)
			return
		case err != nil:
			p.log.Error("poll of returns failed; the cursor stays, the next poll lists the window again", "err", err)
		}
		t.Reset(p.cfg.ReturnsInterval)
	}
}

// Stop ends polling and waits for a listing in progress. Safe twice and before Start.
func (p *Poller) Stop() {
	p.mu.Lock()
	cancel, done := p.cancel, p.done
	p.cancel = nil
	p.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-done
}

// PollOnce lists the window from the cursor (less the lookback) to now, registers
// every order, and moves the cursor to the window's end only when all of it was
// registered or recorded.
func (p *Poller) PollOnce(ctx context.Context) (PollStats, error) {
	if p.cfg.SKUs != nil {
		if changed, err := p.cfg.SKUs.Reload(); err != nil {
			p.log.ErrorContext(ctx, "SKU map not reloaded; the last good one stays in force", "err", err)
		} else if changed {
			p.log.InfoContext(ctx, "SKU map reloaded", "path", p.cfg.SKUs.Path())
		}
	}
	var st PollStats
	from, now, err := p.window(ctx, p.mp.Name(), func(from, to time.Time) (seen, unreadable, registered int, err error) {
		err = p.list(ctx, from, to, &st)
		return st.Seen, st.Unreadable, st.Registered + st.Revised + st.Cancels, err
	})
	p.log.InfoContext(ctx, "poll", "from", from, "to", now, "seen", st.Seen, "registered", st.Registered,
		"duplicates", st.Duplicates, "failed", st.Failed, "cancels", st.Cancels, "unreadable", st.Unreadable,
		"panics", st.Panics, "ok", err == nil)
	return st, err
}

// window runs one listing of the cursor name's window, from its position (less
// the lookback; now less the lookback before the first complete listing) to now,
// and moves the cursor to now only when list ended without an error. list says
// what it saw, what it could not read, and what it registered anew (which wakes
// the engine).
func (p *Poller) window(ctx context.Context, name string,
	list func(from, to time.Time) (seen, unreadable, registered int, err error)) (from, now time.Time, err error) {
	cur, err := p.cfg.Cursors.Cursor(ctx, name)
	if err != nil {
		return from, now, fmt.Errorf("%s: read cursor: %w", name, err)
	}
	cur.Connector = name
	now = p.cfg.Now().UTC()
	from = now.Add(-p.cfg.Lookback)
	if !cur.Position.IsZero() {
		from = cur.Position.Add(-p.cfg.Lookback)
	}
	seen, unreadable, registered, err := list(from, now)
	cur.LastPollAt = &now
	cur.OrdersSeen += int64(seen)
	cur.Unreadable += int64(unreadable)
	switch {
	case err == nil:
		cur.Position, cur.LastSuccessAt, cur.LastError = now, &now, ""
	case ctx.Err() != nil:
		// Stopped mid-listing (shutdown): not a marketplace error. The cursor stays
		// and the next start lists the window again.
	default:
		cur.LastError = err.Error()
	}
	if serr := p.cfg.Cursors.SaveCursor(context.WithoutCancel(ctx), cur); serr != nil && err == nil {
		err = fmt.Errorf("%s: save cursor: %w", name, serr)
	}
	if registered > 0 && p.cfg.Registered != nil {
		p.cfg.Registered()
	}
	return from, now, err
}

// list runs the marketplace's listing. A panic in the connector outside one order
// (reading a page) ends this listing with an error, as an unreadable page does: the
// cursor stays, and the poller goes on with the next poll.
func (p *Poller) list(ctx context.Context, from, to time.Time, st *PollStats) (err error) {
	defer func() {
		if v := recover(); v != nil {
			st.Panics++
			p.panics.Add(1)
			p.log.ErrorContext(ctx, "the listing panicked; the cursor stays", "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			err = fmt.Errorf("%s: the listing panicked: %v", p.mp.Name(), v)
		}
	}()
	return p.mp.List(ctx, from, to, func(page []Item) error {
		for _, it := range page {
			if err := p.handleSafe(ctx, it, st); err != nil {
				return err
			}
		}
		return nil
	})
}

// handleSafe is handle with a panic recovered: it is logged with the order's key and
// counted, the order is recorded failed when its key can be stored, and the page
// goes on.
func (p *Poller) handleSafe(ctx context.Context, it Item, st *PollStats) (err error) {
	defer func() {
		v := recover()
		if v == nil {
			return
		}
		st.Panics++
		p.panics.Add(1)
		key := ""
		if order.CheckKeyID(it.ID) == "" {
			key = it.CreateKey(p.mp.Name())
		}
		p.log.ErrorContext(ctx, "handling an order panicked; it is recorded failed and the page goes on",
			"key", key, "id", strconv.Quote(it.ID), "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
		if key == "" {
			return
		}
		err = p.recordPanic(ctx, it, key, v)
	}()
	return p.handle(ctx, it, st)
}

// actor is ctx carrying the poller as the actor of what it registers
// (journal.ActorPoller of the connector), unless ctx names one already (a caller
// that handles an item for someone else keeps its own).
func (p *Poller) actor(ctx context.Context) context.Context {
	if journal.ActorOf(ctx) != "" {
		return ctx
	}
	return journal.WithActor(ctx, journal.ActorPoller(p.mp.Name()))
}

// recordPanic records the order whose handling panicked as failed; a second panic is
// only logged.
func (p *Poller) recordPanic(ctx context.Context, it Item, key string, v any) (err error) {
	ctx = p.actor(ctx)
	defer func() {
		if w := recover(); w != nil {
			p.panics.Add(1)
			p.log.ErrorContext(ctx, "recording a panicked order failed too", "key", key, "panic", fmt.Sprint(w))
			err = nil
		}
	}()
	op := journal.NewOperation{Key: key, Kind: order.KindCreate, Source: p.mp.Name(), ExternalID: it.ID, Payload: storable(it.Raw)}
	if _, err := p.cfg.Journal.RegisterFailed(ctx, op, order.SafeText(fmt.Sprintf("internal error: handling the order panicked: %v", v))); err != nil {
		return fmt.Errorf("record failed order %s: %w", key, err)
	}
	return nil
}

// storable is a marketplace's raw JSON of an order, as it can be kept with a failure
// on either store: itself when it is valid JSON that passes order.CheckJSON and holds
// no \u0000 (PostgreSQL's jsonb refuses it), otherwise {"unparsed": "<the bytes, Go
// quoted>"}.
func storable(raw json.RawMessage) json.RawMessage {
	if json.Valid(raw) && order.CheckJSON(raw, order.JSONOptions{}) == nil && !hasNULEscape(raw) {
		return raw
	}
	b, _ := json.Marshal(map[string]string{"unparsed": strconv.Quote(string(raw))})
	return b
}

// hasNULEscape reports whether JSON text holds the escape \u0000 (an escaped
// backslash followed by u0000 is not one).
func hasNULEscape(raw []byte) bool {
	for i := 0; i+5 < len(raw); i++ {
		if raw[i] != '\\' {
			continue
		}
		if raw[i+1] == 'u' && string(raw[i+2:i+6]) == "0000" {
			return true
		}
		i++ // the escaped character
	}
	return false
}

// Stopped reports whether an authentication failure stopped the poller.
func (p *Poller) Stopped() bool { return p.stopped.Load() }

// Handle registers one item as the poller does; the resync command uses it.
func (p *Poller) Handle(ctx context.Context, it Item) (PollStats, error) {
	var st PollStats
	err := p.handle(ctx, it, &st)
	return st, err
}

// handle registers one item. Only a database error stops the listing: a bad order
// is recorded as a failed operation and the page goes on.
func (p *Poller) handle(ctx context.Context, it Item, st *PollStats) error {
	ctx = p.actor(ctx)
	st.Seen++
	name := p.mp.Name()
	if it.ID == "" || order.CheckKeyID(it.ID) != "" {
		// No key can be built from it: PostgreSQL would refuse the bytes, and two
		// different bad ids must not become one key.
		st.Unreadable++
		p.log.ErrorContext(ctx, "an order without a readable id was skipped", "id", strconv.Quote(it.ID),
			"err", it.Err, "raw", strconv.Quote(snippet(it.Raw)))
		return nil
	}
	createKey := it.CreateKey(name)
	log := p.log.With("key", createKey)

	mapErr := it.Err
	var o order.Order
	if mapErr == nil && it.Order == nil {
		mapErr = errors.New("the connector mapped no order")
	}
	if mapErr == nil {
		o = *it.Order
		o.Lines = append([]order.Line(nil), it.Order.Lines...)
		o.Source = name
		if o.ExternalID == "" {
			o.ExternalID = it.ID
		}
		if err := p.cfg.SKUs.Apply(name, &o); err != nil {
			mapErr = err
		} else {
			mapErr = o.Validate()
		}
	}

	if mapErr != nil {
		if it.Cancelled {
			// A cancelled order that does not map need not be created: its cancel is
			// what matters, and it ends done with a note if nothing was created.
			return p.registerCancel(ctx, it, st)
		}
		op := journal.NewOperation{Key: createKey, Kind: order.KindCreate, Source: name, ExternalID: it.ID}
		out, err := p.record(ctx, log, "order", op, it.Raw, mapErr)
		if err != nil {
			return err
		}
		st.count(out, &st.Registered, &st.Duplicates, &st.Failed, &st.Revised, &st.Conflicts)
		return nil
	}

	op := journal.NewOperation{Key: createKey, Kind: order.KindCreate, Source: name, ExternalID: o.ExternalID, Payload: o.Canonical()}
	out, err := p.record(ctx, log, "order", op, nil, nil)
	if err != nil {
		return err
	}
	st.count(out, &st.Registered, &st.Duplicates, &st.Failed, &st.Revised, &st.Conflicts)
	if it.Cancelled {
		return p.registerCancel(ctx, it, st)
	}
	return nil
}

// recorded is what registering one marketplace operation came to.
type recorded int

const (
	recRegistered recorded = iota // a new operation
	recDuplicate                  // the same again, or a failure recorded before
	recFailed                     // recorded failed: it does not map
	recRevised                    // it failed to map before and maps now: pending again
	recConflict                   // the marketplace changed it: recorded, not applied
)

// count adds out to the counter it names.
func (st *PollStats) count(out recorded, registered, duplicates, failed, revised, conflicts *int) {
	switch out {
	case recRegistered:
		*registered++
	case recDuplicate:
		*duplicates++
	case recFailed:
		*failed++
	case recRevised:
		*revised++
	case recConflict:
		*conflicts++
	}
}

// record registers op, what (an "order", a "return") a listing found: when mapErr
// is set, as failed with that reason and raw, the marketplace's bytes, as its
// payload; otherwise with op's payload, where a conflict with an operation that
// failed to map and was never attempted revises it (the SKU map was fixed, the
// order arrived), and any other conflict is recorded, not applied.
func (p *Poller) record(ctx context.Context, log *slog.Logger, what string, op journal.NewOperation, raw json.RawMessage,
	mapErr error) (recorded, error) {
	if mapErr != nil {
		op.Payload = storable(raw)
		reason := order.SafeText(mapErr.Error())
		reg, err := p.cfg.Journal.RegisterFailed(ctx, op, reason)
		if err != nil {
			return 0, fmt.Errorf("record failed %s %s: %w", what, op.Key, err)
		}
		if reg.Outcome != journal.Registered {
			return recDuplicate, nil
		}
		log.WarnContext(ctx, what+" recorded as failed", "reason", reason)
		return recFailed, nil
	}
	reg, err := p.cfg.Journal.Register(ctx, op)
	if err != nil {
		return 0, fmt.Errorf("register %s: %w", op.Key, err)
	}
	switch reg.Outcome {
	case journal.Registered:
		log.InfoContext(ctx, what+" registered")
		return recRegistered, nil
	case journal.Duplicate:
		return recDuplicate, nil
	}
	if saved := reg.Operation; saved.Status == journal.StatusFailed && saved.Attempts == 0 {
		if _, err := p.cfg.Journal.Revise(ctx, op); err == nil {
			log.InfoContext(ctx, "a "+what+" that had failed to map maps now: it is pending again")
			return recRevised, nil
		} else if !errors.Is(err, journal.ErrNotRevisable) {
			return 0, fmt.Errorf("revise %s: %w", op.Key, err)
		}
	}
	log.WarnContext(ctx, "the marketplace changed a registered "+what+"; the change is recorded as a conflict, 1C keeps the first version")
	return recConflict, nil
}

func (p *Poller) registerCancel(ctx context.Context, it Item, st *PollStats) error {
	name := p.mp.Name()
	// The reason is the marketplace's words, for people: made safe to store rather
	// than losing the cancel for them.
	reason := order.SafeText(it.CancelReason)
	op := journal.CancelOrder(CancelPayload{Source: name, ExternalID: it.ID, Reason: reason, CreateKey: it.CreateKey(name)})
	reg, err := p.cfg.Journal.Register(ctx, op)
	if err != nil {
		return fmt.Errorf("register %s: %w", op.Key, err)
	}
	if reg.Outcome == journal.Registered {
		st.Cancels++
		p.log.InfoContext(ctx, "cancel registered", "key", op.Key, "reason", reason)
	}
	return nil
}

// Fetcher fetches one order of a marketplace for the engine, when a push only named
// it (an Ozon posting announced by TYPE_NEW_POSTING): Get, then the same SKU map and
// validation as a polled order.
type Fetcher struct {
	Marketplace Marketplace
	SKUs        *SKUMap
}

// Fetch returns the mapped canonical order of id. A panic in the connector is
// recovered and fails the order (a *order.ValidationError): retrying would panic again.
func (f Fetcher) Fetch(ctx context.Context, id string) (o order.Order, err error) {
	defer func() {
		if v := recover(); v != nil {
			o, err = order.Order{}, &order.ValidationError{Problems: []order.FieldError{{
				Field: "(order)", Message: order.SafeText(fmt.Sprintf("internal error: fetching %s %s panicked: %v", f.Marketplace.Name(), id, v)),
			}}}
		}
	}()
	it, err := f.Marketplace.Get(ctx, id)
	if err != nil {
		return order.Order{}, err
	}
	if it.Cancelled {
		return order.Order{}, fmt.Errorf("%s %s is cancelled at the marketplace: %w", f.Marketplace.Name(), id, order.ErrNoSuchOrder)
	}
	if it.Err != nil {
		var ve *order.ValidationError
		if errors.As(it.Err, &ve) {
			return order.Order{}, it.Err
		}
		// A mapping failure is the order's, not the connection's: it will not heal
		// by retrying.
		return order.Order{}, &order.ValidationError{Problems: []order.FieldError{{Field: "(order)", Message: it.Err.Error()}}}
	}
	if it.Order == nil {
		return order.Order{}, fmt.Errorf("%s %s: the connector mapped no order", f.Marketplace.Name(), id)
	}
	o = *it.Order
	o.Lines = append([]order.Line(nil), it.Order.Lines...)
	o.Source = f.Marketplace.Name()
	if err := f.SKUs.Apply(o.Source, &o); err != nil {
		return order.Order{}, err
	}
	return o, o.Validate()
}
