// Package server is ordersync's HTTP server on http.listen: the webhook receivers
// (any Standard Webhooks sender, Ozon push, the Bitrix24 outgoing webhook), a
// health check, and the routes Config.Handlers adds (the Kaspi price list).
//
// Every webhook is handled in one order: the body is
// read whole under a size limit; the sender is verified on the raw bytes, so an
// unverified request never occupies an event id; the event id and the journal
// registrations are built; inbox.Store.Receive stores the event and registers its
// operations in one transaction; the answer comes from the receipt — the answer of
// a new event, the saved answer of a duplicate, a conflict or a request to retry.
// Nothing here waits for 1C: the engine does that work after the answer has gone.
//
// Each request leaves one log line (source, event id, outcome, reason; never a
// secret and never the body) and one count in Stats.
package server

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"regexp"
	"runtime/debug"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ordersync/ordersync/internal/inbox"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/stdwebhook"
)

// Defaults.
const (
	DefaultListen         = "127.0.0.1:8080"
	DefaultMaxBody        = 1 << 20 // 1 MiB
	DefaultReadTimeout    = 15 * time.Second
	DefaultWriteTimeout   = 15 * time.Second
	DefaultIdleTimeout    = 60 * time.Second
	DefaultReceiveTimeout = 4 * time.Second // under Ozon's 5-second budget
	DefaultTolerance      = stdwebhook.DefaultTolerance
)

// Names of the senders with their own endpoints; no generic source may use them.
const (
	SourceOzon     = "ozon"
	SourceBitrix24 = "bitrix24"
)

// Config configures New.
type Config struct {
	// Listen is the address to listen on (default DefaultListen); ":0" ports work,
	// and Addr tells the bound address.
	Listen string
	// MaxBody bounds every request body (default 1 MiB); a larger one gets 413.
	MaxBody int64
	// ReadTimeout, WriteTimeout and IdleTimeout are those of http.Server (defaults
	// 15s, 15s, 60s). Headers must arrive within min(ReadTimeout, 5s).
	ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	// ReceiveTimeout bounds one Inbox.Receive (default 4s, inside Ozon's 5-second
	// budget); past it the sender is told to retry.
	ReceiveTimeout time.Duration
	// Inbox stores the events and registers their operations (required).
	Inbox inbox.Store
	// Sources are the generic Standard Webhooks senders, POST /webhooks/{name}:
	// name → secrets. Names match [a-z0-9_-]{1,32} (they become the orders' source)
	// and are neither "ozon" nor "bitrix24".
	Sources map[string]SourceConfig
	// Tolerance is how far webhook-timestamp may be from Now, either way (default 5m).
	Tolerance time.Duration
	// Ozon enables POST /webhooks/ozon when set.
	Ozon *OzonConfig
	// Bitrix24 enables POST /webhooks/bitrix24 when set.
	Bitrix24 *Bitrix24Config
	// MoreBitrix24 are further portals, each on POST /webhooks/<its Source>.
	MoreBitrix24 []Bitrix24Config
	// OnRegistered is called after an event was stored and its operations
	// registered (wakes the engine). It must not block.
	OnRegistered func()
	// Handlers are more routes on the listener: ServeMux pattern → handler (e.g.
	// "GET /feeds/kaspi/" → the Kaspi price list). They are served as they are,
	// without the webhooks' counting and log line. A pattern that does not parse,
	// or conflicts with another route, is an error.
	Handlers map[string]http.Handler
	// Logger receives one line per webhook request (default: discarded).
	Logger *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// SourceConfig is one generic sender.
type SourceConfig struct {
	// Secrets are the keys a delivery may be signed with; any one matching is
	// enough (list old and new during a rotation). At least one.
	Secrets []stdwebhook.Secret
}

var sourceNameRe = regexp.MustCompile(`^[a-z0-9_-]{1,32}$`)

// Server is the HTTP server.
type Server struct {
	cfg     Config
	log     *slog.Logger
	now     func() time.Time
	sources map[string]*stdwebhook.Verifier
	ozon    *ozonReceiver
	handler http.Handler
	stats   stats
	panics  atomic.Int64

	mu       sync.Mutex
	srv      *http.Server
	ln       net.Listener
	served   chan struct{} // closed when Serve returned
	stopDone chan struct{} // made by the first Stop, closed when it is done
	stopErr  error
}

// New checks the configuration and builds the server; Start listens.
func New(cfg Config) (*Server, error) {
	if cfg.Inbox == nil {
		return nil, errors.New("server: no inbox store")
	}
	cfg.Listen = cmp.Or(cfg.Listen, DefaultListen)
	cfg.MaxBody = cmp.Or(cfg.MaxBody, DefaultMaxBody)
	if cfg.MaxBody < 0 {
		return nil, fmt.Errorf("server: webhooks.max_body must be positive, got %d", cfg.MaxBody)
	}
	cfg.ReadTimeout = cmp.Or(cfg.ReadTimeout, DefaultReadTimeout)
	cfg.WriteTimeout = cmp.Or(cfg.WriteTimeout, DefaultWriteTimeout)
	cfg.IdleTimeout = cmp.Or(cfg.IdleTimeout, DefaultIdleTimeout)
	cfg.ReceiveTimeout = cmp.Or(cfg.ReceiveTimeout, DefaultReceiveTimeout)
	cfg.Tolerance = cmp.Or(cfg.Tolerance, DefaultTolerance)
	if cfg.Tolerance < time.Second {
		return nil, fmt.Errorf("server: webhooks.tolerance must be at least 1s, got %s", cfg.Tolerance)
	}
	s := &Server{cfg: cfg, log: cfg.Logger, now: cfg.Now, sources: map[string]*stdwebhook.Verifier{}}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	s.stats.init()

	names := make([]string, 0, len(cfg.Sources))
	for name := range cfg.Sources {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		src := cfg.Sources[name]
		switch {
		case name == SourceOzon || name == SourceBitrix24:
			return nil, fmt.Errorf("server: webhooks.sources.%s: the name is taken by its own endpoint", name)
		case !sourceNameRe.MatchString(name):
			return nil, fmt.Errorf("server: webhooks.sources: name %q must match [a-z0-9_-]{1,32}", name)
		case len(src.Secrets) == 0:
			return nil, fmt.Errorf("server: webhooks.sources.%s.secrets: at least one secret is required", name)
		}
		for i, sec := range src.Secrets {
			if sec.IsZero() {
				return nil, fmt.Errorf("server: webhooks.sources.%s.secrets[%d] is empty", name, i)
			}
		}
		s.sources[name] = &stdwebhook.Verifier{
			Secrets:   append([]stdwebhook.Secret(nil), src.Secrets...),
			Tolerance: cfg.Tolerance,
			Now:       s.now,
		}
	}
	if cfg.Ozon != nil {
		o, err := newOzonReceiver(*cfg.Ozon)
		if err != nil {
			return nil, err
		}
		s.ozon = o
	}
	var portals []*bitrixReceiver
	if cfg.Bitrix24 != nil {
		b, err := newBitrixReceiver(*cfg.Bitrix24)
		if err != nil {
			return nil, err
		}
		portals = append(portals, b)
	}
	for _, c := range cfg.MoreBitrix24 {
		switch _, generic := cfg.Sources[c.Source]; {
		case c.Source == "" || c.Source == SourceBitrix24 || c.Source == SourceOzon || generic || !sourceNameRe.MatchString(c.Source):
			return nil, fmt.Errorf("server: a further Bitrix24 portal needs a name of its own, got %q", c.Source)
		}
		b, err := newBitrixReceiver(c)
		if err != nil {
			return nil, err
		}
		portals = append(portals, b)
	}

	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.HandleFunc("POST /webhooks/{source}", s.serve(s.handleGeneric))
	// The specific patterns win over {source}; unconfigured, these names are
	// answered 404 by handleGeneric, which refuses them.
	if s.ozon != nil {
		mux.HandleFunc("POST /webhooks/"+SourceOzon, s.serve(s.handleOzon))
	}
	for _, b := range portals {
		mux.HandleFunc("POST /webhooks/"+b.source, s.serve(s.handleBitrix24(b)))
	}
	patterns := make([]string, 0, len(cfg.Handlers))
	for p := range cfg.Handlers {
		patterns = append(patterns, p)
	}
	sort.Strings(patterns)
	for _, p := range patterns {
		if err := handle(mux, p, cfg.Handlers[p]); err != nil {
			return nil, err
		}
	}
	s.handler = mux
	return s, nil
}

// handle registers an extra route, turning ServeMux's panic on a bad or
// conflicting pattern into an error.
func handle(mux *http.ServeMux, pattern string, h http.Handler) (err error) {
	if h == nil {
		return fmt.Errorf("server: handler for %q is nil", pattern)
	}
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("server: route %q: %v", pattern, v)
		}
	}()
	mux.Handle(pattern, h)
	return nil
}

// Handler is the server's routes, for tests and for mounting elsewhere.
func (s *Server) Handler() http.Handler { return s.handler }

// Start listens on Listen and serves in the background until Stop. ctx bounds the
// listen call; requests get its values, not its cancellation (Stop ends serving).
func (s *Server) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.stopDone != nil:
		return errors.New("server: start after stop")
	case s.srv != nil:
		return errors.New("server: already started")
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("server: listen on %s (http.listen): %w", s.cfg.Listen, err)
	}
	base := context.WithoutCancel(ctx)
	s.srv = &http.Server{
		Handler:           s.handler,
		ReadTimeout:       s.cfg.ReadTimeout,
		ReadHeaderTimeout: min(s.cfg.ReadTimeout, 5*time.Second),
		WriteTimeout:      s.cfg.WriteTimeout,
		IdleTimeout:       s.cfg.IdleTimeout,
		MaxHeaderBytes:    64 << 10,
		BaseContext:       func(net.Listener) context.Context { return base },
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	s.ln = ln
	s.served = make(chan struct{})
	srv, served := s.srv, s.served
	go func() {
		defer close(served)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("http server stopped", "listen", ln.Addr().String(), "error", err)
		}
	}()
	s.log.InfoContext(ctx, "http server listening", "listen", ln.Addr().String())
	return nil
}

// Addr is the bound address once started ("" before).
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return ""
	}
	return s.ln.Addr().String()
}

// Stop stops accepting connections and waits for the requests in flight until ctx
// ends; then it closes the connections still open and returns ctx's error. Safe
// before Start and twice: a second call waits for the first (or its own ctx) and
// returns the first one's result.
func (s *Server) Stop(ctx context.Context) error {
	s.mu.Lock()
	if s.stopDone != nil {
		done := s.stopDone
		s.mu.Unlock()
		select {
		case <-done:
		case <-ctx.Done():
			return fmt.Errorf("server: shutdown: %w", ctx.Err())
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.stopErr
	}
	s.stopDone = make(chan struct{})
	srv, served := s.srv, s.served
	s.mu.Unlock()

	var err error
	if srv != nil {
		if err = srv.Shutdown(ctx); err != nil {
			_ = srv.Close()
			err = fmt.Errorf("server: shutdown: %w", err)
		}
		<-served
	}
	s.mu.Lock()
	s.stopErr = err
	close(s.stopDone)
	s.mu.Unlock()
	return err
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	writeAnswer(w, jsonAnswer(http.StatusOK, map[string]string{"status": "ok"}), 0)
}

// Outcomes counted in Stats and logged.
const (
	outProcessed  = string(inbox.Processed)
	outDuplicate  = string(inbox.Duplicate)
	outConflict   = string(inbox.Conflict)
	outInProgress = string(inbox.InProgress)
	outIgnored    = "ignored"  // understood, nothing to do, nothing stored
	outPing       = "ping"     // Ozon's check, nothing stored
	outRejected   = "rejected" // bad request, nothing stored
	outError      = "error"    // the inbox failed; the sender retries
)

// result is what a handler decided; serve writes, counts and logs it.
type result struct {
	source     string
	eventID    string
	outcome    string
	reason     string // a fixed code for counters ("bad_signature"); "" when nothing is wrong
	detail     string // for the log line only: a field name, an event type; never body text
	answer     inbox.Answer
	retryAfter int // seconds; 0: no Retry-After
	err        error
}

// trace is what a handler has learnt of a request so far (the sender, the event
// id), for the log line of a handler that panicked.
type trace struct {
	mu      sync.Mutex
	source  string
	eventID string
}

type traceKey struct{}

// note records the request's sender and event id as soon as the handler knows them.
func note(r *http.Request, source, eventID string) {
	if tr, ok := r.Context().Value(traceKey{}).(*trace); ok {
		tr.mu.Lock()
		if source != "" {
			tr.source = source
		}
		if eventID != "" {
			tr.eventID = eventID
		}
		tr.mu.Unlock()
	}
}

// panicAnswer is the answer to a delivery whose handler panicked: a 500, so the
// sender retries (a fixed ordersync takes it).
var panicAnswer = jsonAnswer(http.StatusInternalServerError, map[string]string{"status": "error", "reason": "internal error; retry"})

// call runs a handler; a panic is recovered into an error result counted under
// reason "panic" and logged with what the handler knew (never the body).
func (s *Server) call(h func(w http.ResponseWriter, r *http.Request) result, w http.ResponseWriter, r *http.Request) (res result) {
	tr := &trace{source: sourceUnknown}
	r = r.WithContext(context.WithValue(r.Context(), traceKey{}, tr))
	defer func() {
		v := recover()
		if v == nil {
			return
		}
		if v == http.ErrAbortHandler {
			panic(v)
		}
		tr.mu.Lock()
		source, eventID := tr.source, tr.eventID
		tr.mu.Unlock()
		s.panics.Add(1)
		res = result{source: source, eventID: eventID, outcome: outError, reason: "panic",
			answer: panicAnswer, err: fmt.Errorf("the handler panicked: %v\n%s", v, debug.Stack())}
	}()
	return h(w, r)
}

// serve wraps a handler with the answer, the count and the log line. The handler
// decides; it uses w only to limit the body (http.MaxBytesReader) and never writes.
// A handler that panics is answered 500, counted (Stats, reason "panic"; Panics) and
// logged with its event id; the server goes on.
func (s *Server) serve(h func(w http.ResponseWriter, r *http.Request) result) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		res := s.call(h, w, r)
		writeAnswer(w, res.answer, res.retryAfter)
		s.stats.add(res.source, res.outcome, res.reason)

		level := slog.LevelInfo
		switch res.outcome {
		case outRejected, outConflict, outInProgress:
			level = slog.LevelWarn
		case outError:
			level = slog.LevelError
		}
		attrs := []slog.Attr{
			slog.String("source", res.source),
			slog.String("event_id", res.eventID),
			slog.String("outcome", res.outcome),
			slog.Int("status", res.answer.Status),
			slog.Int64("duration_us", time.Since(start).Microseconds()),
		}
		if res.reason != "" {
			attrs = append(attrs, slog.String("reason", res.reason))
		}
		if res.detail != "" {
			attrs = append(attrs, slog.String("detail", res.detail))
		}
		if res.err != nil {
			attrs = append(attrs, slog.String("error", res.err.Error()))
		}
		s.log.LogAttrs(r.Context(), level, "webhook", attrs...)
	}
}

func writeAnswer(w http.ResponseWriter, a inbox.Answer, retryAfter int) {
	h := w.Header()
	if a.ContentType != "" {
		h.Set("Content-Type", a.ContentType)
	}
	h.Set("Cache-Control", "no-store")
	if retryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(retryAfter))
	}
	w.WriteHeader(cmp.Or(a.Status, http.StatusInternalServerError))
	_, _ = w.Write(a.Body)
}

// jsonAnswer encodes v as the answer's body.
func jsonAnswer(status int, v any) inbox.Answer {
	b, err := json.Marshal(v)
	if err != nil {
		panic("server: answer encoding: " + err.Error()) // answers are plain structs and maps
	}
	return inbox.Answer{Status: status, ContentType: "application/json", Body: b}
}

// errTooLarge is readBody's answer for a body over MaxBody.
var errTooLarge = errors.New("body too large")

// readBody reads the whole body, at most MaxBody bytes: verification needs all of
// it, and no larger one is read into memory.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if r.ContentLength > s.cfg.MaxBody {
		return nil, errTooLarge
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBody))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, errTooLarge
		}
		return nil, fmt.Errorf("read body: %w", err)
	}
	return body, nil
}

// formatBytes prints a size the way the configuration writes it.
func formatBytes(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.FormatInt(n>>20, 10) + " MiB"
	case n >= 1<<10 && n%(1<<10) == 0:
		return strconv.FormatInt(n>>10, 10) + " KiB"
	}
	return strconv.FormatInt(n, 10) + " bytes"
}

// mediaType is the request's media type, lower case, without parameters.
func mediaType(r *http.Request) string {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil {
		return ""
	}
	return mt
}

// replies are a sender's answers for the outcomes the caller answers itself.
type replies struct {
	conflict   inbox.Answer
	inProgress inbox.Answer
	failure    inbox.Answer
}

// receive runs Inbox.Receive and turns its receipt into the result.
func (s *Server) receive(r *http.Request, ev inbox.Event, regs []inbox.Registration, answer inbox.Answer, rp replies) result {
	res := result{source: ev.Source, eventID: ev.ID}
	// The registration finishes even when the sender hangs up meanwhile: a
	// transaction cut in the middle only makes the sender's retry do it again.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), s.cfg.ReceiveTimeout)
	defer cancel()
	// What the delivery registers was triggered by its sender.
	ctx = journal.WithActor(ctx, journal.ActorWebhook(ev.Source))
	rc, err := s.cfg.Inbox.Receive(ctx, ev, regs, answer)
	if err != nil {
		res.outcome, res.reason, res.err = outError, "inbox_error", err
		res.answer, res.retryAfter = rp.failure, 5
		return res
	}
	res.outcome = string(rc.Outcome)
	switch rc.Outcome {
	case inbox.Processed:
		res.answer = orAnswer(rc.Answer, answer)
		if s.cfg.OnRegistered != nil {
			s.cfg.OnRegistered()
		}
	case inbox.Duplicate:
		res.answer = orAnswer(rc.Answer, answer)
	case inbox.Conflict:
		res.reason = "event_id_reused"
		res.answer = rp.conflict
	case inbox.InProgress:
		res.reason = "in_progress"
		res.answer, res.retryAfter = rp.inProgress, 1
	default:
		res.outcome, res.reason = outError, "inbox_error"
		res.err = fmt.Errorf("inbox: unknown outcome %q", rc.Outcome)
		res.answer, res.retryAfter = rp.failure, 5
	}
	return res
}

// redelivered answers a redelivery of a stored event with the stored body from the
// inbox alone (inbox.Looker), before the handler builds its registrations (the
// site's before it even parses the body), with the result receive would give it:
// outcome duplicate, the saved answer, the operation's key as detail. ok is false,
// and the handler goes on as for any delivery, when the store cannot look up, the
// event is not stored or stored with another body, the lookup failed otherwise than
// by running out of time, or the stored event has no saved answer or not exactly one
// operation.
//
// A lookup the store has not answered within the receive timeout is answered as a
// Receive that ran out is (rp's failure, retry later): Receive would wait as long
// again on the same database, and the sender's budget is one timeout, not two.
func (s *Server) redelivered(r *http.Request, ev inbox.Event, rp replies) (res result, ok bool) {
	lk, can := s.cfg.Inbox.(inbox.Looker)
	if !can {
		return result{}, false
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), s.cfg.ReceiveTimeout)
	defer cancel()
	rc, found, err := lk.Redelivered(ctx, ev)
	if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return result{source: ev.Source, eventID: ev.ID, outcome: outError, reason: "inbox_error",
			err: fmt.Errorf("inbox: looking the delivery up: %w", err), answer: rp.failure, retryAfter: 5}, true
	}
	if err != nil || !found || rc.Outcome != inbox.Duplicate || rc.Answer.Status == 0 || len(rc.Operations) != 1 {
		return result{}, false
	}
	return result{source: ev.Source, eventID: ev.ID, outcome: outDuplicate, answer: rc.Answer, detail: rc.Operations[0]}, true
}

// orAnswer is saved, or fallback when the store gave no answer (a zero status).
func orAnswer(saved, fallback inbox.Answer) inbox.Answer {
	if saved.Status == 0 {
		return fallback
	}
	return saved
}
