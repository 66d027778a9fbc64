package onecsim

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/ordersync/ordersync/internal/sim"
)

// This file holds what goes wrong around the 1C handler rather than inside it: a
// reverse proxy that gives up on 1C, a web server that does not know the path, a
// server that does not listen.

// SetMissing makes the web server answer 404 with its HTML page, before
// authentication and without 1C running anything, for the named operations
// ("ping", "find", "create", "cancel", "stock"; as routed, so "create" is POST
// /orders while GET /orders still answers), or for every path when none is named,
// as when the publication is gone. It lasts until ClearMissing and replaces the
// previous setting. It panics on an unknown operation (a mistake in a test).
func (s *OneC) SetMissing(ops ...string) {
	if err := validateMissing(ops); err != nil {
		panic(err)
	}
	s.setMissing(ops)
}

// ClearMissing undoes SetMissing: every path is published again.
func (s *OneC) ClearMissing() {
	s.mu.Lock()
	s.missing, s.missingAll = nil, false
	s.mu.Unlock()
}

func (s *OneC) setMissing(ops []string) {
	missing := make(map[string]bool, len(ops))
	for _, op := range ops {
		missing[op] = true
	}
	s.mu.Lock()
	s.missing, s.missingAll = missing, len(ops) == 0
	s.mu.Unlock()
}

func validateMissing(ops []string) error {
	for _, op := range ops {
		switch op {
		case opPing, opFind, opCreate, opCancel, opStock, opFindReturns, opCreateReturn:
		default:
			return fmt.Errorf("sim: missing op %q is not one of ping, find, create, cancel, stock, find_returns, create_return", op)
		}
	}
	return nil
}

func (s *OneC) isMissing(op string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.missingAll || s.missing[op]
}

// answerMissing is the web server's 404 for a path it does not publish: no
// latency, no authentication, no fault, nothing run.
func (s *OneC) answerMissing(w http.ResponseWriter, r *http.Request, op string, allowed bool) {
	counted := op
	if !allowed {
		counted = opOther
	}
	s.mu.Lock()
	s.stats.Requests[counted]++
	s.stats.Missing++
	s.mu.Unlock()
	s.log.DebugContext(r.Context(), "1c sim: missing", "op", op, "method", r.Method, "path", r.URL.Path)
	s.writeHTML(w, http.StatusNotFound, notFoundPage)
}

// gateway504After answers the proxy's 504 after f.Delay while the handler runs on
// in the background, keeping the request's session busy (release ends it), and
// commits after holdOf(f). A create is uncommitted meanwhile; another operation
// does its work at the end, into the void.
func (s *OneC) gateway504After(w http.ResponseWriter, r *http.Request, op string, body []byte, f *sim.Fault, release func()) {
	hold := holdOf(*f)
	bgReq := r.Clone(context.WithoutCancel(r.Context())) // r is not to be used once answered
	s.mu.Lock()
	started := !s.closing
	if started {
		s.inFlight++
		s.bg.Add(1)
	}
	s.mu.Unlock()
	if started {
		go func() {
			defer s.bg.Done()
			defer func() {
				s.mu.Lock()
				s.inFlight--
				s.mu.Unlock()
			}()
			defer release()
			switch op {
			case opCreate:
				s.create(body, hold)
				return
			case opCreateReturn:
				s.createReturn(body, hold)
				return
			}
			if s.sleep(hold) {
				s.serveOp(discardWriter{h: http.Header{}}, bgReq, op, body)
			}
		}()
	} else {
		release()
	}
	s.wait(r.Context(), f.Delay, false)
	// The proxy passes on none of 1C's headers, a new session's cookie included.
	w.Header().Del("Set-Cookie")
	s.writeHTML(w, http.StatusGatewayTimeout, gatewayTimeoutPage)
}

// Down stops listening, as when the web server or the 1C server is down: new
// connections are refused, and the connections open now, idle or busy, are
// closed, so requests in flight are cut. Their handlers run on as 1C's do, and
// what they commit stays. Orders, sessions, faults and counters are kept. Down
// while down does nothing; before Start (or on a simulator mounted as a handler)
// and after Close it is an error.
func (s *OneC) Down() error {
	wasUp, err := s.server.Down()
	s.countDown(wasUp)
	return err
}

// Up listens again on the address Start bound (the same port, so URL stays
// valid) and serves, with everything the base held. It retries the bind for a few
// seconds when the port is not free at once. Up while up does nothing; before
// Start and after Close it is an error.
func (s *OneC) Up() error {
	return s.server.Up()
}

// DownFor goes Down and comes back Up by itself after d, unless Up and Down are
// called meanwhile (then that later Down lasts until its own Up) or the simulator
// is closed. It is an error when d is not positive, before Start and after Close.
func (s *OneC) DownFor(d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("sim: 1c: down for %s: want a positive duration", d)
	}
	wasUp, err := s.server.DownFor(d)
	s.countDown(wasUp)
	return err
}

func (s *OneC) countDown(wasUp bool) {
	if !wasUp {
		return
	}
	s.mu.Lock()
	s.stats.DownPeriods++
	s.mu.Unlock()
}

// notFoundPage is nginx's answer for a path it does not serve.
const notFoundPage = `<html>
<head><title>404 Not Found</title></head>
<body>
<center><h1>404 Not Found</h1></center>
<hr><center>nginx</center>
</body>
</html>
`

// gatewayTimeoutPage is nginx's answer when the upstream does not answer in time.
const gatewayTimeoutPage = `<html>
<head><title>504 Gateway Time-out</title></head>
<body>
<center><h1>504 Gateway Time-out</h1></center>
<hr><center>nginx</center>
</body>
</html>
`
