// Package bytesize reads and writes sizes in bytes the way the configuration
// writes them (webhooks.max_body, onec.max_response): a whole number followed by a
// unit, or a bare number of bytes:
//
//	512KiB, 1MiB, 1GiB    binary units: 1 KiB = 1024 bytes, 1 MiB = 1024 KiB, …
//	500kB, 2MB, 1GB       decimal units: 1 kB = 1000 bytes, 1 MB = 1000 kB, …
//	1048576, 1048576B     bytes
//
// Units are read without regard to case (1mib is 1MiB, 2mb is 2MB) and may follow a
// space (1 MiB); fractions (1.5MiB) and negative sizes are not sizes.
package bytesize

import (
	"math"
	"strconv"
	"strings"
)

// units are the units of a size, in the order Text tries them; the binary ones
// first, then the decimal ones, then bytes.
var units = []unit{
	{"GiB", 1 << 30},
	{"MiB", 1 << 20},
	{"KiB", 1 << 10},
	{"GB", 1e9},
	{"MB", 1e6},
	{"kB", 1e3},
	{"B", 1},
}

// Parse reads a size (see the package comment). It reports false for anything
// else, including a size beyond int64.
func Parse(s string) (int64, bool) {
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
	for _, u := range units {
		if strings.EqualFold(unit, u.name) {
			if n > math.MaxInt64/u.n {
				return 0, false
			}
			return n * u.n, true
		}
	}
	return 0, false
}

// Text writes a size as Parse reads it: in the largest unit that divides it, a
// binary unit before a decimal one of the same size (128000 is 125KiB); 0 and sizes
// no unit divides (1500) as bare numbers of bytes.
func Text(n int64) string {
	if u, ok := largest(n, units[:len(units)-1]); ok {
		return strconv.FormatInt(n/u.n, 10) + u.name
	}
	return strconv.FormatInt(n, 10)
}

// Format writes a limit on an answer's size for the error that names it: in the
// largest binary unit that divides it (16MiB), else as "n bytes".
func Format(n int64) string {
	if u, ok := largest(n, units[:3]); ok {
		return strconv.FormatInt(n/u.n, 10) + u.name
	}
	return strconv.FormatInt(n, 10) + " bytes"
}

type unit struct {
	name string
	n    int64 // bytes
}

// largest returns the first of us that divides n, which is not 0.
func largest(n int64, us []unit) (unit, bool) {
	if n != 0 {
		for _, u := range us {
			if n%u.n == 0 {
				return u, true
			}
		}
	}
	return unit{}, false
}
