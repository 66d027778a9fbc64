package main

import "testing"

func TestGCPercentDefaultOnlyWithoutGOGC(t *testing.T) {
	t.Parallel()
	env := func(m map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	}
	for name, m := range map[string]map[string]string{"no GOGC": nil, "an empty GOGC": {"GOGC": ""}} {
		if p, ok := gcPercentFor(env(m)); !ok || p != defaultGCPercent {
			t.Fatalf("%s: got %d, %v; want %d, true", name, p, ok, defaultGCPercent)
		}
	}
	for _, v := range []string{"100", "off", "200"} {
		if p, ok := gcPercentFor(env(map[string]string{"GOGC": v})); ok {
			t.Fatalf("GOGC=%q: got %d, true; want the operator's value left alone", v, p)
		}
	}
}
