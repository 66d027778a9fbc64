package main

import (
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/ordersync/ordersync/internal/sim/onecsim"
)

func (a *app) simCommand() *cobra.Command {
	c := &cobra.Command{Use: "sim", Short: "Run simulators for tests and demonstrations"}
	var (
		listen, username, password, prefix string
		latency                            time.Duration
		dedupe, bom                        bool
		skus                               []string
	)
	oc := &cobra.Command{
		Use:   "onec",
		Short: "Simulate a 1C base's ordersync HTTP service (contract v1) in memory",
		Long: `sim onec serves contract v1 from memory, with faults on demand through its control
endpoints: GET /_sim/orders, GET /_sim/stats, POST /_sim/faults, POST /_sim/latency,
POST /_sim/known_skus. It runs until interrupted.`,
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
	oc.Flags().StringSliceVar(&skus, "known-skus", nil, "catalogue: other SKUs are answered 422")
	c.AddCommand(oc)
	return c
}
