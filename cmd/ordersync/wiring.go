package main

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/ordersync/ordersync/internal/config"
	"github.com/ordersync/ordersync/internal/engine"
	"github.com/ordersync/ordersync/internal/logging"
	"github.com/ordersync/ordersync/internal/onec"
	"github.com/ordersync/ordersync/internal/onec/httpservice"
	"github.com/ordersync/ordersync/internal/onec/odata"
	"github.com/ordersync/ordersync/internal/onec/wire"
	"github.com/ordersync/ordersync/internal/order"
	"github.com/ordersync/ordersync/internal/outbox"
	"github.com/ordersync/ordersync/internal/returns"
	"github.com/ordersync/ordersync/internal/stock"
	stocksnapshot "github.com/ordersync/ordersync/internal/stock/snapshot"
	"github.com/ordersync/ordersync/internal/store"
)

// loadConfig reads the configuration: --config, or the default file when present,
// then the ORDERSYNC_ environment, with database.url and the secrets the command's
// dbUse names. Its errors are usage errors (exit 2).
func (a *app) loadConfig() (*config.Config, error) { return a.loadConfigReading(a.use().secrets) }

// loadConfigReading is loadConfig reading database.url and the secrets of reads
// alone: the others stay empty, their files unopened (config.Config.Unread).
func (a *app) loadConfigReading(reads secretSet) (*config.Config, error) {
	path, explicit := a.configPath, a.configPath != ""
	if !explicit {
		path = config.DefaultPath
	}
	environ := a.environ
	if environ == nil {
		environ = []string{}
	}
	cfg, err := config.Load(config.LoadOptions{Path: path, PathExplicit: explicit, Environ: environ,
		ReadSecret: readKeys("database.url").and(reads)})
	if err != nil {
		return nil, usageError(fmt.Errorf("config: %w", err))
	}
	return cfg, nil
}

func (a *app) logger(cfg *config.Config) (*slog.Logger, error) {
	l, err := logging.New(a.stderr, cfg.Log.Level, cfg.Log.Format)
	if err != nil {
		return nil, usageError(fmt.Errorf("config: %w", err))
	}
	return l, nil
}

// claimIdleTimeout is the database's idle_in_transaction_session_timeout for claim
// transactions: above the longest a find-or-create may take, so the server never
// ends a session whose lock a 1C call still relies on, yet a hung worker's lock is
// not held for ever.
func claimIdleTimeout(cfg *config.Config) time.Duration {
	return engine.CallBudget(cfg.OneC.Timeout) + 30*time.Second
}

// newClient builds the 1C client of onec.interface. onec.base_url is required for
// anything that talks to 1C.
func (a *app) newClient(cfg *config.Config, log *slog.Logger) (onec.Closer, error) {
	if err := cfg.ODataNeeds(); err != nil {
		return nil, usageError(fmt.Errorf("config: %w", err))
	}
	return a.buildClient(cfg, log)
}

// buildClient is newClient without asking for what writing orders needs: for
// the onec commands, which help fill it in.
func (a *app) buildClient(cfg *config.Config, log *slog.Logger) (onec.Closer, error) {
	odataIface := cfg.OneC.Interface == config.InterfaceOData
	if cfg.OneC.BaseURL == "" {
		if odataIface {
			return nil, usageError(errors.New("config: onec.base_url: is not set: give the base's standard OData root, " +
				"e.g. http://1c.local/trade/odata/standard.odata"))
		}
		return nil, usageError(errors.New("config: onec.base_url: is not set: give the URL of the base's " +
			"ordersync HTTP service, e.g. http://1c.local/trade/hs/ordersync/v1"))
	}
	w := wire.Config{
		BaseURL:        cfg.OneC.BaseURL,
		Username:       cfg.OneC.Username,
		Password:       cfg.OneC.Password,
		Timeout:        cfg.OneC.Timeout,
		MaxConcurrency: cfg.OneC.MaxConcurrency,
		SessionReuse:   cfg.OneC.SessionReuse,
		GetRetries:     getRetries(cfg.OneC.GetRetries),
		MaxResponse:    cfg.OneC.MaxResponse,
		Logger:         log.With("component", "onec"),
	}
	var (
		c   onec.Closer
		err error
	)
	if odataIface {
		c, err = newODataClient(w, cfg.OneC.OData, cfg.Connectors)
	} else {
		c, err = httpservice.New(httpservice.Config(w))
	}
	if err != nil {
		return nil, usageError(fmt.Errorf("config: onec: %w", err))
	}
	return c, nil
}

// newODataClient is the client of the standard OData interface with onec.odata's
// profile and references.
func newODataClient(w wire.Config, o config.OData, accounts config.Connectors) (*odata.Client, error) {
	p, err := odata.ProfileNamed(o.Profile, o.Marker)
	if err != nil {
		return nil, err
	}
	sources := map[string]odata.SourceRefs{}
	for name, s := range o.Sources {
		sources[name] = odata.SourceRefs{Partner: s.Partner, Counterparty: s.Counterparty, Agreement: s.Agreement}
	}
	return odata.New(odata.Config{Wire: w, Profile: p, ItemsBy: o.ItemsBy,
		Organization: o.Organization, Warehouse: o.Warehouse, Currency: o.Currency, PriceType: o.PriceType,
		Sources: sources, CancelReason: o.CancelReason, CancelledState: o.CancelledState,
		Accounts: accountRefs(accounts)})
}

// getRetries maps the configured count to the client's convention, where 0 means
// "the default" and a negative number means none.
func getRetries(n int) int {
	if n == 0 {
		return -1
	}
	return n
}

// newEngine builds the engine on db's journal and db's clock: the database's, so that
// its settle times (postedAt + onec.settle_time), verification and retry times and a
// cancel's "is the create settled" agree with what every replica's claims read. The
// engine carries out the orders' creates and cancels itself; the features register
// the handlers of their kinds here: the stock snapshots and the returns.
func newEngine(db store.DB, client onec.Client, cfg *config.Config, routes outbox.Routes,
	fetchers map[string]engine.Fetcher, log *slog.Logger) *engine.Engine {
	return engine.New(db.Journal(), client, engine.Config{
		Now:             db.Now,
		Workers:         cfg.OneC.MaxConcurrency,
		MaxAttempts:     cfg.Worker.MaxAttempts,
		BackoffMin:      cfg.Worker.BackoffMin,
		BackoffMax:      cfg.Worker.BackoffMax,
		PollInterval:    cfg.Worker.PollInterval,
		ShutdownTimeout: cfg.Worker.ShutdownTimeout,
		OneCTimeout:     cfg.OneC.Timeout,
		SettleTime:      cfg.OneC.SettleTime,
		LateVerify:      cfg.OneC.LateVerify,
		GiveUpAfter:     cfg.Worker.GiveUpAfter,
		PingInterval:    cfg.OneC.PingInterval,
		Location:        cfg.OneC.Location(),
		Routes:          routes,
		Fetchers:        fetchers,
		Mappings:        accountMappings(cfg),
		Handlers: map[string]engine.Handler{
			stock.KindSnapshot: stocksnapshot.Handler{},
			order.KindReturn:   returns.Handler{Journal: db.Journal(), Routes: routes},
		},
		Logger: log.With("component", "engine"),
	})
}

// accountMappings are the 1C mappings of the orders (connectors.<name>.onec,
// webhooks.sources.<name>.onec, webhooks.bitrix24.onec), by source. The
// account's warehouse reaches 1C as the order's own (order.Order.Warehouse).
func accountMappings(cfg *config.Config) func(source string) (onec.Mapping, error) {
	return func(source string) (onec.Mapping, error) {
		m, key, ok := cfg.OneCMappingOf(source)
		if !ok {
			return onec.Mapping{}, &onec.MappingError{Source: source, Key: key,
				Reason: "other senders name the organisation their orders are written under, and this one names none"}
		}
		om := oneCMapping(m)
		om.Section = strings.TrimSuffix(key, ".organization")
		return om, nil
	}
}

// accountRefs are the enabled accounts' 1C mappings by account name, for the
// OData interface's check of the references they name.
func accountRefs(c config.Connectors) map[string]onec.Mapping {
	refs := map[string]onec.Mapping{}
	for _, a := range c.Enabled() {
		refs[a.Name] = oneCMapping(a.Mapping())
	}
	return refs
}

// oneCMapping is an account's configured mapping as the 1C clients take it.
func oneCMapping(m config.OneCMapping) onec.Mapping {
	return onec.Mapping{Organization: m.Organization, Warehouse: m.Warehouse, Partner: m.Partner,
		Counterparty: m.Counterparty, Agreement: m.Agreement}
}
