package stock

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/ordersync/ordersync/internal/onec"
)

// maxWarnings bounds the warnings a snapshot or a publish lists; the rest are
// counted in a last line.
const maxWarnings = 50

// FromOneC checks 1C's answer for a warehouse and returns its items sorted by SKU,
// with a warning per item whose quantity is negative (published as 0). A SKU listed
// twice is an error that names it: the snapshot fails, nothing is stored.
func FromOneC(answer onec.Stock) ([]Item, []string, error) {
	items := make([]Item, len(answer.Items))
	for i, it := range answer.Items {
		items[i] = Item{SKU: it.SKU, Quantity: it.Quantity, Price: it.Price}
	}
	slices.SortStableFunc(items, func(a, b Item) int { return cmp.Compare(a.SKU, b.SKU) })
	var warnings []string
	negative := 0
	for i, it := range items {
		if i > 0 && items[i-1].SKU == it.SKU {
			return nil, nil, fmt.Errorf("1C listed SKU %q twice in the stock of warehouse %s (quantities %s and %s): "+
				"the snapshot is not stored; fix the stock query of the 1C module", it.SKU, answer.Warehouse,
				items[i-1].Quantity.String(), it.Quantity.String())
		}
		if it.Quantity.IsNegative() {
			negative++
			if negative <= maxWarnings {
				warnings = append(warnings, fmt.Sprintf("%s: negative quantity %s, published as 0", it.SKU, it.Quantity.String()))
			}
		}
	}
	if negative > maxWarnings {
		warnings = append(warnings, fmt.Sprintf("and %d more items with a negative quantity", negative-maxWarnings))
	}
	return items, warnings, nil
}

// AddWarning appends w to ws unless ws already lists maxWarnings; then it counts
// the rest in a last line. It returns the new list and the count of those left out.
func AddWarning(ws []string, left int, w string) ([]string, int) {
	if len(ws) < maxWarnings {
		return append(ws, w), left
	}
	return ws, left + 1
}

// CloseWarnings adds the line that counts the warnings left out, if any.
func CloseWarnings(ws []string, left int) []string {
	if left > 0 {
		ws = append(ws, fmt.Sprintf("and %d more", left))
	}
	return ws
}
