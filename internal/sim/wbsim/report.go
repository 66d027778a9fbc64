package wbsim

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/shopspring/decimal"
)

// OpReport is the realization report's detail by period,
// GET /api/v5/supplier/reportDetailByPeriod (the statistics host).
const OpReport = "report.detail"

// Documented rules of the realization report.
const (
	// ReportInterval is the report's limit: one request a minute.
	ReportInterval = time.Minute
	// MaxReportLimit is the largest limit the report accepts.
	MaxReportLimit = 100000
)

// moscow is the zone of the report's dates.
var moscow = time.FixedZone("MSK", 3*60*60)

// ReportRow is one row of the realization report. Amounts are as Wildberries writes
// them: positive, the row's doc_type_name saying whether it is a sale or its return.
type ReportRow struct {
	RRDID               int64
	RealizationReportID int64
	DocTypeName         string // «Продажа», «Возврат», "" for a service row
	SupplierOperName    string // «Продажа», «Возврат», «Логистика», «Штраф», «Хранение», «Удержание», …
	CurrencyName        string // default «руб»
	Quantity            int64
	RetailAmount        decimal.Decimal
	PPVZForPay          decimal.Decimal // «К перечислению продавцу за реализованный товар»
	PPVZSalesCommission decimal.Decimal
	AcquiringFee        decimal.Decimal
	DeliveryRub         decimal.Decimal
	Penalty             decimal.Decimal
	StorageFee          decimal.Decimal
	Deduction           decimal.Decimal
	Acceptance          decimal.Decimal
	AdditionalPayment   decimal.Decimal
	SRID                string
	AssemblyID          int64 // the FBS assembly order; 0 for others
	NmID                int64
	SAName              string // the seller's article
	RRDate              time.Time
	SaleDate            time.Time
}

// ReportViolation is a request to the report that broke its limit.
type ReportViolation struct {
	At    time.Time // on the report's clock
	Since time.Duration
}

// wbReport is the state of the report, guarded by Wildberries.mu.
type wbReport struct {
	rows       []ReportRow
	now        func() time.Time // nil: the simulator's clock
	last       time.Time        // the last request answered within the limit
	violations []ReportViolation
}

// AddReportRows adds rows to the realization report.
func (s *Wildberries) AddReportRows(rows ...ReportRow) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.report.rows = append(s.report.rows, rows...)
	slices.SortStableFunc(s.report.rows, func(a, b ReportRow) int {
		return int(a.RRDID - b.RRDID)
	})
}

// SetReportClock sets the clock the report's limit is judged on (default the
// simulator's).
func (s *Wildberries) SetReportClock(now func() time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.report.now = now
}

// ReportViolations returns the requests refused for coming within a minute of the
// previous one.
func (s *Wildberries) ReportViolations() []ReportViolation {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.report.violations)
}

// wbReportRoute names a request to the report.
func wbReportRoute(method string, parts []string) (string, bool) {
	if method == http.MethodGet && len(parts) == 4 && parts[0] == "api" && parts[1] == "v5" && parts[2] == "supplier" &&
		parts[3] == "reportDetailByPeriod" {
		return OpReport, true
	}
	return "", false
}

// parseReportDate reads dateFrom/dateTo: RFC 3339, or a date or date-time without a
// zone in Moscow time.
func parseReportDate(s string) (time.Time, bool) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, true
	}
	for _, layout := range []string{"2006-01-02T15:04:05", time.DateOnly} {
		if t, err := time.ParseInLocation(layout, s, moscow); err == nil {
			return t, true
		}
	}
	return time.Time{}, false
}

// serveReport answers the report: the rows of the period (rr_dt from dateFrom to
// dateTo, both included) after rrdid, by rrd_id, at most limit; 204 when none is left.
// A request within a minute of the last one answered is refused with 429 and
// recorded.
func (s *Wildberries) serveReport(w http.ResponseWriter, q url.Values) {
	s.mu.Lock()
	now := s.now
	if s.report.now != nil {
		now = s.report.now
	}
	at := now()
	if !s.report.last.IsZero() && at.Sub(s.report.last) < ReportInterval {
		since := at.Sub(s.report.last)
		s.report.violations = append(s.report.violations, ReportViolation{At: at, Since: since})
		s.mu.Unlock()
		s.writeGatewayError(w, http.StatusTooManyRequests, "too many requests",
			"the realization report allows 1 request a minute", ReportInterval-since)
		return
	}
	s.report.last = at
	s.mu.Unlock()

	from, ok1 := parseReportDate(q.Get("dateFrom"))
	to, ok2 := parseReportDate(q.Get("dateTo"))
	if !ok1 || !ok2 {
		s.writeError(w, http.StatusBadRequest, "BadRequest", "dateFrom and dateTo are required: RFC 3339 in Moscow time")
		return
	}
	limit := MaxReportLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxReportLimit {
			s.writeError(w, http.StatusBadRequest, "BadRequest", "limit must be from 1 to 100000")
			return
		}
		limit = n
	}
	var after int64
	if v := q.Get("rrdid"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			s.writeError(w, http.StatusBadRequest, "BadRequest", "rrdid must be a number")
			return
		}
		after = n
	}
	// Rows are of whole days: a dateTo without a time covers its day.
	if !strings.Contains(q.Get("dateTo"), "T") {
		to = to.Add(24*time.Hour - time.Nanosecond)
	}
	s.mu.Lock()
	var page []map[string]any
	for _, r := range s.report.rows {
		if len(page) == limit {
			break
		}
		if r.RRDID <= after || r.RRDate.Before(from) || r.RRDate.After(to) {
			continue
		}
		page = append(page, wireReportRow(r))
	}
	s.mu.Unlock()
	if len(page) == 0 {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	s.writeJSON(w, http.StatusOK, page)
}

func wireReportRow(r ReportRow) map[string]any {
	num := func(d decimal.Decimal) json.Number { return json.Number(d.String()) }
	cur := r.CurrencyName
	if cur == "" {
		cur = "руб"
	}
	sale := ""
	if !r.SaleDate.IsZero() {
		sale = r.SaleDate.In(moscow).Format("2006-01-02T15:04:05")
	}
	return map[string]any{
		"realizationreport_id":  r.RealizationReportID,
		"rrd_id":                r.RRDID,
		"currency_name":         cur,
		"doc_type_name":         r.DocTypeName,
		"supplier_oper_name":    r.SupplierOperName,
		"quantity":              r.Quantity,
		"retail_amount":         num(r.RetailAmount),
		"ppvz_for_pay":          num(r.PPVZForPay),
		"ppvz_sales_commission": num(r.PPVZSalesCommission),
		"acquiring_fee":         num(r.AcquiringFee),
		"delivery_rub":          num(r.DeliveryRub),
		"penalty":               num(r.Penalty),
		"storage_fee":           num(r.StorageFee),
		"deduction":             num(r.Deduction),
		"acceptance":            num(r.Acceptance),
		"additional_payment":    num(r.AdditionalPayment),
		"srid":                  r.SRID,
		"assembly_id":           r.AssemblyID,
		"nm_id":                 r.NmID,
		"sa_name":               r.SAName,
		"rr_dt":                 r.RRDate.In(moscow).Format(time.DateOnly),
		"sale_dt":               sale,
	}
}
