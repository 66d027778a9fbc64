package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/shopspring/decimal"

	"github.com/ordersync/ordersync/internal/onec"
	"github.com/ordersync/ordersync/internal/onec/httpservice"
	"github.com/ordersync/ordersync/internal/sim/onecsim"
)

// An order that 1C already holds twice (made there by hand) is done with a
// duplicate_in_1c warning naming both refs: `journal list --warnings` lists it, every
// JSON row of `journal list` and `journal show` carries its warnings.
func TestJournalListsDuplicatesIn1CAsWarnings(t *testing.T) {
	t.Parallel()
	e := newEnv(t, onecsim.Options{}, true)
	c, err := httpservice.New(httpservice.Config{BaseURL: e.onec.URL(), Username: "ordersync", Password: simPassword})
	if err != nil {
		t.Fatal(err)
	}
	dup := onec.CreateOrder{ExternalID: "site:W-1", Source: "site", Number: "W-1", Date: "2026-09-16T10:00:00",
		Currency: "KZT", Lines: []onec.Line{{SKU: "SKU-1", Name: "x", Quantity: decimal.NewFromInt(1), Price: decimal.NewFromInt(10), Amount: decimal.NewFromInt(10)}},
		Total: decimal.NewFromInt(10)}
	var refs []string
	for range 2 {
		created, err := c.CreateOrder(context.Background(), dup)
		if err != nil {
			t.Fatal(err)
		}
		refs = append(refs, created.Ref)
	}
	for _, id := range []string{"W-1", "W-2"} {
		if _, stderr, code := e.cli(orderJSON(id, "SKU-1", "1", "10.00"), "order", "import"); code != 0 {
			t.Fatalf("import %s: %d %s", id, code, stderr)
		}
		if out, stderr, code := e.cli("", "resync", "site:order:"+id+":create"); code != 0 {
			t.Fatalf("resync %s: %d %s %s", id, code, out, stderr)
		}
	}
	type row struct {
		Key      string `json:"key"`
		Warnings []struct {
			Code    string   `json:"code"`
			Message string   `json:"message"`
			Refs    []string `json:"refs"`
		} `json:"warnings"`
	}
	var all []row
	out, _, code := e.cli("", "journal", "list", "--format", "json")
	if err := json.Unmarshal([]byte(out), &all); err != nil || code != 0 || len(all) != 2 {
		t.Fatalf("journal list: exit %d %v: %s", code, err, out)
	}
	if !strings.Contains(out, `"warnings": []`) {
		t.Fatalf("a row without warnings does not carry an empty warnings list: %s", out)
	}
	var warned []row
	out, _, code = e.cli("", "journal", "list", "--warnings", "--format", "json")
	if err := json.Unmarshal([]byte(out), &warned); err != nil || code != 0 {
		t.Fatalf("journal list --warnings: exit %d %v: %s", code, err, out)
	}
	if len(warned) != 1 || warned[0].Key != "site:order:W-1:create" || len(warned[0].Warnings) != 1 {
		t.Fatalf("journal list --warnings: %+v, want W-1 with one warning", warned)
	}
	w := warned[0].Warnings[0]
	if w.Code != "duplicate_in_1c" || len(w.Refs) != 2 || !strings.Contains(w.Message, refs[0]) || !strings.Contains(w.Message, refs[1]) {
		t.Fatalf("warning %+v, want duplicate_in_1c naming %v", w, refs)
	}
	var shown row
	out, _, _ = e.cli("", "journal", "show", "site:order:W-1:create", "--format", "json")
	if err := json.Unmarshal([]byte(out), &shown); err != nil || len(shown.Warnings) != 1 {
		t.Fatalf("journal show: %v %s", err, out)
	}
	out, _, _ = e.cli("", "journal", "show", "site:order:W-1:create")
	if !strings.Contains(out, "WARNING:      duplicate_in_1c") || !strings.Contains(out, refs[1]) {
		t.Fatalf("journal show does not print the warning:\n%s", out)
	}
}
