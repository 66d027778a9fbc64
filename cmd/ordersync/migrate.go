package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func (a *app) migrateCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "migrate",
		Short: "Bring the database schema up to date",
		Long: `migrate applies the pending numbered migrations, each in its own transaction,
under an advisory lock: several replicas may run it at once.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			cfg, err := a.loadConfig()
			if err != nil {
				return err
			}
			log, err := a.logger(cfg)
			if err != nil {
				return err
			}
			db, err := a.openDB(ctx, cfg, log)
			if err != nil {
				return err
			}
			defer db.Close()
			applied, err := db.Migrate(ctx)
			if err != nil {
				return err
			}
			current, _, err := db.SchemaStatus(ctx)
			if err != nil {
				return err
			}
			if len(applied) == 0 {
				fmt.Fprintf(a.stdout, "schema of %s is up to date at version %d\n", db, current)
				return nil
			}
			fmt.Fprintf(a.stdout, "applied migrations %v to %s; schema is at version %d\n", applied, db, current)
			return nil
		},
	}
}
