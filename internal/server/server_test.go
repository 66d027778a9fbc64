package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ordersync/ordersync/internal/inbox"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/stdwebhook"
)

// fakeInbox is an in-memory inbox.Store with the same outcomes as the real ones:
// the (source, id) map decides, a delivery in flight makes a concurrent one
// InProgress, and registrations honour IfAbsent and Wake.
type fakeInbox struct {
	mu       sync.Mutex
	events   map[[2]string]*fakeEvent
	pending  map[[2]string]bool
	ops      map[string]journal.NewOperation
	opConfl  map[string]int // registrations under an existing key with another payload
	wakes    map[string]int
	receives int
	fail     error
	// hold, when set, runs while an event is being registered (outside the lock),
	// so a test can keep a delivery in flight.
	hold func(ev inbox.Event)
}

type fakeEvent struct {
	ev        inbox.Event
	sum       [32]byte
	answer    inbox.Answer
	ops       []string
	conflicts int
}

var _ inbox.Store = (*fakeInbox)(nil)

func newFakeInbox() *fakeInbox {
	return &fakeInbox{
		events:  map[[2]string]*fakeEvent{},
		pending: map[[2]string]bool{},
		ops:     map[string]journal.NewOperation{},
		opConfl: map[string]int{},
		wakes:   map[string]int{},
	}
}

func (f *fakeInbox) Receive(ctx context.Context, ev inbox.Event, regs []inbox.Registration, answer inbox.Answer) (inbox.Receipt, error) {
	k := [2]string{ev.Source, ev.ID}
	sum := sha256.Sum256(ev.Body)
	f.mu.Lock()
	f.receives++
	if f.fail != nil {
		err := f.fail
		f.mu.Unlock()
		return inbox.Receipt{}, err
	}
	if e, ok := f.events[k]; ok {
		defer f.mu.Unlock()
		if e.sum == sum {
			return inbox.Receipt{Outcome: inbox.Duplicate, Answer: e.answer, Operations: e.ops}, nil
		}
		e.conflicts++
		return inbox.Receipt{Outcome: inbox.Conflict}, nil
	}
	if f.pending[k] {
		f.mu.Unlock()
		return inbox.Receipt{Outcome: inbox.InProgress}, nil
	}
	f.pending[k] = true
	hold := f.hold
	f.mu.Unlock()

	if hold != nil {
		hold(ev)
	}

	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.pending, k)
	var keys []string
	for _, r := range regs {
		keys = append(keys, r.Op.Key)
		old, ok := f.ops[r.Op.Key]
		switch {
		case !ok:
			f.ops[r.Op.Key] = r.Op
		case r.Wake:
			f.wakes[r.Op.Key]++
		case !r.IfAbsent && !bytes.Equal(old.Payload, r.Op.Payload):
			f.opConfl[r.Op.Key]++
		}
	}
	ev.Body = append([]byte(nil), ev.Body...)
	f.events[k] = &fakeEvent{ev: ev, sum: sum, answer: answer, ops: keys}
	return inbox.Receipt{Outcome: inbox.Processed, Answer: answer, Operations: keys}, nil
}

func (f *fakeInbox) List(ctx context.Context, flt inbox.Filter) ([]inbox.Record, error) {
	return nil, errors.New("fake inbox: List not implemented")
}

func (f *fakeInbox) ByOperation(ctx context.Context, key string) ([]inbox.Record, error) {
	return nil, errors.New("fake inbox: ByOperation not implemented")
}

func (f *fakeInbox) Show(ctx context.Context, source, eventID string) (inbox.Detail, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.events[[2]string{source, eventID}]
	if !ok {
		return inbox.Detail{}, inbox.ErrNotFound
	}
	return inbox.Detail{Record: inbox.Record{Source: source, EventID: eventID, Body: e.ev.Body, Answer: e.answer, Operations: e.ops, Conflicts: e.conflicts}}, nil
}

// counts returns the stored events and registered operations.
func (f *fakeInbox) counts() (events, ops int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.events), len(f.ops)
}

func (f *fakeInbox) op(key string) (journal.NewOperation, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	op, ok := f.ops[key]
	return op, ok
}

func (f *fakeInbox) event(source, id string) (*fakeEvent, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.events[[2]string{source, id}]
	return e, ok
}

// syncBuffer is a log sink safe for concurrent handlers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// lines decodes the JSON log lines.
func (s *syncBuffer) lines(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(s.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

// Test fixtures.
const (
	siteSecret  = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" // the Standard Webhooks test vector's
	otherSecret = "whsec_c2Vjb25kLXNlY3JldC1mb3ItdGVzdHMtb25seQ=="
	bxTokenText = "51856fefc120afa4b628cc82d3935cce"
)

var testNow = time.Date(2026, 9, 16, 10, 0, 0, 0, time.UTC)

type harness struct {
	t     *testing.T
	srv   *Server
	inbox *fakeInbox
	logs  *syncBuffer
	wakes int
	mu    sync.Mutex
}

// newHarness builds a server on a fake inbox with a site source, Ozon and Bitrix24;
// mutate adjusts the configuration first.
func newHarness(t *testing.T, mutate func(*Config)) *harness {
	t.Helper()
	h := &harness{t: t, inbox: newFakeInbox(), logs: &syncBuffer{}}
	cfg := Config{
		Listen:  "127.0.0.1:0",
		Inbox:   h.inbox,
		Sources: map[string]SourceConfig{"site": {Secrets: []stdwebhook.Secret{stdwebhook.MustParseSecret(siteSecret)}}},
		Ozon:    &OzonConfig{Name: "ordersync-test", Version: "1.2.3"},
		Bitrix24: &Bitrix24Config{
			ApplicationToken: bxTokenText,
		},
		OnRegistered: func() { h.mu.Lock(); h.wakes++; h.mu.Unlock() },
		Logger:       slog.New(slog.NewJSONHandler(h.logs, nil)),
		Now:          func() time.Time { return testNow },
	}
	if mutate != nil {
		mutate(&cfg)
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	h.srv = srv
	return h
}

func (h *harness) registered() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.wakes
}

// do serves one request in memory.
func (h *harness) do(r *http.Request) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	h.srv.Handler().ServeHTTP(w, r)
	return w
}

// stored asserts how many events and operations the inbox holds.
func (h *harness) stored(events, ops int) {
	h.t.Helper()
	if e, o := h.inbox.counts(); e != events || o != ops {
		h.t.Fatalf("inbox holds %d events and %d operations, want %d and %d", e, o, events, ops)
	}
}

// stat is one counter.
func (h *harness) stat(source, outcome, reason string) uint64 {
	return h.srv.Stats()[StatKey{Source: source, Outcome: outcome, Reason: reason}]
}

func orderJSON(source, externalID string) []byte {
	return []byte(fmt.Sprintf(`{"source": %q, "external_id": %q, "number": %q,
 "created_at": "2026-09-16T10:00:00+05:00",
 "customer": {"name": "Иван Петров", "phone": "+77011234567", "email": "ivan@example.kz"},
 "warehouse": "WH1", "currency": "KZT",
 "lines": [{"sku": "SKU-8812", "name": "Чайник", "quantity": 2, "price": 1500.00}],
 "total": 3000.00, "comment": ""}`, source, externalID, externalID))
}

// signedRequest is a POST to /webhooks/<source> signed with secrets at ts.
func signedRequest(source, id string, ts time.Time, body []byte, secrets ...string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/webhooks/"+source, bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	var sec []stdwebhook.Secret
	for _, s := range secrets {
		sec = append(sec, stdwebhook.MustParseSecret(s))
	}
	for k, v := range stdwebhook.Headers(sec, id, ts, body) {
		r.Header[k] = v
	}
	return r
}

func decode(t *testing.T, w *httptest.ResponseRecorder) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &m); err != nil {
		t.Fatalf("answer %d %q is not JSON: %v", w.Code, w.Body, err)
	}
	return m
}

func wantStatus(t *testing.T, w *httptest.ResponseRecorder, status int) {
	t.Helper()
	if w.Code != status {
		t.Fatalf("status %d (%s), want %d", w.Code, strings.TrimSpace(w.Body.String()), status)
	}
}

func TestNewRefusesBadConfiguration(t *testing.T) {
	t.Parallel()
	sec := []stdwebhook.Secret{stdwebhook.MustParseSecret(siteSecret)}
	cases := []struct {
		name string
		cfg  Config
		want string
	}{
		{"no inbox", Config{}, "no inbox"},
		{"source named ozon", Config{Inbox: newFakeInbox(), Sources: map[string]SourceConfig{"ozon": {Secrets: sec}}}, "webhooks.sources.ozon"},
		{"source named bitrix24", Config{Inbox: newFakeInbox(), Sources: map[string]SourceConfig{"bitrix24": {Secrets: sec}}}, "webhooks.sources.bitrix24"},
		{"bad source name", Config{Inbox: newFakeInbox(), Sources: map[string]SourceConfig{"My Site": {Secrets: sec}}}, `"My Site"`},
		{"no secrets", Config{Inbox: newFakeInbox(), Sources: map[string]SourceConfig{"site": {}}}, "webhooks.sources.site.secrets"},
		{"no bitrix24 token", Config{Inbox: newFakeInbox(), Bitrix24: &Bitrix24Config{}}, "webhooks.bitrix24.application_token"},
		{"bad network", Config{Inbox: newFakeInbox(), Ozon: &OzonConfig{TrustedProxies: []netip.Prefix{{}}}}, "webhooks.ozon.trusted_proxies[0]"},
	}
	for _, c := range cases {
		_, err := New(c.cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: New error %v, want one naming %s", c.name, err, c.want)
		}
	}
}

func TestHealthz(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	w := h.do(httptest.NewRequest(http.MethodGet, "/healthz", nil))
	wantStatus(t, w, http.StatusOK)
	if got := decode(t, w)["status"]; got != "ok" {
		t.Fatalf("healthz status %v", got)
	}
}

func TestStartStop(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	if err := h.srv.Stop(context.Background()); err != nil {
		t.Fatalf("Stop before Start: %v", err)
	}
	if err := h.srv.Start(context.Background()); err == nil {
		t.Fatal("Start after Stop succeeded")
	}

	h = newHarness(t, nil)
	if h.srv.Addr() != "" {
		t.Fatalf("Addr before Start = %q", h.srv.Addr())
	}
	if err := h.srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := h.srv.Start(context.Background()); err == nil {
		t.Fatal("second Start succeeded")
	}
	addr := h.srv.Addr()
	if ap, err := netip.ParseAddrPort(addr); err != nil || ap.Port() == 0 {
		t.Fatalf("Addr = %q, want a bound port", addr)
	}
	resp, err := http.Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("healthz over TCP: %d", resp.StatusCode)
	}
	for i := range 2 {
		if err := h.srv.Stop(context.Background()); err != nil {
			t.Fatalf("Stop #%d: %v", i+1, err)
		}
	}
	if _, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		t.Fatal("the port still accepts connections after Stop")
	}
}

// A request in flight when Stop is called is finished and answered.
func TestStopFinishesInFlight(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	entered, release := make(chan struct{}), make(chan struct{})
	h.inbox.hold = func(inbox.Event) { close(entered); <-release }
	if err := h.srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	url := "http://" + h.srv.Addr()

	type answer struct {
		status int
		err    error
	}
	got := make(chan answer, 1)
	go func() {
		r := signedRequest("site", "msg_inflight", testNow, orderJSON("site", "A-1"), siteSecret)
		req, _ := http.NewRequest(http.MethodPost, url+"/webhooks/site", r.Body)
		req.Header = r.Header
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			got <- answer{err: err}
			return
		}
		resp.Body.Close()
		got <- answer{status: resp.StatusCode}
	}()
	<-entered

	stopped := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		stopped <- h.srv.Stop(ctx)
	}()
	select {
	case err := <-stopped:
		t.Fatalf("Stop returned (%v) while a request was in flight", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	if a := <-got; a.err != nil || a.status != http.StatusOK {
		t.Fatalf("in-flight request: %d, %v; want 200", a.status, a.err)
	}
	if err := <-stopped; err != nil {
		t.Fatalf("Stop: %v", err)
	}
	h.stored(1, 1)
}

// Stop with a deadline that passes closes what is still open and says so.
func TestStopDeadline(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	entered, release := make(chan struct{}), make(chan struct{})
	defer close(release)
	h.inbox.hold = func(inbox.Event) { close(entered); <-release }
	if err := h.srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	url := "http://" + h.srv.Addr()
	go func() {
		r := signedRequest("site", "msg_stuck", testNow, orderJSON("site", "A-2"), siteSecret)
		req, _ := http.NewRequest(http.MethodPost, url+"/webhooks/site", r.Body)
		req.Header = r.Header
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	<-entered
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := h.srv.Stop(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Stop past its deadline: %v, want context.DeadlineExceeded", err)
	}
}

// The log has one line per webhook request with source, event id and outcome, and
// never a secret or a body.
func TestLogLines(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	body := orderJSON("site", "LOG-1")
	h.do(signedRequest("site", "msg_log1", testNow, body, siteSecret))
	h.do(signedRequest("site", "msg_log2", testNow, body, otherSecret))
	h.do(bitrixRequest(bitrixForm("ONCRMDEALADD", "77", "1700000000", "wrong-token-value")))
	h.do(bitrixRequest(bitrixForm("ONCRMDEALADD", "78", "1700000000", bxTokenText)))

	lines := h.logs.lines(t)
	if len(lines) != 4 {
		t.Fatalf("%d log lines, want 4:\n%s", len(lines), h.logs)
	}
	want := []struct{ source, id, outcome string }{
		{"site", "msg_log1", "processed"},
		{"site", "", "rejected"},
		{"bitrix24", "", "rejected"},
		{"bitrix24", "ONCRMDEALADD:78:1700000000", "processed"},
	}
	for i, w := range want {
		l := lines[i]
		if l["source"] != w.source || l["event_id"] != w.id || l["outcome"] != w.outcome {
			t.Errorf("log line %d: %v, want source %s, event_id %q, outcome %s", i, l, w.source, w.id, w.outcome)
		}
	}
	text := h.logs.String()
	for _, secret := range []string{siteSecret[len("whsec_"):], otherSecret[len("whsec_"):], bxTokenText, "wrong-token-value", "Чайник", "SKU-8812"} {
		if strings.Contains(text, secret) {
			t.Errorf("the log holds %q:\n%s", secret, text)
		}
	}
}

func opWith(key string, payload []byte) journal.NewOperation {
	return journal.NewOperation{Key: key, Kind: "order.create", Source: strings.SplitN(key, ":", 2)[0], Payload: payload}
}

// slowInbox never answers before its context ends.
type slowInbox struct{ *fakeInbox }

func (s *slowInbox) Receive(ctx context.Context, ev inbox.Event, regs []inbox.Registration, answer inbox.Answer) (inbox.Receipt, error) {
	<-ctx.Done()
	return inbox.Receipt{}, ctx.Err()
}

// readAll drains and closes a response body.
func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
