// Package service is the life cycle of what `ordersync run` starts: one shape,
// Start then Stop, for the engine, the relays, the pollers, the stock scheduler
// and the listeners, and a Group that starts a list of them in its order and
// stops them in the reverse one. The order of stop is the list's, read backwards:
// what must stop first (no new webhooks) is added last.
package service

import (
	"context"
	"errors"
	"sync"
)

// Service is one part of the running service.
type Service interface {
	// Start starts the service and returns once it runs; what keeps running lives
	// until Stop (it may watch ctx as well). An error means nothing of it runs.
	Start(ctx context.Context) error
	// Stop ends what Start started and waits for it, within the service's own
	// bound. It is safe before Start and twice.
	Stop()
}

// StartError is what Group.Start returns when a service failed to start: which
// one, and its error.
type StartError struct {
	Name string
	Err  error
}

func (e *StartError) Error() string { return e.Name + ": " + e.Err.Error() }
func (e *StartError) Unwrap() error { return e.Err }

// ErrStopped is Group.Start's after Group.Stop.
var ErrStopped = errors.New("service: the group is stopped")

// Group starts services in the order they were added and stops the started ones
// in the reverse order. Services may be added while others run: Start starts the
// ones not started yet. The zero Group is ready to use.
type Group struct {
	mu      sync.Mutex // held through Start and Stop: they do not overlap
	list    []entry
	started int // list[:started] have started
	stopped bool
}

type entry struct {
	name string
	svc  Service
}

// Add appends s to the list under name (the one StartError gives). A nil
// service is skipped.
func (g *Group) Add(name string, s Service) {
	if s == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.list = append(g.list, entry{name: name, svc: s})
}

// Start starts, in order, each service added since the last Start. When one
// fails, it stops every service the group has started, in reverse order, and
// returns a *StartError naming the one that failed.
func (g *Group) Start(ctx context.Context) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stopped {
		return ErrStopped
	}
	for g.started < len(g.list) {
		e := g.list[g.started]
		if err := e.svc.Start(ctx); err != nil {
			g.stopLocked()
			return &StartError{Name: e.name, Err: err}
		}
		g.started++
	}
	return nil
}

// Stop stops the started services, the last started first, each Stop returning
// before the next begins. Safe before Start and twice: the second call does
// nothing.
func (g *Group) Stop() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.stopLocked()
}

func (g *Group) stopLocked() {
	if g.stopped {
		return
	}
	g.stopped = true
	for i := g.started - 1; i >= 0; i-- {
		g.list[i].svc.Stop()
	}
}
