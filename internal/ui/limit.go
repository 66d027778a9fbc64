package ui

import (
	"net"
	"net/http"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Sign-in failures allowed before further attempts are refused, and how fast the
// allowance comes back: per user name, and (more, as a proxy in front sends every
// user from one address) per remote address. A refused attempt costs no bcrypt.
const (
	signinUserBurst = 5
	signinUserEvery = 12 * time.Second
	signinAddrBurst = 20
	signinAddrEvery = 3 * time.Second
	signinKeysMax   = 10000 // remembered keys at most; full allowances are forgotten first
)

// signinLimit counts the sign-in failures by user name and by address.
type signinLimit struct {
	mu   sync.Mutex
	keys map[string]*rate.Limiter
}

func (l *signinLimit) limiter(key string, every time.Duration, burst int) *rate.Limiter {
	if l.keys == nil {
		l.keys = map[string]*rate.Limiter{}
	}
	lim, ok := l.keys[key]
	if !ok {
		if len(l.keys) >= signinKeysMax {
			for k, v := range l.keys {
				if v.Tokens() >= float64(v.Burst()) {
					delete(l.keys, k)
				}
			}
		}
		lim = rate.NewLimiter(rate.Every(every), burst)
		l.keys[key] = lim
	}
	return lim
}

// allowed says whether an attempt for name from r may be checked now.
func (l *signinLimit) allowed(name string, r *http.Request) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.limiter("u:"+name, signinUserEvery, signinUserBurst).Tokens() >= 1 &&
		l.limiter("a:"+remoteIP(r), signinAddrEvery, signinAddrBurst).Tokens() >= 1
}

// failed counts a failed attempt against name and the address.
func (l *signinLimit) failed(name string, r *http.Request) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.limiter("u:"+name, signinUserEvery, signinUserBurst).Allow()
	l.limiter("a:"+remoteIP(r), signinAddrEvery, signinAddrBurst).Allow()
}

// succeeded forgets name's failures.
func (l *signinLimit) succeeded(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.keys, "u:"+name)
}

func remoteIP(r *http.Request) string {
	if h, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return h
	}
	return r.RemoteAddr
}
