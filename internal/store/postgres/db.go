// Package postgres is the PostgreSQL store: it connects (pgxpool), applies the embedded
// migrations under an advisory lock, refuses a schema that is behind, and implements
// journal.Store, outbox.Store and connectors.CursorStore. Runtime SQL lives next to
// the code that runs it.
//
// A claim holds its operation's row lock (SELECT … FOR NO KEY UPDATE) in an open
// transaction on one pooled connection while the engine talks to 1C; the attempt row
// is written on another connection so that it is committed before 1C hears of the
// operation.
package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ordersync/ordersync/internal/journal"
)

// Config configures Open.
type Config struct {
	// URL is a postgres:// URL. Parameters the driver does not know (search_path,
	// application_name, …) are sent to the server as runtime parameters; pgxpool's
	// pool_* parameters are honoured.
	URL string
	// MaxConnections is the most connections the store opens to the server at
	// once, all of them together: the main pool, the inbox writers' sessions and the
	// LISTEN connection. When set, it is split by Split (at least MinConnections);
	// MaxConns must then be left 0, and a pool_max_conns in the URL is overridden.
	// When 0, the main pool is MaxConns and the others come on top of it.
	MaxConnections int32
	// MaxConns bounds the main pool alone (default 10, or the URL's pool_max_conns;
	// at least 2: a claim holds one connection while its attempt row is written on
	// another). Open claims and locks (Lock) are limited to MaxConns-1 together so
	// that attempt rows and other queries always find a connection; a cancel holds a
	// claim and a lock at once, so give each worker two. The inbox writers have
	// InboxWriterConns sessions of their own besides (writersConfig), opened when the
	// first webhook is stored, and the relays share one LISTEN connection
	// (ListenConns). Use MaxConnections instead to bound the total.
	MaxConns int32
	// ClaimIdleTimeout is the idle_in_transaction_session_timeout of claim
	// transactions: how long a claim may sit idle (waiting for 1C) before the server
	// ends its session and so releases the row lock. Set it above onec.timeout
	// (default 2m).
	ClaimIdleTimeout time.Duration
	// ClaimLockTimeout is the lock_timeout with which ClaimKey, Requeue, Revise and
	// Lock wait for a row another worker holds; past it they answer journal.ErrBusy
	// (default 30s). Lock counts its wait for a free claim slot in it.
	ClaimLockTimeout time.Duration
	// CloseTimeout bounds how long Close waits for the server to confirm the close
	// of the pool's connections (default 5s): a database that does not answer must
	// not hold a stopping service.
	CloseTimeout time.Duration
	// TakeoverAfter is how old an open attempt must be before a claim takes it over
	// (closes it as interrupted and starts another): the engine's call budget plus
	// onec.settle_time, so that a worker whose session died is never raced while its
	// POST may still be at work in 1C (default 3m30s: 3 × 30s + 2m).
	TakeoverAfter time.Duration
	// Now, when set, is the store's clock as is (tests' fake clocks): every time the
	// store writes and every comparison it makes, the outbox's leases included. It
	// excludes ProcessClock.
	//
	// When Now is nil the store's clock is the database's: replicas whose clocks
	// disagree judge alike whether an earlier attempt may still be at work in 1C.
	// A claim compares and stamps its attempt with the server's clock_timestamp()
	// taken under the row lock, a verification lease and the outbox's leases are
	// reckoned on now() in SQL, and every other time (DB.Now, which the engine is
	// given for its settle, verification and retry times) is the process's clock
	// corrected by the difference measured at Open and every ClockCheckInterval.
	Now func() time.Time
	// ProcessClock is this process's clock, which DB.Now corrects by the measured
	// difference (default time.Now; tests set one that runs ahead).
	ProcessClock func() time.Time
	// ClockCheckInterval is how often the difference between the database's clock
	// and the process's is measured again after Open (default DefaultClockCheckInterval;
	// negative: only at Open). Unused when Now is set.
	ClockCheckInterval time.Duration
	// Logger receives notices such as applied migrations and interrupted attempts
	// (default: discarded).
	Logger *slog.Logger
	// ConfigurePool, when set, may adjust the pool configuration before the pool is
	// made (tests install a DialFunc that counts round trips).
	ConfigurePool func(*pgxpool.Config)
}

// Defaults.
const (
	DefaultMaxConns         = 10
	DefaultMaxConnections   = 20
	DefaultClaimIdleTimeout = 2 * time.Minute
	DefaultClaimLockTimeout = 30 * time.Second
	DefaultTakeoverAfter    = 3*time.Minute + 30*time.Second
	// DefaultClockCheckInterval is how often the database's clock is compared with
	// the process's.
	DefaultClockCheckInterval = time.Minute
)

// The connections a store opens besides its main pool.
const (
	// InboxWriterConns is the inbox writers' sessions (inbox_group.go).
	InboxWriterConns = groupWriters
	// ListenConns is the LISTEN connection, which every Listen shares.
	ListenConns = 1
	// MinConnections is the smallest MaxConnections: the writers, the listener and a
	// main pool of two (a claim, and its attempt row).
	MinConnections = InboxWriterConns + ListenConns + 2
)

// Connections is how a store's connections are split: at most Main in the main
// pool (of which at most Claims hold claims and locks at once), Writers for the
// inbox writers, Listen for LISTEN. Total is their sum, the most the store ever
// opens at once.
type Connections struct {
	Total, Main, Claims, Writers, Listen int32
}

// Split divides a total of connections: ListenConns for the LISTEN connection,
// InboxWriterConns for the inbox writers, the rest for the main pool, of which all
// but one may hold claims and locks (the one left writes attempt rows and serves
// everything else). total must be at least MinConnections.
func Split(total int32) (Connections, error) {
	if total < MinConnections {
		return Connections{}, fmt.Errorf("postgres: %d connections are too few: at least %d (%d for the inbox writers, %d for LISTEN, 2 for the main pool: a claim and its attempt row)",
			total, MinConnections, InboxWriterConns, ListenConns)
	}
	main := total - InboxWriterConns - ListenConns
	return Connections{Total: total, Main: main, Claims: main - 1, Writers: InboxWriterConns, Listen: ListenConns}, nil
}

// Application names: unless the URL names one (application_name=…, which every
// connection then carries as given, e.g. to tell replicas apart), each kind of
// connection tells pg_stat_activity what it is.
const (
	mainApplicationName   = "ordersync"        // the main pool
	inboxApplicationName  = "ordersync inbox"  // the inbox writers
	listenApplicationName = "ordersync listen" // LISTEN
)

// DB is an open PostgreSQL store.
type DB struct {
	pool    *pgxpool.Pool
	writers *pgxpool.Pool // the inbox writers' sessions (receiveTx)
	conns   Connections
	// listenConn is the LISTEN connection's configuration; listener shares it
	// between every Listen (listen.go).
	listenConn *pgx.ConnConfig
	listener   *listenHub
	cfg        Config
	log        *slog.Logger
	target     string // host:port/database, for messages
	journal    *Journal
	// injectedClock: Config.Now was set (tests); otherwise the store's clock is the
	// database's (clock.go).
	injectedClock bool
	clock         dbClock

	// claimSlots bounds the claims and locks open at once to MaxConns-1: each holds a
	// connection, and writing a claim's attempt row needs another.
	claimSlots chan struct{}
	// slotWaiters counts the claims and locks waiting for a claim slot now; tests
	// wait on it instead of sleeping.
	slotWaiters atomic.Int64

	// group gathers new inbox events into batches (inbox_group.go).
	groupOnce sync.Once
	group     *receiveGroup
	// groupStore, when set (tests only), is called before each batch is stored with
	// its size and the number of deliveries its writer keeps back; groupFail, when
	// set, may fail a batch of several, which is then stored one by one;
	// groupFellBack, when set, hears of each batch stored one by one and why.
	groupStore    func(size, keptBack int)
	groupFail     func(size int) error
	groupFellBack func(size int, err error)
}

// Open connects to the database and pings it. Its errors name the server as
// host:port/database and the user, never the password, so that `ordersync run` can
// print one clear line.
func Open(ctx context.Context, cfg Config) (*DB, error) {
	if strings.TrimSpace(cfg.URL) == "" {
		return nil, errors.New("postgres: the database URL is empty")
	}
	if cfg.Now != nil && cfg.ProcessClock != nil {
		return nil, errors.New("postgres: set Now (a clock used as is) or ProcessClock (corrected by the database's), not both")
	}
	if cfg.MaxConnections < 0 || cfg.MaxConns < 0 || cfg.ClaimIdleTimeout < 0 || cfg.ClaimLockTimeout < 0 || cfg.TakeoverAfter < 0 {
		return nil, errors.New("postgres: MaxConnections, MaxConns, ClaimIdleTimeout, ClaimLockTimeout and TakeoverAfter must not be negative")
	}
	if cfg.MaxConnections > 0 && cfg.MaxConns > 0 {
		return nil, errors.New("postgres: set MaxConnections (the total) or MaxConns (the main pool), not both")
	}
	pc, err := pgxpool.ParseConfig(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("postgres: cannot parse the database URL %s: %s", redactURL(cfg.URL), parseErrorCause(err))
	}
	var conns Connections
	switch {
	case cfg.MaxConnections > 0:
		if conns, err = Split(cfg.MaxConnections); err != nil {
			return nil, err
		}
		pc.MaxConns = conns.Main
	case cfg.MaxConns > 0:
		pc.MaxConns = cfg.MaxConns
	case !strings.Contains(cfg.URL, "pool_max_conns="):
		pc.MaxConns = DefaultMaxConns
	}
	pc.MinConns = min(pc.MinConns, pc.MaxConns)
	cfg.ClaimIdleTimeout = cmp.Or(cfg.ClaimIdleTimeout, DefaultClaimIdleTimeout)
	cfg.ClaimLockTimeout = cmp.Or(cfg.ClaimLockTimeout, DefaultClaimLockTimeout)
	cfg.TakeoverAfter = cmp.Or(cfg.TakeoverAfter, DefaultTakeoverAfter)
	cfg.CloseTimeout = cmp.Or(cfg.CloseTimeout, 5*time.Second)
	injected := cfg.Now != nil
	if cfg.ProcessClock == nil {
		cfg.ProcessClock = time.Now
	}
	cfg.ClockCheckInterval = cmp.Or(cfg.ClockCheckInterval, DefaultClockCheckInterval)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.ConfigurePool != nil {
		cfg.ConfigurePool(pc)
	}
	if pc.MaxConns < 2 {
		return nil, fmt.Errorf("postgres: the pool needs at least 2 connections (a claim holds one while its attempt is written on another), got %d", pc.MaxConns)
	}
	if cfg.MaxConnections > 0 && pc.MaxConns != conns.Main {
		return nil, fmt.Errorf("postgres: ConfigurePool changed the main pool to %d connections; MaxConnections %d gives it %d", pc.MaxConns, cfg.MaxConnections, conns.Main)
	}
	cfg.MaxConns = pc.MaxConns
	conns = Connections{Main: pc.MaxConns, Claims: pc.MaxConns - 1, Writers: InboxWriterConns, Listen: ListenConns}
	conns.Total = conns.Main + conns.Writers + conns.Listen

	target := describeTarget(pc.ConnConfig)
	named := pc.ConnConfig.RuntimeParams["application_name"] != ""
	if !named {
		pc.ConnConfig.RuntimeParams["application_name"] = mainApplicationName
	}
	wc := writersConfig(pc)
	lc := pc.ConnConfig.Copy()
	if !named {
		wc.ConnConfig.RuntimeParams["application_name"] = inboxApplicationName
		lc.RuntimeParams["application_name"] = listenApplicationName
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, &ConnectError{Target: target, Err: err}
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, &ConnectError{Target: target, Err: err}
	}
	writers, err := pgxpool.NewWithConfig(ctx, wc) // connects on first use
	if err != nil {
		pool.Close()
		return nil, &ConnectError{Target: target, Err: err}
	}
	db := &DB{
		pool:       pool,
		writers:    writers,
		conns:      conns,
		listenConn: lc,
		cfg:        cfg,
		log:        cfg.Logger,
		target:     target,
		claimSlots: make(chan struct{}, pc.MaxConns-1),

		injectedClock: injected,
	}
	db.journal = &Journal{db: db}
	db.listener = &listenHub{db: db}
	if err := db.startClock(ctx); err != nil {
		pool.Close()
		writers.Close()
		return nil, &ConnectError{Target: target, Err: err}
	}
	return db, nil
}

// Close closes the pool. It waits for acquired connections (open claims) to be
// released.
//
// Closing a connection says goodbye to the server and waits for it to close its end;
// a server that does not answer is waited for at most CloseTimeout, then the pools are
// left to close on their own (the process is ending).
func (db *DB) Close() {
	db.groupOnce.Do(func() {}) // no group starts after this
	if db.group != nil {
		db.group.close()
	}
	closed := make(chan struct{})
	go func() {
		db.stopClock()
		db.listener.close()
		db.pool.Close()
		db.writers.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(db.cfg.CloseTimeout):
		db.log.Warn("postgres: the server did not confirm the close of its connections in time; leaving them",
			"target", db.target, "close_timeout", db.cfg.CloseTimeout.String())
	}
}

// writersConfig is the pool of the inbox writers (inbox_group.go): a session each,
// on which a receiving statement sent alone is its own REPEATABLE READ transaction
// on its generic plan (see receiveTx). They are not counted in MaxConns, but are in
// MaxConnections.
//
// The settings are made with SET after connecting rather than sent as start-up
// parameters, which a connection pooler in front of the server may refuse.
func writersConfig(pc *pgxpool.Config) *pgxpool.Config {
	wc := pc.Copy()
	wc.MaxConns, wc.MinConns = groupWriters, 0
	after := wc.AfterConnect
	wc.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		if after != nil {
			if err := after(ctx, c); err != nil {
				return err
			}
		}
		_, err := c.Exec(ctx, `SET default_transaction_isolation = 'repeatable read'; SET plan_cache_mode = force_generic_plan`)
		return err
	}
	return wc
}

// Pool is the connection pool, for packages (the outbox) that write in the same
// transactions as the journal.
func (db *DB) Pool() *pgxpool.Pool { return db.pool }

// Journal is the journal store.
func (db *DB) Journal() journal.Store { return db.journal }

// Connections is how the store's connections are split: it never opens more than
// Total at once.
func (db *DB) Connections() Connections { return db.conns }

// String names the server as host:port/database.
func (db *DB) String() string { return db.target }

// EmbeddedFile is "": PostgreSQL is no embedded file (store.DB).
func (db *DB) EmbeddedFile() string { return "" }

// nowUTC is the store's clock (Now) at the database's precision.
func (db *DB) nowUTC() time.Time { return db.Now().UTC().Truncate(time.Microsecond) }

func describeTarget(c *pgx.ConnConfig) string {
	s := net.JoinHostPort(c.Host, strconv.Itoa(int(c.Port))) + "/" + c.Database
	if c.User != "" {
		s += " as " + c.User
	}
	return s
}

func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" {
		return "(not shown)"
	}
	return u.Redacted()
}

// parseErrorCause is the reason pgx gave for refusing a URL, without the URL (pgx
// redacts the password only on a best-effort basis).
func parseErrorCause(err error) string {
	var pe *pgconn.ParseConfigError
	if errors.As(err, &pe) {
		if inner := errors.Unwrap(pe); inner != nil {
			return inner.Error()
		}
		return "malformed"
	}
	return err.Error()
}

// ConnectError is Open's error when the server cannot be reached or refuses the
// session: "postgres: cannot connect to host:port/db as user: why", never the
// password. Err is pgx's, for errors.As: a *pgconn.PgError carries the server's
// SQLSTATE (57P03 while it starts up, 28P01 for a wrong password), anything else is
// the network's (refused, unreachable, timed out, a name that does not resolve).
type ConnectError struct {
	Target string // host:port/db as user
	Err    error
}

func (e *ConnectError) Error() string {
	return "postgres: cannot connect to " + e.Target + ": " + connectErrorCause(e.Err)
}

func (e *ConnectError) Unwrap() error { return e.Err }

// Refused reports whether the server refused the session for a reason in the
// configuration, which trying again will not mend: no such role (SQLSTATE 28000), a
// wrong password (28P01), no such database (3D000). A server that does not answer,
// is starting up or is full is not refused.
func (e *ConnectError) Refused() bool {
	var pe *pgconn.PgError
	if !errors.As(e.Err, &pe) {
		return false
	}
	switch pe.Code {
	case codeInvalidAuthorization, codeInvalidPassword, codeInvalidCatalogName:
		return true
	}
	return false
}

// connectErrorCause strips pgconn's "failed to connect to `user=… database=…`:"
// prefix: the caller names the target itself. pgconn joins the errors of every try
// (sslmode=prefer tries with TLS, then without); each distinct one is said once,
// separated by "; ".
func connectErrorCause(err error) string {
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		if inner := errors.Unwrap(ce); inner != nil {
			err = inner
		}
	}
	joined, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return err.Error()
	}
	var msgs []string
	for _, e := range joined.Unwrap() {
		if m := e.Error(); !slices.Contains(msgs, m) {
			msgs = append(msgs, m)
		}
	}
	return strings.Join(msgs, "; ")
}

// PostgreSQL error codes the store interprets.
const (
	codeLockNotAvailable       = "55P03"
	codeIdleInTransactionTimed = "25P03"
	codeUniqueViolation        = "23505"
	codeInvalidAuthorization   = "28000" // also: no such role
	codeInvalidPassword        = "28P01"
	codeInvalidCatalogName     = "3D000" // no such database
)

// interpretError maps driver errors to the journal's sentinels; others pass through.
func interpretError(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return journal.ErrNotFound
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case codeLockNotAvailable:
			return fmt.Errorf("%w (%s)", journal.ErrBusy, pe.Message)
		}
	}
	return err
}
