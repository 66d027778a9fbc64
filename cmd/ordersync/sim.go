package main

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ordersync/ordersync/internal/sim/odatasim"
	"github.com/ordersync/ordersync/internal/sim/onecsim"
)

func (a *app) simCommand() *cobra.Command {
	c := &cobra.Command{Use: "sim", Short: "Run simulators for tests and demonstrations"}
	var (
		listen, username, password, prefix string
		latency                            time.Duration
		dedupe, bom                        bool
		skus                               []string
		odataMode, keepRefKey              bool
		profile                            string
		sources                            []string
	)
	oc := &cobra.Command{
		Use:   "onec",
		Short: "Simulate a 1C base in memory: its ordersync HTTP service, or its standard OData interface",
		Long: `sim onec serves contract v1 from memory, with faults on demand through its control
endpoints. It runs until interrupted.

  GET    /_sim/orders           every order, in creation order
  GET    /_sim/stats            requests and orders by operation
  POST   /_sim/faults           queue a fault, as JSON:
                                {"op":"create","kind":"drop_after_create","times":1,
                                 "delay":"2s","hold":"4s","external_id":"site:A-1"}
                                (op: ping, find, create, cancel, stock, or "" for
                                every one; times: how many requests it hits, default 1)
  DELETE /_sim/faults           drop every queued fault
  POST   /_sim/latency          {"latency":"200ms"}
  POST   /_sim/known_skus       {"known_skus":["SKU-1"]}; null accepts every SKU
  POST   /_sim/stock            {"warehouse":"WH1","items":[{"sku":"SKU-1","quantity":5,"price":100}]}
  POST   /_sim/expire_sessions  forget every 1C session
  POST   /_sim/missing          {"ops":["create"]}: answer 404 HTML for these; no ops: every path
  DELETE /_sim/missing          publish every path again
  POST   /_sim/down             {"for":"2s"}: answer, then refuse connections that long

Fault kinds: ` + strings.Join(onecsim.FaultNames(), ", ") + `.

With --odata it is a base publishing the standard OData interface instead
(…/odata/standard.odata, profile ut11 or unf), seeded with an organization, a
warehouse, a currency, each --sources' partner, counterparty and agreement, and an
item for each --known-skus (its Артикул the SKU); it prints the ORDERSYNC_
environment that configures ordersync for it. It writes silently as a real base
does: unknown fields ignored, the Location header in raw UTF-8.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if latency < 0 {
				return usageError(fmt.Errorf("--latency: must not be negative, got %s", latency))
			}
			if _, port, err := net.SplitHostPort(listen); err != nil {
				return usageError(fmt.Errorf("--listen: %q is not host:port, such as 127.0.0.1:8081: %v", listen, err))
			} else if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
				return usageError(fmt.Errorf("--listen: %q: the port must be a number from 0 to 65535", listen))
			}
			if odataMode {
				return a.simOData(cmd, listen, username, password, profile, latency, keepRefKey, sources, skus)
			}
			s := onecsim.New(onecsim.Options{
				Prefix: prefix, Username: username, Password: password,
				Dedupe: dedupe, Latency: latency, BOM: bom, KnownSKUs: skus,
			})
			if err := s.Start(listen); err != nil {
				return fmt.Errorf("sim onec: listen on %s: %w", listen, err)
			}
			defer s.Close()
			fmt.Fprintf(a.stdout, "1C simulator listening: onec.base_url = %s\n", s.URL())
			<-cmd.Context().Done()
			return nil
		},
	}
	oc.Flags().StringVar(&listen, "listen", "127.0.0.1:8081", "address to listen on")
	oc.Flags().StringVar(&prefix, "prefix", onecsim.DefaultPrefix, "path the service is published at")
	oc.Flags().StringVar(&username, "username", "", "require Basic authentication with this user")
	oc.Flags().StringVar(&password, "password", "", "password of --username")
	oc.Flags().DurationVar(&latency, "latency", 0, "added to every request")
	oc.Flags().BoolVar(&dedupe, "dedupe", false, "find-or-create under a lock like the reference 1C module (409 on a repeat)")
	oc.Flags().BoolVar(&bom, "bom", false, "start JSON answers with a UTF-8 BOM")
	oc.Flags().StringSliceVar(&skus, "known-skus", nil, "catalogue: other SKUs are answered 422 (with --odata: the items, default SKU-1,SKU-2,SKU-3)")
	oc.Flags().BoolVar(&odataMode, "odata", false, "serve the standard OData interface instead of contract v1")
	oc.Flags().StringVar(&profile, "profile", "ut11", "with --odata: the configuration, ut11 or unf")
	oc.Flags().BoolVar(&keepRefKey, "keep-ref-key", false, "with --odata: keep a client's Ref_Key on create (some bases do)")
	oc.Flags().StringSliceVar(&sources, "sources", []string{"kaspi", "ozon", "wb", "site"}, "with --odata: the sources to seed references for")
	c.AddCommand(oc)
	return c
}

// simOData runs the standard OData interface's simulator until interrupted.
func (a *app) simOData(cmd *cobra.Command, listen, username, password, profile string, latency time.Duration,
	keepRefKey bool, sources, skus []string) error {
	if profile != "ut11" && profile != "unf" {
		return usageError(fmt.Errorf("--profile: must be ut11 or unf, got %q", profile))
	}
	if len(skus) == 0 {
		skus = []string{"SKU-1", "SKU-2", "SKU-3"}
	}
	s := odatasim.New(odatasim.Options{Profile: profile, Username: username, Password: password,
		KeepRefKey: keepRefKey, Latency: latency})
	if err := s.Start(listen); err != nil {
		return fmt.Errorf("sim onec: listen on %s: %w", listen, err)
	}
	defer s.Close()
	base := s.Seed(sources, skus)
	fmt.Fprintf(a.stdout, "1C simulator (standard OData interface, %s) listening: onec.base_url = %s\n", profile, s.URL())
	fmt.Fprintln(a.stdout, "configure ordersync for it with:")
	for _, kv := range base.Environ(s.URL()) {
		fmt.Fprintln(a.stdout, "  "+kv)
	}
	<-cmd.Context().Done()
	return nil
}
