package engine_test

import (
	"testing"
	"time"

	"github.com/ordersync/ordersync/internal/onec"
	"github.com/ordersync/ordersync/internal/onec/odata"
	"github.com/ordersync/ordersync/internal/onec/wire"
	"github.com/ordersync/ordersync/internal/sim/odatasim"
)

// BenchmarkCreatesByInterface drains registered orders through each 1C interface
// in the same run, against its simulator with the same latency on every request:
// the HTTP service costs a find and a create per order; the standard OData
// interface a find, the create, a read-back, the post and a read-back after it
// (the item lookup is cached after the first orders). The requests are counted in
// the simulator, not taken from the client: ideal is what the latency alone
// allows at that concurrency for the requests each order cost there, and
// requests/order is that count.
func BenchmarkCreatesByInterface(b *testing.B) {
	const (
		latency = 200 * time.Millisecond
		workers = 8
	)
	for _, tc := range []struct {
		name   string
		client func(b *testing.B) (c onec.Client, count, requests func() int)
	}{
		{"interface=httpservice", func(b *testing.B) (onec.Client, func() int, func() int) {
			s, c := benchOneC(b, map[string]time.Duration{"find": latency, "create": latency}, workers)
			return c, s.Count, func() int { return sum(s.Stats().Requests) }
		}},
		{"interface=odata", func(b *testing.B) (onec.Client, func() int, func() int) {
			s := odatasim.New(odatasim.Options{Latency: latency})
			if err := s.Start("127.0.0.1:0"); err != nil {
				b.Fatal(err)
			}
			b.Cleanup(s.Close)
			base := s.Seed([]string{"site"}, []string{"SKU-8812"})
			c, err := odata.New(odata.Config{
				Wire:    wire.Config{BaseURL: s.URL(), MaxConcurrency: workers, Timeout: 10 * time.Second},
				Profile: odata.Profiles["ut11"], Organization: base.Organization, Warehouse: base.Warehouse, Currency: base.Currency,
				Sources: map[string]odata.SourceRefs{"site": {Partner: base.Sources["site"].Partner, Counterparty: base.Sources["site"].Counterparty}},
			})
			if err != nil {
				b.Fatal(err)
			}
			return c, func() int { return len(s.Orders()) }, func() int { return sum(s.Requests()) }
		}},
	} {
		b.Run(tc.name+"/latency=200ms/max_concurrency=8", func(b *testing.B) {
			st := newBenchStore(b, "postgres", workers)
			c, count, requests := tc.client(b)
			n := max(b.N, benchInterfaceOrders)
			benchOrders(b, st.journal, n)
			st.analyze(b)
			before := requests()
			elapsed := drainTimed(b, st.journal, c, workers, n)
			if got := count(); got != n {
				b.Fatalf("1C holds %d orders, want %d", got, n)
			}
			perOrder := float64(requests()-before) / float64(n)
			rate := float64(n) / elapsed.Seconds()
			b.ReportMetric(rate, "orders/s")
			b.ReportMetric(perOrder, "requests/order")
			ideal := float64(workers) / (perOrder * latency.Seconds())
			b.ReportMetric(100*rate/ideal, "%-of-ideal")
		})
	}
}

// benchInterfaceOrders is how many orders BenchmarkCreatesByInterface drains at
// least: enough rounds of the workers that the first round (every worker looking
// up the item at once) and the last, partly idle, weigh little.
const benchInterfaceOrders = 10 * 8

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
