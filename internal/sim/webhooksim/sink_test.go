package webhooksim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ordersync/ordersync/internal/outbox"
	"github.com/ordersync/ordersync/internal/outbox/webhook"
	"github.com/ordersync/ordersync/internal/sim"
	"github.com/ordersync/ordersync/internal/stdwebhook"
)

const (
	sinkSecret  = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	sinkSecret2 = "whsec_bmV3LXNlY3JldC1mb3Itb3JkZXJzeW5jLXRlc3RzISE="
)

func newSink(t *testing.T, opts Options) (*Sink, string) {
	t.Helper()
	if opts.Secrets == nil {
		opts.Secrets = []string{sinkSecret}
	}
	if opts.Now == nil {
		opts.Now = func() time.Time { return testNow }
	}
	s, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	t.Cleanup(s.Close) // runs first: ends latency waits
	return s, ts.URL + "/hooks"
}

func envelope(eventID, aggregate string, seq int64) string {
	return fmt.Sprintf(`{"event_id":%q,"type":"order.created","aggregate_type":"order","aggregate_id":%q,"sequence":%d,"occurred_at":"2026-09-16T05:00:00Z","data":{}}`,
		eventID, aggregate, seq)
}

// deliver POSTs body signed with secret (whsec_ text) at ts, as event id; extra
// headers (name, value pairs) replace the signed ones.
var testNow = time.Date(2026, 9, 16, 5, 0, 0, 0, time.UTC)

type reply struct {
	status int
	header http.Header
	body   []byte
}

// send makes one request on a fresh connection; headers come as name, value pairs.
func send(t *testing.T, method, url, body string, headers ...string) (reply, error) {
	t.Helper()
	return sendCtx(context.Background(), t, method, url, body, headers...)
}

func sendCtx(ctx context.Context, t *testing.T, method, url, body string, headers ...string) (reply, error) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		t.Fatalf("new request: %v", err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Add(headers[i], headers[i+1])
	}
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := hc.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return reply{}, err
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: b}, nil
}

func deliver(t *testing.T, url, secret, id string, ts time.Time, body string, extra ...string) reply {
	t.Helper()
	rep, err := tryDeliver(t, url, secret, id, ts, body, extra...)
	if err != nil {
		t.Fatalf("POST: %v", err)
	}
	return rep
}

// tryDeliver is deliver for goroutines other than the test's: it returns the error.
func tryDeliver(t *testing.T, url, secret, id string, ts time.Time, body string, extra ...string) (reply, error) {
	t.Helper()
	h := stdwebhook.Headers([]stdwebhook.Secret{stdwebhook.MustParseSecret(secret)}, id, ts, []byte(body))
	for i := 0; i+1 < len(extra); i += 2 {
		h.Set(extra[i], extra[i+1]) // replaces what was signed
	}
	var kv []string
	for k := range h {
		kv = append(kv, k, h.Get(k))
	}
	return send(t, http.MethodPost, url, body, kv...)
}

func TestWebhookSinkVerifiesTestVector(t *testing.T) {
	t.Parallel()
	s, err := New(Options{Secrets: []string{sinkSecret},
		Now: func() time.Time { return time.Unix(1614265330, 0) }})
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	h.Set("webhook-id", "msg_p5jXN8AQM9LWM0D4loKWxJek")
	h.Set("webhook-timestamp", "1614265330")
	h.Set("webhook-signature", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
	if reason := s.verify(h, []byte(`{"test": 2432232314}`)); reason != "" {
		t.Errorf("test vector: %s", reason)
	}
	if reason := s.verify(h, []byte(`{"test":2432232314}`)); reason == "" {
		t.Error("the re-serialised body verified")
	}
}

func TestWebhookSinkRecords(t *testing.T) {
	t.Parallel()
	s, url := newSink(t, Options{})
	sends := []struct {
		id, agg string
		seq     int64
	}{
		{"e1", "kaspi:order:1", 1}, {"e2", "kaspi:order:2", 1}, {"e3", "kaspi:order:1", 2},
		{"e3", "kaspi:order:1", 2}, // a redelivery
		{"e4", "kaspi:order:2", 2},
	}
	for _, d := range sends {
		if rep := deliver(t, url, sinkSecret, d.id, testNow, envelope(d.id, d.agg, d.seq)); rep.status != http.StatusNoContent {
			t.Fatalf("%s: status %d %s", d.id, rep.status, rep.body)
		}
	}
	if s.Count() != 5 || s.Unique() != 4 || s.Rejected() != 0 || s.Failed() != 0 {
		t.Errorf("count %d, unique %d, rejected %d, failed %d; want 5, 4, 0, 0",
			s.Count(), s.Unique(), s.Rejected(), s.Failed())
	}
	want := map[string][]int64{"kaspi:order:1": {1, 2, 2}, "kaspi:order:2": {1, 2}}
	got := s.PerAggregate()
	if len(got) != len(want) || !slices.Equal(got["kaspi:order:1"], want["kaspi:order:1"]) ||
		!slices.Equal(got["kaspi:order:2"], want["kaspi:order:2"]) {
		t.Errorf("PerAggregate = %v, want %v", got, want)
	}
	ds := s.Deliveries()
	var ids []string
	for _, d := range ds {
		ids = append(ids, d.EventID)
	}
	if !slices.Equal(ids, []string{"e1", "e2", "e3", "e3", "e4"}) {
		t.Errorf("event ids in order = %v", ids)
	}
	d := ds[0]
	if d.WebhookID != "e1" || d.Type != "order.created" || d.AggregateID != "kaspi:order:1" || d.Sequence != 1 ||
		string(d.Body) != envelope("e1", "kaspi:order:1", 1) || !d.ReceivedAt.Equal(testNow) {
		t.Errorf("first delivery = %+v", d)
	}
	// Deliveries is a copy.
	ds[0].Body[0] = 'X'
	if s.Deliveries()[0].Body[0] != '{' {
		t.Error("Deliveries shares its bodies with the sink")
	}
}

func TestWebhookSinkRejects(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		secret string
		ts     time.Time
		id     string
		body   string
		extra  []string
		status int
	}{
		{"wrong secret", sinkSecret2, testNow, "e1", envelope("e1", "a", 1), nil, 401},
		{"6 minutes old", sinkSecret, testNow.Add(-6 * time.Minute), "e1", envelope("e1", "a", 1), nil, 401},
		{"6 minutes ahead", sinkSecret, testNow.Add(6 * time.Minute), "e1", envelope("e1", "a", 1), nil, 401},
		{"garbage signature", sinkSecret, testNow, "e1", envelope("e1", "a", 1),
			[]string{"webhook-signature", "v1,Zm9v"}, 401},
		{"not JSON", sinkSecret, testNow, "e1", "hello", nil, 400},
		{"no event_id", sinkSecret, testNow, "e1", `{"sequence":1}`, nil, 400},
		{"no sequence", sinkSecret, testNow, "e1", `{"event_id":"e1"}`, nil, 400},
		{"webhook-id is not the event id", sinkSecret, testNow, "e2", envelope("e1", "a", 1), nil, 400},
		{"too large", sinkSecret, testNow, "e1", `{"event_id":"e1","pad":"` + strings.Repeat("x", 2048) + `"}`, nil, 413},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, url := newSink(t, Options{MaxBody: 1024})
			rep := deliver(t, url, tc.secret, tc.id, tc.ts, tc.body, tc.extra...)
			if rep.status != tc.status {
				t.Errorf("status %d, want %d (%s)", rep.status, tc.status, rep.body)
			}
			if s.Rejected() != 1 || s.Count() != 0 || len(s.Rejections()) != 1 {
				t.Errorf("rejected %d, count %d, rejections %q; want 1, 0, one reason", s.Rejected(), s.Count(), s.Rejections())
			}
		})
	}
	// No signature headers at all.
	s, url := newSink(t, Options{})
	if rep, err := send(t, http.MethodPost, url, envelope("e1", "a", 1)); err != nil || rep.status != 401 {
		t.Errorf("unsigned: %v %v", rep.status, err)
	}
	if rep, err := send(t, http.MethodGet, url, ""); err != nil || rep.status != 405 {
		t.Errorf("GET: %v %v", rep.status, err)
	}
	if s.Rejected() != 1 || s.Count() != 0 {
		t.Errorf("rejected %d, count %d; want 1, 0", s.Rejected(), s.Count())
	}
}

func TestWebhookSinkRotatedSecrets(t *testing.T) {
	t.Parallel()
	s, url := newSink(t, Options{Secrets: []string{sinkSecret2, sinkSecret}})
	for i, sec := range []string{sinkSecret, sinkSecret2} {
		id := "e" + strconv.Itoa(i)
		if rep := deliver(t, url, sec, id, testNow, envelope(id, "a", int64(i))); rep.status != 204 {
			t.Errorf("secret %d: status %d", i+1, rep.status)
		}
	}
	if s.Count() != 2 {
		t.Errorf("count %d, want 2", s.Count())
	}
	if _, err := New(Options{Secrets: []string{"MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}}); err == nil ||
		strings.Contains(err.Error(), "MfKQ") {
		t.Errorf("secret without prefix: err = %v", err)
	}
}

func TestWebhookSinkFaults(t *testing.T) {
	t.Parallel()
	s, url := newSink(t, Options{})
	s.Faults.Add(2, sim.Fault{Status: http.StatusServiceUnavailable, RetryAfter: 7 * time.Second})
	var statuses []int
	for i := range 3 {
		id := "e" + strconv.Itoa(i)
		rep := deliver(t, url, sinkSecret, id, testNow, envelope(id, "a", int64(i+1)))
		statuses = append(statuses, rep.status)
		if rep.status == 503 && rep.header.Get("Retry-After") != "7" {
			t.Errorf("Retry-After = %q, want 7", rep.header.Get("Retry-After"))
		}
	}
	if !slices.Equal(statuses, []int{503, 503, 204}) {
		t.Errorf("statuses %v, want 503 503 204", statuses)
	}
	// A bad signature neither uses up an injected failure nor counts as one.
	s.Faults.Add(1, sim.Fault{Status: http.StatusTooManyRequests})
	deliver(t, url, sinkSecret2, "x", testNow, envelope("x", "a", 9))
	if rep := deliver(t, url, sinkSecret, "e9", testNow, envelope("e9", "a", 9)); rep.status != 429 || rep.header.Get("Retry-After") != "" {
		t.Errorf("status %d Retry-After %q, want 429 without", rep.status, rep.header.Get("Retry-After"))
	}
	s.Gone()
	for range 2 {
		if rep := deliver(t, url, sinkSecret, "e4", testNow, envelope("e4", "a", 4)); rep.status != 410 {
			t.Errorf("after Gone: status %d, want 410", rep.status)
		}
	}
	if s.Count() != 1 || s.Failed() != 5 || s.Rejected() != 1 {
		t.Errorf("count %d, failed %d, rejected %d; want 1, 5, 1", s.Count(), s.Failed(), s.Rejected())
	}
}

func TestWebhookSinkLatency(t *testing.T) {
	t.Parallel()
	s, url := newSink(t, Options{})
	s.SetLatency(time.Hour)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	body := envelope("e1", "a", 1)
	h := stdwebhook.Headers([]stdwebhook.Secret{stdwebhook.MustParseSecret(sinkSecret)}, "e1", testNow, []byte(body))
	if _, err := sendCtx(ctx, t, http.MethodPost, url, body,
		"webhook-id", h.Get("webhook-id"), "webhook-timestamp", h.Get("webhook-timestamp"),
		"webhook-signature", h.Get("webhook-signature")); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the client to give up", err)
	}
	s.SetLatency(30 * time.Millisecond)
	start := time.Now()
	if rep := deliver(t, url, sinkSecret, "e1", testNow, body); rep.status != 204 {
		t.Fatalf("status %d", rep.status)
	}
	if el := time.Since(start); el < 30*time.Millisecond {
		t.Errorf("answered after %s, want at least the latency", el)
	}
	if s.Count() != 1 {
		t.Errorf("count %d, want 1: the abandoned request must not be recorded", s.Count())
	}
}

func TestWebhookSinkStartConcurrent(t *testing.T) {
	t.Parallel()
	s, err := New(Options{Secrets: []string{sinkSecret}})
	if err != nil {
		t.Fatal(err)
	}
	if s.URL() != "" {
		t.Errorf("URL before Start = %q", s.URL())
	}
	if err := s.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Start("127.0.0.1:0"); err == nil {
		t.Error("a second Start succeeded")
	}
	const lanes, per = 20, 10
	var wg sync.WaitGroup
	for l := range lanes {
		wg.Go(func() {
			for q := range per {
				id := fmt.Sprintf("l%d-s%d", l, q+1)
				rep, err := tryDeliver(t, s.URL(), sinkSecret, id, time.Now(), envelope(id, "lane-"+strconv.Itoa(l), int64(q+1)))
				if err != nil || rep.status != 204 {
					t.Errorf("%s: status %d, err %v", id, rep.status, err)
				}
			}
		})
	}
	wg.Wait()
	if s.Count() != lanes*per || s.Unique() != lanes*per {
		t.Errorf("count %d unique %d, want %d", s.Count(), s.Unique(), lanes*per)
	}
	for agg, seqs := range s.PerAggregate() {
		if !slices.IsSorted(seqs) || len(seqs) != per {
			t.Errorf("%s: %v", agg, seqs)
		}
	}
	s.Close()
	s.Close()
}

// The outbox's webhook publisher and this independently written sink agree on the
// signature and on what failures mean.
func TestWebhookSinkWithPublisher(t *testing.T) {
	t.Parallel()
	s, url := newSink(t, Options{Secrets: []string{sinkSecret2}})
	p, err := webhook.New(webhook.Config{
		Name: "crm", URL: url, Now: func() time.Time { return testNow },
		Secrets: []stdwebhook.Secret{stdwebhook.MustParseSecret(sinkSecret2), stdwebhook.MustParseSecret(sinkSecret)},
	})
	if err != nil {
		t.Fatal(err)
	}
	rec := outbox.Record{EventID: "ev-1", Type: outbox.OrderCreated, AggregateType: "order",
		AggregateID: "kaspi:order:1", Sequence: 1, Data: json.RawMessage(`{"ref":"r1"}`), OccurredAt: testNow}
	ctx := context.Background()
	if err := p.Publish(ctx, rec); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	s.Faults.Add(1, sim.Fault{Status: http.StatusTooManyRequests, RetryAfter: 12 * time.Second})
	var de *outbox.DeliveryError
	if err := p.Publish(ctx, rec); !errors.As(err, &de) || de.RetryAfter != 12*time.Second {
		t.Errorf("after a 429 fault: err = %v, want RetryAfter 12s", err)
	}
	s.Gone()
	if err := p.Publish(ctx, rec); !errors.As(err, &de) || !de.Disable {
		t.Errorf("after Gone: err = %v, want Disable", err)
	}
	if s.Count() != 1 || s.Rejected() != 0 || s.Deliveries()[0].EventID != "ev-1" {
		t.Errorf("count %d, rejected %d (%q)", s.Count(), s.Rejected(), s.Rejections())
	}
}
