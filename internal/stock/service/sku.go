package service

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/shopspring/decimal"

	"github.com/ordersync/ordersync/internal/stock"
)

// SKUState is what one account (marketplace) is told of one 1C SKU of one
// warehouse, and why: 1C's quantity, less the reserve, less what orders not yet
// in 1C hold.
type SKUState struct {
	Account   string `json:"account"`
	Warehouse string `json:"warehouse"`
	// OneC is the SKU's quantity in the warehouse's latest snapshot (Snapshot,
	// TakenAt), nil when that snapshot does not list it or none is stored.
	OneC     *decimal.Decimal `json:"onec"`
	Snapshot string           `json:"snapshot,omitempty"`
	TakenAt  string           `json:"taken_at,omitempty"`
	Reserve  decimal.Decimal  `json:"reserve"`
	Pending  decimal.Decimal  `json:"pending"`
	// PendingBySource splits Pending by the orders' source.
	PendingBySource map[string]decimal.Decimal `json:"pending_by_source"`
	// Available is what a publish now would tell the account, nil without OneC.
	Available *decimal.Decimal `json:"available"`
	// Published is the item's state at the account: what it was last sent, with
	// the outcome and when; nil when it never was (or the account pulls a feed).
	Published *stock.ItemState `json:"published"`
	// ReadBack is what the account reads back now, nil when its sender cannot read
	// (or the reading failed: ReadError).
	ReadBack  *int64 `json:"read_back"`
	ReadError string `json:"read_error,omitempty"`
}

// SKU returns, for each warehouse (only warehouse, if given) and each account the
// SKU's warehouse is published to (by a schedule or a marketplace's map), what
// that account is told of the SKU and why, sorted by warehouse then account.
func (s *Service) SKU(ctx context.Context, sku, warehouse string) ([]SKUState, error) {
	if sku == "" {
		return nil, errors.New("stock: no SKU given")
	}
	whs := s.cfg.Warehouses
	if warehouse != "" {
		whs = []string{warehouse}
	}
	var out []SKUState
	for _, wh := range whs {
		accounts := s.accountsOf(wh)
		if len(accounts) == 0 {
			continue
		}
		base := SKUState{Warehouse: wh, PendingBySource: map[string]decimal.Decimal{}}
		snap, err := s.cfg.Stock.Latest(ctx, wh, s.cfg.Now())
		switch {
		case errors.Is(err, stock.ErrNoSnapshot):
		case err != nil:
			return nil, err
		default:
			base.Snapshot, base.TakenAt = snap.Key, snap.TakenAt
			items, err := s.cfg.Stock.Items(ctx, snap.Key)
			if err != nil {
				return nil, err
			}
			// Not a binary search: the store sorts in its own collation.
			if i := slices.IndexFunc(items, func(it stock.Item) bool { return it.SKU == sku }); i >= 0 {
				q := items[i].Quantity
				base.OneC = &q
			}
		}
		if s.cfg.Pending != nil {
			p, err := s.cfg.Pending(ctx, wh)
			if err != nil {
				return nil, err
			}
			base.Pending = p.Of(sku)
			for _, src := range p.Sources(sku) {
				base.PendingBySource[src] = p.BySource[src][sku]
			}
		}
		for _, acc := range accounts {
			st := base
			st.Account = acc
			st.Reserve = s.cfg.Reserves.For(acc, sku)
			if st.OneC != nil {
				a := stock.Available(*st.OneC, st.Reserve, st.Pending)
				st.Available = &a
			}
			if stock.Pushed(acc) {
				states, err := s.cfg.Stock.States(ctx, acc, wh)
				if err != nil {
					return nil, err
				}
				if is, ok := states[sku]; ok {
					st.Published = &is
				}
			}
			if s.cfg.ReadBack != nil {
				if r := s.cfg.ReadBack(acc); r != nil {
					mkt := sku
					if st.Published != nil && st.Published.MarketSKU != "" {
						mkt = st.Published.MarketSKU
					}
					got, err := r.ReadStock(ctx, wh, []string{mkt})
					switch {
					case err != nil:
						st.ReadError = fmt.Sprintf("reading %s back: %v", acc, err)
					default:
						if n, ok := got[mkt]; ok {
							st.ReadBack = &n
						}
					}
				}
			}
			out = append(out, st)
		}
	}
	return out, nil
}

// accountsOf are the accounts wh is published to: its schedules' and those
// whose maps name it, in Config.Accounts' order.
func (s *Service) accountsOf(wh string) []string {
	accounts := s.cfg.Accounts
	if accounts == nil {
		accounts = stock.Marketplaces
	}
	var out []string
	for _, mp := range accounts {
		in := slices.Contains(s.cfg.PublishTo(wh), mp)
		for _, sc := range s.cfg.Schedules {
			in = in || slices.Contains(sc.Warehouses, wh) && slices.Contains(sc.Publish, mp)
		}
		if in {
			out = append(out, mp)
		}
	}
	return out
}
