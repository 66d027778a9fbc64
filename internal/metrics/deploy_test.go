package metrics

import (
	"context"
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.yaml.in/yaml/v3"

	"github.com/ordersync/ordersync/connectors"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/order"
	"github.com/ordersync/ordersync/internal/outbox"
	"github.com/ordersync/ordersync/internal/server"
)

const (
	rulesFile     = "../../deploy/prometheus/ordersync.rules.yml"
	dashboardFile = "../../deploy/grafana/ordersync.json"
)

// metricName finds the metric names a PromQL expression uses: ours, Go's and the
// process's (PromQL functions and label names never start so).
var metricName = regexp.MustCompile(`\b(?:ordersync|go|process)_[a-zA-Z0-9_]+\b`)

// exported returns the names of every family the registry exports once each
// collector has a series, with the names PromQL gives a histogram's parts.
func exported(t *testing.T) map[string]bool {
	t.Helper()
	names, _ := populated(t)
	return names
}

// populated returns metrics with a series in each collector, and their names.
func populated(t *testing.T) (map[string]bool, *Metrics) {
	t.Helper()
	m := New("test")
	ctx := context.Background()
	m.observe(ctx, "ping", time.Now(), nil)
	m.InitConnectors("kaspi")
	m.SetInbox(func() map[server.StatKey]uint64 {
		return map[server.StatKey]uint64{{Source: "site", Outcome: "processed"}: 1}
	})
	m.AddRelay(func() outbox.RelayStats { return outbox.RelayStats{Sent: 1} })
	m.SetFailingEndpoints(func() []FailingEndpoint { return []FailingEndpoint{{Path: "/orders/cancel", Class: "configuration"}} })
	now := time.Now()
	r := NewRefresher(m, Sources{
		Journal:    fakeCounter{{Kind: order.KindCreate, Source: "site", Status: journal.StatusDone, Operations: 1}},
		Outbox:     fakeOutbox{st: []outbox.DestinationStatus{{Destination: "crm", Pending: 1}}},
		Cursors:    fakeCursors{cs: []connectors.Cursor{{Connector: "kaspi", LastSuccessAt: &now, LastPollAt: &now}}},
		Connectors: []string{"kaspi"},
	}, nil)
	if err := r.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, f := range fams {
		names[f.GetName()] = true
		if f.GetType().String() == "HISTOGRAM" {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				names[f.GetName()+s] = true
			}
		}
	}
	return names, m
}

func TestExportedNamesFollowConventions(t *testing.T) {
	t.Parallel()
	names, m := populated(t)
	// promtool check metrics' rules: units, _total on counters only, help texts.
	problems, err := testutil.GatherAndLint(m.Registry())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		if strings.HasPrefix(p.Metric, "ordersync_") {
			t.Errorf("%s: %s", p.Metric, p.Text)
		}
	}
	for name := range names {
		if !strings.HasPrefix(name, "ordersync_") {
			continue
		}
		if !regexp.MustCompile(`^ordersync_[a-z0-9_]+$`).MatchString(name) {
			t.Errorf("%s: not snake case", name)
		}
	}
	// The names the issue asks for, and the collectors it names.
	for _, name := range []string{
		"ordersync_operations", "ordersync_attempts_total", "ordersync_onec_request_duration_seconds_bucket",
		"ordersync_onec_up", "ordersync_outbox_pending", "ordersync_outbox_dead", "ordersync_outbox_lag_seconds",
		"ordersync_inbox_deliveries_total", "ordersync_connector_last_success_timestamp_seconds",
		"ordersync_connector_errors_total", "ordersync_build_info", "ordersync_clock_offset_seconds",
		"ordersync_onec_endpoint_failing",
		"go_goroutines", "process_cpu_seconds_total",
	} {
		if !names[name] {
			t.Errorf("%s is not exported", name)
		}
	}
}

// Every metric the example alert rules name is exported, and the rules are
// well-formed: each alert has an expression, a severity, a summary and a
// description, and the alerts the runbook relies on are there.
func TestAlertRulesNameExportedMetrics(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Groups []struct {
			Name  string `yaml:"name"`
			Rules []struct {
				Alert       string            `yaml:"alert"`
				Expr        string            `yaml:"expr"`
				For         string            `yaml:"for"`
				Labels      map[string]string `yaml:"labels"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	if err := dec.Decode(&file); err != nil {
		t.Fatalf("%s: %v", rulesFile, err)
	}
	names := exported(t)
	var alerts []string
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			alerts = append(alerts, r.Alert)
			if r.Alert == "" || strings.TrimSpace(r.Expr) == "" {
				t.Errorf("%s: a rule without alert or expr: %+v", rulesFile, r)
			}
			if r.For != "" {
				if _, err := time.ParseDuration(r.For); err != nil {
					t.Errorf("%s: %s: for: %v", rulesFile, r.Alert, err)
				}
			}
			if s := r.Labels["severity"]; !slices.Contains([]string{"critical", "warning", "info"}, s) {
				t.Errorf("%s: %s: severity %q, want critical, warning or info", rulesFile, r.Alert, s)
			}
			if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("%s: %s: wants a summary and a description", rulesFile, r.Alert)
			}
			used := metricName.FindAllString(r.Expr, -1)
			if len(used) == 0 {
				t.Errorf("%s: %s names no ordersync metric: %s", rulesFile, r.Alert, r.Expr)
			}
			for _, n := range used {
				if !names[n] {
					t.Errorf("%s: %s uses %s, which ordersync does not export", rulesFile, r.Alert, n)
				}
			}
			if strings.Count(r.Expr, "(") != strings.Count(r.Expr, ")") {
				t.Errorf("%s: %s: unbalanced parentheses: %s", rulesFile, r.Alert, r.Expr)
			}
		}
	}
	for _, want := range []string{"OrdersyncOneCDown", "OrdersyncFailedOperationsRising", "OrdersyncOutboxLag",
		"OrdersyncOutboxDeadEvents", "OrdersyncConnectorSilent"} {
		if !slices.Contains(alerts, want) {
			t.Errorf("%s has no alert %s", rulesFile, want)
		}
	}
}

// Every metric the Grafana dashboard queries is exported, and each panel queries
// something.
func TestDashboardNamesExportedMetrics(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Title  string `json:"title"`
		UID    string `json:"uid"`
		Panels []struct {
			Title   string `json:"title"`
			Type    string `json:"type"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Name       string `json:"name"`
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	if dash.Title == "" || dash.UID == "" || len(dash.Panels) == 0 {
		t.Fatalf("%s: no title, uid or panels", dashboardFile)
	}
	names := exported(t)
	check := func(where, expr string) {
		used := metricName.FindAllString(expr, -1)
		if len(used) == 0 {
			t.Errorf("%s: %s names no metric: %s", dashboardFile, where, expr)
		}
		for _, n := range used {
			if !names[n] {
				t.Errorf("%s: %s uses %s, which ordersync does not export", dashboardFile, where, n)
			}
		}
	}
	seen := map[string]bool{}
	for _, p := range dash.Panels {
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("%s: panel %q queries nothing", dashboardFile, p.Title)
		}
		for _, tg := range p.Targets {
			check("panel "+p.Title, tg.Expr)
			for _, n := range metricName.FindAllString(tg.Expr, -1) {
				seen[n] = true
			}
		}
	}
	for _, v := range dash.Templating.List {
		if v.Definition != "" {
			check("variable "+v.Name, v.Definition)
		}
	}
	// The dashboard shows every metric of ordersync's own.
	for n := range names {
		base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(n, "_bucket"), "_sum"), "_count")
		if !strings.HasPrefix(n, "ordersync_") || seen[n] || seen[base+"_bucket"] || seen[base+"_count"] ||
			n == "ordersync_metrics_refresh_timestamp_seconds" || n == "ordersync_metrics_refresh_errors_total" ||
			n == "ordersync_connector_last_poll_timestamp_seconds" {
			continue
		}
		t.Errorf("%s does not show %s", dashboardFile, n)
	}
}

type fakeCounter []journal.Count

func (f fakeCounter) Counts(context.Context) ([]journal.Count, error) { return f, nil }

// fakeOutbox answers Status; the rest of outbox.Store is never called by the
// refresher (nil: it would panic).
type fakeOutbox struct {
	outbox.Store
	st []outbox.DestinationStatus
}

func (f fakeOutbox) Status(context.Context, int) ([]outbox.DestinationStatus, error) {
	return f.st, nil
}

type fakeCursors struct {
	connectors.CursorStore
	cs []connectors.Cursor
}

func (f fakeCursors) Cursors(context.Context) ([]connectors.Cursor, error) { return f.cs, nil }
