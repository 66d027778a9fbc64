package kaspi

// The Kaspi price list. Kaspi does not take stock by API: the seller sets, in the
// Kaspi merchant cabinet, the URL of an XML price list, which Kaspi pulls on its own
// schedule (about every half hour to hour). Feed serves that URL from the latest
// stock snapshot of each configured warehouse.
//
// Facts it relies on, from Kaspi's merchant guide ("Прайс-лист", automatic load) and
// the price lists built to it: the root is <kaspi_catalog date="…"> in the namespace
// "kaspiShopping" (xsi:schemaLocation "kaspiShopping http://kaspi.kz/kaspishopping.xsd"),
// holding <company>, <merchantid> and <offers>; each <offer sku="…"> has <model>,
// <availabilities> with one <availability available="yes|no" storeId="PP1"
// stockCount="N"/> per pickup point (the point ids of the cabinet's Settings →
// Stores), and <price> in whole tenge, no decimals. Kaspi stops selling at a point
// when the point says available="no", so every configured point is written for every
// offer. The date is a free string in Kaspi's example; the feed writes RFC 3339 in
// Almaty time.

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/shopspring/decimal"

	"github.com/ordersync/ordersync/connectors"
	"github.com/ordersync/ordersync/internal/stock"
)

// FeedPath is where the feed is mounted on http.listen: the price list is
// FeedPath + <feed token> + ".xml".
const FeedPath = "/feeds/kaspi/"

// Feed defaults and limits.
const (
	// DefaultFeedRetryAfter is the Retry-After of a 503 (no snapshot yet, the store
	// failing).
	DefaultFeedRetryAfter = 5 * time.Minute
	// DefaultFeedTimeout bounds reading the snapshots for one build.
	DefaultFeedTimeout = 30 * time.Second
	// MinFeedTokenLen is the shortest token taken: the URL is the feed's only secret.
	MinFeedTokenLen = 16
	// FeedContentType is the feed's Content-Type.
	FeedContentType = "application/xml; charset=utf-8"
)

// Configuration keys named in the feed's errors.
const (
	keyFeedToken  = "connectors.kaspi.feed_token"
	keyStores     = "connectors.kaspi.stores"
	keyCompany    = "connectors.kaspi.company"
	keyMerchantID = "connectors.kaspi.merchant_id"
)

const (
	kaspiNamespace      = "kaspiShopping"
	kaspiSchemaLocation = "kaspiShopping http://kaspi.kz/kaspishopping.xsd"
	xsiNamespace        = "http://www.w3.org/2001/XMLSchema-instance"
)

// FeedConfig configures a Feed.
type FeedConfig struct {
	// Token is the secret part of the URL, FeedPath + Token + ".xml"
	// (connectors.kaspi.feed_token): at least MinFeedTokenLen characters of
	// A-Z a-z 0-9 _ -
	Token string
	// Stores maps a 1C warehouse to its Kaspi pickup point id (connectors.kaspi.stores:
	// {WH1: PP1}); at least one, each point once.
	Stores map[string]string
	// Company and MerchantID are the catalog's header (connectors.kaspi.company,
	// connectors.kaspi.merchant_id); both required.
	Company    string
	MerchantID string
	// SKUMap maps 1C SKUs back to Kaspi SKUs; nil is the identity. With a file, an
	// item that has no kaspi line is left out of the feed.
	SKUMap *connectors.SKUMap
	// Reserves are stock.reserve: what is held back from Kaspi of each 1C SKU.
	Reserves stock.Reserves
	// Pending, when set, reads what the orders not yet in 1C hold of a
	// warehouse's SKUs (stock.ReadPending), held back too.
	Pending func(ctx context.Context, warehouse string) (map[string]decimal.Decimal, error)
	// Location is the zone of the catalog's date attribute, default Asia/Almaty.
	Location *time.Location
	// RetryAfter is a 503's Retry-After, default DefaultFeedRetryAfter.
	RetryAfter time.Duration
	// Timeout bounds one build's reads of the store, default DefaultFeedTimeout.
	Timeout time.Duration
	// Logger receives one line per request and per build; never the token.
	Logger *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Feed is the http.Handler of the Kaspi price list, GET and HEAD
// FeedPath<token>.xml. Any other path under FeedPath, and a wrong token, is 404.
//
// The catalog has one offer per Kaspi SKU found in the latest snapshot of any
// configured warehouse, and in each offer one availability per configured point:
// available="yes" with stockCount the quantity floored when that is above zero,
// otherwise available="no" stockCount="0" (negative quantities, and a warehouse
// whose snapshot lacks the SKU or that has no snapshot yet, included). The price is
// the item's, rounded to whole tenge, from the first warehouse in name order whose
// snapshot has it with a price above zero; an item without one is left out, as is
// an item the SKU map has no kaspi line for. The model is the 1C SKU.
//
// The body is built once per set of snapshots (and SKU map version) and kept, with
// its gzip form; ETag is a hash of it, Last-Modified the newest snapshot's
// CreatedAt (or, if later, when this Feed started or the SKU map last changed:
// either may change the body without a new snapshot). If-None-Match and
// If-Modified-Since answer 304, If-None-Match taking precedence. With no snapshot
// of any configured warehouse the answer is 503 with Retry-After and a plain-text
// reason, never an empty catalog.
type Feed struct {
	store      stock.Store
	cfg        FeedConfig
	tokenSum   [32]byte
	warehouses []string // configured 1C warehouses, sorted
	log        *slog.Logger
	now        func() time.Time

	mu         sync.Mutex
	cur        *feedBody // the last body built
	mapVersion uint64    // the SKU map version last seen
	mapSeenAt  time.Time // when it was first seen (the Feed's start for the first)

	build sync.Mutex // one build at a time; the others wait and take its body

	stats feedCounters
}

// feedBody is one built catalog.
type feedBody struct {
	key      string // the snapshots and SKU map version it was built from
	body     []byte
	gz       []byte
	etag     string // of body
	etagGz   string // of gz
	modified time.Time
	info     FeedBuild
}

// FeedBuild describes the body the feed serves.
type FeedBuild struct {
	// Snapshots are the keys of the snapshots it was built from, by 1C warehouse.
	Snapshots map[string]string
	// Missing are the configured warehouses with no snapshot yet (their points are
	// written available="no").
	Missing []string
	// Newest is the newest snapshot's CreatedAt (the catalog's date).
	Newest time.Time
	// Offers in the catalog.
	Offers int
	// Unmapped: items left out because the SKU map has no kaspi line for them
	// (an item in two warehouses counts twice).
	Unmapped int
	// NoPrice: SKUs left out because no warehouse has a price above zero for them.
	NoPrice int
	// Negative and Fractional count the quantities published as 0 or floored;
	// RoundedPrices the prices rounded to whole tenge.
	Negative, Fractional, RoundedPrices int
	Bytes, GzipBytes                    int
	// BuiltAt is when it was built, Took how long that took.
	BuiltAt time.Time
	Took    time.Duration
}

// FeedStats counts the feed's answers.
type FeedStats struct {
	Requests    int64 // every request under FeedPath
	OK          int64 // 200
	NotModified int64 // 304
	NotFound    int64 // 404: a wrong token or path
	Unavailable int64 // 503: no snapshot yet, or the store failed
	Builds      int64 // bodies built
	// Last is the body currently kept, nil before the first build.
	Last *FeedBuild
}

type feedCounters struct {
	requests, ok, notModified, notFound, unavailable, builds atomic.Int64
}

var feedTokenRe = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// NewFeed checks cfg and returns the feed handler. Errors name the configuration key.
func NewFeed(store stock.Store, cfg FeedConfig) (*Feed, error) {
	switch {
	case store == nil:
		return nil, errors.New("kaspi: feed: no stock store")
	case cfg.Token == "":
		return nil, fmt.Errorf("kaspi: %s: the feed token is empty", keyFeedToken)
	case len(cfg.Token) < MinFeedTokenLen:
		return nil, fmt.Errorf("kaspi: %s: the feed token is %d characters, at least %d are needed (it is the feed URL's only secret)", keyFeedToken, len(cfg.Token), MinFeedTokenLen)
	case !feedTokenRe.MatchString(cfg.Token):
		return nil, fmt.Errorf("kaspi: %s: the feed token may hold only A-Z a-z 0-9 _ - (it is part of a URL)", keyFeedToken)
	case len(cfg.Stores) == 0:
		return nil, fmt.Errorf("kaspi: %s: at least one 1C warehouse → Kaspi point id is required (e.g. {WH1: PP1})", keyStores)
	case strings.TrimSpace(cfg.Company) == "":
		return nil, fmt.Errorf("kaspi: %s is required (the price list's <company>)", keyCompany)
	case strings.TrimSpace(cfg.MerchantID) == "":
		return nil, fmt.Errorf("kaspi: %s is required (the price list's <merchantid>, the merchant id of the Kaspi cabinet)", keyMerchantID)
	}
	f := &Feed{store: store, cfg: cfg, tokenSum: sha256.Sum256([]byte(cfg.Token)), log: cfg.Logger, now: cfg.Now}
	byPoint := map[string]string{}
	for wh, point := range cfg.Stores {
		switch {
		case strings.TrimSpace(wh) == "":
			return nil, fmt.Errorf("kaspi: %s: an empty 1C warehouse name", keyStores)
		case strings.TrimSpace(point) == "":
			return nil, fmt.Errorf("kaspi: %s.%s: the Kaspi point id is empty", keyStores, wh)
		case byPoint[point] != "":
			a, b := min(wh, byPoint[point]), max(wh, byPoint[point])
			return nil, fmt.Errorf("kaspi: %s: warehouses %s and %s both map to Kaspi point %s; a point takes one warehouse's stock", keyStores, a, b, point)
		}
		byPoint[point] = wh
		f.warehouses = append(f.warehouses, wh)
	}
	slices.Sort(f.warehouses)
	f.cfg.Stores = make(map[string]string, len(cfg.Stores))
	for wh, point := range cfg.Stores {
		f.cfg.Stores[wh] = point
	}
	if f.cfg.Location == nil {
		loc, err := time.LoadLocation("Asia/Almaty")
		if err != nil {
			loc = time.FixedZone("Asia/Almaty", 5*60*60)
		}
		f.cfg.Location = loc
	}
	if f.cfg.SKUMap == nil {
		f.cfg.SKUMap = new(connectors.SKUMap) // the identity
	}
	f.cfg.RetryAfter = cmp.Or(f.cfg.RetryAfter, DefaultFeedRetryAfter)
	f.cfg.Timeout = cmp.Or(f.cfg.Timeout, DefaultFeedTimeout)
	if f.log == nil {
		f.log = slog.New(slog.DiscardHandler)
	}
	f.log = f.log.With("connector", Name, "component", "feed")
	if f.now == nil {
		f.now = time.Now
	}
	f.mapVersion, f.mapSeenAt = f.cfg.SKUMap.Version(), f.now()
	return f, nil
}

// Stats returns the feed's counters and what it serves now.
func (f *Feed) Stats() FeedStats {
	s := FeedStats{
		Requests:    f.stats.requests.Load(),
		OK:          f.stats.ok.Load(),
		NotModified: f.stats.notModified.Load(),
		NotFound:    f.stats.notFound.Load(),
		Unavailable: f.stats.unavailable.Load(),
		Builds:      f.stats.builds.Load(),
	}
	f.mu.Lock()
	if f.cur != nil {
		info := f.cur.info
		info.Snapshots, info.Missing = maps.Clone(info.Snapshots), slices.Clone(info.Missing)
		s.Last = &info
	}
	f.mu.Unlock()
	return s
}

// token is the request's token, or false when the path is not FeedPath<token>.xml
// (the prefix may have been stripped by the mount).
func token(path string) (string, bool) {
	rest := strings.TrimPrefix(strings.TrimPrefix(path, FeedPath), "/")
	tok, ok := strings.CutSuffix(rest, ".xml")
	if !ok || tok == "" || strings.Contains(tok, "/") {
		return "", false
	}
	return tok, true
}

// ServeHTTP answers GET and HEAD FeedPath<token>.xml.
func (f *Feed) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	f.stats.requests.Add(1)
	tok, ok := token(r.URL.Path)
	// Hashes of equal length compared in constant time: neither the token's
	// content nor its length shows in the answer's timing.
	if sum := sha256.Sum256([]byte(tok)); !ok || subtle.ConstantTimeCompare(sum[:], f.tokenSum[:]) != 1 {
		f.stats.notFound.Add(1)
		f.log.WarnContext(r.Context(), "kaspi feed request with a wrong token or path", "method", r.Method, "status", http.StatusNotFound)
		plain(w, http.StatusNotFound, "not found\n", 0)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		plain(w, http.StatusMethodNotAllowed, "the Kaspi feed is read with GET or HEAD\n", 0)
		f.log.WarnContext(r.Context(), "kaspi feed request", "method", r.Method, "status", http.StatusMethodNotAllowed)
		return
	}

	fb, err := f.current(r.Context())
	if err != nil {
		f.stats.unavailable.Add(1)
		var ue *unavailableError
		reason := "the stock store is unavailable; retry later\n"
		level := slog.LevelError
		if errors.As(err, &ue) {
			reason, level = ue.reason+"\n", slog.LevelWarn
		}
		plain(w, http.StatusServiceUnavailable, reason, f.cfg.RetryAfter)
		f.log.Log(r.Context(), level, "kaspi feed unavailable", "method", r.Method, "status", http.StatusServiceUnavailable, "error", err.Error())
		return
	}

	gz := acceptsGzip(r.Header.Get("Accept-Encoding"))
	body, etag := fb.body, fb.etag
	if gz {
		body, etag = fb.gz, fb.etagGz
	}
	h := w.Header()
	h.Set("ETag", etag)
	h.Set("Last-Modified", fb.modified.UTC().Format(http.TimeFormat))
	h.Set("Cache-Control", "no-cache")
	h.Set("Vary", "Accept-Encoding")

	status := http.StatusOK
	if inm := r.Header.Get("If-None-Match"); inm != "" {
		if etagMatch(inm, fb.etag, fb.etagGz) {
			status = http.StatusNotModified
		}
	} else if ims, err := http.ParseTime(r.Header.Get("If-Modified-Since")); err == nil && !fb.modified.After(ims) {
		status = http.StatusNotModified
	}
	if status == http.StatusNotModified {
		f.stats.notModified.Add(1)
		w.WriteHeader(status)
	} else {
		f.stats.ok.Add(1)
		h.Set("Content-Type", FeedContentType)
		if gz {
			h.Set("Content-Encoding", "gzip")
		}
		h.Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(status)
		if r.Method != http.MethodHead {
			_, _ = w.Write(body)
		}
	}
	f.log.InfoContext(r.Context(), "kaspi feed request", "method", r.Method, "status", status,
		"offers", fb.info.Offers, "bytes", len(body), "gzip", gz, "duration_us", time.Since(start).Microseconds())
}

// plain writes a plain-text answer.
func plain(w http.ResponseWriter, status int, text string, retryAfter time.Duration) {
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	if retryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(int((retryAfter+time.Second-1)/time.Second)))
	}
	w.WriteHeader(status)
	_, _ = w.Write([]byte(text))
}

// unavailableError is a 503 whose reason the puller is told: no configured
// warehouse has a snapshot yet, or the snapshots make an empty catalog.
type unavailableError struct{ reason string }

func (e *unavailableError) Error() string { return e.reason }

// current returns the body for the latest snapshots, building it when they (or the
// SKU map) changed since the last build.
func (f *Feed) current(ctx context.Context) (*feedBody, error) {
	// The build outlives a puller that hangs up: the next pull takes its body.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), f.cfg.Timeout)
	defer cancel()

	if _, err := f.cfg.SKUMap.Reload(); err != nil {
		f.log.WarnContext(ctx, "kaspi feed: the SKU map did not reload; the last good one stays in force", "error", err.Error())
	}
	version := f.cfg.SKUMap.Version()
	f.mu.Lock()
	if version != f.mapVersion {
		f.mapVersion, f.mapSeenAt = version, f.now()
	}
	mapSeenAt := f.mapSeenAt
	f.mu.Unlock()

	snaps := make([]stock.Snapshot, len(f.warehouses)) // zero Key: none yet
	var missing []string
	var key strings.Builder
	for i, wh := range f.warehouses {
		s, err := f.store.Latest(ctx, wh, time.Time{})
		switch {
		case errors.Is(err, stock.ErrNoSnapshot):
			missing = append(missing, wh)
			key.WriteString(wh + "\x00\x00")
			continue
		case err != nil:
			return nil, fmt.Errorf("latest snapshot of %s: %w", wh, err)
		}
		snaps[i] = s
		key.WriteString(wh + "\x00" + s.Key + "\x00")
	}
	if len(missing) == len(f.warehouses) {
		return nil, &unavailableError{reason: "no stock snapshot yet for warehouse " + strings.Join(missing, ", ") +
			": the Kaspi price list is served once the first snapshot is taken"}
	}
	key.WriteString(strconv.FormatUint(version, 10))

	f.mu.Lock()
	cur := f.cur
	f.mu.Unlock()
	if cur != nil && cur.key == key.String() {
		return cur, nil
	}
	f.build.Lock()
	defer f.build.Unlock()
	f.mu.Lock()
	cur = f.cur
	f.mu.Unlock()
	if cur != nil && cur.key == key.String() {
		return cur, nil // built while this request waited
	}
	fb, err := f.buildBody(ctx, snaps, missing)
	if err != nil {
		return nil, err
	}
	fb.key = key.String()
	if mapSeenAt.After(fb.modified) {
		fb.modified = mapSeenAt
	}
	fb.modified = fb.modified.Truncate(time.Second)
	f.mu.Lock()
	f.cur = fb
	f.mu.Unlock()
	f.stats.builds.Add(1)

	attrs := []any{"offers", fb.info.Offers, "bytes", fb.info.Bytes, "gzip_bytes", fb.info.GzipBytes,
		"unmapped", fb.info.Unmapped, "no_price", fb.info.NoPrice, "negative", fb.info.Negative,
		"fractional", fb.info.Fractional, "rounded_prices", fb.info.RoundedPrices,
		"duration_ms", fb.info.Took.Milliseconds()}
	if len(missing) > 0 {
		f.log.WarnContext(ctx, "kaspi feed built without some warehouses: their points are written available=\"no\" until their first snapshot",
			append(attrs, "missing", strings.Join(missing, ","))...)
	} else {
		f.log.InfoContext(ctx, "kaspi feed built", attrs...)
	}
	return fb, nil
}

// offerRow is one Kaspi SKU being assembled.
type offerRow struct {
	sku    string  // Kaspi's
	onec   string  // the 1C SKU, written as the model
	price  string  // whole tenge, "" until a warehouse has a price above zero
	counts []int64 // per configured point, in f.warehouses order; 0 is available="no"
}

// buildBody reads the snapshots' items and writes the catalog. snaps[i] is the
// snapshot of f.warehouses[i], zero for a missing one.
func (f *Feed) buildBody(ctx context.Context, snaps []stock.Snapshot, missing []string) (*feedBody, error) {
	start := f.now()
	t0 := time.Now()
	info := FeedBuild{Snapshots: map[string]string{}, Missing: missing, BuiltAt: start}
	var rows []*offerRow
	index := map[string]*offerRow{}
	n := len(f.warehouses)
	var one [1]string
	for i, s := range snaps {
		if s.Key == "" {
			continue
		}
		info.Snapshots[f.warehouses[i]] = s.Key
		if s.CreatedAt.After(info.Newest) {
			info.Newest = s.CreatedAt
		}
		items, err := f.store.Items(ctx, s.Key)
		if err != nil {
			return nil, fmt.Errorf("items of snapshot %s: %w", s.Key, err)
		}
		var pending map[string]decimal.Decimal
		if f.cfg.Pending != nil {
			if pending, err = f.cfg.Pending(ctx, f.warehouses[i]); err != nil {
				return nil, fmt.Errorf("orders pending of %s: %w", f.warehouses[i], err)
			}
		}
		for _, it := range items {
			it.Quantity = stock.Available(it.Quantity, f.cfg.Reserves.For(Name, it.SKU), pending[it.SKU])
			var skus []string
			if f.cfg.SKUMap.Path() == "" {
				one[0] = it.SKU
				skus = one[:]
			} else if skus = f.cfg.SKUMap.MarketSKUs(Name, it.SKU); len(skus) == 0 {
				info.Unmapped++
				continue
			}
			amount, _ := stock.Amount(it.Quantity, 0)
			switch {
			case it.Quantity.IsNegative():
				info.Negative++
			case !it.Quantity.IsInteger():
				info.Fractional++
			}
			price, rounded := tenge(it.Price)
			for _, sku := range skus {
				if strings.TrimSpace(sku) == "" {
					continue
				}
				row := index[sku]
				if row == nil {
					row = &offerRow{sku: sku, onec: it.SKU, counts: make([]int64, n)}
					index[sku] = row
					rows = append(rows, row)
				}
				row.counts[i] = amount
				if row.price == "" && price != "" {
					row.price = price
					if rounded {
						info.RoundedPrices++
					}
				}
			}
		}
	}
	slices.SortFunc(rows, func(a, b *offerRow) int { return strings.Compare(a.sku, b.sku) })

	var b bytes.Buffer
	b.Grow(512 + len(rows)*(160+70*n))
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
	b.WriteString(`<kaspi_catalog date="`)
	b.WriteString(info.Newest.In(f.cfg.Location).Format(time.RFC3339))
	b.WriteString(`" xmlns="` + kaspiNamespace + `" xmlns:xsi="` + xsiNamespace + `" xsi:schemaLocation="` + kaspiSchemaLocation + `">` + "\n")
	b.WriteString("  <company>")
	escape(&b, strings.TrimSpace(f.cfg.Company))
	b.WriteString("</company>\n  <merchantid>")
	escape(&b, strings.TrimSpace(f.cfg.MerchantID))
	b.WriteString("</merchantid>\n  <offers>\n")
	points := make([]string, n)
	for i, wh := range f.warehouses {
		var pb bytes.Buffer
		escape(&pb, f.cfg.Stores[wh])
		points[i] = pb.String()
	}
	for _, row := range rows {
		if row.price == "" {
			info.NoPrice++
			continue
		}
		info.Offers++
		b.WriteString(`    <offer sku="`)
		escape(&b, row.sku)
		b.WriteString("\">\n      <model>")
		escape(&b, row.onec)
		b.WriteString("</model>\n      <availabilities>\n")
		for i, c := range row.counts {
			if c > 0 {
				b.WriteString(`        <availability available="yes" storeId="`)
				b.WriteString(points[i])
				b.WriteString(`" stockCount="`)
				b.WriteString(strconv.FormatInt(c, 10))
				b.WriteString("\"/>\n")
			} else {
				b.WriteString(`        <availability available="no" storeId="`)
				b.WriteString(points[i])
				b.WriteString("\" stockCount=\"0\"/>\n")
			}
		}
		b.WriteString("      </availabilities>\n      <price>")
		b.WriteString(row.price)
		b.WriteString("</price>\n    </offer>\n")
	}
	b.WriteString("  </offers>\n</kaspi_catalog>\n")
	if info.Offers == 0 {
		// An empty catalog would take every offer off sale: refuse it like no
		// snapshot at all.
		return nil, &unavailableError{reason: fmt.Sprintf("the latest snapshots (%s) hold no item with a Kaspi SKU and a price above zero (%d items unmapped, %d SKUs without a price): an empty catalog is never served",
			strings.Join(slices.Sorted(maps.Values(info.Snapshots)), ", "), info.Unmapped, info.NoPrice)}
	}

	var gz bytes.Buffer
	gz.Grow(b.Len() / 6)
	zw, _ := gzip.NewWriterLevel(&gz, gzip.BestSpeed)
	_, _ = zw.Write(b.Bytes())
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("gzip the feed: %w", err)
	}
	sum := sha256.Sum256(b.Bytes())
	tag := hex.EncodeToString(sum[:16])
	info.Bytes, info.GzipBytes = b.Len(), gz.Len()
	info.Took = time.Since(t0)
	return &feedBody{
		body:     b.Bytes(),
		gz:       gz.Bytes(),
		etag:     `"` + tag + `"`,
		etagGz:   `"` + tag + `-gzip"`,
		modified: info.Newest,
		info:     info,
	}, nil
}

// tenge is a price in whole tenge (rounded half away from zero), exact; "" when it
// is not above zero. rounded reports a price that had a fraction.
func tenge(p decimal.Decimal) (s string, rounded bool) {
	r := p.Round(0)
	if !r.IsPositive() {
		return "", false
	}
	return r.String(), !r.Equal(p)
}

// escape writes s as XML character data or attribute value: markup characters,
// quotes and whitespace other than the space escaped; characters XML 1.0 does not
// allow (and invalid UTF-8) replaced by U+FFFD, as encoding/xml does.
func escape(b *bytes.Buffer, s string) {
	plainText := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= utf8.RuneSelf || c == '<' || c == '>' || c == '&' || c == '"' || c == '\'' {
			plainText = false
			break
		}
	}
	if plainText {
		b.WriteString(s)
		return
	}
	_ = xml.EscapeText(b, []byte(s))
}

// acceptsGzip reports whether an Accept-Encoding header takes gzip (q above zero).
func acceptsGzip(header string) bool {
	for part := range strings.SplitSeq(header, ",") {
		name, params, _ := strings.Cut(part, ";")
		name = strings.TrimSpace(name)
		if !strings.EqualFold(name, "gzip") && !strings.EqualFold(name, "x-gzip") {
			continue
		}
		for p := range strings.SplitSeq(params, ";") {
			k, v, _ := strings.Cut(strings.TrimSpace(p), "=")
			if strings.EqualFold(strings.TrimSpace(k), "q") {
				if q, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil && q <= 0 {
					return false
				}
			}
		}
		return true
	}
	return false
}

// etagMatch reports whether an If-None-Match header names one of tags, by weak
// comparison (W/ ignored), or is "*".
func etagMatch(header string, tags ...string) bool {
	for part := range strings.SplitSeq(header, ",") {
		t := strings.TrimSpace(part)
		if t == "*" {
			return true
		}
		t = strings.TrimPrefix(t, "W/")
		if slices.Contains(tags, t) {
			return true
		}
	}
	return false
}
