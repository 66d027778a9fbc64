package odata

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/ordersync/ordersync/internal/onec"
	"github.com/ordersync/ordersync/internal/sim/odatasim"
)

const (
	orgIP  = "6f1c2a10-0000-4000-8000-0000000000a1"
	whIP   = "6f1c2a10-0000-4000-8000-0000000000a2"
	partIP = "6f1c2a10-0000-4000-8000-0000000000a3"
	ctrIP  = "6f1c2a10-0000-4000-8000-0000000000a4"
	agrIP  = "6f1c2a10-0000-4000-8000-0000000000a5"
)

// Two accounts in one base: the one without a mapping is written with the base's
// organisation and the source's buyer, as before; the mapped one with its own
// organisation, warehouse, partner, counterparty and agreement, read back equal.
func TestMappingOverridesTheBaseAndTheSource(t *testing.T) {
	w := newWorld(t, odatasim.Options{}, 5*time.Second)

	plain := testOrder("1")
	if _, err := w.create(plain); err != nil {
		t.Fatal(err)
	}
	mapped := testOrder("2")
	mapped.Mapping = onec.Mapping{Organization: orgIP, Warehouse: whIP, Partner: partIP, Counterparty: ctrIP, Agreement: agrIP}
	created, err := w.create(mapped)
	if err != nil {
		t.Fatal(err)
	}
	// A third account has no onec.odata.sources entry: its mapping names the buyer.
	other := testOrder("3")
	other.ExternalID, other.Source = "ozon-ip:3", "ozon-ip"
	other.Mapping = onec.Mapping{Organization: orgIP, Partner: partIP, Counterparty: ctrIP}
	if _, err := w.create(other); err != nil {
		t.Fatal(err)
	}

	if got, want := w.sim.OrdersByOrganization(), map[string]int{testOrg: 1, orgIP: 2}; !maps.Equal(got, want) {
		t.Fatalf("OrdersByOrganization() = %v, want %v", got, want)
	}
	d := w.order(created.Ref)
	for field, want := range map[string]string{"Организация_Key": orgIP, "Склад_Key": whIP, "Партнер_Key": partIP,
		"Контрагент_Key": ctrIP, "Соглашение_Key": agrIP, "Валюта_Key": testCur} {
		if d[field] != want {
			t.Errorf("%s = %v, want %s", field, d[field], want)
		}
	}
	rows, _ := d["Товары"].([]any)
	for i, r := range rows {
		if row, _ := r.(map[string]any); row["Склад_Key"] != whIP {
			t.Errorf("row %d: Склад_Key = %v, want the account's %s", i+1, row["Склад_Key"], whIP)
		}
	}
}

// A mapping that names a reference by its code cannot be written over OData:
// nothing is sent, and the error names the key to set.
func TestMappingByCodeIsRefused(t *testing.T) {
	w := newWorld(t, odatasim.Options{}, 5*time.Second)
	req := testOrder("1")
	req.Mapping = onec.Mapping{Organization: "00-000002"}
	_, err := w.client.CreateOrder(context.Background(), req)
	var e *onec.Error
	if !asError(err, &e) || e.Class != onec.Configuration || !e.PerOrder {
		t.Fatalf("create with a code: %v, want a per-order Configuration error", err)
	}
	me := onec.MappingErrorOf(err)
	if me == nil || me.Key != "connectors.kaspi.onec.organization" {
		t.Fatalf("MappingErrorOf = %+v, want the key connectors.kaspi.onec.organization", me)
	}
	// The key names the section the mapping came from (the first Wildberries
	// account's is connectors.wildberries, not its source wb).
	req.Source, req.Mapping.Section = "wb", "connectors.wildberries.onec"
	_, err = w.client.CreateOrder(context.Background(), req)
	if me := onec.MappingErrorOf(err); me == nil || me.Key != "connectors.wildberries.onec.organization" {
		t.Fatalf("MappingErrorOf = %+v, want the key connectors.wildberries.onec.organization", me)
	}
	if n := w.sim.Creates(); n != 0 {
		t.Fatalf("Creates() = %d, want 0", n)
	}
}
