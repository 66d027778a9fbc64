// Package demo owns `ordersync demo`: the scripted day and its simulated world. It
// starts the simulated 1C base (its ordersync HTTP service, or its standard OData
// interface: Config.OneC), Kaspi, Ozon, Wildberries and a CRM's webhook
// receiver in this process, runs the real service (this binary's `run`) as a child
// process on an embedded SQLite journal in a temporary directory, plays the script
// (duplicates, lost replies, 1C faults, a cancellation, a kill -9 and a restart, a
// stock snapshot, a return at Ozon, the month's payouts reconciled), and prints the
// progress, the table of counts and the verdict: 1C holds each order and each
// return exactly once.
//
// The command's flags, the opening of the service's journal, `journal show` and how
// an error is printed and mapped to an exit code stay with the CLI, which passes
// them in a Config.
package demo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ordersync/ordersync/connectors"
	"github.com/ordersync/ordersync/internal/config"
	"github.com/ordersync/ordersync/internal/inbox"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/order"
	"github.com/ordersync/ordersync/internal/outbox"
	"github.com/ordersync/ordersync/internal/stock"
)

// Store is what the demo reads of the service's journal, inbox, outbox, connector
// cursors and stock: the CLI's store, opened on the service's configuration.
type Store interface {
	Journal() journal.Store
	Outbox() outbox.Store
	Inbox() inbox.Store
	Cursors() connectors.CursorStore
	Stock() stock.Store
	Close()
	String() string
	// EmbeddedFile is the embedded SQLite file, as the demo configures it, and ""
	// for PostgreSQL.
	EmbeddedFile() string
}

// Config is what the CLI gives the demo. Every field but OneC and Keep is required.
type Config struct {
	// OneC is the simulated 1C's interface: HTTPService ("" too) or OData.
	OneC string
	// Out receives the progress, the table, the journal of the crashed order and,
	// with Keep, the addresses.
	Out io.Writer
	// Keep leaves everything running after the script, its addresses printed,
	// until the context is done.
	Keep bool
	// Executable is this program: `<Executable> run` is the service.
	Executable string
	// Environ is the caller's environment. The service gets it without its
	// ORDERSYNC_ variables and STATE_DIRECTORY, and with the demo's configuration.
	Environ []string
	// Open opens the service's store for reading, configured by env alone, as the
	// CLI opens it.
	Open func(ctx context.Context, env []string) (Store, error)
	// ShowJournal prints `ordersync journal show key` to out, configured by env
	// alone; an error says what went wrong.
	ShowJournal func(ctx context.Context, out io.Writer, env []string, key string) error
	// StrugglingAttempts is passed to the outbox's Status (the CLI's `outbox status`).
	StrugglingAttempts int
	// Report prints an error at once, as the CLI prints a failure: with Keep, a
	// failed demo says so before the addresses and waits for the context.
	Report func(err error)
	// Quietly marks an error already printed by Report, so that the caller sets the
	// exit code without printing it again.
	Quietly func(err error) error
}

// script is one run of the script.
type script struct {
	cfg   Config
	out   io.Writer
	keep  bool
	exe   string
	dir   string
	log   string // the service's log file
	start time.Time

	onec oneC // the simulated 1C, one of sims
	sims *simulators
	env  []string // the service's whole configuration
	svc  *service
	db   Store // the service's journal, opened here for reading
	step int
	of   int

	expected     []string // 1C external ids the script sends, in order
	cancelled    string   // the 1C external id cancelled at its marketplace
	siteEvent    string   // the site's webhook-id
	webhookDup   int      // deliveries answered from the inbox, registering nothing
	trouble      string   // journal key of the order whose service was killed mid-call
	returns      []string // 1C external ids of the returns the script plants, in order
	ozonReturned string   // the Ozon posting the return is of
}

// Run plays the script in a new temporary directory, removed at the end unless the
// demo fails, and checks that 1C holds each order exactly once. With cfg.Keep it
// then waits for ctx to be done before it stops everything.
func Run(ctx context.Context, cfg Config) error {
	one, err := newOneC(cfg.OneC, demoSKUs, demoSources)
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	dir, err := os.MkdirTemp("", "ordersync-demo-")
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	d := &script{cfg: cfg, out: cfg.Out, keep: cfg.Keep, exe: cfg.Executable, dir: dir, log: filepath.Join(dir, "ordersync.log"), start: time.Now(), onec: one}
	fmt.Fprintf(d.out, "ordersync demo: a day of orders against simulators on loopback, 1C over %s; the service's log: %s\n\n", one.about(), d.log)

	err = d.play(ctx)
	if err == nil {
		err = d.report(ctx)
	}
	if err == nil {
		if err = d.verify(); err == nil {
			fmt.Fprintf(d.out, "\nOK: 1C holds each of the %d orders exactly once, each of the %d returns exactly once, and %s is cancelled (%.1fs in all).\n",
				len(d.expected), len(d.returns), d.cancelled, time.Since(d.start).Seconds())
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("interrupted: %w", err)
		}
		err = fmt.Errorf("demo: %w (the service's log is %s; it is kept, with the journal, in %s)", err, d.log, d.dir)
	}
	said := false
	if d.keep && ctx.Err() == nil && d.svc != nil && d.db != nil {
		if err != nil {
			cfg.Report(err)
			said = true
		}
		d.printAddresses(err == nil)
		<-ctx.Done()
		fmt.Fprintln(d.out, "\nstopping the service and the simulators")
	}
	d.shutdown()
	if err != nil {
		if said {
			return cfg.Quietly(err)
		}
		return err
	}
	if err := os.RemoveAll(d.dir); err != nil {
		return fmt.Errorf("demo: remove %s: %w", d.dir, err)
	}
	return nil
}

// step is one line of progress.
type step struct {
	title string
	run   func(ctx context.Context) (detail string, err error)
}

func (d *script) play(ctx context.Context) error {
	steps := []step{
		{"start 1C, Kaspi, Ozon, Wildberries, a CRM and the service", d.startWorld},
		{"new orders from Kaspi, Ozon and Wildberries", d.marketplaceOrders},
		{"a site order over a signed webhook, delivered twice at once", d.webhookTwice},
		{"a changed redelivery: the same webhook-id, another body", d.changedRedelivery},
		{"1C drops the reply after creating an order", d.lostReply},
		{d.onec.troubles(), d.transientFaults},
		{"a cancellation at Wildberries", d.cancellation},
		{"a return at Ozon, carried into 1C once", d.ozonReturn},
		{"a crash: kill -9 while 1C is creating an order", d.crash},
		{"restart the service and let it finish", d.restart},
		{"events delivered to the CRM and the marketplaces", d.events},
		{"a stock snapshot published to Kaspi, Ozon and Wildberries", d.stock},
		{"the month's payouts reconciled", d.payouts},
	}
	if !d.keep {
		steps = append(steps, step{"stop the service (SIGTERM)", d.stopService})
	}
	d.of = len(steps)
	for _, s := range steps {
		d.step++
		fmt.Fprintf(d.out, "[%2d/%d] %s … ", d.step, d.of, s.title)
		t := time.Now()
		detail, err := s.run(ctx)
		if err != nil {
			fmt.Fprintln(d.out, "FAILED")
			return fmt.Errorf("step %d (%s): %w", d.step, s.title, err)
		}
		fmt.Fprintf(d.out, "ok (%s) %.1fs\n", detail, time.Since(t).Seconds())
	}
	return nil
}

// waitFor polls cond until it holds, at most within (poll). The service exiting
// meanwhile ends the wait at once.
func (d *script) waitFor(ctx context.Context, within time.Duration, what string, cond func() (bool, error)) error {
	return poll(ctx, within, what, cond, func() error {
		if d.svc != nil && d.svc.exited() {
			return fmt.Errorf("the service exited (%s) while waiting for %s: %s", d.svc.cmd.ProcessState, what, lastLogError(d.log, 0))
		}
		return nil
	})
}

// poll polls cond until it holds, at most within. An error from cond is kept and
// polling goes on (a read may meet the service's writes); the last one is reported
// if time runs out. An error from stop (nil: none) ends the wait at once.
func poll(ctx context.Context, within time.Duration, what string, cond func() (bool, error), stop func() error) error {
	deadline := time.Now().Add(within)
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		ok, err := cond()
		if ok && err == nil {
			return nil
		}
		if err != nil {
			last = err
		}
		if stop != nil {
			if err := stop(); err != nil {
				return err
			}
		}
		if time.Now().After(deadline) {
			if last != nil {
				return fmt.Errorf("%s: not within %s (last error: %v)", what, within, last)
			}
			return fmt.Errorf("%s: not within %s", what, within)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// expect records an order the script sends, by its 1C external id.
func (d *script) expect(source, id string) string {
	ext := order.OneCExternalID(source, id)
	d.expected = append(d.expected, ext)
	return ext
}

// waitIn1C waits until 1C holds each of the external ids.
func (d *script) waitIn1C(ctx context.Context, within time.Duration, exts ...string) error {
	return d.waitFor(ctx, within, "1C to hold "+strings.Join(exts, ", "), func() (bool, error) {
		for _, ext := range exts {
			if d.onec.count(ext) == 0 {
				return false, nil
			}
		}
		return true, nil
	})
}

// waitDone waits until the operation is done and returns its detail.
func (d *script) waitDone(ctx context.Context, within time.Duration, key string) (journal.Detail, error) {
	var det journal.Detail
	err := d.waitFor(ctx, within, key+" done in the journal", func() (bool, error) {
		var err error
		det, err = d.db.Journal().Show(ctx, key)
		if errors.Is(err, journal.ErrNotFound) {
			return false, nil
		}
		if err == nil && det.Status == journal.StatusFailed {
			return false, fmt.Errorf("%s failed: %s", key, det.LastError)
		}
		return err == nil && det.Status == journal.StatusDone, err
	})
	return det, err
}

func (d *script) once(ext string) error {
	if n := d.onec.count(ext); n != 1 {
		return fmt.Errorf("1C holds %d orders %s, want 1", n, ext)
	}
	return nil
}

func countOutcome(det journal.Detail, o journal.Outcome) int {
	n := 0
	for _, at := range det.History {
		if at.Outcome == o {
			n++
		}
	}
	return n
}

// 1. The simulators with their first orders, then the service.
func (d *script) startWorld(ctx context.Context) (string, error) {
	sims, err := startSims(d.onec)
	if err != nil {
		return "", err
	}
	d.sims = sims
	if err := sims.addKaspi("612300101", "Айгерим Нурланова", "7011234567", "SKU-KETTLE", "Чайник электрический", 1, "15990"); err != nil {
		return "", err
	}
	if err := sims.addKaspi("612300102", "Данияр Сейткали", "7772345678", "SKU-IRON", "Утюг паровой", 2, "12490.50"); err != nil {
		return "", err
	}
	d.expect("kaspi", "612300101")
	d.expect("kaspi", "612300102")
	sims.addOzon("70000001-0001-1", "SKU-COFFEE", "Кофе в зёрнах, 1 кг", 2, "1530.0000")
	sims.addOzon("70000002-0001-1", "SKU-TEA", "Чай зелёный", 3, "489.9000")
	d.expect("ozon", "70000001-0001-1")
	d.expect("ozon", "70000002-0001-1")
	sims.addWB(4100001, "SKU-MUG", 153099)
	sims.addWB(4100002, "SKU-TOWEL", 89900)
	d.expect("wb", "4100001")
	d.expect("wb", "4100002")

	d.env = sims.serviceEnv(d.cfg.Environ, d.dir)
	svc, err := startService(ctx, d.exe, d.dir, d.log, d.env)
	d.svc = svc
	if err != nil {
		return "", err
	}
	// The demo reads the service's journal through the store, as the CLI does.
	db, err := d.cfg.Open(ctx, d.env)
	if err != nil {
		return "", err
	}
	d.db = db
	if db.EmbeddedFile() == "" {
		return "", fmt.Errorf("the service's database is %s, not the embedded SQLite file", db)
	}
	return fmt.Sprintf("service pid %d, SQLite journal %s, journal pages %s", svc.pid(), db.String(), svc.pages), nil
}

// 2. The pollers find the first orders; 1C gets each; the marketplaces hear back.
func (d *script) marketplaceOrders(ctx context.Context) (string, error) {
	first := slices.Clone(d.expected)
	if err := d.waitIn1C(ctx, 20*time.Second, first...); err != nil {
		return "", err
	}
	var k, o, w int
	err := d.waitFor(ctx, 20*time.Second, "the acknowledgements of the 6 orders", func() (bool, error) {
		k, o, w = d.sims.acks()
		return k >= 2 && o >= 2 && w >= 2, nil
	})
	if err != nil {
		return "", err
	}
	for _, ext := range first {
		if err := d.once(ext); err != nil {
			return "", err
		}
	}
	return fmt.Sprintf("%d orders in 1C; acknowledged: Kaspi accepted %d, Ozon shipped %d, Wildberries supplied %d", len(first), k, o, w), nil
}

// 3. The same signed delivery, twice at the same moment on two connections.
func (d *script) webhookTwice(ctx context.Context) (string, error) {
	const id = "A-1001"
	ext := d.expect("site", id)
	d.siteEvent = "msg_site_" + id
	url := d.svc.webhooks + "/webhooks/site"
	body := siteOrder(id, 2)
	var (
		wg           sync.WaitGroup
		firsts, last [2]webhookAnswer
		errs         [2]error
	)
	gate := make(chan struct{})
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			firsts[i], last[i], errs[i] = deliverUntilAnswered(ctx, url, d.sims.siteSecret, d.siteEvent, body)
		}()
	}
	close(gate)
	wg.Wait()
	inProgress := 0
	for i := range 2 {
		if errs[i] != nil {
			return "", errs[i]
		}
		if last[i].status != http.StatusOK {
			return "", fmt.Errorf("delivery %d was answered %d %s", i+1, last[i].status, bytes.TrimSpace(last[i].body))
		}
		if firsts[i].outcome == "in_progress" {
			inProgress++
		}
	}
	if !bytes.Equal(last[0].body, last[1].body) {
		return "", fmt.Errorf("the two deliveries got different answers: %s and %s", last[0].body, last[1].body)
	}
	recs, err := d.db.Inbox().List(ctx, inbox.Filter{Source: "site", Limit: 1000})
	if err != nil {
		return "", err
	}
	var events int
	var ops []string
	for _, r := range recs {
		if r.EventID == d.siteEvent {
			events++
			ops = r.Operations
		}
	}
	key := order.Key("site", "order", id, "create")
	if events != 1 || len(ops) != 1 || ops[0] != key {
		return "", fmt.Errorf("the inbox holds %d events %s registering %v, want 1 registering %s", events, d.siteEvent, ops, key)
	}
	d.webhookDup += 2 - events // both were answered 200; all but the stored one came from the inbox
	if err := d.waitIn1C(ctx, 20*time.Second, ext); err != nil {
		return "", err
	}
	if err := d.once(ext); err != nil {
		return "", err
	}
	if inProgress > 0 {
		return "1 order; one delivery was told 409 in progress, its retry got the saved answer from the inbox", nil
	}
	return "1 order, 1 duplicate answered from the inbox", nil
}

// 4. The same webhook-id with another body: 409, recorded, nothing overwritten.
func (d *script) changedRedelivery(ctx context.Context) (string, error) {
	key := order.Key("site", "order", "A-1001", "create")
	before, err := d.db.Journal().Get(ctx, key)
	if err != nil {
		return "", err
	}
	ans, err := deliver(ctx, d.svc.webhooks+"/webhooks/site", d.sims.siteSecret, d.siteEvent, siteOrder("A-1001", 3))
	if err != nil {
		return "", err
	}
	if ans.status != http.StatusConflict || ans.outcome != "conflict" {
		return "", fmt.Errorf("answered %d %s, want 409 conflict", ans.status, bytes.TrimSpace(ans.body))
	}
	ev, err := d.db.Inbox().Show(ctx, "site", d.siteEvent)
	if err != nil {
		return "", err
	}
	if len(ev.Conflicts) != 1 {
		return "", fmt.Errorf("the inbox records %d conflicts for %s, want 1", len(ev.Conflicts), d.siteEvent)
	}
	after, err := d.db.Journal().Get(ctx, key)
	if err != nil {
		return "", err
	}
	if after.PayloadSHA256 != before.PayloadSHA256 {
		return "", fmt.Errorf("the payload of %s changed", key)
	}
	if err := d.once("site:A-1001"); err != nil {
		return "", err
	}
	return "409; the other body is recorded as a conflict in the inbox, the order is untouched", nil
}

// 5. 1C creates the order and the connection drops before the answer.
func (d *script) lostReply(ctx context.Context) (string, error) {
	const code = "612300103"
	ext := d.expect("kaspi", code)
	d.onec.fault(lostReply, 1, ext)
	if err := d.sims.addKaspi(code, "Ерлан Абенов", "7051112233", "SKU-KETTLE", "Чайник электрический", 1, "15990"); err != nil {
		return "", err
	}
	key := order.Key("kaspi", "order", code, "create")
	det, err := d.waitDone(ctx, 20*time.Second, key)
	if err != nil {
		return "", err
	}
	if err := d.once(ext); err != nil {
		return "", err
	}
	if det.Result == nil || !det.Result.Recovered {
		return fmt.Sprintf("1 order; attempt %d created it (the dropped one was not noticed?)", det.Attempts), nil
	}
	return fmt.Sprintf("1C created it and hung up; attempt %d found ordersync's order in 1C: 1 order, not 2", det.Attempts), nil
}

// 6. Two transient failures (no free 1C session: 406 from the HTTP service, 429
// over OData) on one create, an answer the client cannot use on another (the HTTP
// service's lock conflict, 500; over OData a 201 with a mangled Location and a
// body cut short, after 1C created the order, which is then found). (A 503 on a
// POST is an unknown outcome: it waits the settle time and is found first.)
func (d *script) transientFaults(ctx context.Context) (string, error) {
	const posting, wbID = "70000003-0001-1", 4100003
	ozonExt := d.expect("ozon", posting)
	wbExt := d.expect("wb", fmt.Sprint(wbID))
	d.onec.fault(busy, 2, ozonExt)
	d.onec.fault(garbled, 1, wbExt)
	d.sims.addOzon(posting, "SKU-COFFEE", "Кофе в зёрнах, 1 кг", 1, "1530.0000")
	d.sims.addWB(wbID, "SKU-MUG", 153099)
	retries := 0
	for _, key := range []string{order.Key("ozon", "posting", posting, "create"), order.Key("wb", "order", fmt.Sprint(wbID), "create")} {
		det, err := d.waitDone(ctx, 20*time.Second, key)
		if err != nil {
			return "", err
		}
		retries += countOutcome(det, journal.OutcomeRetry)
	}
	for _, ext := range []string{ozonExt, wbExt} {
		if err := d.once(ext); err != nil {
			return "", err
		}
	}
	return fmt.Sprintf("2 orders, %d attempts retried after backoff, each order created once", retries), nil
}

// 7. The buyer cancels a Wildberries order that 1C already holds.
func (d *script) cancellation(ctx context.Context) (string, error) {
	const wbID = 4100002
	d.cancelled = order.OneCExternalID("wb", fmt.Sprint(wbID))
	d.sims.wb.SetStatus(wbID, "cancel", "canceled_by_client")
	key := order.Key("wb", "order", fmt.Sprint(wbID), "cancel")
	if _, err := d.waitDone(ctx, 20*time.Second, key); err != nil {
		return "", err
	}
	err := d.waitFor(ctx, 10*time.Second, d.cancelled+" cancelled in 1C", func() (bool, error) {
		return d.cancelledIn1C(d.cancelled), nil
	})
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s cancelled in 1C by %s", d.cancelled, key), nil
}

// 8. The buyer sends back one of the three packs of tea of an Ozon posting 1C
// already holds: the poller registers the return, and 1C gets one customer return
// based on the order's document, announced to the CRM.
func (d *script) ozonReturn(ctx context.Context) (string, error) {
	const posting = "70000002-0001-1"
	d.ozonReturned = posting
	if err := d.once(order.OneCExternalID("ozon", posting)); err != nil {
		return "", err
	}
	id := d.sims.addOzonReturn(posting, "PartialReturn", returnedSKU, "Чай зелёный", 1, "489.9000", "Не подошёл вкус")
	r := order.Return{Source: "ozon", ID: id}
	ext := r.OneCExternalID()
	d.returns = append(d.returns, ext)
	det, err := d.waitDone(ctx, 20*time.Second, r.Key())
	if err != nil {
		return "", err
	}
	if err := d.waitFor(ctx, 10*time.Second, "1C to hold the return "+ext, func() (bool, error) {
		return d.onec.returnCount(ext) > 0, nil
	}); err != nil {
		return "", err
	}
	if err := d.returnOnce(ext); err != nil {
		return "", err
	}
	base := order.OneCExternalID("ozon", posting)
	if got := d.onec.returnBases(ext); len(got) != 1 || got[0] != base {
		return "", fmt.Errorf("the return %s in 1C is based on the orders %q, want %s", ext, got, base)
	}
	if err := d.waitFor(ctx, 20*time.Second, "return.created of "+ext+" at the CRM", func() (bool, error) {
		return d.sims.crmEvents(outbox.ReturnCreated) > 0, nil
	}); err != nil {
		return "", err
	}
	in1C := ""
	if det.Result != nil && det.Result.Number != "" {
		in1C = " " + det.Result.Number
	}
	return fmt.Sprintf("1 of 3 packs of tea of posting %s: %s, return%s in 1C based on the order, once; return.created to the CRM", posting, r.Key(), in1C), nil
}

// returnedSKU is the item the buyer sends back.
const returnedSKU = "SKU-TEA"

// returnOnce checks that 1C holds exactly one return ext.
func (d *script) returnOnce(ext string) error {
	if n := d.onec.returnCount(ext); n != 1 {
		return fmt.Errorf("1C holds %d returns %s, want 1", n, ext)
	}
	return nil
}

func (d *script) cancelledIn1C(ext string) bool {
	for _, o := range d.onec.orders() {
		if o.marker == ext && o.cancelled {
			return true
		}
	}
	return false
}

// 9. A create stalls in 1C; the service is killed while it waits for the answer.
func (d *script) crash(ctx context.Context) (string, error) {
	// Let the relay finish what it is sending, so that no lease of the killed
	// process has to run out before the events of the restart go.
	if err := d.waitFor(ctx, 15*time.Second, "the outbox to drain", d.outboxDrained); err != nil {
		return "", err
	}
	const code = "612300104"
	ext := d.expect("kaspi", code)
	d.trouble = order.Key("kaspi", "order", code, "create")
	d.onec.fault(stall, 1, ext)
	if err := d.sims.addKaspi(code, "Мария Ким", "7019876543", "SKU-IRON", "Утюг паровой", 1, "12490.50"); err != nil {
		return "", err
	}
	var open int
	err := d.waitFor(ctx, 20*time.Second, "a create of "+ext+" in flight with its attempt open", func() (bool, error) {
		if d.onec.pendingFaults() != 0 {
			return false, nil // the stall has not met the create yet
		}
		var err error
		open, err = d.openAttempt(ctx)
		return open > 0, err
	})
	if err != nil {
		return "", err
	}
	pid := d.svc.pid()
	d.svc.kill()
	if still, err := d.openAttempt(ctx); err != nil || still != open {
		return "", fmt.Errorf("after kill -9, attempt %d of %s is not open (open: %d, %v)", open, d.trouble, still, err)
	}
	// 1C does not notice that nobody waits: it finishes the create.
	if err := d.onec.waitIdle(ctx, 10*time.Second); err != nil {
		return "", err
	}
	what := "1C holds no order yet"
	if d.onec.count(ext) == 1 {
		what = "1C finished the create after the service died"
	}
	return fmt.Sprintf("killed pid %d during attempt %d's create in 1C; the attempt is left open; %s", pid, open, what), nil
}

// openAttempt is the number of the attempt of the trouble order that has no outcome, 0 if none.
func (d *script) openAttempt(ctx context.Context) (int, error) {
	det, err := d.db.Journal().Show(ctx, d.trouble)
	if errors.Is(err, journal.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	for _, at := range det.History {
		if at.FinishedAt == nil {
			return at.Attempt, nil
		}
	}
	return 0, nil
}

// 10. The service starts again on the same journal and settles the interrupted order.
func (d *script) restart(ctx context.Context) (string, error) {
	svc, err := startService(ctx, d.exe, d.dir, d.log, d.env)
	d.svc = svc
	if err != nil {
		return "", err
	}
	det, err := d.waitDone(ctx, 20*time.Second, d.trouble)
	if err != nil {
		return "", err
	}
	ext := order.OneCExternalID("kaspi", det.ExternalID)
	if err := d.once(ext); err != nil {
		return "", err
	}
	if countOutcome(det, journal.OutcomeInterrupted) == 0 {
		return "", fmt.Errorf("%s has no interrupted attempt after the restart", d.trouble)
	}
	how := "created it"
	if det.Result != nil && (det.Result.Found || det.Result.Recovered) {
		how = "found it in 1C"
	}
	return fmt.Sprintf("pid %d, journal pages %s; the open attempt is left alone until the killed call has settled (3 × onec.timeout + onec.settle_time), "+
		"then closed as interrupted; attempt %d %s: 1 order, not 2", svc.pid(), svc.pages, det.Attempts, how), nil
}

// 11. The outbox delivers order.created, order.cancelled and return.created to
// the CRM, and each marketplace hears about its orders.
func (d *script) events(ctx context.Context) (string, error) {
	ops, err := d.db.Journal().List(ctx, journal.Filter{Status: journal.StatusDone, Limit: 100000})
	if err != nil {
		return "", err
	}
	wantCRM := 0 // every done create, cancel and return tells the CRM (a stock snapshot does not)
	for _, op := range ops {
		if op.Source != stock.Source {
			wantCRM++
		}
	}
	perSource := map[string]int{}
	for _, ext := range d.expected {
		source, _, _ := strings.Cut(ext, ":")
		perSource[source]++
	}
	var k, o, w int
	err = d.waitFor(ctx, 20*time.Second, fmt.Sprintf("%d events at the CRM and the marketplace acknowledgements", wantCRM), func() (bool, error) {
		k, o, w = d.sims.acks()
		if d.sims.sink.Unique() < wantCRM || k < perSource["kaspi"] || o < perSource["ozon"] || w < perSource["wb"] {
			return false, nil
		}
		return d.outboxDrained()
	})
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%d events to the CRM, signed; Kaspi accepted %d, Ozon shipped %d, Wildberries supplied %d",
		d.sims.sink.Unique(), k, o, w), nil
}

// outboxDrained reports whether every event was sent (none pending, in flight or dead).
func (d *script) outboxDrained() (bool, error) {
	st, err := d.db.Outbox().Status(context.Background(), d.cfg.StrugglingAttempts)
	if err != nil {
		return false, err
	}
	for _, s := range st {
		if strings.HasSuffix(s.Destination, "-stock") {
			continue // a snapshot every few seconds: stock has a step of its own
		}
		if s.Dead > 0 {
			return false, fmt.Errorf("the outbox has %d dead events for %s", s.Dead, s.Destination)
		}
		if s.Pending+s.InFlight > 0 {
			return false, nil
		}
	}
	return true, nil
}

// 14. SIGTERM: the service finishes what is in flight and exits 0.
func (d *script) stopService(ctx context.Context) (string, error) {
	code, took, err := d.svc.stop(30 * time.Second)
	if err != nil {
		return "", err
	}
	if code != 0 {
		return "", fmt.Errorf("the service exited %d on SIGTERM: %s", code, lastLogError(d.log, 0))
	}
	return fmt.Sprintf("exit 0 in %.1fs", took.Seconds()), nil
}

// shutdown stops whatever still runs. The directory is left to the caller.
func (d *script) shutdown() {
	if d.svc != nil {
		d.svc.stop(30 * time.Second)
	}
	if d.db != nil {
		d.db.Close()
	}
	if d.sims != nil {
		d.sims.close()
	}
}

// printAddresses is --keep's account of what runs where.
func (d *script) printAddresses(remove bool) {
	w := d.out
	webhooks := d.svc.webhooks
	if d.svc.exited() {
		webhooks = "(the service is not running)"
	}
	then := "then it stops, and " + d.dir + " is removed"
	if !remove {
		then = "then it stops; " + d.dir + " is kept"
	}
	fmt.Fprintf(w, "\nEverything keeps running until Ctrl-C (%s):\n", then)
	fmt.Fprintf(w, "  1C simulator      %s\n", d.onec.where())
	fmt.Fprintf(w, "  webhooks          %s/webhooks/site   (Standard Webhooks, secret %s)\n", webhooks, d.sims.siteSecret.Encode())
	fmt.Fprintf(w, "  CRM (sink)        %s\n", d.sims.sink.URL())
	fmt.Fprintf(w, "  Kaspi, Ozon, WB   %s  %s  %s\n", d.sims.kaspi.URL(), d.sims.ozon.URL(), d.sims.wb.URL())
	pages := d.svc.pages
	if d.svc.exited() {
		pages = "(the service is not running)"
	}
	fmt.Fprintf(w, "  journal pages     %s   (no sign-in: loopback only)\n", pages)
	fmt.Fprintf(w, "  journal (SQLite)  %s\n", d.db.String())
	fmt.Fprintf(w, "  service log       %s   (pid %d)\n", d.log, d.svc.pid())
	fmt.Fprintf(w, "  try               STATE_DIRECTORY=%s ordersync journal list\n", d.dir)
	if d.trouble != "" {
		fmt.Fprintf(w, "                    STATE_DIRECTORY=%s ordersync journal show %s\n", d.dir, d.trouble)
	}
	if _, err := os.Stat(config.DefaultPath); err == nil {
		fmt.Fprintf(w, "                    (add --config %s: this machine has %s)\n", os.DevNull, config.DefaultPath)
	}
}
