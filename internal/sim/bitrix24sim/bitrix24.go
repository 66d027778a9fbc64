package bitrix24sim

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/shopspring/decimal"

	"github.com/ordersync/ordersync/internal/sim"
)

// The Bitrix24 REST methods the simulator serves.
const (
	DealGet        = "crm.deal.get"
	DealProductRow = "crm.deal.productrows.get"
	ContactGet     = "crm.contact.get"
	CompanyGet     = "crm.company.get"
	ProductGet     = "crm.product.get"
)

// Options configure a simulated portal.
type Options struct {
	// UserID and Code are the inbound webhook's user id and secret code: requests go
	// to /rest/<UserID>/<Code>/<method>. Defaults "1" and "simwebhookcode0001".
	UserID, Code string
	// Domain is the portal's address in outgoing webhooks; default
	// ordersync-sim.bitrix24.kz.
	Domain string
	// RowNumbersAsStrings serves the numbers of product rows (PRICE, QUANTITY,
	// DISCOUNT_SUM, …) as strings such as "1500.00" instead of the JSON numbers the
	// documentation shows; some portals and proxies do.
	RowNumbersAsStrings bool
	// NotFoundError is the "error" field of the answer for an id that names nothing.
	// Default "": the documented answer is HTTP 400 {"error": "", "error_description":
	// "Not found"}; older portals answer "NOT_FOUND".
	NotFoundError string
	// Now is the clock (the envelope's time, DATE_MODIFY); default time.Now.
	Now func() time.Time
	// Logger receives a line per request at debug level; default discards. The
	// webhook code never reaches it.
	Logger *slog.Logger
}

// Row is one product row of a deal. Price is the unit price before the discount
// (PRICE_NETTO); Discount the absolute discount per unit (DISCOUNT_SUM). The portal
// serves PRICE = Price − Discount, the price the buyer pays. XMLID is the catalog
// product's XML_ID, served by crm.product.get, not the row's own XML_ID. A row with
// ProductID 0 and an XMLID gets a new catalog product; one with neither is a row typed
// in by hand, outside the catalog (PRODUCT_ID 0).
type Row struct {
	ProductID   int64
	ProductName string
	Price       decimal.Decimal
	Quantity    decimal.Decimal
	Discount    decimal.Decimal
	XMLID       string
}

// Deal is one deal held by the simulator. ID is a positive integer in decimal.
type Deal struct {
	ID         string
	Title      string
	StageID    string // default NEW; a pipeline's stages carry its prefix, e.g. C1:WON
	CurrencyID string // default KZT
	DateCreate time.Time
	ContactID  string // "" for none
	CompanyID  string // "" for none
	Comments   string
	Rows       []Row
}

// Contact is a CRM contact.
type Contact struct {
	ID                         string
	Name, SecondName, LastName string
	Phones, Emails             []string
}

// Company is a CRM company.
type Company struct {
	ID             string
	Title          string
	Phones, Emails []string
}

// Product is a catalog product. Properties are its property values by field name,
// e.g. {"PROPERTY_104": "ART-1"}, served as {"valueId", "value"} objects.
type Product struct {
	ID         int64
	Name       string
	XMLID      string
	Code       string
	Properties map[string]string
}

// Request is one request the simulator answered.
type Request struct {
	Method     string // the REST method, crm.deal.get
	HTTPMethod string
	Params     map[string]string // top-level parameters, keys in lower case
	Status     int
	At         time.Time
}

// Bitrix24 is a simulated Bitrix24 portal: the REST methods a deal fetcher uses,
// through an inbound webhook /rest/<user id>/<code>/<method>[.json], called with GET
// and a query or POST with a form or JSON, as the real portal accepts. Answers are
// the envelope {"result": …, "time": {…}}; errors {"error", "error_description"} with
// the documented statuses: 401 INVALID_CREDENTIALS for a wrong user id or code, 400
// "Not found" for an id that names nothing, 503 QUERY_LIMIT_EXCEEDED on demand, 404
// ERROR_METHOD_NOT_FOUND for other methods. It also builds the outgoing webhook a
// portal sends about a deal. It is an http.Handler and safe for concurrent use.
type Bitrix24 struct {
	// Faults answer authorised requests instead of the portal, after the
	// credentials and the parameters are read. Op is a REST method (DealGet, …) or
	// "" for any; Status is answered with the portal's error body: 500
	// INTERNAL_SERVER_ERROR, 503 QUERY_LIMIT_EXCEEDED (the portal's request counter
	// over the limit), 429 OPERATION_TIME_LIMIT, others with an empty code. No kinds,
	// no RetryAfter: the portal sends no Retry-After.
	Faults *sim.Faults

	userID, code, domain string
	rowStrings           bool
	notFoundError        string
	now                  func() time.Time
	log                  *slog.Logger
	server               sim.Server

	mu           sync.Mutex
	deals        map[string]*Deal
	contacts     map[string]Contact
	companies    map[string]Company
	products     map[int64]Product
	nextProduct  int64
	rowIDs       map[string][]int64 // deal → its rows' ids
	nextRow      int64
	requests     []Request
	authFailures int
}

// New returns a simulator; it serves nothing until Start, or until it is
// mounted as an http.Handler.
func New(opts Options) *Bitrix24 {
	s := &Bitrix24{
		Faults:        sim.NewFaults(checkFault),
		userID:        opts.UserID,
		code:          opts.Code,
		domain:        opts.Domain,
		rowStrings:    opts.RowNumbersAsStrings,
		notFoundError: opts.NotFoundError,
		now:           opts.Now,
		log:           opts.Logger,
		deals:         map[string]*Deal{},
		contacts:      map[string]Contact{},
		companies:     map[string]Company{},
		products:      map[int64]Product{},
		nextProduct:   1001,
		rowIDs:        map[string][]int64{},
		nextRow:       1,
	}
	if s.userID == "" {
		s.userID = "1"
	}
	if s.code == "" {
		s.code = "simwebhookcode0001"
	}
	if s.domain == "" {
		s.domain = "ordersync-sim.bitrix24.kz"
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	return s
}

// Start listens on addr (":0" picks a port) and serves in the background.
func (s *Bitrix24) Start(addr string) error {
	return s.server.Start("bitrix24", addr, s, s.log)
}

// URL is the portal's address after Start, "" before.
func (s *Bitrix24) URL() string {
	return s.server.URL("")
}

// RESTURL is the inbound webhook URL under base (the address the handler is served
// at, URL() after Start): what webhooks.bitrix24.rest_url would be.
func (s *Bitrix24) RESTURL(base string) string {
	return strings.TrimRight(base, "/") + "/rest/" + s.userID + "/" + s.code + "/"
}

// Close stops the server started by Start. It is safe to call twice and before Start.
func (s *Bitrix24) Close() {
	s.server.Close()
}

// AddDeal adds a deal, filling the defaults documented on Deal and the catalog
// products its rows name. It panics on a mistake in a test: an id that is not a
// positive integer, a deal added twice, a row whose XMLID contradicts its product.
func (s *Bitrix24) AddDeal(d Deal) {
	if n, err := strconv.ParseInt(d.ID, 10, 64); err != nil || n <= 0 {
		panic("sim: bitrix24: AddDeal with id " + strconv.Quote(d.ID) + ", want a positive integer")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.deals[d.ID]; dup {
		panic("sim: bitrix24: deal " + d.ID + " added twice")
	}
	if d.StageID == "" {
		d.StageID = "NEW"
	}
	if d.CurrencyID == "" {
		d.CurrencyID = "KZT"
	}
	if d.DateCreate.IsZero() {
		d.DateCreate = s.now()
	}
	d.Rows = slices.Clone(d.Rows)
	ids := make([]int64, len(d.Rows))
	for i := range d.Rows {
		r := &d.Rows[i]
		switch {
		case r.ProductID == 0 && r.XMLID != "":
			r.ProductID = s.nextProduct
			s.nextProduct++
			s.products[r.ProductID] = Product{ID: r.ProductID, Name: r.ProductName, XMLID: r.XMLID}
		case r.ProductID > 0:
			p, ok := s.products[r.ProductID]
			switch {
			case !ok:
				s.products[r.ProductID] = Product{ID: r.ProductID, Name: r.ProductName, XMLID: r.XMLID}
				s.nextProduct = max(s.nextProduct, r.ProductID+1)
			case r.XMLID != "" && p.XMLID != r.XMLID:
				panic(fmt.Sprintf("sim: bitrix24: product %d has XML_ID %q, a row of deal %s says %q", r.ProductID, p.XMLID, d.ID, r.XMLID))
			}
		}
		ids[i] = s.nextRow
		s.nextRow++
	}
	s.rowIDs[d.ID] = ids
	s.deals[d.ID] = &d
}

// AddContact adds or replaces a contact.
func (s *Bitrix24) AddContact(c Contact) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c.Phones, c.Emails = slices.Clone(c.Phones), slices.Clone(c.Emails)
	s.contacts[c.ID] = c
}

// AddCompany adds or replaces a company.
func (s *Bitrix24) AddCompany(c Company) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c.Phones, c.Emails = slices.Clone(c.Phones), slices.Clone(c.Emails)
	s.companies[c.ID] = c
}

// AddProduct adds or replaces a catalog product (ID required).
func (s *Bitrix24) AddProduct(p Product) {
	if p.ID <= 0 {
		panic("sim: bitrix24: AddProduct without an id")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p.Properties = maps.Clone(p.Properties)
	s.products[p.ID] = p
	s.nextProduct = max(s.nextProduct, p.ID+1)
}

// SetStage moves a deal to another stage, as an employee does.
func (s *Bitrix24) SetStage(id, stage string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.deals[id]
	if !ok {
		return fmt.Errorf("sim: bitrix24: no deal %s", id)
	}
	d.StageID = stage
	return nil
}

// Deal returns a copy of a deal.
func (s *Bitrix24) Deal(id string) (Deal, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.deals[id]
	if !ok {
		return Deal{}, false
	}
	c := *d
	c.Rows = slices.Clone(d.Rows)
	return c, true
}

// Requests returns every request answered, in arrival order.
func (s *Bitrix24) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.Clone(s.requests)
	for i := range out {
		out[i].Params = maps.Clone(out[i].Params)
	}
	return out
}

// RequestCount counts the requests to one REST method, refused ones included; ""
// counts all.
func (s *Bitrix24) RequestCount(method string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, r := range s.requests {
		if method == "" || r.Method == method {
			n++
		}
	}
	return n
}

// AuthFailures counts requests refused for their user id or code.
func (s *Bitrix24) AuthFailures() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.authFailures
}

// MemberID is the portal's member_id in outgoing webhooks, derived from Domain.
func (s *Bitrix24) MemberID() string {
	sum := md5.Sum([]byte(s.domain))
	return hex.EncodeToString(sum[:])
}

// OutgoingForm is the form an outgoing webhook of the portal posts about a deal
// (application/x-www-form-urlencoded): event (ONCRMDEALADD, ONCRMDEALUPDATE, …),
// data[FIELDS][ID], ts (Unix seconds), and auth[…] with the portal's domain,
// client_endpoint, server_endpoint, member_id, scope, status and the
// application_token the receiver checks.
func (s *Bitrix24) OutgoingForm(event, dealID string, ts time.Time, applicationToken string) url.Values {
	return url.Values{
		"event":                   {event},
		"data[FIELDS][ID]":        {dealID},
		"ts":                      {strconv.FormatInt(ts.Unix(), 10)},
		"auth[domain]":            {s.domain},
		"auth[client_endpoint]":   {"https://" + s.domain + "/rest/"},
		"auth[server_endpoint]":   {"https://oauth.bitrix.info/rest/"},
		"auth[member_id]":         {s.MemberID()},
		"auth[scope]":             {"crm"},
		"auth[status]":            {"L"},
		"auth[application_token]": {applicationToken},
	}
}

// PostOutgoing sends form to a handler URL the way the portal does: POST,
// application/x-www-form-urlencoded. It returns the status and body of the answer.
func (s *Bitrix24) PostOutgoing(ctx context.Context, handlerURL string, form url.Values) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, handlerURL, strings.NewReader(form.Encode()))
	if err != nil {
		return 0, nil, fmt.Errorf("sim: bitrix24: outgoing webhook: %w", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("User-Agent", "Bitrix24 Webhook Engine")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("sim: bitrix24: outgoing webhook: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, b, err
}

func (s *Bitrix24) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	at := s.now()
	rec := &b24Recorder{ResponseWriter: w}
	method, params := s.serve(rec, r, at)
	s.mu.Lock()
	s.requests = append(s.requests, Request{Method: method, HTTPMethod: r.Method, Params: params, Status: rec.status, At: at})
	s.mu.Unlock()
	s.log.DebugContext(r.Context(), "bitrix24 sim: request", "method", method, "status", rec.status)
}

// serve answers one request and returns the REST method and parameters it named.
func (s *Bitrix24) serve(w http.ResponseWriter, r *http.Request, at time.Time) (string, map[string]string) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/rest/")
	if !ok {
		http.NotFound(w, r)
		return "", nil
	}
	parts := strings.SplitN(rest, "/", 3)
	method := parts[len(parts)-1]
	method = strings.TrimSuffix(method, ".json")
	if r.Method != http.MethodGet && r.Method != http.MethodPost {
		w.Header().Set("Allow", "GET, POST")
		b24WriteError(w, http.StatusMethodNotAllowed, "ERROR_METHOD_NOT_ALLOWED", "Method not allowed")
		return method, nil
	}
	if len(parts) < 3 {
		s.countAuthFailure()
		b24WriteError(w, http.StatusUnauthorized, "NO_AUTH_FOUND", "Wrong authorization data")
		return method, nil
	}
	if parts[0] != s.userID || parts[1] != s.code {
		s.countAuthFailure()
		b24WriteError(w, http.StatusUnauthorized, "INVALID_CREDENTIALS", "Invalid request credentials")
		return method, nil
	}
	params, err := b24Params(r)
	if err != nil {
		b24WriteError(w, http.StatusBadRequest, "INVALID_REQUEST", err.Error())
		return method, params
	}
	if f, ok := s.Faults.Take(func(f sim.Fault) bool { return f.Matches(method, "") }); ok {
		if f.Body != "" {
			w.WriteHeader(f.Status)
			io.WriteString(w, f.Body)
			return method, params
		}
		code, descr := b24FaultError(f.Status)
		b24WriteError(w, f.Status, code, descr)
		return method, params
	}
	var result any
	switch method {
	case DealGet:
		result = s.dealGet(w, params)
	case DealProductRow:
		result = s.productRows(w, params)
	case ContactGet:
		result = s.contactGet(w, params)
	case CompanyGet:
		result = s.companyGet(w, params)
	case ProductGet:
		result = s.productGet(w, params)
	default:
		b24WriteError(w, http.StatusNotFound, "ERROR_METHOD_NOT_FOUND", "Method not found!")
		return method, params
	}
	if result == nil {
		return method, params // an error was written
	}
	s.writeResult(w, result, at)
	return method, params
}

// b24Recorder records the status a handler answered.
type b24Recorder struct {
	http.ResponseWriter
	status int
}

func (r *b24Recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
	r.ResponseWriter.WriteHeader(status)
}

func (r *b24Recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

func (s *Bitrix24) countAuthFailure() {
	s.mu.Lock()
	s.authFailures++
	s.mu.Unlock()
}

// b24FaultError is the portal's error code and description for an injected status.
func b24FaultError(status int) (code, descr string) {
	switch status {
	case http.StatusInternalServerError:
		return "INTERNAL_SERVER_ERROR", "Internal server error"
	case http.StatusServiceUnavailable:
		return "QUERY_LIMIT_EXCEEDED", "Too many requests"
	case http.StatusTooManyRequests:
		return "OPERATION_TIME_LIMIT", "Method is blocked due to operation time limit."
	}
	return "", "injected failure"
}

// checkFault refuses what a portal's fault cannot be.
func checkFault(f sim.Fault) error {
	switch {
	case f.Status < 400:
		return fmt.Errorf("sim: bitrix24: fault status %d is not an error status", f.Status)
	case f.Kind != "" || f.RetryAfter != 0 || f.ExternalID != "" || f.Delay != 0 || f.Hold != 0:
		return fmt.Errorf("sim: bitrix24: a fault is a status (and Op, After, Body) only")
	}
	return nil
}

// b24Params reads the top-level parameters: the query, and a POST body as a form or
// JSON. Keys are folded to lower case (the portal takes id and ID alike).
func b24Params(r *http.Request) (map[string]string, error) {
	out := map[string]string{}
	for k, v := range r.URL.Query() {
		out[strings.ToLower(k)] = v[0]
	}
	if r.Method != http.MethodPost {
		return out, nil
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 4<<20))
	if err != nil {
		return out, err
	}
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if ct == "application/json" || (ct == "" && bytes.HasPrefix(bytes.TrimSpace(body), []byte("{"))) {
		if len(bytes.TrimSpace(body)) == 0 {
			return out, nil
		}
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.UseNumber()
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			return out, fmt.Errorf("malformed JSON: %v", err)
		}
		for k, v := range m {
			switch v := v.(type) {
			case string:
				out[strings.ToLower(k)] = v
			case json.Number:
				out[strings.ToLower(k)] = v.String()
			}
		}
		return out, nil
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return out, fmt.Errorf("malformed form: %v", err)
	}
	for k, v := range form {
		out[strings.ToLower(k)] = v[0]
	}
	return out, nil
}

// b24ID reads the id parameter, answering the documented 400 when it is not a
// positive integer.
func b24ID(w http.ResponseWriter, params map[string]string) (string, bool) {
	id := strings.TrimSpace(params["id"])
	if n, err := strconv.ParseInt(id, 10, 64); err != nil || n <= 0 {
		b24WriteError(w, http.StatusBadRequest, "", "ID is not defined or invalid.")
		return "", false
	}
	return strconv.FormatInt(mustInt(id), 10), true
}

func mustInt(s string) int64 {
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}

func (s *Bitrix24) notFound(w http.ResponseWriter) {
	b24WriteError(w, http.StatusBadRequest, s.notFoundError, "Not found")
}

func (s *Bitrix24) dealGet(w http.ResponseWriter, params map[string]string) any {
	id, ok := b24ID(w, params)
	if !ok {
		return nil
	}
	s.mu.Lock()
	d, found := s.deals[id]
	var c Deal
	if found {
		c = *d
	}
	s.mu.Unlock()
	if !found {
		s.notFound(w)
		return nil
	}
	sum := decimal.Zero
	for _, r := range c.Rows {
		sum = sum.Add(r.Price.Sub(r.Discount).Mul(r.Quantity))
	}
	category, semantic := "0", "P"
	if pfx, _, ok := strings.Cut(c.StageID, ":"); ok && strings.HasPrefix(pfx, "C") {
		category = pfx[1:]
	}
	switch {
	case strings.HasSuffix(c.StageID, "WON"):
		semantic = "S"
	case strings.HasSuffix(c.StageID, "LOSE"), strings.HasSuffix(c.StageID, "APOLOGY"):
		semantic = "F"
	}
	closed := "N"
	if semantic != "P" {
		closed = "Y"
	}
	created := c.DateCreate.Format(time.RFC3339)
	return map[string]any{
		"ID":                    c.ID,
		"TITLE":                 c.Title,
		"TYPE_ID":               "SALE",
		"STAGE_ID":              c.StageID,
		"CATEGORY_ID":           category,
		"STAGE_SEMANTIC_ID":     semantic,
		"IS_NEW":                "N",
		"IS_RECURRING":          "N",
		"PROBABILITY":           nil,
		"CURRENCY_ID":           c.CurrencyID,
		"OPPORTUNITY":           sum.StringFixed(2),
		"IS_MANUAL_OPPORTUNITY": "N",
		"TAX_VALUE":             "0.00",
		"LEAD_ID":               nil,
		"COMPANY_ID":            b24Ref(c.CompanyID, "0"),
		"CONTACT_ID":            b24Ref(c.ContactID, nil),
		"QUOTE_ID":              nil,
		"BEGINDATE":             created,
		"CLOSEDATE":             created,
		"ASSIGNED_BY_ID":        s.userID,
		"CREATED_BY_ID":         s.userID,
		"MODIFY_BY_ID":          s.userID,
		"DATE_CREATE":           created,
		"DATE_MODIFY":           s.now().In(c.DateCreate.Location()).Format(time.RFC3339),
		"OPENED":                "Y",
		"CLOSED":                closed,
		"COMMENTS":              b24Ref(c.Comments, nil),
		"ADDITIONAL_INFO":       nil,
		"SOURCE_ID":             "WEB",
		"ORIGINATOR_ID":         nil,
		"ORIGIN_ID":             nil,
	}
}

// b24Ref is a reference field: its value, or none when empty.
func b24Ref(v string, none any) any {
	if v == "" {
		return none
	}
	return v
}

func (s *Bitrix24) productRows(w http.ResponseWriter, params map[string]string) any {
	id, ok := b24ID(w, params)
	if !ok {
		return nil
	}
	s.mu.Lock()
	d, found := s.deals[id]
	var rows []Row
	var rowIDs []int64
	if found {
		rows, rowIDs = slices.Clone(d.Rows), slices.Clone(s.rowIDs[id])
	}
	s.mu.Unlock()
	if !found {
		s.notFound(w)
		return nil
	}
	out := make([]map[string]any, 0, len(rows))
	for i, r := range rows {
		price := r.Price.Sub(r.Discount)
		rate := decimal.Zero
		if r.Price.IsPositive() {
			rate = r.Discount.Mul(decimal.NewFromInt(100)).Div(r.Price).Round(2)
		}
		out = append(out, map[string]any{
			"ID":                    strconv.FormatInt(rowIDs[i], 10),
			"OWNER_ID":              id,
			"OWNER_TYPE":            "D",
			"PRODUCT_ID":            r.ProductID,
			"PRODUCT_NAME":          r.ProductName,
			"ORIGINAL_PRODUCT_NAME": r.ProductName,
			"PRODUCT_DESCRIPTION":   nil,
			"PRICE":                 s.rowNumber(price, 2),
			"PRICE_EXCLUSIVE":       s.rowNumber(price, 2),
			"PRICE_NETTO":           s.rowNumber(r.Price, 2),
			"PRICE_BRUTTO":          s.rowNumber(r.Price, 2),
			"PRICE_ACCOUNT":         price.StringFixed(2),
			"QUANTITY":              s.rowNumber(r.Quantity, 0),
			"DISCOUNT_TYPE_ID":      1,
			"DISCOUNT_RATE":         s.rowNumber(rate, 2),
			"DISCOUNT_SUM":          s.rowNumber(r.Discount, 2),
			"TAX_RATE":              nil,
			"TAX_INCLUDED":          "Y",
			"CUSTOMIZED":            "Y",
			"MEASURE_CODE":          796,
			"MEASURE_NAME":          "шт",
			"SORT":                  10 * (i + 1),
			"XML_ID":                nil, // the row's own code (a shop basket's); not the product's
			"TYPE":                  1,
			"STORE_ID":              0,
		})
	}
	return out
}

// rowNumber writes a product-row number: a JSON number written exactly, or with
// RowNumbersAsStrings a string with at least places decimals ("1500.00").
func (s *Bitrix24) rowNumber(d decimal.Decimal, places int32) any {
	if s.rowStrings {
		if d.Exponent() < -places {
			return d.String()
		}
		return d.StringFixed(places)
	}
	return json.RawMessage(d.String())
}

func (s *Bitrix24) contactGet(w http.ResponseWriter, params map[string]string) any {
	id, ok := b24ID(w, params)
	if !ok {
		return nil
	}
	s.mu.Lock()
	c, found := s.contacts[id]
	s.mu.Unlock()
	if !found {
		s.notFound(w)
		return nil
	}
	out := map[string]any{
		"ID":          c.ID,
		"NAME":        c.Name,
		"SECOND_NAME": b24Ref(c.SecondName, nil),
		"LAST_NAME":   b24Ref(c.LastName, nil),
		"TYPE_ID":     "CLIENT",
		"SOURCE_ID":   "WEB",
		"COMPANY_ID":  nil,
		"OPENED":      "Y",
		"EXPORT":      "Y",
		"HAS_PHONE":   b24YN(len(c.Phones) > 0),
		"HAS_EMAIL":   b24YN(len(c.Emails) > 0),
		"HAS_IMOL":    "N",
	}
	b24Multi(out, "PHONE", "WORK", c.Phones, 100)
	b24Multi(out, "EMAIL", "WORK", c.Emails, 200)
	return out
}

func (s *Bitrix24) companyGet(w http.ResponseWriter, params map[string]string) any {
	id, ok := b24ID(w, params)
	if !ok {
		return nil
	}
	s.mu.Lock()
	c, found := s.companies[id]
	s.mu.Unlock()
	if !found {
		s.notFound(w)
		return nil
	}
	out := map[string]any{
		"ID":           c.ID,
		"TITLE":        c.Title,
		"COMPANY_TYPE": "CUSTOMER",
		"OPENED":       "Y",
		"HAS_PHONE":    b24YN(len(c.Phones) > 0),
		"HAS_EMAIL":    b24YN(len(c.Emails) > 0),
	}
	b24Multi(out, "PHONE", "WORK", c.Phones, 300)
	b24Multi(out, "EMAIL", "WORK", c.Emails, 400)
	return out
}

// b24Multi adds a multiple field (PHONE, EMAIL) when it has values; the portal omits
// an empty one.
func b24Multi(out map[string]any, field, valueType string, values []string, firstID int) {
	if len(values) == 0 {
		return
	}
	vs := make([]map[string]string, len(values))
	for i, v := range values {
		vs[i] = map[string]string{"ID": strconv.Itoa(firstID + i), "VALUE_TYPE": valueType, "VALUE": v, "TYPE_ID": field}
	}
	out[field] = vs
}

func b24YN(b bool) string {
	if b {
		return "Y"
	}
	return "N"
}

func (s *Bitrix24) productGet(w http.ResponseWriter, params map[string]string) any {
	id, ok := b24ID(w, params)
	if !ok {
		return nil
	}
	s.mu.Lock()
	p, found := s.products[mustInt(id)]
	s.mu.Unlock()
	if !found {
		s.notFound(w)
		return nil
	}
	out := map[string]any{
		"ID":           strconv.FormatInt(p.ID, 10),
		"CATALOG_ID":   "24",
		"NAME":         p.Name,
		"CODE":         b24Ref(p.Code, nil),
		"XML_ID":       b24Ref(p.XMLID, nil),
		"ACTIVE":       "Y",
		"SECTION_ID":   nil,
		"SORT":         "500",
		"VAT_ID":       nil,
		"VAT_INCLUDED": "Y",
		"MEASURE":      "9",
		"PRICE":        nil,
		"CURRENCY_ID":  nil,
		"DESCRIPTION":  nil,
	}
	for k, v := range p.Properties {
		out[k] = map[string]string{"valueId": strconv.FormatInt(3000+p.ID, 10), "value": v}
	}
	return out
}

func (s *Bitrix24) writeResult(w http.ResponseWriter, result any, start time.Time) {
	finish := s.now()
	sec := func(t time.Time) json.RawMessage {
		return json.RawMessage(strconv.FormatFloat(float64(t.UnixMicro())/1e6, 'f', 6, 64))
	}
	body, err := json.Marshal(map[string]any{
		"result": result,
		"time": map[string]any{
			"start":       sec(start),
			"finish":      sec(finish),
			"duration":    finish.Sub(start).Seconds(),
			"processing":  finish.Sub(start).Seconds(),
			"date_start":  start.Format(time.RFC3339),
			"date_finish": finish.Format(time.RFC3339),
			"operating":   0,
		},
	})
	if err != nil {
		b24WriteError(w, http.StatusInternalServerError, "INTERNAL_SERVER_ERROR", err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	w.Write(body)
}

func b24WriteError(w http.ResponseWriter, status int, code, descr string) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"error": code, "error_description": descr})
}
