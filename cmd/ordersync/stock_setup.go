package main

import (
	"fmt"
	"slices"
	"time"

	"github.com/ordersync/ordersync/internal/config"
	"github.com/ordersync/ordersync/internal/stock"
	"github.com/ordersync/ordersync/internal/stock/scheduler"
)

// stockSetup is the stock side of the configuration, parsed once.
type stockSetup struct {
	loc         *time.Location
	catchUp     bool
	fullRefresh time.Duration
	schedules   []scheduler.Schedule
	// maps: the 1C warehouses each enabled account is sent or serves, to the
	// marketplace's own ids, by account name; accounts: their names, in the
	// configuration's order.
	maps     map[string]map[string]string
	accounts []string
}

func newStockSetup(cfg *config.Config) (*stockSetup, error) {
	s := &stockSetup{
		loc:         cfg.Stock.Location(),
		catchUp:     cfg.Stock.CatchUp == config.CatchUpLatest,
		fullRefresh: cfg.Stock.FullRefresh,
		maps:        map[string]map[string]string{},
	}
	for _, acc := range cfg.Connectors.Enabled() {
		if !acc.Polled() || (acc.Kaspi != nil && acc.Name != stock.Kaspi) {
			continue // the feed serves connectors.kaspi alone
		}
		s.maps[acc.Name], _, _ = acc.StockMap()
		s.accounts = append(s.accounts, acc.Name)
	}
	for i, sc := range cfg.Stock.Schedules {
		spec, err := stock.ParseSpec(sc.Cron, s.loc)
		if err != nil { // validated by config.Load
			return nil, fmt.Errorf("config: stock.schedules[%d].cron: %w", i, err)
		}
		s.schedules = append(s.schedules, scheduler.Schedule{Name: sc.Name, Spec: spec,
			Warehouses: slices.Clone(sc.Warehouses), Publish: slices.Clone(sc.Publish)})
	}
	return s, nil
}

// schedule returns the schedule named name.
func (s *stockSetup) schedule(name string) (scheduler.Schedule, bool) {
	for _, sc := range s.schedules {
		if sc.Name == name {
			return sc, true
		}
	}
	return scheduler.Schedule{}, false
}

// warehouses are every warehouse a schedule or a marketplace names, sorted.
func (s *stockSetup) warehouses() []string {
	var whs []string
	for _, sc := range s.schedules {
		whs = append(whs, sc.Warehouses...)
	}
	for _, m := range s.maps {
		for wh := range m {
			whs = append(whs, wh)
		}
	}
	slices.Sort(whs)
	return slices.Compact(whs)
}

// publishTo is where a manual snapshot of wh goes: every enabled marketplace that
// maps the warehouse.
func (s *stockSetup) publishTo(wh string) []string {
	out := []string{}
	for _, mp := range s.accounts {
		if _, ok := s.maps[mp][wh]; ok {
			out = append(out, mp)
		}
	}
	return out
}

// scheduledTo is where the schedules publish wh: the marketplaces of every
// schedule that snapshots it, in the accounts' order; none when no schedule
// names it.
func (s *stockSetup) scheduledTo(wh string) []string {
	out := []string{}
	for _, mp := range s.accounts {
		for _, sc := range s.schedules {
			if slices.Contains(sc.Warehouses, wh) && slices.Contains(sc.Publish, mp) {
				out = append(out, mp)
				break
			}
		}
	}
	return out
}
