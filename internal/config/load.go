package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"
	"github.com/knadh/koanf/maps"
	"github.com/knadh/koanf/providers/confmap"
	"github.com/knadh/koanf/providers/env/v2"
	"github.com/knadh/koanf/v2"
	yamlv3 "go.yaml.in/yaml/v3"

	"github.com/ordersync/ordersync/internal/bytesize"
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
	// ReadSecret, when set, chooses by key (database.url,
	// relay.destinations.crm.secrets) the secrets given as x_file that are read: a
	// command that talks neither to 1C nor to a sender reads database.url_file alone,
	// so that a file only the service can read (/run/credentials/…) is never opened.
	// A secret not read stays empty, is not checked, and Config.Unread names its
	// file. Nil reads every one.
	ReadSecret func(key string) bool
}

// layer is one source of values, as flat keys ("onec.timeout"), before merging.
type layer struct {
	values  map[string]any
	entries map[string]*mapSection  // the map entries it names: "relay.destinations.crm"
	where   func(key string) string // " (in /etc/…)" or " (from ORDERSYNC_…)"
	said    map[string]bool         // the keys of problems said once for all the layer's keys in them
}

func newLayer(where func(key string) string) *layer {
	return &layer{values: map[string]any{}, entries: map[string]*mapSection{}, where: where, said: map[string]bool{}}
}

// once reports whether the problem of key is yet to be said, and counts it said.
func (l *layer) once(key string) bool {
	if l.said[key] {
		return false
	}
	l.said[key] = true
	return true
}

// badName says, once per entry, that a key's entry has a name its map section
// does not allow, and reports whether it has.
func (l *layer) badName(mt match, key string, p *problems) bool {
	if mt.badName && l.once(mt.entry) {
		p.add(mt.entry, badNameMessage(mt)+l.where(key))
	}
	return mt.badName
}

// unknownKey is the problem of a key the table does not have: a key that was
// renamed, or an unknown one, with the known key closest to it as the file (env
// false) or the environment writes it.
func unknownKey(mt match, where string, env bool) string {
	if r := renamedKeys[mt.pattern]; r.to != "" {
		return renamedMessage(r, where, env)
	}
	msg := "unknown key" + where
	if s := keys().suggest(mt.pattern); s != "" {
		s = keys().concrete(s, mt.entry)
		if env {
			s = envVar(s)
		}
		msg += "; did you mean " + s + "?"
	}
	return msg
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
	// The accounts' types decide where their keys go (routeLevels): the
	// environment's first, as it overrides the file.
	types := envAccountTypes(environ)
	switch b, err := readFile(path); {
	case err == nil:
		cfg.source = path
		if l := fileLayer(path, b, types, &p); l != nil {
			layers = append(layers, l)
		}
	case errors.Is(err, fs.ErrNotExist) && !opts.PathExplicit:
		// No configuration file: defaults and environment only.
	default:
		p.add("", fmt.Sprintf("config file %s: %s", path, reason(err)))
	}
	layers = append(layers, envLayer(environ, types, &p))
	unreadFiles := map[string]string{}
	resolveSecrets(layers, readFile, opts.ReadSecret, unreadFiles, &p)

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
	if len(unreadFiles) > 0 {
		cfg.unread = unreadFiles
	}
	bad := make(map[string]bool, len(p))
	for _, pr := range p {
		bad[pr.Key] = true
		// A secret's file that cannot be read leaves the secret empty: its problem
		// is said, not once more as the secret's "is required".
		if k, ok := strings.CutSuffix(pr.Key, "_file"); ok {
			bad[k] = true
		}
	}
	var vp problems
	cfg.validate(&vp)
	cfg.Connectors.checkFiles(readFile, &vp)
	unread := make(map[string]bool, len(cfg.unread))
	for key := range cfg.unread {
		unread[key] = true
	}
	for _, pr := range vp {
		// A key that failed to decode kept its default: say it once. A secret left
		// unread is empty here, not in the service.
		if !failed(bad, pr.Key) && !failed(unread, pr.Key) {
			p = append(p, pr)
		}
	}
	if err := p.err(); err != nil {
		return nil, err
	}
	return &cfg, nil
}

// failed reports whether key, or a key that holds it (stock.schedules for
// stock.schedules[0].cron, connectors.ozon.stock_warehouses for
// connectors.ozon.stock_warehouses.WH1), failed to load.
func failed(bad map[string]bool, key string) bool {
	for k := key; k != ""; {
		if bad[k] {
			return true
		}
		i := max(strings.LastIndexByte(k, '.'), strings.LastIndexByte(k, '['))
		if i < 0 {
			return false
		}
		k = k[:i]
	}
	return false
}

// fileLayer parses the YAML file and rejects keys that Config does not have and
// names that a map section does not allow.
func fileLayer(path string, b []byte, types map[string]string, p *problems) *layer {
	l := newLayer(func(string) string { return " (in " + path + ")" })
	flat, levels, src, err := parseFile(b, l.where(""), types, p)
	if err != nil {
		p.add("", fmt.Sprintf("config file %s: %v", path, err))
		return nil
	}
	t := keys()
	checkAccountTypes(flat, types, l.where(""), l.said, p)
	for _, fileKey := range sortedKeys(flat) {
		v := flat[fileKey]
		lv := routeLevels(levels[fileKey], types)
		if l.said[accountOf(lv)] {
			continue // an account whose type is wrong: said once
		}
		key := strings.Join(lv, ".")
		mt := t.match(lv)
		if l.badName(mt, key, p) {
			continue
		}
		switch {
		case t.known(mt.pattern):
			if f := t.byKey[mt.pattern]; f != nil {
				switch {
				case f.numberText && isWholeNumber(v):
					text, msg := src.numberText(levels[fileKey], v)
					if msg != "" {
						p.add(key, msg+l.where(key))
						continue
					}
					v = text
				case f.entries != nil:
					v = checkEntries(f.entries, key, v, l.where(key), p)
				}
			}
			l.values[key] = v
			l.addEntry(mt)
		case t.sections[mt.pattern]:
			if m, ok := v.(map[string]any); v != nil && (!ok || len(m) > 0) {
				p.add(key, fmt.Sprintf("must be a section of keys, got %s%s", describe(v, false), l.where(key)))
				continue
			}
			l.addEntry(mt) // crm: {} is a destination with every key left out
		case t.within(mt.pattern) != nil:
			// A list of sections written as a section: its entries' keys would
			// be taken for keys of the configuration.
			f := t.within(mt.pattern)
			whole := t.concrete(f.key, mt.entry)
			if l.once(whole) {
				p.add(whole, "must be "+wantEntries+", got a section of keys"+l.where(key))
			}
		default:
			p.add(key, unknownKey(mt, l.where(key), false))
		}
	}
	return l
}

// parseFile parses a YAML configuration into flat keys, with the levels of each
// (maps.Flatten), and keeps the document, which has the numbers as written. A map
// of strings (connectors.ozon.stock_warehouses) is one key whose value is a
// map[string]string: its names are the user's (warehouse codes, which may hold
// dots), not keys of the configuration.
//
// A document whose values YAML could not all take (a key given twice) is a problem
// for each, and the rest of it is read and checked too: every problem at once.
func parseFile(b []byte, where string, types map[string]string, p *problems) (map[string]any, map[string][]string, yamlSource, error) {
	var doc yamlv3.Node
	if err := yamlv3.Unmarshal(b, &doc); err != nil {
		return nil, nil, yamlSource{}, fmt.Errorf("yaml: %w", stripYAMLPrefix(err))
	}
	// A key given twice in a section is a problem; the section is read with its
	// first, so that the rest of it is checked too (YAML would drop it whole).
	dropDuplicateKeys(&doc, where, p)
	var m map[string]any
	if len(doc.Content) > 0 {
		err := doc.Decode(&m)
		var te *yamlv3.TypeError
		switch {
		case errors.As(err, &te) && m != nil:
			for _, e := range te.Errors {
				p.add("", e+where)
			}
		case errors.As(err, &te):
			return nil, nil, yamlSource{}, errors.New("must be a section of keys (database:, onec:, …): " + strings.Join(te.Errors, "; "))
		case err != nil:
			return nil, nil, yamlSource{}, fmt.Errorf("yaml: %w", stripYAMLPrefix(err))
		}
	}
	src := yamlSource{root: &doc}
	accountTypesOfFile(m, types)
	// Before the names of nested sections are made strings, which would hide a
	// name that YAML read as a number.
	keys().stringMaps(m, nil, src, where, types, p)
	maps.IntfaceKeysToStrings(m) // a name such as 2024 is a key like any other
	flat, levels := maps.Flatten(m, nil, ".")
	return flat, levels, src, nil
}

// dropDuplicateKeys removes, in every section of the document, each key that the
// section already has (as YAML compares them: same kind, same text) with its value,
// and says so, with both lines.
func dropDuplicateKeys(n *yamlv3.Node, where string, p *problems) {
	if n.Kind == yamlv3.MappingNode {
		kept := n.Content[:0]
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			dup := false
			for j := 0; j+1 < len(kept); j += 2 {
				if first := kept[j]; first.Kind == k.Kind && first.Value == k.Value && k.Value != "<<" {
					p.add("", fmt.Sprintf("line %d: mapping key %q already defined at line %d%s", k.Line, k.Value, first.Line, where))
					dup = true
					break
				}
			}
			if !dup {
				kept = append(kept, k, n.Content[i+1])
			}
		}
		n.Content = kept
	}
	for _, c := range n.Content {
		dropDuplicateKeys(c, where, p)
	}
}

// stripYAMLPrefix drops the "yaml: " that the YAML library starts its errors with,
// so that it is said once.
func stripYAMLPrefix(err error) error {
	if msg, ok := strings.CutPrefix(err.Error(), "yaml: "); ok {
		return errors.New(msg)
	}
	return err
}

// stringMaps replaces, in a parsed file, the value of each map of strings by a
// map[string]string. Its names must be strings in the file: YAML reads an unquoted
// 0001 as the number 1, and a warehouse code must keep its zeros. Its values may be
// strings or whole numbers, taken as written (1020000000001 is "1020000000001").
// An item of another kind is a problem naming it, and is left out.
func (t *keyTable) stringMaps(node any, levels []string, src yamlSource, where string, types map[string]string, p *problems) {
	visit := func(name string, v any) (any, bool) {
		lv := append(slices.Clip(levels), name)
		mt := t.match(routeLevels(lv, types))
		if mt.badName {
			return nil, false // fileLayer says so
		}
		if f := t.byKey[mt.pattern]; f != nil && f.isStringMap() {
			return stringMapFromFile(strings.Join(lv, "."), lv, v, src, where, p)
		}
		t.stringMaps(v, lv, src, where, types, p)
		return nil, false
	}
	switch n := node.(type) {
	case map[string]any:
		for _, k := range sortedKeys(n) {
			if r, ok := visit(k, n[k]); ok {
				n[k] = r
			}
		}
	case map[any]any:
		for _, k := range sortedAnyKeys(n) {
			if r, ok := visit(fmt.Sprintf("%v", k), n[k]); ok {
				n[k] = r
			}
		}
	}
}

// sortedAnyKeys returns the keys of a map YAML gave with keys of several kinds,
// in the order of their text, so that problems come in the same order every time.
func sortedAnyKeys(m map[any]any) []any {
	out := make([]any, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b any) int { return strings.Compare(fmt.Sprintf("%v", a), fmt.Sprintf("%v", b)) })
	return out
}

// stringMapFromFile converts the value of the map of strings key, found at levels
// in the file. A value that is no section is left as it is, for decoding to refuse.
func stringMapFromFile(key string, levels []string, v any, src yamlSource, where string, p *problems) (any, bool) {
	out := map[string]string{}
	add := func(name string, val any) {
		k := key + "." + name
		switch x := val.(type) {
		case string:
			out[name] = x
		case int, int64, uint64:
			text, msg := src.numberText(append(slices.Clip(levels), name), x)
			if msg != "" {
				p.add(k, msg+where)
				return
			}
			out[name] = text
		default:
			p.add(k, (&typeError{want: wantStringOrNumber, got: val}).message(false)+where)
		}
	}
	switch m := v.(type) {
	case map[string]any:
		for _, name := range sortedKeys(m) {
			add(name, m[name])
		}
	case map[any]any:
		for _, name := range sortedAnyKeys(m) {
			val := m[name]
			s, ok := name.(string)
			if !ok {
				p.add(key+"."+fmt.Sprintf("%v", name), "is a name that YAML reads as "+describeKind(name)+
					": write it in quotes, so that it stays as written (an unquoted 0001 is the number 1)"+where)
				continue
			}
			add(s, val)
		}
	default:
		return nil, false
	}
	return out, true
}

// describeKind names the kind of a value YAML read.
func describeKind(v any) string {
	switch v.(type) {
	case nil:
		return "nothing (null)"
	case bool:
		return "true or false"
	case int, int64, uint64:
		return "a whole number"
	case float64:
		return "a number"
	}
	return fmt.Sprintf("a %T", v)
}

// yamlSource is a configuration file's document, for the numbers as written: YAML
// reads an unquoted 0123 as the number 83 (octal), 0x1F as 31 and 1_000 as 1000.
type yamlSource struct {
	root *yamlv3.Node // nil when the document is not at hand
}

// text is the scalar at levels as the file wrote it; false if there is none there
// (or it is reached through a merge key).
func (s yamlSource) text(levels []string) (string, bool) {
	n := s.root
	if n == nil {
		return "", false
	}
	if n.Kind == yamlv3.DocumentNode {
		if len(n.Content) == 0 {
			return "", false
		}
		n = n.Content[0]
	}
	for _, level := range levels {
		for n != nil && n.Kind == yamlv3.AliasNode {
			n = n.Alias
		}
		if n == nil || n.Kind != yamlv3.MappingNode {
			return "", false
		}
		var next *yamlv3.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == level {
				next = n.Content[i+1]
			}
		}
		n = next
	}
	for n != nil && n.Kind == yamlv3.AliasNode {
		n = n.Alias
	}
	if n == nil || n.Kind != yamlv3.ScalarNode {
		return "", false
	}
	return n.Value, true
}

// numberText is the decimal text of the whole number v that YAML read at levels, or
// what is wrong: a number the file wrote otherwise (0123, 0x1F, 1_000, +5) would
// not be kept as written.
func (s yamlSource) numberText(levels []string, v any) (string, string) {
	dec := fmt.Sprint(v)
	if raw, ok := s.text(levels); ok && raw != dec {
		return "", fmt.Sprintf("is %s, which YAML reads as the number %s: write it in quotes to keep it as written", raw, dec)
	}
	return dec, ""
}

func isWholeNumber(v any) bool {
	switch v.(type) {
	case int, int64, uint64:
		return true
	}
	return false
}

// checkEntries checks a list of sections as a layer gives it: each entry a section
// of the entry's keys. An unknown key is a problem naming it
// (stock.schedules[0].crom) and is left out; the types of the values are the
// decoder's to check. A value that is no list is left as it is, for decoding to
// refuse, and so is an entry that is no section, but for nothing (an empty "- ").
func checkEntries(e *entryList, key string, v any, where string, p *problems) any {
	list, ok := v.([]any)
	if !ok {
		return v
	}
	out := make([]any, len(list))
	for i, item := range list {
		ik := fmt.Sprintf("%s[%d]", key, i)
		m, ok := item.(map[string]any)
		if !ok {
			if item == nil {
				p.add(ik, "must be a section of keys ("+e.fields[0].key+": …), got nothing"+where)
				item = map[string]any{}
			}
			out[i] = item
			continue
		}
		clean := make(map[string]any, len(m))
		for _, k := range sortedKeys(m) {
			if e.byKey[k] == nil {
				msg := "unknown key" + where
				if s := e.suggest(k); s != "" {
					msg += "; did you mean " + ik + "." + s + "?"
				}
				p.add(ik+"."+k, msg)
				continue
			}
			clean[k] = m[k]
		}
		out[i] = clean
	}
	return out
}

// badNameMessage says why an entry's name is not allowed.
func badNameMessage(mt match) string {
	return fmt.Sprintf("invalid name %q: names in %s must match %s", mt.name, mt.in.key, mt.in.pattern)
}

// envLayer reads the ORDERSYNC_ variables through koanf's environment provider;
// envReader.value checks and converts each, so that a problem names the variable.
func envLayer(environ []string, types map[string]string, p *problems) *layer {
	r := &envReader{from: map[string]string{}, p: p, types: types}
	r.l = newLayer(func(key string) string { return " (from " + r.from[key] + ")" })
	k := koanf.New(".")
	err := k.Load(env.Provider(".", env.Opt{
		Prefix:        envPrefix,
		EnvironFunc:   func() []string { return environ },
		TransformFunc: r.value,
	}), nil)
	if err != nil {
		p.add("", err.Error()) // the environment provider does not fail; kept for safety
	}
	r.l.values = k.All()
	return r.l
}

// envReader is the environment layer while the provider reads it.
type envReader struct {
	l    *layer
	from map[string]string // key → the variable that set it
	p    *problems
	// types are the accounts' types, which route their keys (routeLevels).
	types map[string]string
}

// value is the key and value of the variable name: the prefix is stripped, the
// rest lower-cased, and "__" separates levels (ORDERSYNC_ONEC__BASE_URL →
// onec.base_url, ORDERSYNC_RELAY__DESTINATIONS__CRM__URL →
// relay.destinations.crm.url). The value is converted to the field's type here, so
// that a problem names the variable; a list is comma-separated. A variable that is
// a problem gives the key "", which the provider leaves out.
func (r *envReader) value(name, value string) (string, any) {
	t, l, p := keys(), r.l, r.p
	levels := strings.Split(strings.ToLower(strings.TrimPrefix(name, envPrefix)), "__")
	if a := accountOf(levels); a != "" && len(levels) > 2 && !slices.Contains(fixedConnectorKeys(), levels[1]) {
		if _, ok := r.types[levels[1]]; !ok || !slices.Contains(allTypeNames(), r.types[levels[1]]) {
			if l.once(a) {
				checkAccountTypes(map[string]any{strings.Join(levels, "."): nil}, r.types, " (from "+name+")", map[string]bool{}, p)
			}
			return "", nil
		}
	}
	levels = routeLevels(levels, r.types)
	key := strings.Join(levels, ".")
	r.from[key] = name
	mt := t.match(levels)
	if l.badName(mt, key, p) {
		return "", nil
	}
	var v any
	var msg string
	switch f := t.byKey[mt.pattern]; {
	case f != nil && f.entries != nil:
		var list []any
		if list, msg = entriesFromJSON(value); msg == "" {
			v = checkEntries(f.entries, key, list, l.where(key), p)
		}
	case f != nil && f.isStringMap():
		v, msg = splitPairs(value)
	case f != nil:
		var terr *typeError
		if v, terr = fromString(f.typ, value); terr != nil {
			msg = terr.message(f.secret != "")
		}
	case t.byFile[mt.pattern] != nil:
		v = value
	case t.sections[mt.pattern]:
		msg = "is a section, not a key" + l.where(key) + "; set its keys, such as " + envVar(key+".<key>")
	case t.within(mt.pattern) != nil:
		f := t.within(mt.pattern)
		whole := t.concrete(f.key, mt.entry)
		form := "NAME=VALUE pairs separated by commas"
		if f.entries != nil {
			form = "a JSON list of its entries"
		}
		msg = "unknown key" + l.where(key) + "; " + whole + " is set whole, as " + form + ", by " + envVar(whole)
	default:
		msg = unknownKey(mt, l.where(key), true)
	}
	if t.byKey[mt.pattern] != nil || t.byFile[mt.pattern] != nil {
		l.addEntry(mt)
		if msg != "" {
			msg += l.where(key)
		}
	}
	if msg != "" {
		p.add(key, msg)
		return "", nil
	}
	return key, v
}

// resolveSecrets replaces x_file by the content of the file it names. For each
// secret the highest layer that sets x or x_file decides, so an environment
// variable overrides the file in either form; setting both in one layer is an error.
// A secret in a map section is resolved in every entry that some layer names.
// Secrets that readSecret (when set) refuses are not read: their files are recorded
// in unread, by key.
func resolveSecrets(layers []*layer, readFile func(string) ([]byte, error), readSecret func(string) bool,
	unread map[string]string, p *problems) {
	t := keys()
	for i := range t.fields {
		f := &t.fields[i]
		if f.secret == "" {
			continue
		}
		for _, key := range secretKeys(layers, f) {
			if readSecret != nil && !readSecret(key) {
				resolveSecret(layers, f, key, func(name string) ([]byte, error) {
					unread[key] = name
					return nil, errUnread
				}, p)
				continue
			}
			resolveSecret(layers, f, key, readFile, p)
		}
	}
}

// errUnread stands for the content of a secret file that is not read.
var errUnread = errors.New("not read")

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
	if errors.Is(err, errUnread) {
		return // the secret stays empty
	}
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
			DecodeHook: decodeHook,
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
	// The decoder's error wraps a join of the errors of every key (a join within a
	// join for a section, a list's entries): each is reported.
	var walk func(error)
	walk = func(err error) {
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				walk(e)
			}
			return
		}
		de, ok := err.(*mapstructure.DecodeError)
		if !ok {
			var nested *mapstructure.DecodeError
			if u := errors.Unwrap(err); u != nil && errors.As(u, &nested) {
				walk(u) // "decoding failed due to the following error(s)", around the join
				return
			}
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
			p.add(key, te.message(secret)+where(valueKey(key)))
		case secret:
			p.add(key, "has a value of the wrong type"+where(valueKey(key)))
		default:
			p.add(key, inner.Error()+where(valueKey(key)))
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
	wantDuration       = "a duration such as 30s, 1m30s or 500ms"
	wantInt            = "a whole number"
	wantBool           = "true or false"
	wantString         = "a string"
	wantList           = "a list such as [a, b]"
	wantEntries        = "a list of sections, one an entry (- name: …)"
	wantStringMap      = "a section of names and values such as {WH1: 1020000000001, WH2: 1020000000002}"
	wantStringOrNumber = "a string or a whole number"
	wantSize           = "a size such as 1MiB, 512KiB, 2MB or 1048576 (bytes; KiB, MiB, GiB count 1024, kB, MB, GB 1000)"
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
	case map[string]any, map[string]string:
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
	case typ == durationType, typ == sizeType:
		v, err := mapstructure.DecodeHookExec(decodeHook, reflect.ValueOf(s), reflect.New(typ).Elem())
		if err != nil {
			return nil, err.(*typeError) // the hooks fail with nothing else
		}
		return v, nil
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

// splitPairs reads a map of strings from an environment variable: NAME=VALUE pairs
// separated by commas (WH1=1020000000001,WH2=1020000000002), each name and value
// trimmed, empty items dropped. An empty value is an empty map. A name is kept as
// written (the variable's name is upper-cased, its value is not). It returns what
// is wrong, or "".
func splitPairs(s string) (map[string]string, string) {
	out := map[string]string{}
	for item := range strings.SplitSeq(s, ",") {
		if item = strings.TrimSpace(item); item == "" {
			continue
		}
		name, value, ok := strings.Cut(item, "=")
		name, value = strings.TrimSpace(name), strings.TrimSpace(value)
		switch _, dup := out[name]; {
		case !ok || name == "":
			return nil, fmt.Sprintf("must be NAME=VALUE pairs separated by commas, such as WH1=1020000000001,WH2=1020000000002, got %q", item)
		case dup:
			return nil, fmt.Sprintf("gives the name %q twice", name)
		}
		out[name] = value
	}
	return out, ""
}

// entriesFromJSON reads a list of sections from an environment variable: a JSON
// list of objects, [{"name":"main","cron":"*/30 * * * *","warehouses":["WH1"]}].
// Whole numbers are read as such, other numbers as floats. An empty value is an
// empty list. It returns what is wrong, or "".
func entriesFromJSON(s string) ([]any, string) {
	const want = `must be a JSON list of sections such as [{"name":"main","cron":"*/30 * * * *","warehouses":["WH1"]}]`
	if strings.TrimSpace(s) == "" {
		return []any{}, ""
	}
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, want + ": " + err.Error()
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, want + ", with nothing after it"
	}
	v = jsonValue(v)
	list, ok := v.([]any)
	if !ok {
		return nil, want + ", got " + describe(v, false)
	}
	return list, ""
}

// jsonValue turns the numbers of a decoded JSON value into the kinds YAML gives:
// int64 for a whole number, float64 otherwise.
func jsonValue(v any) any {
	switch x := v.(type) {
	case json.Number:
		if n, err := x.Int64(); err == nil {
			return n
		}
		f, _ := x.Float64()
		return f
	case []any:
		for i := range x {
			x[i] = jsonValue(x[i])
		}
	case map[string]any:
		for k := range x {
			x[k] = jsonValue(x[k])
		}
	}
	return v
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

// decodeHook converts and checks every value decoded onto Config: durations and
// sizes by their own hooks, everything else by strictHook.
var decodeHook = mapstructure.ComposeDecodeHookFunc(durationHook, sizeHook, strictHook)

// durationHook reads a duration as Go writes it (30s, 1m30s, 500ms). A bare number
// is refused: 30 would be 30ns.
func durationHook(_, to reflect.Type, data any) (any, error) {
	if to != durationType {
		return data, nil
	}
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
	}
	return nil, &typeError{want: wantDuration, got: data}
}

// sizeHook reads a size (internal/bytesize): a whole number of bytes, or a string
// with a unit.
func sizeHook(_, to reflect.Type, data any) (any, error) {
	if to != sizeType {
		return data, nil
	}
	switch v := data.(type) {
	case int64:
		return v, nil
	case int:
		return int64(v), nil
	case string:
		if n, ok := bytesize.Parse(v); ok {
			return n, nil
		}
	}
	return nil, &typeError{want: wantSize, got: data}
}

// strictHook accepts only values of the field's own type: no number for a string,
// no string for a number. YAML gives strings, bools, ints and floats; the
// environment layer gives the field's type already.
func strictHook(from, to reflect.Value) (any, error) {
	if !from.IsValid() {
		return nil, nil
	}
	data := from.Interface()
	switch {
	case to.Type() == stringMapType:
		// The layers give a map of strings converted already (stringMaps, splitPairs).
		if _, ok := data.(map[string]string); !ok {
			return nil, &typeError{want: wantStringMap, got: data}
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
		// The items are checked one by one: as strings, or as sections.
		want := wantList
		if to.Type().Elem().Kind() == reflect.Struct {
			want = wantEntries
		}
		switch data.(type) {
		case []any, []string:
		default:
			return nil, &typeError{want: want, got: data}
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
