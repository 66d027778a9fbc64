// Package odatasim is a 1C:Enterprise base publishing the standard OData interface
// (…/odata/standard.odata), as 1C's documentation and public reports of real УТ 11
// bases describe it, for the customer orders (Document_ЗаказКлиента, tabular part
// Товары) and the items they name (Catalog_Номенклатура):
//
//   - a create (POST) answers 201 with the whole object and a Location header whose
//     URL is raw UTF-8; every row needs a LineNumber (none: 500), from 1 and
//     contiguous (else 400); unknown fields are ignored; strings longer than their
//     field are cut (Options.MaxLength) and a reference to a missing object is kept
//     as it is, all with 201 — the silent failures a client must read back;
//   - a client's Ref_Key is kept or ignored (Options.KeepRefKey); kept, a second
//     create with it answers 400 code 15;
//   - $filter takes `<field> eq '<literal>'` (quotes doubled), joined by `and`;
//     a '+' in the query is a plus, never a space; a request line over 2,048
//     bytes answers the web server's HTML 404 page;
//   - Post (POST …(guid'…')/Post) needs Content-Length: 0 (411 without);
//   - errors are {"odata.error":{"code","message":{"lang","value"}}};
//   - Basic authentication.
//
// Faults (sim.Fault) apply to the operations "find", "read", "create", "post" and
// "patch": a Status answers 1C's error with it; DropAfterCreate commits a create and
// drops the connection before answering; SlowCreate commits it after Delay.
package odatasim

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/ordersync/ordersync/internal/sim"
)

// The entity sets and fields the simulator serves (УТ 11's names).
const (
	Orders  = "Document_ЗаказКлиента"
	Items   = "Catalog_Номенклатура"
	Rows    = "Товары"
	Marker  = "НомерПоДаннымКлиента"
	Article = "Артикул"
)

// The fault kinds of the OData simulator.
const (
	// DropAfterCreate commits the create, then closes the connection unanswered.
	DropAfterCreate sim.Kind = "drop_after_create"
	// SlowCreate answers nothing for Delay, then commits the create and answers:
	// a client with a shorter timeout gave up on an order 1C holds.
	SlowCreate sim.Kind = "slow_create"
)

// maxRequestLine is IIS's default maxQueryString, which bounds what reaches 1C.
const maxRequestLine = 2048

// Options configures the simulator.
type Options struct {
	// Root is the publication's path (default /trade/odata/standard.odata).
	Root string
	// Username and Password are the Basic credentials it accepts; empty accepts any.
	Username, Password string
	// KeepRefKey keeps a client's Ref_Key given on create (some bases do); without
	// it, 1C makes its own and ignores the client's.
	KeepRefKey bool
	// MaxLength cuts string fields of a created order to this many characters
	// silently, by field name (Комментарий: 10, say).
	MaxLength map[string]int
	Logger    *slog.Logger
}

// Doc is an object as the simulator holds it: its fields as JSON values.
type Doc map[string]any

// Server is the simulated base.
type Server struct {
	opts Options
	srv  sim.Server
	// Faults are queued with Op "find", "read", "create", "post" or "patch".
	Faults *sim.Faults

	mu      sync.Mutex
	orders  []Doc // in creation order
	items   []Doc
	creates int // create requests that reached 1C
	number  int
}

// New returns a simulator with no orders and no items.
func New(opts Options) *Server {
	if opts.Root == "" {
		opts.Root = "/trade/odata/standard.odata"
	}
	opts.Root = strings.TrimRight(opts.Root, "/")
	return &Server{opts: opts, Faults: sim.NewFaults(checkFault)}
}

func checkFault(f sim.Fault) error {
	switch f.Op {
	case "", "find", "read", "create", "post", "patch":
	default:
		return fmt.Errorf("odatasim: no operation %q (find, read, create, post, patch)", f.Op)
	}
	switch f.Kind {
	case "":
		if f.Status < 400 {
			return fmt.Errorf("odatasim: a fault's status must be an error, got %d", f.Status)
		}
	case DropAfterCreate, SlowCreate:
		if f.Op != "create" {
			return fmt.Errorf("odatasim: %s is a fault of create", f.Kind)
		}
	default:
		return fmt.Errorf("odatasim: no fault kind %q", f.Kind)
	}
	return nil
}

// Start serves on addr (127.0.0.1:0 for any port).
func (s *Server) Start(addr string) error { return s.srv.Start("odata", addr, s, s.opts.Logger) }

// Close stops serving.
func (s *Server) Close() { s.srv.Close() }

// URL is the publication's root, the value of onec.base_url.
func (s *Server) URL() string { return s.srv.URL(s.opts.Root) }

// AddItem adds an item of the catalog with its article and returns its Ref_Key.
func (s *Server) AddItem(article, name string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	ref := newRef()
	s.items = append(s.items, Doc{"Ref_Key": ref, "Description": name, Article: article, "DeletionMark": false})
	return ref
}

// Orders returns a copy of every order, in creation order.
func (s *Server) Orders() []Doc {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Doc, len(s.orders))
	for i, d := range s.orders {
		out[i] = clone(d)
	}
	return out
}

// CountMarker is how many orders hold marker: exactly once is 1.
func (s *Server) CountMarker(marker string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, d := range s.orders {
		if d[Marker] == marker {
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

func clone(d Doc) Doc {
	b, _ := json.Marshal(d)
	var c Doc
	_ = json.Unmarshal(b, &c)
	return c
}

func newRef() string { return uuid.NewString() }

// odataError writes 1C's JSON error.
func odataError(w http.ResponseWriter, status, code int, msg string) {
	w.Header().Set("Content-Type", "application/json;charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"odata.error": map[string]any{
		"code": strconv.Itoa(code), "message": map[string]string{"lang": "ru", "value": msg}}})
}

// iis404 is the web server's page for a request it does not pass to 1C.
func iis404(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/html")
	w.WriteHeader(http.StatusNotFound)
	fmt.Fprint(w, "<!DOCTYPE html>\n<html><head><title>404 - File or directory not found.</title></head>"+
		"<body><h2>404 - File or directory not found.</h2></body></html>")
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json;charset=utf-8")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// ServeHTTP routes a request of the publication.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
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
	set, key, action := splitPath(rest)
	switch {
	case set == Items && key == "" && r.Method == http.MethodGet:
		s.list(w, r, "find", &s.items)
	case set == Orders && key == "" && r.Method == http.MethodGet:
		s.list(w, r, "find", &s.orders)
	case set == Orders && key == "" && r.Method == http.MethodPost:
		s.create(w, r)
	case set == Orders && key != "" && action == "" && r.Method == http.MethodGet:
		s.read(w, key)
	case set == Orders && key != "" && action == "" && r.Method == http.MethodPatch:
		s.patch(w, r, key)
	case set == Orders && key != "" && action == "Post" && r.Method == http.MethodPost:
		s.post(w, r, key)
	case set == Orders || set == Items:
		odataError(w, http.StatusBadRequest, 19, "Использованный HTTP-метод запрещен в данном контексте")
	default:
		odataError(w, http.StatusBadRequest, 8, "Тип сущности не найден: "+set)
	}
}

// splitPath reads Set, Set(guid'…') and Set(guid'…')/Action.
func splitPath(p string) (set, key, action string) {
	set, action, _ = strings.Cut(p, "/")
	if i := strings.IndexByte(set, '('); i >= 0 && strings.HasSuffix(set, ")") {
		set, key = set[:i], set[i+1:len(set)-1]
		key = strings.TrimSuffix(strings.TrimPrefix(key, "guid'"), "'")
	}
	return set, key, action
}

// fault takes the fault queued for op, answering it, and reports whether one was.
func (s *Server) fault(w http.ResponseWriter, op string) (sim.Fault, bool) {
	f, ok := s.Faults.Take(func(f sim.Fault) bool { return f.Matches(op, "") })
	if ok && f.Kind == "" {
		if f.Body != "" {
			w.WriteHeader(f.Status)
			fmt.Fprint(w, f.Body)
		} else {
			odataError(w, f.Status, -1, "Ошибка, внесённая в симулятор")
		}
	}
	return f, ok
}

// query reads the raw query as 1C does: '+' is a plus, %20 a space.
func query(r *http.Request) (map[string]string, error) {
	out := map[string]string{}
	for _, part := range strings.Split(r.URL.RawQuery, "&") {
		if part == "" {
			continue
		}
		k, v, _ := strings.Cut(part, "=")
		dk, err := url.PathUnescape(k)
		if err != nil {
			return nil, err
		}
		dv, err := url.PathUnescape(v)
		if err != nil {
			return nil, err
		}
		out[dk] = dv
	}
	return out, nil
}

// condition is one `field eq 'literal'` (or `eq true|false`) of a $filter.
type condition struct {
	field string
	value any
}

// parseFilter reads conditions joined by `and`.
func parseFilter(f string) ([]condition, error) {
	var out []condition
	for rest := strings.TrimSpace(f); rest != ""; {
		field, after, ok := strings.Cut(rest, " eq ")
		if !ok || strings.ContainsAny(field, " ()'") {
			return nil, fmt.Errorf("ожидалось сравнение eq: %q", rest)
		}
		after = strings.TrimLeft(after, " ")
		var value any
		switch {
		case strings.HasPrefix(after, "'"):
			var b strings.Builder
			i := 1
			for ; i < len(after); i++ {
				if after[i] == '\'' {
					if i+1 < len(after) && after[i+1] == '\'' {
						b.WriteByte('\'')
						i++
						continue
					}
					break
				}
				b.WriteByte(after[i])
			}
			if i >= len(after) {
				return nil, fmt.Errorf("незакрытая строка: %q", after)
			}
			value, after = b.String(), after[i+1:]
		case strings.HasPrefix(after, "true"):
			value, after = true, after[4:]
		case strings.HasPrefix(after, "false"):
			value, after = false, after[5:]
		default:
			return nil, fmt.Errorf("неизвестное значение: %q", after)
		}
		out = append(out, condition{field: field, value: value})
		after = strings.TrimSpace(after)
		if after == "" {
			break
		}
		next, ok := strings.CutPrefix(after, "and ")
		if !ok {
			return nil, fmt.Errorf("ожидалось and: %q", after)
		}
		rest = strings.TrimSpace(next)
	}
	return out, nil
}

func (s *Server) list(w http.ResponseWriter, r *http.Request, op string, from *[]Doc) {
	if _, ok := s.fault(w, op); ok {
		return
	}
	q, err := query(r)
	if err != nil {
		odataError(w, http.StatusBadRequest, 14, "Ошибка разбора опций запроса: "+err.Error())
		return
	}
	conds, err := parseFilter(q["$filter"])
	if err != nil {
		odataError(w, http.StatusBadRequest, 14, "Ошибка разбора опций запроса: "+err.Error())
		return
	}
	s.mu.Lock()
	var value []Doc
	for _, d := range *from {
		if slices.IndexFunc(conds, func(c condition) bool { return d[c.field] != c.value }) < 0 {
			value = append(value, clone(d))
		}
	}
	s.mu.Unlock()
	if v, err := strconv.Atoi(q["$skip"]); err == nil {
		value = value[min(v, len(value)):]
	}
	if v, err := strconv.Atoi(q["$top"]); err == nil && v < len(value) {
		value = value[:v]
	}
	if value == nil {
		value = []Doc{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"odata.metadata": s.URL() + "/$metadata#" + pathSet(r), "value": value})
}

func pathSet(r *http.Request) string {
	set, _, _ := splitPath(r.URL.Path[strings.LastIndexByte(r.URL.Path, '/')+1:])
	return set
}

func (s *Server) find(ref string) Doc {
	for _, d := range s.orders {
		if d["Ref_Key"] == ref {
			return d
		}
	}
	return nil
}

func (s *Server) read(w http.ResponseWriter, ref string) {
	if _, ok := s.fault(w, "read"); ok {
		return
	}
	s.mu.Lock()
	d := s.find(ref)
	if d != nil {
		d = clone(d)
	}
	s.mu.Unlock()
	if d == nil {
		odataError(w, http.StatusNotFound, 9, "Экземпляр сущности \"ЗаказКлиента\" не найден по переданному ключу.")
		return
	}
	writeJSON(w, http.StatusOK, d)
}

// header fields the simulated document has; others are ignored, as 1C does.
var headerFields = map[string]bool{"Date": true, Marker: true, "Комментарий": true, "СуммаДокумента": true,
	"Организация_Key": true, "Партнер_Key": true, "Контрагент_Key": true, "Соглашение_Key": true,
	"Валюта_Key": true, "Склад_Key": true, "ХозяйственнаяОперация": true, "Статус": true}

var rowFields = map[string]bool{"Номенклатура_Key": true, "Количество": true, "Цена": true, "Сумма": true,
	"Склад_Key": true, "Отменено": true, "ПричинаОтмены_Key": true}

func (s *Server) create(w http.ResponseWriter, r *http.Request) {
	f, faulted := s.fault(w, "create")
	if faulted && f.Kind == "" {
		return
	}
	body, ok := readBody(w, r)
	if !ok {
		return
	}
	d, status, code, msg := s.document(body)
	if status != 0 {
		odataError(w, status, code, msg)
		return
	}
	if f.Kind == SlowCreate {
		// 1C is slow; a client that gives up meanwhile does not stop it committing.
		time.Sleep(f.Delay)
	}
	s.mu.Lock()
	s.creates++
	if requested, _ := body["Ref_Key"].(string); s.opts.KeepRefKey && requested != "" {
		if s.find(requested) != nil {
			s.mu.Unlock()
			odataError(w, http.StatusBadRequest, 15, "Сущность с таким ключом уже существует")
			return
		}
		d["Ref_Key"] = requested
	}
	s.number++
	d["Number"] = fmt.Sprintf("КА-%06d", s.number)
	s.orders = append(s.orders, d)
	out := clone(d)
	s.mu.Unlock()
	if f.Kind == DropAfterCreate {
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				conn.Close()
				return
			}
		}
		panic(http.ErrAbortHandler)
	}
	// The URL as 1C writes it: raw UTF-8, not percent-encoded.
	w.Header()["Location"] = []string{s.URL() + "/" + Orders + "(guid'" + out["Ref_Key"].(string) + "')"}
	writeJSON(w, http.StatusCreated, out)
}

// readBody reads a JSON body, numbers exact; malformed, it answers as 1C does.
func readBody(w http.ResponseWriter, r *http.Request) (Doc, bool) {
	var body Doc
	dec := json.NewDecoder(r.Body)
	dec.UseNumber()
	if err := dec.Decode(&body); err != nil {
		odataError(w, http.StatusInternalServerError, -1, "Непредвиденный символ при чтении JSON")
		return nil, false
	}
	return body, true
}

// document builds the stored order from a create's body, or says why 1C refuses
// it (status, code, message).
func (s *Server) document(body Doc) (Doc, int, int, string) {
	d := Doc{"Ref_Key": newRef(), "DataVersion": "AAAAAAAAAAE=", "Posted": false, "DeletionMark": false,
		"Date": "0001-01-01T00:00:00", Marker: "", "СуммаДокумента": json.Number("0")}
	for k, v := range body {
		if headerFields[k] {
			d[k] = s.cut(k, v)
		}
	}
	rows, _ := body[Rows].([]any)
	var kept []any
	for i, raw := range rows {
		row, _ := raw.(map[string]any)
		ln, ok := row["LineNumber"]
		if !ok {
			return nil, http.StatusInternalServerError, -1, "Внутренняя ошибка OData сервиса"
		}
		n, err := strconv.Atoi(fmt.Sprint(ln))
		if err != nil || n != i+1 {
			return nil, http.StatusBadRequest, 4, fmt.Sprintf("Неверное значение свойства LineNumber: %v", ln)
		}
		r := Doc{"LineNumber": strconv.Itoa(n)}
		for k, v := range row {
			if rowFields[k] {
				r[k] = v
			}
		}
		kept = append(kept, r)
	}
	if kept == nil {
		kept = []any{}
	}
	d[Rows] = kept
	return d, 0, 0, ""
}

// cut truncates a string field to its MaxLength, silently.
func (s *Server) cut(field string, v any) any {
	str, ok := v.(string)
	max := s.opts.MaxLength[field]
	if !ok || max <= 0 || utf8.RuneCountInString(str) <= max {
		return v
	}
	return string([]rune(str)[:max])
}

func (s *Server) patch(w http.ResponseWriter, r *http.Request, ref string) {
	if _, ok := s.fault(w, "patch"); ok {
		return
	}
	body, ok := readBody(w, r)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.find(ref)
	if d == nil {
		odataError(w, http.StatusNotFound, 9, "Экземпляр сущности не найден по переданному ключу.")
		return
	}
	if _, ok := body[Rows]; ok {
		// A tabular part is replaced whole.
		nd, status, code, msg := s.document(Doc{Rows: body[Rows]})
		if status != 0 {
			odataError(w, status, code, msg)
			return
		}
		d[Rows] = nd[Rows]
	}
	for k, v := range body {
		if headerFields[k] {
			d[k] = s.cut(k, v)
		}
	}
	writeJSON(w, http.StatusOK, clone(d))
}

func (s *Server) post(w http.ResponseWriter, r *http.Request, ref string) {
	if r.Header.Get("Content-Length") != "0" { // IIS wants the empty body said
		w.WriteHeader(http.StatusLengthRequired)
		return
	}
	if _, ok := s.fault(w, "post"); ok {
		return
	}
	q, _ := query(r)
	if q["PostingModeOperational"] == "" {
		odataError(w, http.StatusBadRequest, 12, "Отсутствует обязательный аргумент метода PostingModeOperational")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.find(ref)
	if d == nil {
		odataError(w, http.StatusNotFound, 9, "Экземпляр сущности не найден по переданному ключу.")
		return
	}
	d["Posted"] = true
	w.WriteHeader(http.StatusOK)
}
