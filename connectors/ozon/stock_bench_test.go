package ozon_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/ordersync/ordersync/connectors/ozon"
	"github.com/ordersync/ordersync/internal/outbox"
	"github.com/ordersync/ordersync/internal/sim/ozonsim"
	"github.com/ordersync/ordersync/internal/stock"
)

// BenchmarkStockSender publishes 50,000 items (500 requests of 100) through the
// sender to the simulator on the wall clock. At Ozon's 80 requests a minute that
// takes over 6 minutes, so the rate is scaled: the sender and the simulator both
// count 80 requests per window, the window a second (60 times faster; the
// simulator's 30-s rule is scaled alike). Metrics:
//
//	items/min  items published per minute, the scale undone (Ozon's limit: 8000)
//	%limit     that as a share of the limit, in percent (the limiter's 1%
//	           margin keeps it near 99)
//	violations the simulator's record of broken rules (0 expected; on a loaded
//	           machine the requests' travel time can vary by more than the
//	           margin at this scale, which a real minute absorbs)
//	429s       requests the simulator answered 429
func BenchmarkStockSender(b *testing.B) {
	for _, window := range []time.Duration{time.Second} {
		b.Run(fmt.Sprintf("window=%s", window), func(b *testing.B) { benchStockSender(b, window) })
	}
}

func benchStockSender(b *testing.B, window time.Duration) {
	const items, batch = 50000, 100
	scale := float64(time.Minute) / float64(window)
	s := ozonsim.New(ozonsim.Options{ClientID: clientID, APIKey: apiKey})
	s.SetStockLimits(ozonsim.StockLimits{Window: window, Resend: time.Duration(float64(30*time.Second) / scale)})
	ts := httptest.NewServer(s)
	b.Cleanup(ts.Close)
	c, err := ozon.New(ozon.Config{BaseURL: ts.URL, ClientID: clientID, APIKey: apiKey, RatePerSecond: -1})
	if err != nil {
		b.Fatal(err)
	}
	sender, err := c.StockSender(ozon.StockConfig{Warehouses: map[string]int64{"WH1": ozonWH}, Window: window})
	if err != nil {
		b.Fatal(err)
	}
	ups := make([]stock.Update, items)
	offers := make([]string, items)
	for i := range ups {
		offers[i] = fmt.Sprintf("OF-%05d", i)
		ups[i] = stock.Update{SKU: fmt.Sprintf("SKU-%05d", i), MarketSKU: offers[i], Amount: int64(i % 1000)}
	}
	s.AddOffers(offers...)
	ctx := context.Background()
	published := 0
	b.ResetTimer()
	start := time.Now()
	for b.Loop() {
		for i := 0; i < items; i += batch {
			rs, err := sender.Send(ctx, "WH1", ups[i:min(i+batch, items)])
			var de *outbox.DeliveryError
			if errors.As(err, &de) && de.RetryAfter > 0 {
				time.Sleep(de.RetryAfter) // as the relay would, then the batch again
				i -= batch
				continue
			}
			if err != nil {
				b.Fatal(err)
			}
			for _, r := range rs {
				if r.Outcome == stock.Published {
					published++
				}
			}
		}
	}
	elapsed := time.Since(start)
	b.StopTimer()
	perMinute := float64(published) / elapsed.Minutes() / scale
	limit := float64(ozon.StockRequestsPerMinute * ozon.StockBatchSize)
	b.ReportMetric(perMinute, "items/min")
	b.ReportMetric(100*perMinute/limit, "%limit")
	b.ReportMetric(float64(len(s.StockViolations())), "violations")
	b.ReportMetric(float64(s.StockRateLimited()), "429s")
}
