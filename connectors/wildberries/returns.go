package wildberries

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-resty/resty/v2"
	"golang.org/x/time/rate"

	"github.com/ordersync/ordersync/connectors"
	"github.com/ordersync/ordersync/internal/order"
)

// What the returns' listing relies on, from Wildberries' published reports API: GET
// /api/v1/analytics/goods-return on the seller analytics API
// (DefaultAnalyticsURL) with dateFrom and dateTo (dates, at most 31 days apart)
// answers {"report": [...]}, one row per item returned to the seller: srid (the
// return order's unique id), orderId (the assembly task's number: the FBS order's
// id in /api/v3/orders), nmId, barcode, reason, status, orderDt (the date of the
// return order) and completedDt (when the return was handed to the seller, null
// until then). It allows one request a minute per seller account.
const (
	// DefaultAnalyticsURL is the seller analytics API.
	DefaultAnalyticsURL = "https://seller-analytics-api.wildberries.ru"
	// PathGoodsReturn is the report of goods returned to the seller.
	PathGoodsReturn = "/api/v1/analytics/goods-return"
	// MaxReturnsWindow is the longest period one report may ask for.
	MaxReturnsWindow = 31 * 24 * time.Hour
	// ReturnsInterval is the published limit of the report: one request a minute.
	ReturnsInterval = time.Minute
)

// Wildberries gives the report's times without a zone: Moscow's.
var moscow = time.FixedZone("MSK", 3*60*60)

var _ connectors.ReturnLister = (*Connector)(nil)

// returnsClient is the analytics API's client and its limit, made on first use.
type returnsClient struct {
	once sync.Once
	http *resty.Client
	lim  Limiter
}

func (c *Connector) analytics() *returnsClient {
	rc := &c.returns
	rc.once.Do(func() {
		base := c.cfg.Transport
		if base == nil {
			base = http.DefaultTransport.(*http.Transport).Clone()
		}
		rc.http = connectors.NewClient(connectors.ClientConfig{
			Connector: "wildberries",
			BaseURL:   strings.TrimRight(c.cfg.AnalyticsURL, "/"),
			Timeout:   c.cfg.Timeout,
			// No retries: a retry would not wait for the minute the report allows.
			// A refused or failed read fails the listing, and the next poll asks again.
			Retries:   -1,
			Header:    http.Header{"Authorization": {c.cfg.Token}},
			Logger:    c.log,
			Transport: retryHeader{base: base},
		})
		rc.lim = c.cfg.ReturnsLimiter
		if rc.lim == nil {
			rc.lim = rate.NewLimiter(rate.Every(ReturnsInterval), 1)
		}
	})
	return rc
}

// wireReturn is one row of the goods-return report.
type wireReturn struct {
	Srid        string          `json:"srid"`
	OrderID     json.RawMessage `json:"orderId"`
	NmID        json.RawMessage `json:"nmId"`
	Barcode     string          `json:"barcode"`
	Reason      string          `json:"reason"`
	ReturnType  string          `json:"returnType"`
	Status      string          `json:"status"`
	OrderDt     string          `json:"orderDt"`
	CompletedDt *string         `json:"completedDt"`
}

// Returns calls fn with the goods Wildberries handed back to the seller: the rows
// of the goods-return report whose completedDt is set. That, not an approved buyer
// claim, is the return carried into 1C: the goods are back in the seller's hands,
// whatever route they took (a claim, a refusal, a blocked item). A row is asked for
// by the date of its return order, and is handed back days later, so every listing
// asks for the whole period the report allows before to, in one request (the report
// allows one a minute). Each row is one item of one order (a Wildberries order is
// one item): a full return, wb:return:<srid>:register, of wb:order:<orderId>:create,
// whose lines the poller takes from that order as the journal holds it.
func (c *Connector) Returns(ctx context.Context, from, to time.Time, fn func(page []connectors.ReturnItem) error) error {
	if !from.Before(to) {
		return nil
	}
	rc := c.analytics()
	end := to.In(moscow)
	start := end.Add(-MaxReturnsWindow + 24*time.Hour) // dateFrom and dateTo both count
	what := "list goods returned to the seller"
	if err := rc.lim.Wait(ctx); err != nil {
		return fmt.Errorf("wildberries: %s: waiting for the rate limit: %w", what, err)
	}
	resp, err := connectors.Read(rc.http.R().SetContext(ctx)).SetQueryParams(map[string]string{
		"dateFrom": start.Format(time.DateOnly),
		"dateTo":   end.Format(time.DateOnly),
	}).Get(PathGoodsReturn)
	if err := connectors.Check("wildberries", tokenKey, what, resp, err); err != nil {
		return err
	}
	var pg struct {
		Report *[]json.RawMessage `json:"report"`
	}
	if err := json.Unmarshal(resp.Body(), &pg); err != nil {
		return fmt.Errorf("wildberries: %s: malformed answer: %v", what, err)
	}
	if pg.Report == nil {
		return fmt.Errorf("wildberries: %s: malformed answer: no report array", what)
	}
	var items []connectors.ReturnItem
	for _, raw := range *pg.Report {
		if it, ok := c.returnItem(raw); ok {
			items = append(items, it)
		}
	}
	if len(items) == 0 {
		return nil
	}
	return fn(items)
}

// returnItem maps one row; ok is false for a row not handed back yet.
func (c *Connector) returnItem(raw json.RawMessage) (it connectors.ReturnItem, ok bool) {
	it.Raw = raw
	bad := func(field, format string, args ...any) {
		if it.Err == nil {
			it.Err = &order.ValidationError{}
		}
		ve := it.Err.(*order.ValidationError)
		ve.Problems = append(ve.Problems, order.FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
	}
	var w wireReturn
	if err := order.CheckJSON(raw, order.JSONOptions{Into: wireReturn{}}); err != nil {
		it.Err = err
		return it, true
	}
	if err := json.Unmarshal(raw, &w); err != nil {
		bad("(return)", "is not a readable report row: %v", err)
		return it, true
	}
	if order.CheckKeyID(w.Srid) != "" || w.Srid == "" {
		bad("srid", "is missing or not usable in a key: %s", strconv.Quote(w.Srid))
		return it, true
	}
	it.ID = w.Srid
	if w.CompletedDt == nil || strings.TrimSpace(*w.CompletedDt) == "" {
		return it, false // not with the seller yet: a later listing sees it handed back
	}
	r := &order.Return{Source: c.cfg.Source, ID: w.Srid, Type: order.ReturnFull,
		Reason: order.SafeText(strings.TrimSpace(strings.Join(nonEmpty(w.ReturnType, w.Reason), ": ")))}
	var id int64
	if err := json.Unmarshal(w.OrderID, &id); err != nil || id <= 0 {
		bad("orderId", "must be the assembly task's number, got %s", clip(w.OrderID))
	} else {
		r.OrderID = strconv.FormatInt(id, 10)
		r.OrderKey = connectors.Item{ID: r.OrderID}.CreateKey(c.cfg.Source)
	}
	if t, err := parseTime(*w.CompletedDt, moscow); err != nil {
		bad("completedDt", "%v", err)
	} else {
		r.CreatedAt = t
	}
	if it.Err != nil {
		return it, true
	}
	it.Return = r
	return it, true
}

func nonEmpty(ss ...string) []string {
	var out []string
	for _, s := range ss {
		if strings.TrimSpace(s) != "" {
			out = append(out, strings.TrimSpace(s))
		}
	}
	return out
}
