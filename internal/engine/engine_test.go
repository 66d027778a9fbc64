package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/ordersync/ordersync/internal/engine"
	"github.com/ordersync/ordersync/internal/enginetest"
	"github.com/ordersync/ordersync/internal/eventually"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/onec"
	"github.com/ordersync/ordersync/internal/onec/httpservice"
	"github.com/ordersync/ordersync/internal/order"
	"github.com/ordersync/ordersync/internal/sim"
	"github.com/ordersync/ordersync/internal/sim/onecsim"
	"github.com/ordersync/ordersync/internal/store/postgres"
)

// harness is one journal schema in PostgreSQL, one simulated 1C and a client to it:
// enginetest's world, in the fields the tests use (a test may replace client).
type harness struct {
	t      *testing.T
	w      *enginetest.World
	url    string
	db     *postgres.DB
	store  journal.Store
	onec   *onecsim.OneC
	client *httpservice.Client
	logs   *enginetest.SyncBuffer
}

const testPassword = enginetest.Password

func newHarness(t *testing.T, opts onecsim.Options) *harness {
	t.Helper()
	w := enginetest.New(t, opts)
	return &harness{t: t, w: w, url: w.URL, db: w.DB, store: w.DB.Journal(), onec: w.OneC, client: w.Client, logs: w.Logs}
}

func (h *harness) openDB() *postgres.DB {
	h.t.Helper()
	return h.w.OpenDB(postgres.Config{})
}

// openDBWith opens another pool on the harness's schema: a replica (enginetest's
// OpenDB).
func (h *harness) openDBWith(cfg postgres.Config) *postgres.DB {
	h.t.Helper()
	return h.w.OpenDB(cfg)
}

func (h *harness) logger() *slog.Logger { return h.w.Logger() }

func (h *harness) newClient(user, password string, concurrency int) *httpservice.Client {
	h.t.Helper()
	return h.w.NewClient(user, password, concurrency)
}

// engine is an engine on store (nil: the harness's) and the harness's client, with
// the tests' short times.
func (h *harness) engine(store journal.Store, cfg engine.Config) *engine.Engine {
	if store == nil {
		store = h.store
	}
	return engine.New(store, h.client, h.w.Short(cfg))
}

func testOrder(id string, skus ...string) order.Order {
	if len(skus) == 0 {
		skus = []string{"SKU-8812"}
	}
	o := order.Order{
		Source: "site", ExternalID: id, Number: id,
		CreatedAt: time.Date(2026, 9, 16, 10, 0, 0, 0, time.FixedZone("+05", 5*3600)),
		Customer:  order.Customer{Name: "Иван Петров", Phone: "+77011234567"},
		Warehouse: "WH1", Currency: "KZT",
	}
	for _, s := range skus {
		o.Lines = append(o.Lines, order.Line{SKU: s, Name: "Чайник", Quantity: decimal.RequireFromString("2"),
			Price: decimal.RequireFromString("1500.10")})
	}
	total := o.LinesTotal()
	o.Total = &total
	return o
}

func (h *harness) register(o order.Order) journal.Registration {
	h.t.Helper()
	reg, err := h.store.Register(context.Background(), journal.CreateOrder(o))
	if err != nil {
		h.t.Fatal(err)
	}
	return reg
}

// drain runs due operations in the foreground until none is pending.
func (h *harness) drain(e *engine.Engine) {
	h.t.Helper()
	enginetest.Drain(h.t, h.store, e)
}

func (h *harness) show(key string) journal.Detail {
	h.t.Helper()
	d, err := h.store.Show(context.Background(), key)
	if err != nil {
		h.t.Fatal(err)
	}
	return d
}

func outcomes(d journal.Detail) string {
	var s []string
	for _, a := range d.History {
		s = append(s, string(a.Outcome))
	}
	return strings.Join(s, ",")
}

func (h *harness) wantOneCOrders(externalID string, want int) {
	h.t.Helper()
	if got := h.onec.CountExternal(externalID); got != want {
		h.t.Fatalf("1C holds %d orders with external id %s, want %d", got, externalID, want)
	}
}

func TestNewOrderCreatesExactlyOneOrderIn1C(t *testing.T) {
	t.Parallel()
	h := newHarness(t, onecsim.Options{})
	o := testOrder("A-1001")
	if reg := h.register(o); reg.Outcome != journal.Registered {
		t.Fatalf("outcome %s, want registered", reg.Outcome)
	}
	h.drain(h.engine(nil, engine.Config{}))

	h.wantOneCOrders("site:A-1001", 1)
	if h.onec.Count() != 1 {
		t.Fatalf("1C holds %d orders in all, want 1", h.onec.Count())
	}
	d := h.show(o.CreateKey())
	if d.Status != journal.StatusDone || d.Attempts != 1 || outcomes(d) != "done" {
		t.Fatalf("status %s attempts %d outcomes %s, want done/1/done", d.Status, d.Attempts, outcomes(d))
	}
	created := h.onec.Orders()[0]
	if d.Result.Ref != created.Ref || d.Result.Number != created.Number || d.Result.Found {
		t.Fatalf("result %+v, want the created order %s №%s", d.Result, created.Ref, created.Number)
	}
	// 1C received exact decimals and its zone-less date in Asia/Almaty.
	var sent struct {
		Date  string          `json:"date"`
		Total decimal.Decimal `json:"total"`
		Lines []struct {
			Amount decimal.Decimal `json:"amount"`
		} `json:"lines"`
	}
	if err := json.Unmarshal(created.Body, &sent); err != nil {
		t.Fatal(err)
	}
	if sent.Date != "2026-09-16T10:00:00" || !sent.Total.Equal(decimal.RequireFromString("3000.2")) ||
		!sent.Lines[0].Amount.Equal(decimal.RequireFromString("3000.20")) {
		t.Fatalf("1C received date %s total %s amount %s", sent.Date, sent.Total, sent.Lines[0].Amount)
	}
	var xs []onec.Exchange
	if err := json.Unmarshal(d.History[0].Exchanges, &xs); err != nil || len(xs) != 2 ||
		xs[0].Method != "GET" || xs[1].Method != "POST" || xs[1].RequestSHA256 == "" || xs[1].Status != 201 {
		t.Fatalf("attempt exchanges = %s (%v), want the find then the create with digests", d.History[0].Exchanges, err)
	}
}

func TestExactRepeatReturnsSavedResultAndChangesNoCount(t *testing.T) {
	t.Parallel()
	h := newHarness(t, onecsim.Options{})
	o := testOrder("A-1002")
	h.register(o)
	e := h.engine(nil, engine.Config{})
	h.drain(e)
	first := h.show(o.CreateKey())

	reg := h.register(o)
	if reg.Outcome != journal.Duplicate {
		t.Fatalf("outcome %s, want duplicate", reg.Outcome)
	}
	if reg.Operation.Result == nil || reg.Operation.Result.Ref != first.Result.Ref {
		t.Fatalf("repeat answered %+v, want the saved result %+v", reg.Operation.Result, first.Result)
	}
	if ran, _ := e.RunDue(context.Background()); ran {
		t.Fatalf("an exact repeat made an operation due")
	}
	h.wantOneCOrders("site:A-1002", 1)
	if d := h.show(o.CreateKey()); d.Attempts != 1 || len(d.Conflicts) != 0 {
		t.Fatalf("attempts %d conflicts %d after a repeat, want 1 and 0", d.Attempts, len(d.Conflicts))
	}
}

func TestSameKeyOtherPayloadRecordsConflictAndChangesNothing(t *testing.T) {
	t.Parallel()
	h := newHarness(t, onecsim.Options{})
	o := testOrder("A-1003")
	h.register(o)
	changed := o
	changed.Lines = append([]order.Line(nil), o.Lines...)
	changed.Lines[0].Quantity = decimal.RequireFromString("5")
	changed.Total = nil

	// The changed copy arrives before the engine has run: 1C must still get the first.
	if reg := h.register(changed); reg.Outcome != journal.Conflicted {
		t.Fatalf("outcome %s, want conflict", reg.Outcome)
	}
	h.drain(h.engine(nil, engine.Config{}))
	if reg := h.register(changed); reg.Outcome != journal.Conflicted {
		t.Fatalf("outcome after done %s, want conflict", reg.Outcome)
	}

	h.wantOneCOrders("site:A-1003", 1)
	var sent struct {
		Lines []struct {
			Quantity decimal.Decimal `json:"quantity"`
		} `json:"lines"`
	}
	json.Unmarshal(h.onec.Orders()[0].Body, &sent)
	if !sent.Lines[0].Quantity.Equal(decimal.RequireFromString("2")) {
		t.Fatalf("1C got quantity %s, want the first payload's 2", sent.Lines[0].Quantity)
	}
	d := h.show(o.CreateKey())
	if len(d.Conflicts) != 1 || d.Conflicts[0].Times != 2 || d.Conflicts[0].PayloadSHA256 != order.SHA256Hex(changed.Canonical()) {
		t.Fatalf("conflicts %+v, want the changed payload recorded once, seen twice", d.Conflicts)
	}
	if d.PayloadSHA256 != order.SHA256Hex(o.Canonical()) || d.Status != journal.StatusDone {
		t.Fatalf("saved operation changed: sha %s status %s", d.PayloadSHA256, d.Status)
	}
}

// failFinish loses the commit of the first n claims: 1C has answered, the journal
// never hears of it.
type failFinish struct {
	journal.Store
	n atomic.Int32
}

func (s *failFinish) ClaimDue(ctx context.Context, worker string) (journal.Claim, error) {
	c, err := s.Store.ClaimDue(ctx, worker)
	if err != nil || s.n.Add(-1) < 0 {
		return c, err
	}
	return lostCommit{c}, nil
}

type lostCommit struct{ journal.Claim }

func (c lostCommit) Finish(ctx context.Context, _ journal.Finish) error {
	c.Claim.Release(ctx)
	return errors.New("injected: the connection broke before COMMIT")
}

func TestFailureAfter1CAnsweredBeforeCommitLeadsToNoSecondOrder(t *testing.T) {
	t.Parallel()
	h := newHarness(t, onecsim.Options{})
	o := testOrder("A-1004")
	h.register(o)
	broken := &failFinish{Store: h.store}
	broken.n.Store(1)
	e := h.engine(broken, engine.Config{})
	if ran, err := e.RunDue(context.Background()); !ran || err == nil {
		t.Fatalf("RunDue = %v, %v; want a run whose finish failed", ran, err)
	}
	h.wantOneCOrders("site:A-1004", 1)
	if d := h.show(o.CreateKey()); d.Status != journal.StatusPending {
		t.Fatalf("status %s after a lost commit, want pending", d.Status)
	}

	h.drain(e)
	h.wantOneCOrders("site:A-1004", 1)
	d := h.show(o.CreateKey())
	if d.Status != journal.StatusDone || !d.Result.Recovered || d.Result.Found || outcomes(d) != "interrupted,done" {
		t.Fatalf("status %s found %v recovered %v outcomes %s; want done, created by ordersync in the cut-short attempt, interrupted,done",
			d.Status, d.Result.Found, d.Result.Recovered, outcomes(d))
	}
	if d.Result.Ref != h.onec.Orders()[0].Ref {
		t.Fatalf("result ref %s, want the order created by the first attempt %s", d.Result.Ref, h.onec.Orders()[0].Ref)
	}
}

func TestConnectionDroppedAfterCreateEndsWithExactlyOneOrder(t *testing.T) {
	t.Parallel()
	h := newHarness(t, onecsim.Options{})
	o := testOrder("A-1005")
	h.register(o)
	h.onec.Faults.Add(1, sim.Fault{Op: "create", Kind: onecsim.DropAfterCreate})
	h.drain(h.engine(nil, engine.Config{}))

	h.wantOneCOrders("site:A-1005", 1)
	d := h.show(o.CreateKey())
	if d.Status != journal.StatusDone || !d.Result.Recovered || d.Result.Found || outcomes(d) != "retry,done" {
		t.Fatalf("status %s found %v recovered %v outcomes %s; want done, created by ordersync with its reply lost (not found), retry,done",
			d.Status, d.Result.Found, d.Result.Recovered, outcomes(d))
	}
	if !strings.Contains(d.History[0].Error, "unknown outcome") {
		t.Fatalf("first attempt error %q, want it to say the outcome is unknown", d.History[0].Error)
	}
	if st := h.onec.Stats(); st.Requests["create"] != 1 {
		t.Fatalf("1C received %d creates, want 1: a POST is never repeated blindly", st.Requests["create"])
	}
}

func TestTransientFailuresAreRetriedUntilDone(t *testing.T) {
	t.Parallel()
	h := newHarness(t, onecsim.Options{})
	o := testOrder("A-1006")
	h.register(o)
	h.onec.Faults.Add(1, sim.Fault{Op: "create", Status: 406})
	h.onec.Faults.Add(1, sim.Fault{Op: "create", Status: 406})
	h.onec.Faults.Add(1, sim.Fault{Op: "create", Kind: onecsim.LockConflict500})
	h.onec.Faults.Add(2, sim.Fault{Op: "find", Status: 503}) // retried inside the find
	h.drain(h.engine(nil, engine.Config{}))

	h.wantOneCOrders("site:A-1006", 1)
	d := h.show(o.CreateKey())
	if d.Status != journal.StatusDone || outcomes(d) != "retry,retry,retry,done" || d.Attempts != 4 {
		t.Fatalf("status %s attempts %d outcomes %s; want done after retry,retry,retry,done", d.Status, d.Attempts, outcomes(d))
	}
	if d.LastError != "" {
		t.Fatalf("last_error %q on a done operation", d.LastError)
	}
}

func TestPermanentErrorFailsWith1CMessageAndResyncAfterFixEndsDone(t *testing.T) {
	t.Parallel()
	h := newHarness(t, onecsim.Options{KnownSKUs: []string{"SKU-1"}})
	o := testOrder("A-1007", "SKU-1", "SKU-NEW")
	h.register(o)
	e := h.engine(nil, engine.Config{})
	h.drain(e)

	h.wantOneCOrders("site:A-1007", 0)
	d := h.show(o.CreateKey())
	if d.Status != journal.StatusFailed || d.Attempts != 1 {
		t.Fatalf("status %s attempts %d, want failed at once", d.Status, d.Attempts)
	}
	if !strings.Contains(d.LastError, "lines[1].sku") || !strings.Contains(d.LastError, "SKU-NEW") {
		t.Fatalf("last_error %q, want 1C's message naming lines[1].sku and SKU-NEW", d.LastError)
	}

	h.onec.SetKnownSKUs([]string{"SKU-1", "SKU-NEW"}) // the 1C programmer adds the item
	op, err := e.RunKey(context.Background(), o.CreateKey())
	if err != nil {
		t.Fatal(err)
	}
	if op.Status != journal.StatusDone || op.LastError != "" {
		t.Fatalf("after resync: status %s last_error %q, want done", op.Status, op.LastError)
	}
	h.wantOneCOrders("site:A-1007", 1)
	// A resync of a done operation changes nothing.
	if op, err := e.RunKey(context.Background(), o.CreateKey()); err != nil || op.Attempts != 2 {
		t.Fatalf("second resync: %v attempts %d, want the saved result (2 attempts)", err, op.Attempts)
	}
	h.wantOneCOrders("site:A-1007", 1)
}

func TestBusinessException500FailsAfterFindProvesNothingWasCreated(t *testing.T) {
	t.Parallel()
	h := newHarness(t, onecsim.Options{})
	o := testOrder("A-1008")
	h.register(o)
	h.onec.Faults.Add(1, sim.Fault{Op: "create", Kind: onecsim.BusinessError500})
	h.drain(h.engine(nil, engine.Config{}))
	h.wantOneCOrders("site:A-1008", 0)
	d := h.show(o.CreateKey())
	if d.Status != journal.StatusFailed || !strings.Contains(d.LastError, "nothing was created") {
		t.Fatalf("status %s last_error %q; want failed, saying nothing was created", d.Status, d.LastError)
	}
	if st := h.onec.Stats(); st.Requests["find"] != 2 {
		t.Fatalf("finds = %d, want 2 (before the create, and after its 500)", st.Requests["find"])
	}
}

// worker.max_attempts counts attempts whose outcome was unknown: a POST sent and no
// verdict back (here a proxy's 504 every time, 1C writing nothing).
func TestUnknownOutcomesGiveUpAfterMaxAttempts(t *testing.T) {
	t.Parallel()
	h := newHarness(t, onecsim.Options{})
	o := testOrder("A-1009")
	h.register(o)
	h.onec.Faults.Add(sim.Forever, sim.Fault{Op: "create", Status: 504})
	h.drain(h.engine(nil, engine.Config{MaxAttempts: 3}))
	d := h.show(o.CreateKey())
	if d.Status != journal.StatusFailed || d.Attempts != 3 || outcomes(d) != "retry,retry,failed" || d.UnknownAttempts != 3 {
		t.Fatalf("status %s attempts %d unknown %d outcomes %s; want failed after 3", d.Status, d.Attempts, d.UnknownAttempts, outcomes(d))
	}
	if !strings.Contains(d.LastError, "worker.max_attempts") {
		t.Fatalf("last_error %q, want it to name worker.max_attempts", d.LastError)
	}
	h.wantOneCOrders("site:A-1009", 0)
}

// Attempts that provably never reached 1C's handler do not count toward
// worker.max_attempts: they wait until worker.give_up_after has passed since the first.
func TestTransientFailuresDoNotCountTowardMaxAttempts(t *testing.T) {
	t.Parallel()
	h := newHarness(t, onecsim.Options{})
	o := testOrder("A-1016")
	h.register(o)
	// On a POST only a failure that proves the handler never ran is transient: no
	// free session (406), the service's own lock_conflict error.
	noSession, lockConflict := sim.Fault{Op: "create", Status: 406}, sim.Fault{Op: "create", Kind: onecsim.LockConflict500}
	for _, f := range []sim.Fault{noSession, lockConflict, noSession, lockConflict, noSession, lockConflict} {
		h.onec.Faults.Add(1, f)
	}
	h.drain(h.engine(nil, engine.Config{MaxAttempts: 2}))
	d := h.show(o.CreateKey())
	if d.Status != journal.StatusDone || d.Attempts != 7 || d.UnknownAttempts != 0 {
		t.Fatalf("status %s attempts %d unknown %d outcomes %s; want done at the 7th attempt with max_attempts 2",
			d.Status, d.Attempts, d.UnknownAttempts, outcomes(d))
	}
	h.wantOneCOrders("site:A-1016", 1)
	for i, a := range d.History[:6] {
		if a.Class != journal.ClassTransient {
			t.Fatalf("attempt %d class %q, want transient", i+1, a.Class)
		}
	}
}

func TestTransientFailuresFailOnlyAfterGiveUpAfter(t *testing.T) {
	t.Parallel()
	h := newHarness(t, onecsim.Options{})
	o := testOrder("A-1017")
	h.register(o)
	h.onec.Faults.Add(sim.Forever, sim.Fault{Op: "create", Status: 406})
	// MaxAttempts 1: a second attempt proves transient failures are not counted. The
	// give-up time leaves room for several even when one attempt is slow on a
	// loaded machine (300ms did not).
	h.drain(h.engine(nil, engine.Config{MaxAttempts: 1, GiveUpAfter: 2 * time.Second}))
	d := h.show(o.CreateKey())
	if d.Status != journal.StatusFailed || d.Attempts < 2 || !strings.Contains(d.LastError, "worker.give_up_after") {
		t.Fatalf("status %s attempts %d last_error %q; want failed after several attempts, naming worker.give_up_after",
			d.Status, d.Attempts, d.LastError)
	}
	h.wantOneCOrders("site:A-1017", 0)
}

func TestDuplicatesAlreadyIn1CUseTheEarliestWithAWarning(t *testing.T) {
	t.Parallel()
	h := newHarness(t, onecsim.Options{})
	o := testOrder("A-1010")
	req := engine.ToCreateOrder(o, time.UTC)
	ctx := context.Background()
	first, err := h.client.CreateOrder(ctx, req) // someone created it twice by hand
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.client.CreateOrder(ctx, req); err != nil {
		t.Fatal(err)
	}
	h.register(o)
	h.drain(h.engine(nil, engine.Config{}))
	h.wantOneCOrders("site:A-1010", 2) // nothing more was created
	d := h.show(o.CreateKey())
	if d.Status != journal.StatusDone || d.Result.Ref != first.Ref || !d.Result.Found {
		t.Fatalf("result %+v, want the earliest order %s, found", d.Result, first.Ref)
	}
	if len(d.Result.Warnings) != 1 || !strings.Contains(d.Result.Warnings[0], "2 orders") {
		t.Fatalf("warnings %q, want one about 2 orders", d.Result.Warnings)
	}
}

func TestAuthFailureWaitsAndNamesTheConfigKeys(t *testing.T) {
	t.Parallel()
	h := newHarness(t, onecsim.Options{}) // 1C answers bad credentials with a 200 HTML page
	h.client = h.newClient("ordersync", "wrong-"+testPassword, 4)
	o := testOrder("A-1011")
	h.register(o)
	// An authentication failure is not the order's: it waits (the engine pauses until
	// a ping succeeds) and fails only once worker.give_up_after has passed.
	e := h.engine(nil, engine.Config{MaxAttempts: 1, BackoffMax: time.Millisecond, GiveUpAfter: 200 * time.Millisecond})
	h.drain(e)
	d := h.show(o.CreateKey())
	if d.Status != journal.StatusFailed || !strings.Contains(d.LastError, "onec.username") || !strings.Contains(d.LastError, "onec.base_url") {
		t.Fatalf("status %s last_error %q; want failed naming onec.username and onec.base_url", d.Status, d.LastError)
	}
	h.wantOneCOrders("site:A-1011", 0)
	if strings.Contains(h.logs.String(), testPassword) {
		t.Fatalf("a password reached the logs")
	}
}

func TestTwoEnginesRacingOverTheSameKeysCreateEachOrderOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t, onecsim.Options{Latency: 2 * time.Millisecond})
	ctx := context.Background()
	const n = 50
	var keys []string
	// Two replicas: each its own pool, its own engine, each registering every order
	// (as two pollers seeing the same marketplace page would).
	stores := []journal.Store{h.store, h.openDB().Journal()}
	var wg sync.WaitGroup
	for _, s := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range n {
				if _, err := s.Register(ctx, journal.CreateOrder(testOrder(fmt.Sprintf("R-%03d", i)))); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	for i := range n {
		keys = append(keys, testOrder(fmt.Sprintf("R-%03d", i)).CreateKey())
	}
	engines := []*engine.Engine{
		h.engine(stores[0], engine.Config{Workers: 4, WorkerID: "replica-a"}),
		h.engine(stores[1], engine.Config{Workers: 4, WorkerID: "replica-b"}),
	}
	for _, e := range engines {
		if err := e.Start(ctx); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	eventually.True(t, fmt.Sprintf("all %d operations done", n), func() bool {
		done, err := h.store.List(ctx, journal.Filter{Status: journal.StatusDone, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		return len(done) == n
	})
	for _, e := range engines {
		e.Stop()
	}
	if got := h.onec.Count(); got != n {
		t.Fatalf("1C holds %d orders, want %d", got, n)
	}
	for i := range n {
		h.wantOneCOrders(fmt.Sprintf("site:R-%03d", i), 1)
	}
	a, b := engines[0].Stats(), engines[1].Stats()
	if a.Done+b.Done != n {
		t.Fatalf("engines report %d + %d done, want %d in all", a.Done, b.Done, n)
	}
	t.Logf("replica a did %d, replica b did %d", a.Done, b.Done)
}

func TestStopLetsInFlightCallsFinish(t *testing.T) {
	t.Parallel()
	h := newHarness(t, onecsim.Options{Latency: 300 * time.Millisecond})
	o := testOrder("A-1012")
	h.register(o)
	e := h.engine(nil, engine.Config{Workers: 1, ShutdownTimeout: 10 * time.Second})
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, "the create's first attempt recorded", func() bool { return len(h.show(o.CreateKey()).History) == 1 })
	e.Stop()
	e.Stop() // twice is fine
	d := h.show(o.CreateKey())
	if d.Status != journal.StatusDone || outcomes(d) != "done" {
		t.Fatalf("after Stop: status %s outcomes %s; want the in-flight call finished and done", d.Status, outcomes(d))
	}
	h.wantOneCOrders("site:A-1012", 1)
}

func TestStopCancelsCallsThatOutliveTheShutdownTimeout(t *testing.T) {
	t.Parallel()
	h := newHarness(t, onecsim.Options{})
	o := testOrder("A-1013")
	h.register(o)
	h.onec.Faults.Add(1, sim.Fault{Op: "create", Kind: onecsim.Stall}) // 1C hangs; it creates when the client gives up
	e := h.engine(nil, engine.Config{Workers: 1, ShutdownTimeout: 200 * time.Millisecond})
	e.Start(context.Background())
	eventually.True(t, "the POST in 1C", func() bool { return h.onec.Stats().Requests["create"] == 1 })
	e.Stop()
	d := h.show(o.CreateKey())
	if d.Status != journal.StatusPending || outcomes(d) != "retry" || !strings.Contains(d.LastError, "unknown outcome") {
		t.Fatalf("after Stop: status %s outcomes %s error %q; want pending with an unknown outcome", d.Status, outcomes(d), d.LastError)
	}
	// The restarted service finds the order the stalled call created.
	eventually.True(t, "1C to create the stalled order", func() bool { return h.onec.CountExternal("site:A-1013") == 1 })
	h.drain(h.engine(nil, engine.Config{}))
	h.wantOneCOrders("site:A-1013", 1)
	if d := h.show(o.CreateKey()); d.Status != journal.StatusDone || !d.Result.Recovered || d.Result.Found {
		t.Fatalf("status %s, want done and found", d.Status)
	}
}

func TestEveryLogLineAboutAnOperationCarriesKeyAndAttempt(t *testing.T) {
	t.Parallel()
	h := newHarness(t, onecsim.Options{})
	o := testOrder("A-1014")
	h.register(o)
	h.onec.Faults.Add(1, sim.Fault{Op: "create", Status: 503})
	h.drain(h.engine(nil, engine.Config{}))
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(h.logs.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line is not JSON: %q", line)
		}
		msg, _ := rec["msg"].(string)
		if msg == "operation done" || msg == "attempt failed, will retry" {
			n++
			if rec["key"] != o.CreateKey() || rec["attempt"] == nil {
				t.Fatalf("log line %q lacks key or attempt", line)
			}
		}
	}
	if n != 2 {
		t.Fatalf("%d operation log lines, want 2 (retry, done)", n)
	}
}

func TestBackoffGrowsAndStaysWithinBounds(t *testing.T) {
	t.Parallel()
	identity := engine.New(nil, nil, engine.Config{BackoffMin: time.Second, BackoffMax: 10 * time.Second,
		Jitter: func(d time.Duration) time.Duration { return d }})
	for attempt, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 4: 8 * time.Second, 5: 10 * time.Second, 40: 10 * time.Second} {
		if got := identity.Backoff(attempt); got != want {
			t.Errorf("Backoff(%d) = %s, want %s", attempt, got, want)
		}
	}
	jittered := engine.New(nil, nil, engine.Config{BackoffMin: time.Second, BackoffMax: 10 * time.Second})
	seen := map[time.Duration]bool{}
	for range 200 {
		d := jittered.Backoff(3) // nominal 4s: jitter keeps it in [2s, 4s]
		if d < 2*time.Second || d > 4*time.Second {
			t.Fatalf("Backoff(3) = %s, outside [2s, 4s]", d)
		}
		seen[d] = true
		if d := jittered.Backoff(1); d < time.Second {
			t.Fatalf("Backoff(1) = %s, below backoff_min", d)
		}
	}
	if len(seen) < 10 {
		t.Fatalf("only %d distinct delays in 200 draws: no jitter", len(seen))
	}
}

func TestGatewayTimeoutOnCreateIsRetriedNotFailed(t *testing.T) {
	t.Parallel()
	h := newHarness(t, onecsim.Options{})
	o := testOrder("A-1015")
	h.register(o)
	h.onec.Faults.Add(1, sim.Fault{Op: "create", Status: 504})
	h.drain(h.engine(nil, engine.Config{}))
	h.wantOneCOrders("site:A-1015", 1)
	d := h.show(o.CreateKey())
	if d.Status != journal.StatusDone || outcomes(d) != "retry,done" || !strings.Contains(d.History[0].Error, "unknown outcome") {
		t.Fatalf("status %s outcomes %s first error %q; want an unknown outcome, then done", d.Status, outcomes(d), d.History[0].Error)
	}
}
