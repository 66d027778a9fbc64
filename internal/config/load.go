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
	// ReadFile reads the configuration file and the _file secrets. Nil means
	// os.ReadFile.
	ReadFile func(name string) ([]byte, error)
}

// layer is one source of values, as flat keys ("onec.timeout"), before merging.
type layer struct {
	values map[string]any
	where  func(key string) string // " (in /etc/…)" or " (from ORDERSYNC_…)"
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

// fileLayer parses the YAML file and rejects keys that Config does not have.
func fileLayer(path string, b []byte, p *problems) *layer {
	m, err := yaml.Parser().Unmarshal(b)
	if err != nil {
		p.add("", fmt.Sprintf("config file %s: %v", path, err))
		return nil
	}
	flat, _ := maps.Flatten(m, nil, ".")
	l := &layer{values: map[string]any{}, where: func(string) string { return " (in " + path + ")" }}
	t := keys()
	for _, key := range sortedKeys(flat) {
		v := flat[key]
		switch {
		case t.known(key):
			l.values[key] = v
		case t.sections[key]:
			if m, ok := v.(map[string]any); v != nil && (!ok || len(m) > 0) {
				p.add(key, fmt.Sprintf("must be a section of keys, got %s%s", describe(v, false), l.where(key)))
			}
		default:
			msg := "unknown key" + l.where(key)
			if s := t.suggest(key); s != "" {
				msg += "; did you mean " + s + "?"
			}
			p.add(key, msg)
		}
	}
	return l
}

// envLayer turns ORDERSYNC_ variables into keys: the prefix is stripped, the rest
// lower-cased, and "__" separates levels (ORDERSYNC_ONEC__BASE_URL → onec.base_url).
// Values are converted to the field's type here, so errors can name the variable.
func envLayer(environ []string, p *problems) *layer {
	from := map[string]string{}
	l := &layer{values: map[string]any{}, where: func(key string) string { return " (from " + from[key] + ")" }}
	t := keys()
	for _, entry := range environ {
		name, value, ok := strings.Cut(entry, "=")
		if !ok || !strings.HasPrefix(name, envPrefix) {
			continue
		}
		key := strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(name, envPrefix), "__", "."))
		from[key] = name
		switch f := t.byKey[key]; {
		case f != nil:
			v, terr := fromString(f.typ, value)
			if terr != nil {
				p.add(key, terr.message(f.secret != "")+l.where(key))
				continue
			}
			l.values[key] = v
		case t.byFile[key] != nil:
			l.values[key] = value
		default:
			msg := "unknown key" + l.where(key)
			if s := t.suggest(key); s != "" {
				msg += "; did you mean " + envVar(s) + "?"
			}
			p.add(key, msg)
		}
	}
	return l
}

// resolveSecrets replaces x_file by the content of the file it names. For each
// secret the highest layer that sets x or x_file decides, so an environment
// variable overrides the file in either form; setting both in one layer is an error.
func resolveSecrets(layers []*layer, readFile func(string) ([]byte, error), p *problems) {
	for _, f := range keys().fields {
		if f.secret == "" {
			continue
		}
		fk := f.fileKey()
		win := -1
		for i := len(layers) - 1; i >= 0 && win < 0; i-- {
			if layers[i].has(f.key) || layers[i].has(fk) {
				win = i
			}
		}
		if win < 0 {
			continue
		}
		l := layers[win]
		val, path := l.values[f.key], l.values[fk]
		for i, o := range layers {
			if i != win {
				delete(o.values, f.key)
			}
			delete(o.values, fk)
		}
		if path == nil {
			continue
		}
		name, ok := path.(string)
		if !ok {
			p.add(fk, fmt.Sprintf("must be a file path, got %s%s", describe(path, false), l.where(fk)))
			continue
		}
		if name == "" {
			continue
		}
		if s, ok := val.(string); val != nil && (!ok || s != "") {
			p.add(f.key, fmt.Sprintf("both %s and %s are set%s; set one of them", f.key, fk, l.where(fk)))
			continue
		}
		b, err := readFile(name)
		if err != nil {
			p.add(fk, fmt.Sprintf("cannot read %s: %s", name, reason(err)))
			continue
		}
		// Files written by hand or by `echo` end with a newline that is not part of the secret.
		s := strings.TrimRight(string(b), "\r\n")
		if s == "" {
			p.add(fk, fmt.Sprintf("file %s is empty", name))
			continue
		}
		l.values[f.key] = s
	}
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
		f := keys().byKey[de.Name()]
		secret := f != nil && f.secret != ""
		var te *typeError
		switch {
		case errors.As(inner, &te):
			p.add(de.Name(), te.message(secret)+where(de.Name()))
		case secret:
			p.add(de.Name(), "has a value of the wrong type"+where(de.Name()))
		default:
			p.add(de.Name(), inner.Error()+where(de.Name()))
		}
	}
	if err != nil {
		walk(err)
	}
	// Keys are checked per layer before merging; this is a backstop.
	for _, key := range md.Unused {
		p.add(key, "unknown key")
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
	default:
		return s, nil
	}
}

// strictHook accepts only values of the field's own type: no number for a string,
// no bare number for a duration (30 would be 30ns), no string for a number. YAML
// gives strings, bools, ints and floats; the environment layer gives the field's
// type already.
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
	case to.Kind() == reflect.Struct:
		if _, ok := data.(map[string]any); !ok {
			return nil, &typeError{want: "a section of keys", got: data}
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
