package webhooksim

import (
	"cmp"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ordersync/ordersync/internal/sim"
)

// Options configure a Sink.
type Options struct {
	// Secrets are the "whsec_…" secrets a delivery may be signed with, any one
	// matching being enough. Empty: signatures are not checked at all.
	Secrets []string
	// Tolerance is how far webhook-timestamp may be from Now either way; default 5m.
	Tolerance time.Duration
	// Now is the clock; default time.Now.
	Now func() time.Time
	// MaxBody bounds a request body; default 1 MiB (413 beyond).
	MaxBody int64
}

// Delivery is one delivery the sink accepted.
type Delivery struct {
	WebhookID   string    `json:"webhook_id"` // the webhook-id header
	EventID     string    `json:"event_id"`
	Type        string    `json:"type"`
	AggregateID string    `json:"aggregate_id"`
	Sequence    int64     `json:"sequence"`
	Body        []byte    `json:"body"` // as received
	ReceivedAt  time.Time `json:"received_at"`
}

// sinkEnvelope is what the sink reads of a body: the outbox envelope, declared here
// independently of internal/outbox.
type sinkEnvelope struct {
	EventID     string          `json:"event_id"`
	Type        string          `json:"type"`
	AggregateID string          `json:"aggregate_id"`
	Sequence    *int64          `json:"sequence"`
	OccurredAt  string          `json:"occurred_at"`
	Data        json.RawMessage `json:"data"`
}

// Sink is a webhook receiver for tests and the demo: it verifies Standard
// Webhooks signatures on the raw body, records every delivery it accepts in arrival
// order, and fails on demand. Any path is accepted; only POST is. It is an
// http.Handler and safe for concurrent use.
//
// A request is handled in this order: latency; body limit (413); signature (401,
// counted by Rejected); a fault, Gone's 410 included (counted by Failed);
// envelope (400, counted by Rejected: invalid JSON, no event_id or sequence, or an
// event_id other than webhook-id); then recorded and answered 204.
type Sink struct {
	// Faults answer signed deliveries instead of the sink: Status with a plain-text
	// body (Body, default "injected failure") and RetryAfter as a Retry-After header
	// in seconds. A fault has no Op: every delivery is the same request.
	Faults *sim.Faults

	keys      [][]byte
	tolerance time.Duration
	now       func() time.Time
	maxBody   int64

	closed    chan struct{}
	closeOnce sync.Once
	server    sim.Server

	mu          sync.Mutex
	deliveries  []Delivery
	seen        map[string]bool
	rejected    int
	failed      int
	latency     time.Duration
	lastRejects []string
}

// New returns a sink; it serves nothing until Start, or until it is
// mounted as an http.Handler. An invalid secret is an error that does not repeat it.
func New(opts Options) (*Sink, error) {
	s := &Sink{
		Faults:    sim.NewFaults(checkFault),
		tolerance: opts.Tolerance,
		now:       opts.Now,
		maxBody:   opts.MaxBody,
		closed:    make(chan struct{}),
		seen:      map[string]bool{},
	}
	for i, sec := range opts.Secrets {
		k, err := sinkKey(sec)
		if err != nil {
			return nil, fmt.Errorf("sim: webhook sink: secret %d: %w", i+1, err)
		}
		s.keys = append(s.keys, k)
	}
	if s.tolerance <= 0 {
		s.tolerance = 5 * time.Minute
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.maxBody <= 0 {
		s.maxBody = 1 << 20
	}
	return s, nil
}

func sinkKey(secret string) ([]byte, error) {
	enc, ok := strings.CutPrefix(strings.TrimSpace(secret), "whsec_")
	if !ok {
		return nil, errors.New(`does not start with "whsec_"`)
	}
	k, err := base64.StdEncoding.DecodeString(enc)
	if err != nil || len(k) == 0 {
		return nil, errors.New(`is not base64 after "whsec_"`)
	}
	return k, nil
}

// Start listens on addr (":0" picks a port) and serves in the background.
func (s *Sink) Start(addr string) error {
	return s.server.Start("webhook sink", addr, s, nil)
}

// URL is where to send deliveries after Start, "" before.
func (s *Sink) URL() string {
	return s.server.URL("/webhooks")
}

// Close ends latency waits and stops the server started by Start. It is safe to
// call twice and before Start.
func (s *Sink) Close() {
	s.closeOnce.Do(func() { close(s.closed) })
	s.server.Close()
}

// Gone answers every signed delivery 410 Gone from now on: the faults queued
// before are dropped, and a fault 410 that never runs out takes their place.
func (s *Sink) Gone() {
	s.Faults.Clear()
	s.Faults.Add(sim.Forever, sim.Fault{Status: http.StatusGone, Body: "endpoint gone"})
}

// checkFault refuses what a sink's fault cannot be.
func checkFault(f sim.Fault) error {
	switch {
	case f.Status < 400:
		return fmt.Errorf("sim: webhook sink: fault status %d is not an error status", f.Status)
	case f.Op != "" || f.ExternalID != "" || f.Kind != "" || f.Delay != 0 || f.Hold != 0:
		return fmt.Errorf("sim: webhook sink: a fault is a status (and After, RetryAfter, Body) only")
	}
	return nil
}

// SetLatency delays every later request by d before it is handled; a client that
// gives up during the delay leaves nothing recorded.
func (s *Sink) SetLatency(d time.Duration) {
	s.mu.Lock()
	s.latency = d
	s.mu.Unlock()
}

// Deliveries returns a copy of the accepted deliveries, in arrival order.
func (s *Sink) Deliveries() []Delivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.Clone(s.deliveries)
	for i := range out {
		out[i].Body = slices.Clone(out[i].Body)
	}
	return out
}

// Count is the number of accepted deliveries, duplicates included.
func (s *Sink) Count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.deliveries)
}

// Unique is the number of distinct event ids accepted.
func (s *Sink) Unique() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.seen)
}

// PerAggregate returns, per aggregate id, the sequences accepted in arrival order
// (duplicates included).
func (s *Sink) PerAggregate() map[string][]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string][]int64{}
	for _, d := range s.deliveries {
		out[d.AggregateID] = append(out[d.AggregateID], d.Sequence)
	}
	return out
}

// Rejected is the number of requests refused for their signature (401), their size
// (413) or their envelope (400).
func (s *Sink) Rejected() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rejected
}

// Rejections returns the reasons of the last few rejections, oldest first.
func (s *Sink) Rejections() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.lastRejects)
}

// Failed is the number of signed deliveries answered with an injected failure or
// 410 Gone.
func (s *Sink) Failed() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failed
}

func (s *Sink) reject(w http.ResponseWriter, status int, reason string) {
	s.mu.Lock()
	s.rejected++
	s.lastRejects = append(s.lastRejects, reason)
	if n := len(s.lastRejects); n > 16 {
		s.lastRejects = slices.Delete(s.lastRejects, 0, n-16)
	}
	s.mu.Unlock()
	http.Error(w, reason, status)
}

func (s *Sink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "only POST", http.StatusMethodNotAllowed)
		return
	}
	s.mu.Lock()
	latency := s.latency
	s.mu.Unlock()
	if latency > 0 {
		t := time.NewTimer(latency)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		case <-s.closed:
			t.Stop()
			return
		}
	}

	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.maxBody))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			s.reject(w, http.StatusRequestEntityTooLarge, "body too large")
			return
		}
		return // the client went away
	}

	if len(s.keys) > 0 {
		if reason := s.verify(r.Header, body); reason != "" {
			s.reject(w, http.StatusUnauthorized, reason)
			return
		}
	}

	if f, ok := s.Faults.Take(func(sim.Fault) bool { return true }); ok {
		s.mu.Lock()
		s.failed++
		s.mu.Unlock()
		if v, ok := f.RetryAfterSeconds(); ok {
			w.Header().Set("Retry-After", v)
		}
		http.Error(w, cmp.Or(f.Body, "injected failure"), f.Status)
		return
	}

	var env sinkEnvelope
	if err := json.Unmarshal(body, &env); err != nil {
		s.reject(w, http.StatusBadRequest, "body is not a JSON object")
		return
	}
	webhookID := r.Header.Get("webhook-id")
	switch {
	case env.EventID == "":
		s.reject(w, http.StatusBadRequest, "event_id is missing")
		return
	case env.Sequence == nil:
		s.reject(w, http.StatusBadRequest, "sequence is missing")
		return
	case webhookID != "" && webhookID != env.EventID:
		s.reject(w, http.StatusBadRequest, "webhook-id differs from event_id")
		return
	}

	s.mu.Lock()
	s.deliveries = append(s.deliveries, Delivery{
		WebhookID: webhookID, EventID: env.EventID, Type: env.Type, AggregateID: env.AggregateID,
		Sequence: *env.Sequence, Body: body, ReceivedAt: s.now(),
	})
	s.seen[env.EventID] = true
	s.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// verify checks a Standard Webhooks signature on the raw body and returns why it
// fails, or "" when it holds.
func (s *Sink) verify(h http.Header, body []byte) string {
	id, ts := h.Get("webhook-id"), h.Get("webhook-timestamp")
	sig := strings.Join(h.Values("webhook-signature"), " ")
	if id == "" || ts == "" || sig == "" {
		return "missing webhook-id, webhook-timestamp or webhook-signature"
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return "webhook-timestamp is not unix seconds"
	}
	if d := s.now().Sub(time.Unix(sec, 0)); d > s.tolerance || d < -s.tolerance {
		return "webhook-timestamp outside tolerance"
	}
	signed := []byte(id + "." + ts + ".")
	signed = append(signed, body...)
	for _, entry := range strings.Fields(sig) {
		enc, ok := strings.CutPrefix(entry, "v1,")
		if !ok {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(enc)
		if err != nil {
			continue
		}
		for _, k := range s.keys {
			m := hmac.New(sha256.New, k)
			m.Write(signed)
			if hmac.Equal(got, m.Sum(nil)) {
				return ""
			}
		}
	}
	return "no matching signature"
}
