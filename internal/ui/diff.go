package ui

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
)

// diffLine is one dotted path whose value differs between two JSON documents.
type diffLine struct {
	Path             string
	Saved, Other     string
	InSaved, InOther bool
}

// diffJSON flattens both documents to dotted paths (lines.0.price) and lists the
// paths whose values differ, in path order, with both values as JSON writes them
// (numbers exactly as sent). A document that is not JSON is one value at path "".
func diffJSON(saved, other []byte) []diffLine {
	a, b := flatten(saved), flatten(other)
	paths := make([]string, 0, len(a)+len(b))
	for p := range a {
		paths = append(paths, p)
	}
	for p := range b {
		if _, ok := a[p]; !ok {
			paths = append(paths, p)
		}
	}
	slices.Sort(paths)
	var out []diffLine
	for _, p := range paths {
		va, ina := a[p]
		vb, inb := b[p]
		if ina && inb && va == vb {
			continue
		}
		out = append(out, diffLine{Path: p, Saved: va, Other: vb, InSaved: ina, InOther: inb})
	}
	return out
}

func flatten(doc []byte) map[string]string {
	out := map[string]string{}
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		out[""] = string(doc)
		return out
	}
	walk("", v, out)
	return out
}

func walk(path string, v any, out map[string]string) {
	join := func(k string) string {
		if path == "" {
			return k
		}
		return path + "." + k
	}
	switch x := v.(type) {
	case map[string]any:
		if len(x) == 0 {
			out[path] = "{}"
		}
		for k, e := range x {
			walk(join(k), e, out)
		}
	case []any:
		if len(x) == 0 {
			out[path] = "[]"
		}
		for i, e := range x {
			walk(join(strconv.Itoa(i)), e, out)
		}
	case json.Number:
		out[path] = x.String()
	case string:
		out[path] = strconv.Quote(x)
	case nil:
		out[path] = "null"
	default:
		b, _ := json.Marshal(x)
		out[path] = string(b)
	}
}
