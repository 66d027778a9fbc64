package kaspisim

import (
	"cmp"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/shopspring/decimal"
)

// FeedNamespace is the namespace of Kaspi's price list (kaspi_catalog).
const FeedNamespace = "kaspiShopping"

// FeedMaxBytes is the largest price list a FeedPuller reads by default.
const FeedMaxBytes = 256 << 20

// FeedOptions configure a FeedPuller.
type FeedOptions struct {
	// Client makes the requests (default: one with a 60-second timeout). Go's
	// transport asks for gzip and unpacks it unless the client disables it.
	Client *http.Client
	// MaxBytes bounds the body read (default FeedMaxBytes).
	MaxBytes int64
	// Now is the clock of PulledAt (default time.Now).
	Now func() time.Time
}

// FeedPuller is Kaspi pulling a seller's price list from the URL set in the
// merchant cabinet: each Pull is a GET carrying If-None-Match and If-Modified-Since
// from the last 200, as a puller that saves bandwidth does; a 200 is read whole and
// checked by Kaspi's rules (root kaspi_catalog in the kaspiShopping namespace,
// company and merchantid, offers whose sku is unique, a model, availabilities with
// available yes|no, a storeId unique in the offer and a non-negative whole
// stockCount, and a price in whole tenge above zero). A price list that breaks one
// is refused like Kaspi refuses it: the catalog last read stays, and so do the
// validators, so the next pull fetches the list again.
type FeedPuller struct {
	url  string
	opts FeedOptions

	mu           sync.Mutex
	etag         string
	lastModified string
	catalog      *Catalog
	stats        FeedStats
}

// Catalog is a price list as the puller last read it.
type Catalog struct {
	Date       string // the date attribute as written
	Company    string
	MerchantID string
	// Offers by SKU; SKUs in the file's order.
	Offers map[string]FeedOffer
	SKUs   []string
	// ETag and LastModified are the 200's validators.
	ETag         string
	LastModified string
	Bytes        int // the body's size as read (unpacked)
	PulledAt     time.Time
}

// FeedOffer is one offer of a price list.
type FeedOffer struct {
	SKU   string
	Model string
	Brand string
	Price decimal.Decimal // whole tenge
	// Stores by storeId; StoreIDs in the file's order.
	Stores   map[string]FeedAvailability
	StoreIDs []string
}

// FeedAvailability is one pickup point of an offer.
type FeedAvailability struct {
	Available bool
	// StockCount is the stockCount attribute; HasCount is false when it is absent.
	StockCount int64
	HasCount   bool
}

// FeedPull is what one Pull saw.
type FeedPull struct {
	Status int // the HTTP status
	// Changed: a 200 whose catalog was read (a 304 or a failure leaves it as it was).
	Changed bool
	Offers  int    // offers in the catalog now held
	Bytes   int    // body bytes read (unpacked)
	Gzip    bool   // the answer was gzip-encoded on the wire
	Retry   string // a failure's Retry-After, if any
}

// FeedStats counts pulls.
type FeedStats struct {
	Pulls       int // every Pull
	OK          int // 200s read and accepted
	NotModified int // 304s
	Refused     int // 200s whose price list broke Kaspi's rules
	Failed      int // transport errors and other statuses (503 included)
	LastStatus  int // the last answer's status, 0 after a transport error
}

// NewFeedPuller returns a puller of the price list at url.
func NewFeedPuller(url string, opts FeedOptions) *FeedPuller {
	if opts.Client == nil {
		opts.Client = &http.Client{Timeout: 60 * time.Second}
	}
	opts.MaxBytes = cmp.Or(opts.MaxBytes, FeedMaxBytes)
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &FeedPuller{url: url, opts: opts}
}

// Pull fetches the price list once. The error says why a pull brought nothing new
// other than a 304: a transport error, a status other than 200 and 304, or a price
// list Kaspi would refuse.
func (p *FeedPuller) Pull(ctx context.Context) (FeedPull, error) {
	p.mu.Lock()
	p.stats.Pulls++
	etag, lastModified := p.etag, p.lastModified
	held := 0
	if p.catalog != nil {
		held = len(p.catalog.Offers)
	}
	p.mu.Unlock()

	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.url, nil)
	if err != nil {
		return p.failed(FeedPull{Offers: held}, fmt.Errorf("kaspi feed pull: %w", err))
	}
	req.Header.Set("User-Agent", "ordersync-sim-kaspi-feed-puller")
	if etag != "" {
		req.Header.Set("If-None-Match", etag)
	}
	if lastModified != "" {
		req.Header.Set("If-Modified-Since", lastModified)
	}
	resp, err := p.opts.Client.Do(req)
	if err != nil {
		return p.failed(FeedPull{Offers: held}, fmt.Errorf("kaspi feed pull: %w", err))
	}
	defer resp.Body.Close()
	res := FeedPull{Status: resp.StatusCode, Offers: held, Gzip: resp.Uncompressed}

	switch resp.StatusCode {
	case http.StatusNotModified:
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
		p.mu.Lock()
		defer p.mu.Unlock()
		p.stats.LastStatus = resp.StatusCode
		if p.catalog == nil {
			p.stats.Failed++
			return res, errors.New("kaspi feed pull: 304 Not Modified before any price list was read")
		}
		p.stats.NotModified++
		return res, nil
	case http.StatusOK:
	default:
		snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		res.Retry = resp.Header.Get("Retry-After")
		return p.failed(res, fmt.Errorf("kaspi feed pull: status %d (Retry-After %q): %s", resp.StatusCode, res.Retry, strings.TrimSpace(string(snippet))))
	}

	body := &countingReader{r: io.LimitReader(resp.Body, p.opts.MaxBytes+1)}
	var cat *Catalog
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "application/xml" && mt != "text/xml" {
		err = fmt.Errorf("Content-Type %q is not XML", resp.Header.Get("Content-Type"))
	} else {
		cat, err = parseKaspiCatalog(body)
		if err == nil && int64(body.n) > p.opts.MaxBytes {
			err = fmt.Errorf("the price list is larger than %d bytes", p.opts.MaxBytes)
		}
	}
	res.Bytes = body.n
	if err != nil {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.stats.Refused++
		p.stats.LastStatus = resp.StatusCode
		return res, fmt.Errorf("kaspi feed pull: the price list is refused: %w", err)
	}
	cat.ETag, cat.LastModified = resp.Header.Get("ETag"), resp.Header.Get("Last-Modified")
	cat.Bytes, cat.PulledAt = body.n, p.opts.Now()

	p.mu.Lock()
	defer p.mu.Unlock()
	p.catalog = cat
	p.etag, p.lastModified = cat.ETag, cat.LastModified
	p.stats.OK++
	p.stats.LastStatus = resp.StatusCode
	res.Changed, res.Offers = true, len(cat.Offers)
	return res, nil
}

func (p *FeedPuller) failed(res FeedPull, err error) (FeedPull, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stats.Failed++
	p.stats.LastStatus = res.Status
	return res, err
}

// Catalog returns the price list last read, false before the first.
func (p *FeedPuller) Catalog() (Catalog, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.catalog == nil {
		return Catalog{}, false
	}
	c := *p.catalog
	c.Offers = maps.Clone(c.Offers)
	return c, true
}

// Offer returns one offer of the price list last read.
func (p *FeedPuller) Offer(sku string) (FeedOffer, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.catalog == nil {
		return FeedOffer{}, false
	}
	o, ok := p.catalog.Offers[sku]
	return o, ok
}

// Stats returns the pull counters.
func (p *FeedPuller) Stats() FeedStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

// Forget drops the validators, so the next pull fetches the list whole (Kaspi
// does not promise to send them).
func (p *FeedPuller) Forget() {
	p.mu.Lock()
	p.etag, p.lastModified = "", ""
	p.mu.Unlock()
}

type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n += n
	return n, err
}

// The price list's wire types, the simulator's own.
type kaspiFeedOfferXML struct {
	SKU   *string `xml:"sku,attr"`
	Model *string `xml:"kaspiShopping model"`
	Brand string  `xml:"kaspiShopping brand"`
	Avail *struct {
		List []struct {
			Available  *string `xml:"available,attr"`
			StoreID    *string `xml:"storeId,attr"`
			StockCount *string `xml:"stockCount,attr"`
		} `xml:"kaspiShopping availability"`
	} `xml:"kaspiShopping availabilities"`
	Price *string `xml:"kaspiShopping price"`
}

var (
	kaspiTengeRe = regexp.MustCompile(`^[1-9][0-9]*$`)
	kaspiCountRe = regexp.MustCompile(`^[0-9]+$`)
)

// parseKaspiCatalog reads a price list, offer by offer, and checks Kaspi's rules.
func parseKaspiCatalog(r io.Reader) (*Catalog, error) {
	d := xml.NewDecoder(r)
	cat := &Catalog{Offers: map[string]FeedOffer{}}
	depth := 0
	var inOffers, sawRoot, sawOffers, sawCompany, sawMerchant bool
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("not well-formed XML: %w", err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			depth++
			switch {
			case depth == 1:
				if t.Name.Space != FeedNamespace || t.Name.Local != "kaspi_catalog" {
					return nil, fmt.Errorf("the root is {%s}%s, want {%s}kaspi_catalog", t.Name.Space, t.Name.Local, FeedNamespace)
				}
				sawRoot = true
				for _, a := range t.Attr {
					if a.Name.Space == "" && a.Name.Local == "date" {
						cat.Date = a.Value
					}
				}
				if strings.TrimSpace(cat.Date) == "" {
					return nil, errors.New("kaspi_catalog has no date")
				}
			case depth == 2 && t.Name.Space != FeedNamespace:
				return nil, fmt.Errorf("element {%s}%s is not in the %s namespace", t.Name.Space, t.Name.Local, FeedNamespace)
			case depth == 2 && (t.Name.Local == "company" || t.Name.Local == "merchantid"):
				var s string
				if err := d.DecodeElement(&s, &t); err != nil {
					return nil, fmt.Errorf("%s: %w", t.Name.Local, err)
				}
				depth--
				if strings.TrimSpace(s) == "" {
					return nil, fmt.Errorf("%s is empty", t.Name.Local)
				}
				if t.Name.Local == "company" {
					cat.Company, sawCompany = s, true
				} else {
					cat.MerchantID, sawMerchant = s, true
				}
			case depth == 2 && t.Name.Local == "offers":
				if sawOffers {
					return nil, errors.New("two offers elements")
				}
				inOffers, sawOffers = true, true
			case depth == 3 && inOffers && t.Name.Space == FeedNamespace && t.Name.Local == "offer":
				var ox kaspiFeedOfferXML
				if err := d.DecodeElement(&ox, &t); err != nil {
					return nil, fmt.Errorf("offer %d: %w", len(cat.SKUs)+1, err)
				}
				depth--
				o, err := ox.offer()
				if err != nil {
					return nil, fmt.Errorf("offer %d: %w", len(cat.SKUs)+1, err)
				}
				if _, dup := cat.Offers[o.SKU]; dup {
					return nil, fmt.Errorf("offer sku %q appears twice", o.SKU)
				}
				cat.Offers[o.SKU] = o
				cat.SKUs = append(cat.SKUs, o.SKU)
			case depth == 3 && inOffers:
				return nil, fmt.Errorf("offers holds {%s}%s, not offer", t.Name.Space, t.Name.Local)
			default:
				if err := d.Skip(); err != nil {
					return nil, err
				}
				depth--
			}
		case xml.EndElement:
			if depth == 2 && inOffers {
				inOffers = false
			}
			depth--
		}
	}
	switch {
	case !sawRoot:
		return nil, errors.New("no kaspi_catalog")
	case !sawCompany:
		return nil, errors.New("no company")
	case !sawMerchant:
		return nil, errors.New("no merchantid")
	case !sawOffers || len(cat.SKUs) == 0:
		return nil, errors.New("no offers")
	}
	return cat, nil
}

func (ox kaspiFeedOfferXML) offer() (FeedOffer, error) {
	if ox.SKU == nil || strings.TrimSpace(*ox.SKU) == "" {
		return FeedOffer{}, errors.New("no sku")
	}
	o := FeedOffer{SKU: *ox.SKU, Brand: ox.Brand, Stores: map[string]FeedAvailability{}}
	at := func(format string, a ...any) error {
		return fmt.Errorf("sku %q: "+format, append([]any{o.SKU}, a...)...)
	}
	if ox.Model == nil || strings.TrimSpace(*ox.Model) == "" {
		return o, at("no model")
	}
	o.Model = *ox.Model
	if ox.Price == nil {
		return o, at("no price")
	}
	text := strings.TrimSpace(*ox.Price)
	price, err := decimal.NewFromString(text)
	if err != nil || !kaspiTengeRe.MatchString(text) {
		return o, at("price %q is not whole tenge above zero (digits only)", *ox.Price)
	}
	o.Price = price
	if ox.Avail == nil || len(ox.Avail.List) == 0 {
		return o, at("no availabilities")
	}
	for _, a := range ox.Avail.List {
		if a.StoreID == nil || strings.TrimSpace(*a.StoreID) == "" {
			return o, at("an availability without storeId")
		}
		id := *a.StoreID
		if _, dup := o.Stores[id]; dup {
			return o, at("store %s appears twice", id)
		}
		var av FeedAvailability
		switch {
		case a.Available == nil:
			return o, at("store %s: no available attribute", id)
		case *a.Available == "yes":
			av.Available = true
		case *a.Available == "no":
		default:
			return o, at("store %s: available=%q, want yes or no", id, *a.Available)
		}
		if a.StockCount != nil {
			n, err := strconv.ParseInt(*a.StockCount, 10, 64)
			if err != nil || !kaspiCountRe.MatchString(*a.StockCount) {
				return o, at("store %s: stockCount %q is not a whole number ≥ 0", id, *a.StockCount)
			}
			av.StockCount, av.HasCount = n, true
		}
		o.Stores[id] = av
		o.StoreIDs = append(o.StoreIDs, id)
	}
	return o, nil
}
