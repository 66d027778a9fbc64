package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"
	"github.com/knadh/koanf/maps"
	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/confmap"
	"github.com/knadh/koanf/v2"
)

const envPrefix = "ORDERSYNC_"

// LoadOptions says where Load finds the configuration.
type LoadOptions struct {
	// Path is the YAML file. Empty means DefaultPath, read if it exists.
	Path string
	// PathExplicit is true when the path came from the user (--config): then a
	// missing file is an error. A missing file at a path that was not asked for is
	// skipped.
	PathExplicit bool
	// Environ is the environment as "NAME=value" entries; ORDERSYNC_ entries
	// override keys. Nil means os.Environ(); pass an empty slice for none.
	Environ []string
	// ReadFile reads the configuration file, the _file secrets and the files that
	// keys name (connectors.sku_map, to check that it can be read). Nil means
	// os.ReadFile.
	ReadFile func(name string) ([]byte, error)
}

// layer is one source of values, as flat keys ("onec.timeout"), before merging.
type layer struct {
	values  map[string]any
	entries map[string]*mapSection  // the map entries it names: "relay.destinations.crm"
	where   func(key string) string // " (in /etc/…)" or " (from ORDERSYNC_…)"
}

func newLayer(where func(key string) string) *layer {
	return &layer{values: map[string]any{}, entries: map[string]*mapSection{}, where: where}
}

// addEntry records the map entry that a key of the layer is in, if any.
func (l *layer) addEntry(mt match) {
	if mt.entry != "" {
		l.entries[mt.entry] = mt.in
	}
}

func (l *layer) has(key string) bool { return l.values[key] != nil }

// Load builds the configuration from, in rising precedence: defaults, the YAML file,
// ORDERSYNC_ environment variables. Secrets given as x_file are read. The result is
// decoded strictly (unknown keys and wrong types are errors) and validated. Every
// problem found is returned at once as an *Error.
func Load(opts LoadOptions) (*Config, error) {
	readFile := opts.ReadFile
	if readFile == nil {
		readFile = os.ReadFile
	}
	environ := opts.Environ
	if environ == nil {
		environ = os.Environ()
	}

	var p problems
	cfg := defaults()
	var layers []*layer

	path := opts.Path
	if path == "" {
		path = DefaultPath
	}
	switch b, err := readFile(path); {
	case err == nil:
		cfg.source = path
		if l := fileLayer(path, b, &p); l != nil {
			layers = append(layers, l)
		}
	case errors.Is(err, fs.ErrNotExist) && !opts.PathExplicit:
		// No configuration file: defaults and environment only.
	default:
		p.add("", fmt.Sprintf("config file %s: %s", path, reason(err)))
	}
	layers = append(layers, envLayer(environ, &p))
	resolveSecrets(layers, readFile, &p)

	k := koanf.New(".")
	if d := entryDefaultValues(layers); len(d) > 0 {
		if err := k.Load(confmap.Provider(d, "."), nil); err != nil {
			p.add("", err.Error()) // confmap does not fail; kept for safety
		}
	}
	for _, l := range layers {
		if err := k.Load(confmap.Provider(l.values, "."), nil); err != nil {
			p.add("", err.Error()) // confmap does not fail; kept for safety
		}
	}
	decode(k, &cfg, layers, &p)

	cfg.derive()
	bad := make(map[string]bool, len(p))
	for _, pr := range p {
		bad[pr.Key] = true
	}
	var vp problems
	cfg.validate(&vp)
	cfg.Connectors.checkFiles(readFile, &vp)
	for _, pr := range vp {
		if !bad[pr.Key] { // a key that failed to decode kept its default; say it once
			p = append(p, pr)
		}
	}
	if err := p.err(); err != nil {
		return nil, err
	}
	return &cfg, nil
}

// fileLayer parses the YAML file and rejects keys that Config does not have and
// names that a map section does not allow.
func fileLayer(path string, b []byte, p *problems) *layer {
	m, err := yaml.Parser().Unmarshal(b)
	if err != nil {
		p.add("", fmt.Sprintf("config file %s: %v", path, err))
		return nil
	}
	maps.IntfaceKeysToStrings(m) // a name such as 2024 is a key like any other
	flat, levels := maps.Flatten(m, nil, ".")
	l := newLayer(func(string) string { return " (in " + path + ")" })
	t := keys()
	badNames := map[string]bool{}
	for _, key := range sortedKeys(flat) {
		v := flat[key]
		mt := t.match(levels[key])
		if mt.badName {
			if !badNames[mt.entry] {
				badNames[mt.entry] = true
				p.add(mt.entry, badNameMessage(mt)+l.where(key))
			}
			continue
		}
		switch {
		case t.known(mt.pattern):
			l.values[key] = v
			l.addEntry(mt)
		case t.sections[mt.pattern]:
			if m, ok := v.(map[string]any); v != nil && (!ok || len(m) > 0) {
				p.add(key, fmt.Sprintf("must be a section of keys, got %s%s", describe(v, false), l.where(key)))
				continue
			}
			l.addEntry(mt) // crm: {} is a destination with every key left out
		default:
			msg := "unknown key" + l.where(key)
			if s := t.suggest(mt.pattern); s != "" {
				msg += "; did you mean " + t.concrete(s, mt.entry) + "?"
			}
			p.add(key, msg)
		}
	}
	return l
}

// badNameMessage says why an entry's name is not allowed.
func badNameMessage(mt match) string {
	return fmt.Sprintf("invalid name %q: names in %s must match %s", mt.name, mt.in.key, mt.in.pattern)
}

// envLayer turns ORDERSYNC_ variables into keys: the prefix is stripped, the rest
// lower-cased, and "__" separates levels (ORDERSYNC_ONEC__BASE_URL → onec.base_url,
// ORDERSYNC_RELAY__DESTINATIONS__CRM__URL → relay.destinations.crm.url). Values are
// converted to the field's type here, so errors can name the variable; a list is
// comma-separated.
func envLayer(environ []string, p *problems) *layer {
	from := map[string]string{}
	l := newLayer(func(key string) string { return " (from " + from[key] + ")" })
	t := keys()
	badNames := map[string]bool{}
	for _, entry := range environ {
		name, value, ok := strings.Cut(entry, "=")
		if !ok || !strings.HasPrefix(name, envPrefix) {
			continue
		}
		levels := strings.Split(strings.ToLower(strings.TrimPrefix(name, envPrefix)), "__")
		key := strings.Join(levels, ".")
		from[key] = name
		mt := t.match(levels)
		if mt.badName {
			if !badNames[mt.entry] {
				badNames[mt.entry] = true
				p.add(mt.entry, badNameMessage(mt)+l.where(key))
			}
			continue
		}
		switch f := t.byKey[mt.pattern]; {
		case f != nil:
			l.addEntry(mt)
			v, terr := fromString(f.typ, value)
			if terr != nil {
				p.add(key, terr.message(f.secret != "")+l.where(key))
				continue
			}
			l.values[key] = v
		case t.byFile[mt.pattern] != nil:
			l.addEntry(mt)
			l.values[key] = value
		case t.sections[mt.pattern]:
			p.add(key, "is a section, not a key"+l.where(key)+"; set its keys, such as "+envVar(key+".<key>"))
		default:
			msg := "unknown key" + l.where(key)
			if s := t.suggest(mt.pattern); s != "" {
				msg += "; did you mean " + envVar(t.concrete(s, mt.entry)) + "?"
			}
			p.add(key, msg)
		}
	}
	return l
}

// resolveSecrets replaces x_file by the content of the file it names. For each
// secret the highest layer that sets x or x_file decides, so an environment
// variable overrides the file in either form; setting both in one layer is an error.
// A secret in a map section is resolved in every entry that some layer names.
func resolveSecrets(layers []*layer, readFile func(string) ([]byte, error), p *problems) {
	t := keys()
	for i := range t.fields {
		f := &t.fields[i]
		if f.secret == "" {
			continue
		}
		for _, key := range secretKeys(layers, f) {
			resolveSecret(layers, f, key, readFile, p)
		}
	}
}

// secretKeys returns the concrete keys of a secret field: its own key, or its key in
// each entry of its map section that some layer names.
func secretKeys(layers []*layer, f *field) []string {
	if f.in == nil {
		return []string{f.key}
	}
	set := map[string]any{}
	for _, l := range layers {
		for entry, m := range l.entries {
			if m == f.in {
				set[keys().concrete(f.key, entry)] = nil
			}
		}
	}
	return sortedKeys(set)
}

func resolveSecret(layers []*layer, f *field, key string, readFile func(string) ([]byte, error), p *problems) {
	fk := key + "_file"
	win := -1
	for i := len(layers) - 1; i >= 0 && win < 0; i-- {
		if layers[i].has(key) || layers[i].has(fk) {
			win = i
		}
	}
	if win < 0 {
		return
	}
	l := layers[win]
	val, path := l.values[key], l.values[fk]
	for i, o := range layers {
		if i != win {
			delete(o.values, key)
		}
		delete(o.values, fk)
	}
	if path == nil {
		return
	}
	name, ok := path.(string)
	if !ok {
		p.add(fk, fmt.Sprintf("must be a file path, got %s%s", describe(path, false), l.where(fk)))
		return
	}
	if name == "" {
		return
	}
	if !isEmpty(val) {
		p.add(key, fmt.Sprintf("both %s and %s are set%s; set one of them", key, fk, l.where(fk)))
		return
	}
	b, err := readFile(name)
	if err != nil {
		p.add(fk, fmt.Sprintf("cannot read %s: %s", name, reason(err)))
		return
	}
	if f.isList() {
		list := secretLines(string(b))
		if len(list) == 0 {
			p.add(fk, fmt.Sprintf("file %s holds no secrets (blank lines and lines starting with # are skipped)", name))
			return
		}
		l.values[key] = list
		return
	}
	// Files written by hand or by `echo` end with a newline that is not part of the secret.
	s := strings.TrimRight(string(b), "\r\n")
	if s == "" {
		p.add(fk, fmt.Sprintf("file %s is empty", name))
		return
	}
	l.values[key] = s
}

// secretLines reads a list of secrets from a file: one a line, surrounding spaces
// and line ends trimmed, blank lines and lines starting with # skipped.
func secretLines(s string) []string {
	var out []string
	for line := range strings.Lines(s) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		out = append(out, line)
	}
	return out
}

// isEmpty reports whether a value leaves its key unset in effect: nothing, an empty
// string or an empty list.
func isEmpty(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case string:
		return v == ""
	case []any:
		return len(v) == 0
	case []string:
		return len(v) == 0
	}
	return false
}

// entryDefaultValues returns, as flat keys, the defaults of every map entry that
// some layer names, so that the keys an entry leaves out keep their defaults.
func entryDefaultValues(layers []*layer) map[string]any {
	t := keys()
	out := map[string]any{}
	for _, l := range layers {
		for entry, m := range l.entries {
			set := false
			for i := range t.fields {
				f := &t.fields[i]
				if f.in != m {
					continue
				}
				if v := m.defaults.FieldByIndex(f.index); !v.IsZero() {
					out[t.concrete(f.key, entry)] = v.Interface()
					set = true
				}
			}
			if !set {
				out[entry] = map[string]any{} // the entry exists, with zero values
			}
		}
	}
	return out
}

// decode unmarshals the merged values onto cfg (which holds the defaults) with
// strict types, and turns decoding errors into problems naming their keys.
func decode(k *koanf.Koanf, cfg *Config, layers []*layer, p *problems) {
	var md mapstructure.Metadata
	err := k.UnmarshalWithConf("", cfg, koanf.UnmarshalConf{
		DecoderConfig: &mapstructure.DecoderConfig{
			DecodeHook: mapstructure.DecodeHookFuncValue(strictHook),
			Metadata:   &md,
		},
	})
	where := func(key string) string {
		for i := len(layers) - 1; i >= 0; i-- {
			if layers[i].has(key) {
				return layers[i].where(key)
			}
		}
		return ""
	}
	var walk func(error)
	walk = func(err error) {
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				walk(e)
			}
			return
		}
		var de *mapstructure.DecodeError
		if !errors.As(err, &de) {
			p.add("", err.Error())
			return
		}
		inner := de.Unwrap()
		var nested *mapstructure.DecodeError
		if errors.As(inner, &nested) {
			walk(inner)
			return
		}
		key := keys().decodedKey(de.Name())
		f := keys().fieldOf(key)
		secret := f != nil && f.secret != ""
		var te *typeError
		switch {
		case errors.As(inner, &te):
			p.add(key, te.message(secret)+where(listKey(key)))
		case secret:
			p.add(key, "has a value of the wrong type"+where(listKey(key)))
		default:
			p.add(key, inner.Error()+where(listKey(key)))
		}
	}
	if err != nil {
		walk(err)
	}
	// Keys are checked per layer before merging; this is a backstop.
	for _, key := range md.Unused {
		p.add(keys().decodedKey(key), "unknown key")
	}
}

// typeError is a value of the wrong type or form for its key. The message shows the
// value unless the key is a secret.
type typeError struct {
	want string // "a duration such as 30s, 1m30s or 500ms"
	got  any
}

const (
	wantDuration = "a duration such as 30s, 1m30s or 500ms"
	wantInt      = "a whole number"
	wantBool     = "true or false"
	wantString   = "a string"
	wantList     = "a list such as [a, b]"
)

func (e *typeError) Error() string { return e.message(true) }

func (e *typeError) message(secret bool) string {
	msg := "must be " + e.want + ", got " + describe(e.got, secret)
	if e.want == wantString {
		switch e.got.(type) {
		case int, int64, uint64, float64, bool:
			msg += " (put it in quotes)"
		}
	}
	return msg
}

// describe shows a value in a message; a secret only by its kind.
func describe(v any, secret bool) string {
	switch v := v.(type) {
	case nil:
		return "nothing"
	case string:
		if secret {
			return "a string"
		}
		return strconv.Quote(v)
	case bool:
		if secret {
			return "true or false"
		}
		return strconv.FormatBool(v)
	case int, int64, uint64, float64:
		if secret {
			return "a number"
		}
		return fmt.Sprint(v)
	case time.Duration:
		return formatDuration(v)
	case map[string]any:
		return "a section of keys"
	case []any:
		return "a list"
	default:
		return fmt.Sprintf("a value of type %T", v)
	}
}

// fromString converts an environment variable's value to the field's type.
func fromString(typ reflect.Type, s string) (any, *typeError) {
	switch {
	case typ == durationType:
		d, err := time.ParseDuration(s)
		if err != nil {
			return nil, &typeError{want: wantDuration, got: s}
		}
		return d, nil
	case typ == sizeType:
		n, ok := parseSize(s)
		if !ok {
			return nil, &typeError{want: wantSize, got: s}
		}
		return n, nil
	case typ.Kind() == reflect.Int:
		n, err := strconv.Atoi(s)
		if err != nil {
			return nil, &typeError{want: wantInt, got: s}
		}
		return n, nil
	case typ.Kind() == reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return nil, &typeError{want: wantBool, got: s}
		}
		return b, nil
	case typ == listType:
		return splitList(s), nil
	default:
		return s, nil
	}
}

// splitList reads a list from an environment variable: comma-separated, each item
// trimmed, empty items dropped. An empty value is an empty list.
func splitList(s string) []string {
	out := []string{}
	for item := range strings.SplitSeq(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// strictHook accepts only values of the field's own type: no number for a string,
// no bare number for a duration (30 would be 30ns), no string for a number (a size,
// though, is a number of bytes or a string with a unit). YAML gives strings, bools,
// ints and floats; the environment layer gives the field's type already.
func strictHook(from, to reflect.Value) (any, error) {
	if !from.IsValid() {
		return nil, nil
	}
	data := from.Interface()
	switch {
	case to.Type() == durationType:
		switch v := data.(type) {
		case time.Duration:
			return v, nil
		case string:
			d, err := time.ParseDuration(v)
			if err != nil {
				return nil, &typeError{want: wantDuration, got: v}
			}
			return d, nil
		case int, int64, uint64, float64:
			return nil, &typeError{want: "a duration with a unit, such as 30s", got: v}
		default:
			return nil, &typeError{want: wantDuration, got: v}
		}
	case to.Type() == sizeType:
		switch v := data.(type) {
		case int64:
			return v, nil
		case int:
			return int64(v), nil
		case string:
			n, ok := parseSize(v)
			if !ok {
				return nil, &typeError{want: wantSize, got: v}
			}
			return n, nil
		default:
			return nil, &typeError{want: wantSize, got: data}
		}
	case to.Kind() == reflect.String:
		if _, ok := data.(string); !ok {
			return nil, &typeError{want: wantString, got: data}
		}
	case to.Kind() == reflect.Int:
		switch v := data.(type) {
		case int:
		case int64:
			if int64(int(v)) != v {
				return nil, &typeError{want: wantInt + " in range", got: v}
			}
			return int(v), nil
		default:
			return nil, &typeError{want: wantInt, got: data}
		}
	case to.Kind() == reflect.Bool:
		if _, ok := data.(bool); !ok {
			return nil, &typeError{want: wantBool, got: data}
		}
	case to.Kind() == reflect.Struct, to.Kind() == reflect.Map:
		if _, ok := data.(map[string]any); !ok {
			return nil, &typeError{want: "a section of keys", got: data}
		}
	case to.Kind() == reflect.Slice:
		// The items are checked one by one as strings.
		switch data.(type) {
		case []any, []string:
		default:
			return nil, &typeError{want: wantList, got: data}
		}
	}
	return data, nil
}

// reason is an I/O error without the path that the message already names.
func reason(err error) string {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "no such file"
	case errors.Is(err, fs.ErrPermission):
		return "permission denied"
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

func sortedKeys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
