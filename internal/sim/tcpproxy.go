package sim

import (
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// ProxyFaults are the faults a TCPProxy injects, each the chance (0 to 1) that a chunk
// of the stream (what one read returned: an answer, a query's reply) meets it. They
// apply at once to every connection, those open before SetFaults included.
type ProxyFaults struct {
	// ResetMidAnswer forwards the request and the first part of the answer, then
	// resets both connections (TCP RST): the server did its work, the client saw half
	// an answer.
	ResetMidAnswer float64
	// Stall holds the answer for StallFor before passing it on (longer than the
	// client's timeout, a client gives up while the server has answered).
	Stall    float64
	StallFor time.Duration
	// CloseAfterRequest forwards the request and closes the client's connection at
	// once, before any answer: the server did its work, the client got nothing.
	CloseAfterRequest float64
}

// ProxyStats count what a TCPProxy did.
type ProxyStats struct {
	Connections, Resets, Stalls, Closes int64
}

// TCPProxy is a fault-injecting TCP proxy on 127.0.0.1 in front of one target (the
// 1C simulator, a PostgreSQL server), for fault tests: connections are passed
// through, or reset in mid-answer, stalled, or closed right after the request.
type TCPProxy struct {
	target string
	ln     net.Listener

	done chan struct{} // closed by Close: stalls end

	mu     sync.Mutex
	faults ProxyFaults
	rnd    *rand.Rand
	conns  map[net.Conn]struct{}
	closed bool

	wg                                 sync.WaitGroup
	connections, resets, stalls, close atomic.Int64
}

// NewTCPProxy listens on a free port of 127.0.0.1 and forwards to target.
func NewTCPProxy(target string, seed uint64) (*TCPProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &TCPProxy{target: target, ln: ln, rnd: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		conns: map[net.Conn]struct{}{}, done: make(chan struct{})}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the proxy's host:port.
func (p *TCPProxy) Addr() string { return p.ln.Addr().String() }

// SetFaults sets the faults of the connections accepted from now on.
func (p *TCPProxy) SetFaults(f ProxyFaults) {
	p.mu.Lock()
	p.faults = f
	p.mu.Unlock()
}

// Stats returns the counters.
func (p *TCPProxy) Stats() ProxyStats {
	return ProxyStats{Connections: p.connections.Load(), Resets: p.resets.Load(), Stalls: p.stalls.Load(), Closes: p.close.Load()}
}

// Close stops listening, cuts every connection and waits for the proxy's goroutines.
func (p *TCPProxy) Close() {
	p.mu.Lock()
	if !p.closed {
		close(p.done)
	}
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.ln.Close()
	p.wg.Wait()
}

type fault int

const (
	passThrough fault = iota
	resetMidAnswer
	stall
	closeAfterRequest
)

// draw decides what happens to the next chunk of an answer (answer true) or of a
// request.
func (p *TCPProxy) draw(answer bool) (fault, time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f, x := p.faults, p.rnd.Float64()
	if !answer {
		if x < f.CloseAfterRequest {
			return closeAfterRequest, 0
		}
		return passThrough, 0
	}
	switch {
	case x < f.ResetMidAnswer:
		return resetMidAnswer, 0
	case x < f.ResetMidAnswer+f.Stall:
		return stall, f.StallFor
	}
	return passThrough, 0
}

func (p *TCPProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *TCPProxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

func (p *TCPProxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(client) {
			return
		}
		p.connections.Add(1)
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			defer p.untrack(client)
			server, err := net.DialTimeout("tcp", p.target, 5*time.Second)
			if err != nil {
				return
			}
			if !p.track(server) {
				return
			}
			defer p.untrack(server)
			p.serve(client, server)
		}()
	}
}

// serve pipes client and server, drawing a fault for every chunk.
func (p *TCPProxy) serve(client, server net.Conn) {
	done := make(chan struct{}, 2)
	go func() { // client → server
		defer func() { done <- struct{}{} }()
		buf := make([]byte, 32<<10)
		for {
			n, err := client.Read(buf)
			if n > 0 {
				if _, werr := server.Write(buf[:n]); werr != nil {
					reset(client)
					return
				}
				if f, _ := p.draw(false); f == closeAfterRequest {
					p.close.Add(1)
					reset(client) // the request is on its way; its answer never comes back
					return
				}
			}
			if err != nil {
				if tc, ok := server.(*net.TCPConn); ok {
					tc.CloseWrite()
				}
				return
			}
		}
	}()
	go func() { // server → client
		defer func() { done <- struct{}{} }()
		buf := make([]byte, 32<<10)
		for {
			n, err := server.Read(buf)
			if n > 0 {
				switch f, stallFor := p.draw(true); f {
				case resetMidAnswer:
					p.resets.Add(1)
					client.Write(buf[:max(1, n/2)])
					reset(client)
					reset(server)
					return
				case stall:
					p.stalls.Add(1)
					select {
					case <-time.After(stallFor):
					case <-p.done:
						return
					}
				}
				if _, werr := client.Write(buf[:n]); werr != nil {
					reset(server)
					return
				}
			}
			if err != nil {
				if errors.Is(err, io.EOF) {
					if tc, ok := client.(*net.TCPConn); ok {
						tc.CloseWrite()
					}
				} else {
					reset(client)
				}
				return
			}
		}
	}()
	// Either side ending ends the connection: the other goroutine is unblocked.
	<-done
	client.Close()
	server.Close()
	<-done
}

// reset closes c with an RST instead of a FIN.
func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	c.Close()
}
