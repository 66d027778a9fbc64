package httpservice_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/ordersync/ordersync/internal/onec"
	"github.com/ordersync/ordersync/internal/onec/httpservice"
	"github.com/ordersync/ordersync/internal/sim/onecsim"
)

// ListOrders against the simulated base: the source's orders dated in the period,
// earliest first, totals exact, cancelled and deleted ones with their flags; other
// sources and other dates left out.
func TestContractListOrders(t *testing.T) {
	t.Parallel()
	f := setup(t, onecsim.Options{})
	ctx := context.Background()

	created, err := f.client.CreateOrder(ctx, order("kaspi:1"))
	if err != nil {
		t.Fatal(err)
	}
	if !f.sim.SetDate(created.Ref, "2026-09-16T10:00:00") {
		t.Fatal("SetDate found no order")
	}
	if _, err := f.client.CancelOrder(ctx, "kaspi:1", "test"); err != nil {
		t.Fatal(err)
	}
	hand := f.sim.PlantOrder(onecsim.PlantedOrder{ExternalID: "kaspi:hand", Number: "ЗК-РУЧН", Date: "2026-09-15T23:59:59",
		Total: dec("0.10"), Currency: "KZT", Posted: true, Deleted: true})
	f.sim.PlantOrder(onecsim.PlantedOrder{ExternalID: "kaspi:late", Date: "2026-09-17T00:00:00", Total: dec("1")})
	f.sim.PlantOrder(onecsim.PlantedOrder{ExternalID: "ozon:1", Date: "2026-09-16T00:00:00", Total: dec("1")})
	f.sim.PlantOrder(onecsim.PlantedOrder{ExternalID: "kaspiX:1", Date: "2026-09-16T00:00:00", Total: dec("1")})

	got, err := f.client.ListOrders(ctx, onec.ListQuery{Source: "kaspi", DateFrom: "2026-09-15T00:00:00", DateTo: "2026-09-16T23:59:59"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("listed %+v, want kaspi:hand and kaspi:1", got)
	}
	if o := got[0]; o.Ref != hand.Ref || o.Number != "ЗК-РУЧН" || !o.Deleted || o.Total == nil || o.Total.String() != "0.1" || o.Currency != "KZT" {
		t.Errorf("first %+v, want the planted order, deleted, total 0.10 KZT", o)
	}
	if o := got[1]; o.Ref != created.Ref || !o.Cancelled || o.Total == nil || o.Total.String() != "12345678901234567890.423456789" {
		t.Errorf("second %+v, want the created order, cancelled, its exact total", o)
	}

	// Edited and deleted in 1C.
	f.sim.SetTotal(created.Ref, dec("5.55"))
	f.sim.DeleteOrder(hand.Ref)
	got, err = f.client.ListOrders(ctx, onec.ListQuery{Source: "kaspi", DateFrom: "2026-09-15T00:00:00", DateTo: "2026-09-16T23:59:59"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Total.String() != "5.55" {
		t.Fatalf("after the edits: %+v, want only kaspi:1 at 5.55", got)
	}

	none, err := f.client.ListOrders(ctx, onec.ListQuery{Source: "wb", DateFrom: "2026-09-15T00:00:00", DateTo: "2026-09-16T23:59:59"})
	if err != nil || none == nil || len(none) != 0 {
		t.Fatalf("an empty listing = %#v, %v; want an empty slice", none, err)
	}
	if n := f.sim.Stats().Requests["find"]; n != 3 {
		t.Errorf("the base counted %d GET /orders, want 3", n)
	}
}

// A query 1C would refuse is refused before it is sent.
func TestListOrdersBadQuery(t *testing.T) {
	t.Parallel()
	f := setup(t, onecsim.Options{})
	for _, q := range []onec.ListQuery{
		{DateFrom: "2026-09-15T00:00:00", DateTo: "2026-09-16T00:00:00"},
		{Source: "kaspi", DateFrom: "2026-09-15", DateTo: "2026-09-16T00:00:00"},
		{Source: "kaspi", DateFrom: "2026-09-15T00:00:00", DateTo: "2026-09-16T00:00:00+05:00"},
		{Source: "kaspi", DateFrom: "2026-09-16T00:00:00", DateTo: "2026-09-15T00:00:00"},
	} {
		if _, err := f.client.ListOrders(context.Background(), q); err == nil || class(t, err) != onec.Permanent {
			t.Errorf("%+v: %v, want a permanent error", q, err)
		}
	}
	if n := f.sim.Stats().Requests["find"]; n != 0 {
		t.Errorf("%d requests reached 1C, want none", n)
	}
}

// The answers of real bases that ListOrders must classify.
func TestListOrdersErrors(t *testing.T) {
	t.Parallel()
	q := onec.ListQuery{Source: "kaspi", DateFrom: "2026-09-15T00:00:00", DateTo: "2026-09-16T23:59:59"}
	for _, c := range []struct {
		name   string
		status int
		ctype  string
		body   string
		class  onec.Class
		says   string
		tries  int32
	}{
		{"a module older than the listing", 400, "application/json",
			`{"error":{"code":"missing_parameter","message":"query parameter external_id is required","field":"external_id"}}`,
			onec.Permanent, "the 1C module is older", 1},
		{"a total sent as a string", 200, "application/json",
			`{"orders":[{"ref":"r","number":"1","date":"2026-09-15T10:00:00","external_id":"kaspi:1","posted":true,"deleted":false,"total":"100.00"}]}`,
			onec.Permanent, `orders[0] (external id "kaspi:1"): total "100.00" is not a number`, 1},
		{"not the contract's shape", 200, "application/json", `{"orders":{}}`, onec.Permanent, "does not follow contract v1", 1},
		{"a login page with 200", 200, "text/html", "<html>Вход</html>", onec.Auth, "onec.username", 1},
		{"no free session, every time", 406, "text/plain", "нет свободной лицензии", onec.Transient, "", 3},
		{"the publication is missing", 404, "text/html", "<html>Not Found</html>", onec.Configuration, "onec.base_url", 1},
		{"another 400", 400, "application/json", `{"error":{"code":"invalid_request","message":"date_from is not a date","field":"date_from"}}`,
			onec.Permanent, "date_from is not a date", 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var tries atomic.Int32
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				tries.Add(1)
				if r.Method != http.MethodGet || r.URL.Path != "/hs/ordersync/v1/orders" || r.URL.Query().Get("source") != "kaspi" ||
					r.URL.Query().Get("date_from") != q.DateFrom || r.URL.Query().Get("date_to") != q.DateTo || r.URL.Query().Has("external_id") {
					http.Error(w, "unexpected request "+r.URL.String(), http.StatusTeapot)
					return
				}
				w.Header().Set("Content-Type", c.ctype)
				w.WriteHeader(c.status)
				io.WriteString(w, c.body)
			}))
			t.Cleanup(ts.Close)
			cl, err := httpservice.New(httpservice.Config{BaseURL: ts.URL + "/hs/ordersync/v1", Username: "u", Password: "p",
				Timeout: 5 * time.Second, GetRetries: 2, RetryBackoff: time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			_, err = cl.ListOrders(context.Background(), q)
			if err == nil {
				t.Fatal("ListOrders succeeded")
			}
			var e *onec.Error
			if !errors.As(err, &e) || e.Class != c.class || e.Op != "list" {
				t.Fatalf("error %v (%#v), want class %s of op list", err, e, c.class)
			}
			if !strings.Contains(err.Error(), c.says) {
				t.Errorf("error %q does not say %q", err, c.says)
			}
			if got := tries.Load(); got != c.tries {
				t.Errorf("%d requests, want %d", got, c.tries)
			}
		})
	}
}

// The contract's document describes the listing as the simulator and the client
// speak it: GET /orders takes external_id or source, date_from and date_to, and
// Order1C has total, currency and cancelled; the simulator answers every property
// the document requires.
func TestOpenAPIListsOrders(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../../../deploy/1c/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths map[string]map[string]struct {
			Parameters []struct {
				Name string `yaml:"name"`
				In   string `yaml:"in"`
			} `yaml:"parameters"`
			Responses map[string]any `yaml:"responses"`
		} `yaml:"paths"`
		Components struct {
			Schemas map[string]struct {
				Required   []string       `yaml:"required"`
				Properties map[string]any `yaml:"properties"`
			} `yaml:"schemas"`
		} `yaml:"components"`
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	get := doc.Paths["/orders"]["get"]
	var query []string
	for _, p := range get.Parameters {
		if p.In == "query" {
			query = append(query, p.Name)
		}
	}
	for _, name := range []string{"external_id", "source", "date_from", "date_to"} {
		if !slices.Contains(query, name) {
			t.Errorf("GET /orders does not declare the query parameter %s (has %v)", name, query)
		}
	}
	if _, ok := get.Responses["400"]; !ok {
		t.Error("GET /orders declares no 400 (neither query form given)")
	}
	order1C := doc.Components.Schemas["Order1C"]
	for _, p := range []string{"total", "currency", "cancelled"} {
		if _, ok := order1C.Properties[p]; !ok {
			t.Errorf("Order1C has no property %s", p)
		}
	}
	listed, ok := doc.Components.Schemas["Order1CListed"]
	if !ok {
		t.Fatal("no schema Order1CListed: the listing's orders, total, currency and cancelled required")
	}

	// The simulator's listing carries every property the document requires.
	f := setup(t, onecsim.Options{})
	f.sim.PlantOrder(onecsim.PlantedOrder{ExternalID: "kaspi:1", Date: "2026-09-15T10:00:00", Total: dec("1"), Currency: "KZT"})
	req, _ := http.NewRequest(http.MethodGet, f.url+"/orders?source=kaspi&date_from=2026-09-15T00:00:00&date_to=2026-09-15T23:59:59", nil)
	req.SetBasicAuth(simUser, simPassword)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Orders []map[string]json.RawMessage `json:"orders"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || len(body.Orders) != 1 {
		t.Fatalf("listing: %v, %d orders", err, len(body.Orders))
	}
	for _, p := range slices.Concat(order1C.Required, listed.Required) {
		if _, ok := body.Orders[0][p]; !ok {
			t.Errorf("the simulator's listed order has no %q", p)
		}
	}
	// Neither query form: 400.
	req, _ = http.NewRequest(http.MethodGet, f.url+"/orders", nil)
	req.SetBasicAuth(simUser, simPassword)
	resp2, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp2.Body.Close()
	if resp2.StatusCode != http.StatusBadRequest {
		t.Errorf("GET /orders without a query: %d, want 400", resp2.StatusCode)
	}
}
