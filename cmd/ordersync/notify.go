package main

import (
	"log/slog"
	"os"

	"github.com/ordersync/ordersync/internal/sdnotify"
)

// serviceManager is the service manager (systemd) as `run` and `migrate` see it:
// internal/sdnotify's Manager, of NOTIFY_SOCKET, WATCHDOG_USEC and WATCHDOG_PID of
// the command's environment. Without NOTIFY_SOCKET it does nothing.
type serviceManager struct{ *sdnotify.Manager }

func (a *app) serviceManager(log *slog.Logger) serviceManager {
	return serviceManager{sdnotify.NewManager(a.getenv, os.Getpid(), log)}
}

// extendWhile is Manager.ExtendWhile by the name migrate.go calls it.
func (sm serviceManager) extendWhile(what string, step func() error) error {
	return sm.ExtendWhile(what, step)
}
