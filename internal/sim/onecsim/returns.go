package onecsim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"
)

// ReturnRequest is a CreateReturn request (POST /returns) as the simulator
// understood it.
type ReturnRequest struct {
	ExternalID      string          `json:"external_id"`
	Source          string          `json:"source"`
	Number          string          `json:"number"`
	Date            string          `json:"date"`
	Type            string          `json:"type"`
	OrderExternalID string          `json:"order_external_id"`
	OrderRef        string          `json:"order_ref"`
	Currency        string          `json:"currency"`
	Lines           []OrderLine     `json:"lines"`
	Total           decimal.Decimal `json:"total"`
	Reason          string          `json:"reason"`
	Comment         string          `json:"comment"`
}

// Return is a customer return (ВозвратТоваровОтКлиента) held by the simulated
// base, based on one of its orders.
type Return struct {
	Ref        string          `json:"ref"`
	Number     string          `json:"number"`
	Date       string          `json:"date"` // 1C's zone-less local time
	ExternalID string          `json:"external_id"`
	OrderRef   string          `json:"order_ref"`
	Posted     bool            `json:"posted"`
	Deleted    bool            `json:"deleted"`
	Total      decimal.Decimal `json:"total"`
	CreatedAt  time.Time       `json:"created_at"`
	// Request is the CreateReturn as understood; Body its JSON as received.
	Request ReturnRequest   `json:"-"`
	Body    json.RawMessage `json:"request"`
}

// Returns returns a snapshot of every return, in creation order.
func (s *OneC) Returns() []Return {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Return, len(s.returns))
	for i, r := range s.returns {
		out[i] = *r
		out[i].Request.Lines = slices.Clone(r.Request.Lines)
		out[i].Body = slices.Clone(r.Body)
	}
	return out
}

// CountReturns is the number of returns held.
func (s *OneC) CountReturns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.returns)
}

// CountReturnsExternal is the number of returns holding externalID exactly: more
// than one is a duplicate.
func (s *OneC) CountReturnsExternal(externalID string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, r := range s.returns {
		if r.ExternalID == externalID {
			n++
		}
	}
	return n
}

// findReturnsLocked is 1C's search of the returns by the external-ID attribute,
// case-insensitive as 1C's queries are.
func (s *OneC) findReturnsLocked(externalID string) []*Return {
	var out []*Return
	for _, r := range s.returns {
		if strings.EqualFold(r.ExternalID, externalID) {
			out = append(out, r)
		}
	}
	return out
}

// return1C is Return1C of contract v1.
type return1C struct {
	Ref        string `json:"ref"`
	Number     string `json:"number"`
	Date       string `json:"date"`
	ExternalID string `json:"external_id"`
	OrderRef   string `json:"order_ref"`
	Posted     bool   `json:"posted"`
	Deleted    bool   `json:"deleted"`
	Total      exact  `json:"total"`
}

func toReturn1C(r *Return) return1C {
	return return1C{Ref: r.Ref, Number: r.Number, Date: r.Date, ExternalID: r.ExternalID, OrderRef: r.OrderRef,
		Posted: r.Posted, Deleted: r.Deleted, Total: exact(r.Total)}
}

// serveFindReturns answers GET /returns?external_id=….
func (s *OneC) serveFindReturns(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if !q.Has("external_id") {
		s.writeError(w, http.StatusBadRequest, apiError{Code: "missing_parameter", Message: "Не указан параметр external_id", Field: "external_id"}, nil)
		return
	}
	s.mu.Lock()
	found := s.findReturnsLocked(q.Get("external_id"))
	list := make([]return1C, 0, len(found))
	for _, rt := range found {
		list = append(list, toReturn1C(rt))
	}
	s.mu.Unlock()
	s.writeJSON(w, http.StatusOK, map[string]any{"returns": list})
}

// returnResult is what the handler of POST /returns answers.
type returnResult struct {
	ret      *Return
	status   int
	text     string
	problem  *apiError
	existing *return1C
}

func (s *OneC) serveCreateReturn(w http.ResponseWriter, body []byte) {
	s.answerCreateReturn(w, s.createReturn(body, 0))
}

func (s *OneC) answerCreateReturn(w http.ResponseWriter, res returnResult) {
	switch {
	case res.ret != nil:
		rt := res.ret
		s.writeJSON(w, http.StatusCreated, map[string]string{"ref": rt.Ref, "number": rt.Number, "date": rt.Date})
	case res.problem != nil:
		body := struct {
			Error  apiError  `json:"error"`
			Return *return1C `json:"return,omitempty"`
		}{*res.problem, res.existing}
		s.writeJSON(w, res.status, body)
	default:
		s.writeText(w, res.status, res.text)
	}
}

// createReturn is the reference module's handler of POST /returns: under the
// managed lock on the external id, in the transaction that writes the return, it
// finds the return by its external id (409 with it when there is one), checks
// that the order it is based on exists and that no SKU comes back more than the
// order holds of it, less what earlier returns based on it took back, and writes
// the return posted. As with create, hold keeps the transaction open.
func (s *OneC) createReturn(body []byte, hold time.Duration) returnResult {
	req, status, problem := parseReturn(body)
	if problem != nil {
		return returnResult{status: status, problem: problem}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.lockLocked(req.ExternalID); err != nil {
		return returnResult{status: err.status, text: err.text, problem: err.problem}
	}
	defer s.unlockLocked(req.ExternalID) // runs before the deferred s.mu.Unlock
	if found := s.findReturnsLocked(req.ExternalID); len(found) > 0 {
		existing := toReturn1C(found[0])
		return returnResult{status: http.StatusConflict, problem: &apiError{
			Code:    "already_exists",
			Message: fmt.Sprintf("Возврат товаров от клиента с внешним номером %q уже существует: %s", req.ExternalID, existing.Number),
		}, existing: &existing}
	}
	var base *Order
	for _, o := range s.orders {
		if o.Ref == req.OrderRef {
			base = o
		}
	}
	if base == nil || base.Deleted {
		return returnResult{status: http.StatusUnprocessableEntity, problem: &apiError{
			Code: "unknown_order", Message: fmt.Sprintf("Заказ клиента %q, на основании которого оформляется возврат, не найден", req.OrderRef), Field: "order_ref",
		}}
	}
	if p := s.checkReturnedLocked(base, req); p != nil {
		return returnResult{status: http.StatusUnprocessableEntity, problem: p}
	}
	if hold > 0 {
		s.mu.Unlock()
		committed := s.sleep(hold)
		s.mu.Lock()
		if !committed {
			return returnResult{status: http.StatusServiceUnavailable, text: shutdownText}
		}
	}
	s.seq++
	now := s.now()
	rt := &Return{
		Ref:        uuid.NewString(),
		Number:     fmt.Sprintf("ВК-%06d", s.seq),
		Date:       now.In(s.loc).Format(dateLayout),
		ExternalID: req.ExternalID,
		OrderRef:   base.Ref,
		Posted:     true,
		Total:      req.Total,
		CreatedAt:  now,
		Request:    req,
		Body:       bytes.Clone(bytes.TrimPrefix(body, bom)),
	}
	s.returns = append(s.returns, rt)
	return returnResult{ret: rt}
}

// checkReturnedLocked refuses a return that takes back more of a SKU than the
// order holds, less what earlier returns based on the order took back. An order
// planted by hand has no lines the simulator knows: it is not checked.
func (s *OneC) checkReturnedLocked(base *Order, req ReturnRequest) *apiError {
	if len(base.Request.Lines) == 0 {
		return nil
	}
	left := map[string]decimal.Decimal{}
	for _, l := range base.Request.Lines {
		left[l.SKU] = left[l.SKU].Add(l.Quantity)
	}
	for _, rt := range s.returns {
		if rt.OrderRef != base.Ref || rt.Deleted {
			continue
		}
		for _, l := range rt.Request.Lines {
			left[l.SKU] = left[l.SKU].Sub(l.Quantity)
		}
	}
	for i, l := range req.Lines {
		have, ok := left[l.SKU]
		if !ok {
			return &apiError{Code: "not_in_order", Field: fmt.Sprintf("lines[%d].sku", i),
				Message: fmt.Sprintf("Строка %d: номенклатуры с артикулом %q нет в заказе %s", i+1, l.SKU, base.Number)}
		}
		if l.Quantity.GreaterThan(have) {
			return &apiError{Code: "quantity_exceeds_order", Field: fmt.Sprintf("lines[%d].quantity", i),
				Message: fmt.Sprintf("Строка %d: возвращается %s шт. %q, а по заказу %s к возврату осталось %s", i+1, l.Quantity, l.SKU, base.Number, have)}
		}
		left[l.SKU] = have.Sub(l.Quantity)
	}
	return nil
}

// returnWire is CreateReturn of contract v1 as it comes off the wire.
type returnWire struct {
	ExternalID      string          `json:"external_id"`
	Source          string          `json:"source"`
	Number          string          `json:"number"`
	Date            string          `json:"date"`
	Type            string          `json:"type"`
	OrderExternalID string          `json:"order_external_id"`
	OrderRef        string          `json:"order_ref"`
	Currency        string          `json:"currency"`
	Lines           []lineWire      `json:"lines"`
	Total           json.RawMessage `json:"total"`
	Reason          string          `json:"reason"`
	Comment         string          `json:"comment"`
}

// parseReturn decodes and checks a CreateReturn: 400 for a body that is not JSON,
// 422 for a refused return.
func parseReturn(body []byte) (ReturnRequest, int, *apiError) {
	var w returnWire
	if err := json.Unmarshal(bytes.TrimPrefix(body, bom), &w); err != nil {
		var typ *json.UnmarshalTypeError
		if errors.As(err, &typ) {
			return ReturnRequest{}, http.StatusUnprocessableEntity, &apiError{Code: "invalid", Message: "Неверный тип значения: " + err.Error(), Field: typ.Field}
		}
		return ReturnRequest{}, http.StatusBadRequest, &apiError{Code: "bad_request", Message: "Ошибка чтения JSON: " + err.Error()}
	}
	reject := func(field, msg string) (ReturnRequest, int, *apiError) {
		return ReturnRequest{}, http.StatusUnprocessableEntity, &apiError{Code: "invalid", Message: msg, Field: field}
	}
	switch {
	case w.ExternalID == "":
		return reject("external_id", "Не заполнен внешний номер возврата (external_id)")
	case w.OrderRef == "":
		return reject("order_ref", "Не указан заказ клиента, на основании которого оформляется возврат (order_ref)")
	case len(w.Lines) == 0:
		return reject("lines", "В возврате нет строк")
	}
	if _, err := time.Parse(dateLayout, w.Date); err != nil {
		return reject("date", fmt.Sprintf("Дата %q не является датой ГГГГ-ММ-ДДTЧЧ:ММ:СС", w.Date))
	}
	lines, total, problem := parseLines(w.Lines, w.Total)
	if problem != nil {
		return ReturnRequest{}, http.StatusUnprocessableEntity, problem
	}
	return ReturnRequest{
		ExternalID: w.ExternalID, Source: w.Source, Number: w.Number, Date: w.Date, Type: w.Type,
		OrderExternalID: w.OrderExternalID, OrderRef: w.OrderRef, Currency: w.Currency,
		Lines: lines, Total: total, Reason: w.Reason, Comment: w.Comment,
	}, 0, nil
}

// DeleteReturn removes the return ref from the base altogether, as deleting marked
// objects in 1C does. False when there is none.
func (s *OneC) DeleteReturn(ref string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, r := range s.returns {
		if r.Ref == ref {
			s.returns = slices.Delete(s.returns, i, i+1)
			return true
		}
	}
	return false
}
