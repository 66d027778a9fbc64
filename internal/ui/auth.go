package ui

import (
	"crypto/subtle"
	"errors"
	"net/http"
	"net/url"
	"strings"

	"golang.org/x/crypto/bcrypt"
)

// Cookies, both HttpOnly, SameSite=Strict, Path=/ui.
const (
	sessionCookie = "ordersync_session"
	// csrfCookie is the token before a session exists (the sign-in form), and the
	// only one when no users are configured: the form's csrf field must equal it
	// (double submit; a page elsewhere can neither read nor set it).
	csrfCookie = "ordersync_csrf"
)

// PasswordCost is the bcrypt cost `ordersync ui hash-password` uses.
const PasswordCost = 12

// HashPassword is the bcrypt hash of a password, as ui.users[].password_hash holds it.
func HashPassword(password []byte) (string, error) {
	if len(password) == 0 {
		return "", errors.New("the password is empty")
	}
	h, err := bcrypt.GenerateFromPassword(password, PasswordCost)
	if err != nil {
		return "", err
	}
	return string(h), nil
}

func hashCost(hash string) (int, error) { return bcrypt.Cost([]byte(hash)) }

func dummyHash(cost int) ([]byte, error) {
	return bcrypt.GenerateFromPassword([]byte(randomToken()), max(cost, bcrypt.MinCost))
}

// who is the person behind a request.
type who struct {
	Name string
	Role string
	// Local: no users are configured; nobody signed in.
	Local bool
	// CSRF is the token the page's forms carry.
	CSRF string
	// token is the session's (its cookie's), "" when Local.
	token string
}

func (w who) Operator() bool { return w.Role == RoleOperator }

func (s *Server) cookie(name, value string, maxAge int) *http.Cookie {
	return &http.Cookie{Name: name, Value: value, Path: "/ui", MaxAge: maxAge, HttpOnly: true,
		Secure: s.cfg.SecureCookie, SameSite: http.SameSiteStrictMode}
}

// csrfToken is the pre-session token from its cookie, set anew when the request
// has none (or not one of ours).
func (s *Server) csrfToken(w http.ResponseWriter, r *http.Request) string {
	if c, err := r.Cookie(csrfCookie); err == nil && validToken(c.Value) {
		return c.Value
	}
	t := randomToken()
	http.SetCookie(w, s.cookie(csrfCookie, t, 0))
	return t
}

func validToken(t string) bool {
	if len(t) != 43 {
		return false
	}
	for _, r := range t {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

func sameToken(a, b string) bool {
	return a != "" && b != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// identify is who sent r: the local operator when no users are configured, the
// session's user otherwise (false when there is no live session, or it no longer
// stands for a configured user). An error is the session store's.
func (s *Server) identify(w http.ResponseWriter, r *http.Request) (who, bool, error) {
	if len(s.users) == 0 {
		return who{Name: LocalUser, Role: RoleOperator, Local: true, CSRF: s.csrfToken(w, r)}, true, nil
	}
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return who{}, false, nil
	}
	ss, ok, err := s.sessions.get(r.Context(), c.Value, s.users)
	if err != nil || !ok {
		return who{}, false, err
	}
	return who{Name: ss.User, Role: ss.Role, CSRF: ss.CSRF, token: c.Value}, true, nil
}

// page serves a page that needs a person: without one, a GET is sent to sign in
// and coming back; anything else is refused.
func (s *Server) page(h func(w http.ResponseWriter, r *http.Request, u who)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		u, ok, err := s.identify(w, r)
		if err != nil {
			s.failed(w, r, who{}, "read the session", err)
			return
		}
		if !ok {
			if r.Method == http.MethodGet || r.Method == http.MethodHead {
				http.Redirect(w, r, "/ui/signin?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
				return
			}
			s.refuse(w, r, who{}, "err_signed_out")
			return
		}
		h(w, r, u)
	}
}

// action serves an operator's POST: a person, the form's csrf token equal to the
// session's (or the pre-session cookie's when no users are configured), and the
// operator's role.
func (s *Server) action(h func(w http.ResponseWriter, r *http.Request, u who)) http.HandlerFunc {
	return s.page(func(w http.ResponseWriter, r *http.Request, u who) {
		r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
		if !sameToken(r.PostFormValue("csrf"), u.CSRF) {
			s.log.WarnContext(r.Context(), "ui: a form without the right csrf token refused", "path", r.URL.Path,
				"user", u.Name, "remote", r.RemoteAddr)
			s.refuse(w, r, u, "err_csrf")
			return
		}
		if !u.Operator() {
			s.refuse(w, r, u, "err_viewer")
			return
		}
		h(w, r, u)
	})
}

// safeNext is next when it is a page of ours (a local /ui/ path), else the journal.
func safeNext(next string) string {
	const home = "/ui/journal"
	if !strings.HasPrefix(next, "/ui/") || strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\r\n\t") {
		return home
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || !strings.HasPrefix(u.Path, "/ui/") ||
		strings.Contains(u.Path, "/../") || strings.HasPrefix(u.Path, "/ui/signin") || strings.HasPrefix(u.Path, "/ui/signout") {
		return home
	}
	return u.RequestURI()
}

type signinData struct {
	Name  string
	Next  string
	Error string
	// PlainHTTP: the cookie is Secure and this request came over plain HTTP with
	// no TLS proxy saying otherwise: the browser will drop the cookie.
	PlainHTTP bool
}

// plainHTTP says whether r reached the pages without TLS while their cookies are
// Secure (a proxy that terminates TLS says X-Forwarded-Proto: https).
func (s *Server) plainHTTP(r *http.Request) bool {
	return s.cfg.SecureCookie && r.TLS == nil && !strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}

func (s *Server) signinForm(w http.ResponseWriter, r *http.Request) {
	if len(s.users) == 0 {
		http.Redirect(w, r, "/ui/journal", http.StatusSeeOther)
		return
	}
	if _, ok, err := s.identify(w, r); err != nil {
		s.failed(w, r, who{}, "read the session", err)
		return
	} else if ok {
		http.Redirect(w, r, safeNext(r.URL.Query().Get("next")), http.StatusSeeOther)
		return
	}
	u := who{CSRF: s.csrfToken(w, r)}
	s.render(w, r, http.StatusOK, "signin", u, s.cat.t("signin_title"),
		signinData{Next: safeNext(r.URL.Query().Get("next")), PlainHTTP: s.plainHTTP(r)})
}

func (s *Server) signin(w http.ResponseWriter, r *http.Request) {
	if len(s.users) == 0 {
		http.Redirect(w, r, "/ui/journal", http.StatusSeeOther)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	name, password := strings.TrimSpace(r.PostFormValue("name")), r.PostFormValue("password")
	next := safeNext(r.PostFormValue("next"))
	c, err := r.Cookie(csrfCookie)
	if err != nil || !sameToken(r.PostFormValue("csrf"), c.Value) {
		s.log.WarnContext(r.Context(), "ui: a sign-in without the right csrf token refused", "remote", r.RemoteAddr)
		// The token may just have been missing (cookies cleared): a fresh form.
		u := who{CSRF: s.csrfToken(w, r)}
		s.render(w, r, http.StatusForbidden, "signin", u, s.cat.t("signin_title"),
			signinData{Name: name, Next: next, Error: s.cat.t("err_csrf_signin")})
		return
	}
	if !s.limit.allowed(name, r) {
		s.signedIn("limited")
		s.log.WarnContext(r.Context(), "ui: sign-in refused: too many failures", "name", name, "remote", r.RemoteAddr,
			"x_forwarded_for", r.Header.Get("X-Forwarded-For"))
		u := who{CSRF: s.csrfToken(w, r)}
		w.Header().Set("Retry-After", "60")
		s.render(w, r, http.StatusTooManyRequests, "signin", u, s.cat.t("signin_title"),
			signinData{Name: name, Next: next, Error: s.cat.t("err_signin_limited")})
		return
	}
	user, known := s.users[name]
	hash := s.dummy
	if known {
		hash = []byte(user.PasswordHash)
	}
	// Compared whether or not the name is known: the same cost either way.
	match := bcrypt.CompareHashAndPassword(hash, []byte(password)) == nil
	if !known || !match {
		s.limit.failed(name, r)
		s.signedIn("failed")
		s.log.WarnContext(r.Context(), "ui: sign-in failed", "name", name, "known_name", known, "remote", r.RemoteAddr,
			"x_forwarded_for", r.Header.Get("X-Forwarded-For"))
		u := who{CSRF: s.csrfToken(w, r)}
		s.render(w, r, http.StatusUnauthorized, "signin", u, s.cat.t("signin_title"),
			signinData{Name: name, Next: next, Error: s.cat.t("err_signin")})
		return
	}
	s.limit.succeeded(name)
	s.signedIn("ok")
	// A fresh token at every sign-in: one planted before it is worth nothing.
	if old, err := r.Cookie(sessionCookie); err == nil {
		if err := s.sessions.delete(r.Context(), old.Value); err != nil {
			s.failed(w, r, who{}, "end the previous session", err)
			return
		}
	}
	token, _, err := s.sessions.create(r.Context(), user)
	if err != nil {
		s.failed(w, r, who{}, "start a session", err)
		return
	}
	http.SetCookie(w, s.cookie(sessionCookie, token, 0))
	s.log.InfoContext(r.Context(), "ui: signed in", "name", user.Name, "role", user.Role, "remote", r.RemoteAddr)
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// signedIn tells Config.OnSignIn a sign-in's outcome.
func (s *Server) signedIn(outcome string) {
	if s.cfg.OnSignIn != nil {
		s.cfg.OnSignIn(outcome)
	}
}

func (s *Server) signout(w http.ResponseWriter, r *http.Request, u who) {
	if !u.Local {
		// The row goes, so the session ends on every replica.
		if err := s.sessions.delete(r.Context(), u.token); err != nil {
			s.failed(w, r, u, "end the session", err)
			return
		}
		http.SetCookie(w, s.cookie(sessionCookie, "", -1))
		s.log.InfoContext(r.Context(), "ui: signed out", "name", u.Name, "remote", r.RemoteAddr)
		http.Redirect(w, r, "/ui/signin", http.StatusSeeOther)
		return
	}
	http.Redirect(w, r, "/ui/journal", http.StatusSeeOther)
}

// signoutAction is POST /ui/signout: the csrf token, any role.
func (s *Server) signoutAction() http.HandlerFunc {
	return s.page(func(w http.ResponseWriter, r *http.Request, u who) {
		r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
		if !sameToken(r.PostFormValue("csrf"), u.CSRF) {
			s.refuse(w, r, u, "err_csrf")
			return
		}
		s.signout(w, r, u)
	})
}
