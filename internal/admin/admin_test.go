package admin

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func get(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec.Code, rec.Body.String()
}

func report(t *testing.T, body string) Report {
	t.Helper()
	var r Report
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatalf("not a report: %v: %s", err, body)
	}
	return r
}

func ok(detail string) CheckFunc {
	return func(context.Context) (string, error) { return detail, nil }
}

func failing(reason string) CheckFunc {
	return func(context.Context) (string, error) { return "", errors.New(reason) }
}

// 200 when every check passes, 503 when one fails; the body lists every check in
// order with its reason.
func TestChecksAnswer200Or503WithEachReason(t *testing.T) {
	t.Parallel()
	s := New(Config{})
	s.Live("process", ok("answers"))
	s.Ready("database", ok("answers; the schema is current"))
	s.Ready("onec", failing("1C does not answer: connection refused"))
	s.Ready("engine", ok("claiming"))

	code, body := get(t, s.Handler(), "/healthz")
	if code != 200 {
		t.Fatalf("/healthz: %d %s", code, body)
	}
	if r := report(t, body); r.Status != "ok" || len(r.Checks) != 1 || r.Checks[0] != (Result{"process", true, "answers"}) {
		t.Fatalf("/healthz: %+v", r)
	}
	code, body = get(t, s.Handler(), "/readyz")
	if code != 503 {
		t.Fatalf("/readyz: %d %s, want 503", code, body)
	}
	want := Report{Status: "unavailable", Checks: []Result{
		{"database", true, "answers; the schema is current"},
		{"onec", false, "1C does not answer: connection refused"},
		{"engine", true, "claiming"},
	}}
	if r := report(t, body); r.Status != want.Status || len(r.Checks) != 3 || r.Checks[0] != want.Checks[0] ||
		r.Checks[1] != want.Checks[1] || r.Checks[2] != want.Checks[2] {
		t.Fatalf("/readyz: %+v, want %+v", r, want)
	}
	// HEAD works as GET (a load balancer's probe).
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodHead, "/readyz", nil))
	if rec.Code != 503 {
		t.Fatalf("HEAD /readyz: %d", rec.Code)
	}
	// No checks at all: ok, with an empty list.
	code, body = get(t, New(Config{}).Handler(), "/readyz")
	if r := report(t, body); code != 200 || r.Status != "ok" || r.Checks == nil || len(r.Checks) != 0 {
		t.Fatalf("no checks: %d %s", code, body)
	}
}

// A check that hangs fails after the timeout, saying so; one that panics fails too.
// The others answer meanwhile: checks run side by side.
func TestAHungCheckFailsAfterTheTimeout(t *testing.T) {
	t.Parallel()
	s := New(Config{CheckTimeout: 50 * time.Millisecond})
	release := make(chan struct{})
	defer close(release)
	s.Ready("database", func(ctx context.Context) (string, error) {
		select {
		case <-release:
		case <-time.After(time.Hour):
		}
		return "late", nil
	})
	s.Ready("panics", func(context.Context) (string, error) { panic("boom") })
	s.Ready("engine", ok("claiming"))
	code, body := get(t, s.Handler(), "/readyz")
	r := report(t, body)
	if code != 503 || r.Checks[0].OK || r.Checks[0].Reason != "no answer within 50ms" ||
		r.Checks[1].OK || !strings.Contains(r.Checks[1].Reason, "panicked: boom") || !r.Checks[2].OK {
		t.Fatalf("%d %+v", code, r)
	}
}

// /debug/pprof/ is served only when asked for.
func TestPProfOnlyWhenEnabled(t *testing.T) {
	t.Parallel()
	off := New(Config{Metrics: http.NotFoundHandler()})
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/heap", "/debug/pprof/cmdline", "/debug/pprof/goroutine?debug=1"} {
		if code, _ := get(t, off.Handler(), path); code != 404 {
			t.Errorf("pprof off: %s answered %d, want 404", path, code)
		}
	}
	if _, body := get(t, off.Handler(), "/"); strings.Contains(body, "pprof") {
		t.Errorf("pprof off: the index names it:\n%s", body)
	}
	on := New(Config{PProf: true})
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/cmdline", "/debug/pprof/goroutine?debug=1"} {
		if code, body := get(t, on.Handler(), path); code != 200 {
			t.Errorf("pprof on: %s answered %d %s", path, code, body)
		}
	}
	if code, body := get(t, on.Handler(), "/debug/pprof/"); code != 200 || !strings.Contains(body, "goroutine") {
		t.Errorf("pprof index: %d %s", code, body)
	}
}

// The server listens on its address, answers, and stops.
func TestStartStop(t *testing.T) {
	t.Parallel()
	metrics := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "up 1\n") })
	s := New(Config{Listen: "127.0.0.1:0", Metrics: metrics})
	if err := s.Stop(t.Context()); err != nil {
		t.Fatalf("stop before start: %v", err)
	}
	if err := s.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	base := "http://" + s.Addr().String()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "up 1\n" {
		t.Fatalf("/metrics: %d %q", resp.StatusCode, b)
	}
	// DNS rebinding: the same listener asked for under another site's name.
	req, _ := http.NewRequest(http.MethodGet, base+"/metrics", nil)
	req.Host = "rebind.attacker.example"
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 403 {
		t.Fatalf("/metrics for rebind.attacker.example: %d, want 403", resp.StatusCode)
	}
	resp, err = http.Get(base + "/nope")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Fatalf("/nope: %d", resp.StatusCode)
	}
	// The address taken: the second server cannot start, and says why.
	busy := New(Config{Listen: s.Addr().String()})
	if err := busy.Start(t.Context()); err == nil {
		busy.Stop(t.Context())
		t.Fatal("two servers on one address")
	}
	if err := s.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := http.Get(base + "/healthz"); err == nil {
		t.Fatal("still answering after Stop")
	}
	if err := s.Stop(t.Context()); err != nil {
		t.Fatalf("second stop: %v", err)
	}
}
