package httpservice

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/ordersync/ordersync/internal/onec"
)

// beforeMapping is the body of testOrder as the client sent it before accounts had
// a 1C mapping: an order without one must stay byte for byte the same request.
const beforeMapping = `{"external_id":"kaspi:512344101","source":"kaspi","number":"512344101","date":"2026-09-16T10:00:00",` +
	`"customer":{"name":"Иван Петров","phone":"+77011234567","email":""},"warehouse":"WH1","currency":"KZT",` +
	`"lines":[{"sku":"A","name":"Чайник","quantity":1,"price":0.1,"amount":0.1},{"sku":"B","name":"Кружка","quantity":1,"price":0.2,"amount":0.2}],` +
	`"total":0.3,"comment":""}`

func createBody(t *testing.T, o onec.CreateOrder) []byte {
	t.Helper()
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, `{"ref":"r","number":"1","date":"2026-09-16T10:00:00"}`)
	})
	if _, err := newClient(t, srv.URL).CreateOrder(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	return srv.lastBody()
}

func TestCreateWithoutMappingIsUnchanged(t *testing.T) {
	t.Parallel()
	if got := string(createBody(t, testOrder())); got != beforeMapping {
		t.Errorf("body without a mapping changed:\n got %s\nwant %s", got, beforeMapping)
	}
}

func TestCreateSendsTheMapping(t *testing.T) {
	t.Parallel()
	fields := func(t *testing.T, body []byte) map[string]any {
		t.Helper()
		var v map[string]any
		if err := json.Unmarshal(body, &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	t.Run("all fields", func(t *testing.T) {
		o := testOrder()
		o.Warehouse = ""
		o.Mapping = onec.Mapping{Organization: "00-000002", Warehouse: "Склад ТОО", Partner: "00-00000007",
			Counterparty: "5f0c6d3e-8d0a-11ee-b9d1-0242ac120002", Agreement: "000000012"}
		v := fields(t, createBody(t, o))
		for k, want := range map[string]string{"organization": "00-000002", "warehouse": "Склад ТОО", "partner": "00-00000007",
			"counterparty": "5f0c6d3e-8d0a-11ee-b9d1-0242ac120002", "agreement": "000000012"} {
			if v[k] != want {
				t.Errorf("%s = %v, want %q", k, v[k], want)
			}
		}
	})
	t.Run("the order's warehouse wins", func(t *testing.T) {
		o := testOrder()
		o.Mapping = onec.Mapping{Organization: "00-000002", Warehouse: "Склад ТОО"}
		v := fields(t, createBody(t, o))
		if v["warehouse"] != "WH1" {
			t.Errorf("warehouse = %v, want the order's WH1", v["warehouse"])
		}
		for _, k := range []string{"partner", "counterparty", "agreement"} {
			if _, ok := v[k]; ok {
				t.Errorf("%s is sent though the mapping leaves it empty", k)
			}
		}
	})
}
