package config

import (
	"strings"
	"testing"
)

func TestConnectorsReturnsDefaultsAndChecks(t *testing.T) {
	t.Parallel()
	d := defaults().Connectors
	wb := d.Wildberries.Returns
	for name, r := range map[string]Returns{"kaspi": d.Kaspi.Returns, "ozon": d.Ozon.Returns, "wildberries": {Enabled: wb.Enabled, PollInterval: wb.PollInterval}} {
		if !r.Enabled || r.PollInterval <= 0 {
			t.Errorf("%s: returns %+v: want enabled by default with an interval", name, r)
		}
	}
	for _, tc := range []struct {
		name, yaml string
		want       []string
	}{
		{"no interval", "connectors:\n  ozon:\n    returns:\n      poll_interval: 0s\n", []string{"connectors.ozon.returns.poll_interval"}},
		{"wildberries without its analytics url", "connectors:\n  wildberries:\n    returns:\n      base_url: \"\"\n", []string{"connectors.wildberries.returns.base_url"}},
		{"off: nothing checked", "connectors:\n  ozon:\n    returns:\n      enabled: false\n      poll_interval: 0s\n", nil},
	} {
		name := strings.Fields(tc.yaml)[1]
		name = strings.TrimSuffix(name, ":")
		_, err := loadWithFiles(t, tc.yaml, nil, enabledEnv(name)...)
		if len(tc.want) == 0 {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s: loaded", tc.name)
			continue
		}
		for _, key := range tc.want {
			if !strings.Contains(err.Error(), key) {
				t.Errorf("%s: error does not name %s:\n%v", tc.name, key, err)
			}
		}
	}
}
