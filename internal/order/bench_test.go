package order

import "testing"

// benchOrder is a marketplace order as a webhook brings it: two lines, a Cyrillic
// customer and product names.
var benchOrder = []byte(`{"source":"kaspi","external_id":"512344101","number":"512344101","created_at":"2026-09-30T23:58:00+06:00",
	"customer":{"name":"Жанна Ахметова","phone":"+77012345678"},"warehouse":"WH1","currency":"KZT",
	"lines":[{"sku":"SKU-8812","name":"Чайник","quantity":"2","price":"1500.10"},{"sku":"SKU-1","name":"Кружка","quantity":"1","price":"990"}],
	"total":"3990.20"}`)

// BenchmarkParse is what every webhook of a new order spends reading it: the strict
// pass over the raw bytes, then the decode and the validation.
func BenchmarkParse(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(benchOrder); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCheckJSON is the strict pass alone (the marketplaces' pages take it too).
func BenchmarkCheckJSON(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if err := CheckJSON(benchOrder, orderJSONOptions); err != nil {
			b.Fatal(err)
		}
	}
}
