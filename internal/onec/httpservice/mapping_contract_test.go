package httpservice_test

import (
	"context"
	"errors"
	"maps"
	"testing"

	"github.com/ordersync/ordersync/internal/onec"
	"github.com/ordersync/ordersync/internal/sim/onecsim"
)

// Two accounts of one marketplace, each its own organisation: the base holds
// each order under the organisation of its account.
func TestContractMappingPerAccount(t *testing.T) {
	t.Parallel()
	f := setup(t, onecsim.Options{Dedupe: true, Organizations: []string{"ORG-TOO", "ORG-IP"}})
	ctx := context.Background()
	accounts := map[string]onec.Mapping{
		"ozon-too": {Organization: "ORG-TOO", Partner: "P-1", Counterparty: "C-1", Agreement: "A-1"},
		"ozon-ip":  {Organization: "ORG-IP", Warehouse: "WH-IP"},
	}
	for i, acc := range []string{"ozon-too", "ozon-ip", "ozon-too"} {
		o := order(acc + ":" + string(rune('1'+i)))
		o.Source, o.Mapping = acc, accounts[acc]
		if acc == "ozon-ip" {
			o.Warehouse = "" // the account's warehouse fills it
		}
		if _, err := f.client.CreateOrder(ctx, o); err != nil {
			t.Fatalf("create for %s: %v", acc, err)
		}
	}
	if got, want := f.sim.OrdersByOrganization(), map[string]int{"ORG-TOO": 2, "ORG-IP": 1}; !maps.Equal(got, want) {
		t.Fatalf("OrdersByOrganization() = %v, want %v", got, want)
	}
	for _, o := range f.sim.Orders() {
		switch o.Organization {
		case "ORG-IP":
			if o.Warehouse != "WH-IP" {
				t.Errorf("order %s: warehouse %q, want the account's WH-IP", o.ExternalID, o.Warehouse)
			}
		case "ORG-TOO":
			if o.Warehouse != "WH1" || o.Partner != "P-1" || o.Counterparty != "C-1" || o.Agreement != "A-1" {
				t.Errorf("order %s = %+v, want the order's warehouse and the account's partner, counterparty, agreement", o.ExternalID, o)
			}
		}
	}

	o := order("ozon-x:1")
	o.Mapping = onec.Mapping{Organization: "ORG-GONE"}
	_, err := f.client.CreateOrder(ctx, o)
	var e *onec.Error
	if !errors.As(err, &e) || e.Class != onec.Permanent || e.Code != "unknown_organization" || e.Field != "organization" {
		t.Fatalf("unknown organisation: %v, want a Permanent error with code unknown_organization", err)
	}
	if n := f.sim.Count(); n != 3 {
		t.Fatalf("Count() = %d, want 3", n)
	}
}
