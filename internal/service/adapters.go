package service

import (
	"context"
	"sync"
	"time"
)

// once makes a Stop safe before Start (it does nothing) and twice (the second
// does nothing).
type once struct {
	mu      sync.Mutex
	started bool
	stopped bool
}

func (o *once) start() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.started = true
}

// stop reports whether the caller is the one to stop: started, and the first.
func (o *once) stop() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.started || o.stopped {
		return false
	}
	o.stopped = true
	return true
}

// Func is a Service of a start and a stop function: stop runs at most once, and
// only after start succeeded. A nil start starts nothing.
func Func(start func(ctx context.Context) error, stop func()) Service {
	return &funcService{start: start, stop: stop}
}

type funcService struct {
	once
	start func(ctx context.Context) error
	stop  func()
}

func (f *funcService) Start(ctx context.Context) error {
	if f.start != nil {
		if err := f.start(ctx); err != nil {
			return err
		}
	}
	f.once.start()
	return nil
}

func (f *funcService) Stop() {
	if f.once.stop() && f.stop != nil {
		f.stop()
	}
}

// Listener is what serves until a Stop bounded by its ctx: the webhook server,
// the journal pages, the admin listener.
type Listener interface {
	Start(ctx context.Context) error
	Stop(ctx context.Context) error
}

// Server adapts a Listener: Stop gives the requests in flight timeout (its
// error, that time running out, is the listener's to log), on a context that
// keeps the start's values but not its cancellation.
func Server(l Listener, timeout time.Duration) Service {
	return &serverService{l: l, timeout: timeout}
}

type serverService struct {
	once
	l       Listener
	timeout time.Duration
	base    context.Context
}

func (s *serverService) Start(ctx context.Context) error {
	if err := s.l.Start(ctx); err != nil {
		return err
	}
	s.base = context.WithoutCancel(ctx)
	s.once.start()
	return nil
}

func (s *serverService) Stop() {
	if !s.once.stop() {
		return
	}
	ctx, cancel := context.WithTimeout(s.base, s.timeout)
	defer cancel()
	s.l.Stop(ctx)
}

// Background is a Service of a function that runs until its context ends: the
// stock scheduler's loop, 1C's start-up ping.
type Background struct {
	once
	run    func(ctx context.Context)
	wait   time.Duration
	cancel context.CancelFunc
	done   chan struct{}
}

// Go is run as a Service: Start runs it in a goroutine on a context that Stop
// cancels; Stop then waits for it to return, at most wait (0: until it does).
func Go(run func(ctx context.Context), wait time.Duration) *Background {
	return &Background{run: run, wait: wait, done: make(chan struct{})}
}

func (b *Background) Start(ctx context.Context) error {
	ctx, b.cancel = context.WithCancel(ctx)
	b.once.start()
	go func() {
		defer close(b.done)
		b.run(ctx)
	}()
	return nil
}

// Stop cancels the function's context and waits for it (see Go).
func (b *Background) Stop() {
	if !b.once.stop() {
		return
	}
	b.cancel()
	if b.wait <= 0 {
		<-b.done
		return
	}
	t := time.NewTimer(b.wait)
	defer t.Stop()
	select {
	case <-b.done:
	case <-t.C:
	}
}

// Done is closed once the function returned (never, before Start).
func (b *Background) Done() <-chan struct{} { return b.done }
