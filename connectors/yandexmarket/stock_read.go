package yandexmarket

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strconv"

	"github.com/ordersync/ordersync/connectors"
)

// StockReadLimit is the most offers one page of POST
// /v2/campaigns/{campaignId}/offers/stocks carries; Yandex cuts a larger limit to
// it without an error. ReadBack asks this many offerIds a request as well.
const StockReadLimit = 100

// Stock types of the read whose count ReadBack reports: the first found.
var readBackTypes = []string{"FIT", "AVAILABLE"}

type stockCount struct {
	Type  string `json:"type"`
	Count int64  `json:"count"`
}

type stockPage struct {
	Result *struct {
		Paging struct {
			NextPageToken string `json:"nextPageToken"`
		} `json:"paging"`
		Warehouses []struct {
			WarehouseID int64 `json:"warehouseId"`
			Offers      []struct {
				OfferID string       `json:"offerId"`
				Stocks  []stockCount `json:"stocks"`
			} `json:"offers"`
		} `json:"warehouses"`
	} `json:"result"`
}

// ReadBack reads the campaign's stock back from Yandex with POST
// /v2/campaigns/{campaignId}/offers/stocks, for an operator to compare with what
// was sent: the count of every offer (the seller's SKU) listed, its FIT stock
// (available or reserved) else AVAILABLE, summed over the campaign's warehouses.
// With skus it asks for those offers, StockReadLimit a request, and a SKU Yandex
// does not list is absent from the map; without skus it pages through them all.
// It reads the campaign whichever API the sender sends with. Yandex applies an
// update within minutes, so a value just sent may read as the one before. Reads
// are retried on 420, 429 and 5xx; refused credentials are a
// *connectors.AuthError.
func (s *StockSender) ReadBack(ctx context.Context, skus []string) (map[string]int64, error) {
	out := map[string]int64{}
	if len(skus) == 0 {
		token := ""
		for n := 0; ; n++ {
			q := url.Values{"limit": {strconv.Itoa(StockReadLimit)}}
			if token != "" {
				q.Set("page_token", token)
			}
			next, err := s.readPage(ctx, fmt.Sprintf("read stocks page %d", n), q, map[string]any{}, out)
			if err != nil {
				return nil, err
			}
			if next == "" || next == token {
				return out, nil
			}
			token = next
		}
	}
	want := slices.Compact(slices.Sorted(slices.Values(skus)))
	for n, chunk := range slices.Collect(slices.Chunk(want, StockReadLimit)) {
		what := fmt.Sprintf("read stocks of %d SKUs (request %d)", len(chunk), n)
		if _, err := s.readPage(ctx, what, nil, map[string]any{"offerIds": chunk}, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// readPage reads one answer of the stock read into out and returns its next page
// token.
func (s *StockSender) readPage(ctx context.Context, what string, q url.Values, body any, out map[string]int64) (string, error) {
	src := s.c.cfg.Source
	what += " (campaign " + s.c.cfg.CampaignID + ")"
	raw, _ := json.Marshal(body)
	r := connectors.Read(s.c.http.R().SetContext(ctx)).SetHeader("Content-Type", "application/json").SetBody(raw)
	if q != nil {
		r = r.SetQueryParamsFromValues(q)
	}
	resp, err := r.Post(s.c.campaignPath("/offers/stocks"))
	if err := connectors.Check(src, keyAPIKey, what, resp, err); err != nil {
		return "", err
	}
	var pg stockPage
	if err := json.Unmarshal(resp.Body(), &pg); err != nil {
		return "", fmt.Errorf("%s: %s: the answer is not Yandex Market's JSON: %w", src, what, err)
	}
	if pg.Result == nil {
		return "", fmt.Errorf(`%s: %s: the answer has no "result"`, src, what)
	}
	for _, wh := range pg.Result.Warehouses {
		for _, o := range wh.Offers {
			out[o.OfferID] += 0 // listed, even without a count of the types read
			for _, typ := range readBackTypes {
				if i := slices.IndexFunc(o.Stocks, func(st stockCount) bool { return st.Type == typ }); i >= 0 {
					out[o.OfferID] += o.Stocks[i].Count
					break
				}
			}
		}
	}
	return pg.Result.Paging.NextPageToken, nil
}
