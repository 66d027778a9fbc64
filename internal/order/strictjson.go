package order

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
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
// walks the document with json.Decoder tokens, and reads every string token on its
// raw bytes (sliced out of the input by InputOffset).

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
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	w := &walker{dec: dec, data: data}
	if err := w.value("", root, 0); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("unexpected data after the JSON value")
	}
	return nil
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

type walker struct {
	dec  *json.Decoder
	data []byte
	pos  int64
}

// next reads a token and the raw bytes since the previous one (separators and white
// space first: all ASCII).
func (w *walker) next() (json.Token, []byte, error) {
	t, err := w.dec.Token()
	if err != nil {
		return nil, nil, err
	}
	end := w.dec.InputOffset()
	if end < w.pos || end > int64(len(w.data)) {
		return nil, nil, errors.New("decoder offset out of range")
	}
	raw := w.data[w.pos:end]
	w.pos = end
	return t, raw, nil
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func docPath(path string) string {
	if path == "" {
		return "(document)"
	}
	return path
}

func (w *walker) value(path string, sh *shape, depth int) error {
	if depth > 200 {
		return &FieldError{Field: docPath(path), Message: "is nested more than 200 levels deep"}
	}
	t, raw, err := w.next()
	if err != nil {
		return err
	}
	switch t := t.(type) {
	case json.Delim:
		switch t {
		case '{':
			return w.object(path, sh, depth)
		case '[':
			return w.array(path, sh, depth)
		}
		return fmt.Errorf("unexpected %v", t)
	case string:
		if sh.kind == shapeSkip {
			return nil
		}
		if msg := checkRawString(raw); msg != "" {
			return &FieldError{Field: docPath(path), Message: msg}
		}
		switch sh.kind {
		case shapeTime:
			if _, err := ParseTime(t); err != nil {
				return &FieldError{Field: docPath(path), Message: err.Error()}
			}
		case shapeDecimal:
			if len(t) > MaxNumberText {
				return &FieldError{Field: docPath(path), Message: fmt.Sprintf("is a number longer than %d characters", MaxNumberText)}
			}
		}
	case json.Number:
		if sh.kind == shapeDecimal && len(t) > MaxNumberText {
			return &FieldError{Field: docPath(path), Message: fmt.Sprintf("is a number longer than %d characters", MaxNumberText)}
		}
	}
	return nil
}

func (w *walker) object(path string, sh *shape, depth int) error {
	check := sh.kind != shapeSkip
	var seen map[string]bool
	if check {
		seen = map[string]bool{}
	}
	for w.dec.More() {
		t, raw, err := w.next()
		if err != nil {
			return err
		}
		key, ok := t.(string)
		if !ok {
			return errors.New("object key is not a string")
		}
		field := join(path, key)
		if CheckLine(key) != "" {
			field = join(path, strconv.Quote(key)) // a key that is no clean text is named quoted
		}
		sub := skipShape
		if check {
			if msg := checkRawString(raw); msg != "" {
				// Named by its raw bytes, Go quoted: the decoded key lost them.
				rawKey := raw[bytes.IndexByte(raw, '"')+1:]
				rawKey = rawKey[:max(len(rawKey)-1, 0)]
				return &FieldError{Field: join(path, strconv.Quote(string(rawKey))), Message: "the key " + msg}
			}
			if seen[key] {
				return &FieldError{Field: field, Message: "appears twice in one object"}
			}
			seen[key] = true
			sub = anyShape
			switch sh.kind {
			case shapeObject:
				if s, ok := sh.fields[key]; ok {
					sub = s
				} else if exact, ok := sh.folded[foldKey(key)]; ok {
					return &FieldError{Field: field, Message: fmt.Sprintf("is not %q: keys are matched exactly", exact)}
				} else if sh.closed {
					what := sh.what
					if what == "" {
						what = "the document"
					}
					return &FieldError{Field: field, Message: "is not a field of " + what}
				}
			case shapeMap:
				sub = sh.elem
			}
		}
		if err := w.value(field, sub, depth+1); err != nil {
			return err
		}
	}
	_, _, err := w.next() // '}'
	return err
}

func (w *walker) array(path string, sh *shape, depth int) error {
	elem := anyShape
	switch sh.kind {
	case shapeSkip:
		elem = skipShape
	case shapeArray:
		elem = sh.elem
	}
	for i := 0; w.dec.More(); i++ {
		if err := w.value(fmt.Sprintf("%s[%d]", path, i), elem, depth+1); err != nil {
			return err
		}
	}
	_, _, err := w.next() // ']'
	return err
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
