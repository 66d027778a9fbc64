package main

import (
	"github.com/ordersync/ordersync/connectors/kaspi"
	"github.com/ordersync/ordersync/connectors/ozon"
	"github.com/ordersync/ordersync/connectors/wildberries"
	"github.com/ordersync/ordersync/internal/config"
)

// enabledConnectorNames are the enabled connectors by the names their cursors carry.
func enabledConnectorNames(cfg *config.Config) []string {
	var names []string
	if cfg.Connectors.Kaspi.Enabled {
		names = append(names, kaspi.Name)
	}
	if cfg.Connectors.Ozon.Enabled {
		names = append(names, ozon.Name)
	}
	if cfg.Connectors.Wildberries.Enabled {
		names = append(names, wildberries.Name)
	}
	return names
}
