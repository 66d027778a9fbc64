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

// server is the HTTP server a simulator's Start runs: started once, its address
// readable while it runs, closed any number of times. The zero value is ready.
type server struct {
	mu  sync.Mutex
	srv *http.Server
	ln  net.Listener
}

// start listens on addr and serves h in the background. name begins its errors
// ("sim: name: …"); log, when not nil, is told of a serve error other than the
// server being closed. A second start is an error, even after close.
func (s *server) start(name, addr string, h http.Handler, log *slog.Logger) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("sim: %s: listen %s: %w", name, addr, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	s.mu.Lock()
	if s.srv != nil {
		s.mu.Unlock()
		ln.Close()
		return fmt.Errorf("sim: %s: already started", name)
	}
	s.srv, s.ln = srv, ln
	s.mu.Unlock()
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) && log != nil {
			log.Error(name+" sim: serve", "err", err)
		}
	}()
	return nil
}

// addr is the listening address after start, "" before.
func (s *server) addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return ""
	}
	return s.ln.Addr().String()
}

// url is "http://", the listening address and suffix after start, "" before.
func (s *server) url(suffix string) string {
	a := s.addr()
	if a == "" {
		return ""
	}
	return "http://" + a + suffix
}

// close stops the server started by start. It is safe to call twice and before start.
func (s *server) close() {
	s.mu.Lock()
	srv := s.srv
	s.mu.Unlock()
	if srv != nil {
		srv.Close()
	}
}
