package stock

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/shopspring/decimal"
)

// DecimalText writes what shopspring's StringFixed writes at the decimal's own scale,
// and reads back with that scale.
func TestDecimalText(t *testing.T) {
	t.Parallel()
	ref := func(d decimal.Decimal) string {
		if d.Exponent() < 0 {
			return d.StringFixed(-d.Exponent())
		}
		return d.String()
	}
	var ds []decimal.Decimal
	for _, s := range []string{"0", "-0", "0.000", "-0.50", "2.500", "-3", "0.1", "1500.10", "12345678901234567890.123456789",
		"999999999999999999", "-999999999999999999", "0.999999999999999999", "1000000000000000000", "-0.000000000000000001",
		"0.0000000000000000001", "1e3", "-2.5e2", "1.5e-20", "123456789012345678.9", "9223372036854775807", "-9223372036854775808"} {
		ds = append(ds, decimal.RequireFromString(s))
	}
	var zero decimal.Decimal
	ds = append(ds, zero, decimal.New(0, -3), decimal.New(-7, 0))
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		c := r.Int64N(1_000_000_000_000_000_000)
		if r.IntN(2) == 0 {
			c = -c
		}
		c /= int64(math.Pow10(r.IntN(18)))
		ds = append(ds, decimal.New(c, int32(r.IntN(24)-21)))
	}
	for _, d := range ds {
		got := DecimalText(d)
		if want := ref(d); got != want {
			t.Fatalf("DecimalText(%s exp %d): got %q, want %q", d.String(), d.Exponent(), got, want)
		}
		back, err := ParseDecimal(got)
		if err != nil || !back.Equal(d) || (d.Exponent() <= 0 && back.Exponent() != d.Exponent()) {
			t.Fatalf("DecimalText(%s exp %d) = %q reads back as %s exp %d, %v", d.String(), d.Exponent(), got, back.String(), back.Exponent(), err)
		}
	}
}
