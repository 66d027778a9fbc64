// Command ordersync brings marketplace and CRM orders into 1C:Enterprise exactly
// once. This package only wires the internal packages together; each subcommand has
// its own file. Main runs the whole program with injected streams and environment,
// so end-to-end tests run the real thing in-process.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/ordersync/ordersync/connectors/wildberries"

	"github.com/spf13/cobra"

	"github.com/ordersync/ordersync/internal/config"
	"github.com/ordersync/ordersync/internal/logging"
)

// version is set at build time: -ldflags "-X main.version=…".
var version = "dev"

// Exit codes (README: "Operating it").
const (
	exitOK     = 0
	exitFailed = 1 // operational failure
	exitUsage  = 2 // usage or configuration error
)

func main() {
	// The handler stays in place until the process ends: a second SIGTERM arriving
	// while it exits (after Main returned) must not kill it by the default action,
	// which would turn a clean exit 0 into death by a signal.
	ctx, _ := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	os.Exit(Main(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Environ()))
}

// app carries what every subcommand shares: the streams, the environment and the
// global flags. There is no global configuration.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	environ        []string
	configPath     string
	// command is the subcommand being run ("run", "order import", "resync"): the
	// role a CLI command records in an embedded database's run lock.
	command string
	// opened names the embedded journal the command found by looking, with no
	// database.url ("journal /var/lib/ordersync/ordersync.db (the service's state
	// directory)"): Main says it once the command is done.
	opened string
	// processClock, when set (tests), is the process's clock the PostgreSQL store
	// corrects by the database's (postgres.Config.ProcessClock); nil: time.Now.
	processClock func() time.Time
	// payoutsClock, when set (tests), is the clock Wildberries' report limiter
	// waits on; nil: the real one.
	payoutsClock wildberries.Clock
}

// role is the name this command holds an embedded database's run lock under.
func (a *app) role() string {
	if a.command == "" {
		return "cli"
	}
	return a.command
}

// Main runs ordersync with args (without the program name) and returns the exit code.
// Cancelling ctx is how a signal reaches `run`.
func Main(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, environ []string) int {
	a := &app{stdin: stdin, stdout: stdout, stderr: stderr, environ: environ}
	return a.execute(ctx, a.rootCommand(), args)
}

// execute runs the command line args of root, and says on stderr what went wrong, if
// anything: Main with the command tree given (tests add commands to it).
func (a *app) execute(ctx context.Context, root *cobra.Command, args []string) int {
	if c, _, err := root.Find(args); err == nil && c != root {
		a.command = strings.TrimPrefix(c.CommandPath(), root.Name()+" ")
	}
	root.SetArgs(args)
	root.SetIn(a.stdin)
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	err := executeTyped(ctx, root, args)
	// Which journal a command found by looking is said on stderr, in its one line
	// when it failed; `run` logs it.
	opened := ""
	if a.opened != "" && a.command != "run" {
		opened = a.opened
	}
	if err == nil {
		if opened != "" {
			fmt.Fprintln(a.stderr, "ordersync: "+opened)
		}
		return exitOK
	}
	var ex *exitError
	if errors.As(err, &ex) && ex.silent {
		return ex.code
	}
	if opened != "" {
		opened = " [" + opened + "]"
	}
	// A configuration with several problems: one a line, as config check says
	// them, then the count.
	if ce := (*config.Error)(nil); errors.As(err, &ce) && len(ce.Problems) > 1 {
		for _, p := range ce.Problems {
			fmt.Fprintln(a.stderr, "  "+logging.OneLine(errors.New(p.String())))
		}
		fmt.Fprintf(a.stderr, "ordersync: config: %d problem(s) found%s\n", len(ce.Problems), opened)
		return codeOf(err)
	}
	fmt.Fprintln(a.stderr, "ordersync: "+logging.OneLine(err)+opened)
	return codeOf(err)
}

func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "ordersync",
		Short: "Bring marketplace and CRM orders into 1C:Enterprise exactly once",
		Long: `ordersync registers every order operation in a journal under a key built from
business data, and creates it in 1C through the base's HTTP service exactly once:
it finds the order by its external id before it creates it, under a lock on the
journal row.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version,
	}
	root.SetVersionTemplate("ordersync {{.Version}}\n")
	root.PersistentFlags().StringVar(&a.configPath, "config", "",
		"configuration file (default "+config.DefaultPath+" when present)")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError(err) })
	root.AddCommand(
		a.runCommand(),
		a.migrateCommand(),
		a.configCommand(),
		a.orderCommand(),
		a.journalCommand(),
		a.resyncCommand(),
		a.outboxCommand(),
		a.connectorsCommand(),
		a.inboxCommand(),
		a.stockCommand(),
		a.reconcileCommand(),
		a.payoutsCommand(),
		a.onecCommand(),
		a.uiCommand(),
		a.simCommand(),
		a.demoCommand(),
		a.statusCommand(),
		a.versionCommand(),
	)
	requireSubcommands(root)
	return root
}

// requireSubcommands makes each command below c that only groups others (journal,
// outbox, stock, …) refuse an unknown subcommand, or none, with exit 2 and one line
// naming the subcommands, as the root refuses an unknown command. (Cobra would print
// the group's help and exit 0: a typo in a script would pass unseen.)
func requireSubcommands(c *cobra.Command) {
	for _, sub := range c.Commands() {
		if sub.HasSubCommands() && sub.Run == nil && sub.RunE == nil {
			sub.Args = cobra.ArbitraryArgs
			sub.RunE = func(cmd *cobra.Command, args []string) error {
				var names []string
				for _, s := range cmd.Commands() {
					if s.IsAvailableCommand() {
						names = append(names, s.Name())
					}
				}
				known := strings.Join(names, ", ")
				if len(args) == 0 {
					return usageError(fmt.Errorf("%s needs a subcommand: %s (%s --help)",
						strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" "), known, cmd.CommandPath()))
				}
				msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
				if cmd.SuggestionsMinimumDistance <= 0 {
					cmd.SuggestionsMinimumDistance = 2
				}
				if sug := cmd.SuggestionsFor(args[0]); len(sug) > 0 {
					msg += fmt.Sprintf(": did you mean %q?", sug[0])
				}
				return usageError(fmt.Errorf("%s (subcommands: %s)", msg, known))
			}
		}
		requireSubcommands(sub)
	}
}

func (a *app) versionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintf(a.stdout, "ordersync %s\n", version)
			return nil
		},
	}
}
