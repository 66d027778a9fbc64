package wildberries

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/shopspring/decimal"
	"golang.org/x/time/rate"

	"github.com/ordersync/ordersync/internal/order"
	"github.com/ordersync/ordersync/internal/payouts"
)

// The realization report's detail by period: Wildberries' financial lines, one row
// per sale, return, logistics charge, penalty, storage day or deduction. It lives on
// the statistics host, with a limit of its own: one request a minute.
const (
	DefaultStatisticsURL = "https://statistics-api.wildberries.ru"
	reportPath           = "/api/v5/supplier/reportDetailByPeriod"
	// ReportInterval is the report's published limit: one request a minute.
	ReportInterval = time.Minute
	// MaxReportLimit is the most rows one request may ask for.
	MaxReportLimit = 100000
	// reportTries bounds the tries of one page (each waits for the limiter).
	reportTries = 4
	// maxReportPages bounds one reading, against a report that never ends.
	maxReportPages = 100000
)

// Moscow is the zone of the report's dates (UTC+3, no daylight saving).
var Moscow = time.FixedZone("MSK", 3*60*60)

// Clock is the time the report's limiter keeps: tests give one that does not wait.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Limiter paces the report's requests: Wait returns when the next may be sent.
type Limiter interface {
	Wait(ctx context.Context) error
}

// MinuteLimiter lets one request through per interval (default ReportInterval) on
// its clock, never more (golang.org/x/time/rate, burst 1). A 429 pushes the next
// request back by what Wildberries asked (Defer).
type MinuteLimiter struct {
	clock Clock
	mu    sync.Mutex
	lim   *rate.Limiter
	until time.Time
}

// NewMinuteLimiter returns a limiter of one request per interval on clock (nil:
// the real clock; interval 0: ReportInterval).
func NewMinuteLimiter(clock Clock, interval time.Duration) *MinuteLimiter {
	if clock == nil {
		clock = realClock{}
	}
	interval = cmp.Or(interval, ReportInterval)
	return &MinuteLimiter{clock: clock, lim: rate.NewLimiter(rate.Every(interval), 1)}
}

// Wait waits for the next request's turn.
func (l *MinuteLimiter) Wait(ctx context.Context) error {
	l.mu.Lock()
	now := l.clock.Now()
	r := l.lim.ReserveN(now, 1)
	delay := r.DelayFrom(now)
	if d := l.until.Sub(now); d > delay {
		delay = d
	}
	l.mu.Unlock()
	if delay <= 0 {
		return nil
	}
	select {
	case <-ctx.Done():
		r.CancelAt(l.clock.Now())
		return ctx.Err()
	case <-l.clock.After(delay):
		return nil
	}
}

// Defer keeps every request back until d from now has passed.
func (l *MinuteLimiter) Defer(d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if t := l.clock.Now().Add(d); t.After(l.until) {
		l.until = t
	}
}

// ReportConfig configures the reader of the realization report.
type ReportConfig struct {
	// BaseURL is the statistics host; default DefaultStatisticsURL.
	BaseURL string
	// Token is the API token (category Statistics or Finance): the same key as
	// connectors.wildberries.token when it has that category.
	Token string
	// Source is the lines' source: default Name ("wb"), the orders' source, so that
	// a line's order id meets the order's journal key.
	Source string
	// Limit is the rows asked for a page; default MaxReportLimit.
	Limit int
	// Limiter paces the requests; default a MinuteLimiter on Clock. Every try goes
	// through it, retries included.
	Limiter Limiter
	Clock   Clock
	Timeout time.Duration // one request; default 2m (a page may hold 100,000 rows)
	// Transport is the HTTP transport (tests; the configured response bound).
	Transport http.RoundTripper
	Logger    *slog.Logger
	// Wait, when set, hears that the reader waits for the limiter before a page.
	Wait func(page int)
}

// Report reads the realization report. It implements payouts.Reader.
type Report struct {
	cfg    ReportConfig
	client *http.Client
	log    *slog.Logger
}

var _ payouts.Reader = (*Report)(nil)

// NewReport checks cfg and returns the reader. Errors name the configuration key.
func NewReport(cfg ReportConfig) (*Report, error) {
	cfg.BaseURL = strings.TrimRight(cmp.Or(strings.TrimSpace(cfg.BaseURL), DefaultStatisticsURL), "/")
	cfg.Source = cmp.Or(cfg.Source, Name)
	cfg.Limit = cmp.Or(cfg.Limit, MaxReportLimit)
	cfg.Timeout = cmp.Or(cfg.Timeout, 2*time.Minute)
	switch {
	case strings.TrimSpace(cfg.Token) == "":
		return nil, errors.New(tokenKey + ": is required to read the realization report")
	case cfg.Limit < 1 || cfg.Limit > MaxReportLimit:
		return nil, fmt.Errorf("the report's limit must be from 1 to %d, got %d", MaxReportLimit, cfg.Limit)
	}
	if cfg.Limiter == nil {
		cfg.Limiter = NewMinuteLimiter(cfg.Clock, ReportInterval)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	tr := cfg.Transport
	if tr == nil {
		tr = http.DefaultTransport
	}
	return &Report{cfg: cfg, client: &http.Client{Transport: tr, Timeout: cfg.Timeout},
		log: cfg.Logger.With("connector", Name, "report", "reportDetailByPeriod")}, nil
}

// Source is the lines' source.
func (r *Report) Source() string { return r.cfg.Source }

// reportTime writes a bound of the period as the report takes it: Moscow time,
// without a zone.
func reportTime(t time.Time) string { return t.In(Moscow).Format("2006-01-02T15:04:05") }

// Read reads the rows of [from, to), page after page: each page asks for the rows
// after the last one's rrd_id, until Wildberries answers 204. Every request waits
// for the limiter. The report states no total: it returns nil.
func (r *Report) Read(ctx context.Context, from, to time.Time, page func(payouts.Page) error) (*decimal.Decimal, error) {
	if !from.Before(to) {
		return nil, fmt.Errorf("wildberries: realization report: the period %s – %s is empty", from.Format(time.DateOnly), to.Format(time.DateOnly))
	}
	var after int64
	for n := 1; n <= maxReportPages; n++ {
		q := url.Values{}
		q.Set("dateFrom", reportTime(from))
		q.Set("dateTo", reportTime(to.Add(-time.Second)))
		q.Set("limit", strconv.Itoa(r.cfg.Limit))
		q.Set("rrdid", strconv.FormatInt(after, 10))
		body, done, err := r.get(ctx, q, n)
		if err != nil {
			return nil, err
		}
		if done {
			return nil, nil
		}
		var rows []json.RawMessage
		if err := json.Unmarshal(body, &rows); err != nil {
			return nil, fmt.Errorf("wildberries: realization report, page %d: malformed answer: %w", n, err)
		}
		if len(rows) == 0 {
			return nil, nil
		}
		pg := payouts.Page{Number: n}
		last := after
		for i, raw := range rows {
			l, id, err := r.line(raw)
			if id > last {
				last = id
			}
			if err != nil {
				pg.Skipped = append(pg.Skipped, fmt.Sprintf("page %d, row %d: %v", n, i+1, err))
				continue
			}
			pg.Lines = append(pg.Lines, l)
		}
		if last <= after {
			return nil, fmt.Errorf("wildberries: realization report, page %d: no row has an rrd_id after %d: the paging cannot go on", n, after)
		}
		after = last
		if err := page(pg); err != nil {
			return nil, err
		}
	}
	return nil, fmt.Errorf("wildberries: realization report: more than %d pages", maxReportPages)
}

// get asks for one page; done is Wildberries' 204, the end of the report. A 429 or
// a 5xx is tried again, after the limiter's next turn (and what X-Ratelimit-Retry
// asks); the rest fails.
func (r *Report) get(ctx context.Context, q url.Values, page int) (body []byte, done bool, err error) {
	what := fmt.Sprintf("realization report, page %d", page)
	for try := 1; ; try++ {
		if r.cfg.Wait != nil {
			r.cfg.Wait(page)
		}
		if err := r.cfg.Limiter.Wait(ctx); err != nil {
			return nil, false, fmt.Errorf("wildberries: %s: %w", what, err)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.cfg.BaseURL+reportPath+"?"+q.Encode(), nil)
		if err != nil {
			return nil, false, err
		}
		req.Header.Set("Authorization", strings.TrimSpace(r.cfg.Token))
		req.Header.Set("Accept", "application/json")
		resp, err := r.client.Do(req)
		if err != nil {
			if ctx.Err() != nil {
				return nil, false, fmt.Errorf("wildberries: %s: %w", what, ctx.Err())
			}
			if try < reportTries {
				r.log.Warn("wildberries: the realization report did not answer; trying again at the next turn", "page", page, "err", err.Error())
				continue
			}
			return nil, false, fmt.Errorf("wildberries: %s: %w", what, err)
		}
		b, rerr := io.ReadAll(io.LimitReader(resp.Body, 1<<30))
		resp.Body.Close()
		st := resp.StatusCode
		switch {
		case st == http.StatusNoContent:
			return nil, true, nil
		case st == http.StatusOK && rerr == nil:
			return b, false, nil
		case st == http.StatusUnauthorized || st == http.StatusForbidden:
			return nil, false, fmt.Errorf("wildberries: %s: HTTP %d: check %s (a token with the Statistics or Finance category): %s",
				what, st, tokenKey, snippet(b))
		case (st == http.StatusTooManyRequests || st >= 500 || rerr != nil) && try < reportTries:
			if l, ok := r.cfg.Limiter.(*MinuteLimiter); ok && st == http.StatusTooManyRequests {
				if secs, err := strconv.Atoi(resp.Header.Get("X-Ratelimit-Retry")); err == nil && secs > 0 {
					l.Defer(time.Duration(secs) * time.Second)
				}
			}
			r.log.Warn("wildberries: the realization report refused a page; trying again at the next turn", "page", page, "status", st)
			continue
		case rerr != nil:
			return nil, false, fmt.Errorf("wildberries: %s: reading the answer: %w", what, rerr)
		default:
			return nil, false, fmt.Errorf("wildberries: %s: HTTP %d: %s", what, st, snippet(b))
		}
	}
}

// wireRow is one row of the report: the fields the mapping reads.
type wireRow struct {
	RRDID               json.Number `json:"rrd_id"`
	DocTypeName         string      `json:"doc_type_name"`
	SupplierOperName    string      `json:"supplier_oper_name"`
	CurrencyName        string      `json:"currency_name"`
	Quantity            json.Number `json:"quantity"`
	RetailAmount        json.Number `json:"retail_amount"`
	PPVZForPay          json.Number `json:"ppvz_for_pay"`
	DeliveryRub         json.Number `json:"delivery_rub"`
	Penalty             json.Number `json:"penalty"`
	StorageFee          json.Number `json:"storage_fee"`
	Deduction           json.Number `json:"deduction"`
	Acceptance          json.Number `json:"acceptance"`
	AdditionalPayment   json.Number `json:"additional_payment"`
	SRID                string      `json:"srid"`
	AssemblyID          json.Number `json:"assembly_id"`
	NmID                json.Number `json:"nm_id"`
	SAName              string      `json:"sa_name"`
	RRDate              string      `json:"rr_dt"`
	SaleDate            string      `json:"sale_dt"`
	PPVZSalesCommission json.Number `json:"ppvz_sales_commission"`
	AcquiringFee        json.Number `json:"acquiring_fee"`
}

// reportCurrencies are the report's currency_name values.
var reportCurrencies = map[string]string{
	"руб": "RUB", "rub": "RUB", "₽": "RUB", "kzt": "KZT", "тенге": "KZT", "тг": "KZT", "byn": "BYN", "бел. руб": "BYN",
	"kgs": "KGS", "сом": "KGS", "amd": "AMD", "драм": "AMD", "uzs": "UZS", "сум": "UZS",
}

// doc_type_name of a sale and of its reversal (lower-cased). A row of neither, or
// whose supplier_oper_name is another operation (logistics, a penalty), is a service
// of its order; a row that names no order (storage, a deduction, paid acceptance)
// is the cabinet's.
const (
	docSale   = "продажа"
	docReturn = "возврат"
)

// line maps one row. Wildberries writes a row's amounts positive; the line signs
// them: a sale accrues retail_amount and withholds the difference to ppvz_for_pay
// (the commission, acquiring and the rest of WB's reward); a return (doc_type_name
// «Возврат») reverses both; delivery_rub, penalty, storage_fee, deduction and
// acceptance are charges, negative whatever the document; additional_payment is a
// correction in the seller's favour. Amount is the sum, so the parts always add up.
func (r *Report) line(raw json.RawMessage) (payouts.Line, int64, error) {
	var w wireRow
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&w); err != nil {
		return payouts.Line{}, 0, fmt.Errorf("does not decode: %w", err)
	}
	id, err := strconv.ParseInt(w.RRDID.String(), 10, 64)
	if err != nil || id <= 0 {
		return payouts.Line{}, 0, fmt.Errorf("rrd_id %q is not a row number", w.RRDID)
	}
	fail := func(field string, err error) (payouts.Line, int64, error) {
		return payouts.Line{}, id, fmt.Errorf("rrd_id %d: %s %w", id, field, err)
	}
	num := func(field string, n json.Number) (decimal.Decimal, error) {
		if n == "" {
			return decimal.Zero, nil
		}
		d, err := order.ParseDecimal(n.String())
		if err != nil {
			return d, fmt.Errorf("%s %v", field, err)
		}
		return d, nil
	}
	var v [8]decimal.Decimal
	for i, f := range []struct {
		name string
		n    json.Number
	}{{"retail_amount", w.RetailAmount}, {"ppvz_for_pay", w.PPVZForPay}, {"delivery_rub", w.DeliveryRub},
		{"penalty", w.Penalty}, {"storage_fee", w.StorageFee}, {"deduction", w.Deduction},
		{"acceptance", w.Acceptance}, {"additional_payment", w.AdditionalPayment}} {
		if v[i], err = num(f.name, f.n); err != nil {
			return fail("", err)
		}
	}
	retail, forPay, delivery, penalty, storage, deduction, acceptance, additional := v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]
	date, err := reportDate(cmp.Or(w.RRDate, w.SaleDate))
	if err != nil {
		return fail("rr_dt", err)
	}
	cur, ok := reportCurrencies[strings.ToLower(strings.TrimSpace(w.CurrencyName))]
	if !ok {
		if c := strings.ToUpper(strings.TrimSpace(w.CurrencyName)); len(c) == 3 && c >= "AAA" && c <= "ZZZ" {
			cur = c
		} else if w.CurrencyName == "" {
			cur = "RUB"
		} else {
			return fail("currency_name", fmt.Errorf("%q is not a currency this reader knows", w.CurrencyName))
		}
	}
	doc := strings.ToLower(strings.TrimSpace(w.DocTypeName))
	oper := strings.ToLower(strings.TrimSpace(w.SupplierOperName))
	sign := decimal.NewFromInt(1)
	if doc == docReturn {
		sign = decimal.NewFromInt(-1)
	}
	l := payouts.Line{Source: r.cfg.Source, LineID: strconv.FormatInt(id, 10), Type: cmp.Or(w.SupplierOperName, w.DocTypeName),
		Date: date, Currency: cur, SKU: strings.TrimSpace(w.SAName), Raw: raw}
	l.AccruedForSale = retail.Mul(sign)
	l.Commission = forPay.Sub(retail).Mul(sign)
	l.Logistics = delivery.Neg()
	l.Penalty = penalty.Neg()
	l.Other = storage.Add(deduction).Add(acceptance).Neg().Add(additional)
	l.Amount = l.Parts()
	if q, err := strconv.ParseInt(w.Quantity.String(), 10, 64); err == nil && q > 0 && (doc == docSale || doc == docReturn) {
		qd := decimal.NewFromInt(q)
		l.Quantity = &qd
	}
	if a, err := strconv.ParseInt(w.AssemblyID.String(), 10, 64); err == nil && a > 0 {
		l.OrderID = strconv.FormatInt(a, 10)
	} else {
		l.OrderID = strings.TrimSpace(w.SRID)
	}
	switch {
	case l.OrderID == "":
		l.Kind = payouts.KindCabinet
	case doc == docSale && (oper == "" || strings.Contains(oper, "продаж")):
		l.Kind = payouts.KindSale
	case doc == docReturn && (oper == "" || strings.Contains(oper, docReturn)):
		l.Kind = payouts.KindReturn
	default:
		l.Kind = payouts.KindOrderService
	}
	if err := l.Validate(); err != nil {
		return payouts.Line{}, id, err
	}
	return l, id, nil
}

// reportDate reads rr_dt: a date (Moscow), a date-time without a zone (Moscow) or
// RFC 3339.
func reportDate(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, errors.New("is required")
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	for _, layout := range []string{"2006-01-02T15:04:05", time.DateTime, time.DateOnly} {
		if t, err := time.ParseInLocation(layout, s, Moscow); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is not a date", s)
}
