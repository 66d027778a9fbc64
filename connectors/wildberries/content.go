package wildberries

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-resty/resty/v2"

	"github.com/ordersync/ordersync/connectors"
)

// Content API terms.
const (
	// DefaultContentURL is Wildberries' content API, which lists the product cards
	// (connectors.wildberries.content_url).
	DefaultContentURL = "https://content-api.wildberries.ru"
	// CardsPageSize is the most cards one POST /content/v2/get/cards/list returns.
	CardsPageSize = 100
	// ContentPerMinute is the documented limit of the content methods per seller
	// account: 100 requests a minute (bursts of 5, which the connector does not use).
	ContentPerMinute = 100
	// DefaultCardsMaxAge is how long a list of cards is used before it is listed again.
	DefaultCardsMaxAge = 24 * time.Hour
	// DefaultCardsRelist is how soon a vendor code that is not found may list the
	// cards again.
	DefaultCardsRelist = 5 * time.Minute
	// cardsLoadTimeout bounds one listing of every card, which goes on after the
	// Send that started it gives up (a large catalogue takes minutes at 100 pages a
	// minute), so the next Send finds it done.
	cardsLoadTimeout = 30 * time.Minute
	contentURLKey    = configKey + ".content_url"
)

// cardIndex is what the cards say about the seller's sizes.
type cardIndex struct {
	// byVendor: vendor code → the chrtIDs of its sizes.
	byVendor map[string][]int64
	// byBarcode: barcode → the chrtID of its size.
	byBarcode map[string]int64
	// barcodes: chrtID → its barcodes (for messages and 409 bodies).
	barcodes map[int64][]string
	cards    int
	loadedAt time.Time
}

// resolve finds the chrtID of a marketplace SKU: the vendor code of a card with
// one size; else a size's barcode. ok false with reason "" is a SKU no card knows;
// with a reason, one it cannot choose for (a vendor code of several sizes).
func (ix *cardIndex) resolve(sku string) (chrtID int64, ok bool, reason string) {
	sizes := ix.byVendor[sku]
	if len(sizes) == 1 {
		return sizes[0], true, ""
	}
	if id, found := ix.byBarcode[sku]; found {
		return id, true, ""
	}
	switch {
	case len(sizes) > 1:
		ids := make([]string, len(sizes))
		for i, id := range sizes {
			ids[i] = strconv.FormatInt(id, 10)
			if bc := ix.barcodes[id]; len(bc) > 0 {
				ids[i] += " (barcode " + bc[0] + ")"
			}
		}
		return 0, false, fmt.Sprintf("Wildberries vendor code %s has %d sizes (chrtID %s): stock is set per size, so map each size's barcode to its 1C SKU in the SKU map",
			sku, len(sizes), strings.Join(ids, ", "))
	case ix.byVendor[sku] != nil:
		return 0, false, fmt.Sprintf("the Wildberries card with vendor code %s has no sizes", sku)
	}
	return 0, false, ""
}

// cardCache holds the seller's cards, listed with POST /content/v2/get/cards/list
// (every card, with photos or without), listed again when older than maxAge, or on
// demand when a vendor code is not found, at most once per relist. It is safe for
// concurrent use; one listing runs at a time, and callers wait for it.
type cardCache struct {
	http   *resty.Client
	now    func() time.Time
	log    *slog.Logger
	maxAge time.Duration
	relist time.Duration
	// pageSize is settings.cursor.limit; 0 is CardsPageSize (tests set less).
	pageSize int

	mu        sync.Mutex
	index     *cardIndex    // nil before the first listing
	startedAt time.Time     // of the latest listing
	loading   chan struct{} // closed when the running listing ends; nil when none runs
	lastErr   error         // of the latest listing
}

// cards returns the cards, listing them first when none are held or they are older
// than maxAge. Held cards outlive a failed listing (it is logged, and not tried
// again for relist); with none held, the listing's error is returned.
func (cc *cardCache) cards(ctx context.Context) (*cardIndex, error) {
	cc.mu.Lock()
	ix := cc.index
	fresh := ix != nil && cc.now().Sub(ix.loadedAt) < cc.maxAge
	// After a failed listing, the held cards serve until the next may start.
	failedLately := ix != nil && cc.loading == nil && cc.lastErr != nil && cc.now().Sub(cc.startedAt) < cc.relist
	cc.mu.Unlock()
	if fresh || failedLately {
		return ix, nil
	}
	return cc.reload(ctx, ix)
}

// relisted lists the cards again, for a vendor code not found, unless a listing
// started less than relist ago: then it returns the cards held (false).
func (cc *cardCache) relisted(ctx context.Context) (*cardIndex, bool, error) {
	cc.mu.Lock()
	ix := cc.index
	recent := cc.loading == nil && !cc.startedAt.IsZero() && cc.now().Sub(cc.startedAt) < cc.relist
	cc.mu.Unlock()
	if recent {
		return ix, false, nil
	}
	ix, err := cc.reload(ctx, ix)
	return ix, err == nil, err
}

func (cc *cardCache) reload(ctx context.Context, held *cardIndex) (*cardIndex, error) {
	if err := cc.wait(ctx); err != nil {
		if held != nil && ctx.Err() == nil {
			cc.log.WarnContext(ctx, "listing the Wildberries cards failed: the cards listed before are used",
				"listed_at", held.loadedAt, "err", err)
			return held, nil
		}
		return nil, err
	}
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return cc.index, nil
}

// wait starts a listing unless one runs, and waits for it to end or ctx. The
// listing itself does not end with ctx.
func (cc *cardCache) wait(ctx context.Context) error {
	cc.mu.Lock()
	done := cc.loading
	if done == nil {
		done = make(chan struct{})
		cc.loading, cc.startedAt = done, cc.now()
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cardsLoadTimeout)
		go func() {
			defer cancel()
			ix, err := cc.list(lctx)
			cc.mu.Lock()
			if err == nil {
				cc.index = ix
			}
			cc.lastErr, cc.loading = err, nil
			cc.mu.Unlock()
			close(done)
		}()
	}
	cc.mu.Unlock()
	select {
	case <-done:
	case <-ctx.Done():
		return fmt.Errorf("wildberries: waiting for the list of cards (POST /content/v2/get/cards/list, it goes on): %w", ctx.Err())
	}
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return cc.lastErr
}

// cardsRequest is the body of POST /content/v2/get/cards/list.
type cardsRequest struct {
	Settings cardsSettings `json:"settings"`
}

type cardsSettings struct {
	Cursor cardsCursor `json:"cursor"`
	Filter struct {
		WithPhoto int `json:"withPhoto"`
	} `json:"filter"`
}

type cardsCursor struct {
	Limit     int    `json:"limit"`
	UpdatedAt string `json:"updatedAt,omitempty"`
	NmID      int64  `json:"nmID,omitempty"`
}

type cardsPage struct {
	Cards []struct {
		NmID       int64  `json:"nmID"`
		VendorCode string `json:"vendorCode"`
		Sizes      []struct {
			ChrtID int64    `json:"chrtID"`
			Skus   []string `json:"skus"`
		} `json:"sizes"`
	} `json:"cards"`
	Cursor *struct {
		UpdatedAt string `json:"updatedAt"`
		NmID      int64  `json:"nmID"`
		Total     int    `json:"total"`
	} `json:"cursor"`
}

// list pages through every card: withPhoto -1 (the default, 0, lists only cards
// without photos), the answer's cursor copied into the next request, until a page
// holds fewer cards than the limit.
func (cc *cardCache) list(ctx context.Context) (*cardIndex, error) {
	ix := &cardIndex{byVendor: map[string][]int64{}, byBarcode: map[string]int64{}, barcodes: map[int64][]string{}}
	seen := map[int64]bool{} // nmIDs
	dupBarcodes := map[string]bool{}
	req := cardsRequest{Settings: cardsSettings{Cursor: cardsCursor{Limit: cmp.Or(cc.pageSize, CardsPageSize)}}}
	req.Settings.Filter.WithPhoto = -1
	for page := 1; ; page++ {
		what := fmt.Sprintf("POST /content/v2/get/cards/list page %d", page)
		resp, err := connectors.Read(cc.http.R().SetContext(ctx)).SetBody(req).Post("/content/v2/get/cards/list")
		if err := contentError(what, resp, err); err != nil {
			return nil, err
		}
		var p cardsPage
		if err := json.Unmarshal(resp.Body(), &p); err != nil {
			return nil, fmt.Errorf("wildberries: %s: malformed answer: %w", what, err)
		}
		if p.Cursor == nil {
			return nil, fmt.Errorf("wildberries: %s: the answer has no cursor", what)
		}
		for _, c := range p.Cards {
			if seen[c.NmID] {
				continue // a card updated while listing comes again
			}
			seen[c.NmID] = true
			ix.cards++
			sizes := ix.byVendor[c.VendorCode]
			if sizes == nil {
				sizes = []int64{}
			}
			for _, sz := range c.Sizes {
				if sz.ChrtID <= 0 {
					continue // not a size stock can be set for
				}
				sizes = append(sizes, sz.ChrtID)
				ix.barcodes[sz.ChrtID] = append(ix.barcodes[sz.ChrtID], sz.Skus...)
				for _, bc := range sz.Skus {
					if prev, ok := ix.byBarcode[bc]; ok && prev != sz.ChrtID {
						dupBarcodes[bc] = true
					}
					ix.byBarcode[bc] = sz.ChrtID
				}
			}
			ix.byVendor[c.VendorCode] = sizes
		}
		if p.Cursor.Total < req.Settings.Cursor.Limit || len(p.Cards) == 0 {
			break
		}
		if p.Cursor.NmID == req.Settings.Cursor.NmID && p.Cursor.UpdatedAt == req.Settings.Cursor.UpdatedAt {
			return nil, fmt.Errorf("wildberries: %s: the cursor did not advance", what)
		}
		req.Settings.Cursor.UpdatedAt, req.Settings.Cursor.NmID = p.Cursor.UpdatedAt, p.Cursor.NmID
	}
	for bc := range dupBarcodes {
		delete(ix.byBarcode, bc) // two sizes share it: it names neither
	}
	for vc, sizes := range ix.byVendor {
		slices.Sort(sizes)
		ix.byVendor[vc] = slices.Compact(sizes)
	}
	ix.loadedAt = cc.now()
	cc.log.InfoContext(ctx, "Wildberries cards listed", "cards", ix.cards, "barcodes", len(ix.byBarcode))
	return ix, nil
}

// contentError classifies an answer of the content API: refused credentials are an
// *connectors.AuthError naming the token, which needs the Content category.
func contentError(what string, resp *resty.Response, err error) error {
	if err != nil {
		return fmt.Errorf("wildberries: %s: %w", what, err)
	}
	switch st := resp.StatusCode(); {
	case st == http.StatusOK:
		return nil
	case st == http.StatusUnauthorized || st == http.StatusForbidden:
		return &connectors.AuthError{Connector: "wildberries", Key: tokenKey, Status: st,
			Err: fmt.Errorf("%s (the token needs the Content category as well as Marketplace): %s", what, contentMessage(resp.Body()))}
	default:
		return fmt.Errorf("wildberries: %s: HTTP %d: %s", what, st, contentMessage(resp.Body()))
	}
}

// contentMessage is the content API's {"errorText"} error, or errorMessage.
func contentMessage(body []byte) string {
	var e struct {
		ErrorText string `json:"errorText"`
	}
	if json.Unmarshal(body, &e) == nil && e.ErrorText != "" {
		return e.ErrorText
	}
	return errorMessage(body)
}
