package yandexmarket

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// StatusEnhanceYourCalm is Yandex's answer to a request beyond its limit.
const StatusEnhanceYourCalm = 420

// calmTransport reads Yandex's 420 as the 429 the shared client knows: the answer
// becomes 429 with a Retry-After of the seconds left until
// X-RateLimit-Resource-Until (a second when it is missing or unreadable), so reads
// are retried after that wait and the publishers return it as a RetryAfter. The
// status text keeps the original code for messages.
type calmTransport struct {
	base http.RoundTripper
	now  func() time.Time
}

func (t calmTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(r)
	if err != nil || resp == nil || resp.StatusCode != StatusEnhanceYourCalm {
		return resp, err
	}
	wait := time.Second
	if until, ok := rateLimitUntil(resp.Header.Get("X-RateLimit-Resource-Until")); ok {
		wait = max(until.Sub(t.now()), 0)
	}
	secs := int64((wait + time.Second - 1) / time.Second)
	resp.StatusCode = http.StatusTooManyRequests
	resp.Status = "429 (Yandex Market 420: rate limit, retry in " + strconv.FormatInt(secs, 10) + "s)"
	resp.Header.Set("Retry-After", strconv.FormatInt(secs, 10))
	return resp, nil
}

// rateLimitUntil reads X-RateLimit-Resource-Until: ISO 8601, or an HTTP date.
func rateLimitUntil(v string) (time.Time, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return time.Time{}, false
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return t, true
	}
	return time.Time{}, false
}
