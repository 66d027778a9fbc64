package odatasim

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ordersync/ordersync/internal/sim"
)

// The fault kinds of create: each commits the order, then answers otherwise.
const (
	// DropAfterCreate closes the connection unanswered.
	DropAfterCreate sim.Kind = "drop_after_create"
	// SlowCreate answers nothing for Delay, then commits the create and answers:
	// a client with a shorter timeout gave up on an order 1C holds.
	SlowCreate sim.Kind = "slow_create"
	// MangledLocation answers 201 with the Location's UTF-8 bytes read as latin-1
	// and encoded again (mojibake) and the body cut short, not JSON: what a proxy
	// that choked on the raw UTF-8 header passes on.
	MangledLocation sim.Kind = "mangled_location"
	// GatewayAfterCreate answers a proxy's HTML 502 page.
	GatewayAfterCreate sim.Kind = "gateway_after_create"
)

// readBody reads a JSON body, numbers exact; malformed, it answers as 1C does.
func readBody(c *request) (Doc, bool) {
	var body Doc
	dec := json.NewDecoder(c.r.Body)
	dec.UseNumber()
	if err := dec.Decode(&body); err != nil {
		c.fail(&apiError{http.StatusInternalServerError, -1, "Непредвиденный символ при чтении JSON"})
		return nil, false
	}
	return body, true
}

func (s *Server) create(c *request, es *entitySet) {
	body, ok := readBody(c)
	if !ok {
		return
	}
	marker, _ := body[es.marker].(string)
	f, faulted := s.takeFault("create", marker)
	if faulted && f.Kind == "" {
		answerFault(c.w, f)
		return
	}
	d, e := s.document(es, body)
	if e != nil {
		c.fail(e)
		return
	}
	if f.Kind == SlowCreate {
		// 1C is slow; a client that gives up meanwhile does not stop it committing.
		time.Sleep(f.Delay)
	}
	s.mu.Lock()
	s.creates++
	if requested, _ := body["Ref_Key"].(string); s.opts.KeepRefKey && requested != "" {
		if _, dup := es.find(requested); dup != nil {
			s.mu.Unlock()
			c.fail(&apiError{http.StatusBadRequest, 15, "Сущность с таким ключом уже существует"})
			return
		}
		d["Ref_Key"] = requested
	}
	s.number++
	d["Number"] = fmt.Sprintf("%s%06d", es.prefix, s.number)
	es.docs = append(es.docs, d)
	out := clone(d)
	s.mu.Unlock()

	// The URL as 1C writes it: raw UTF-8, not percent-encoded.
	location := s.URL() + "/" + es.name + "(guid'" + out["Ref_Key"].(string) + "')"
	switch f.Kind {
	case DropAfterCreate:
		if hj, ok := c.w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				conn.Close()
				return
			}
		}
		panic(http.ErrAbortHandler)
	case GatewayAfterCreate:
		c.w.Header().Set("Content-Type", "text/html")
		c.w.WriteHeader(http.StatusBadGateway)
		fmt.Fprint(c.w, "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n"+
			"<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n")
	case MangledLocation:
		c.w.Header()["Location"] = []string{Latin1Mojibake(location)}
		c.w.Header().Set("Content-Type", "application/json;charset=utf-8")
		c.w.WriteHeader(http.StatusCreated)
		b := encodeJSON(c.element(es.name, out))
		_, _ = c.w.Write(b[:len(b)/2])
	default:
		c.w.Header()["Location"] = []string{location}
		c.entity(http.StatusCreated, es.name, out)
	}
}

// Latin1Mojibake is s's UTF-8 bytes each read as a latin-1 character and encoded
// in UTF-8 again: a Cyrillic URL as a proxy that took it for latin-1 passes it.
func Latin1Mojibake(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		b.WriteRune(rune(s[i]))
	}
	return b.String()
}

// document builds the order a create's body describes, or says why 1C refuses
// it. Every field is there, empty where the body does not write it.
func (s *Server) document(es *entitySet, body Doc) (Doc, *apiError) {
	d := Doc{}
	for _, f := range es.fields {
		d[f.name] = empty(f.edm)
	}
	d["Ref_Key"], d["DataVersion"] = newRef(), dataVersion(1)
	if es.rows != "" {
		d[es.rows] = []any{}
	}
	if requested, ok := body["Ref_Key"]; ok && requested != "" && s.opts.KeepRefKey {
		if str, _ := requested.(string); !isRef(str) {
			return nil, unparsable(requested)
		}
	}
	if e := s.write(es, d, body); e != nil {
		return nil, e
	}
	return d, nil
}

// write sets on d what body writes, all or nothing: the writable fields of the
// header (others ignored, as 1C ignores an unknown field) and the tabular part,
// replaced whole.
func (s *Server) write(es *entitySet, d, body Doc) *apiError {
	staged := Doc{}
	for _, f := range es.fields {
		v, ok := body[f.name]
		if !ok || !writable(f.name) {
			continue
		}
		val, e := s.value(f, v)
		if e != nil {
			return e
		}
		staged[f.name] = val
	}
	if raw, ok := body[es.rows]; ok && es.rows != "" {
		rows, e := s.rows(es, raw)
		if e != nil {
			return e
		}
		staged[es.rows] = rows
	}
	maps.Copy(d, staged)
	return nil
}

// rows reads a tabular part: every row needs its LineNumber, from 1 and
// contiguous.
func (s *Server) rows(es *entitySet, raw any) ([]any, *apiError) {
	list, _ := raw.([]any)
	kept := []any{}
	for i, r := range list {
		row, _ := r.(map[string]any)
		ln, ok := row["LineNumber"]
		if !ok {
			return nil, &apiError{http.StatusInternalServerError, -1, "Внутренняя ошибка OData сервиса"}
		}
		n, err := strconv.Atoi(fmt.Sprint(ln))
		if err != nil || n != i+1 {
			return nil, &apiError{http.StatusBadRequest, 4, fmt.Sprintf("Неверное значение свойства LineNumber: %v", ln)}
		}
		d := Doc{"LineNumber": strconv.Itoa(n)}
		for _, f := range es.rowFields {
			d[f.name] = empty(f.edm)
			if v, ok := row[f.name]; ok {
				val, e := s.value(f, v)
				if e != nil {
					return nil, e
				}
				d[f.name] = val
			}
		}
		kept = append(kept, d)
	}
	return kept, nil
}

func unparsable(v any) *apiError {
	return &apiError{http.StatusBadRequest, 1, fmt.Sprintf("Не удалось разобрать строку '%v'", v)}
}

// zone is what may follow a date's seconds: fractions and a zone, both dropped.
var zone = regexp.MustCompile(`^(\.[0-9]+)?(Z|[+-][0-9]{2}:[0-9]{2})?$`)

// value is v as field f holds it, or 1C's refusal of it.
func (s *Server) value(f field, v any) (any, *apiError) {
	if v == nil {
		return empty(f.edm), nil
	}
	str, isString := v.(string)
	switch f.edm {
	case edmGuid:
		if isString && isRef(str) {
			return str, nil // a reference to no object is kept as written
		}
		return nil, unparsable(v)
	case edmBoolean:
		if b, ok := v.(bool); ok {
			return b, nil
		}
		return nil, unparsable(v)
	case edmDateTime:
		if len(str) >= len(dateLayout) && zone.MatchString(str[len(dateLayout):]) {
			if _, err := time.Parse(dateLayout, str[:len(dateLayout)]); err == nil {
				return str[:len(dateLayout)], nil
			}
		}
		return nil, unparsable(v)
	case edmDouble, edmInt64:
		if n, ok := v.(json.Number); ok {
			return n, nil
		}
		return empty(f.edm), nil // a string in a number field leaves it 0, silently
	}
	if isString {
		return s.cut(f.name, str), nil
	}
	return empty(f.edm), nil
}

// SetMaxLength changes a string field's length (0: unlimited), as an
// administrator widening it in the configurator; what is stored stays as it is.
func (s *Server) SetMaxLength(field string, n int) {
	s.lengths.Lock()
	defer s.lengths.Unlock()
	m := maps.Clone(s.opts.MaxLength)
	if m == nil {
		m = map[string]int{}
	}
	m[field] = n
	s.opts.MaxLength = m
}

// cut truncates a string field to its MaxLength, silently.
func (s *Server) cut(field, str string) string {
	s.lengths.Lock()
	max := s.opts.MaxLength[field]
	s.lengths.Unlock()
	if max <= 0 || utf8.RuneCountInString(str) <= max {
		return str
	}
	return string([]rune(str)[:max])
}

func (s *Server) patch(c *request, es *entitySet, ref string) {
	body, ok := readBody(c)
	if !ok {
		return
	}
	if s.fault(c, "patch", s.markerOf(es, ref)) {
		return
	}
	s.mu.Lock()
	_, d := es.find(ref)
	var e *apiError
	if d == nil {
		e = notFound(es)
	} else if e = s.write(es, d, body); e == nil {
		bump(d)
		d = clone(d)
	}
	s.mu.Unlock()
	if e != nil {
		c.fail(e)
		return
	}
	c.entity(http.StatusOK, es.name, d)
}

// post posts (or unposts) the order ref.
func (s *Server) post(c *request, es *entitySet, ref string, post bool) {
	if c.r.Header.Get("Content-Length") == "" { // IIS wants the empty body said
		c.w.WriteHeader(http.StatusLengthRequired)
		return
	}
	op := "unpost"
	if post {
		op = "post"
	}
	if s.fault(c, op, s.markerOf(es, ref)) {
		return
	}
	if post {
		switch mode := c.q["PostingModeOperational"]; mode {
		case "true", "false":
		case "":
			c.fail(&apiError{http.StatusBadRequest, 12, "Отсутствует обязательный аргумент метода PostingModeOperational"})
			return
		default:
			c.fail(unparsable(mode))
			return
		}
	}
	s.mu.Lock()
	_, d := es.find(ref)
	if d != nil {
		d["Posted"] = post
		bump(d)
	}
	s.mu.Unlock()
	if d == nil {
		c.fail(notFound(es))
		return
	}
	c.w.WriteHeader(http.StatusOK)
}
