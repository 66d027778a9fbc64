package main

import (
	"context"
	"os"
	"os/user"

	"github.com/ordersync/ordersync/internal/journal"
)

// cliUser is who runs this command, for the journal's actors (cli:anna): the user
// behind sudo when there is one ($SUDO_USER: `sudo ordersync resync` is anna's, not
// root's), else $USER, else the account's name, else "unknown".
func cliUser() string {
	for _, v := range []string{"SUDO_USER", "USER"} {
		if u := os.Getenv(v); u != "" {
			return u
		}
	}
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return "unknown"
}

// withCLIActor is ctx carrying the person at the command line (journal.ActorCLI) as
// the actor of what the command registers, requeues and attempts, unless ctx names
// one already (a bulk resync's).
func withCLIActor(ctx context.Context) context.Context {
	if journal.ActorOf(ctx) != "" {
		return ctx
	}
	return journal.WithActor(ctx, journal.ActorCLI(cliUser()))
}
