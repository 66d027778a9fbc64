package sim

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// upRetryFor is how long Up keeps trying to bind the address again, and
// upRetryEvery how often: the port of a just-closed listener may still be held for
// a moment (a listener not yet closed by a racing down, another process).
const (
	upRetryFor   = 5 * time.Second
	upRetryEvery = 10 * time.Millisecond
)

// Server is the HTTP server a simulator's Start runs: started once, its address
// readable while it runs, taken down and brought up again on the same address any
// number of times, closed any number of times. The zero value is ready.
type Server struct {
	// op serialises down and up, so that two of them never race for the port.
	op sync.Mutex

	mu      sync.Mutex
	name    string
	handler http.Handler
	log     *slog.Logger
	address string       // the address listened on, kept while down
	srv     *http.Server // nil while down
	started bool
	closed  bool
	done    chan struct{} // closed by Close, once started
	downGen int           // counts downs, so a timed up knows whether its down still holds
	wg      sync.WaitGroup
}

// Start listens on addr and serves h in the background. name begins its errors
// ("sim: name: …"); log, when not nil, is told of a serve error other than the
// server being closed. A second Start is an error, even after Close.
func (s *Server) Start(name, addr string, h http.Handler, log *slog.Logger) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("sim: %s: listen %s: %w", name, addr, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		ln.Close()
		return fmt.Errorf("sim: %s: already started", name)
	}
	s.name, s.handler, s.log = name, h, log
	s.address = ln.Addr().String()
	s.started = true
	s.done = make(chan struct{})
	s.serveLocked(ln)
	return nil
}

// serveLocked serves on ln in the background; s.mu is held.
func (s *Server) serveLocked(ln net.Listener) {
	srv := &http.Server{Handler: s.handler, ReadHeaderTimeout: 10 * time.Second}
	s.srv = srv
	name, log := s.name, s.log
	s.wg.Go(func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) && log != nil {
			log.Error(name+" sim: serve", "err", err)
		}
	})
}

// Addr is the listening address after Start (also while down or after Close), ""
// before.
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.address
}

// URL is "http://", the listening address and suffix after Start, "" before.
func (s *Server) URL(suffix string) string {
	a := s.Addr()
	if a == "" {
		return ""
	}
	return "http://" + a + suffix
}

// Down stops listening and closes every connection, idle or not, so that new
// connections are refused and requests in flight are cut; their handlers run on.
// It reports whether the server was up.
func (s *Server) Down() (bool, error) {
	s.op.Lock()
	defer s.op.Unlock()
	s.mu.Lock()
	if err := s.usableLocked(); err != nil {
		s.mu.Unlock()
		return false, err
	}
	srv := s.srv
	s.srv = nil
	s.downGen++
	s.mu.Unlock()
	if srv == nil {
		return false, nil
	}
	srv.Close()
	return true, nil
}

// Up listens again on the address of Start and serves, retrying the bind for a
// while. It is a no-op when the server is up.
func (s *Server) Up() error {
	s.op.Lock()
	defer s.op.Unlock()
	s.mu.Lock()
	if err := s.usableLocked(); err != nil || s.srv != nil {
		s.mu.Unlock()
		return err
	}
	name, addr, done := s.name, s.address, s.done
	s.mu.Unlock()

	// Go's net.Listen sets SO_REUSEADDR on Unix, so a port whose connections linger
	// in TIME_WAIT binds at once; the retries cover a listener still being closed.
	deadline := time.Now().Add(upRetryFor)
	var ln net.Listener
	for {
		var err error
		if ln, err = net.Listen("tcp", addr); err == nil {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("sim: %s: listen again on %s: %w", name, addr, err)
		}
		select {
		case <-done:
			return fmt.Errorf("sim: %s: closed", name)
		case <-time.After(upRetryEvery):
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		ln.Close()
		return fmt.Errorf("sim: %s: closed", name)
	}
	s.serveLocked(ln)
	return nil
}

// DownFor takes the server down and brings it up again after d, unless it is
// brought up and down again meanwhile, or closed. It reports whether the server was
// up.
func (s *Server) DownFor(d time.Duration) (bool, error) {
	wasUp, err := s.Down()
	if err != nil {
		return false, err
	}
	s.mu.Lock()
	gen, done := s.downGen, s.done
	s.mu.Unlock()
	s.wg.Go(func() {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-done:
			return
		case <-t.C:
		}
		s.mu.Lock()
		current := s.downGen == gen && !s.closed
		log, name := s.log, s.name
		s.mu.Unlock()
		if !current {
			return
		}
		if err := s.Up(); err != nil && log != nil {
			log.Error(name+" sim: come back up", "err", err)
		}
	})
	return wasUp, nil
}

func (s *Server) usableLocked() error {
	switch {
	case !s.started:
		return fmt.Errorf("sim: not started")
	case s.closed:
		return fmt.Errorf("sim: %s: closed", s.name)
	}
	return nil
}

// Close stops the server started by Start and waits for its own goroutines (not
// for handlers). It is safe to call twice and while down; before Start it does
// nothing.
func (s *Server) Close() {
	s.mu.Lock()
	if !s.started {
		s.mu.Unlock()
		return
	}
	srv := s.srv
	s.srv = nil
	if !s.closed {
		s.closed = true
		if s.done != nil {
			close(s.done)
		}
	}
	s.mu.Unlock()
	if srv != nil {
		srv.Close()
	}
	s.wg.Wait()
}
