package config

import (
	"testing"
)

// TestMaxResponse: the answer limits of the 1C client and of every outside
// system's client, their defaults, the forms a size takes in the file and the
// environment, and their validation.
func TestMaxResponse(t *testing.T) {
	t.Parallel()
	def := mustLoadYAML(t, "")
	for key, got := range map[string]int64{
		"onec.max_response":                   def.OneC.MaxResponse,
		"connectors.kaspi.max_response":       def.Connectors.Kaspi.MaxResponse,
		"connectors.ozon.max_response":        def.Connectors.Ozon.MaxResponse,
		"connectors.wildberries.max_response": def.Connectors.Wildberries.MaxResponse,
		"webhooks.bitrix24.max_response":      def.Webhooks.Bitrix24.MaxResponse,
	} {
		want := int64(16 << 20)
		if key == "onec.max_response" {
			want = 64 << 20
		}
		if got != want {
			t.Errorf("default %s = %d, want %d", key, got, want)
		}
	}

	cfg := mustLoadYAML(t, "onec:\n  max_response: 128MiB\nconnectors:\n  kaspi:\n    max_response: 1 mib\n",
		"ORDERSYNC_ONEC__MAX_RESPONSE=1MiB",
		"ORDERSYNC_CONNECTORS__OZON__MAX_RESPONSE=2MB",
		"ORDERSYNC_CONNECTORS__WILDBERRIES__MAX_RESPONSE=1048576",
		"ORDERSYNC_WEBHOOKS__BITRIX24__MAX_RESPONSE=512KiB",
	)
	for key, tc := range map[string]struct{ got, want int64 }{
		"onec.max_response (environment over file)": {cfg.OneC.MaxResponse, 1 << 20},
		"connectors.kaspi.max_response (file)":      {cfg.Connectors.Kaspi.MaxResponse, 1 << 20},
		"connectors.ozon.max_response":              {cfg.Connectors.Ozon.MaxResponse, 2_000_000},
		"connectors.wildberries.max_response":       {cfg.Connectors.Wildberries.MaxResponse, 1 << 20},
		"webhooks.bitrix24.max_response":            {cfg.Webhooks.Bitrix24.MaxResponse, 512 << 10},
	} {
		if tc.got != tc.want {
			t.Errorf("%s = %d, want %d", key, tc.got, tc.want)
		}
	}

	const forms = "1MiB, 512KiB, 2MB or 1048576"
	for _, tc := range []struct {
		yaml      string
		env       []string
		key       string
		fragments []string
	}{
		{"onec:\n  max_response: 0\n", nil, "onec.max_response", []string{"must be a size greater than 0, such as 64MiB, got 0"}},
		{"onec:\n  max_response: -1\n", nil, "onec.max_response", []string{"greater than 0", "got -1"}},
		{"onec:\n  max_response: 1.5MiB\n", nil, "onec.max_response", []string{forms, `"1.5MiB"`}},
		{"", []string{"ORDERSYNC_ONEC__MAX_RESPONSE=lots"}, "onec.max_response", []string{forms, `"lots"`, "ORDERSYNC_ONEC__MAX_RESPONSE"}},
		{"", []string{"ORDERSYNC_ONEC__MAX_RESPONSE=0"}, "onec.max_response", []string{"greater than 0", "got 0"}},
		{"connectors:\n  kaspi:\n    max_response: 0\n", enabledEnv("kaspi"), "connectors.kaspi.max_response",
			[]string{"must be a size greater than 0, such as 16MiB, got 0"}},
		{"connectors:\n  ozon:\n    max_response: 0\n", enabledEnv("ozon"), "connectors.ozon.max_response", []string{"greater than 0"}},
		{"connectors:\n  wildberries:\n    max_response: -5\n", enabledEnv("wildberries"), "connectors.wildberries.max_response",
			[]string{"greater than 0", "got -5"}},
		// webhooks.ozon fetches postings with connectors.ozon's client, enabled or not.
		{"connectors:\n  ozon:\n    client_id: \"1\"\n    api_key: k\n    max_response: 0\nwebhooks:\n  ozon:\n    enabled: true\n", nil,
			"connectors.ozon.max_response", []string{"greater than 0", "webhooks.ozon fetches postings with it"}},
		{"webhooks:\n  bitrix24:\n    enabled: true\n    max_response: 0\n", nil, "webhooks.bitrix24.max_response", []string{"greater than 0, such as 16MiB"}},
	} {
		_, err := loadYAML(t, tc.yaml, tc.env...)
		wantProblem(t, err, tc.key, tc.fragments...)
	}

	// A connector that is not enabled is not checked beyond the types of its keys.
	if _, err := loadYAML(t, "connectors:\n  kaspi:\n    max_response: 0\n"); err != nil {
		t.Errorf("a disabled connector's max_response 0: %v, want it unchecked", err)
	}
}
