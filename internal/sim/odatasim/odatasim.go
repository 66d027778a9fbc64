// Package odatasim is a 1C:Enterprise base publishing the standard OData interface
// (…/odata/standard.odata), as 1C's documentation and public reports of real bases
// describe it, for customer orders, the catalogs they refer to and the stock of
// goods. It serves JSON only (OData v3 JSON light), never Atom XML: $format=json,
// application/json and application/json;odata=minimalmetadata, …=fullmetadata
// (answered as minimal) or …=nometadata (no odata.metadata) are accepted, and a
// request without $format, which a base answers in Atom, is answered in JSON all
// the same; another $format answers 400 code 3. $metadata alone is XML.
//
// Profiles (Options.Profile): "ut11", the default, serves УТ 11's
// Document_ЗаказКлиента with tabular part Товары, marked by НомерПоДаннымКлиента;
// "unf" serves УНФ's Document_ЗаказПокупателя with tabular part Запасы, marked by
// Комментарий (Options.Marker names another marker field). Both serve
// Catalog_Номенклатура (with Артикул) and the reference catalogs of their profile
// (Catalogs), each with Ref_Key, DataVersion, DeletionMark, Code and Description;
// "ut11" serves the stock register AccumulationRegister_ТоварыНаСкладах, and the
// customer return Document_ВозвратТоваровОтКлиента (tabular part Товары, marked by
// НомерВходящегоДокумента, its base the composite ДокументРеализации with
// ДокументРеализации_Type), served as the order is: create, $filter, PATCH, Post,
// the same faults (ExternalID naming the return's marker), counted by
// CountReturns.
//
//   - A create (POST Set) of an order answers 201 with the whole object and a
//     Location header whose URL is raw UTF-8. Every row needs a LineNumber (none:
//     500), from 1 and contiguous (else 400 code 4). Unknown fields are ignored;
//     strings longer than their field are cut (Options.MaxLength); a reference to
//     a missing object is kept as written (a broken reference); a number field
//     given a string keeps 0, a string field given a number keeps "": all with
//     201, the silent failures a client must read back. A reference, boolean or
//     date field given what is not one answers 400 code 1 (a kept Ref_Key too); a
//     date keeps its wall-clock time, a zone given dropped.
//   - A client's Ref_Key is kept or ignored (Options.KeepRefKey); kept, a second
//     create with it answers 400 code 15.
//   - PATCH Set(guid'…') writes the fields given (the tabular part replaced whole);
//     DataVersion, an 8-byte counter in base64, grows on every write.
//   - GET Set lists with $filter, $select, $orderby, $top, $skip ($skip first)
//     and $inlinecount=allpages ("odata.count" a string; $top and $skip then
//     ignored); GET Set(guid'…') reads one object, with $select. $filter takes
//     `<field> eq|ne|gt|ge|lt|le <literal>` with a string ('…', quotes doubled),
//     true/false, a number, guid'…' or datetime'YYYY-MM-DDTHH:MM:SS' literal of the
//     field's type (dates and GUIDs compared as text), and
//     substringof('text', <field>) [eq true|false], case-insensitive as 1C's, joined
//     by `and`; anything else answers 400 code 14. $orderby takes fields, asc or
//     desc (a tie keeps creation order); $select fields, *, ** (no tabular part),
//     the tabular part or its fields (Товары/Цена); an unknown field answers 400
//     code 6. Another $-option answers 400 code 0, so that a test does not take it
//     for honoured.
//   - A '+' in the query is a plus, never a space; a request line over 2,048
//     bytes answers the web server's HTML 404 page.
//   - Post (POST Set(guid'…')/Post?PostingModeOperational=false|true) and Unpost
//     (…/Unpost) need a Content-Length (411 without, as IIS answers an unsaid empty
//     body); Post without its parameter answers 400 code 12.
//   - DELETE Set(guid'…') deletes the object itself (1C sets no deletion mark) and
//     answers 204.
//   - A missing object answers 404 code 9; a set not served, or unpublished, 400
//     code 8; an unknown function of an object 400 code 6.
//   - GET …/$metadata answers a CSDL (Edmx, DataServices, Schema StandardODATA)
//     made from what is served: an EntityType and an EntitySet per set, the
//     tabular part a Collection of a ComplexType <Document>_<Rows>_RowType, the
//     FunctionImports Post and Unpost bound to the order document and Balance to
//     the register. Options.Unpublished leaves sets out of both $metadata and the
//     service; Options.UnpublishedFields leaves fields out, and a write to one is
//     ignored as an unknown field's is.
//   - Errors are {"odata.error":{"code","message":{"lang","value"}}}; Basic
//     authentication.
//
// The stock of goods is the register's virtual table Balance:
//
//	GET …/AccumulationRegister_ТоварыНаСкладах/Balance(Condition='Склад_Key eq guid''…''')
//
// answers {"value":[{"Номенклатура_Key","Склад_Key","ВНаличииBalance"}…]} (a
// resource's total is its name and "Balance"). The function's parameters
// (Condition, Period, Dimensions) go in the path's parentheses, percent-encoded
// or not, the quotes inside doubled or not (as the manual prints its examples),
// or in the query as the manual's SliceLast example has them. The Condition
// names the dimensions; without it, every warehouse. Zero balances are not
// listed. $filter, $orderby, $top, $skip and $select apply to the rows.
//
// Faults (sim.Fault) apply to the operations "find", "read", "create", "patch",
// "post", "unpost", "delete", "stock" and "metadata"; ExternalID narrows one to the
// requests about the order with that marker (a find by it, its create, a request
// of its Ref_Key). A Status answers 1C's error with it (Body instead, when set);
// the kinds of create commit it, then: DropAfterCreate drops the connection
// unanswered, SlowCreate answers after Delay, MangledLocation answers 201 with a
// Location garbled and a body cut short, GatewayAfterCreate answers a proxy's 502
// page.
package odatasim

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/ordersync/ordersync/internal/sim"
)

// maxRequestLine is IIS's default maxQueryString, which bounds what reaches 1C.
const maxRequestLine = 2048

// Options configures the simulator.
type Options struct {
	// Root is the publication's path (default /trade/odata/standard.odata).
	Root string
	// Username and Password are the Basic credentials it accepts; empty accepts any.
	Username, Password string
	// Profile is the configuration served: "ut11" (the default) or "unf".
	Profile string
	// Marker is the order's field that CountMarker counts by and a fault's
	// ExternalID names (default НомерПоДаннымКлиента for ut11, Комментарий for unf).
	Marker string
	// KeepRefKey keeps a client's Ref_Key given on create (some bases do); without
	// it, 1C makes its own and ignores the client's.
	KeepRefKey bool
	// MaxLength cuts string fields of an order silently, by field name
	// (Комментарий: 10, say).
	MaxLength map[string]int
	// Unpublished are sets (and the register) left out of the publication's
	// composition: absent from $metadata, answered as unknown.
	Unpublished []string
	// UnpublishedFields are fields left out, by set; the tabular part's fields are
	// under "<Document>_<Rows>", and the tabular part itself is a field of the
	// document.
	UnpublishedFields map[string][]string
	// Latency is added to every request before it is served (a base across a
	// network, a busy server), to each on its own: concurrent requests wait it
	// out side by side, never one after another.
	Latency time.Duration
	Logger  *slog.Logger
}

// Doc is an object as the simulator holds it: its fields as JSON values.
type Doc map[string]any

// Server is the simulated base.
type Server struct {
	lengths sync.Mutex // guards opts.MaxLength
	opts    Options
	prof    profile
	srv     sim.Server
	// Faults are queued with the operations of the package comment.
	Faults *sim.Faults

	mu       sync.Mutex
	sets     map[string]*entitySet // every set of the profile, published or not
	names    []string              // the sets in $metadata order
	stock    []Doc                 // the register's balances, non-zero
	creates  int                   // create requests that reached 1C
	requests map[string]int        // requests served, by operation (Requests)
	waiting  int                   // requests waiting out Options.Latency
	deletes  int                   // objects deleted
	number   int
}

// New returns a simulator with no orders and no catalog items. It panics on an
// unknown Profile (a mistake in a test).
func New(opts Options) *Server {
	if opts.Root == "" {
		opts.Root = "/trade/odata/standard.odata"
	}
	opts.Root = strings.TrimRight(opts.Root, "/")
	if opts.Profile == "" {
		opts.Profile = "ut11"
	}
	p, ok := profiles[opts.Profile]
	if !ok {
		panic(fmt.Sprintf("odatasim: no profile %q (ut11, unf)", opts.Profile))
	}
	if opts.Marker == "" {
		opts.Marker = p.marker
	}
	s := &Server{opts: opts, prof: p, Faults: sim.NewFaults(checkFault), sets: buildSets(p, opts)}
	s.names = []string{p.document}
	if p.returns != nil {
		s.names = append(s.names, p.returns.document)
	}
	s.names = append(append(s.names, Items), p.catalogs...)
	return s
}

// Start serves on addr (127.0.0.1:0 for any port).
func (s *Server) Start(addr string) error { return s.srv.Start("odata", addr, s, s.opts.Logger) }

// Close stops serving.
func (s *Server) Close() { s.srv.Close() }

// URL is the publication's root, the value of onec.base_url.
func (s *Server) URL() string { return s.srv.URL(s.opts.Root) }

// OrderSet is the order document's entity set: Orders or UNFOrders.
func (s *Server) OrderSet() string { return s.prof.document }

// RowsPart is the order's tabular part of goods: Rows or UNFRows.
func (s *Server) RowsPart() string { return s.prof.rows }

// MarkerField is the order's field CountMarker counts by.
func (s *Server) MarkerField() string { return s.opts.Marker }

// Catalogs are the reference catalogs of the profile, Catalog_Номенклатура aside.
func (s *Server) Catalogs() []string { return slices.Clone(s.prof.catalogs) }

// AddItem adds an item of Catalog_Номенклатура with its article and returns its
// Ref_Key.
func (s *Server) AddItem(article, name string) string {
	return s.add(Items, name, Doc{Article: article})
}

// AddRef adds an element to one of the profile's catalogs (Catalogs, or Items)
// and returns its Ref_Key. It panics on another set (a mistake in a test).
func (s *Server) AddRef(set, description string) string { return s.add(set, description, nil) }

func (s *Server) add(set, description string, extra Doc) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	es := s.sets[set]
	if es == nil || es.document {
		panic(fmt.Sprintf("odatasim: %s is not a catalog of profile %s", set, s.opts.Profile))
	}
	es.codes++
	d := Doc{}
	for _, f := range es.fields {
		d[f.name] = empty(f.edm)
	}
	given := Doc{"Ref_Key": newRef(), "DataVersion": dataVersion(1), "Description": description,
		"Code": fmt.Sprintf("%09d", es.codes)}
	maps.Copy(given, extra)
	for k, v := range given {
		if _, ok := d[k]; ok {
			d[k] = v
		}
	}
	es.docs = append(es.docs, d)
	return d["Ref_Key"].(string)
}

// Orders returns a copy of every order, in creation order.
func (s *Server) Orders() []Doc {
	s.mu.Lock()
	defer s.mu.Unlock()
	docs := s.sets[s.prof.document].docs
	out := make([]Doc, len(docs))
	for i, d := range docs {
		out[i] = clone(d)
	}
	return out
}

// Order returns a copy of the order with Ref_Key ref, and whether there is one.
func (s *Server) Order(ref string) (Doc, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, d := s.sets[s.prof.document].find(ref)
	if d == nil {
		return nil, false
	}
	return clone(d), true
}

// Posted says whether the order with Ref_Key ref is there and posted.
func (s *Server) Posted(ref string) bool {
	d, ok := s.Order(ref)
	return ok && d["Posted"] == true
}

// CountMarker is how many orders hold marker in Options.Marker: exactly once is 1.
func (s *Server) CountMarker(marker string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, d := range s.sets[s.prof.document].docs {
		if d[s.opts.Marker] == marker {
			n++
		}
	}
	return n
}

// OrdersByOrganization counts the orders by the organisation they hold
// (Организация_Key, in both profiles); an order written without one counts
// under "".
func (s *Server) OrdersByOrganization() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for _, d := range s.sets[s.prof.document].docs {
		org, _ := d["Организация_Key"].(string)
		if org == zeroRef {
			org = ""
		}
		out[org]++
	}
	return out
}

// ReturnSet is the customer return document's entity set, "" when the profile
// serves none.
func (s *Server) ReturnSet() string {
	if s.prof.returns == nil {
		return ""
	}
	return s.prof.returns.document
}

// Returns returns a copy of every customer return, in creation order (none when
// the profile serves no returns).
func (s *Server) Returns() []Doc {
	s.mu.Lock()
	defer s.mu.Unlock()
	es := s.sets[s.ReturnSet()]
	if es == nil {
		return nil
	}
	out := make([]Doc, len(es.docs))
	for i, d := range es.docs {
		out[i] = clone(d)
	}
	return out
}

// CountReturns is how many customer returns hold marker in ReturnMarker: exactly
// once is 1.
func (s *Server) CountReturns(marker string) int {
	n := 0
	for _, d := range s.Returns() {
		if d[ReturnMarker] == marker {
			n++
		}
	}
	return n
}

// Creates is how many create requests reached 1C (answered or not).
func (s *Server) Creates() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.creates
}

// Requests counts the requests that reached the simulator, by the operation of
// the package comment ("find" is a listing of the order or return document,
// "list" one of a catalog, "other" a request answered before it was told apart:
// credentials refused, a request line too long, an unknown path, a client gone
// during the latency). Every request counts once, whatever it was answered.
func (s *Server) Requests() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.requests)
}

// Deletes is how many objects a DELETE removed.
func (s *Server) Deletes() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.deletes
}

// clone is a deep copy of d, numbers kept exact.
func clone(d Doc) Doc {
	b, _ := json.Marshal(d)
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var c Doc
	_ = dec.Decode(&c)
	return c
}

func newRef() string { return uuid.NewString() }

// dataVersion is 1C's write counter n as it answers it: 8 bytes in base64.
func dataVersion(n uint64) string {
	return base64.StdEncoding.EncodeToString(binary.BigEndian.AppendUint64(nil, n))
}

// bump counts a write in d's DataVersion.
func bump(d Doc) {
	b, _ := base64.StdEncoding.DecodeString(text(d["DataVersion"]))
	var n uint64
	if len(b) == 8 {
		n = binary.BigEndian.Uint64(b)
	}
	d["DataVersion"] = dataVersion(n + 1)
}

// odataError writes 1C's JSON error.
func odataError(w http.ResponseWriter, status, code int, msg string) {
	w.Header().Set("Content-Type", "application/json;charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"odata.error": map[string]any{
		"code": fmt.Sprint(code), "message": map[string]string{"lang": "ru", "value": msg}}})
}

// iis404 is the web server's page for a request it does not pass to 1C.
func iis404(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/html")
	w.WriteHeader(http.StatusNotFound)
	fmt.Fprint(w, "<!DOCTYPE html>\n<html><head><title>404 - File or directory not found.</title></head>"+
		"<body><h2>404 - File or directory not found.</h2></body></html>")
}

func encodeJSON(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	return b.Bytes()
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json;charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(encodeJSON(v))
}

// request is one request being answered: its query and whether the answer carries
// no metadata.
type request struct {
	w    http.ResponseWriter
	r    *http.Request
	q    map[string]string
	bare bool
	root string
}

func (c *request) fail(e *apiError) { odataError(c.w, e.status, e.code, e.msg) }

// entity writes one object, with its odata.metadata unless bare.
func (c *request) entity(status int, set string, d Doc) {
	writeJSON(c.w, status, c.element(set, d))
}

func (c *request) element(set string, d Doc) Doc {
	if !c.bare {
		d["odata.metadata"] = c.root + "/$metadata#" + set + "/@Element"
	}
	return d
}

// list writes a page of set, with odata.count when counted.
func (c *request) list(set string, page []Doc, n int, counted bool) {
	out := map[string]any{"value": page}
	if !c.bare {
		out["odata.metadata"] = c.root + "/$metadata#" + set
	}
	if counted {
		out["odata.count"] = fmt.Sprint(n)
	}
	writeJSON(c.w, http.StatusOK, out)
}

// ServeHTTP routes a request of the publication.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	op := "other"
	defer func() {
		s.mu.Lock()
		if s.requests == nil {
			s.requests = map[string]int{}
		}
		s.requests[op]++
		s.mu.Unlock()
	}()
	if d := s.opts.Latency; d > 0 && !s.wait(r, d) {
		return
	}
	if len(r.URL.RawQuery)+len(r.URL.EscapedPath()) > maxRequestLine {
		iis404(w)
		return
	}
	if u, p, ok := r.BasicAuth(); s.opts.Username != "" && (!ok || u != s.opts.Username || p != s.opts.Password) {
		w.Header().Set("WWW-Authenticate", `Basic realm="1C"`)
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, s.opts.Root+"/")
	if !ok {
		iis404(w)
		return
	}
	c := &request{w: w, r: r, root: s.URL()}
	q, err := query(r)
	if err != nil {
		c.fail(badOption("%v", err))
		return
	}
	c.q = q
	if e := checkOptions(q); e != nil {
		c.fail(e)
		return
	}
	if rest == "$metadata" {
		op = "metadata"
		s.metadata(c)
		return
	}
	var e *apiError
	if c.bare, e = jsonFormat(q); e != nil {
		c.fail(e)
		return
	}
	set, key, action := splitPath(rest)
	if set == s.prof.register && !slices.Contains(s.opts.Unpublished, set) {
		op = "stock"
		s.balance(c, key, action)
		return
	}
	es := s.sets[set]
	if es == nil || !es.published {
		c.fail(&apiError{http.StatusBadRequest, 8, "Тип сущности не найден: " + set})
		return
	}
	ref, ok := parseKey(key)
	if !ok {
		c.fail(&apiError{http.StatusBadRequest, 6, "Неверный URL: ключ " + key})
		return
	}
	get, post := r.Method == http.MethodGet, r.Method == http.MethodPost
	switch {
	case ref == "" && action == "" && get:
		op = "list"
		if es.document {
			op = "find"
		}
		s.list(c, es)
	case ref == "" && action == "" && post && es.document:
		op = "create"
		s.create(c, es)
	case ref != "" && action == "" && get:
		op = "read"
		s.read(c, es, ref)
	case ref != "" && action == "" && r.Method == http.MethodPatch && es.document:
		op = "patch"
		s.patch(c, es, ref)
	case ref != "" && action == "" && r.Method == http.MethodDelete:
		op = "delete"
		s.delete(c, es, ref)
	case ref != "" && post && es.document && (action == "Post" || action == "Post()"):
		op = "post"
		s.post(c, es, ref, true)
	case ref != "" && post && es.document && (action == "Unpost" || action == "Unpost()"):
		op = "unpost"
		s.post(c, es, ref, false)
	case action != "":
		c.fail(&apiError{http.StatusBadRequest, 6, "Метод не найден: " + action})
	case r.Method == http.MethodPut || post || r.Method == http.MethodPatch:
		// 1C writes catalogs and PUTs objects; the simulator does not.
		c.fail(&apiError{http.StatusBadRequest, 0, "Возможность не поддерживается симулятором: " + r.Method + " " + set})
	default:
		c.fail(&apiError{http.StatusBadRequest, 19, "Использованный HTTP-метод запрещен в данном контексте"})
	}
}

// wait waits out the latency d of the request r, beside any other request's, and
// reports whether r is still wanted.
func (s *Server) wait(r *http.Request, d time.Duration) bool {
	s.mu.Lock()
	s.waiting++
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.waiting--
		s.mu.Unlock()
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		return false
	}
}

// Waiting is how many requests are waiting out Options.Latency now.
func (s *Server) Waiting() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.waiting
}

// splitPath reads Set, Set(key) and Set(key)/Action (the action may hold
// slashes and parentheses of its own).
func splitPath(p string) (set, key, action string) {
	set, action, _ = strings.Cut(p, "/")
	if i := strings.IndexByte(set, '('); i >= 0 && strings.HasSuffix(set, ")") {
		set, key = set[:i], set[i+1:len(set)-1]
	}
	return set, key, action
}

// parseKey reads an object's key, guid'…' or Ref_Key=guid'…' ("" for none).
func parseKey(key string) (string, bool) {
	if key == "" {
		return "", true
	}
	key = strings.TrimPrefix(key, "Ref_Key=")
	inner, ok := strings.CutPrefix(key, "guid'")
	inner, ok2 := strings.CutSuffix(inner, "'")
	return inner, ok && ok2 && isRef(inner)
}

// checkFault refuses what the simulator cannot do with a fault.
func checkFault(f sim.Fault) error {
	switch f.Op {
	case "", "find", "read", "create", "patch", "post", "unpost", "delete", "stock", "metadata":
	default:
		return fmt.Errorf("odatasim: no operation %q (find, read, create, patch, post, unpost, delete, stock, metadata)", f.Op)
	}
	switch {
	case f.ExternalID != "" && (f.Op == "" || f.Op == "stock" || f.Op == "metadata"):
		return fmt.Errorf("odatasim: an external id narrows a fault of an order's operation, not %q", f.Op)
	case f.RetryAfter != 0:
		return fmt.Errorf("odatasim: 1C sends no Retry-After")
	case f.Hold != 0:
		return fmt.Errorf("odatasim: no fault holds")
	case f.Delay != 0 && f.Kind != SlowCreate:
		return fmt.Errorf("odatasim: only %s takes a delay", SlowCreate)
	}
	switch f.Kind {
	case "":
		if f.Status < 400 {
			return fmt.Errorf("odatasim: a fault's status must be an error, got %d", f.Status)
		}
	case DropAfterCreate, SlowCreate, MangledLocation, GatewayAfterCreate:
		if f.Op != "create" {
			return fmt.Errorf("odatasim: %s is a fault of create", f.Kind)
		}
		if f.Status != 0 || f.Body != "" {
			return fmt.Errorf("odatasim: %s answers its own status and body", f.Kind)
		}
	default:
		return fmt.Errorf("odatasim: no fault kind %q", f.Kind)
	}
	return nil
}

func (s *Server) takeFault(op, externalID string) (sim.Fault, bool) {
	return s.Faults.Take(func(f sim.Fault) bool { return f.Matches(op, externalID) })
}

// fault answers the status fault queued for op about externalID, and reports
// whether there was one.
func (s *Server) fault(c *request, op, externalID string) bool {
	f, ok := s.takeFault(op, externalID)
	if ok {
		answerFault(c.w, f)
	}
	return ok
}

func answerFault(w http.ResponseWriter, f sim.Fault) {
	if f.Body == "" {
		odataError(w, f.Status, -1, "Ошибка, внесённая в симулятор")
		return
	}
	if json.Valid([]byte(f.Body)) {
		w.Header().Set("Content-Type", "application/json;charset=utf-8")
	} else {
		w.Header().Set("Content-Type", "text/html;charset=utf-8")
	}
	w.WriteHeader(f.Status)
	fmt.Fprint(w, f.Body)
}

// markerOf is the marker of the object ref of es when it is an order, "" else.
func (s *Server) markerOf(es *entitySet, ref string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, d := es.find(ref); es.document && d != nil {
		return text(d[es.marker])
	}
	return ""
}

func (e *entitySet) shape() shape {
	return shape{fields: e.fields, rows: e.rows, rowFields: e.rowFields}
}

// notFound is 1C's answer for a key that names no object of es.
func notFound(es *entitySet) *apiError {
	_, name, _ := strings.Cut(es.name, "_")
	return &apiError{http.StatusNotFound, 9, fmt.Sprintf("Экземпляр сущности \"%s\" не найден по переданному ключу.", name)}
}

func (s *Server) list(c *request, es *entitySet) {
	sh := es.shape()
	l, e := parseListing(c.q, sh)
	if e != nil {
		c.fail(e)
		return
	}
	marker := ""
	if es.document {
		if i := slices.IndexFunc(l.filter, func(f cond) bool { return f.field == es.marker && f.op == "eq" }); i >= 0 {
			marker = text(l.filter[i].lit.v)
		}
	}
	if s.fault(c, "find", marker) {
		return
	}
	s.mu.Lock()
	page, n := l.apply(es.docs, sh)
	s.mu.Unlock()
	c.list(es.name, page, n, l.count)
}

func (s *Server) read(c *request, es *entitySet, ref string) {
	sh := es.shape()
	sel, e := parseSelect(c.q["$select"], sh)
	if e != nil {
		c.fail(e)
		return
	}
	if s.fault(c, "read", s.markerOf(es, ref)) {
		return
	}
	s.mu.Lock()
	_, d := es.find(ref)
	if d != nil {
		d = clone(d)
	}
	s.mu.Unlock()
	if d == nil {
		c.fail(notFound(es))
		return
	}
	c.entity(http.StatusOK, es.name, sel.project(d, sh))
}

func (s *Server) delete(c *request, es *entitySet, ref string) {
	if s.fault(c, "delete", s.markerOf(es, ref)) {
		return
	}
	s.mu.Lock()
	i, d := es.find(ref)
	if d != nil {
		es.docs = slices.Delete(es.docs, i, i+1)
		s.deletes++
	}
	s.mu.Unlock()
	if d == nil {
		c.fail(notFound(es))
		return
	}
	c.w.WriteHeader(http.StatusNoContent)
}
