package main

import (
	"fmt"
	"log/slog"
	"slices"

	"github.com/ordersync/ordersync/internal/config"
	"github.com/ordersync/ordersync/internal/outbox"
	"github.com/ordersync/ordersync/internal/outbox/webhook"
	"github.com/ordersync/ordersync/internal/stdwebhook"
	"github.com/ordersync/ordersync/internal/store/postgres"
)

// delivery is the outbox side of the configuration: which destination hears which
// event type, and who publishes to each.
type delivery struct {
	routes     outbox.Routes
	publishers map[string]outbox.Publisher
	skipDead   []string
}

// connectorPublishers are the marketplace acknowledgements the connectors offer,
// by connector name. The connectors register theirs as they are enabled.
type connectorPublishers map[string]outbox.Publisher

// newDelivery builds the destinations of relay.destinations. A connector
// destination needs its connector enabled; that is a configuration error otherwise.
func newDelivery(cfg *config.Config, connectors connectorPublishers) (*delivery, error) {
	d := &delivery{routes: outbox.Routes{}, publishers: map[string]outbox.Publisher{}}
	names := make([]string, 0, len(cfg.Relay.Destinations))
	for name := range cfg.Relay.Destinations {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		dest := cfg.Relay.Destinations[name]
		key := "relay.destinations." + name
		switch dest.Type {
		case config.DestinationWebhook:
			secrets := make([]stdwebhook.Secret, len(dest.Secrets))
			for i, s := range dest.Secrets {
				sec, err := stdwebhook.ParseSecret(s)
				if err != nil {
					return nil, usageError(fmt.Errorf("config: %s.secrets[%d]: %w", key, i, err))
				}
				secrets[i] = sec
			}
			p, err := webhook.New(webhook.Config{Name: name, URL: dest.URL, Secrets: secrets, Timeout: dest.Timeout})
			if err != nil {
				return nil, usageError(fmt.Errorf("config: %s: %w", key, err))
			}
			d.publishers[name] = p
		case config.DestinationConnector:
			p, ok := connectors[dest.Connector]
			if !ok {
				return nil, usageError(fmt.Errorf("config: %s.connector: connector %q is not enabled (enable connectors.%s, or remove this destination)",
					key, dest.Connector, dest.Connector))
			}
			d.publishers[name] = p
		default:
			return nil, usageError(fmt.Errorf("config: %s.type: unknown destination type %q", key, dest.Type))
		}
		for _, ev := range dest.Events {
			d.routes[ev] = append(d.routes[ev], name)
		}
		if dest.OnDead == config.OnDeadSkip {
			d.skipDead = append(d.skipDead, name)
		}
	}
	return d, nil
}

func (d *delivery) relay(db *postgres.DB, cfg *config.Config, log *slog.Logger) *outbox.Relay {
	rc := outbox.RelayConfig{
		Concurrency:   cfg.Relay.Concurrency,
		BatchSize:     cfg.Relay.BatchSize,
		PollInterval:  cfg.Relay.PollInterval,
		MaxAttempts:   cfg.Relay.MaxAttempts,
		BackoffMin:    cfg.Relay.BackoffMin,
		BackoffMax:    cfg.Relay.BackoffMax,
		Lease:         cfg.Relay.Lease,
		Retention:     cfg.Relay.Retention,
		PruneInterval: cfg.Relay.PruneInterval,
		StopTimeout:   cfg.Worker.ShutdownTimeout,
		SkipDead:      d.skipDead,
		Publishers:    d.publishers,
		Logger:        log.With("component", "relay"),
	}
	if cfg.Relay.Listen {
		rc.Listener = db.Listener()
	}
	return outbox.NewRelay(db.Outbox(), rc)
}
