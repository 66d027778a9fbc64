package onecsim

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/ordersync/ordersync/internal/sim"
)

const returnOrderBody = `{"external_id":"ozon:P-1","source":"ozon","number":"P-1","date":"2026-09-16T10:00:00",
"currency":"KZT","lines":[{"sku":"SKU-1","name":"Чайник","quantity":2,"price":100.00,"amount":200.00},
{"sku":"SKU-2","name":"Кружка","quantity":1,"price":50,"amount":50}],"total":250.00}`

// returnBody is a CreateReturn of qty of SKU-1 at 100, based on orderRef.
func returnBody(extID, orderRef, qty string) string {
	return fmt.Sprintf(`{"external_id":%q,"source":"ozon","number":"R-1","date":"2026-09-20T12:00:00","type":"partial",
"order_external_id":"ozon:P-1","order_ref":%q,"currency":"KZT",
"lines":[{"sku":"SKU-1","name":"Чайник","quantity":%s,"price":100,"amount":%s}],"total":%s,"reason":"брак","comment":""}`,
		extID, orderRef, qty, qty+"00", qty+"00")
}

func createOrderRef(t *testing.T, url string) string {
	t.Helper()
	r := mustSend(t, http.MethodPost, url+"/orders", returnOrderBody)
	var v struct{ Ref string }
	if r.status != http.StatusCreated || json.Unmarshal(r.body, &v) != nil || v.Ref == "" {
		t.Fatalf("create order: %d %s", r.status, r.body)
	}
	return v.Ref
}

func TestReturnsCreateFindAndConflict(t *testing.T) {
	t.Parallel()
	s, url := newSim(t, Options{})
	ref := createOrderRef(t, url)

	r := mustSend(t, http.MethodPost, url+"/returns", returnBody("ozon:return:R-1", ref, "1"))
	if r.status != http.StatusCreated {
		t.Fatalf("create return: %d %s", r.status, r.body)
	}
	var created struct{ Ref, Number, Date string }
	if err := json.Unmarshal(r.body, &created); err != nil || created.Ref == "" || created.Number == "" {
		t.Fatalf("create return answer %s: %v", r.body, err)
	}
	// The same external id again: 409 with the existing return, nothing new.
	r = mustSend(t, http.MethodPost, url+"/returns", returnBody("ozon:return:R-1", ref, "1"))
	var conflict struct {
		Error  apiError
		Return *return1C
	}
	if r.status != http.StatusConflict || json.Unmarshal(r.body, &conflict) != nil || conflict.Return == nil || conflict.Return.Ref != created.Ref {
		t.Fatalf("repeat: %d %s, want 409 with %s", r.status, r.body, created.Ref)
	}
	if got := s.CountReturns(); got != 1 {
		t.Fatalf("%d returns, want 1", got)
	}
	r = mustSend(t, http.MethodGet, url+"/returns?external_id=ozon:return:R-1", "")
	var found struct{ Returns []return1C }
	if r.status != http.StatusOK || json.Unmarshal(r.body, &found) != nil || len(found.Returns) != 1 ||
		found.Returns[0].Ref != created.Ref || found.Returns[0].OrderRef != ref || !found.Returns[0].Posted {
		t.Fatalf("find: %d %s", r.status, r.body)
	}
	r = mustSend(t, http.MethodGet, url+"/returns?external_id=ozon:return:none", "")
	if r.status != http.StatusOK || !strings.Contains(string(r.body), `"returns":[]`) {
		t.Fatalf("find none: %d %s", r.status, r.body)
	}
	if got := s.Returns()[0].Request.Lines[0].Quantity.String(); got != "1" {
		t.Errorf("returned quantity %s, want 1", got)
	}
}

func TestReturnsRefused(t *testing.T) {
	t.Parallel()
	s, url := newSim(t, Options{})
	ref := createOrderRef(t, url)
	for _, c := range []struct {
		name, body string
		status     int
		field      string
	}{
		{"no such order", returnBody("ozon:return:A", "00000000-0000-0000-0000-000000000000", "1"), 422, "order_ref"},
		{"more than the order", returnBody("ozon:return:B", ref, "3"), 422, "lines[0].quantity"},
		{"not JSON", "{", 400, ""},
	} {
		r := mustSend(t, http.MethodPost, url+"/returns", c.body)
		var v struct{ Error apiError }
		if r.status != c.status || json.Unmarshal(r.body, &v) != nil || v.Error.Field != c.field {
			t.Errorf("%s: %d %s, want %d field %q", c.name, r.status, r.body, c.status, c.field)
		}
	}
	// Two returns of 1 each of a line of 2 go; a third does not.
	for i, want := range []int{201, 201, 422} {
		if r := mustSend(t, http.MethodPost, url+"/returns", returnBody(fmt.Sprintf("ozon:return:P%d", i), ref, "1")); r.status != want {
			t.Errorf("partial return %d: %d %s, want %d", i, r.status, r.body, want)
		}
	}
	if got := s.CountReturns(); got != 2 {
		t.Errorf("%d returns, want 2", got)
	}
}

func TestReturnsFaults(t *testing.T) {
	t.Parallel()
	s, url := newSim(t, Options{})
	ref := createOrderRef(t, url)

	s.Faults.Add(1, sim.Fault{Op: opCreateReturn, Kind: DropAfterCreate})
	if _, err := send(t, http.MethodPost, url+"/returns", returnBody("ozon:return:D", ref, "1")); err == nil {
		t.Fatal("drop_after_create: an answer came")
	}
	if got := s.CountReturnsExternal("ozon:return:D"); got != 1 {
		t.Fatalf("drop_after_create: %d returns, want the one written before the drop", got)
	}

	s.Faults.Add(1, sim.Fault{Op: opCreateReturn, Kind: Error500AfterCreate})
	r := mustSend(t, http.MethodPost, url+"/returns", returnBody("ozon:return:E", ref, "1"))
	var v struct{ Error apiError }
	if r.status != http.StatusInternalServerError || json.Unmarshal(r.body, &v) != nil || v.Error.Code != "exception" {
		t.Fatalf("error_500_after_create: %d %s", r.status, r.body)
	}
	if got := s.CountReturnsExternal("ozon:return:E"); got != 1 {
		t.Fatalf("error_500_after_create: %d returns, want 1", got)
	}
	if got := s.Stats().Requests[opCreateReturn]; got != 2 {
		t.Errorf("%d create_return requests counted, want 2", got)
	}
}

func TestOlderModuleHasNoReturns(t *testing.T) {
	t.Parallel()
	s, url := newSim(t, Options{NoReturns: true})
	ref := createOrderRef(t, url)
	for _, m := range []string{http.MethodGet, http.MethodPost} {
		r, err := send(t, m, url+"/returns?external_id=x", returnBody("ozon:return:X", ref, "1"))
		if err != nil {
			t.Fatal(err)
		}
		if r.status != http.StatusNotFound || strings.HasPrefix(string(r.body), "{") {
			t.Errorf("%s /returns on an older module: %d %s, want 404 with 1C's text", m, r.status, r.body)
		}
	}
	if s.CountReturns() != 0 || s.Count() != 1 {
		t.Errorf("%d returns and %d orders, want 0 and 1", s.CountReturns(), s.Count())
	}
	if err := validateMissing([]string{"create_return"}); err != nil {
		t.Error(errors.Unwrap(err), err)
	}
}
