package engine_test

import (
	"context"
	"strings"
	"testing"

	"github.com/ordersync/ordersync/internal/engine"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/onec"
	"github.com/ordersync/ordersync/internal/sim/onecsim"
)

// TestOrdersAreWrittenUnderTheirAccountsOrganisation: the engine writes each
// order with its source's 1C mapping, and refuses, before anything reaches 1C,
// the order of a source whose mapping is missing.
func TestOrdersAreWrittenUnderTheirAccountsOrganisation(t *testing.T) {
	t.Parallel()
	h := newHarness(t, onecsim.Options{Organizations: []string{"ORG-OOO", "ORG-IP"}})
	mappings := func(source string) (onec.Mapping, error) {
		switch source {
		case "ozon":
			return onec.Mapping{Organization: "ORG-OOO"}, nil
		case "ozon-ip":
			return onec.Mapping{Organization: "ORG-IP", Agreement: "000000017"}, nil
		}
		return onec.Mapping{}, &onec.MappingError{Source: source, Key: "connectors." + source + ".onec.organization"}
	}
	mapped, other, unmapped := testOrder("1"), testOrder("1"), testOrder("1")
	mapped.Source, other.Source, unmapped.Source = "ozon", "ozon-ip", "ozon-new"
	h.register(mapped)
	h.register(other)
	h.register(unmapped)
	e := h.engine(nil, engine.Config{Mappings: mappings})
	for range 3 {
		if _, err := e.RunDue(context.Background()); err != nil {
			t.Fatal(err)
		}
	}

	if got := h.onec.OrdersByOrganization(); got["ORG-OOO"] != 1 || got["ORG-IP"] != 1 || len(got) != 2 {
		t.Fatalf("1C's orders by organisation %v, want one each under ORG-OOO and ORG-IP", got)
	}
	for _, o := range h.onec.Orders() {
		if o.ExternalID == "ozon-ip:1" && o.Agreement != "000000017" {
			t.Errorf("ozon-ip's order written with agreement %q, want 000000017", o.Agreement)
		}
	}
	h.wantOneCOrders("ozon-new:1", 0)
	d := h.show(unmapped.CreateKey())
	if d.Status != journal.StatusPending || d.RetryClass != journal.ClassConfiguration ||
		!strings.Contains(d.LastError, `not sent to 1C: no 1C mapping for account "ozon-new": set connectors.ozon-new.onec.organization`) {
		t.Fatalf("unmapped order: status %s class %q error %q, want pending, configuration, naming the key",
			d.Status, d.RetryClass, d.LastError)
	}
}
