package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/ordersync/ordersync/internal/eventually"
	"github.com/ordersync/ordersync/internal/sim/kaspisim"
	"github.com/ordersync/ordersync/internal/sim/onecsim"
	"github.com/ordersync/ordersync/internal/sim/ozonsim"
	"github.com/ordersync/ordersync/internal/sim/wbsim"
)

// marketplaces are the three simulated marketplaces, wired into e's environment.
type marketplaces struct {
	kaspi *kaspisim.Kaspi
	ozon  *ozonsim.Ozon
	wb    *wbsim.Wildberries
}

func (e *env) withMarketplaces() *marketplaces {
	e.t.Helper()
	m := &marketplaces{
		kaspi: kaspisim.New(kaspisim.Options{Token: "kaspi-token"}),
		ozon:  ozonsim.New(ozonsim.Options{ClientID: "123456", APIKey: "ozon-key"}),
		wb:    wbsim.New(wbsim.Options{Token: "wb-token"}),
	}
	for _, s := range []interface {
		Start(string) error
		Close()
	}{m.kaspi, m.ozon, m.wb} {
		if err := s.Start("127.0.0.1:0"); err != nil {
			e.t.Fatal(err)
		}
		e.t.Cleanup(s.Close)
	}
	e.environ = append(e.environ,
		"ORDERSYNC_CONNECTORS__KASPI__ENABLED=true",
		"ORDERSYNC_CONNECTORS__KASPI__BASE_URL="+m.kaspi.URL(),
		"ORDERSYNC_CONNECTORS__KASPI__TOKEN=kaspi-token",
		"ORDERSYNC_CONNECTORS__KASPI__WAREHOUSE=WH1",
		"ORDERSYNC_CONNECTORS__KASPI__POLL_INTERVAL=200ms",
		"ORDERSYNC_CONNECTORS__KASPI__LOOKBACK=72h",
		"ORDERSYNC_CONNECTORS__KASPI__RATE_PER_SECOND=100",
		"ORDERSYNC_CONNECTORS__OZON__ENABLED=true",
		"ORDERSYNC_CONNECTORS__OZON__BASE_URL="+m.ozon.URL(),
		"ORDERSYNC_CONNECTORS__OZON__CLIENT_ID=123456",
		"ORDERSYNC_CONNECTORS__OZON__API_KEY=ozon-key",
		"ORDERSYNC_CONNECTORS__OZON__WAREHOUSE=WH2",
		"ORDERSYNC_CONNECTORS__OZON__ACKNOWLEDGE=true",
		"ORDERSYNC_CONNECTORS__OZON__POLL_INTERVAL=200ms",
		"ORDERSYNC_CONNECTORS__OZON__RATE_PER_SECOND=40",
		"ORDERSYNC_CONNECTORS__WILDBERRIES__ENABLED=true",
		"ORDERSYNC_CONNECTORS__WILDBERRIES__BASE_URL="+m.wb.URL(),
		"ORDERSYNC_CONNECTORS__WILDBERRIES__RETURNS__BASE_URL="+m.wb.URL(),
		"ORDERSYNC_CONNECTORS__WILDBERRIES__TOKEN=wb-token",
		"ORDERSYNC_CONNECTORS__WILDBERRIES__WAREHOUSE=WH3",
		"ORDERSYNC_CONNECTORS__WILDBERRIES__ACKNOWLEDGE=true",
		"ORDERSYNC_CONNECTORS__WILDBERRIES__POLL_INTERVAL=200ms",
		"ORDERSYNC_CONNECTORS__WILDBERRIES__RATE_PER_SECOND=100",
		"ORDERSYNC_RELAY__POLL_INTERVAL=20ms",
		"ORDERSYNC_RELAY__BACKOFF_MIN=10ms",
		"ORDERSYNC_RELAY__BACKOFF_MAX=50ms",
	)
	return m
}

func dec(s string) decimal.Decimal { return decimal.RequireFromString(s) }

// TestRunBringsEveryMarketplaceOrderInto1COnceAndAcknowledgesIt is the connectors' "done
// when": with the three marketplace simulators and the 1C simulator running,
// `ordersync run` brings every order into 1C exactly once and acknowledges it; a
// cancelled order is cancelled in 1C; a restart changes nothing.
func TestRunBringsEveryMarketplaceOrderInto1COnceAndAcknowledgesIt(t *testing.T) {
	t.Parallel()
	e := newEnv(t, onecsim.Options{}, true)
	m := e.withMarketplaces()
	now := time.Now().Add(-time.Hour)
	for i := range 3 {
		code := fmt.Sprintf("51234410%d", i)
		if err := m.kaspi.AddOrder(kaspisim.Order{Code: code, CreationDate: now,
			Customer: kaspisim.Customer{FirstName: "Иван", LastName: "Петров", CellPhone: "7011234567"},
			Entries:  []kaspisim.Entry{{OfferCode: "SKU-1", Name: "Чайник", Quantity: dec("2"), BasePrice: dec("1500.10")}}}); err != nil {
			t.Fatal(err)
		}
		m.ozon.AddPosting(ozonsim.Posting{PostingNumber: fmt.Sprintf("05708065-00%d-1", i), InProcessAt: now,
			Products: []ozonsim.Product{{OfferID: "SKU-2", Name: "Кофе", Quantity: 1, Price: dec("1530.0000")}}})
		m.wb.AddOrder(wbsim.Order{ID: int64(1234567 + i), Article: "SKU-3", ConvertedPrice: 153099, ConvertedCurrencyCode: 643,
			Price: 153099, CurrencyCode: 643, CreatedAt: now})
	}
	stop := e.runInProcess()
	acked := func() (k, o, w int) {
		for _, n := range m.kaspi.Accepted() {
			k += n
		}
		for _, n := range m.ozon.Shipments() {
			o += n
		}
		for _, n := range m.wb.Acknowledged() {
			w += n
		}
		return
	}
	eventually.True(t, "nine orders in 1C, three acknowledged per marketplace", func() bool {
		k, o, w := acked()
		return e.onec.Count() == 9 && k == 3 && o == 3 && w == 3
	})

	// The marketplace cancels one order of each.
	m.kaspi.SetStatus("512344100", "CANCELLED")
	m.ozon.Cancel("05708065-000-1", "Покупатель отменил заказ", "Клиент")
	m.wb.SetStatus(1234567, "cancel", "canceled_by_client")
	eventually.True(t, "the cancelled orders cancelled in 1C", func() bool {
		n := 0
		for _, o := range e.onec.Orders() {
			if o.Cancelled {
				n++
			}
		}
		return n == 3
	})
	if code := stop(); code != 0 {
		t.Fatalf("run exited %d", code)
	}

	// Restart: the same listings again; nothing new anywhere.
	polls := func() (k, o, w int) {
		return m.kaspi.Requests()[kaspisim.OpList],
			len(m.ozon.RequestsTo(ozonsim.PathUnfulfilledV3)) + len(m.ozon.RequestsTo(ozonsim.PathUnfulfilledV4)),
			len(m.wb.RequestsOf(wbsim.OpNew))
	}
	k0, o0, w0 := polls()
	stop = e.runInProcess()
	eventually.True(t, "three more polls of each marketplace", func() bool {
		k, o, w := polls()
		return k >= k0+3 && o >= o0+3 && w >= w0+3
	})
	if code := stop(); code != 0 {
		t.Fatalf("second run exited %d", code)
	}
	if got := e.onec.Count(); got != 9 {
		t.Fatalf("1C holds %d orders, want 9", got)
	}
	for _, o := range e.onec.Orders() {
		if n := e.onec.CountExternal(o.ExternalID); n != 1 {
			t.Fatalf("1C holds %d orders for %s, want 1", n, o.ExternalID)
		}
	}
	if k, o, w := acked(); k != 3 || o != 3 || w != 3 {
		t.Fatalf("acknowledgements kaspi %d ozon %d wb %d, want 3 each", k, o, w)
	}
	for _, want := range []string{"kaspi:512344101", "ozon:05708065-001-1", "wb:1234568"} {
		if e.onec.CountExternal(want) != 1 {
			t.Fatalf("1C lacks %s; it holds %v", want, externalIDs(e.onec.Orders()))
		}
	}
	// Exact prices reached 1C: 2 × 1500.10, 1530.0000, 153099 hundredths.
	totals := map[string]string{}
	for _, o := range e.onec.Orders() {
		var body struct{ Total decimal.Decimal }
		json.Unmarshal(o.Body, &body)
		totals[strings.SplitN(o.ExternalID, ":", 2)[0]] = body.Total.String()
	}
	if totals["kaspi"] != "3000.2" || totals["ozon"] != "1530" || totals["wb"] != "1530.99" {
		t.Fatalf("1C totals %v, want kaspi 3000.2, ozon 1530, wb 1530.99", totals)
	}
	out, _, code := e.cli("", "connectors", "status", "--format", "json")
	var st []struct {
		Connector  string
		Enabled    bool
		OrdersSeen int64  `json:"orders_seen"`
		LastError  string `json:"last_error"`
	}
	if json.Unmarshal([]byte(out), &st); code != 0 || len(st) != 8 {
		t.Fatalf("connectors status: exit %d %s: want the five accounts and the three returns' cursors", code, out)
	}
	for _, c := range st {
		if !c.Enabled { // Yandex Market and Uzum, configured off
			continue
		}
		if strings.HasSuffix(c.Connector, ".returns") { // no returns here: read, not seen
			if c.LastError != "" {
				t.Fatalf("returns cursor %+v, want no error", c)
			}
			continue
		}
		if c.OrdersSeen == 0 || c.LastError != "" {
			t.Fatalf("connector %+v, want orders seen and no error", c)
		}
	}
}

func externalIDs(os []onecsim.Order) []string {
	var s []string
	for _, o := range os {
		s = append(s, o.ExternalID)
	}
	return s
}

func TestResyncOneMarketplaceOrderInTheForeground(t *testing.T) {
	t.Parallel()
	e := newEnv(t, onecsim.Options{}, true)
	m := e.withMarketplaces()
	if err := m.kaspi.AddOrder(kaspisim.Order{Code: "600100200", CreationDate: time.Now().Add(-time.Hour),
		Entries: []kaspisim.Entry{{OfferCode: "SKU-1", Name: "Чайник", Quantity: dec("1"), BasePrice: dec("999")}}}); err != nil {
		t.Fatal(err)
	}
	out, stderr, code := e.cli("", "resync", "kaspi", "600100200")
	if code != 0 || !strings.Contains(out, "kaspi:order:600100200:create: done") {
		t.Fatalf("resync kaspi: exit %d out %q err %q", code, out, stderr)
	}
	if e.onec.CountExternal("kaspi:600100200") != 1 {
		t.Fatalf("1C holds %d", e.onec.CountExternal("kaspi:600100200"))
	}
	if _, _, code := e.cli("", "resync", "kaspi", "404404404"); code != 1 {
		t.Fatalf("resync of an unknown order: exit %d, want 1", code)
	}
	if _, _, code := e.cli("", "resync", "nosuch", "1"); code != 2 {
		t.Fatalf("resync of an unknown connector: exit %d, want 2", code)
	}
}

func TestAMarketplaceRefusingCredentialsStopsOnlyItsConnector(t *testing.T) {
	t.Parallel()
	e := newEnv(t, onecsim.Options{}, true)
	m := e.withMarketplaces()
	e.environ = append(e.environ, "ORDERSYNC_CONNECTORS__KASPI__TOKEN=wrong")
	m.wb.AddOrder(wbsim.Order{ID: 42, Article: "SKU-3", ConvertedPrice: 100, ConvertedCurrencyCode: 643, Price: 100,
		CurrencyCode: 643, CreatedAt: time.Now().Add(-time.Hour)})
	stop := e.runInProcess()
	var out string
	eventually.True(t, "wb:42 in 1C and kaspi's token error in connectors status", func() bool {
		out, _, _ = e.cli("", "connectors", "status")
		return e.onec.CountExternal("wb:42") == 1 && strings.Contains(out, "connectors.kaspi.token")
	})
	if code := stop(); code != 0 {
		t.Fatalf("run exited %d: one connector's credentials must not stop the service", code)
	}
}
