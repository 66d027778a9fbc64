// Package webhook is the outbox's "webhook" destination: it POSTs each record's
// event envelope (outbox.Record.Body) to a configured URL, signed the Standard
// Webhooks way with webhook-id set to the event id, the consumer's dedupe key.
//
// It tells the relay what an answer means: 2xx is delivered; 429 and 503 with a
// Retry-After say when to try again; 410 Gone disables the destination; anything
// else, a timeout or a broken connection is a failure the relay retries with backoff.
// Error texts name the destination and never hold a secret: the URL they show has
// neither password nor query.
package webhook

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/ordersync/ordersync/internal/outbox"
	"github.com/ordersync/ordersync/internal/stdwebhook"
)

// Defaults.
const (
	DefaultTimeout   = 10 * time.Second
	DefaultUserAgent = "ordersync"
)

const (
	// MaxRetryAfter bounds the wait a Retry-After can ask for; a longer one (or a
	// date further off) is cut to it.
	MaxRetryAfter = 24 * time.Hour
	// snippetBytes is how much of a failed answer's body is read for the error.
	snippetBytes = 1 << 10
	// snippetChars is how much of it the error shows.
	snippetChars = 200
	// drainBytes is how much of an answer is read (and thrown away) so that its
	// connection can be reused; a longer body costs the connection instead.
	drainBytes = 64 << 10
)

// Config configures one webhook destination.
type Config struct {
	// Name is the destination's name in the relay's configuration, used in error
	// messages; default the URL's host.
	Name string
	// URL receives the POSTs; http or https.
	URL string
	// Secrets sign every delivery: the first is the current one, and every secret
	// listed adds an entry to webhook-signature (several during a rotation). At
	// least one is required.
	Secrets []stdwebhook.Secret
	// Timeout bounds one request, answer body included; default DefaultTimeout.
	Timeout time.Duration
	// Client sends the requests. The default shares one connection pool among all
	// publishers, keeps enough idle connections per host for a relay's lanes, and
	// does not follow redirects (a 3xx is a failure naming its status).
	Client *http.Client
	// Now is the clock of webhook-timestamp and of Retry-After dates; default
	// time.Now.
	Now func() time.Time
	// UserAgent is sent with every request; default DefaultUserAgent.
	UserAgent string
}

// Publisher delivers outbox records to one webhook URL. It is safe for concurrent
// use; the relay calls it from several lanes at once.
type Publisher struct {
	name      string
	url       string // as configured, for requests
	shownURL  string // without password or query, for errors
	secrets   []stdwebhook.Secret
	timeout   time.Duration
	client    *http.Client
	now       func() time.Time
	userAgent string
}

var _ outbox.Publisher = (*Publisher)(nil)

// New validates cfg and returns its publisher.
func New(cfg Config) (*Publisher, error) {
	if strings.TrimSpace(cfg.URL) == "" {
		return nil, fmt.Errorf("webhook %s: url is required", cmp.Or(cfg.Name, "destination"))
	}
	u, err := url.Parse(cfg.URL)
	if err != nil {
		// url.Parse's error quotes the URL, which may hold a password or token.
		return nil, fmt.Errorf("webhook %s: url is not a valid URL", cmp.Or(cfg.Name, "destination"))
	}
	shown := showURL(u)
	name := cmp.Or(cfg.Name, u.Host)
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("webhook %s: url %s: scheme must be http or https", name, shown)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("webhook %s: url %s has no host", name, shown)
	}
	if len(cfg.Secrets) == 0 {
		return nil, fmt.Errorf("webhook %s: at least one secret is required", name)
	}
	for i, s := range cfg.Secrets {
		if s.IsZero() {
			return nil, fmt.Errorf("webhook %s: secret %d is empty", name, i+1)
		}
	}
	if cfg.Timeout < 0 {
		return nil, fmt.Errorf("webhook %s: timeout must not be negative, got %s", name, cfg.Timeout)
	}
	p := &Publisher{
		name:      name,
		url:       cfg.URL,
		shownURL:  shown,
		secrets:   append([]stdwebhook.Secret(nil), cfg.Secrets...),
		timeout:   cmp.Or(cfg.Timeout, DefaultTimeout),
		client:    cfg.Client,
		now:       cfg.Now,
		userAgent: cmp.Or(cfg.UserAgent, DefaultUserAgent),
	}
	if p.client == nil {
		p.client = defaultClient()
	}
	if p.now == nil {
		p.now = time.Now
	}
	return p, nil
}

// Name is the destination's name.
func (p *Publisher) Name() string { return p.name }

// Timeout is how long one delivery may take: the relay starts one only while at
// least this much of its lease is left.
func (p *Publisher) Timeout() time.Duration { return p.timeout }

var _ outbox.TimedPublisher = (*Publisher)(nil)

// defaultClient is shared by every publisher built without a Client, so that
// rebuilding publishers (a configuration reload) does not leave pools behind.
var defaultClient = sync.OnceValue(func() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	// A relay runs up to relay.concurrency lanes to one host at once; the default 2
	// idle connections per host would open and close a connection per request.
	tr.MaxIdleConnsPerHost = 64
	return &http.Client{
		Transport: tr,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
})

// showURL is u without user information, query or fragment: safe for errors.
func showURL(u *url.URL) string {
	c := *u
	c.User = nil
	c.RawQuery, c.ForceQuery = "", false
	c.Fragment, c.RawFragment = "", ""
	return c.String()
}

// Publish POSTs the record's envelope. It returns nil on a 2xx answer; a
// *outbox.DeliveryError for 429/503 with Retry-After (RetryAfter set) and for 410
// (Disable set); a *StatusError for other answers; and an error naming the
// destination and URL when no answer came.
func (p *Publisher) Publish(ctx context.Context, r outbox.Record) error {
	if r.EventID == "" {
		// Nothing a retry can mend; a store that hands out such a record is broken.
		return &outbox.DeliveryError{Dead: true,
			Err: fmt.Errorf("webhook %s: outbox record %d has no event id", p.name, r.ID)}
	}
	body, err := r.Body()
	if err != nil {
		return &outbox.DeliveryError{Dead: true, Err: fmt.Errorf("webhook %s: %w", p.name, err)}
	}

	reqCtx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(reqCtx, http.MethodPost, p.url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("webhook %s: POST %s: %w", p.name, p.shownURL, unwrapURLError(err))
	}
	req.Header = stdwebhook.Headers(p.secrets, r.EventID, p.now(), body)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", p.userAgent)

	resp, err := p.client.Do(req)
	if err != nil {
		return p.requestError(ctx, reqCtx, err)
	}
	defer drainAndClose(resp.Body)

	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil
	}
	se := &StatusError{Destination: p.name, StatusCode: resp.StatusCode}
	switch resp.StatusCode {
	case http.StatusGone:
		return &outbox.DeliveryError{Disable: true, Err: se}
	case http.StatusTooManyRequests, http.StatusServiceUnavailable:
		if d, ok := parseRetryAfter(resp.Header.Get("Retry-After"), p.now()); ok {
			se.RetryAfter = d
		}
	}
	if loc := resp.Header.Get("Location"); resp.StatusCode >= 300 && resp.StatusCode < 400 && loc != "" {
		if u, err := url.Parse(loc); err == nil {
			se.Location = showURL(u)
		}
	}
	se.Body = readSnippet(resp.Body)
	if se.RetryAfter > 0 {
		return &outbox.DeliveryError{RetryAfter: se.RetryAfter, Err: se}
	}
	return se
}

// requestError describes a request that got no answer. parent is the relay's
// context, reqCtx the one bounded by the timeout.
func (p *Publisher) requestError(parent, reqCtx context.Context, err error) error {
	err = unwrapURLError(err)
	switch {
	case parent.Err() != nil:
		return fmt.Errorf("webhook %s: POST %s: %w", p.name, p.shownURL, parent.Err())
	case errors.Is(reqCtx.Err(), context.DeadlineExceeded):
		return fmt.Errorf("webhook %s: POST %s: no answer within %s: %w",
			p.name, p.shownURL, p.timeout, context.DeadlineExceeded)
	}
	return fmt.Errorf("webhook %s: POST %s: %w", p.name, p.shownURL, err)
}

// unwrapURLError drops the *url.Error layer, whose text repeats the full URL (query
// and password included).
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// StatusError is an answer other than 2xx.
type StatusError struct {
	Destination string
	StatusCode  int
	// Body is the start of the answer's body, on one line, for people.
	Body string
	// RetryAfter is what a 429 or 503 asked for with Retry-After, zero without it.
	RetryAfter time.Duration
	// Location is where a 3xx pointed (no password, no query); redirects are not
	// followed.
	Location string
}

func (e *StatusError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "webhook %s: answered %d", e.Destination, e.StatusCode)
	if t := http.StatusText(e.StatusCode); t != "" {
		b.WriteString(" " + t)
	}
	if e.StatusCode == http.StatusGone {
		b.WriteString(": endpoint disabled")
		return b.String()
	}
	if e.RetryAfter > 0 {
		fmt.Fprintf(&b, ", retry after %s", e.RetryAfter)
	}
	if e.Location != "" {
		fmt.Fprintf(&b, " to %s (redirects are not followed)", e.Location)
	}
	if e.Body != "" {
		fmt.Fprintf(&b, ": %q", e.Body)
	}
	return b.String()
}

// parseRetryAfter reads Retry-After as delay-seconds or as an HTTP date. A date in
// the past is a zero wait; a longer wait than MaxRetryAfter is cut to it.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if n, err := strconv.ParseUint(v, 10, 64); err == nil {
		if n > uint64(MaxRetryAfter/time.Second) {
			return MaxRetryAfter, true
		}
		return time.Duration(n) * time.Second, true
	} else if errors.Is(err, strconv.ErrRange) {
		return MaxRetryAfter, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	d := t.Sub(now)
	return min(max(d, 0), MaxRetryAfter), true
}

// readSnippet reads the start of a failed answer's body and makes it one short,
// printable line.
func readSnippet(body io.Reader) string {
	buf, _ := io.ReadAll(io.LimitReader(body, snippetBytes+1))
	cut := len(buf) > snippetBytes
	if cut {
		buf = buf[:snippetBytes]
	}
	s := strings.ToValidUTF8(string(buf), "\uFFFD")
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || unicode.IsSpace(r) {
			return ' '
		}
		return r
	}, s)
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > snippetChars {
		i := snippetChars
		for i > 0 && !utf8.RuneStart(s[i]) {
			i--
		}
		s, cut = s[:i], true
	}
	if cut && s != "" {
		s += "…"
	}
	return s
}

// drainAndClose reads a bounded rest of body, so the connection can carry the next
// request, and closes it.
func drainAndClose(body io.ReadCloser) {
	_, _ = io.Copy(io.Discard, io.LimitReader(body, drainBytes))
	_ = body.Close()
}
