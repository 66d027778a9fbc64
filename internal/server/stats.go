package server

import "sync"

// StatKey names one counter: the sender, the outcome (processed, duplicate,
// conflict, in_progress, ignored, ping, rejected, error) and, for what went wrong
// or was skipped, a fixed reason code (bad_signature, body_too_large, …).
//
// Every label comes from a fixed set: a request for an unknown source counts under
// source "unknown", so strangers cannot grow the set of counters.
type StatKey struct {
	Source  string
	Outcome string
	Reason  string
}

// sourceUnknown is the source of requests for no configured sender.
const sourceUnknown = "unknown"

type stats struct {
	mu sync.Mutex
	n  map[StatKey]uint64
}

func (s *stats) init() { s.n = map[StatKey]uint64{} }

func (s *stats) add(source, outcome, reason string) {
	s.mu.Lock()
	s.n[StatKey{Source: source, Outcome: outcome, Reason: reason}]++
	s.mu.Unlock()
}

// Stats returns a copy of the request counters since New.
func (s *Server) Stats() map[StatKey]uint64 {
	s.stats.mu.Lock()
	defer s.stats.mu.Unlock()
	out := make(map[StatKey]uint64, len(s.stats.n))
	for k, v := range s.stats.n {
		out[k] = v
	}
	return out
}

// Panics is the number of webhook deliveries whose handler panicked since New: each
// was answered 500, logged with its event id and counted in Stats under reason
// "panic", and the server went on.
func (s *Server) Panics() int64 { return s.panics.Load() }
