package reconcile_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/ordersync/ordersync/connectors"
	"github.com/ordersync/ordersync/connectors/kaspi"
	"github.com/ordersync/ordersync/connectors/ozon"
	"github.com/ordersync/ordersync/connectors/wildberries"
	"github.com/ordersync/ordersync/internal/engine"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/onec"
	"github.com/ordersync/ordersync/internal/onec/httpservice"
	"github.com/ordersync/ordersync/internal/order"
	"github.com/ordersync/ordersync/internal/reconcile"
	"github.com/ordersync/ordersync/internal/sim/kaspisim"
	"github.com/ordersync/ordersync/internal/sim/onecsim"
	"github.com/ordersync/ordersync/internal/sim/ozonsim"
	"github.com/ordersync/ordersync/internal/sim/wbsim"
	"github.com/ordersync/ordersync/internal/store/postgres"
	"github.com/ordersync/ordersync/internal/store/sqlite"
	"github.com/ordersync/ordersync/internal/testdb"
)

var almaty = mustLoc("Asia/Almaty")

func mustLoc(name string) *time.Location {
	loc, err := time.LoadLocation(name)
	if err != nil {
		return time.FixedZone(name, 5*3600)
	}
	return loc
}

// The period of every test: three days in Almaty; orders are created on its middle
// day unless a test says otherwise.
var (
	periodFrom = time.Date(2026, 9, 14, 0, 0, 0, 0, almaty)
	periodTo   = time.Date(2026, 9, 16, 0, 0, 0, 0, almaty)
	inPeriod   = time.Date(2026, 9, 15, 12, 0, 0, 0, almaty)
	before     = time.Date(2026, 9, 10, 12, 0, 0, 0, almaty) // days before the period
	after      = time.Date(2026, 9, 17, 9, 0, 0, 0, almaty)  // the morning after it
)

// clock is the one clock of the stores and simulators, moved by the tests.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

// stores opens each journal implementation for the subtests.
var stores = []struct {
	name string
	open func(t *testing.T, now func() time.Time) journal.Store
}{
	{"sqlite", func(t *testing.T, now func() time.Time) journal.Store {
		db, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(t.TempDir(), "ordersync.db"), Now: now})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		if _, err := db.Migrate(context.Background()); err != nil {
			t.Fatal(err)
		}
		return db.Journal()
	}},
	{"postgres", func(t *testing.T, now func() time.Time) journal.Store {
		db, err := postgres.Open(context.Background(), postgres.Config{URL: testdb.URL(t), Now: now})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(db.Close)
		if _, err := db.Migrate(context.Background()); err != nil {
			t.Fatal(err)
		}
		return db.Journal()
	}},
}

// world is one reconciliation's three sides.
type world struct {
	t      *testing.T
	ctx    context.Context
	clock  *clock
	store  journal.Store
	onec   *onecsim.OneC
	client *httpservice.Client
	source string
	// mp is the marketplace's connector (nil for site); add puts an order into its
	// simulator and cancel cancels it there.
	mp      connectors.Marketplace
	add     func(id string, created time.Time)
	cancel  func(id string)
	poller  *connectors.Poller
	created map[string]time.Time // when add created each marketplace order
}

func newWorld(t *testing.T, open func(*testing.T, func() time.Time) journal.Store) *world {
	t.Helper()
	w := &world{t: t, ctx: context.Background(), clock: &clock{t: inPeriod}, created: map[string]time.Time{}}
	w.store = open(t, w.clock.Now)
	w.onec = onecsim.New(onecsim.Options{Now: w.clock.Now, Location: almaty})
	ts := httptest.NewServer(w.onec)
	t.Cleanup(ts.Close)
	t.Cleanup(w.onec.Close)
	c, err := httpservice.New(httpservice.Config{BaseURL: ts.URL + w.onec.Prefix(), Timeout: 10 * time.Second, RetryBackoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	w.client = c
	return w
}

func (w *world) kaspi() {
	s := kaspisim.New(kaspisim.Options{Token: "tok", Location: almaty, Now: w.clock.Now})
	ts := httptest.NewServer(s)
	w.t.Cleanup(ts.Close)
	c, err := kaspi.New(kaspi.Config{BaseURL: ts.URL + kaspisim.Prefix, Token: "tok", Warehouse: "WH1", RatePerSecond: -1, Location: almaty})
	if err != nil {
		w.t.Fatal(err)
	}
	w.mp, w.source = c, kaspi.Name
	w.add = func(id string, created time.Time) {
		w.created[id] = created
		err := s.AddOrder(kaspisim.Order{Code: id, CreationDate: created,
			Customer: kaspisim.Customer{Name: "Иван Петров", CellPhone: "7011234567"},
			Entries:  []kaspisim.Entry{{OfferCode: "SKU-1", Name: "Чайник", Quantity: dec("2"), BasePrice: dec("1500.50")}}})
		if err != nil {
			w.t.Fatal(err)
		}
	}
	w.cancel = func(id string) {
		if err := s.SetStatus(id, kaspi.StatusCancelled); err != nil {
			w.t.Fatal(err)
		}
	}
}

func (w *world) ozon() {
	s := ozonsim.New(ozonsim.Options{ClientID: "123", APIKey: "key", Now: w.clock.Now})
	ts := httptest.NewServer(s)
	w.t.Cleanup(ts.Close)
	c, err := ozon.New(ozon.Config{BaseURL: ts.URL, ClientID: "123", APIKey: "key", Warehouse: "WH1", RatePerSecond: -1})
	if err != nil {
		w.t.Fatal(err)
	}
	w.mp, w.source = c, ozon.Name
	w.add = func(id string, created time.Time) {
		w.created[id] = created
		s.AddPosting(ozonsim.Posting{PostingNumber: id, InProcessAt: created, StatusChangedAt: created,
			Products: []ozonsim.Product{{OfferID: "SKU-1", Name: "Чайник", Quantity: 2, Price: dec("1500.50")}}})
	}
	w.cancel = func(id string) {
		if err := s.Cancel(id, "покупатель передумал", "Клиент"); err != nil {
			w.t.Fatal(err)
		}
	}
}

func (w *world) wildberries() {
	s := wbsim.New(wbsim.Options{Token: "tok", Now: w.clock.Now})
	ts := httptest.NewServer(s)
	w.t.Cleanup(ts.Close)
	c, err := wildberries.New(wildberries.Config{BaseURL: ts.URL, Token: "tok", Warehouse: "WH1", RatePerSecond: -1, Now: w.clock.Now})
	if err != nil {
		w.t.Fatal(err)
	}
	w.mp, w.source = c, wildberries.Name
	w.add = func(id string, created time.Time) {
		w.created[id] = created
		n, _ := strconv.ParseInt(id, 10, 64)
		s.AddOrder(wbsim.Order{ID: n, Article: "SKU-1", Price: 300100, ConvertedPrice: 300100,
			CurrencyCode: 643, ConvertedCurrencyCode: 643, CreatedAt: created})
	}
	w.cancel = func(id string) {
		n, _ := strconv.ParseInt(id, 10, 64)
		s.SetStatus(n, "cancel", "canceled")
	}
}

func dec(s string) decimal.Decimal { return decimal.RequireFromString(s) }

// register registers the marketplace's order id as the poller does, from the
// connector's own listing around the order's creation, and returns the create's key.
func (w *world) register(id string) string {
	w.t.Helper()
	at, ok := w.created[id]
	if !ok {
		w.t.Fatalf("%s %s was never added", w.source, id)
	}
	var found *connectors.Item
	err := w.mp.List(w.ctx, at.Add(-time.Hour), at.Add(time.Hour), func(page []connectors.Item) error {
		for _, it := range page {
			if it.ID == id {
				found = &it
			}
		}
		return nil
	})
	if err != nil {
		w.t.Fatalf("list %s: %v", w.source, err)
	}
	if found == nil {
		w.t.Fatalf("%s does not list %s", w.source, id)
	}
	if found.Err != nil {
		w.t.Fatalf("%s %s does not map: %v", w.source, id, found.Err)
	}
	if w.poller == nil {
		w.poller = connectors.NewPoller(w.mp, connectors.PollerConfig{Journal: w.store, Now: w.clock.Now})
	}
	if _, err := w.poller.Handle(w.ctx, *found); err != nil {
		w.t.Fatal(err)
	}
	return found.CreateKey(w.source)
}

// registerSite registers a site order created at created, as the CLI import or the
// generic webhook does.
func (w *world) registerSite(id string, created time.Time) string {
	w.t.Helper()
	o := order.Order{Source: "site", ExternalID: id, Number: id, CreatedAt: created,
		Customer: order.Customer{Name: "Иван Петров", Phone: "+77011234567"}, Warehouse: "WH1", Currency: "KZT",
		Lines: []order.Line{{SKU: "SKU-1", Name: "Чайник", Quantity: dec("2"), Price: dec("1500.50")}}}
	if err := o.Validate(); err != nil {
		w.t.Fatal(err)
	}
	if _, err := w.store.Register(w.ctx, journal.CreateOrder(o)); err != nil {
		w.t.Fatal(err)
	}
	return o.CreateKey()
}

// done carries the create out as the engine does: created in 1C, done in the
// journal with 1C's ref. It returns the ref.
func (w *world) done(key string) string {
	w.t.Helper()
	cl, err := w.store.ClaimKey(w.ctx, key, "test")
	if err != nil {
		w.t.Fatal(err)
	}
	var o order.Order
	if err := json.Unmarshal(cl.Operation().Payload, &o); err != nil {
		w.t.Fatal(err)
	}
	created, err := w.client.CreateOrder(w.ctx, engine.ToCreateOrder(o, almaty))
	if err != nil {
		w.t.Fatal(err)
	}
	if err := cl.Finish(w.ctx, journal.Finish{Status: journal.StatusDone, Ref: created.Ref,
		Result: &journal.Result{Ref: created.Ref, Number: created.Number, Date: created.Date}}); err != nil {
		w.t.Fatal(err)
	}
	return created.Ref
}

// fail ends the create failed with reason.
func (w *world) fail(key, reason string) {
	w.t.Helper()
	cl, err := w.store.ClaimKey(w.ctx, key, "test")
	if err != nil {
		w.t.Fatal(err)
	}
	if err := cl.Finish(w.ctx, journal.Finish{Status: journal.StatusFailed, Error: reason, Class: journal.ClassPermanent}); err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) run(t *testing.T) reconcile.Report {
	t.Helper()
	w.clock.Set(after.Add(time.Hour)) // the period is over: every listing is of the past
	var progress []int
	rep, err := reconcile.Run(w.ctx, reconcile.Params{
		Source: w.source, From: periodFrom, To: periodTo, Location: almaty, OneCLocation: almaty,
		Journal: w.store, OneC: w.client, Marketplace: w.mp,
		Progress: func(n int) { progress = append(progress, n) },
	})
	if err != nil {
		t.Fatal(err)
	}
	if w.mp != nil && (len(progress) == 0 || !slices.IsSorted(progress)) {
		t.Errorf("progress was reported as %v: want the growing count of each page", progress)
	}
	return rep
}

// want checks that each external id is in its category and that nothing else is
// reported, and that the totals agree with the items.
func want(t *testing.T, rep reconcile.Report, cats map[string]reconcile.Category) {
	t.Helper()
	got := map[string]reconcile.Category{}
	for _, it := range rep.Items {
		if _, dup := got[it.ExternalID]; dup {
			t.Errorf("%s is reported twice", it.ExternalID)
		}
		got[it.ExternalID] = it.Category
		if c, ok := cats[it.ExternalID]; !ok {
			t.Errorf("%s reported as %s (%s): not planted", it.ExternalID, it.Category, it.Note)
		} else if c != it.Category {
			t.Errorf("%s is %s (note %q), want %s", it.ExternalID, it.Category, it.Note, c)
		}
	}
	for id, c := range cats {
		if _, ok := got[id]; !ok {
			t.Errorf("%s (%s) is not reported", id, c)
		}
	}
	counts := map[reconcile.Category]int{}
	for _, c := range cats {
		counts[c]++
	}
	if len(rep.Totals) != len(reconcile.Categories) {
		t.Errorf("totals %v: want every category", rep.Totals)
	}
	for _, c := range reconcile.Categories {
		if rep.Totals[c] != counts[c] {
			t.Errorf("totals[%s] = %d, want %d", c, rep.Totals[c], counts[c])
		}
	}
	if rep.From != "2026-09-14" || rep.To != "2026-09-16" {
		t.Errorf("period %s – %s, want 2026-09-14 – 2026-09-16", rep.From, rep.To)
	}
}

// plantMarketplace plants one order of every category, and the orders dated just
// outside the period on one side that must come out ok. ids gives the
// marketplace's ids, in the marketplace's own form.
func plantMarketplace(w *world, ids func(n int) string) map[string]reconcile.Category {
	cats := map[string]reconcile.Category{}
	ext := func(n int, c reconcile.Category) string {
		id := ids(n)
		cats[id] = c
		return id
	}
	// ok: all three sides agree.
	okID := ext(1, reconcile.OK)
	w.add(okID, inPeriod)
	w.done(w.register(okID))

	// ok: created in the period, but registered and created in 1C the morning
	// after it: looked up by key and by external id, not by their dates.
	lateID := ext(2, reconcile.OK)
	w.add(lateID, periodTo.Add(23*time.Hour+50*time.Minute))
	w.clock.Set(after)
	w.done(w.register(lateID))
	w.clock.Set(inPeriod)

	// ok: created at the marketplace before the period, registered in it.
	earlyID := ext(3, reconcile.OK)
	w.add(earlyID, before)
	w.done(w.register(earlyID))

	// missing_in_journal: ordersync never saw it.
	w.add(ext(4, reconcile.MissingInJournal), inPeriod)

	// not_done: failed with a reason.
	failedID := ext(5, reconcile.NotDone)
	w.add(failedID, inPeriod)
	w.fail(w.register(failedID), "1C: unknown_sku: Номенклатура с артикулом «SKU-1» не найдена")

	// missing_in_1c: done, then deleted in 1C.
	goneID := ext(6, reconcile.MissingIn1C)
	w.add(goneID, inPeriod)
	if !w.onec.DeleteOrder(w.done(w.register(goneID))) {
		w.t.Fatal("the 1C simulator did not delete the order")
	}

	// duplicate_in_1c: done, and a second order with its external id made by hand.
	dupID := ext(7, reconcile.DuplicateIn1C)
	w.add(dupID, inPeriod)
	w.done(w.register(dupID))
	w.onec.PlantOrder(onecsim.PlantedOrder{ExternalID: w.source + ":" + dupID, Total: dec("3001.00"), Currency: "KZT", Posted: true})

	// amount_mismatch: done, then its total edited in 1C.
	amountID := ext(8, reconcile.AmountMismatch)
	w.add(amountID, inPeriod)
	if !w.onec.SetTotal(w.done(w.register(amountID)), dec("3001.01")) {
		w.t.Fatal("the 1C simulator did not change the total")
	}

	// cancelled_but_live: done, then cancelled at the marketplace.
	cancelID := ext(9, reconcile.CancelledButLive)
	w.add(cancelID, inPeriod)
	w.done(w.register(cancelID))
	w.cancel(cancelID)

	// unknown_to_journal: made by hand in 1C, dated in the period.
	handID := ext(10, reconcile.UnknownToJournal)
	w.onec.PlantOrder(onecsim.PlantedOrder{ExternalID: w.source + ":" + handID, Total: dec("100"), Currency: "KZT", Posted: true})

	// Another source's order made by hand is not this source's business.
	w.onec.PlantOrder(onecsim.PlantedOrder{ExternalID: "other:" + handID, Total: dec("100"), Posted: true})
	return cats
}

func TestRunMarketplaces(t *testing.T) {
	t.Parallel()
	markets := []struct {
		name  string
		setup func(*world)
		ids   func(int) string
	}{
		{"kaspi", (*world).kaspi, func(n int) string { return strconv.Itoa(512344100 + n) }},
		{"ozon", (*world).ozon, func(n int) string { return "05708065-" + strconv.Itoa(n) + "-1" }},
		{"wildberries", (*world).wildberries, func(n int) string { return strconv.Itoa(1234560 + n) }},
	}
	for _, m := range markets {
		for _, st := range stores {
			t.Run(m.name+"/"+st.name, func(t *testing.T) {
				t.Parallel()
				w := newWorld(t, st.open)
				m.setup(w)
				cats := plantMarketplace(w, m.ids)
				rep := w.run(t)
				if rep.Source != w.source {
					t.Errorf("source %q, want %q", rep.Source, w.source)
				}
				want(t, rep, cats)
				checkNotes(t, rep)
			})
		}
	}
}

// checkNotes: the items carry what an accountant needs to act.
func checkNotes(t *testing.T, rep reconcile.Report) {
	t.Helper()
	for _, it := range rep.Items {
		switch it.Category {
		case reconcile.NotDone:
			if it.Status != "failed" || it.Note == "" {
				t.Errorf("not_done item %+v: want status failed and the last error as the note", it)
			}
		case reconcile.AmountMismatch:
			if it.MarketplaceTotal == nil || it.MarketplaceTotal.String() != "3001" || len(it.OneC) != 1 ||
				it.OneC[0].Total == nil || it.OneC[0].Total.String() != "3001.01" {
				t.Errorf("amount_mismatch item %+v: want 3001 against 1C's 3001.01", it)
			}
		case reconcile.DuplicateIn1C:
			if len(it.OneC) != 2 {
				t.Errorf("duplicate_in_1c item lists %d 1C orders, want 2", len(it.OneC))
			}
		case reconcile.CancelledButLive:
			if len(it.OneC) != 1 || it.OneC[0].Cancelled {
				t.Errorf("cancelled_but_live item %+v: want its live 1C order", it)
			}
		}
		if it.Key == "" {
			t.Errorf("item %s has no key", it.ExternalID)
		}
	}
}

func TestRunSite(t *testing.T) {
	t.Parallel()
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, st.open)
			w.source = "site"
			cats := map[string]reconcile.Category{}

			cats["A-1"] = reconcile.OK
			w.done(w.registerSite("A-1", inPeriod))

			// Registered in the period, created in 1C after it: found in 1C by its
			// external id, not by 1C's date.
			cats["A-2"] = reconcile.OK
			key := w.registerSite("A-2", inPeriod)
			w.clock.Set(after)
			w.done(key)
			w.clock.Set(inPeriod)

			cats["A-3"] = reconcile.NotDone
			w.registerSite("A-3", inPeriod) // pending: never tried

			cats["A-4"] = reconcile.MissingIn1C
			ref := w.done(w.registerSite("A-4", inPeriod))
			w.onec.MarkDeleted(ref, true)

			cats["A-5"] = reconcile.DuplicateIn1C
			w.done(w.registerSite("A-5", inPeriod))
			w.onec.PlantOrder(onecsim.PlantedOrder{ExternalID: "site:A-5", Total: dec("3001"), Posted: true})

			cats["A-6"] = reconcile.AmountMismatch
			w.onec.SetTotal(w.done(w.registerSite("A-6", inPeriod)), dec("2999.99"))

			// A cancel registered for a done order that is still live in 1C.
			cats["A-7"] = reconcile.CancelledButLive
			w.done(w.registerSite("A-7", inPeriod))
			if _, err := w.store.Register(w.ctx, journal.CancelOrder(order.Cancel{Source: "site", ExternalID: "A-7", Reason: "покупатель отказался"})); err != nil {
				t.Fatal(err)
			}

			// Cancelled in 1C as well: nothing to do.
			cats["A-8"] = reconcile.OK
			w.done(w.registerSite("A-8", inPeriod))
			if _, err := w.store.Register(w.ctx, journal.CancelOrder(order.Cancel{Source: "site", ExternalID: "A-8"})); err != nil {
				t.Fatal(err)
			}
			if _, err := w.client.CancelOrder(w.ctx, "site:A-8", "test"); err != nil {
				t.Fatal(err)
			}

			cats["HAND-1"] = reconcile.UnknownToJournal
			w.onec.PlantOrder(onecsim.PlantedOrder{ExternalID: "site:HAND-1", Total: dec("10"), Posted: true})

			// Outside the period on every side: not reported.
			w.clock.Set(before)
			w.done(w.registerSite("OLD-1", before))
			w.clock.Set(inPeriod)

			rep := w.run(t)
			want(t, rep, cats)
			if it := item(rep, "A-6"); it.MarketplaceTotal == nil || it.MarketplaceTotal.String() != "3001" {
				t.Errorf("site order A-6: marketplace total %v, want the journal's 3001", it.MarketplaceTotal)
			}
		})
	}
}

func item(rep reconcile.Report, id string) reconcile.Item {
	for _, it := range rep.Items {
		if it.ExternalID == id {
			return it
		}
	}
	return reconcile.Item{}
}

// The precedence of categories: a cancelled order with nothing live in 1C is ok
// whatever became of its create; a failed create that 1C holds is not_done.
func TestRunPrecedence(t *testing.T) {
	t.Parallel()
	w := newWorld(t, stores[0].open)
	w.kaspi()
	cats := map[string]reconcile.Category{}

	// Cancelled before it was created (the engine fails such a create): ok.
	cats["700000001"] = reconcile.OK
	w.add("700000001", inPeriod)
	key := w.register("700000001")
	w.cancel("700000001")
	w.register("700000001") // the cancel
	w.fail(key, "cancelled (kaspi:order:700000001:cancel) before it was created in 1C: not created")

	// Cancelled at the marketplace before ordersync ever saw it: ok.
	cats["700000002"] = reconcile.OK
	w.add("700000002", inPeriod)
	w.cancel("700000002")

	// Failed, though 1C holds an order for it (made by hand): not_done.
	cats["700000003"] = reconcile.NotDone
	w.add("700000003", inPeriod)
	w.fail(w.register("700000003"), "1C rejected it")
	w.onec.PlantOrder(onecsim.PlantedOrder{ExternalID: "kaspi:700000003", Total: dec("3001"), Posted: true})

	// A duplicate whose total also differs: duplicate_in_1c.
	cats["700000004"] = reconcile.DuplicateIn1C
	w.add("700000004", inPeriod)
	ref := w.done(w.register("700000004"))
	w.onec.SetTotal(ref, dec("1"))
	w.onec.PlantOrder(onecsim.PlantedOrder{ExternalID: "kaspi:700000004", Total: dec("3001"), Posted: true})

	// The marketplace has it, ordersync never saw it, and 1C holds one made by
	// hand: missing_in_journal, the note names 1C's.
	cats["700000005"] = reconcile.MissingInJournal
	w.add("700000005", inPeriod)
	hand := w.onec.PlantOrder(onecsim.PlantedOrder{ExternalID: "kaspi:700000005", Number: "ЗК-РУЧН", Total: dec("3001"), Posted: true})

	rep := w.run(t)
	want(t, rep, cats)
	if it := item(rep, "700000005"); len(it.OneC) != 1 || it.OneC[0].Ref != hand.Ref {
		t.Errorf("missing_in_journal item %+v: want 1C's order made by hand", it)
	}
}

// A 1C module older than the listing fails the run with the cause named.
func TestRunOlderModule(t *testing.T) {
	t.Parallel()
	w := newWorld(t, stores[0].open)
	w.source = "site"
	_, err := reconcile.Run(w.ctx, reconcile.Params{Source: "site", From: periodFrom, To: periodTo, Location: almaty,
		Journal: w.store, OneC: olderModule{}})
	if err == nil {
		t.Fatal("Run succeeded against a module that cannot list")
	}
}

type olderModule struct{}

func (olderModule) FindOrders(context.Context, string) ([]onec.Order, error) {
	return []onec.Order{}, nil
}
func (olderModule) ListOrders(context.Context, onec.ListQuery) ([]onec.Order, error) {
	return nil, &onec.Error{Class: onec.Permanent, Op: "list", Status: 400, Message: "the 1C module needs updating"}
}
