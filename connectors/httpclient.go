package connectors

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-resty/resty/v2"
	"golang.org/x/time/rate"

	"github.com/ordersync/ordersync/internal/backoff"
	"github.com/ordersync/ordersync/internal/bytesize"
	"github.com/ordersync/ordersync/internal/order"
)

// DefaultMaxResponse is the default of ClientConfig.MaxResponse: 16 MiB.
const DefaultMaxResponse = 16 << 20

// ClientConfig configures a marketplace HTTP client.
type ClientConfig struct {
	Connector string // for messages
	BaseURL   string
	Timeout   time.Duration // per request, default 30s
	// RatePerSecond and Burst are the marketplace's published limit (0: none).
	RatePerSecond float64
	Burst         int
	// Retries is how many times a read is retried after 429, 5xx or a transport
	// error (default 3); MaxRetryWait caps one wait, Retry-After included (default 1m).
	Retries      int
	MaxRetryWait time.Duration
	// Header is sent with every request (the credentials).
	Header http.Header
	// MaxResponse bounds the body of one answer, in bytes
	// (connectors.<name>.max_response): a larger one is not read beyond the limit,
	// and the request fails with a *ResponseTooLargeError, never retried. 0 is
	// DefaultMaxResponse, unless Transport bounds answers itself (BoundResponses,
	// how cmd/ordersync passes the configured limit): then that limit stands alone.
	MaxResponse int64
	// MaxResponseKey is the key errors name; default
	// connectors.<Connector>.max_response (webhooks.bitrix24.max_response for bitrix24).
	MaxResponseKey string
	Logger         *slog.Logger
	Transport      http.RoundTripper // tests, and BoundResponses
}

type readKey struct{}

// Read marks a request as a read, safe to retry (Ozon reads with POST). Writes are
// never retried by the client: the acknowledgement publishers decide. The mark lives
// in the request's context, so set the context first: Read(r.SetContext(ctx));
// a SetContext after Read drops it.
func Read(r *resty.Request) *resty.Request {
	return r.SetContext(context.WithValue(r.Context(), readKey{}, true))
}

// NewClient returns a resty client with the marketplace's rate limit applied to every
// try, retries of reads on 429/5xx/transport errors that honour Retry-After, answers
// bounded by MaxResponse, and the credentials as headers (never logged).
func NewClient(cfg ClientConfig) *resty.Client {
	cfg.Timeout = cmp.Or(cfg.Timeout, 30*time.Second)
	cfg.MaxRetryWait = cmp.Or(cfg.MaxRetryWait, time.Minute)
	if cfg.Retries == 0 {
		cfg.Retries = 3
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := resty.New().SetBaseURL(strings.TrimRight(cfg.BaseURL, "/")).SetTimeout(cfg.Timeout)
	c.SetLogger(discardLogger{})
	base := cfg.Transport
	if base == nil {
		base = c.GetClient().Transport // resty's own
	}
	c.SetTransport(&boundTransport{
		base:     base,
		limit:    cmp.Or(cfg.MaxResponse, DefaultMaxResponse),
		key:      cmp.Or(cfg.MaxResponseKey, maxResponseKey(cfg.Connector)),
		fallback: cfg.MaxResponse == 0,
	})
	for k, vs := range cfg.Header {
		for _, v := range vs {
			c.Header.Add(k, v)
		}
	}
	if cfg.RatePerSecond > 0 {
		lim := rate.NewLimiter(rate.Limit(cfg.RatePerSecond), max(cfg.Burst, 1))
		c.OnBeforeRequest(func(_ *resty.Client, r *resty.Request) error {
			if err := lim.Wait(r.Context()); err != nil {
				return fmt.Errorf("%s: waiting for the rate limit: %w", cfg.Connector, err)
			}
			return nil
		})
	}
	if cfg.Retries > 0 {
		c.SetRetryCount(cfg.Retries).
			SetRetryWaitTime(500 * time.Millisecond).
			SetRetryMaxWaitTime(cfg.MaxRetryWait).
			AddRetryCondition(func(resp *resty.Response, err error) bool {
				if resp == nil || resp.Request == nil || resp.Request.Context().Value(readKey{}) != true {
					return false
				}
				if tl := (*ResponseTooLargeError)(nil); errors.As(err, &tl) {
					return false // the same request gets the same answer: a bigger page does not shrink
				}
				if resp.Request.Context().Err() != nil {
					return false
				}
				st := resp.StatusCode()
				retry := err != nil || st == http.StatusTooManyRequests || st >= 500
				if retry {
					log.Debug("marketplace request will be retried", "connector", cfg.Connector,
						"path", resp.Request.URL, "status", st, "err", err)
				}
				return retry
			}).
			SetRetryAfter(func(c *resty.Client, resp *resty.Response) (time.Duration, error) {
				// resty runs the tries (the rate limit waits before each); the waits
				// between them are Retry-After's or the shared backoff's, from the
				// client's wait times (a test shortens them).
				if d, ok := RetryAfter(resp.Header().Get("Retry-After"), time.Now()); ok && d > 0 {
					return min(d, cfg.MaxRetryWait), nil
				}
				return backoff.Policy{Min: c.RetryWaitTime, Max: c.RetryMaxWaitTime}.After(resp.Request.Attempt), nil
			})
	}
	return c
}

// maxResponseKey is the configuration key of the answer limit of connector.
func maxResponseKey(connector string) string {
	if connector == "bitrix24" {
		return "webhooks.bitrix24.max_response"
	}
	return "connectors." + connector + ".max_response"
}

// ResponseTooLargeError is an answer whose body is larger than its limit: it was
// read no further than the limit, and the request is not retried.
type ResponseTooLargeError struct {
	Key    string // the configuration key of the limit: connectors.kaspi.max_response
	Limit  int64  // bytes
	Status int    // of the answer
	// ContentLength is the length the answer announced, -1 when it announced none.
	ContentLength int64
}

func (e *ResponseTooLargeError) Error() string {
	msg := fmt.Sprintf("the answer (HTTP %d", e.Status)
	if e.ContentLength >= 0 {
		msg += fmt.Sprintf(", %d bytes", e.ContentLength)
	}
	msg += fmt.Sprintf(") is larger than %s (%s), so it was not read; raise %s", e.Key, bytesize.Format(e.Limit), e.Key)
	if section, ok := strings.CutSuffix(e.Key, ".max_response"); ok && strings.HasPrefix(e.Key, "connectors.") {
		msg += " or lower " + section + ".page_size"
	}
	return msg
}

// BoundResponses returns a transport over base (nil: a clone of
// http.DefaultTransport) whose answers fail with a *ResponseTooLargeError naming key
// once their body passes limit bytes: as soon as it is read, when the
// Content-Length says so, else at the first byte beyond. It is how a caller that
// builds a connector (whose configuration has a Transport, not a MaxResponse) gives
// NewClient its configured limit; 0 or less is DefaultMaxResponse.
func BoundResponses(base http.RoundTripper, limit int64, key string) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport.(*http.Transport).Clone()
	}
	if limit <= 0 {
		limit = DefaultMaxResponse
	}
	return &boundTransport{base: base, limit: limit, key: key}
}

// boundTransport wraps every answer's body in a boundedBody.
type boundTransport struct {
	base  http.RoundTripper
	limit int64
	key   string
	// fallback: leave a body already bounded (by a BoundResponses below) alone.
	fallback bool
}

func (t *boundTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(r)
	if err != nil || resp == nil || resp.Body == nil || resp.Body == http.NoBody {
		return resp, err
	}
	if _, bounded := resp.Body.(*boundedBody); bounded && t.fallback {
		return resp, nil
	}
	resp.Body = &boundedBody{rc: resp.Body, left: t.limit, tooLarge: &ResponseTooLargeError{
		Key: t.key, Limit: t.limit, Status: resp.StatusCode, ContentLength: resp.ContentLength}}
	return resp, nil
}

// boundedBody fails a read once more than the limit has come. Closing it before the
// end closes the connection (the transport never reuses one half-read).
type boundedBody struct {
	rc       io.ReadCloser
	left     int64 // bytes still allowed
	tooLarge *ResponseTooLargeError
	failed   bool
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if b.failed || b.tooLarge.ContentLength > b.tooLarge.Limit {
		b.failed = true
		return 0, b.tooLarge
	}
	if len(p) == 0 {
		return b.rc.Read(p)
	}
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1] // one byte more tells a body of exactly the limit from a longer one
	}
	n, err := b.rc.Read(p)
	if int64(n) > b.left {
		n = int(b.left)
		b.left, b.failed = 0, true
		return n, b.tooLarge
	}
	b.left -= int64(n)
	return n, err
}

func (b *boundedBody) Close() error { return b.rc.Close() }

// RetryAfter parses a Retry-After header: seconds, or an HTTP date.
func RetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if n, err := strconv.Atoi(v); err == nil && n >= 0 {
		return time.Duration(n) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

// Check turns a response into an error: a transport error, an *AuthError for 401 and
// 403 (naming credKey), or a status error with a short snippet of the body.
func Check(connector, credKey, what string, resp *resty.Response, err error) error {
	if err != nil {
		return fmt.Errorf("%s: %s: %w", connector, what, err)
	}
	st := resp.StatusCode()
	switch {
	case st >= 200 && st < 300:
		return nil
	case st == http.StatusUnauthorized || st == http.StatusForbidden:
		return &AuthError{Connector: connector, Key: credKey, Status: st, Err: fmt.Errorf("%s: %s", what, snippet(resp.Body()))}
	default:
		return fmt.Errorf("%s: %s: HTTP %d: %s", connector, what, st, snippet(resp.Body()))
	}
}

// snippet is the start of an answer for an error message, made safe to store (a NUL
// or invalid UTF-8 in a marketplace's answer must not fail the journal's write of
// the error).
func snippet(b []byte) string {
	s := order.SafeText(strings.Join(strings.Fields(string(b)), " "))
	if r := []rune(s); len(r) > 200 {
		s = string(r[:200]) + "…"
	}
	return s
}

// discardLogger keeps resty quiet: its warnings would repeat request details.
type discardLogger struct{}

func (discardLogger) Errorf(string, ...any) {}
func (discardLogger) Warnf(string, ...any)  {}
func (discardLogger) Debugf(string, ...any) {}
