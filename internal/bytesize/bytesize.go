// Package bytesize writes a limit on an answer's size the way the configuration
// writes sizes, for the error that names the limit: in the largest binary unit that
// divides it (64MiB), else in bytes.
package bytesize

import "fmt"

// Format is n in the largest binary unit that divides it (16MiB), else "n bytes".
func Format(n int64) string {
	for _, u := range []struct {
		name string
		n    int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n != 0 && n%u.n == 0 {
			return fmt.Sprintf("%d%s", n/u.n, u.name)
		}
	}
	return fmt.Sprintf("%d bytes", n)
}
