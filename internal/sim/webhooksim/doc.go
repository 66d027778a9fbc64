// Package webhooksim is a webhook receiver for tests and the demo: it verifies
// Standard Webhooks signatures, records every delivery, and fails on demand
// (Sink.Faults).
package webhooksim
