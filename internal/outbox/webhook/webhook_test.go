package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ordersync/ordersync/internal/outbox"
	"github.com/ordersync/ordersync/internal/stdwebhook"
)

var (
	testNow    = time.Date(2026, 9, 16, 5, 0, 0, 0, time.UTC)
	testSecret = stdwebhook.MustParseSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	newSecret  = stdwebhook.NewSecret([]byte("new-secret-for-ordersync-tests!!"))
)

func clock() time.Time { return testNow }

func testRecord() outbox.Record {
	return outbox.Record{
		ID:            7,
		EventID:       "0193f1c2-8e4b-7a1d-9c2e-5b6a7d8e9f01",
		Destination:   "crm",
		Type:          outbox.OrderCreated,
		AggregateType: "order",
		AggregateID:   "kaspi:order:512344101",
		Sequence:      3,
		Data:          json.RawMessage(`{"ref":"8f0c","number":"ЗК-000123","total":3000.00}`),
		OccurredAt:    time.Date(2026, 9, 16, 10, 0, 0, 0, time.FixedZone("Almaty", 5*3600)),
	}
}

// newPublisher returns a publisher to url with the test clock and secret.
func newPublisher(t testing.TB, url string, mod ...func(*Config)) *Publisher {
	t.Helper()
	cfg := Config{Name: "crm", URL: url, Secrets: []stdwebhook.Secret{testSecret}, Now: clock}
	for _, m := range mod {
		m(&cfg)
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return p
}

func TestPublishSignedEnvelope(t *testing.T) {
	t.Parallel()
	type got struct {
		id, contentType, userAgent, timestamp string
		verifyErr                             error
		payload                               map[string]json.RawMessage
	}
	gotc := make(chan got, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		v := &stdwebhook.Verifier{Secrets: []stdwebhook.Secret{testSecret}, Now: clock}
		id, err := v.Verify(r.Header, raw)
		var payload map[string]json.RawMessage
		_ = json.Unmarshal(raw, &payload)
		gotc <- got{id, r.Header.Get("Content-Type"), r.Header.Get("User-Agent"),
			r.Header.Get("webhook-timestamp"), err, payload}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()

	rec := testRecord()
	if err := newPublisher(t, srv.URL+"/hooks/ordersync").Publish(context.Background(), rec); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	g := <-gotc
	if g.verifyErr != nil {
		t.Fatalf("receiver could not verify the signature: %v", g.verifyErr)
	}
	if g.id != rec.EventID {
		t.Errorf("webhook-id = %q, want the event id %q", g.id, rec.EventID)
	}
	if g.timestamp != "1789534800" {
		t.Errorf("webhook-timestamp = %q, want now in unix seconds (1789534800)", g.timestamp)
	}
	if g.contentType != "application/json" || g.userAgent != "ordersync" {
		t.Errorf("Content-Type %q, User-Agent %q", g.contentType, g.userAgent)
	}
	want := map[string]string{
		"event_id":     `"` + rec.EventID + `"`,
		"type":         `"order.created"`,
		"aggregate_id": `"kaspi:order:512344101"`,
		"sequence":     `3`,
		"occurred_at":  `"2026-09-16T05:00:00Z"`,
		"data":         string(rec.Data),
	}
	for k, w := range want {
		if string(g.payload[k]) != w {
			t.Errorf("body %s = %s, want %s", k, g.payload[k], w)
		}
	}
}

func TestPublishAnswers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		status     int
		header     map[string]string
		body       string
		wantNil    bool
		retryAfter time.Duration // want a DeliveryError with it
		disable    bool          // want a DeliveryError with Disable
		wantText   []string      // in the error's text
	}{
		{name: "200", status: 200, wantNil: true},
		{name: "201 with body", status: 201, body: `{"ok":true}`, wantNil: true},
		{name: "202", status: 202, wantNil: true},
		{name: "204", status: 204, wantNil: true},
		{name: "500", status: 500, body: "database\nis down\n",
			wantText: []string{"webhook crm", "500 Internal Server Error", `"database is down"`}},
		{name: "400", status: 400, body: `{"error":"bad event"}`,
			wantText: []string{"webhook crm", "400 Bad Request", `bad event`}},
		{name: "429 Retry-After seconds", status: 429, header: map[string]string{"Retry-After": "30"},
			retryAfter: 30 * time.Second, wantText: []string{"webhook crm", "429 Too Many Requests", "retry after 30s"}},
		{name: "429 Retry-After date", status: 429,
			header:     map[string]string{"Retry-After": testNow.Add(90 * time.Second).Format(http.TimeFormat)},
			retryAfter: 90 * time.Second, wantText: []string{"429", "retry after 1m30s"}},
		{name: "503 Retry-After seconds", status: 503, header: map[string]string{"Retry-After": "120"},
			retryAfter: 2 * time.Minute, wantText: []string{"webhook crm", "503 Service Unavailable"}},
		{name: "503 Retry-After far off", status: 503, header: map[string]string{"Retry-After": "99999999999999999999999"},
			retryAfter: MaxRetryAfter},
		{name: "503 without Retry-After", status: 503, wantText: []string{"webhook crm", "503 Service Unavailable"}},
		{name: "429 with a garbage Retry-After", status: 429, header: map[string]string{"Retry-After": "soon"},
			wantText: []string{"429"}},
		{name: "429 Retry-After date in the past", status: 429,
			header:   map[string]string{"Retry-After": testNow.Add(-time.Hour).Format(http.TimeFormat)},
			wantText: []string{"429"}},
		{name: "410", status: 410, body: "this hook was deleted", disable: true,
			wantText: []string{"webhook crm: answered 410 Gone: endpoint disabled"}},
		{name: "long body", status: 502, body: strings.Repeat("<html>", 10000),
			wantText: []string{"502 Bad Gateway", "<html><html>", "…"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var calls atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				calls.Add(1)
				_, _ = io.Copy(io.Discard, r.Body)
				for k, v := range tc.header {
					w.Header().Set(k, v)
				}
				w.WriteHeader(tc.status)
				_, _ = io.WriteString(w, tc.body)
			}))
			defer srv.Close()

			err := newPublisher(t, srv.URL).Publish(context.Background(), testRecord())
			if n := calls.Load(); n != 1 {
				t.Errorf("receiver got %d requests, want 1", n)
			}
			if tc.wantNil {
				if err != nil {
					t.Fatalf("err = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatal("err = nil, want an error")
			}
			var de *outbox.DeliveryError
			isDE := errors.As(err, &de)
			switch {
			case tc.retryAfter > 0:
				if !isDE || de.RetryAfter != tc.retryAfter || de.Dead || de.Disable {
					t.Errorf("err = %#v, want a DeliveryError with RetryAfter %s", err, tc.retryAfter)
				}
			case tc.disable:
				if !isDE || !de.Disable || de.RetryAfter != 0 {
					t.Errorf("err = %#v, want a DeliveryError with Disable", err)
				}
			default:
				if isDE {
					t.Errorf("err = %#v, want a plain error (backoff)", err)
				}
			}
			var se *StatusError
			if !errors.As(err, &se) || se.StatusCode != tc.status {
				t.Errorf("err = %v, want a StatusError with %d", err, tc.status)
			}
			for _, s := range tc.wantText {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err, s)
				}
			}
			if len(err.Error()) > 400 {
				t.Errorf("error is %d bytes long, want a short snippet", len(err.Error()))
			}
		})
	}
}

func TestPublishDoesNotFollowRedirects(t *testing.T) {
	t.Parallel()
	var moved atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		moved.Add(1)
	}))
	defer target.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+"/new?token=abc", http.StatusTemporaryRedirect)
	}))
	defer srv.Close()

	err := newPublisher(t, srv.URL).Publish(context.Background(), testRecord())
	var se *StatusError
	if !errors.As(err, &se) || se.StatusCode != http.StatusTemporaryRedirect {
		t.Fatalf("err = %v, want a StatusError 307", err)
	}
	if moved.Load() != 0 {
		t.Error("the redirect was followed")
	}
	if !strings.Contains(err.Error(), target.URL+"/new") || strings.Contains(err.Error(), "token=abc") {
		t.Errorf("error %q: want the new location without its query", err)
	}
}

// stallServer answers nothing until the client goes away or the test ends. Reading
// the body lets the server notice the client's close.
func stallServer(t *testing.T) *httptest.Server {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) }) // runs first
	return srv
}

func TestPublishTimeout(t *testing.T) {
	t.Parallel()
	srv := stallServer(t)

	p := newPublisher(t, srv.URL+"/hooks?token=s3cr3t", func(c *Config) { c.Timeout = 50 * time.Millisecond })
	start := time.Now()
	err := p.Publish(context.Background(), testRecord())
	if err == nil {
		t.Fatal("err = nil, want a timeout")
	}
	if time.Since(start) > 5*time.Second {
		t.Errorf("Publish took %s with a 50ms timeout", time.Since(start))
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v, want it to wrap context.DeadlineExceeded", err)
	}
	var de *outbox.DeliveryError
	if errors.As(err, &de) {
		t.Errorf("err = %#v, want a plain error (backoff)", err)
	}
	for _, s := range []string{"webhook crm", srv.URL + "/hooks", "no answer within 50ms"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not contain %q", err, s)
		}
	}
	if strings.Contains(err.Error(), "s3cr3t") {
		t.Errorf("error %q shows the URL's token", err)
	}
}

func TestPublishCancelled(t *testing.T) {
	t.Parallel()
	srv := stallServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, cancel)
	err := newPublisher(t, srv.URL).Publish(ctx, testRecord())
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

func TestPublishConnectionRefused(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	addr := srv.Listener.Addr().String()
	srv.Close() // nothing listens there now

	p := newPublisher(t, "http://user:pa55word@"+addr+"/hooks?token=s3cr3t")
	err := p.Publish(context.Background(), testRecord())
	if err == nil {
		t.Fatal("err = nil, want a connection error")
	}
	if !strings.Contains(err.Error(), "webhook crm: POST http://"+addr+"/hooks:") {
		t.Errorf("error %q does not name the destination and URL", err)
	}
	for _, secret := range []string{"pa55word", "s3cr3t", testSecret.Encode()[6:]} {
		if strings.Contains(err.Error(), secret) {
			t.Errorf("error %q shows a secret", err)
		}
	}
}

func TestPublishRotation(t *testing.T) {
	t.Parallel()
	sigs := make(chan string, 1)
	verified := make(chan map[string]error, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		sigs <- r.Header.Get("webhook-signature")
		res := map[string]error{}
		for name, s := range map[string]stdwebhook.Secret{"new": newSecret, "old": testSecret} {
			v := &stdwebhook.Verifier{Secrets: []stdwebhook.Secret{s}, Now: clock}
			_, res[name] = v.Verify(r.Header, raw)
		}
		verified <- res
	}))
	defer srv.Close()

	p := newPublisher(t, srv.URL, func(c *Config) { c.Secrets = []stdwebhook.Secret{newSecret, testSecret} })
	if err := p.Publish(context.Background(), testRecord()); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	if entries := strings.Fields(<-sigs); len(entries) != 2 {
		t.Fatalf("webhook-signature has %d entries, want 2: %q", len(entries), entries)
	}
	for name, err := range <-verified {
		if err != nil {
			t.Errorf("a receiver on the %s secret only: %v", name, err)
		}
	}
}

func TestPublishBadRecord(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { calls.Add(1) }))
	defer srv.Close()
	p := newPublisher(t, srv.URL)

	noID := testRecord()
	noID.EventID = ""
	badData := testRecord()
	badData.Data = json.RawMessage(`{"unterminated`)
	for name, r := range map[string]outbox.Record{"no event id": noID, "invalid data": badData} {
		var de *outbox.DeliveryError
		if err := p.Publish(context.Background(), r); !errors.As(err, &de) || !de.Dead {
			t.Errorf("%s: err = %v, want a DeliveryError with Dead", name, err)
		}
	}
	if calls.Load() != 0 {
		t.Errorf("the receiver got %d requests, want none", calls.Load())
	}
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	ok := []stdwebhook.Secret{testSecret}
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"no url", Config{Name: "crm", Secrets: ok}, "webhook crm: url is required"},
		{"bad url", Config{Name: "crm", URL: "http://a b:x@host\x7f/", Secrets: ok}, "not a valid URL"},
		{"ftp", Config{Name: "crm", URL: "ftp://host/x", Secrets: ok}, "scheme must be http or https"},
		{"no host", Config{Name: "crm", URL: "http:///x", Secrets: ok}, "has no host"},
		{"no secret", Config{Name: "crm", URL: "https://host/x"}, "at least one secret"},
		{"zero secret", Config{Name: "crm", URL: "https://host/x", Secrets: []stdwebhook.Secret{{}}}, "secret 1 is empty"},
		{"negative timeout", Config{Name: "crm", URL: "https://host/x", Secrets: ok, Timeout: -time.Second}, "timeout"},
		{"name defaults to host", Config{URL: "https://crm.example.kz/x", Secrets: ok, Timeout: -1}, "webhook crm.example.kz:"},
	} {
		_, err := New(tc.cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.name, err, tc.want)
		}
	}
	p, err := New(Config{URL: "https://crm.example.kz/hooks", Secrets: ok})
	if err != nil {
		t.Fatal(err)
	}
	if p.timeout != DefaultTimeout || p.userAgent != DefaultUserAgent || p.Name() != "crm.example.kz" {
		t.Errorf("defaults: timeout %s, user agent %q, name %q", p.timeout, p.userAgent, p.Name())
	}
}

// BenchmarkPublish measures deliveries to a local HTTP sink that verifies every
// signature and answers 204: the relay's "local HTTP sink" figure without the
// database. "serial" is one lane; "parallel" is GOMAXPROCS×4 lanes at once.
func BenchmarkPublish(b *testing.B) {
	v := &stdwebhook.Verifier{Secrets: []stdwebhook.Secret{testSecret}}
	var bad atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		if _, err := v.Verify(r.Header, raw); err != nil {
			bad.Add(1)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	p := newPublisher(b, srv.URL, func(c *Config) { c.Now = nil })
	rec := testRecord()
	ctx := context.Background()

	report := func(b *testing.B) {
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
		if n := bad.Load(); n > 0 {
			b.Fatalf("%d deliveries failed verification", n)
		}
	}
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := p.Publish(ctx, rec); err != nil {
				b.Fatal(err)
			}
		}
		report(b)
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.SetParallelism(4)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := p.Publish(ctx, rec); err != nil {
					b.Error(err)
					return
				}
			}
		})
		report(b)
	})
}
