package main

import (
	"log/slog"
	"net/http"

	"github.com/ordersync/ordersync/connectors/yandexmarket"
	"github.com/ordersync/ordersync/internal/config"
)

// buildYandexMarket builds a Yandex Market account's connector into m.
func buildYandexMarket(acc config.Account, log *slog.Logger, bound func(int64) http.RoundTripper, m *marketplace) error {
	y := acc.YandexMarket
	conn, err := yandexmarket.New(yandexmarket.Config{Source: acc.Source, BaseURL: y.BaseURL, APIKey: y.APIKey,
		BusinessID: y.BusinessID, CampaignID: y.CampaignID, OrdersAPI: y.OrdersAPI, Warehouse: y.Warehouse,
		PageSize: y.PageSize, Timeout: y.Timeout, RatePerSecond: float64(y.RatePerSecond), Acknowledge: y.Acknowledge,
		Logger: log, Transport: bound(y.MaxResponse)})
	if err != nil {
		return err
	}
	m.mp, m.interval, m.lookback = conn, y.PollInterval, y.Lookback
	if y.Acknowledge {
		m.ack = conn.Publisher()
	}
	return nil
}
