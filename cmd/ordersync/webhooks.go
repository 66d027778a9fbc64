package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ordersync/ordersync/connectors"
	"github.com/ordersync/ordersync/connectors/bitrix24"
	"github.com/ordersync/ordersync/connectors/ozon"
	"github.com/ordersync/ordersync/internal/config"
	"github.com/ordersync/ordersync/internal/engine"
	"github.com/ordersync/ordersync/internal/inbox"
	"github.com/ordersync/ordersync/internal/journal/export"
	"github.com/ordersync/ordersync/internal/listing"
	"github.com/ordersync/ordersync/internal/order"
	"github.com/ordersync/ordersync/internal/server"
	"github.com/ordersync/ordersync/internal/stdwebhook"
	"github.com/ordersync/ordersync/internal/store"
)

// newServer builds the webhook server, or nil when http.listen is empty.
func newServer(cfg *config.Config, db store.DB, wake func(), handlers map[string]http.Handler, log *slog.Logger) (*server.Server, error) {
	if cfg.HTTP.Listen == "" {
		return nil, nil
	}
	sc := server.Config{
		Listen: cfg.HTTP.Listen, MaxBody: cfg.Webhooks.MaxBody,
		ReadTimeout: cfg.HTTP.ReadTimeout, WriteTimeout: cfg.HTTP.WriteTimeout, IdleTimeout: cfg.HTTP.IdleTimeout,
		Inbox: db.Inbox(), Tolerance: cfg.Webhooks.Tolerance, OnRegistered: wake,
		Sources: map[string]server.SourceConfig{}, Logger: log.With("component", "http"), Handlers: handlers,
	}
	for _, name := range sortedKeys(cfg.Webhooks.Sources) {
		var secrets []stdwebhook.Secret
		for i, s := range cfg.Webhooks.Sources[name].Secrets {
			sec, err := stdwebhook.ParseSecret(s)
			if err != nil {
				return nil, usageError(fmt.Errorf("config: webhooks.sources.%s.secrets[%d]: %w", name, i, err))
			}
			secrets = append(secrets, sec)
		}
		sc.Sources[name] = server.SourceConfig{Secrets: secrets}
	}
	if o := cfg.Webhooks.Ozon; o.Enabled {
		sc.Ozon = &server.OzonConfig{AllowNetworks: o.AllowedPrefixes(), TrustedProxies: o.TrustedProxyPrefixes(),
			Name: "ordersync", Version: version}
	}
	if b := cfg.Webhooks.Bitrix24; b.Enabled {
		sc.Bitrix24 = &server.Bitrix24Config{ApplicationToken: b.ApplicationToken}
	}
	for _, acc := range cfg.Connectors.Enabled() {
		if acc.Bitrix24 != nil { // a further portal, on POST /webhooks/<its name>
			sc.MoreBitrix24 = append(sc.MoreBitrix24, server.Bitrix24Config{Source: acc.Source, ApplicationToken: acc.Bitrix24.ApplicationToken})
		}
	}
	s, err := server.New(sc)
	if err != nil {
		return nil, usageError(fmt.Errorf("config: %w", err))
	}
	return s, nil
}

// fetchers complete the creates that pushes only named: Ozon postings (through the
// Ozon connector's credentials, polling enabled or not) and Bitrix24 deals.
func fetchers(cfg *config.Config, skus *connectors.SKUMap, log *slog.Logger) (map[string]engine.Fetcher, error) {
	fs := map[string]engine.Fetcher{}
	if cfg.Webhooks.Ozon.Enabled {
		o := cfg.Connectors.Ozon
		conn, err := ozon.New(ozon.Config{BaseURL: o.BaseURL, ClientID: o.ClientID, APIKey: o.APIKey,
			APIVersion: o.APIVersion, Warehouse: o.Warehouse, PageSize: o.PageSize, Timeout: o.Timeout,
			RatePerSecond: float64(o.RatePerSecond), Logger: log.With("connector", "ozon"),
			Transport: connectors.BoundResponses(nil, int64(o.MaxResponse), "connectors.ozon.max_response")})
		if err != nil {
			return nil, usageError(fmt.Errorf("config: %w", err))
		}
		fs["ozon"] = connectors.Fetcher{Marketplace: conn, SKUs: skus}
	}
	portals := map[string]config.Bitrix24Webhook{} // by source
	keys := map[string]string{}
	if b := cfg.Webhooks.Bitrix24; b.Enabled {
		portals[bitrix24.Name], keys[bitrix24.Name] = b, "webhooks.bitrix24"
	}
	for _, acc := range cfg.Connectors.Enabled() {
		if acc.Bitrix24 != nil {
			portals[acc.Source], keys[acc.Source] = *acc.Bitrix24, acc.Key()
		}
	}
	for source, b := range portals {
		c, err := bitrix24.New(bitrix24.Config{RESTURL: b.RESTURL, CreateStages: b.CreateStages, Warehouse: b.Warehouse,
			SKUField: b.SKUField, Timeout: b.Timeout, RatePerSecond: float64(b.RatePerSecond), Logger: log.With("connector", source),
			Transport: connectors.BoundResponses(nil, int64(b.MaxResponse), keys[source]+".max_response")})
		if err != nil {
			return nil, usageError(fmt.Errorf("config: %s: %w", keys[source], err))
		}
		fs[source] = mappedFetcher{fetch: c.Fetch, source: source, skus: skus}
	}
	return fs, nil
}

// mappedFetcher applies the SKU map to what a fetcher returns.
type mappedFetcher struct {
	fetch  func(ctx context.Context, id string) (order.Order, error)
	source string
	skus   *connectors.SKUMap
}

func (f mappedFetcher) Fetch(ctx context.Context, id string) (order.Order, error) {
	o, err := f.fetch(ctx, id)
	if err != nil {
		return o, err
	}
	return o, f.skus.Apply(f.source, &o)
}

func (a *app) inboxCommand() *cobra.Command {
	c := &cobra.Command{Use: "inbox", Short: "Read the webhook inbox"}
	var source, status, format string
	var limit int
	list := &cobra.Command{
		Use:   "list",
		Short: "Webhook events received, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(format, "table", "json"); err != nil {
				return err
			}
			if status != "" && status != string(inbox.Processed) {
				return usageError(fmt.Errorf("--status: must be %s (the status of every stored event), got %q", inbox.Processed, status))
			}
			if limit < 0 {
				return usageError(fmt.Errorf("--limit: must not be negative (0 lists every event), got %d", limit))
			}
			return a.withInbox(cmd.Context(), func(s inbox.Store) error {
				pages := func(emit func([]inbox.Record) error) error {
					return listing.Each(limit, func(after *inbox.Record, n int) ([]inbox.Record, error) {
						return s.List(cmd.Context(), inbox.Filter{Source: source, Status: status, Limit: n, After: after})
					}, emit)
				}
				if format == "json" {
					return listing.WriteJSON(a.stdout, pages, func(r inbox.Record) any { return r })
				}
				tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "SOURCE\tEVENT ID\tRECEIVED\tSTATUS\tANSWER\tCONFLICTS\tOPERATIONS")
				return pages(func(recs []inbox.Record) error {
					for _, r := range recs {
						fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%v\n", r.Source, export.Clip(r.EventID, 60),
							r.ReceivedAt.Local().Format("2006-01-02 15:04:05"), r.Status, r.Answer.Status, r.Conflicts, r.Operations)
					}
					return tw.Flush()
				})
			})
		},
	}
	list.Flags().StringVar(&source, "source", "", "only this sender (site, ozon, bitrix24, …)")
	list.Flags().StringVar(&status, "status", "", "only this status (processed)")
	list.Flags().IntVar(&limit, "limit", 100, "at most this many events; 0 lists them all")
	list.Flags().StringVar(&format, "format", "table", "output: table or json")
	var showFormat string
	show := &cobra.Command{
		Use:   "show SOURCE EVENT_ID",
		Short: "One webhook event: its body, the answer given, the operations it registered, its conflicts",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(showFormat, "table", "json"); err != nil {
				return err
			}
			return a.withInbox(cmd.Context(), func(s inbox.Store) error {
				d, err := s.Show(cmd.Context(), args[0], args[1])
				if errors.Is(err, inbox.ErrNotFound) {
					return fmt.Errorf("inbox show: no event %q from %q (see `ordersync inbox list`)", args[1], args[0])
				}
				if err != nil {
					return err
				}
				if showFormat == "json" {
					return writeJSON(a.stdout, d)
				}
				w := a.stdout
				fmt.Fprintf(w, "source:      %s\nevent id:    %s\nreceived:    %s\nstatus:      %s\nbody:        sha256 %s\n",
					d.Source, d.EventID, d.ReceivedAt.Local().Format(time.RFC3339), d.Status, d.BodySHA256)
				fmt.Fprintf(w, "answer:      %d %s\noperations:  %v\n\n%s\n", d.Answer.Status, d.Answer.Body, d.Operations, d.BodyText)
				for _, c := range d.Conflicts {
					fmt.Fprintf(w, "conflict:    %s  another body, sha256 %s (nothing overwritten)\n", c.At.Local().Format(time.RFC3339), c.BodySHA256)
				}
				return nil
			})
		},
	}
	show.Flags().StringVar(&showFormat, "format", "table", "output: table or json")
	c.AddCommand(list, show)
	return c
}

func (a *app) withInbox(ctx context.Context, fn func(inbox.Store) error) error {
	cfg, err := a.loadConfig()
	if err != nil {
		return err
	}
	log, err := a.logger(cfg)
	if err != nil {
		return err
	}
	db, err := a.openReadyDB(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer db.Close()
	return fn(db.Inbox())
}

// listenURL is how a person reaches an address the server bound.
func listenURL(addr string) string { return (&url.URL{Scheme: "http", Host: addr}).String() }

// webhookServer is the webhook server of `ordersync run`: it says where it
// listens once it does.
type webhookServer struct {
	*server.Server
	log *slog.Logger
}

func (w webhookServer) Start(ctx context.Context) error {
	if err := w.Server.Start(ctx); err != nil {
		return err
	}
	w.log.InfoContext(ctx, "webhooks listening", "address", listenURL(w.Addr()))
	return nil
}
