// Package hostcheck refuses requests whose Host header names another site: the
// defence against DNS rebinding, where a page on an attacker's domain resolves
// that domain to 127.0.0.1 and reads a loopback listener with the browser's help.
//
// A request that reached a loopback address is served only when its Host is a
// loopback name (localhost, 127.0.0.1, [::1], …) or one of the configured names.
// A request that reached another address is served when its Host is that address,
// or a configured name; with no names configured it is served whatever its Host
// (the listener cannot know the names a proxy in front of it is reached by, and
// such a listener requires users).
package hostcheck

import (
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
)

// Guard serves next only the requests Allowed admits; the others get 403 with a
// plain message. Each refused host is logged once.
func Guard(next http.Handler, names []string, what string, log *slog.Logger) http.Handler {
	var seen sync.Map
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// No local address: the handler is called directly, not through a
		// listener (a test's recorder), and there is no listener to protect.
		local, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
		if local == nil || Allowed(r.Host, local, names) {
			next.ServeHTTP(w, r)
			return
		}
		if _, logged := seen.LoadOrStore(r.Host, true); !logged && log != nil {
			log.Warn("refused a request for another host (DNS rebinding?)", "listener", what, "host", r.Host,
				"remote", r.RemoteAddr, "hint", "add the name the listener is reached by to ui.hosts")
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte("403: this address does not serve the host " + r.Host + "\n"))
	})
}

// Allowed says whether a request for host (the Host header, with or without a
// port) that reached the local address is served. local may be nil (a test's
// handler called directly): it is taken as loopback.
func Allowed(host string, local net.Addr, names []string) bool {
	h := host
	if hh, _, err := net.SplitHostPort(host); err == nil {
		h = hh
	}
	h = strings.TrimSuffix(strings.ToLower(strings.Trim(h, "[]")), ".")
	for _, n := range names {
		if strings.EqualFold(strings.TrimSuffix(n, "."), h) {
			return true
		}
	}
	localIP := ipOf(local)
	loopback := localIP == nil || localIP.IsLoopback()
	if ip := net.ParseIP(h); ip != nil {
		return ip.IsLoopback() && loopback || localIP != nil && ip.Equal(localIP)
	}
	if loopback {
		return h == "localhost" || strings.HasSuffix(h, ".localhost")
	}
	return len(names) == 0
}

func ipOf(a net.Addr) net.IP {
	switch v := a.(type) {
	case *net.TCPAddr:
		return v.IP
	case nil:
		return nil
	}
	if h, _, err := net.SplitHostPort(a.String()); err == nil {
		return net.ParseIP(h)
	}
	return nil
}
