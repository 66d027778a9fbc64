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
	"github.com/ordersync/ordersync/connectors/uzum"
	"github.com/ordersync/ordersync/connectors/wildberries"
	"github.com/ordersync/ordersync/connectors/yandexmarket"
	"github.com/ordersync/ordersync/internal/config"
	"github.com/ordersync/ordersync/internal/outbox"
	lifecycle "github.com/ordersync/ordersync/internal/service"
	"github.com/ordersync/ordersync/internal/stock"
	"github.com/ordersync/ordersync/internal/stock/publish"
	"github.com/ordersync/ordersync/internal/stock/refresh"
	"github.com/ordersync/ordersync/internal/store"
)

// accountSender is an account's stock sender under the account's name, the
// name its schedules publish to (stock.Destination), its states are kept under
// and its reserves hold for.
type accountSender struct {
	stock.Sender
	name string
}

func (s accountSender) Marketplace() string { return s.name }

// stockSender is the stock sender of one enabled account, nil when the account
// is sent no stock (no warehouse map; Kaspi, which pulls a feed).
func stockSender(acc config.Account, mp connectors.Marketplace) (stock.Sender, error) {
	var sender stock.Sender
	switch conn := mp.(type) {
	case *ozon.Connector:
		if len(acc.Ozon.StockWarehouses) == 0 {
			return nil, nil
		}
		whs := map[string]int64{}
		for wh, id := range acc.Ozon.StockWarehouses {
			n, err := strconv.ParseInt(id, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("%s.stock_warehouses.%s: %q is not an Ozon warehouse id", acc.Key(), wh, id)
			}
			whs[wh] = n
		}
		s, err := conn.StockSender(ozon.StockConfig{Warehouses: whs})
		if err != nil {
			return nil, err
		}
		sender = s
	case *wildberries.Connector:
		w := acc.Wildberries
		if len(w.StockWarehouses) == 0 {
			return nil, nil
		}
		s, err := conn.StockSender(wildberries.StockConfig{ContentURL: w.ContentURL, Warehouses: w.StockWarehouses, Timeout: w.Timeout})
		if err != nil {
			return nil, err
		}
		sender = s
	case *yandexmarket.Connector:
		y := acc.YandexMarket
		if y.StockWarehouse == "" {
			return nil, nil
		}
		s, err := conn.StockSender(yandexmarket.StockConfig{Warehouse: y.StockWarehouse, API: y.StockAPI,
			PartnerWarehouseID: y.PartnerWarehouseID})
		if err != nil {
			return nil, err
		}
		sender = s
	case *uzum.Connector:
		if acc.Uzum.StockWarehouse == "" {
			return nil, nil
		}
		s, err := conn.StockSender(uzum.StockConfig{Warehouse: acc.Uzum.StockWarehouse})
		if err != nil {
			return nil, err
		}
		sender = s
	default:
		return nil, nil
	}
	return accountSender{Sender: sender, name: acc.Name}, nil
}

// stockPublishers are the outbox destinations that publish stock (ozon-stock,
// ozon-ip-stock, yandex_market-stock): one per enabled account with a stock
// warehouse map.
func stockPublishers(cfg *config.Config, db store.DB, markets []marketplace, skus *connectors.SKUMap, log *slog.Logger) (map[string]outbox.Publisher, error) {
	pubs := map[string]outbox.Publisher{}
	for _, m := range markets {
		acc, ok := cfg.Connectors.Account(m.name)
		if !ok {
			continue
		}
		sender, err := stockSender(acc, m.mp)
		if err != nil {
			return nil, usageError(fmt.Errorf("config: %w", err))
		}
		if sender == nil {
			continue
		}
		mp := sender.Marketplace()
		// The relay starts a step of a publish only while the step's time is left of
		// its lease: one that never fits would never be sent.
		if room := cfg.Relay.Lease - min(cfg.Relay.Lease/10, 5*time.Second); sender.Timeout() >= room {
			return nil, usageError(fmt.Errorf("config: relay.lease (%s) leaves %s for one stock request to %s, which may take %s "+
				"(%s.timeout and the rate limit's wait): raise relay.lease or lower %s.timeout",
				cfg.Relay.Lease, room, mp, sender.Timeout().Round(time.Millisecond), acc.Key(), acc.Key()))
		}
		source := acc.Source // the SKU map's name of the account
		pubs[stock.Destination(mp)] = publish.New(publish.Config{
			Sender: sender, Store: db.Stock(), FullRefresh: cfg.Stock.FullRefresh, Reserves: cfg.Stock.Reserves(),
			Pending:    pendingOf(db),
			MarketSKUs: func(sku string) []string { return skus.MarketSKUs(source, sku) },
			SKUMapPath: skus.Path(), MapName: source,
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
		Reserves: cfg.Stock.Reserves(), Pending: pendingOf(db),
		MerchantID: k.MerchantID, SKUMap: skus, Location: cfg.Stock.Location(), Logger: log.With("component", "kaspi-feed")})
	if err != nil {
		return nil, usageError(fmt.Errorf("config: %w", err))
	}
	return f, nil
}

// readBacker is a stock sender that can read back what the marketplace holds.
type readBacker interface {
	ReadBack(ctx context.Context, skus []string) (map[string]int64, error)
}

// readBack is a readBacker as a stock.Reader.
type readBack struct{ r readBacker }

func (r readBack) ReadStock(ctx context.Context, _ string, skus []string) (map[string]int64, error) {
	return r.r.ReadBack(ctx, skus)
}

// stockReadBack returns, for `stock show --sku`, the reader of an account whose
// sender can read its stock back (Yandex Market), nil for the others. It reads
// that account's credentials only when asked, so a read-only command that does
// not ask needs none; an account that cannot be built reads nothing back.
func (a *app) stockReadBack(log *slog.Logger) func(account string) stock.Reader {
	return func(account string) stock.Reader {
		cfg, err := a.loadConfigReading(a.use().secrets.and(readConnectors(account)))
		if err != nil {
			return nil
		}
		acc, ok := cfg.Connectors.Account(account)
		if !ok || !acc.Enabled() {
			return nil
		}
		m, err := buildAccount(acc, log.With("connector", acc.Name))
		if err != nil {
			return nil
		}
		sender, err := stockSender(acc, m.mp)
		if err != nil || sender == nil {
			return nil
		}
		if r, ok := sender.(accountSender).Sender.(readBacker); ok {
			return readBack{r}
		}
		return nil
	}
}
