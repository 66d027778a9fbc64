package demo

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/ordersync/ordersync/internal/sim/kaspisim"
	"github.com/ordersync/ordersync/internal/sim/onecsim"
	"github.com/ordersync/ordersync/internal/stock"
)

// 12. Stock: the schedule's snapshot of WH1 (over OData, the seeded warehouse)
// reaches Ozon and Wildberries through the outbox, and Kaspi pulls it from the
// service's feed (then gets 304).
func (d *script) stock(ctx context.Context) (string, error) {
	wh := d.onec.warehouse()
	want := d.onec.snapshot(wh1Stock) // what a snapshot reads of 1C's stock
	var snap stock.Snapshot
	published := map[string]stock.Publish{}
	err := d.waitFor(ctx, 30*time.Second, "a snapshot of "+wh+" published to Ozon and Wildberries", func() (bool, error) {
		for _, mp := range []string{stock.Ozon, stock.Wildberries} {
			ps, err := d.db.Stock().Publishes(ctx, stock.PublishFilter{Marketplace: mp, Warehouse: wh, Limit: 100})
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
	if snap.ItemCount != len(want) {
		return "", fmt.Errorf("snapshot %s holds %d items, want %d", snap.Key, snap.ItemCount, len(want))
	}
	// What the marketplaces hold is what 1C holds, in whole units, of the items
	// they sell (wh1Stock's: they have cards of no other), less what the orders
	// not yet in 1C at the publish held: never more than 1C.
	heldBack := 0
	for _, it := range want[:len(wh1Stock)] {
		amount, _ := stock.Amount(it.Quantity, 0)
		got, ok := d.sims.ozon.Stock(it.SKU, ozonWarehouse)
		if !ok || got > amount || got < 0 {
			return "", fmt.Errorf("Ozon holds %d of %s (known %v), 1C %s: never more than 1C", got, it.SKU, ok, it.Quantity)
		}
		if got < amount {
			heldBack++
		}
	}
	wb := d.sims.wb.StockAmounts(wbWarehouse)
	if len(wb) != len(wh1Stock) {
		return "", fmt.Errorf("Wildberries holds %d items of warehouse %d, want %d", len(wb), wbWarehouse, len(wh1Stock))
	}
	what := fmt.Sprintf("%s, %d items", snap.Key, snap.ItemCount)
	what += fmt.Sprintf(": Ozon took %d, Wildberries %d (read back), ", published[stock.Ozon].Published, published[stock.Wildberries].Published)
	if heldBack > 0 {
		what += fmt.Sprintf("%d SKUs less what orders not yet in 1C hold, ", heldBack)
	}
	kaspi := kaspisim.NewFeedPuller(d.svc.webhooks+"/feeds/kaspi/"+d.sims.feedToken+".xml", kaspisim.FeedOptions{})
	if !slices.ContainsFunc(want, func(it onecsim.StockItem) bool { return it.Price.IsPositive() }) {
		feed, err := d.kaspiRefusesUnpriced(ctx, kaspi)
		return what + feed, err
	}
	feed, err := d.kaspiPulls(ctx, kaspi, len(want))
	return what + feed, err
}

// kaspiPulls: Kaspi's pull of the price list lists every item, SKU-IRON (sold
// out) as not available; the next pull is answered 304.
func (d *script) kaspiPulls(ctx context.Context, kaspi *kaspisim.FeedPuller, items int) (string, error) {
	var offers int
	err := d.waitFor(ctx, 10*time.Second, "Kaspi's pull of the price list", func() (bool, error) {
		if _, err := kaspi.Pull(ctx); err != nil {
			return false, err
		}
		c, ok := kaspi.Catalog()
		offers = len(c.Offers)
		return ok && offers == items, nil
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
	return fmt.Sprintf("Kaspi's feed lists %d offers, then 304", offers), nil
}

// kaspiRefusesUnpriced: a snapshot without prices (OData without
// onec.odata.price_type) gives Kaspi no offer, and the feed answers 503 rather
// than an empty price list, which would take every offer off sale.
func (d *script) kaspiRefusesUnpriced(ctx context.Context, kaspi *kaspisim.FeedPuller) (string, error) {
	err := d.waitFor(ctx, 10*time.Second, "Kaspi's pull of the price list refused for want of prices", func() (bool, error) {
		res, err := kaspi.Pull(ctx)
		if err == nil {
			return false, fmt.Errorf("the feed answered %d to a snapshot without prices, want 503", res.Status)
		}
		return res.Status == http.StatusServiceUnavailable && strings.Contains(err.Error(), "price above zero"), nil
	})
	if err != nil {
		return "", err
	}
	return "Kaspi's feed answers 503, no item having a price (onec.odata.price_type is not set)", nil
}
