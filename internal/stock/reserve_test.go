package stock_test

import (
	"testing"

	"github.com/shopspring/decimal"

	"github.com/ordersync/ordersync/internal/stock"
)

func dec(s string) decimal.Decimal { return decimal.RequireFromString(s) }

func TestReservesFor(t *testing.T) {
	t.Parallel()
	rs := stock.Reserves{
		{Account: stock.AnyAccount, SKU: "*", Quantity: dec("1")},
		{Account: stock.Ozon, SKU: "SHOE-*", Quantity: dec("3")},
		{Account: stock.Wildberries, SKU: "SHOE-42", Quantity: dec("0.5")},
		{Account: stock.Kaspi, SKU: "[", Quantity: dec("9")}, // does not parse: matches nothing
	}
	tests := []struct {
		account, sku, want string
	}{
		{stock.Ozon, "SHOE-42", "3"},        // the larger of * and SHOE-*
		{stock.Ozon, "HAT-1", "1"},          // only *
		{stock.Wildberries, "SHOE-42", "1"}, // * is larger than its own 0.5
		{stock.Kaspi, "SHOE-42", "1"},       // the broken pattern is ignored
		{"uzum", "a/b", "0"},                // * does not match across a slash
	}
	for _, tt := range tests {
		if got := rs.For(tt.account, tt.sku); !got.Equal(dec(tt.want)) {
			t.Errorf("For(%s, %s) = %s, want %s", tt.account, tt.sku, got, tt.want)
		}
	}
	if got := stock.Reserves(nil).For(stock.Ozon, "X"); !got.IsZero() {
		t.Errorf("no reserves: %s, want 0", got)
	}
}

func TestAvailable(t *testing.T) {
	t.Parallel()
	tests := []struct {
		q, reserve, pending, want string
	}{
		{"3", "1", "0", "2"},
		{"3", "1", "1", "1"},
		{"3", "1", "2", "0"},
		{"3", "1", "5", "0"}, // never below zero
		{"2.5", "0.5", "0", "2"},
		{"0", "0", "0", "0"},
		{"-2", "1", "0", "-2"}, // left for Amount to warn about
	}
	for _, tt := range tests {
		got := stock.Available(dec(tt.q), dec(tt.reserve), dec(tt.pending))
		if !got.Equal(dec(tt.want)) {
			t.Errorf("Available(%s, %s, %s) = %s, want %s", tt.q, tt.reserve, tt.pending, got, tt.want)
		}
	}
}
