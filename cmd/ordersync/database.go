package main

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/ordersync/ordersync/connectors/wildberries"
	"github.com/ordersync/ordersync/internal/config"
	"github.com/ordersync/ordersync/internal/engine"
	"github.com/ordersync/ordersync/internal/store"
	"github.com/ordersync/ordersync/internal/store/postgres"
	"github.com/ordersync/ordersync/internal/store/sqlite"
)

// getenv reads the command's environment (not the process's: tests inject it).
func (a *app) getenv(name string) string {
	for _, kv := range a.environ {
		if k, v, ok := strings.Cut(kv, "="); ok && k == name {
			return v
		}
	}
	return ""
}

// dbUse is what a command may do with the database, and which secrets it reads.
type dbUse struct {
	// create: the command may create the embedded database file (run, migrate,
	// demo). Every other command opens an existing one or exits 1 naming the places
	// it looked.
	create bool
	// wait: the command waits for a database server that does not answer yet, up to
	// database.connect_timeout, logging each try (run, migrate). Others try once.
	wait bool
	// readOnly: the command only reads; the embedded file is opened read-only and
	// never migrated.
	readOnly bool
	// secrets: the secrets the command reads besides database.url, which every
	// one reads (nil: none). A *_file it does not read is never opened, so a file
	// only the service can read (/run/credentials/…) is no obstacle to it, and a
	// missing one is not its problem. A command may read fewer than these (resync
	// --dry-run reads none) or more (reconcile --source kaspi reads Kaspi's token)
	// with loadConfigReading.
	secrets secretSet
}

// secretSet chooses by key (onec.password, relay.destinations.crm.secrets) the
// secrets a command reads.
type secretSet func(key string) bool

// The sets the commands read.
var (
	readAll  secretSet = func(string) bool { return true }
	readOneC           = readKeys("onec.password")
)

// readKeys reads the secrets named.
func readKeys(keys ...string) secretSet {
	return func(key string) bool { return slices.Contains(keys, key) }
}

// and reads what either set reads.
func (s secretSet) and(o secretSet) secretSet {
	return func(key string) bool { return (s != nil && s(key)) || (o != nil && o(key)) }
}

// readConnectors reads the API credentials of the accounts named, by their
// configuration name (connectors.<name>) or their source (wb for wildberries): a
// command that talks to one marketplace reads no other's.
func readConnectors(names ...string) secretSet {
	return func(key string) bool {
		rest, ok := strings.CutPrefix(config.UserKey(key), "connectors.")
		if !ok {
			return false
		}
		account, _, _ := strings.Cut(rest, ".")
		for _, n := range names {
			if n == account || (n == wildberries.Name && account == "wildberries") {
				return true
			}
		}
		return false
	}
}

// commandUses says, for each command (app.command), how it uses the database. Every
// command is listed (TestEveryCommandSaysHowItUsesTheDatabase).
var commandUses = map[string]dbUse{
	"run":     {create: true, wait: true, secrets: readAll},
	"migrate": {create: true, wait: true},
	"demo":    {create: true, secrets: readAll},

	"config check": {secrets: readAll}, // it checks them
	// They carry operations out with 1C. The credentials of a marketplace or of
	// Bitrix24 are read only when an order is to be fetched from it (a push that
	// named it alone), and a stock snapshot reads Ozon's and Wildberries' only to
	// publish in the foreground (worker.reading).
	"order import": {secrets: readOneC},
	"order cancel": {secrets: readOneC},
	// --dry-run reads none; resync CONNECTOR ID reads that connector's too.
	"resync":         {secrets: readOneC},
	"stock snapshot": {secrets: readOneC},
	"outbox requeue": {},
	"outbox replay":  {},

	"journal list":      {readOnly: true},
	"journal show":      {readOnly: true},
	"inbox list":        {readOnly: true},
	"inbox show":        {readOnly: true},
	"outbox status":     {readOnly: true},
	"outbox list":       {readOnly: true},
	"connectors status": {readOnly: true},
	// It calls the marketplaces only: no database.
	"connectors check": {},
	"stock show":       {readOnly: true},
	"stock diff":       {readOnly: true},
	"stock status":     {readOnly: true},
	// It asks the admin listener, and reads the journal, the outbox and stock.
	"status": {readOnly: true},
	// It reads the journal and asks 1C and the marketplace (--source) for their lists.
	"reconcile": {secrets: readOneC},
	// It reads the payout lines and the journal, and asks 1C for its orders.
	"reconcile payouts": {secrets: readOneC},

	// They read $metadata and the catalogs of 1C; the probe writes one draft there.
	"onec check": {secrets: readOneC},
	"onec refs":  {secrets: readOneC},

	"ui hash-password": {},

	"sim onec": {},
	"version":  {},
}

// use is how this command uses the database. Callers inside the program (tests,
// the demo's reader) that run no command keep the old ways: create, read everything.
func (a *app) use() dbUse {
	if u, ok := commandUses[a.command]; ok {
		return u
	}
	return dbUse{create: true, secrets: readAll}
}

// serviceStateDir is where the unit keeps the embedded database (StateDirectory=),
// looked at from outside the unit.
var serviceStateDir = sqlite.ServiceDir

// openDB opens the configured database (store.Open): PostgreSQL when database.url
// is a postgres URL, otherwise the embedded SQLite file (the default), as the
// command's dbUse allows. A server that does not answer is an operational failure
// (exit 1) named by host, port and database; run and migrate first wait for it up to
// database.connect_timeout. A server that refuses the role, the password or the
// database is a configuration error (exit 2). An embedded file found by looking is named once the
// command is done (Main).
func (a *app) openDB(ctx context.Context, cfg *config.Config, log *slog.Logger) (store.DB, error) {
	use := a.use()
	db, err := store.Open(ctx, store.Config{
		Database: cfg.Database, Create: use.create, Wait: use.wait, ReadOnly: use.readOnly,
		Getenv: a.getenv, ServiceDir: serviceStateDir,
		// Said once the command is done (Main), on stderr, or with its error: not
		// here, where it would make the one line of an error two. `run` logs it.
		Found:            func(p sqlite.Place) { a.opened = "journal " + p.String() },
		ClaimIdleTimeout: claimIdleTimeout(cfg),
		ClaimLockTimeout: engine.CallBudget(cfg.OneC.Timeout) + 10*time.Second,
		TakeoverAfter:    engine.TakeoverAfter(cfg.OneC.Timeout, cfg.OneC.SettleTime),
		CloseTimeout:     cfg.Worker.ShutdownTimeout,
		ProcessClock:     a.processClock,
		Logger:           log,
	})
	// A role, password or database the server refuses is database.url's fault:
	// exit 2, which the unit does not restart (RestartPreventExitStatus=2).
	var ce *postgres.ConnectError
	if errors.As(err, &ce) && ce.Refused() {
		return nil, usageError(err)
	}
	return db, err
}

// openReadyDB opens the database and refuses a schema that is behind the binary. The
// embedded database is migrated on the spot (but by a command that only reads): it
// is the zero-set-up path, and nobody else shares the file.
func (a *app) openReadyDB(ctx context.Context, cfg *config.Config, log *slog.Logger) (store.DB, error) {
	db, err := a.openDB(ctx, cfg, log)
	if err != nil {
		return nil, err
	}
	if db.EmbeddedFile() != "" && !a.use().readOnly {
		if _, err := db.Migrate(ctx); err != nil {
			db.Close()
			return nil, err
		}
	}
	if err := db.CheckSchema(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// serviceRunning reports the pid of an `ordersync run` working an embedded database.
func serviceRunning(db store.DB) (int, bool) {
	if f := db.EmbeddedFile(); f != "" {
		return sqlite.LockHolder(f)
	}
	return 0, false
}

// wakeService tells a running service that there is work (SIGUSR1): it claims at once
// instead of at its next poll.
func wakeService(pid int) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	return p.Signal(wakeSignal)
}
