// Package metrics holds what `ordersync run` exports on the admin listener's
// /metrics (prometheus/client_golang): the collectors, and the wrappers that feed
// them without the engine, the relay or the server knowing — a 1C client that
// times each call and follows whether 1C answers, a journal store whose claims
// count their outcomes, a cursor store that counts failed polls — and a Refresher
// that reads the gauges kept in the database (operations by status, the outbox's
// backlog, the connectors' last success) on a timer, never per scrape.
//
// Labels come from fixed sets (kinds, sources, statuses, destinations, connectors,
// endpoints, outcomes): never an order id, a key or an error text.
package metrics

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/order"
	"github.com/ordersync/ordersync/internal/outbox"
	"github.com/ordersync/ordersync/internal/server"
	"github.com/ordersync/ordersync/internal/stock"
)

const namespace = "ordersync"

// Metrics is one process's registry and its collectors. Its methods are safe for
// concurrent use.
type Metrics struct {
	reg *prometheus.Registry

	operations   *prometheus.GaugeVec   // kind, source, status
	attempts     *prometheus.CounterVec // kind, outcome
	onecDuration *prometheus.HistogramVec
	onecUp       prometheus.Gauge

	outboxPending  *prometheus.GaugeVec // destination
	outboxInFlight *prometheus.GaugeVec
	outboxDead     *prometheus.GaugeVec
	outboxLag      *prometheus.GaugeVec

	connectorLastSuccess *prometheus.GaugeVec   // connector
	connectorLastPoll    *prometheus.GaugeVec   // connector
	connectorErrors      *prometheus.CounterVec // connector

	refreshed     prometheus.Gauge
	refreshErrors *prometheus.CounterVec // what
	signins       *prometheus.CounterVec // outcome

	clockOffset prometheus.Gauge

	onec onecTracker

	inbox     atomic.Pointer[func() map[server.StatKey]uint64]
	relays    atomic.Pointer[[]func() outbox.RelayStats]
	endpoints atomic.Pointer[func() []FailingEndpoint]
}

// Buckets of ordersync_onec_request_duration_seconds: from a fast find to a create
// that waits on a busy base for its whole onec.timeout.
var onecBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}

// New returns the metrics of one process, registered with a registry of their own
// together with the Go and process collectors and ordersync_build_info{version}.
func New(version string) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	m.operations = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: namespace, Name: "operations",
		Help: "Operations in the journal by kind, source and status (pending, done, failed), as the database holds them at the last refresh.",
	}, []string{"kind", "source", "status"})
	m.attempts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "attempts_total",
		Help: "Attempts this process finished, by operation kind and outcome (done, retry, failed; interrupted: given up without a verdict).",
	}, []string{"kind", "outcome"})
	m.onecDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: namespace, Name: "onec_request_duration_seconds",
		Help:    "Duration of calls to 1C by endpoint (ping, find, create, cancel, stock) and outcome (ok, transient, unknown, permanent, auth, configuration, timeout, canceled), GET retries within a call included.",
		Buckets: onecBuckets,
	}, []string{"endpoint", "outcome"})
	m.onecUp = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: namespace, Name: "onec_up",
		Help: "1 when the last call to 1C that ended (the admin listener's ping every onec.ping_interval, or any other) was answered, 0 otherwise.",
	})
	m.outboxPending = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: namespace, Name: "outbox_pending",
		Help: "Outbox events not yet delivered, not dead and not in flight, by destination (outbox status PENDING).",
	}, []string{"destination"})
	m.outboxInFlight = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: namespace, Name: "outbox_in_flight",
		Help: "Outbox events leased to a relay now, by destination.",
	}, []string{"destination"})
	m.outboxDead = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: namespace, Name: "outbox_dead",
		Help: "Outbox events given up on (dead), by destination: each needs `ordersync outbox requeue`.",
	}, []string{"destination"})
	m.outboxLag = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: namespace, Name: "outbox_lag_seconds",
		Help: "Age of the oldest outbox event not yet delivered and not dead, by destination; 0 when there is none.",
	}, []string{"destination"})
	m.connectorLastSuccess = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: namespace, Name: "connector_last_success_timestamp_seconds",
		Help: "When an enabled connector last listed its marketplace completely (Unix time); 0 when it never has.",
	}, []string{"connector"})
	m.connectorLastPoll = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: namespace, Name: "connector_last_poll_timestamp_seconds",
		Help: "When an enabled connector last polled its marketplace, successfully or not (Unix time); 0 when it never has.",
	}, []string{"connector"})
	m.connectorErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "connector_errors_total",
		Help: "Polls of this process that failed, by connector (the error is the connector's last_error in `ordersync connectors status`).",
	}, []string{"connector"})
	m.refreshed = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: namespace, Name: "metrics_refresh_timestamp_seconds",
		Help: "When the gauges read from the database (operations, outbox, connectors) were last refreshed completely (Unix time).",
	})
	m.refreshErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "metrics_refresh_errors_total",
		Help: "Refreshes of the gauges read from the database that failed, by what was read (operations, outbox, connectors).",
	}, []string{"what"})
	m.signins = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "ui_signins_total",
		Help: "Sign-ins to the pages, by outcome: ok, failed (a wrong name or password), limited (refused unchecked after too many failures).",
	}, []string{"outcome"})
	for _, o := range []string{"ok", "failed", "limited"} {
		m.signins.WithLabelValues(o)
	}
	m.clockOffset = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: namespace, Name: "clock_offset_seconds",
		Help: "The database's clock minus this process's, as last measured (PostgreSQL: at start and every minute; 0 on SQLite, one machine). " +
			"ordersync judges settle and takeover times on the database's clock; beyond a second, check NTP on both.",
	})
	// Every kind's outcomes start at 0, so that rate() and increase() see the first.
	for _, kind := range []string{order.KindCreate, order.KindCancel, stock.KindSnapshot} {
		for _, o := range []journal.Outcome{journal.OutcomeDone, journal.OutcomeRetry, journal.OutcomeFailed, journal.OutcomeInterrupted} {
			m.attempts.WithLabelValues(kind, string(o))
		}
	}
	for _, what := range []string{"operations", "outbox", "connectors"} {
		m.refreshErrors.WithLabelValues(what)
	}
	buildInfo := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: namespace, Name: "build_info",
		Help: "Always 1; its labels say which ordersync runs.",
	}, []string{"version"})
	buildInfo.WithLabelValues(version).Set(1)

	m.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		buildInfo, m.operations, m.attempts, m.onecDuration, m.onecUp,
		m.outboxPending, m.outboxInFlight, m.outboxDead, m.outboxLag,
		m.connectorLastSuccess, m.connectorLastPoll, m.connectorErrors,
		m.refreshed, m.refreshErrors, m.clockOffset, m.signins,
		inboxCollector{m}, relayCollector{m}, endpointCollector{m},
	)
	return m
}

// Registry is what /metrics gathers.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// SignIn counts one sign-in to the pages by its outcome (ok, failed, limited).
func (m *Metrics) SignIn(outcome string) { m.signins.WithLabelValues(outcome).Inc() }

// SetClockOffset sets ordersync_clock_offset_seconds: the database's clock minus the
// process's (postgres.DB.ClockOffset), each time it is measured.
func (m *Metrics) SetClockOffset(d time.Duration) { m.clockOffset.Set(d.Seconds()) }

// FailingEndpoint is a 1C endpoint whose last answer was a configuration or
// authentication failure (engine.Engine.Broken).
type FailingEndpoint struct {
	Path  string // below onec.base_url, e.g. /orders/cancel
	Class string // configuration or auth
}

// SetFailingEndpoints makes ordersync_onec_endpoint_failing{endpoint,class} read the
// engine's failing endpoints at each scrape: 1 for each, none when every endpoint
// works.
func (m *Metrics) SetFailingEndpoints(f func() []FailingEndpoint) { m.endpoints.Store(&f) }

// SetInbox makes ordersync_inbox_deliveries_total{source,outcome} read the webhook
// server's counters (server.Server.Stats) at each scrape; nil stops it.
func (m *Metrics) SetInbox(stats func() map[server.StatKey]uint64) {
	if stats == nil {
		m.inbox.Store(nil)
		return
	}
	m.inbox.Store(&stats)
}

// AddRelay makes ordersync_outbox_deliveries_total{outcome} count the relay's
// deliveries too (outbox.Relay.Stats, read at each scrape).
func (m *Metrics) AddRelay(stats func() outbox.RelayStats) {
	for {
		old := m.relays.Load()
		var fs []func() outbox.RelayStats
		if old != nil {
			fs = append(fs, *old...)
		}
		fs = append(fs, stats)
		if m.relays.CompareAndSwap(old, &fs) {
			return
		}
	}
}

var inboxDesc = prometheus.NewDesc(namespace+"_inbox_deliveries_total",
	"Webhook deliveries the HTTP server answered, by sender (source; unknown for no configured sender) and outcome: "+
		"processed, duplicate, conflict, in_progress, ignored, ping, rejected, error.",
	[]string{"source", "outcome"}, nil)

// inboxCollector reads the server's counters, summed over their reasons.
type inboxCollector struct{ m *Metrics }

func (c inboxCollector) Describe(ch chan<- *prometheus.Desc) { ch <- inboxDesc }

func (c inboxCollector) Collect(ch chan<- prometheus.Metric) {
	f := c.m.inbox.Load()
	if f == nil {
		return
	}
	type key struct{ source, outcome string }
	sums := map[key]uint64{}
	for k, n := range (*f)() {
		sums[key{k.Source, k.Outcome}] += n
	}
	for k, n := range sums {
		ch <- prometheus.MustNewConstMetric(inboxDesc, prometheus.CounterValue, float64(n), k.source, k.outcome)
	}
}

var endpointDesc = prometheus.NewDesc(namespace+"_onec_endpoint_failing",
	"1 for each 1C endpoint (path below onec.base_url) whose last answer was a configuration problem (the publication does not serve it) "+
		"or refused credentials (class auth): the operations that need it wait, the others go on. Absent when every endpoint works.",
	[]string{"endpoint", "class"}, nil)

// endpointCollector reports the engine's failing endpoints.
type endpointCollector struct{ m *Metrics }

func (c endpointCollector) Describe(ch chan<- *prometheus.Desc) { ch <- endpointDesc }

func (c endpointCollector) Collect(ch chan<- prometheus.Metric) {
	f := c.m.endpoints.Load()
	if f == nil {
		return
	}
	for _, e := range (*f)() {
		ch <- prometheus.MustNewConstMetric(endpointDesc, prometheus.GaugeValue, 1, e.Path, e.Class)
	}
}

var relayDesc = prometheus.NewDesc(namespace+"_outbox_deliveries_total",
	"Outbox deliveries this process's relays finished, by outcome: sent, retried (failed, tried again later), dead.",
	[]string{"outcome"}, nil)

// relayCollector sums the relays' counters.
type relayCollector struct{ m *Metrics }

func (c relayCollector) Describe(ch chan<- *prometheus.Desc) { ch <- relayDesc }

func (c relayCollector) Collect(ch chan<- prometheus.Metric) {
	fs := c.m.relays.Load()
	if fs == nil {
		return
	}
	var sent, retried, dead int64
	for _, f := range *fs {
		st := f()
		sent, retried, dead = sent+st.Sent, retried+st.Retried, dead+st.Dead
	}
	for _, v := range []struct {
		outcome string
		n       int64
	}{{"sent", sent}, {"retried", retried}, {"dead", dead}} {
		ch <- prometheus.MustNewConstMetric(relayDesc, prometheus.CounterValue, float64(v.n), v.outcome)
	}
}
