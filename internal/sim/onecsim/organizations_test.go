package onecsim

import (
	"maps"
	"strings"
	"testing"
)

func TestOneCOrganizations(t *testing.T) {
	t.Parallel()
	s, base := newSim(t, Options{Dedupe: true, Organizations: []string{"00-000001", "5f0c6d3e-8d0a-11ee-b9d1-0242ac120002"}})
	withOrg := func(externalID, org string) string {
		return strings.Replace(orderJSON(externalID), `"comment":""`,
			`"comment":"","organization":"`+org+`","partner":"P-1","counterparty":"C-1","agreement":"A-1"`, 1)
	}

	r := mustSend(t, "POST", base+"/orders", orderJSON("kaspi:1"))
	var e errorBody
	decodeJSON(t, r.body, &e)
	if r.status != 422 || e.Error.Code != "missing_organization" || e.Error.Field != "organization" {
		t.Fatalf("no organisation = %d %s, want 422 missing_organization", r.status, r.body)
	}
	r = mustSend(t, "POST", base+"/orders", withOrg("kaspi:2", "00-000009"))
	decodeJSON(t, r.body, &e)
	if r.status != 422 || e.Error.Code != "unknown_organization" || e.Error.Field != "organization" {
		t.Fatalf("unknown organisation = %d %s, want 422 unknown_organization", r.status, r.body)
	}
	if n := s.Count(); n != 0 {
		t.Fatalf("Count() = %d after two refused creates, want 0", n)
	}

	for i, org := range []string{"00-000001", "00-000001", "5f0c6d3e-8d0a-11ee-b9d1-0242ac120002"} {
		if r := mustSend(t, "POST", base+"/orders", withOrg("kaspi:1"+strings.Repeat("0", i), org)); r.status != 201 {
			t.Fatalf("create with %s = %d %s, want 201", org, r.status, r.body)
		}
	}
	want := map[string]int{"00-000001": 2, "5f0c6d3e-8d0a-11ee-b9d1-0242ac120002": 1}
	if got := s.OrdersByOrganization(); !maps.Equal(got, want) {
		t.Fatalf("OrdersByOrganization() = %v, want %v", got, want)
	}
	o := s.Orders()[0]
	if o.Organization != "00-000001" || o.Warehouse != "WH1" || o.Partner != "P-1" || o.Counterparty != "C-1" || o.Agreement != "A-1" {
		t.Fatalf("stored order = %+v, want its mapping recorded", o)
	}

	// An order the base holds is answered 409 whatever its organisation is now.
	s.SetOrganizations([]string{"00-000002"})
	if r := mustSend(t, "POST", base+"/orders", withOrg("kaspi:1", "00-000001")); r.status != 409 {
		t.Fatalf("again after its organisation went = %d %s, want 409 (the module finds first)", r.status, r.body)
	}

	// Without a list of organisations the base picks its own, as before.
	s.SetOrganizations(nil)
	if r := mustSend(t, "POST", base+"/orders", orderJSON("kaspi:3")); r.status != 201 {
		t.Fatalf("no organisation, no list = %d %s, want 201", r.status, r.body)
	}
	if got := s.OrdersByOrganization()[""]; got != 1 {
		t.Fatalf(`OrdersByOrganization()[""] = %d, want 1`, got)
	}
}
