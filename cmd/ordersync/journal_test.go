package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xuri/excelize/v2"

	"github.com/ordersync/ordersync/internal/journal/export"
	"github.com/ordersync/ordersync/internal/sim/onecsim"
)

// journal show finds an operation by every form a person has at hand, and says
// which operations match when a term names several; journal list filters by the
// same term and writes the exports' columns as CSV and XLSX, times with their zone.
func TestJournalShowByAnyFormAndListColumns(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"postgres", "sqlite"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			e := newEnvOn(t, backend, onecsim.Options{}, true)
			e.environ = append(e.environ, "ORDERSYNC_UI__TIMEZONE=Asia/Almaty")
			input := orderJSON("512344101", "SKU-1", "2", "1500.10") + "\n" +
				strings.Replace(orderJSON("512344102", "SKU-1", "1", "99.99"), "+77011234567", "+7 702 000 00 00", 1)
			if _, stderr, code := e.cli(input, "order", "import"); code != 0 {
				t.Fatalf("import: exit %d: %s", code, stderr)
			}
			key := "site:order:512344101:create"
			if out, stderr, code := e.cli("", "resync", key); code != 0 {
				t.Fatalf("resync: exit %d: %s %s", code, out, stderr)
			}
			var number string
			for _, o := range e.onec.Orders() {
				if o.ExternalID == "site:512344101" {
					number = o.Number
				}
			}
			if number == "" {
				t.Fatal("1C holds no order for site:512344101")
			}
			showKey := func(term string) string {
				t.Helper()
				out, stderr, code := e.cli("", "journal", "show", term, "--format", "json")
				if code != 0 {
					t.Fatalf("journal show %q: exit %d: %s", term, code, stderr)
				}
				var d struct {
					Key    string
					Events []struct{ Action, Actor string }
				}
				if err := json.Unmarshal([]byte(out), &d); err != nil {
					t.Fatalf("journal show %q: %v: %s", term, err, out)
				}
				return d.Key
			}
			for _, term := range []string{key, "512344101", "site:512344101", number, strings.ToLower(number), " 512344101 "} {
				if got := showKey(term); got != key {
					t.Errorf("journal show %q found %q, want %s", term, got, key)
				}
			}
			if got := showKey("8 702 000-00-00"); got != "site:order:512344102:create" {
				t.Errorf("journal show by phone found %q", got)
			}
			// Both orders carry +77011234567 in orderJSON's first copy only; make the
			// phone name two operations by importing a third with it.
			if _, stderr, code := e.cli(orderJSON("512344103", "SKU-1", "1", "5"), "order", "import"); code != 0 {
				t.Fatalf("import: %s", stderr)
			}
			_, stderr, code := e.cli("", "journal", "show", "+7 701 123 45 67")
			if code != 1 || !strings.Contains(stderr, "several operations") ||
				!strings.Contains(stderr, key) || !strings.Contains(stderr, "site:order:512344103:create") {
				t.Fatalf("a phone of two orders: exit %d, stderr %s", code, stderr)
			}
			if _, stderr, code := e.cli("", "journal", "show", "ОС-999999"); code != 1 || !strings.Contains(stderr, "not found") {
				t.Fatalf("an unknown number: exit %d, stderr %s", code, stderr)
			}

			out, _, code := e.cli("", "journal", "list", "-q", number, "--format", "json")
			var rows []struct {
				Key, Customer, Phone, Currency string
				Total                          json.Number
				Marketplace                    string `json:"marketplace_number"`
				CreatedAt                      string `json:"created_at"`
				RegisteredAt                   string `json:"registered_at"`
				OrderCreatedAt                 string `json:"order_created_at"`
			}
			if err := json.Unmarshal([]byte(out), &rows); err != nil || code != 0 || len(rows) != 1 || rows[0].Key != key {
				t.Fatalf("list -q %s: exit %d %v: %s", number, code, err, out)
			}
			if r := rows[0]; r.Marketplace != "512344101" || r.Customer != "Иван Петров" || r.Total.String() != "3000.2" || !strings.HasSuffix(r.CreatedAt, "+05:00") {
				t.Fatalf("list row %+v", r)
			}
			// created_at is the registration, as it was; registered_at says so, and
			// order_created_at is the marketplace's own date of the order.
			if r := rows[0]; r.RegisteredAt != r.CreatedAt || r.OrderCreatedAt != "2026-09-16T10:00:00+05:00" {
				t.Fatalf("list row: registered_at %q (created_at %q), order_created_at %q, want 2026-09-16T10:00:00+05:00",
					r.RegisteredAt, r.CreatedAt, r.OrderCreatedAt)
			}
			out, _, _ = e.cli("", "journal", "list", "--from", "2020-01-01", "--to", "2020-12-31", "--format", "json")
			if strings.TrimSpace(out) != "[]" {
				t.Fatalf("a period before the operations lists %s", out)
			}
			if _, stderr, code := e.cli("", "journal", "list", "--from", "2026-13-01"); code != 2 || !strings.Contains(stderr, "--from") {
				t.Fatalf("a bad date: exit %d %s", code, stderr)
			}

			if _, stderr, _ := e.cli("", "journal", "list", "--limit", "2", "--format", "csv"); !strings.Contains(stderr, "only the first 2 operations") {
				t.Errorf("a listing cut by --limit does not say so: %q", stderr)
			}
			if _, stderr, _ := e.cli("", "journal", "list", "--limit", "3", "--format", "csv"); strings.Contains(stderr, "only the first") {
				t.Errorf("a listing of everything says %q", stderr)
			}
			table, _, _ := e.cli("", "journal", "list")
			if !strings.Contains(table, "UPDATED (Asia/Almaty)") || !strings.Contains(table, "+05:00") {
				t.Fatalf("table times carry no zone:\n%s", table)
			}
			out, _, code = e.cli("", "journal", "list", "--limit", "0", "--format", "xlsx")
			if code != 0 {
				t.Fatalf("xlsx: exit %d", code)
			}
			path := filepath.Join(t.TempDir(), "j.xlsx")
			if err := os.WriteFile(path, []byte(out), 0o600); err != nil {
				t.Fatal(err)
			}
			f, err := excelize.OpenFile(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			xrows, err := f.GetRows(export.Sheet)
			if err != nil || len(xrows) != 4 {
				t.Fatalf("xlsx: %d rows %v, want a header and 3", len(xrows), err)
			}
			if xrows[0][0] != "Источник" {
				t.Fatalf("xlsx header %q, want ui.lang ru's", xrows[0])
			}

			// A cancelled order's create reads as cancelled, as on the pages: its
			// cancel is looked up for the JSON and the CSV alike (order cancel
			// carries the cancel out at once).
			state := func() (string, string) {
				t.Helper()
				out, stderr, code := e.cli("", "journal", "list", "-q", key, "--format", "json")
				var rows []struct{ State string }
				if err := json.Unmarshal([]byte(out), &rows); err != nil || code != 0 || len(rows) != 1 {
					t.Fatalf("list -q %s: exit %d %v: %s %s", key, code, err, out, stderr)
				}
				csvOut, _, _ := e.cli("", "journal", "list", "-q", key, "--format", "csv")
				return rows[0].State, csvOut
			}
			if st, csvOut := state(); st != "created" || !strings.Contains(csvOut, "создан в 1С") {
				t.Fatalf("a created order: state %q, csv %s", st, csvOut)
			}
			if _, stderr, code := e.cli("", "order", "cancel", "site", "512344101", "--reason", "покупатель отказался"); code != 0 {
				t.Fatalf("order cancel: exit %d: %s", code, stderr)
			}
			if st, csvOut := state(); st != "cancelled" || !strings.Contains(csvOut, "отменён в 1С") {
				t.Fatalf("a cancelled order: state %q, csv %s", st, csvOut)
			}
		})
	}
}
