package connectors

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ordersync/ordersync/internal/order"
)

// SKUMap maps a marketplace SKU to the 1C SKU. With no file it is the identity. A
// file is CSV, marketplace,marketplace_sku,onec_sku (a header line of those names and
// lines starting with # are skipped), marketplace one of kaspi, ozon, wb (or
// wildberries) and bitrix24, in any case; another name is refused with its line. It
// is read again when it changes, and a file that no longer parses leaves the last
// good map in force.
type SKUMap struct {
	path string
	// accounts are the further accounts' sources, each with the name of its
	// marketplace's first account (ozon-ip → ozon): a line may name the account,
	// and an SKU it has no line for is looked up under its marketplace's name.
	accounts map[string]string

	mu      sync.RWMutex
	m       map[string]map[string]string   // marketplace → its SKU → 1C SKU
	rev     map[string]map[string][]string // marketplace → 1C SKU → its SKUs, sorted
	version uint64                         // counts the maps read
	modTime time.Time
	size    int64
}

// NewSKUMap reads path; "" is the identity map.
func NewSKUMap(path string) (*SKUMap, error) { return NewSKUMapFor(path, nil) }

// NewSKUMapFor reads path for a configuration with further accounts: accounts maps
// each one's source to its marketplace's name in the map (ozon-ip → ozon, wb-kz →
// wb). A line may name such an account; the account's SKUs without a line of their
// own are mapped by its marketplace's lines.
func NewSKUMapFor(path string, accounts map[string]string) (*SKUMap, error) {
	s := &SKUMap{path: path, accounts: accounts}
	if path == "" {
		return s, nil
	}
	if _, err := s.Reload(); err != nil {
		return nil, err
	}
	return s, nil
}

// Path is the file, "" for the identity map.
func (s *SKUMap) Path() string { return s.path }

// Reload reads the file again when its size or modification time changed. It
// reports whether it did.
func (s *SKUMap) Reload() (bool, error) {
	if s.path == "" {
		return false, nil
	}
	fi, err := os.Stat(s.path)
	if err != nil {
		return false, fmt.Errorf("connectors.sku_map: %w", err)
	}
	s.mu.RLock()
	same := s.m != nil && fi.ModTime().Equal(s.modTime) && fi.Size() == s.size
	s.mu.RUnlock()
	if same {
		return false, nil
	}
	data, err := os.ReadFile(s.path)
	if err != nil {
		return false, fmt.Errorf("connectors.sku_map: %w", err)
	}
	m, problems := parseSKUMap(data, s.accounts)
	if len(problems) > 0 {
		return false, fmt.Errorf("connectors.sku_map: %s: %s", s.path, strings.Join(problems, "; "))
	}
	rev := reverseSKUMap(m)
	s.mu.Lock()
	s.m, s.rev, s.modTime, s.size = m, rev, fi.ModTime(), fi.Size()
	s.version++
	s.mu.Unlock()
	return true, nil
}

// reverseSKUMap indexes m by 1C SKU: marketplace → 1C SKU → the marketplace's
// SKUs mapped to it, sorted.
func reverseSKUMap(m map[string]map[string]string) map[string]map[string][]string {
	rev := make(map[string]map[string][]string, len(m))
	for mp, skus := range m {
		r := make(map[string][]string, len(skus))
		for from, to := range skus {
			r[to] = append(r[to], from)
		}
		for _, froms := range r {
			slices.Sort(froms)
		}
		rev[mp] = r
	}
	return rev
}

// skuMapNames are the marketplaces a SKU map line may name, and the name each is
// looked up by: the source of its orders (Wildberries' is wb; wildberries, its
// configuration name, is taken too).
var skuMapNames = map[string]string{
	"kaspi": "kaspi", "ozon": "ozon", "wb": "wb", "wildberries": "wb", "bitrix24": "bitrix24",
	"ym": "ym", "yandex_market": "ym", "uzum": "uzum",
}

// maxSKUMapProblems is how many bad lines of a SKU map are named at most.
const maxSKUMapProblems = 20

// SKUMapProblems says what is wrong with the content of a SKU map file, one line
// each ("line 3: unknown marketplace …"), or nothing when it is good: `config check`
// names every bad line at once.
func SKUMapProblems(data []byte, accounts map[string]string) []string {
	_, problems := parseSKUMap(data, accounts)
	return problems
}

func parseSKUMap(data []byte, accounts map[string]string) (map[string]map[string]string, []string) {
	r := csv.NewReader(bytes.NewReader(bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))))
	r.Comment = '#'
	r.FieldsPerRecord = 3
	r.TrimLeadingSpace = true
	m := map[string]map[string]string{}
	var problems []string
	bad := func(msg string) bool {
		if len(problems) == maxSKUMapProblems {
			problems = append(problems, "and more")
			return false
		}
		problems = append(problems, msg)
		return len(problems) <= maxSKUMapProblems
	}
	for first := true; ; first = false {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		var pe *csv.ParseError
		if errors.As(err, &pe) && errors.Is(pe.Err, csv.ErrFieldCount) {
			if !bad(fmt.Sprintf("line %d: has %d fields, want 3: marketplace,marketplace_sku,onec_sku", pe.StartLine, len(rec))) {
				break
			}
			continue
		}
		if err != nil {
			bad(err.Error()) // the CSV itself is broken: what follows cannot be told
			break
		}
		line, _ := r.FieldPos(0)
		for i := range rec {
			rec[i] = strings.TrimSpace(rec[i])
		}
		if first && strings.EqualFold(rec[0], "marketplace") && strings.EqualFold(rec[1], "marketplace_sku") {
			continue
		}
		name, from, to := strings.ToLower(rec[0]), rec[1], rec[2]
		if name == "" || from == "" || to == "" {
			if !bad(fmt.Sprintf("line %d: marketplace, marketplace_sku and onec_sku are all required", line)) {
				break
			}
			continue
		}
		mp, ok := skuMapNames[name]
		if _, account := accounts[name]; account && !ok {
			mp, ok = name, true
		}
		if !ok {
			if !bad(fmt.Sprintf("line %d: unknown marketplace %q: kaspi, ozon, wb (or wildberries), ym, uzum, bitrix24 or an account's name", line, rec[0])) {
				break
			}
			continue
		}
		if m[mp] == nil {
			m[mp] = map[string]string{}
		}
		if prev, dup := m[mp][from]; dup && prev != to {
			if !bad(fmt.Sprintf("line %d: %s SKU %q is mapped twice (to %q and %q)", line, rec[0], from, prev, to)) {
				break
			}
			continue
		}
		m[mp][from] = to
	}
	if len(problems) > 0 {
		return nil, problems
	}
	return m, nil
}

// Lookup maps one SKU. The identity map always finds it.
func (s *SKUMap) Lookup(marketplace, sku string) (string, bool) {
	if s == nil || s.path == "" {
		return sku, true
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	to, ok := s.m[marketplace][sku]
	if base, account := s.accounts[marketplace]; !ok && account {
		to, ok = s.m[base][sku]
	}
	return to, ok
}

// MarketSKUs maps a 1C SKU back to the marketplace's SKUs, for publishing stock:
// the identity map gives the SKU itself; a file gives every marketplace SKU mapped
// to it (usually one; several listings of one 1C product each get its stock),
// sorted, or nil when the marketplace has no line for it. The caller must not
// modify the slice.
func (s *SKUMap) MarketSKUs(marketplace, onecSKU string) []string {
	if s == nil || s.path == "" {
		return []string{onecSKU}
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if own := s.rev[marketplace][onecSKU]; own != nil {
		return own
	}
	if base, account := s.accounts[marketplace]; account {
		return s.rev[base][onecSKU]
	}
	return nil
}

// Version changes whenever Reload reads a new map (0 for the identity map), so
// a cache of anything derived from the map knows when to rebuild.
func (s *SKUMap) Version() uint64 {
	if s == nil {
		return 0
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.version
}

// Apply maps every line of o in place. An unmapped SKU is a *order.ValidationError
// naming the line, so the order fails with a reason and the rest of the page goes on.
func (s *SKUMap) Apply(marketplace string, o *order.Order) error {
	var ps []order.FieldError
	for i := range o.Lines {
		to, ok := s.Lookup(marketplace, o.Lines[i].SKU)
		if !ok {
			ps = append(ps, order.FieldError{
				Field:   fmt.Sprintf("lines[%d].sku", i),
				Message: fmt.Sprintf("%s SKU %q has no 1C SKU in connectors.sku_map (%s): add a line %s,%s,<1C SKU>", marketplace, o.Lines[i].SKU, s.path, marketplace, o.Lines[i].SKU),
			})
			continue
		}
		o.Lines[i].SKU = to
	}
	if len(ps) > 0 {
		return &order.ValidationError{Problems: ps}
	}
	return nil
}
