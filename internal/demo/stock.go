package demo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ordersync/ordersync/internal/sim/kaspisim"
	"github.com/ordersync/ordersync/internal/stock"
)

// 11. Stock: the schedule's snapshot of WH1 reaches Ozon and Wildberries through
// the outbox, and Kaspi pulls it from the service's feed (then gets 304).
func (d *script) stock(ctx context.Context) (string, error) {
	var snap stock.Snapshot
	published := map[string]stock.Publish{}
	err := d.waitFor(ctx, 30*time.Second, "a snapshot of WH1 published to Ozon and Wildberries", func() (bool, error) {
		for _, mp := range []string{stock.Ozon, stock.Wildberries} {
			ps, err := d.db.Stock().Publishes(ctx, stock.PublishFilter{Marketplace: mp, Warehouse: "WH1", Limit: 100})
			if err != nil {
				return false, err
			}
			for _, p := range ps {
				if p.FinishedAt != nil && p.Published > 0 {
					published[mp] = p
				}
			}
			if _, ok := published[mp]; !ok {
				return false, nil
			}
		}
		s, err := d.db.Stock().Snapshot(ctx, published[stock.Ozon].SnapshotKey)
		snap = s
		return err == nil, err
	})
	if err != nil {
		return "", err
	}
	// What the marketplaces hold is what 1C holds, in whole units.
	for _, it := range wh1Stock {
		want, _ := stock.Amount(it.Quantity, 0)
		if got, ok := d.sims.ozon.Stock(it.SKU, ozonWarehouse); !ok || got != want {
			return "", fmt.Errorf("Ozon holds %d of %s (known %v), 1C %s", got, it.SKU, ok, it.Quantity)
		}
	}
	wb := d.sims.wb.StockAmounts(wbWarehouse)
	if len(wb) != len(wh1Stock) {
		return "", fmt.Errorf("Wildberries holds %d items of warehouse %d, want %d", len(wb), wbWarehouse, len(wh1Stock))
	}
	feedURL := d.svc.webhooks + "/feeds/kaspi/" + d.sims.feedToken + ".xml"
	kaspi := kaspisim.NewFeedPuller(feedURL, kaspisim.FeedOptions{})
	var offers int
	err = d.waitFor(ctx, 10*time.Second, "Kaspi's pull of the price list", func() (bool, error) {
		if _, err := kaspi.Pull(ctx); err != nil {
			return false, err
		}
		c, ok := kaspi.Catalog()
		offers = len(c.Offers)
		return ok && offers == len(wh1Stock), nil
	})
	if err != nil {
		return "", err
	}
	if p, ok := kaspi.Offer("SKU-IRON"); !ok || len(p.Stores) != 1 || p.Stores[kaspiStore].Available {
		return "", errors.New(`the Kaspi feed does not list SKU-IRON, out of stock, as available="no" at ` + kaspiStore)
	}
	if _, err := kaspi.Pull(ctx); err != nil {
		return "", err
	}
	if st := kaspi.Stats(); st.NotModified < 1 {
		return "", fmt.Errorf("Kaspi's second pull got %d, want 304 Not Modified", st.LastStatus)
	}
	return fmt.Sprintf("%s, %d items: Ozon took %d, Wildberries %d (read back), Kaspi's feed lists %d offers, then 304",
		snap.Key, snap.ItemCount, published[stock.Ozon].Published, published[stock.Wildberries].Published, offers), nil
}
