package config

import (
	"fmt"
	"strconv"
	"time"
)

// YandexMarket is the Yandex Market Partner API connector (FBS orders of one
// campaign; Api-Key header).
type YandexMarket struct {
	Type    string `koanf:"type"`
	Enabled bool   `koanf:"enabled"`
	BaseURL string `koanf:"base_url"`
	APIKey  string `koanf:"api_key" secret:"true"`
	// BusinessID (the cabinet) and CampaignID (the shop's campaign) are two
	// different numbers, and both differ from the shop id the cabinet shows;
	// `ordersync connectors check` tells a swapped one.
	BusinessID string `koanf:"business_id" number:"text"`
	CampaignID string `koanf:"campaign_id" number:"text"`
	// OrdersAPI is the listing read: campaign (GET v2/campaigns/{id}/orders) or
	// business (POST v1/businesses/{id}/orders).
	OrdersAPI    string        `koanf:"orders_api"`
	PollInterval time.Duration `koanf:"poll_interval"`
	Lookback     time.Duration `koanf:"lookback"`
	Warehouse    string        `koanf:"warehouse"`
	// Acknowledge writes 1C's number to the order and moves it to READY_TO_SHIP
	// once 1C holds it.
	Acknowledge   bool          `koanf:"acknowledge"`
	PageSize      int           `koanf:"page_size"`
	Timeout       time.Duration `koanf:"timeout"`
	RatePerSecond int           `koanf:"rate_per_second"`
	MaxResponse   int64         `koanf:"max_response"`
	// StockAPI is where stock goes: campaign (PUT v2/campaigns/{id}/offers/stocks)
	// or business (POST v3/businesses/{id}/offers/stocks/update, for a cabinet
	// without warehouse groups).
	StockAPI string `koanf:"stock_api"`
	// StockWarehouse is the 1C warehouse whose stock the campaign is told.
	StockWarehouse string `koanf:"stock_warehouse"`
	// PartnerWarehouseID is the seller's warehouse at Yandex Market that stock_api
	// business updates (partnerWarehouseId).
	PartnerWarehouseID string      `koanf:"partner_warehouse_id" number:"text"`
	OneC               OneCMapping `koanf:"onec"`
}

// Uzum is the Uzum Market seller API connector (FBS orders of the seller's shops;
// the bare key in Authorization).
type Uzum struct {
	Type    string `koanf:"type"`
	Enabled bool   `koanf:"enabled"`
	BaseURL string `koanf:"base_url"`
	Token   string `koanf:"token" secret:"true"`
	// ShopIDs are the seller's shops whose orders are listed (shopIds).
	ShopIDs      []string      `koanf:"shop_ids"`
	PollInterval time.Duration `koanf:"poll_interval"`
	Lookback     time.Duration `koanf:"lookback"`
	Warehouse    string        `koanf:"warehouse"`
	// Acknowledge confirms each order once 1C holds it.
	Acknowledge bool          `koanf:"acknowledge"`
	PageSize    int           `koanf:"page_size"`
	Timeout     time.Duration `koanf:"timeout"`
	// RatePerSecond: Uzum publishes no limit; this is the pace kept.
	RatePerSecond int   `koanf:"rate_per_second"`
	MaxResponse   int64 `koanf:"max_response"`
	// StockWarehouse is the 1C warehouse whose stock the shop is told.
	StockWarehouse string      `koanf:"stock_warehouse"`
	OneC           OneCMapping `koanf:"onec"`
}

// The APIs a Yandex Market account reads orders from and sends stock to.
const (
	YMCampaignAPI = "campaign"
	YMBusinessAPI = "business"
)

func defaultYandexMarket() YandexMarket {
	return YandexMarket{
		Type:          TypeYandexMarket,
		BaseURL:       "https://api.partner.market.yandex.ru",
		OrdersAPI:     YMCampaignAPI,
		StockAPI:      YMCampaignAPI,
		PollInterval:  time.Minute,
		Lookback:      72 * time.Hour,
		PageSize:      50,
		Timeout:       30 * time.Second,
		RatePerSecond: 2,
		MaxResponse:   defaultConnectorMaxResponse,
	}
}

func defaultUzum() Uzum {
	return Uzum{
		Type:          TypeUzum,
		BaseURL:       "https://api-seller.uzum.uz/api/seller-openapi",
		PollInterval:  time.Minute,
		Lookback:      72 * time.Hour,
		PageSize:      50,
		Timeout:       30 * time.Second,
		RatePerSecond: 3,
		MaxResponse:   defaultConnectorMaxResponse,
	}
}

func (y YandexMarket) validate(key string, p *problems) {
	if !y.Enabled {
		return
	}
	connectorCommon{key: key, baseURL: y.BaseURL, pollInterval: y.PollInterval, lookback: y.Lookback,
		warehouse: y.Warehouse, pageSize: y.PageSize, maxPageSize: 50, timeout: y.Timeout,
		rate: y.RatePerSecond, maxResponse: y.MaxResponse}.validate(p)
	requireSecret(key, "api_key", y.APIKey, p)
	checkWholeID(key+".campaign_id", y.CampaignID, "the campaign id (Настройки → API и модули, not the shop id the cabinet shows)", true, p)
	needBusiness := y.OrdersAPI == YMBusinessAPI || y.StockAPI == YMBusinessAPI
	checkWholeID(key+".business_id", y.BusinessID, "the business (cabinet) id, which orders_api or stock_api business needs", needBusiness, p)
	for k, v := range map[string]string{"orders_api": y.OrdersAPI, "stock_api": y.StockAPI} {
		if v != YMCampaignAPI && v != YMBusinessAPI {
			p.add(key+"."+k, fmt.Sprintf("must be %s or %s, got %q", YMCampaignAPI, YMBusinessAPI, v))
		}
	}
	if y.OrdersAPI == YMBusinessAPI && y.Lookback > 30*24*time.Hour {
		p.add(key+".lookback", "must be at most 720h with orders_api business: the business listing reads at most 30 days")
	}
	checkWholeID(key+".partner_warehouse_id", y.PartnerWarehouseID, "the warehouse id at Yandex Market that stock_api business updates",
		y.StockAPI == YMBusinessAPI && y.StockWarehouse != "", p)
	if hasControl(y.StockWarehouse) {
		p.add(key+".stock_warehouse", "must not contain line breaks or other control characters")
	}
}

func (u Uzum) validate(key string, p *problems) {
	if !u.Enabled {
		return
	}
	connectorCommon{key: key, baseURL: u.BaseURL, pollInterval: u.PollInterval, lookback: u.Lookback,
		warehouse: u.Warehouse, pageSize: u.PageSize, maxPageSize: 50, timeout: u.Timeout,
		rate: u.RatePerSecond, maxResponse: u.MaxResponse}.validate(p)
	requireSecret(key, "token", u.Token, p)
	if len(u.ShopIDs) == 0 {
		p.add(key+".shop_ids", "must list at least one shop id (the seller cabinet's shops)")
	}
	for i, id := range u.ShopIDs {
		checkWholeID(fmt.Sprintf("%s.shop_ids[%d]", key, i), id, "a shop id", true, p)
	}
	if hasControl(u.StockWarehouse) {
		p.add(key+".stock_warehouse", "must not contain line breaks or other control characters")
	}
}

// checkWholeID checks an id that is a whole number greater than 0, required or
// not; what says what it is.
func checkWholeID(key, v, what string, required bool, p *problems) {
	if v == "" {
		if required {
			p.add(key, "is required: "+what)
		}
		return
	}
	if n, err := strconv.ParseUint(v, 10, 64); err != nil || n == 0 {
		p.add(key, fmt.Sprintf("must be a whole number greater than 0 (%s), got %q", what, v))
	}
}
