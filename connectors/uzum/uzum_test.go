package uzum_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/ordersync/ordersync/connectors"
	"github.com/ordersync/ordersync/connectors/uzum"
	"github.com/ordersync/ordersync/internal/order"
	"github.com/ordersync/ordersync/internal/outbox"
	"github.com/ordersync/ordersync/internal/sim/uzumsim"
)

const (
	token = "uzum-key"
	shop  = 96273
)

func startSim(t *testing.T, opts uzumsim.Options) *uzumsim.Uzum {
	t.Helper()
	opts.Token = token
	s := uzumsim.New(opts)
	if err := s.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func newConn(t *testing.T, s *uzumsim.Uzum, mod func(*uzum.Config)) *uzum.Connector {
	t.Helper()
	cfg := uzum.Config{BaseURL: s.URL(), Token: token, ShopIDs: []string{strconv.Itoa(shop)}, Warehouse: "WH-UZ",
		RatePerSecond: -1}
	if mod != nil {
		mod(&cfg)
	}
	c, err := uzum.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func listAll(t *testing.T, c *uzum.Connector, from, to time.Time) ([]connectors.Item, error) {
	t.Helper()
	var items []connectors.Item
	err := c.List(context.Background(), from, to, func(page []connectors.Item) error {
		items = append(items, page...)
		return nil
	})
	return items, err
}

func anOrder(id int64, status string, created time.Time) uzumsim.Order {
	return uzumsim.Order{ID: id, ShopID: shop, Status: status, DateCreated: created, Customer: "Alisher Navoiy",
		Phone: "998901234567", Items: []uzumsim.Item{{SkuTitle: "SKU-" + strconv.FormatInt(id%3, 10),
			ProductTitle: "Choynak", Amount: 2, SellerPrice: decimal.RequireFromString("125000")}}}
}

func byID(items []connectors.Item) map[string]connectors.Item {
	m := map[string]connectors.Item{}
	for _, it := range items {
		m[it.ID] = it
	}
	return m
}

// TestListPagesToTheEndOverEveryStatus: several pages in several statuses, a cancel,
// and a bad order that fails only itself.
func TestListPagesToTheEndOverEveryStatus(t *testing.T) {
	t.Parallel()
	s := startSim(t, uzumsim.Options{})
	created := time.Now().Add(-2 * time.Hour).Truncate(time.Millisecond)
	for i := range 7 {
		s.AddOrder(anOrder(int64(1000+i), uzum.StatusCreated, created))
	}
	for i := range 4 {
		s.AddOrder(anOrder(int64(2000+i), uzum.StatusPacking, created))
	}
	s.AddOrder(anOrder(3000, uzum.StatusDelivering, created))
	c0 := anOrder(4000, uzum.StatusCanceled, created)
	c0.CancelReason = "Xaridor bekor qildi"
	s.AddOrder(c0)
	s.AddOrder(anOrder(5000, uzum.StatusCompleted, created)) // not imported by default
	s.AddRawOrder(1003500, shop, uzum.StatusCreated, created,
		`{"id":1003500,"status":"CREATED","dateCreated":`+strconv.FormatInt(created.UnixMilli(), 10)+
			`,"orderItems":[{"skuTitle":"SKU-X","amount":1,"sellerPrice":"abc"}]}`)

	c := newConn(t, s, func(cfg *uzum.Config) { cfg.PageSize = 3 })
	items, err := listAll(t, c, time.Now().Add(-72*time.Hour), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	got := byID(items)
	if len(items) != 14 || len(got) != 14 {
		t.Fatalf("listed %d items (%d ids), want 14: 12 orders, a cancel and the bad one", len(items), len(got))
	}
	if _, ok := got["5000"]; ok {
		t.Fatal("a COMPLETED order was imported though COMPLETED is not a status to import")
	}
	ok := got["1002"]
	if ok.Err != nil || ok.Order == nil {
		t.Fatalf("1002: %+v", ok)
	}
	o := ok.Order
	if o.Currency != "UZS" || o.Number != "1002" || o.ExternalID != "1002" || o.Warehouse != "WH-UZ" ||
		len(o.Lines) != 1 || o.Lines[0].SKU != "SKU-0" || !o.Lines[0].Price.Equal(decimal.RequireFromString("125000")) ||
		!o.Lines[0].Quantity.Equal(decimal.NewFromInt(2)) || o.Customer.Name != "Alisher Navoiy" {
		t.Fatalf("1002 mapped as %+v", o)
	}
	if !o.CreatedAt.Equal(created) || o.CreatedAt.Location().String() != "Asia/Tashkent" {
		t.Fatalf("created_at %v, want %v in Asia/Tashkent", o.CreatedAt, created)
	}
	if err := o.Validate(); err != nil {
		t.Fatalf("1002 does not validate: %v", err)
	}
	cancel := got["4000"]
	if !cancel.Cancelled || cancel.CancelReason != "Xaridor bekor qildi" {
		t.Fatalf("4000: %+v, want a cancel with its reason", cancel)
	}
	bad := got["1003500"]
	if bad.Err == nil || !strings.Contains(bad.Err.Error(), "orderItems[0].sellerPrice") {
		t.Fatalf("the bad order: err %v, want one naming orderItems[0].sellerPrice", bad.Err)
	}
	if n := s.Unauthorized(); n != 0 {
		t.Fatalf("%d requests refused for their Authorization", n)
	}
	if n := s.MillisecondQueries(); n != 0 {
		t.Fatalf("%d listings sent milliseconds", n)
	}
}

// TestQuerySendsSeconds: dateFrom and dateTo are whole seconds (Uzum reads
// milliseconds as a far future and answers nothing), and one status a call.
func TestQuerySendsSeconds(t *testing.T) {
	t.Parallel()
	c, err := uzum.New(uzum.Config{Token: token, ShopIDs: []string{"1", "2"}, Warehouse: "W"})
	if err != nil {
		t.Fatal(err)
	}
	from := time.Date(2026, 9, 16, 10, 0, 0, 0, time.UTC)
	to := from.Add(90*time.Minute + 500*time.Millisecond)
	q := c.Query("PACKING", from, to, 2)
	if q.Get("dateFrom") != strconv.FormatInt(from.Unix(), 10) || q.Get("dateTo") != strconv.FormatInt(to.Unix()+1, 10) {
		t.Fatalf("dateFrom %s dateTo %s, want %d and %d (seconds)", q.Get("dateFrom"), q.Get("dateTo"), from.Unix(), to.Unix()+1)
	}
	if len(q["status"]) != 1 || q.Get("status") != "PACKING" || q.Get("page") != "2" || len(q["shopIds"]) != 2 {
		t.Fatalf("query %v", q)
	}
	want := []string{"CREATED", "PACKING", "PENDING_DELIVERY", "DELIVERING", "ACCEPTED_AT_DP",
		"DELIVERED_TO_CUSTOMER_DELIVERY_POINT", "CANCELED"}
	if got := c.Listings(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("listings %v, want %v", got, want)
	}
}

// TestMillisecondsWouldFindNothing: the simulator answers a listing in milliseconds
// with an empty 200, so the listing test above proves the connector sends seconds.
func TestMillisecondsWouldFindNothing(t *testing.T) {
	t.Parallel()
	s := startSim(t, uzumsim.Options{})
	s.AddOrder(anOrder(1, uzum.StatusCreated, time.Now().Add(-time.Hour)))
	c := newConn(t, s, nil)
	items, err := listAll(t, c, time.Now().Add(-3*time.Hour), time.Now())
	if err != nil || len(items) != 1 {
		t.Fatalf("seconds: %d items, err %v; want 1", len(items), err)
	}
	if s.MillisecondQueries() != 0 {
		t.Fatal("the connector sent milliseconds")
	}
}

// TestBearerIsRefused: the key goes bare; the simulator refuses "Bearer …".
func TestBearerIsRefused(t *testing.T) {
	t.Parallel()
	s := startSim(t, uzumsim.Options{})
	c := newConn(t, s, func(cfg *uzum.Config) { cfg.Token = "Bearer " + token })
	_, err := listAll(t, c, time.Now().Add(-time.Hour), time.Now())
	var ae *connectors.AuthError
	if !errors.As(err, &ae) || ae.Key != "connectors.uzum.token" {
		t.Fatalf("err %v, want an AuthError naming connectors.uzum.token", err)
	}
	if strings.Contains(err.Error(), token) {
		t.Fatal("the error shows the key")
	}
	if s.Unauthorized() == 0 {
		t.Fatal("the simulator refused nothing")
	}
	good := newConn(t, s, nil)
	if _, err := listAll(t, good, time.Now().Add(-time.Hour), time.Now()); err != nil {
		t.Fatalf("the bare key: %v", err)
	}
}

// TestThrottleIsHonoured: 429 with Retry-After is waited out, and the listing ends
// with every order; no request came inside a Retry-After.
func TestThrottleIsHonoured(t *testing.T) {
	t.Parallel()
	s := startSim(t, uzumsim.Options{})
	s.AddOrder(anOrder(1, uzum.StatusCreated, time.Now().Add(-time.Hour)))
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

// TestConfiguredRateMakesNoViolations: at the simulator's own rate, a listing of
// every status is never refused.
func TestConfiguredRateMakesNoViolations(t *testing.T) {
	t.Parallel()
	s := startSim(t, uzumsim.Options{RatePerSecond: 3})
	for i := range 4 {
		s.AddOrder(anOrder(int64(10+i), uzum.StatusCreated, time.Now().Add(-time.Hour)))
	}
	c := newConn(t, s, func(cfg *uzum.Config) { cfg.RatePerSecond = 3; cfg.PageSize = 2 })
	items, err := listAll(t, c, time.Now().Add(-3*time.Hour), time.Now())
	if err != nil || len(items) != 4 {
		t.Fatalf("%d items, err %v; want 4", len(items), err)
	}
	if n := s.Requests()[uzumsim.OpList]; n < 9 {
		t.Fatalf("%d listings, want one per page of each of the seven statuses", n)
	}
	if s.Violations() != 0 || s.Throttled() != 0 {
		t.Fatalf("violations %d throttled %d, want none", s.Violations(), s.Throttled())
	}
}

func TestGet(t *testing.T) {
	t.Parallel()
	s := startSim(t, uzumsim.Options{})
	s.AddOrder(anOrder(77, uzum.StatusCompleted, time.Now().Add(-time.Hour)))
	c := newConn(t, s, nil)
	it, err := c.Get(context.Background(), "77")
	if err != nil || it.Order == nil || it.ID != "77" {
		t.Fatalf("get 77: %+v %v", it, err)
	}
	if _, err := c.Get(context.Background(), "404"); !errors.Is(err, connectors.ErrNotFound) {
		t.Fatalf("get 404: %v, want ErrNotFound", err)
	}
}

func created(id string) outbox.Record {
	data, _ := json.Marshal(map[string]any{"order": order.Order{Source: uzum.Name, ExternalID: id}})
	return outbox.Record{EventID: "ev-" + id, Type: outbox.OrderCreated, AggregateType: "order", AggregateID: "uzum:" + id, Data: data}
}

// TestConfirmOnceWhenDeliveredTwice: the same event, delivered twice in a row and
// twice at once, confirms the order once.
func TestConfirmOnceWhenDeliveredTwice(t *testing.T) {
	t.Parallel()
	s := startSim(t, uzumsim.Options{})
	s.AddOrder(anOrder(1, uzum.StatusCreated, time.Now()))
	s.AddOrder(anOrder(2, uzum.StatusCreated, time.Now()))
	s.AddOrder(anOrder(3, uzum.StatusCanceled, time.Now()))
	c := newConn(t, s, nil)
	p := c.Publisher()
	ctx := context.Background()
	for range 2 {
		if err := p.Publish(ctx, created("1")); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range 2 {
		wg.Go(func() { errs[i] = p.Publish(ctx, created("2")) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if err := p.Publish(ctx, created("3")); err != nil {
		t.Fatalf("a cancelled order: %v", err)
	}
	got := s.Confirms()
	if got[1] != 1 || got[2] != 1 || got[3] != 0 || len(s.RefusedConfirms()) != 0 {
		t.Fatalf("confirms %v refused %v, want 1 and 2 once, 3 never, none refused", got, s.RefusedConfirms())
	}
	if o, _ := s.Order(1); o.Status != uzum.StatusPacking {
		t.Fatalf("order 1 is %s", o.Status)
	}
	// Another source's order is not Uzum's business.
	other := created("9")
	other.Data = []byte(`{"order":{"source":"kaspi","external_id":"9"}}`)
	if err := p.Publish(ctx, other); err != nil {
		t.Fatal(err)
	}
	var de *outbox.DeliveryError
	if err := p.Publish(ctx, created("404")); !errors.As(err, &de) || !de.Dead {
		t.Fatalf("an unknown order: %v, want a dead delivery", err)
	}
}

func TestNewNamesTheKey(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cfg  uzum.Config
		want string
	}{
		{uzum.Config{ShopIDs: []string{"1"}}, "connectors.uzum.token"},
		{uzum.Config{Token: "k"}, "connectors.uzum.shop_ids"},
		{uzum.Config{Token: "k", ShopIDs: []string{"x"}}, "connectors.uzum.shop_ids[0]"},
		{uzum.Config{Token: "k", ShopIDs: []string{"1"}, Statuses: []string{"CANCELED"}}, "connectors.uzum.statuses"},
		{uzum.Config{Token: "k", ShopIDs: []string{"1"}, PageSize: 51}, "connectors.uzum.page_size"},
	} {
		if _, err := uzum.New(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error naming %s", tc.cfg, err, tc.want)
		}
	}
}

// TestSourceNamesTheOrdersOfASecondAccount: a second account's orders carry its
// source, in their keys too, and its publisher confirms only those.
func TestSourceNamesTheOrdersOfASecondAccount(t *testing.T) {
	t.Parallel()
	s := startSim(t, uzumsim.Options{})
	now := time.Now()
	s.AddOrder(anOrder(21, uzum.StatusCreated, now.Add(-time.Minute)))
	def := newConn(t, s, nil)
	if def.Name() != uzum.Name {
		t.Fatalf("default name %q, want %q", def.Name(), uzum.Name)
	}
	c := newConn(t, s, func(cfg *uzum.Config) { cfg.Source = "uzum-2" })
	if c.Name() != "uzum-2" {
		t.Fatalf("name %q, want uzum-2", c.Name())
	}
	items, err := listAll(t, c, now.Add(-time.Hour), now.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	it := byID(items)["21"]
	if it.Order == nil || it.Order.Source != "uzum-2" || it.Order.CreateKey() != "uzum-2:order:21:create" {
		t.Fatalf("order 21: %+v", it)
	}
	// The first account's event is not the second's to confirm.
	if err := c.Publisher().Publish(context.Background(), created("21")); err != nil {
		t.Fatal(err)
	}
	if n := s.Confirms()[21]; n != 0 {
		t.Fatalf("uzum's order confirmed %d times by uzum-2's publisher", n)
	}
	ev := created("21")
	ev.Data = []byte(`{"order":{"source":"uzum-2","external_id":"21"}}`)
	if err := c.Publisher().Publish(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	if n := s.Confirms()[21]; n != 1 {
		t.Fatalf("uzum-2's order confirmed %d times, want 1", n)
	}
	if _, err := uzum.New(uzum.Config{Token: "k", ShopIDs: []string{"1"}, Source: "Uzum 2"}); err == nil ||
		!strings.Contains(err.Error(), "connectors.uzum.source") {
		t.Fatalf("a bad source: %v, want an error naming connectors.uzum.source", err)
	}
}
