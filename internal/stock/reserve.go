package stock

import (
	"path"

	"github.com/shopspring/decimal"
)

// AnyAccount is the account of a reserve that holds for every account.
const AnyAccount = "*"

// Reserve is one entry of stock.reserve: a quantity of each SKU that SKU matches
// held back from what Account is told, so that the last units are not sold twice
// on two marketplaces at once.
type Reserve struct {
	// Account is the connector the reserve holds for (ozon, wildberries, kaspi),
	// or AnyAccount.
	Account string
	// SKU is a pattern of 1C SKUs in the syntax of path.Match (SHOE-*, *).
	SKU string
	// Quantity held back, exact, not negative.
	Quantity decimal.Decimal
}

// Matches reports whether the reserve holds for the SKU at the account. A pattern
// that does not parse matches nothing (validation refuses it).
func (r Reserve) Matches(account, sku string) bool {
	if r.Account != AnyAccount && r.Account != account {
		return false
	}
	ok, err := path.Match(r.SKU, sku)
	return ok && err == nil
}

// Reserves are stock.reserve, in the order written.
type Reserves []Reserve

// For is the reserve of a SKU at an account: the largest of the entries that
// match it, zero when none does. Reserves do not add up: a general entry and a
// narrower one for the same SKU hold back the larger of the two.
func (rs Reserves) For(account, sku string) decimal.Decimal {
	best := decimal.Zero
	for _, r := range rs {
		if r.Matches(account, sku) && r.Quantity.GreaterThan(best) {
			best = r.Quantity
		}
	}
	return best
}

// Available is what an account is told of a SKU that 1C holds q of: q less the
// reserve and less the quantity of the orders registered and not yet in 1C
// (pending), never below zero. A negative q is returned as it is, for Amount to
// publish as 0 with its warning.
func Available(q, reserve, pending decimal.Decimal) decimal.Decimal {
	if q.IsNegative() {
		return q
	}
	left := q.Sub(reserve).Sub(pending)
	if left.IsNegative() {
		return decimal.Zero
	}
	return left
}
