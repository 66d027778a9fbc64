package payouts

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/shopspring/decimal"
)

// InvalidLineError is a batch refused because one of its lines does not Validate:
// Index is its place in the batch. Nothing of the batch was written.
type InvalidLineError struct {
	Index  int
	Source string
	LineID string
	Err    error
}

func (e *InvalidLineError) Error() string {
	return fmt.Sprintf("line %d of the batch (%s %s) is refused, nothing written: %v", e.Index+1, e.Source, e.LineID, e.Err)
}

func (e *InvalidLineError) Unwrap() error { return e.Err }

// CheckLines is the rule both stores apply before SaveLines writes anything: every
// line must Validate, and its Raw, when given, must be JSON. The first that does
// not refuses the whole batch.
func CheckLines(lines []Line) error {
	for i, l := range lines {
		err := l.Validate()
		if err == nil && len(l.Raw) > 0 && !json.Valid(l.Raw) {
			err = fmt.Errorf("payout line %s %s: raw is not JSON", l.Source, l.LineID)
		}
		if err != nil {
			return &InvalidLineError{Index: i, Source: l.Source, LineID: l.LineID, Err: err}
		}
	}
	return nil
}

// DecimalText is d as the stores keep it: every digit and the scale it was given
// with (2.50 stays 2.50; a positive exponent is written out, 1E3 as 1000).
func DecimalText(d decimal.Decimal) string {
	if e := d.Exponent(); e < 0 {
		return d.StringFixed(-e)
	}
	return d.String()
}

// ParseDecimal reads a stored decimal back with its scale.
func ParseDecimal(s string) (decimal.Decimal, error) {
	d, err := decimal.NewFromString(strings.TrimSpace(s))
	if err != nil {
		return decimal.Decimal{}, fmt.Errorf("%q is not a decimal", s)
	}
	return d, nil
}

// ReadStored parses the decimals a store kept as text into l (the stores' shared
// reading of their columns): qty nil is no quantity.
func ReadStored(l *Line, qty *string, amount, accrued, comm, logi, pen, oth string) error {
	if qty != nil {
		d, err := ParseDecimal(*qty)
		if err != nil {
			return fmt.Errorf("quantity: %w", err)
		}
		l.Quantity = &d
	}
	for _, f := range []struct {
		name string
		s    string
		dst  *decimal.Decimal
	}{
		{"amount", amount, &l.Amount},
		{"accrued_for_sale", accrued, &l.AccruedForSale},
		{"commission", comm, &l.Commission},
		{"logistics", logi, &l.Logistics},
		{"penalty", pen, &l.Penalty},
		{"other", oth, &l.Other},
	} {
		d, err := ParseDecimal(f.s)
		if err != nil {
			return fmt.Errorf("%s: %w", f.name, err)
		}
		*f.dst = d
	}
	return nil
}
