package onecsim

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ordersync/ordersync/internal/sim"
)

// These tests wait for conditions and never assert durations: where an assertion
// only holds before some delay has passed, they check the clock after looking and
// skip the assertion when a loaded machine took longer than that.

// eventually waits until cond holds, failing the test after a generous deadline.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting until %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// startSim starts a simulator on a port of its own, as Down and Up need.
func startSim(t *testing.T, opts Options) *OneC {
	t.Helper()
	if opts.Now == nil {
		opts.Now = func() time.Time { return testNow }
	}
	s := New(opts)
	if err := s.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func findCount(t *testing.T, base, externalID string) int {
	t.Helper()
	r := mustSend(t, "GET", base+"/orders?external_id="+externalID, "")
	if r.status != 200 {
		t.Fatalf("find = %d %s, want 200", r.status, r.body)
	}
	var found struct{ Orders []order1C }
	decodeJSON(t, r.body, &found)
	return len(found.Orders)
}

func isHTML404(r reply) bool {
	return r.status == 404 && strings.HasPrefix(r.header.Get("Content-Type"), "text/html") &&
		bytes.HasPrefix(r.body, []byte("<html>"))
}

func refused(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial" && errors.Is(err, syscall.ECONNREFUSED)
}

func TestOneCStallEndsWithTheClient(t *testing.T) {
	t.Parallel()
	// A Stall with a delay ends when the client goes away: the order is created then,
	// long before the delay. SlowCreate is the handler that does not notice.
	s, base := newSim(t, Options{})
	s.Faults.Add(1, sim.Fault{Op: "create", Kind: Stall, Delay: time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if r, err := sendCtx(ctx, t, "POST", base+"/orders", orderJSON("kaspi:1")); err == nil {
		t.Fatalf("got an answer %d, want the client to give up", r.status)
	}
	eventually(t, "the stalled create creates the order", func() bool { return s.Count() == 1 })
}

func TestOneCSlowCreate(t *testing.T) {
	t.Parallel()
	t.Run("the client gives up, the order commits after the delay", func(t *testing.T) {
		t.Parallel()
		const delay = 2 * time.Second
		s, base := newSim(t, Options{})
		s.Faults.Add(1, sim.Fault{Op: "create", Kind: SlowCreate, Delay: delay})
		begin := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		if r, err := sendCtx(ctx, t, "POST", base+"/orders", orderJSON("kaspi:1")); err == nil {
			t.Fatalf("got an answer %d %s, want the client to time out", r.status, r.body)
		} else if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("create: %v, want a client timeout", err)
		}
		n, found := s.Count(), findCount(t, base, "kaspi:1")
		if time.Since(begin) < delay {
			if n != 0 || found != 0 {
				t.Fatalf("before the commit: Count() = %d, find lists %d; want 0 and 0", n, found)
			}
		} else {
			t.Logf("the machine is slow: %s passed, the create may have committed", time.Since(begin))
		}
		eventually(t, "the slow create commits", func() bool { return s.Count() == 1 })
		if got := findCount(t, base, "kaspi:1"); got != 1 {
			t.Fatalf("find lists %d after the commit, want 1", got)
		}
		st := s.Stats()
		if st.Requests["create"] != 1 || st.FaultsFired != 1 {
			t.Fatalf("stats = %+v, want 1 create and 1 fault", st)
		}
	})
	t.Run("a client that waits gets 201", func(t *testing.T) {
		t.Parallel()
		s, base := newSim(t, Options{})
		s.Faults.Add(1, sim.Fault{Op: "create", Kind: SlowCreate, Delay: 50 * time.Millisecond})
		if r := mustSend(t, "POST", base+"/orders", orderJSON("kaspi:1")); r.status != 201 {
			t.Fatalf("slow create = %d %s, want 201", r.status, r.body)
		}
		if got := s.Count(); got != 1 {
			t.Fatalf("Count() = %d, want 1", got)
		}
	})
	t.Run("with Dedupe a retry waits for the lock and gets 409", func(t *testing.T) {
		t.Parallel()
		s, base := newSim(t, Options{Dedupe: true})
		s.Faults.Add(1, sim.Fault{Op: "create", Kind: SlowCreate, Delay: time.Second})
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		if _, err := sendCtx(ctx, t, "POST", base+"/orders", orderJSON("kaspi:1")); err == nil {
			t.Fatal("got an answer, want the client to time out")
		}
		eventually(t, "the slow create holds the lock", func() bool {
			s.mu.Lock()
			defer s.mu.Unlock()
			return len(s.locks) == 1 || len(s.orders) == 1
		})
		r := mustSend(t, "POST", base+"/orders", orderJSON("kaspi:1")) // the client's retry
		var e errorBody
		decodeJSON(t, r.body, &e)
		if r.status != 409 || e.Order == nil {
			t.Fatalf("retry = %d %s, want 409 with the order", r.status, r.body)
		}
		if got := s.CountExternal("kaspi:1"); got != 1 {
			t.Fatalf("CountExternal = %d, want 1", got)
		}
		if got, want := e.Order.Ref, s.Orders()[0].Ref; got != want {
			t.Fatalf("409 names %s, want %s", got, want)
		}
	})
	t.Run("Close rolls back a create that has not committed", func(t *testing.T) {
		t.Parallel()
		s, base := newSim(t, Options{})
		s.Faults.Add(1, sim.Fault{Op: "create", Kind: SlowCreate, Delay: time.Hour})
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		if _, err := sendCtx(ctx, t, "POST", base+"/orders", orderJSON("kaspi:1")); err == nil {
			t.Fatal("got an answer through an hour")
		}
		eventually(t, "the fault fires", func() bool { return s.Stats().FaultsFired == 1 })
		s.Close()
		wctx, wcancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer wcancel()
		if err := s.WaitIdle(wctx); err != nil {
			t.Fatal(err)
		}
		if got := s.Count(); got != 0 {
			t.Fatalf("Count() = %d after Close, want 0", got)
		}
	})
	t.Run("on a find it just takes its time", func(t *testing.T) {
		t.Parallel()
		s, base := newSim(t, Options{})
		s.Faults.Add(1, sim.Fault{Op: "find", Kind: SlowCreate, Delay: 20 * time.Millisecond})
		if got := findCount(t, base, "x"); got != 0 {
			t.Fatalf("find = %d, want 0", got)
		}
		if got := s.Stats().FaultsFired; got != 1 {
			t.Fatalf("FaultsFired = %d, want 1", got)
		}
	})
	t.Run("needs a delay", func(t *testing.T) {
		t.Parallel()
		var f ControlFault
		if err := json.Unmarshal([]byte(`{"kind":"slow_create"}`), &f); err == nil {
			t.Fatal("a slow_create without a delay was accepted")
		}
		defer func() {
			if recover() == nil {
				t.Fatal("Faults.Add accepted a slow_create without a delay")
			}
		}()
		New(Options{}).Faults.Add(1, sim.Fault{Kind: SlowCreate})
	})
}

func TestOneCGateway504After(t *testing.T) {
	t.Parallel()
	t.Run("504 after the delay, the order commits after the hold", func(t *testing.T) {
		t.Parallel()
		const hold = 2 * time.Second
		s, base := newSim(t, Options{})
		s.Faults.Add(1, sim.Fault{Op: "create", Kind: Gateway504After, Delay: 100 * time.Millisecond, Hold: hold})
		begin := time.Now()
		r := mustSend(t, "POST", base+"/orders", orderJSON("kaspi:1"), "IBSession", "start")
		if r.status != 504 || !strings.HasPrefix(r.header.Get("Content-Type"), "text/html") ||
			!bytes.HasPrefix(r.body, []byte("<html>")) || !bytes.Contains(r.body, []byte("504 Gateway Time-out")) {
			t.Fatalf("= %d %s %q, want nginx's 504 page", r.status, r.header.Get("Content-Type"), r.body)
		}
		if c := r.header.Get("Set-Cookie"); c != "" {
			t.Fatalf("the proxy's 504 passes on Set-Cookie %q", c)
		}
		n, found := s.Count(), findCount(t, base, "kaspi:1")
		if time.Since(begin) < hold {
			if n != 0 || found != 0 {
				t.Fatalf("before the commit: Count() = %d, find lists %d; want 0 and 0", n, found)
			}
		} else {
			t.Logf("the machine is slow: %s passed, the create may have committed", time.Since(begin))
		}
		eventually(t, "the create commits behind the 504", func() bool { return s.Count() == 1 })
		if got := findCount(t, base, "kaspi:1"); got != 1 {
			t.Fatalf("find lists %d after the commit, want 1", got)
		}
		wctx, wcancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer wcancel()
		if err := s.WaitIdle(wctx); err != nil {
			t.Fatal(err)
		}
		if got := s.Sessions(); got != 1 {
			t.Fatalf("Sessions() = %d, want the session the handler started", got)
		}
	})
	t.Run("hold defaults to twice the delay", func(t *testing.T) {
		t.Parallel()
		if got, want := holdOf(sim.Fault{Kind: Gateway504After, Delay: 50 * time.Millisecond}), 100*time.Millisecond; got != want {
			t.Fatalf("holdOf = %s, want %s", got, want)
		}
		s, base := newSim(t, Options{})
		s.Faults.Add(1, sim.Fault{Op: "create", Kind: Gateway504After, Delay: 50 * time.Millisecond})
		if r := mustSend(t, "POST", base+"/orders", orderJSON("kaspi:1")); r.status != 504 {
			t.Fatalf("= %d, want 504", r.status)
		}
		eventually(t, "the create commits behind the 504", func() bool { return s.Count() == 1 })
	})
	t.Run("with Dedupe the retry after the 504 gets 409", func(t *testing.T) {
		t.Parallel()
		s, base := newSim(t, Options{Dedupe: true})
		s.Faults.Add(1, sim.Fault{Op: "create", Kind: Gateway504After, Delay: 20 * time.Millisecond, Hold: 500 * time.Millisecond})
		if r := mustSend(t, "POST", base+"/orders", orderJSON("kaspi:1")); r.status != 504 {
			t.Fatalf("= %d, want 504", r.status)
		}
		if r := mustSend(t, "POST", base+"/orders", orderJSON("kaspi:1")); r.status != 409 {
			t.Fatalf("retry = %d %s, want 409", r.status, r.body)
		}
		if got := s.CountExternal("kaspi:1"); got != 1 {
			t.Fatalf("CountExternal = %d, want 1", got)
		}
	})
	t.Run("a cancel goes through behind the 504", func(t *testing.T) {
		t.Parallel()
		s, base := newSim(t, Options{})
		if r := mustSend(t, "POST", base+"/orders", orderJSON("kaspi:1")); r.status != 201 {
			t.Fatalf("create = %d, want 201", r.status)
		}
		s.Faults.Add(1, sim.Fault{Op: "cancel", Kind: Gateway504After, Hold: 100 * time.Millisecond})
		if r := mustSend(t, "POST", base+"/orders/cancel", `{"external_id":"kaspi:1","reason":"r"}`); r.status != 504 {
			t.Fatalf("cancel = %d, want 504", r.status)
		}
		eventually(t, "the cancel commits", func() bool { return s.Orders()[0].Cancelled })
	})
	t.Run("Close rolls back", func(t *testing.T) {
		t.Parallel()
		s, base := newSim(t, Options{})
		s.Faults.Add(1, sim.Fault{Op: "create", Kind: Gateway504After, Hold: time.Hour})
		if r := mustSend(t, "POST", base+"/orders", orderJSON("kaspi:1")); r.status != 504 {
			t.Fatalf("= %d, want 504", r.status)
		}
		s.Close() // waits for the background handler
		if got := s.Count(); got != 0 {
			t.Fatalf("Count() = %d after Close, want 0", got)
		}
		wctx, wcancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer wcancel()
		if err := s.WaitIdle(wctx); err != nil {
			t.Fatal(err)
		}
	})
}

func TestOneCMissing(t *testing.T) {
	t.Parallel()
	s, base := newSim(t, Options{Username: "u", Password: "p", AuthFailure: AuthStatus401})
	auth := []string{"Authorization", "Basic " + base64.StdEncoding.EncodeToString([]byte("u:p"))}

	s.SetMissing("create")
	for range 2 {
		r := mustSend(t, "POST", base+"/orders", orderJSON("kaspi:1"), auth...)
		if !isHTML404(r) {
			t.Fatalf("missing create = %d %s %q, want a 404 HTML page", r.status, r.header.Get("Content-Type"), r.body)
		}
	}
	if r := mustSend(t, "POST", base+"/orders", orderJSON("kaspi:1")); !isHTML404(r) {
		t.Fatalf("missing create without credentials = %d, want the web server's 404 before authentication", r.status)
	}
	if got := s.Count(); got != 0 {
		t.Fatalf("Count() = %d, want 0: the handler must not run", got)
	}
	if r := mustSend(t, "GET", base+"/orders?external_id=kaspi:1", "", auth...); r.status != 200 {
		t.Fatalf("find while create is missing = %d, want 200", r.status)
	}
	st := s.Stats()
	if st.Missing != 3 || st.Requests["create"] != 3 || st.AuthFailures != 0 {
		t.Fatalf("stats = %+v, want 3 missing creates and no auth failure", st)
	}

	s.ClearMissing()
	if r := mustSend(t, "POST", base+"/orders", orderJSON("kaspi:1"), auth...); r.status != 201 {
		t.Fatalf("create after ClearMissing = %d %s, want 201", r.status, r.body)
	}

	s.SetMissing() // the publication is gone
	for _, req := range []struct{ method, path, body string }{
		{"GET", "/ping", ""},
		{"GET", "/orders?external_id=kaspi:1", ""},
		{"POST", "/orders", orderJSON("kaspi:2")},
		{"POST", "/orders/cancel", `{"external_id":"kaspi:1","reason":"r"}`},
		{"GET", "/stock?warehouse=WH1", ""},
		{"GET", "/nowhere", ""},
	} {
		if r := mustSend(t, req.method, base+req.path, req.body, auth...); !isHTML404(r) {
			t.Fatalf("%s %s with every path missing = %d %q, want a 404 HTML page", req.method, req.path, r.status, r.body)
		}
	}
	if o := s.Orders(); len(o) != 1 || o[0].Cancelled {
		t.Fatalf("orders = %+v, want kaspi:1 alone and not cancelled", o)
	}
	if got, want := s.Stats().Missing, 9; got != want {
		t.Fatalf("Missing = %d, want %d", got, want)
	}
	s.ClearMissing()
	if r := mustSend(t, "GET", base+"/ping", "", auth...); r.status != 200 {
		t.Fatalf("ping after ClearMissing = %d, want 200", r.status)
	}

	defer func() {
		if recover() == nil {
			t.Fatal("SetMissing accepted an unknown op")
		}
	}()
	s.SetMissing("delete")
}

func TestOneCFaultHTML404(t *testing.T) {
	t.Parallel()
	s, base := newSim(t, Options{})
	s.Faults.Add(2, sim.Fault{Op: "create", Kind: HTML404})
	for range 2 {
		if r := mustSend(t, "POST", base+"/orders", orderJSON("kaspi:1")); !isHTML404(r) {
			t.Fatalf("= %d %q, want a 404 HTML page", r.status, r.body)
		}
	}
	if got := s.Count(); got != 0 {
		t.Fatalf("Count() = %d, want 0", got)
	}
	if r := mustSend(t, "POST", base+"/orders", orderJSON("kaspi:1")); r.status != 201 {
		t.Fatalf("third create = %d, want 201", r.status)
	}
	if st := s.Stats(); st.Missing != 2 || st.FaultsFired != 2 || s.Count() != 1 {
		t.Fatalf("stats = %+v, count %d; want 2 missing, 2 faults, 1 order", st, s.Count())
	}
}

func TestOneCDownUp(t *testing.T) {
	t.Parallel()
	s := startSim(t, Options{})
	base, addr := s.URL(), s.Addr()
	if r := mustSend(t, "POST", base+"/orders", orderJSON("kaspi:1")); r.status != 201 {
		t.Fatalf("create = %d, want 201", r.status)
	}
	// A client that keeps its connection: going down must close it too.
	kc := &http.Client{Transport: &http.Transport{}}
	defer kc.CloseIdleConnections()
	kping := func() error {
		resp, err := kc.Get(base + "/ping")
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	}
	if err := kping(); err != nil {
		t.Fatal(err)
	}

	if err := s.Down(); err != nil {
		t.Fatal(err)
	}
	if _, err := send(t, "GET", base+"/ping", ""); !refused(err) {
		t.Fatalf("ping while down: %v, want connection refused", err)
	}
	if err := kping(); err == nil {
		t.Fatal("a kept connection was served while down")
	}
	if err := s.Down(); err != nil { // down while down: nothing
		t.Fatal(err)
	}
	if got := s.Stats().DownPeriods; got != 1 {
		t.Fatalf("DownPeriods = %d, want 1", got)
	}

	if err := s.Up(); err != nil {
		t.Fatal(err)
	}
	if err := s.Up(); err != nil { // up while up: nothing
		t.Fatal(err)
	}
	if s.Addr() != addr || s.URL() != base {
		t.Fatalf("up on %s, want %s", s.Addr(), addr)
	}
	if err := kping(); err != nil {
		t.Fatalf("ping after Up: %v", err)
	}
	if got := findCount(t, base, "kaspi:1"); got != 1 {
		t.Fatalf("find after Up lists %d, want the order from before", got)
	}
	r := mustSend(t, "POST", base+"/orders", orderJSON("kaspi:2"))
	var created struct{ Number string }
	decodeJSON(t, r.body, &created)
	if r.status != 201 || created.Number != "ЗК-000002" || s.Count() != 2 {
		t.Fatalf("create after Up = %d %s, count %d; want 201 ЗК-000002, 2 orders", r.status, r.body, s.Count())
	}

	t.Run("DownFor comes back by itself", func(t *testing.T) {
		const d = 300 * time.Millisecond
		begin := time.Now()
		if err := s.DownFor(d); err != nil {
			t.Fatal(err)
		}
		_, err := send(t, "GET", base+"/ping", "")
		if err == nil && time.Since(begin) < d {
			t.Fatal("served while down")
		}
		if err != nil && !refused(err) {
			t.Fatalf("ping while down: %v, want connection refused", err)
		}
		eventually(t, "the server comes back up", func() bool {
			_, err := send(t, "GET", base+"/ping", "")
			return err == nil
		})
		if s.Addr() != addr || s.Count() != 2 {
			t.Fatalf("after DownFor: on %s with %d orders; want %s and 2", s.Addr(), s.Count(), addr)
		}
		if got := s.Stats().DownPeriods; got != 2 {
			t.Fatalf("DownPeriods = %d, want 2", got)
		}
	})

	t.Run("an earlier DownFor does not end a later Down", func(t *testing.T) {
		if err := s.DownFor(50 * time.Millisecond); err != nil {
			t.Fatal(err)
		}
		if err := s.Up(); err != nil {
			t.Fatal(err)
		}
		if err := s.Down(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond) // past the timer: if it had brought the server up, the ping below would be served
		if _, err := send(t, "GET", base+"/ping", ""); !refused(err) {
			t.Fatalf("ping: %v, want connection refused: the old timer brought the server up", err)
		}
		if err := s.Up(); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("a request cut by Down still commits", func(t *testing.T) {
		const delay = 2 * time.Second
		s.Faults.Add(1, sim.Fault{Op: "create", Kind: SlowCreate, Delay: delay})
		begin := time.Now()
		errc := make(chan error, 1)
		go func() {
			_, err := send(t, "POST", base+"/orders", orderJSON("kaspi:3"))
			errc <- err
		}()
		eventually(t, "the slow create runs", func() bool { return s.Faults.Pending() == 0 })
		if err := s.Down(); err != nil {
			t.Fatal(err)
		}
		if err := <-errc; err == nil && time.Since(begin) < delay {
			t.Fatal("the cut request got an answer")
		}
		eventually(t, "the cut create commits", func() bool { return s.CountExternal("kaspi:3") == 1 })
		if err := s.Up(); err != nil {
			t.Fatal(err)
		}
	})

	if err := s.Down(); err != nil {
		t.Fatal(err)
	}
	s.Close() // while down
	s.Close()
	if err := s.Up(); err == nil {
		t.Fatal("Up after Close succeeded")
	}
	if err := s.Down(); err == nil {
		t.Fatal("Down after Close succeeded")
	}
	if err := s.DownFor(time.Second); err == nil {
		t.Fatal("DownFor after Close succeeded")
	}
	if _, err := send(t, "GET", base+"/ping", ""); err == nil {
		t.Fatal("served after Close")
	}
}

func TestOneCDownUnstarted(t *testing.T) {
	t.Parallel()
	if err := New(Options{}).Down(); err == nil {
		t.Fatal("Down before Start succeeded")
	}
	s, _ := newSim(t, Options{}) // mounted as a handler
	if err := s.Up(); err == nil {
		t.Fatal("Up on a mounted handler succeeded")
	}
	if err := s.DownFor(0); err == nil {
		t.Fatal("DownFor(0) succeeded")
	}
}

func TestOneCOutageControl(t *testing.T) {
	t.Parallel()
	s := startSim(t, Options{})
	base := s.URL()
	remote, err := NewRemote(base)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	if err := remote.SetMissing(ctx, "create"); err != nil {
		t.Fatal(err)
	}
	if r := mustSend(t, "POST", base+"/orders", orderJSON("kaspi:1")); !isHTML404(r) {
		t.Fatalf("create after remote SetMissing = %d, want a 404 HTML page", r.status)
	}
	if r := mustSend(t, "GET", base+"/ping", ""); r.status != 200 {
		t.Fatalf("ping = %d, want 200", r.status)
	}
	if err := remote.SetMissing(ctx); err != nil {
		t.Fatal(err)
	}
	if r := mustSend(t, "GET", base+"/ping", ""); !isHTML404(r) {
		t.Fatalf("ping with every path missing = %d, want a 404 HTML page", r.status)
	}
	if err := remote.ClearMissing(ctx); err != nil {
		t.Fatal(err)
	}
	if err := remote.SetMissing(ctx, "delete"); err == nil {
		t.Fatal("an unknown op was accepted")
	}
	if r := mustSend(t, "POST", base+"/orders", orderJSON("kaspi:1")); r.status != 201 {
		t.Fatalf("create after remote ClearMissing = %d, want 201", r.status)
	}

	// The new kinds travel by name, with their hold.
	if err := remote.AddFaults(ctx, 1, sim.Fault{Op: "create", Kind: Gateway504After, Delay: 10 * time.Millisecond, Hold: 50 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if r := mustSend(t, "POST", base+"/orders", orderJSON("kaspi:2")); r.status != 504 {
		t.Fatalf("create = %d, want 504", r.status)
	}
	eventually(t, "the create commits behind the 504", func() bool { return s.CountExternal("kaspi:2") == 1 })
	if err := remote.AddFaults(ctx, 1, sim.Fault{Kind: SlowCreate}); err == nil {
		t.Fatal("a slow_create without a delay was accepted")
	}

	if err := remote.DownFor(ctx, 200*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the simulator goes down", func() bool { return s.Stats().DownPeriods == 1 })
	eventually(t, "the simulator comes back up", func() bool {
		_, err := send(t, "GET", base+"/ping", "")
		return err == nil
	})
	st, err := remote.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Missing != 2 || st.DownPeriods != 1 || s.Count() != 2 {
		t.Fatalf("stats = %+v, count %d; want 2 missing, 1 down period, 2 orders", st, s.Count())
	}
	if err := remote.DownFor(ctx, 0); err == nil {
		t.Fatal("down for 0 was accepted")
	}
	_, mounted := newSim(t, Options{})
	mremote, err := NewRemote(mounted)
	if err != nil {
		t.Fatal(err)
	}
	if err := mremote.DownFor(ctx, time.Second); err == nil {
		t.Fatal("a simulator mounted as a handler accepted to go down")
	}
}

// TestOneCNoGoroutineLeak is not parallel, so that no other test starts goroutines
// while it counts them.
func TestOneCNoGoroutineLeak(t *testing.T) {
	before := runtime.NumGoroutine()
	for range 3 {
		s := New(Options{})
		if err := s.Start("127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		base := s.URL()
		if r := mustSend(t, "POST", base+"/orders", orderJSON("kaspi:1")); r.status != 201 {
			t.Fatalf("create = %d, want 201", r.status)
		}
		s.Faults.Add(1, sim.Fault{Op: "create", Kind: Gateway504After, Hold: time.Hour})
		if r := mustSend(t, "POST", base+"/orders", orderJSON("kaspi:2")); r.status != 504 {
			t.Fatalf("create = %d, want 504", r.status)
		}
		s.Faults.Add(1, sim.Fault{Op: "create", Kind: SlowCreate, Delay: time.Hour})
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		sendCtx(ctx, t, "POST", base+"/orders", orderJSON("kaspi:3"))
		cancel()
		for _, step := range []func() error{
			s.Down, s.Up,
			func() error { return s.DownFor(time.Hour) },
			s.Up,
			func() error { return s.DownFor(time.Millisecond) },
		} {
			if err := step(); err != nil {
				t.Fatal(err)
			}
		}
		s.Close()
		if got := s.Count(); got != 1 {
			t.Fatalf("Count() = %d after Close, want 1: uncommitted creates roll back", got)
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			t.Fatalf("%d goroutines after Close, %d before:\n%s", runtime.NumGoroutine(), before, buf)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
