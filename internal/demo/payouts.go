package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"github.com/ordersync/ordersync/internal/sim/ozonsim"
)

// The month's payouts: Ozon's transaction list holds a sale of each of the demo's
// Ozon postings, the reversal of the returned pack of tea and a storage charge of
// the cabinet; the operator reads them (`ordersync payouts fetch`) and reconciles
// the month (`ordersync reconcile payouts`), both this binary's own commands, run
// beside the service on its configuration, as a person runs them.

// Ozon's rates in the demo's operations: its commission on a sale (given back on
// a reversal), what it charges for the delivery of a posting, and the month's
// storage.
var (
	ozonCommissionRate = decimal.RequireFromString("0.12")
	ozonDelivery       = decimal.RequireFromString("76.00")
	ozonStorage        = decimal.RequireFromString("350.00")
)

// fetchResult is what the script reads of `payouts fetch --format json`.
type fetchResult struct {
	Read  int `json:"read"`
	Saved struct {
		Inserted, Repeated int
	} `json:"saved"`
	Total *decimal.Decimal `json:"total"`
	Error string           `json:"error"`
}

// reconcileResult is what the script reads of `reconcile payouts --format json`.
type reconcileResult struct {
	Categories []struct {
		Category string `json:"category"`
		Orders   int    `json:"orders"`
	} `json:"categories"`
	Cabinet []struct {
		Type   string          `json:"type"`
		Lines  int             `json:"lines"`
		Amount decimal.Decimal `json:"amount"`
	} `json:"cabinet"`
	Totals struct {
		Lines         int             `json:"lines"`
		LinesSum      decimal.Decimal `json:"lines_sum"`
		Balanced      bool            `json:"balanced"`
		StatedVerdict string          `json:"stated_verdict"`
	} `json:"totals"`
	Items []struct {
		Category string `json:"category"`
		OrderID  string `json:"order_id"`
		Note     string `json:"note"`
	} `json:"items"`
}

// 13. The month's payouts read from Ozon and reconciled with the journal and 1C.
func (d *script) payouts(ctx context.Context) (string, error) {
	loc, err := time.LoadLocation(demoZone)
	if err != nil {
		return "", err
	}
	now := time.Now().In(loc)
	today := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, loc)
	from, to := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, loc), today
	// The operations are booked at midday: Ozon writes an operation's date without
	// a zone and the reader takes it in ui.timezone, so whichever zone the
	// simulator's clock stands for, the line stays on today.
	at := today.Add(12 * time.Hour)
	returned := d.ozonReturned
	want := d.plantOzonOperations(at, returned)

	days := []string{"--source", "ozon", "--from", from.Format(time.DateOnly), "--to", to.Format(time.DateOnly), "--format", "json"}
	var f fetchResult
	if _, err := d.command(ctx, &f, append([]string{"payouts", "fetch"}, days...)...); err != nil {
		return "", err
	}
	if f.Error != "" || f.Read != want || f.Saved.Inserted != want {
		return "", fmt.Errorf("payouts fetch read %d lines, %d new (%s), want the %d planted", f.Read, f.Saved.Inserted, f.Error, want)
	}
	var r reconcileResult
	code, err := d.command(ctx, &r, append([]string{"reconcile", "payouts"}, days...)...)
	if err != nil {
		return "", err
	}
	n := map[string]int{}
	var counts []string
	for _, c := range r.Categories {
		n[c.Category] = c.Orders
		if c.Orders > 0 {
			counts = append(counts, fmt.Sprintf("%s %d", c.Category, c.Orders))
		}
	}
	var trouble []string
	for _, it := range r.Items {
		if it.Category != "paid_as_sold" && it.Category != "returned_in_1c" {
			trouble = append(trouble, fmt.Sprintf("%s %s: %s", it.Category, it.OrderID, it.Note))
		}
	}
	sales := len(d.sims.ozonSold)
	if code != 0 || len(trouble) > 0 || n["paid_as_sold"] != sales-1 || n["returned_in_1c"] != 1 ||
		!r.Totals.Balanced || r.Totals.StatedVerdict != "equal" {
		return "", fmt.Errorf("reconcile payouts (exit %d): %s; %s; totals balanced %t, Ozon's total %s; want paid_as_sold %d, returned_in_1c 1",
			code, strings.Join(counts, ", "), strings.Join(trouble, "; "), r.Totals.Balanced, r.Totals.StatedVerdict, sales-1)
	}
	cabinet := 0
	for _, c := range r.Cabinet {
		cabinet += c.Lines
	}
	total := "none stated"
	if f.Total != nil {
		total = f.Total.StringFixed(2)
	}
	return fmt.Sprintf("%s – %s: payouts fetch read %d lines (Ozon's total %s); reconcile payouts: %s, %d cabinet line; the lines add up to Ozon's total",
		from.Format(time.DateOnly), to.Format(time.DateOnly), f.Read, total, strings.Join(counts, ", "), cabinet), nil
}

// plantOzonOperations books, at at, a sale of each Ozon posting the script sent,
// the reversal of the return of posting returned and a storage charge of the
// cabinet, and returns how many operations they are.
func (d *script) plantOzonOperations(at time.Time, returned string) int {
	id := int64(31000000001)
	next := func() int64 { id++; return id - 1 }
	var ops []ozonsim.Operation
	for _, posting := range slices.Sorted(maps.Keys(d.sims.ozonSold)) {
		sold := d.sims.ozonSold[posting]
		commission := sold.Mul(ozonCommissionRate).Round(2).Neg()
		ops = append(ops, ozonsim.Operation{ID: next(), Type: "OperationAgentDeliveredToCustomer", TypeName: "Доставка покупателю",
			TransactionType: "orders", Date: at, PostingNumber: posting,
			AccrualsForSale: sold, SaleCommission: commission, Amount: sold.Add(commission).Sub(ozonDelivery),
			Items:    d.ozonItems(posting),
			Services: []ozonsim.OperationService{{Name: "MarketplaceServiceItemDirectFlowLogistic", Price: ozonDelivery.Neg()}}})
	}
	if returned != "" {
		// The returned pack's price, less the commission Ozon gives back.
		p, _ := d.sims.ozon.Posting(returned)
		var price decimal.Decimal
		for _, pr := range p.Products {
			if pr.OfferID == returnedSKU {
				price = pr.Price
			}
		}
		back := price.Mul(ozonCommissionRate).Round(2)
		ops = append(ops, ozonsim.Operation{ID: next(), Type: "ClientReturnAgentOperation", TypeName: "Получение возврата, отмены, невыкупа от покупателя",
			TransactionType: "returns", Date: at, PostingNumber: returned,
			AccrualsForSale: price.Neg(), SaleCommission: back, Amount: price.Neg().Add(back), Items: d.ozonItems(returned)})
	}
	ops = append(ops, ozonsim.Operation{ID: next(), Type: "OperationMarketplaceServiceStorage", TypeName: "Услуга размещения товаров на складе",
		TransactionType: "services", Date: at, Amount: ozonStorage.Neg()})
	d.sims.ozon.AddOperation(ops...)
	return len(ops)
}

// ozonItems are the products of a posting as an operation names them.
func (d *script) ozonItems(posting string) []ozonsim.OperationItem {
	p, _ := d.sims.ozon.Posting(posting)
	var out []ozonsim.OperationItem
	for _, pr := range p.Products {
		out = append(out, ozonsim.OperationItem{SKU: pr.SKU, Name: pr.Name})
	}
	return out
}

// command runs `<this binary> args… --config /dev/null` on the service's
// configuration, as an operator runs it beside the service, and decodes its
// standard output into v. Its exit code is returned; a code other than 0 or 1
// (a usage or configuration error), or an output that does not decode, is an error.
func (d *script) command(ctx context.Context, v any, args ...string) (int, error) {
	args = append(args, "--config", os.DevNull)
	cmd := exec.CommandContext(ctx, d.exe, args...)
	var stdout, stderr bytes.Buffer
	cmd.Env, cmd.Dir, cmd.Stdout, cmd.Stderr = d.env, d.dir, &stdout, &stderr
	err := cmd.Run()
	code := 0
	if err != nil {
		var exit *exec.ExitError
		if !errors.As(err, &exit) {
			return 0, fmt.Errorf("ordersync %s: %w", strings.Join(args, " "), err)
		}
		code = exit.ExitCode()
	}
	if code > 1 {
		return code, fmt.Errorf("ordersync %s: exit %d: %s", strings.Join(args, " "), code, strings.TrimSpace(stderr.String()))
	}
	if err := json.Unmarshal(stdout.Bytes(), v); err != nil {
		return code, fmt.Errorf("ordersync %s: exit %d, its output does not read: %v; stderr: %s", strings.Join(args, " "), code, err,
			strings.TrimSpace(stderr.String()))
	}
	return code, nil
}
