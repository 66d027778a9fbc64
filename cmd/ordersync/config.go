package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/ordersync/ordersync/internal/config"
)

func (a *app) configCommand() *cobra.Command {
	c := &cobra.Command{Use: "config", Short: "Inspect the configuration"}
	c.AddCommand(&cobra.Command{
		Use:   "check",
		Short: "Validate the configuration and print it with secrets masked",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := a.loadConfig()
			if err == nil {
				err = cfg.ODataNeeds() // what writing orders needs, which run will ask
			}
			if err != nil {
				var ce *config.Error
				if errors.As(err, &ce) {
					// Every problem on its own line, then the one-line summary.
					for _, p := range ce.Problems {
						fmt.Fprintln(a.stderr, "  "+p.String())
					}
					return usageError(fmt.Errorf("config: %d problem(s) found", len(ce.Problems)))
				}
				return err
			}
			out, err := cfg.Effective()
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "# effective configuration from %s (secrets masked)\n", cfg.Source())
			_, err = a.stdout.Write(out)
			return err
		},
	})
	return c
}
