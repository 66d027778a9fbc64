package main

import (
	"context"
	"errors"

	"github.com/spf13/cobra"

	"github.com/ordersync/ordersync/internal/config"
)

// What an error means for the exit status is decided once, by its type, in codeOf:
// every usage error is typed where it arises, cobra's own included, and codeOf never
// reads an error's text (an operational failure quoting "accepts 2 arg(s)" is still
// one).

// exitError carries an exit code with an error.
type exitError struct {
	code   int
	err    error
	silent bool // already reported on stdout/stderr
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// usageError marks err as a usage or configuration error: exit 2.
func usageError(err error) error { return &exitError{code: exitUsage, err: err} }

// failedQuietly ends a command that has already said what went wrong with exit 1.
func failedQuietly(err error) error { return &exitError{code: exitFailed, err: err, silent: true} }

// codeOf is the exit status err asks for: an exitError's code (usageError: 2), 2
// for a configuration that does not load (*config.Error), and 1, an operational
// failure, for any other error.
func codeOf(err error) int {
	var ex *exitError
	if errors.As(err, &ex) {
		return ex.code
	}
	var ce *config.Error
	if errors.As(err, &ce) {
		return exitUsage
	}
	return exitFailed
}

// executeTyped executes root with args as ExecuteContext does, every usage error
// cobra reports a usageError:
//   - a flag that does not parse: the root's SetFlagErrorFunc (rootCommand);
//   - an unknown command or subcommand: requireSubcommands for the groups, the
//     check after executing for the root's (below);
//   - arguments a command's Args refuses, a required flag not given, flags of a
//     group given together: typeUsageErrors.
func executeTyped(ctx context.Context, root *cobra.Command, args []string) error {
	// Cobra adds help and completion as it executes; added first, they are typed too.
	// (It adds the hidden __complete only when it is called: a shell completing
	// calls it with arguments.)
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd(args...)
	typeUsageErrors(root)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return nil
	}
	// An unknown command is the root's: cobra's Find refuses it (the root has no
	// Args, and cobra then checks the first argument names a command) and the
	// execution ends with Find's error, before any command runs. Find, asked again
	// after cobra added its commands, refuses the same.
	if _, _, ferr := root.Find(args); ferr != nil {
		return usageError(err)
	}
	return err
}

// typeUsageErrors makes the usage errors cobra finds in running c, or a command below
// it, usageErrors: what c's Args refuses ("accepts 1 arg(s), received 2", "unknown
// command" from cobra.NoArgs), a flag marked required and not given, flags of a
// group given together. Cobra checks the flags after the PreRunE of a command and
// before its RunE, so the PreRunE checks them first; cobra then finds nothing wrong.
func typeUsageErrors(c *cobra.Command) {
	if check := c.Args; check != nil {
		c.Args = func(cmd *cobra.Command, args []string) error {
			if err := check(cmd, args); err != nil {
				return usageError(err)
			}
			return nil
		}
	}
	if c.Runnable() {
		pre, preE := c.PreRun, c.PreRunE
		c.PreRun = nil
		c.PreRunE = func(cmd *cobra.Command, args []string) error {
			if preE != nil {
				if err := preE(cmd, args); err != nil {
					return err
				}
			} else if pre != nil {
				pre(cmd, args)
			}
			if err := cmd.ValidateRequiredFlags(); err != nil {
				return usageError(err)
			}
			if err := cmd.ValidateFlagGroups(); err != nil {
				return usageError(err)
			}
			return nil
		}
	}
	for _, sub := range c.Commands() {
		typeUsageErrors(sub)
	}
}
