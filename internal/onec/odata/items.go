package odata

import (
	"context"
	"slices"
	"sync"

	"github.com/ordersync/ordersync/internal/onec"
)

// ItemsSet is the catalog an order's SKUs are matched to items in.
const ItemsSet = "Catalog_Номенклатура"

// ItemQuery is the listing that finds the items whose field (onec.odata.items_by:
// Артикул, Code, …) equals sku, not marked for deletion: two at most, enough to
// tell one from several.
func (u URLs) ItemQuery(field, sku string) (string, error) {
	return u.List(ItemsSet, Query{Filter: field + " eq " + Literal(sku) + " and DeletionMark eq false",
		Select: []string{"Ref_Key"}, Top: 2})
}

// Items matches SKUs to the catalog's items, by Lookup, and remembers each item
// found: the same SKU in the next order costs no request. A SKU with no item, or
// with several, is a configuration error of the order that names it; nothing is
// written with a broken or a guessed reference.
type Items struct {
	// Field is onec.odata.items_by.
	Field string
	// Lookup returns the Ref_Keys of the items whose Field equals sku (ItemQuery).
	Lookup func(ctx context.Context, sku string) ([]string, error)

	mu    sync.Mutex
	known map[string]string
}

// Match returns the item of each SKU, in order. The SKUs that match no item or
// several are one error of the order's (onec.UnmatchedSKUs), naming them all.
func (it *Items) Match(ctx context.Context, skus []string) ([]string, error) {
	refs := make([]string, len(skus))
	u := &onec.UnmatchedSKUs{Field: it.Field, Set: ItemsSet}
	for i, sku := range skus {
		it.mu.Lock()
		ref, ok := it.known[sku]
		it.mu.Unlock()
		if ok {
			refs[i] = ref
			continue
		}
		found, err := it.Lookup(ctx, sku)
		if err != nil {
			return nil, err
		}
		switch len(found) {
		case 0:
			if !slices.Contains(u.Missing, sku) {
				u.Missing = append(u.Missing, sku)
			}
			continue
		case 1:
		default:
			if !slices.Contains(u.Several, sku) {
				u.Several = append(u.Several, sku)
			}
			continue
		}
		it.mu.Lock()
		if it.known == nil {
			it.known = map[string]string{}
		}
		it.known[sku] = found[0]
		it.mu.Unlock()
		refs[i] = found[0]
	}
	if len(u.Missing)+len(u.Several) > 0 {
		return nil, &onec.Error{Class: onec.Configuration, PerOrder: true, Op: "items", Path: "/" + ItemsSet,
			Message: u.Error(), Err: u}
	}
	return refs, nil
}
