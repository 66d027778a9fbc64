package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// reconcileCommand is a placeholder, replaced by the reconciliation.
func (a *app) reconcileCommand() *cobra.Command {
	return &cobra.Command{Use: "reconcile", Short: "Compare a period's orders at the marketplace, in the journal and in 1C",
		RunE: func(*cobra.Command, []string) error { return errors.New("reconcile: not built yet") }}
}
