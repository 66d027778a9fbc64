package httpservice_test

// Contract tests: the client against the simulated 1C base of internal/sim/onecsim.
// They assert what the base holds and received, not only what the client returns.

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/ordersync/ordersync/internal/onec"
	"github.com/ordersync/ordersync/internal/onec/httpservice"
	"github.com/ordersync/ordersync/internal/sim"
	"github.com/ordersync/ordersync/internal/sim/onecsim"
)

const (
	simUser     = "Администратор"
	simPassword = "пароль 1С"
)

type fixture struct {
	sim    *onecsim.OneC
	client *httpservice.Client
	url    string
}

func setup(t *testing.T, opts onecsim.Options, mod ...func(*httpservice.Config)) fixture {
	t.Helper()
	if opts.Username == "" {
		opts.Username, opts.Password = simUser, simPassword
	}
	s := onecsim.New(opts)
	s.SetStock("WH1") // a warehouse 1C knows
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	t.Cleanup(s.Close)
	cfg := httpservice.Config{
		BaseURL:      ts.URL + s.Prefix(),
		Username:     simUser,
		Password:     simPassword,
		Timeout:      5 * time.Second,
		GetRetries:   2,
		RetryBackoff: time.Millisecond,
	}
	for _, m := range mod {
		m(&cfg)
	}
	c, err := httpservice.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return fixture{sim: s, client: c, url: cfg.BaseURL}
}

func dec(s string) decimal.Decimal { return decimal.RequireFromString(s) }

func order(externalID string) onec.CreateOrder {
	return onec.CreateOrder{
		ExternalID: externalID, Source: "kaspi", Number: "512344101", Date: "2026-09-16T10:00:00",
		Customer:  onec.Customer{Name: "Иван Петров", Phone: "+77011234567", Email: "ivan@example.kz"},
		Warehouse: "WH1", Currency: "KZT",
		Lines: []onec.Line{
			{SKU: "SKU-1", Name: "Чайник", Quantity: dec("1"), Price: dec("0.1"), Amount: dec("0.1")},
			{SKU: "SKU-2", Name: "Кружка", Quantity: dec("1"), Price: dec("0.2"), Amount: dec("0.2")},
			{SKU: "SKU-3", Name: "Сервиз", Quantity: dec("1"), Price: dec("12345678901234567890.123456789"), Amount: dec("12345678901234567890.123456789")},
		},
		Total:   dec("12345678901234567890.423456789"),
		Comment: "контрактный тест",
	}
}

func class(t *testing.T, err error) onec.Class {
	t.Helper()
	var e *onec.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not a *onec.Error", err, err)
	}
	return e.Class
}

func TestContractRoundTrip(t *testing.T) {
	t.Parallel()
	for _, bom := range []bool{false, true} {
		name := "plain"
		if bom {
			name = "answers with a BOM"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := setup(t, onecsim.Options{BOM: bom})
			ctx := context.Background()

			info, err := f.client.Ping(ctx)
			if err != nil || info != (onec.Info{Service: "ordersync", Version: "1.0"}) {
				t.Fatalf("ping = %+v, %v", info, err)
			}
			found, err := f.client.FindOrders(ctx, "kaspi:1")
			if err != nil || found == nil || len(found) != 0 {
				t.Fatalf("find before create = %#v, %v; want an empty slice", found, err)
			}
			created, err := f.client.CreateOrder(ctx, order("kaspi:1"))
			if err != nil {
				t.Fatal(err)
			}
			if created.Ref == "" || created.Number == "" || created.Date == "" || created.Existing {
				t.Fatalf("created = %+v", created)
			}
			held := f.sim.Orders()
			if len(held) != 1 {
				t.Fatalf("the base holds %d orders, want 1", len(held))
			}
			// The base parsed every number exactly: 0.1 + 0.2 + a 30-digit price.
			req := held[0].Request
			if got, want := req.Total.String(), "12345678901234567890.423456789"; got != want {
				t.Fatalf("the base holds total %s, want %s", got, want)
			}
			if got, want := req.Customer.Name, "Иван Петров"; got != want {
				t.Fatalf("the base holds customer %q, want %q", got, want)
			}
			found, err = f.client.FindOrders(ctx, "kaspi:1")
			if err != nil {
				t.Fatal(err)
			}
			want := onec.Order{Ref: created.Ref, Number: created.Number, Date: created.Date, ExternalID: "kaspi:1", Posted: true, Currency: "KZT"}
			if len(found) != 1 {
				t.Fatalf("found %+v, want [%+v]", found, want)
			}
			// The find may carry the listing's total (the reference module sends it):
			// read exactly.
			if tot := found[0].Total; tot != nil && tot.String() != "12345678901234567890.423456789" {
				t.Fatalf("found total %s, want 12345678901234567890.423456789", tot)
			}
			got := found[0]
			got.Total = nil
			if got != want {
				t.Fatalf("found %+v, want [%+v]", found, want)
			}

			cancelled, err := f.client.CancelOrder(ctx, "kaspi:1", "покупатель отказался")
			if err != nil || cancelled != (onec.Cancelled{Ref: created.Ref, Status: "cancelled"}) {
				t.Fatalf("cancel = %+v, %v", cancelled, err)
			}
			if o := f.sim.Orders()[0]; !o.Cancelled || o.CancelReason != "покупатель отказался" {
				t.Fatalf("the base did not cancel: %+v", o)
			}
			_, err = f.client.CancelOrder(ctx, "kaspi:404", "x")
			var e *onec.Error
			if !errors.As(err, &e) || e.Class != onec.Permanent || e.Status != 404 {
				t.Fatalf("cancel of nothing = %v, want Permanent 404", err)
			}

			f.sim.SetStock("WH1", onecsim.StockItem{SKU: "SKU-1", Quantity: dec("7.25"), Price: dec("12345678901234567890.123456789")})
			st, err := f.client.Stock(ctx, "WH1")
			if err != nil {
				t.Fatal(err)
			}
			if st.Warehouse != "WH1" || st.TakenAt == "" || len(st.Items) != 1 ||
				st.Items[0].Quantity.String() != "7.25" || st.Items[0].Price.String() != "12345678901234567890.123456789" {
				t.Fatalf("stock = %+v", st)
			}
			if got := f.sim.Count(); got != 1 {
				t.Fatalf("the base holds %d orders, want 1", got)
			}
		})
	}
}

func TestContractConflictIsFound(t *testing.T) {
	t.Parallel()
	f := setup(t, onecsim.Options{Dedupe: true})
	ctx := context.Background()
	first, err := f.client.CreateOrder(ctx, order("kaspi:1"))
	if err != nil {
		t.Fatal(err)
	}
	again, err := f.client.CreateOrder(ctx, order("kaspi:1"))
	if err != nil {
		t.Fatalf("409 came back as an error: %v", err)
	}
	if want := (onec.Created{Ref: first.Ref, Number: first.Number, Date: first.Date, Existing: true, ExternalID: "kaspi:1"}); again != want {
		t.Fatalf("second create = %+v, want %+v", again, want)
	}
	if got := f.sim.CountExternal("kaspi:1"); got != 1 {
		t.Fatalf("the base holds %d copies, want 1", got)
	}
}

func TestContractDuplicatesAreReported(t *testing.T) {
	t.Parallel()
	f := setup(t, onecsim.Options{}) // a naive base
	ctx := context.Background()
	for range 2 {
		if _, err := f.client.CreateOrder(ctx, order("kaspi:1")); err != nil {
			t.Fatal(err)
		}
	}
	found, err := f.client.FindOrders(ctx, "kaspi:1")
	if err != nil {
		t.Fatal(err)
	}
	held := f.sim.Orders()
	if len(found) != 2 || found[0].Ref != held[0].Ref || found[1].Ref != held[1].Ref {
		t.Fatalf("found %+v, want both copies in creation order", found)
	}
}

func TestContractFaults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		fault     sim.Fault
		op        string
		class     onec.Class // 0: success
		requests  int        // what the base received for op
		wantCount int        // orders the base holds afterwards
		times     int        // how many requests the fault hits
	}{
		{"drop after create is unknown, and the order exists", sim.Fault{Op: "create", Kind: onecsim.DropAfterCreate}, "create", onec.Unknown, 1, 1, 1},
		{"drop before create is unknown, and nothing exists", sim.Fault{Op: "create", Kind: onecsim.DropBeforeCreate}, "create", onec.Unknown, 1, 0, 1},
		{"lock conflict on create is transient", sim.Fault{Op: "create", Kind: onecsim.LockConflict500}, "create", onec.Transient, 1, 0, 1},
		{"lock conflict on cancel is transient", sim.Fault{Op: "cancel", Kind: onecsim.LockConflict500}, "cancel", onec.Transient, 1, 0, 1},
		{"503 on create is unknown and sent once", sim.Fault{Op: "create", Status: 503}, "create", onec.Unknown, 1, 0, 1},
		{"502 on create is unknown", sim.Fault{Op: "create", Status: 502}, "create", onec.Unknown, 1, 0, 1},
		{"406 on create is transient", sim.Fault{Op: "create", Status: 406}, "create", onec.Transient, 1, 0, 1},
		{"business exception on create is unknown", sim.Fault{Op: "create", Kind: onecsim.BusinessError500}, "create", onec.Unknown, 1, 0, 1},
		{"422 on create is permanent", sim.Fault{Op: "create", Status: 422}, "create", onec.Permanent, 1, 0, 1},
		{"HTML login page on create is unknown", sim.Fault{Op: "create", Kind: onecsim.HTMLLogin200}, "create", onec.Unknown, 1, 0, 1},
		{"HTML login page on find is auth", sim.Fault{Op: "find", Kind: onecsim.HTMLLogin200}, "find", onec.Auth, 1, 0, 1},
		{"lock conflicts on find are retried through", sim.Fault{Op: "find", Kind: onecsim.LockConflict500}, "find", 0, 3, 0, 2},
		{"406 on find for ever gives up after the retries", sim.Fault{Op: "find", Status: 406}, "find", onec.Transient, 3, 0, sim.Forever},
		{"a dropped find is retried", sim.Fault{Op: "find", Kind: onecsim.DropBeforeCreate}, "find", 0, 2, 0, 1},
		{"502 on stock is retried", sim.Fault{Op: "stock", Status: 502}, "stock", 0, 2, 0, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t, onecsim.Options{})
			f.sim.Faults.Add(tt.times, tt.fault)
			ctx := context.Background()
			var err error
			switch tt.op {
			case "create":
				_, err = f.client.CreateOrder(ctx, order("kaspi:1"))
			case "find":
				_, err = f.client.FindOrders(ctx, "kaspi:1")
			case "stock":
				_, err = f.client.Stock(ctx, "WH1")
			case "cancel":
				_, err = f.client.CancelOrder(ctx, "kaspi:1", "x")
			}
			if tt.class == 0 {
				if err != nil {
					t.Fatalf("err = %v, want success", err)
				}
			} else if got := class(t, err); got != tt.class {
				t.Fatalf("class = %v, want %v (%v)", got, tt.class, err)
			}
			if got, want := f.sim.Stats().Requests[tt.op], tt.requests; got != want {
				t.Fatalf("the base received %d %s requests, want %d", got, tt.op, want)
			}
			if got, want := f.sim.Count(), tt.wantCount; got != want {
				t.Fatalf("the base holds %d orders, want %d", got, want)
			}
			if tt.wantCount > 0 {
				// What the next attempt does first: the order is found, not created again.
				found, err := f.client.FindOrders(ctx, "kaspi:1")
				if err != nil || len(found) != 1 {
					t.Fatalf("find after an unknown outcome = %+v, %v", found, err)
				}
			}
		})
	}
}

func TestContractStalledCreate(t *testing.T) {
	t.Parallel()
	f := setup(t, onecsim.Options{}, func(c *httpservice.Config) { c.Timeout = 100 * time.Millisecond })
	f.sim.Faults.Add(1, sim.Fault{Op: "create", Kind: onecsim.Stall})
	_, err := f.client.CreateOrder(context.Background(), order("kaspi:1"))
	if got := class(t, err); got != onec.Unknown {
		t.Fatalf("class = %v, want Unknown (%v)", got, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := f.sim.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := f.sim.Count(), 1; got != want {
		t.Fatalf("the base holds %d orders, want %d: the stalled create went through", got, want)
	}
	if got, want := f.sim.Stats().Requests["create"], 1; got != want {
		t.Fatalf("the base received %d creates, want %d", got, want)
	}
}

func TestContractRejectedOrder(t *testing.T) {
	t.Parallel()
	f := setup(t, onecsim.Options{KnownSKUs: []string{"SKU-1", "SKU-2"}})
	_, err := f.client.CreateOrder(context.Background(), order("kaspi:1"))
	var e *onec.Error
	if !errors.As(err, &e) || e.Class != onec.Permanent || e.Status != 422 || e.Code != "unknown_sku" || e.Field != "lines[2].sku" || e.Message == "" {
		t.Fatalf("err = %#v, want Permanent 422 unknown_sku at lines[2].sku with 1C's message", err)
	}
	f.sim.SetKnownSKUs(nil)
	bad := order("kaspi:1")
	bad.Total = dec("0.30000000000000004")
	_, err = f.client.CreateOrder(context.Background(), bad)
	if !errors.As(err, &e) || e.Class != onec.Permanent || e.Field != "total" {
		t.Fatalf("err = %v, want Permanent at total", err)
	}
	if got := f.sim.Count(); got != 0 {
		t.Fatalf("the base holds %d orders, want 0", got)
	}
}

func TestContractAuth(t *testing.T) {
	t.Parallel()
	for _, mode := range []onecsim.AuthFailureMode{onecsim.AuthHTML200, onecsim.AuthStatus401} {
		t.Run(map[onecsim.AuthFailureMode]string{onecsim.AuthHTML200: "HTML 200", onecsim.AuthStatus401: "401"}[mode], func(t *testing.T) {
			t.Parallel()
			f := setup(t, onecsim.Options{AuthFailure: mode}, func(c *httpservice.Config) { c.Password = "wrong password" })
			for name, call := range map[string]func() error{
				"ping":   func() error { _, err := f.client.Ping(context.Background()); return err },
				"find":   func() error { _, err := f.client.FindOrders(context.Background(), "kaspi:1"); return err },
				"create": func() error { _, err := f.client.CreateOrder(context.Background(), order("kaspi:1")); return err },
			} {
				err := call()
				// A POST answered 200 with a page may have been carried out as far as
				// the client can tell: an unknown outcome, which the next find settles.
				want := onec.Auth
				if name == "create" && mode == onecsim.AuthHTML200 {
					want = onec.Unknown
				}
				var e *onec.Error
				if !errors.As(err, &e) || e.Class != want {
					t.Fatalf("%s: err = %v, want %v", name, err, want)
				}
				for _, want := range []string{`onec.username "` + simUser + `"`, "onec.base_url " + f.url} {
					if !strings.Contains(err.Error(), want) {
						t.Fatalf("%s: %q does not name %q", name, err, want)
					}
				}
				if strings.Contains(err.Error(), "wrong password") {
					t.Fatalf("%s: the error shows the password: %v", name, err)
				}
			}
			st := f.sim.Stats()
			if st.AuthFailures != 3 || f.sim.Count() != 0 {
				t.Fatalf("auth failures %d, orders %d; want 3 and 0 (auth errors are not retried)", st.AuthFailures, f.sim.Count())
			}
		})
	}
}

func TestContractSessionReuse(t *testing.T) {
	t.Parallel()
	const maxConc = 3
	f := setup(t, onecsim.Options{Latency: 2 * time.Millisecond}, func(c *httpservice.Config) {
		c.SessionReuse = true
		c.MaxConcurrency = maxConc
	})
	load := func(n int) {
		t.Helper()
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for i := range n {
			wg.Go(func() {
				var err error
				if i%4 == 0 {
					_, err = f.client.Stock(context.Background(), "WH1")
				} else {
					_, err = f.client.FindOrders(context.Background(), "kaspi:1")
				}
				errs <- err
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	load(60)
	st := f.sim.Stats()
	if st.SessionsStarted < 1 || st.SessionsStarted > maxConc {
		t.Fatalf("sessions started = %d, want 1..%d", st.SessionsStarted, maxConc)
	}
	if st.SessionConflicts != 0 {
		t.Fatalf("session conflicts = %d: a session served two requests at once", st.SessionConflicts)
	}
	before := st.SessionsStarted

	// 1C forgets every session: GETs start new ones and succeed.
	f.sim.ExpireSessions()
	load(30)
	st = f.sim.Stats()
	if st.SessionsRejected < 1 || st.SessionsStarted <= before || st.SessionsStarted > before+maxConc {
		t.Fatalf("after expiry: rejected %d, started %d (before %d); want new sessions, at most %d more",
			st.SessionsRejected, st.SessionsStarted, before, maxConc)
	}

	// A create on an expired session is refused before 1C runs it: Transient, and
	// never resent inside the call. Trying again, as the engine does, gets through.
	f.sim.ExpireSessions()
	transient := 0
	for {
		_, err := f.client.CreateOrder(context.Background(), order("kaspi:1"))
		if err == nil {
			break
		}
		if got := class(t, err); got != onec.Transient {
			t.Fatalf("class = %v, want Transient (%v)", got, err)
		}
		transient++
		if transient > maxConc {
			t.Fatalf("%d creates refused: the client keeps using expired sessions", transient)
		}
	}
	if got := f.sim.Count(); got != 1 {
		t.Fatalf("the base holds %d orders, want 1", got)
	}
	if got, want := f.sim.Stats().Requests["create"], transient+1; got != want {
		t.Fatalf("the base received %d creates, want %d: one per call", got, want)
	}

	// Close ends the sessions the client keeps.
	if err := f.client.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := f.sim.Sessions(); got != 0 {
		t.Fatalf("%d sessions left after Close, want 0", got)
	}
}
