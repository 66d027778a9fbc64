package main

import (
	"fmt"
	"log/slog"
	"slices"

	"github.com/ordersync/ordersync/connectors/kaspi"
	"github.com/ordersync/ordersync/connectors/ozon"
	"github.com/ordersync/ordersync/connectors/wildberries"
	"github.com/ordersync/ordersync/internal/config"
	"github.com/ordersync/ordersync/internal/outbox"
	"github.com/ordersync/ordersync/internal/outbox/webhook"
	"github.com/ordersync/ordersync/internal/stdwebhook"
	"github.com/ordersync/ordersync/internal/store"
)

// delivery is the outbox side of the configuration: which destination hears which
// event type, and who publishes to each.
type delivery struct {
	routes     outbox.Routes
	publishers map[string]outbox.Publisher
	skipDead   []string
}

// connectorPublisher is a marketplace acknowledgement a connector offers, with the
// source its orders carry (the prefix of their aggregates).
type connectorPublisher struct {
	source    string
	publisher outbox.Publisher // nil where only the routes are built (deliveryRoutes)
	acks      bool             // the connector acknowledges orders
}

// connectorPublishers are the acknowledgements of the enabled connectors, by the
// connector's configuration name (kaspi, ozon, wildberries).
type connectorPublishers map[string]connectorPublisher

// newDelivery builds the destinations of relay.destinations. A connector
// destination needs its connector enabled; that is a configuration error otherwise.
func newDelivery(cfg *config.Config, connectors connectorPublishers) (*delivery, error) {
	return buildDelivery(cfg, connectors, true)
}

// deliveryRoutes are newDelivery's routes, built from the configuration alone: what
// an engine that delivers nothing (a CLI command's) writes its events by. It reads
// no destination's secrets and no connector's credentials.
func deliveryRoutes(cfg *config.Config) (outbox.Routes, error) {
	acks := connectorPublishers{}
	c := cfg.Connectors
	for _, k := range []struct {
		name, source string
		on, acks     bool
	}{
		{"kaspi", kaspi.Name, c.Kaspi.Enabled, c.Kaspi.AcceptOrders},
		{"ozon", ozon.Name, c.Ozon.Enabled, c.Ozon.Acknowledge},
		{"wildberries", wildberries.Name, c.Wildberries.Enabled, c.Wildberries.Acknowledge},
	} {
		if k.on {
			acks[k.name] = connectorPublisher{source: k.source, acks: k.acks}
		}
	}
	d, err := buildDelivery(cfg, acks, false)
	if err != nil {
		return nil, err
	}
	return d.routes, nil
}

// buildDelivery is newDelivery; without publish, the routes alone.
func buildDelivery(cfg *config.Config, connectors connectorPublishers, publish bool) (*delivery, error) {
	d := &delivery{routes: outbox.Routes{}, publishers: map[string]outbox.Publisher{}}
	for _, name := range sortedKeys(cfg.Relay.Destinations) {
		dest := cfg.Relay.Destinations[name]
		key := "relay.destinations." + name
		switch {
		case dest.Type == config.DestinationWebhook && !publish:
		case dest.Type == config.DestinationWebhook:
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
		case dest.Type == config.DestinationConnector:
			p, ok := connectors[dest.Connector]
			if !ok || !p.acks {
				return nil, usageError(fmt.Errorf("config: %s.connector: connector %q is not enabled (enable connectors.%s, or remove this destination)",
					key, dest.Connector, dest.Connector))
			}
			if publish {
				d.publishers[name] = p.publisher
			}
		default:
			return nil, usageError(fmt.Errorf("config: %s.type: unknown destination type %q", key, dest.Type))
		}
		prefix := ""
		if dest.Type == config.DestinationConnector {
			prefix = connectors[dest.Connector].source + ":" // a marketplace hears only its own orders
		}
		d.routes.Add(name, prefix, dest.Events...)
		if dest.OnDead == config.OnDeadSkip {
			d.skipDead = append(d.skipDead, name)
		}
	}
	// A connector that acknowledges orders and has no destination of its own gets
	// one, named after it, for the order.created events of its own orders.
	for _, name := range sortedKeys(connectors) {
		cp := connectors[name]
		if !cp.acks || usesConnector(cfg, name) {
			continue
		}
		if _, taken := cfg.Relay.Destinations[name]; taken {
			return nil, usageError(fmt.Errorf("config: relay.destinations.%s: the name is taken, but connectors.%s acknowledges orders "+
				"through a destination of that name: rename relay.destinations.%s", name, name, name))
		}
		if publish {
			d.publishers[name] = cp.publisher
		}
		d.routes.Add(name, cp.source+":", outbox.OrderCreated)
	}
	return d, nil
}

func usesConnector(cfg *config.Config, connector string) bool {
	for _, dest := range cfg.Relay.Destinations {
		if dest.Type == config.DestinationConnector && dest.Connector == connector {
			return true
		}
	}
	return false
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func (d *delivery) relay(db store.DB, cfg *config.Config, log *slog.Logger) *outbox.Relay {
	rc := relayConfig(cfg, d.publishers, d.skipDead, log)
	if cfg.Relay.Listen {
		rc.Listener = db.Listener()
	}
	return outbox.NewRelay(db.Outbox(), rc)
}

// relayConfig is the relay.* configuration for a relay over publishers.
func relayConfig(cfg *config.Config, publishers map[string]outbox.Publisher, skipDead []string, log *slog.Logger) outbox.RelayConfig {
	return outbox.RelayConfig{
		Concurrency:   cfg.Relay.Concurrency,
		BatchSize:     cfg.Relay.BatchSize,
		Claimers:      cfg.Relay.Claimers,
		PollInterval:  cfg.Relay.PollInterval,
		MaxAttempts:   cfg.Relay.MaxAttempts,
		BackoffMin:    cfg.Relay.BackoffMin,
		BackoffMax:    cfg.Relay.BackoffMax,
		Lease:         cfg.Relay.Lease,
		Retention:     cfg.Relay.Retention,
		PruneInterval: cfg.Relay.PruneInterval,
		StopTimeout:   cfg.Worker.ShutdownTimeout,
		SkipDead:      skipDead,
		Publishers:    publishers,
		Logger:        log.With("component", "relay"),
	}
}
