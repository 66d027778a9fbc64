// Package wire is the HTTP transport that both 1C clients share: the client of
// the ordersync HTTP service (internal/onec/httpservice) and the client of the
// standard OData interface (internal/onec/odata).
//
// It owns what talking to a real 1C publication takes, whatever the interface:
// Basic authentication in UTF-8, a global bound on concurrent requests (1C
// sessions and licences are scarce), optional reuse of 1C sessions, a bound on the
// size of an answer (onec.max_response: a larger one is never read into memory),
// tolerance of a leading BOM, and the attempt journal's record of every exchange.
// Idempotent GETs are retried inside the call; a POST is sent once and never again.
//
// It classifies what has no answer to judge; a client's Judge classifies the rest:
//
//	no answer, request not written (dial, timeout)    Transient
//	no answer after a GET was written                 Transient (retried)
//	no answer after a POST was written                Unknown
//	an answer larger than onec.max_response           GET: Transient (not retried within the call); POST: Unknown (1C answered: it may have acted)
//	400 refusing the session a request was sent on    Transient; a GET renews the session and goes on
package wire

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-resty/resty/v2"

	"github.com/ordersync/ordersync/internal/backoff"
	"github.com/ordersync/ordersync/internal/onec"
)

// Defaults of Config.
const (
	DefaultTimeout        = 30 * time.Second
	DefaultMaxConcurrency = 4
	DefaultGetRetries     = 3
	DefaultRetryBackoff   = 200 * time.Millisecond
	DefaultMaxResponse    = 64 << 20 // bytes
)

// maxRetryWait caps one wait between GET retries; retryJitter is how far, in
// percent, a wait may be off its nominal length either way.
const (
	maxRetryWait = 5 * time.Second
	retryJitter  = 20
)

// defaultContentType is the Content-Type of a body whose Call names none.
const defaultContentType = "application/json; charset=utf-8"

// Config configures a Conn; the comments name the configuration keys.
type Config struct {
	// BaseURL is onec.base_url, the root of the interface a publication serves:
	// http://1c.local/trade/hs/ordersync/v1, http://1c.local/trade/odata/standard.odata.
	BaseURL string
	// Username and Password are onec.username and onec.password (Basic, UTF-8). An
	// empty Username sends no credentials.
	Username, Password string
	// Timeout bounds one HTTP exchange (onec.timeout); default 30s. Waiting for a
	// free slot is bounded by the caller's context only.
	Timeout time.Duration
	// MaxConcurrency bounds concurrent requests to the base (onec.max_concurrency);
	// default 4. With SessionReuse it is also the most sessions kept.
	MaxConcurrency int
	// SessionReuse keeps 1C sessions between requests (onec.session_reuse).
	SessionReuse bool
	// GetRetries is how many more times an idempotent GET is tried after a transient
	// failure; 0 means the default 3, a negative value none.
	GetRetries int
	// RetryBackoff is the first wait between GET tries, doubled each time, with
	// jitter; default 200ms.
	RetryBackoff time.Duration
	// MaxResponse bounds the body of one answer, in bytes (onec.max_response);
	// default 64 MiB. A larger answer is not read beyond the limit: the call fails
	// with an error naming the key (see the classification above).
	MaxResponse int64
	// Logger receives one debug line per exchange; default discards. Neither the
	// password nor the Authorization header ever reach it.
	Logger *slog.Logger
	// Transport replaces the HTTP transport (custom TLS, tests); by default Go's,
	// keeping an idle connection for every one of the MaxConcurrency slots.
	Transport http.RoundTripper
	// FinishPath is the path below BaseURL that Close GETs to finish a kept session
	// ("/ping" for the HTTP service); empty, BaseURL itself.
	FinishPath string
	// Example is shown in the "onec.base_url is required" error, e.g.
	// "http://1c.local/trade/hs/ordersync/v1".
	Example string
}

// Call is one request: what is sent, and which answers the caller decodes itself.
type Call struct {
	// Op names the operation in errors and logs ("create").
	Op string
	// Method is the HTTP method; only a GET is idempotent, and retried.
	Method string
	// Path is below BaseURL, escaped as it is sent, as errors name it and the
	// journal records it ("/orders").
	Path string
	// Query is encoded the usual way (spaces as '+'). RawQuery is an already
	// encoded query sent byte for byte (OData needs %20 for spaces). A call sets
	// one of them at most.
	Query    url.Values
	RawQuery string
	// Body is sent with ContentType, by default "application/json; charset=utf-8".
	Body        []byte
	ContentType string
	// EmptyBody sends a POST without a Body with an explicit Content-Length: 0 (IIS
	// answers 411 without).
	EmptyBody bool
	// Header holds extra request headers. The session's headers are the Conn's,
	// and Content-Type is ContentType's when a body is sent.
	Header map[string]string
	// Accept lists the statuses the caller decodes itself; by default only 200.
	Accept func(status int) bool
	// Stream, when set on a GET, is handed the body of a 200 answer as it arrives
	// (at most onec.max_response of it) instead of the body being read whole: a
	// large answer ($metadata) is never held. The Answer's Body is then empty and
	// Read counts the bytes. A failure to read the body is Transient; Stream's own
	// error (the body does not parse) is Permanent.
	Stream func(body io.Reader) error
}

// Accepts reports whether the caller decodes an answer of status itself.
func (k Call) Accepts(status int) bool {
	if k.Accept != nil {
		return k.Accept(status)
	}
	return status == http.StatusOK
}

// Idempotent reports whether k changes nothing in 1C (a GET): it may be retried.
func (k Call) Idempotent() bool { return k.Method == http.MethodGet }

// Answer is a status, body and header 1C answered, the body's BOM removed.
type Answer struct {
	Status int
	Body   []byte
	Header http.Header
	// Read is how many bytes of a streamed body (Call.Stream) were read.
	Read int64
}

// Judge is what a client says of an answer: success, or a classified *onec.Error.
type Judge interface {
	// Judge turns an answer into the call's success or a classified error. It is
	// called while the call still holds its onec.max_concurrency slot.
	Judge(k Call, ans Answer) (Answer, error)
	// SessionRefused: the answer is 1C refusing the session the request was sent on
	// (not the request): the handler never ran. It is asked only of a 400 to a
	// request sent on a kept session.
	SessionRefused(ans Answer) bool
}

// Conn talks to one 1C publication. It is safe for concurrent use.
type Conn struct {
	cfg      Config
	retries  int    // GET retries: cfg.GetRetries, a negative one made 0
	base     string // BaseURL without a trailing slash
	basePath string // its path, for the attempt journal
	judge    Judge
	rc       *resty.Client
	slots    chan *slot
	log      *slog.Logger
	// acquiring, when not nil (only tests set it), is called as a call asks for a
	// slot, before it waits for one.
	acquiring func()
}

// slot is one permit to talk to 1C and, with session reuse, the session it holds.
// Only the goroutine holding the permit touches it.
type slot struct {
	cookie string
}

const sessionCookie = "ibsession"

// New checks cfg and returns a connection whose answers j judges. Errors name the
// configuration key at fault.
func New(cfg Config, j Judge) (*Conn, error) {
	if strings.TrimSpace(cfg.BaseURL) == "" {
		msg := "onec.base_url is required"
		if cfg.Example != "" {
			msg += ", e.g. " + cfg.Example
		}
		return nil, errors.New(msg)
	}
	u, err := url.Parse(cfg.BaseURL)
	switch {
	case err != nil:
		// The parser's error quotes the whole URL, password included: keep its cause only.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("onec.base_url is not a URL: %w", err)
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("onec.base_url %q must start with http:// or https://", cfg.BaseURL)
	case u.Host == "":
		return nil, fmt.Errorf("onec.base_url %q has no host", cfg.BaseURL)
	case u.User != nil:
		return nil, errors.New("onec.base_url must not carry credentials: set onec.username and onec.password instead")
	case u.RawQuery != "" || u.Fragment != "":
		return nil, fmt.Errorf("onec.base_url %q must not have a query or a fragment", cfg.BaseURL)
	}
	if cfg.Timeout < 0 {
		return nil, fmt.Errorf("onec.timeout %s must be positive", cfg.Timeout)
	}
	if cfg.MaxConcurrency < 0 {
		return nil, fmt.Errorf("onec.max_concurrency %d must be positive", cfg.MaxConcurrency)
	}
	if cfg.RetryBackoff < 0 {
		return nil, fmt.Errorf("retry backoff %s must be positive", cfg.RetryBackoff)
	}
	if cfg.MaxResponse < 0 {
		return nil, fmt.Errorf("onec.max_response %d must be positive", cfg.MaxResponse)
	}
	cfg.MaxResponse = cmp.Or(cfg.MaxResponse, DefaultMaxResponse)
	cfg.Timeout = cmp.Or(cfg.Timeout, DefaultTimeout)
	cfg.MaxConcurrency = cmp.Or(cfg.MaxConcurrency, DefaultMaxConcurrency)
	cfg.RetryBackoff = cmp.Or(cfg.RetryBackoff, DefaultRetryBackoff)
	cfg.GetRetries = cmp.Or(cfg.GetRetries, DefaultGetRetries)
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("component", "onec")

	// No cookie jar (sessions are managed per slot), no redirects (a redirect from
	// a publication means a login page or a wrong URL, and following one would turn
	// a POST into a GET), no resty retries (a POST must never be resent).
	transport := cfg.Transport
	if transport == nil {
		// As many idle connections kept to 1C as there are slots: a transport that
		// keeps fewer closes some after every busy round and opens them again (a
		// TLS handshake each, to a real 1C) for the next.
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = cfg.MaxConcurrency
		t.MaxIdleConns = max(t.MaxIdleConns, cfg.MaxConcurrency)
		transport = t
	}
	hc := &http.Client{
		Transport: transport,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
	// Calls read answers themselves (readBody); the limit on the client bounds any
	// other (the session-finishing GET of Close).
	rc := resty.NewWithClient(hc).
		SetResponseBodyLimit(int(min(cfg.MaxResponse, math.MaxInt))).
		SetRetryCount(0).
		SetDisableWarn(true).
		SetLogger(restyLogger{log}).
		SetHeader("Accept", "application/json").
		SetHeader("User-Agent", "ordersync")
	if cfg.Username != "" {
		rc.SetBasicAuth(cfg.Username, cfg.Password)
	}

	c := &Conn{
		cfg:      cfg,
		retries:  max(cfg.GetRetries, 0),
		base:     strings.TrimRight(u.String(), "/"),
		basePath: strings.TrimRight(u.EscapedPath(), "/"),
		judge:    j,
		rc:       rc,
		slots:    make(chan *slot, cfg.MaxConcurrency),
		log:      log,
	}
	for range cfg.MaxConcurrency {
		c.slots <- &slot{}
	}
	return c, nil
}

// Base is BaseURL without a trailing slash.
func (c *Conn) Base() string { return c.base }

// Config is the configuration the connection runs with, defaults applied.
func (c *Conn) Config() Config { return c.cfg }

// Close ends the 1C sessions the connection keeps, so they free their licences
// now rather than when 1C times them out. It waits for requests in flight, within
// ctx. The connection must not be used afterwards.
func (c *Conn) Close(ctx context.Context) error {
	held := make([]*slot, 0, cap(c.slots))
	defer func() {
		for _, s := range held {
			c.slots <- s
		}
	}()
	for range cap(c.slots) {
		select {
		case s := <-c.slots:
			held = append(held, s)
		case <-ctx.Done():
			return fmt.Errorf("1c: close: %w", ctx.Err())
		}
	}
	for _, s := range held {
		if s.cookie == "" {
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
		_, err := c.rc.R().SetContext(rctx).
			SetCookie(&http.Cookie{Name: sessionCookie, Value: s.cookie}).
			SetHeader("IBSession", "finish").
			Get(c.base + c.cfg.FinishPath)
		cancel()
		c.log.DebugContext(ctx, "1c session finished", "err", err)
		s.cookie = ""
	}
	return nil
}

// Do runs k: a GET with retries on transient failures, a POST exactly once. An
// answer k accepts comes back as the Judge passed it; any failure is a classified
// *onec.Error.
func (c *Conn) Do(ctx context.Context, k Call) (Answer, error) {
	if k.Query != nil && k.RawQuery != "" {
		return Answer{}, &onec.Error{Class: onec.Permanent, Op: k.Op, Path: k.Path,
			Message: "the call sets both Query and RawQuery; nothing was sent"}
	}
	if !k.Idempotent() {
		return c.once(ctx, k)
	}
	var err, last error
	for n := 0; ; n++ {
		if err = context.Cause(ctx); err != nil {
			break
		}
		var ans Answer
		if ans, err = c.once(ctx, k); err == nil {
			return ans, nil
		}
		last = err
		// A too large answer is not tried again: the same request gets the same
		// answer, and reading the limit's worth of bytes again is for nothing.
		if TooLarge(err) || onec.ClassOf(err) != onec.Transient || n == c.retries {
			break
		}
		t := time.NewTimer(backoff.Retry(c.cfg.RetryBackoff, maxRetryWait, n+1, retryJitter))
		select {
		case <-ctx.Done(): // said at the top of the loop
			t.Stop()
		case <-t.C:
		}
	}
	var oe *onec.Error
	if errors.As(err, &oe) {
		return Answer{}, err
	}
	// The context ended before a try or between two.
	e := &onec.Error{Class: onec.Transient, Op: k.Op, Path: k.Path, Err: err}
	if errors.As(last, &oe) {
		e.Status, e.Code, e.Message, e.Field = oe.Status, oe.Code, oe.Message, oe.Field
		e.Err = fmt.Errorf("%w (last failure: %w)", err, last)
	}
	return Answer{}, e
}

// once makes one try of k on one slot, plus, for a GET, one more on a new session
// when 1C no longer knows the one it was sent on.
func (c *Conn) once(ctx context.Context, k Call) (Answer, error) {
	s, err := c.acquire(ctx)
	if err != nil {
		return Answer{}, &onec.Error{Class: onec.Transient, Op: k.Op, Path: k.Path,
			Message: fmt.Sprintf("the call ended before one of the onec.max_concurrency (%d) slots for 1C requests was free; nothing was sent", c.cfg.MaxConcurrency), Err: err}
	}
	defer func() { c.slots <- s }()
	for renewed := false; ; renewed = true {
		ans, sentCookie, err := c.exchange(ctx, k, s)
		if err != nil {
			return Answer{}, err
		}
		if sentCookie && ans.Status == http.StatusBadRequest && c.judge.SessionRefused(ans) {
			// 1C refused the session, not the request: its handler never ran.
			s.cookie = ""
			if k.Idempotent() && !renewed {
				c.log.DebugContext(ctx, "1c session expired, starting a new one", "op", k.Op)
				continue
			}
			return Answer{}, &onec.Error{Class: onec.Transient, Op: k.Op, Path: k.Path, Status: ans.Status,
				Message: "the 1C session expired (HTTP 400 to a request on an ibsession cookie); 1C did not run the request: " + onec.Snippet(ans.Body)}
		}
		return c.judge.Judge(k, ans)
	}
}

func (c *Conn) acquire(ctx context.Context) (*slot, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if c.acquiring != nil {
		c.acquiring()
	}
	select {
	case s := <-c.slots:
		return s, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// exchange sends one HTTP request on slot s and records it. A transport failure
// comes back classified; an answer comes back whatever its status.
func (c *Conn) exchange(ctx context.Context, k Call, s *slot) (ans Answer, sentCookie bool, err error) {
	rctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	var wrote, marked atomic.Bool
	// markSent stamps, once, the moment a request that may change 1C was written
	// whole: 1C may act on it from then on, not from when the call began, before the
	// wait for a slot and a connection.
	markSent := func() {
		if !k.Idempotent() && marked.CompareAndSwap(false, true) {
			onec.RecorderFrom(ctx).MarkSent()
		}
	}
	rctx = httptrace.WithClientTrace(rctx, &httptrace.ClientTrace{
		WroteRequest: func(i httptrace.WroteRequestInfo) {
			if i.Err == nil {
				wrote.Store(true)
				markSent()
			}
		},
	})
	// The body is read here, within the limit, rather than whole by resty.
	req := c.rc.R().SetContext(rctx).SetDoNotParseResponse(true)
	if k.Header != nil {
		req.SetHeaders(k.Header)
	}
	switch {
	case k.Body != nil:
		req.SetHeader("Content-Type", cmp.Or(k.ContentType, defaultContentType)).SetBody(k.Body)
	case k.EmptyBody:
		req.SetContentLength(true)
		if k.ContentType != "" {
			req.SetHeader("Content-Type", k.ContentType)
		}
	}
	if c.cfg.SessionReuse {
		if s.cookie != "" {
			req.SetCookie(&http.Cookie{Name: sessionCookie, Value: s.cookie})
			sentCookie = true
		} else {
			req.SetHeader("IBSession", "start")
		}
	}
	// The query goes in the URL as it is: resty and net/http keep a URL's query
	// byte for byte.
	query := k.RawQuery
	if k.Query != nil {
		query = k.Query.Encode()
	}
	path := k.Path
	if query != "" {
		path += "?" + query
	}

	start := time.Now()
	resp, herr := req.Execute(k.Method, c.base+path)
	var hr *http.Response
	if resp != nil {
		hr = resp.RawResponse
	}
	if hr != nil {
		// An answer can be read before the transport has run the hook of the
		// request it answers; a later stamp only makes the settle time longer.
		markSent()
	}
	if herr == nil && hr == nil {
		herr = errors.New("no response") // not expected from resty; never read a nil response
	}
	var raw []byte
	var streamed *streamError
	var read int64
	if herr == nil {
		defer hr.Body.Close() // before reading to the end: the connection is closed, never reused half-read
		if k.Stream != nil && k.Idempotent() && hr.StatusCode == http.StatusOK {
			read, streamed, herr = c.stream(hr, k.Stream)
		} else {
			raw, herr = readBody(hr, c.cfg.MaxResponse)
		}
	} else if hr != nil && hr.Body != nil {
		hr.Body.Close()
	}
	elapsed := time.Since(start)

	x := onec.Exchange{Method: k.Method, Path: c.basePath + path, RequestSHA256: onec.Digest(k.Body)}
	var big *tooLargeError
	switch {
	case streamed != nil:
		c.keepSession(s, hr)
		e := &onec.Error{Class: onec.Permanent, Op: k.Op, Path: k.Path, Status: hr.StatusCode,
			Message: "1C's answer does not read: " + streamed.err.Error(), Err: streamed.err}
		x.Status, x.Error = hr.StatusCode, e.Error()
		onec.RecorderFrom(ctx).Add(x)
		return Answer{}, sentCookie, e
	case errors.As(herr, &big):
		// 1C answered in full (it has finished with the request, and its session is
		// free again): only the body is too large to read.
		c.keepSession(s, hr)
		e := c.overLimit(k, hr.StatusCode, big)
		x.Status = hr.StatusCode
		x.Error = e.Error()
		onec.RecorderFrom(ctx).Add(x)
		c.log.DebugContext(ctx, "1c answer larger than onec.max_response", "op", k.Op, "method", k.Method, "path", x.Path,
			"status", x.Status, "duration_ms", elapsed.Milliseconds(), "max_response", c.cfg.MaxResponse, "err", big)
		return Answer{}, sentCookie, e
	case herr != nil:
		// The session may still be busy with this request inside 1C: never reuse it.
		s.cookie = ""
		e := c.transportError(ctx, rctx, k, wrote.Load(), herr)
		x.Error = e.Error()
		onec.RecorderFrom(ctx).Add(x)
		c.log.DebugContext(ctx, "1c exchange failed", "op", k.Op, "method", k.Method, "path", x.Path,
			"sent", wrote.Load(), "duration_ms", elapsed.Milliseconds(), "err", herr)
		return Answer{}, sentCookie, e
	}
	x.Status = hr.StatusCode
	x.ResponseSHA256 = onec.Digest(raw)
	onec.RecorderFrom(ctx).Add(x)
	c.log.DebugContext(ctx, "1c exchange", "op", k.Op, "method", k.Method, "path", x.Path,
		"status", x.Status, "duration_ms", elapsed.Milliseconds(), "session_reused", sentCookie)
	c.keepSession(s, hr)
	ans = answerOf(hr.StatusCode, raw, hr.Header)
	ans.Read = read
	return ans, sentCookie, nil
}

// streamError is Stream's own error: the body arrived and does not parse.
type streamError struct{ err error }

// stream hands the body of hr to fn, counted and bounded by onec.max_response. A
// failure to read is returned as herr (a transport failure: Transient, retried);
// fn's own error as streamed.
func (c *Conn) stream(hr *http.Response, fn func(io.Reader) error) (read int64, streamed *streamError, herr error) {
	if hr.ContentLength > c.cfg.MaxResponse {
		return 0, nil, &tooLargeError{announced: hr.ContentLength}
	}
	cr := &countingReader{r: hr.Body, limit: c.cfg.MaxResponse}
	err := fn(cr)
	switch {
	case cr.err != nil:
		return cr.n, nil, cr.err
	case err != nil:
		return cr.n, &streamError{err: err}, nil
	}
	return cr.n, nil, nil
}

// countingReader counts what is read through it, and fails past limit.
type countingReader struct {
	r     io.Reader
	n     int64
	limit int64
	err   error // the first failure to read, not io.EOF
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	if c.n > c.limit {
		c.err = &tooLargeError{announced: -1, read: c.n}
		return n, c.err
	}
	if err != nil && err != io.EOF && c.err == nil {
		c.err = err
	}
	return n, err
}

// keepSession takes the session cookie 1C set, or the end of the session it
// announced, into slot s.
func (c *Conn) keepSession(s *slot, hr *http.Response) {
	if !c.cfg.SessionReuse {
		return
	}
	for _, ck := range hr.Cookies() {
		if ck.Name == sessionCookie {
			if ck.MaxAge < 0 || ck.Value == "" {
				s.cookie = ""
			} else {
				s.cookie = ck.Value
			}
		}
	}
}

// transportError classifies a failure with no HTTP answer. Before the request was
// written nothing can have happened in 1C; after it, a POST may have been carried out.
func (c *Conn) transportError(ctx, rctx context.Context, k Call, wrote bool, err error) *onec.Error {
	e := &onec.Error{Op: k.Op, Path: k.Path, Err: err}
	timedOut := ctx.Err() == nil && errors.Is(rctx.Err(), context.DeadlineExceeded)
	switch {
	case !wrote:
		e.Class = onec.Transient
		e.Message = "the request was not sent"
	case k.Idempotent():
		e.Class = onec.Transient
		e.Message = "no answer to a request that changes nothing"
	default:
		e.Class = onec.Unknown
		e.Message = "the request was sent and no answer came: 1C may have carried it out"
	}
	if timedOut {
		e.Message += fmt.Sprintf(" (no answer within onec.timeout %s)", c.cfg.Timeout)
	}
	return e
}

// restyLogger sends resty's own messages to the debug log.
type restyLogger struct{ log *slog.Logger }

func (l restyLogger) Errorf(format string, v ...any) {
	l.log.Debug("resty: " + fmt.Sprintf(format, v...))
}
func (l restyLogger) Warnf(format string, v ...any) {
	l.log.Debug("resty: " + fmt.Sprintf(format, v...))
}
func (l restyLogger) Debugf(format string, v ...any) {
	l.log.Debug("resty: " + fmt.Sprintf(format, v...))
}
