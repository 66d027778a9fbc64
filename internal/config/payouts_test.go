package config

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestPayoutsKeys(t *testing.T) {
	t.Parallel()
	cfg := mustLoadYAML(t, `
connectors:
  ozon: {enabled: true, client_id: "123456", api_key: `+ozonKey+`, warehouse: WH1}
ui: {timezone: Europe/Moscow}
payouts:
  schedule: "@daily"
  sources: [OZON]
  window: 72h
  ozon_currency: kzt
`)
	p := cfg.Payouts
	if p.Schedule != "@daily" || !slices.Equal(p.Sources, []string{"ozon"}) || p.Window != 72*time.Hour || p.OzonCurrency != "KZT" ||
		!p.ScheduleOn() || !slices.Equal(cfg.ScheduledSources(), []string{"ozon"}) {
		t.Errorf("payouts loaded as %+v", p)
	}
	// No sources given: the enabled connectors among ozon and wildberries.
	cfg = mustLoadYAML(t, `
connectors:
  ozon: {enabled: true, client_id: "123456", api_key: `+ozonKey+`, warehouse: WH1}
`, "ORDERSYNC_PAYOUTS__SCHEDULE=off")
	if cfg.Payouts.ScheduleOn() || !slices.Equal(cfg.ScheduledSources(), []string{"ozon"}) {
		t.Errorf("schedule on %v, sources %v; want off, [ozon]", cfg.Payouts.ScheduleOn(), cfg.ScheduledSources())
	}
}

func TestPayoutsProblemsNameTheKey(t *testing.T) {
	t.Parallel()
	_, err := loadYAML(t, `
payouts:
  schedule: "61 3 * * *"
  sources: [kaspi, amazon, wildberries, wildberries]
  window: 1h
  wildberries_url: ftp://x
  ozon_currency: rubles
`)
	keys := problemKeys(t, err)
	for _, want := range []string{"payouts.schedule", "payouts.sources[0]", "payouts.sources[1]", "payouts.sources[3]",
		"connectors.wildberries.enabled", "payouts.window", "payouts.wildberries_url", "payouts.ozon_currency"} {
		if !slices.Contains(keys, want) {
			t.Errorf("no problem named %s among %v", want, keys)
		}
	}
	if !strings.Contains(err.Error(), "payouts import") {
		t.Errorf("the kaspi problem does not say how to import it: %v", err)
	}
}
