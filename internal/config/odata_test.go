package config

import "testing"

const odataYAML = `
onec:
  interface: odata
  base_url: http://1c.local/trade/odata/standard.odata
  odata:
    profile: ut11
    organization: 8d04ce3c-1bd6-11e9-80c8-00155d000a01
    warehouse: 8d04ce3c-1bd6-11e9-80c8-00155d000a02
    currency: 8d04ce3c-1bd6-11e9-80c8-00155d000a03
    sources:
      kaspi:
        partner: 8d04ce3c-1bd6-11e9-80c8-00155d000a11
        counterparty: 8d04ce3c-1bd6-11e9-80c8-00155d000a12
`

// The OData interface's keys load, take their defaults, and are checked: a known
// profile, a base URL of the standard interface, GUIDs where GUIDs go, the
// references each profile needs.
func TestODataKeys(t *testing.T) {
	cfg := mustLoadYAML(t, odataYAML)
	if cfg.OneC.Interface != InterfaceOData || cfg.OneC.OData.ItemsBy != "Артикул" ||
		cfg.OneC.OData.Sources["kaspi"].Counterparty != "8d04ce3c-1bd6-11e9-80c8-00155d000a12" {
		t.Fatalf("loaded %+v", cfg.OneC.OData)
	}
	if cfg := mustLoadYAML(t, "onec: {}"); cfg.OneC.Interface != InterfaceHTTPService {
		t.Fatalf("default interface %q, want httpservice", cfg.OneC.Interface)
	}

	_, err := loadYAML(t, "onec: {interface: soap}")
	wantProblem(t, err, "onec.interface", "httpservice", "odata", `"soap"`)

	_, err = loadYAML(t, odataYAML, "ORDERSYNC_ONEC__ODATA__PROFILE=bp3")
	wantProblem(t, err, "onec.odata.profile", "ut11", "unf", `"bp3"`)

	_, err = loadYAML(t, odataYAML, "ORDERSYNC_ONEC__BASE_URL=http://1c.local/trade/hs/ordersync/v1")
	wantProblem(t, err, "onec.base_url", "standard.odata")

	_, err = loadYAML(t, odataYAML, "ORDERSYNC_ONEC__ODATA__ORGANIZATION=ООО Ромашка")
	wantProblem(t, err, "onec.odata.organization", "GUID", "ООО Ромашка")

	// What writing orders needs is asked by the commands that write them, so
	// that onec refs runs before the GUIDs are filled in.
	cfg = mustLoadYAML(t, odataYAML, "ORDERSYNC_ONEC__ODATA__SOURCES__KASPI__PARTNER=", "ORDERSYNC_ONEC__ODATA__CURRENCY=")
	err = cfg.ODataNeeds()
	wantProblem(t, err, "onec.odata.sources.kaspi.partner", "required", "onec refs")
	wantProblem(t, err, "onec.odata.currency", "required")
	if err := mustLoadYAML(t, odataYAML).ODataNeeds(); err != nil {
		t.Fatalf("a complete configuration needs %v", err)
	}

	cfg = mustLoadYAML(t, odataYAML, "ORDERSYNC_ONEC__ODATA__PROFILE=unf", "ORDERSYNC_ONEC__ODATA__SOURCES__KASPI__PARTNER=")
	wantProblem(t, cfg.ODataNeeds(), "onec.odata.cancelled_state", "required")
	_, err = loadYAML(t, odataYAML, "ORDERSYNC_ONEC__ODATA__PROFILE=unf")
	wantProblem(t, err, "onec.odata.sources.kaspi.partner", "no partner")

	cfg = mustLoadYAML(t, odataYAML, "ORDERSYNC_CONNECTORS__OZON__ENABLED=true", "ORDERSYNC_CONNECTORS__OZON__CLIENT_ID=1",
		"ORDERSYNC_CONNECTORS__OZON__API_KEY=k", "ORDERSYNC_CONNECTORS__OZON__WAREHOUSE=WH1")
	wantProblem(t, cfg.ODataNeeds(), "onec.odata.sources.ozon", "ozon's orders go to 1C")
}
