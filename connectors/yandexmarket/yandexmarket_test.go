package yandexmarket_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/ordersync/ordersync/connectors"
	"github.com/ordersync/ordersync/connectors/yandexmarket"
	"github.com/ordersync/ordersync/internal/sim/ymsim"
)

const (
	apiKey   = "ym-key"
	business = 5150001
	campaign = 21000777
	other    = 21000999 // another shop of the cabinet
)

func startSim(t *testing.T, opts ymsim.Options) *ymsim.YM {
	t.Helper()
	opts.APIKey, opts.BusinessID, opts.Campaigns = apiKey, business, []int64{campaign, other}
	s := ymsim.New(opts)
	if err := s.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func newConn(t *testing.T, s *ymsim.YM, mod func(*yandexmarket.Config)) *yandexmarket.Connector {
	t.Helper()
	cfg := yandexmarket.Config{BaseURL: s.URL(), APIKey: apiKey, BusinessID: strconv.Itoa(business),
		CampaignID: strconv.Itoa(campaign), Warehouse: "WH-YM", RatePerSecond: -1, Acknowledge: true}
	if mod != nil {
		mod(&cfg)
	}
	c, err := yandexmarket.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func listAll(t *testing.T, c *yandexmarket.Connector, from, to time.Time) ([]connectors.Item, error) {
	t.Helper()
	var items []connectors.Item
	err := c.List(context.Background(), from, to, func(page []connectors.Item) error {
		items = append(items, page...)
		return nil
	})
	return items, err
}

func anOrder(id int64, created time.Time) ymsim.Order {
	return ymsim.Order{ID: id, CampaignID: campaign, CreationDate: created,
		Items: []ymsim.Item{{OfferID: "SKU-" + strconv.FormatInt(id%3, 10), OfferName: "Чайник", Count: 2,
			Price: decimal.RequireFromString("1499.90"), BuyerPrice: decimal.RequireFromString("1299.90")}}}
}

func byID(items []connectors.Item) map[string]connectors.Item {
	m := map[string]connectors.Item{}
	for _, it := range items {
		m[it.ID] = it
	}
	return m
}

// fill adds seven orders to import, a cancel, a delivered one, a bad one and one
// of another shop.
func fill(s *ymsim.YM, created time.Time) {
	for i := range 7 {
		s.AddOrder(anOrder(int64(1000+i), created))
	}
	cancelled := anOrder(2000, created)
	cancelled.Status, cancelled.Substatus = ymsim.StatusCancelled, ymsim.SubShopFailed
	s.AddOrder(cancelled)
	delivered := anOrder(3000, created)
	delivered.Status = ymsim.StatusDelivered
	s.AddOrder(delivered)
	s.AddRawOrder(4000, campaign, created, `{"id":4000,"status":"PROCESSING","substatus":"STARTED","currency":"RUR",`+
		`"creationDate":"`+created.Format("02-01-2006 15:04:05")+`","items":[{"offerId":"X","count":1,"price":"abc"}]}`)
	theirs := anOrder(5000, created)
	theirs.CampaignID = other
	s.AddOrder(theirs)
}

// TestListBothAPIs: pages followed to the end over either listing, the cancel and
// the bad order listed, the delivered one and the other shop's left out.
func TestListBothAPIs(t *testing.T) {
	t.Parallel()
	for _, api := range []string{yandexmarket.OrdersAPICampaign, yandexmarket.OrdersAPIBusiness} {
		t.Run(api, func(t *testing.T) {
			t.Parallel()
			s := startSim(t, ymsim.Options{})
			created := time.Now().Add(-2 * time.Hour).Truncate(time.Second)
			fill(s, created)
			c := newConn(t, s, func(cfg *yandexmarket.Config) { cfg.PageSize = 3; cfg.OrdersAPI = api })
			items, err := listAll(t, c, time.Now().Add(-72*time.Hour), time.Now())
			if err != nil {
				t.Fatal(err)
			}
			got := byID(items)
			if len(items) != 9 || len(got) != 9 {
				t.Fatalf("listed %d items (%d ids), want 9: 7 orders, the cancel and the bad one", len(items), len(got))
			}
			for _, id := range []string{"3000", "5000"} {
				if _, ok := got[id]; ok {
					t.Fatalf("%s was listed", id)
				}
			}
			o := got["1002"].Order
			if o == nil {
				t.Fatalf("1002: %+v", got["1002"])
			}
			if o.Source != "ym" || o.Currency != "RUB" || o.ExternalID != "1002" || o.Warehouse != "WH-YM" || len(o.Lines) != 1 ||
				o.Lines[0].SKU != "SKU-0" || o.Lines[0].Price.String() != "1499.9" || !o.Lines[0].Quantity.Equal(decimal.NewFromInt(2)) {
				t.Fatalf("1002 mapped as %+v", o)
			}
			if !o.CreatedAt.Equal(created) {
				t.Fatalf("created_at %v, want %v", o.CreatedAt, created)
			}
			if err := o.Validate(); err != nil {
				t.Fatalf("1002 does not validate: %v", err)
			}
			if cancel := got["2000"]; !cancel.Cancelled || cancel.CancelReason != ymsim.SubShopFailed || cancel.Order == nil {
				t.Fatalf("2000: %+v, want a mapped cancel with its substatus", cancel)
			}
			if bad := got["4000"]; bad.Err == nil || !strings.Contains(bad.Err.Error(), "items[0].price") {
				t.Fatalf("the bad order: %v, want an error naming items[0].price", bad.Err)
			}
			if n := s.Requests()["list_"+api]; n != 4 {
				t.Fatalf("%d listings, want 4 pages of the ten orders", n)
			}
		})
	}
}

// TestListWindowIsUpdatedAt: an order changed outside [from, to) is not listed.
func TestListWindowIsUpdatedAt(t *testing.T) {
	t.Parallel()
	s := startSim(t, ymsim.Options{})
	s.AddOrder(anOrder(1, time.Now().Add(-10*time.Hour)))
	s.AddOrder(anOrder(2, time.Now().Add(-time.Hour)))
	c := newConn(t, s, nil)
	items, err := listAll(t, c, time.Now().Add(-2*time.Hour), time.Now())
	if err != nil || len(items) != 1 || items[0].ID != "2" {
		t.Fatalf("%d items %v, want order 2 alone", len(items), err)
	}
}

// TestRateLimit420IsWaitedOut: 420 is retried after the wait its headers give, and
// no request comes inside that wait.
func TestRateLimit420IsWaitedOut(t *testing.T) {
	t.Parallel()
	s := startSim(t, ymsim.Options{})
	s.AddOrder(anOrder(1, time.Now().Add(-time.Hour)))
	s.Throttle(2)
	c := newConn(t, s, nil)
	items, err := listAll(t, c, time.Now().Add(-3*time.Hour), time.Now())
	if err != nil || len(items) != 1 {
		t.Fatalf("%d items, err %v; want 1", len(items), err)
	}
	if s.Throttled() != 2 || s.Violations() != 0 {
		t.Fatalf("throttled %d violations %d, want 2 and 0", s.Throttled(), s.Violations())
	}
}

func TestWrongKeyNamesIt(t *testing.T) {
	t.Parallel()
	s := startSim(t, ymsim.Options{})
	c := newConn(t, s, func(cfg *yandexmarket.Config) { cfg.APIKey = "wrong" })
	_, err := listAll(t, c, time.Now().Add(-time.Hour), time.Now())
	var ae *connectors.AuthError
	if !errors.As(err, &ae) || ae.Key != "connectors.yandex_market.api_key" {
		t.Fatalf("err %v, want an AuthError naming connectors.yandex_market.api_key", err)
	}
}

func TestGet(t *testing.T) {
	t.Parallel()
	s := startSim(t, ymsim.Options{})
	o := anOrder(77, time.Now().Add(-time.Hour))
	o.Status = ymsim.StatusDelivered
	s.AddOrder(o)
	c := newConn(t, s, nil)
	it, err := c.Get(context.Background(), "77")
	if err != nil || it.Order == nil || it.ID != "77" {
		t.Fatalf("get 77: %+v %v", it, err)
	}
	if _, err := c.Get(context.Background(), "404"); !errors.Is(err, connectors.ErrNotFound) {
		t.Fatalf("get 404: %v, want ErrNotFound", err)
	}
}

func TestNewNamesTheKey(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cfg  yandexmarket.Config
		want string
	}{
		{yandexmarket.Config{CampaignID: "1"}, "connectors.yandex_market.api_key"},
		{yandexmarket.Config{APIKey: "k"}, "connectors.yandex_market.campaign_id"},
		{yandexmarket.Config{APIKey: "k", CampaignID: "x"}, "connectors.yandex_market.campaign_id"},
		{yandexmarket.Config{APIKey: "k", CampaignID: "1", OrdersAPI: "business"}, "connectors.yandex_market.business_id"},
		{yandexmarket.Config{APIKey: "k", CampaignID: "1", OrdersAPI: "shop"}, "connectors.yandex_market.orders_api"},
		{yandexmarket.Config{APIKey: "k", CampaignID: "1", BusinessID: "1"}, "connectors.yandex_market.business_id"},
		{yandexmarket.Config{APIKey: "k", CampaignID: "1", PageSize: 51}, "connectors.yandex_market.page_size"},
		{yandexmarket.Config{APIKey: "k", CampaignID: "1", Source: "Y M"}, "connectors.yandex_market.source"},
	} {
		if _, err := yandexmarket.New(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error naming %s", tc.cfg, err, tc.want)
		}
	}
}
