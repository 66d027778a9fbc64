package stock

import "fmt"

// maxWarnings bounds the warnings a snapshot or a publish lists; the rest are
// counted in a last line.
const maxWarnings = 50

// AddWarning appends w to ws unless ws already lists maxWarnings; then it counts
// the rest in a last line. It returns the new list and the count of those left out.
func AddWarning(ws []string, left int, w string) ([]string, int) {
	if len(ws) < maxWarnings {
		return append(ws, w), left
	}
	return ws, left + 1
}

// CloseWarnings adds the line that counts the warnings left out, if any.
func CloseWarnings(ws []string, left int) []string {
	if left > 0 {
		ws = append(ws, fmt.Sprintf("and %d more", left))
	}
	return ws
}
