package stock

import (
	"fmt"
	"strconv"

	"github.com/shopspring/decimal"
)

// DecimalText is d as stored: every digit, and the scale it was given with (2.500
// stays 2.500; a positive exponent is written out, 1E3 as 1000). A coefficient of up
// to 18 digits — every quantity and price of a shop — is written without big.Int
// arithmetic: a snapshot has 100,000 of them.
func DecimalText(d decimal.Decimal) string {
	e := d.Exponent()
	if e > 0 || e < -18 || d.NumDigits() > 18 {
		if e < 0 {
			return d.StringFixed(-e)
		}
		return d.String()
	}
	var buf [48]byte
	out := buf[:0]
	c := d.CoefficientInt64()
	if c < 0 {
		out, c = append(out, '-'), -c
	}
	var digits [20]byte
	ds := strconv.AppendUint(digits[:0], uint64(c), 10)
	places := int(-e)
	switch {
	case places == 0:
		out = append(out, ds...)
	case len(ds) <= places:
		out = append(out, '0', '.')
		for range places - len(ds) {
			out = append(out, '0')
		}
		out = append(out, ds...)
	default:
		out = append(out, ds[:len(ds)-places]...)
		out = append(out, '.')
		out = append(out, ds[len(ds)-places:]...)
	}
	return string(out)
}

func ParseDecimal(s string) (decimal.Decimal, error) {
	d, err := decimal.NewFromString(s)
	if err != nil {
		return decimal.Decimal{}, fmt.Errorf("decimal %q: %w", s, err)
	}
	return d, nil
}
