package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ordersync/ordersync/internal/eventually"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/reconcile"
	"github.com/ordersync/ordersync/internal/sim/kaspisim"
	"github.com/ordersync/ordersync/internal/sim/onecsim"
)

// TestReconcileKaspi runs the real program end to end: `ordersync run` brings
// Kaspi's orders into the simulated 1C, then the world is spoiled with one order of
// every category, and `ordersync reconcile --format json` finds each in its
// category, nothing else, and exits 1.
func TestReconcileKaspi(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"postgres", "sqlite"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			// SKU-X is unknown to 1C: its order fails.
			e := newEnvOn(t, backend, onecsim.Options{KnownSKUs: []string{"SKU-1"}}, true)
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
			)
			created := time.Now().Add(-time.Hour)
			add := func(code, sku string) {
				t.Helper()
				if err := k.AddOrder(kaspisim.Order{Code: code, CreationDate: created,
					Customer: kaspisim.Customer{FirstName: "Иван", LastName: "Петров", CellPhone: "7011234567"},
					Entries:  []kaspisim.Entry{{OfferCode: sku, Name: "Чайник", Quantity: dec("2"), BasePrice: dec("1500.10")}}}); err != nil {
					t.Fatal(err)
				}
			}
			const (
				okCode, failCode, goneCode, dupCode, amountCode, cancelCode, missingCode = "600000001", "600000002",
					"600000003", "600000004", "600000005", "600000006", "600000007"
			)
			for _, c := range []string{okCode, goneCode, dupCode, amountCode, cancelCode} {
				add(c, "SKU-1")
			}
			add(failCode, "SKU-X")

			stop := e.runInProcess()
			store := e.store()
			eventually.True(t, "five orders in 1C and the bad one failed", func() bool {
				op, err := store.Get(context.Background(), "kaspi:order:"+failCode+":create")
				return e.onec.Count() == 5 && err == nil && op.Status == journal.StatusFailed
			})
			if code := stop(); code != 0 {
				t.Fatalf("run exited %d", code)
			}

			ref := func(code string) string {
				for _, o := range e.onec.Orders() {
					if o.ExternalID == "kaspi:"+code {
						return o.Ref
					}
				}
				t.Fatalf("1C holds no order for %s", code)
				return ""
			}
			e.onec.DeleteOrder(ref(goneCode))
			e.onec.PlantOrder(onecsim.PlantedOrder{ExternalID: "kaspi:" + dupCode, Total: dec("3000.20"), Currency: "KZT", Posted: true})
			e.onec.SetTotal(ref(amountCode), dec("3000.00"))
			if err := k.SetStatus(cancelCode, "CANCELLED"); err != nil {
				t.Fatal(err)
			}
			add(missingCode, "SKU-1") // after run: ordersync never saw it
			e.onec.PlantOrder(onecsim.PlantedOrder{ExternalID: "kaspi:HAND-1", Total: dec("10"), Currency: "KZT", Posted: true})

			// The orders were created an hour ago in onec.timezone (Asia/Almaty, the
			// default of ui.timezone): yesterday and today cover them at any hour.
			loc, _ := time.LoadLocation("Asia/Almaty")
			from := created.In(loc).Format(time.DateOnly)
			to := time.Now().In(loc).Format(time.DateOnly)
			stdout, stderr, code := e.cli("", "reconcile", "--source", "kaspi", "--from", from, "--to", to, "--format", "json")
			if code != 1 {
				t.Fatalf("reconcile exited %d, want 1; stderr: %s", code, stderr)
			}
			if !strings.Contains(stderr, "not ok") {
				t.Errorf("stderr %q does not say that orders are not ok", stderr)
			}
			var rep reconcile.Report
			if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
				t.Fatalf("stdout is not the report: %v\n%s", err, stdout)
			}
			want := map[string]reconcile.Category{
				okCode: reconcile.OK, failCode: reconcile.NotDone, goneCode: reconcile.MissingIn1C,
				dupCode: reconcile.DuplicateIn1C, amountCode: reconcile.AmountMismatch,
				cancelCode: reconcile.CancelledButLive, missingCode: reconcile.MissingInJournal,
				"HAND-1": reconcile.UnknownToJournal,
			}
			got := map[string]reconcile.Category{}
			for _, it := range rep.Items {
				got[it.ExternalID] = it.Category
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("categories %v, want %v\n%s", got, want, stdout)
			}
			if rep.Source != "kaspi" || rep.From != from || rep.To != to || len(rep.Totals) != len(reconcile.Categories) {
				t.Errorf("report header %s %s–%s totals %v", rep.Source, rep.From, rep.To, rep.Totals)
			}
			// The public JSON shape: the keys as documented.
			var raw struct {
				Totals map[string]int               `json:"totals"`
				Items  []map[string]json.RawMessage `json:"items"`
			}
			if err := json.Unmarshal([]byte(stdout), &raw); err != nil {
				t.Fatal(err)
			}
			for _, key := range []string{"category", "external_id", "marketplace_number", "key", "status", "marketplace_total", "onec", "note"} {
				if _, ok := raw.Items[0][key]; !ok {
					t.Errorf("an item has no %q: %v", key, raw.Items[0])
				}
			}

			// The other formats: the table names the problems, csv and xlsx hold them.
			table, _, code := e.cli("", "reconcile", "--source", "kaspi", "--from", from, "--to", to)
			if code != 1 || !strings.Contains(table, "amount_mismatch") || !strings.Contains(table, amountCode) || strings.Contains(table, okCode+" ") {
				t.Errorf("table (exit %d):\n%s", code, table)
			}
			csv, _, code := e.cli("", "reconcile", "--source", "kaspi", "--from", from, "--to", to, "--format", "csv")
			if code != 1 || strings.Count(csv, "\n") != len(want)+1 || !strings.HasPrefix(csv, "category,external_id") {
				t.Errorf("csv (exit %d):\n%s", code, csv)
			}
			xlsx, _, code := e.cli("", "reconcile", "--source", "kaspi", "--from", from, "--to", to, "--format", "xlsx")
			if code != 1 || !strings.HasPrefix(xlsx, "PK") {
				t.Errorf("xlsx (exit %d) is not a workbook: %.20q", code, xlsx)
			}
		})
	}
}

// Usage errors exit 2 with one line naming the flag.
func TestReconcileUsage(t *testing.T) {
	t.Parallel()
	e := newEnvOn(t, "sqlite", onecsim.Options{}, true)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"reconcile", "--from", "2026-09-01", "--to", "2026-09-30"}, "--source"},
		{[]string{"reconcile", "--source", "amazon", "--from", "2026-09-01", "--to", "2026-09-30"}, "--source"},
		{[]string{"reconcile", "--source", "site", "--from", "1.09.2026", "--to", "2026-09-30"}, "--from"},
		{[]string{"reconcile", "--source", "site", "--from", "2026-09-30", "--to", "2026-09-01"}, "before"},
		{[]string{"reconcile", "--source", "site", "--from", "2026-09-01", "--to", "2026-09-30", "--format", "pdf"}, "format"},
		{[]string{"reconcile", "--source", "kaspi", "--from", "2026-09-01", "--to", "2026-09-30"}, "connectors.kaspi.enabled"},
	} {
		_, stderr, code := e.cli("", c.args...)
		if code != 2 || !strings.Contains(stderr, c.want) || strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
			t.Errorf("%v: exit %d, stderr %q; want 2 and one line naming %s", c.args, code, stderr, c.want)
		}
	}
	// site with nothing anywhere: clean, exit 0.
	stdout, stderr, code := e.cli("", "reconcile", "--source", "site", "--from", "2026-09-01", "--to", "2026-09-30")
	if code != 0 || !strings.Contains(stdout, "every order is ok") {
		t.Errorf("an empty period: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}
