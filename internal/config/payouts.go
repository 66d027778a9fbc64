package config

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ordersync/ordersync/internal/payouts"
)

// Payouts is the reading of the marketplaces' financial lines (payouts, fees,
// returns' reversals) into the journal database, for the payout reconciliation.
type Payouts struct {
	// Schedule is when `run` reads the recent lines of each source: a cron spec in
	// ui.timezone (five fields, or a descriptor such as @daily); "" or "off" turns
	// the schedule off (`ordersync payouts fetch` still reads by hand).
	Schedule string `koanf:"schedule"`
	// Sources the schedule reads: ozon, wildberries (Kaspi has no payout API: its
	// export is imported by hand). Empty: each of them whose connector is enabled.
	Sources []string `koanf:"sources"`
	// Window is how far back each scheduled reading looks, from the start of that
	// day: lines a marketplace books late are caught by the next readings.
	Window time.Duration `koanf:"window"`
	// WildberriesURL is Wildberries' statistics host, where the realization report
	// is (not connectors.wildberries.base_url, the marketplace host).
	WildberriesURL string `koanf:"wildberries_url"`
	// OzonCurrency is the currency of the Ozon contract's amounts, which the
	// transaction list does not name.
	OzonCurrency string `koanf:"ozon_currency"`
}

// PayoutSources are the sources the schedule can read.
var PayoutSources = []string{"ozon", "wildberries"}

// DefaultPayoutsSchedule is the nightly reading.
const DefaultPayoutsSchedule = "30 3 * * *"

func defaultPayouts() Payouts {
	return Payouts{Schedule: DefaultPayoutsSchedule, Window: 7 * 24 * time.Hour,
		WildberriesURL: "https://statistics-api.wildberries.ru", OzonCurrency: "RUB"}
}

// ScheduleOn reports whether payouts.schedule is on.
func (p Payouts) ScheduleOn() bool { return !payouts.Off(p.Schedule) }

// ScheduledSources are the accounts the schedule reads: payouts.sources, or every
// enabled Ozon and Wildberries account.
func (c Config) ScheduledSources() []string {
	if len(c.Payouts.Sources) > 0 {
		return c.Payouts.Sources
	}
	var out []string
	for _, a := range c.Connectors.Enabled() {
		if a.Ozon != nil || a.Wildberries != nil {
			out = append(out, a.Name)
		}
	}
	return out
}

// PayoutAccount is the account named name (connectors.<name>) whose financial
// lines can be read: an Ozon or a Wildberries one, enabled or not.
func (c Config) PayoutAccount(name string) (Account, bool) {
	a, ok := c.Connectors.Account(name)
	return a, ok && (a.Ozon != nil || a.Wildberries != nil)
}

// PayoutAccounts are the names of the accounts whose lines can be read, in the
// order of Connectors.All.
func (c Config) PayoutAccounts() []string {
	var out []string
	for _, a := range c.Connectors.All() {
		if a.Ozon != nil || a.Wildberries != nil {
			out = append(out, a.Name)
		}
	}
	return out
}

func (p *Payouts) derive() {
	if len(p.Sources) == 0 {
		p.Sources = nil
	}
	for i, s := range p.Sources {
		p.Sources[i] = strings.ToLower(strings.TrimSpace(s))
	}
	p.OzonCurrency = strings.ToUpper(strings.TrimSpace(p.OzonCurrency))
}

func (c *Config) validatePayouts(p *problems) {
	py := c.Payouts
	if py.ScheduleOn() {
		loc := time.UTC // the zone is checked with ui.timezone and onec.timezone
		zone := c.UI.Timezone
		if zone == "" {
			zone = c.OneC.Timezone
		}
		if l, err := time.LoadLocation(zone); err == nil {
			loc = l
		}
		if _, err := payouts.ParseSchedule(py.Schedule, loc); err != nil {
			p.add("payouts.schedule", fmt.Sprintf(`must be five fields (minute hour day-of-month month day-of-week) such as "30 3 * * *", a descriptor such as @daily, or "off"; got %q: %v`,
				py.Schedule, err))
		}
	}
	if py.Window < 24*time.Hour {
		p.add("payouts.window", fmt.Sprintf("must be at least 24h (a day of lines), got %s", formatDuration(py.Window)))
	}
	for i, s := range py.Sources {
		key := fmt.Sprintf("payouts.sources[%d]", i)
		switch {
		case s == "kaspi":
			p.add(key, "kaspi has no payout API: import its export with `ordersync payouts import --source kaspi FILE.xlsx`")
		case !slices.Contains(c.PayoutAccounts(), s):
			p.add(key, fmt.Sprintf("unknown source %q, known: %s", s, strings.Join(c.PayoutAccounts(), ", ")))
		case slices.Index(py.Sources, s) < i:
			p.add(key, fmt.Sprintf("%q is listed twice", s))
		case py.ScheduleOn() && !c.Connectors.enabled(s):
			p.add("connectors."+s+".enabled", fmt.Sprintf("must be true: %s reads %s's lines", key, s))
		}
	}
	checkBaseURL("payouts.wildberries_url", py.WildberriesURL, "payouts.sources", p)
	if len(py.OzonCurrency) != 3 || strings.Trim(py.OzonCurrency, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") != "" {
		p.add("payouts.ozon_currency", fmt.Sprintf("must be an ISO 4217 code such as RUB or KZT, got %q", py.OzonCurrency))
	}
}
