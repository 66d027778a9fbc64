package wildberries

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/ordersync/ordersync/internal/sim/wbsim"
	"github.com/ordersync/ordersync/internal/stock"
)

// BenchmarkStockSend50k publishes a snapshot of 50,000 items to one warehouse, in
// batches of 1000 (a PUT and a read-back each), against the simulator with the
// documented limit of the stock methods (300 requests a minute, bursts of 20)
// scaled by ORDERSYNC_BENCH_WB_SCALE (default 10; 1 is Wildberries' own rate, 20 s
// an iteration), the sender scaled alike. It reports the request rate reached as a
// share of the limit (of_limit: 1 is the limit), items a second, and the
// simulator's violations (requests beyond the limit), which must be 0.
//
//	go test ./connectors/wildberries/ -run '^$' -bench StockSend50k -benchtime 3x
func BenchmarkStockSend50k(b *testing.B) {
	const items = 50_000
	scale := 10.0
	if v := os.Getenv("ORDERSYNC_BENCH_WB_SCALE"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f <= 0 {
			b.Fatalf("ORDERSYNC_BENCH_WB_SCALE=%q: want a positive number", v)
		}
		scale = f
	}
	s, snd := newStockTestOn(b, time.Now, func(c *StockConfig) { c.RateScale = scale })
	s.SetStockLimit(wbsim.StockPerMinute*scale, wbsim.StockBurst)
	// 500 cards of 100 sizes: the updates name the sizes' barcodes.
	for c := range items / 100 {
		card := wbsim.Card{NmID: int64(c + 1), VendorCode: fmt.Sprintf("V%05d", c)}
		for k := range 100 {
			chrt := int64(c*100 + k + 1)
			card.Sizes = append(card.Sizes, wbsim.Size{ChrtID: chrt, Skus: []string{fmt.Sprintf("46%011d", chrt)}})
		}
		s.AddCard(card)
	}
	ctx := context.Background()
	if _, err := snd.cards.cards(ctx); err != nil {
		b.Fatal(err)
	}
	batches := make([][]stock.Update, 0, items/StockBatchSize)
	for i := 0; i < items; i += StockBatchSize {
		batch := make([]stock.Update, StockBatchSize)
		for k := range batch {
			chrt := i + k + 1
			batch[k] = stock.Update{SKU: fmt.Sprint("SKU-", chrt), MarketSKU: fmt.Sprintf("46%011d", chrt), Amount: int64(chrt % 1000)}
		}
		batches = append(batches, batch)
	}
	before := s.StockStats()

	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		for _, batch := range batches {
			res, err := snd.Send(ctx, "WH1", batch)
			if err != nil {
				b.Fatal(err)
			}
			for _, r := range res {
				if r.Outcome != stock.Published {
					b.Fatalf("%+v", r)
				}
			}
		}
	}
	elapsed := time.Since(start)
	b.StopTimer()

	st := s.StockStats()
	requests := float64(st.Updates + st.Reads - before.Updates - before.Reads)
	limit := wbsim.StockPerMinute / 60.0 * scale // requests a second
	b.ReportMetric(requests/elapsed.Seconds()/limit, "of_limit")
	b.ReportMetric(requests/elapsed.Seconds(), "req/s")
	b.ReportMetric(float64(b.N*items)/elapsed.Seconds(), "items/s")
	b.ReportMetric(float64(len(s.Violations())), "violations")
}
