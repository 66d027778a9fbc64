package yandexmarket

import "golang.org/x/time/rate"

// StockRequestPace is the business sender's request limiter: its rate and
// burst; ok is false for a campaign sender.
func StockRequestPace(s *StockSender) (limit rate.Limit, burst int, ok bool) {
	if s.business == nil {
		return 0, 0, false
	}
	return s.business.lim.Limit(), s.business.lim.Burst(), true
}

// UnpaceStockRequests lets a test send business batches without the limiter's
// waits.
func UnpaceStockRequests(s *StockSender) { s.business.lim.SetLimit(rate.Inf) }
