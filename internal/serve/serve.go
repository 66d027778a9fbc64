// Package serve runs an http.Server on its own listener in the background: the
// service's side listeners (admin, the journal pages) start, report their address
// (a port 0 resolved) and stop the same way.
package serve

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
)

// Listener is an http.Server serving one bound address.
type Listener struct {
	srv  *http.Server
	ln   net.Listener
	done chan struct{}
}

// Start binds addr (an error names it) and serves srv on it until Stop; a Serve
// error other than the server's closing is logged as "<name>: listener stopped".
func Start(ctx context.Context, addr string, srv *http.Server, log *slog.Logger, name string) (*Listener, error) {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	l := &Listener{srv: srv, ln: ln, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error(name+": listener stopped", "err", err)
		}
	}()
	return l, nil
}

// Addr is the address listened on, nil for a nil Listener (not started).
func (l *Listener) Addr() net.Addr {
	if l == nil {
		return nil
	}
	return l.ln.Addr()
}

// Stop closes the listener and waits for the requests in flight until ctx ends,
// then closes their connections. Safe on a nil Listener and twice.
func (l *Listener) Stop(ctx context.Context) error {
	if l == nil {
		return nil
	}
	err := l.srv.Shutdown(ctx)
	if err != nil {
		l.srv.Close()
	}
	<-l.done
	return err
}
