package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/ordersync/ordersync/connectors"
	"github.com/ordersync/ordersync/internal/config"
	"github.com/ordersync/ordersync/internal/onec"
	payrec "github.com/ordersync/ordersync/internal/payouts/reconcile"
	"github.com/ordersync/ordersync/internal/reconcile"
	"github.com/ordersync/ordersync/internal/store"
	"github.com/ordersync/ordersync/internal/ui"
)

func (a *app) uiCommand() *cobra.Command {
	c := &cobra.Command{Use: "ui", Short: "The accountant's journal pages (ui.listen): their users"}
	c.AddCommand(a.uiHashPasswordCommand())
	return c
}

func (a *app) uiHashPasswordCommand() *cobra.Command {
	var name, role string
	c := &cobra.Command{
		Use:   "hash-password",
		Short: "Read a password on stdin and print its bcrypt hash for ui.users",
		Long: `hash-password reads a password from stdin — on a terminal twice, without echo;
from a pipe one line — and prints its bcrypt hash (cost 12) on stdout, and on
stderr a ui.users entry to paste into the configuration:

  ordersync ui hash-password --name anna --role operator
  printf '%s\n' "$PASSWORD" | ordersync ui hash-password

The password itself is never printed or logged.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if role != ui.RoleViewer && role != ui.RoleOperator {
				return usageError(fmt.Errorf("ui hash-password: --role must be viewer or operator, got %q", role))
			}
			pw, err := ui.ReadPassword(a.stdin, a.stderr)
			if err != nil {
				return usageError(fmt.Errorf("ui hash-password: %w", err))
			}
			hash, err := ui.HashPassword(pw)
			if err != nil {
				return fmt.Errorf("ui hash-password: %w", err)
			}
			fmt.Fprintln(a.stdout, hash)
			fmt.Fprintf(a.stderr, "\nui:\n  users:\n    - name: %s\n      password_hash: '%s'\n      role: %s\n", name, hash, role)
			return nil
		},
	}
	c.Flags().StringVar(&name, "name", "accountant", "the user's name, for the ui.users entry printed on stderr")
	c.Flags().StringVar(&role, "role", ui.RoleViewer, "viewer (reads, exports) or operator (also resyncs, requeues)")
	return c
}

// uiSide is the pages' listener of `ordersync run` (ui.listen).
type uiSide struct {
	srv   *ui.Server
	log   *slog.Logger
	users int
	mode  string // how one signs in, for the log
}

// newUI builds the journal pages for ui.listen, nil when it is empty, on the
// service's stores; reconciliation asks 1C through client and the enabled
// marketplaces. wake makes the engine claim a resynced operation at once.
func newUI(cfg *config.Config, db store.DB, client onec.Client, markets []marketplace,
	wake func(), signIn func(outcome string), log *slog.Logger) (*uiSide, error) {
	if cfg.UI.Listen == "" {
		return nil, nil
	}
	users := make([]ui.User, len(cfg.UI.Users))
	for i, u := range cfg.UI.Users {
		users[i] = ui.User{Name: u.Name, PasswordHash: u.PasswordHash, Role: u.Role}
	}
	sources := []string{"site"}
	for _, m := range markets {
		sources = append(sources, m.name)
	}
	srv, err := ui.New(ui.Config{
		Listen: cfg.UI.Listen, Hosts: cfg.UI.Hosts, Lang: cfg.UI.Lang, Location: cfg.UILocation(), OneCLocation: cfg.OneC.Location(),
		Users: users, SessionTTL: cfg.UI.SessionTTL, Sessions: db.Sessions(), SecureCookie: cfg.UI.CookieSecure(),
		Journal: db.Journal(), Outbox: db.Outbox(), Inbox: db.Inbox(),
		Reconcile: uiReconcile(cfg, db, client, markets), ReconcileSources: sources,
		Payouts: uiPayouts(cfg, db, client), PayoutSources: append([]string{"kaspi"}, cfg.PayoutAccounts()...),
		Wake: wake, OnSignIn: signIn, Logger: log.With("component", "ui"),
		OneC: client, OneCWebURL: cfg.UI.OneCWebURL, OneCDocument: uiDocument(cfg),
	})
	if err != nil {
		return nil, usageError(err)
	}
	mode := "sign-in with ui.users"
	if len(users) == 0 {
		mode = "no users: no sign-in, loopback only"
	}
	return &uiSide{srv: srv, log: log, users: len(users), mode: mode}, nil
}

// uiDocument is the document orders become in 1C, as its links name it.
func uiDocument(cfg *config.Config) string {
	if cfg.OneC.Interface == "odata" && cfg.OneC.OData.Profile == "unf" {
		return ui.DocumentBuyerOrder
	}
	return ui.DocumentOrder
}

// Start listens on ui.listen.
func (u *uiSide) Start(ctx context.Context) error {
	if err := u.srv.Start(ctx); err != nil {
		return err
	}
	u.log.InfoContext(ctx, "ui: listening on "+listenURL(u.srv.Addr().String()), "address", listenURL(u.srv.Addr().String()),
		"url", u.srv.URL(), "users", u.users, "access", u.mode)
	return nil
}

// Stop ends the listener; requests in flight get until ctx ends.
func (u *uiSide) Stop(ctx context.Context) error { return u.srv.Stop(ctx) }

// uiReconcile is the reconciliation page's: source is site or an enabled
// connector's configuration name (kaspi, ozon, wildberries), as the CLI takes it.
func uiReconcile(cfg *config.Config, db store.DB, client onec.Client, markets []marketplace) ui.ReconcileFunc {
	return func(ctx context.Context, source string, from, to time.Time) (reconcile.Report, error) {
		var mp connectors.Marketplace
		name := source
		if source != "site" {
			for _, m := range markets {
				if m.name == source {
					mp = m.mp
				}
			}
			if mp == nil {
				return reconcile.Report{}, errors.New("the connector " + source + " is not enabled (connectors." + source + ".enabled)")
			}
			name = mp.Name()
		}
		return reconcile.Run(ctx, reconcile.Params{Source: name, From: from, To: to,
			Location: cfg.UILocation(), OneCLocation: cfg.OneC.Location(),
			Journal: db.Journal(), OneC: client, Marketplace: mp})
	}
}

// uiPayouts is the payout reconciliation page's: source is a marketplace's
// configuration name (kaspi, ozon, wildberries), as the CLI takes it. It reads the
// lines ordersync holds; the connector need not be enabled.
func uiPayouts(cfg *config.Config, db store.DB, client onec.Client) ui.PayoutsFunc {
	return func(ctx context.Context, source string, from, to time.Time) (payrec.Report, error) {
		name, err := payoutSource(cfg, source)
		if err != nil {
			return payrec.Report{}, err
		}
		return payrec.Run(ctx, payrec.Params{Source: name, From: from, To: to,
			Location: cfg.UILocation(), OneCLocation: cfg.OneC.Location(),
			Lines: db.Payouts(), Journal: db.Journal(), OneC: client})
	}
}
