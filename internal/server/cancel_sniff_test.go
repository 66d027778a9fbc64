package server

import (
	"encoding/json"
	"testing"
)

// isCancelDeliveryByMap is what isCancelDelivery answers: the body decoded into a
// map, the key looked up.
func isCancelDeliveryByMap(body []byte) bool {
	var doc map[string]json.RawMessage
	if json.Unmarshal(body, &doc) != nil {
		return false
	}
	_, ok := doc["cancelled"]
	return ok
}

var cancelSniffCases = []string{
	`{"source":"site","external_id":"A-1","cancelled":true}`,
	`{"source":"site","external_id":"A-1","cancelled":false,"reason":"x"}`,
	` { "cancelled" : null } `,
	`{"cancell\u0065d":true}`,
	`{"Cancelled":true}`,
	`{"cancelled ":true}`,
	`{"x":{"cancelled":true}}`,
	`{"x":["cancelled",{"cancelled":1}],"y":"\"cancelled\""}`,
	`{"x":"a\\","cancelled":1}`,
	`{"x":"{[","cancelled":1}`,
	`{"lines":[{"sku":"S","quantity":2,"price":1500.10}],"n":-1.5e3,"t":true,"f":false,"z":null,"cancelled":[]}`,
	`{"source":"site","external_id":"B-1","number":"B-1","lines":[]}`,
	`{}`, `[]`, `null`, `"cancelled"`, `1`, ``, `{`, `{"cancelled":}`, `{"cancelled":true}x`,
	`{"cancelled":true,}`, "{\"cancelled\":true}\n", "\t\r\n{\"a\":1,\"cancelled\":2}",
	"{\"\xff\":1,\"cancelled\":2}", "{\"\\u00ff\":1}", `{"a":1,"a":2}`, `{"a":{"b":{"c":[[[]]]}},"cancelled":0}`,
}

// isCancelDelivery answers as decoding the body into a map does.
func TestIsCancelDeliveryAsTheMap(t *testing.T) {
	for _, c := range cancelSniffCases {
		if got, want := isCancelDelivery([]byte(c)), isCancelDeliveryByMap([]byte(c)); got != want {
			t.Errorf("isCancelDelivery(%q) = %v, want %v", c, got, want)
		}
	}
}

func FuzzIsCancelDelivery(f *testing.F) {
	for _, c := range cancelSniffCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if got, want := isCancelDelivery(body), isCancelDeliveryByMap(body); got != want {
			t.Fatalf("isCancelDelivery(%q) = %v, want %v", body, got, want)
		}
	})
}
