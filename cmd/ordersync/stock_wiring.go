package main

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/shopspring/decimal"

	"github.com/ordersync/ordersync/connectors"
	"github.com/ordersync/ordersync/connectors/kaspi"
	"github.com/ordersync/ordersync/connectors/ozon"
	"github.com/ordersync/ordersync/connectors/wildberries"
	"github.com/ordersync/ordersync/internal/config"
	"github.com/ordersync/ordersync/internal/outbox"
	lifecycle "github.com/ordersync/ordersync/internal/service"
	"github.com/ordersync/ordersync/internal/stock"
	"github.com/ordersync/ordersync/internal/stock/publish"
	"github.com/ordersync/ordersync/internal/stock/refresh"
	"github.com/ordersync/ordersync/internal/store"
)

// skuMapName is a marketplace's name in the SKU map's first column.
func skuMapName(marketplace string) string {
	if marketplace == stock.Wildberries {
		return "wb"
	}
	return marketplace
}

// stockPublishers are the outbox destinations that publish stock (ozon-stock,
// wildberries-stock): one per enabled connector with stock warehouses.
func stockPublishers(cfg *config.Config, db store.DB, markets []marketplace, skus *connectors.SKUMap, log *slog.Logger) (map[string]outbox.Publisher, error) {
	pubs := map[string]outbox.Publisher{}
	for _, m := range markets {
		var sender stock.Sender
		switch conn := m.mp.(type) {
		case *ozon.Connector:
			if len(cfg.Connectors.Ozon.StockWarehouses) == 0 {
				continue
			}
			whs := map[string]int64{}
			for wh, id := range cfg.Connectors.Ozon.StockWarehouses {
				n, err := strconv.ParseInt(id, 10, 64)
				if err != nil {
					return nil, usageError(fmt.Errorf("config: connectors.ozon.stock_warehouses.%s: %q is not an Ozon warehouse id", wh, id))
				}
				whs[wh] = n
			}
			s, err := conn.StockSender(ozon.StockConfig{Warehouses: whs})
			if err != nil {
				return nil, usageError(fmt.Errorf("config: %w", err))
			}
			sender = s
		case *wildberries.Connector:
			w := cfg.Connectors.Wildberries
			if len(w.StockWarehouses) == 0 {
				continue
			}
			s, err := conn.StockSender(wildberries.StockConfig{ContentURL: w.ContentURL, Warehouses: w.StockWarehouses, Timeout: w.Timeout})
			if err != nil {
				return nil, usageError(fmt.Errorf("config: %w", err))
			}
			sender = s
		default:
			continue
		}
		mp := sender.Marketplace()
		// The relay starts a step of a publish only while the step's time is left of
		// its lease: one that never fits would never be sent.
		if room := cfg.Relay.Lease - min(cfg.Relay.Lease/10, 5*time.Second); sender.Timeout() >= room {
			return nil, usageError(fmt.Errorf("config: relay.lease (%s) leaves %s for one stock request to %s, which may take %s "+
				"(connectors.%s.timeout and the rate limit's wait): raise relay.lease or lower connectors.%s.timeout",
				cfg.Relay.Lease, room, mp, sender.Timeout().Round(time.Millisecond), mp, mp))
		}
		pubs[stock.Destination(mp)] = publish.New(publish.Config{
			Sender: sender, Store: db.Stock(), FullRefresh: cfg.Stock.FullRefresh, Reserves: cfg.Stock.Reserves(),
			Pending:    pendingOf(db),
			MarketSKUs: func(sku string) []string { return skus.MarketSKUs(skuMapName(mp), sku) },
			SKUMapPath: skus.Path(), MapName: skuMapName(mp),
			Logger: log.With("component", "stock", "marketplace", mp),
		})
	}
	return pubs, nil
}

// pendingOf reads, for a publish, what the orders registered and not yet created
// in 1C hold of a warehouse's SKUs.
func pendingOf(db store.DB) func(ctx context.Context, warehouse string) (map[string]decimal.Decimal, error) {
	return func(ctx context.Context, warehouse string) (map[string]decimal.Decimal, error) {
		p, err := stock.ReadPending(ctx, db.Journal(), warehouse)
		return p.BySKU, err
	}
}

// stockRefresh is the refresh of stock.refresh_after_order as a service of `run`
// (added before the group starts, it stops before the engine), nil when the key
// is 0. A warehouse is refreshed to the marketplaces its schedules publish it to.
func stockRefresh(cfg *config.Config, db store.DB, setup *stockSetup, wake func(), log *slog.Logger) *lifecycle.Background {
	rf := newStockRefresher(cfg, db, setup, wake, log)
	if rf == nil {
		return nil
	}
	return lifecycle.Go(func(ctx context.Context) { rf.Run(ctx) }, cfg.Worker.ShutdownTimeout)
}

func newStockRefresher(cfg *config.Config, db store.DB, setup *stockSetup, wake func(), log *slog.Logger) *refresh.Refresher {
	if cfg.Stock.RefreshAfterOrder <= 0 {
		return nil
	}
	return refresh.New(db.Journal(), refresh.Config{Within: cfg.Stock.RefreshAfterOrder, Warehouses: setup.warehouses(),
		PublishTo: setup.scheduledTo, Location: setup.loc, Wake: wake, Now: db.Now,
		Logger: log.With("component", "stock-refresh")})
}

// kaspiFeed is the Kaspi price list served on http.listen, nil when Kaspi has no
// feed configured.
func kaspiFeed(cfg *config.Config, db store.DB, skus *connectors.SKUMap, log *slog.Logger) (*kaspi.Feed, error) {
	k := cfg.Connectors.Kaspi
	if !k.Enabled || k.FeedToken == "" || len(k.Stores) == 0 {
		return nil, nil
	}
	if cfg.HTTP.Listen == "" {
		return nil, usageError(fmt.Errorf("config: connectors.kaspi.feed_token: the Kaspi feed is served on http.listen, which is empty"))
	}
	f, err := kaspi.NewFeed(db.Stock(), kaspi.FeedConfig{Token: k.FeedToken, Stores: k.Stores, Company: k.Company,
		MerchantID: k.MerchantID, SKUMap: skus, Location: cfg.Stock.Location(), Logger: log.With("component", "kaspi-feed")})
	if err != nil {
		return nil, usageError(fmt.Errorf("config: %w", err))
	}
	return f, nil
}
