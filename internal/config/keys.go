package config

import (
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"
)

// field is one leaf key of Config, found by reflection on the koanf tags, so that
// the known keys, the secrets, the environment conversion and the effective output
// all follow from the struct. A field in the entries of a map section has a key
// with "*" for the entry's name: relay.destinations.*.url. A map of strings
// (connectors.ozon.stock_warehouses) and a list of sections (stock.schedules) are
// one field each; the keys of a list's entries are in its entries.
type field struct {
	key    string       // "onec.timeout", "relay.destinations.*.url"; in a list entry, the entry's own key ("cron")
	index  []int        // for reflect.Value.FieldByIndex, from Config or, in a map or list entry, from the entry's struct
	typ    reflect.Type // of the Go field
	secret string       // "", "true" (masked whole; each item of a list) or "url" (password in the URL masked)
	in     *mapSection  // the map section whose entries hold the field, or nil
	// entries describes the entries of a list of sections ([]SomeStruct), nil for
	// any other field.
	entries *entryList
	// numberText (tag `number:"text"`, strings only): a whole number in the file is
	// taken as its decimal text, as the number was written.
	numberText bool
}

// fileKey is the key that names a file holding the secret's value.
func (f field) fileKey() string { return f.key + "_file" }

// isList reports whether the field is a list of strings.
func (f field) isList() bool { return f.typ == listType }

// isStringMap reports whether the field is a map of strings (map[string]string).
func (f field) isStringMap() bool { return f.typ == stringMapType }

// whole reports whether the field is set as one value although it holds several:
// a map of strings or a list of sections. A later layer replaces it whole.
func (f field) whole() bool { return f.isStringMap() || f.entries != nil }

// entryList is the shape of the entries of a list of sections: stock.schedules is a
// []Schedule, each entry a section of the keys name, cron, warehouses and publish.
// An entry's keys are strings, ints, bools, durations, sizes and lists of strings;
// no sections, maps, lists of sections or secrets within.
type entryList struct {
	fields []field           // keys relative to the entry: "name", "cron"; in struct order
	byKey  map[string]*field // by those keys
}

// suggest returns the entry's key closest to an unknown one, or "".
func (e *entryList) suggest(key string) string {
	best, bestDist := "", 3 // at most two edits away
	for _, f := range e.fields {
		if d := editDistance(key, f.key); d < bestDist {
			best, bestDist = f.key, d
		}
	}
	return best
}

// mapSection is a section whose keys are names the user chooses, each holding an
// entry of the same keys: relay.destinations.crm.url, relay.destinations.bot.url. In
// Config it is a map[string]Struct with a `name:"regexp"` tag saying which names are
// allowed; the defaults of one entry are in entryDefaults.
type mapSection struct {
	key      string         // "relay.destinations"
	index    []int          // of the map field in Config
	elem     reflect.Type   // the entry's struct
	names    *regexp.Regexp // allowed names, anchored
	pattern  string         // the name tag, for messages: "[a-z0-9_-]{1,64}"
	defaults reflect.Value  // an entry before the file and the environment set it
}

var (
	durationType  = reflect.TypeFor[time.Duration]()
	listType      = reflect.TypeFor[[]string]()
	sizeType      = reflect.TypeFor[int64]() // a size in bytes (internal/bytesize)
	stringMapType = reflect.TypeFor[map[string]string]()
)

type keyTable struct {
	fields   []field                // in struct order, a map's entry fields after the map
	byKey    map[string]*field      // leaf keys
	byFile   map[string]*field      // "onec.password_file" → the onec.password field
	sections map[string]bool        // "onec", "relay.destinations", "relay.destinations.*", …
	maps     map[string]*mapSection // "relay.destinations"
	all      []string               // every key a file or the environment may set, sorted
}

var keys = sync.OnceValue(func() *keyTable {
	t := &keyTable{
		byKey:    map[string]*field{},
		byFile:   map[string]*field{},
		sections: map[string]bool{},
		maps:     map[string]*mapSection{},
	}
	t.walk(reflect.TypeFor[Config](), "", nil, nil)
	for i := range t.fields {
		f := &t.fields[i]
		t.byKey[f.key] = f
		t.all = append(t.all, f.key)
		if f.secret != "" {
			t.byFile[f.fileKey()] = f
			t.all = append(t.all, f.fileKey())
		}
	}
	sort.Strings(t.all)
	defs := entryDefaults()
	for key, m := range t.maps {
		m.defaults = reflect.New(m.elem).Elem()
		if d, ok := defs[key]; ok {
			if reflect.TypeOf(d) != m.elem {
				panic(fmt.Sprintf("config: entryDefaults()[%q] is a %T, want a %s", key, d, m.elem))
			}
			m.defaults = reflect.ValueOf(d)
		}
		delete(defs, key)
	}
	for key := range defs {
		panic("config: entryDefaults() has " + key + ", which is not a map section")
	}
	return t
})

func (t *keyTable) walk(typ reflect.Type, prefix string, index []int, in *mapSection) {
	for i := range typ.NumField() {
		sf := typ.Field(i)
		name := sf.Tag.Get("koanf")
		if name == "" || !sf.IsExported() {
			continue
		}
		key := name
		if prefix != "" {
			key = prefix + "." + name
		}
		idx := append(append([]int(nil), index...), i)
		switch {
		case sf.Type.Kind() == reflect.Struct:
			t.sections[key] = true
			t.walk(sf.Type, key, idx, in)
			continue
		case sf.Type.Kind() == reflect.Map && sf.Type != stringMapType:
			// One level of maps is what loading, decoding and the effective output
			// handle; a map in a map entry would need names within names.
			if in != nil {
				panic("config: field " + key + " is a map within the map " + in.key)
			}
			if sf.Type.Key().Kind() != reflect.String || sf.Type.Elem().Kind() != reflect.Struct {
				panic("config: field " + key + " is a " + sf.Type.String() + "; a map section is map[string]SomeStruct")
			}
			pattern := sf.Tag.Get("name")
			if pattern == "" {
				panic("config: map field " + key + ` has no name:"regexp" tag saying which names are allowed`)
			}
			m := &mapSection{
				key:     key,
				index:   idx,
				elem:    sf.Type.Elem(),
				names:   regexp.MustCompile(`^(?:` + pattern + `)$`),
				pattern: pattern,
			}
			t.maps[key] = m
			t.sections[key] = true
			t.sections[key+".*"] = true
			t.walk(m.elem, key+".*", nil, m)
			continue
		}
		f := leafField(sf, key, idx)
		f.in = in
		if sf.Type.Kind() == reflect.Slice && sf.Type.Elem().Kind() == reflect.Struct {
			f.entries = newEntryList(key, sf.Type.Elem())
		}
		t.fields = append(t.fields, f)
	}
}

// leafField makes the field of a key that holds a value, checking its type and tags.
func leafField(sf reflect.StructField, key string, idx []int) field {
	switch sf.Type.Kind() {
	case reflect.String, reflect.Int, reflect.Bool:
	default:
		entries := sf.Type.Kind() == reflect.Slice && sf.Type.Elem().Kind() == reflect.Struct
		if sf.Type != durationType && sf.Type != listType && sf.Type != sizeType && sf.Type != stringMapType && !entries {
			// A new kind of field needs conversion from the environment,
			// decoding and effective output; fail loudly in every test.
			panic("config: field " + key + " has unsupported type " + sf.Type.String())
		}
	}
	secret := sf.Tag.Get("secret")
	switch {
	case secret == "", secret == "true" && (sf.Type.Kind() == reflect.String || sf.Type == listType):
	case secret == "url" && sf.Type.Kind() == reflect.String:
	default:
		panic("config: field " + key + ` has a secret tag other than "true" (string or list of strings) or "url" (string)`)
	}
	numberText := false
	switch n := sf.Tag.Get("number"); {
	case n == "":
	case n == "text" && sf.Type.Kind() == reflect.String:
		numberText = true
	default:
		panic("config: field " + key + ` has a number tag other than "text" (on a string)`)
	}
	return field{key: key, index: idx, typ: sf.Type, secret: secret, numberText: numberText}
}

// newEntryList reads the keys of the entries of the list of sections key.
func newEntryList(key string, elem reflect.Type) *entryList {
	e := &entryList{byKey: map[string]*field{}}
	for i := range elem.NumField() {
		sf := elem.Field(i)
		name := sf.Tag.Get("koanf")
		if name == "" || !sf.IsExported() {
			continue
		}
		k := key + "[]." + name
		switch {
		case sf.Type.Kind() == reflect.Struct, sf.Type.Kind() == reflect.Map,
			sf.Type.Kind() == reflect.Slice && sf.Type != listType:
			panic("config: field " + k + " is a " + sf.Type.String() + "; the entries of a list hold values only")
		case sf.Tag.Get("secret") != "":
			// The environment gives a list whole, as JSON: no _file form per entry.
			panic("config: field " + k + " is a secret in a list entry, which has no _file form")
		}
		f := leafField(sf, name, []int{i})
		e.fields = append(e.fields, f)
	}
	for i := range e.fields {
		e.byKey[e.fields[i].key] = &e.fields[i]
	}
	return e
}

// known reports whether key, in the table's terms (with "*" for names), may be set
// in a file or the environment.
func (t *keyTable) known(key string) bool {
	return t.byKey[key] != nil || t.byFile[key] != nil
}

// match is a concrete key put in the table's terms.
type match struct {
	pattern string      // the key with the entry's name as "*": relay.destinations.*.url
	entry   string      // the entry the key is in, relay.destinations.crm; "" outside map sections
	name    string      // the entry's name, crm
	in      *mapSection // the map section of the entry
	badName bool        // the name is not allowed
}

// match finds what a concrete key, given as its levels, is in the table: in a map
// section, the level after the section's key is an entry's name.
func (t *keyTable) match(levels []string) match {
	var mt match
	out := make([]string, 0, len(levels))
	for i := 0; i < len(levels); i++ {
		out = append(out, levels[i])
		m := t.maps[strings.Join(out, ".")]
		if m == nil || i+1 == len(levels) {
			continue
		}
		i++
		mt.name = levels[i]
		mt.entry = strings.Join(levels[:i+1], ".")
		mt.in = m
		mt.badName = !m.names.MatchString(mt.name)
		out = append(out, "*")
	}
	mt.pattern = strings.Join(out, ".")
	return mt
}

// matchKey is match for a dotted key. An item of a list (events[1]) is matched as
// its list (events).
func (t *keyTable) matchKey(key string) match {
	return t.match(strings.Split(listKey(key), "."))
}

// fieldOf returns the field of a concrete key, or nil.
func (t *keyTable) fieldOf(key string) *field {
	return t.byKey[t.matchKey(key).pattern]
}

// within returns the field of a map of strings or a list of sections that a key, in
// the table's terms, lies inside (connectors.ozon.stock_warehouses.wh1,
// stock.schedules.0.cron), or nil.
func (t *keyTable) within(pattern string) *field {
	for k := pattern; ; {
		i := strings.LastIndexByte(k, '.')
		if i < 0 {
			return nil
		}
		k = k[:i]
		if f := t.byKey[k]; f != nil && f.whole() {
			return f
		}
	}
}

// valueKey is the key whose value holds a concrete key: the key itself, or for an
// item of a list or an entry of a list of sections, the list's key
// (stock.schedules[0].cron → stock.schedules).
func valueKey(key string) string {
	if i := strings.IndexByte(key, '['); i >= 0 {
		return key[:i]
	}
	return key
}

// listKey strips an item's position: relay.destinations.crm.events[1] →
// relay.destinations.crm.events.
func listKey(key string) string {
	if i := strings.IndexByte(key, '['); i >= 0 && strings.HasSuffix(key, "]") {
		return key[:i]
	}
	return key
}

// concrete puts an entry's name into a key of the table: in the entry
// relay.destinations.crm, relay.destinations.*.url is relay.destinations.crm.url. A
// name that no entry gives shows as <name>.
func (t *keyTable) concrete(pattern, entry string) string {
	if entry != "" {
		if m := t.matchKey(entry).in; m != nil && strings.HasPrefix(pattern+".", m.key+".*.") {
			return entry + strings.TrimPrefix(pattern, m.key+".*")
		}
	}
	return strings.ReplaceAll(pattern, "*", "<name>")
}

// decodedKey turns a key as the decoder names it, relay.destinations[crm].events[1],
// into the configuration's form, relay.destinations.crm.events[1].
func (t *keyTable) decodedKey(name string) string {
	var b strings.Builder
	for {
		i := strings.IndexByte(name, '[')
		j := strings.IndexByte(name, ']')
		if i < 0 || j < i {
			b.WriteString(name)
			return b.String()
		}
		b.WriteString(name[:i])
		if t.maps[t.matchKey(b.String()).pattern] != nil {
			b.WriteString("." + name[i+1:j])
		} else {
			b.WriteString(name[i : j+1])
		}
		name = name[j+1:]
	}
}

// suggest returns the known key closest to an unknown one, or "" if none is close.
// Both are in the table's terms.
func (t *keyTable) suggest(key string) string {
	best, bestDist := "", 3 // at most two edits away
	for _, k := range t.all {
		if d := editDistance(key, k); d < bestDist {
			best, bestDist = k, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// envVar is the environment variable that sets key: onec.base_url →
// ORDERSYNC_ONEC__BASE_URL, relay.destinations.crm.url →
// ORDERSYNC_RELAY__DESTINATIONS__CRM__URL. A name given as "*" or "<name>" shows
// as <NAME>.
func envVar(key string) string {
	key = strings.ReplaceAll(userKey(key), "*", "<name>")
	return envPrefix + strings.ToUpper(strings.ReplaceAll(key, ".", "__"))
}
