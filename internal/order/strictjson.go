package order

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/shopspring/decimal"
)

// encoding/json is lenient where outside input must not be: it replaces invalid
// UTF-8 and lone UTF-16 surrogate escapes by U+FFFD (so two different bad ids become
// one), matches object keys to struct fields case-insensitively and lets the last
// of two equal keys win ({"external_id":"A","External_ID":"B"} is B). CheckJSON is
// a small strict pass over the raw bytes, made before encoding/json decodes them: it
// reads the document itself, every string on its raw bytes.

// JSONOptions says how strictly CheckJSON reads a document.
type JSONOptions struct {
	// Into is a value (or pointer) of the Go type the document will be decoded into;
	// nil is any document. Its json names are the only spelling accepted for its
	// fields: a key that differs from one only in letter case is refused.
	Into any
	// Closed refuses keys that are not fields of Into's structs.
	Closed bool
	// Shallow leaves the insides of json.RawMessage values unchecked: a page whose
	// orders are checked one by one, so one bad order does not spoil its page.
	Shallow bool
	// What names the document in messages about unknown keys ("the canonical order").
	What string
}

// CheckJSON checks data strictly, before it is decoded:
//
//   - every string (and key) is valid UTF-8 on the raw bytes, with no lone UTF-16
//     surrogate escape;
//   - no object has the same key twice;
//   - keys of Into's structs are matched exactly (and, Closed, nothing else is allowed);
//   - a time.Time is a strict RFC 3339 string (ParseTime), or null;
//   - a decimal.Decimal is written in at most MaxNumberText characters;
//   - there is nothing after the document.
//
// It does not check types (the decoder does). The error is a *ValidationError whose
// one problem names the path of the offending value (customer.name, lines[0].sku;
// "(document)" for malformed JSON).
func CheckJSON(data []byte, opts JSONOptions) error {
	err := checkJSON(data, opts)
	if err == nil {
		return nil
	}
	var fe *FieldError
	if errors.As(err, &fe) {
		return &ValidationError{Problems: []FieldError{*fe}}
	}
	return &ValidationError{Problems: []FieldError{{Field: "(document)", Message: "malformed JSON: " + err.Error()}}}
}

// checkJSON returns a *FieldError, or another error for malformed JSON.
func checkJSON(data []byte, opts JSONOptions) error {
	var t reflect.Type
	if opts.Into != nil {
		t = reflect.TypeOf(opts.Into)
	}
	root := shapeFor(t, opts.Closed, opts.Shallow, opts.What)
	w := &walker{data: data}
	err := w.value(root, 0)
	if err == nil {
		w.space()
		if w.pos < len(w.data) {
			return errors.New("unexpected data after the JSON value")
		}
		return nil
	}
	if errors.Is(err, errMalformed) {
		return malformed(data)
	}
	return err
}

type shapeKind int

const (
	shapeAny     shapeKind = iota // anything: keys free (each once), strings checked
	shapeSkip                     // not looked into
	shapeObject                   // a struct: known keys exact
	shapeArray                    // a slice or array
	shapeMap                      // a map: keys free (each once), values of one shape
	shapeTime                     // time.Time
	shapeDecimal                  // decimal.Decimal
)

type shape struct {
	kind   shapeKind
	fields map[string]*shape // shapeObject: json name → shape
	folded map[string]string // shapeObject: folded json name → json name
	elem   *shape            // shapeArray, shapeMap
	closed bool
	what   string
}

var (
	anyShape  = &shape{kind: shapeAny}
	skipShape = &shape{kind: shapeSkip}

	rawMessageType = reflect.TypeFor[json.RawMessage]()
	timeType       = reflect.TypeFor[time.Time]()
	decimalType    = reflect.TypeFor[decimal.Decimal]()
	unmarshalerT   = reflect.TypeFor[json.Unmarshaler]()
)

type shapeKey struct {
	t               reflect.Type
	closed, shallow bool
	what            string
}

var shapes sync.Map // shapeKey → *shape

func shapeFor(t reflect.Type, closed, shallow bool, what string) *shape {
	if t == nil {
		return anyShape
	}
	k := shapeKey{t, closed, shallow, what}
	if s, ok := shapes.Load(k); ok {
		return s.(*shape)
	}
	s := buildShape(t, closed, shallow, what, map[reflect.Type]*shape{})
	shapes.Store(k, s)
	return s
}

func buildShape(t reflect.Type, closed, shallow bool, what string, building map[reflect.Type]*shape) *shape {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == rawMessageType:
		if shallow {
			return skipShape
		}
		return anyShape
	case t == timeType:
		return &shape{kind: shapeTime}
	case t == decimalType:
		return &shape{kind: shapeDecimal}
	case reflect.PointerTo(t).Implements(unmarshalerT) || t.Implements(unmarshalerT):
		return anyShape // decodes itself: its keys are its own business
	}
	switch t.Kind() {
	case reflect.Struct:
		if s, ok := building[t]; ok {
			return s
		}
		s := &shape{kind: shapeObject, fields: map[string]*shape{}, folded: map[string]string{}, closed: closed, what: what}
		building[t] = s
		addFields(s, t, closed, shallow, what, building)
		return s
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return anyShape // []byte is a base64 string
		}
		return &shape{kind: shapeArray, elem: buildShape(t.Elem(), closed, shallow, what, building)}
	case reflect.Map:
		return &shape{kind: shapeMap, elem: buildShape(t.Elem(), closed, shallow, what, building)}
	}
	return anyShape
}

func addFields(s *shape, t reflect.Type, closed, shallow bool, what string, building map[reflect.Type]*shape) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if f.Anonymous && name == "" && ft.Kind() == reflect.Struct {
			addFields(s, ft, closed, shallow, what, building) // embedded: its fields are the outer's
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if _, dup := s.fields[name]; dup {
			continue
		}
		s.fields[name] = buildShape(f.Type, closed, shallow, what, building)
		s.folded[foldKey(name)] = name
	}
}

// foldKey folds a key the way encoding/json matches keys to fields.
func foldKey(s string) string {
	return strings.Map(func(r rune) rune { return unicode.ToUpper(unicode.ToLower(r)) }, s)
}

// The walk reads the bytes itself, in one pass and without allocating for what it
// only looks at (json.Decoder's tokens cost a value each, and the paths a string
// each, for every key), and stops at the first problem in document order. A
// document it finds malformed is read again by encoding/json's tokenizer
// (malformed), whose words say what and where.

// errMalformed stops the walk at bytes that are not JSON.
var errMalformed = errors.New("malformed JSON")

type walker struct {
	data []byte
	pos  int
	path []byte // the path of the value being read (customer.name, lines[0].sku)
}

// where names the value being read in a FieldError.
func (w *walker) where() string {
	if len(w.path) == 0 {
		return "(document)"
	}
	return string(w.path)
}

// push appends a key (Go-quoted when it is no clean text) or an index to the path
// and returns the length to truncate it back to.
func (w *walker) push(key string, index int) int {
	mark := len(w.path)
	if index >= 0 {
		w.path = append(w.path, '[')
		w.path = strconv.AppendInt(w.path, int64(index), 10)
		w.path = append(w.path, ']')
		return mark
	}
	if mark > 0 {
		w.path = append(w.path, '.')
	}
	if CheckLine(key) != "" {
		w.path = strconv.AppendQuote(w.path, key)
	} else {
		w.path = append(w.path, key...)
	}
	return mark
}

// space skips JSON white space.
func (w *walker) space() {
	for w.pos < len(w.data) {
		switch w.data[w.pos] {
		case ' ', '\t', '\n', '\r':
			w.pos++
		default:
			return
		}
	}
}

// peek is the next byte after white space, 0 at the end.
func (w *walker) peek() byte {
	w.space()
	if w.pos >= len(w.data) {
		return 0
	}
	return w.data[w.pos]
}

func (w *walker) value(sh *shape, depth int) error {
	if depth > 200 {
		return &FieldError{Field: w.where(), Message: "is nested more than 200 levels deep"}
	}
	switch c := w.peek(); {
	case c == '{':
		w.pos++
		return w.object(sh, depth)
	case c == '[':
		w.pos++
		return w.array(sh, depth)
	case c == '"':
		raw, err := w.str()
		if err != nil || sh.kind == shapeSkip {
			return err
		}
		if msg := checkRawString(raw); msg != "" {
			return &FieldError{Field: w.where(), Message: msg}
		}
		switch sh.kind {
		case shapeTime:
			if _, err := ParseTime(unquote(raw)); err != nil {
				return &FieldError{Field: w.where(), Message: err.Error()}
			}
		case shapeDecimal:
			if len(unquote(raw)) > MaxNumberText {
				return &FieldError{Field: w.where(), Message: fmt.Sprintf("is a number longer than %d characters", MaxNumberText)}
			}
		}
		return nil
	case c == '-' || c >= '0' && c <= '9':
		n, err := w.number()
		if err == nil && sh.kind == shapeDecimal && n > MaxNumberText {
			return &FieldError{Field: w.where(), Message: fmt.Sprintf("is a number longer than %d characters", MaxNumberText)}
		}
		return err
	case c == 't':
		return w.literal("true")
	case c == 'f':
		return w.literal("false")
	case c == 'n':
		return w.literal("null")
	}
	return errMalformed
}

// smallObject is how many keys an object's duplicate check keeps in a list before
// it takes a map.
const smallObject = 16

func (w *walker) object(sh *shape, depth int) error {
	check := sh.kind != shapeSkip
	var (
		few  []string
		many map[string]bool
	)
	if w.peek() == '}' {
		w.pos++
		return nil
	}
	for {
		if w.peek() != '"' {
			return errMalformed
		}
		raw, err := w.str()
		if err != nil {
			return err
		}
		key := unquote(raw)
		mark := w.push(key, -1) // a key's own problems name it as is, even empty
		sub := skipShape
		if check {
			if msg := checkRawString(raw); msg != "" {
				// Named by its raw bytes, Go quoted: the decoded key lost them.
				if w.path = w.path[:mark]; mark > 0 {
					w.path = append(w.path, '.')
				}
				w.path = strconv.AppendQuote(w.path, string(raw[1:len(raw)-1]))
				return &FieldError{Field: string(w.path), Message: "the key " + msg}
			}
			if slices.Contains(few, key) || many[key] {
				return &FieldError{Field: string(w.path), Message: "appears twice in one object"}
			}
			switch {
			case many != nil:
				many[key] = true
			case len(few) < smallObject:
				few = append(few, key)
			default:
				many = make(map[string]bool, 2*smallObject)
				for _, k := range few {
					many[k] = true
				}
				many[key] = true
				few = nil
			}
			sub = anyShape
			switch sh.kind {
			case shapeObject:
				if s, ok := sh.fields[key]; ok {
					sub = s
				} else if exact, ok := sh.folded[foldKey(key)]; ok {
					return &FieldError{Field: string(w.path), Message: fmt.Sprintf("is not %q: keys are matched exactly", exact)}
				} else if sh.closed {
					what := sh.what
					if what == "" {
						what = "the document"
					}
					return &FieldError{Field: string(w.path), Message: "is not a field of " + what}
				}
			case shapeMap:
				sub = sh.elem
			}
		}
		if w.peek() != ':' {
			return errMalformed
		}
		w.pos++
		if err := w.value(sub, depth+1); err != nil {
			return err
		}
		w.path = w.path[:mark]
		switch w.peek() {
		case ',':
			w.pos++
		case '}':
			w.pos++
			return nil
		default:
			return errMalformed
		}
	}
}

func (w *walker) array(sh *shape, depth int) error {
	elem := anyShape
	switch sh.kind {
	case shapeSkip:
		elem = skipShape
	case shapeArray:
		elem = sh.elem
	}
	if w.peek() == ']' {
		w.pos++
		return nil
	}
	for i := 0; ; i++ {
		mark := w.push("", i)
		if err := w.value(elem, depth+1); err != nil {
			return err
		}
		w.path = w.path[:mark]
		switch w.peek() {
		case ',':
			w.pos++
		case ']':
			w.pos++
			return nil
		default:
			return errMalformed
		}
	}
}

// str reads a string at w.pos and returns its raw bytes, quotes included: its
// escapes well formed, no control character unescaped. UTF-8 is checkRawString's.
func (w *walker) str() ([]byte, error) {
	start := w.pos
	for i := start + 1; i < len(w.data); i++ {
		switch c := w.data[i]; {
		case c == '"':
			w.pos = i + 1
			return w.data[start:w.pos], nil
		case c < 0x20:
			return nil, errMalformed
		case c == '\\':
			i++
			if i >= len(w.data) {
				return nil, errMalformed
			}
			switch w.data[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if _, ok := hex4(w.data, i+1); !ok {
					return nil, errMalformed
				}
				i += 4
			default:
				return nil, errMalformed
			}
		}
	}
	return nil, errMalformed
}

// number reads a number at w.pos (JSON's grammar) and returns its length.
func (w *walker) number() (int, error) {
	d, i := w.data, w.pos
	digits := func() int {
		n := 0
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
			n++
		}
		return n
	}
	if d[i] == '-' {
		i++
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case digits() == 0:
		return 0, errMalformed
	}
	if i < len(d) && d[i] == '.' {
		i++
		if digits() == 0 {
			return 0, errMalformed
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		if digits() == 0 {
			return 0, errMalformed
		}
	}
	n := i - w.pos
	w.pos = i
	return n, nil
}

func (w *walker) literal(lit string) error {
	if !bytes.HasPrefix(w.data[w.pos:], []byte(lit)) {
		return errMalformed
	}
	w.pos += len(lit)
	return nil
}

// unquote is a string's text from its raw bytes: the bytes between the quotes when
// they hold no escape, encoding/json's reading otherwise.
func unquote(raw []byte) string {
	in := raw[1 : len(raw)-1]
	if bytes.IndexByte(in, '\\') < 0 && utf8.Valid(in) {
		return string(in)
	}
	var s string
	_ = json.Unmarshal(raw, &s) // well formed: str checked it
	return s
}

// malformed is encoding/json's word on a document the walk found malformed: its
// tokenizer's first error, or the walk's own for data after the value.
func malformed(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	depth := 0
	for {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		if d, ok := t.(json.Delim); ok {
			if d == '{' || d == '[' {
				depth++
			} else {
				depth--
			}
		}
		if depth == 0 {
			break
		}
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("unexpected data after the JSON value")
	}
	return errors.New("malformed JSON") // the tokenizer read it whole: not expected
}

// checkRawString checks the raw bytes of one string token (possibly preceded by
// separators and white space): valid UTF-8, and every \uD800–\uDBFF escape followed
// by a \uDC00–\uDFFF one, no \uDC00–\uDFFF escape alone.
func checkRawString(raw []byte) string {
	i := bytes.IndexByte(raw, '"')
	if i < 0 {
		return ""
	}
	s := raw[i:]
	if !utf8.Valid(s) {
		return "is not valid UTF-8"
	}
	for j := 1; j < len(s); j++ {
		if s[j] != '\\' {
			continue
		}
		j++
		if j >= len(s) || s[j] != 'u' {
			continue
		}
		r, ok := hex4(s, j+1)
		j += 4
		if !ok {
			continue
		}
		switch {
		case r >= 0xD800 && r <= 0xDBFF:
			if lo, ok := hex4(s, j+3); ok && s[j+1] == '\\' && s[j+2] == 'u' && lo >= 0xDC00 && lo <= 0xDFFF {
				j += 6
				continue
			}
			return "holds a lone UTF-16 surrogate escape (not valid Unicode)"
		case r >= 0xDC00 && r <= 0xDFFF:
			return "holds a lone UTF-16 surrogate escape (not valid Unicode)"
		}
	}
	return ""
}

func hex4(s []byte, at int) (rune, bool) {
	if at < 0 || at+4 > len(s) {
		return 0, false
	}
	n, err := strconv.ParseUint(string(s[at:at+4]), 16, 32)
	if err != nil {
		return 0, false
	}
	return rune(n), true
}
