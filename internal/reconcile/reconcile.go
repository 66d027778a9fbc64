package reconcile

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/shopspring/decimal"

	"github.com/ordersync/ordersync/connectors"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/onec"
	"github.com/ordersync/ordersync/internal/order"
)

// Journal is what reconciliation reads of the journal (journal.Store has it).
type Journal interface {
	List(ctx context.Context, f journal.Filter) ([]journal.Operation, error)
	Get(ctx context.Context, key string) (journal.Operation, error)
}

// OneC is what reconciliation asks 1C (onec.Client has it).
type OneC interface {
	FindOrders(ctx context.Context, externalID string) ([]onec.Order, error)
	ListOrders(ctx context.Context, q onec.ListQuery) ([]onec.Order, error)
}

// Params of one reconciliation.
type Params struct {
	// Source is the orders' source: kaspi, ozon, wildberries, site, …
	Source string
	// From and To are the first and the last day of the period, both inclusive, as
	// dates in Location (their clock time is ignored).
	From, To time.Time
	// Location is the zone the days are counted in (ui.timezone); default UTC.
	Location *time.Location
	// OneCLocation is the zone of 1C's zone-less dates (onec.timezone); default
	// Location.
	OneCLocation *time.Location
	Journal      Journal
	OneC         OneC
	// Marketplace lists the source's own orders; nil for a source that has no
	// listing (site, a CRM): then only the journal and 1C are compared.
	Marketplace connectors.Marketplace
	// Progress, when set, is called as the marketplace's pages arrive, with the
	// number of orders listed so far.
	Progress func(listed int)
}

// MaxDays is the longest period one reconciliation covers: a quarter. A longer
// one would crawl a marketplace's listing for hours.
const MaxDays = 93

var (
	// ErrPeriodTooLong is a period over MaxDays, refused before anything is read.
	ErrPeriodTooLong = fmt.Errorf("reconcile: the period is longer than %d days", MaxDays)
	// ErrBusy is a reconciliation of a source asked for while one of it, on the same
	// journal, runs in this process.
	ErrBusy = errors.New("reconcile: a reconciliation of this source is already running")
)

// running holds the sources being reconciled in this process, each with its journal:
// one database's reconciliation does not hold up another's of the same source.
var running sync.Map

// busyKey names a reconciliation in running: the source, and the journal when it is a
// pointer (the stores are), whose address tells one database from another.
type busyKey struct {
	journal uintptr
	source  string
}

func busyKeyOf(p Params) busyKey {
	k := busyKey{source: p.Source}
	if v := reflect.ValueOf(p.Journal); v.Kind() == reflect.Pointer {
		k.journal = v.Pointer()
	}
	return k
}

// pageSize is how many journal operations one List reads.
const pageSize = 500

// Run reconciles the period. Every order seen on any side lands in exactly one
// category; precedence, when several would apply, is (first wins):
//
//  1. no create operation in the journal: missing_in_journal when the marketplace
//     lists the order, unknown_to_journal when only 1C holds it. A marketplace
//     order cancelled before ordersync saw it, of which 1C holds nothing live, is
//     ok: there is nothing to create.
//  2. cancelled (at the marketplace, or a cancel operation is registered) and
//     nothing live in 1C: ok, whatever became of the create.
//  3. not_done: the create is pending or failed (the note is its last error).
//  4. missing_in_1c: done, and 1C holds no order for it that is not marked for
//     deletion.
//  5. duplicate_in_1c: 1C holds two or more (not marked for deletion).
//  6. cancelled_but_live: cancelled, and 1C's order is neither cancelled nor
//     marked for deletion — goods may ship, so it outranks a wrong amount.
//  7. amount_mismatch: the marketplace's total is not 1C's, exactly.
//  8. ok.
//
// Which orders are in the period: the marketplace's orders created in it, the
// journal's create operations registered in it, and 1C's orders dated in it. An
// order one side has in the period is looked up on the other sides by its key or
// external id, not by their dates, so an order dated just outside the period on
// another side is not reported missing there.
func Run(ctx context.Context, p Params) (Report, error) {
	if p.Source == "" {
		return Report{}, errors.New("reconcile: the source is required")
	}
	if p.Journal == nil || p.OneC == nil {
		return Report{}, errors.New("reconcile: the journal and the 1C client are required")
	}
	if p.Marketplace != nil && p.Marketplace.Name() != p.Source {
		return Report{}, fmt.Errorf("reconcile: the marketplace %s does not list source %s", p.Marketplace.Name(), p.Source)
	}
	loc := cmp.Or(p.Location, time.UTC)
	oneCLoc := cmp.Or(p.OneCLocation, loc)
	start := day(p.From, loc)
	end := day(p.To, loc).AddDate(0, 0, 1)
	if !start.Before(end) {
		return Report{}, fmt.Errorf("reconcile: the period ends (%s) before it starts (%s)", p.To.Format(time.DateOnly), p.From.Format(time.DateOnly))
	}
	if days := int(end.Sub(start).Hours()/24 + 0.5); days > MaxDays {
		return Report{}, fmt.Errorf("%w: %s to %s is %d days; reconcile it in parts", ErrPeriodTooLong,
			p.From.Format(time.DateOnly), p.To.Format(time.DateOnly), days)
	}
	key := busyKeyOf(p)
	if _, busy := running.LoadOrStore(key, true); busy {
		return Report{}, fmt.Errorf("%w (%s): wait for it to finish", ErrBusy, p.Source)
	}
	defer running.Delete(key)
	r := run{p: p, start: start, end: end, byExt: map[string]*entry{}}

	if err := r.marketplace(ctx); err != nil {
		return Report{}, err
	}
	if err := r.journal(ctx); err != nil {
		return Report{}, err
	}
	list, err := ListOneC(ctx, p.OneC, p.Source, start, end, oneCLoc)
	if err != nil {
		return Report{}, fmt.Errorf("reconcile: %w", err)
	}
	for _, so := range list {
		e := r.entry(so.ID)
		e.onec = append(e.onec, so.Order)
		e.onecListed = true
	}

	rep := Report{Source: p.Source, From: start.Format(time.DateOnly), To: end.AddDate(0, 0, -1).Format(time.DateOnly),
		Totals: map[Category]int{}, Items: []Item{}}
	for _, c := range Categories {
		rep.Totals[c] = 0
	}
	var seen []journal.OneCSeen
	for _, e := range r.order {
		if err := r.complete(ctx, e); err != nil {
			return Report{}, err
		}
		it := r.judge(e)
		rep.Totals[it.Category]++
		rep.Items = append(rep.Items, it)
		if e.op != nil {
			seen = append(seen, oneCSeen(e.key, e.onec, time.Now().UTC()))
		}
	}
	// What 1C held of each order is kept in the journal, for its list.
	if rec, ok := p.Journal.(journal.OneCRecorder); ok {
		if err := rec.RecordOneC(ctx, seen); err != nil {
			return Report{}, fmt.Errorf("reconcile: %w", err)
		}
	}
	rank := map[Category]int{}
	for i, c := range Categories {
		rank[c] = i
	}
	slices.SortStableFunc(rep.Items, func(a, b Item) int {
		return cmp.Or(rank[a.Category]-rank[b.Category], strings.Compare(a.ExternalID, b.ExternalID))
	})
	return rep, nil
}

const oneCDate = "2006-01-02T15:04:05"

// oneCSeen is what 1C held of the operation key: the earliest of its orders not
// marked for deletion (or the earliest marked, when all are), and how many it held.
func oneCSeen(key string, os []onec.Order, at time.Time) journal.OneCSeen {
	s := journal.OneCSeen{Key: key, SeenAt: at}
	pick, held := PickOneC(os)
	s.Held = held
	if pick != nil {
		s.Ref, s.Number, s.Date, s.Total, s.Currency = pick.Ref, pick.Number, pick.Date, pick.Total, pick.Currency
		s.Posted, s.Cancelled, s.Deleted = pick.Posted, pick.Cancelled, pick.Deleted
	}
	return s
}

// day is the start of t's date in loc.
func day(t time.Time, loc *time.Location) time.Time {
	y, m, d := t.Date()
	return time.Date(y, m, d, 0, 0, 0, 0, loc)
}

// entry is one order as the three sides know it.
type entry struct {
	id  string // the source's external id (1C's is <source>:<id>)
	key string // the journal key of its create, once known

	listed bool // the marketplace listed it, created in the period
	item   connectors.Item

	op      *journal.Operation // the create operation, nil when the journal has none
	opKnown bool               // op was read (or looked up and not found)
	cancel  *journal.Operation // its cancel operation, read when the marketplace did not list the order

	onec       []onec.Order
	onecListed bool // 1C listed it in the period (otherwise found by external id)
}

type run struct {
	p          Params
	start, end time.Time
	byExt      map[string]*entry // by lower-cased id: 1C compares ids case-insensitively
	order      []*entry          // first seen first
}

func (r *run) entry(id string) *entry {
	k := strings.ToLower(id)
	if e, ok := r.byExt[k]; ok {
		return e
	}
	e := &entry{id: id}
	r.byExt[k] = e
	r.order = append(r.order, e)
	return e
}

// marketplace lists the source's orders created or changed in the period and keeps
// those created in it (an unreadable one, with no creation date, when it changed in
// the period or says nothing of when).
func (r *run) marketplace(ctx context.Context) error {
	mp := r.p.Marketplace
	if mp == nil {
		return nil
	}
	listed := 0
	err := mp.List(ctx, r.start, r.end, func(page []connectors.Item) error {
		for _, it := range page {
			listed++
			if it.ID == "" {
				continue // not even its id could be read: the poller logs and counts it only
			}
			var at time.Time
			if it.Order != nil {
				at = it.Order.CreatedAt
			} else {
				at = it.UpdatedAt
			}
			if !at.IsZero() && (at.Before(r.start) || !at.Before(r.end)) {
				continue
			}
			id := it.ID
			if it.Order != nil && it.Order.ExternalID != "" {
				id = it.Order.ExternalID
			}
			e := r.entry(id)
			if e.listed && e.item.Cancelled && !it.Cancelled {
				continue // listed twice: the cancelled state is the later one
			}
			e.listed, e.item, e.key = true, it, it.CreateKey(mp.Name())
		}
		if r.p.Progress != nil {
			r.p.Progress(listed)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("reconcile: list %s's orders: %w", mp.Name(), err)
	}
	return nil
}

// journal reads the create operations of the source registered in the period.
func (r *run) journal(ctx context.Context) error {
	f := journal.Filter{Source: r.p.Source, Kind: order.KindCreate, CreatedFrom: r.start, CreatedBefore: r.end, Limit: pageSize}
	for {
		ops, err := r.p.Journal.List(ctx, f)
		if err != nil {
			return fmt.Errorf("reconcile: list the journal's operations of %s: %w", r.p.Source, err)
		}
		for i := range ops {
			op := ops[i]
			e := r.entry(op.ExternalID)
			e.op, e.opKnown, e.key = &op, true, op.Key
		}
		if len(ops) < pageSize {
			return nil
		}
		f.After = &ops[len(ops)-1]
	}
}

// complete looks an entry up on the sides that did not have it in the period: the
// journal by key, 1C by external id.
func (r *run) complete(ctx context.Context, e *entry) error {
	if e.key == "" {
		e.key = CreateKey(r.p.Source, e.id)
	}
	if !e.opKnown {
		e.opKnown = true
		op, err := r.p.Journal.Get(ctx, e.key)
		switch {
		case errors.Is(err, journal.ErrNotFound):
		case err != nil:
			return fmt.Errorf("reconcile: read %s from the journal: %w", e.key, err)
		default:
			e.op = &op
		}
	}
	if e.op != nil && !e.listed {
		// The marketplace's own state is the truth when it listed the order;
		// otherwise (a source without a listing, or an order it dates outside the
		// period) the journal knows of a cancel when one was registered.
		cop, err := r.p.Journal.Get(ctx, order.CancelKeyOf(e.key))
		switch {
		case errors.Is(err, journal.ErrNotFound):
		case err != nil:
			return fmt.Errorf("reconcile: read %s from the journal: %w", order.CancelKeyOf(e.key), err)
		default:
			e.cancel = &cop
		}
	}
	if !e.onecListed {
		ext := order.OneCExternalID(r.p.Source, e.id)
		found, err := r.p.OneC.FindOrders(ctx, ext)
		if err != nil {
			return fmt.Errorf("reconcile: find %s in 1C: %w", ext, err)
		}
		e.onec = found
	}
	return nil
}

// entityOf is what the source's keys call an order: Ozon's are postings.
func entityOf(source string) string {
	if source == "ozon" {
		return "posting"
	}
	return "order"
}

// judge puts the entry in its category (see Run for the precedence).
func (r *run) judge(e *entry) Item {
	it := Item{ExternalID: e.id, Key: e.key, OneC: []OneCOrder{}}
	if e.listed && e.item.Order != nil {
		it.MarketplaceNumber = e.item.Order.Number
		it.MarketplaceTotal = totalOf(*e.item.Order)
		it.Currency = e.item.Order.Currency
	} else if e.listed {
		it.MarketplaceNumber = e.item.ID
	}
	if e.op != nil {
		it.Status = string(e.op.Status)
		if it.MarketplaceTotal == nil {
			// Not listed by the marketplace (a source without a listing, or an order
			// it dates outside the period): the total ordersync was given.
			var o order.Order
			if json.Unmarshal(e.op.Payload, &o) == nil && len(o.Lines) > 0 {
				it.MarketplaceTotal = totalOf(o)
				it.Currency = o.Currency
				if it.MarketplaceNumber == "" {
					it.MarketplaceNumber = o.Number
				}
			}
		}
	}
	var held, live []onec.Order
	for _, o := range e.onec {
		it.OneC = append(it.OneC, OneCOrder{Ref: o.Ref, Number: o.Number, Total: o.Total, Cancelled: o.Cancelled})
		if o.Deleted {
			continue
		}
		held = append(held, o)
		if !o.Cancelled {
			live = append(live, o)
		}
	}
	cancelled, cancel := r.cancelled(e)

	set := func(c Category, code NoteCode, args NoteArgs) Item {
		it.Category = c
		if code != "" {
			it.Note, it.NoteCode, it.NoteArgs = English(code, args), code, &args
		}
		return it
	}
	switch {
	case e.op == nil && e.listed && cancelled && len(live) == 0:
		return set(OK, NoteCancelledUnseen, NoteArgs{})
	case e.op == nil && e.listed:
		return set(MissingInJournal, NoteNeverRegistered, NoteArgs{Numbers: numberList(held)})
	case e.op == nil:
		return set(UnknownToJournal, NoteNotFromOrdersync, NoteArgs{Deleted: len(held) == 0})
	case cancelled && len(live) == 0:
		return set(OK, NoteCancelled, NoteArgs{Numbers: numberList(held)})
	case e.op.Status != journal.StatusDone:
		return set(NotDone, NoteNotDone, NoteArgs{Error: e.op.LastError, Numbers: numberList(held)})
	case len(held) == 0:
		a := NoteArgs{Numbers: numberList(e.onec)}
		if e.op.Result != nil {
			a.Number = e.op.Result.Number
		}
		return set(MissingIn1C, NoteGoneFrom1C, a)
	case len(held) > 1:
		a := NoteArgs{Count: len(held), Numbers: numberList(held)}
		if cancelled && len(live) > 0 {
			a.Live = numberList(live)
		}
		return set(DuplicateIn1C, NoteDuplicate, a)
	case cancelled:
		return set(CancelledButLive, NoteCancelledLive, NoteArgs{Cancel: &cancel, Number: held[0].Number})
	}
	o := held[0]
	switch {
	case it.MarketplaceTotal == nil:
		return set(OK, NoteTotalUnknown, NoteArgs{})
	case o.Total == nil:
		return set(OK, NoteNo1CTotal, NoteArgs{})
	case !it.MarketplaceTotal.Equal(*o.Total):
		diff := it.MarketplaceTotal.Sub(*o.Total)
		mp, oc := *it.MarketplaceTotal, *o.Total
		return set(AmountMismatch, NoteAmountDiffers, NoteArgs{Marketplace: &mp, OneC: &oc, Difference: &diff})
	}
	return set(OK, "", NoteArgs{})
}

// cancelled reports whether the order is cancelled, and says by what: the
// marketplace lists it cancelled or, when it did not list it, the journal holds
// its cancel operation.
func (r *run) cancelled(e *entry) (bool, CancelNote) {
	switch {
	case e.listed && e.item.Cancelled:
		return true, CancelNote{ByMarketplace: true, Reason: e.item.CancelReason}
	case e.cancel != nil:
		return true, CancelNote{Status: string(e.cancel.Status), Error: e.cancel.LastError}
	}
	return false, CancelNote{}
}

// totalOf is the order's total when it says, else the exact sum of its lines.
func totalOf(o order.Order) *decimal.Decimal {
	if o.Total != nil {
		t := *o.Total
		return &t
	}
	t := o.LinesTotal()
	return &t
}

// numberList is 1C's numbers of the orders (a ref where 1C gave no number).
func numberList(os []onec.Order) []string {
	if len(os) == 0 {
		return nil
	}
	ns := make([]string, len(os))
	for i, o := range os {
		ns[i] = cmp.Or(o.Number, o.Ref)
	}
	return ns
}
