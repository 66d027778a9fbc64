package reconcile

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/onec"
	"github.com/ordersync/ordersync/internal/order"
	"github.com/ordersync/ordersync/internal/payouts"
	orders "github.com/ordersync/ordersync/internal/reconcile"
)

// Lines is what the reconciliation reads of the payout lines (payouts.Store has it).
type Lines interface {
	Lines(ctx context.Context, q payouts.Query) ([]payouts.Line, error)
	Fetches(ctx context.Context, source string, limit int) ([]payouts.Fetch, error)
}

// Params of one payout reconciliation.
type Params struct {
	// Source is the source as the journal and the lines name it: kaspi, ozon, wb.
	Source string
	// From and To are the first and the last day of the period, both inclusive, as
	// dates in Location (their clock time is ignored).
	From, To time.Time
	// Location is the zone the days are counted in (ui.timezone); default UTC.
	Location *time.Location
	// OneCLocation is the zone of 1C's zone-less dates (onec.timezone); default
	// Location.
	OneCLocation *time.Location
	Lines        Lines
	Journal      orders.Journal
	OneC         orders.OneC
}

// pageSize is how many journal operations one List reads.
const pageSize = 500

// Run reconciles the period.
//
// The orders of the period are those with a line dated in it (a sale, a return, a
// charge for the order) and those 1C holds dated in it, live (neither cancelled
// nor marked for deletion). Each lands in one category; when several would apply
// the first wins:
//
//  1. paid_unknown: the period has lines of the order and the journal has no
//     create of it.
//  2. returned_in_1c / returned_not_in_1c: a return line. In 1C when one of the
//     order's return operations is done with a 1C document; otherwise the note
//     says whether none was registered or it is pending or failed.
//  3. cancelled_but_paid: a sale line, and the order is cancelled: its cancel
//     operation is done, or 1C's order is cancelled.
//  4. paid_as_sold: a sale line whose accrued amount equals 1C's total exactly.
//  5. paid_with_difference: any other order with lines: the accrued amount is not
//     1C's total, 1C holds no order or no total, or the period holds only charges
//     for the order (its sale was paid in another period).
//  6. in_1c_not_paid: a live order of 1C dated in the period without a line in
//     it. How late a payout may come is not guessed: an order is not paid in this
//     period when the period has no line of it, and its note says when it was paid
//     if the lines ordersync holds show a later payment.
func Run(ctx context.Context, p Params) (Report, error) {
	if p.Source == "" {
		return Report{}, errors.New("payouts reconcile: the source is required")
	}
	if p.Lines == nil || p.Journal == nil || p.OneC == nil {
		return Report{}, errors.New("payouts reconcile: the lines, the journal and the 1C client are required")
	}
	loc := cmp.Or(p.Location, time.UTC)
	oneCLoc := cmp.Or(p.OneCLocation, loc)
	start := orders.Day(p.From, loc)
	end := orders.Day(p.To, loc).AddDate(0, 0, 1)
	if !start.Before(end) {
		return Report{}, fmt.Errorf("payouts reconcile: the period ends (%s) before it starts (%s)",
			p.To.Format(time.DateOnly), p.From.Format(time.DateOnly))
	}
	if days := int(end.Sub(start).Hours()/24 + 0.5); days > orders.MaxDays {
		return Report{}, fmt.Errorf("%w: %s to %s is %d days; reconcile it in parts", orders.ErrPeriodTooLong,
			p.From.Format(time.DateOnly), p.To.Format(time.DateOnly), days)
	}
	r := &run{p: p, loc: loc, oneCLoc: oneCLoc, start: start, end: end, by: map[string]*entry{}}
	rep := Report{Source: p.Source, From: start.Format(time.DateOnly), To: end.AddDate(0, 0, -1).Format(time.DateOnly),
		Zone: loc.String(), Items: []Item{}, Cabinet: []CabinetTotal{}}

	lines, err := p.Lines.Lines(ctx, payouts.Query{Source: p.Source, From: start, To: end})
	if err != nil {
		return Report{}, fmt.Errorf("payouts reconcile: read the payout lines of %s: %w", p.Source, err)
	}
	cabinet := map[string]*CabinetTotal{}
	var currencies []string
	for _, l := range lines {
		rep.Totals.Lines++
		rep.Totals.LinesSum = rep.Totals.LinesSum.Add(l.Amount)
		if !slices.Contains(currencies, l.Currency) {
			currencies = append(currencies, l.Currency)
		}
		if l.Kind == payouts.KindCabinet || l.OrderID == "" {
			c, ok := cabinet[l.Type]
			if !ok {
				c = &CabinetTotal{Type: l.Type}
				cabinet[l.Type] = c
			}
			c.Lines++
			c.Amount = c.Amount.Add(l.Amount)
			rep.Totals.Cabinet = rep.Totals.Cabinet.Add(l.Amount)
			continue
		}
		e := r.entry(l.OrderID)
		e.lines = append(e.lines, l)
	}
	slices.Sort(currencies)
	rep.Currency = strings.Join(currencies, ", ")
	for _, c := range cabinet {
		rep.Cabinet = append(rep.Cabinet, *c)
	}
	slices.SortFunc(rep.Cabinet, func(a, b CabinetTotal) int { return strings.Compare(a.Type, b.Type) })

	list, err := orders.ListOneC(ctx, p.OneC, p.Source, start, end, oneCLoc)
	if err != nil {
		return Report{}, fmt.Errorf("payouts reconcile: %w", err)
	}
	for _, so := range list {
		e := r.entry(so.ID)
		e.onec = append(e.onec, so.Order)
		e.onecListed = true
	}
	if err := r.returns(ctx); err != nil {
		return Report{}, err
	}
	// The lines ordersync holds, of any date, of the orders the period has none of:
	// a payment after the period is said.
	var unpaid []string
	for _, e := range r.order {
		if len(e.lines) == 0 {
			unpaid = append(unpaid, e.id)
		}
	}
	later := map[string]time.Time{}
	if len(unpaid) > 0 {
		ls, err := p.Lines.Lines(ctx, payouts.Query{Source: p.Source, OrderIDs: unpaid})
		if err != nil {
			return Report{}, fmt.Errorf("payouts reconcile: read the payout lines of %d unpaid orders: %w", len(unpaid), err)
		}
		for _, l := range ls {
			k := strings.ToLower(l.OrderID)
			if l.Kind == payouts.KindSale && !l.Date.Before(end) && (later[k].IsZero() || l.Date.Before(later[k])) {
				later[k] = l.Date
			}
		}
	}

	for _, e := range r.order {
		if err := r.complete(ctx, e); err != nil {
			return Report{}, err
		}
		it, ok := r.judge(e, later[strings.ToLower(e.id)])
		if ok {
			rep.Items = append(rep.Items, it)
		}
	}
	rank := map[Category]int{}
	for i, c := range Categories {
		rank[c] = i
	}
	slices.SortStableFunc(rep.Items, func(a, b Item) int {
		return cmp.Or(rank[a.Category]-rank[b.Category], strings.Compare(a.OrderID, b.OrderID))
	})
	for _, c := range Categories {
		t := CategoryTotal{Category: c}
		for _, it := range rep.Items {
			if it.Category != c {
				continue
			}
			t.Orders++
			t.Accrued = t.Accrued.Add(it.Accrued)
			t.Paid = t.Paid.Add(it.Paid)
			if it.OneCTotal != nil {
				t.OneC = t.OneC.Add(*it.OneCTotal)
			}
		}
		rep.Categories = append(rep.Categories, t)
		rep.Totals.Orders = rep.Totals.Orders.Add(t.Paid)
	}
	rep.Totals.Balanced = rep.Totals.Orders.Add(rep.Totals.Cabinet).Equal(rep.Totals.LinesSum)
	rep.Totals.StatedVerdict = StatedNone
	if f, ok, err := r.statedTotal(ctx); err != nil {
		return Report{}, err
	} else if ok {
		stated := *f.Total
		diff := rep.Totals.LinesSum.Sub(stated)
		rep.Totals.Stated, rep.Totals.StatedDifference = &stated, &diff
		rep.Totals.StatedVerdict = StatedEqual
		if !diff.IsZero() {
			rep.Totals.StatedVerdict = StatedDiffers
		}
	}
	return rep, nil
}

// statedTotal is the source's latest fetch that covers exactly the period and
// states the marketplace's total (a later reading of other days does not hide it). A fetch's end is taken as the period's when it is
// the day after the last day (exclusive) or any time on the last day (inclusive).
// fetchesLooked is how many of the source's latest readings statedTotal looks
// through: every nightly reading of a quarter and more.
const fetchesLooked = 500

func (r *run) statedTotal(ctx context.Context) (payouts.Fetch, bool, error) {
	fs, err := r.p.Lines.Fetches(ctx, r.p.Source, fetchesLooked)
	if err != nil {
		return payouts.Fetch{}, false, fmt.Errorf("payouts reconcile: read the payout fetches: %w", err)
	}
	last := r.end.AddDate(0, 0, -1)
	for _, f := range fs {
		if f.Source != r.p.Source || f.Total == nil || f.Error != "" {
			continue
		}
		if !orders.Day(f.From.In(r.loc), r.loc).Equal(r.start) {
			continue
		}
		if f.To.Equal(r.end) || orders.Day(f.To.In(r.loc), r.loc).Equal(last) {
			return f, true, nil
		}
	}
	return payouts.Fetch{}, false, nil
}

// entry is one order as the lines, the journal and 1C know it.
type entry struct {
	id         string
	lines      []payouts.Line
	onec       []onec.Order
	onecListed bool
	create     *journal.Operation
	cancel     *journal.Operation
	returns    []journal.Operation
}

type run struct {
	p              Params
	loc, oneCLoc   *time.Location
	start, end     time.Time
	by             map[string]*entry // by lower-cased id: 1C compares ids case-insensitively
	order          []*entry
	returnsByOrder map[string][]journal.Operation
}

func (r *run) entry(id string) *entry {
	k := strings.ToLower(id)
	if e, ok := r.by[k]; ok {
		return e
	}
	e := &entry{id: id}
	r.by[k] = e
	r.order = append(r.order, e)
	return e
}

// returns reads the source's return operations, whatever their date (a return is
// registered before or after the marketplace reverses the sale), by order.
func (r *run) returns(ctx context.Context) error {
	r.returnsByOrder = map[string][]journal.Operation{}
	f := journal.Filter{Source: r.p.Source, Kind: order.KindReturn, Limit: pageSize}
	for {
		ops, err := r.p.Journal.List(ctx, f)
		if err != nil {
			return fmt.Errorf("payouts reconcile: list the journal's returns of %s: %w", r.p.Source, err)
		}
		for _, op := range ops {
			var ret order.Return
			if err := json.Unmarshal(op.Payload, &ret); err != nil || ret.OrderID == "" {
				continue // not a return's payload: nothing to match it to
			}
			k := strings.ToLower(ret.OrderID)
			r.returnsByOrder[k] = append(r.returnsByOrder[k], op)
		}
		if len(ops) < pageSize {
			return nil
		}
		f.After = &ops[len(ops)-1]
	}
}

// complete reads the entry's create and cancel from the journal by key and, when
// 1C did not list it in the period, 1C's orders by external id.
func (r *run) complete(ctx context.Context, e *entry) error {
	key := orders.CreateKey(r.p.Source, e.id)
	op, err := r.p.Journal.Get(ctx, key)
	switch {
	case errors.Is(err, journal.ErrNotFound):
	case err != nil:
		return fmt.Errorf("payouts reconcile: read %s from the journal: %w", key, err)
	default:
		e.create = &op
		cop, err := r.p.Journal.Get(ctx, order.CancelKeyOf(key))
		switch {
		case errors.Is(err, journal.ErrNotFound):
		case err != nil:
			return fmt.Errorf("payouts reconcile: read %s from the journal: %w", order.CancelKeyOf(key), err)
		default:
			e.cancel = &cop
		}
	}
	e.returns = r.returnsByOrder[strings.ToLower(e.id)]
	if !e.onecListed && len(e.lines) > 0 {
		ext := order.OneCExternalID(r.p.Source, e.id)
		found, err := r.p.OneC.FindOrders(ctx, ext)
		if err != nil {
			return fmt.Errorf("payouts reconcile: find %s in 1C: %w", ext, err)
		}
		e.onec = found
	}
	return nil
}

// judge puts the entry in its category (see Run); false for an order of 1C that
// has no line and needs none (cancelled, marked for deletion).
func (r *run) judge(e *entry, paidAfter time.Time) (Item, bool) {
	it := Item{OrderID: e.id}
	var hasSale, hasReturn bool
	for _, l := range e.lines {
		it.Lines++
		it.Paid = it.Paid.Add(l.Amount)
		it.Commission = it.Commission.Add(l.Commission)
		it.Logistics = it.Logistics.Add(l.Logistics)
		it.Penalty = it.Penalty.Add(l.Penalty)
		it.Other = it.Other.Add(l.Other)
		// A return's reversal is in Accrued too, so that Paid is the sum of the
		// columns; the comparison with 1C takes the sales' part only.
		it.Accrued = it.Accrued.Add(l.AccruedForSale)
		if l.Kind == payouts.KindSale {
			hasSale = true
		}
		if l.Kind == payouts.KindReturn {
			hasReturn = true
		}
		d := l.Date
		if it.FirstPaid == nil || d.Before(*it.FirstPaid) {
			it.FirstPaid = &l.Date
		}
		if it.LastPaid == nil || d.After(*it.LastPaid) {
			it.LastPaid = &l.Date
		}
		it.Currency = cmp.Or(it.Currency, l.Currency)
	}
	var saleAccrued decimal.Decimal
	for _, l := range e.lines {
		if l.Kind == payouts.KindSale {
			saleAccrued = saleAccrued.Add(l.AccruedForSale)
		}
	}
	pick, held := orders.PickOneC(e.onec)
	if pick != nil && held > 0 {
		it.OneCNumber, it.OneCRef = pick.Number, pick.Ref
		if pick.Total != nil {
			t := *pick.Total
			it.OneCTotal = &t
		}
		it.Currency = cmp.Or(it.Currency, pick.Currency)
		if t, err := time.ParseInLocation(orders.OneCDateLayout, pick.Date, r.oneCLoc); err == nil {
			it.Ordered = &t
		}
	}
	if e.create != nil {
		it.Key, it.Status = e.create.Key, string(e.create.Status)
		var o order.Order
		if json.Unmarshal(e.create.Payload, &o) == nil && !o.CreatedAt.IsZero() {
			t := o.CreatedAt
			it.Ordered = &t
		}
		if it.OneCNumber == "" && e.create.Result != nil && held > 0 {
			it.OneCNumber = e.create.Result.Number
		}
	}
	live := pick != nil && held > 0 && !pick.Cancelled
	cancelledBy := ""
	switch {
	case e.cancel != nil && e.cancel.Status == journal.StatusDone:
		cancelledBy = "journal"
	case pick != nil && held > 0 && pick.Cancelled:
		cancelledBy = "1c"
	}
	withheld := it.Commission.Add(it.Logistics).Add(it.Penalty).Add(it.Other)

	set := func(c Category, code NoteCode, a NoteArgs) (Item, bool) {
		it.Category, it.NoteCode, it.NoteArgs = c, code, a
		it.Note = English(code, a)
		return it, true
	}
	if len(e.lines) == 0 {
		if !live || cancelledBy != "" {
			return Item{}, false // nothing to pay, nothing paid
		}
		if !paidAfter.IsZero() {
			return set(In1CNotPaid, NotePaidAfter, NoteArgs{Date: paidAfter.In(r.loc).Format(time.DateOnly)})
		}
		return set(In1CNotPaid, NoteNotPaid, NoteArgs{Date: r.end.AddDate(0, 0, -1).Format(time.DateOnly)})
	}
	if e.create == nil {
		num := ""
		if held > 0 {
			num = cmp.Or(pick.Number, pick.Ref)
		}
		return set(PaidUnknown, NotePaidUnknown, NoteArgs{Number: num})
	}
	if hasReturn {
		it.Return = ReturnNotCreated
		var best *journal.Operation
		for i := range e.returns {
			op := &e.returns[i]
			if op.Status == journal.StatusDone && op.Result != nil && op.Result.Ref != "" {
				best = op
				break
			}
			if best == nil || rankReturn(op) > rankReturn(best) {
				best = op
			}
		}
		switch {
		case best == nil:
			return set(ReturnedNotIn1C, NoteReturnMissing, NoteArgs{})
		case best.Status == journal.StatusDone && best.Result != nil && best.Result.Ref != "":
			it.Return, it.ReturnRef = ReturnDone, best.Result.Ref
			return set(ReturnedIn1C, NoteReturnedIn1C, NoteArgs{Number: cmp.Or(best.Result.Number, best.Result.Ref)})
		case best.Status == journal.StatusDone:
			it.Return = ReturnDoneNoRef
			return set(ReturnedNotIn1C, NoteReturnNoRef, NoteArgs{})
		case best.Status == journal.StatusFailed:
			it.Return = ReturnFailed
			return set(ReturnedNotIn1C, NoteReturnFailed, NoteArgs{Error: best.LastError})
		default:
			it.Return = ReturnPending
			return set(ReturnedNotIn1C, NoteReturnPending, NoteArgs{Error: best.LastError})
		}
	}
	if hasSale && cancelledBy != "" {
		a := saleAccrued
		return set(CancelledButPaid, NoteCancelledPaid, NoteArgs{By: cancelledBy, Accrued: &a})
	}
	if !hasSale {
		w := withheld
		return set(PaidWithDifference, NoteServicesOnly, NoteArgs{Withheld: &w})
	}
	if e.create.Status != journal.StatusDone || held == 0 {
		return set(PaidWithDifference, NoteNotIn1C, NoteArgs{Status: string(e.create.Status), Error: e.create.LastError})
	}
	if it.OneCTotal == nil {
		return set(PaidWithDifference, NoteNo1CTotal, NoteArgs{})
	}
	diff := saleAccrued.Sub(*it.OneCTotal)
	it.Difference = &diff
	acc, oc, w := saleAccrued, *it.OneCTotal, withheld
	if diff.IsZero() {
		return set(PaidAsSold, NoteAsSold, NoteArgs{Accrued: &acc, OneC: &oc, Withheld: &w})
	}
	return set(PaidWithDifference, NoteAccruedDiffers, NoteArgs{Accrued: &acc, OneC: &oc, Difference: &diff, Withheld: &w})
}

// rankReturn orders a return's states from the nearest to 1C: done, pending, failed.
func rankReturn(op *journal.Operation) int {
	switch op.Status {
	case journal.StatusDone:
		return 3
	case journal.StatusPending:
		return 2
	}
	return 1
}
