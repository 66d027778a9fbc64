package ymsim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"time"
)

// Limits of the stock methods beyond the campaign update.
const (
	// MaxStockV3PerMinute is how many POST v3 …/offers/stocks/update requests a
	// cabinet may make in a minute.
	MaxStockV3PerMinute = 50
	// MaxStockReadLimit is the largest limit the stock read serves; a larger one
	// is cut to it without an error. DefaultStockReadLimit is used without one.
	MaxStockReadLimit     = 100
	DefaultStockReadLimit = 50
)

// StocksV3 are the last counts taken by the business method, keyed
// "partnerWarehouseId/sku".
func (s *YM) StocksV3() map[string]StockValue {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]StockValue, len(s.stocksV3))
	for k, v := range s.stocksV3 {
		out[k] = v
	}
	return out
}

// StockV3Calls counts the business stock updates taken; BadStockV3Requests the
// ones refused as invalid (400).
func (s *YM) StockV3Calls() int       { s.mu.Lock(); defer s.mu.Unlock(); return s.stockV3Calls }
func (s *YM) BadStockV3Requests() int { s.mu.Lock(); defer s.mu.Unlock(); return s.badStocksV3 }

// StockReads counts the stock reads answered; BadStockReads the ones refused as
// invalid (400).
func (s *YM) StockReads() int    { s.mu.Lock(); defer s.mu.Unlock(); return s.stockReads }
func (s *YM) BadStockReads() int { s.mu.Lock(); defer s.mu.Unlock(); return s.badStockReads }

// admitStockV3 applies the business method's own limit: beyond
// MaxStockV3PerMinute requests in the last minute it answers 420 and counts a
// violation. Called under mu.
func (s *YM) admitStockV3(w http.ResponseWriter, now time.Time) bool {
	cut := now.Add(-time.Minute)
	s.stockV3Times = slices.DeleteFunc(s.stockV3Times, func(t time.Time) bool { return !t.After(cut) })
	if len(s.stockV3Times) < MaxStockV3PerMinute {
		s.stockV3Times = append(s.stockV3Times, now)
		return true
	}
	until := s.stockV3Times[0].Add(time.Minute)
	s.violations++
	s.throttled++
	w.Header().Set("X-RateLimit-Resource-Limit", strconv.Itoa(MaxStockV3PerMinute))
	w.Header().Set("X-RateLimit-Resource-Remaining", "0")
	w.Header().Set("X-RateLimit-Resource-Until", until.UTC().Format(time.RFC3339Nano))
	writeError(w, StatusRateLimited, "LIMIT_EXCEEDED", "too many requests")
	return false
}

// serveStocksV3 is POST /v3/businesses/{businessId}/offers/stocks/update:
// {"skuItems":[{sku, partnerWarehouseId, count, updatedAt}]}, from 1 to
// MaxStockSKUs unique (sku, partnerWarehouseId) pairs of the warehouses the
// simulator was given, all taken or none.
func (s *YM) serveStocksV3(w http.ResponseWriter, r *http.Request, idText string) {
	var body struct {
		SKUItems []struct {
			SKU         string          `json:"sku"`
			WarehouseID json.RawMessage `json:"partnerWarehouseId"`
			Count       json.Number     `json:"count"`
			UpdatedAt   string          `json:"updatedAt"`
		} `json:"skuItems"`
	}
	d := json.NewDecoder(r.Body)
	d.UseNumber()
	err := d.Decode(&body)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests[OpStocksV3]++
	bad := func(msg string) {
		s.badStocksV3++
		writeError(w, http.StatusBadRequest, "BAD_REQUEST", msg)
	}
	business, perr := strconv.ParseInt(idText, 10, 64)
	if perr != nil {
		bad("businessId must be a number")
		return
	}
	if business != s.business {
		writeError(w, http.StatusForbidden, "FORBIDDEN", "access to this business is denied")
		return
	}
	now := time.Now()
	if !s.admitStockV3(w, now) {
		return
	}
	if err != nil {
		bad("the body is not JSON: " + err.Error())
		return
	}
	if len(body.SKUItems) == 0 || len(body.SKUItems) > MaxStockSKUs {
		bad(fmt.Sprintf("skuItems must hold from 1 to %d entries", MaxStockSKUs))
		return
	}
	seen := map[string]bool{}
	values := make(map[string]StockValue, len(body.SKUItems))
	for i, e := range body.SKUItems {
		var wh int64
		if bytes.HasPrefix(bytes.TrimSpace(e.WarehouseID), []byte(`"`)) || json.Unmarshal(e.WarehouseID, &wh) != nil || wh <= 0 {
			bad(fmt.Sprintf("skuItems[%d].partnerWarehouseId must be a whole number greater than 0", i))
			return
		}
		whText := strconv.FormatInt(wh, 10)
		if !s.partnerWarehouses[whText] {
			bad(fmt.Sprintf("skuItems[%d].partnerWarehouseId %s is not a warehouse of the cabinet", i, whText))
			return
		}
		key := whText + "/" + e.SKU
		if e.SKU == "" || seen[key] {
			bad(fmt.Sprintf("skuItems[%d]: the sku is empty or its pair with the warehouse is repeated", i))
			return
		}
		seen[key] = true
		n, err := strconv.ParseInt(string(e.Count), 10, 64)
		if err != nil || n < 0 || n > maxCount {
			bad(fmt.Sprintf("skuItems[%d].count must be a whole number from 0 to %d", i, maxCount))
			return
		}
		at := now
		if e.UpdatedAt != "" {
			if at, err = time.Parse(time.RFC3339Nano, e.UpdatedAt); err != nil {
				bad(fmt.Sprintf("skuItems[%d].updatedAt is not ISO 8601 with an offset", i))
				return
			}
		}
		values[key] = StockValue{Count: n, UpdatedAt: at}
	}
	for k, v := range values {
		s.stocksV3[k] = v
	}
	s.stockV3Calls++
	writeJSON(w, http.StatusOK, map[string]any{"status": "OK"})
}

// serveStockRead is POST /v2/campaigns/{campaignId}/offers/stocks: the counts
// last set with the campaign update, by offerId, in pages (limit and page_token
// in the query) or, given offerIds in the body, those offers whole, without
// page_token, limit or archived.
func (s *YM) serveStockRead(w http.ResponseWriter, r *http.Request, campaign int64) {
	var body struct {
		OfferIDs []string `json:"offerIds"`
		Archived *bool    `json:"archived"`
	}
	raw, err := io.ReadAll(r.Body)
	if err == nil && len(bytes.TrimSpace(raw)) > 0 {
		err = json.Unmarshal(raw, &body)
	}
	q := r.URL.Query()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests[OpStocksRead]++
	bad := func(msg string) {
		s.badStockReads++
		writeError(w, http.StatusBadRequest, "BAD_REQUEST", msg)
	}
	if !s.campaigns[campaign] {
		writeError(w, http.StatusForbidden, "FORBIDDEN", "access to this campaign is denied")
		return
	}
	if err != nil {
		bad("the body is not JSON: " + err.Error())
		return
	}
	token := q.Get("page_token")
	limit := DefaultStockReadLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			bad("limit must be a whole number greater than 0")
			return
		}
		limit = min(n, MaxStockReadLimit)
	}
	offset, ok := readPageToken(token)
	if !ok {
		bad("page_token is not one this API gave")
		return
	}
	var skus []string
	if len(body.OfferIDs) > 0 {
		if token != "" || q.Has("limit") || body.Archived != nil {
			bad("with offerIds, page_token, limit and archived are not taken")
			return
		}
		for _, id := range body.OfferIDs {
			if _, ok := s.stocks[id]; ok && !slices.Contains(skus, id) {
				skus = append(skus, id)
			}
		}
		offset, limit = 0, len(skus)
	} else {
		for k := range s.stocks {
			skus = append(skus, k)
		}
	}
	slices.Sort(skus)
	start := min(offset, len(skus))
	end := min(start+limit, len(skus))
	offers := make([]map[string]any, 0, end-start)
	for _, k := range skus[start:end] {
		v := s.stocks[k]
		offers = append(offers, map[string]any{
			"offerId":   k,
			"stocks":    []map[string]any{{"type": "FIT", "count": v.Count}, {"type": "AVAILABLE", "count": v.Count}},
			"updatedAt": v.UpdatedAt.In(moscow).Format(time.RFC3339),
		})
	}
	paging := map[string]any{}
	if end < len(skus) {
		paging["nextPageToken"] = pageToken(end)
	}
	warehouses := []map[string]any{}
	if len(offers) > 0 {
		warehouses = append(warehouses, map[string]any{"warehouseId": s.readWarehouse, "offers": offers})
	}
	s.stockReads++
	writeJSON(w, http.StatusOK, map[string]any{"status": "OK", "result": map[string]any{"paging": paging, "warehouses": warehouses}})
}
