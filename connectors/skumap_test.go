package connectors

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ordersync/ordersync/internal/order"
)

func TestSKUMapIdentityFileReloadAndUnmapped(t *testing.T) {
	t.Parallel()
	id, err := NewSKUMap("")
	if err != nil {
		t.Fatal(err)
	}
	if to, ok := id.Lookup("kaspi", "X-1"); !ok || to != "X-1" {
		t.Fatalf("identity: %q %v", to, ok)
	}

	path := filepath.Join(t.TempDir(), "sku-map.csv")
	os.WriteFile(path, []byte("marketplace,marketplace_sku,onec_sku\n# comment\nkaspi, 100500 ,SKU-1\nozon,OFFER-7,SKU-7\n"), 0o600)
	m, err := NewSKUMap(path)
	if err != nil {
		t.Fatal(err)
	}
	o := &order.Order{Lines: []order.Line{{SKU: "100500"}, {SKU: "999"}}}
	err = m.Apply("kaspi", o)
	var ve *order.ValidationError
	if !errors.As(err, &ve) || len(ve.Problems) != 1 || ve.Problems[0].Field != "lines[1].sku" || !strings.Contains(ve.Problems[0].Message, "999") {
		t.Fatalf("Apply = %v, want lines[1].sku unmapped", err)
	}
	if o.Lines[0].SKU != "SKU-1" {
		t.Fatalf("mapped line = %q, want SKU-1", o.Lines[0].SKU)
	}
	if _, ok := m.Lookup("kaspi", "OFFER-7"); ok {
		t.Fatalf("an ozon mapping applied to kaspi")
	}

	// The file changes: the next reload picks it up.
	os.WriteFile(path, []byte("kaspi,100500,SKU-1\nkaspi,999,SKU-9\n"), 0o600)
	os.Chtimes(path, time.Now().Add(time.Minute), time.Now().Add(time.Minute))
	if changed, err := m.Reload(); !changed || err != nil {
		t.Fatalf("Reload = %v, %v; want a reload", changed, err)
	}
	if to, ok := m.Lookup("kaspi", "999"); !ok || to != "SKU-9" {
		t.Fatalf("after reload: %q %v", to, ok)
	}
	// A broken file keeps the last good map and says where it broke.
	os.WriteFile(path, []byte("kaspi,100500,SKU-1\nkaspi,100500,SKU-2\n"), 0o600)
	os.Chtimes(path, time.Now().Add(2*time.Minute), time.Now().Add(2*time.Minute))
	if _, err := m.Reload(); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("Reload of a bad file = %v, want an error naming line 2", err)
	}
	if to, _ := m.Lookup("kaspi", "999"); to != "SKU-9" {
		t.Fatalf("a bad file replaced the map")
	}
}

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 9, 16, 10, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Duration{"3": 3 * time.Second, "Wed, 16 Sep 2026 10:00:05 GMT": 5 * time.Second, "0": 0} {
		if got, ok := RetryAfter(in, now); !ok || got != want {
			t.Errorf("RetryAfter(%q) = %s %v, want %s", in, got, ok, want)
		}
	}
	if _, ok := RetryAfter("soon", now); ok {
		t.Errorf("RetryAfter(soon) parsed")
	}
}

func TestSKUMapMarketSKUs(t *testing.T) {
	t.Parallel()
	id, err := NewSKUMap("")
	if err != nil {
		t.Fatal(err)
	}
	if got := id.MarketSKUs("kaspi", "SKU-1"); !slices.Equal(got, []string{"SKU-1"}) {
		t.Fatalf("identity: %q", got)
	}
	if id.Version() != 0 {
		t.Fatalf("identity version %d", id.Version())
	}
	var none *SKUMap
	if got := none.MarketSKUs("kaspi", "SKU-1"); !slices.Equal(got, []string{"SKU-1"}) {
		t.Fatalf("nil map: %q", got)
	}

	path := filepath.Join(t.TempDir(), "sku-map.csv")
	os.WriteFile(path, []byte("marketplace,marketplace_sku,onec_sku\nKaspi,200,SKU-1\nkaspi,100,SKU-1\nozon,OFFER-2,SKU-2\n"), 0o600)
	m, err := NewSKUMap(path)
	if err != nil {
		t.Fatal(err)
	}
	v1 := m.Version()
	if got := m.MarketSKUs("kaspi", "SKU-1"); !slices.Equal(got, []string{"100", "200"}) {
		t.Fatalf("kaspi SKU-1 → %q, want [100 200]", got)
	}
	if got := m.MarketSKUs("kaspi", "SKU-2"); got != nil {
		t.Fatalf("kaspi SKU-2 (only an ozon line) → %q, want none", got)
	}
	if got := m.MarketSKUs("ozon", "SKU-2"); !slices.Equal(got, []string{"OFFER-2"}) {
		t.Fatalf("ozon SKU-2 → %q", got)
	}

	// A reload rebuilds the reverse index and moves the version; a broken file
	// leaves both.
	os.WriteFile(path, []byte("kaspi,300,SKU-2\n"), 0o600)
	os.Chtimes(path, time.Now().Add(time.Minute), time.Now().Add(time.Minute))
	if changed, err := m.Reload(); !changed || err != nil {
		t.Fatalf("Reload = %v, %v", changed, err)
	}
	v2 := m.Version()
	if v2 == v1 {
		t.Fatalf("version unchanged by a reload")
	}
	if got := m.MarketSKUs("kaspi", "SKU-1"); got != nil {
		t.Fatalf("after reload kaspi SKU-1 → %q, want none", got)
	}
	if got := m.MarketSKUs("kaspi", "SKU-2"); !slices.Equal(got, []string{"300"}) {
		t.Fatalf("after reload kaspi SKU-2 → %q", got)
	}
	os.WriteFile(path, []byte("kaspi,300,SKU-2\nkaspi,300,SKU-3\n"), 0o600)
	os.Chtimes(path, time.Now().Add(2*time.Minute), time.Now().Add(2*time.Minute))
	if _, err := m.Reload(); err == nil {
		t.Fatalf("a bad file reloaded")
	}
	if m.Version() != v2 || !slices.Equal(m.MarketSKUs("kaspi", "SKU-2"), []string{"300"}) {
		t.Fatalf("a bad file changed the map")
	}
}

func TestSKUMapMarketplaceNames(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "sku-map.csv")
	os.WriteFile(path, []byte("marketplace,marketplace_sku,onec_sku\nwb,111,SKU-1\nWildberries,222,SKU-2\nKASPI,333,SKU-3\nbitrix24,444,SKU-4\n"), 0o600)
	m, err := NewSKUMap(path)
	if err != nil {
		t.Fatal(err)
	}
	// Wildberries orders and stock go by the source name wb, whichever name the line used.
	for _, c := range []struct{ mp, from, to string }{{"wb", "111", "SKU-1"}, {"wb", "222", "SKU-2"}, {"kaspi", "333", "SKU-3"}, {"bitrix24", "444", "SKU-4"}} {
		if to, ok := m.Lookup(c.mp, c.from); !ok || to != c.to {
			t.Errorf("Lookup(%s, %s) = %q %v, want %s", c.mp, c.from, to, ok, c.to)
		}
	}
	if got := m.MarketSKUs("wb", "SKU-2"); !slices.Equal(got, []string{"222"}) {
		t.Errorf("MarketSKUs(wb, SKU-2) = %v, want [222]", got)
	}

	// Any other name is refused with its line; every bad line is named at once.
	bad := "marketplace,marketplace_sku,onec_sku\nwb,1,SKU-1\nwilberries,2,SKU-2\nozon,3,SKU-3\namazon,4,SKU-4\nkaspi,5\n"
	problems := SKUMapProblems([]byte(bad), nil)
	want := []string{`line 3: unknown marketplace "wilberries"`, `line 5: unknown marketplace "amazon"`, "line 6: has 2 fields"}
	if len(problems) != len(want) {
		t.Fatalf("problems %q, want %d", problems, len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(problems[i], w) {
			t.Errorf("problem %d is %q, want %q…", i, problems[i], w)
		}
	}
	os.WriteFile(path, []byte(bad), 0o600)
	if _, err := NewSKUMap(path); err == nil || !strings.Contains(err.Error(), "line 3") || !strings.Contains(err.Error(), "line 5") {
		t.Fatalf("NewSKUMap of a file naming unknown marketplaces: %v", err)
	}
	if p := SKUMapProblems([]byte("kaspi,1,A\n"), nil); p != nil {
		t.Fatalf("a good file: %q", p)
	}
	var many strings.Builder
	for i := range 50 {
		fmt.Fprintf(&many, "x%d,1,A\n", i)
	}
	if p := SKUMapProblems([]byte(many.String()), nil); len(p) != maxSKUMapProblems+1 || p[maxSKUMapProblems] != "and more" {
		t.Fatalf("50 bad lines: %d problems, last %q", len(p), p[len(p)-1])
	}
}

// TestSKUMapOfAFurtherAccount: a line may name a further account; its SKUs
// without a line of their own are mapped by its marketplace's lines, both ways;
// an account the configuration does not have is refused as before.
func TestSKUMapOfAFurtherAccount(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "sku-map.csv")
	os.WriteFile(path, []byte("ozon,OFFER-7,SKU-7\nozon,OFFER-8,SKU-8\nozon-ip,IP-OFFER-8,SKU-8\nym,YM-1,SKU-7\n"), 0o600)
	if _, err := NewSKUMap(path); err == nil || !strings.Contains(err.Error(), `unknown marketplace "ozon-ip"`) {
		t.Fatalf("a map naming an account the configuration lacks: %v", err)
	}
	m, err := NewSKUMapFor(path, map[string]string{"ozon-ip": "ozon"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ mp, sku, want string }{
		{"ozon-ip", "IP-OFFER-8", "SKU-8"}, // its own line
		{"ozon-ip", "OFFER-7", "SKU-7"},    // the marketplace's line
		{"ozon", "OFFER-8", "SKU-8"},
		{"ym", "YM-1", "SKU-7"},
	} {
		if to, ok := m.Lookup(c.mp, c.sku); !ok || to != c.want {
			t.Errorf("Lookup(%s, %s) = %q, %v; want %s", c.mp, c.sku, to, ok, c.want)
		}
	}
	if _, ok := m.Lookup("ozon", "IP-OFFER-8"); ok {
		t.Error("the first account maps the further account's own line")
	}
	if got := m.MarketSKUs("ozon-ip", "SKU-8"); !slices.Equal(got, []string{"IP-OFFER-8"}) {
		t.Errorf("MarketSKUs(ozon-ip, SKU-8) = %q, want its own line", got)
	}
	if got := m.MarketSKUs("ozon-ip", "SKU-7"); !slices.Equal(got, []string{"OFFER-7"}) {
		t.Errorf("MarketSKUs(ozon-ip, SKU-7) = %q, want the marketplace's line", got)
	}
}
