package demo

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/ordersync/ordersync/internal/inbox"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/order"
)

// counts are the counts of the demo's table, read from the service's journal,
// inbox, outbox and connector cursors, and from the simulators.
type counts struct {
	seen     int            // create operations in the journal: distinct orders
	bySource map[string]int // of them, per source

	in1C, cancelledIn1C int
	returnsSeen         int // return.register operations in the journal
	returnsIn1C         int // customer returns in 1C

	webhookDup  int // webhook deliveries answered from the inbox, registering nothing
	found       int // creates done by finding the order in 1C (ordersync's own, its answer lost, or one already there)
	resightings int // marketplace sightings of an order the journal already held

	inboxConflicts, journalConflicts int
	retries, interrupted             int

	crm, kaspiAcks, ozonAcks, wbAcks int
	outboxSent                       int
}

func (n counts) duplicates() int { return n.webhookDup + n.found + n.resightings }
func (n counts) conflicts() int  { return n.inboxConflicts + n.journalConflicts }
func (n counts) delivered() int  { return n.crm + n.kaspiAcks + n.ozonAcks + n.wbAcks }

func (d *script) numbers(ctx context.Context) (counts, error) {
	n := counts{bySource: map[string]int{}, webhookDup: d.webhookDup}
	ops, err := d.db.Journal().List(ctx, journal.Filter{Limit: 100000})
	if err != nil {
		return n, err
	}
	opsBySource := map[string]int{}
	for _, op := range ops {
		opsBySource[op.Source]++
		if op.Kind == order.KindCreate {
			n.seen++
			n.bySource[op.Source]++
			if op.Status == journal.StatusDone && op.Result != nil && (op.Result.Found || op.Result.Recovered) {
				n.found++
			}
		}
		if op.Kind == order.KindReturn {
			n.returnsSeen++
		}
		det, err := d.db.Journal().Show(ctx, op.Key)
		if err != nil {
			return n, err
		}
		n.retries += countOutcome(det, journal.OutcomeRetry)
		n.interrupted += countOutcome(det, journal.OutcomeInterrupted)
		n.journalConflicts += len(det.Conflicts)
	}
	recs, err := d.db.Inbox().List(ctx, inbox.Filter{Limit: 100000})
	if err != nil {
		return n, err
	}
	for _, r := range recs {
		n.inboxConflicts += r.Conflicts
	}
	// A poll lists every recent order again; each sighting beyond the first of an
	// operation (a create, later a cancel) was absorbed by the journal.
	cursors, err := d.db.Cursors().Cursors(ctx)
	if err != nil {
		return n, err
	}
	for _, c := range cursors {
		n.resightings += max(0, int(c.OrdersSeen)-opsBySource[c.Connector])
	}
	orders := d.onec.orders()
	n.in1C = len(orders)
	for _, o := range orders {
		if o.cancelled {
			n.cancelledIn1C++
		}
	}
	n.returnsIn1C = len(d.onec.returnMarkers())
	n.crm = d.sims.sink.Unique()
	n.kaspiAcks, n.ozonAcks, n.wbAcks = d.sims.acks()
	st, err := d.db.Outbox().Status(ctx, d.cfg.StrugglingAttempts)
	if err != nil {
		return n, err
	}
	for _, s := range st {
		n.outboxSent += s.Sent
	}
	return n, nil
}

// report prints the table and the journal of the order that went through the crash.
func (d *script) report(ctx context.Context) error {
	n, err := d.numbers(ctx)
	if err != nil {
		return fmt.Errorf("read the journal: %w", err)
	}
	var sources []string
	for _, s := range slices.Sorted(maps.Keys(n.bySource)) {
		sources = append(sources, fmt.Sprintf("%s %d", s, n.bySource[s]))
	}
	w := d.out
	row := func(label string, v int, note string) { fmt.Fprintf(w, "  %-22s %5d   %s\n", label, v, note) }
	fmt.Fprintf(w, "\n  1C over %s (--onec %s): its orders counted by %s, where ordersync writes <source>:<external_id>\n\n",
		d.onec.about(), d.onec.name(), d.onec.markerField())
	row("orders seen", n.seen, "distinct orders in the journal: "+strings.Join(sources, ", "))
	row("orders in 1C", n.in1C, fmt.Sprintf("%d expected, each exactly once; %d cancelled", len(d.expected), n.cancelledIn1C))
	row("returns in 1C", n.returnsIn1C, fmt.Sprintf("%d expected, each exactly once, based on its order; %d registered in the journal",
		len(d.returns), n.returnsSeen))
	row("duplicates prevented¹", n.duplicates(), fmt.Sprintf("webhook deliveries answered from the inbox %d, creates found in 1C %d, marketplace re-sightings %d",
		n.webhookDup, n.found, n.resightings))
	row("conflicts recorded", n.conflicts(), fmt.Sprintf("in the inbox %d (same webhook-id, another body), in the journal %d", n.inboxConflicts, n.journalConflicts))
	row("retries", n.retries, `attempts that ended "retry" and were tried again after a backoff`)
	row("interrupted attempts", n.interrupted, "left open by kill -9, closed by the next claim")
	row("events delivered", n.delivered(), fmt.Sprintf("CRM %d; acknowledgements: Kaspi %d, Ozon %d, Wildberries %d (outbox: %d sent)",
		n.crm, n.kaspiAcks, n.ozonAcks, n.wbAcks, n.outboxSent))
	fmt.Fprintf(w, `
  ¹ duplicates prevented = webhook deliveries answered from the inbox without registering
    anything + creates that found the order already in 1C instead of creating it again
    (a reply lost or unusable after 1C created the order, the crash) + marketplace
    sightings of an order the journal already held (each poll lists recent orders
    again). The simulated 1C does not deduplicate: it creates whatever it is asked to.
`)

	fmt.Fprintf(w, "\nThe journal of the order the service was creating when it was killed (ordersync journal show %s):\n\n", d.trouble)
	if err := d.cfg.ShowJournal(ctx, w, d.env, d.trouble); err != nil {
		return err
	}
	return nil
}

// verify is the demo's verdict: 1C holds every order the script sent exactly once,
// nothing else, each return it planted exactly once, nothing else, and the
// cancelled order is cancelled.
func (d *script) verify() error {
	count := map[string]int{}
	for _, o := range d.onec.orders() {
		count[o.marker]++
	}
	var problems []string
	for _, ext := range d.expected {
		if n := count[ext]; n != 1 {
			problems = append(problems, fmt.Sprintf("%s %d times", ext, n))
		}
	}
	for _, ext := range slices.Sorted(maps.Keys(count)) {
		if !slices.Contains(d.expected, ext) {
			problems = append(problems, fmt.Sprintf("%s, which the script never sent, %d times", ext, count[ext]))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("1C does not hold each order exactly once: it holds %s", strings.Join(problems, "; "))
	}
	returns := map[string]int{}
	for _, m := range d.onec.returnMarkers() {
		returns[m]++
	}
	for _, ext := range d.returns {
		if n := returns[ext]; n != 1 {
			problems = append(problems, fmt.Sprintf("%s %d times", ext, n))
		}
	}
	for _, ext := range slices.Sorted(maps.Keys(returns)) {
		if !slices.Contains(d.returns, ext) {
			problems = append(problems, fmt.Sprintf("%s, which the script never planted, %d times", ext, returns[ext]))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("1C does not hold each return exactly once: it holds %s", strings.Join(problems, "; "))
	}
	if !d.cancelledIn1C(d.cancelled) {
		return fmt.Errorf("%s was cancelled at Wildberries but is not cancelled in 1C", d.cancelled)
	}
	return nil
}
