package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/ordersync/ordersync/internal/store"
)

func (a *app) migrateCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "migrate",
		Short: "Bring the database schema up to date",
		Long: `migrate applies the pending numbered migrations, each in its own transaction,
under an advisory lock: several replicas may run it at once.

Run by systemd (the unit's ExecStartPre=, with NotifyAccess=exec) it extends the
unit's start timeout while it connects and migrates (EXTEND_TIMEOUT_USEC), so that
a long migration is not cut off by TimeoutStartSec=, and says what it does in
STATUS=.`,
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
			sm := a.serviceManager(log)
			var db store.DB
			err = sm.extendWhile("migrate: opening the database", func() (err error) {
				db, err = a.openDB(ctx, cfg, log)
				return err
			})
			if err != nil {
				return err
			}
			defer db.Close()
			var applied []int
			err = sm.extendWhile("migrate: bringing the schema of "+db.String()+" up to date", func() (err error) {
				applied, err = db.Migrate(ctx)
				return err
			})
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
