package connectors

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-resty/resty/v2"
	"golang.org/x/time/rate"
)

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
	Header    http.Header
	Logger    *slog.Logger
	Transport http.RoundTripper // tests
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
// try, retries of reads on 429/5xx/transport errors that honour Retry-After, and the
// credentials as headers (never logged).
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
	if cfg.Transport != nil {
		c.SetTransport(cfg.Transport)
	}
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
			SetRetryAfter(func(_ *resty.Client, resp *resty.Response) (time.Duration, error) {
				if resp == nil {
					return 0, nil // resty's own backoff
				}
				if d, ok := RetryAfter(resp.Header().Get("Retry-After"), time.Now()); ok {
					return min(d, cfg.MaxRetryWait), nil
				}
				return 0, nil
			})
	}
	return c
}

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

func snippet(b []byte) string {
	s := strings.Join(strings.Fields(string(b)), " ")
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
