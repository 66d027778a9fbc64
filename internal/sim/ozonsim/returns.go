package ozonsim

import (
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/shopspring/decimal"
)

// PathReturns is the list of FBO and FBS returns.
const PathReturns = "/v1/returns/list"

// MaxReturnsLimit is the most returns one page of PathReturns holds; a larger limit
// is refused.
const MaxReturnsLimit = 500

// Return is one return held by the simulator: one product of one posting, as Ozon
// lists them.
type Return struct {
	ID            int64  // default: the next number
	Type          string // Cancellation, FullReturn, PartialReturn, ClientReturn, Unknown; default FullReturn
	Schema        string // Fbs or Fbo; default Fbs
	PostingNumber string
	OrderNumber   string // default: the posting number less its last part
	OfferID, Name string
	SKU           int64
	Quantity      int // default 1
	Price         decimal.Decimal
	Currency      string // default RUB
	Reason        string
	// ReturnDate is the return's date (logistic.return_date, what the
	// logistic_return_date filter looks at); default Now.
	ReturnDate time.Time
	// Status is the visual status's sys_name; default ArrivedAtReturnPlace.
	Status string
	// Patch replaces top-level fields of the return in every answer, as
	// Posting.Patch does.
	Patch map[string]json.RawMessage
}

type ozonReturns struct {
	byID   map[int64]*Return
	nextID int64
}

// AddReturn adds a return, filling the defaults documented on Return, and returns
// its id. It panics on an id already held (a mistake in a test).
func (s *Ozon) AddReturn(r Return) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	rs := &s.returns
	if rs.byID == nil {
		rs.byID, rs.nextID = map[int64]*Return{}, 1000000001
	}
	if r.ID == 0 {
		r.ID = rs.nextID
	}
	rs.nextID = max(rs.nextID, r.ID+1)
	if _, dup := rs.byID[r.ID]; dup {
		panic("sim: ozon: return added twice")
	}
	if r.Type == "" {
		r.Type = "FullReturn"
	}
	if r.Schema == "" {
		r.Schema = "Fbs"
	}
	if r.OrderNumber == "" {
		r.OrderNumber = r.PostingNumber
		if i := strings.LastIndexByte(r.PostingNumber, '-'); i > 0 {
			r.OrderNumber = r.PostingNumber[:i]
		}
	}
	if r.Quantity == 0 {
		r.Quantity = 1
	}
	if r.Currency == "" {
		r.Currency = "RUB"
	}
	if r.ReturnDate.IsZero() {
		r.ReturnDate = s.now()
	}
	if r.Status == "" {
		r.Status = "ArrivedAtReturnPlace"
	}
	r.Patch = maps.Clone(r.Patch)
	rs.byID[r.ID] = &r
	return r.ID
}

// ReturnsServed is how many returns the simulator has answered in lists, repeats
// included.
func (s *Ozon) ReturnsServed() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.returnsServed
}

type ozonTimeRange struct {
	TimeFrom *time.Time `json:"time_from"`
	TimeTo   *time.Time `json:"time_to"`
}

// serveReturns answers PathReturns as documented: one date filter at most,
// limit 1…500 (required), paging by last_id in ascending id order, has_next.
func (s *Ozon) serveReturns(w http.ResponseWriter, body []byte) {
	var req struct {
		Filter *struct {
			LogisticReturnDate            *ozonTimeRange `json:"logistic_return_date"`
			StorageTarifficationStartDate *ozonTimeRange `json:"storage_tariffication_start_date"`
			VisualStatusChangeMoment      *ozonTimeRange `json:"visual_status_change_moment"`
			OrderID                       json.Number    `json:"order_id"`
			PostingNumbers                []string       `json:"posting_numbers"`
			ProductName                   string         `json:"product_name"`
			OfferID                       string         `json:"offer_id"`
			VisualStatusName              string         `json:"visual_status_name"`
			WarehouseID                   json.Number    `json:"warehouse_id"`
			Barcode                       string         `json:"barcode"`
			ReturnSchema                  string         `json:"return_schema"`
		} `json:"filter"`
		Limit  *int64 `json:"limit"`
		LastID int64  `json:"last_id"`
	}
	if err := ozonDecode(body, &req); err != nil {
		ozonWriteError(w, http.StatusBadRequest, 3, err.Error())
		return
	}
	if req.Limit == nil || *req.Limit < 1 || *req.Limit > MaxReturnsLimit {
		ozonWriteError(w, http.StatusBadRequest, 3, "limit must be between 1 and 500")
		return
	}
	var rng *ozonTimeRange
	schema := ""
	var postings []string
	if f := req.Filter; f != nil {
		n := 0
		for _, r := range []*ozonTimeRange{f.LogisticReturnDate, f.StorageTarifficationStartDate, f.VisualStatusChangeMoment} {
			if r != nil {
				n++
			}
		}
		if n > 1 {
			ozonWriteError(w, http.StatusBadRequest, 3, "use only one of logistic_return_date, storage_tariffication_start_date, visual_status_change_moment")
			return
		}
		if len(f.PostingNumbers) > 50 {
			ozonWriteError(w, http.StatusBadRequest, 3, "posting_numbers: at most 50")
			return
		}
		rng, schema, postings = f.LogisticReturnDate, f.ReturnSchema, f.PostingNumbers
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := slices.Sorted(maps.Keys(s.returns.byID))
	var out []json.RawMessage
	hasNext := false
	for _, id := range ids {
		r := s.returns.byID[id]
		if id <= req.LastID {
			continue
		}
		if rng != nil && (rng.TimeFrom != nil && r.ReturnDate.Before(*rng.TimeFrom) || rng.TimeTo != nil && r.ReturnDate.After(*rng.TimeTo)) {
			continue
		}
		if schema != "" && !strings.EqualFold(schema, r.Schema) {
			continue
		}
		if len(postings) > 0 && !slices.Contains(postings, r.PostingNumber) {
			continue
		}
		if int64(len(out)) == *req.Limit {
			hasNext = true
			break
		}
		out = append(out, returnJSON(r))
	}
	s.returnsServed += len(out)
	if out == nil {
		out = []json.RawMessage{}
	}
	ozonWriteJSON(w, http.StatusOK, map[string]any{"returns": out, "has_next": hasNext})
}

// returnJSON is a return as /v1/returns/list shows it (the fields the connector
// reads and a few it does not).
func returnJSON(r *Return) json.RawMessage {
	money := func(d decimal.Decimal) map[string]any {
		return map[string]any{"currency_code": r.Currency, "price": json.Number(d.String())}
	}
	at := r.ReturnDate.UTC().Format(time.RFC3339Nano)
	m := map[string]any{
		"id": r.ID, "company_id": 3058, "return_reason_name": r.Reason, "type": r.Type, "schema": r.Schema,
		"order_number": r.OrderNumber, "posting_number": r.PostingNumber,
		"exemplars": []any{map[string]any{"id": r.ID*10 + 1}},
		"product": map[string]any{"sku": r.SKU, "offer_id": r.OfferID, "name": r.Name, "price": money(r.Price),
			"price_without_commission": money(r.Price), "commission_percent": 0, "commission": money(decimal.Zero),
			"quantity": r.Quantity},
		"logistic":        map[string]any{"return_date": at, "final_moment": at, "barcode": "ii" + r.PostingNumber},
		"visual":          map[string]any{"status": map[string]any{"id": 3, "display_name": r.Status, "sys_name": r.Status}, "change_moment": at},
		"additional_info": map[string]any{"is_opened": false, "is_super_econom": false},
	}
	for k, v := range r.Patch {
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
	}
	b, _ := json.Marshal(m)
	return b
}
