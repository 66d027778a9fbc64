package odata

import (
	"context"
	"fmt"
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

// Ref is the item of sku.
func (it *Items) Ref(ctx context.Context, sku string) (string, error) {
	it.mu.Lock()
	ref, ok := it.known[sku]
	it.mu.Unlock()
	if ok {
		return ref, nil
	}
	refs, err := it.Lookup(ctx, sku)
	if err != nil {
		return "", err
	}
	switch len(refs) {
	case 0:
		return "", &onec.Error{Class: onec.Configuration, Op: "items", Path: ItemsSet,
			Message: fmt.Sprintf("no item of %s has %s %q: add it in 1C, or map the SKU (connectors.sku_map), or set onec.odata.items_by", ItemsSet, it.Field, sku)}
	case 1:
	default:
		return "", &onec.Error{Class: onec.Configuration, Op: "items", Path: ItemsSet,
			Message: fmt.Sprintf("several items of %s have %s %q: make it unique in 1C, or match by another field (onec.odata.items_by)", ItemsSet, it.Field, sku)}
	}
	it.mu.Lock()
	if it.known == nil {
		it.known = map[string]string{}
	}
	it.known[sku] = refs[0]
	it.mu.Unlock()
	return refs[0], nil
}
