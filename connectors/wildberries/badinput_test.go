package wildberries

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ordersync/ordersync/connectors"
	"github.com/ordersync/ordersync/internal/order"
	"github.com/ordersync/ordersync/internal/sim/wbsim"
)

// rawWB is an order of a listing with fields replaced: edit maps a field to its
// raw JSON (a raw "" deletes it).
func rawWB(id int64, extra string) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"id":%d,"article":"ART-%d","convertedPrice":150000,"convertedCurrencyCode":643,`+
		`"createdAt":"2026-09-16T05:00:00Z","rid":"rid-%d"%s}`, id, id, id, extra))
}

func TestBadOrdersAreRefusedNamingTheField(t *testing.T) {
	t.Parallel()
	s, c := newTest(t)
	at := testNow.Add(-time.Hour)
	s.AddOrder(wbOrder(1, at))
	bad := []struct {
		id    int64
		raw   json.RawMessage
		field string
	}{
		{11, json.RawMessage(strings.Replace(string(rawWB(11, "")), "2026-09-16T05:00:00Z", "10000-01-01T00:00:00Z", 1)), "createdAt"},
		{12, json.RawMessage(strings.Replace(string(rawWB(12, "")), "2026-09-16T05:00:00Z", "9999-12-31T23:59:59Z", 1)), "createdAt"},
		{13, json.RawMessage(strings.Replace(string(rawWB(13, "")), "2026-09-16T05:00:00Z", "2026-09-16T1:00:00Z", 1)), "createdAt"},
		{14, json.RawMessage(strings.Replace(string(rawWB(14, "")), `"ART-14"`, `"ART\u000014"`, 1)), "article"},
		{15, rawWB(15, `,"comment":"позвонить\u0000"`), "comment"},
		{16, json.RawMessage(strings.Replace(string(rawWB(16, "")), `"rid-16"`, "\"rid-\xff\"", 1)), "rid"},
		{17, rawWB(17, `,"article":"ART-x"`), "article"},
		{18, rawWB(18, `,"comment":"\udc00"`), "comment"},
	}
	for _, b := range bad {
		s.AddOrder(wbsim.Order{ID: b.id, CreatedAt: at, Raw: b.raw})
	}
	fine := rawWB(19, `,"comment":"строка 1\nстрока 2"`)
	s.AddOrder(wbsim.Order{ID: 19, CreatedAt: at, Raw: fine})
	// A status that is not text fails its order only.
	s.AddOrder(wbOrder(20, at))
	s.SetStatus(20, "new", "waiting\x00")

	got := byID(mustList(t, c, testNow.Add(-24*time.Hour), testNow))
	for _, id := range []string{"1", "19"} {
		if it := got[id]; it.Err != nil || it.Order == nil {
			t.Errorf("good order %s: %v", id, it.Err)
		}
	}
	bad = append(bad, struct {
		id    int64
		raw   json.RawMessage
		field string
	}{20, nil, "wbStatus"})
	for _, b := range bad {
		it := got[fmt.Sprint(b.id)]
		var ve *order.ValidationError
		if it.Err == nil || it.Order != nil || !errors.As(it.Err, &ve) || ve.Problems[0].Field != b.field {
			t.Errorf("order %d: %v, want refused naming %s", b.id, it.Err, b.field)
		}
	}
}

// checkItem asserts what every mapped order must satisfy.
func checkItem(t *testing.T, it connectors.Item) {
	t.Helper()
	if it.ID != "" && order.CheckKeyID(it.ID) != "" {
		t.Fatalf("item id %q cannot stand in a key", it.ID)
	}
	if it.Err != nil || it.Order == nil {
		return
	}
	o := *it.Order
	if err := o.Validate(); err != nil {
		t.Fatalf("a mapped order does not validate: %v", err)
	}
	c := o.Canonical()
	back, err := order.Parse(c)
	if err != nil || !bytes.Equal(back.Canonical(), c) {
		t.Fatalf("canonical form %s does not round-trip: %v", c, err)
	}
}

func fuzzConnector(tb testing.TB) *Connector {
	c, err := New(Config{BaseURL: "http://wb.invalid", Token: "t", Warehouse: "WH1", RatePerSecond: -1})
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

func FuzzOrder(f *testing.F) {
	c := fuzzConnector(f)
	f.Add([]byte(rawWB(1, "")))
	f.Add([]byte(rawWB(2, `,"comment":"позвонить","price":150000,"currencyCode":643,"skus":["1"]`)))
	f.Add([]byte(strings.Replace(string(rawWB(3, "")), "2026-09-16T05:00:00Z", "2026-09-16T05:00:00", 1)))
	f.Add([]byte(`{"id":"4","article":"A","convertedPrice":-1,"convertedCurrencyCode":9999}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		checkItem(t, c.mapOrderSafe(raw))
	})
}

// FuzzPage is a listing's page and its statuses, as List reads them.
func FuzzPage(f *testing.F) {
	c := fuzzConnector(f)
	f.Add([]byte(`{"next":1,"orders":[`+string(rawWB(1, ""))+`]}`), []byte(`{"orders":[{"id":1,"supplierStatus":"new","wbStatus":"waiting"}]}`))
	f.Add([]byte(`{"orders":[]}`), []byte(`{"orders":[{"id":1,"supplierStatus":"cancel","wbStatus":"canceled"}]}`))
	f.Fuzz(func(t *testing.T, page, statuses []byte) {
		var p ordersPage
		if decodePage(page, &p) != nil {
			return
		}
		items := make([]connectors.Item, 0, len(p.Orders))
		for _, raw := range p.Orders {
			items = append(items, c.mapOrderSafe(raw))
		}
		sts := map[int64]status{}
		if decodeStatuses(statuses, sts) == nil {
			applyStatusMap(items, sts)
		}
		for _, it := range items {
			checkItem(t, it)
			if it.Cancelled && order.CheckFreeText(it.CancelReason) != "" {
				t.Fatalf("cancel reason %q is not text", it.CancelReason)
			}
		}
	})
}
