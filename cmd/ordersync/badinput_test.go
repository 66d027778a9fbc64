package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/ordersync/ordersync/internal/eventually"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/sim/kaspisim"
	"github.com/ordersync/ordersync/internal/sim/onecsim"
)

// Outside input that poisons the flow, through the real program on
// both stores: bad outside input is refused with the field named, never fatal,
// never blocking the good input around it.

// badLine is one bad order line and the field its refusal must name.
type badLine struct {
	name, line, field string
}

// badOrderLines are the bad inputs ordersync must refuse, as canonical orders.
func badOrderLines() []badLine {
	r := func(id, from, to string) string {
		good := orderJSON(id, "SKU-1", "1", "10")
		s := strings.Replace(good, from, to, 1)
		if s == good {
			panic("test case did not change the order: " + from)
		}
		return s
	}
	const created = `"created_at":"2026-09-16T10:00:00+05:00"`
	return []badLine{
		{"year 10000", r("BAD-1", created, `"created_at":"10000-01-01T00:00:00Z"`), "created_at"},
		// Parsed by encoding/json, it is the year 10000 in UTC: it panicked Canonical.
		{"year 10000 in UTC", r("BAD-2", created, `"created_at":"9999-12-31T23:30:00-05:00"`), "created_at"},
		{"NUL in the buyer's name", r("BAD-3", `"Иван Петров"`, `"Иван\u0000Петров"`), "customer.name"},
		{"invalid UTF-8 in the buyer's name", r("BAD-4", `"Иван Петров"`, "\"Иван\xffПетров\""), "customer.name"},
		{"an id with an invalid byte", r("BAD-5", `"external_id":"BAD-5"`, "\"external_id\":\"BAD-\xff\""), "external_id"},
		{"another id with another invalid byte", r("BAD-5", `"external_id":"BAD-5"`, "\"external_id\":\"BAD-\xfe\""), "external_id"},
		{"case-variant duplicate key", r("BAD-6", `"external_id":"BAD-6"`, `"external_id":"BAD-6","External_ID":"BAD-7"`), "External_ID"},
		{"one-digit hour", r("BAD-8", created, `"created_at":"2026-09-16T1:00:00+05:00"`), "created_at"},
	}
}

func TestOrderImportRefusesBadInputBetweenGoodOrders(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"postgres", "sqlite"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			e := newEnvOn(t, backend, onecsim.Options{}, true)
			bad := badOrderLines()
			lines := []string{orderJSON("GOOD-1", "SKU-1", "2", "1500.00")}
			for _, b := range bad {
				lines = append(lines, b.line)
			}
			lines = append(lines, orderJSON("GOOD-2", "SKU-1", "1", "99.99"))
			out, stderr, code := e.cli(strings.Join(lines, "\n"), "order", "import", "-")
			if code != 1 {
				t.Fatalf("exit %d, want 1; out %q err %q", code, out, stderr)
			}
			for i, b := range bad {
				// "line 3 site:order:BAD-2:create: rejected: …" when the order was read
				// far enough to have a key, "line 2: rejected: …" otherwise.
				prefix, want := fmt.Sprintf("line %d", i+2), "rejected: invalid order: "+b.field+":"
				found := false
				for _, l := range strings.Split(stderr, "\n") {
					if rest, ok := strings.CutPrefix(l, prefix); ok && (strings.HasPrefix(rest, ":") || strings.HasPrefix(rest, " ")) {
						found = strings.Contains(l, want)
						break
					}
				}
				if !found {
					t.Errorf("%s: stderr has no line %d %q:\n%s", b.name, i+2, want, stderr)
				}
			}
			if want := fmt.Sprintf("%d read: 2 registered, 0 duplicate, 0 conflict, %d rejected", len(lines), len(bad)); !strings.Contains(out, want) {
				t.Errorf("summary %q missing:\n%s", want, out)
			}
			if backend == "postgres" {
				// The service creates what import registered.
				svc := e.startService()
				defer func() {
					svc.signal(syscall.SIGTERM)
					svc.wait(30 * time.Second)
				}()
			}
			eventually.True(t, "GOOD-1 and GOOD-2 in 1C", func() bool {
				return e.onec.CountExternal("site:GOOD-1") == 1 && e.onec.CountExternal("site:GOOD-2") == 1
			})
			if n := e.onec.Count(); n != 2 {
				t.Fatalf("1C holds %v, want the two good orders", externalIDs(e.onec.Orders()))
			}
			ops := mustList(t, e.store())
			if len(ops) != 2 {
				var keys []string
				for _, op := range ops {
					keys = append(keys, op.Key)
				}
				t.Fatalf("journal holds %q, want the two good orders only", keys)
			}
		})
	}
}

// serviceEnded reports whether the service process has ended.
func serviceEnded(s *service) bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// badSignedPost sends a signed delivery of body with the webhook-id given.
func badSignedPost(t *testing.T, url, id string, body []byte) (int, string) {
	t.Helper()
	st, b := post(t, url, "application/json", signed(id, body), body)
	return st, string(b)
}

func TestWebhookRefusesBadInputAndTheServiceGoesOn(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"postgres", "sqlite"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			e := newEnvOn(t, backend, onecsim.Options{}, true)
			e.environ = append(e.environ, "ORDERSYNC_WEBHOOKS__SOURCES__SITE__SECRETS="+siteSecret)
			svc := e.startService()
			url := webhooksURL(t, svc.stderr) + "/webhooks/site"

			for i, b := range badOrderLines() {
				st, ans := badSignedPost(t, url, fmt.Sprintf("msg_bad_%d", i), []byte(b.line))
				var a struct{ Fields []string }
				json.Unmarshal([]byte(ans), &a)
				if st != 400 || len(a.Fields) == 0 || a.Fields[0] != b.field {
					t.Errorf("%s: %d %s, want 400 naming %s", b.name, st, ans, b.field)
				}
			}
			// A good body under a webhook-id that is not UTF-8: 400 naming the header
			// (on PostgreSQL it was 503 for ever, SQLSTATE 22021); two such ids are
			// both refused, never taken for one.
			good := []byte(orderJSON("WH-1", "SKU-1", "1", "10"))
			for _, id := range []string{"msg_\xff", "msg_\xfe"} {
				if st, ans := badSignedPost(t, url, id, good); st != 400 || !strings.Contains(ans, `"webhook-id"`) {
					t.Errorf("webhook-id %q: %d %s, want 400 naming webhook-id", id, st, ans)
				}
			}
			if serviceEnded(svc) {
				t.Fatalf("the service died; its log:\n%s", svc.stderr.String())
			}
			if rows := e.inboxRows(); len(rows) != 0 {
				t.Fatalf("bad deliveries stored %d inbox rows", len(rows))
			}
			// Still serving: a good delivery is registered and created in 1C.
			if st, ans := badSignedPost(t, url, "msg_good", good); st != 200 {
				t.Fatalf("good delivery: %d %s", st, ans)
			}
			eventually.True(t, "site:WH-1 in 1C", func() bool { return e.onec.CountExternal("site:WH-1") == 1 })
			if rows := e.inboxRows(); len(rows) != 1 || rows[0].EventID != "msg_good" {
				t.Fatalf("inbox rows %+v, want msg_good only", rows)
			}
			if n := e.onec.Count(); n != 1 {
				t.Fatalf("1C holds %v, want WH-1 only", externalIDs(e.onec.Orders()))
			}
			svc.signal(syscall.SIGTERM)
			if code := svc.wait(30 * time.Second); code != 0 {
				t.Fatalf("SIGTERM: exit %d; log:\n%s", code, svc.stderr.String())
			}
			if log := svc.stderr.String(); strings.Contains(log, "panic") {
				t.Fatalf("the service log mentions a panic:\n%s", log)
			}
		})
	}
}

// A Kaspi order dated in the year 10000 killed `ordersync run` at every start; one
// with a NUL in the buyer's name failed every poll on PostgreSQL and kept the
// cursor where it was. Now each is recorded failed naming its field, the good
// orders around them reach 1C, and the cursor moves, on both stores.
func TestKaspiBadOrdersDoNotStopRunOrItsCursor(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"postgres", "sqlite"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			e := newEnvOn(t, backend, onecsim.Options{}, true)
			k := kaspisim.New(kaspisim.Options{Token: "kaspi-token"})
			if err := k.Start("127.0.0.1:0"); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(k.Close)
			e.environ = append(e.environ,
				"ORDERSYNC_CONNECTORS__KASPI__ENABLED=true",
				"ORDERSYNC_CONNECTORS__KASPI__BASE_URL="+k.URL(),
				"ORDERSYNC_CONNECTORS__KASPI__TOKEN=kaspi-token",
				"ORDERSYNC_CONNECTORS__KASPI__WAREHOUSE=WH1",
				"ORDERSYNC_CONNECTORS__KASPI__POLL_INTERVAL=200ms",
				"ORDERSYNC_CONNECTORS__KASPI__RATE_PER_SECOND=100",
				"ORDERSYNC_RELAY__POLL_INTERVAL=20ms",
			)
			now := time.Now()
			order := func(code string, at time.Time, first string) kaspisim.Order {
				return kaspisim.Order{Code: code, CreationDate: at,
					Customer: kaspisim.Customer{FirstName: first, LastName: "Петров", CellPhone: "7011234567"},
					Entries: []kaspisim.Entry{{OfferCode: "SKU-1", Name: "Чайник", Quantity: decimal.NewFromInt(1),
						BasePrice: decimal.RequireFromString("1500")}}}
			}
			for _, o := range []kaspisim.Order{
				order("880001", now.Add(-3*time.Hour), "Иван"),
				order("880002", now.Add(-2*time.Hour), "Ив\x00ан"),
				order("880004", now.Add(-time.Hour), "Иван"),
			} {
				if err := k.AddOrder(o); err != nil {
					t.Fatal(err)
				}
			}
			// Year 10000 (epoch milliseconds). Its id is that of 880001, so that its
			// entries can be read (GET /orders/{id}/entries): before the fix it was
			// mapped whole, and its canonical encoding panicked the process.
			first, _ := k.Order("880001")
			k.AddRawOrder(kaspisim.StateNew, now.Add(-90*time.Minute), `{"type":"orders","id":"`+first.ID+`","attributes":`+
				`{"code":"880003","state":"NEW","status":"APPROVED_BY_BANK","creationDate":253402300800000,"totalPrice":1500.0}}`)

			svc := e.startService()
			eventually.True(t, "kaspi orders 880001 and 880004 in 1C", func() bool {
				return e.onec.CountExternal("kaspi:880001") == 1 && e.onec.CountExternal("kaspi:880004") == 1
			})
			store := e.store()
			for code, field := range map[string]string{"880002": "attributes.customer.firstName", "880003": "attributes.creationDate"} {
				op, err := store.Get(context.Background(), "kaspi:order:"+code+":create")
				if err != nil || op.Status != journal.StatusFailed || !strings.Contains(op.LastError, field) {
					t.Errorf("%s: %+v, %v; want failed naming %s", code, op, err, field)
				}
			}
			// The cursor moved: the listing that met the bad orders completed.
			type cursor struct {
				Connector string
				Enabled   bool
				Position  time.Time `json:"position"`
				LastError string    `json:"last_error"`
			}
			var kaspi cursor
			eventually.True(t, "kaspi's cursor in connectors status", func() bool {
				out, _, _ := e.cli("", "connectors", "status", "--format", "json")
				var cursors []cursor
				json.Unmarshal([]byte(out), &cursors)
				for _, c := range cursors { // every connector, enabled as configured: kaspi alone is
					if c.Connector == "kaspi" && c.Enabled {
						kaspi = c
					}
				}
				return !kaspi.Position.IsZero()
			})
			if kaspi.LastError != "" {
				t.Fatalf("kaspi cursor %+v, want no error", kaspi)
			}
			if serviceEnded(svc) {
				t.Fatalf("the service died; its log:\n%s", svc.stderr.String())
			}
			if n := e.onec.Count(); n != 2 {
				t.Fatalf("1C holds %v, want the two good orders", externalIDs(e.onec.Orders()))
			}
			svc.signal(syscall.SIGTERM)
			if code := svc.wait(30 * time.Second); code != 0 {
				t.Fatalf("SIGTERM: exit %d; log:\n%s", code, svc.stderr.String())
			}
		})
	}
}
