package resync

import (
	"fmt"
	"io"
	"strings"
	"sync"
)

// Progress draws `\r[#####     ] 12/30, 3 still failing` on a terminal, and
// elsewhere nothing. As an io.Writer it passes what is written on to its stream,
// clearing the bar's line first and drawing the bar again after. It is safe for
// concurrent use.
type Progress struct {
	mu       sync.Mutex
	w        io.Writer
	tty      bool
	total, n int
	failing  int
	drawn    bool
}

const progressWidth = 30

// NewProgress is a Progress on w; tty: w is a terminal, where the bar is drawn.
func NewProgress(w io.Writer, tty bool) *Progress { return &Progress{w: w, tty: tty} }

// Bar reports whether a bar is drawn: on a terminal, until Finish.
func (p *Progress) Bar() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.tty
}

// Start draws the empty bar for total operations.
func (p *Progress) Start(total int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.total = total
	p.draw()
}

// Step counts one operation carried out.
func (p *Progress) Step(done bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n++
	if !done {
		p.failing++
	}
	p.draw()
}

func (p *Progress) draw() {
	if !p.tty || p.total == 0 {
		return
	}
	filled := progressWidth * p.n / p.total
	fmt.Fprintf(p.w, "\r[%s%s] %d/%d", strings.Repeat("#", filled), strings.Repeat(" ", progressWidth-filled), p.n, p.total)
	if p.failing > 0 {
		fmt.Fprintf(p.w, ", %d still failing", p.failing)
	}
	p.drawn = true
}

func (p *Progress) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.drawn {
		fmt.Fprint(p.w, "\r\033[K") // the start of the line, cleared
	}
	n, err := p.w.Write(b)
	if p.drawn {
		p.draw()
	}
	return n, err
}

// Finish ends the bar's line; what is written after goes below it.
func (p *Progress) Finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.drawn {
		fmt.Fprintln(p.w)
		p.drawn = false
	}
	p.tty = false
}
