package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ordersync/ordersync/connectors"
	"github.com/ordersync/ordersync/connectors/kaspi"
	"github.com/ordersync/ordersync/connectors/ozon"
	"github.com/ordersync/ordersync/connectors/uzum"
	"github.com/ordersync/ordersync/connectors/wildberries"
	"github.com/ordersync/ordersync/connectors/yandexmarket"
	"github.com/ordersync/ordersync/internal/config"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/journal/export"
	"github.com/ordersync/ordersync/internal/outbox"
	"github.com/ordersync/ordersync/internal/store"
)

// marketplace is one enabled connector.
type marketplace struct {
	name     string // its configuration name: kaspi, ozon, wildberries
	mp       connectors.Marketplace
	ack      outbox.Publisher // the acknowledgement, when configured to acknowledge
	interval time.Duration
	lookback time.Duration
	// returns: the connector lists returns too (connectors.<name>.returns), every
	// returnsInterval.
	returns         bool
	returnsInterval time.Duration
}

// enabledConnectors builds the connectors the configuration enables.
func enabledConnectors(cfg *config.Config, log *slog.Logger) ([]marketplace, error) {
	return buildConnectors(cfg, log)
}

// buildConnectors builds those of the enabled accounts that are named, by their
// configuration name (every enabled one when none is named): a command that talks
// to one marketplace needs no other's credentials.
func buildConnectors(cfg *config.Config, log *slog.Logger, names ...string) ([]marketplace, error) {
	var ms []marketplace
	for _, acc := range cfg.Connectors.Enabled() {
		if !acc.Polled() || (len(names) > 0 && !slices.Contains(names, acc.Name)) {
			continue
		}
		m, err := buildAccount(acc, log.With("connector", acc.Name))
		if err != nil {
			return nil, usageError(fmt.Errorf("config: %w", err))
		}
		ms = append(ms, m)
	}
	return ms, nil
}

// buildAccount builds the connector of one enabled account.
func buildAccount(acc config.Account, log *slog.Logger) (marketplace, error) {
	bound := func(limit int64) http.RoundTripper {
		return connectors.BoundResponses(nil, limit, acc.Key()+".max_response")
	}
	m := marketplace{name: acc.Name}
	switch {
	case acc.Kaspi != nil:
		k := acc.Kaspi
		conn, err := kaspi.New(kaspi.Config{Source: acc.Source, BaseURL: k.BaseURL, Token: k.Token, Warehouse: k.Warehouse,
			States: k.States, Statuses: k.Statuses, PageSize: k.PageSize, Timeout: k.Timeout,
			RatePerSecond: float64(k.RatePerSecond), Logger: log, Transport: bound(k.MaxResponse)})
		if err != nil {
			return m, err
		}
		m.mp, m.interval, m.lookback = conn, k.PollInterval, k.Lookback
		m.returns, m.returnsInterval = k.Returns.Enabled, k.Returns.PollInterval
		if k.AcceptOrders {
			m.ack = conn.Publisher()
		}
	case acc.Ozon != nil:
		o := acc.Ozon
		conn, err := ozon.New(ozon.Config{Source: acc.Source, BaseURL: o.BaseURL, ClientID: o.ClientID, APIKey: o.APIKey,
			APIVersion: o.APIVersion, Warehouse: o.Warehouse, Acknowledge: o.Acknowledge, PageSize: o.PageSize,
			Timeout: o.Timeout, RatePerSecond: float64(o.RatePerSecond), Logger: log, Transport: bound(o.MaxResponse)})
		if err != nil {
			return m, err
		}
		m.mp, m.interval, m.lookback = conn, o.PollInterval, o.Lookback
		m.returns, m.returnsInterval = o.Returns.Enabled, o.Returns.PollInterval
		if o.Acknowledge {
			m.ack = conn.Publisher()
		}
	case acc.Wildberries != nil:
		w := acc.Wildberries
		conn, err := wildberries.New(wildberries.Config{Source: acc.Source, BaseURL: w.BaseURL, Token: w.Token,
			Warehouse: w.Warehouse, Acknowledge: w.Acknowledge, SupplyName: w.SupplyName, PageSize: w.PageSize,
			Timeout: w.Timeout, AnalyticsURL: w.Returns.BaseURL, RatePerSecond: float64(w.RatePerSecond),
			Logger: log, Transport: bound(w.MaxResponse)})
		if err != nil {
			return m, err
		}
		m.mp, m.interval, m.lookback = conn, w.PollInterval, w.Lookback
		m.returns, m.returnsInterval = w.Returns.Enabled, w.Returns.PollInterval
		if w.Acknowledge {
			m.ack = conn.Publisher()
		}
	case acc.Uzum != nil:
		u := acc.Uzum
		conn, err := uzum.New(uzum.Config{Source: acc.Source, BaseURL: u.BaseURL, Token: u.Token, ShopIDs: u.ShopIDs,
			Warehouse: u.Warehouse, PageSize: u.PageSize, Timeout: u.Timeout, RatePerSecond: float64(u.RatePerSecond),
			Logger: log, Transport: bound(u.MaxResponse)})
		if err != nil {
			return m, err
		}
		m.mp, m.interval, m.lookback = conn, u.PollInterval, u.Lookback
		if u.Acknowledge {
			m.ack = conn.Publisher()
		}
	case acc.YandexMarket != nil:
		y := acc.YandexMarket
		conn, err := yandexmarket.New(yandexmarket.Config{Source: acc.Source, BaseURL: y.BaseURL, APIKey: y.APIKey,
			BusinessID: y.BusinessID, CampaignID: y.CampaignID, OrdersAPI: y.OrdersAPI, Warehouse: y.Warehouse,
			PageSize: y.PageSize, Timeout: y.Timeout, RatePerSecond: float64(y.RatePerSecond), Acknowledge: y.Acknowledge,
			Logger: log, Transport: bound(y.MaxResponse)})
		if err != nil {
			return m, err
		}
		m.mp, m.interval, m.lookback = conn, y.PollInterval, y.Lookback
		if y.Acknowledge {
			m.ack = conn.Publisher()
		}
	default:
		return m, fmt.Errorf("%s: no connector for the account's type %q", acc.Key(), acc.Type)
	}
	return m, nil
}

// publishers offers the connectors' acknowledgements to the relay.
func publishers(ms []marketplace) connectorPublishers {
	ps := connectorPublishers{}
	for _, m := range ms {
		ps[m.name] = connectorPublisher{source: m.mp.Name(), publisher: m.ack, acks: m.ack != nil}
	}
	return ps
}

func newPollers(ms []marketplace, db store.DB, skus *connectors.SKUMap, wake func(), log *slog.Logger) []*connectors.Poller {
	ps := make([]*connectors.Poller, len(ms))
	for i, m := range ms {
		ps[i] = connectors.NewPoller(m.mp, connectors.PollerConfig{
			Interval: m.interval, Lookback: m.lookback, Journal: db.Journal(), Cursors: db.Cursors(),
			Returns: m.returns, ReturnsInterval: m.returnsInterval,
			SKUs: skus, Registered: wake, Logger: log.With("component", "poller"),
		})
	}
	return ps
}

func (a *app) connectorsCommand() *cobra.Command {
	c := &cobra.Command{Use: "connectors", Short: "Marketplace connectors"}
	var format string
	st := &cobra.Command{
		Use:   "status",
		Short: "Each connector, enabled as configured: its cursor, last successful poll, last error and orders seen",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(format, "table", "json"); err != nil {
				return err
			}
			ctx := cmd.Context()
			cfg, err := a.loadConfig()
			if err != nil {
				return err
			}
			log, err := a.logger(cfg)
			if err != nil {
				return err
			}
			db, err := a.openReadyDB(ctx, cfg, log)
			if err != nil {
				return err
			}
			defer db.Close()
			cursors, err := db.Cursors().Cursors(ctx)
			if err != nil {
				return err
			}
			// Every connector, as configured (connectors.<name>.enabled), polled or
			// not: its cursor is kept under its source name (wb for wildberries).
			type configuredCursor struct {
				source, key string
				enabled     bool
			}
			var configured, returnsCursors []configuredCursor
			for _, acc := range cfg.Connectors.All() {
				if !acc.Polled() {
					continue // a Bitrix24 portal pushes: it has no cursor
				}
				on := acc.Enabled()
				configured = append(configured, configuredCursor{acc.Source, acc.Key(), on})
				// The returns' cursors, kept apart from the orders'.
				if ret, ok := acc.Returns(); ok {
					returnsCursors = append(returnsCursors, configuredCursor{connectors.ReturnsCursor(acc.Source), acc.Key() + ".returns", on && ret})
				}
			}
			configured = append(configured, returnsCursors...)
			type row struct {
				connectors.Cursor
				Enabled bool `json:"enabled"`
				// Config is the connector's section of the configuration.
				Config string `json:"config"`
			}
			byName := map[string]connectors.Cursor{}
			for _, c := range cursors {
				byName[c.Connector] = c
			}
			var rows []row
			for _, c := range configured {
				cur, ok := byName[c.source]
				if !ok {
					cur = connectors.Cursor{Connector: c.source}
				}
				delete(byName, c.source)
				rows = append(rows, row{cur, c.enabled, c.key})
			}
			for _, c := range cursors { // a connector this ordersync no longer knows
				if _, left := byName[c.Connector]; left {
					rows = append(rows, row{c, false, ""})
				}
			}
			if format == "json" {
				return writeJSON(a.stdout, rows)
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "CONNECTOR\tENABLED\tCURSOR\tLAST POLL\tLAST SUCCESS\tSEEN\tUNREADABLE\tLAST ERROR")
			when := func(t *time.Time) string {
				if t == nil || t.IsZero() {
					return "never"
				}
				return t.Local().Format("2006-01-02 15:04:05")
			}
			for _, r := range rows {
				pos := r.Position
				fmt.Fprintf(tw, "%s\t%v\t%s\t%s\t%s\t%d\t%d\t%s\n", r.Connector, r.Enabled, when(&pos), when(r.LastPollAt),
					when(r.LastSuccessAt), r.OrdersSeen, r.Unreadable, export.Clip(r.LastError, 200))
			}
			return tw.Flush()
		},
	}
	st.Flags().StringVar(&format, "format", "table", "output: table or json")
	c.AddCommand(st, a.connectorsCheckCommand())
	return c
}

// resyncMarketplace is `resync <connector> <id>`: fetch the order fresh, run it
// through the poller's registration, and carry its operations out now.
func (a *app) resyncMarketplace(ctx context.Context, name, id string, format string) error {
	cfg, err := a.loadConfigReading(a.use().secrets.and(readConnectors(name)))
	if err != nil {
		return err
	}
	log, err := a.logger(cfg)
	if err != nil {
		return err
	}
	if name == wildberries.Name {
		name = "wildberries" // the source's name, wb
	}
	ms, err := buildConnectors(cfg, log, name)
	if err != nil {
		return err
	}
	var m *marketplace
	for i := range ms {
		if ms[i].name == name || ms[i].mp.Name() == name {
			m = &ms[i]
		}
	}
	if m == nil {
		return usageError(fmt.Errorf("resync: no enabled connector %q (enabled: %s)", name, enabledNames(cfg)))
	}
	skus, err := skuMapOf(cfg.Connectors)
	if err != nil {
		return usageError(err)
	}
	db, err := a.openReadyDB(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer db.Close()

	it, err := m.mp.Get(ctx, id)
	if errors.Is(err, connectors.ErrNotFound) {
		return fmt.Errorf("resync: %s knows no order %q", name, id)
	}
	if err != nil {
		return fmt.Errorf("resync: fetch %s %s: %w", name, id, err)
	}
	poller := newPollers([]marketplace{*m}, db, skus, nil, log)[0]
	if _, err := poller.Handle(ctx, it); err != nil {
		return fmt.Errorf("resync: register %s %s: %w", name, id, err)
	}
	source := m.mp.Name()
	var keys []string
	before := map[string]journal.Status{}
	for _, key := range []string{it.CreateKey(source), it.CancelKey(source)} {
		op, err := db.Journal().Get(ctx, key)
		if errors.Is(err, journal.ErrNotFound) {
			continue // a cancelled order that did not map has no create; an order not cancelled has no cancel
		}
		if err != nil {
			return err
		}
		keys = append(keys, key)
		before[key] = op.Status
	}
	ops, err := worker{a: a, cfg: cfg, log: log, db: db}.runKeys(ctx, keys)
	if err != nil {
		return fmt.Errorf("resync %s", err)
	}
	failed := false
	var results []resyncOutput
	for _, op := range ops {
		results = append(results, resyncOutput{Key: op.Key, Status: string(op.Status), Rerun: before[op.Key] != journal.StatusDone,
			Attempts: op.Attempts, Result: op.Result, LastError: op.LastError})
		failed = failed || op.Status != journal.StatusDone
	}
	if format == "json" {
		if err := writeJSON(a.stdout, results); err != nil {
			return err
		}
	} else {
		for _, r := range results {
			a.printResync(r)
		}
	}
	if failed {
		return failedQuietly(errors.New("not done"))
	}
	return nil
}

// enabledNames says which connectors the configuration enables, "none" when none
// does.
func enabledNames(cfg *config.Config) string {
	var names []string
	for _, acc := range cfg.Connectors.Enabled() {
		if acc.Polled() {
			names = append(names, acc.Name)
		}
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

func connectorNames(ms []marketplace) string {
	if len(ms) == 0 {
		return "none"
	}
	var names []string
	for _, m := range ms {
		names = append(names, m.name)
	}
	return strings.Join(names, ", ")
}

// skuMapOf opens connectors.sku_map for the configuration's accounts: a further
// account's lines and its fallback on its marketplace's.
func skuMapOf(c config.Connectors) (*connectors.SKUMap, error) {
	return connectors.NewSKUMapFor(c.SKUMap, c.SKUAliases())
}
