package main

import (
	"context"
	"log/slog"

	"github.com/ordersync/ordersync/internal/config"
	"github.com/ordersync/ordersync/internal/monitor"
	"github.com/ordersync/ordersync/internal/onec"
	"github.com/ordersync/ordersync/internal/store"
)

// newMonitor is run's admin side (monitor.New) for this configuration.
func newMonitor(ctx context.Context, cfg *config.Config, db store.DB, client onec.Client, log *slog.Logger) *monitor.Monitor {
	return monitor.New(ctx, monitor.Config{Config: cfg, Version: version, Connectors: enabledConnectorNames(cfg),
		DB: db, Client: client, Logger: log})
}

// enabledConnectorNames are the enabled accounts by the names their cursors carry:
// their sources.
func enabledConnectorNames(cfg *config.Config) []string {
	var names []string
	for _, acc := range cfg.Connectors.Enabled() {
		if acc.Polled() {
			names = append(names, acc.Source)
		}
	}
	return names
}
