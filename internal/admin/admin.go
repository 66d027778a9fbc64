// Package admin is the admin listener of `ordersync run` (admin.listen, default
// 127.0.0.1:9090), apart from the webhook server that faces the internet:
//
//	GET /metrics        Prometheus exposition of the registry given
//	GET /healthz        liveness: the process answers and its loops are alive
//	GET /readyz         readiness: the database, 1C and the engine
//	GET /debug/pprof/   Go's profiles, only with admin.pprof: true
//
// /healthz and /readyz answer 200 when every check passes and 503 otherwise, with
// a JSON body that lists each check, whether it passed and why:
//
//	{"status":"unavailable","checks":[{"name":"database","ok":true,"reason":"answers; the schema is current"},
//	  {"name":"onec","ok":false,"reason":"no answer since 10:04:05: 1c ping: transient: …"}]}
package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"net"
	"net/http"
	"net/http/pprof"
	"sync"
	"time"

	"github.com/ordersync/ordersync/internal/hostcheck"

	"github.com/ordersync/ordersync/internal/serve"
)

// CheckFunc is one check: nil error when it passes, with a word on what it saw;
// the error's text is the reason it fails.
type CheckFunc func(ctx context.Context) (detail string, err error)

// Config of a Server.
type Config struct {
	// Listen is admin.listen, host:port.
	Listen string
	// PProf serves /debug/pprof/ (admin.pprof).
	PProf bool
	// Metrics serves /metrics; nil answers 404 there.
	Metrics http.Handler
	// CheckTimeout bounds each check of one request; default 5s. A check that does
	// not return in time fails, saying so.
	CheckTimeout time.Duration
	Logger       *slog.Logger
}

// Server is the admin listener.
type Server struct {
	cfg Config
	log *slog.Logger

	mu    sync.Mutex
	live  []check
	ready []check

	handler http.Handler
	ln      *serve.Listener // nil until Start
}

type check struct {
	name string
	fn   CheckFunc
}

// Result is one check in the JSON body.
type Result struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Reason string `json:"reason"`
}

// Report is the JSON body of /healthz and /readyz.
type Report struct {
	Status string   `json:"status"` // ok or unavailable
	Checks []Result `json:"checks"`
}

// New returns a server; it listens once started.
func New(cfg Config) *Server {
	if cfg.CheckTimeout <= 0 {
		cfg.CheckTimeout = 5 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg, log: cfg.Logger}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", s.index)
	if cfg.Metrics != nil {
		mux.Handle("GET /metrics", cfg.Metrics)
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { s.serveChecks(w, r, s.checks(false)) })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) { s.serveChecks(w, r, s.checks(true)) })
	if cfg.PProf {
		mux.HandleFunc("GET /debug/pprof/", pprof.Index) // the named profiles: heap, goroutine, …
		mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("POST /debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	}
	s.handler = hostcheck.Guard(mux, nil, "admin", cfg.Logger)
	return s
}

// Live adds a liveness check (/healthz). Checks run in the order added.
func (s *Server) Live(name string, fn CheckFunc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.live = append(s.live, check{name, fn})
}

// Ready adds a readiness check (/readyz). Checks run in the order added.
func (s *Server) Ready(name string, fn CheckFunc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ready = append(s.ready, check{name, fn})
}

func (s *Server) checks(ready bool) []check {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ready {
		return append([]check(nil), s.ready...)
	}
	return append([]check(nil), s.live...)
}

// Handler is the server's routes, for tests and for mounting elsewhere.
func (s *Server) Handler() http.Handler { return s.handler }

// Start binds the address (an error names it) and serves in the background until
// Stop.
func (s *Server) Start(ctx context.Context) error {
	if s.ln != nil {
		return errors.New("admin: already started")
	}
	write := 30 * time.Second
	if s.cfg.PProf {
		write = 2 * time.Minute // /debug/pprof/profile and trace take 30s by default
	}
	ln, err := serve.Start(ctx, s.cfg.Listen, &http.Server{Handler: s.handler, ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout: 10 * time.Second, WriteTimeout: write, IdleTimeout: 60 * time.Second,
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelDebug)}, s.log, "admin")
	if err != nil {
		return err
	}
	s.ln = ln
	return nil
}

// Addr is the address listened on (a port 0 resolved), nil before Start.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Stop closes the listener and waits for the requests in flight until ctx ends,
// then closes their connections. Safe before Start and twice.
func (s *Server) Stop(ctx context.Context) error { return s.ln.Stop(ctx) }

func (s *Server) index(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprintln(w, "ordersync admin listener")
	fmt.Fprintln(w, "  /metrics   Prometheus metrics")
	fmt.Fprintln(w, "  /healthz   liveness (200 or 503, JSON)")
	fmt.Fprintln(w, "  /readyz    readiness: database, 1C, engine (200 or 503, JSON)")
	if s.cfg.PProf {
		fmt.Fprintln(w, "  /debug/pprof/   profiles (admin.pprof: true)")
	}
}

// Run runs the checks at once, each within the timeout, and reports them in order.
func (s *Server) run(ctx context.Context, cs []check) Report {
	results := make([]Result, len(cs))
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = s.runOne(ctx, c)
		}()
	}
	wg.Wait()
	rep := Report{Status: "ok", Checks: results}
	for _, r := range results {
		if !r.OK {
			rep.Status = "unavailable"
		}
	}
	return rep
}

func (s *Server) runOne(ctx context.Context, c check) Result {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.CheckTimeout)
	defer cancel()
	type answer struct {
		detail string
		err    error
	}
	ch := make(chan answer, 1)
	go func() {
		defer func() {
			if v := recover(); v != nil {
				ch <- answer{err: fmt.Errorf("the check panicked: %v", v)}
			}
		}()
		d, err := c.fn(ctx)
		ch <- answer{d, err}
	}()
	select {
	case a := <-ch:
		if a.err != nil {
			return Result{Name: c.name, Reason: a.err.Error()}
		}
		return Result{Name: c.name, OK: true, Reason: a.detail}
	case <-ctx.Done():
		return Result{Name: c.name, Reason: fmt.Sprintf("no answer within %s", s.cfg.CheckTimeout)}
	}
}

func (s *Server) serveChecks(w http.ResponseWriter, r *http.Request, cs []check) {
	rep := s.run(r.Context(), cs)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if rep.Status != "ok" {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	b, _ := json.Marshal(rep)
	w.Write(append(b, '\n'))
}
