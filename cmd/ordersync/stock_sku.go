package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/shopspring/decimal"

	"github.com/ordersync/ordersync/internal/stock"
	stocksvc "github.com/ordersync/ordersync/internal/stock/service"
	"github.com/ordersync/ordersync/internal/store"
)

// stockPending is the service's reading of the orders not yet in 1C.
func stockPending(db store.DB) func(ctx context.Context, warehouse string) (stock.Pending, error) {
	return func(ctx context.Context, warehouse string) (stock.Pending, error) {
		return stock.ReadPending(ctx, db.Journal(), warehouse)
	}
}

// showSKU prints what each account is told of one SKU (`stock show --sku`).
func (a *app) showSKU(ctx context.Context, env *stockEnv, sku, warehouse, format string) error {
	states, err := env.svc.SKU(ctx, sku, warehouse)
	if err != nil {
		return err
	}
	if format == "json" {
		if states == nil {
			states = []stocksvc.SKUState{}
		}
		return writeJSON(a.stdout, states)
	}
	if len(states) == 0 {
		return fmt.Errorf("stock show --sku %s: no warehouse %sis published anywhere (stock.schedules, the marketplaces' warehouse maps)",
			sku, map[bool]string{true: warehouse + " ", false: ""}[warehouse != ""])
	}
	printSKU(a.stdout, sku, states, env.svc.Location())
	return nil
}

func printSKU(w io.Writer, sku string, states []stocksvc.SKUState, loc *time.Location) {
	fmt.Fprintf(w, "SKU %s\n", sku)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "WAREHOUSE\tACCOUNT\t1C\tRESERVE\tPENDING\tAVAILABLE\tPUBLISHED\tAT\tREAD BACK")
	for _, s := range states {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.Warehouse, s.Account, decOrDash(s.OneC),
			s.Reserve.String(), pendingText(s), decOrDash(s.Available), publishedText(s.Published, s.Account),
			publishedAt(s.Published, loc), readBackText(s))
	}
	tw.Flush()
	seen := map[string]bool{}
	for _, s := range states {
		if s.Snapshot != "" && !seen[s.Snapshot] {
			seen[s.Snapshot] = true
			fmt.Fprintf(w, "%s: 1C's quantity from %s, taken by 1C at %s\n", s.Warehouse, s.Snapshot, s.TakenAt)
		}
		if s.Published != nil && s.Published.Reason != "" {
			fmt.Fprintf(w, "%s %s: %s\n", s.Warehouse, s.Account, s.Published.Reason)
		}
		if s.ReadError != "" {
			fmt.Fprintf(w, "%s %s: %s\n", s.Warehouse, s.Account, s.ReadError)
		}
	}
}

const dash = "—"

func decOrDash(d *decimal.Decimal) string {
	if d == nil {
		return dash
	}
	return d.String()
}

// pendingText is the pending quantity, with its sources when there is any.
func pendingText(s stocksvc.SKUState) string {
	if s.Pending.IsZero() || len(s.PendingBySource) == 0 {
		return s.Pending.String()
	}
	var parts []string
	for _, src := range sortedKeys(s.PendingBySource) {
		parts = append(parts, src+" "+s.PendingBySource[src].String())
	}
	return s.Pending.String() + " (" + strings.Join(parts, ", ") + ")"
}

func publishedText(p *stock.ItemState, account string) string {
	switch {
	case p == nil && !stock.Pushed(account):
		return "feed"
	case p == nil:
		return dash
	case p.Outcome == stock.Published:
		return fmt.Sprint(p.Value)
	}
	return fmt.Sprintf("%d %s", p.Value, p.Outcome)
}

func publishedAt(p *stock.ItemState, loc *time.Location) string {
	switch {
	case p == nil:
		return dash
	case p.PublishedAt != nil:
		return p.PublishedAt.In(loc).Format("2006-01-02 15:04:05")
	case p.SentAt != nil:
		return "sent " + p.SentAt.In(loc).Format("2006-01-02 15:04:05")
	}
	return dash
}

func readBackText(s stocksvc.SKUState) string {
	if s.ReadBack == nil {
		return dash
	}
	return fmt.Sprint(*s.ReadBack)
}
