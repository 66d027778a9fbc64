package service_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ordersync/ordersync/internal/service"
)

// journal records the starts and stops of fakes, in the order they come.
type journal struct {
	mu     sync.Mutex
	events []string
}

func (j *journal) add(e string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.events = append(j.events, e)
}

func (j *journal) take() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	e := j.events
	j.events = nil
	return e
}

// fake is a Service that records itself, safe before Start and twice as every
// service must be; failing makes its Start fail.
type fake struct {
	name    string
	j       *journal
	failing error

	mu      sync.Mutex
	running bool
}

func (f *fake) Start(context.Context) error {
	if f.failing != nil {
		f.j.add("fail " + f.name)
		return f.failing
	}
	f.mu.Lock()
	f.running = true
	f.mu.Unlock()
	f.j.add("start " + f.name)
	return nil
}

func (f *fake) Stop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.running {
		return
	}
	f.running = false
	f.j.add("stop " + f.name)
}

// TestRunStopsInTodaysOrder pins the order `ordersync run` stops in: STOPPING=1
// is sent outside the group, then the supervision, 1C's start-up ping, the
// webhooks (no new ones), the pollers (no new polls), the scheduler, the engine
// (the calls in flight and their verdicts), the relays after the engine's last
// verdicts, the pages, and last the admin listener (/metrics and /readyz answer
// while the rest drains).
func TestRunStopsInTodaysOrder(t *testing.T) {
	j := &journal{}
	f := func(name string) *fake { return &fake{name: name, j: j} }
	var g service.Group
	g.Add("admin.listen", f("admin"))
	if err := g.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	service.Run{
		Pages: f("pages"), StockRelay: f("stock relay"), Relay: f("relay"), Engine: f("engine"),
		Scheduler: f("scheduler"),
		Pollers:   []service.Named{{Name: "poller kaspi", Service: f("kaspi")}, {Name: "poller ozon", Service: f("ozon")}},
		Webhooks:  f("webhooks"), Ping: f("ping"),
	}.Add(&g)
	if err := g.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	g.Add("systemd supervision", f("supervision"))
	if err := g.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	wantStart := []string{"start admin", "start pages", "start stock relay", "start relay", "start engine",
		"start scheduler", "start kaspi", "start ozon", "start webhooks", "start ping", "start supervision"}
	if got := j.take(); !slices.Equal(got, wantStart) {
		t.Errorf("started\n %q\nwant\n %q", got, wantStart)
	}
	g.Stop()
	wantStop := []string{"stop supervision", "stop ping", "stop webhooks", "stop ozon", "stop kaspi",
		"stop scheduler", "stop engine", "stop relay", "stop stock relay", "stop pages", "stop admin"}
	if got := j.take(); !slices.Equal(got, wantStop) {
		t.Errorf("stopped\n %q\nwant\n %q", got, wantStop)
	}
	g.Stop()
	if got := j.take(); len(got) != 0 {
		t.Errorf("the second Stop stopped %q", got)
	}
	if err := g.Start(t.Context()); !errors.Is(err, service.ErrStopped) {
		t.Errorf("Start after Stop: %v, want ErrStopped", err)
	}
}

// TestRunSkipsWhatIsOff: a nil part (no ui.listen, no http.listen) is not in the list.
func TestRunSkipsWhatIsOff(t *testing.T) {
	j := &journal{}
	var g service.Group
	service.Run{Engine: &fake{name: "engine", j: j}}.Add(&g)
	if err := g.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	g.Stop()
	if got, want := j.take(), []string{"start engine", "stop engine"}; !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

// TestFailedStartStopsWhatStarted: the one that failed is named, what started
// before it stops in reverse order, what comes after it never starts, and the
// deferred Stop after it does nothing.
func TestFailedStartStopsWhatStarted(t *testing.T) {
	j := &journal{}
	boom := errors.New("listen tcp 127.0.0.1:1: bind: address already in use")
	var g service.Group
	g.Add("admin.listen", &fake{name: "admin", j: j})
	g.Add("engine", &fake{name: "engine", j: j})
	g.Add("http.listen", &fake{name: "webhooks", j: j, failing: boom})
	g.Add("1C ping", &fake{name: "ping", j: j})
	err := g.Start(t.Context())
	var se *service.StartError
	if !errors.As(err, &se) || se.Name != "http.listen" || !errors.Is(err, boom) {
		t.Fatalf("Start: %v, want a StartError naming http.listen and wrapping its error", err)
	}
	if got, want := err.Error(), "http.listen: "+boom.Error(); got != want {
		t.Errorf("error %q, want %q", got, want)
	}
	if got, want := j.take(), []string{"start admin", "start engine", "fail webhooks", "stop engine", "stop admin"}; !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	g.Stop()
	if got := j.take(); len(got) != 0 {
		t.Errorf("Stop after the failed start stopped %q", got)
	}
}

// TestStopBeforeStart: a group stopped before it started stops nothing, and so
// does each adapter stopped before its start.
func TestStopBeforeStart(t *testing.T) {
	j := &journal{}
	var g service.Group
	g.Add("engine", &fake{name: "engine", j: j})
	g.Stop()
	g.Stop()
	if got := j.take(); len(got) != 0 {
		t.Errorf("stopped %q before a start", got)
	}

	stops := 0
	fn := service.Func(nil, func() { stops++ })
	fn.Stop()
	l := &listener{}
	srv := service.Server(l, time.Second)
	srv.Stop()
	bg := service.Go(func(ctx context.Context) { <-ctx.Done() }, 0)
	bg.Stop() // would block forever were it waiting for a run never started
	if stops != 0 || l.stops != 0 {
		t.Errorf("adapters stopped before a start: func %d, listener %d", stops, l.stops)
	}
}

// TestAdaptersStopOnce: each adapter's Stop runs its stop once, however often called.
func TestAdaptersStopOnce(t *testing.T) {
	ctx := t.Context()
	stops := 0
	fn := service.Func(func(context.Context) error { return nil }, func() { stops++ })
	l := &listener{}
	srv := service.Server(l, time.Second)
	ran := 0
	bg := service.Go(func(ctx context.Context) { ran++; <-ctx.Done() }, 0)
	for _, s := range []service.Service{fn, srv, bg} {
		if err := s.Start(ctx); err != nil {
			t.Fatal(err)
		}
		s.Stop()
		s.Stop()
	}
	select {
	case <-bg.Done():
	default:
		t.Error("Go's Stop returned before its function did")
	}
	if stops != 1 || l.stops != 1 || ran != 1 {
		t.Errorf("func stopped %d times, listener %d, background ran %d; want 1 each", stops, l.stops, ran)
	}
	if l.deadline <= 0 || l.deadline > time.Second {
		t.Errorf("the listener's Stop had %s left, want within its timeout", l.deadline)
	}
	if l.cancelled {
		t.Error("the listener's Stop context was cancelled before its timeout")
	}
}

// TestGoStopWaitsAtMostItsBound: a function that does not return when told is
// left after the wait (the stock scheduler's, worker.shutdown_timeout).
func TestGoStopWaitsAtMostItsBound(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	bg := service.Go(func(context.Context) { <-release }, 50*time.Millisecond)
	if err := bg.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	bg.Stop()
	if took := time.Since(start); took < 50*time.Millisecond || took > 10*time.Second {
		t.Errorf("Stop took %s, want about its 50ms bound", took)
	}
}

// TestServerStopOutlivesTheStartContext: the listener's Stop gets its timeout even
// though the run's context (a SIGTERM) is done by then.
func TestServerStopOutlivesTheStartContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	l := &listener{}
	srv := service.Server(l, time.Minute)
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	srv.Stop()
	if l.cancelled || l.deadline < 30*time.Second {
		t.Errorf("Stop's context: cancelled %v, %s left; want its own minute", l.cancelled, l.deadline)
	}
}

type listener struct {
	stops     int
	deadline  time.Duration
	cancelled bool
}

func (l *listener) Start(context.Context) error { return nil }

func (l *listener) Stop(ctx context.Context) error {
	l.stops++
	if d, ok := ctx.Deadline(); ok {
		l.deadline = time.Until(d)
	}
	l.cancelled = ctx.Err() != nil
	return nil
}
