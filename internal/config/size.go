package config

import (
	"math"
	"strconv"
	"strings"
)

// Sizes are int64 fields counting bytes (webhooks.max_body). They are written as a
// whole number followed by a unit, or as a bare number of bytes:
//
//	512KiB, 1MiB, 1GiB    binary units: 1 KiB = 1024 bytes, 1 MiB = 1024 KiB, …
//	500kB, 2MB, 1GB       decimal units: 1 kB = 1000 bytes, 1 MB = 1000 kB, …
//	1048576, 1048576B     bytes
//
// Units are read without regard to case (1mib is 1MiB, 2mb is 2MB) and may follow a
// space (1 MiB); fractions (1.5MiB) and negative sizes are not sizes. The
// effective configuration prints a size in the largest unit that divides it, binary
// first: 1048576 as 1MiB, 2000000 as 2MB, 1500 as 1500.
const wantSize = "a size such as 1MiB, 512KiB, 2MB or 1048576 (bytes; KiB, MiB, GiB count 1024, kB, MB, GB 1000)"

// sizeUnits are the units of a size, in the order formatSize tries them.
var sizeUnits = []struct {
	name string
	n    int64
}{
	{"GiB", 1 << 30},
	{"MiB", 1 << 20},
	{"KiB", 1 << 10},
	{"GB", 1e9},
	{"MB", 1e6},
	{"kB", 1e3},
	{"B", 1},
}

// parseSize reads a size (see wantSize). It reports false for anything else,
// including a size beyond int64.
func parseSize(s string) (int64, bool) {
	s = strings.TrimSpace(s)
	end := 0
	for end < len(s) && s[end] >= '0' && s[end] <= '9' {
		end++
	}
	if end == 0 {
		return 0, false
	}
	n, err := strconv.ParseInt(s[:end], 10, 64)
	if err != nil {
		return 0, false
	}
	unit := strings.TrimSpace(s[end:])
	if unit == "" {
		return n, true
	}
	for _, u := range sizeUnits {
		if strings.EqualFold(unit, u.name) {
			if n > math.MaxInt64/u.n {
				return 0, false
			}
			return n * u.n, true
		}
	}
	return 0, false
}

// formatSize prints a size as parseSize reads it: in the largest unit that divides
// it, a binary unit before a decimal one of the same size; 0 and sizes no unit
// divides (1500) as bare numbers of bytes.
func formatSize(n int64) string {
	if n != 0 {
		for _, u := range sizeUnits[:len(sizeUnits)-1] {
			if n%u.n == 0 {
				return strconv.FormatInt(n/u.n, 10) + u.name
			}
		}
	}
	return strconv.FormatInt(n, 10)
}

// sizeValue is a size in the effective configuration: its unit form, or a bare
// number of bytes as a YAML number.
func sizeValue(n int64) any {
	if s := formatSize(n); strings.ContainsFunc(s, func(r rune) bool { return r > '9' }) {
		return s
	}
	return n
}
