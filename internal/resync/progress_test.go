package resync

import (
	"bytes"
	"fmt"
	"testing"
)

// TestProgressBar: on a terminal the bar is redrawn in place, and a line written
// meanwhile (a log line) goes above it.
func TestProgressBar(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	p := NewProgress(&b, true)
	p.Start(4)
	p.Step(true)
	fmt.Fprintln(p, "a log line")
	p.Step(false)
	p.Step(true)
	p.Step(true)
	p.Finish()
	want := "\r[                              ] 0/4" +
		"\r[#######                       ] 1/4" +
		"\r\033[Ka log line\n\r[#######                       ] 1/4" +
		"\r[###############               ] 2/4, 1 still failing" +
		"\r[######################        ] 3/4, 1 still failing" +
		"\r[##############################] 4/4, 1 still failing\n"
	if got := b.String(); got != want {
		t.Fatalf("bar\n%q\nwant\n%q", got, want)
	}

	b.Reset()
	p = NewProgress(&b, false)
	p.Start(2)
	p.Step(true)
	fmt.Fprintln(p, "a log line")
	p.Finish()
	if b.String() != "a log line\n" {
		t.Fatalf("not a terminal: %q, want only the log line", b.String())
	}
}
