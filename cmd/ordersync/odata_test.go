package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/ordersync/ordersync/internal/eventually"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/sim"
	"github.com/ordersync/ordersync/internal/sim/odatasim"
	"github.com/ordersync/ordersync/internal/sim/onecsim"
)

// scenarioOrder is one order of the OData scenario, as imported.
type scenarioOrder struct {
	source, id, customer string
	lines                []scenarioLine
}

type scenarioLine struct{ sku, qty, price string }

func (o scenarioOrder) json() string {
	lines := make([]string, len(o.lines))
	for i, l := range o.lines {
		lines[i] = fmt.Sprintf(`{"sku":%q,"name":"Товар","quantity":%s,"price":%s}`, l.sku, l.qty, l.price)
	}
	return fmt.Sprintf(`{"source":%q,"external_id":%q,"number":%q,"created_at":"2026-12-01T10:00:00+05:00",`+
		`"customer":{"name":%q,"phone":"+77011234567"},"warehouse":"WH1","currency":"KZT","lines":[%s]}`,
		o.source, o.id, o.id, o.customer, strings.Join(lines, ","))
}

func (o scenarioOrder) marker() string { return o.source + ":" + o.id }
func (o scenarioOrder) key() string    { return o.source + ":order:" + o.id + ":create" }

// TestODataScenario runs `ordersync run` against a base's standard OData
// interface through everything it does to a client: 200 orders from three
// sources, replies lost after 1C committed, creates slower than onec.timeout, a
// Location header the client cannot use, a proxy's 502 after the commit, a long
// customer name cut silently, an unknown SKU, a posting refused three times, and
// two SIGKILLs while creates are in flight. 1C ends with every order exactly once
// (counted by marker), posted, its rows and total those of the order; the cut
// order and the unmatched SKU are in `journal list --warnings` and nothing about
// them reaches the CRM until an administrator fixes them in 1C. On PostgreSQL and
// on the embedded SQLite file.
func TestODataScenario(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"postgres", "sqlite"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			testODataScenario(t, backend)
		})
	}
}

func testODataScenario(t *testing.T, backend string) {
	const commentMax = 120
	s := odatasim.New(odatasim.Options{Username: "ordersync", Password: simPassword, Latency: 20 * time.Millisecond,
		MaxLength: map[string]int{"Комментарий": commentMax}})
	if err := s.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	base := s.Seed([]string{"site", "kaspi", "ozon"}, []string{"SKU-1", "SKU-2", "SKU-3", "SKU-4"})
	// The service talks to 1C through a front that counts the creates in flight.
	var creating atomic.Int64
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, odatasim.Orders) {
			creating.Add(1)
			defer creating.Add(-1)
		}
		s.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	root, err := url.Parse(s.URL())
	if err != nil {
		t.Fatal(err)
	}

	e := newEnvOn(t, backend, onecsim.Options{}, true)
	sink := e.withSink()
	e.environ = append(e.environ, base.Environ(front.URL+root.Path)...)
	e.environ = append(e.environ, "ORDERSYNC_ONEC__MAX_CONCURRENCY=8", "ORDERSYNC_ONEC__TIMEOUT=2s", "ORDERSYNC_ONEC__SETTLE_TIME=3s")

	const n = 200
	sources := []string{"site", "kaspi", "ozon"}
	orders := make([]scenarioOrder, n)
	var input strings.Builder
	for i := range orders {
		o := scenarioOrder{source: sources[i%3], id: fmt.Sprintf("OD-%03d", i), customer: "Иван Петров",
			lines: []scenarioLine{{fmt.Sprintf("SKU-%d", i%4+1), strconv.Itoa(i%3 + 1), fmt.Sprintf("%d.%02d", 1000+i, i%100)}}}
		if i%5 == 0 {
			o.lines = append(o.lines, scenarioLine{"SKU-4", "0.5", "99.99"})
		}
		orders[i] = o
	}
	cut, unmatched := &orders[7], &orders[11]
	cut.customer = strings.Repeat("Константин Константинопольский-", 5)
	unmatched.lines[0].sku = "SKU-404"
	for _, o := range orders {
		fmt.Fprintln(&input, o.json())
	}
	postRefused := `{"odata.error":{"code":"-1","message":{"lang":"ru","value":"Не удалось провести: недостаточно товара на складе"}}}`
	s.Faults.Add(3, sim.Fault{Op: "create", Kind: odatasim.DropAfterCreate})
	s.Faults.Add(2, sim.Fault{Op: "create", Kind: odatasim.SlowCreate, Delay: 3 * time.Second})
	s.Faults.Add(2, sim.Fault{Op: "create", Kind: odatasim.MangledLocation})
	s.Faults.Add(1, sim.Fault{Op: "create", Kind: odatasim.GatewayAfterCreate})
	s.Faults.Add(3, sim.Fault{Op: "post", Status: 500, Body: postRefused})
	store := e.store()

	for kill := 1; kill <= 2; kill++ {
		svc := e.startService()
		eventually.True(t, "engine started in the log, or the service gone", func() bool { return strings.Contains(svc.stderr.String(), "engine started") || svc.exited() })
		if svc.exited() {
			t.Fatalf("run %d ended before it started: %s; log:\n%s", kill, svc.cmd.ProcessState, svc.stderr.String())
		}
		if kill == 1 {
			if _, stderr, code := e.cli(input.String(), "order", "import"); code != 0 {
				t.Fatalf("import: %d %s", code, stderr)
			}
		}
		before := s.Creates()
		eventually.True(t, "creates answered and in flight, or the service gone", func() bool {
			return (s.Creates() >= before+6 && creating.Load() >= 2) || svc.exited()
		})
		svc.signal(syscall.SIGKILL)
		svc.wait(10 * time.Second)
		if ws, _ := svc.cmd.ProcessState.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("run %d ended by itself before the kill: %s; log:\n%s", kill, svc.cmd.ProcessState, svc.stderr.String())
		}
		t.Logf("kill %d: 1C holds %d orders; %d operations done", kill, len(s.Orders()), countStatus(t, store, journal.StatusDone))
	}

	svc := e.startService()
	t.Cleanup(func() {
		if !svc.exited() {
			svc.signal(syscall.SIGKILL)
			svc.wait(10 * time.Second)
		}
	})
	eventually.Value(t, fmt.Sprintf("%d operations done, all but the cut and the unmatched", n-2), func() (int, bool) {
		done := countStatus(t, store, journal.StatusDone)
		return done, done == n-2 || svc.exited()
	})
	if svc.exited() {
		t.Fatalf("the service ended: %s", svc.stderr.String())
	}

	// The two wait, with their warnings, and nothing about them reached the CRM.
	out, _, code := e.cli("", "journal", "list", "--warnings", "--format", "json")
	if code != 0 {
		t.Fatalf("journal list --warnings: exit %d", code)
	}
	var listed []struct {
		Key      string `json:"key"`
		Status   string `json:"status"`
		Warnings []struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"warnings"`
	}
	if err := json.Unmarshal([]byte(out), &listed); err != nil {
		t.Fatalf("journal list --warnings: %v: %s", err, out)
	}
	codes := map[string]string{}
	var cutMessage string
	for _, op := range listed {
		for _, w := range op.Warnings {
			codes[op.Key] += w.Code + " "
			if w.Code == journal.WarningMismatchIn1C {
				cutMessage = w.Message
			}
		}
		if (op.Key == cut.key() || op.Key == unmatched.key()) && op.Status != string(journal.StatusPending) {
			t.Errorf("%s is %s, want pending until 1C is fixed", op.Key, op.Status)
		}
	}
	if !strings.Contains(codes[cut.key()], journal.WarningMismatchIn1C) || !strings.Contains(codes[unmatched.key()], journal.WarningUnmatchedSKU) {
		t.Fatalf("journal list --warnings: %v; want mismatch_in_1c on %s and unmatched_sku on %s", codes, cut.key(), unmatched.key())
	}
	reported := func(o *scenarioOrder) bool {
		for _, d := range sink.Deliveries() {
			if bytes.Contains(d.Body, []byte(`"external_id":"`+o.id+`"`)) {
				return true
			}
		}
		return false
	}
	eventually.True(t, "the CRM told of every settled order", func() bool { return sink.Unique() >= n-2 })
	if reported(cut) || reported(unmatched) {
		t.Fatal("the CRM was told of an order 1C does not hold as written")
	}
	if got := s.CountMarker(unmatched.marker()); got != 0 {
		t.Fatalf("1C holds %d orders of the unmatched SKU's order, want none before its item exists", got)
	}

	// The administrator adds the item, widens the comment and writes it whole.
	base.Items["SKU-404"] = s.AddItem("SKU-404", "Товар SKU-404")
	m := regexp.MustCompile(`Комментарий: wrote ("(?:[^"\\]|\\.)*")`).FindStringSubmatch(cutMessage)
	if m == nil {
		t.Fatalf("the mismatch does not say what was written: %s", cutMessage)
	}
	whole, err := strconv.Unquote(m[1])
	if err != nil {
		t.Fatal(err)
	}
	s.SetMaxLength("Комментарий", 0)
	refs := refsOf(t, s, cut.marker())
	if len(refs) != 1 {
		t.Fatalf("1C holds %d orders of the cut one, want 1", len(refs))
	}
	patch, _ := json.Marshal(map[string]string{"Комментарий": whole})
	req, _ := http.NewRequest(http.MethodPatch, s.URL()+"/"+url.PathEscape(odatasim.Orders)+"(guid'"+refs[0]+"')?$format=json", bytes.NewReader(patch))
	req.SetBasicAuth("ordersync", simPassword)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 200 {
		t.Fatalf("the administrator's edit: %v %v", resp, err)
	}
	eventually.True(t, "every operation done", func() bool { return countStatus(t, store, journal.StatusDone) == n || svc.exited() })
	eventually.True(t, "the CRM told of every order", func() bool { return sink.Unique() >= n })
	svc.signal(syscall.SIGTERM)
	if code := svc.wait(30 * time.Second); code != 0 {
		t.Fatalf("final SIGTERM: exit %d; log:\n%s", code, svc.stderr.String())
	}

	// 1C holds each order once, posted, with the order's rows and total.
	if got := len(s.Orders()); got != n {
		t.Errorf("1C holds %d orders, want %d", got, n)
	}
	for _, o := range orders {
		refs := refsOf(t, s, o.marker())
		if len(refs) != 1 {
			t.Errorf("%s: 1C holds %d orders, want 1", o.marker(), len(refs))
			continue
		}
		d, _ := s.Order(refs[0])
		if !s.Posted(refs[0]) {
			t.Errorf("%s: not posted", o.marker())
		}
		rows, _ := d["Товары"].([]any)
		total := decimal.Zero
		if len(rows) != len(o.lines) {
			t.Errorf("%s: %d rows, want %d", o.marker(), len(rows), len(o.lines))
			continue
		}
		for i, l := range o.lines {
			row := rows[i].(map[string]any)
			qty, price := decimal.RequireFromString(l.qty), decimal.RequireFromString(l.price)
			amount := qty.Mul(price)
			total = total.Add(amount)
			if row["Номенклатура_Key"] != base.Items[l.sku] || !decimalOf(row["Количество"]).Equal(qty) ||
				!decimalOf(row["Цена"]).Equal(price) || !decimalOf(row["Сумма"]).Equal(amount) {
				t.Errorf("%s row %d: %v, want %s × %s = %s of %s", o.marker(), i+1, row, l.qty, l.price, amount, l.sku)
			}
		}
		if got := decimalOf(d["СуммаДокумента"]); !got.Equal(total) {
			t.Errorf("%s: total %s, want %s", o.marker(), got, total)
		}
	}
	if p := s.Faults.Pending(); p != 0 {
		t.Errorf("%d faults never fired", p)
	}
	attempts, outcomes := 0, map[journal.Outcome]int{}
	for _, op := range mustList(t, store) {
		d, err := store.Show(context.Background(), op.Key)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range d.History {
			attempts++
			outcomes[a.Outcome]++
		}
	}
	t.Logf("%d orders, each once in 1C, posted; %d creates reached 1C for them; the CRM was told of %d; %d attempts: %v",
		n, s.Creates(), sink.Unique(), attempts, outcomes)
}

// refsOf are the Ref_Keys of the orders 1C holds for marker.
func refsOf(t *testing.T, s *odatasim.Server, marker string) []string {
	t.Helper()
	var refs []string
	for _, d := range s.Orders() {
		if d[odatasim.Marker] == marker {
			refs = append(refs, d["Ref_Key"].(string))
		}
	}
	return refs
}

func decimalOf(v any) decimal.Decimal {
	d, err := decimal.NewFromString(fmt.Sprint(v))
	if err != nil {
		return decimal.NewFromInt(-1)
	}
	return d
}
