package kaspi

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/ordersync/ordersync/connectors"
	"github.com/ordersync/ordersync/internal/sim/kaspisim"
	"github.com/ordersync/ordersync/internal/stock"
)

const feedTestToken = "feed-token-0123456789abcdef"

// fakeStockStore is an in-memory stock.Store holding snapshots and their items. The
// feed reads only Latest and Items; the other methods are the embedded nil
// interface's and panic if called.
type fakeStockStore struct {
	stock.Store

	mu     sync.Mutex
	snaps  map[string][]stock.Snapshot // warehouse → snapshots, in the order stored
	items  map[string][]stock.Item     // snapshot key → items
	fail   error                       // every read fails with it when set
	latest int                         // Latest calls
	reads  int                         // Items calls
}

var _ stock.Store = (*fakeStockStore)(nil)

func newFakeStockStore() *fakeStockStore {
	return &fakeStockStore{snaps: map[string][]stock.Snapshot{}, items: map[string][]stock.Item{}}
}

// put stores a snapshot of warehouse taken at slot and stored at created.
func (s *fakeStockStore) put(warehouse string, slot, created time.Time, items ...stock.Item) stock.Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	label := slot.UTC().Format("2006-01-02T15:04:05")
	snap := stock.Snapshot{
		Key: "stock:main:" + warehouse + ":" + label, Schedule: "main", Warehouse: warehouse,
		Slot: slot, Label: label, CreatedAt: created, ItemCount: len(items),
	}
	s.snaps[warehouse] = append(s.snaps[warehouse], snap)
	s.items[snap.Key] = slices.Clone(items)
	return snap
}

func (s *fakeStockStore) setFail(err error) {
	s.mu.Lock()
	s.fail = err
	s.mu.Unlock()
}

func (s *fakeStockStore) counts() (latest, reads int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.latest, s.reads
}

// Latest is the snapshot with the latest slot (then the latest stored) at or before at.
func (s *fakeStockStore) Latest(ctx context.Context, warehouse string, at time.Time) (stock.Snapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.latest++
	if s.fail != nil {
		return stock.Snapshot{}, s.fail
	}
	var best *stock.Snapshot
	for i, snap := range s.snaps[warehouse] {
		if !at.IsZero() && snap.Slot.After(at) {
			continue
		}
		if best == nil || !snap.Slot.Before(best.Slot) {
			best = &s.snaps[warehouse][i]
		}
	}
	if best == nil {
		return stock.Snapshot{}, fmt.Errorf("warehouse %s: %w", warehouse, stock.ErrNoSnapshot)
	}
	return *best, nil
}

// Items returns a snapshot's items sorted by SKU.
func (s *fakeStockStore) Items(ctx context.Context, key string) ([]stock.Item, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads++
	if s.fail != nil {
		return nil, s.fail
	}
	items, ok := s.items[key]
	if !ok {
		return nil, stock.ErrNoSnapshot
	}
	items = slices.Clone(items)
	slices.SortFunc(items, func(a, b stock.Item) int { return cmp.Compare(a.SKU, b.SKU) })
	return items, nil
}

// testClock is a clock a test moves by hand.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

var feedT0 = time.Date(2026, 9, 16, 5, 0, 0, 0, time.UTC) // 10:00 in Almaty

func item(sku, qty, price string) stock.Item {
	return stock.Item{SKU: sku, Quantity: decimal.RequireFromString(qty), Price: decimal.RequireFromString(price)}
}

type feedHarness struct {
	t     *testing.T
	store *fakeStockStore
	clock *testClock
	logs  *syncBuffer
	feed  *Feed
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// newFeedHarness makes a feed of WH1 → PP1 and WH2 → PP2 unless edit changes cfg.
func newFeedHarness(t *testing.T, edit func(*FeedConfig)) *feedHarness {
	t.Helper()
	h := &feedHarness{t: t, store: newFakeStockStore(), clock: &testClock{t: feedT0}, logs: &syncBuffer{}}
	cfg := FeedConfig{
		Token:      feedTestToken,
		Stores:     map[string]string{"WH1": "PP1", "WH2": "PP2"},
		Company:    "Рога & Копыта <ТОО>",
		MerchantID: "30391602",
		Logger:     slog.New(slog.NewJSONHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Now:        h.clock.Now,
	}
	if edit != nil {
		edit(&cfg)
	}
	f, err := NewFeed(h.store, cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.feed = f
	return h
}

// get requests the feed; header is pairs of name, value.
func (h *feedHarness) get(method, path string, header ...string) *httptest.ResponseRecorder {
	h.t.Helper()
	r := httptest.NewRequest(method, path, nil)
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	h.feed.ServeHTTP(w, r)
	return w
}

var feedURL = FeedPath + feedTestToken + ".xml"

func wantCode(t *testing.T, w *httptest.ResponseRecorder, code int) {
	t.Helper()
	if w.Code != code {
		t.Fatalf("status %d (%s), want %d", w.Code, clipText(w.Body.String()), code)
	}
}

func clipText(s string) string {
	if len(s) > 4000 {
		return s[:4000] + "…"
	}
	return s
}

// validateFeed checks body against testdata/kaspi.xsd with xmllint. A machine
// without xmllint fails the test: the XSD check is what proves the format.
func validateFeed(t *testing.T, body []byte) {
	t.Helper()
	if out, err := xmllint(t, body); err != nil {
		t.Fatalf("the feed does not validate against testdata/kaspi.xsd: %v\n%s", err, clipText(out))
	}
}

// xmllint runs xmllint --noout --schema testdata/kaspi.xsd on body.
func xmllint(t *testing.T, body []byte) (string, error) {
	t.Helper()
	bin, err := exec.LookPath("xmllint")
	if err != nil {
		t.Fatalf("xmllint not found (%v): install libxml2-utils (apt-get install libxml2-utils) to validate the Kaspi feed against testdata/kaspi.xsd", err)
	}
	file := filepath.Join(t.TempDir(), "feed.xml")
	if err := os.WriteFile(file, body, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "--noout", "--schema", filepath.Join("testdata", "kaspi.xsd"), file).CombinedOutput()
	if err == nil && !bytes.Contains(out, []byte("feed.xml validates")) {
		err = errors.New("xmllint did not say the file validates")
	}
	return string(out), err
}

// Test wire types, declared apart from the feed's writer.
type testCatalog struct {
	XMLName    xml.Name    `xml:"kaspiShopping kaspi_catalog"`
	Date       string      `xml:"date,attr"`
	Company    string      `xml:"company"`
	MerchantID string      `xml:"merchantid"`
	Offers     []testOffer `xml:"offers>offer"`
}

type testOffer struct {
	SKU     string      `xml:"sku,attr"`
	Model   string      `xml:"model"`
	Avail   []testAvail `xml:"availabilities>availability"`
	Price   string      `xml:"price"`
	Unknown []xml.Name  `xml:",any"`
}

type testAvail struct {
	Available  string `xml:"available,attr"`
	StoreID    string `xml:"storeId,attr"`
	StockCount string `xml:"stockCount,attr"`
}

func parseCatalog(t *testing.T, body []byte) testCatalog {
	t.Helper()
	var c testCatalog
	if err := xml.Unmarshal(body, &c); err != nil {
		t.Fatalf("the feed is not a kaspi_catalog: %v\n%s", err, clipText(string(body)))
	}
	return c
}

func (c testCatalog) offer(t *testing.T, sku string) testOffer {
	t.Helper()
	for _, o := range c.Offers {
		if o.SKU == sku {
			return o
		}
	}
	t.Fatalf("no offer %q in the feed", sku)
	return testOffer{}
}

// avail renders an offer's availabilities as "PP1=yes/5 PP2=no/0".
func (o testOffer) avail() string {
	var parts []string
	for _, a := range o.Avail {
		parts = append(parts, a.StoreID+"="+a.Available+"/"+a.StockCount)
	}
	return strings.Join(parts, " ")
}

func TestFeedCatalog(t *testing.T) {
	t.Parallel()
	h := newFeedHarness(t, nil)
	h.store.put("WH1", feedT0, feedT0.Add(3*time.Second),
		item("A-1", "5", "1500.00"),
		item("C-neg", "-3", "200"),
		item("D-frac", "2.9", "99.5"),
		item("E-zero", "0", "10"),
		item("F-noprice", "4", "0"),
		item("G-cheap-elsewhere", "1", "0"),
		item(`H&<"'>`, "1", "1"),
	)
	h.store.put("WH2", feedT0, feedT0.Add(4*time.Second),
		item("A-1", "0", "1600"),
		item("B-only2", "7.99", "1234.49"),
		item("E-zero", "0", "10"),
		item("F-noprice", "1", "-5"),
		item("G-cheap-elsewhere", "1", "700"),
	)
	w := h.get(http.MethodGet, feedURL)
	wantCode(t, w, http.StatusOK)
	if ct := w.Header().Get("Content-Type"); ct != "application/xml; charset=utf-8" {
		t.Fatalf("Content-Type %q", ct)
	}
	if w.Header().Get("Content-Encoding") != "" {
		t.Fatalf("gzip without Accept-Encoding")
	}
	body := w.Body.Bytes()
	validateFeed(t, body)
	if !bytes.Contains(body, []byte(`xsi:schemaLocation="kaspiShopping http://kaspi.kz/kaspishopping.xsd"`)) {
		t.Fatalf("no schemaLocation: %s", clipText(string(body)))
	}

	c := parseCatalog(t, body)
	if c.Company != "Рога & Копыта <ТОО>" || c.MerchantID != "30391602" {
		t.Fatalf("header %q %q", c.Company, c.MerchantID)
	}
	// The newest snapshot's CreatedAt, in Almaty.
	if c.Date != "2026-09-16T10:00:04+05:00" {
		t.Fatalf("date %q", c.Date)
	}
	want := map[string]struct{ avail, price string }{
		"A-1":               {"PP1=yes/5 PP2=no/0", "1500"}, // the first warehouse's price
		"B-only2":           {"PP1=no/0 PP2=yes/7", "1234"}, // absent from WH1; floored; rounded
		"C-neg":             {"PP1=no/0 PP2=no/0", "200"},   // negative: no
		"D-frac":            {"PP1=yes/2 PP2=no/0", "100"},  // 99.5 rounds half away from zero
		"E-zero":            {"PP1=no/0 PP2=no/0", "10"},    // zero everywhere stays, as no
		"G-cheap-elsewhere": {"PP1=yes/1 PP2=yes/1", "700"}, // WH1 has no price: WH2's
		`H&<"'>`:            {"PP1=yes/1 PP2=no/0", "1"},    // escaped, and back
	}
	var skus []string
	for _, o := range c.Offers {
		skus = append(skus, o.SKU)
	}
	// Sorted; F-noprice, with no price above zero anywhere, left out.
	wantSKUs := []string{"A-1", "B-only2", "C-neg", "D-frac", "E-zero", "G-cheap-elsewhere", `H&<"'>`}
	if !slices.Equal(skus, wantSKUs) {
		t.Fatalf("offers %q, want %q (sorted, F-noprice left out)", skus, wantSKUs)
	}
	for sku, wt := range want {
		o := c.offer(t, sku)
		if got := o.avail(); got != wt.avail {
			t.Errorf("%s: availabilities %s, want %s", sku, got, wt.avail)
		}
		if o.Price != wt.price {
			t.Errorf("%s: price %s, want %s", sku, o.Price, wt.price)
		}
		if o.Model != sku {
			t.Errorf("%s: model %q, want the 1C SKU", sku, o.Model)
		}
	}
	st := h.feed.Stats()
	if st.Last == nil || st.Last.Offers != 7 || st.Last.NoPrice != 1 || st.Last.Negative != 1 || st.Last.Fractional != 2 || st.Last.RoundedPrices != 2 {
		t.Fatalf("build %+v", st.Last)
	}
	if len(st.Last.Missing) != 0 || len(st.Last.Snapshots) != 2 {
		t.Fatalf("build snapshots %v missing %v", st.Last.Snapshots, st.Last.Missing)
	}
}

// TestKaspiXSDRefuses shows the schema is no rubber stamp: each breach of the
// documented structure fails it.
func TestKaspiXSDRefuses(t *testing.T) {
	t.Parallel()
	h := newFeedHarness(t, nil)
	h.store.put("WH1", feedT0, feedT0, item("A", "4", "100"), item("B", "0", "5"))
	good := h.get(http.MethodGet, feedURL).Body.String()
	validateFeed(t, []byte(good))
	for _, c := range []struct{ name, old, new string }{
		{"available maybe", `available="yes"`, `available="maybe"`},
		{"negative stockCount", `stockCount="4"`, `stockCount="-4"`},
		{"fractional stockCount", `stockCount="4"`, `stockCount="4.5"`},
		{"no storeId", ` storeId="PP1" stockCount="4"`, ` stockCount="4"`},
		{"fractional price", `<price>100</price>`, `<price>100.50</price>`},
		{"zero price", `<price>100</price>`, `<price>0</price>`},
		{"no price", `<price>100</price>`, ``},
		{"no model", `<model>A</model>`, ``},
		{"no sku", `<offer sku="A">`, `<offer>`},
		{"duplicate sku", `<offer sku="B">`, `<offer sku="A">`},
		{"duplicate store", `storeId="PP2"`, `storeId="PP1"`},
		{"no merchantid", `<merchantid>30391602</merchantid>`, ``},
		{"another namespace", `xmlns="kaspiShopping"`, `xmlns="kaspi"`},
		{"no date", `date="2026-09-16T10:00:00+05:00"`, ``},
	} {
		bad := strings.Replace(good, c.old, c.new, 1)
		if bad == good {
			t.Fatalf("%s: %q is not in the feed", c.name, c.old)
		}
		if _, err := xmllint(t, []byte(bad)); err == nil {
			t.Errorf("%s: the XSD accepts it", c.name)
		}
	}
}

func TestFeedZeroStockStoreStaysAsNo(t *testing.T) {
	t.Parallel()
	h := newFeedHarness(t, nil)
	h.store.put("WH1", feedT0, feedT0, item("A", "3", "100"), item("B", "1", "50"))
	h.store.put("WH2", feedT0, feedT0, item("A", "2", "100"), item("B", "4", "50"))
	c := parseCatalog(t, h.get(http.MethodGet, feedURL).Body.Bytes())
	if got := c.offer(t, "A").avail(); got != "PP1=yes/3 PP2=yes/2" {
		t.Fatalf("A before: %s", got)
	}
	// The next slot: A sold out at WH1, B dropped from WH2's answer altogether.
	h.store.put("WH1", feedT0.Add(30*time.Minute), feedT0.Add(30*time.Minute), item("A", "0", "100"), item("B", "1", "50"))
	h.store.put("WH2", feedT0.Add(30*time.Minute), feedT0.Add(30*time.Minute), item("A", "2", "100"))
	w := h.get(http.MethodGet, feedURL)
	wantCode(t, w, http.StatusOK)
	validateFeed(t, w.Body.Bytes())
	c = parseCatalog(t, w.Body.Bytes())
	if got := c.offer(t, "A").avail(); got != "PP1=no/0 PP2=yes/2" {
		t.Fatalf("A after: %s, want PP1 kept as no", got)
	}
	if got := c.offer(t, "B").avail(); got != "PP1=yes/1 PP2=no/0" {
		t.Fatalf("B after: %s, want PP2 kept as no", got)
	}
}

func TestFeedConditional(t *testing.T) {
	t.Parallel()
	h := newFeedHarness(t, nil)
	h.store.put("WH1", feedT0, feedT0.Add(2*time.Second), item("A", "3", "100"))
	h.store.put("WH2", feedT0, feedT0.Add(5*time.Second), item("A", "1", "100"))

	w := h.get(http.MethodGet, feedURL)
	wantCode(t, w, http.StatusOK)
	etag, lm := w.Header().Get("ETag"), w.Header().Get("Last-Modified")
	if !strings.HasPrefix(etag, `"`) || !strings.HasSuffix(etag, `"`) || len(etag) < 10 {
		t.Fatalf("ETag %q is not a strong tag", etag)
	}
	if lm != "Wed, 16 Sep 2026 05:00:05 GMT" {
		t.Fatalf("Last-Modified %q, want the newest snapshot's CreatedAt", lm)
	}

	for _, c := range []struct {
		name   string
		header []string
		want   int
	}{
		{"its own ETag", []string{"If-None-Match", etag}, 304},
		{"weak form", []string{"If-None-Match", "W/" + etag}, 304},
		{"in a list", []string{"If-None-Match", `"other", ` + etag}, 304},
		{"star", []string{"If-None-Match", "*"}, 304},
		{"another ETag", []string{"If-None-Match", `"other"`}, 200},
		{"If-Modified-Since = Last-Modified", []string{"If-Modified-Since", lm}, 304},
		{"If-Modified-Since later", []string{"If-Modified-Since", "Wed, 16 Sep 2026 06:00:00 GMT"}, 304},
		{"If-Modified-Since earlier", []string{"If-Modified-Since", "Wed, 16 Sep 2026 05:00:04 GMT"}, 200},
		{"If-Modified-Since unparsable", []string{"If-Modified-Since", "yesterday"}, 200},
		{"If-None-Match wins over If-Modified-Since", []string{"If-None-Match", `"other"`, "If-Modified-Since", lm}, 200},
		{"If-None-Match wins the other way", []string{"If-None-Match", etag, "If-Modified-Since", "Wed, 16 Sep 2026 04:00:00 GMT"}, 304},
	} {
		w := h.get(http.MethodGet, feedURL, c.header...)
		if w.Code != c.want {
			t.Errorf("%s: status %d, want %d", c.name, w.Code, c.want)
			continue
		}
		if c.want == 304 {
			if w.Body.Len() != 0 || w.Header().Get("ETag") != etag || w.Header().Get("Last-Modified") != lm {
				t.Errorf("%s: 304 with body %d bytes, ETag %q, Last-Modified %q", c.name, w.Body.Len(), w.Header().Get("ETag"), w.Header().Get("Last-Modified"))
			}
		}
	}

	// A new snapshot: the old ETag and date no longer match.
	h.store.put("WH1", feedT0.Add(30*time.Minute), feedT0.Add(30*time.Minute+time.Second), item("A", "0", "100"))
	w = h.get(http.MethodGet, feedURL, "If-None-Match", etag)
	wantCode(t, w, http.StatusOK)
	if w.Header().Get("ETag") == etag {
		t.Fatalf("ETag unchanged by a new snapshot")
	}
	if got := w.Header().Get("Last-Modified"); got != "Wed, 16 Sep 2026 05:30:01 GMT" {
		t.Fatalf("Last-Modified %q after the new snapshot", got)
	}
	wantCode(t, h.get(http.MethodGet, feedURL, "If-Modified-Since", lm), http.StatusOK)
	wantCode(t, h.get(http.MethodGet, feedURL, "If-None-Match", w.Header().Get("ETag")), http.StatusNotModified)

	st := h.feed.Stats()
	if st.NotModified == 0 || st.OK == 0 || st.Builds != 2 {
		t.Fatalf("stats %+v", st)
	}
}

func TestFeedLastModifiedNotBeforeStart(t *testing.T) {
	t.Parallel()
	// Snapshots older than the feed: the body may differ from what the last process
	// served (the configuration changed), so Last-Modified is the feed's start.
	h := newFeedHarness(t, nil)
	h.store.put("WH1", feedT0.Add(-time.Hour), feedT0.Add(-time.Hour), item("A", "3", "100"))
	w := h.get(http.MethodGet, feedURL)
	wantCode(t, w, http.StatusOK)
	if got := w.Header().Get("Last-Modified"); got != "Wed, 16 Sep 2026 05:00:00 GMT" {
		t.Fatalf("Last-Modified %q, want the feed's start", got)
	}
	if c := parseCatalog(t, w.Body.Bytes()); c.Date != "2026-09-16T09:00:00+05:00" {
		t.Fatalf("date %q, want the snapshot's", c.Date)
	}
}

func TestFeedNoSnapshot(t *testing.T) {
	t.Parallel()
	h := newFeedHarness(t, nil)
	for _, method := range []string{http.MethodGet, http.MethodHead} {
		w := h.get(method, feedURL)
		wantCode(t, w, http.StatusServiceUnavailable)
		if w.Header().Get("Retry-After") != "300" || !strings.HasPrefix(w.Header().Get("Content-Type"), "text/plain") {
			t.Fatalf("%s 503 headers %v", method, w.Header())
		}
		if w.Header().Get("ETag") != "" || w.Header().Get("Last-Modified") != "" {
			t.Fatalf("a 503 with validators: %v", w.Header())
		}
	}
	w := h.get(http.MethodGet, feedURL)
	if body := w.Body.String(); !strings.Contains(body, "no stock snapshot yet") || !strings.Contains(body, "WH1, WH2") || strings.Contains(body, "<") {
		t.Fatalf("503 body %q", body)
	}

	// The store failing is a 503 as well, with a reason that tells nothing inside.
	h.store.setFail(errors.New("connection refused to db.internal:5432"))
	w = h.get(http.MethodGet, feedURL)
	wantCode(t, w, http.StatusServiceUnavailable)
	if strings.Contains(w.Body.String(), "db.internal") || w.Header().Get("Retry-After") == "" {
		t.Fatalf("store failure answer %q %v", w.Body.String(), w.Header())
	}
	h.store.setFail(nil)

	// One warehouse with a snapshot: served, the other's point as no.
	h.store.put("WH2", feedT0, feedT0, item("A", "4", "100"))
	w = h.get(http.MethodGet, feedURL)
	wantCode(t, w, http.StatusOK)
	validateFeed(t, w.Body.Bytes())
	if got := parseCatalog(t, w.Body.Bytes()).offer(t, "A").avail(); got != "PP1=no/0 PP2=yes/4" {
		t.Fatalf("A: %s", got)
	}
	if st := h.feed.Stats(); st.Last == nil || !slices.Equal(st.Last.Missing, []string{"WH1"}) || st.Unavailable != 4 {
		t.Fatalf("stats %+v %+v", st, st.Last)
	}
	if !strings.Contains(h.logs.String(), "without some warehouses") {
		t.Fatalf("no warning about the missing warehouse:\n%s", h.logs)
	}
}

func TestFeedNeverServesEmptyCatalog(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "sku-map.csv")
	if err := os.WriteFile(path, []byte("ozon,OFFER-1,A\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	skus, err := connectors.NewSKUMap(path)
	if err != nil {
		t.Fatal(err)
	}
	h := newFeedHarness(t, func(c *FeedConfig) { c.SKUMap = skus })
	h.store.put("WH1", feedT0, feedT0, item("A", "4", "100"))
	w := h.get(http.MethodGet, feedURL)
	wantCode(t, w, http.StatusServiceUnavailable)
	if !strings.Contains(w.Body.String(), "empty catalog") {
		t.Fatalf("503 body %q", w.Body.String())
	}
	h.store.put("WH2", feedT0, feedT0) // a snapshot with no items at all
	wantCode(t, h.get(http.MethodGet, feedURL), http.StatusServiceUnavailable)
}

func TestFeedWrongTokenAndMethod(t *testing.T) {
	t.Parallel()
	h := newFeedHarness(t, nil)
	h.store.put("WH1", feedT0, feedT0, item("A", "4", "100"))
	for _, path := range []string{
		FeedPath + "feed-token-0123456789abcdeX.xml", // one character off
		FeedPath + "short.xml",
		FeedPath + feedTestToken + "0.xml",
		FeedPath + feedTestToken,          // no .xml
		FeedPath + feedTestToken + ".XML", // the suffix is exact
		FeedPath + feedTestToken + ".xml/x",
		FeedPath + "x/" + feedTestToken + ".xml",
		FeedPath + ".xml",
		FeedPath,
	} {
		w := h.get(http.MethodGet, path)
		if w.Code != http.StatusNotFound {
			t.Errorf("%s: status %d, want 404", path, w.Code)
		}
		if w.Header().Get("ETag") != "" || strings.Contains(w.Body.String(), "<") {
			t.Errorf("%s: a 404 that tells something: %v %q", path, w.Header(), w.Body.String())
		}
	}
	wantCode(t, h.get(http.MethodPost, FeedPath+"wrong-token-0123456789.xml"), http.StatusNotFound)
	w := h.get(http.MethodPost, feedURL)
	wantCode(t, w, http.StatusMethodNotAllowed)
	if w.Header().Get("Allow") != "GET, HEAD" {
		t.Fatalf("Allow %q", w.Header().Get("Allow"))
	}
	// Mounted behind http.StripPrefix, the bare file name works too.
	r := httptest.NewRequest(http.MethodGet, "/"+feedTestToken+".xml", nil)
	rec := httptest.NewRecorder()
	h.feed.ServeHTTP(rec, r)
	wantCode(t, rec, http.StatusOK)

	wantCode(t, h.get(http.MethodGet, feedURL), http.StatusOK)
	logs := h.logs.String()
	if strings.Contains(logs, feedTestToken) || strings.Contains(logs, "0123456789abcde") {
		t.Fatalf("the token is in the log:\n%s", logs)
	}
	if !strings.Contains(logs, "wrong token") {
		t.Fatalf("no log line for the wrong token:\n%s", logs)
	}
	if st := h.feed.Stats(); st.NotFound != 10 {
		t.Fatalf("NotFound %d, want 10", st.NotFound)
	}
}

func TestFeedSKUMapInReverse(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "sku-map.csv")
	write := func(content string, at time.Time) {
		t.Helper()
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, at, at); err != nil {
			t.Fatal(err)
		}
	}
	write("marketplace,marketplace_sku,onec_sku\nkaspi,100500,SKU-1\nkaspi,777,SKU-2\nkaspi,778,SKU-2\nozon,OFFER-3,SKU-3\n", time.Now().Add(-time.Hour))
	skus, err := connectors.NewSKUMap(path)
	if err != nil {
		t.Fatal(err)
	}
	h := newFeedHarness(t, func(c *FeedConfig) { c.SKUMap = skus })
	h.store.put("WH1", feedT0, feedT0, item("SKU-1", "3", "100"), item("SKU-2", "5", "200"), item("SKU-3", "9", "300"))
	w := h.get(http.MethodGet, feedURL)
	wantCode(t, w, http.StatusOK)
	validateFeed(t, w.Body.Bytes())
	c := parseCatalog(t, w.Body.Bytes())
	var got []string
	for _, o := range c.Offers {
		got = append(got, o.SKU+"←"+o.Model+":"+o.avail())
	}
	want := []string{"100500←SKU-1:PP1=yes/3 PP2=no/0", "777←SKU-2:PP1=yes/5 PP2=no/0", "778←SKU-2:PP1=yes/5 PP2=no/0"}
	if !slices.Equal(got, want) {
		t.Fatalf("offers %q, want %q (SKU-3 has no kaspi line: left out)", got, want)
	}
	if st := h.feed.Stats(); st.Last.Unmapped != 1 {
		t.Fatalf("Unmapped %d", st.Last.Unmapped)
	}
	etag, lm := w.Header().Get("ETag"), w.Header().Get("Last-Modified")

	// The map changes with no new snapshot: the next pull sees it, with a new
	// ETag and a later Last-Modified, so neither validator keeps the old body.
	h.clock.Add(10 * time.Minute)
	write("kaspi,100500,SKU-1\nkaspi,300,SKU-3\n", time.Now())
	w = h.get(http.MethodGet, feedURL, "If-None-Match", etag)
	wantCode(t, w, http.StatusOK)
	if w.Header().Get("ETag") == etag || w.Header().Get("Last-Modified") == lm {
		t.Fatalf("validators unchanged by a new map: %v", w.Header())
	}
	wantCode(t, h.get(http.MethodGet, feedURL, "If-Modified-Since", lm), http.StatusOK)
	c = parseCatalog(t, w.Body.Bytes())
	if len(c.Offers) != 2 || c.Offers[0].SKU != "100500" || c.Offers[1].SKU != "300" || c.Offers[1].Model != "SKU-3" {
		t.Fatalf("offers after the map changed: %+v", c.Offers)
	}
}

func TestFeedHead(t *testing.T) {
	t.Parallel()
	h := newFeedHarness(t, nil)
	h.store.put("WH1", feedT0, feedT0, item("A", "4", "100"), item("B", "1", "5"))
	get := h.get(http.MethodGet, feedURL)
	head := h.get(http.MethodHead, feedURL)
	wantCode(t, head, http.StatusOK)
	if head.Body.Len() != 0 {
		t.Fatalf("HEAD with a body of %d bytes", head.Body.Len())
	}
	for _, k := range []string{"Content-Type", "ETag", "Last-Modified", "Content-Length"} {
		if head.Header().Get(k) == "" || head.Header().Get(k) != get.Header().Get(k) {
			t.Errorf("%s: HEAD %q, GET %q", k, head.Header().Get(k), get.Header().Get(k))
		}
	}
	if get.Header().Get("Content-Length") != fmt.Sprint(get.Body.Len()) {
		t.Fatalf("Content-Length %s for %d bytes", get.Header().Get("Content-Length"), get.Body.Len())
	}
	wantCode(t, h.get(http.MethodHead, feedURL, "If-None-Match", get.Header().Get("ETag")), http.StatusNotModified)
}

func TestFeedGzip(t *testing.T) {
	t.Parallel()
	h := newFeedHarness(t, nil)
	h.store.put("WH1", feedT0, feedT0, item("A", "4", "100"), item("B", "1", "5"))
	plainW := h.get(http.MethodGet, feedURL)
	for _, ae := range []string{"gzip", "br, gzip;q=0.8", "GZIP", "x-gzip"} {
		w := h.get(http.MethodGet, feedURL, "Accept-Encoding", ae)
		wantCode(t, w, http.StatusOK)
		if w.Header().Get("Content-Encoding") != "gzip" || w.Header().Get("Vary") != "Accept-Encoding" {
			t.Fatalf("%q: headers %v", ae, w.Header())
		}
		zr, err := gzip.NewReader(w.Body)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(zr)
		if err != nil || !bytes.Equal(body, plainW.Body.Bytes()) {
			t.Fatalf("%q: the gzip body differs from the plain one (%v)", ae, err)
		}
		if w.Header().Get("ETag") == plainW.Header().Get("ETag") {
			t.Fatalf("one ETag for two encodings")
		}
		// Either encoding's tag proves the content unchanged.
		wantCode(t, h.get(http.MethodGet, feedURL, "Accept-Encoding", ae, "If-None-Match", plainW.Header().Get("ETag")), http.StatusNotModified)
		wantCode(t, h.get(http.MethodGet, feedURL, "If-None-Match", w.Header().Get("ETag")), http.StatusNotModified)
	}
	for _, ae := range []string{"gzip;q=0", "identity", "br", ""} {
		if w := h.get(http.MethodGet, feedURL, "Accept-Encoding", ae); w.Header().Get("Content-Encoding") != "" {
			t.Fatalf("%q: gzip served", ae)
		}
	}
}

func TestFeedBuildsOncePerSnapshotSet(t *testing.T) {
	t.Parallel()
	h := newFeedHarness(t, nil)
	h.store.put("WH1", feedT0, feedT0, item("A", "4", "100"))
	h.store.put("WH2", feedT0, feedT0, item("A", "1", "100"))
	// Pullers at once: one build, every answer the same body.
	var wg sync.WaitGroup
	tags := make([]string, 8)
	for i := range tags {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := httptest.NewRequest(http.MethodGet, feedURL, nil)
			w := httptest.NewRecorder()
			h.feed.ServeHTTP(w, r)
			if w.Code == http.StatusOK {
				tags[i] = w.Header().Get("ETag")
			}
		}()
	}
	wg.Wait()
	for range 5 {
		wantCode(t, h.get(http.MethodGet, feedURL), http.StatusOK)
	}
	for _, tag := range tags {
		if tag == "" || tag != tags[0] {
			t.Fatalf("ETags of pulls at once %q, want one tag", tags)
		}
	}
	_, reads := h.store.counts()
	if st := h.feed.Stats(); st.Builds != 1 || reads != 2 {
		t.Fatalf("%d builds reading items %d times for 13 pulls, want 1 build of 2 snapshots", st.Builds, reads)
	}
	h.store.put("WH2", feedT0.Add(time.Hour), feedT0.Add(time.Hour), item("A", "2", "100"))
	wantCode(t, h.get(http.MethodGet, feedURL), http.StatusOK)
	if st := h.feed.Stats(); st.Builds != 2 {
		t.Fatalf("%d builds after a new snapshot, want 2", st.Builds)
	}
}

func TestNewFeedRefusesBadConfiguration(t *testing.T) {
	t.Parallel()
	ok := FeedConfig{Token: feedTestToken, Stores: map[string]string{"WH1": "PP1"}, Company: "C", MerchantID: "M"}
	store := newFakeStockStore()
	if _, err := NewFeed(store, ok); err != nil {
		t.Fatalf("a good configuration: %v", err)
	}
	for _, c := range []struct {
		name string
		edit func(*FeedConfig)
		want string
	}{
		{"no token", func(c *FeedConfig) { c.Token = "" }, "connectors.kaspi.feed_token"},
		{"short token", func(c *FeedConfig) { c.Token = "abc" }, "at least 16"},
		{"token with a slash", func(c *FeedConfig) { c.Token = "abcdefgh/ijklmnopq" }, "connectors.kaspi.feed_token"},
		{"token with a dot", func(c *FeedConfig) { c.Token = "abcdefgh.ijklmnopq" }, "connectors.kaspi.feed_token"},
		{"no stores", func(c *FeedConfig) { c.Stores = nil }, "connectors.kaspi.stores"},
		{"empty point", func(c *FeedConfig) { c.Stores = map[string]string{"WH1": " "} }, "connectors.kaspi.stores.WH1"},
		{"one point twice", func(c *FeedConfig) { c.Stores = map[string]string{"WH1": "PP1", "WH2": "PP1"} }, "WH1 and WH2"},
		{"no company", func(c *FeedConfig) { c.Company = "" }, "connectors.kaspi.company"},
		{"no merchant id", func(c *FeedConfig) { c.MerchantID = " " }, "connectors.kaspi.merchant_id"},
	} {
		cfg := ok
		cfg.Stores = map[string]string{"WH1": "PP1"}
		c.edit(&cfg)
		if _, err := NewFeed(store, cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one naming %s", c.name, err, c.want)
		}
	}
	if _, err := NewFeed(nil, ok); err == nil {
		t.Errorf("no store: accepted")
	}
}

// bigSnapshots stores n items in WH1 and every other one in WH2, with quantities
// that are whole, fractional, zero and negative.
func bigSnapshots(store *fakeStockStore, n int) {
	wh1 := make([]stock.Item, 0, n)
	wh2 := make([]stock.Item, 0, n/2)
	for i := range n {
		sku := fmt.Sprintf("SKU-%06d", i)
		var qty string
		switch i % 4 {
		case 0:
			qty = fmt.Sprint(i % 1000)
		case 1:
			qty = fmt.Sprintf("%d.%d", i%50, i%10)
		case 2:
			qty = "0"
		default:
			qty = "-1"
		}
		price := fmt.Sprintf("%d.%02d", 100+i%100000, i%100)
		wh1 = append(wh1, item(sku, qty, price))
		if i%2 == 0 {
			wh2 = append(wh2, item(sku, fmt.Sprint(i%7), price))
		}
	}
	store.put("WH1", feedT0, feedT0, wh1...)
	store.put("WH2", feedT0, feedT0, wh2...)
}

func TestFeed50000Items(t *testing.T) {
	t.Parallel()
	h := newFeedHarness(t, nil)
	bigSnapshots(h.store, 50000)
	w := h.get(http.MethodGet, feedURL)
	wantCode(t, w, http.StatusOK)
	validateFeed(t, w.Body.Bytes())
	c := parseCatalog(t, w.Body.Bytes())
	if len(c.Offers) != 50000 {
		t.Fatalf("%d offers, want 50000", len(c.Offers))
	}
	if got := c.offer(t, "SKU-000004").avail(); got != "PP1=yes/4 PP2=yes/4" {
		t.Fatalf("SKU-000004: %s", got)
	}
	if got := c.offer(t, "SKU-000003").avail(); got != "PP1=no/0 PP2=no/0" {
		t.Fatalf("SKU-000003: %s", got)
	}
	st := h.feed.Stats()
	t.Logf("50,000 items: %d bytes (%d gzip), built in %s", st.Last.Bytes, st.Last.GzipBytes, st.Last.Took)
	// A second pull is the kept body.
	wantCode(t, h.get(http.MethodGet, feedURL, "If-None-Match", w.Header().Get("ETag")), http.StatusNotModified)
	if st := h.feed.Stats(); st.Builds != 1 {
		t.Fatalf("%d builds", st.Builds)
	}
}

// BenchmarkFeedBuild builds the catalog of 50,000 items in two warehouses (the
// items read from the in-memory store, the XML written, gzipped and hashed).
func BenchmarkFeedBuild(b *testing.B) {
	store := newFakeStockStore()
	bigSnapshots(store, 50000)
	f, err := NewFeed(store, FeedConfig{Token: feedTestToken, Stores: map[string]string{"WH1": "PP1", "WH2": "PP2"}, Company: "C", MerchantID: "M"})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	snaps := make([]stock.Snapshot, 2)
	for i, wh := range f.warehouses {
		if snaps[i], err = store.Latest(ctx, wh, time.Time{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	var fb *feedBody
	for b.Loop() {
		if fb, err = f.buildBody(ctx, snaps, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(len(fb.body)))
	b.ReportMetric(float64(len(fb.body)), "feed-bytes")
	b.ReportMetric(float64(len(fb.gz)), "gzip-bytes")
	b.ReportMetric(float64(fb.info.Offers), "offers")
}

// BenchmarkFeedServeKept serves the kept 50,000-offer body (a pull with no new
// snapshot: the store is asked for the latest keys only).
func BenchmarkFeedServeKept(b *testing.B) {
	store := newFakeStockStore()
	bigSnapshots(store, 50000)
	f, err := NewFeed(store, FeedConfig{Token: feedTestToken, Stores: map[string]string{"WH1": "PP1", "WH2": "PP2"}, Company: "C", MerchantID: "M"})
	if err != nil {
		b.Fatal(err)
	}
	r := httptest.NewRequest(http.MethodGet, feedURL, nil)
	r.Header.Set("Accept-Encoding", "gzip")
	f.ServeHTTP(httptest.NewRecorder(), r) // the build, before the clock starts
	b.ReportAllocs()
	for b.Loop() {
		w := httptest.NewRecorder()
		f.ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			b.Fatal(w.Code)
		}
	}
}

// TestFeedPulledBySimulator: Kaspi's simulated puller reads the feed over HTTP,
// conditional pulls and gzip included, and sees what the snapshots hold.
func TestFeedPulledBySimulator(t *testing.T) {
	t.Parallel()
	h := newFeedHarness(t, nil)
	ts := httptest.NewServer(h.feed)
	t.Cleanup(ts.Close)
	p := kaspisim.NewFeedPuller(ts.URL+feedURL, kaspisim.FeedOptions{})
	ctx := context.Background()

	if res, err := p.Pull(ctx); err == nil || res.Status != http.StatusServiceUnavailable || res.Retry != "300" {
		t.Fatalf("pull before any snapshot: %+v, %v", res, err)
	}
	h.store.put("WH1", feedT0, feedT0.Add(time.Second), item("A", "5", "1500.00"), item("B", "1", "10"))
	h.store.put("WH2", feedT0, feedT0.Add(2*time.Second), item("A", "2.5", "1600"))
	res, err := p.Pull(ctx)
	if err != nil || res.Status != http.StatusOK || !res.Gzip || res.Offers != 2 {
		t.Fatalf("first pull: %+v, %v", res, err)
	}
	a, _ := p.Offer("A")
	if a.Price.String() != "1500" || a.Stores["PP1"].StockCount != 5 || !a.Stores["PP2"].Available || a.Stores["PP2"].StockCount != 2 {
		t.Fatalf("offer A %+v", a)
	}
	if res, err := p.Pull(ctx); err != nil || res.Status != http.StatusNotModified {
		t.Fatalf("second pull: %+v, %v", res, err)
	}

	// A sells out at WH2: the point stays, as no.
	h.store.put("WH2", feedT0.Add(30*time.Minute), feedT0.Add(30*time.Minute), item("A", "0", "1600"))
	if res, err := p.Pull(ctx); err != nil || res.Status != http.StatusOK {
		t.Fatalf("third pull: %+v, %v", res, err)
	}
	a, _ = p.Offer("A")
	if got, ok := a.Stores["PP2"]; !ok || got.Available || got.StockCount != 0 {
		t.Fatalf("A at PP2 after selling out: %+v (present %v)", got, ok)
	}
	b, _ := p.Offer("B")
	if got := b.Stores["PP2"]; got.Available || !got.HasCount {
		t.Fatalf("B at PP2 %+v", got)
	}
	if st := p.Stats(); st.OK != 2 || st.NotModified != 1 || st.Failed != 1 {
		t.Fatalf("puller stats %+v", st)
	}
}

// TestFeedHoldsBackReserveAndPending: Kaspi is told 1C's quantity less the
// reserve that holds for kaspi and less what orders not yet in 1C hold of the
// warehouse, never below 0.
func TestFeedHoldsBackReserveAndPending(t *testing.T) {
	t.Parallel()
	h := newFeedHarness(t, func(c *FeedConfig) {
		c.Reserves = stock.Reserves{{Account: "kaspi", SKU: "A", Quantity: decimal.NewFromInt(1)},
			{Account: "ozon", SKU: "*", Quantity: decimal.NewFromInt(5)}}
		c.Pending = func(_ context.Context, wh string) (map[string]decimal.Decimal, error) {
			if wh == "WH1" {
				return map[string]decimal.Decimal{"A": decimal.NewFromInt(1), "B": decimal.NewFromInt(3)}, nil
			}
			return nil, nil
		}
	})
	h.store.put("WH1", feedT0, feedT0, item("A", "3", "100"), item("B", "1", "50"))
	h.store.put("WH2", feedT0, feedT0, item("A", "2", "100"), item("B", "4", "50"))
	w := h.get(http.MethodGet, feedURL)
	wantCode(t, w, http.StatusOK)
	c := parseCatalog(t, w.Body.Bytes())
	if got := c.offer(t, "A").avail(); got != "PP1=yes/1 PP2=yes/1" {
		t.Errorf("A: %s, want WH1 3-1-1 and WH2 2-1 (Ozon's reserve not Kaspi's)", got)
	}
	if got := c.offer(t, "B").avail(); got != "PP1=no/0 PP2=yes/4" {
		t.Errorf("B: %s, want WH1 1-3 as no, WH2 4", got)
	}
}
