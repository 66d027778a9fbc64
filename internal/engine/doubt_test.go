package engine_test

// Exactly once when 1C is slower than its timeout, when a claim's database session
// dies in mid-call, when a cancel follows an unknown outcome, and when 1C is away for
// longer than the retry budget. Each test makes the failure happen against the
// simulated 1C and counts the orders it holds.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/ordersync/ordersync/internal/engine"
	"github.com/ordersync/ordersync/internal/eventually"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/onec/httpservice"
	"github.com/ordersync/ordersync/internal/order"
	"github.com/ordersync/ordersync/internal/outbox"
	"github.com/ordersync/ordersync/internal/sim"
	"github.com/ordersync/ordersync/internal/sim/onecsim"
	"github.com/ordersync/ordersync/internal/store/postgres"
)

// Scaled timings: onec.timeout 300ms, a create that takes 1s in 1C, settle time 1.5s.
const (
	scaledTimeout = 300 * time.Millisecond
	slowCreate    = time.Second
	scaledSettle  = 1500 * time.Millisecond
)

// scaledClient is a client whose onec.timeout is shorter than the create takes.
func (h *harness) scaledClient(timeout time.Duration) *httpservice.Client {
	h.t.Helper()
	c, err := httpservice.New(httpservice.Config{
		BaseURL: h.onec.URL(), Username: "ordersync", Password: testPassword,
		Timeout: timeout, MaxConcurrency: 4, SessionReuse: true,
		RetryBackoff: time.Millisecond, Logger: h.logger(),
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return c
}

// running starts e and stops it at the end of the test.
func running(t *testing.T, e *engine.Engine) *engine.Engine {
	t.Helper()
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Stop)
	return e
}

// waitStatus waits until key has status st (within a minute: the machine may be busy).
func (h *harness) waitStatus(key string, st journal.Status) journal.Detail {
	h.t.Helper()
	return eventually.Value(h.t, fmt.Sprintf("%s %s", key, st), func() (journal.Detail, bool) {
		d := h.show(key)
		return d, d.Status == st
	})
}

// waitVerified waits until the done create has had its first verification find:
// its late one (onec.late_verify after the doubtful POST) is then what VerifyAt
// holds, and LateVerifyAt is cleared.
func (h *harness) waitVerified(key string) journal.Operation {
	h.t.Helper()
	return eventually.Value(h.t, key+"'s first verification", func() (journal.Operation, bool) {
		op, err := h.store.Get(context.Background(), key)
		if err != nil {
			h.t.Fatal(err)
		}
		return op, op.Status == journal.StatusDone && op.LateVerifyAt == nil && (op.VerifyAt == nil || op.VerifyAt.After(time.Now()))
	})
}

// A create slower than onec.timeout: the client gives up (or a proxy answers 504)
// while 1C goes on and commits the order later. The next attempt must not come before
// 1C has finished, or it finds nothing and creates a second order.
func TestCreateSlowerThanTheTimeoutIsCreatedOnce(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		fault sim.Fault
	}{
		{"client timeout", sim.Fault{Op: "create", Kind: onecsim.SlowCreate, Delay: slowCreate}},
		{"proxy 504", sim.Fault{Op: "create", Kind: onecsim.Gateway504After, Delay: scaledTimeout / 2, Hold: slowCreate}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, onecsim.Options{})
			h.client = h.scaledClient(scaledTimeout)
			o := testOrder("SLOW-1")
			h.register(o)
			h.onec.Faults.Add(1, tc.fault)
			e := running(t, h.engine(nil, engine.Config{Workers: 2, OneCTimeout: scaledTimeout, SettleTime: scaledSettle,
				BackoffMin: 10 * time.Millisecond, BackoffMax: 50 * time.Millisecond}))

			d := h.waitStatus(o.CreateKey(), journal.StatusDone)
			op := h.waitVerified(o.CreateKey())
			h.wantOneCOrders("site:SLOW-1", 1)
			if !d.Result.Recovered || d.Result.Ref != h.onec.Orders()[0].Ref {
				t.Fatalf("result %+v, want the order 1C committed after the client gave up, found", d.Result)
			}
			if first := d.History[0]; first.Class != journal.ClassUnknown {
				t.Fatalf("first attempt %+v, want an unknown outcome", first)
			}
			// The second attempt came no sooner than the settle time after the POST.
			if gap := d.History[1].StartedAt.Sub(d.History[0].StartedAt); gap < scaledSettle {
				t.Fatalf("second attempt %s after the first, want at least the settle time %s", gap, scaledSettle)
			}
			if len(op.Warnings) != 0 {
				t.Fatalf("warnings %+v on a create 1C holds once", op.Warnings)
			}
			if st := h.onec.Stats(); st.Requests["create"] != 1 {
				t.Fatalf("1C received %d creates, want 1", st.Requests["create"])
			}
			if s := e.Stats(); s.Verified < 1 {
				t.Fatalf("stats %+v: the create that was in doubt was not verified", s)
			}
		})
	}
}

// A claim whose PostgreSQL session dies (pg_terminate_backend) while its POST is in
// 1C loses its row lock, but its call goes on. Another worker of the same process and
// another process are free to claim the row: neither may take the open attempt over
// before the call budget plus the settle time has passed since it started.
func TestClaimSessionKilledMidPostCreatesOneOrder(t *testing.T) {
	t.Parallel()
	h := newHarness(t, onecsim.Options{})
	const timeout, create, settle = 2 * time.Second, 700 * time.Millisecond, 500 * time.Millisecond
	takeover := engine.TakeoverAfter(timeout, settle)
	name := "claim-" + randomHex(t)
	a := h.openDBWith(postgres.Config{URL: withAppName(t, h.url, name), TakeoverAfter: takeover})
	b := h.openDBWith(postgres.Config{TakeoverAfter: takeover})

	o := testOrder("KILL-1")
	h.register(o)
	h.onec.Faults.Add(1, sim.Fault{Op: "create", Kind: onecsim.SlowCreate, Delay: create})
	h.client = h.scaledClient(timeout)
	cfg := engine.Config{Workers: 2, OneCTimeout: timeout, SettleTime: settle, BackoffMin: 10 * time.Millisecond, BackoffMax: 50 * time.Millisecond}
	cfg.WorkerID = "process-a"
	running(t, h.engine(a.Journal(), cfg))
	eventually.True(t, "the POST in 1C", func() bool { return h.onec.Stats().Requests["create"] == 1 })

	// The POST is in 1C: kill the session that holds the row lock.
	var killed int
	// The claim holding the row lock has a transaction id (locking a row assigns
	// one); another worker's claim that found nothing due, caught between its SELECT
	// and its ROLLBACK, has none.
	if err := h.db.Pool().QueryRow(context.Background(), `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE application_name = $1 AND state = 'idle in transaction' AND backend_xid IS NOT NULL`, name).Scan(&killed); err != nil {
		t.Fatal(err)
	}
	if killed != 1 {
		t.Fatalf("terminated %d claim sessions, want 1", killed)
	}
	cfg.WorkerID = "process-b"
	running(t, h.engine(b.Journal(), cfg))

	d := h.waitStatus(o.CreateKey(), journal.StatusDone)
	h.waitVerified(o.CreateKey())
	h.wantOneCOrders("site:KILL-1", 1)
	if st := h.onec.Stats(); st.Requests["create"] != 1 {
		t.Fatalf("1C received %d creates, want 1", st.Requests["create"])
	}
	if d.History[0].Outcome != journal.OutcomeInterrupted || !strings.HasPrefix(d.History[0].Worker, "process-a") {
		t.Fatalf("first attempt %+v, want process-a's, interrupted", d.History[0])
	}
	if gap := d.History[1].StartedAt.Sub(d.History[0].StartedAt); gap < takeover {
		t.Fatalf("the open attempt was taken over %s after it started, want at least %s", gap, takeover)
	}
	if !d.Result.Recovered || d.Result.Ref != h.onec.Orders()[0].Ref {
		t.Fatalf("result %+v, want the order the killed claim's POST created", d.Result)
	}
	t.Logf("interrupted attempt taken over after %s; outcomes %s", d.History[1].StartedAt.Sub(d.History[0].StartedAt), outcomes(d))
}

func withAppName(t *testing.T, raw, name string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("application_name", name)
	u.RawQuery = q.Encode()
	return u.String()
}

func randomHex(t *testing.T) string {
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// A cancel that arrives right after a create's unknown outcome must not conclude
// "never created" while 1C is still writing the order.
func TestCancelRightAfterAnUnknownOutcomeCancelsTheOrderIn1C(t *testing.T) {
	t.Parallel()
	h := newHarness(t, onecsim.Options{})
	h.client = h.scaledClient(scaledTimeout)
	o := testOrder("CANCEL-1")
	h.register(o)
	h.onec.Faults.Add(1, sim.Fault{Op: "create", Kind: onecsim.SlowCreate, Delay: slowCreate})
	running(t, h.engine(nil, engine.Config{Workers: 2, OneCTimeout: scaledTimeout, SettleTime: scaledSettle,
		BackoffMin: 10 * time.Millisecond, BackoffMax: 50 * time.Millisecond}))
	eventually.True(t, "the create's unknown outcome", func() bool {
		d := h.show(o.CreateKey())
		return len(d.History) > 0 && d.History[0].Class == journal.ClassUnknown
	})
	cancelKey := h.registerCancel(o, "the buyer cancelled")

	c := h.waitStatus(cancelKey, journal.StatusDone)
	cr := eventually.Value(t, "the create to leave pending", func() (journal.Detail, bool) {
		cr := h.show(o.CreateKey())
		return cr, cr.Status != journal.StatusPending
	})
	h.wantOneCOrders("site:CANCEL-1", 1)
	held := h.onec.Orders()[0]
	if !held.Cancelled {
		t.Fatalf("1C holds %s uncancelled; the cancel said %+v", held.Ref, c.Result)
	}
	if cr.Status != journal.StatusDone || cr.Result.Ref != held.Ref {
		t.Fatalf("create %s %+v, want done with 1C's ref %s", cr.Status, cr.Result, held.Ref)
	}
	if c.Result.Ref != held.Ref {
		t.Fatalf("cancel result %+v, want 1C's ref %s", c.Result, held.Ref)
	}
}

// 1C refuses connections for longer than the old budget of worker.max_attempts: no
// operation fails, and when 1C is back every one is done within moments.
func TestOutageLongerThanMaxAttemptsFailsNothing(t *testing.T) {
	t.Parallel()
	h := newHarness(t, onecsim.Options{})
	const n = 12
	var keys []string
	for i := range n {
		o := testOrder(fmt.Sprintf("DOWN-%02d", i))
		h.register(o)
		keys = append(keys, o.CreateKey())
	}
	if err := h.onec.Down(); err != nil {
		t.Fatal(err)
	}
	e := running(t, h.engine(nil, engine.Config{Workers: 4, MaxAttempts: 3,
		BackoffMin: 5 * time.Millisecond, BackoffMax: 20 * time.Millisecond, PingInterval: 50 * time.Millisecond}))
	// 20 attempts' worth of the old budget: each operation tried far past max_attempts.
	eventually.True(t, "every operation tried 21 times", func() bool {
		for _, k := range keys {
			if h.show(k).Attempts < 3*7 {
				return false
			}
		}
		return true
	})
	for _, k := range keys {
		if d := h.show(k); d.Status != journal.StatusPending || d.RetryClass != journal.ClassTransient || d.UnknownAttempts != 0 {
			t.Fatalf("%s during the outage: %s class %q unknown %d (%q), want pending on a transient failure",
				k, d.Status, d.RetryClass, d.UnknownAttempts, d.LastError)
		}
	}
	back := time.Now()
	if err := h.onec.Up(); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		h.waitStatus(k, journal.StatusDone)
	}
	t.Logf("all %d done %s after 1C came back; %d operations woken", n, time.Since(back).Round(time.Millisecond), e.Stats().Woken)
	for i := range n {
		h.wantOneCOrders(fmt.Sprintf("site:DOWN-%02d", i), 1)
	}
}

// A publication that lost its service answers 404 pages: nothing is the orders'
// fault, so nothing fails; the engine logs one ERROR naming the URL and path (then
// at most one per worker.backoff_max, with a count), and finishes everything once
// the page comes back.
func TestMissingPublicationWaitsAndResumes(t *testing.T) {
	t.Parallel()
	h := newHarness(t, onecsim.Options{})
	h.onec.SetMissing() // every path
	const n = 6
	var keys []string
	for i := range n {
		o := testOrder(fmt.Sprintf("NOPUB-%02d", i))
		h.register(o)
		keys = append(keys, o.CreateKey())
	}
	running(t, h.engine(nil, engine.Config{Workers: 2, MaxAttempts: 1,
		BackoffMin: 5 * time.Millisecond, BackoffMax: 30 * time.Millisecond, PingInterval: 30 * time.Millisecond}))
	eventually.True(t, "every operation tried 3 times", func() bool { // each waits and is tried again, past max_attempts
		for _, k := range keys {
			if h.show(k).Attempts < 3 {
				return false
			}
		}
		return true
	})
	for _, k := range keys {
		if d := h.show(k); d.Status != journal.StatusPending {
			t.Fatalf("%s %s (%q) while the publication is missing, want pending", k, d.Status, d.LastError)
		}
	}
	if errs := countFirstLogs(t, h.logs.String(), "ERROR", "publication is not there"); errs != 1 {
		t.Fatalf("%d ERROR lines about the missing publication, want 1; log:\n%s", errs, h.logs.String())
	}
	if !strings.Contains(h.logs.String(), h.onec.URL()) || !strings.Contains(h.logs.String(), `"path":"/`) {
		t.Fatalf("the ERROR does not name onec.base_url and the path; log:\n%s", h.logs.String())
	}
	h.onec.ClearMissing()
	for _, k := range keys {
		h.waitStatus(k, journal.StatusDone)
	}
	for i := range n {
		h.wantOneCOrders(fmt.Sprintf("site:NOPUB-%02d", i), 1)
	}
}

// A 404 page on POST /orders/cancel is not "no such order": the cancel is not done,
// and the order is cancelled in 1C once the page is back.
func TestCancelAgainstA404PageIsNotDone(t *testing.T) {
	t.Parallel()
	h := newHarness(t, onecsim.Options{})
	o := testOrder("NOPUB-CANCEL")
	h.register(o)
	e := h.engine(nil, engine.Config{BackoffMax: 20 * time.Millisecond})
	h.drain(e)
	h.onec.SetMissing("cancel")
	key := h.registerCancel(o, "")
	for range 3 {
		if _, err := e.RunKey(context.Background(), key); err != nil {
			t.Fatal(err)
		}
	}
	d := h.show(key)
	if d.Status != journal.StatusPending || d.RetryClass != journal.ClassConfiguration || d.Attempts < 3 {
		t.Fatalf("cancel against a 404 page: %s class %q attempts %d (%q), want pending on a configuration problem",
			d.Status, d.RetryClass, d.Attempts, d.LastError)
	}
	if _, cancelled := h.cancelledIn1C("site:NOPUB-CANCEL"); cancelled {
		t.Fatal("cancelled in 1C although the cancel never reached it")
	}
	h.onec.ClearMissing()
	if op, err := e.RunKey(context.Background(), key); err != nil || op.Status != journal.StatusDone {
		t.Fatalf("cancel after the page is back: %+v %v", op, err)
	}
	if _, cancelled := h.cancelledIn1C("site:NOPUB-CANCEL"); !cancelled {
		t.Fatal("not cancelled in 1C after the page came back")
	}
}

// A duplicate made behind ordersync's back (a second client, a person) after an
// unknown outcome is recorded as a duplicate_in_1c warning naming both refs, and
// announced to the outbox.
func TestDuplicateAfterAnUnknownOutcomeIsReported(t *testing.T) {
	t.Parallel()
	h := newHarness(t, onecsim.Options{})
	o := testOrder("DUP-1")
	h.register(o)
	h.onec.Faults.Add(1, sim.Fault{Op: "create", Kind: onecsim.DropAfterCreate}) // created, reply lost
	routes := outbox.Routes{}
	routes.Add("crm", "", outbox.OrderCreated, outbox.OrderDuplicateIn1C)
	e := h.engine(nil, engine.Config{Routes: routes, SettleTime: 200 * time.Millisecond})
	if ran, _ := e.RunDue(context.Background()); !ran {
		t.Fatal("nothing ran")
	}
	if d := h.show(o.CreateKey()); d.Status != journal.StatusPending || d.History[0].Class != journal.ClassUnknown {
		t.Fatalf("after the lost reply: %s %+v, want pending on an unknown outcome", d.Status, d.History[0])
	}
	// Someone else creates it in 1C again meanwhile.
	if _, err := h.client.CreateOrder(context.Background(), engine.ToCreateOrder(o, time.UTC)); err != nil {
		t.Fatal(err)
	}
	h.drain(e)
	h.wantOneCOrders("site:DUP-1", 2)
	op, err := h.store.Get(context.Background(), o.CreateKey())
	if err != nil {
		t.Fatal(err)
	}
	refs := []string{h.onec.Orders()[0].Ref, h.onec.Orders()[1].Ref}
	if len(op.Warnings) != 1 || op.Warnings[0].Code != journal.WarningDuplicateIn1C || !sameSet(op.Warnings[0].Refs, refs) {
		t.Fatalf("warnings %+v, want one duplicate_in_1c naming %v", op.Warnings, refs)
	}
	for _, ref := range refs {
		if !strings.Contains(op.Warnings[0].Message, ref) {
			t.Fatalf("warning %q does not name %s", op.Warnings[0].Message, ref)
		}
	}
	events, err := h.db.Outbox().List(context.Background(), outbox.ListFilter{AggregateID: "site:order:DUP-1"})
	if err != nil {
		t.Fatal(err)
	}
	var dup *outbox.Record
	for i := range events {
		if events[i].Type == outbox.OrderDuplicateIn1C {
			dup = &events[i]
		}
	}
	if dup == nil {
		t.Fatalf("no order.duplicate_in_1c event in %+v", events)
	}
	var data struct {
		Refs []string `json:"refs"`
	}
	if err := json.Unmarshal(dup.Data, &data); err != nil || !sameSet(data.Refs, refs) {
		t.Fatalf("event data %s, want both refs", dup.Data)
	}
	// The verification of the doubted create finds the same two: no second warning.
	if err := e.Verify(context.Background(), op); err != nil {
		t.Fatal(err)
	}
	if op, _ := h.store.Get(context.Background(), o.CreateKey()); len(op.Warnings) != 1 {
		t.Fatalf("warnings after verification %+v, want the one", op.Warnings)
	}
	if orderKey := order.AggregateOfKey(o.CreateKey()); dup.AggregateID != orderKey {
		t.Fatalf("event lane %s, want %s", dup.AggregateID, orderKey)
	}
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	seen := map[string]int{}
	for _, s := range a {
		seen[s]++
	}
	for _, s := range b {
		seen[s]--
	}
	for _, n := range seen {
		if n != 0 {
			return false
		}
	}
	return true
}

// countFirstLogs counts the JSON log lines at level whose message contains msg and
// that are not a repeat of an earlier one (no "repeated" count).
func countFirstLogs(t *testing.T, logs, level, msg string) int {
	t.Helper()
	return countLogLines(logs, level, msg, false)
}

// countLogs counts the JSON log lines at level whose message contains msg.
func countLogs(t *testing.T, logs, level, msg string) int {
	t.Helper()
	return countLogLines(logs, level, msg, true)
}

func countLogLines(logs, level, msg string, repeats bool) int {
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(logs), "\n") {
		var rec struct {
			Level    string `json:"level"`
			Msg      string `json:"msg"`
			Repeated *int   `json:"repeated"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Level == level && strings.Contains(rec.Msg, msg) &&
			(repeats || rec.Repeated == nil) {
			n++
		}
	}
	return n
}
