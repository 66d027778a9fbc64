package config

import (
	"reflect"
	"sort"
	"strings"
	"sync"
	"time"
)

// field is one leaf key of Config, found by reflection on the koanf tags, so that
// the known keys, the secrets, the environment conversion and the effective output
// all follow from the struct.
type field struct {
	key    string       // "onec.timeout"
	index  []int        // for reflect.Value.FieldByIndex
	typ    reflect.Type // of the Go field
	secret string       // "", "true" (masked whole) or "url" (password in the URL masked)
}

// fileKey is the key that names a file holding the secret's value.
func (f field) fileKey() string { return f.key + "_file" }

var durationType = reflect.TypeFor[time.Duration]()

type keyTable struct {
	fields   []field           // in struct order
	byKey    map[string]*field // leaf keys
	byFile   map[string]*field // "onec.password_file" → the onec.password field
	sections map[string]bool   // "onec", …
	all      []string          // every key a file or the environment may set, sorted
}

var keys = sync.OnceValue(func() *keyTable {
	t := &keyTable{
		byKey:    map[string]*field{},
		byFile:   map[string]*field{},
		sections: map[string]bool{},
	}
	t.walk(reflect.TypeFor[Config](), "", nil)
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
	return t
})

func (t *keyTable) walk(typ reflect.Type, prefix string, index []int) {
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
		if sf.Type.Kind() == reflect.Struct {
			t.sections[key] = true
			t.walk(sf.Type, key, idx)
			continue
		}
		switch sf.Type.Kind() {
		case reflect.String, reflect.Int, reflect.Bool:
		default:
			if sf.Type != durationType {
				// A new kind of field needs conversion from the environment,
				// decoding and effective output; fail loudly in every test.
				panic("config: field " + key + " has unsupported type " + sf.Type.String())
			}
		}
		secret := sf.Tag.Get("secret")
		if secret != "" && secret != "true" && secret != "url" {
			panic("config: field " + key + ` has secret tag other than "true" or "url"`)
		}
		t.fields = append(t.fields, field{key: key, index: idx, typ: sf.Type, secret: secret})
	}
}

// known reports whether key may be set in a file or the environment.
func (t *keyTable) known(key string) bool {
	return t.byKey[key] != nil || t.byFile[key] != nil
}

// suggest returns the known key closest to an unknown one, or "" if none is close.
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
// ORDERSYNC_ONEC__BASE_URL.
func envVar(key string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(key, ".", "__"))
}
