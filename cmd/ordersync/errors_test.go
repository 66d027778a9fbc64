package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/ordersync/ordersync/internal/sim/onecsim"
)

// TestEveryUsageErrorExits2: each way of getting the command line wrong exits 2 with
// one line on stderr and nothing on stdout, before anything is opened: the errors
// are typed where cobra or the command finds them.
func TestEveryUsageErrorExits2(t *testing.T) {
	t.Parallel()
	// needs is a command of the test's own, with what no command of ordersync has
	// yet: a required flag and a group of flags that exclude each other.
	var ran bool
	needs := func() *cobra.Command {
		c := &cobra.Command{Use: "needs", Args: cobra.NoArgs, RunE: func(*cobra.Command, []string) error { ran = true; return nil }}
		c.Flags().String("name", "", "")
		c.Flags().Bool("a", false, "")
		c.Flags().Bool("b", false, "")
		if err := c.MarkFlagRequired("name"); err != nil {
			t.Fatal(err)
		}
		c.MarkFlagsMutuallyExclusive("a", "b")
		return c
	}
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown command", []string{"jornal", "list"}, `unknown command "jornal" for "ordersync"`},
		{"unknown command, no suggestion", []string{"frobnicate"}, `unknown command "frobnicate" for "ordersync"`},
		{"unknown subcommand", []string{"journal", "lst"}, `unknown command "lst" for "ordersync journal"`},
		{"missing subcommand", []string{"outbox"}, "outbox needs a subcommand"},
		{"unknown flag", []string{"journal", "list", "--bogus"}, "unknown flag: --bogus"},
		{"unknown shorthand flag", []string{"journal", "list", "-z"}, "unknown shorthand flag: 'z' in -z"},
		{"unknown global flag", []string{"--bogus"}, "unknown flag: --bogus"},
		{"flag value", []string{"journal", "list", "--limit", "many"}, `invalid argument "many" for "--limit"`},
		{"flag without its value", []string{"version", "--config"}, "flag needs an argument: --config"},
		{"too few arguments", []string{"journal", "show"}, "accepts 1 arg(s), received 0"},
		{"too many arguments", []string{"order", "cancel", "site", "X-1", "X-2"}, "accepts 2 arg(s), received 3"},
		{"at most", []string{"order", "import", "a.json", "b.json"}, "accepts at most 1 arg(s), received 2"},
		{"no arguments taken", []string{"version", "extra"}, `unknown command "extra" for "ordersync version"`},
		{"cobra's own command", []string{"completion", "bash", "extra"}, `unknown command "extra" for "ordersync completion bash"`},
		{"missing required flag", []string{"needs"}, `required flag(s) "name" not set`},
		{"flags that exclude each other", []string{"needs", "--name", "x", "--a", "--b"}, "none of the others can be"},
		{"bad --format", []string{"journal", "list", "--format", "xml"}, `--format: must be one of [table json csv xlsx], got "xml"`},
		{"bad --format of show", []string{"journal", "show", "--format", "yaml", "KEY"}, `--format: must be one of [table json], got "yaml"`},
	} {
		var out, errb bytes.Buffer
		a := &app{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, environ: []string{}}
		root := a.rootCommand()
		root.AddCommand(needs())
		code := a.execute(context.Background(), root, c.args)
		msg := wantOneLine(t, c.name, errb.String())
		if code != exitUsage || out.Len() != 0 || !strings.Contains(msg, c.want) {
			t.Errorf("%s %q: exit %d stdout %q stderr %q; want %d and one line with %q", c.name, c.args, code, out.String(), msg, exitUsage, c.want)
		}
	}
	if ran {
		t.Error("needs ran with its flags wrong")
	}
	// Given its flag, the command runs: the checks refuse only what is wrong.
	var out, errb bytes.Buffer
	a := &app{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, environ: []string{}}
	root := a.rootCommand()
	root.AddCommand(needs())
	if code := a.execute(context.Background(), root, []string{"needs", "--name", "x", "--a"}); code != exitOK || !ran {
		t.Errorf("needs --name x --a: exit %d, ran %v, stderr %q", code, ran, errb.String())
	}
}

// TestOperationalErrorsExit1WhateverTheySay: an operational error exits 1 even when
// its text reads like one of cobra's usage errors ("accepts 2 arg(s)", "requires at
// least"): the exit status follows the error's type, never its wording.
func TestOperationalErrorsExit1WhateverTheySay(t *testing.T) {
	t.Parallel()
	for _, err := range []error{
		fmt.Errorf("onec: POST /hs/ordersync/orders: %w", errors.New("400: the base accepts 2 arg(s) at most")),
		fmt.Errorf("journal: %w", errors.New("the pool requires at least 1 free connection")),
		fmt.Errorf("outbox: %w", errors.New(`kaspi: required flag "accepted" not set on the order`)),
	} {
		if code := codeOf(err); code != exitFailed {
			t.Errorf("codeOf(%q) = %d, want %d", err, code, exitFailed)
		}
	}
	// The same end to end: a term nothing is found by is an operational failure,
	// whatever words the person searched for.
	e := newEnvOn(t, "sqlite", onecsim.Options{}, true)
	for _, term := range []string{"accepts 2", "requires at least 1", "required flag"} {
		out, stderr, code := e.cli("", "journal", "show", term)
		msg := wantOneLine(t, "journal show "+term, stderr)
		if code != exitFailed || out != "" || !strings.Contains(msg, "operation not found") {
			t.Errorf("journal show %q: exit %d stdout %q stderr %q; want %d and one line saying nothing is found", term, code, out, msg, exitFailed)
		}
	}
}
