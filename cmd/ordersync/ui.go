package main

import (
	"github.com/spf13/cobra"
)

// uiCommand is a placeholder, replaced by the pages' commands.
func (a *app) uiCommand() *cobra.Command {
	return &cobra.Command{Use: "ui", Short: "The accountant's journal pages"}
}
