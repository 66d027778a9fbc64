package config

import (
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// UI is the accountant's journal pages: /ui/journal, the operation's page, exports
// and the reconciliation.
type UI struct {
	// Listen is host:port; empty (the default) disables the pages. An address that
	// is not loopback needs users.
	Listen string `koanf:"listen"`
	// Hosts are the names, beside its own address, the pages are reached by (a
	// reverse proxy's): a request for another host is refused, against DNS
	// rebinding.
	Hosts []string `koanf:"hosts"`
	// Lang of the pages and the exports' headers: ru (the default) or en.
	Lang string `koanf:"lang"`
	// Timezone the pages show times in, and in which the dates of a period (from,
	// to) are read; empty means onec.timezone.
	Timezone string `koanf:"timezone"`
	// Users who may sign in. With none, the pages need no sign-in, which is allowed
	// only on a loopback address.
	Users []UIUser `koanf:"users"`
	// SessionTTL is how long a sign-in lasts without use.
	SessionTTL time.Duration `koanf:"session_ttl"`
	// SecureCookie marks the session cookie Secure, for pages reached over TLS
	// through a reverse proxy: auto (the default: when Listen is not loopback),
	// true or false.
	SecureCookie string `koanf:"secure_cookie"`
	// OneCWebURL is the base's web client (http(s)://1c.local/trade): an
	// operation's page links the order's document there. Empty: no link.
	OneCWebURL string `koanf:"onec_web_url"`
}

// UIUser is one person who signs in to the pages.
type UIUser struct {
	Name string `koanf:"name"`
	// PasswordHash is a bcrypt hash, as `ordersync ui hash-password` prints it.
	PasswordHash string `koanf:"password_hash"`
	// Role is viewer (reads and exports) or operator (also resyncs an operation and
	// requeues a dead event).
	Role string `koanf:"role"`
}

// UI roles.
const (
	RoleViewer   = "viewer"
	RoleOperator = "operator"
)

// UILocation is the zone the pages show times in: ui.timezone, or onec.timezone.
// Call it on a validated configuration.
func (c Config) UILocation() *time.Location {
	name := c.UI.Timezone
	if name == "" {
		return c.OneC.Location()
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		panic(fmt.Sprintf("config: ui.timezone %q used without validation: %v", name, err))
	}
	return loc
}

// CookieSecure reports whether the session cookie is marked Secure.
func (u UI) CookieSecure() bool {
	switch u.SecureCookie {
	case "true":
		return true
	case "false":
		return false
	}
	return u.Listen != "" && !IsLoopback(u.Listen)
}

// IsLoopback reports whether a valid listen address binds only the loopback
// interface (127.0.0.0/8, ::1, localhost); an empty host is every interface.
func IsLoopback(listen string) bool {
	host, _, err := net.SplitHostPort(listen)
	return err == nil && host != "" && isLoopback(host)
}

func (u UI) validate(h HTTP, admin Admin, p *problems) {
	switch u.Lang {
	case "ru", "en":
	default:
		p.add("ui.lang", fmt.Sprintf("must be ru or en, got %q", u.Lang))
	}
	if u.Timezone != "" {
		if _, err := time.LoadLocation(u.Timezone); err != nil {
			p.add("ui.timezone", fmt.Sprintf("unknown time zone %q (empty means onec.timezone)", u.Timezone))
		}
	}
	switch u.SecureCookie {
	case "auto", "true", "false":
	default:
		p.add("ui.secure_cookie", fmt.Sprintf("must be auto, true or false, got %q", u.SecureCookie))
	}
	if u.OneCWebURL != "" {
		if w, err := url.Parse(u.OneCWebURL); err != nil || (w.Scheme != "http" && w.Scheme != "https") || w.Host == "" ||
			w.Fragment != "" || w.RawQuery != "" {
			p.add("ui.onec_web_url", fmt.Sprintf("must be an http(s) URL of the base's web client, such as http://1c.local/trade, without a query or #, got %q", u.OneCWebURL))
		}
	}
	if u.SessionTTL <= 0 {
		p.add("ui.session_ttl", fmt.Sprintf("must be greater than 0, got %s", formatDuration(u.SessionTTL)))
	}
	seen := map[string]bool{}
	for i, usr := range u.Users {
		key := fmt.Sprintf("ui.users[%d]", i)
		switch {
		case strings.TrimSpace(usr.Name) == "":
			p.add(key+".name", "must not be empty")
		case seen[usr.Name]:
			p.add(key+".name", fmt.Sprintf("%q is listed twice", usr.Name))
		}
		seen[usr.Name] = true
		if _, err := bcrypt.Cost([]byte(usr.PasswordHash)); err != nil {
			p.add(key+".password_hash", "must be a bcrypt hash, as `ordersync ui hash-password` prints it")
		}
		switch usr.Role {
		case RoleViewer, RoleOperator:
		default:
			p.add(key+".role", fmt.Sprintf("must be viewer or operator, got %q", usr.Role))
		}
	}
	if u.Listen == "" {
		return
	}
	if msg := checkListen(u.Listen); msg != "" {
		p.add("ui.listen", msg)
		return
	}
	if len(u.Users) == 0 && !IsLoopback(u.Listen) {
		p.add("ui.listen", fmt.Sprintf("%s is reachable from other machines, so the pages need users (ui.users, "+
			"with hashes from `ordersync ui hash-password`); or listen on 127.0.0.1", u.Listen))
	}
	for _, other := range []struct{ key, addr string }{{"http.listen", h.Listen}, {"admin.listen", admin.Listen}} {
		if other.addr != "" && checkListen(other.addr) == "" && sameAddress(u.Listen, other.addr) {
			p.add("ui.listen", fmt.Sprintf("must differ from %s (%s)", other.key, other.addr))
		}
	}
}
