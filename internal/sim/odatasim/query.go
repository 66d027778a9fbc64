package odatasim

import (
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"
)

// apiError is 1C's refusal of a request: the HTTP status, 1C's own code (1C
// manual §17.4.10) and the message.
type apiError struct {
	status, code int
	msg          string
}

func badOption(format string, args ...any) *apiError {
	return &apiError{http.StatusBadRequest, 14, "Ошибка разбора опций запроса: " + fmt.Sprintf(format, args...)}
}

// query reads the raw query as 1C does: '+' is a plus, %20 a space.
func query(r *http.Request) (map[string]string, error) {
	out := map[string]string{}
	for part := range strings.SplitSeq(r.URL.RawQuery, "&") {
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

// knownOptions are the $-options the simulator reads; another answers that the
// feature is not supported (code 0), so that a test does not take an ignored
// option for an honoured one.
var knownOptions = map[string]bool{"$format": true, "$filter": true, "$select": true, "$orderby": true,
	"$top": true, "$skip": true, "$inlinecount": true, "$allowedOnly": true}

func checkOptions(q map[string]string) *apiError {
	for k := range q {
		if strings.HasPrefix(k, "$") && !knownOptions[k] {
			return &apiError{http.StatusBadRequest, 0, "Возможность не поддерживается симулятором: " + k}
		}
	}
	return nil
}

// jsonFormat reads $format: the simulator speaks JSON only, with the minimal
// metadata (the default) or none (bare). Without $format a base answers Atom XML;
// the simulator answers JSON all the same.
func jsonFormat(q map[string]string) (bare bool, err *apiError) {
	f, ok := q["$format"]
	if !ok {
		return false, nil
	}
	switch strings.ToLower(strings.ReplaceAll(f, " ", "")) {
	case "json", "application/json", "application/json;odata=minimalmetadata", "application/json;odata=fullmetadata":
		return false, nil
	case "application/json;odata=nometadata":
		return true, nil
	}
	return false, &apiError{http.StatusBadRequest, 3,
		"Запрошенный тип представления не поддерживается: " + f + " (симулятор отвечает только JSON)"}
}

// shape is what a listing can name: header fields and a tabular part.
type shape struct {
	fields    []field
	rows      string
	rowFields []field
}

func (s shape) typeOf(name string) string { return typeIn(s.fields, name) }

// literal is a value written in a $filter: its OData type and its value (a
// string, a bool or a json.Number).
type literal struct {
	edm string
	v   any
}

// lexer reads a $filter or a function's parameters.
type lexer struct {
	s string
	i int
}

func (l *lexer) done() bool { return l.i >= len(l.s) }
func (l *lexer) space() {
	for l.i < len(l.s) && l.s[l.i] == ' ' {
		l.i++
	}
}
func (l *lexer) eat(p string) bool {
	if strings.HasPrefix(l.s[l.i:], p) {
		l.i += len(p)
		return true
	}
	return false
}

// word reads a name: letters, digits and underscores.
func (l *lexer) word() string {
	start := l.i
	for l.i < len(l.s) {
		r, n := utf8.DecodeRuneInString(l.s[l.i:])
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '_' {
			break
		}
		l.i += n
	}
	return l.s[start:l.i]
}

// keyword reads w followed by a space.
func (l *lexer) keyword(w string) bool {
	if strings.HasPrefix(l.s[l.i:], w+" ") {
		l.i += len(w) + 1
		return true
	}
	return false
}

// quoted reads a string in single quotes, a quote inside doubled.
func (l *lexer) quoted() (string, error) {
	if !l.eat("'") {
		return "", fmt.Errorf("ожидалась строка в кавычках: %q", l.s[l.i:])
	}
	var b strings.Builder
	for l.i < len(l.s) {
		c := l.s[l.i]
		l.i++
		if c != '\'' {
			b.WriteByte(c)
			continue
		}
		if l.eat("'") {
			b.WriteByte('\'')
			continue
		}
		return b.String(), nil
	}
	return "", fmt.Errorf("незакрытая строка: %q", l.s)
}

var number = regexp.MustCompile(`^-?[0-9]+(\.[0-9]+)?`)

// dateLayout is 1C's datetime'…' and its dates in JSON: no zone.
const dateLayout = "2006-01-02T15:04:05"

func (l *lexer) literal() (literal, error) {
	rest := l.s[l.i:]
	switch {
	case strings.HasPrefix(rest, "'"):
		s, err := l.quoted()
		return literal{edmString, s}, err
	case strings.HasPrefix(rest, "guid'"):
		l.i += len("guid")
		s, err := l.quoted()
		if err == nil && !isRef(s) {
			err = fmt.Errorf("неверный идентификатор guid'%s'", s)
		}
		return literal{edmGuid, s}, err
	case strings.HasPrefix(rest, "datetime'"):
		l.i += len("datetime")
		s, err := l.quoted()
		if _, perr := time.Parse(dateLayout, s); err == nil && perr != nil {
			err = fmt.Errorf("неверная дата datetime'%s'", s)
		}
		return literal{edmDateTime, s}, err
	}
	if m := number.FindString(rest); m != "" {
		l.i += len(m)
		return literal{edmDouble, json.Number(m)}, nil
	}
	switch w := l.word(); w {
	case "true", "false":
		return literal{edmBoolean, w == "true"}, nil
	}
	return literal{}, fmt.Errorf("неизвестное значение: %q", rest)
}

// isRef says whether s is a GUID as 1C writes one.
func isRef(s string) bool {
	_, err := uuid.Parse(s)
	return err == nil && len(s) == 36
}

// cond is one condition of a $filter: a comparison of a field with a literal, or
// substringof(literal, field) (eq true unless want is false).
type cond struct {
	field, edm, op string
	lit            literal
	want           bool
}

var comparisons = map[string]func(int) bool{
	"eq": func(n int) bool { return n == 0 }, "ne": func(n int) bool { return n != 0 },
	"gt": func(n int) bool { return n > 0 }, "ge": func(n int) bool { return n >= 0 },
	"lt": func(n int) bool { return n < 0 }, "le": func(n int) bool { return n <= 0 },
}

func (c cond) match(d Doc) bool {
	if c.op == "substringof" {
		s, _ := d[c.field].(string)
		return strings.Contains(strings.ToLower(s), strings.ToLower(c.lit.v.(string))) == c.want
	}
	return comparisons[c.op](compare(c.edm, d[c.field], c.lit.v))
}

// sameType says whether a literal of type lit can be compared with a field of
// type edm.
func sameType(edm, lit string) bool {
	return edm == lit || edm == edmInt64 && lit == edmDouble
}

// parseFilter reads conditions joined by `and`, on the fields typeOf knows.
func parseFilter(f string, typeOf func(string) string) ([]cond, *apiError) {
	l := &lexer{s: strings.TrimSpace(f)}
	var out []cond
	for !l.done() {
		c, err := l.condition(typeOf)
		if err != nil {
			return nil, badOption("$filter: %v", err)
		}
		out = append(out, c)
		l.space()
		if l.done() {
			break
		}
		if !l.keyword("and") {
			return nil, badOption("$filter: ожидалось and: %q", l.s[l.i:])
		}
		l.space()
	}
	return out, nil
}

func (l *lexer) condition(typeOf func(string) string) (cond, error) {
	if l.eat("substringof(") {
		l.space()
		lit, err := l.literal()
		if err != nil || lit.edm != edmString {
			return cond{}, fmt.Errorf("substringof ждёт строку первым аргументом: %v", err)
		}
		l.space()
		if !l.eat(",") {
			return cond{}, fmt.Errorf("ожидалась запятая: %q", l.s[l.i:])
		}
		l.space()
		name := l.word()
		if typeOf(name) != edmString {
			return cond{}, fmt.Errorf("substringof: %q не строковое свойство", name)
		}
		l.space()
		if !l.eat(")") {
			return cond{}, fmt.Errorf("ожидалась скобка: %q", l.s[l.i:])
		}
		c := cond{field: name, edm: edmString, op: "substringof", lit: lit, want: true}
		save := l.i
		l.space()
		if !l.keyword("eq") {
			l.i = save
			return c, nil
		}
		l.space()
		b, err := l.literal()
		if err != nil || b.edm != edmBoolean {
			return cond{}, fmt.Errorf("substringof сравнивается с true или false")
		}
		c.want = b.v.(bool)
		return c, nil
	}
	name := l.word()
	edm := typeOf(name)
	if edm == "" {
		return cond{}, fmt.Errorf("свойство не найдено или не поддерживается: %q", name+l.s[l.i:])
	}
	l.space()
	op := l.word()
	if comparisons[op] == nil {
		return cond{}, fmt.Errorf("операция не поддерживается: %q", op+l.s[l.i:])
	}
	l.space()
	lit, err := l.literal()
	if err != nil {
		return cond{}, err
	}
	if !sameType(edm, lit.edm) {
		return cond{}, fmt.Errorf("%s типа %s сравнивается со значением типа %s", name, edm, lit.edm)
	}
	return cond{field: name, edm: edm, op: op, lit: lit}, nil
}

// compare orders two values of a field of type edm: numbers by value, booleans
// false first, GUIDs as text ignoring case, strings and dates as text.
func compare(edm string, a, b any) int {
	switch edm {
	case edmDouble, edmInt64:
		return toRat(a).Cmp(toRat(b))
	case edmBoolean:
		x, y := a == true, b == true
		switch {
		case x == y:
			return 0
		case y:
			return -1
		}
		return 1
	case edmGuid:
		return strings.Compare(strings.ToLower(text(a)), strings.ToLower(text(b)))
	}
	return strings.Compare(text(a), text(b))
}

func text(v any) string {
	s, _ := v.(string)
	return s
}

// toRat is a number held as json.Number, a string or a float64, exactly; 0 when
// it is none.
func toRat(v any) *big.Rat {
	var s string
	switch x := v.(type) {
	case json.Number:
		s = string(x)
	case string:
		s = x
	case float64:
		return new(big.Rat).SetFloat64(x)
	}
	if r, ok := new(big.Rat).SetString(s); ok {
		return r
	}
	return new(big.Rat)
}

type orderKey struct {
	field, edm string
	desc       bool
}

// parseOrderBy reads `field [asc|desc]`, comma separated.
func parseOrderBy(s string, typeOf func(string) string) ([]orderKey, *apiError) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []orderKey
	for part := range strings.SplitSeq(s, ",") {
		words := strings.Fields(part)
		if len(words) == 0 || len(words) > 2 {
			return nil, badOption("$orderby: %q", part)
		}
		k := orderKey{field: words[0], edm: typeOf(words[0])}
		if k.edm == "" {
			return nil, badOption("$orderby: свойство не найдено: %q", words[0])
		}
		if len(words) == 2 {
			switch strings.ToLower(words[1]) {
			case "asc":
			case "desc":
				k.desc = true
			default:
				return nil, badOption("$orderby: ожидалось asc или desc: %q", words[1])
			}
		}
		out = append(out, k)
	}
	return out, nil
}

// selection is a $select: every field (all), every field but the tabular part
// (noRows, `**`), or the fields named, the tabular part whole or some of its
// fields (`Товары/Цена`).
type selection struct {
	all, noRows, rows bool
	fields, rowFields []string
}

func parseSelect(s string, sh shape) (*selection, *apiError) {
	sel := &selection{}
	if strings.TrimSpace(s) == "" {
		sel.all = true
		return sel, nil
	}
	for part := range strings.SplitSeq(s, ",") {
		name := strings.TrimSpace(part)
		row, isRow := strings.CutPrefix(name, sh.rows+"/")
		switch {
		case name == "*":
			sel.all = true
		case name == "**":
			sel.noRows = true
		case sh.rows != "" && name == sh.rows:
			sel.rows = true
		case sh.rows != "" && isRow && typeIn(sh.rowFields, row) != "":
			sel.rowFields = append(sel.rowFields, row)
		case sh.typeOf(name) != "":
			sel.fields = append(sel.fields, name)
		default:
			return nil, &apiError{http.StatusBadRequest, 6, fmt.Sprintf("Сегмент пути '%s' не найден!", name)}
		}
	}
	return sel, nil
}

// project keeps what sel names of d, a copy.
func (sel *selection) project(d Doc, sh shape) Doc {
	if sel.all {
		return d
	}
	out := Doc{}
	if sel.noRows {
		for _, f := range sh.fields {
			out[f.name] = d[f.name]
		}
		return out
	}
	for _, f := range sel.fields {
		out[f] = d[f]
	}
	switch {
	case sel.rows:
		out[sh.rows] = d[sh.rows]
	case len(sel.rowFields) > 0:
		var rows []any
		for _, r := range asRows(d[sh.rows]) {
			kept := Doc{"LineNumber": r["LineNumber"]}
			for _, f := range sel.rowFields {
				kept[f] = r[f]
			}
			rows = append(rows, kept)
		}
		out[sh.rows] = rows
	}
	return out
}

func asRows(v any) []Doc {
	var out []Doc
	list, _ := v.([]any)
	for _, r := range list {
		if m, ok := r.(Doc); ok {
			out = append(out, m)
		} else if m, ok := r.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

// listing is what a GET of a set asks: a filter, an order, fields, a page and
// whether to count ($inlinecount=allpages, which pays no heed to $top and $skip).
type listing struct {
	filter []cond
	order  []orderKey
	sel    *selection
	skip   int
	top    int // -1: no limit
	count  bool
}

func parseListing(q map[string]string, sh shape) (listing, *apiError) {
	l := listing{top: -1}
	var err *apiError
	if l.filter, err = parseFilter(q["$filter"], sh.typeOf); err != nil {
		return l, err
	}
	if l.order, err = parseOrderBy(q["$orderby"], sh.typeOf); err != nil {
		return l, err
	}
	if l.sel, err = parseSelect(q["$select"], sh); err != nil {
		return l, err
	}
	for opt, to := range map[string]*int{"$skip": &l.skip, "$top": &l.top} {
		if v, ok := q[opt]; ok {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return l, badOption("%s: %q", opt, v)
			}
			*to = n
		}
	}
	switch q["$inlinecount"] {
	case "", "none":
	case "allpages":
		l.count = true
	default:
		return l, badOption("$inlinecount: %q", q["$inlinecount"])
	}
	return l, nil
}

// apply answers the listing over docs: copies, filtered, ordered (ties in the
// order held), paged and projected, and how many matched.
func (l listing) apply(docs []Doc, sh shape) ([]Doc, int) {
	var matched []Doc
	for _, d := range docs {
		if !slices.ContainsFunc(l.filter, func(c cond) bool { return !c.match(d) }) {
			matched = append(matched, d)
		}
	}
	slices.SortStableFunc(matched, func(a, b Doc) int {
		for _, k := range l.order {
			if n := compare(k.edm, a[k.field], b[k.field]); n != 0 {
				if k.desc {
					return -n
				}
				return n
			}
		}
		return 0
	})
	total := len(matched)
	if !l.count {
		matched = matched[min(l.skip, len(matched)):]
		if l.top >= 0 && l.top < len(matched) {
			matched = matched[:l.top]
		}
	}
	page := make([]Doc, 0, len(matched))
	for _, d := range matched {
		page = append(page, l.sel.project(clone(d), sh))
	}
	return page, total
}
