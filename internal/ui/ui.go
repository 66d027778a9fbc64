// Package ui is the accountant's journal pages, served on ui.listen by `ordersync
// run`: the journal's list with filters, one operation's page (its 1C order,
// timeline, warnings, conflicts, the webhook delivery that brought it and the
// outbox events it caused), CSV and XLSX exports, the reconciliation, and sign-in.
// Operators also resync an operation and requeue a dead outbox event from them.
//
//	GET  /ui/journal?q=&status=&source=&kind=&from=&to=&warnings=1&after=
//	GET  /ui/journal/op?key=K
//	GET  /ui/journal/export.csv?…   GET /ui/journal/export.xlsx?…  (the list's filters)
//	POST /ui/journal/resync          key, csrf   (operators)
//	POST /ui/outbox/requeue          id, key, csrf (operators)
//	GET  /ui/reconcile?source=&from=&to=&format=  (format csv|xlsx: the report as a file)
//	GET  /ui/payouts?source=&from=&to=&format=    (format xlsx: the payout reconciliation's workbook)
//	GET  /ui/signin?next=   POST /ui/signin  name, password, csrf, next
//	POST /ui/signout                 csrf
//
// The pages need no JavaScript and load nothing from elsewhere: the style sheet is
// embedded. Every label goes through the catalogue (catalogue.go), in ru or en.
// Sessions are kept in the database (Config.Sessions), so every replica knows them.
package ui

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/ordersync/ordersync/internal/config"
	"github.com/ordersync/ordersync/internal/inbox"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/outbox"
	"github.com/ordersync/ordersync/internal/reconcile"
	"github.com/ordersync/ordersync/internal/serve"
	"github.com/ordersync/ordersync/internal/ui/session"
)

// Roles, as ui.users[].role names them.
const (
	RoleViewer   = "viewer"
	RoleOperator = "operator"
)

// LocalUser is who uses the pages when no users are configured (loopback only):
// an operator, without signing in.
const LocalUser = "local"

// User is one person who signs in.
type User struct {
	Name         string
	PasswordHash string // bcrypt
	Role         string // RoleViewer or RoleOperator
}

// ReconcileFunc reconciles one source over the days from..to (both inclusive,
// dates at midnight in the pages' zone).
type ReconcileFunc func(ctx context.Context, source string, from, to time.Time) (reconcile.Report, error)

// Config of a Server.
type Config struct {
	// Listen is ui.listen, host:port.
	Listen string
	// OnSignIn, when set, is told each sign-in's outcome: ok, failed or limited
	// (ordersync_ui_signins_total).
	OnSignIn func(outcome string)
	// Hosts are ui.hosts: the names, beside its own address, the pages are reached
	// by (a proxy's). A request for another host is refused (hostcheck).
	Hosts []string
	// Lang is ru (the default) or en.
	Lang string
	// Location is the zone times are shown in and dates are read in (ui.timezone).
	Location *time.Location
	// OneCLocation is onec.timezone: 1C's dates carry no zone; the pages label them
	// with it. Default Location.
	OneCLocation *time.Location
	// Users who may sign in. With none, nobody signs in and everyone is the
	// operator LocalUser, which New allows only on a loopback address.
	Users []User
	// SessionTTL is how long a session lasts without use (sliding); default 12h.
	SessionTTL time.Duration
	// Sessions keeps the sessions: the database's, so that a sign-in holds on
	// every replica and a sign-out ends it on all. Nil: this process's memory.
	Sessions session.Store
	// SecureCookie marks the cookies Secure (pages reached over TLS).
	SecureCookie bool

	Journal journal.Store
	Outbox  outbox.Store
	// Inbox, when set and able to (ByOperation), shows the webhook delivery that
	// brought an operation.
	Inbox inbox.Store
	// Reconcile serves /ui/reconcile; nil: the page says it is not available.
	Reconcile ReconcileFunc
	// ReconcileSources are offered on the reconciliation's form.
	ReconcileSources []string
	// Payouts serves /ui/payouts; nil: the page says it is not available.
	Payouts PayoutsFunc
	// PayoutSources are offered on the payout reconciliation's form.
	PayoutSources []string
	// OneC, when set, is asked for the order when an operation's page opens, so
	// that the page shows 1C's total as 1C holds it now; nil: 1C is not asked and
	// the page says so.
	OneC OneCFinder
	// OneCTimeout bounds that question; default 3s. A 1C that does not answer in
	// time leaves the total as it was sent at creation, and the page says so.
	OneCTimeout time.Duration
	// OneCWebURL is ui.onec_web_url: the base's web client, where an operation's
	// page links the document (…/#e1cib/data/<OneCDocument>?ref=…); "" no link.
	OneCWebURL string
	// OneCDocument is the document orders become in 1C, as 1C's links name it;
	// default Документ.ЗаказКлиента.
	OneCDocument string
	// Wake, when set, is called after a resync requeued an operation: the engine
	// claims it at once.
	Wake func()

	Now    func() time.Time
	Logger *slog.Logger
}

// Server is the pages' HTTP server.
type Server struct {
	cfg      Config
	log      *slog.Logger
	cat      catalogue
	tmpl     map[string]*template.Template
	sessions *sessions
	users    map[string]User
	dummy    []byte // a bcrypt hash compared against when the name is unknown
	limit    signinLimit
	handler  http.Handler
	// exportPage is how many operations an export reads at a time (tests make it small).
	exportPage int

	ln *serve.Listener // nil until Start
}

// New checks cfg and builds the server; it listens once started.
func New(cfg Config) (*Server, error) {
	cfg.Lang = cmp.Or(cfg.Lang, "ru")
	if _, ok := catalogues[cfg.Lang]; !ok {
		return nil, fmt.Errorf("ui: lang must be ru or en, got %q", cfg.Lang)
	}
	if cfg.Journal == nil || cfg.Outbox == nil {
		return nil, errors.New("ui: the journal and the outbox stores are required")
	}
	if cfg.Listen != "" && len(cfg.Users) == 0 && !config.IsLoopback(cfg.Listen) {
		return nil, fmt.Errorf("ui: %s is reachable from other machines, so the pages need users (ui.users); "+
			"or listen on 127.0.0.1", cfg.Listen)
	}
	if cfg.Location == nil {
		cfg.Location = time.UTC
	}
	cfg.OneCLocation = cmp.Or(cfg.OneCLocation, cfg.Location)
	cfg.SessionTTL = cmp.Or(cfg.SessionTTL, 12*time.Hour)
	cfg.OneCTimeout = cmp.Or(cfg.OneCTimeout, 3*time.Second)
	cfg.OneCDocument = cmp.Or(cfg.OneCDocument, DocumentOrder)
	if cfg.SessionTTL < 0 {
		return nil, fmt.Errorf("ui: the session TTL must be greater than 0, got %s", cfg.SessionTTL)
	}
	if cfg.Sessions == nil {
		cfg.Sessions = newMemorySessions()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg, log: cfg.Logger, cat: catalogues[cfg.Lang], users: map[string]User{},
		sessions: newSessions(cfg.Sessions, cfg.SessionTTL, cfg.Now, cfg.Logger), exportPage: exportPage}
	cost := 0
	for _, u := range cfg.Users {
		if u.Role != RoleViewer && u.Role != RoleOperator {
			return nil, fmt.Errorf("ui: user %q: role must be viewer or operator, got %q", u.Name, u.Role)
		}
		c, err := hashCost(u.PasswordHash)
		if err != nil {
			return nil, fmt.Errorf("ui: user %q: the password hash is not bcrypt: %w", u.Name, err)
		}
		cost = max(cost, c)
		s.users[u.Name] = u
	}
	if len(cfg.Users) > 0 {
		// A name nobody has costs the same bcrypt compare as a wrong password, so
		// the time of an answer does not tell which names exist.
		d, err := dummyHash(cost)
		if err != nil {
			return nil, err
		}
		s.dummy = d
	}
	t, err := parseTemplates(s.funcs())
	if err != nil {
		return nil, err
	}
	s.tmpl = t
	s.handler = s.routes()
	return s, nil
}

// Handler is the server's routes, for tests and for mounting elsewhere.
func (s *Server) Handler() http.Handler { return s.handler }

// Start binds the address (an error names it) and serves in the background until
// Stop.
func (s *Server) Start(ctx context.Context) error {
	if s.ln != nil {
		return errors.New("ui: already started")
	}
	// No WriteTimeout: an export streams every row the filters match, however long
	// that takes; a client that stops reading is cut off by TCP.
	ln, err := serve.Start(ctx, s.cfg.Listen, &http.Server{Handler: s.handler, ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute,
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelDebug)}, s.log, "ui")
	if err != nil {
		return err
	}
	s.ln = ln
	if s.cfg.SecureCookie && len(s.users) > 0 {
		s.log.Warn("the pages are served over plain HTTP and their cookies are Secure: a browser that reaches them over http:// drops the cookie "+
			"and every sign-in fails as a stale form; terminate TLS in front of them (docs/ui.md) or set ui.secure_cookie false on a trusted network",
			"listen", ln.Addr().String())
	}
	return nil
}

// Addr is the address listened on (a port 0 resolved), nil before Start.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// URL is the journal's address once started: http://host:port/ui/journal.
func (s *Server) URL() string {
	if s.ln == nil {
		return ""
	}
	return (&url.URL{Scheme: "http", Host: s.ln.Addr().String(), Path: "/ui/journal"}).String()
}

// Stop stops serving: requests in flight get until ctx ends, then their connections
// are closed. Safe before Start and twice.
func (s *Server) Stop(ctx context.Context) error { return s.ln.Stop(ctx) }

// randomToken is 32 random bytes, URL-safe base64.
func randomToken() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("ui: no randomness: " + err.Error()) // crypto/rand does not fail on a working system
	}
	return base64.RawURLEncoding.EncodeToString(b[:])
}
