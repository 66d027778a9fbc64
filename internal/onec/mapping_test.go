package onec_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/shopspring/decimal"

	"github.com/ordersync/ordersync/internal/onec"
)

func TestMappingIsZero(t *testing.T) {
	if !(onec.Mapping{}).IsZero() {
		t.Error("the empty mapping is not zero")
	}
	for _, m := range []onec.Mapping{{Organization: "00-000001"}, {Warehouse: "W"}, {Partner: "P"}, {Counterparty: "C"}, {Agreement: "A"}} {
		if m.IsZero() {
			t.Errorf("%+v is zero", m)
		}
	}
}

func TestMappingErrorNamesTheKey(t *testing.T) {
	e := &onec.MappingError{Source: "ozon-ooo", Key: "connectors.ozon-ooo.onec.organization"}
	if got, want := e.Error(), `no 1C mapping for account "ozon-ooo": set connectors.ozon-ooo.onec.organization`; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	e.Reason = "1C has no organisation with code 00-000009"
	if got := e.Error(); !strings.HasSuffix(got, "set connectors.ozon-ooo.onec.organization: 1C has no organisation with code 00-000009") {
		t.Errorf("Error() with a reason = %q", got)
	}
	wrapped := fmt.Errorf("create: %w", e)
	if onec.MappingErrorOf(wrapped) != e {
		t.Error("MappingErrorOf does not find the wrapped error")
	}
	if onec.MappingErrorOf(fmt.Errorf("other")) != nil {
		t.Error("MappingErrorOf found a mapping error in another error")
	}
}

// The mapping stays out of every JSON of the request: a payload hashed or stored
// is the same with and without it.
func TestMappingIsNotMarshalled(t *testing.T) {
	req := onec.CreateOrder{ExternalID: "kaspi:1", Source: "kaspi", Total: decimal.RequireFromString("1")}
	plain, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	req.Mapping = onec.Mapping{Organization: "ORG", Warehouse: "W", Partner: "P", Counterparty: "C", Agreement: "A"}
	mapped, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	if string(plain) != string(mapped) {
		t.Errorf("the mapping changed the JSON:\n%s\n%s", plain, mapped)
	}
}
